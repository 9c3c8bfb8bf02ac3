/* The blocking client side of the wire (rpc.h). */
#include "rpc.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"

int bf_rpc_connect(bf_rpc *c, const char *host_port, bf_error *err)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->next_id = 1;
    char host[256];
    int port;
    if (bf_wire_parse_host_port(host_port, host, sizeof host, &port, err))
        return -1;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM }, *res, *ai;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc)
        return bf_error_set(err, NULL, 0, NULL, "cannot resolve %s: %s",
                            host, gai_strerror(rc));
    int fd = -1, saved = 0;
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return bf_error_set(err, NULL, 0, NULL, "cannot connect to %s: %s",
                            host_port, strerror(saved));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    bf_frame_reader_init(&c->rd, BF_WIRE_MAX_FRAME);
    return 0;
}

void bf_rpc_close(bf_rpc *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    bf_frame_reader_free(&c->rd);
}

int bf_rpc_send(bf_rpc *c, const json_t *msg, bf_error *err)
{
    size_t len;
    char *frame = bf_wire_encode(msg, &len);
    if (!frame)
        return bf_error_set(err, NULL, 0, NULL, "cannot encode message");
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(c->fd, frame + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            free(frame);
            return bf_error_set(err, NULL, 0, NULL, "send failed: %s",
                                strerror(errno));
        }
        off += (size_t)w;
    }
    free(frame);
    return 0;
}

json_t *bf_rpc_recv(bf_rpc *c, int timeout_ms, bf_error *err)
{
    int64_t deadline = timeout_ms < 0 ? -1 : bf_monotonic_ms() + timeout_ms;
    for (;;) {
        const char *line;
        size_t len;
        int got = bf_frame_reader_next(&c->rd, &line, &len);
        if (got < 0) {
            bf_error_set(err, NULL, 0, NULL, "frame exceeds %zu bytes",
                         c->rd.max_frame);
            return NULL;
        }
        if (got > 0)
            return bf_wire_parse(line, len, err);

        int wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - bf_monotonic_ms();
            wait = left > 0 ? (int)left : 0;
        }
        struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
        int pr = poll(&pfd, 1, wait);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            bf_error_set(err, NULL, 0, NULL, "timed out after %d ms",
                         timeout_ms);
            return NULL;
        }
        char buf[65536];
        ssize_t n = pr < 0 ? -1 : recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            bf_error_set(err, NULL, 0, NULL, "%s",
                         n == 0 ? "connection closed by peer"
                                : strerror(errno));
            return NULL;
        }
        if (bf_frame_reader_feed(&c->rd, buf, (size_t)n)) {
            bf_error_set(err, NULL, 0, NULL, "out of memory");
            return NULL;
        }
    }
}

/* Fills err from an "error" message, keeping its file/line/field. */
static void error_from_reply(const json_t *reply, bf_error *err)
{
    const char *file = json_string_value(json_object_get(reply, "file"));
    const char *field = json_string_value(json_object_get(reply, "field"));
    const char *text = json_string_value(json_object_get(reply, "message"));
    bf_error_set(err, NULL, 0, NULL, "%s", text ? text : "server error");
    /* The server's message already names the place; keep the parts too. */
    if (err) {
        snprintf(err->file, sizeof err->file, "%s", file ? file : "");
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
        err->line = (int)json_integer_value(json_object_get(reply, "line"));
    }
}

json_t *bf_rpc_request(bf_rpc *c, json_t *msg, int timeout_ms,
                        bf_rpc_push_fn on_push, void *ctx, bf_error *err)
{
    json_int_t id = c->next_id++;
    json_object_set_new(msg, "id", json_integer(id));
    if (bf_rpc_send(c, msg, err))
        return NULL;
    for (;;) {
        json_t *reply = bf_rpc_recv(c, timeout_ms, err);
        if (!reply)
            return NULL;
        json_t *rid = json_object_get(reply, "id");
        if (json_is_integer(rid) && json_integer_value(rid) == id) {
            if (strcmp(bf_wire_type(reply), "error") == 0)
                error_from_reply(reply, err);
            return reply;
        }
        if (on_push)
            on_push(ctx, reply);
        json_decref(reply);
    }
}

/* A refusal sent before the hello was read (a stranger evicted to make
 * room, the hello timeout) carries no id, and the daemon then closes: it is the
 * answer to the hello. */
static void keep_refusal(void *ctx, const json_t *msg)
{
    json_t **refusal = ctx;
    if (!*refusal && strcmp(bf_wire_type(msg), "error") == 0
        && !json_object_get(msg, "id"))
        *refusal = json_incref((json_t *)msg);
}

int bf_rpc_hello(bf_rpc *c, const char *token, const char *role,
                  const char *name, const char *host, int ranks,
                  bf_error *err)
{
    json_t *hello = json_pack("{s:s, s:i, s:s, s:s}", "type", "hello",
                              "version", BF_WIRE_VERSION, "token", token,
                              "role", role);
    if (name)
        json_object_set_new(hello, "name", json_string(name));
    if (host)
        json_object_set_new(hello, "host", json_string(host));
    if (strcmp(role, "worker") == 0)
        json_object_set_new(hello, "ranks", json_integer(ranks));
    json_t *refusal = NULL;
    json_t *reply = bf_rpc_request(c, hello, 10000, keep_refusal, &refusal,
                                    err);
    json_decref(hello);
    if (!reply && refusal)
        error_from_reply(refusal, err);
    json_decref(refusal);
    if (!reply)
        return -1;
    int ok = strcmp(bf_wire_type(reply), "error") != 0;
    json_decref(reply);
    return ok ? 0 : -1;
}
