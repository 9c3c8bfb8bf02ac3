/* net: the daemon's transport.  libuv TCP: listening, one bf_conn per peer,
 * newline-delimited framing (common/wire.h) and queued writes.  It knows
 * nothing of what a message means: as libuv hands bytes to a read callback,
 * it hands each complete frame, and each connection's start and end, to the
 * callbacks given to bf_net_listen.  Everything runs on the one loop
 * thread.
 *
 * Strangers.  A connection is a stranger until the protocol admits it
 * (bf_conn_admit, after a good hello).  A stranger gets small buffers
 * (reads of at most its frame limit, BF_WIRE_HELLO_MAX_FRAME), must be
 * admitted within limits.hello_timeout_ms, and counts against two caps:
 * limits.max_strangers over all addresses and max_strangers_per_addr per
 * source address (peers.h).  A full cap never turns the newcomer away (it
 * may hold the right token, and share its address with whoever filled the
 * cap): the oldest stranger of the cap makes room instead, after what it
 * sent has been read (a hello waiting there is served), with one error
 * line (`overloaded`).  A stranger the daemon refuses (bf_conn_fail before
 * admission, or the hello timeout) is a failed hello of its address;
 * enough of them and the address's further failed hellos are answered
 * late (a tarpit): the connection stays a stranger, drops whatever it
 * is sent, and hears its answer once the delay is over.  A good hello is
 * never delayed.
 *
 * Logs.  Each connection has a log budget (bf_conn_log_ok): a peer cannot
 * turn its bad input into unbounded log output.  A stranger's lines
 * (connected, refused, closed) are charged to its address's budget
 * instead, so that opening connection after connection buys no more log
 * output than one connection gets.  An address's delay is
 * logged when it grows; strangers closed to make room, and connections
 * accept could not take, at most once a second. */
#ifndef BF_NET_H
#define BF_NET_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <uv.h>

#include "bf_error.h"
#include "peers.h"
#include "stream_conn.h"
#include "wire.h"

typedef struct bf_net bf_net;
typedef struct bf_conn bf_conn;

typedef struct bf_net_callbacks {
    /* c was accepted; set c->data up here. */
    void (*on_connect)(bf_conn *c);
    /* One complete frame, without its '\n'; valid only during the call. */
    void (*on_frame)(bf_conn *c, const char *frame, size_t len);
    /* c is closing: already off the connection list, and no frame follows;
     * free c->data here.  c itself stays valid until the callback returns. */
    void (*on_close)(bf_conn *c);
} bf_net_callbacks;

/* What a stranger may do; bifocald's options set them. */
typedef struct bf_net_limits {
    int hello_timeout_ms;        /* a stranger is closed after this */
    int max_strangers;           /* strangers at once, over all addresses */
    int max_strangers_per_addr;  /* strangers at once from one address */
    int hello_failures;          /* failed hellos of an address answered at
                                    once; later ones wait; 0: none waits */
} bf_net_limits;

#define BF_NET_LIMITS_DEFAULT                                               \
    ((bf_net_limits){ .hello_timeout_ms = 10000, .max_strangers = 512,      \
                      .max_strangers_per_addr = 64, .hello_failures = 10 })

/* A connection's log budget: a burst of BF_CONN_LOG_BURST lines, then
 * BF_CONN_LOG_PER_S lines a second; lines over it are counted, and the
 * count logged once the budget allows again (or when it closes). */
#define BF_CONN_LOG_BURST 50
#define BF_CONN_LOG_PER_S 10

struct bf_conn {
    /* private */
    bf_stream_conn s;      /* first: handles cast back to bf_conn; the
                              socket, its deadline, linger and standing as
                              a reader (stream_conn.h) */
    /* public */
    void *data;            /* the user's state for this connection */
    /* read-only */
    bf_net *net;
    uint64_t serial;       /* for log lines */
    char peer[64];         /* "IP:PORT" */
    char addr[48];         /* the source address as peers.h keys it */
    /* Frames over rd.max_frame close the connection.  It starts at
     * BF_WIRE_HELLO_MAX_FRAME; bf_conn_admit raises it. */
    bf_frame_reader rd;
    int stranger;          /* not admitted yet */
    int closing;           /* no more frames in or messages out: ending,
                              closed, or in the tarpit */
    int paused;            /* frames are held back (bf_conn_pause) */
    /* private */
    bf_peer *stranger_of;  /* its address while a stranger (NULL: admitted,
                              or its address is untracked) */
    /* Its links in the strangers' queues, [0] all of them and [1] its
     * address's (STRANGERS_ALL, STRANGERS_OF_ADDR in net.c). */
    bf_conn *older[2], *newer[2];
    json_t *held_answer;   /* a failed hello's answer, owned; sent at */
    int64_t answer_at_ms;  /* this monotonic time (a tarpit; 0: none) */
    bf_log_budget log;     /* its own, once admitted (peers.h) */
};

struct bf_net {
    /* public */
    void *data;            /* the user's */
    /* read-only */
    int port;              /* the bound port */
    /* private */
    uv_loop_t *loop;
    uv_tcp_t listener;
    bf_net_callbacks cb;
    bf_net_limits limits;
    bf_peers peers;
    /* Every open connection (bf_net_each), and the timer that ends
     * lingers, cuts slow readers and times hellos out. */
    bf_stream_set conns;
    bf_conn_queue strangers;    /* every stranger, oldest first */
    int64_t turned_away_logged_ms;  /* the last log line about one */
    long turned_away_unlogged;
    uint64_t next_serial;
};

/* Listens on HOST:PORT (numeric; port 0 = any free one, then n->port says
 * which) and serves every connection through cb under limits.  On error
 * nothing is left open once the loop has run. */
int bf_net_listen(bf_net *n, uv_loop_t *loop, const char *host_port,
                  const bf_net_limits *limits, const bf_net_callbacks *cb,
                  void *data, bf_error *err);
/* Sends msg (the reference is stolen) unless the connection is closing. */
void bf_conn_send(bf_conn *c, json_t *msg);
/* Sends an encoded frame (taken over; ends with '\n') unless the
 * connection is closing. */
void bf_conn_send_frame(bf_conn *c, char *frame, size_t len);
/* Sends msg (stolen; may be NULL), then closes once it is written.  For a
 * stranger this is a failed hello of its address, and the answer may wait
 * (a tarpit); either way nothing more is read from c. */
void bf_conn_fail(bf_conn *c, json_t *msg);
/* The stranger said a good hello: it leaves the strangers' caps and
 * timeout, and may send frames of up to max_frame bytes. */
void bf_conn_admit(bf_conn *c, size_t max_frame);
/* Holds c's frames back until bf_conn_resume (a reply being made off the
 * loop must go out before the replies to later requests); bytes arriving
 * meanwhile wait in its frame reader. */
void bf_conn_pause(bf_conn *c);
/* Hands c the frames held back, then reads on. */
void bf_conn_resume(bf_conn *c);
/* Whether c's peer has closed its end (or reset it), found without
 * reading: a paused connection learns of its peer's leaving no other way. */
int bf_conn_peer_gone(bf_conn *c);
/* Whether c's log budget (its address's while a stranger) allows one more
 * line now, taking it; logs how many lines were dropped first when some
 * were. */
int bf_conn_log_ok(bf_conn *c);
/* Stops accepting and closes every connection after its pending writes. */
void bf_net_shutdown(bf_net *n);
/* Closes every connection now (those that would not drain). */
void bf_net_close_all(bf_net *n);

/* Calls fn(c, ctx) for every open connection, in no set order, until one
 * returns non-zero, which it returns (0 once all were called).  fn may
 * close c, not another connection. */
typedef int (*bf_net_visit_fn)(bf_conn *c, void *ctx);
int bf_net_each(bf_net *n, bf_net_visit_fn fn, void *ctx);

#endif
