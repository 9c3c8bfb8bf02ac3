/* Allocation-failure injection, SQLite-style: a short daemon scenario
 * (hello, submit, lease, metrics, heartbeat, checkpoint, job_done) runs
 * once to count the allocations it makes, then again for every
 * N with the N-th allocation failing (bifocald-allocfail: common/alloc.h's
 * injection; SQLite's allocations are counted too).  Whatever N hits, the
 * daemon either answers (an error where it must) and stops cleanly, or
 * aborts through the one out-of-memory policy (SIGABRT after its log
 * line); it never hangs, never dies otherwise, and the database passes
 * integrity_check with consistent rows: no half-stored sweep, no metrics
 * batch in part, no job running without its one live attempt.
 *
 * Memory that stays short is tried too (BF_ALLOC_FAIL_REPEAT: every
 * allocation from the N-th on fails, as SQLite's faultsim repeats), for
 * REPEAT_RUNS values of N spread evenly over the scenario rather than
 * every one: with all later allocations failing, the run ends at the first
 * allocation the daemon cannot do without, so neighbouring N mostly take
 * the same path, and the suite's time stays within a few percent of the
 * single-failure runs'.
 *
 * BFT_ALLOC_SHARD=I/K runs the I-th of K shares of both tests' values of
 * N (those with index % K == I), so meson runs the shares side by side;
 * BFT_ALLOC_STEP=S runs every S-th N only (a quick look by hand). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "clock.h"
#include "fake_worker.h"
#include "harness.h"

/* Values of N tried with every allocation from the N-th on failing. */
#define REPEAT_RUNS 64

/* How long a reply may take: a live daemon answers in milliseconds, also
 * under ASan beside another test. */
#define REPLY_MS 15000

typedef struct run {
    bft_daemon d;
    int steps;          /* scenario steps answered */
    int hung;           /* a request got no reply and no EOF */
} run;

/* Sends msg (stolen); 1 if any reply came, 0 on EOF (the daemon died),
 * and marks the run hung on a timeout. */
static int ask(run *r, bf_rpc *c, json_t *msg)
{
    bf_error err;
    json_t *reply = bf_rpc_request(c, msg, REPLY_MS, NULL, NULL, &err);
    json_decref(msg);
    if (!reply && strstr(err.msg, "timed out"))
        r->hung = 1;
    if (reply)
        r->steps++;
    json_decref(reply);
    return reply != NULL;
}

static int64_t int_of(json_t *m, const char *key)
{
    return json_integer_value(json_object_get(m, key));
}

/* The worker's part: lease, metrics, heartbeat, checkpoint, done. */
static void worker_part(run *r)
{
    bf_rpc w;
    bf_error err;
    if (bft_connect(&r->d, &w, NULL, NULL))
        return;
    if (bf_rpc_hello(&w, r->d.token, "worker", "w", "h", 1, &err)) {
        bf_rpc_close(&w);
        return;
    }
    r->steps++;
    json_t *req = json_pack("{s:s}", "type", "request_job");
    json_t *job = bf_rpc_request(&w, req, REPLY_MS, NULL, NULL, &err);
    json_decref(req);
    int64_t attempt = job ? int_of(job, "attempt_id") : 0;
    if (!job && strstr(err.msg, "timed out"))
        r->hung = 1;
    json_decref(job);
    if (attempt > 0) {
        r->steps++;
        json_t *recs = bft_train_records(1, 5);
        if (ask(r, &w, json_pack("{s:s, s:I, s:i, s:o}", "type", "metrics",
                                 "attempt_id", (json_int_t)attempt, "seq", 1,
                                 "records", recs))
            && ask(r, &w, json_pack("{s:s, s:I}", "type", "heartbeat",
                                    "attempt_id", (json_int_t)attempt))
            && ask(r, &w, json_pack("{s:s, s:I, s:s, s:i}", "type",
                                    "checkpoint", "attempt_id",
                                    (json_int_t)attempt, "path", "/ck/1",
                                    "step", 10)))
            ask(r, &w, json_pack("{s:s, s:I}", "type", "job_done",
                                 "attempt_id", (json_int_t)attempt));
    }
    bf_rpc_close(&w);
}

static void scenario(run *r)
{
    bf_rpc c;
    bf_error err;
    if (bft_connect(&r->d, &c, NULL, NULL))
        return;
    if (bf_rpc_hello(&c, r->d.token, "client", NULL, NULL, 1, &err) == 0) {
        r->steps++;
        if (ask(r, &c, json_pack("{s:s, s:s, s:s}", "type", "submit",
                                 "filename", "s.yaml", "text",
                                 "name: s\nbase: {steps: 100}\nseeds: 2\n")))
            worker_part(r);
    } else if (strstr(err.msg, "timed out")) {
        r->hung = 1;
    }
    bf_rpc_close(&c);
}

/* What any run must leave, whatever failed when. */
static void check_database(run *r, long n)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(r->d.db, &db, SQLITE_OPEN_READONLY,
                                     NULL), SQLITE_OK);
    static const struct { const char *sql; const char *what; } zero[] = {
        { "SELECT count(*) FROM pragma_integrity_check"
          " WHERE integrity_check != 'ok'", "integrity_check" },
        { "SELECT count(*) FROM sweeps WHERE n_jobs != 2",
          "a sweep half-stored" },
        { "SELECT (SELECT count(*) FROM jobs)"
          " - (SELECT coalesce(sum(n_jobs), 0) FROM sweeps)",
          "jobs without their sweep" },
        { "SELECT count(*) FROM (SELECT count(*) AS n FROM metrics)"
          " WHERE n NOT IN (0, 20)", "a metrics batch in part" },
        { "SELECT count(*) FROM (SELECT job_id FROM attempts WHERE"
          " outcome = 'running' GROUP BY job_id HAVING count(*) > 1)",
          "a job with two live attempts" },
        { "SELECT (SELECT count(*) FROM jobs WHERE status = 'running')"
          " - (SELECT count(*) FROM attempts WHERE outcome = 'running')",
          "running jobs and live attempts disagree" },
        { "SELECT count(*) FROM jobs j WHERE status = 'succeeded'"
          " AND NOT EXISTS (SELECT 1 FROM attempts a WHERE"
          " a.job_id = j.job_id AND a.outcome = 'succeeded')",
          "a job succeeded without its attempt" },
    };
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        if (bft_db_int(db, zero[i].sql) != 0)
            fail_msg("N=%ld: %s (%s)", n, zero[i].what, zero[i].sql);
    sqlite3_close(db);
}

static int log_has(run *r, const char *needle)
{
    return bft_log_lines_with(&r->d, needle) > 0;
}

/* One run with the n-th allocation failing (0: none), and every one after
 * it too if `repeat`; returns the allocations the daemon counted when it
 * stopped cleanly, else -1.  *aborted: it aborted (out of memory);
 * *sqlite_nomem: SQLite reported running out (SQLITE_NOMEM, 7) and the
 * daemon carried on. */
static long run_once(long n, int repeat, int *aborted, int *sqlite_nomem)
{
    char at[32];
    snprintf(at, sizeof at, "%ld", n);
    setenv("BF_ALLOC_FAIL_AT", at, 1);
    setenv("BF_ALLOC_FAIL_REPEAT", repeat ? "1" : "0", 1);
    run r = { .steps = 0 };
    assert_int_equal(bft_daemon_start(&r.d, 30), 0);
    scenario(&r);
    if (r.hung)
        fail_msg("N=%ld%s: a request got no reply (log %s)", n,
                 repeat ? " on" : "", r.d.log);
    int status = bft_daemon_stop(&r.d, SIGTERM);
    long counted = -1;
    *aborted = status == 128 + SIGABRT;
    if (*aborted) {
        if (!log_has(&r, "out of memory allocating"))
            fail_msg("N=%ld: aborted without the out-of-memory line (log %s)",
                     n, r.d.log);
    } else if (status != 0) {
        fail_msg("N=%ld: the daemon ended with status %d (log %s)", n,
                 status, r.d.log);
    } else {
        counted = bft_file_number_after(r.d.log, "allocations counted: ");
    }
    *sqlite_nomem = log_has(&r, "(SQLite error 7)");
    check_database(&r, n);
    if (n == 0 && r.steps < 8)
        fail_msg("the scenario without failures stopped at step %d",
                 r.steps);
    bft_daemon_cleanup(&r.d);
    return counted;
}

/* This run's share of the values of N: index % shares == share. */
static long share, shares = 1;

static void read_shard(void)
{
    const char *env = getenv("BFT_ALLOC_SHARD");
    if (env && (sscanf(env, "%ld/%ld", &share, &shares) != 2 ||
                shares < 1 || share < 0 || share >= shares)) {
        fprintf(stderr, "BFT_ALLOC_SHARD=%s: expected I/K, 0 <= I < K\n",
                env);
        exit(2);
    }
}

static void test_every_allocation_may_fail(void **state)
{
    (void)state;
    int aborted, nomem;
    long total = run_once(0, 0, &aborted, &nomem);
    assert_true(total > 0);
    const char *step_env = getenv("BFT_ALLOC_STEP");
    long step = step_env && atol(step_env) > 0 ? atol(step_env) : 1;
    int64_t t0 = bf_monotonic_ms();
    long n_aborted = 0, n_nomem = 0, n_runs = 0;
    for (long n = 1 + share * step; n <= total; n += shares * step) {
        run_once(n, 0, &aborted, &nomem);
        n_aborted += aborted;
        n_nomem += nomem;
        n_runs++;
    }
    print_message("%ld allocations in the scenario; %ld runs: %ld aborted "
                  "through the out-of-memory policy, %ld answered SQLite's "
                  "SQLITE_NOMEM with an error and went on; %.1f s\n", total,
                  n_runs, n_aborted, n_nomem,
                  (double)(bf_monotonic_ms() - t0) / 1000.0);
    /* Both paths were taken: SQLite's allocations are counted too. */
    assert_true(n_aborted > 0 && n_nomem > 0);
}

/* Every allocation from the N-th on fails: the daemon still never hangs
 * or dies otherwise, and leaves a consistent database; and since it
 * cannot get by without memory for good, every run ends through the
 * out-of-memory policy (a single failure leaves some runs going on after
 * SQLITE_NOMEM: this fails if the failures do not repeat). */
static void test_memory_stays_short(void **state)
{
    (void)state;
    int aborted, nomem;
    long total = run_once(0, 0, &aborted, &nomem);
    assert_true(total > REPEAT_RUNS);
    int64_t t0 = bf_monotonic_ms();
    long n_aborted = 0, n_runs = 0;
    for (long i = share; i < REPEAT_RUNS; i += shares) {
        long n = 1 + (2 * i + 1) * total / (2 * REPEAT_RUNS);
        run_once(n, 1, &aborted, &nomem);
        n_aborted += aborted;
        n_runs++;
    }
    print_message("%ld allocations in the scenario; %ld runs with every "
                  "allocation from N on failing: %ld aborted through the "
                  "out-of-memory policy; %.1f s\n", total, n_runs, n_aborted,
                  (double)(bf_monotonic_ms() - t0) / 1000.0);
    assert_int_equal(n_aborted, n_runs);
}

int main(void)
{
    read_shard();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_may_fail),
        cmocka_unit_test(test_memory_stays_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
