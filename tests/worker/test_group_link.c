/* The coordinator link (worker/link.h) against a scripted coordinator: a
 * real loopback socket whose every reply the test chooses, so reconnects,
 * resends, withheld acks, cancels and fencing happen exactly when the test
 * says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "link.h"
#include "rpc.h"

#define TOKEN "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

/* ---- a scripted coordinator ------------------------------------------------ */

typedef struct fake {
    int listen_fd;
    char addr[64];
    bf_rpc conn;     /* the accepted connection, fd -1 when none */
    int heartbeats;        /* heartbeats answered */
    int64_t fence_attempt; /* heartbeats of this attempt get "fenced" */
} fake;

static void fake_listen(fake *f)
{
    memset(f, 0, sizeof *f);
    f->conn.fd = -1;
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->listen_fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->listen_fd, 4), 0);
    socklen_t len = sizeof a;
    getsockname(f->listen_fd, (struct sockaddr *)&a, &len);
    snprintf(f->addr, sizeof f->addr, "127.0.0.1:%d", ntohs(a.sin_port));
}

static void fake_drop(fake *f)
{
    if (f->conn.fd >= 0)
        bf_rpc_close(&f->conn);
    f->conn.fd = -1;
}

static void fake_close(fake *f)
{
    fake_drop(f);
    close(f->listen_fd);
}

static void fake_accept(fake *f)
{
    struct pollfd p = { .fd = f->listen_fd, .events = POLLIN };
    assert_int_equal(poll(&p, 1, 5000), 1);
    int fd = accept(f->listen_fd, NULL, NULL);
    assert_true(fd >= 0);
    f->conn.fd = fd;
    bf_frame_reader_init(&f->conn.rd, 0);
}

static void fake_send(fake *f, json_t *msg)
{
    bf_error err;
    assert_int_equal(bf_rpc_send(&f->conn, msg, &err), 0);
    json_decref(msg);
}

static json_t *ack_for(const json_t *msg)
{
    return json_pack("{s:s, s:O, s:O}", "type", "ack",
                     "id", json_object_get(msg, "id"),
                     "attempt_id", json_object_get(msg, "attempt_id"));
}

/* The next message other than a heartbeat (answered as the test set up),
 * or NULL after timeout_ms. */
static json_t *fake_recv(fake *f, int timeout_ms)
{
    for (;;) {
        bf_error err;
        json_t *m = bf_rpc_recv(&f->conn, timeout_ms, &err);
        if (!m || strcmp(bf_wire_type(m), "heartbeat") != 0)
            return m;
        int64_t attempt = json_integer_value(json_object_get(m,
                                                             "attempt_id"));
        json_t *reply = ack_for(m);
        if (attempt == f->fence_attempt) {
            json_decref(reply);
            reply = bf_wire_error("fenced", json_object_get(m, "id"), NULL,
                                  "attempt %lld is no longer live",
                                  (long long)attempt);
            json_object_set_new(reply, "attempt_id", json_integer(attempt));
        }
        f->heartbeats++;
        fake_send(f, reply);
        json_decref(m);
    }
}

static json_t *fake_expect(fake *f, const char *type)
{
    json_t *m = fake_recv(f, 5000);
    assert_non_null(m);
    assert_string_equal(bf_wire_type(m), type);
    return m;
}

/* Accepts the link's connection and acknowledges its hello. */
static void fake_accept_hello(fake *f)
{
    fake_accept(f);
    json_t *hello = fake_expect(f, "hello");
    assert_string_equal(json_string_value(json_object_get(hello, "token")),
                        TOKEN);
    assert_string_equal(json_string_value(json_object_get(hello, "role")),
                        "worker");
    assert_string_equal(json_string_value(json_object_get(hello, "name")),
                        "w-test");
    assert_int_equal(json_integer_value(json_object_get(hello, "ranks")), 2);
    fake_send(f, json_pack("{s:s, s:O, s:i}", "type", "ack", "id",
                           json_object_get(hello, "id"), "lease_seconds", 30));
    json_decref(hello);
}

/* ---- the link under test ---------------------------------------------------- */

static volatile sig_atomic_t interrupt_flag;

static bf_link *start_link(const fake *f)
{
    interrupt_flag = 0;
    bf_link_opts o = { .server = f->addr, .token = TOKEN, .name = "w-test",
                       .host = "testhost", .ranks = 2, .batch_ms = 50,
                       .batch_records = 3, .backoff_min_ms = 10,
                       .backoff_max_ms = 40, .interrupt = &interrupt_flag };
    bf_link *l;
    bf_error err;
    assert_int_equal(bf_link_start(&l, &o, &err), 0);
    return l;
}

static void emit_train(bf_link *l, int step)
{
    bf_record r = {.kind = BF_RECORD_TRAIN, .step = step};
    r.u.train.value[BF_METRIC_LOSS] = 1.0 / step;
    r.u.train.value[BF_METRIC_LR] = 1e-3;
    bf_link_emit(l, &r);
}

static void emit_checkpoint(bf_link *l, int step, const char *path)
{
    bf_record r = {.kind = BF_RECORD_CHECKPOINT, .step = step,
                   .u.checkpoint.path = path};
    bf_link_emit(l, &r);
}

static void emit_done(bf_link *l, int step)
{
    bf_record r = {.kind = BF_RECORD_DONE, .step = step};
    bf_link_emit(l, &r);
}

/* bf_link_finish_attempt blocks until acknowledged: run it aside. */
typedef struct finisher {
    pthread_t thread;
    bf_link *link;
    const char *error;
    int permanent;
    int result;
} finisher;

static void *finish_main(void *arg)
{
    finisher *fin = arg;
    bf_error err;
    fin->result = bf_link_finish_attempt(fin->link, fin->error,
                                         fin->permanent, 10000, &err);
    return NULL;
}

static void finish_async(finisher *fin, bf_link *l, const char *error)
{
    fin->link = l;
    fin->error = error;
    fin->permanent = error && strstr(error, "permanent") != NULL;
    fin->result = 99;
    assert_int_equal(pthread_create(&fin->thread, NULL, finish_main, fin), 0);
}

static int wait_state(bf_link *l, int want)
{
    for (int i = 0; i < 500; i++) {
        if (bf_link_attempt_state(l) == want)
            return 1;
        bf_sleep_ms(10);
    }
    return 0;
}

/* ---- tests ---------------------------------------------------------------- */

/* A metrics message that was never acknowledged goes again, unchanged,
 * after the coordinator comes back; the final report waits for every ack,
 * and the checkpoint message follows the metrics queued before it. */
static void test_resend_after_reconnect(void **state)
{
    (void)state;
    fake f;
    fake_listen(&f);
    bf_link *l = start_link(&f);
    fake_accept_hello(&f);
    bf_link_begin_attempt(l, 77, 30);
    for (int s = 1; s <= 3; s++)
        emit_train(l, s);   /* batch_records = 3: sent at once */
    json_t *first = fake_expect(&f, "metrics");
    assert_int_equal(json_integer_value(json_object_get(first, "attempt_id")),
                     77);
    assert_int_equal(json_integer_value(json_object_get(first, "seq")), 1);
    assert_int_equal(json_array_size(json_object_get(first, "records")), 3);

    fake_drop(&f);                 /* the coordinator "dies" un-acked */
    fake_accept_hello(&f);         /* ... and comes back */
    json_t *again = fake_expect(&f, "metrics");
    assert_true(json_equal(first, again));
    fake_send(&f, ack_for(again));
    json_decref(first);
    json_decref(again);

    emit_train(l, 4);
    emit_checkpoint(l, 4, "/ck/4");
    emit_done(l, 4);
    finisher fin;
    finish_async(&fin, l, NULL);
    json_t *m2 = fake_expect(&f, "metrics");
    assert_int_equal(json_integer_value(json_object_get(m2, "seq")), 2);
    json_t *recs = json_object_get(m2, "records");
    assert_int_equal(json_array_size(recs), 1);
    assert_int_equal(json_integer_value(json_object_get(
        json_array_get(recs, 0), "step")), 4);
    /* The checkpoint waits for the ack of the metrics before it. */
    assert_null(fake_recv(&f, 300));
    fake_send(&f, ack_for(m2));
    json_t *ck = fake_expect(&f, "checkpoint");
    assert_string_equal(json_string_value(json_object_get(ck, "path")),
                        "/ck/4");
    assert_int_equal(json_integer_value(json_object_get(ck, "step")), 4);
    /* Nothing acknowledged yet: no job_done may come. */
    assert_null(fake_recv(&f, 300));
    fake_send(&f, ack_for(ck));
    json_t *done = fake_expect(&f, "job_done");
    assert_int_equal(json_integer_value(json_object_get(done, "attempt_id")),
                     77);
    fake_send(&f, ack_for(done));
    pthread_join(fin.thread, NULL);
    assert_int_equal(fin.result, BF_LINK_OK);

    bf_link_stats st;
    bf_link_get_stats(l, &st);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.messages_resent, 1);
    assert_int_equal(st.records_acked, 4);
    json_decref(m2);
    json_decref(ck);
    json_decref(done);
    bf_link_stop(l);
    fake_close(&f);
}

/* A cancel push stops the attempt; the report says "cancelled".  Then a
 * fenced heartbeat: the attempt is dropped and nothing more is reported. */
static void test_cancel_then_fenced(void **state)
{
    (void)state;
    fake f;
    fake_listen(&f);
    bf_link *l = start_link(&f);
    fake_accept_hello(&f);
    bf_link_begin_attempt(l, 5, 30);
    assert_int_equal(bf_link_attempt_state(l), BF_LINK_OK);
    fake_send(&f, json_pack("{s:s, s:i}", "type", "cancel", "attempt_id", 4));
    fake_send(&f, json_pack("{s:s, s:i}", "type", "cancel", "attempt_id", 5));
    assert_true(wait_state(l, BF_LINK_CANCELLED));
    finisher fin;
    finish_async(&fin, l, "cancelled");
    json_t *failed = fake_expect(&f, "job_failed");
    assert_string_equal(json_string_value(json_object_get(failed, "error")),
                        "cancelled");
    assert_null(json_object_get(failed, "permanent"));
    fake_send(&f, ack_for(failed));
    pthread_join(fin.thread, NULL);
    assert_int_equal(fin.result, BF_LINK_OK);
    json_decref(failed);

    /* A permanent failure says so: the job fails at once. */
    bf_link_begin_attempt(l, 7, 30);
    finish_async(&fin, l, "init_from x: cannot open (permanent)");
    failed = fake_expect(&f, "job_failed");
    assert_true(json_is_true(json_object_get(failed, "permanent")));
    fake_send(&f, ack_for(failed));
    pthread_join(fin.thread, NULL);
    assert_int_equal(fin.result, BF_LINK_OK);
    json_decref(failed);

    f.fence_attempt = 6;
    bf_link_begin_attempt(l, 6, 1);   /* heartbeats every 333 ms */
    assert_int_equal(bf_link_attempt_state(l), BF_LINK_OK);
    assert_null(fake_recv(&f, 600));  /* answers the heartbeat: fenced */
    assert_true(f.heartbeats >= 1);
    assert_true(wait_state(l, BF_LINK_FENCED));
    for (int s = 1; s <= 3; s++)
        emit_train(l, s);             /* dropped: the lease is gone */
    bf_error err;
    assert_int_equal(bf_link_finish_attempt(l, NULL, 0, 1000, &err),
                     BF_LINK_FENCED);
    assert_null(fake_recv(&f, 300));  /* no metrics, no job_done */
    bf_link_stop(l);
    fake_close(&f);
}

/* A checkpoint is reported only once every metrics message before it was
 * acknowledged: if the coordinator fails to store a batch (`store` error at
 * ingest) but records the checkpoint pipelined right behind it, the next
 * attempt would resume past records that were never stored, and a worker
 * that died before its resend would lose them for good. */
static void test_checkpoint_waits_for_metrics_ack(void **state)
{
    (void)state;
    fake f;
    fake_listen(&f);
    bf_link *l = start_link(&f);
    fake_accept_hello(&f);
    bf_link_begin_attempt(l, 31, 30);
    emit_train(l, 1);
    emit_checkpoint(l, 1, "/ck/1");
    json_t *m = fake_expect(&f, "metrics");
    /* Not acknowledged yet: the checkpoint must not be on its way. */
    assert_null(fake_recv(&f, 300));
    json_t *e = bf_wire_error("store", json_object_get(m, "id"), NULL,
                              "disk full");
    json_object_set_new(e, "attempt_id", json_integer(31));
    fake_send(&f, e);
    json_t *again = fake_expect(&f, "metrics");   /* kept and resent */
    assert_true(json_equal(m, again));
    assert_null(fake_recv(&f, 150));
    fake_send(&f, ack_for(again));
    json_t *ck = fake_expect(&f, "checkpoint");
    fake_send(&f, ack_for(ck));
    finisher fin;
    finish_async(&fin, l, NULL);
    json_t *done = fake_expect(&f, "job_done");
    fake_send(&f, ack_for(done));
    pthread_join(fin.thread, NULL);
    assert_int_equal(fin.result, BF_LINK_OK);
    json_decref(m);
    json_decref(again);
    json_decref(ck);
    json_decref(done);
    bf_link_stop(l);
    fake_close(&f);
}

/* A complete job reply to request q, as bifocald sends it. */
static json_t *job_reply(const json_t *q, int job_id, int attempt_id)
{
    return json_pack("{s:s, s:O, s:i, s:i, s:i, s:i, s:{s:i}, s:n, s:i, s:i}",
                     "type", "job", "id", json_object_get(q, "id"),
                     "job_id", job_id, "attempt_id", attempt_id,
                     "sweep_id", 1, "attempt_no", 1, "config", "steps", 10,
                     "resume_checkpoint", "resume_step", 0,
                     "lease_seconds", 30);
}

/* A request_job's token: "NONCE-N", 16 hex digits and the ask's number. */
static const char *request_token(const json_t *q)
{
    const char *t = json_string_value(json_object_get(q, "request"));
    assert_non_null(t);
    assert_true(strlen(t) > 17 && t[16] == '-' &&
                strspn(t, "0123456789abcdef") == 16);
    return t;
}

/* bf_link_request_job blocks until answered: run it aside too. */
struct req { bf_link *l; json_t *job; bf_link_no_job none; int rc; };

static void *request_main(void *arg)
{
    struct req *r = arg;
    bf_error err;
    r->rc = bf_link_request_job(r->l, &r->job, &r->none, &err);
    return NULL;
}

/* One ask of l answered by a no_job with `fields` (stolen) added; the
 * ask's token in token[cap]. */
static struct req answer_no_job(fake *f, bf_link *l, json_t *fields,
                                char *token, size_t cap)
{
    struct req r = { .l = l };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, request_main, &r), 0);
    json_t *q = fake_expect(f, "request_job");
    snprintf(token, cap, "%s", request_token(q));
    json_t *reply = json_pack("{s:s, s:O}", "type", "no_job", "id",
                              json_object_get(q, "id"));
    json_object_update(reply, fields);
    json_decref(fields);
    fake_send(f, reply);
    json_decref(q);
    pthread_join(th, NULL);
    return r;
}

/* request_job: no_job carries its retry time and whether work is
 * pending (absent: not, as from a coordinator older than the field); a
 * request whose reply was lost with the connection is asked again after
 * the reconnect. */
static void test_request_job(void **state)
{
    (void)state;
    fake f;
    fake_listen(&f);
    bf_link *l = start_link(&f);
    fake_accept_hello(&f);
    json_t *job = NULL;
    bf_link_no_job none;
    bf_error err;

    /* 1: no_job, without `pending` and then with it */
    char first[64];
    struct req r1 = answer_no_job(&f, l, json_pack("{s:i}", "retry_ms", 123),
                                  first, sizeof first);
    assert_int_equal(r1.rc, 0);
    assert_int_equal(r1.none.retry_ms, 123);
    assert_int_equal(r1.none.pending, 0);
    assert_null(r1.job);
    char token[64];
    struct req r1b = answer_no_job(&f, l, json_pack("{s:i, s:b}", "retry_ms",
                                                    50, "pending", 1),
                                   token, sizeof token);
    assert_string_not_equal(token, first);   /* a new ask, a new token */
    assert_int_equal(r1b.none.retry_ms, 50);
    assert_int_equal(r1b.none.pending, 1);
    assert_null(r1b.job);
    pthread_t th;
    json_t *q;

    /* 2: the reply is lost with the connection; asked again, under the
     * same token (the coordinator hands that ask's lease again), then a
     * job.  Each ask has a token of its own. */
    struct req r2 = { .l = l };
    assert_int_equal(pthread_create(&th, NULL, request_main, &r2), 0);
    q = fake_expect(&f, "request_job");
    char second[64];
    snprintf(second, sizeof second, "%s", request_token(q));
    assert_string_not_equal(second, first);
    json_decref(q);
    fake_drop(&f);
    fake_accept_hello(&f);
    q = fake_expect(&f, "request_job");
    assert_string_equal(request_token(q), second);
    fake_send(&f, job_reply(q, 9, 21));
    json_decref(q);
    pthread_join(th, NULL);
    assert_int_equal(r2.rc, 1);
    assert_non_null(r2.job);
    assert_int_equal(json_integer_value(json_object_get(r2.job,
                                                        "attempt_id")), 21);
    json_decref(r2.job);

    /* 3: malformed jobs are refused (and logged), not run: attempt_id 0,
     * a string id, a missing config.  The worker used to run them and
     * then report failures that were never sent. */
    for (int i = 0; i < 3; i++) {
        struct req rb = { .l = l };
        assert_int_equal(pthread_create(&th, NULL, request_main, &rb), 0);
        q = fake_expect(&f, "request_job");
        json_t *bad = job_reply(q, 9, 22);
        if (i == 0)
            json_object_set_new(bad, "attempt_id", json_integer(0));
        else if (i == 1)
            json_object_set_new(bad, "job_id", json_string("9"));
        else
            json_object_del(bad, "config");
        fake_send(&f, bad);
        json_decref(q);
        pthread_join(th, NULL);
        assert_int_equal(rb.rc, 0);
        assert_null(rb.job);
    }

    /* 4: interrupted while waiting */
    interrupt_flag = 1;
    bf_link_wake(l);
    assert_int_equal(bf_link_request_job(l, &job, &none, &err),
                     BF_LINK_INTERRUPTED);
    assert_int_equal(bf_link_sleep(l, 5000), BF_LINK_INTERRUPTED);
    bf_link_stop(l);
    fake_close(&f);
}

/* A cancel push can overtake the job it cancels: the daemon sends it as
 * soon as a user cancels, which may be right after the job reply and
 * before the group began the attempt.  It must still stop that attempt
 * (and no other). */
static void test_cancel_before_attempt_begins(void **state)
{
    (void)state;
    fake f;
    fake_listen(&f);
    bf_link *l = start_link(&f);
    fake_accept_hello(&f);
    struct req r = { .l = l };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, request_main, &r), 0);
    json_t *q = fake_expect(&f, "request_job");
    fake_send(&f, json_pack("{s:s, s:i}", "type", "cancel", "attempt_id", 7));
    fake_send(&f, job_reply(q, 3, 7));
    json_decref(q);
    pthread_join(th, NULL);
    assert_int_equal(r.rc, 1);
    json_decref(r.job);
    bf_link_begin_attempt(l, 7, 30);
    assert_int_equal(bf_link_attempt_state(l), BF_LINK_CANCELLED);
    bf_link_begin_attempt(l, 8, 30);
    assert_int_equal(bf_link_attempt_state(l), BF_LINK_OK);
    bf_link_stop(l);
    fake_close(&f);
}

/* A refused hello (wrong token) is final: calls fail with the reason and
 * the link does not hammer the coordinator with reconnects. */
static void test_hello_refused(void **state)
{
    (void)state;
    fake f;
    fake_listen(&f);
    bf_link *l = start_link(&f);
    fake_accept(&f);
    json_t *hello = fake_expect(&f, "hello");
    fake_send(&f, bf_wire_error("auth", json_object_get(hello, "id"), NULL,
                                "wrong token"));
    json_decref(hello);
    json_t *job = NULL;
    bf_link_no_job none;
    bf_error err;
    bf_error_clear(&err);
    assert_int_equal(bf_link_request_job(l, &job, &none, &err), BF_LINK_ERR);
    assert_non_null(strstr(err.msg, "wrong token"));
    struct pollfd p = { .fd = f.listen_fd, .events = POLLIN };
    assert_int_equal(poll(&p, 1, 200), 0);   /* no second connection */
    bf_link_stop(l);
    fake_close(&f);
}

/* A coordinator nobody listens for is said at warn, once, not at every
 * retry (there are several in 300 ms with the test's 10-40 ms back-off). */
static void test_unreachable_said_once(void **state)
{
    (void)state;
    fake f;
    fake_listen(&f);
    close(f.listen_fd);              /* the port is closed: refused */
    char path[] = "/tmp/bft-link-log-XXXXXX";
    int log_fd = mkstemp(path);
    assert_true(log_fd >= 0);
    int saved = dup(STDERR_FILENO);
    dup2(log_fd, STDERR_FILENO);
    f.listen_fd = -1;
    bf_link *l = start_link(&f);
    bf_sleep_ms(300);
    bf_link_stop(l);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char text[8192] = "";
    ssize_t n = pread(log_fd, text, sizeof text - 1, 0);
    close(log_fd);
    unlink(path);
    text[n > 0 ? n : 0] = '\0';
    fputs(text, stderr);
    const char *first = strstr(text, "WARN  link: cannot reach the coordinator");
    assert_non_null(first);
    assert_non_null(strstr(first, "connection refused"));
    assert_null(strstr(first + 20, "cannot reach the coordinator"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resend_after_reconnect),
        cmocka_unit_test(test_cancel_then_fenced),
        cmocka_unit_test(test_cancel_before_attempt_begins),
        cmocka_unit_test(test_checkpoint_waits_for_metrics_ack),
        cmocka_unit_test(test_request_job),
        cmocka_unit_test(test_hello_refused),
        cmocka_unit_test(test_unreachable_said_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
