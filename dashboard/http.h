/* http: the dashboard's HTTP/1.1 transport.  Bytes in, parsed requests out
 * to a callback, its responses back out; it knows nothing of what a path
 * means (dashboard/dashboard.c does).
 *
 * Two layers, so that the request handling can be fuzzed without sockets
 * (tests/fuzz/fuzz_http.c):
 *   bf_http_session  one connection's requests: Debian's http-parser
 *                    (libhttp-parser-dev) fed whatever bytes arrive, the
 *                    request line and headers kept in a fixed arena, every
 *                    limit below enforced, responses serialised;
 *   bf_http_server   libuv TCP: listening, one session per connection,
 *                    writes, back-pressure, time limits, a connection cap.
 * Everything runs on one loop thread, and a handler answers at once (the
 * dashboard's queries take milliseconds), so pipelined requests are
 * answered in order.
 *
 * What a malformed or hostile peer gets: 400 for bytes that are not HTTP
 * (or a header name that is not a token, or more than one Host header),
 * 505 for a version other than 1.0 or 1.1, 414 for a request line over
 * BF_HTTP_MAX_HEAD, 431 for headers over it or more than
 * BF_HTTP_MAX_HEADERS of them, 413 for a body over BF_HTTP_MAX_BODY, each
 * with a JSON error and the connection closed after it (reading and
 * dropping what the peer still sends for BF_HTTP_LINGER_MS, so it sees the
 * answer rather than a reset); a request not complete within
 * BF_HTTP_REQUEST_MS of its first byte gets 408; a connection idle for
 * BF_HTTP_IDLE_MS is closed.
 *
 * What a peer can cost:
 *   - memory: a peer that stops reading is answered until its output is
 *     over the one budget of stream/stream.h (BF_STREAM_MAX_QUEUED); then
 *     no further request of its is parsed (what it pipelined waits,
 *     unparsed, in the one read buffer it came in) and its reads stop,
 *     until half of that has gone out; over the budget for
 *     BF_STREAM_OVER_BUDGET_MS, it is cut;
 *   - a place: a connection is a stranger's until the handler lets one of
 *     its requests in (bf_http_response.let_in; a handler that refuses one
 *     sets close).  Strangers have their own budget,
 *     BF_HTTP_MAX_STRANGERS_PER_ADDR per address and BF_HTTP_MAX_STRANGERS
 *     in all, within BF_HTTP_MAX_CONNS: a new connection over it closes
 *     the oldest idle stranger (of its own address, else of the address
 *     holding the most; idle: nothing of it waits to be read, so no
 *     request on its way is lost), never itself, so strangers cannot keep
 *     out a peer that would be let in.  At BF_HTTP_MAX_CONNS a newcomer
 *     takes the place of one lingering after its last answer or of a
 *     stranger; only when all are let in is it answered 503. */
#ifndef BF_HTTP_H
#define BF_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <http_parser.h>
#include <uv.h>

#include "bf_error.h"
#include "stream_conn.h"

#define BF_HTTP_MAX_HEAD ((size_t)16 << 10)  /* request line + headers */
#define BF_HTTP_MAX_HEADERS 64
#define BF_HTTP_MAX_BODY ((size_t)64 << 10)  /* read and ignored */
#define BF_HTTP_MAX_CONNS 256
#define BF_HTTP_MAX_STRANGERS 64
#define BF_HTTP_MAX_STRANGERS_PER_ADDR 16
#define BF_HTTP_REQUEST_MS 10000
#define BF_HTTP_IDLE_MS 60000
#define BF_HTTP_LINGER_MS 2000

/* One request; every string is NUL-terminated and valid during the
 * handler's call only. */
typedef struct bf_http_request {
    const char *method;          /* "GET", "HEAD", ... */
    const char *path;            /* the target before '?', not decoded */
    const char *query;           /* the target after '?', "" if none */
    int n_headers;
    const char *header_name[BF_HTTP_MAX_HEADERS];
    const char *header_value[BF_HTTP_MAX_HEADERS];
    const char *body;            /* NUL-terminated; "" if none; NULL when it
                                    did not fit beside the request line and
                                    headers in BF_HTTP_MAX_HEAD */
    size_t body_len;
    const struct sockaddr *peer; /* the connection's peer; NULL: unknown */
} bf_http_request;

/* The value of header `name` (any case), or NULL. */
const char *bf_http_header(const bf_http_request *r, const char *name);

/* The percent-decoded value of query parameter `name` in out (cap bytes,
 * NUL-terminated): 1 when present, 0 when absent (or query NULL), -1 when
 * present but too long for out or badly escaped (a bad %XX, an encoded
 * NUL).  A form's urlencoded body is read the same way. */
int bf_http_query_param(const char *query, const char *name, char *out,
                        size_t cap);

/* What a handler fills in.  It starts as an empty 200 response. */
typedef struct bf_http_response {
    int status;
    const char *content_type;    /* static; NULL: application/json */
    char headers[768];           /* extra lines, each ending "\r\n" */
    char *body;                  /* malloc'd; taken over by the transport */
    const char *static_body;     /* or this, not freed (used if body NULL) */
    size_t body_len;
    int let_in;                  /* the peer may be served (it passed the
                                    access rules): its connection is no
                                    longer a stranger's */
    int close;                   /* close the connection after this answer */
} bf_http_response;

/* Appends one header line ("Name: value", without CRLF).  A line that does
 * not fit, or that holds a CR or LF, is dropped: a header is never split
 * or injected. */
void bf_http_add_header(bf_http_response *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fills res with status and a JSON body {"error": message}. */
void bf_http_error(bf_http_response *res, int status, const char *message);

typedef void (*bf_http_handler)(void *ctx, const bf_http_request *req,
                                bf_http_response *res);

/* ---- one connection's requests (no I/O) ----------------------------------- */

/* Receives the serialised responses; takes bytes over (frees them).
 * Returns 1 when what now waits for the peer is over its budget
 * (stream/stream.h): no further request is parsed until the caller
 * feeds the rest again; else 0. */
typedef int (*bf_http_send)(void *io, char *bytes, size_t len);

typedef struct bf_http_session {
    /* read-only */
    int let_in;                  /* a request was let in on this connection */
    /* private */
    http_parser parser;
    bf_http_handler handler;
    void *ctx;
    bf_http_send send;
    void *io;
    const struct sockaddr *peer;
    size_t body;                 /* body bytes seen */
    size_t body_at;              /* where the body starts in the arena */
    int body_lost;               /* it did not fit in the arena */
    int error;                   /* status of a limit broken, or 0 */
    const char *error_message;   /* static: what that status is for */
    int in_request;              /* between a request's first byte and end */
    int held;                    /* the last answer left the peer over its
                                    budget: parsing stopped after it */
    int closing;
    /* The request being read: the URL, then each header name and value,
     * NUL-terminated, in the arena; offsets into it. */
    size_t used;
    int part;                    /* what the arena's tail is (http.c) */
    size_t url;
    size_t name[BF_HTTP_MAX_HEADERS], value[BF_HTTP_MAX_HEADERS];
    int n_headers;
    char arena[BF_HTTP_MAX_HEAD]; /* last: not cleared by init */
} bf_http_session;

void bf_http_session_init(bf_http_session *s, bf_http_handler handler,
                          void *ctx, bf_http_send send, void *io,
                          const struct sockaddr *peer);

/* Feeds bytes; each complete request is answered through send before this
 * returns, until an answer leaves the peer over its budget: then parsing
 * stops after that request.  *used says how many bytes were taken; the
 * rest (data + *used) is the caller's to feed again once the peer has
 * read.  Returns 0 while the connection stays open, 1 once it must close
 * after what was sent (an error was answered, the handler or the peer
 * asked to close, or it asked to switch protocols).  No more bytes may be
 * fed then. */
int bf_http_session_feed(bf_http_session *s, const char *data, size_t len,
                         size_t *used);

/* ---- the server ----------------------------------------------------------- */

typedef struct bf_http_conn bf_http_conn;

typedef struct bf_http_server {
    /* read-only */
    int port;                    /* the bound port */
    int n_strangers;             /* connections none of whose requests was
                                    let in yet */
    /* private */
    uv_tcp_t listener;
    bf_http_handler handler;
    void *ctx;
    /* Every connection (bf_http_conn, newest first) and the timer that
     * ends them past their deadline, lingers and cuts slow readers. */
    bf_stream_set conns;
} bf_http_server;

/* Listens on HOST:PORT (numeric IPv4 or IPv6; port 0: any free one, then
 * s->port says which) and answers every request with handler.  0, or -1
 * with err saying why (nothing is left open once the loop has run). */
int bf_http_listen(bf_http_server *s, uv_loop_t *loop, const char *host_port,
                   bf_http_handler handler, void *ctx, bf_error *err);

/* Stops listening and closes every connection; the loop then ends. */
void bf_http_close(bf_http_server *s);

#endif
