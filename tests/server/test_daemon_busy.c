/* Requests that take seconds must not hold the daemon's loop: a sweep of
 * 60,000 jobs submitted, a `results` over all of them, and the sweep
 * cancelled, while a worker heartbeats a 1-second lease every 150 ms;
 * every heartbeat must be acked, never fenced.  Before, the loop stored
 * the whole sweep (or read every row, or cancelled every job) in one go,
 * and later a chunk of 1,000 jobs per pass: most of a second per pass
 * under ASan, so renewals waited unread in the socket until the lease
 * expired.  Now each pass stores or cancels only until a time budget is
 * spent (server/chore.h).  How long the heartbeats waited is printed, not
 * asserted: that is a figure of the machine (bench_load has it).  Also:
 * `jobs` comes in bounded pages, and a daemon killed or stopped half-way
 * through storing a sweep leaves nothing of it, or half-way through
 * cancelling one finishes the cancel when it starts again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <cmocka.h>

#include "clock.h"
#include "fake_worker.h"
#include "fan_out.h"
#include "heartbeats.h"
#include "harness.h"

#define BIG_SEEDS 60000
#define HEARTBEAT_EVERY_MS 150

static const char big_sweep[] =
    "name: big\nbase: {steps: 100, depth: 2, eval_depths: [2]}\n"
    "seeds: " "60000" "\n";

/* The worker holding a lease on a job of a small sweep. */
static int64_t lease_small_job(bft_daemon *d, bft_worker *w)
{
    assert_true(bft_submit(d, "small.yaml", "name: small\nbase: {steps: 100,"
                           " depth: 2, eval_depths: [2]}\nseeds: 2\n", NULL,
                           NULL) > 0);
    assert_int_equal(bft_worker_connect(w, d, "steady"), 0);
    int64_t attempt = bft_worker_lease(w, NULL);
    assert_true(attempt > 0);
    return attempt;
}

static void send_request(bf_rpc *c, json_t *msg)
{
    bf_error err;
    assert_int_equal(bf_rpc_send(c, msg, &err), 0);
    json_decref(msg);
}

/* Every renewal so far was acked: the lease never lapsed. */
static void assert_all_acked(bft_heartbeats *h, const char *what)
{
    bft_beat_figures f;
    bft_heartbeats_figures(h, &f);
    print_message("after %s: %d heartbeats, slowest %.0f ms\n", what, f.beats,
                  f.max);
    if (f.not_acked)
        fail_msg("%d heartbeats not acked by the end of %s, the first: %s",
                 f.not_acked, what, f.first_refusal);
}

/* The reply to a request sent on c (the wait only guards against a hang),
 * with every heartbeat meanwhile acked. */
static json_t *reply_while_beating(bft_heartbeats *h, bf_rpc *c,
                                   const char *what)
{
    bf_error err;
    int64_t t0 = bf_monotonic_ms();
    json_t *reply = bf_rpc_recv(c, 120000, &err);
    if (!reply)
        fail_msg("no reply to %s: %s", what, err.msg);
    print_message("%s took %lld ms\n", what,
                  (long long)(bf_monotonic_ms() - t0));
    assert_all_acked(h, what);
    return reply;
}

static json_t *submit_request(const char *text)
{
    return json_pack("{s:s, s:i, s:s, s:s}", "type", "submit", "id", 1,
                     "filename", "big.yaml", "text", text);
}

static void test_long_requests_keep_leases(void **state)
{
    bft_daemon *d = *state;
    bft_worker w;
    bft_heartbeats h;
    bft_heartbeats_start(&h, &w, lease_small_job(d, &w), HEARTBEAT_EVERY_MS);
    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);

    send_request(&c, submit_request(big_sweep));
    json_t *r = reply_while_beating(&h, &c, "submit");
    assert_string_equal(bf_wire_type(r), "ack");
    int64_t sweep = json_integer_value(json_object_get(r, "sweep_id"));
    assert_int_equal(json_integer_value(json_object_get(r, "jobs")),
                     BIG_SEEDS);
    json_decref(r);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE sweep_id = %lld"
             " AND (SELECT n_jobs FROM sweeps WHERE sweep_id = %lld) = %d",
             (long long)sweep, (long long)sweep, BIG_SEEDS);
    assert_int_equal(bft_sql_int(d, sql), BIG_SEEDS);

    /* A query over every job of the sweep: off the loop too, and a page
     * (of at most a MiB) at a time, the next asked for after the one
     * before. */
    json_t *cursor = NULL;
    size_t n_rows = 0;
    int pages = 0;
    do {
        json_t *req = json_pack("{s:s, s:i, s:I}", "type", "results", "id", 2,
                                "sweep_id", (json_int_t)sweep);
        if (cursor)
            json_object_set_new(req, "after", cursor);
        send_request(&c, req);
        r = reply_while_beating(&h, &c, "results");
        json_t *rows = json_object_get(r, "rows");
        char *text = json_dumps(rows, JSON_COMPACT);
        assert_true(strlen(text) < (1 << 20) + 4096);
        free(text);
        n_rows += json_array_size(rows);
        pages++;
        cursor = json_incref(json_object_get(r, "next"));
        json_decref(r);
    } while (cursor);
    assert_int_equal(n_rows, BIG_SEEDS);
    assert_true(pages > 1);

    /* A cancel of every one of its jobs: a slice per pass too. */
    send_request(&c, json_pack("{s:s, s:i, s:I}", "type", "cancel", "id", 3,
                               "sweep_id", (json_int_t)sweep));
    r = reply_while_beating(&h, &c, "cancel");
    assert_string_equal(bf_wire_type(r), "ack");
    json_decref(r);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE sweep_id = %lld"
             " AND status = 'cancelled'", (long long)sweep);
    assert_int_equal(bft_sql_int(d, sql), BIG_SEEDS);

    /* `jobs` comes in pages: 1,000 unless asked for up to 10,000, and
     * never past the row that brings a page to 1 MiB (10,000 jobs of this
     * sweep are several MiB: such a page once came whole, and a page of
     * jobs with long configs or errors could pass the 16 MiB frame). */
    r = bft_request(&c, json_pack("{s:s, s:I}", "type", "jobs", "sweep_id",
                                  (json_int_t)sweep));
    json_t *jobs = json_object_get(r, "jobs");
    assert_int_equal(json_array_size(jobs), 1000);
    int64_t next = json_integer_value(json_object_get(r, "next_after"));
    assert_int_equal(next, json_integer_value(json_object_get(
        json_array_get(jobs, 999), "job_id")));
    json_decref(r);
    r = bft_request(&c, json_pack("{s:s, s:I, s:I, s:i}", "type", "jobs",
                                  "sweep_id", (json_int_t)sweep, "after",
                                  (json_int_t)next, "limit", 10000));
    jobs = json_object_get(r, "jobs");
    size_t n = json_array_size(jobs);
    assert_true(n > 1 && n < 10000);
    assert_int_equal(json_integer_value(json_object_get(
        json_array_get(jobs, 0), "job_id")), next + 1);
    assert_int_equal(json_integer_value(json_object_get(r, "next_after")),
                     json_integer_value(json_object_get(
                         json_array_get(jobs, n - 1), "job_id")));
    json_array_remove(jobs, n - 1);
    char *before_last = json_dumps(jobs, JSON_COMPACT);
    assert_true(strlen(before_last) < ((size_t)1 << 20));
    free(before_last);
    json_decref(r);
    r = bft_request(&c, json_pack("{s:s, s:i}", "type", "jobs", "limit",
                                  10001));
    assert_string_equal(json_string_value(json_object_get(r, "field")),
                        "limit");
    json_decref(r);

    bf_rpc_close(&c);

    /* The CLI pages the same way. */
    char *out = NULL, *err = NULL, after[32], sweep_arg[32];
    snprintf(after, sizeof after, "%lld", (long long)next);
    snprintf(sweep_arg, sizeof sweep_arg, "%lld", (long long)sweep);
    assert_int_equal(bft_run_client(d, &out, &err, "jobs", "--sweep",
                                    sweep_arg, "--limit", "5", "--after",
                                    after, "--format", "csv", NULL), 0);
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 1 + 5);   /* header + 5 jobs */
    assert_non_null(strstr(err, "more jobs follow: add --after"));
    free(out);
    free(err);
    assert_all_acked(&h, "the whole test");
    bft_heartbeats_stop(&h);
    bft_worker_close(&w);
}

/* Waits until the staged rows of a sweep being stored are committed (an
 * outside reader sees them, the daemon does not show them yet). */
static void wait_staging(bft_daemon *d)
{
    for (int i = 0; i < 600; i++) {
        if (bft_sql_int(d, "SELECT count(*) FROM jobs") > 1000)
            break;
        bf_sleep_ms(20);
    }
    assert_true(bft_sql_int(d, "SELECT count(*) FROM sweeps WHERE n_jobs = 0")
                == 1);
    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    json_t *r = bft_request(&c, json_pack("{s:s}", "type", "status"));
    assert_int_equal(json_array_size(json_object_get(r, "sweeps")), 0);
    json_decref(r);
    r = bft_request(&c, json_pack("{s:s}", "type", "jobs"));
    assert_int_equal(json_array_size(json_object_get(r, "jobs")), 0);
    json_decref(r);
    bf_rpc_close(&c);
}

static void assert_nothing_stored(bft_daemon *d)
{
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs"), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM sweeps"), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM"
                                    " pragma_integrity_check WHERE"
                                    " integrity_check != 'ok'"), 0);
}

/* c submits the big sweep, which is being stored when this returns. */
static void submit_big(bft_daemon *d, bf_rpc *c)
{
    assert_int_equal(bft_connect(d, c, "client", NULL), 0);
    send_request(c, submit_request(big_sweep));
    wait_staging(d);
}

static void test_killed_mid_submission(void **state)
{
    bft_daemon *d = *state;
    bf_rpc c;
    submit_big(d, &c);
    assert_int_equal(bft_daemon_stop(d, SIGKILL), 128 + SIGKILL);
    bf_rpc_close(&c);
    /* The next start discards the half-stored sweep. */
    assert_int_equal(bft_daemon_restart(d), 0);
    assert_true(bft_serves_status(d));
    assert_nothing_stored(d);
}

static void test_stopped_mid_submission(void **state)
{
    bft_daemon *d = *state;
    bf_rpc c;
    submit_big(d, &c);
    int64_t t0 = bf_monotonic_ms();
    assert_int_equal(bft_daemon_stop(d, SIGTERM), 0);
    print_message("stopped mid-submission in %lld ms\n",
                  (long long)(bf_monotonic_ms() - t0));
    /* The submitter hears why, or sees the connection go. */
    bf_error err;
    json_t *r = bf_rpc_recv(&c, 5000, &err);
    if (r)
        assert_string_equal(json_string_value(json_object_get(r, "code")),
                            "store");
    json_decref(r);
    bf_rpc_close(&c);
    assert_int_equal(bft_daemon_restart(d), 0);
    assert_nothing_stored(d);
}

/* A daemon killed between a sweep's cancel and the last of its queued jobs
 * (the sweep is cancelled, jobs of it still queued) finishes the cancel
 * when it starts again, and leases none of them meanwhile. */
static void test_cancel_finished_after_restart(void **state)
{
    bft_daemon *d = *state;
    int64_t sweep = bft_submit(d, "c.yaml", "name: c\nbase: {steps: 100, "
                               "depth: 2, eval_depths: [2]}\nseeds: 3000\n",
                               NULL, NULL);
    assert_true(sweep > 0);
    assert_int_equal(bft_daemon_stop(d, SIGKILL), 128 + SIGKILL);
    assert_int_equal(bft_sql_int(d, "UPDATE sweeps SET status = 'cancelled';"
                                    " SELECT changes();"), 1);
    assert_int_equal(bft_daemon_restart(d), 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "eager"), 0);
    assert_int_equal(bft_worker_lease(&w, NULL), -1);   /* nothing to lease */
    bft_worker_close(&w);
    long long left = -1;
    for (int i = 0; i < 3000 && left != 0; i++) {
        left = bft_sql_int(d, "SELECT count(*) FROM jobs WHERE status"
                              " IN ('queued', 'waiting')");
        bf_sleep_ms(20);
    }
    assert_int_equal(left, 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE status"
                                    " = 'cancelled' AND finished_ms > 0"), 3000);
}

/* Polls sql (a count) until it reaches want, renewing the other worker's
 * lease meanwhile (every renewal must be acked); its last value. */
static long long wait_count(bft_daemon *d, bft_worker *other, int64_t held,
                            const char *sql, long long want)
{
    long long n = 0;
    for (int i = 0; i < 600 && n < want; i++) {
        json_t *r = bft_worker_heartbeat(other, held);
        assert_true(r && strcmp(bf_wire_type(r), "ack") == 0);
        json_decref(r);
        n = bft_sql_int(d, sql);
        bf_sleep_ms(50);
    }
    return n;
}

/* A source job and its 3,000 dependents, submitted: the sweep's id. */
static int64_t submit_fan_out(bft_daemon *d)
{
    char *yaml = bft_fan_out_sweep("{steps: 100, depth: 2, eval_depths: [2]}",
                                   3000);
    int64_t sweep = bft_submit(d, "fan.yaml", yaml, NULL, NULL);
    free(yaml);
    assert_true(sweep > 0);
    return sweep;
}

/* A source job with 3,000 dependents: its job_done moves the first few
 * slices of them on, the loop the rest a slice per pass (while another
 * worker's lease is renewed), and every one is queued from its source's
 * checkpoint. */
static void test_big_fan_out(void **state)
{
    bft_daemon *d = *state;
    bft_worker w, other;
    int64_t held = lease_small_job(d, &other);
    int64_t sweep = submit_fan_out(d);
    assert_int_equal(bft_worker_connect(&w, d, "source"), 0);
    int64_t job, attempt = bft_worker_lease(&w, &job);
    assert_true(attempt > 0);
    json_t *r = bft_worker_checkpoint(&w, attempt, "/ck/a.safetensors", 100);
    assert_true(r && strcmp(bf_wire_type(r), "ack") == 0);
    json_decref(r);
    r = bft_worker_done(&w, attempt);
    assert_true(r && strcmp(bf_wire_type(r), "ack") == 0);
    json_decref(r);
    bft_worker_close(&w);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE sweep_id = %lld"
             " AND status = 'queued' AND init_from = '/ck/a.safetensors'",
             (long long)sweep);
    assert_int_equal(wait_count(d, &other, held, sql, 3000), 3000);
    bft_worker_close(&other);
}

static void request_ack(bft_daemon *d, json_t *msg)
{
    bf_rpc c;
    assert_int_equal(bft_connect(d, &c, "client", NULL), 0);
    json_t *r = bft_request(&c, msg);
    assert_true(r && strcmp(bf_wire_type(r), "ack") == 0);
    json_decref(r);
    bf_rpc_close(&c);
}

/* A cancelled source job fails its 3,000 dependents, a slice per pass;
 * retried, it waits while they wait again, a slice per pass too (another
 * worker's lease renewed throughout), and is queued once all of them do. */
static void test_big_revival(void **state)
{
    bft_daemon *d = *state;
    bft_worker other;
    int64_t held = lease_small_job(d, &other);
    int64_t sweep = submit_fan_out(d);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT job_id FROM jobs WHERE sweep_id = %lld"
             " AND source_job_id IS NULL", (long long)sweep);
    long long source = bft_sql_int(d, sql);
    request_ack(d, json_pack("{s:s, s:I}", "type", "cancel", "job_id",
                             (json_int_t)source));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE source_job_id"
             " = %lld AND status = 'failed'", source);
    assert_int_equal(wait_count(d, &other, held, sql, 3000), 3000);

    request_ack(d, json_pack("{s:s, s:I}", "type", "retry", "job_id",
                             (json_int_t)source));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE source_job_id"
             " = %lld AND status = 'waiting' AND error IS NULL", source);
    assert_int_equal(wait_count(d, &other, held, sql, 3000), 3000);
    snprintf(sql, sizeof sql, "SELECT status = 'queued' FROM jobs WHERE"
             " job_id = %lld", source);
    assert_int_equal(wait_count(d, &other, held, sql, 1), 1);
    bft_worker_close(&other);
}

/* A sweep whose last jobs are invalid is refused before anything of it is
 * stored: the thread validates every job first. */
static void test_invalid_big_sweep(void **state)
{
    bft_daemon *d = *state;
    json_t *error = NULL;
    int64_t id = bft_submit(d, "bad.yaml", "name: bad\nbase: {steps: 100}\n"
                    "grid:\n  depth: [2, 4, 100000]\nseeds: 20000\n", NULL,
                    &error);
    assert_int_equal(id, -1);
    assert_string_equal(json_string_value(json_object_get(error, "code")),
                        "invalid");
    assert_int_equal(json_integer_value(json_object_get(error, "line")), 4);
    json_decref(error);
    assert_nothing_stored(d);
}

/* A one-job sweep submitted while the big one is being stored is stored
 * and acked before it: no submission holds the others (once, the second
 * waited for every job of the first). */
static void test_small_overtakes_big(void **state)
{
    bft_daemon *d = *state;
    bf_rpc big;
    submit_big(d, &big);
    assert_true(bft_submit(d, "one.yaml", "name: one\nbase: {steps: 100,"
                           " depth: 2, eval_depths: [2]}\n", NULL, NULL) > 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM sweeps"
                                    " WHERE name = 'big' AND n_jobs = 0"), 1);
    bf_error err;
    assert_true(bft_reply_is(bf_rpc_recv(&big, 120000, &err), "ack"));
    assert_int_equal(bft_sql_int(d, "SELECT n_jobs FROM sweeps"
                                    " WHERE name = 'big'"), BIG_SEEDS);
    bf_rpc_close(&big);
}

/* A submitter that disconnects while its sweep is stored cancels it:
 * what was staged is discarded and the daemon serves on. */
static void test_submitter_leaves(void **state)
{
    bft_daemon *d = *state;
    bf_rpc c;
    submit_big(d, &c);
    bf_rpc_close(&c);
    long long left = -1;
    for (int i = 0; i < 600 && left != 0; i++) {
        bf_sleep_ms(50);
        left = bft_sql_int(d, "SELECT count(*) FROM jobs");
    }
    assert_nothing_stored(d);
    assert_true(bft_serves_status(d));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_long_requests_keep_leases,
                                        bft_daemon_setup_short_lease,
                                        bft_daemon_teardown),
        BFT_DAEMON_TEST(test_killed_mid_submission),
        BFT_DAEMON_TEST(test_stopped_mid_submission),
        BFT_DAEMON_TEST(test_invalid_big_sweep),
        BFT_DAEMON_TEST(test_cancel_finished_after_restart),
        BFT_DAEMON_TEST(test_big_fan_out),
        BFT_DAEMON_TEST(test_big_revival),
        BFT_DAEMON_TEST(test_small_overtakes_big),
        BFT_DAEMON_TEST(test_submitter_leaves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
