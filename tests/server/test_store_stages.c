/* Stages in the store: jobs of a later stage wait for their source job and
 * are queued with its final checkpoint once it succeeds, or fail when it
 * fails or is cancelled (and theirs too); retry, cancel, lease expiry and a
 * reopened database keep that straight.  Also permanent failures, and the
 * warnings of a submission (stored, and errors with strict). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fan_out.h"
#include "store_internal.h"
#include "test_store_util.h"

typedef bft_store_fixture fixture;
#define setup bft_store_setup
#define teardown bft_store_teardown

/* Three stages of `seeds` seeds each: a, then b from a, then c from b.
 * Job ids: a 1..seeds, b next, c last. */
static int64_t submit_chain(bf_store *s, int seeds, int max_attempts)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "name: chain\nmax_attempts: %d\nbase: {steps: 20, warmup_steps: 0}\n"
             "stages:\n"
             "  - {name: a, seeds: %d}\n"
             "  - {name: b, seeds: %d, base: {init_from: \"stage:a\", lr: 0.002}}\n"
             "  - {name: c, seeds: %d, base: {init_from: \"stage:b\", lr: 0.003}}\n",
             max_attempts, seeds, seeds, seeds);
    return bft_submit(s, yaml, 1, NULL);
}

static char *status_of(bf_store *s, int64_t job)
{
    return bft_text(s, "SELECT status FROM jobs WHERE job_id = %lld",
                    (long long)job);
}

static void assert_status(bf_store *s, int64_t job, const char *want)
{
    char *got = status_of(s, job);
    if (strcmp(got, want) != 0)
        fail_msg("job %lld is %s, not %s", (long long)job, got, want);
    free(got);
}

static void assert_error(bf_store *s, int64_t job, const char *want)
{
    char *got = bft_text(s, "SELECT error FROM jobs WHERE job_id = %lld",
                         (long long)job);
    if (!got || strcmp(got, want) != 0)
        fail_msg("job %lld: error '%s', not '%s'", (long long)job,
                 got ? got : "(null)", want);
    free(got);
}

/* Leases the next job to a fresh worker: its lease (caller clears), or
 * job_id 0 when nothing is queued. */
static bf_lease lease(bf_store *s, int64_t now)
{
    static int n_workers;
    char worker[32];
    snprintf(worker, sizeof worker, "w%d", ++n_workers);
    bf_lease l;
    bf_error err = {0};
    int rc = bf_store_lease_next(s, worker, NULL, now, 60000, &l, &err);
    if (rc < 0)
        fail_msg("lease_next: %s", err.msg);
    return l;
}

/* Leases job `want` (it must be next), checkpoints at `step`, succeeds. */
static void succeed(bf_store *s, int64_t want, int step, const char *path)
{
    bf_lease l = lease(s, 10);
    assert_int_equal(l.job_id, want);
    if (path)
        assert_int_equal(bf_store_record_checkpoint(s, l.attempt_id, path, step,
                                                    NULL), BF_STORE_OK);
    assert_int_equal(bf_store_finish_attempt(s, l.attempt_id, 1, NULL, 12, NULL),
                     BF_STORE_OK);
    bf_lease_clear(&l);
}

static void fail_once(bf_store *s, int64_t want)
{
    bf_lease l = lease(s, 10);
    assert_int_equal(l.job_id, want);
    assert_int_equal(bf_store_finish_attempt(s, l.attempt_id, 0, "boom", 12, NULL),
                     BF_STORE_OK);
    bf_lease_clear(&l);
}

/* work_pending for a worker of `trainer` (NULL: builtin). */
static int pending_for(bf_store *s, const char *trainer)
{
    bf_error err = {0};
    int rc = bf_store_work_pending(s, trainer, &err);
    if (rc < 0)
        fail_msg("work_pending: %s", err.msg);
    return rc;
}

static int pending(bf_store *s) { return pending_for(s, NULL); }

/* Work is pending while a sweep has a job waiting and one running in the
 * same sweep (its end may release the waiting one); a job running in
 * another sweep does not count, nor does a waiting one after its sweep was
 * cancelled. */
static void test_work_pending(void **state)
{
    fixture *f = *state;
    assert_int_equal(pending(f->s), 0);                 /* empty */
    submit_chain(f->s, 1, 3);                           /* a 1, b 2, c 3 */
    assert_int_equal(pending(f->s), 0);                 /* nothing runs */
    bf_lease a = lease(f->s, 10);
    assert_int_equal(a.job_id, 1);
    assert_int_equal(pending(f->s), 1);
    assert_int_equal(bf_store_record_checkpoint(f->s, a.attempt_id,
                     "/ck/job-1/step-000020.safetensors", 20, NULL),
                     BF_STORE_OK);
    assert_int_equal(bf_store_finish_attempt(f->s, a.attempt_id, 1, NULL, 12,
                                             NULL), BF_STORE_OK);
    bf_lease_clear(&a);
    assert_status(f->s, 2, "queued");
    assert_int_equal(pending(f->s), 0);   /* c waits, but nothing runs */

    /* a plain sweep's job running beside the chain's waiting one: leased
     * first, round-robin across sweeps */
    assert_true(bft_submit(f->s, "name: plain\nbase: {steps: 20, "
                           "warmup_steps: 0}\n", 1, NULL) > 0);
    bf_lease plain = lease(f->s, 10);
    assert_int_equal(plain.job_id, 4);
    assert_int_equal(pending(f->s), 0);   /* not the chain's */
    bf_lease b = lease(f->s, 10);
    assert_int_equal(b.job_id, 2);
    assert_int_equal(pending(f->s), 1);
    assert_int_equal(bf_store_finish_attempt(f->s, b.attempt_id, 0, "boom",
                                             12, NULL), BF_STORE_OK);
    bf_lease_clear(&b);
    assert_status(f->s, 2, "queued");     /* retried: 2 of 3 attempts left */
    assert_status(f->s, 3, "waiting");
    assert_int_equal(pending(f->s), 0);   /* only the plain sweep runs */

    bf_lease again = lease(f->s, 10);
    assert_int_equal(again.job_id, 2);
    assert_int_equal(pending(f->s), 1);
    /* cancelled: c still waits until the slices cancel it, b still runs
     * until its worker hears of it, and neither releases anything */
    int64_t *running = NULL;
    int n_running = 0;
    assert_int_equal(bf_store_cancel_sweep(f->s, 1, 20, &running, &n_running,
                                           NULL), 0);
    assert_int_equal(n_running, 1);
    free(running);
    assert_status(f->s, 3, "waiting");
    assert_status(f->s, 2, "running");
    assert_int_equal(pending(f->s), 0);
    bf_lease_clear(&again);
    bf_lease_clear(&plain);
}

/* Pending work is a worker's own trainer's: a builtin worker with
 * nothing to lease is told none will come while only another trainer's
 * job waits (an --exit-when-idle group leaves), whatever runs. */
static void test_work_pending_by_trainer(void **state)
{
    fixture *f = *state;
    assert_true(bft_submit(f->s, "name: torch-chain\nbase: {steps: 20, "
                           "warmup_steps: 0, trainer: torch}\nstages:\n"
                           "  - {name: a, seeds: 1}\n"
                           "  - {name: b, seeds: 1, base: {init_from: "
                           "\"stage:a\"}}\n", 1, NULL) > 0);
    bf_lease none = lease(f->s, 10);      /* a builtin worker: nothing */
    assert_int_equal(none.job_id, 0);
    bf_lease a;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_for(f->s, "torch-worker", NULL, "torch",
                                        10, 60000, &a, &err), 1);
    assert_int_equal(a.job_id, 1);
    assert_status(f->s, 2, "waiting");
    assert_int_equal(pending_for(f->s, "torch"), 1);
    assert_int_equal(pending_for(f->s, NULL), 0);
    assert_int_equal(pending_for(f->s, "jax"), 0);
    bf_lease_clear(&a);
}

/* Sources run first; a dependent is never leased while it waits, then
 * starts from its source's final checkpoint, given as its init_from. */
static void test_waiting_until_source_succeeds(void **state)
{
    fixture *f = *state;
    submit_chain(f->s, 2, 3);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE status = "
                                   "'queued' AND source_job_id IS NULL"), 2);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE status = "
                                   "'waiting'"), 4);
    assert_int_equal(bft_int(f->s, "SELECT source_job_id FROM jobs WHERE "
                                   "stage = 'c' AND seed = 2"), 4);
    assert_int_equal(bft_int(f->s, "SELECT waiting FROM sweep_progress"), 4);

    succeed(f->s, 1, 20, "/ck/job-1/step-000020.safetensors");
    bf_lease l2 = lease(f->s, 10);        /* a's seed 2, still running */
    assert_int_equal(l2.job_id, 2);
    assert_status(f->s, 3, "queued");
    assert_status(f->s, 4, "waiting");
    bf_lease l = lease(f->s, 10);
    assert_int_equal(l.job_id, 3);
    json_t *cfg = json_loads(l.config_json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(cfg, "init_from")),
                        "/ck/job-1/step-000020.safetensors");
    json_decref(cfg);
    /* The stored config keeps the reference; the row holds the path. */
    assert_int_equal(bft_int(f->s, "SELECT json_extract(config, '$.init_from')"
                                   " = 'stage:a' AND init_from = '/ck/job-1/"
                                   "step-000020.safetensors' FROM jobs WHERE "
                                   "job_id = 3"), 1);
    bf_lease none = lease(f->s, 10);      /* 4 waits for 2, 5 for 3 */
    assert_int_equal(none.job_id, 0);
    bf_lease_clear(&l);
    bf_lease_clear(&l2);
    char *stage = bft_text(f->s, "SELECT stage FROM results WHERE job_id = 5");
    assert_string_equal(stage, "c");
    free(stage);
}

/* A failed source fails its dependents and theirs; a retried source makes
 * them wait again; a dependent of a failed source cannot be retried. */
static void test_source_failure_and_retry(void **state)
{
    fixture *f = *state;
    int64_t sweep = submit_chain(f->s, 1, 1);
    fail_once(f->s, 1);
    assert_status(f->s, 2, "failed");
    assert_error(f->s, 2, "source job 1 failed");
    assert_status(f->s, 3, "failed");
    assert_error(f->s, 3, "source job 2 failed");
    assert_int_equal(bft_int(f->s, "SELECT status = 'done' FROM sweeps WHERE "
                                   "sweep_id = %lld", (long long)sweep), 1);

    bf_error err = {0};
    assert_int_equal(bf_store_retry_job(f->s, 2, 0, 20, &err), BF_STORE_ERR);
    assert_non_null(strstr(err.msg, "job 2 starts from job 1, which has "
                                    "failed: retry job 1 first"));
    assert_int_equal(bf_store_retry_job(f->s, 1, 0, 20, &err), BF_STORE_OK);
    assert_status(f->s, 1, "queued");
    assert_status(f->s, 2, "waiting");
    assert_status(f->s, 3, "waiting");
    assert_int_equal(bft_int(f->s, "SELECT error IS NULL AND finished_ms IS "
                                   "NULL FROM jobs WHERE job_id = 3"), 1);

    succeed(f->s, 1, 20, "/ck/1.safetensors");
    fail_once(f->s, 2);                   /* b fails on its own */
    assert_error(f->s, 2, "boom");
    assert_error(f->s, 3, "source job 2 failed");
    /* Retrying b: queued again from a's checkpoint, c waits for it. */
    assert_int_equal(bf_store_retry_job(f->s, 2, 1, 20, &err), BF_STORE_OK);
    assert_status(f->s, 2, "queued");
    assert_status(f->s, 3, "waiting");
    char *path = bft_text(f->s, "SELECT init_from FROM jobs WHERE job_id = 2");
    assert_string_equal(path, "/ck/1.safetensors");
    free(path);
}

/* A deadline already past: each slice does the least it may (store.h). */
#define PAST 1

/* A source with 300 dependents: its ending moves the first 4 slices (256)
 * on at once and leaves the rest to bf_store_settle, a slice of 64 per call
 * out of time; a store reopened half-way finds what is left. */
static void test_big_fan_out_in_slices(void **state)
{
    fixture *f = *state;
    char *yaml = bft_fan_out_sweep("{steps: 20, warmup_steps: 0}", 300);
    int64_t sweep = bft_submit(f->s, yaml, 1, NULL);
    free(yaml);
    assert_false(bf_store_unsettled(f->s));
    succeed(f->s, 1, 20, "/ck/1.safetensors");
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE status ="
                             " 'queued' AND init_from = '/ck/1.safetensors'"),
                     4 * 64);
    assert_true(bf_store_unsettled(f->s));
    bf_store_close(f->s);
    f->s = bft_open(f->dir, BFT_STORE_DB, NULL);
    assert_true(bf_store_unsettled(f->s));
    bf_error err = {0};
    assert_int_equal(bf_store_settle(f->s, 30, PAST, &err), 0);  /* 44 left */
    assert_false(bf_store_unsettled(f->s));
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE status ="
                             " 'queued' AND init_from = '/ck/1.safetensors'"),
                     300);

    /* A failure cascades a level per slice: a 6-stage chain fails its
     * first 4 levels at once, the rest with the next settle, and the
     * sweep is done when the last one is. */
    char chain[1024];
    int n = snprintf(chain, sizeof chain, "name: deep\nmax_attempts: 1\n"
                 "base: {steps: 20, warmup_steps: 0}\nstages:\n"
                 "  - {name: s0, seeds: 1}\n");
    for (int i = 1; i < 6; i++)
        n += snprintf(chain + n, sizeof chain - (size_t)n, "  - {name: s%d, "
                      "seeds: 1, base: {init_from: \"stage:s%d\"}}\n", i,
                      i - 1);
    int64_t deep = bft_submit(f->s, chain, 1, NULL);
    int64_t first = bft_int(f->s, "SELECT min(job_id) FROM jobs WHERE sweep_id"
                            " = %lld", (long long)deep);
    fail_once(f->s, first);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id ="
                             " %lld AND status = 'failed'", (long long)deep),
                     1 + 4);
    assert_int_equal(bf_store_settle(f->s, 30, 0, &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id ="
                             " %lld AND status = 'failed'", (long long)deep), 6);
    char why[64];
    snprintf(why, sizeof why, "source job %lld failed", (long long)first + 4);
    assert_error(f->s, first + 5, why);
    assert_int_equal(bft_int(f->s, "SELECT status = 'active' FROM sweeps WHERE"
                             " sweep_id = %lld", (long long)sweep), 1);
    assert_int_equal(bft_int(f->s, "SELECT status = 'done' FROM sweeps WHERE "
                             "sweep_id = %lld", (long long)deep), 1);
}

/* A source that succeeded without a checkpoint at its last step (a worker
 * without --checkpoint-dir) gives its dependents nothing to start from. */
static void test_source_without_final_checkpoint(void **state)
{
    fixture *f = *state;
    submit_chain(f->s, 1, 3);
    succeed(f->s, 1, 10, "/ck/step-10.safetensors");   /* step 10 of 20 */
    assert_status(f->s, 2, "failed");
    assert_error(f->s, 2, "source job 1 succeeded without a final checkpoint "
                 "to start from (its worker group needs --checkpoint-dir)");
    assert_error(f->s, 3, "source job 2 failed");
}

/* Cancelling a queued source fails its dependents at once; cancelling the
 * sweep cancels the jobs still waiting. */
static void test_cancel(void **state)
{
    fixture *f = *state;
    submit_chain(f->s, 2, 3);
    int64_t *running = NULL;
    int n_running = 0;
    bf_error err = {0};
    assert_int_equal(bf_store_cancel_job(f->s, 1, 5, &running, &n_running,
                                         &err), BF_STORE_OK);
    free(running);
    assert_status(f->s, 1, "cancelled");
    assert_error(f->s, 3, "source job 1 failed: cancelled");
    assert_error(f->s, 5, "source job 3 failed");
    assert_status(f->s, 4, "waiting");
    /* A waiting job can be cancelled on its own, failing what waits on it. */
    assert_int_equal(bf_store_cancel_job(f->s, 4, 6, &running, &n_running,
                                         &err), BF_STORE_OK);
    free(running);
    assert_status(f->s, 4, "cancelled");
    assert_error(f->s, 6, "source job 4 failed: cancelled");

    assert_int_equal(bft_cancel_sweep(f->s, 1, 7, &running, &n_running,
                                           &err), BF_STORE_OK);
    free(running);
    assert_int_equal(n_running, 0);
    assert_status(f->s, 2, "cancelled");
    int64_t sweep = submit_chain(f->s, 1, 3);
    bf_lease l = lease(f->s, 10);         /* its a job runs */
    assert_int_equal(bft_cancel_sweep(f->s, sweep, 7, &running,
                                           &n_running, &err), BF_STORE_OK);
    assert_int_equal(n_running, 1);
    free(running);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id "
                                   "= %lld AND status = 'cancelled'",
                             (long long)sweep), 2);
    /* The running source stops: nothing is left waiting. */
    assert_int_equal(bf_store_attempt_stopped(f->s, l.attempt_id, 8, NULL),
                     BF_STORE_OK);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id "
                                   "= %lld AND status = 'cancelled'",
                             (long long)sweep), 3);
    bf_lease_clear(&l);
}

/* A source whose last lease expires with no attempt left fails its
 * dependents in the same pass. */
static void test_expiry(void **state)
{
    fixture *f = *state;
    submit_chain(f->s, 1, 1);
    bf_lease l = lease(f->s, 10);
    int n = 0;
    assert_int_equal(bf_store_expire_leases(f->s, 10 + 60000, &n, NULL), BF_STORE_OK);
    assert_int_equal(n, 1);
    assert_error(f->s, 2, "source job 1 failed");
    assert_status(f->s, 3, "failed");
    bf_lease_clear(&l);
}

/* Everything is in the database: a store reopened between a lease and its
 * end carries on, and the dependents move on as before. */
static void test_reopen(void **state)
{
    fixture *f = *state;
    submit_chain(f->s, 1, 3);
    bf_lease l = lease(f->s, 10);
    assert_int_equal(bf_store_record_checkpoint(f->s, l.attempt_id,
                     "/ck/a.safetensors", 20, NULL), BF_STORE_OK);
    bf_store_close(f->s);
    f->s = bft_open(f->dir, BFT_STORE_DB, NULL);
    assert_status(f->s, 2, "waiting");
    assert_int_equal(bf_store_finish_attempt(f->s, l.attempt_id, 1, NULL, 12, NULL),
                     BF_STORE_OK);
    bf_store_close(f->s);
    f->s = bft_open(f->dir, BFT_STORE_DB, NULL);
    assert_status(f->s, 2, "queued");
    assert_status(f->s, 3, "waiting");
    bf_lease next = lease(f->s, 13);
    assert_int_equal(next.job_id, 2);
    assert_non_null(strstr(next.config_json, "\"init_from\":\"/ck/a.safetensors\""));
    bf_lease_clear(&next);
    bf_lease_clear(&l);
}

/* A permanent error fails the job on its first attempt, whatever
 * max_attempts says; a transient one re-queues it. */
static void test_permanent_failure(void **state)
{
    fixture *f = *state;
    bft_submit(f->s, "name: p\nmax_attempts: 3\nseeds: 2\n", 1, NULL);
    bf_lease l = lease(f->s, 10);
    assert_int_equal(bf_store_fail_permanently(f->s, l.attempt_id,
                     "init_from /x.safetensors: cannot open", 11, NULL), BF_STORE_OK);
    assert_status(f->s, l.job_id, "failed");
    assert_error(f->s, l.job_id, "init_from /x.safetensors: cannot open (a "
                 "permanent error: not retried)");
    assert_int_equal(bft_int(f->s, "SELECT attempts FROM jobs WHERE job_id = "
                                   "%lld", (long long)l.job_id), 1);
    char *why = bft_text(f->s, "SELECT error FROM attempts WHERE attempt_id = "
                               "%lld", (long long)l.attempt_id);
    assert_string_equal(why, "init_from /x.safetensors: cannot open");
    free(why);
    bf_lease_clear(&l);
    fail_once(f->s, 2);
    assert_status(f->s, 2, "queued");
    /* A dead attempt is fenced, as for every other report. */
    assert_int_equal(bf_store_fail_permanently(f->s, 999, "x", 12, NULL),
                     BF_STORE_FENCED);
}

/* Warnings come back and are stored with the sweep; strict refuses the
 * sweep, stores nothing and still says why. */
static void test_warnings_and_strict(void **state)
{
    fixture *f = *state;
    const char *yaml = "name: w\ngrid:\n  rope: [rope, bifocal]\n"
                       "  freq_lr_mult: [1, 10]\n";
    json_t *warnings = NULL;
    bf_error err = {0};
    bf_submit_opts strict = {.strict = 1};
    assert_int_equal(bf_store_submit_sweep(f->s, "w.yaml", yaml, strlen(yaml),
                                           &strict, 1, NULL, NULL, &warnings,
                                           &err), BF_STORE_ERR);
    assert_non_null(strstr(err.msg, "2 warnings, and strict submission makes "
                                    "them errors; the first: w.yaml:4: field "
                                    "'freq_lr_mult': has no effect with rope: "
                                    "rope"));
    assert_int_equal(json_array_size(warnings), 2);
    json_decref(warnings);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweeps"), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 0);

    int64_t id = 0;
    assert_int_equal(bf_store_submit_sweep(f->s, "w.yaml", yaml, strlen(yaml),
                                           NULL, 1, &id, NULL, &warnings, &err),
                     BF_STORE_OK);
    assert_int_equal(json_array_size(warnings), 2);
    assert_int_equal(bft_int(f->s, "SELECT json_array_length(warnings) FROM "
                                   "sweeps WHERE sweep_id = %lld",
                             (long long)id), 2);
    char *stored = bft_text(f->s, "SELECT warnings ->> 1 FROM sweeps");
    assert_string_equal(stored, json_string_value(json_array_get(warnings, 1)));
    free(stored);
    json_decref(warnings);

    /* Rejected sweeps give no warnings back. */
    const char *bad = "name: b\nbase: {stepz: 1}\n";
    json_t *before = json_array();
    warnings = before;
    assert_int_equal(bf_store_submit_sweep(f->s, "b.yaml", bad, strlen(bad),
                                           NULL, 1, NULL, NULL, &warnings,
                                           &err), BF_STORE_ERR);
    assert_null(warnings);
    json_decref(before);
}

/* Calls bf_store_settle out of time until nothing is left: the calls. */
static int settle_all(bf_store *s)
{
    bf_error err = {0};
    int calls = 1, rc;
    while ((rc = bf_store_settle(s, 30, PAST, &err)) == 1)
        calls++;
    if (rc != 0)
        fail_msg("settle: %s", err.msg);
    return calls;
}

static int count_dependents(bf_store *s, const char *status)
{
    return bft_int(s, "SELECT count(*) FROM jobs WHERE source_job_id = 1"
                      " AND status = '%s'", status);
}

/* A retried source whose cancel failed its 300 dependents: they wait again
 * a few slices now and the rest a slice per bf_store_settle, and the source
 * waits too (it is never leased) until the last of them does, so none of
 * them can move on half-revived; a store reopened half-way finds what is
 * left.  Then the source is queued, and its success moves all of them on. */
static void test_big_revival_in_slices(void **state)
{
    fixture *f = *state;
    char *yaml = bft_fan_out_sweep("{steps: 20, warmup_steps: 0}", 300);
    bft_submit(f->s, yaml, 1, NULL);
    free(yaml);
    bf_error err = {0};
    int64_t *running = NULL;
    int n_running = 0;
    assert_int_equal(bf_store_cancel_job(f->s, 1, 10, &running, &n_running,
                                         &err), BF_STORE_OK);
    free(running);
    settle_all(f->s);
    assert_int_equal(count_dependents(f->s, "failed"), 300);

    assert_int_equal(bf_store_retry_job(f->s, 1, 0, 20, &err), BF_STORE_OK);
    assert_status(f->s, 1, "waiting");
    int revived = count_dependents(f->s, "waiting");
    if (revived < 64 || revived >= 300)
        fail_msg("%d dependents revived at once, not a few slices", revived);
    bf_lease none = lease(f->s, 30);
    assert_int_equal(none.job_id, 0);
    bf_lease_clear(&none);
    assert_true(bf_store_unsettled(f->s));

    bf_store_close(f->s);
    f->s = bft_open(f->dir, BFT_STORE_DB, NULL);
    assert_true(bf_store_unsettled(f->s));
    assert_true(settle_all(f->s) > 1);
    assert_false(bf_store_unsettled(f->s));
    assert_status(f->s, 1, "queued");
    assert_int_equal(count_dependents(f->s, "waiting"), 300);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE error"
                                   " IS NOT NULL"), 0);

    succeed(f->s, 1, 20, "/ck/1.safetensors");
    settle_all(f->s);
    assert_int_equal(count_dependents(f->s, "queued"), 300);
}

/* The cell the store gives each job is the migration's rule (009): the
 * jobs of one sweep and stage whose configs differ only in seed share one,
 * numbered in order of their first job; so an old database and a new one
 * group alike.  Stages, a grid with an excluded point and a zip. */
static void test_cells(void **state)
{
    fixture *f = *state;
    submit_chain(f->s, 2, 3);
    bft_submit(f->s, "name: g\nbase: {steps: 20, warmup_steps: 0}\nseeds: [7, 8, 9]\n"
                     "grid: {lr: [0.001, 0.002], depth: [2, 3]}\n"
                     "exclude: [{lr: 0.002, depth: 3}]\n", 1, NULL);
    bft_submit(f->s, "name: z\nbase: {steps: 20, warmup_steps: 0}\nseeds: 2\n"
                     "zip: {lr: [0.001, 0.002], depth: [2, 3]}\n", 1, NULL);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs j JOIN"
        " (SELECT job_id, dense_rank() OVER (PARTITION BY sweep_id"
        "    ORDER BY first) - 1 AS cell FROM (SELECT job_id, sweep_id,"
        "    min(job_id) OVER (PARTITION BY sweep_id, coalesce(stage, ''),"
        "    json_remove(config, '$.seed')) AS first FROM jobs)) rule"
        " USING (job_id) WHERE j.cell IS NOT rule.cell"), 0);
    char *cells = bft_text(f->s, "SELECT group_concat(n, ',') FROM (SELECT"
                                 " count(DISTINCT cell) AS n FROM jobs"
                                 " GROUP BY sweep_id ORDER BY sweep_id)");
    assert_string_equal(cells, "3,3,2");
    free(cells);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id"
                                   " = 2 AND cell = 1"), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_waiting_until_source_succeeds,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_source_failure_and_retry, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_source_without_final_checkpoint,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_work_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_work_pending_by_trainer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_big_fan_out_in_slices, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_big_revival_in_slices, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cells, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_permanent_failure, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_warnings_and_strict, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
