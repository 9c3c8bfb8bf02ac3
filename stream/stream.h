/* stream: the libuv plumbing the three transports share (server/net.c,
 * dashboard/http.c, worker/link.c): installing the allocator, listening,
 * writes of owned buffers, a graceful shutdown and the one policy for a
 * peer that stops reading.  It moves bytes and knows nothing of what they
 * mean; framing, HTTP and messages stay in the transports.
 *
 * The slow-reader policy.  Output queued for a peer (written, not yet
 * taken by its socket) has one budget, BF_STREAM_MAX_QUEUED.  Over it, the
 * transport stops reading from the peer (nothing more it sends is acted
 * on, so it cannot make more output) and reads again once the queue has
 * drained to half of it.  A peer whose queue stays over the budget for
 * BF_STREAM_OVER_BUDGET_MS is cut: pausing alone would let a peer that
 * never reads hold its memory (and a worker its lease) forever. */
#ifndef BF_STREAM_H
#define BF_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "bf_error.h"

#define BF_STREAM_MAX_QUEUED ((size_t)8 << 20)
#define BF_STREAM_OVER_BUDGET_MS 10000

/* Makes libuv allocate through common/alloc.h (the one out-of-memory
 * policy).  Call before any other libuv call; thread-safe, and only the
 * first call of a process does anything. */
void bf_stream_use_allocator(void);

/* Binds listener (uv_tcp_init'd here on loop, listener->data = data) to
 * HOST:PORT (numeric; port 0: any free one) and listens with backlog.
 * 0 and *port = the bound port, or -1 with err saying why (the listener
 * is closed then: nothing is left open once the loop has run). */
int bf_stream_listen(uv_tcp_t *listener, uv_loop_t *loop,
                     const char *host_port, int backlog,
                     uv_connection_cb on_connection, void *data, int *port,
                     bf_error *err);

/* Called once a write ended (status < 0: it failed, or was cancelled by
 * a close); the bytes are already freed. */
typedef void (*bf_stream_written_cb)(uv_stream_t *s, int status);

/* Writes bytes (malloc'd, taken over: freed once written or on failure)
 * on s, then calls done (may be NULL).  0, or a libuv error when the
 * write could not start (the socket is broken; done is not called). */
int bf_stream_write(uv_stream_t *s, char *bytes, size_t len,
                    bf_stream_written_cb done);

/* Sends a FIN once the queued writes are out, then calls done (may be
 * NULL) with the status.  0, or a libuv error (done is not called). */
typedef void (*bf_stream_shut_cb)(uv_stream_t *s, int status);
int bf_stream_shutdown(uv_stream_t *s, bf_stream_shut_cb done);

/* Bytes written on s but not yet taken by the peer's socket. */
size_t bf_stream_queued(uv_stream_t *s);

/* One peer's standing under the slow-reader policy; zeroed to start. */
typedef struct bf_stream_budget {
    int64_t over_since_ms;   /* when its queue went over (0: it is not) */
} bf_stream_budget;

/* What the transport is to do with the peer, given its queue now. */
typedef enum {
    BF_STREAM_READ,          /* within budget: read on */
    BF_STREAM_HOLD,          /* over: stop reading until it drains */
    BF_STREAM_CUT            /* over for BF_STREAM_OVER_BUDGET_MS: close */
} bf_stream_verdict;

/* The verdict for a peer whose queue holds `queued` bytes at monotonic
 * time now_ms; held says whether its reads are stopped already (a held
 * peer reads again only once its queue is down to half the budget). */
bf_stream_verdict bf_stream_judge(bf_stream_budget *b, size_t queued,
                                  int held, int64_t now_ms);

#endif
