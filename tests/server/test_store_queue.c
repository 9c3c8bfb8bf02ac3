/* The queue: leasing order, lease contents, expiry with an injected clock,
 * re-queue, failure after max_attempts, fencing, cancel and retry. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store_internal.h"
#include "test_store_util.h"

typedef bft_store_fixture fixture;
#define setup bft_store_setup
#define teardown bft_store_teardown

/* A sweep of `jobs` jobs (one per seed). */
static int64_t submit(bf_store *s, const char *name, int priority, int jobs,
                      int max_attempts)
{
    char yaml[256];
    snprintf(yaml, sizeof yaml, "name: %s\npriority: %d\nseeds: %d\nmax_attempts: %d\n",
             name, priority, jobs, max_attempts);
    return bft_submit(s, yaml, 1, NULL);
}

/* Leases one job to a worker of a fresh name (a worker holds one live
 * lease at a time), asserting there is one; returns it (caller clears). */
static bf_lease lease(bf_store *s, int64_t now, int64_t lease_ms)
{
    static int n_workers;
    char worker[32];
    snprintf(worker, sizeof worker, "w%d", ++n_workers);
    bf_lease l;
    bf_error err = {0};
    int rc = bf_store_lease_next(s, worker, NULL, now, lease_ms, &l, &err);
    if (rc != 1)
        fail_msg("lease_next: %d %s", rc, err.msg);
    return l;
}

static int64_t lease_job(bf_store *s)
{
    bf_lease l = lease(s, 10, 60000);
    int64_t job = l.job_id;
    bf_lease_clear(&l);
    return job;
}

static int64_t first_job(bf_store *s, int64_t sweep)
{
    return bft_int(s, "SELECT min(job_id) FROM jobs WHERE sweep_id = %lld",
                   (long long)sweep);
}

static char *job_status(bf_store *s, int64_t job)
{
    return bft_text(s, "SELECT status FROM jobs WHERE job_id = %lld", (long long)job);
}

#define assert_job_status(s, job, want)                                        \
    do {                                                                       \
        char *got_ = job_status(s, job);                                       \
        assert_string_equal(got_, want);                                       \
        free(got_);                                                            \
    } while (0)

static void test_priority_first(void **state)
{
    fixture *f = *state;
    int64_t low = submit(f->s, "low", 0, 2, 3);
    int64_t high = submit(f->s, "high", 5, 2, 3);
    assert_int_equal(lease_job(f->s), first_job(f->s, high));
    assert_int_equal(lease_job(f->s), first_job(f->s, high) + 1);
    assert_int_equal(lease_job(f->s), first_job(f->s, low));
    assert_int_equal(lease_job(f->s), first_job(f->s, low) + 1);
    bf_lease l;
    assert_int_equal(bf_store_lease_next(f->s, "w", NULL, 10, 100, &l, NULL), 0);
}

/* The store, not only the daemon, keeps a worker to one live lease. */
static void test_one_live_lease_per_worker(void **state)
{
    fixture *f = *state;
    submit(f->s, "s", 0, 3, 1);
    bf_lease l, again;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_next(f->s, "g", NULL, 10, 1000, &l, &err), 1);
    assert_int_equal(bf_store_lease_next(f->s, "g", NULL, 11, 1000, &again, &err),
                     BF_STORE_CONFLICT);
    assert_non_null(strstr(err.msg, "still holds live attempt"));
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM attempts"), 1);
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 1, NULL, 12, NULL),
                     BF_STORE_OK);
    bf_lease_clear(&l);
    assert_int_equal(bf_store_lease_next(f->s, "g", NULL, 13, 1000, &l, &err), 1);
    bf_lease_clear(&l);
    /* An expired lease is not held any more. */
    int n = 0;
    assert_int_equal(bf_store_expire_leases(f->s, 5000, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(bf_store_lease_next(f->s, "g", NULL, 5001, 1000, &l, &err), 1);
    bf_lease_clear(&l);
}

/* A lease whose reply was lost: the same worker asking again with the same
 * request token gets the same lease, renewed and otherwise unchanged, and
 * no second attempt; any other ask (another token, none, another worker's
 * same token, the token after its attempt ended) is answered as before. */
static void test_same_request_leased_again(void **state)
{
    fixture *f = *state;
    submit(f->s, "s", 0, 3, 1);
    bf_lease l, again, other;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_next(f->s, "g", "n-1", 10, 1000, &l,
                                         &err), 1);
    assert_false(l.again);
    assert_int_equal(bf_store_lease_next(f->s, "g", "n-1", 500, 1000, &again,
                                         &err), 1);
    assert_true(again.again);
    assert_int_equal(again.attempt_id, l.attempt_id);
    assert_int_equal(again.job_id, l.job_id);
    assert_int_equal(again.sweep_id, l.sweep_id);
    assert_int_equal(again.attempt_no, 1);
    assert_string_equal(again.config_json, l.config_json);
    assert_null(again.resume_checkpoint);
    assert_int_equal(again.resume_step, l.resume_step);
    assert_int_equal(again.source_job_id, l.source_job_id);
    assert_string_equal(again.database_id, l.database_id);
    assert_int_equal(again.lease_expires_ms, 1500);
    assert_int_equal(bft_int(f->s, "SELECT lease_expires_ms FROM attempts "
                             "WHERE attempt_id = %lld",
                             (long long)l.attempt_id), 1500);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM attempts"), 1);
    assert_int_equal(bft_int(f->s, "SELECT attempts FROM jobs WHERE job_id = "
                             "%lld", (long long)l.job_id), 1);
    bf_lease_clear(&again);
    assert_int_equal(bf_store_lease_next(f->s, "g", "n-2", 600, 1000, &again,
                                         &err), BF_STORE_CONFLICT);
    assert_int_equal(bf_store_lease_next(f->s, "g", NULL, 600, 1000, &again,
                                         &err), BF_STORE_CONFLICT);
    assert_int_equal(bf_store_lease_next(f->s, "h", "n-1", 600, 1000, &other,
                                         &err), 1);
    assert_false(other.again);
    assert_true(other.job_id != l.job_id);
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 1, NULL, 700,
                                             NULL), BF_STORE_OK);
    assert_int_equal(bf_store_lease_next(f->s, "g", "n-1", 800, 1000, &again,
                                         &err), 1);
    assert_false(again.again);
    assert_true(again.job_id != l.job_id && again.job_id != other.job_id);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM attempts"), 3);
    bf_lease_clear(&l);
    bf_lease_clear(&again);
    bf_lease_clear(&other);
}

/* Writes an attempt row of job `job` by hand (what a bug in the store's
 * code paths would write): SQLite's extended result code. */
static int insert_attempt(bf_store *s, int64_t job, int attempt_no,
                          const char *outcome)
{
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO attempts (job_id, attempt_no, worker,"
             " started_ms, lease_expires_ms, outcome) VALUES (%lld, %d, 'rogue',"
             " 20, 1000, '%s')", (long long)job, attempt_no, outcome);
    sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return sqlite3_extended_errcode(s->db);
}

/* A job goes only to a worker of its config's trainer: builtin workers
 * (no trainer named) never lease an exec job, an exec worker never a
 * builtin one, and one of another trainer neither. */
static void test_lease_by_trainer(void **state)
{
    fixture *f = *state;
    int64_t builtin = submit(f->s, "builtin", 0, 1, 3);
    int64_t exec = bft_submit(f->s, "name: exec\npriority: 9\nseeds: 2\n"
                              "base: {trainer: fake}\n", 1, NULL);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE "
                             "trainer = 'fake'"), 2);
    bf_lease l;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_for(f->s, "other", NULL, "torch", 10,
                                        60000, &l, &err), 0);
    /* the exec sweep has the higher priority: builtin workers skip it */
    assert_int_equal(bf_store_lease_next(f->s, "b1", NULL, 10, 60000, &l,
                                         &err), 1);
    assert_int_equal(l.job_id, first_job(f->s, builtin));
    bf_lease_clear(&l);
    assert_int_equal(bf_store_lease_next(f->s, "b2", NULL, 10, 60000, &l,
                                         &err), 0);
    for (int i = 0; i < 2; i++) {
        char worker[16];
        snprintf(worker, sizeof worker, "x%d", i);
        assert_int_equal(bf_store_lease_for(f->s, worker, NULL, "fake", 10,
                                            60000, &l, &err), 1);
        assert_int_equal(l.job_id, first_job(f->s, exec) + i);
        assert_non_null(strstr(l.config_json, "\"trainer\":\"fake\""));
        bf_lease_clear(&l);
    }
    assert_int_equal(bf_store_lease_for(f->s, "x9", NULL, "fake", 10, 60000,
                                        &l, &err), 0);
}

/* Train records of steps from..to (loss = step * scale) by attempt. */
static void send_losses(bf_store *s, int64_t attempt, int from, int to,
                        double scale)
{
    json_t *recs = json_array();
    for (int step = from; step <= to; step++)
        json_array_append_new(recs, json_pack("{s:s,s:i,s:f}", "type",
                              "train", "step", step, "loss", step * scale));
    bf_error err = {0};
    assert_int_equal(bf_store_ingest(s, attempt, recs, NULL, NULL, &err), 0);
    assert_int_equal(bf_store_flush(s, &err), 0);
    json_decref(recs);
}

/* A job whose trainer is not the built-in one may not resend what it sent
 * bit for bit: when its next attempt is leased, the rows the dead one
 * sent past the recorded checkpoint are retired, so the new attempt's own
 * take their steps; a built-in job keeps them (its resend is the same). */
static void test_retry_retires_rows_past_the_checkpoint(void **state)
{
    fixture *f = *state;
    for (int k = 0; k < 2; k++) {
        const char *trainer = k ? "fake" : NULL;
        char yaml[160];
        snprintf(yaml, sizeof yaml, "name: r%d\nmax_attempts: 3\nbase: "
                 "{steps: 20, warmup_steps: 0%s}\n", k,
                 k ? ", trainer: fake" : "");
        bft_submit(f->s, yaml, 1, NULL);
        bf_lease l;
        bf_error err = {0};
        char w1[8], w2[8];
        snprintf(w1, sizeof w1, "a%d", k);
        snprintf(w2, sizeof w2, "b%d", k);
        assert_int_equal(bf_store_lease_for(f->s, w1, NULL, trainer, 10,
                                            60000, &l, &err), 1);
        int64_t job = l.job_id;
        send_losses(f->s, l.attempt_id, 1, 10, 1.0);
        assert_int_equal(bf_store_record_checkpoint(f->s, l.attempt_id,
                         "/ck/step-5", 5, NULL), BF_STORE_OK);
        assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 0,
                         "died", 20, NULL), BF_STORE_OK);
        bf_lease_clear(&l);
        assert_int_equal(bf_store_lease_for(f->s, w2, NULL, trainer, 30,
                                            60000, &l, &err), 1);
        assert_int_equal(l.job_id, job);
        assert_int_equal(l.resume_step, 5);
        send_losses(f->s, l.attempt_id, 6, 12, 100.0);
        bf_lease_clear(&l);
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM metrics WHERE job_id"
                 " = %lld AND key = 'loss' AND value >= 100", (long long)job);
        /* fake: steps 6..12 are the new attempt's; built-in: only 11, 12 */
        assert_int_equal(bft_int(f->s, sql), k ? 7 : 2);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM metrics WHERE job_id"
                 " = %lld AND key = 'loss'", (long long)job);
        assert_int_equal(bft_int(f->s, sql), 12);
    }
}

/* Migration 10's unique index: the database itself refuses a second
 * running attempt of a job, whatever statement writes it; ended attempts
 * of the job are not limited. */
static void test_one_running_attempt_per_job(void **state)
{
    fixture *f = *state;
    submit(f->s, "s", 0, 1, 3);
    bf_lease l = lease(f->s, 10, 1000);
    assert_int_equal(insert_attempt(f->s, l.job_id, 2, "running"),
                     SQLITE_CONSTRAINT_UNIQUE);
    assert_int_equal(insert_attempt(f->s, l.job_id, 2, "failed"), SQLITE_OK);
    assert_int_equal(sqlite3_exec(f->s->db, "UPDATE attempts SET outcome ="
                                  " 'running' WHERE attempt_no = 2", NULL, NULL,
                                  NULL), SQLITE_CONSTRAINT);
    assert_int_equal(sqlite3_extended_errcode(f->s->db),
                     SQLITE_CONSTRAINT_UNIQUE);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM attempts WHERE"
                             " outcome = 'running'"), 1);
    /* Once the live attempt ends, the job may run again. */
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 0, "x", 30,
                                             NULL), BF_STORE_OK);
    assert_int_equal(insert_attempt(f->s, l.job_id, 3, "running"), SQLITE_OK);
    bf_lease_clear(&l);
}

static void test_round_robin_then_age(void **state)
{
    fixture *f = *state;
    int64_t a = submit(f->s, "a", 0, 3, 3), b = submit(f->s, "b", 0, 3, 3);
    int64_t a0 = first_job(f->s, a), b0 = first_job(f->s, b);
    assert_int_equal(lease_job(f->s), a0);
    assert_int_equal(lease_job(f->s), b0);
    /* A new sweep has never been leased from: it goes next. */
    int64_t c = submit(f->s, "c", 0, 1, 3);
    assert_int_equal(lease_job(f->s), first_job(f->s, c));
    assert_int_equal(lease_job(f->s), a0 + 1);
    /* A re-queued job is older than the rest of its sweep: it comes first. */
    bf_lease l = lease(f->s, 20, 60000);
    assert_int_equal(l.job_id, b0 + 1);
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 0, "oom", 30, NULL), 0);
    bf_lease_clear(&l);
    assert_int_equal(lease_job(f->s), a0 + 2);
    assert_int_equal(lease_job(f->s), b0 + 1);
    assert_int_equal(lease_job(f->s), b0 + 2);
}

static void test_lease_contents_and_resume(void **state)
{
    fixture *f = *state;
    int64_t sw = submit(f->s, "r", 0, 1, 3);
    bf_lease l = lease(f->s, 1000, 30000);
    assert_int_equal(l.sweep_id, sw);
    assert_int_equal(l.attempt_no, 1);
    assert_int_equal(l.lease_expires_ms, 31000);
    assert_null(l.resume_checkpoint);
    char *cfg = bft_text(f->s, "SELECT config FROM jobs WHERE job_id = %lld",
                         (long long)l.job_id);
    assert_string_equal(l.config_json, cfg);
    free(cfg);
    assert_job_status(f->s, l.job_id, "running");
    assert_int_equal(bft_int(f->s, "SELECT attempts FROM jobs"), 1);
    assert_int_equal(bf_store_record_checkpoint(f->s, l.attempt_id, "/ck/step-40", 40, NULL), 0);
    assert_int_equal(bf_store_record_checkpoint(f->s, l.attempt_id, "/ck/step-80", 80, NULL), 0);
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 0, "node died", 1300, NULL), 0);
    assert_job_status(f->s, l.job_id, "queued");
    char *e = bft_text(f->s, "SELECT error FROM jobs");
    assert_string_equal(e, "node died");
    free(e);
    bf_lease_clear(&l);

    l = lease(f->s, 2000, 30000);
    assert_int_equal(l.attempt_no, 2);
    assert_string_equal(l.resume_checkpoint, "/ck/step-80");
    assert_int_equal(l.resume_step, 80);
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 1, NULL, 2500, NULL), 0);
    assert_job_status(f->s, l.job_id, "succeeded");
    assert_int_equal(bft_int(f->s, "SELECT finished_ms FROM jobs"), 2500);
    char *st = bft_text(f->s, "SELECT status FROM sweeps");
    assert_string_equal(st, "done");
    free(st);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM attempts WHERE outcome ="
                                   " 'failed' AND error = 'node died'"), 1);
    bf_lease_clear(&l);
}

static void test_expiry_requeue_then_fail(void **state)
{
    fixture *f = *state;
    submit(f->s, "e", 0, 1, 2);
    bf_lease l = lease(f->s, 0, 1000);
    int n = -1;
    /* Renewed at 900 to 1900: not expired at 1500. */
    assert_int_equal(bf_store_renew(f->s, l.attempt_id, 900, 1000, NULL), 0);
    assert_int_equal(bf_store_expire_leases(f->s, 1500, &n, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(bf_store_expire_leases(f->s, 1900, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_job_status(f->s, l.job_id, "queued");
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM attempts WHERE outcome ="
                                   " 'expired' AND ended_ms = 1900"), 1);
    bf_lease_clear(&l);

    l = lease(f->s, 2000, 1000);
    assert_int_equal(l.attempt_no, 2);
    assert_int_equal(bf_store_expire_leases(f->s, 5000, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_job_status(f->s, l.job_id, "failed");
    char *e = bft_text(f->s, "SELECT error FROM jobs");
    assert_string_equal(e, "lease expired after 2 attempts");
    free(e);
    bf_lease_clear(&l);
    assert_int_equal(bf_store_lease_next(f->s, "w", NULL, 6000, 1000, &l, NULL), 0);
}

/* Every call naming a dead attempt is fenced and changes nothing. */
static void assert_fenced(bf_store *s, int64_t attempt)
{
    bf_error err = {0};
    json_t *recs = json_pack("[{s:s,s:i,s:f}]", "type", "train", "step", 1, "loss", 1.0);
    int64_t changes = sqlite3_total_changes(s->db);
    assert_int_equal(bf_store_renew(s, attempt, 10, 1000, NULL), BF_STORE_FENCED);
    assert_int_equal(bf_store_finish_attempt(s, attempt, 1, NULL, 10, NULL), BF_STORE_FENCED);
    assert_int_equal(bf_store_finish_attempt(s, attempt, 0, "x", 10, NULL), BF_STORE_FENCED);
    assert_int_equal(bf_store_record_checkpoint(s, attempt, "/c", 5, NULL), BF_STORE_FENCED);
    assert_int_equal(bf_store_attempt_cancelled(s, attempt, NULL), BF_STORE_FENCED);
    assert_int_equal(bf_store_attempt_stopped(s, attempt, 10, NULL), BF_STORE_FENCED);
    assert_int_equal(bf_store_ingest(s, attempt, recs, NULL, NULL, &err), BF_STORE_FENCED);
    assert_int_equal(bf_store_flush(s, &err), 0);
    assert_int_equal(sqlite3_total_changes(s->db), changes);
    json_decref(recs);
}

static void test_fencing(void **state)
{
    fixture *f = *state;
    submit(f->s, "f", 0, 2, 3);
    bf_lease dead = lease(f->s, 0, 100);
    int n;
    assert_int_equal(bf_store_expire_leases(f->s, 100, &n, NULL), 0);
    bf_lease live = lease(f->s, 200, 100000);   /* the same job again */
    assert_int_equal(live.job_id, dead.job_id);
    assert_fenced(f->s, dead.attempt_id);        /* expired */
    assert_fenced(f->s, 987654);                 /* never existed */
    assert_int_equal(bf_store_finish_attempt(f->s, live.attempt_id, 1, NULL, 300, NULL), 0);
    assert_fenced(f->s, live.attempt_id);        /* finished */
    assert_job_status(f->s, live.job_id, "succeeded");
    assert_int_equal(bft_int(f->s, "SELECT checkpoint_path IS NULL FROM jobs WHERE"
                                   " job_id = %lld", (long long)live.job_id), 1);
    bf_lease_clear(&dead);
    bf_lease_clear(&live);
}

static void test_cancel_sweep(void **state)
{
    fixture *f = *state;
    int64_t sw = submit(f->s, "c", 0, 4, 3);
    bf_lease a = lease(f->s, 0, 1000), b = lease(f->s, 0, 1000);
    int64_t *running = NULL;
    int n_running = 0;
    bf_error err = {0};
    assert_int_equal(bft_cancel_sweep(f->s, sw, 50, &running, &n_running, &err), 0);
    assert_int_equal(n_running, 2);
    assert_true((running[0] == a.attempt_id && running[1] == b.attempt_id) ||
                (running[0] == b.attempt_id && running[1] == a.attempt_id));
    free(running);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE status ="
                                   " 'cancelled' AND finished_ms = 50"), 2);
    assert_int_equal(bf_store_attempt_cancelled(f->s, a.attempt_id, NULL), 1);
    bf_lease l;
    assert_int_equal(bf_store_lease_next(f->s, "w", NULL, 60, 1000, &l, NULL), 0);
    /* One worker acknowledges, the other's lease runs out: both cancelled. */
    assert_int_equal(bf_store_attempt_stopped(f->s, a.attempt_id, 70, NULL), 0);
    assert_job_status(f->s, a.job_id, "cancelled");
    assert_job_status(f->s, b.job_id, "running");
    int n;
    assert_int_equal(bf_store_expire_leases(f->s, 1000, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_job_status(f->s, b.job_id, "cancelled");
    assert_int_equal(bft_int(f->s, "SELECT cancelled FROM sweep_progress"), 4);
    char *st = bft_text(f->s, "SELECT status FROM sweeps");
    assert_string_equal(st, "cancelled");
    free(st);
    assert_int_equal(bft_cancel_sweep(f->s, 77, 80, &running, &n_running, &err),
                     BF_STORE_NOT_FOUND);
    assert_non_null(strstr(err.msg, "77"));
    bf_lease_clear(&a);
    bf_lease_clear(&b);
}

static void test_cancel_job(void **state)
{
    fixture *f = *state;
    int64_t sw = submit(f->s, "j", 0, 3, 3);
    int64_t j0 = first_job(f->s, sw);
    bf_lease l = lease(f->s, 0, 1000);           /* job j0 */
    int64_t *running = NULL;
    int n_running = -1;
    bf_error err = {0};
    assert_int_equal(bf_store_cancel_job(f->s, j0 + 1, 5, &running, &n_running, &err), 0);
    assert_int_equal(n_running, 0);
    assert_job_status(f->s, j0 + 1, "cancelled");
    assert_int_equal(bf_store_cancel_job(f->s, j0, 6, &running, &n_running, &err), 0);
    assert_int_equal(n_running, 1);
    assert_int_equal(running[0], l.attempt_id);
    free(running);
    /* A failure report from a cancel-requested job ends it cancelled. */
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 0, "killed", 7, NULL), 0);
    assert_job_status(f->s, j0, "cancelled");
    bf_lease_clear(&l);

    l = lease(f->s, 8, 1000);
    assert_int_equal(l.job_id, j0 + 2);
    assert_int_equal(bf_store_attempt_cancelled(f->s, l.attempt_id, NULL), 0);
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 1, NULL, 9, NULL), 0);
    assert_int_equal(bf_store_cancel_job(f->s, j0 + 2, 10, &running, &n_running, &err),
                     BF_STORE_ERR);
    assert_non_null(strstr(err.msg, "succeeded"));
    assert_int_equal(bf_store_cancel_job(f->s, 4242, 10, &running, &n_running, &err),
                     BF_STORE_NOT_FOUND);
    bf_lease_clear(&l);
}

static void test_retry(void **state)
{
    fixture *f = *state;
    int64_t sw = submit(f->s, "t", 0, 1, 1);
    bf_lease l = lease(f->s, 0, 1000);
    bf_error err = {0};
    assert_int_equal(bf_store_retry_job(f->s, l.job_id, 0, 20, &err), BF_STORE_ERR);
    assert_non_null(strstr(err.msg, "running"));
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 0, "diverged", 10, NULL), 0);
    assert_job_status(f->s, l.job_id, "failed");    /* max_attempts 1 */
    char *st = bft_text(f->s, "SELECT status FROM sweeps WHERE sweep_id = %lld",
                        (long long)sw);
    assert_string_equal(st, "done");
    free(st);

    assert_int_equal(bf_store_retry_job(f->s, l.job_id, 0, 20, &err), 0);
    assert_job_status(f->s, l.job_id, "queued");
    assert_int_equal(bft_int(f->s, "SELECT attempts FROM jobs"), 0);
    st = bft_text(f->s, "SELECT status FROM sweeps");
    assert_string_equal(st, "active");
    free(st);
    int64_t job = l.job_id;
    bf_lease_clear(&l);
    l = lease(f->s, 20, 1000);
    assert_int_equal(l.job_id, job);
    assert_int_equal(l.attempt_no, 2);    /* attempt numbers keep counting */
    assert_int_equal(bf_store_retry_job(f->s, 999, 0, 20, &err), BF_STORE_NOT_FOUND);
    bf_lease_clear(&l);
}

/* ---- staged sweeps (bf_store_stage_jobs) ---------------------------------- */

typedef struct staged {
    bf_sweep *sw;
    bf_job_row rows[160];
    size_t n;
    bf_stage stage;
} staged;

static int keep_row(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)err;
    staged *st = ctx;
    bf_job_row_from(&st->rows[st->n], job);
    st->rows[st->n++].config_json = strdup(job->config_json);
    return 0;
}

/* The sweep file text, expanded into st->rows. */
static void expand_for_staging(staged *st, const char *text)
{
    memset(st, 0, sizeof *st);
    bf_error err;
    st->sw = bf_sweep_parse("staged.yaml", NULL, text, strlen(text), &err);
    assert_non_null(st->sw);
    assert_int_equal(bf_sweep_expand(st->sw, keep_row, st, &err), 0);
    st->stage = (bf_stage){ .sweep = st->sw, .filename = "staged.yaml",
                            .text = text, .len = strlen(text), .now_ms = 5 };
}

static void staged_free(staged *st)
{
    for (size_t i = 0; i < st->n; i++)
        free(st->rows[i].config_json);
    bf_stage_clear(&st->stage);
    bf_sweep_free(st->sw);
}

static void stage(bf_store *s, staged *st, size_t from, size_t n, int last)
{
    bf_error err = {0};
    size_t done;
    if (bf_store_stage_jobs(s, &st->stage, st->rows + from, n, last, 0, &done,
                            &err))
        fail_msg("stage: %s", err.msg);
    assert_int_equal(done, n);
}

/* The sweep file text, its first n jobs staged (not the last chunk). */
static void begin_staging(bf_store *s, staged *st, const char *text, size_t n)
{
    expand_for_staging(st, text);
    stage(s, st, 0, n, 0);
}

/* Until its last chunk, a staged sweep is not there: not leased (not even
 * ahead of a lower priority), listed, found or cancelled. */
static void test_staged_sweep_hidden(void **state)
{
    fixture *f = *state;
    int64_t small = submit(f->s, "small", 0, 2, 1);
    staged st;
    begin_staging(f->s, &st, "name: big\npriority: 9\nseeds: 5\n", 3);
    int64_t big = st.stage.sweep_id;
    assert_true(big > small);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id"
                             " = %lld", (long long)big), 3);

    bf_error err = {0};
    json_t *rows = bf_store_status(f->s, 0, &err);
    assert_int_equal(json_array_size(rows), 1);
    json_decref(rows);
    assert_null(bf_store_status(f->s, big, &err));
    int64_t next;
    rows = bft_jobs_page(f->s, 0, NULL, 0, 100, 1 << 20, &next, &err);
    assert_int_equal(json_array_size(rows), 2);
    json_decref(rows);
    int64_t *running = NULL;
    int n_running;
    assert_int_equal(bft_cancel_sweep(f->s, big, 1, &running, &n_running,
                                           &err), BF_STORE_NOT_FOUND);
    int64_t staged_job = bft_int(f->s, "SELECT min(job_id) FROM jobs WHERE"
                                 " sweep_id = %lld", (long long)big);
    assert_int_equal(bf_store_cancel_job(f->s, staged_job, 1, &running,
                                         &n_running, &err),
                     BF_STORE_NOT_FOUND);
    for (int i = 0; i < 2; i++) {
        bf_lease l = lease(f->s, 10, 1000);
        assert_int_equal(l.sweep_id, small);
        bf_lease_clear(&l);
    }
    bf_lease l;
    assert_int_equal(bf_store_lease_next(f->s, "idle", NULL, 10, 1000, &l, &err), 0);

    /* The last chunk publishes it: now it leases first (priority 9). */
    stage(f->s, &st, 3, 2, 1);
    assert_int_equal(bft_int(f->s, "SELECT n_jobs FROM sweeps WHERE sweep_id"
                             " = %lld", (long long)big), 5);
    l = lease(f->s, 11, 1000);
    assert_int_equal(l.sweep_id, big);
    bf_lease_clear(&l);
    staged_free(&st);
}

/* A deadline already past: each slice does the least it may (store.h). */
#define PAST 1

/* A failed or abandoned staging leaves nothing: discarded a slice at a
 * time while the daemon runs, at once when it starts again. */
static void test_staged_sweep_discarded(void **state)
{
    fixture *f = *state;
    int64_t kept = submit(f->s, "kept", 0, 3, 1);
    staged st;
    begin_staging(f->s, &st, "name: big\nseeds: 150\n"
                  "analysis: {alpha: 0.01}\n", 140);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweep_analysis"), 1);
    bf_error err = {0};
    /* Out of time at once, a slice is one statement: 64 rows. */
    assert_int_equal(bf_store_discard_staged(f->s, st.stage.sweep_id, PAST,
                                             &err), 1);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 3 + 140 - 64);
    assert_int_equal(bf_store_discard_staged(f->s, st.stage.sweep_id, PAST,
                                             &err), 1);
    assert_int_equal(bf_store_discard_staged(f->s, st.stage.sweep_id, PAST,
                                             &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweeps"), 1);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 3);
    /* Its analysis row went with it. */
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweep_analysis"), 0);
    /* A visible sweep is never discarded. */
    assert_int_equal(bf_store_discard_staged(f->s, kept, 0, &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 3);
    /* With time to spare, one call discards it all. */
    st.stage.sweep_id = 0;
    st.stage.n_stored = 0;
    stage(f->s, &st, 0, 140, 0);
    assert_int_equal(bf_store_discard_staged(f->s, st.stage.sweep_id, 0,
                                             &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 3);

    /* A daemon killed while staging: the next open discards it. */
    st.stage.sweep_id = 0;
    st.stage.n_stored = 0;
    stage(f->s, &st, 0, 6, 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 9);
    bf_store_close(f->s);
    f->s = bft_open(f->dir, BFT_STORE_DB, NULL);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 3);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweeps"), 1);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweep_analysis"), 0);
    staged_free(&st);
}

/* A sweep with stages, staged in parts: a job of stage b finds
 * its source (of stage a) stored by an earlier chunk, and a discard
 * deletes dependents before their sources. */
static void test_staged_stages(void **state)
{
    fixture *f = *state;
    static const char text[] =
        "name: st\nbase: {steps: 20, warmup_steps: 0}\nstages:\n"
        "  - {name: a, seeds: 3}\n"
        "  - {name: b, seeds: 3, base: {init_from: \"stage:a\"}}\n";
    staged st;
    begin_staging(f->s, &st, text, 3);
    stage(f->s, &st, 3, 3, 1);
    int64_t sweep = st.stage.sweep_id;
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs j JOIN jobs s"
                             " ON s.job_id = j.source_job_id WHERE"
                             " j.sweep_id = %lld AND j.stage = 'b' AND"
                             " j.status = 'waiting' AND s.stage = 'a'"
                             " AND s.seed = j.seed", (long long)sweep), 3);
    staged_free(&st);

    /* 80 jobs, 70 staged: two slices out of time (64, then 6), newest
     * first, so every dependent (stage b) goes no later than its source. */
    static const char big[] =
        "name: st\nbase: {steps: 20, warmup_steps: 0}\nstages:\n"
        "  - {name: a, seeds: 40}\n"
        "  - {name: b, seeds: 40, base: {init_from: \"stage:a\"}}\n";
    begin_staging(f->s, &st, big, 70);
    bf_error err = {0};
    int more;
    int passes = 0;
    while ((more = bf_store_discard_staged(f->s, st.stage.sweep_id, PAST,
                                           &err)) == 1)
        passes++;
    if (more < 0)
        fail_msg("discard: %s", err.msg);
    assert_int_equal(passes, 1);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 6);
    staged_free(&st);
}

/* Storing is bounded by time, not by a count: out of time, a call stores
 * one job and commits; the sweep appears with its last job, whatever the
 * number of calls. */
static void test_staging_bounded_by_time(void **state)
{
    fixture *f = *state;
    staged st;
    expand_for_staging(&st, "name: slow\nseeds: 100\n");
    bf_error err = {0};
    size_t done, calls = 0;
    while (st.stage.n_stored < 100) {
        assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweeps WHERE"
                                 " n_jobs > 0"), 0);
        assert_int_equal(bf_store_stage_jobs(f->s, &st.stage,
                                             st.rows + st.stage.n_stored,
                                             100 - st.stage.n_stored, 1, PAST,
                                             &done, &err), BF_STORE_OK);
        assert_int_equal(done, 1);
        calls++;
    }
    assert_int_equal(calls, 100);
    assert_int_equal(bft_int(f->s, "SELECT n_jobs FROM sweeps"), 100);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE status ="
                             " 'queued'"), 100);
    staged_free(&st);
}

/* A sweep's cancel is one short transaction (nothing of it is leased after
 * it), then its queued jobs a slice at a time; a store reopened half-way
 * still knows the rest is to do. */
static void test_cancel_sweep_in_slices(void **state)
{
    fixture *f = *state;
    int64_t other = submit(f->s, "other", 0, 1, 3);
    int64_t sw = submit(f->s, "big", 0, 200, 3);
    bf_lease a = lease(f->s, 0, 1000);      /* the older sweep's job */
    bf_lease b = lease(f->s, 0, 1000);
    assert_int_equal(a.sweep_id, other);
    assert_int_equal(b.sweep_id, sw);
    int64_t *running = NULL;
    int n_running = 0;
    bf_error err = {0};
    assert_int_equal(bf_store_cancel_sweep(f->s, sw, 1000, &running,
                                           &n_running, &err), BF_STORE_OK);
    assert_int_equal(n_running, 1);
    assert_int_equal(running[0], b.attempt_id);
    free(running);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id"
                             " = %lld AND status = 'queued'", (long long)sw),
                     199);
    bf_lease l;
    assert_int_equal(bf_store_lease_next(f->s, "w", NULL, 5, 1000, &l, &err), 0);
    int64_t *ids;
    int n;
    bf_store_close(f->s);
    f->s = bft_open(f->dir, BFT_STORE_DB, NULL);
    assert_int_equal(bf_store_cancels_unfinished(f->s, &ids, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], sw);
    free(ids);
    /* 199 queued: 64 + 64 + 64 + 7, one statement per slice out of time. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(bf_store_cancel_queued(f->s, sw, 50, PAST, &err), 1);
    assert_int_equal(bf_store_cancel_queued(f->s, sw, 50, PAST, &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id"
                             " = %lld AND status = 'cancelled' AND"
                             " finished_ms = 50", (long long)sw), 199);
    assert_int_equal(bf_store_cancels_unfinished(f->s, &ids, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_job_status(f->s, b.job_id, "running");
    bf_lease_clear(&a);
    bf_lease_clear(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_priority_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_live_lease_per_worker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_retires_rows_past_the_checkpoint,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_by_trainer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_same_request_leased_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_one_running_attempt_per_job, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_round_robin_then_age, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_contents_and_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry_requeue_then_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fencing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_staged_sweep_hidden, setup, teardown),
        cmocka_unit_test_setup_teardown(test_staged_sweep_discarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_staged_stages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_staging_bounded_by_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_sweep_in_slices, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
