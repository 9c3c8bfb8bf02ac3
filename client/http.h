/* http: the dashboard's HTTP/1.1 transport.  Bytes in, parsed requests out
 * to a callback, its responses back out; it knows nothing of what a path
 * means (client/dashboard.c does).
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
 * (or a header name that is not a token), 505 for a version other than
 * 1.x, 414 for a request line over BF_HTTP_MAX_HEAD, 431 for headers over
 * it or more than BF_HTTP_MAX_HEADERS of them, 413 for a body over
 * BF_HTTP_MAX_BODY, each with a JSON error and the connection closed after
 * it (reading and dropping what the peer still sends for
 * BF_HTTP_LINGER_MS, so it sees the answer rather than a reset); a request
 * not complete within BF_HTTP_REQUEST_MS of its first byte gets 408; a
 * connection idle for BF_HTTP_IDLE_MS is closed; one beyond
 * BF_HTTP_MAX_CONNS gets 503; a peer that stops reading has its reads
 * paused while BF_HTTP_MAX_QUEUED bytes wait for it. */
#ifndef BF_HTTP_H
#define BF_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <http_parser.h>
#include <uv.h>

#include "bf_error.h"

#define BF_HTTP_MAX_HEAD ((size_t)16 << 10)  /* request line + headers */
#define BF_HTTP_MAX_HEADERS 64
#define BF_HTTP_MAX_BODY ((size_t)64 << 10)  /* read and ignored */
#define BF_HTTP_MAX_CONNS 256
#define BF_HTTP_REQUEST_MS 10000
#define BF_HTTP_IDLE_MS 60000
#define BF_HTTP_MAX_QUEUED ((size_t)8 << 20)
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
    const struct sockaddr *peer; /* the connection's peer; NULL: unknown */
} bf_http_request;

/* The value of header `name` (any case), or NULL. */
const char *bf_http_header(const bf_http_request *r, const char *name);

/* The percent-decoded value of query parameter `name` in out (cap bytes,
 * NUL-terminated): 1 when present, 0 when absent, -1 when present but too
 * long for out or badly escaped (a bad %XX, an encoded NUL). */
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

/* Receives the serialised responses; takes bytes over (frees them). */
typedef void (*bf_http_send)(void *io, char *bytes, size_t len);

typedef struct bf_http_session {
    http_parser parser;
    bf_http_handler handler;
    void *ctx;
    bf_http_send send;
    void *io;
    const struct sockaddr *peer;
    size_t body;                 /* body bytes seen */
    int error;                   /* status of a limit broken, or 0 */
    int in_request;              /* between a request's first byte and end */
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
 * returns.  Returns 0 while the connection stays open, 1 once it must
 * close after what was sent (an error was answered, the peer asked to
 * close, or it asked to switch protocols).  No more bytes may be fed then. */
int bf_http_session_feed(bf_http_session *s, const char *data, size_t len);

/* Whether a request has started but not ended. */
int bf_http_session_busy(const bf_http_session *s);

/* ---- the server ----------------------------------------------------------- */

typedef struct bf_http_conn bf_http_conn;

typedef struct bf_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t timer;            /* closes connections past their deadline */
    bf_http_handler handler;
    void *ctx;
    bf_http_conn *conns;
    int n_conns;
    int port;                    /* the bound port */
} bf_http_server;

/* Listens on HOST:PORT (numeric IPv4 or IPv6; port 0: any free one, then
 * s->port says which) and answers every request with handler.  0, or -1
 * with err saying why (nothing is left open once the loop has run). */
int bf_http_listen(bf_http_server *s, uv_loop_t *loop, const char *host_port,
                   bf_http_handler handler, void *ctx, bf_error *err);

/* Stops listening and closes every connection; the loop then ends. */
void bf_http_close(bf_http_server *s);

#endif
