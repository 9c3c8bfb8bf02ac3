#include "link.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "stop_signals.h"
#include "stream_conn.h"
#include "wire.h"

#define DEFAULT_BATCH_MS 200
#define DEFAULT_BATCH_RECORDS 500
#define DEFAULT_BACKOFF_MIN_MS 100
#define DEFAULT_BACKOFF_MAX_MS 5000
#define DEFAULT_RETRY_MS 1000
#define MIN_HEARTBEAT_MS 100
#define MAX_RETRY_MS 60000           /* longest no_job wait honoured */
#define MAX_LEASE_SECONDS (7 * 24 * 3600)   /* bifocald allows no longer */
/* How long an unlimited final report may still take once interrupted. */
#define INTERRUPT_GRACE_MS 3000
/* TCP keep-alive notices a coordinator host that vanished without a reset
 * long before the kernel's write timeout would. */
#define KEEPALIVE_DELAY_S 10

enum { FINISH_NONE = 1, FINISH_WAITING = 2 };   /* besides BF_LINK_* */

typedef enum { ENTRY_METRICS, ENTRY_CHECKPOINT, ENTRY_FINISH } entry_kind;

/* One message of an attempt, kept until the coordinator acknowledges it. */
typedef struct entry {
    struct entry *next;
    entry_kind kind;
    int64_t attempt_id;
    int64_t id;          /* request id: the same on every resend */
    json_t *msg;         /* the complete message, "id" included */
    size_t n_records;    /* ENTRY_METRICS only */
    int sent;            /* written on the current connection */
    int writes;          /* times written, over all connections */
} entry;

typedef enum { REQ_IDLE, REQ_WANTED, REQ_SENT, REQ_ANSWERED } req_state;

/* One TCP connection; freed once libuv has closed it. */
typedef struct conn {
    bf_stream_conn s;    /* first: a uv_stream_t* is a conn*; in no set */
    uv_connect_t connect_req;
    bf_frame_reader rd;
    bf_link *l;
} conn;

struct bf_link {
    /* Configuration, fixed after start. */
    char *server, *token, *name, *host;
    char *trainer;            /* sent with request_job; NULL: builtin */
    char addr_host[256];
    int port, ranks, batch_ms, batch_records, backoff_min_ms, backoff_max_ms;
    const volatile sig_atomic_t *interrupt;

    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t batch_timer, heartbeat_timer, reconnect_timer;

    /* Everything below is guarded by mu.  The network thread holds it for
     * the whole of each callback, the training thread inside each call. */
    pthread_mutex_t mu;
    pthread_cond_t changed;   /* something a blocking call waits for */

    /* Network side. */
    conn *conn;               /* NULL while disconnected */
    uv_getaddrinfo_t *resolving;
    int online;               /* hello acknowledged on conn */
    int64_t offline_since_ms; /* monotonic; when `online` last ended */
    int64_t hello_id;
    int backoff_ms;
    int64_t unreachable_said_ms;  /* when "cannot reach" was last logged */
    int hold_resends;         /* the store failed: wait for the next tick */
    int64_t hb_attempt;       /* what heartbeat_timer runs for (0: off) */
    int hb_interval_ms;
    int stopping;

    /* Shared with the training thread. */
    int64_t next_id;
    char fatal[sizeof(((bf_error *)0)->msg)];   /* hello refused */
    entry *head, **tail;      /* the outbox, oldest first */
    json_t *pending;          /* records not yet in a metrics message */
    int64_t attempt_id;       /* the live attempt, 0 for none */
    int lease_seconds;
    int64_t seq;              /* last metrics seq of the attempt */
    int cancelled, fenced;
    int64_t early_cancel;     /* a cancel push for an attempt not begun yet */
    int finish_result;        /* FINISH_NONE, FINISH_WAITING or BF_LINK_* */
    char finish_error[sizeof(((bf_error *)0)->msg)];
    req_state req;
    int64_t req_id;
    /* The current ask's token, sent on each resend of it: "NONCE-N", a
     * nonce of this link (random: a restarted group must not repeat its
     * predecessor's tokens) and the ask's number.  The coordinator hands
     * the lease of an ask it already answered to the same ask again. */
    char req_token[40];
    uint64_t req_nonce, req_count;
    json_t *req_reply;
    bf_link_stats stats;
};

static void schedule_reconnect(bf_link *l);
static void pump(bf_link *l);

/* A coordinator that cannot be reached is said at warn, at once and then
 * every UNREACHABLE_SAY_MS while it lasts (each retry is at debug): a
 * group that waits forever on a wrong address or a dead daemon must not
 * look like one waiting for work. */
#define UNREACHABLE_SAY_MS 30000

static void say_unreachable(bf_link *l, const char *why)
{
    int64_t now = bf_monotonic_ms();
    if (l->unreachable_said_ms && now - l->unreachable_said_ms < UNREACHABLE_SAY_MS) {
        bf_log_debug("link: cannot reach the coordinator %s: %s", l->server,
                     why);
        return;
    }
    l->unreachable_said_ms = now;
    bf_log_warn("link: cannot reach the coordinator %s: %s; retrying",
                l->server, why);
}

/* ---- the outbox (under mu) ------------------------------------------------ */

static void append_entry(bf_link *l, entry_kind kind, json_t *msg, int64_t id,
                         size_t n_records)
{
    entry *e = bf_xcalloc(1, sizeof *e);
    e->kind = kind;
    e->attempt_id = l->attempt_id;
    e->id = id;
    e->msg = msg;
    e->n_records = n_records;
    *l->tail = e;
    l->tail = &e->next;
}

static void remove_entry(bf_link *l, entry *e)
{
    entry **p = &l->head;
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    if (l->tail == &e->next)
        l->tail = p;
    json_decref(e->msg);
    free(e);
}

static entry *find_entry(bf_link *l, int64_t id)
{
    for (entry *e = l->head; e; e = e->next)
        if (e->id == id)
            return e;
    return NULL;
}

static void drop_attempt_entries(bf_link *l, int64_t attempt_id)
{
    entry *e = l->head;
    while (e) {
        entry *next = e->next;
        if (e->attempt_id == attempt_id)
            remove_entry(l, e);
        e = next;
    }
    json_array_clear(l->pending);
}

/* Moves the queued records into one metrics message at the outbox's end. */
static void cut_batch(bf_link *l)
{
    size_t n = json_array_size(l->pending);
    if (n == 0)
        return;
    int64_t id = ++l->next_id;
    json_t *msg = json_pack("{s:s, s:I, s:I, s:I, s:o}", "type", "metrics",
                            "id", (json_int_t)id,
                            "attempt_id", (json_int_t)l->attempt_id,
                            "seq", (json_int_t)++l->seq,
                            "records", l->pending);
    l->pending = json_array();
    append_entry(l, ENTRY_METRICS, msg, id, n);
}

/* ---- state changes the training thread waits for (under mu) --------------- */

static void mark_cancelled(bf_link *l)
{
    if (!l->cancelled)
        bf_log_info("link: coordinator cancelled attempt %lld",
                    (long long)l->attempt_id);
    l->cancelled = 1;
    pthread_cond_broadcast(&l->changed);
}

/* The lease is lost: nothing of this attempt may be sent any more. */
static void fence(bf_link *l)
{
    if (!l->fenced)
        bf_log_warn("link: attempt %lld is fenced (lease lost); dropping "
                    "its unsent records", (long long)l->attempt_id);
    l->fenced = 1;
    drop_attempt_entries(l, l->attempt_id);
    if (l->finish_result == FINISH_WAITING)
        l->finish_result = BF_LINK_FENCED;
    pthread_cond_broadcast(&l->changed);
}

static int interrupted(const bf_link *l)
{
    return l->interrupt && *l->interrupt;
}

/* ---- writing (network thread) --------------------------------------------- */

static void drop_conn(bf_link *l, const char *why);

static void on_written(uv_stream_t *s, int status)
{
    (void)s;
    if (status < 0 && status != UV_ECANCELED)
        bf_log_debug("link: write failed: %s", uv_strerror(status));
}

/* Writes msg on the current connection; -1 (connection dropped) on error. */
static int send_msg(bf_link *l, const json_t *msg)
{
    size_t len;
    char *frame = bf_wire_encode(msg, &len);
    if (!frame) {
        bf_log_error("link: cannot encode a '%s' message", bf_wire_type(msg));
        return 0;
    }
    int rc = bf_stream_write((uv_stream_t *)&l->conn->s.tcp, frame, len,
                             on_written);
    if (rc < 0) {
        drop_conn(l, uv_strerror(rc));
        return -1;
    }
    return 0;
}

static void send_heartbeat(bf_link *l)
{
    if (!l->online || !l->attempt_id || l->fenced)
        return;
    json_t *m = json_pack("{s:s, s:I, s:I}", "type", "heartbeat",
                          "id", (json_int_t)++l->next_id,
                          "attempt_id", (json_int_t)l->attempt_id);
    send_msg(l, m);
    json_decref(m);
}

static void send_request_job(bf_link *l)
{
    l->req_id = ++l->next_id;
    json_t *m = json_pack("{s:s, s:I, s:s}", "type", "request_job",
                          "id", (json_int_t)l->req_id,
                          "request", l->req_token);
    if (l->trainer)
        json_object_set_new(m, "trainer", json_string(l->trainer));
    l->req = REQ_SENT;
    send_msg(l, m);
    json_decref(m);
}

/* Sends everything that is due on this connection, in outbox order.  The
 * final report and a checkpoint report wait until they are the oldest
 * message left, i.e. until every message before them was acknowledged.
 * Ordering alone is not enough for the checkpoint: a metrics batch can fail
 * at ingest (`store` error, kept for a resend) while the checkpoint
 * pipelined behind it commits; the next attempt would then resume past
 * records that were never stored, lost for good if we die before the
 * resend.  Later messages wait behind it (one round trip per checkpoint). */
static void pump(bf_link *l)
{
    if (!l->online)
        return;
    if (l->req == REQ_WANTED)
        send_request_job(l);
    for (entry *e = l->head; e && l->online; e = e->next) {
        if (e->sent)
            continue;
        if (l->hold_resends ||
            ((e->kind == ENTRY_FINISH || e->kind == ENTRY_CHECKPOINT) &&
             e != l->head))
            break;
        e->sent = 1;
        if (e->writes++ > 0)
            l->stats.messages_resent++;
        l->stats.messages_sent++;
        if (send_msg(l, e->msg) != 0)
            break;
    }
}

/* ---- the heartbeat timer follows the live attempt ------------------------- */

static void on_heartbeat_timer(uv_timer_t *t)
{
    bf_link *l = t->data;
    pthread_mutex_lock(&l->mu);
    send_heartbeat(l);
    pthread_mutex_unlock(&l->mu);
}

static void sync_heartbeat_timer(bf_link *l)
{
    int live = l->attempt_id && !l->fenced && l->finish_result != BF_LINK_OK;
    int64_t want = live ? l->attempt_id : 0;
    int interval = l->lease_seconds * 1000 / 3;
    if (interval < MIN_HEARTBEAT_MS)
        interval = MIN_HEARTBEAT_MS;
    if (want == l->hb_attempt && interval == l->hb_interval_ms)
        return;
    uv_timer_stop(&l->heartbeat_timer);
    l->hb_attempt = want;
    l->hb_interval_ms = interval;
    if (want)
        uv_timer_start(&l->heartbeat_timer, on_heartbeat_timer,
                       (uint64_t)interval, (uint64_t)interval);
}

/* ---- replies (network thread, under mu) ----------------------------------- */

static int64_t int_member(const json_t *msg, const char *key)
{
    return json_integer_value(json_object_get(msg, key));
}

static const char *error_text(const json_t *msg)
{
    const char *m = json_string_value(json_object_get(msg, "message"));
    return m ? m : "(no message)";
}

static void on_hello_reply(bf_link *l, const json_t *msg)
{
    if (strcmp(bf_wire_type(msg), "ack") != 0) {
        /* Wrong token or protocol version: retrying cannot help. */
        snprintf(l->fatal, sizeof l->fatal, "coordinator %s refused the "
                 "hello (%s): %s", l->server,
                 json_string_value(json_object_get(msg, "code")),
                 error_text(msg));
        bf_log_error("link: %s", l->fatal);
        pthread_cond_broadcast(&l->changed);
        drop_conn(l, "hello refused");
        return;
    }
    l->online = 1;
    l->backoff_ms = l->backoff_min_ms;
    l->unreachable_said_ms = 0;
    l->stats.connects++;
    int unacked = 0;
    for (entry *e = l->head; e; e = e->next)
        unacked++;
    bf_log_info("link: connected to %s as %s (%d unacknowledged message%s "
                "to send)", l->server, l->name, unacked,
                unacked == 1 ? "" : "s");
    send_heartbeat(l);   /* learn at once whether the lease survived */
    pump(l);
}

/* The coordinator stored a batch but for the records it names: they are
 * lost, so each is said loudly here (the batch is not resent for them). */
static void log_rejected(const entry *e, const json_t *ack)
{
    json_t *rejected = json_object_get(ack, "rejected");
    if (!json_is_array(rejected))
        return;
    json_int_t count = json_integer_value(json_object_get(ack,
                                                          "rejected_count"));
    bf_log_error("link: coordinator rejected %lld record(s) of metrics "
                 "batch seq %lld (attempt %lld); the rest are stored",
                 (long long)(count > 0 ? count
                             : (json_int_t)json_array_size(rejected)),
                 (long long)json_integer_value(json_object_get(e->msg, "seq")),
                 (long long)e->attempt_id);
    size_t i;
    json_t *r;
    json_array_foreach(rejected, i, r) {
        const char *why = json_string_value(json_object_get(r, "error"));
        bf_log_error("link:   record %lld: %s",
                     (long long)json_integer_value(json_object_get(r,
                                                                   "index")),
                     why ? why : "(no reason given)");
    }
}

static void on_entry_reply(bf_link *l, entry *e, const json_t *msg)
{
    if (strcmp(bf_wire_type(msg), "ack") == 0) {
        if (e->kind == ENTRY_METRICS) {
            log_rejected(e, msg);
            l->stats.records_acked += (int64_t)e->n_records;
        }
        if (e->kind == ENTRY_FINISH)
            l->finish_result = BF_LINK_OK;
        remove_entry(l, e);
        pthread_cond_broadcast(&l->changed);
        pump(l);   /* the final report may be due now */
        return;
    }
    const char *code = json_string_value(json_object_get(msg, "code"));
    if (code && strcmp(code, "store") == 0) {
        /* The coordinator could not commit: same message again later. */
        bf_log_warn("link: coordinator could not store a '%s' message (%s); "
                    "retrying", bf_wire_type(e->msg), error_text(msg));
        e->sent = 0;
        l->hold_resends = 1;
        return;
    }
    bf_log_error("link: coordinator rejected a '%s' message (%s): %s",
                 bf_wire_type(e->msg), code ? code : "?", error_text(msg));
    if (e->kind == ENTRY_FINISH) {
        snprintf(l->finish_error, sizeof l->finish_error,
                 "coordinator rejected the final report: %s", error_text(msg));
        l->finish_result = BF_LINK_ERR;
    }
    remove_entry(l, e);
    pthread_cond_broadcast(&l->changed);
}

static void handle_frame(bf_link *l, const json_t *msg)
{
    const char *type = bf_wire_type(msg);
    int64_t attempt = int_member(msg, "attempt_id");
    json_t *attempt_v = json_object_get(msg, "attempt_id");
    /* A job reply is checked whole where it is awaited (check_job). */
    if (attempt_v && strcmp(type, "job") != 0
        && (!json_is_integer(attempt_v) || attempt < 1)) {
        bf_log_error("link: refused a '%s' message from the coordinator: "
                     "'attempt_id' must be an integer >= 1", type);
        return;
    }
    int current = attempt != 0 && attempt == l->attempt_id;
    const char *code = json_string_value(json_object_get(msg, "code"));

    /* A cancel push, or "cancel": true on any reply about our attempt.  A
     * push can also overtake the start of the attempt it names (it may
     * follow the job reply at once): it is kept for bf_link_begin_attempt. */
    if (current && (strcmp(type, "cancel") == 0 ||
                    json_is_true(json_object_get(msg, "cancel"))))
        mark_cancelled(l);
    else if (attempt != 0 && strcmp(type, "cancel") == 0)
        l->early_cancel = attempt;
    if (current && strcmp(type, "error") == 0 && code &&
        strcmp(code, "fenced") == 0)
        fence(l);

    json_t *idv = json_object_get(msg, "id");
    if (!json_is_integer(idv))
        return;
    int64_t id = json_integer_value(idv);
    entry *e;
    if (id == l->hello_id) {
        on_hello_reply(l, msg);
    } else if (l->req == REQ_SENT && id == l->req_id) {
        l->req_reply = json_incref((json_t *)msg);
        l->req = REQ_ANSWERED;
        pthread_cond_broadcast(&l->changed);
    } else if ((e = find_entry(l, id)) != NULL) {
        on_entry_reply(l, e, msg);
    }
    /* Anything else answers a heartbeat: handled above. */
}

/* ---- the connection (network thread) -------------------------------------- */

static void on_conn_closed(bf_stream_conn *sc)
{
    conn *c = (conn *)sc;
    bf_frame_reader_free(&c->rd);
    free(c);
}

/* Forgets the connection; unacknowledged messages go again on the next. */
static void drop_conn(bf_link *l, const char *why)
{
    if (!l->conn)
        return;
    if (l->online)
        bf_log_warn("link: lost the coordinator %s (%s); reconnecting",
                    l->server, why);
    else if (!l->fatal[0])      /* a refused hello is said as an error */
        say_unreachable(l, why);
    bf_stream_conn_close(&l->conn->s);
    l->conn = NULL;
    if (l->online)
        l->offline_since_ms = bf_monotonic_ms();
    l->online = 0;
    for (entry *e = l->head; e; e = e->next)
        e->sent = 0;
    if (l->req == REQ_SENT)
        l->req = REQ_WANTED;
    schedule_reconnect(l);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = (conn *)s;
    bf_link *l = c->l;
    pthread_mutex_lock(&l->mu);
    if (nread < 0) {
        drop_conn(l, nread == UV_EOF ? "closed by the coordinator"
                                     : uv_strerror((int)nread));
    } else if (nread > 0 && bf_frame_reader_feed(&c->rd, buf->base,
                                                 (size_t)nread) != 0) {
        drop_conn(l, "out of memory");
    } else {
        const char *line;
        size_t len;
        int got;
        /* l->conn changes when a frame makes us drop the connection. */
        while (l->conn == c && (got = bf_frame_reader_next(&c->rd, &line,
                                                            &len)) != 0) {
            bf_error err;
            json_t *msg = got > 0 ? bf_wire_parse(line, len, &err) : NULL;
            if (!msg) {
                drop_conn(l, got > 0 ? err.msg : "oversized frame");
                break;
            }
            handle_frame(l, msg);
            json_decref(msg);
        }
    }
    pthread_mutex_unlock(&l->mu);
    free(buf->base);
}

static void send_hello(bf_link *l)
{
    l->hello_id = ++l->next_id;
    json_t *m = json_pack("{s:s, s:I, s:i, s:s, s:s, s:s, s:s, s:i}",
                          "type", "hello", "id", (json_int_t)l->hello_id,
                          "version", BF_WIRE_VERSION, "token", l->token,
                          "role", "worker", "name", l->name,
                          "host", l->host, "ranks", l->ranks);
    send_msg(l, m);
    json_decref(m);
}

static void on_connected(uv_connect_t *req, int status)
{
    conn *c = req->data;
    bf_link *l = c->l;
    pthread_mutex_lock(&l->mu);
    if (l->conn == c) {
        if (status < 0) {
            drop_conn(l, uv_strerror(status));
        } else {
            uv_tcp_keepalive(&c->s.tcp, 1, KEEPALIVE_DELAY_S);
            uv_read_start((uv_stream_t *)&c->s.tcp, bf_stream_alloc_owned,
                          on_read);
            send_hello(l);
        }
    }
    pthread_mutex_unlock(&l->mu);
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res)
{
    bf_link *l = req->data;
    pthread_mutex_lock(&l->mu);
    l->resolving = NULL;
    free(req);
    if (status == UV_ECANCELED || l->stopping) {
        /* shutting down */
    } else if (status < 0) {
        char why[320];
        snprintf(why, sizeof why, "cannot resolve %s: %s", l->addr_host,
                 uv_strerror(status));
        say_unreachable(l, why);
        schedule_reconnect(l);
    } else {
        conn *c = bf_xcalloc(1, sizeof *c);
        c->l = l;
        c->connect_req.data = c;
        bf_frame_reader_init(&c->rd, 0);
        bf_stream_conn_init(&c->s, &l->loop, on_conn_closed);
        l->conn = c;
        int rc = uv_tcp_connect(&c->connect_req, &c->s.tcp, res->ai_addr,
                                on_connected);
        if (rc < 0)
            drop_conn(l, uv_strerror(rc));
    }
    uv_freeaddrinfo(res);
    pthread_mutex_unlock(&l->mu);
}

static void connect_now(bf_link *l)
{
    if (l->conn || l->resolving || l->stopping || l->fatal[0])
        return;
    char port[16];
    snprintf(port, sizeof port, "%d", l->port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM };
    uv_getaddrinfo_t *req = bf_xmalloc(sizeof *req);
    req->data = l;
    l->resolving = req;
    int rc = uv_getaddrinfo(&l->loop, req, on_resolved, l->addr_host, port,
                            &hints);
    if (rc < 0) {
        l->resolving = NULL;
        free(req);
        char why[320];
        snprintf(why, sizeof why, "cannot resolve %s: %s", l->addr_host,
                 uv_strerror(rc));
        say_unreachable(l, why);
        schedule_reconnect(l);
    }
}

static void on_reconnect_timer(uv_timer_t *t)
{
    bf_link *l = t->data;
    pthread_mutex_lock(&l->mu);
    connect_now(l);
    pthread_mutex_unlock(&l->mu);
}

static void schedule_reconnect(bf_link *l)
{
    if (l->stopping || l->fatal[0])
        return;
    uv_timer_start(&l->reconnect_timer, on_reconnect_timer,
                   (uint64_t)l->backoff_ms, 0);
    l->backoff_ms = l->backoff_ms * 2 > l->backoff_max_ms
                    ? l->backoff_max_ms : l->backoff_ms * 2;
}

/* ---- the loop (network thread) -------------------------------------------- */

static void on_batch_timer(uv_timer_t *t)
{
    bf_link *l = t->data;
    pthread_mutex_lock(&l->mu);
    l->hold_resends = 0;
    cut_batch(l);
    pump(l);
    pthread_mutex_unlock(&l->mu);
}

static void close_handles(bf_link *l)
{
    if (l->resolving)
        uv_cancel((uv_req_t *)l->resolving);
    if (l->conn) {
        bf_stream_conn_close(&l->conn->s);
        l->conn = NULL;
    }
    uv_close((uv_handle_t *)&l->batch_timer, NULL);
    uv_close((uv_handle_t *)&l->heartbeat_timer, NULL);
    uv_close((uv_handle_t *)&l->reconnect_timer, NULL);
    uv_close((uv_handle_t *)&l->wake, NULL);
}

/* The training thread changed something: follow it. */
static void on_wake(uv_async_t *a)
{
    bf_link *l = a->data;
    pthread_mutex_lock(&l->mu);
    if (l->stopping) {
        close_handles(l);
    } else {
        sync_heartbeat_timer(l);
        if (json_array_size(l->pending) >= (size_t)l->batch_records)
            cut_batch(l);
        pump(l);
    }
    /* Also how a signal handler's interrupt reaches a blocked caller. */
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->mu);
}

static void *network_thread(void *arg)
{
    bf_link *l = arg;
    uv_run(&l->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* ---- the training thread's side ------------------------------------------- */

void bf_link_wake(bf_link *l)
{
    uv_async_send(&l->wake);
}

/* One wait on `changed`, until deadline_ms (monotonic; < 0: no limit). */
static void wait_changed(bf_link *l, int64_t deadline_ms)
{
    if (deadline_ms < 0) {
        pthread_cond_wait(&l->changed, &l->mu);
        return;
    }
    struct timespec ts = { .tv_sec = deadline_ms / 1000,
                           .tv_nsec = (deadline_ms % 1000) * 1000000L };
    pthread_cond_timedwait(&l->changed, &l->mu, &ts);
}

static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : bf_monotonic_ms() + timeout_ms;
}

static int expired(int64_t deadline_ms)
{
    return deadline_ms >= 0 && bf_monotonic_ms() >= deadline_ms;
}

static int fatal_error(bf_link *l, bf_error *err)
{
    bf_error_set(err, NULL, 0, NULL, "%s", l->fatal);
    return BF_LINK_ERR;
}

/* An integer member >= min, or an error naming it. */
static int check_int(const json_t *msg, const char *key, json_int_t min,
                     bf_error *err)
{
    json_t *v = json_object_get(msg, key);
    if (json_is_integer(v) && json_integer_value(v) >= min)
        return 0;
    return bf_error_set(err, NULL, 0, key, "'%s' must be an integer >= %lld",
                        key, (long long)min);
}

/* Every field of a job reply (docs/protocol.md), checked before the group
 * acts on it. */
static int check_job(const json_t *job, bf_error *err)
{
    json_t *ck = json_object_get(job, "resume_checkpoint");
    if (check_int(job, "job_id", 1, err) || check_int(job, "attempt_id", 1, err)
        || check_int(job, "sweep_id", 1, err)
        || check_int(job, "attempt_no", 1, err)
        || check_int(job, "lease_seconds", 1, err)
        || check_int(job, "resume_step", 0, err))
        return -1;
    if (!json_is_object(json_object_get(job, "config")))
        return bf_error_set(err, NULL, 0, "config", "'config' must be an "
                            "object");
    if (!json_is_null(ck) && (!json_is_string(ck) || !json_string_length(ck)))
        return bf_error_set(err, NULL, 0, "resume_checkpoint",
                            "'resume_checkpoint' must be null or a path");
    return 0;
}

int bf_link_request_job(bf_link *l, json_t **job, bf_link_no_job *none,
                        bf_error *err)
{
    *job = NULL;
    *none = (bf_link_no_job){.retry_ms = DEFAULT_RETRY_MS};
    pthread_mutex_lock(&l->mu);
    l->req = REQ_WANTED;
    snprintf(l->req_token, sizeof l->req_token, "%016llx-%llu",
             (unsigned long long)l->req_nonce,
             (unsigned long long)++l->req_count);
    bf_link_wake(l);
    while (l->req != REQ_ANSWERED && !l->fatal[0] && !interrupted(l))
        wait_changed(l, -1);
    json_t *reply = l->req_reply;
    l->req_reply = NULL;
    int answered = l->req == REQ_ANSWERED;
    l->req = REQ_IDLE;
    int rc = !answered ? (l->fatal[0] ? fatal_error(l, err)
                                      : BF_LINK_INTERRUPTED) : 0;
    pthread_mutex_unlock(&l->mu);
    if (!answered)
        return rc;

    const char *type = bf_wire_type(reply);
    if (strcmp(type, "job") == 0 && check_job(reply, err) == 0) {
        *job = reply;
        return 1;
    }
    if (strcmp(type, "job") == 0) {
        /* Running it would report on an attempt the coordinator cannot
         * name (attempt_id 0 or "7": reports that are never sent). */
        bf_log_error("link: refused a malformed job from the coordinator: "
                     "%s", err->msg);
        bf_error_clear(err);
        json_decref(reply);
        return 0;
    }
    if (strcmp(type, "no_job") == 0) {
        json_t *r = json_object_get(reply, "retry_ms");
        /* Bounded: a daemon's word must not put the group to sleep for
         * days (or, past INT_MAX, forever). */
        if (json_is_integer(r) && json_integer_value(r) > 0)
            none->retry_ms = json_integer_value(r) < MAX_RETRY_MS
                             ? (int)json_integer_value(r) : MAX_RETRY_MS;
        /* absent from a coordinator older than the field: no */
        none->pending = json_is_true(json_object_get(reply, "pending"));
    } else {
        bf_log_warn("link: request_job answered with '%s': %s", type,
                    error_text(reply));
    }
    json_decref(reply);
    return 0;
}

int bf_link_sleep(bf_link *l, int ms)
{
    int64_t deadline = deadline_after(ms);
    pthread_mutex_lock(&l->mu);
    while (!expired(deadline) && !l->fatal[0] && !interrupted(l))
        wait_changed(l, deadline);
    int rc = l->fatal[0] ? BF_LINK_ERR
           : interrupted(l) ? BF_LINK_INTERRUPTED : BF_LINK_OK;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void bf_link_begin_attempt(bf_link *l, int64_t attempt_id, int lease_seconds)
{
    pthread_mutex_lock(&l->mu);
    l->attempt_id = attempt_id;
    /* Heartbeats every lease/3 ms must fit an int. */
    l->lease_seconds = lease_seconds <= 0 ? 30
                     : lease_seconds > MAX_LEASE_SECONDS ? MAX_LEASE_SECONDS
                     : lease_seconds;
    l->seq = 0;
    l->cancelled = attempt_id == l->early_cancel;
    l->fenced = 0;
    l->finish_result = FINISH_NONE;
    json_array_clear(l->pending);
    bf_link_wake(l);
    pthread_mutex_unlock(&l->mu);
}

/* The checkpoint record's message (under mu).  The records before it go
 * first: once the coordinator records the checkpoint, everything it
 * supersedes is stored. */
static void queue_checkpoint(bf_link *l, const bf_record *r)
{
    cut_batch(l);
    int64_t id = ++l->next_id;
    json_t *msg = json_pack("{s:s, s:I, s:I, s:s, s:i}",
                            "type", "checkpoint", "id", (json_int_t)id,
                            "attempt_id", (json_int_t)l->attempt_id,
                            "path", r->u.checkpoint.path, "step", r->step);
    if (msg)
        append_entry(l, ENTRY_CHECKPOINT, msg, id, 0);
    else
        bf_log_error("link: checkpoint record without a path dropped");
    bf_link_wake(l);
}

/* Adds a metrics record to the batch being filled (under mu). */
static void queue_metric(bf_link *l, json_t *rec)
{
    json_array_append_new(l->pending, rec);
    if (json_array_size(l->pending) >= (size_t)l->batch_records)
        bf_link_wake(l);
}

void bf_link_emit(bf_link *l, const bf_record *record)
{
    bf_record_route route = bf_record_kinds[record->kind].route;
    if (route == BF_ROUTE_NONE)
        return;
    /* The link is an edge: batched records become JSON here, before the
     * lock, so the network thread never waits for the encoding. */
    json_t *rec = route == BF_ROUTE_METRICS ? bf_record_to_json(record)
                                            : NULL;
    pthread_mutex_lock(&l->mu);
    if (!l->attempt_id || l->fenced)
        json_decref(rec);
    else if (route == BF_ROUTE_CHECKPOINT)
        queue_checkpoint(l, record);
    else if (rec)
        queue_metric(l, rec);
    pthread_mutex_unlock(&l->mu);
}

void bf_link_checkpoint_bad(bf_link *l, const char *path, const char *why)
{
    pthread_mutex_lock(&l->mu);
    if (l->attempt_id && !l->fenced) {
        int64_t id = ++l->next_id;
        json_t *msg = json_pack("{s:s, s:I, s:I, s:s, s:s}",
                                "type", "checkpoint_bad", "id", (json_int_t)id,
                                "attempt_id", (json_int_t)l->attempt_id,
                                "path", path, "error", why);
        append_entry(l, ENTRY_CHECKPOINT, msg, id, 0);
        bf_link_wake(l);
    }
    pthread_mutex_unlock(&l->mu);
}

void bf_link_report(bf_link *l, int64_t job_id, const char *error,
                    int permanent, int timeout_ms)
{
    bf_error err;
    bf_error_clear(&err);
    int rc = bf_link_finish_attempt(l, error, permanent, timeout_ms, &err);
    if (rc == BF_LINK_FENCED)
        bf_log_warn("job %lld: lease lost; not reported", (long long)job_id);
    else if (rc == BF_LINK_TIMEOUT)
        bf_log_warn("job %lld: coordinator unreachable; report not "
                    "acknowledged", (long long)job_id);
    else if (rc == BF_LINK_ERR)
        bf_log_error("job %lld: report failed: %s", (long long)job_id,
                     err.msg);
    else if (error && bf_link_attempt_state(l) == BF_LINK_CANCELLED)
        /* told to stop: no failure (a pruned trial is one; the coordinator
         * records which) */
        bf_log_info("job %lld: stopped as the coordinator asked (cancelled, "
                    "or pruned by its search)", (long long)job_id);
    else if (error)
        bf_log_info("job %lld: reported %sfailure: %s", (long long)job_id,
                    permanent ? "permanent " : "", error);
}

static volatile sig_atomic_t *signal_flag;
static bf_link *signal_link;

static void on_stop_signal(int sig)
{
    /* bf_link_wake write()s: keep the interrupted code's errno (e.g. a
     * mkdir's EEXIST check, a strerror after a failed write). */
    int saved_errno = errno;
    *signal_flag = sig;
    if (signal_link)
        bf_link_wake(signal_link);
    errno = saved_errno;
}

void bf_link_catch_stop_signals(volatile sig_atomic_t *flag, bf_link *l)
{
    signal_flag = flag;
    signal_link = l;
    bf_catch_stop_signals(on_stop_signal);
}

int64_t bf_link_offline_ms(bf_link *l)
{
    pthread_mutex_lock(&l->mu);
    int64_t ms = l->online ? 0 : bf_monotonic_ms() - l->offline_since_ms;
    pthread_mutex_unlock(&l->mu);
    return ms;
}

int bf_link_attempt_state(bf_link *l)
{
    pthread_mutex_lock(&l->mu);
    int state = l->fenced ? BF_LINK_FENCED
              : l->cancelled ? BF_LINK_CANCELLED : BF_LINK_OK;
    pthread_mutex_unlock(&l->mu);
    return state;
}

/* Queues the final report of the live attempt (under mu). */
static void queue_finish(bf_link *l, const char *error, int permanent)
{
    cut_batch(l);
    int64_t id = ++l->next_id;
    json_t *msg = json_pack("{s:s, s:I, s:I}",
                            "type", error ? "job_failed" : "job_done",
                            "id", (json_int_t)id,
                            "attempt_id", (json_int_t)l->attempt_id);
    if (error)
        json_object_set_new(msg, "error", json_string(error));
    if (error && permanent)
        json_object_set_new(msg, "permanent", json_true());
    append_entry(l, ENTRY_FINISH, msg, id, 0);
    l->finish_result = FINISH_WAITING;
}

int bf_link_finish_attempt(bf_link *l, const char *error, int permanent,
                           int timeout_ms, bf_error *err)
{
    int64_t deadline = deadline_after(timeout_ms);
    pthread_mutex_lock(&l->mu);
    int rc = BF_LINK_OK;
    if (l->fenced) {
        rc = BF_LINK_FENCED;
    } else if (l->attempt_id) {
        queue_finish(l, error, permanent);
        bf_link_wake(l);
        while (l->finish_result == FINISH_WAITING && !l->fatal[0] &&
               !expired(deadline)) {
            if (deadline < 0 && interrupted(l))
                deadline = deadline_after(INTERRUPT_GRACE_MS);
            wait_changed(l, deadline);
        }
        rc = l->finish_result;
        if (rc == FINISH_WAITING)
            rc = l->fatal[0] ? fatal_error(l, err) : BF_LINK_TIMEOUT;
        else if (rc == BF_LINK_ERR)
            bf_error_set(err, NULL, 0, NULL, "%s", l->finish_error);
    }
    drop_attempt_entries(l, l->attempt_id);
    l->attempt_id = 0;
    l->finish_result = FINISH_NONE;
    bf_link_wake(l);   /* stops the heartbeats */
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void bf_link_get_stats(bf_link *l, bf_link_stats *out)
{
    pthread_mutex_lock(&l->mu);
    *out = l->stats;
    pthread_mutex_unlock(&l->mu);
}

/* ---- start / stop --------------------------------------------------------- */

static int positive_or(int v, int dflt) { return v > 0 ? v : dflt; }

static void link_free(bf_link *l)
{
    while (l->head)
        remove_entry(l, l->head);
    json_decref(l->pending);
    json_decref(l->req_reply);
    free(l->server);
    free(l->token);
    free(l->name);
    free(l->host);
    free(l->trainer);
    pthread_cond_destroy(&l->changed);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static void init_handles(bf_link *l)
{
    uv_loop_init(&l->loop);
    uv_async_init(&l->loop, &l->wake, on_wake);
    uv_timer_init(&l->loop, &l->batch_timer);
    uv_timer_init(&l->loop, &l->heartbeat_timer);
    uv_timer_init(&l->loop, &l->reconnect_timer);
    l->wake.data = l->batch_timer.data = l->heartbeat_timer.data =
        l->reconnect_timer.data = l;
    uv_timer_start(&l->batch_timer, on_batch_timer, (uint64_t)l->batch_ms,
                   (uint64_t)l->batch_ms);
}

/* 64 random bits from the kernel; should it have none to give, the time
 * and pid, which still tell two groups' links apart. */
static uint64_t random_nonce(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    return (uint64_t)bf_wall_ms() * 1000003u ^ (uint64_t)getpid();
}

int bf_link_start(bf_link **out, const bf_link_opts *o, bf_error *err)
{
    bf_stream_use_allocator();    /* before the first libuv call */
    *out = NULL;
    bf_link *l = bf_xcalloc(1, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->changed, &ca);
    pthread_condattr_destroy(&ca);
    l->pending = json_array();
    l->tail = &l->head;
    l->finish_result = FINISH_NONE;
    l->req_nonce = random_nonce();
    if (bf_wire_parse_host_port(o->server, l->addr_host, sizeof l->addr_host,
                                &l->port, err) != 0) {
        link_free(l);
        return -1;
    }
    l->server = bf_xstrdup(o->server);
    l->token = bf_xstrdup(o->token);
    l->name = bf_xstrdup(o->name);
    l->host = bf_xstrdup(o->host ? o->host : "");
    l->trainer = o->trainer ? bf_xstrdup(o->trainer) : NULL;
    l->offline_since_ms = bf_monotonic_ms();
    l->ranks = positive_or(o->ranks, 1);
    l->batch_ms = positive_or(o->batch_ms, DEFAULT_BATCH_MS);
    l->batch_records = positive_or(o->batch_records, DEFAULT_BATCH_RECORDS);
    l->backoff_min_ms = positive_or(o->backoff_min_ms, DEFAULT_BACKOFF_MIN_MS);
    l->backoff_max_ms = positive_or(o->backoff_max_ms, DEFAULT_BACKOFF_MAX_MS);
    l->backoff_ms = l->backoff_min_ms;
    l->interrupt = o->interrupt;
    init_handles(l);
    connect_now(l);

    /* Signals belong to the training thread, which can act on them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&l->thread, NULL, network_thread, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close_handles(l);
        uv_run(&l->loop, UV_RUN_DEFAULT);
        uv_loop_close(&l->loop);
        link_free(l);
        return bf_error_set(err, NULL, 0, NULL,
                            "cannot start the network thread");
    }
    *out = l;
    return 0;
}

void bf_link_stop(bf_link *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    bf_link_wake(l);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    uv_loop_close(&l->loop);
    link_free(l);
}
