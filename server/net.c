/* net: libuv TCP for the daemon.  Turns socket bytes into frames for the
 * callbacks of net.h and messages into writes. */
#include "net.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"

/* A client that stops reading while we keep writing to it is cut off here
 * rather than growing the daemon without bound. */
#define BF_MAX_WRITE_QUEUE ((size_t)64 << 20)

typedef struct write_req {
    uv_write_t req;
    char *frame;
} write_req;

static void on_closed(uv_handle_t *h)
{
    bf_conn *c = (bf_conn *)h;
    bf_frame_reader_free(&c->rd);
    free(c);
}

/* Closes now; pending writes are dropped. */
static void close_now(bf_conn *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    c->closing = 1;
    bf_net *n = c->net;
    if (c->prev)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    n->cb.on_close(c);
    bf_log_info("conn %llu %s closed", (unsigned long long)c->serial,
                c->peer);
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_written(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    free(w->frame);
    free(w);
    if (status < 0 && status != UV_ECANCELED)
        bf_log_debug("write failed: %s", uv_strerror(status));
}

void bf_conn_send(bf_conn *c, json_t *msg)
{
    if (c->closing || !msg) {
        json_decref(msg);
        return;
    }
    size_t len;
    char *frame = bf_wire_encode(msg, &len);
    json_decref(msg);
    if (!frame)
        return;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp)
        > BF_MAX_WRITE_QUEUE) {
        bf_log_warn("conn %llu %s: not reading its replies, closing",
                    (unsigned long long)c->serial, c->peer);
        free(frame);
        close_now(c);
        return;
    }
    write_req *w = bf_xmalloc(sizeof *w);
    w->frame = frame;
    uv_buf_t buf = uv_buf_init(frame, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_written);
    if (rc < 0) {
        free(frame);
        free(w);
        close_now(c);
    }
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    bf_conn *c = req->data;
    free(req);
    close_now(c);
}

/* Closes after the queued writes went out; bytes still arriving meanwhile
 * are read and dropped so the peer sees our last message, not a reset. */
static void close_after_writes(bf_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    uv_shutdown_t *req = bf_xmalloc(sizeof *req);
    req->data = c;
    if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
        free(req);
        c->closing = 0;
        close_now(c);
    }
}

void bf_conn_fail(bf_conn *c, json_t *msg)
{
    bf_conn_send(c, msg);
    close_after_writes(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    /* One loop thread, and every read is consumed before the next: one
     * buffer serves all connections. */
    static char chunk[256 * 1024];
    *buf = uv_buf_init(chunk, sizeof chunk);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    bf_conn *c = (bf_conn *)s;
    if (n < 0) {
        if (n != UV_EOF)
            bf_log_info("conn %llu %s: read error: %s",
                        (unsigned long long)c->serial, c->peer,
                        uv_strerror((int)n));
        close_now(c);
        return;
    }
    if (n == 0 || c->closing)
        return;
    if (bf_frame_reader_feed(&c->rd, buf->base, (size_t)n)) {
        bf_conn_fail(c, bf_wire_error("internal", NULL, NULL, "out of memory"));
        return;
    }
    const char *line;
    size_t len;
    int got;
    while (!c->closing && (got = bf_frame_reader_next(&c->rd, &line, &len)))
    {
        if (got < 0) {
            bf_log_warn("conn %llu %s: frame over %zu bytes, closing",
                        (unsigned long long)c->serial, c->peer,
                        c->rd.max_frame);
            bf_conn_fail(c, bf_wire_error("too_large", NULL, NULL,
                "frame exceeds the limit of %zu bytes", c->rd.max_frame));
            return;
        }
        c->net->cb.on_frame(c, line, len);
    }
}

static void describe_peer(bf_conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[48] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof ip);
            port = ntohs(a->sin6_port);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof ip);
            port = ntohs(a->sin_port);
        }
    }
    snprintf(c->peer, sizeof c->peer, "%s:%d", ip, port);
}

static void on_connection(uv_stream_t *server, int status)
{
    bf_net *n = server->data;
    if (status < 0) {
        bf_log_warn("accept: %s", uv_strerror(status));
        return;
    }
    bf_conn *c = bf_xcalloc(1, sizeof *c);
    c->net = n;
    c->serial = ++n->next_serial;
    bf_frame_reader_init(&c->rd, BF_WIRE_HELLO_MAX_FRAME);
    uv_tcp_init(n->loop, &c->tcp);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    describe_peer(c);
    c->next = n->conns;
    if (n->conns)
        n->conns->prev = c;
    n->conns = c;
    bf_log_info("conn %llu %s connected", (unsigned long long)c->serial,
                c->peer);
    n->cb.on_connect(c);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int bf_net_listen(bf_net *n, uv_loop_t *loop, const char *host_port,
                  const bf_net_callbacks *cb, void *data, bf_error *err)
{
    memset(n, 0, sizeof *n);
    n->loop = loop;
    n->cb = *cb;
    n->data = data;
    struct sockaddr_storage addr;
    if (bf_wire_parse_listen(host_port, &addr, err))
        return -1;
    uv_tcp_init(loop, &n->listener);
    n->listener.data = n;
    int rc = uv_tcp_bind(&n->listener, (struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&n->listener, 511, on_connection);
    if (rc < 0) {
        uv_close((uv_handle_t *)&n->listener, NULL);
        return bf_error_set(err, NULL, 0, "listen", "cannot listen on %s: %s",
                            host_port, uv_strerror(rc));
    }
    struct sockaddr_storage bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&n->listener, (struct sockaddr *)&bound, &len);
    n->port = bf_wire_addr_port(&bound);
    return 0;
}

void bf_net_shutdown(bf_net *n)
{
    if (!uv_is_closing((uv_handle_t *)&n->listener))
        uv_close((uv_handle_t *)&n->listener, NULL);
    for (bf_conn *c = n->conns, *next; c; c = next) {
        next = c->next;
        uv_read_stop((uv_stream_t *)&c->tcp);
        close_after_writes(c);
    }
}

void bf_net_close_all(bf_net *n)
{
    while (n->conns)
        close_now(n->conns);
}
