/* stream_conn: one peer connection and the set of them a listener keeps,
 * the handles the three transports share (server/net.c, dashboard/http.c,
 * worker/link.c).  As libuv's handles embed uv_handle_t first, a
 * transport's connection embeds a bf_stream_conn first, so that a
 * uv_stream_t * from a libuv callback casts back to the conn and to the
 * transport's struct.
 *
 * What the handles do, once for every transport:
 *   - the connection list (newest first) of a set, and its count;
 *   - one timer per set that visits every connection: a lingering one
 *     whose time is up is closed, a held one over its output budget for
 *     too long is cut (the slow-reader policy of stream.h), and one whose
 *     owner's deadline passed is handed back to the owner;
 *   - the ending: a FIN once the queued writes are out, then reading and
 *     dropping what the peer still sends for a while (the linger), so that
 *     it reads our last words rather than a reset, then the close.
 * What a message means, framing, and every rule of who may stay (hello
 * timeouts, HTTP deadlines, strangers' caps) stay in the transports.
 *
 * Fields are marked as uv.h marks them: public (the owner reads and
 * writes), read-only (the owner may read, stream_conn.c writes) and
 * private (stream_conn.c alone).  Everything runs on the loop's thread. */
#ifndef BF_STREAM_CONN_H
#define BF_STREAM_CONN_H

#include <stdint.h>
#include <uv.h>

#include "stream.h"

typedef struct bf_stream_conn bf_stream_conn;
typedef struct bf_stream_set bf_stream_set;

/* libuv has closed c's socket: c is the owner's to free (the struct that
 * embeds it). */
typedef void (*bf_stream_closed_cb)(bf_stream_conn *c);

struct bf_stream_conn {
    /* public */
    uv_tcp_t tcp;             /* first: a handle casts back to the conn */
    int64_t deadline_ms;      /* the owner's (monotonic; 0: none): once it
                                 passes, the set's timer calls on_deadline */
    /* read-only */
    bf_stream_set *set;       /* NULL: in none (no timer visits it) */
    bf_stream_conn *next;     /* the next older in set (bf_stream_set) */
    int ending;               /* bf_stream_conn_end or _close was called:
                                 the owner writes and reads nothing more */
    int held;                 /* over its output budget at the last
                                 bf_stream_conn_judge: the owner stopped
                                 reading it */
    /* private */
    bf_stream_conn *prev;
    bf_stream_closed_cb closed_cb;
    bf_stream_budget budget;
    int linger_ms;            /* after the FIN (0: close at once) */
    int64_t linger_until_ms;  /* set once the FIN is out */
};

typedef struct bf_stream_set_callbacks {
    /* c is closing: it has left the set already; the owner's last look
     * before libuv closes the socket (NULL: nothing to do). */
    void (*on_closing)(bf_stream_conn *c);
    /* libuv closed c: free it. */
    bf_stream_closed_cb on_closed;
    /* c->deadline_ms has passed (now_ms): the owner moves it, clears it,
     * or ends or closes c (NULL: the set closes c). */
    void (*on_deadline)(bf_stream_conn *c, int64_t now_ms);
    /* c is cut for not reading its output (stream.h); say so here (NULL:
     * silently).  The set closes c after the call. */
    void (*on_cut)(bf_stream_conn *c);
    /* After each visit of every connection (NULL: none). */
    void (*on_tick)(bf_stream_set *s, int64_t now_ms);
} bf_stream_set_callbacks;

struct bf_stream_set {
    /* public */
    void *data;               /* the owner's */
    /* read-only */
    bf_stream_conn *newest;   /* the list, walked by next; a visitor may
                                 close the conn it is at, no other */
    int n;                    /* connections in it */
    /* private */
    uv_loop_t *loop;
    uv_timer_t tick;
    bf_stream_set_callbacks cb;
    void (*stopped)(bf_stream_set *s);
};

/* Starts s on loop: empty, its timer visiting every connection each
 * tick_ms (the granularity of every deadline and linger). */
void bf_stream_set_init(bf_stream_set *s, uv_loop_t *loop, int tick_ms,
                        const bf_stream_set_callbacks *cb, void *data);

/* Accepts a pending connection of listener into c (zeroed by the caller)
 * and adds it to s as its newest; TCP_NODELAY on.  0, or -1 when accept
 * failed: c is closed then, and cb.on_closed will free it. */
int bf_stream_set_accept(bf_stream_set *s, uv_stream_t *listener,
                         bf_stream_conn *c);

/* Stops s's timer (its connections stay; close them first or after), and
 * calls stopped(s) once libuv has closed it (may be NULL). */
void bf_stream_set_stop(bf_stream_set *s, void (*stopped)(bf_stream_set *s));

/* Closes every connection of s now (bf_stream_conn_close). */
void bf_stream_set_close_all(bf_stream_set *s);

/* A connection in no set (a client's): c zeroed by the caller;
 * uv_tcp_init'd on loop, TCP_NODELAY on; closed will free it. */
void bf_stream_conn_init(bf_stream_conn *c, uv_loop_t *loop,
                         bf_stream_closed_cb closed);

/* The slow-reader policy (stream.h) for c now, after its queued output
 * changed; c->held follows the verdict.  The owner stops reading on
 * BF_STREAM_HOLD, reads again on BF_STREAM_READ and closes on
 * BF_STREAM_CUT (a held conn is also cut by the set's timer). */
bf_stream_verdict bf_stream_conn_judge(bf_stream_conn *c);

/* Ends c gracefully: what was written goes out, then a FIN; then, for
 * linger_ms, what the peer still sends is read and dropped (its EOF ends
 * it sooner), then c closes.  From this call on the stream reads c (with
 * linger_ms 0 nothing is read: the peer said all, or we are stopping)
 * and the owner writes nothing more.  c->deadline_ms still bounds the
 * wait for the writes.  Called again on an ending c, linger_ms 0 cancels
 * the linger: a lingering c closes now. */
void bf_stream_conn_end(bf_stream_conn *c, int linger_ms);

/* Closes c now (its pending writes are dropped): it leaves its set,
 * on_closing is called, and its closed callback once libuv is done.
 * Closing a closing c does nothing. */
void bf_stream_conn_close(bf_stream_conn *c);

/* A uv_alloc_cb that mallocs each read's buffer (bf_xmalloc: the
 * out-of-memory policy); the read callback frees buf->base. */
void bf_stream_alloc_owned(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

#endif
