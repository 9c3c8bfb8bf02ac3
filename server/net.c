/* net: libuv TCP for the daemon.  Turns socket bytes into frames for the
 * callbacks of net.h and messages into writes. */
#include "net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "stream_conn.h"

/* How long a connection closed for an error keeps reading (and dropping)
 * what its peer still sends, so that the peer reads our last message. */
#define BF_NET_LINGER_MS 2000

/* The two strangers' queues a connection is in, indexes of its older and
 * newer links: all strangers, and its address's. */
enum { STRANGERS_ALL, STRANGERS_OF_ADDR };

static void on_closed(bf_stream_conn *s)
{
    bf_conn *c = (bf_conn *)s;
    bf_frame_reader_free(&c->rd);
    json_decref(c->held_answer);
    free(c);
}

static void queue_push(bf_conn_queue *q, bf_conn *c, int k)
{
    c->older[k] = q->newest;
    c->newer[k] = NULL;
    if (q->newest)
        q->newest->newer[k] = c;
    else
        q->oldest = c;
    q->newest = c;
    q->n++;
}

static void queue_remove(bf_conn_queue *q, bf_conn *c, int k)
{
    if (c->older[k])
        c->older[k]->newer[k] = c->newer[k];
    else
        q->oldest = c->newer[k];
    if (c->newer[k])
        c->newer[k]->older[k] = c->older[k];
    else
        q->newest = c->older[k];
    c->older[k] = c->newer[k] = NULL;
    q->n--;
}

/* c, just accepted from address e (NULL: untracked), enters the caps. */
static void become_stranger(bf_net *n, bf_conn *c, bf_peer *e)
{
    c->stranger = 1;
    c->stranger_of = e;
    c->s.deadline_ms = bf_monotonic_ms() + n->limits.hello_timeout_ms;
    queue_push(&n->strangers, c, STRANGERS_ALL);
    if (e)
        queue_push(&e->strangers, c, STRANGERS_OF_ADDR);
}

/* c is no longer a stranger: it leaves the caps. */
static void leave_strangers(bf_conn *c)
{
    if (!c->stranger)
        return;
    c->stranger = 0;
    c->s.deadline_ms = 0;
    queue_remove(&c->net->strangers, c, STRANGERS_ALL);
    if (c->stranger_of)
        queue_remove(&c->stranger_of->strangers, c, STRANGERS_OF_ADDR);
    c->stranger_of = NULL;
}

/* Logs how many of c's own lines its budget dropped, if any, and counts
 * afresh. */
static void report_dropped(bf_conn *c)
{
    if (!c->log.dropped)
        return;
    bf_log_warn("conn %llu %s: %ld log lines dropped (over its budget)",
                (unsigned long long)c->serial, c->peer, c->log.dropped);
    c->log.dropped = 0;
}

/* Closes now; pending writes are dropped. */
static void close_now(bf_conn *c)
{
    bf_stream_conn_close(&c->s);
}

/* c is closing (off the connection list): the protocol hears of it last. */
static void on_closing(bf_stream_conn *s)
{
    bf_conn *c = (bf_conn *)s;
    c->closing = 1;
    /* An admitted connection always says it closed; a stranger within its
     * address's budget (decided before it leaves the strangers). */
    int say_closed = bf_log_enabled(BF_LOG_INFO)
                     && (!c->stranger_of || bf_conn_log_ok(c));
    leave_strangers(c);
    c->net->cb.on_close(c);
    report_dropped(c);
    if (say_closed)
        bf_log_info("conn %llu %s closed", (unsigned long long)c->serial,
                    c->peer);
}

/* Whether b allows one more line now (taking it); counts it dropped if
 * not. */
static int budget_take(bf_log_budget *b)
{
    int64_t now = bf_monotonic_ms();
    if (!b->refill_ms)
        b->tokens = BF_CONN_LOG_BURST;
    else
        b->tokens += (double)(now - b->refill_ms) * BF_CONN_LOG_PER_S
                   / 1000.0;
    if (b->tokens > BF_CONN_LOG_BURST)
        b->tokens = BF_CONN_LOG_BURST;
    b->refill_ms = now;
    if (b->tokens < 1) {
        b->dropped++;
        return 0;
    }
    b->tokens -= 1;
    return 1;
}

int bf_conn_log_ok(bf_conn *c)
{
    bf_peer *e = c->stranger_of;
    if (!budget_take(e ? &e->log : &c->log))
        return 0;
    if (e)
        bf_peer_report_dropped(e);
    else
        report_dropped(c);
    return 1;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void deliver_frames(bf_conn *c);

/* Hands c the frames held back and reads on, unless the protocol paused
 * it or the slow-reader policy holds it. */
static void read_on(bf_conn *c)
{
    deliver_frames(c);
    if (!c->closing && !c->paused && !c->s.held)
        uv_read_start((uv_stream_t *)&c->s.tcp, on_alloc, on_read);
}

/* Says why c is cut: its replies stayed over the budget too long
 * (stream.h); the caller closes it. */
static void say_cut(bf_stream_conn *s)
{
    bf_conn *c = (bf_conn *)s;
    bf_log_warn("conn %llu %s: not reading its replies (%zu bytes queued "
                "for %d s), closing", (unsigned long long)c->serial, c->peer,
                bf_stream_queued((uv_stream_t *)&s->tcp),
                BF_STREAM_OVER_BUDGET_MS / 1000);
}

/* The slow-reader policy (stream.h), after c's queued output changed: a
 * peer over its budget is read no more (so it makes no more replies)
 * until it has read, and cut if it does not. */
static void judge_reader(bf_conn *c)
{
    if (c->closing)
        return;
    int was_held = c->s.held;
    switch (bf_stream_conn_judge(&c->s)) {
    case BF_STREAM_READ:
        if (was_held)
            read_on(c);
        break;
    case BF_STREAM_HOLD:
        if (!was_held)
            uv_read_stop((uv_stream_t *)&c->s.tcp);
        break;
    case BF_STREAM_CUT:
        say_cut(&c->s);
        close_now(c);
        break;
    }
}

static void on_written(uv_stream_t *s, int status)
{
    if (status < 0) {
        if (status != UV_ECANCELED)
            bf_log_debug("write failed: %s", uv_strerror(status));
        return;
    }
    judge_reader((bf_conn *)s);
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
    if (frame)
        bf_conn_send_frame(c, frame, len);
}

void bf_conn_send_frame(bf_conn *c, char *frame, size_t len)
{
    if (c->closing) {
        free(frame);
        return;
    }
    if (bf_stream_write((uv_stream_t *)&c->s.tcp, frame, len, on_written) < 0) {
        close_now(c);
        return;
    }
    /* Only ever to hold it here: reading on would hand it frames from
     * inside this send; on_written and the tick do the rest. */
    if (!c->s.held)
        judge_reader(c);
}

/* Sends msg (stolen; may be NULL) as c's last message, then ends c with a
 * linger (stream_conn.h), so the peer reads it rather than a reset. */
static void send_last(bf_conn *c, json_t *msg)
{
    bf_conn_send(c, msg);
    c->closing = 1;
    bf_stream_conn_end(&c->s, BF_NET_LINGER_MS);
}

/* A failed hello of c's address: how long its answer is to wait (0: not
 * at all).  Logged when the delay grows, not once per failure. */
static int64_t hello_failed(bf_conn *c)
{
    bf_peer *e = c->stranger_of;
    if (!e)
        return 0;
    int64_t before = e->delay_ms;
    int64_t delay = bf_peers_failed(&c->net->peers, e, bf_monotonic_ms());
    if (delay > before)
        bf_log_warn("%s: %d failed hellos; answering its failed hellos "
                    "after %lld s from now on (its good hellos at once)",
                    e->addr, e->failures, (long long)(delay / 1000));
    return delay;
}

void bf_conn_fail(bf_conn *c, json_t *msg)
{
    if (c->closing) {
        json_decref(msg);
        return;
    }
    int64_t delay = c->stranger ? hello_failed(c) : 0;
    if (delay == 0) {
        send_last(c, msg);
        return;
    }
    /* The tarpit: closing to the protocol (it sends and reads nothing
     * more), still a stranger to the caps; the tick answers. */
    c->closing = 1;
    c->held_answer = msg;
    c->answer_at_ms = bf_monotonic_ms() + delay;
    c->s.deadline_ms = c->answer_at_ms;
}

/* c's time in the tarpit is over: it hears its answer, then goes. */
static void answer_late(bf_conn *c)
{
    json_t *msg = c->held_answer;
    c->held_answer = NULL;
    c->answer_at_ms = 0;
    c->closing = 0;
    send_last(c, msg);
}

/* Closes c with an error `code` saying text, and logs it (within c's
 * budget). */
static void fail_logged(bf_conn *c, const char *code, const char *text)
{
    if (bf_conn_log_ok(c))
        bf_log_warn("conn %llu %s: %s, closing", (unsigned long long)c->serial,
                    c->peer, text);
    bf_conn_fail(c, bf_wire_error(code, NULL, NULL, "%s", text));
}

void bf_conn_admit(bf_conn *c, size_t max_frame)
{
    leave_strangers(c);
    c->rd.max_frame = max_frame;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    /* One loop thread, and every read is consumed before the next: one
     * buffer serves all connections.  A stranger reads at most its frame
     * limit at a time, so its reader never holds more than twice that. */
    static char chunk[256 * 1024];
    bf_conn *c = (bf_conn *)h;
    size_t n = c->stranger && c->rd.max_frame < sizeof chunk
        ? c->rd.max_frame : sizeof chunk;
    *buf = uv_buf_init(chunk, (unsigned)n);
}

/* Hands every complete frame held to the callback, until the connection
 * closes or is paused. */
static void deliver_frames(bf_conn *c)
{
    const char *line;
    size_t len;
    int got;
    while (!c->closing && !c->paused && !c->s.held
           && (got = bf_frame_reader_next(&c->rd, &line, &len))) {
        if (got < 0) {
            char text[96];
            snprintf(text, sizeof text, "frame exceeds the limit of %zu bytes",
                     c->rd.max_frame);
            fail_logged(c, "too_large", text);
            return;
        }
        c->net->cb.on_frame(c, line, len);
    }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    bf_conn *c = (bf_conn *)s;
    if (n < 0) {
        if (n != UV_EOF && bf_conn_log_ok(c))
            bf_log_info("conn %llu %s: read error: %s",
                        (unsigned long long)c->serial, c->peer,
                        uv_strerror((int)n));
        close_now(c);
        return;
    }
    if (n == 0 || c->closing)
        return;
    bf_frame_reader_feed(&c->rd, buf->base, (size_t)n);
    deliver_frames(c);
}

void bf_conn_pause(bf_conn *c)
{
    c->paused = 1;
    if (!c->closing)
        uv_read_stop((uv_stream_t *)&c->s.tcp);
}

void bf_conn_resume(bf_conn *c)
{
    c->paused = 0;
    read_on(c);
}

int bf_conn_peer_gone(bf_conn *c)
{
    uv_os_fd_t fd;
    if (c->closing || uv_fileno((uv_handle_t *)&c->s.tcp, &fd) != 0)
        return 1;
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK
                      && errno != EINTR);
}

/* "IP:PORT" for log lines, and the key of its address (peers.h): an IPv6
 * address is cut to its /64, unless it is an IPv4 one in disguise. */
static void describe_peer(bf_conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[48] = "?";
    int port = 0;
    snprintf(c->addr, sizeof c->addr, "?");
    if (uv_tcp_getpeername(&c->s.tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof ip);
            port = ntohs(a->sin6_port);
            struct sockaddr_in6 prefix = *a;
            if (!IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
                memset(prefix.sin6_addr.s6_addr + 8, 0, 8);
            uv_ip6_name(&prefix, c->addr, sizeof c->addr);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof ip);
            port = ntohs(a->sin_port);
            snprintf(c->addr, sizeof c->addr, "%s", ip);
        }
    }
    snprintf(c->peer, sizeof c->peer, "%s:%d", ip, port);
}

/* A connection turned away (closed to make room, or accept failed):
 * logged at most once a second, with how many since. */
static void log_turned_away(bf_net *n, const char *why)
{
    int64_t now = bf_monotonic_ms();
    n->turned_away_unlogged++;
    if (now - n->turned_away_logged_ms < 1000)
        return;
    bf_log_warn("%ld connection%s turned away, the last: %s",
                n->turned_away_unlogged,
                n->turned_away_unlogged == 1 ? "" : "s", why);
    n->turned_away_logged_ms = now;
    n->turned_away_unlogged = 0;
}

/* Reads what c sent that the loop has not read yet (it was busy, and
 * accepted a burst of connections first): a hello waiting there is
 * handled before c can be closed to make room. */
static void read_pending(bf_conn *c)
{
    uv_os_fd_t fd;
    if (c->closing || uv_fileno((uv_handle_t *)&c->s.tcp, &fd) != 0)
        return;
    uv_buf_t buf;
    on_alloc((uv_handle_t *)&c->s.tcp, 0, &buf);
    ssize_t got = recv(fd, buf.base, buf.len, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    on_read((uv_stream_t *)&c->s.tcp,
            got > 0 ? got : got == 0 ? UV_EOF : uv_translate_sys_error(errno),
            &buf);
}

/* Closes stranger c, the oldest of a full cap (why says which), so that a
 * newcomer fits: c had its chance to say hello, the newcomer has not, and
 * may hold the right token.  Unless what c sent makes it leave the
 * strangers first (a good hello, an end). */
static void make_room_from(bf_conn *c, const char *why)
{
    read_pending(c);
    if (!c->stranger)
        return;
    char text[300];
    snprintf(text, sizeof text, "too many connections without a hello (%s): "
             "the oldest is closed to make room", why);
    if (!c->closing) {
        json_t *m = bf_wire_error("overloaded", NULL, NULL, "%s", text);
        size_t len;
        char *frame = bf_wire_encode(m, &len);
        json_decref(m);
        uv_buf_t buf = uv_buf_init(frame, (unsigned)len);
        uv_try_write((uv_stream_t *)&c->s.tcp, &buf, 1);
        free(frame);
    }
    char line[400];
    snprintf(line, sizeof line, "conn %llu %s: %s",
             (unsigned long long)c->serial, c->peer, text);
    log_turned_away(c->net, line);
    close_now(c);
}

/* Makes room under both caps for one more stranger from e (NULL:
 * untracked).  Each round takes one stranger out of its queue. */
static void make_room(bf_net *n, bf_peer *e)
{
    char why[160];
    while (e && e->strangers.n >= n->limits.max_strangers_per_addr) {
        snprintf(why, sizeof why, "%d from %s; --max-strangers-per-addr %d",
                 e->strangers.n, e->addr, n->limits.max_strangers_per_addr);
        make_room_from(e->strangers.oldest, why);
    }
    while (n->strangers.n >= n->limits.max_strangers) {
        snprintf(why, sizeof why, "%d in all; --max-strangers %d",
                 n->strangers.n, n->limits.max_strangers);
        make_room_from(n->strangers.oldest, why);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    bf_net *n = server->data;
    if (status < 0) {
        /* libuv already shed the pending connections when out of
         * descriptors (EMFILE: its reserve descriptor trick). */
        log_turned_away(n, uv_strerror(status));
        return;
    }
    bf_conn *c = bf_xcalloc(1, sizeof *c);
    c->net = n;
    c->serial = ++n->next_serial;
    bf_frame_reader_init(&c->rd, BF_WIRE_HELLO_MAX_FRAME);
    if (bf_stream_set_accept(&n->conns, server, &c->s) < 0)
        return;
    describe_peer(c);
    bf_peer *e = bf_peers_get(&n->peers, c->addr);
    make_room(n, e);
    become_stranger(n, c, e);
    if (bf_log_enabled(BF_LOG_INFO) && bf_conn_log_ok(c))
        bf_log_info("conn %llu %s connected", (unsigned long long)c->serial,
                    c->peer);
    n->cb.on_connect(c);
    uv_read_start((uv_stream_t *)&c->s.tcp, on_alloc, on_read);
}

/* c's deadline passed: a failed hello's time in the tarpit is over, or a
 * stranger said no hello in time (a failed hello). */
static void on_deadline(bf_stream_conn *s, int64_t now_ms)
{
    (void)now_ms;
    bf_conn *c = (bf_conn *)s;
    s->deadline_ms = 0;
    if (c->answer_at_ms) {
        answer_late(c);
        return;
    }
    if (!c->stranger || c->closing)
        return;
    char text[64];
    snprintf(text, sizeof text, "no hello within %d ms",
             c->net->limits.hello_timeout_ms);
    fail_logged(c, "timeout", text);
}

/* After each tick's look at the connections: forgets the addresses
 * nothing depends on. */
static void on_tick(bf_stream_set *s, int64_t now_ms)
{
    bf_net *n = s->data;
    bf_peers_forget_idle(&n->peers, now_ms);
}

int bf_net_listen(bf_net *n, uv_loop_t *loop, const char *host_port,
                  const bf_net_limits *limits, const bf_net_callbacks *cb,
                  void *data, bf_error *err)
{
    memset(n, 0, sizeof *n);
    n->loop = loop;
    n->cb = *cb;
    n->data = data;
    n->limits = *limits;
    if (bf_stream_listen(&n->listener, loop, host_port, 511, on_connection,
                         n, &n->port, err))
        return -1;
    bf_peers_init(&n->peers, limits->hello_failures);
    /* Timeouts are enforced to a quarter of their length, at most 1 s
     * late. */
    int every = limits->hello_timeout_ms / 4;
    every = every < 10 ? 10 : every > 1000 ? 1000 : every;
    bf_stream_set_callbacks scb = {
        .on_closing = on_closing, .on_closed = on_closed,
        .on_deadline = on_deadline, .on_cut = say_cut, .on_tick = on_tick,
    };
    bf_stream_set_init(&n->conns, loop, every, &scb, n);
    return 0;
}

static void on_stopped(bf_stream_set *s)
{
    bf_net *n = s->data;
    bf_peers_free(&n->peers);
}

void bf_net_shutdown(bf_net *n)
{
    if (!uv_is_closing((uv_handle_t *)&n->listener)) {
        uv_close((uv_handle_t *)&n->listener, NULL);
        bf_stream_set_stop(&n->conns, on_stopped);
    }
    for (bf_stream_conn *s = n->conns.newest, *next; s; s = next) {
        next = s->next;
        bf_conn *c = (bf_conn *)s;
        if (c->answer_at_ms) {
            close_now(c);
            continue;
        }
        /* No linger now: a lingering one closes at once, the others once
         * their replies are out. */
        c->closing = 1;
        bf_stream_conn_end(s, 0);
    }
}

void bf_net_close_all(bf_net *n)
{
    bf_stream_set_close_all(&n->conns);
}

int bf_net_each(bf_net *n, bf_net_visit_fn fn, void *ctx)
{
    for (bf_stream_conn *s = n->conns.newest, *next; s; s = next) {
        next = s->next;
        int rc = fn((bf_conn *)s, ctx);
        if (rc)
            return rc;
    }
    return 0;
}
