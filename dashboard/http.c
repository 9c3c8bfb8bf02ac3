/* http: requests parsed by http-parser, answered in order, over libuv TCP.
 * See http.h for the limits and what breaking each one gets. */
#include "http.h"

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "stream_conn.h"

#include <ctype.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { PART_NONE, PART_URL, PART_NAME, PART_VALUE };

/* What a 431 says: a header over the arena, or one too many. */
#define HEADERS_TOO_LARGE "request headers too large or too many"

/* RFC 9110's tchar: what a header name may hold. */
#define TOKEN_CHARS "!#$%&'*+-.^_`|~0123456789" \
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/* ---- requests and responses ----------------------------------------------- */

const char *bf_http_header(const bf_http_request *r, const char *name)
{
    for (int i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->header_name[i], name) == 0)
            return r->header_value[i];
    return NULL;
}

static int hex_value(char c)
{
    return isdigit((unsigned char)c) ? c - '0'
           : isxdigit((unsigned char)c) ? (tolower((unsigned char)c) - 'a' + 10)
           : -1;
}

/* Decodes src[0..n) ('+' is a space, %XX a byte) into out; 0, or -1 when
 * it does not fit or holds a bad escape or a NUL. */
static int percent_decode(const char *src, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)src[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = i + 2 < n ? hex_value(src[i + 1]) : -1;
            int lo = i + 2 < n ? hex_value(src[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            c = hi * 16 + lo;
            i += 2;
        }
        if (c == 0 || k + 1 >= cap)
            return -1;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return 0;
}

int bf_http_query_param(const char *query, const char *name, char *out,
                        size_t cap)
{
    size_t name_len = strlen(name);
    for (const char *p = query; p && *p;) {
        size_t len = strcspn(p, "&");
        const char *eq = memchr(p, '=', len);
        size_t key_len = eq ? (size_t)(eq - p) : len;
        if (key_len == name_len && strncmp(p, name, name_len) == 0) {
            const char *v = eq ? eq + 1 : p + len;
            return percent_decode(v, (size_t)(p + len - v), out, cap) == 0
                   ? 1 : -1;
        }
        p += len + (p[len] == '&');
    }
    return 0;
}

void bf_http_add_header(bf_http_response *res, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t used = strlen(res->headers);
    if (n < 0 || (size_t)n >= sizeof line || strpbrk(line, "\r\n")
        || used + (size_t)n + 3 > sizeof res->headers)
        return;
    snprintf(res->headers + used, sizeof res->headers - used, "%s\r\n", line);
}

void bf_http_error(bf_http_response *res, int status, const char *message)
{
    json_t *body = json_pack("{s:s}", "error", message);
    free(res->body);
    res->status = status;
    res->content_type = NULL;
    res->body = json_dumps(body, JSON_COMPACT);
    res->body_len = res->body ? strlen(res->body) : 0;
    json_decref(body);
}

/* ---- one connection's requests -------------------------------------------- */

static void send_response(bf_http_session *s, bf_http_response *res,
                          int head_only)
{
    const char *body = res->body ? res->body : res->static_body;
    size_t body_len = body ? res->body_len : 0;
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    const char *reason = http_status_str((enum http_status)res->status);
    fprintf(f, "HTTP/1.1 %d %s\r\n"
               "Content-Type: %s\r\n"
               "Content-Length: %zu\r\n"
               "Cache-Control: no-store\r\n"
               "X-Content-Type-Options: nosniff\r\n"
               "%s%s\r\n", res->status, reason,
            res->content_type ? res->content_type
                              : "application/json; charset=utf-8",
            body_len, res->headers, s->closing ? "Connection: close\r\n" : "");
    if (!head_only && body_len)
        fwrite(body, 1, body_len, f);
    fclose(f);
    free(res->body);
    res->body = NULL;
    if (s->send(s->io, out, size))
        s->held = 1;
}

/* Answers a broken limit or malformed bytes, then the connection closes. */
static void send_error(bf_http_session *s, int status, const char *message)
{
    bf_http_response res = { 0 };
    bf_http_error(&res, status, message);
    s->closing = 1;
    send_response(s, &res, 0);
}

/* Stops the parser with a limit's status and what it is for (static);
 * the caller returns non-zero. */
static int refuse(bf_http_session *s, int status, const char *message)
{
    if (!s->error) {
        s->error = status;
        s->error_message = message;
    }
    return -1;
}

/* Ends the piece at the arena's tail (with its NUL, room for which every
 * append keeps). */
static void end_part(bf_http_session *s)
{
    if (s->part != PART_NONE)
        s->arena[s->used++] = '\0';
}

static int append(http_parser *p, int part, const char *at, size_t len)
{
    bf_http_session *s = p->data;
    if (s->part != part) {
        end_part(s);
        if (part == PART_URL) {
            s->url = s->used;
        } else if (part == PART_NAME) {
            if (s->n_headers == BF_HTTP_MAX_HEADERS)
                return refuse(s, 431, HEADERS_TOO_LARGE);
            s->name[s->n_headers] = s->used;
        } else {
            s->value[s->n_headers++] = s->used;
        }
        s->part = part;
    }
    /* one byte stays free for this piece's NUL */
    if (s->used + len + 1 > sizeof s->arena)
        return part == PART_URL
               ? refuse(s, 414, "request line too long")
               : refuse(s, 431, HEADERS_TOO_LARGE);
    memcpy(s->arena + s->used, at, len);
    s->used += len;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    return append(p, PART_URL, at, len);
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    return append(p, PART_NAME, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    return append(p, PART_VALUE, at, len);
}

static int on_message_begin(http_parser *p)
{
    bf_http_session *s = p->data;
    s->used = 0;
    s->part = PART_NONE;
    s->n_headers = 0;
    s->body = 0;
    s->in_request = 1;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    bf_http_session *s = p->data;
    /* A last header without a value: give it an empty one. */
    if (s->part == PART_NAME && append(p, PART_VALUE, "", 0))
        return -1;
    if (s->part == PART_NONE && append(p, PART_URL, "", 0))
        return -1;
    end_part(s);
    s->part = PART_NONE;
    s->body_at = s->used;
    s->body_lost = s->used >= sizeof s->arena;
    if (!s->body_lost)
        s->arena[s->used] = '\0';   /* the body, empty so far */
    if (p->http_major != 1 || p->http_minor > 1)
        return refuse(s, 505, "HTTP version not supported (1.0 and 1.1 are)");
    /* Debian's http-parser is built lenient (a space passes in a header
     * name); RFC 9110 allows token characters only. */
    int hosts = 0;
    for (int i = 0; i < s->n_headers; i++) {
        const char *name = s->arena + s->name[i];
        if (!*name || strspn(name, TOKEN_CHARS) != strlen(name))
            return refuse(s, 400, "malformed request: invalid header name");
        hosts += strcasecmp(name, "Host") == 0;
    }
    /* Two Hosts: which one the access rules read and which one a proxy in
     * front read could differ (RFC 9112 3.2: 400). */
    if (hosts > 1)
        return refuse(s, 400, "malformed request: more than one Host header");
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > BF_HTTP_MAX_BODY)
        return refuse(s, 413, "request body too large");
    return 0;
}

/* Keeps what of the body fits in the arena after the head (a sign-in
 * form does); a larger one, up to BF_HTTP_MAX_BODY, is read and dropped. */
static int on_body(http_parser *p, const char *at, size_t len)
{
    bf_http_session *s = p->data;
    s->body += len;
    if (s->body > BF_HTTP_MAX_BODY)
        return refuse(s, 413, "request body too large");
    if (s->body_lost || s->used + len + 1 > sizeof s->arena) {
        s->body_lost = 1;
        return 0;
    }
    memcpy(s->arena + s->used, at, len);
    s->used += len;
    s->arena[s->used] = '\0';
    return 0;
}

static int on_message_complete(http_parser *p)
{
    bf_http_session *s = p->data;
    bf_http_request req = {
        .method = http_method_str((enum http_method)p->method),
        .path = s->arena + s->url,
        .n_headers = s->n_headers,
        .body = s->body_lost ? NULL : s->arena + s->body_at,
        .body_len = s->body_lost ? 0 : s->used - s->body_at,
        .peer = s->peer,
    };
    char *q = strchr(s->arena + s->url, '?');
    if (q)
        *q = '\0';
    req.query = q ? q + 1 : "";
    for (int i = 0; i < s->n_headers; i++) {
        req.header_name[i] = s->arena + s->name[i];
        req.header_value[i] = s->arena + s->value[i];
    }
    s->in_request = 0;
    /* After an Upgrade request the bytes that follow are not HTTP. */
    if (!http_should_keep_alive(p) || p->upgrade)
        s->closing = 1;
    bf_http_response res = { .status = 200 };
    s->handler(s->ctx, &req, &res);
    s->let_in |= res.let_in;
    if (res.close)
        s->closing = 1;
    send_response(s, &res, p->method == HTTP_HEAD);
    /* Nothing more is parsed: the connection closes, or the peer must
     * read first. */
    if (s->closing || s->held)
        http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void bf_http_session_init(bf_http_session *s, bf_http_handler handler,
                          void *ctx, bf_http_send send, void *io,
                          const struct sockaddr *peer)
{
    /* The arena, last, needs no clearing. */
    memset(s, 0, offsetof(bf_http_session, arena));
    http_parser_init(&s->parser, HTTP_REQUEST);
    s->parser.data = s;
    s->handler = handler;
    s->ctx = ctx;
    s->send = send;
    s->io = io;
    s->peer = peer;
}

int bf_http_session_feed(bf_http_session *s, const char *data, size_t len,
                         size_t *used)
{
    *used = len;
    if (s->closing)
        return 1;
    s->held = 0;
    *used = http_parser_execute(&s->parser, &settings, data, len);
    if (s->closing)
        return 1;
    enum http_errno e = HTTP_PARSER_ERRNO(&s->parser);
    if (s->error) {
        send_error(s, s->error, s->error_message);
    } else if (e == HPE_PAUSED && s->held) {
        http_parser_pause(&s->parser, 0);   /* parsed again when fed again */
    } else if (e != HPE_OK) {
        char message[160];
        snprintf(message, sizeof message, "malformed request: %s",
                 http_errno_description(e));
        send_error(s, 400, message);
    }
    return s->closing;
}


/* ---- the server ----------------------------------------------------------- */

struct bf_http_conn {
    bf_stream_conn s;            /* first: handles cast back to it; the
                                    socket, its deadline (request, idle,
                                    or the wait for its last answers to
                                    go out), linger and standing as a
                                    reader (stream_conn.h) */
    struct sockaddr_storage peer;
    int reading;                 /* uv_read_start is in effect */
    int stranger;                /* none of its requests let in yet (counted
                                    in server->n_strangers) */
    /* Bytes read but not parsed yet, held while the peer is over its
     * budget: in[in_at, in_len).  Owned; NULL when none. */
    char *in;
    size_t in_at, in_len;
    bf_http_session session;
};

/* The connections, newest first. */
static bf_http_conn *newest_conn(bf_http_server *s)
{
    return (bf_http_conn *)s->conns.newest;
}

static bf_http_conn *older_conn(bf_http_conn *c)
{
    return (bf_http_conn *)c->s.next;
}

static void on_closed(bf_stream_conn *sc)
{
    bf_http_conn *c = (bf_http_conn *)sc;
    free(c->in);
    free(c);
}

static void on_closing(bf_stream_conn *sc)
{
    bf_http_conn *c = (bf_http_conn *)sc;
    bf_http_server *s = sc->set->data;
    s->n_strangers -= c->stranger;
}

static void close_conn(bf_http_conn *c)
{
    bf_stream_conn_close(&c->s);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void on_written(uv_stream_t *stream, int status);
static void close_after_writes(bf_http_conn *c, int linger_ms);

/* Whether a request has started but not ended. */
static int session_busy(const bf_http_session *s)
{
    return s->in_request;
}

static void start_reading(bf_http_conn *c)
{
    if (!c->reading && !c->s.ending) {
        c->reading = 1;
        uv_read_start((uv_stream_t *)&c->s.tcp, bf_stream_alloc_owned,
                      on_read);
    }
}

static void stop_reading(bf_http_conn *c)
{
    if (c->reading) {
        c->reading = 0;
        uv_read_stop((uv_stream_t *)&c->s.tcp);
    }
}

/* Says that c is cut: its answers stayed over the budget too long
 * (stream.h); the caller closes it. */
static void say_cut(bf_stream_conn *sc)
{
    (void)sc;
    bf_log_debug("dashboard: a peer that does not read its answers is cut");
}

/* A bf_http_send: 1 once the peer is over its budget. */
static int send_bytes(void *io, char *bytes, size_t len)
{
    bf_http_conn *c = io;
    if (c->s.ending) {
        free(bytes);
        return 1;
    }
    if (bf_stream_write((uv_stream_t *)&c->s.tcp, bytes, len, on_written) < 0) {
        close_conn(c);              /* the socket is broken */
        return 1;
    }
    return bf_stream_conn_judge(&c->s) != BF_STREAM_READ;
}

/* Parses what was read and not parsed yet, answering each request, until
 * the peer is over its budget: then the rest is held, and reads stop,
 * until it has read (on_written); else reads go on. */
static void parse_input(bf_http_conn *c)
{
    int was_busy = session_busy(&c->session);
    size_t used;
    int done = bf_http_session_feed(&c->session, c->in + c->in_at,
                                    c->in_len - c->in_at, &used);
    c->in_at += used;
    if (c->in_at == c->in_len) {
        free(c->in);
        c->in = NULL;
    }
    if (c->s.ending)
        return;
    if (c->stranger && c->session.let_in) {
        c->stranger = 0;
        ((bf_http_server *)c->s.set->data)->n_strangers--;
    }
    int64_t now = bf_monotonic_ms();
    if (!session_busy(&c->session))
        c->s.deadline_ms = now + BF_HTTP_IDLE_MS;
    else if (!was_busy)
        c->s.deadline_ms = now + BF_HTTP_REQUEST_MS;
    bf_stream_verdict v = done ? BF_STREAM_READ : bf_stream_conn_judge(&c->s);
    if (done) {
        close_after_writes(c, BF_HTTP_LINGER_MS);
    } else if (v == BF_STREAM_CUT) {
        say_cut(&c->s);
        close_conn(c);
    } else if (c->in || v == BF_STREAM_HOLD)
        stop_reading(c);
    else
        start_reading(c);
}

static void on_written(uv_stream_t *stream, int status)
{
    bf_http_conn *c = (bf_http_conn *)stream;
    if (status < 0) {
        close_conn(c);
    } else if (c->s.held && !c->s.ending
               && bf_stream_conn_judge(&c->s) == BF_STREAM_READ) {
        /* The peer has read: on with what it pipelined, then reads. */
        if (c->in)
            parse_input(c);
        else
            start_reading(c);
    }
}

/* Ends the connection gracefully (stream_conn.h): once what was sent is
 * written (the peer has BF_HTTP_IDLE_MS to read it), a FIN; what the peer
 * still sends is read and dropped meanwhile and for up to linger_ms after
 * that, so that it reads the answer (an error, say) instead of a reset
 * for the bytes it sent after it. */
static void close_after_writes(bf_http_conn *c, int linger_ms)
{
    if (!c->s.ending) {
        c->s.deadline_ms = bf_monotonic_ms() + BF_HTTP_IDLE_MS;
        free(c->in);                /* what it pipelined is not answered */
        c->in = NULL;
        c->reading = 0;             /* the stream reads it from now on */
    }
    bf_stream_conn_end(&c->s, linger_ms);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    bf_http_conn *c = (bf_http_conn *)stream;
    if (nread == UV_EOF) {
        /* It has said all; what it has not read yet goes out first. */
        close_after_writes(c, 0);
    } else if (nread < 0) {
        close_conn(c);              /* the peer is gone */
    } else if (nread > 0) {
        c->in = buf->base;          /* taken: freed once parsed */
        c->in_at = 0;
        c->in_len = (size_t)nread;
        parse_input(c);
        return;
    }
    free(buf->base);
}

/* c's deadline passed: one ending closes at once (its peer did not read
 * its last answers in time), one idle ends gracefully, one mid-request
 * after a 408. */
static void on_deadline(bf_stream_conn *sc, int64_t now_ms)
{
    (void)now_ms;
    bf_http_conn *c = (bf_http_conn *)sc;
    if (sc->ending) {
        close_conn(c);
        return;
    }
    if (session_busy(&c->session))
        send_error(&c->session, 408, "request not complete in time");
    close_after_writes(c, BF_HTTP_LINGER_MS);
}

/* ---- who gets a place ------------------------------------------------------ */

static int same_address(const struct sockaddr_storage *a,
                        const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr,
                      sizeof(struct in_addr)) == 0;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return 0;
}

/* Whether c is a stranger that has nothing on its way: no bytes the
 * server has yet to read or parse.  Evicting such a one loses no request;
 * one whose request waits is read in this loop pass, and let in or
 * refused (which closes it). */
static int idle_stranger(bf_http_conn *c)
{
    uv_os_fd_t fd;
    char byte;
    return c->stranger && !c->in
           && uv_fileno((uv_handle_t *)&c->s.tcp, &fd) == 0
           && recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

static int strangers_of(bf_http_server *s, const struct sockaddr_storage *addr)
{
    int n = 0;
    for (bf_http_conn *c = newest_conn(s); c; c = older_conn(c))
        n += c->stranger && same_address(&c->peer, addr);
    return n;
}

/* The address that holds the most strangers (there is one: called when
 * they are at their cap). */
static const struct sockaddr_storage *busiest_address(bf_http_server *s)
{
    const struct sockaddr_storage *busiest = NULL;
    int most = 0;
    for (bf_http_conn *c = newest_conn(s); c; c = older_conn(c)) {
        int n = c->stranger ? strangers_of(s, &c->peer) : 0;
        if (n > most) {
            most = n;
            busiest = &c->peer;
        }
    }
    return busiest;
}

/* The oldest idle stranger of addr's address (any address: NULL), or
 * NULL if none. */
static bf_http_conn *oldest_idle_stranger(bf_http_server *s,
                                          const struct sockaddr_storage *addr)
{
    bf_http_conn *oldest = NULL;
    for (bf_http_conn *c = newest_conn(s); c; c = older_conn(c))
        if ((!addr || same_address(&c->peer, addr)) && idle_stranger(c))
            oldest = c;
    return oldest;
}

/* At the cap: the oldest connection lingering after its last answer or
 * of an idle stranger, else the oldest stranger's; NULL if every place is
 * held by a connection that was let in. */
static bf_http_conn *oldest_replaceable(bf_http_server *s)
{
    bf_http_conn *oldest = NULL, *oldest_stranger = NULL;
    for (bf_http_conn *c = newest_conn(s); c; c = older_conn(c)) {
        if (c->s.ending || idle_stranger(c))
            oldest = c;
        if (c->stranger)
            oldest_stranger = c;
    }
    return oldest ? oldest : oldest_stranger;
}

static void evict(bf_http_conn *c, const char *why)
{
    bf_log_debug("dashboard: a connection closed for a newcomer: %s", why);
    close_conn(c);
}

/* Makes a place for a new connection from addr, itself a stranger's (in
 * s->conns already, not yet counted a stranger): it takes an idle
 * stranger's place rather than be refused, so that strangers never keep
 * out one who would be let in.  0, or -1 when all BF_HTTP_MAX_CONNS places
 * are held by connections that were let in. */
static int make_place(bf_http_server *s, const struct sockaddr_storage *addr)
{
    bf_http_conn *victim = NULL;
    if (strangers_of(s, addr) >= BF_HTTP_MAX_STRANGERS_PER_ADDR)
        victim = oldest_idle_stranger(s, addr);
    else if (s->n_strangers >= BF_HTTP_MAX_STRANGERS)
        victim = oldest_idle_stranger(s, busiest_address(s));
    if (victim)
        evict(victim, "strangers are at their cap");
    if (s->conns.n <= BF_HTTP_MAX_CONNS)
        return 0;
    victim = oldest_replaceable(s);
    if (!victim)
        return -1;
    evict(victim, "connections are at their cap");
    return 0;
}

static void on_connection(uv_stream_t *listener, int status)
{
    bf_http_server *s = listener->data;
    if (status < 0) {
        bf_log_warn("dashboard: accept: %s", uv_strerror(status));
        return;
    }
    bf_http_conn *c = bf_xcalloc(1, sizeof *c);
    if (bf_stream_set_accept(&s->conns, listener, &c->s) < 0)
        return;
    int len = sizeof c->peer;
    uv_tcp_getpeername(&c->s.tcp, (struct sockaddr *)&c->peer, &len);
    int full = make_place(s, &c->peer);
    bf_http_session_init(&c->session, s->handler, s->ctx, send_bytes, c,
                         (const struct sockaddr *)&c->peer);
    c->stranger = 1;
    s->n_strangers++;
    c->s.deadline_ms = bf_monotonic_ms() + BF_HTTP_REQUEST_MS;
    start_reading(c);
    if (full) {
        bf_log_warn("dashboard: %d connections, all let in: a new one is "
                    "answered 503", BF_HTTP_MAX_CONNS);
        send_error(&c->session, 503, "too many connections");
        close_after_writes(c, BF_HTTP_LINGER_MS);
    }
}

int bf_http_listen(bf_http_server *s, uv_loop_t *loop, const char *host_port,
                   bf_http_handler handler, void *ctx, bf_error *err)
{
    memset(s, 0, sizeof *s);
    s->handler = handler;
    s->ctx = ctx;
    if (bf_stream_listen(&s->listener, loop, host_port, 128, on_connection, s,
                         &s->port, err))
        return -1;
    bf_stream_set_callbacks cb = {
        .on_closing = on_closing, .on_closed = on_closed,
        .on_deadline = on_deadline, .on_cut = say_cut,
    };
    bf_stream_set_init(&s->conns, loop, 1000, &cb, s);
    return 0;
}

void bf_http_close(bf_http_server *s)
{
    uv_close((uv_handle_t *)&s->listener, NULL);
    bf_stream_set_stop(&s->conns, NULL);
    bf_stream_set_close_all(&s->conns);
}
