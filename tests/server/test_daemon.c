/* The daemon end to end over loopback: a real bifocald process, a real
 * database file, the wire library and the fake worker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "clock.h"
#include "fake_worker.h"
#include "harness.h"

static const char sweep_4[] =
    "name: four\n"
    "grid:\n"
    "  rope: [rope, spectral]\n"
    "seeds: 2\n";

static void send_msg(bf_rpc *c, json_t *msg)
{
    assert_int_equal(bf_rpc_send(c, msg, NULL), 0);
    json_decref(msg);
}

/* The code of an error reply, "" for anything else. */
static const char *error_code(const json_t *m)
{
    if (!m || strcmp(bf_wire_type(m), "error") != 0)
        return "";
    const char *code = json_string_value(json_object_get(m, "code"));
    return code ? code : "";
}

/* A fresh client connection can still be served. */
static void assert_serving(bft_daemon *d)
{
    assert_true(bft_serves_status(d));
}

/* Expects the next message to be an error with this code, then EOF. */
static void assert_refused(bf_rpc *c, const char *code)
{
    assert_true(bft_refused_with(c, code));
}

static void test_auth_refusals(void **state)
{
    bft_daemon *d = *state;
    bf_rpc c;

    /* The token the daemon made on first start is its owner's secret. */
    struct stat st;
    assert_int_equal(stat(d->token_file, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(strlen(d->token), BF_TOKEN_HEX_LEN);

    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    send_msg(&c, json_pack("{s:s, s:i, s:s, s:s}", "type", "hello",
                               "version", BF_WIRE_VERSION, "token", "nope",
                               "role", "client"));
    assert_refused(&c, "auth");
    bf_rpc_close(&c);

    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    send_msg(&c, json_pack("{s:s, s:i, s:s, s:s}", "type", "hello",
                               "version", 99, "token", d->token, "role",
                               "client"));
    assert_refused(&c, "version");
    bf_rpc_close(&c);

    /* A request before any hello. */
    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    send_msg(&c, json_pack("{s:s}", "type", "status"));
    assert_refused(&c, "no_hello");
    bf_rpc_close(&c);

    /* Garbage before any hello. */
    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    static const char garbage[] = "\x16\x03\x01 GET / HTTP/1.1\r\n";
    bft_send_raw(&c, garbage, sizeof garbage - 1);
    assert_refused(&c, "no_hello");
    bf_rpc_close(&c);

    assert_serving(d);
}

/* request_job's trainer: a job goes only to a worker of its config's
 * trainer; a name that is not one is a bad message naming the field. */
static void test_request_job_trainer(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "b.yaml", "name: b\n", NULL, NULL) > 0);
    assert_true(bft_submit(d, "x.yaml", "name: x\nbase: {trainer: fake}\n",
                           NULL, NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "exec"), 0);
    const char *bad[] = { "", "Fake", "a b", "9lives" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *r = bft_worker_ask_trainer(&w, bad[i]);
        assert_string_equal(json_string_value(json_object_get(r, "code")),
                            "bad_message");
        assert_string_equal(json_string_value(json_object_get(r, "field")),
                            "trainer");
        json_decref(r);
    }
    /* bft_reply_is takes the reply */
    assert_true(bft_reply_is(bft_worker_ask_trainer(&w, "other"), "no_job"));
    json_t *r = bft_worker_ask_trainer(&w, "fake");
    assert_string_equal(json_string_value(json_object_get(r, "type")), "job");
    assert_string_equal(json_string_value(json_object_get(json_object_get(
        r, "config"), "trainer")), "fake");
    json_decref(r);
    bft_worker_close(&w);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                 "trainer = 'builtin' AND status = "
                                 "'queued'"), 1);
}

static void test_bad_messages_get_errors(void **state)
{
    bft_daemon *d = *state;
    bf_rpc c, other;
    bf_error err;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    assert_int_equal(bft_connect(d, &other, "client", NULL), 0);

    bft_send_raw(&c, "{{{ not json\n", 13);
    json_t *m = bf_rpc_recv(&c, 5000, &err);
    assert_string_equal(error_code(m), "bad_json");
    assert_non_null(strstr(json_string_value(json_object_get(m, "message")),
                           "column"));
    json_decref(m);

    bft_send_raw(&c, "[1,2,3]\n", 8);
    m = bf_rpc_recv(&c, 5000, &err);
    assert_string_equal(error_code(m), "bad_json");
    json_decref(m);

    m = bft_request(&c, json_pack("{s:s}", "type", "frobnicate"));
    assert_string_equal(error_code(m), "unknown_type");
    assert_true(json_is_integer(json_object_get(m, "id")));
    json_decref(m);

    m = bft_request(&c, json_pack("{s:s, s:i, s:s}", "type", "submit",
                                  "filename", 5, "text", "x"));
    assert_string_equal(error_code(m), "bad_message");
    assert_string_equal(json_string_value(json_object_get(m, "field")),
                        "filename");
    json_decref(m);

    m = bft_request(&c, json_pack("{s:s, s:s}", "type", "results",
                                  "sweep_id", "one"));
    assert_string_equal(error_code(m), "bad_message");
    json_decref(m);

    /* Worker messages from a client, and a second hello, are out of place. */
    m = bft_request(&c, json_pack("{s:s, s:i}", "type", "heartbeat",
                                  "attempt_id", 1));
    assert_string_equal(error_code(m), "out_of_place");
    json_decref(m);
    m = bft_request(&c, json_pack("{s:s, s:i, s:s, s:s}", "type", "hello",
                                  "version", 1, "token", d->token, "role",
                                  "worker"));
    assert_string_equal(error_code(m), "out_of_place");
    json_decref(m);

    /* The same connection carries on, and so does everyone else. */
    m = bft_request(&c, json_pack("{s:s}", "type", "workers"));
    assert_string_equal(bf_wire_type(m), "workers");
    json_decref(m);
    m = bft_request(&other, json_pack("{s:s}", "type", "status"));
    assert_string_equal(bf_wire_type(m), "status");
    json_decref(m);

    /* A client that vanishes in the middle of a frame. */
    bf_rpc half;
    assert_int_equal(bft_connect(d, &half, "client", NULL), 0);
    bft_send_raw(&half, "{\"type\":\"sta", 12);
    bf_rpc_close(&half);

    bf_rpc_close(&other);
    bf_rpc_close(&c);
    assert_serving(d);
}

static void test_oversized_frame_closes(void **state)
{
    bft_daemon *d = *state;
    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    size_t n = BF_WIRE_MAX_FRAME + 1024;
    char *big = malloc(n);
    memset(big, 'a', n);
    memcpy(big, "{\"type\":\"submit\",\"text\":\"", 26);
    /* The daemon may close before it has read it all: ignore send errors. */
    bft_send_raw(&c, big, n);
    free(big);
    assert_refused(&c, "too_large");
    bf_rpc_close(&c);
    assert_serving(d);
}

/* Before its hello a peer may send only small frames: 100 KiB is refused
 * there, while the same size after a hello is an ordinary message. */
static void test_stranger_frame_limit(void **state)
{
    bft_daemon *d = *state;
    size_t n = 100 << 10;
    char *big = malloc(n + 64);
    int len = snprintf(big, 64, "{\"type\":\"status\",\"pad\":\"");
    memset(big + len, 'a', n);
    memcpy(big + len + n, "\"}\n", 4);
    size_t frame = (size_t)len + n + 3;

    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    bft_send_raw(&c, big, frame);
    assert_refused(&c, "too_large");
    bf_rpc_close(&c);

    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    assert_int_equal(bft_send_raw(&c, big, frame), 0);
    bf_error err;
    json_t *r = bf_rpc_recv(&c, 5000, &err);
    assert_non_null(r);
    assert_true(bft_reply_is(r, "status"));
    bf_rpc_close(&c);
    free(big);
}

static void test_submit_and_reject(void **state)
{
    bft_daemon *d = *state;
    int n_jobs = 0;
    int64_t sweep = bft_submit(d, "four.yaml", sweep_4, &n_jobs, NULL);
    assert_true(sweep > 0);
    assert_int_equal(n_jobs, 4);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs"), 4);
    assert_int_equal(bft_sql_int(d, "SELECT count(DISTINCT config_hash) "
                                    "FROM jobs"), 4);

    json_t *error = NULL;
    const char bad[] = "name: bad\n"
                       "grid:\n"
                       "  rope: [rope, sideways]\n";
    assert_int_equal(bft_submit(d, "bad.yaml", bad, NULL, &error), -1);
    assert_non_null(error);
    assert_string_equal(error_code(error), "invalid");
    assert_string_equal(json_string_value(json_object_get(error, "file")),
                        "bad.yaml");
    assert_int_equal(json_integer_value(json_object_get(error, "line")), 3);
    assert_non_null(strstr(json_string_value(json_object_get(error, "field")),
                           "rope"));
    assert_non_null(strstr(json_string_value(json_object_get(error,
                                                             "message")),
                           "sideways"));
    json_decref(error);
    /* Nothing of the rejected sweep was stored. */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM sweeps"), 1);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs"), 4);
}

/* The sweep of the job a fresh worker of this name leases (0: no job).
 * A worker holds one live lease at a time, so each lease is its own
 * worker's. */
static int64_t leased_sweep(bft_daemon *d, const char *name)
{
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, name), 0);
    json_t *r = bft_worker_request_job(&w);
    assert_non_null(r);
    int64_t sweep = strcmp(bf_wire_type(r), "job") == 0
        ? json_integer_value(json_object_get(r, "sweep_id")) : 0;
    if (sweep) {
        assert_true(json_is_object(json_object_get(r, "config")));
        assert_int_equal(json_integer_value(json_object_get(r, "attempt_no")),
                         1);
    } else {
        assert_string_equal(bf_wire_type(r), "no_job");
        assert_true(json_integer_value(json_object_get(r, "retry_ms")) > 0);
    }
    json_decref(r);
    bft_worker_close(&w);
    return sweep;
}

static void test_leasing_order(void **state)
{
    bft_daemon *d = *state;
    const char a[] = "name: a\ngrid:\n  rope: [rope, spectral]\n";
    const char b[] = "name: b\ngrid:\n  rope: [rope, bifocal]\n";
    const char c[] = "name: c\npriority: 9\n";
    int64_t sa = bft_submit(d, "a.yaml", a, NULL, NULL);
    int64_t sb = bft_submit(d, "b.yaml", b, NULL, NULL);
    int64_t sc = bft_submit(d, "c.yaml", c, NULL, NULL);
    assert_true(sa > 0 && sb > sa && sc > sb);

    /* Priority first, then round-robin across sweeps. */
    assert_int_equal(leased_sweep(d, "w1"), sc);
    int64_t s1 = leased_sweep(d, "w2"), s2 = leased_sweep(d, "w3");
    int64_t s3 = leased_sweep(d, "w4"), s4 = leased_sweep(d, "w5");
    assert_true((s1 == sa && s2 == sb) || (s1 == sb && s2 == sa));
    assert_int_equal(s3, s1);
    assert_int_equal(s4, s2);
    assert_int_equal(leased_sweep(d, "w6"), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs "
                                    "WHERE status = 'running'"), 5);
}

/* A worker group trains one job at a time: a second request while its
 * lease is live is refused (one connection used to lease 20,000 jobs in
 * 11 s), and once it reports the job done it gets the next. */
static void test_one_live_lease_per_worker(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "s.yaml", "name: s\nseeds: 3\n", NULL,
                           NULL) > 0);
    bft_worker w, again;
    assert_int_equal(bft_worker_connect(&w, d, "greedy"), 0);
    int64_t attempt = bft_worker_lease(&w, NULL);
    assert_true(attempt > 0);
    json_t *r = bft_worker_request_job(&w);
    assert_string_equal(bf_wire_type(r), "error");
    assert_string_equal(json_string_value(json_object_get(r, "code")), "busy");
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")),
                           "still holds live attempt"));
    json_decref(r);
    /* The same name on a second connection is the same worker group. */
    assert_int_equal(bft_worker_connect(&again, d, "greedy"), 0);
    r = bft_worker_request_job(&again);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "busy");
    json_decref(r);
    bft_worker_close(&again);
    assert_true(bft_reply_is(bft_worker_done(&w, attempt), "ack"));
    assert_true(bft_worker_lease(&w, NULL) > 0);
    bft_worker_close(&w);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs "
                                    "WHERE status = 'running'"), 1);
}

static void test_lease_expiry_and_fencing(void **state)
{
    bft_daemon *d = *state;   /* lease: 1 s */
    assert_true(bft_submit(d, "two.yaml",
                           "name: two\ngrid:\n  rope: [rope, spectral]\n",
                           NULL, NULL) > 0);
    bft_worker zombie, live, next;
    assert_int_equal(bft_worker_connect(&zombie, d, "zombie"), 0);
    assert_int_equal(bft_worker_connect(&live, d, "live"), 0);
    int64_t zjob, ljob;
    int64_t zattempt = bft_worker_lease(&zombie, &zjob);
    int64_t lattempt = bft_worker_lease(&live, &ljob);
    assert_true(zattempt > 0 && lattempt > 0 && zjob != ljob);

    /* The live worker heartbeats through 2.5 lease periods; the zombie is
     * silent. */
    for (int i = 0; i < 10; i++) {
        json_t *r = bft_worker_heartbeat(&live, lattempt);
        assert_true(bft_reply_is(r, "ack"));
        bf_sleep_ms(250);
    }
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM attempts "
                                    "WHERE outcome = 'expired'"), 1);

    /* The zombie's job went back to the queue and goes to the next worker
     * as a second attempt. */
    assert_int_equal(bft_worker_connect(&next, d, "next"), 0);
    json_t *r = bft_worker_request_job(&next);
    assert_string_equal(bf_wire_type(r), "job");
    assert_int_equal(json_integer_value(json_object_get(r, "job_id")), zjob);
    assert_int_equal(json_integer_value(json_object_get(r, "attempt_no")), 2);
    assert_true(json_integer_value(json_object_get(r, "attempt_id"))
                != zattempt);
    json_decref(r);

    /* Everything the zombie says is fenced. */
    r = bft_worker_heartbeat(&zombie, zattempt);
    assert_string_equal(error_code(r), "fenced");
    assert_int_equal(json_integer_value(json_object_get(r, "attempt_id")),
                     zattempt);
    json_decref(r);
    r = bft_worker_metrics(&zombie, zattempt, 1, bft_train_records(0, 3));
    assert_string_equal(error_code(r), "fenced");
    json_decref(r);
    r = bft_worker_done(&zombie, zattempt);
    assert_string_equal(error_code(r), "fenced");
    json_decref(r);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics"), 0);
    /* One live attempt per job, never two. */
    assert_int_equal(bft_sql_int(d, "SELECT max(n) FROM (SELECT count(*) n "
                                    "FROM attempts WHERE outcome = 'running' "
                                    "GROUP BY job_id)"), 1);
    bft_worker_close(&next);
    bft_worker_close(&live);
    bft_worker_close(&zombie);
}

static void test_idempotent_metrics(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "one.yaml", "name: one\n", NULL, NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "w"), 0);
    int64_t job, attempt = bft_worker_lease(&w, &job);
    assert_true(attempt > 0);

    json_t *r = bft_worker_metrics(&w, attempt, 1, bft_train_records(0, 10));
    assert_string_equal(bf_wire_type(r), "ack");
    assert_int_equal(json_integer_value(json_object_get(r, "seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(r, "rows")), 40);
    json_decref(r);
    /* The same batch again (a worker resending after a lost ack). */
    r = bft_worker_metrics(&w, attempt, 1, bft_train_records(0, 10));
    assert_string_equal(bf_wire_type(r), "ack");
    assert_int_equal(json_integer_value(json_object_get(r, "rows")), 0);
    json_decref(r);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics"), 40);

    /* A malformed record costs only itself: the ack names it, and the
     * valid records beside it are stored. */
    json_t *recs = bft_train_records(100, 5);
    json_array_insert_new(recs, 2, json_pack("{s:s}", "type", "train"));
    r = bft_worker_metrics(&w, attempt, 2, recs);
    assert_string_equal(bf_wire_type(r), "ack");
    assert_int_equal(json_integer_value(json_object_get(r, "rows")), 20);
    assert_int_equal(json_integer_value(json_object_get(r, "rejected_count")),
                     1);
    json_t *bad = json_array_get(json_object_get(r, "rejected"), 0);
    assert_int_equal(json_integer_value(json_object_get(bad, "index")), 2);
    assert_string_equal(json_string_value(json_object_get(bad, "field")),
                        "records[2].step");
    json_decref(r);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics"), 60);

    r = bft_worker_checkpoint(&w, attempt, "/ckpt/step10.safetensors", 10);
    assert_true(bft_reply_is(r, "ack"));
    r = bft_worker_done(&w, attempt);
    assert_true(bft_reply_is(r, "ack"));
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                    "status = 'succeeded' AND "
                                    "checkpoint_step = 10"), 1);
    bft_worker_close(&w);
}

static void test_cancel(void **state)
{
    bft_daemon *d = *state;
    int64_t sweep = bft_submit(d, "four.yaml", sweep_4, NULL, NULL);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "w"), 0);
    int64_t job, attempt = bft_worker_lease(&w, &job);
    assert_true(attempt > 0);

    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    json_t *r = bft_request(&c, json_pack("{s:s, s:I}", "type", "cancel",
                                          "sweep_id", (json_int_t)sweep));
    assert_string_equal(bf_wire_type(r), "ack");
    assert_int_equal(json_integer_value(json_object_get(r, "running")), 1);
    json_decref(r);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs "
                                    "WHERE status = 'cancelled'"), 3);

    /* The worker holding the attempt is told, and its heartbeat says so. */
    json_t *push = bft_worker_wait_push(&w, "cancel", 5000);
    assert_non_null(push);
    assert_int_equal(json_integer_value(json_object_get(push, "attempt_id")),
                     attempt);
    json_decref(push);
    r = bft_worker_heartbeat(&w, attempt);
    assert_string_equal(bf_wire_type(r), "ack");
    assert_true(json_is_true(json_object_get(r, "cancel")));
    json_decref(r);
    r = bft_worker_failed(&w, attempt, "cancelled");
    assert_true(bft_reply_is(r, "ack"));
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs "
                                    "WHERE status = 'cancelled'"), 4);
    r = bft_worker_request_job(&w);
    assert_true(bft_reply_is(r, "no_job"));

    /* Retry puts one back. */
    r = bft_request(&c, json_pack("{s:s, s:I}", "type", "retry", "job_id",
                                  (json_int_t)job));
    assert_true(bft_reply_is(r, "ack"));
    assert_int_equal(bft_worker_lease(&w, NULL) > 0, 1);
    r = bft_request(&c, json_pack("{s:s, s:i}", "type", "retry", "job_id",
                                  999999));
    assert_true(bft_reply_is(r, "error"));
    bf_rpc_close(&c);
    bft_worker_close(&w);
}

/* A worker that reconnected (its old connection still open) gets the
 * cancel on the connection that last claimed the attempt. */
static void test_cancel_reaches_reconnected_worker(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "one.yaml", "name: one\n", NULL, NULL) > 0);
    bft_worker old, renewed;
    /* Connected first, so a holder search that simply took the first or
     * the last connection would pick the wrong one either way round. */
    assert_int_equal(bft_worker_connect(&renewed, d, "w"), 0);
    assert_int_equal(bft_worker_connect(&old, d, "w"), 0);
    int64_t job, attempt = bft_worker_lease(&old, &job);
    assert_true(attempt > 0);
    json_t *r = bft_worker_heartbeat(&renewed, attempt);
    assert_true(bft_reply_is(r, "ack"));

    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    r = bft_request(&c, json_pack("{s:s, s:I}", "type", "cancel", "job_id",
                                  (json_int_t)job));
    assert_int_equal(json_integer_value(json_object_get(r, "running")), 1);
    json_decref(r);
    bf_rpc_close(&c);
    json_t *push = bft_worker_wait_push(&renewed, "cancel", 5000);
    assert_non_null(push);
    json_decref(push);
    assert_null(bft_worker_wait_push(&old, "cancel", 300));
    bft_worker_close(&renewed);
    bft_worker_close(&old);
}

/* A worker's old connection closing after it reconnected leaves the
 * worker connected; the last one closing marks it disconnected. */
static void test_worker_connected_across_reconnect(void **state)
{
    bft_daemon *d = *state;
    bft_worker old, renewed;
    assert_int_equal(bft_worker_connect(&old, d, "w"), 0);
    assert_int_equal(bft_worker_connect(&renewed, d, "w"), 0);
    bft_worker_close(&old);
    assert_serving(d);  /* the close has been handled by now */
    assert_int_equal(bft_sql_int(d, "SELECT connected FROM workers"
                                    " WHERE name = 'w'"), 1);
    bft_worker_close(&renewed);
    for (int i = 0; i < 100 && bft_sql_int(d, "SELECT connected FROM workers"
                                              " WHERE name = 'w'") != 0; i++)
        bf_sleep_ms(20);
    assert_int_equal(bft_sql_int(d, "SELECT connected FROM workers"
                                    " WHERE name = 'w'"), 0);
}

/* A worker hello whose name or ranks the daemon could not keep as given
 * is refused rather than silently cut short or wrapped. */
static void test_hello_limits(void **state)
{
    bft_daemon *d = *state;
    bf_rpc c;
    char name[201];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    send_msg(&c, json_pack("{s:s, s:i, s:s, s:s, s:s}", "type", "hello",
                           "version", BF_WIRE_VERSION, "token", d->token,
                           "role", "worker", "name", name));
    assert_refused(&c, "bad_message");
    bf_rpc_close(&c);

    assert_int_equal(bft_connect(d, &c, NULL, NULL), 0);
    send_msg(&c, json_pack("{s:s, s:i, s:s, s:s, s:s, s:I}", "type", "hello",
                           "version", BF_WIRE_VERSION, "token", d->token,
                           "role", "worker", "name", "w", "ranks",
                           (json_int_t)1 << 32));
    assert_refused(&c, "bad_message");
    bf_rpc_close(&c);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM workers"), 0);
    assert_serving(d);
}

/* An attempt id names a lease only together with the worker it was leased
 * to: another worker quoting it (one that outlived its daemon and came back
 * to a fresh database, where ids start at 1 again) is fenced and changes
 * nothing, so one job never runs on two live workers. */
static void test_attempt_of_another_worker_is_fenced(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "one.yaml", "name: one\n", NULL, NULL) > 0);
    bft_worker owner, other;
    assert_int_equal(bft_worker_connect(&owner, d, "owner"), 0);
    assert_int_equal(bft_worker_connect(&other, d, "other"), 0);
    int64_t attempt = bft_worker_lease(&owner, NULL);
    assert_true(attempt > 0);

    json_t *r = bft_worker_heartbeat(&other, attempt);
    assert_string_equal(error_code(r), "fenced");
    json_decref(r);
    r = bft_worker_metrics(&other, attempt, 1, bft_train_records(0, 3));
    assert_string_equal(error_code(r), "fenced");
    json_decref(r);
    r = bft_worker_done(&other, attempt);
    assert_string_equal(error_code(r), "fenced");
    json_decref(r);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics"), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs"
                                    " WHERE status = 'running'"), 1);

    /* The owner's lease is untouched and still its own. */
    r = bft_worker_heartbeat(&owner, attempt);
    assert_true(bft_reply_is(r, "ack"));
    r = bft_worker_done(&owner, attempt);
    assert_true(bft_reply_is(r, "ack"));
    bft_worker_close(&other);
    bft_worker_close(&owner);
}

/* The sqlite3 CLI reads while the daemon ingests, and never sees a locked
 * database or a count going backwards. */
static void test_sqlite_reads_during_ingest(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "one.yaml", "name: one\n", NULL, NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "w"), 0);
    int64_t attempt = bft_worker_lease(&w, NULL);
    enum { BATCHES = 40, PER = 500 };
    /* Pipelined: all batches go out before any ack is read. */
    for (int b = 0; b < BATCHES; b++) {
        json_t *m = json_pack("{s:s, s:I, s:i, s:o}", "type", "metrics",
                              "attempt_id", (json_int_t)attempt, "seq", b,
                              "records", bft_train_records(b * PER, PER));
        assert_int_equal(bf_rpc_send(&w.conn, m, NULL), 0);
        json_decref(m);
        if (b % 8 == 7) {
            long long n = bft_sql_int(d, "SELECT count(*) FROM metrics");
            assert_true(n >= 0);
        }
    }
    long long last = 0;
    int acks = 0;
    while (acks < BATCHES) {
        bf_error err;
        json_t *m = bf_rpc_recv(&w.conn, 10000, &err);
        assert_non_null(m);
        assert_string_equal(bf_wire_type(m), "ack");
        acks++;
        json_decref(m);
        if (acks % 10 == 0) {
            long long n = bft_sql_int(d, "SELECT count(*) FROM metrics");
            /* Acked means committed: at least 4 rows per record acked. */
            assert_true(n >= (long long)acks * PER * 4);
            assert_true(n >= last);
            last = n;
        }
    }
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics"),
                     BATCHES * PER * 4);
    bft_worker_close(&w);
}

/* The code of reply r (stolen); "" when it is not an error. */
static char *code_of_reply(json_t *r)
{
    static char code[64];
    snprintf(code, sizeof code, "%s", error_code(r));
    json_decref(r);
    return code;
}

/* Every id and step is checked: a negative sweep id used to list every job
 * of every sweep, a checkpoint at step -5, 1,000,000 of a 20-step job or
 * with a 1 MB path holding newlines was recorded and handed on. */
static void test_ids_and_steps_validated(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "s.yaml", "name: s\nbase: {steps: 20, warmup_steps: 0}\n",
                           NULL, NULL) > 0);
    bf_rpc cl;
    assert_int_equal(bft_connect(d, &cl, "client", NULL), 0);
    struct { const char *type, *key; json_int_t v; } cases[] = {
        {"cancel", "sweep_id", -5}, {"cancel", "job_id", 0},
        {"jobs", "sweep_id", -1}, {"status", "sweep_id", 0},
        {"results", "sweep_id", -3}, {"retry", "job_id", -7},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *r = bft_request(&cl, json_pack("{s:s, s:I}", "type",
                                               cases[i].type, cases[i].key,
                                               cases[i].v));
        assert_non_null(r);
        assert_string_equal(json_string_value(json_object_get(r, "field")),
                            cases[i].key);
        assert_string_equal(code_of_reply(r), "bad_message");
    }
    json_t *r = bft_request(&cl, json_pack("{s:s, s:i, s:s}", "type", "retry",
                                           "job_id", 1, "from_scratch", "yes"));
    assert_string_equal(code_of_reply(r), "bad_message");
    bf_rpc_close(&cl);

    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "w"), 0);
    int64_t attempt = bft_worker_lease(&w, NULL);
    assert_true(attempt > 0);
    assert_string_equal(code_of_reply(bft_worker_heartbeat(&w, 0)),
                        "bad_message");
    assert_string_equal(code_of_reply(bft_worker_checkpoint(&w, attempt,
                        "/ck/a.safetensors", -5)), "bad_message");
    assert_string_equal(code_of_reply(bft_worker_checkpoint(&w, attempt,
                        "/ck/a\n2026 INFO forged", 5)), "bad_message");
    char *huge = malloc(1 << 20);
    memset(huge, 'a', (1 << 20) - 1);
    huge[(1 << 20) - 1] = '\0';
    assert_string_equal(code_of_reply(bft_worker_checkpoint(&w, attempt,
                        huge, 5)), "bad_message");
    free(huge);
    /* Past the job's 20 steps: refused by the store, naming the bound. */
    r = bft_worker_checkpoint(&w, attempt, "/ck/far.safetensors", 1000000);
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")),
                           "outside job"));
    assert_string_equal(code_of_reply(r), "invalid");
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                    "checkpoint_path IS NOT NULL"), 0);
    /* Within them: recorded. */
    assert_true(bft_reply_is(bft_worker_checkpoint(&w, attempt,
                             "/ck/step-20.safetensors", 20), "ack"));
    bft_worker_close(&w);
}

/* A checkpoint that would not load is forgotten (the next attempt does not
 * get it); `retry --from-scratch` forgets a failed job's checkpoint.  A
 * corrupt recorded checkpoint used to fail every later attempt. */
static void test_bad_checkpoint_forgotten(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "s.yaml", "name: s\nmax_attempts: 1\n"
                           "base: {steps: 20, warmup_steps: 0}\n", NULL, NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "w"), 0);
    int64_t job, attempt = bft_worker_lease(&w, &job);
    assert_true(bft_reply_is(bft_worker_checkpoint(&w, attempt,
                             "/ck/step-10.safetensors", 10), "ack"));
    /* Someone else's path is not the recorded one: nothing changes. */
    json_t *r = bft_request(&w.conn, json_pack("{s:s, s:I, s:s, s:s}",
        "type", "checkpoint_bad", "attempt_id", (json_int_t)attempt,
        "path", "/ck/other.safetensors", "error", "truncated"));
    assert_true(bft_reply_is(r, "ack"));
    assert_int_equal(bft_sql_int(d, "SELECT checkpoint_step FROM jobs"), 10);
    r = bft_request(&w.conn, json_pack("{s:s, s:I, s:s, s:s}",
        "type", "checkpoint_bad", "attempt_id", (json_int_t)attempt,
        "path", "/ck/step-10.safetensors", "error", "data_offsets out of "
        "range"));
    assert_true(bft_reply_is(r, "ack"));
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                    "checkpoint_path IS NULL"), 1);

    /* retry keeps a checkpoint; --from-scratch forgets it. */
    assert_true(bft_reply_is(bft_worker_checkpoint(&w, attempt,
                             "/ck/step-15.safetensors", 15), "ack"));
    assert_true(bft_reply_is(bft_worker_failed(&w, attempt, "boom"), "ack"));
    char id[32], *out = NULL;
    snprintf(id, sizeof id, "%lld", (long long)job);
    assert_int_equal(bft_run_client(d, &out, NULL, "retry", "--job", id,
                                    NULL), 0);
    free(out);
    assert_int_equal(bft_sql_int(d, "SELECT checkpoint_step FROM jobs"), 15);
    attempt = bft_worker_lease(&w, NULL);
    assert_true(bft_reply_is(bft_worker_failed(&w, attempt, "boom"), "ack"));
    assert_int_equal(bft_run_client(d, &out, NULL, "retry", "--job", id,
                                    "--from-scratch", NULL), 0);
    assert_non_null(strstr(out, "from step 0"));
    free(out);
    r = bft_worker_request_job(&w);
    assert_string_equal(bf_wire_type(r), "job");
    assert_true(json_is_null(json_object_get(r, "resume_checkpoint")));
    assert_int_equal(json_integer_value(json_object_get(r, "resume_step")), 0);
    json_decref(r);
    bft_worker_close(&w);
}

/* `results` and `rows` come in pages: `limit` rows at most, a `next`
 * cursor while more follow, sent back as `after`; the last page has none.
 * A bad cursor or limit is refused by name. */
static void test_query_pages(void **state)
{
    bft_daemon *d = *state;
    int n_jobs = 0;
    int64_t sweep = bft_submit(d, "p.yaml", "name: p\ngrid: {lr: [0.001, "
                               "0.002, 0.003]}\nseeds: 3\n", &n_jobs, NULL);
    assert_int_equal(n_jobs, 9);
    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    const char *types[] = { "results", "rows" };
    for (int t = 0; t < 2; t++) {
        json_t *after = NULL;
        int64_t last = 0, seen = 0, pages = 0;
        do {
            json_t *req = json_pack("{s:s, s:I, s:i, s:s}", "type", types[t],
                                    "sweep_id", (json_int_t)sweep, "limit", 4,
                                    "view", "job_results");
            if (after)
                json_object_set_new(req, "after", after);
            json_t *r = bft_request(&c, req);
            assert_string_equal(bf_wire_type(r), types[t]);
            json_t *rows = json_object_get(r, "rows"), *row;
            assert_true(json_array_size(rows) <= 4);
            size_t i;
            json_array_foreach(rows, i, row) {
                int64_t job = json_integer_value(json_object_get(row, "job_id"));
                assert_true(job > last);   /* in order, none twice */
                last = job;
                seen++;
            }
            after = json_incref(json_object_get(r, "next"));
            if (after)   /* the cursor is the page's last row's key */
                assert_int_equal(json_integer_value(json_array_get(after, 0)),
                                 last);
            pages++;
            json_decref(r);
        } while (after);
        assert_int_equal(seen, 9);
        assert_int_equal(pages, 3);
    }
    struct { const char *after, *limit, *field, *code; } bad[] = {
        { "7", "4", "after", "bad_message" },        /* not an array */
        { "[\"x\"]", "4", "after", "not_found" },    /* not a job id */
        { "[1, 2]", "4", "after", "not_found" },     /* not this view's key */
        { "[1]", "0", "limit", "bad_message" },
        { "[1]", "100001", "limit", "bad_message" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *req = json_pack("{s:s, s:I, s:s}", "type", "rows", "sweep_id",
                                (json_int_t)sweep, "view", "job_results");
        json_object_set_new(req, "after", json_loads(bad[i].after, JSON_DECODE_ANY, NULL));
        json_object_set_new(req, "limit", json_loads(bad[i].limit, JSON_DECODE_ANY, NULL));
        json_t *r = bft_request(&c, req);
        assert_string_equal(error_code(r), bad[i].code);
        assert_string_equal(json_string_value(json_object_get(r, "field")),
                            bad[i].field);
        json_decref(r);
    }
    bf_rpc_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        BFT_DAEMON_TEST(test_auth_refusals),
        BFT_DAEMON_TEST(test_bad_messages_get_errors),
        BFT_DAEMON_TEST(test_request_job_trainer),
        BFT_DAEMON_TEST(test_oversized_frame_closes),
        BFT_DAEMON_TEST(test_stranger_frame_limit),
        BFT_DAEMON_TEST(test_submit_and_reject),
        BFT_DAEMON_TEST(test_leasing_order),
        BFT_DAEMON_TEST(test_one_live_lease_per_worker),
        BFT_DAEMON_TEST(test_ids_and_steps_validated),
        BFT_DAEMON_TEST(test_bad_checkpoint_forgotten),
        cmocka_unit_test_setup_teardown(test_lease_expiry_and_fencing,
                                        bft_daemon_setup_short_lease,
                                        bft_daemon_teardown),
        BFT_DAEMON_TEST(test_idempotent_metrics),
        BFT_DAEMON_TEST(test_cancel),
        BFT_DAEMON_TEST(test_cancel_reaches_reconnected_worker),
        BFT_DAEMON_TEST(test_sqlite_reads_during_ingest),
        BFT_DAEMON_TEST(test_attempt_of_another_worker_is_fenced),
        BFT_DAEMON_TEST(test_hello_limits),
        BFT_DAEMON_TEST(test_worker_connected_across_reconnect),
        BFT_DAEMON_TEST(test_query_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
