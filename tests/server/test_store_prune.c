/* Early stopping in the store, over a real SQLite file: a search stage's
 * trials, the ASHA and median rules decided as evals at rungs are stored,
 * each trial against its own group only, a decision made once however
 * often the eval is resent or the store reopened, the cancel it causes,
 * and the final status 'pruned' (checkpoint kept, never retried). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "test_store_util.h"

/* Two cells (rope, spectral) of 6 trials each: jobs 1..6 and 7..12. */
#define TUNE(rule)                                                          \
    "name: tune\n"                                                          \
    "base: {steps: 100, eval_every: 10, eval_depths: [4, 8]}\n"            \
    "grid: {rope: [rope, spectral]}\n"                                      \
    "search:\n"                                                             \
    "  method: sobol\n"                                                     \
    "  trials: 6\n"                                                         \
    "  space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}\n"                      \
    "prune: " rule "\n"

static const char asha[] = TUNE("{method: asha, metric: eval_loss, "
                                "eval_depth: 4, rungs: [20, 40], eta: 3}");

enum { N_JOBS = 12 };

typedef struct fixture {
    char *dir;
    bf_store *s;
    bf_lease l[N_JOBS + 1];   /* by job id */
} fixture;

/* A store with yaml submitted and every job leased, each to its own
 * worker (a worker holds one attempt at a time). */
static fixture *open_all(const char *yaml)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = bft_tmpdir();
    f->s = bft_open(f->dir, "p.db", NULL);
    bft_submit(f->s, yaml, 1, NULL);
    for (int i = 1; i <= N_JOBS; i++) {
        char worker[16];
        snprintf(worker, sizeof worker, "w%d", i);
        bf_lease l;
        assert_int_equal(bf_store_lease_next(f->s, worker, NULL, 10, 600000, &l,
                                             NULL), 1);
        f->l[l.job_id] = l;
    }
    return f;
}

static void close_all(fixture *f)
{
    for (int i = 1; i <= N_JOBS; i++)
        bf_lease_clear(&f->l[i]);
    bf_store_close(f->s);
    bft_rmdir(f->dir);
    free(f);
}

/* Job `job` reports its eval at (step, depth) with loss (NaN: "nan") and
 * accuracy. */
static void eval_both(fixture *f, int job, int step, int depth, double loss,
                      double accuracy)
{
    json_t *b = json_pack("[{s:s, s:i, s:i, s:o, s:f}]", "type", "eval",
                          "step", step, "depth", depth, "loss",
                          isnan(loss) ? json_string("nan") : json_real(loss),
                          "accuracy", accuracy);
    bf_error err = {0};
    if (bf_store_ingest(f->s, f->l[job].attempt_id, b, NULL, NULL, &err) != 0)
        fail_msg("ingest: %s", err.msg);
    json_decref(b);
    assert_int_equal(bf_store_flush(f->s, &err), 0);
}

static void eval(fixture *f, int job, int step, int depth, double loss)
{
    eval_both(f, job, step, depth, loss, 0.5);
}

/* The decision for job at rung: 'continue', 'prune' or "" (none). */
static const char *decision(fixture *f, int job, int rung)
{
    static char out[16];
    int64_t n = bft_int(f->s, "SELECT count(*) FROM prune_decisions WHERE "
                        "job_id = %d AND rung = %d", job, rung);
    if (n == 0)
        return "";
    char *d = bft_text(f->s, "SELECT decision FROM prune_decisions WHERE "
                       "job_id = %d AND rung = %d", job, rung);
    snprintf(out, sizeof out, "%s", d);
    free(d);
    return out;
}

/* Losses at rung 20 in the order reported: eta 3 keeps the best
 * max(1, floor(n / 3)) of the n values seen so far. */
static void test_asha_rule(void **state)
{
    (void)state;
    fixture *f = open_all(asha);
    static const double rope_losses[6] = {5, 4, 6, 3, 7, 2};
    static const char *const expect[6] = {"continue", "continue", "prune",
                                          "continue", "prune", "continue"};
    for (int t = 0; t < 6; t++)
        eval(f, 1 + t, 20, 4, rope_losses[t]);
    for (int t = 0; t < 6; t++)
        assert_string_equal(decision(f, 1 + t, 20), expect[t]);
    /* the spectral cell competes only with itself: its first trial, worse
     * than every rope trial, goes on; its second, worse still, does not */
    eval(f, 7, 20, 4, 100);
    eval(f, 8, 20, 4, 101);
    assert_string_equal(decision(f, 7, 20), "continue");
    assert_string_equal(decision(f, 8, 20), "prune");
    /* neither another depth nor a step off the rungs decides anything */
    eval(f, 9, 20, 8, 1);
    eval(f, 9, 30, 4, 1);
    assert_string_equal(decision(f, 9, 20), "");
    assert_string_equal(decision(f, 9, 30), "");
    /* decisions are numbered in the order made */
    assert_int_equal(bft_int(f->s, "SELECT max(seq) FROM prune_decisions"), 8);
    assert_int_equal(bft_int(f->s, "SELECT seq FROM prune_decisions WHERE "
                             "job_id = 8"), 8);
    close_all(f);
}

/* A pruned job is told to stop; once its worker stops, it is 'pruned'
 * with its checkpoint, counted by sweep_progress, and never retried. */
static void test_pruned_job_ends_pruned(void **state)
{
    (void)state;
    fixture *f = open_all(asha);
    bf_error err = {0};
    assert_int_equal(bf_store_record_checkpoint(f->s, f->l[2].attempt_id,
                                                "/ck/2", 20, &err), 0);
    eval(f, 1, 20, 4, 1.0);
    eval(f, 2, 20, 4, 2.0);   /* {1, 2}: only the best goes on */
    assert_int_equal(bf_store_attempt_cancelled(f->s, f->l[1].attempt_id,
                                                NULL), 0);
    assert_int_equal(bf_store_attempt_cancelled(f->s, f->l[2].attempt_id,
                                                NULL), 1);
    /* its later evals decide nothing more */
    eval(f, 2, 40, 4, 0.1);
    assert_string_equal(decision(f, 2, 40), "");
    assert_int_equal(bf_store_attempt_stopped(f->s, f->l[2].attempt_id, 50,
                                              &err), 0);
    char *status = bft_text(f->s, "SELECT status || ' ' || checkpoint_path "
                            "|| ' ' || error FROM jobs WHERE job_id = 2");
    assert_string_equal(status, "pruned /ck/2 pruned");
    free(status);
    assert_int_equal(bft_int(f->s, "SELECT pruned FROM sweep_progress"), 1);
    assert_int_equal(bft_int(f->s, "SELECT outcome = 'cancelled' FROM "
                             "attempts WHERE attempt_id = %lld",
                             (long long)f->l[2].attempt_id), 1);
    assert_int_not_equal(bf_store_retry_job(f->s, 2, 0, 60, &err), 0);
    assert_non_null(strstr(err.msg, "pruned"));
    /* a pruned job that finishes before it hears (its daemon was down)
     * ends pruned all the same: the decision was stored first */
    eval(f, 4, 20, 4, 4.0);
    assert_string_equal(decision(f, 4, 20), "prune");
    assert_int_equal(bf_store_finish_attempt(f->s, f->l[4].attempt_id, 1, NULL,
                                             70, &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT status = 'pruned' FROM jobs "
                             "WHERE job_id = 4"), 1);
    /* a lease that expires on a pruned job ends it pruned too */
    eval(f, 3, 20, 4, 3.0);
    assert_string_equal(decision(f, 3, 20), "prune");
    int n = 0;
    assert_int_equal(bf_store_expire_leases(f->s, 10 + 600001, &n, &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT status = 'pruned' FROM jobs "
                             "WHERE job_id = 3"), 1);
    close_all(f);
}

/* A resent eval, or one resent to a reopened store, decides nothing
 * again. */
static void test_decided_once(void **state)
{
    (void)state;
    fixture *f = open_all(asha);
    eval(f, 1, 20, 4, 1.0);
    eval(f, 2, 20, 4, 2.0);
    eval(f, 2, 20, 4, 2.0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM prune_decisions"), 2);
    bf_store_close(f->s);
    f->s = bft_open(f->dir, "p.db", NULL);
    eval(f, 1, 20, 4, 1.0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) || max(seq) FROM "
                             "prune_decisions"), 22);
    eval(f, 3, 20, 4, 0.5);   /* a new one: seq 3, goes on */
    assert_int_equal(bft_int(f->s, "SELECT seq FROM prune_decisions WHERE "
                             "job_id = 3 AND decision = 'continue'"), 3);
    close_all(f);
}

/* A rung-20 rule over the rope cell, ASHA or synchronous, and the
 * selection of the best trial. */
#define ORDERED(sync)                                                       \
    TUNE("{method: asha, metric: eval_loss, eval_depth: 4, rungs: [20], "   \
         "eta: 3, synchronous: " sync "}\n"                                 \
         "select: {by: eval_loss, eval_depth: 4}")

/* The rope cell's trials report their rung-20 losses in `order` (job
 * ids); trial 1, the best at the end, finishes as soon as it may; then
 * each other trial left running finishes, or stops when pruned.  Returns
 * "the trials going on at 20|the chosen one" (malloc'd). */
static char *run_order(const char *yaml, const int order[6])
{
    static const double at20[7] = {0, 5, 4, 6, 3, 7, 2};
    static const double last[7] = {0, 0.5, 1.1, 1.2, 0.9, 1.3, 1.0};
    fixture *f = open_all(yaml);
    bf_error err = {0};
    for (int i = 0; i < 6; i++) {
        int job = order[i];
        eval(f, job, 20, 4, at20[job]);
        if (job == 1 && !bft_int(f->s, "SELECT cancel_requested FROM jobs "
                                 "WHERE job_id = 1")) {
            eval(f, 1, 100, 4, last[1]);
            assert_int_equal(bf_store_finish_attempt(f->s, f->l[1].attempt_id,
                                                     1, NULL, 50, &err), 0);
        }
    }
    for (int job = 1; job <= 6; job++) {
        if (!bft_int(f->s, "SELECT status = 'running' FROM jobs WHERE "
                     "job_id = %d", job))
            continue;
        if (bf_store_attempt_cancelled(f->s, f->l[job].attempt_id, NULL)) {
            assert_int_equal(bf_store_attempt_stopped(f->s,
                             f->l[job].attempt_id, 60, &err), 0);
            continue;
        }
        eval(f, job, 100, 4, last[job]);
        assert_int_equal(bf_store_finish_attempt(f->s, f->l[job].attempt_id,
                                                 1, NULL, 70, &err), 0);
    }
    char *out = bft_text(f->s, "SELECT (SELECT group_concat(job_id, ' ') "
                         "FROM (SELECT job_id FROM prune_decisions WHERE "
                         "rung = 20 AND decision = 'continue' ORDER BY "
                         "job_id)) || '|' || (SELECT job_id FROM selections "
                         "WHERE grp = 0 AND chosen)");
    close_all(f);
    return out;
}

static void assert_run(const char *yaml, const int order[6],
                       const char *expect)
{
    char *got = run_order(yaml, order);
    assert_string_equal(got, expect);
    free(got);
}

/* Synchronous successive halving: the same values give the same survivors
 * (the best 2 of 6: trials 6 and 4) and the same selection in either
 * order, though trial 1 ended before the rung was decided (pruned then,
 * it is never chosen); ASHA keeps whoever came early. */
static void test_synchronous_order(void **state)
{
    (void)state;
    static const int forward[6] = {1, 2, 3, 4, 5, 6};
    static const int backward[6] = {6, 5, 4, 3, 2, 1};
    assert_run(ORDERED("true"), forward, "4 6|4");
    assert_run(ORDERED("true"), backward, "4 6|4");
    assert_run(ORDERED("false"), forward, "1 2 4 6|1");
    assert_run(ORDERED("false"), backward, "6|6");
}

/* A synchronous rung waits for a trial that has not reached it, and is
 * decided when that trial ends without reaching it (failed for good):
 * the best max(1, floor(5 / 3)) of the five values go on. */
static void test_synchronous_end_decides(void **state)
{
    (void)state;
    fixture *f = open_all(TUNE("{method: asha, metric: eval_loss, "
                               "eval_depth: 4, rungs: [20], "
                               "synchronous: true}\nmax_attempts: 1"));
    static const double at20[5] = {5, 4, 6, 3, 7};
    for (int t = 0; t < 5; t++)
        eval(f, 1 + t, 20, 4, at20[t]);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM prune_decisions"), 0);
    bf_error err = {0};
    assert_int_equal(bf_store_finish_attempt(f->s, f->l[6].attempt_id, 0,
                                             "boom", 50, &err), 0);
    char *decided = bft_text(f->s, "SELECT group_concat(job_id || decision, "
                             "' ') FROM (SELECT * FROM prune_decisions ORDER "
                             "BY seq)");
    assert_string_equal(decided, "4continue 2prune 1prune 3prune 5prune");
    free(decided);
    close_all(f);
}

/* median: pruned when worse than the median of at least min_trials
 * earlier values; NaN is worse than any value. */
static void test_median_rule(void **state)
{
    (void)state;
    fixture *f = open_all(TUNE("{method: median, metric: eval_loss, "
                               "eval_depth: 4, rungs: [20], min_trials: 2}"));
    static const double losses[6] = {5, 4, 6, 3, 4.5, NAN};
    static const char *const expect[6] = {"continue", "continue", "prune",
                                          "continue", "continue", "prune"};
    for (int t = 0; t < 6; t++)
        eval(f, 1 + t, 20, 4, losses[t]);
    for (int t = 0; t < 6; t++)
        assert_string_equal(decision(f, 1 + t, 20), expect[t]);
    assert_int_equal(bft_int(f->s, "SELECT value IS NULL FROM "
                             "prune_decisions WHERE job_id = 6"), 1);
    close_all(f);
}

/* Once every trial of a cell has ended, its succeeded trials are ranked by
 * their final eval_loss at the selection's depth: the best chosen, the
 * rest runners-up; a failed trial is not ranked; the other cell waits for
 * its own trials. */
static void test_selection(void **state)
{
    (void)state;
    fixture *f = open_all("name: tune\n"
                          "base: {steps: 100, eval_every: 50, depth: 4,\n"
                          "       eval_depths: [4]}\n"
                          "grid: {rope: [rope, spectral]}\n"
                          "search:\n"
                          "  method: sobol\n"
                          "  trials: 6\n"
                          "  space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}\n"
                          "select: {by: eval_loss, eval_depth: 4, best: 2}\n"
                          "max_attempts: 1\n");
    static const double final_loss[6] = {3, 1, 5, 2, 4, 0};
    bf_error err = {0};
    for (int t = 0; t < 6; t++) {
        int job = 1 + t;
        eval(f, job, 50, 4, 0.1);        /* not the final step: not ranked */
        eval(f, job, 100, 4, final_loss[t]);
        /* the last trial fails, though its loss would be the best */
        int ok = t < 5;
        assert_int_equal(bf_store_finish_attempt(f->s, f->l[job].attempt_id,
                                                 ok, ok ? NULL : "boom", 50,
                                                 &err), 0);
        assert_int_equal(bft_int(f->s, "SELECT count(*) FROM selections"),
                         t < 5 ? 0 : 5);
    }
    char *ranking = bft_text(f->s, "SELECT group_concat(job_id || ':' || "
                             "chosen, ' ') FROM (SELECT * FROM selections "
                             "ORDER BY rank)");
    assert_string_equal(ranking, "2:1 4:1 1:0 5:0 3:0");
    free(ranking);
    /* the spectral cell is selected once its own trials have ended */
    for (int job = 7; job <= 12; job++) {
        eval(f, job, 100, 4, (double)job);
        assert_int_equal(bf_store_finish_attempt(f->s, f->l[job].attempt_id,
                                                 1, NULL, 50, &err), 0);
    }
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM selections s JOIN "
                             "trials t ON t.job_id = s.job_id WHERE t.grp = 1 "
                             "AND s.chosen"), 2);
    assert_int_equal(bft_int(f->s, "SELECT job_id FROM selections WHERE "
                             "rank = 1 AND grp = 1"), 7);
    close_all(f);
}

/* eval_accuracy is higher-better: ASHA keeps the highest accuracies (the
 * mirror of test_asha_rule's losses gives its decisions), and selection
 * chooses the most accurate trial, though its loss is the worst. */
static void test_accuracy_metric(void **state)
{
    (void)state;
    fixture *f = open_all(TUNE("{method: asha, metric: eval_accuracy, "
                               "eval_depth: 4, rungs: [20, 40], eta: 3}")
                          "select: {by: eval_accuracy, eval_depth: 4}\n"
                          "max_attempts: 1\n");
    static const double accuracy[6] = {0.5, 0.6, 0.4, 0.7, 0.3, 0.8};
    static const char *const expect[6] = {"continue", "continue", "prune",
                                          "continue", "prune", "continue"};
    for (int t = 0; t < 6; t++)
        eval_both(f, 1 + t, 20, 4, 1.0, accuracy[t]);
    for (int t = 0; t < 6; t++)
        assert_string_equal(decision(f, 1 + t, 20), expect[t]);
    assert_true(bft_real(f->s, "SELECT value FROM prune_decisions WHERE "
                         "job_id = 6") == 0.8);
    /* at the last step: job 1 is the most accurate and has the worst loss */
    static const double final_acc[6] = {0.9, 0.2, 0.1, 0.6, 0.3, 0.5};
    bf_error err = {0};
    for (int t = 0; t < 6; t++) {
        eval_both(f, 1 + t, 100, 4, 1.0 + (t == 0), final_acc[t]);
        assert_int_equal(bf_store_finish_attempt(f->s, f->l[1 + t].attempt_id,
                                                 1, NULL, 50, &err), 0);
    }
    char *ranking = bft_text(f->s, "SELECT group_concat(job_id || '=' || "
                             "value, ' ') FROM (SELECT * FROM selections "
                             "ORDER BY rank)");
    assert_string_equal(ranking, "1=0.9 4=0.6 6=0.5 2=0.2");  /* 3, 5 pruned */
    free(ranking);
    close_all(f);
}

/* A later stage with `from: "stage:tune"` waits until the cell it matches
 * (by the values of tune's grid fields, whatever the order of its own) is
 * selected; then, in that transaction, its jobs take the chosen trial's
 * values, exactly, and are queued; a cell with no trial to choose fails
 * its jobs, saying why.  It all holds across a reopened store. */
static void test_from_selection(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "f.db", NULL);
    bft_submit(s, "name: from\n"
               "base: {depth: 4, eval_depths: [4], eval_every: 50}\n"
               "max_attempts: 1\n"
               "stages:\n"
               "  - name: tune\n"
               "    base: {steps: 100}\n"
               "    grid: {rope: [rope, spectral]}\n"
               "    search:\n"
               "      method: sobol\n"
               "      trials: 3\n"
               "      space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}\n"
               "    select: {by: eval_loss, eval_depth: 4}\n"
               "  - name: confirm\n"
               "    from: \"stage:tune\"\n"
               "    base: {steps: 150}\n"
               "    grid: {rope: [spectral, rope]}\n"
               "    seeds: 2\n", 1, NULL);
    /* tune: rope 1..3, spectral 4..6; confirm: spectral 7, 8, rope 9, 10 */
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE status = "
                             "'waiting' AND job_id > 6"), 4);
    bf_lease l[7];
    bf_error err = {0};
    for (int i = 1; i <= 6; i++) {
        char worker[16];
        snprintf(worker, sizeof worker, "w%d", i);
        assert_int_equal(bf_store_lease_next(s, worker, NULL, 10, 600000, &l[i],
                                             NULL), 1);
        assert_int_equal(l[i].job_id, i);
    }
    bf_lease none;
    assert_int_equal(bf_store_lease_next(s, "w7", NULL, 10, 600000, &none, NULL), 0);
    static const double final_loss[3] = {3, 1, 2};
    for (int job = 1; job <= 3; job++) {
        json_t *b = json_pack("[{s:s, s:i, s:i, s:f, s:f}]", "type", "eval",
                              "step", 100, "depth", 4, "loss",
                              final_loss[job - 1], "accuracy", 0.5);
        assert_int_equal(bf_store_ingest(s, l[job].attempt_id, b, NULL, NULL,
                                         &err), 0);
        json_decref(b);
        assert_int_equal(bf_store_flush(s, &err), 0);
        assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE status "
                                 "= 'queued'"), 0);
        assert_int_equal(bf_store_finish_attempt(s, l[job].attempt_id, 1,
                                                 NULL, 50, &err), 0);
    }
    bf_store_close(s);
    s = bft_open(dir, "f.db", NULL);
    /* rope's cell chose trial 1 (job 2): jobs 9 and 10 have its lr */
    assert_int_equal(bft_int(s, "SELECT group_concat(job_id, '') FROM jobs "
                             "WHERE status = 'queued'"), 910);
    assert_int_equal(bft_int(s, "SELECT trial_job_id FROM selected_values "
                             "WHERE job_id = 10"), 2);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs j, jobs t "
                             "WHERE j.job_id IN (9, 10) AND t.job_id = 2 "
                             "AND j.config -> '$.lr' = t.config -> '$.lr' "
                             "AND j.config ->> '$.steps' = 150 "
                             "AND j.config ->> '$.rope' = 'rope'"), 2);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE job_id "
                             "IN (7, 8) AND status = 'waiting' AND config ->> "
                             "'$.lr' = (SELECT config ->> '$.lr' FROM jobs "
                             "WHERE job_id = 2)"), 0);
    /* spectral's trials all fail: nothing to choose, 7 and 8 fail */
    for (int job = 4; job <= 6; job++)
        assert_int_equal(bf_store_finish_attempt(s, l[job].attempt_id, 0,
                                                 "boom", 50, &err), 0);
    char *why = bft_text(s, "SELECT group_concat(status || ': ' || error, "
                         "' | ') FROM jobs WHERE job_id IN (7, 8)");
    assert_non_null(strstr(why, "failed: no values to take from stage tune"));
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE job_id IN "
                             "(7, 8) AND status = 'failed'"), 2);
    free(why);
    /* such a job cannot be retried before a trial of its cell succeeds;
     * once one has (retried), it has that trial's values and can be */
    assert_int_not_equal(bf_store_retry_job(s, 7, 0, 60, &err), BF_STORE_OK);
    assert_non_null(strstr(err.msg, "chose no trial of its cell"));
    assert_int_equal(bf_store_retry_job(s, 5, 0, 60, &err), BF_STORE_OK);
    bf_lease again;
    assert_int_equal(bf_store_lease_next(s, "w9", NULL, 70, 600000, &again, NULL),
                     1);
    assert_int_equal(again.job_id, 5);
    json_t *b = json_pack("[{s:s, s:i, s:i, s:f, s:f}]", "type", "eval",
                          "step", 100, "depth", 4, "loss", 0.5, "accuracy",
                          0.5);
    assert_int_equal(bf_store_ingest(s, again.attempt_id, b, NULL, NULL, &err),
                     0);
    json_decref(b);
    assert_int_equal(bf_store_flush(s, &err), 0);
    assert_int_equal(bf_store_finish_attempt(s, again.attempt_id, 1, NULL, 80,
                                             &err), 0);
    bf_lease_clear(&again);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs j, jobs t WHERE "
                             "j.job_id IN (7, 8) AND t.job_id = 5 AND "
                             "j.status = 'failed' AND j.config -> '$.lr' = "
                             "t.config -> '$.lr'"), 2);
    assert_int_equal(bf_store_retry_job(s, 7, 0, 90, &err), BF_STORE_OK);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE job_id = 7 "
                             "AND status = 'queued'"), 1);
    for (int i = 1; i <= 6; i++)
        bf_lease_clear(&l[i]);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* A searched parameter (params.NAME) is taken like a builtin field: the
 * from: job gets it inside its `params`, beside the ones it had, and the
 * job_params view lists every job's parameters as rows. */
static void test_from_selection_params(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "p.db", NULL);
    bft_submit(s, "name: fromp\n"
               "base: {trainer: fake, depth: 4, eval_depths: [4],"
               " eval_every: 50, params: {act: gelu}}\n"
               "max_attempts: 1\n"
               "stages:\n"
               "  - name: tune\n"
               "    base: {steps: 100}\n"
               "    search:\n"
               "      method: sobol\n"
               "      trials: 2\n"
               "      space: {params.width: {choice: [64, 128]},"
               " lr: {uniform: [0.001, 0.01]}}\n"
               "    select: {by: eval_loss, eval_depth: 4}\n"
               "  - name: confirm\n"
               "    from: \"stage:tune\"\n"
               "    base: {steps: 150}\n", 1, NULL);
    bf_lease l[3];
    bf_error err = {0};
    for (int job = 1; job <= 2; job++) {
        assert_int_equal(bf_store_lease_for(s, "w", NULL, "fake", 10, 600000,
                                            &l[job], &err), 1);
        json_t *b = json_pack("[{s:s, s:i, s:i, s:f, s:f}]", "type", "eval",
                              "step", 100, "depth", 4, "loss",
                              job == 2 ? 1.0 : 2.0, "accuracy", 0.5);
        assert_int_equal(bf_store_ingest(s, l[job].attempt_id, b, NULL, NULL,
                                         &err), 0);
        json_decref(b);
        assert_int_equal(bf_store_flush(s, &err), 0);
        assert_int_equal(bf_store_finish_attempt(s, l[job].attempt_id, 1,
                                                 NULL, 50, &err), 0);
        bf_lease_clear(&l[job]);
    }
    /* job 3 took job 2's width and lr, kept act, and has no dotted key */
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs j, jobs t WHERE "
                             "j.job_id = 3 AND t.job_id = 2 AND j.status = "
                             "'queued' AND j.config -> '$.params.width' = "
                             "t.config -> '$.params.width' AND j.config -> "
                             "'$.lr' = t.config -> '$.lr' AND j.config ->> "
                             "'$.params.act' = 'gelu' AND j.config -> "
                             "'$.\"params.width\"' IS NULL"), 1);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM job_params WHERE "
                             "name = 'act' AND value = 'gelu'"), 3);
    assert_int_equal(bft_int(s, "SELECT count(DISTINCT value) FROM "
                             "job_params WHERE name = 'width' AND job_id "
                             "IN (1, 2) AND type = 'integer'"), 2);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* A from: stage with adaptive seeds: once its cells are selected, every
 * job gets its values, seed 1 (min) is queued and the held seeds wait for
 * a decision that needs them. */
static void test_from_adaptive_seeds(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "a.db", NULL);
    bft_submit(s, "name: from\n"
               "base: {depth: 4, eval_depths: [4], eval_every: 50}\n"
               "analysis: {primary: {metric: loss, eval_depth: 4},"
               " baseline: {rope: rope}}\n"
               "stages:\n"
               "  - name: tune\n"
               "    base: {steps: 100}\n"
               "    grid: {rope: [rope, spectral]}\n"
               "    search: {method: sobol, trials: 2,"
               " space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}}\n"
               "    select: {by: eval_loss, eval_depth: 4}\n"
               "  - name: confirm\n"
               "    from: \"stage:tune\"\n"
               "    grid: {rope: [rope, spectral]}\n"
               "    seeds: {min: 1, max: 3, until: decided}\n", 1, NULL);
    bf_error err = {0};
    for (int job = 1; job <= 4; job++) {
        bf_lease l;
        char worker[16];
        snprintf(worker, sizeof worker, "w%d", job);
        assert_int_equal(bf_store_lease_next(s, worker, NULL, 10, 600000, &l, NULL),
                         1);
        json_t *b = json_pack("[{s:s, s:i, s:i, s:f, s:f}]", "type", "eval",
                              "step", 100, "depth", 4, "loss", 1.0 + job,
                              "accuracy", 0.5);
        assert_int_equal(bf_store_ingest(s, l.attempt_id, b, NULL, NULL, &err),
                         0);
        json_decref(b);
        assert_int_equal(bf_store_flush(s, &err), 0);
        assert_int_equal(bf_store_finish_attempt(s, l.attempt_id, 1, NULL, 50,
                                                 &err), 0);
        bf_lease_clear(&l);
    }
    /* confirm: rope seeds 1..3 are jobs 5..7, spectral 8..10 */
    char *states = bft_text(s, "SELECT group_concat(seed || status, ' ') "
                            "FROM (SELECT * FROM jobs WHERE stage = 'confirm' "
                            "ORDER BY job_id)");
    assert_string_equal(states, "1queued 2waiting 3waiting 1queued 2waiting "
                        "3waiting");
    free(states);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs j JOIN "
                             "selected_values v ON v.job_id = j.job_id JOIN "
                             "jobs t ON t.job_id = v.trial_job_id WHERE "
                             "j.config -> '$.lr' = t.config -> '$.lr'"), 6);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* ---- from: beside init_from "stage:" -------------------------------------- */

/* Surgical integration at the tuned values: tune (rope 1, 2; spectral 3,
 * 4), geometric (5), then surgery (spectral 6, rope 7) starting from
 * geometric's checkpoint with its encoding's tuned lr and freq_lr_mult. */
static const char surgery_yaml[] =
    "name: surgery\n"
    "base: {depth: 4, eval_depths: [4], eval_every: 50, steps: 100}\n"
    "max_attempts: 1\n"
    "stages:\n"
    "  - name: tune\n"
    "    grid: {rope: [rope, spectral]}\n"
    "    search: {method: sobol, trials: 2, space: {lr: {loguniform:"
    " [1.0e-4, 1.0e-2]}, freq_lr_mult: {loguniform: [1, 300]}}}\n"
    "    select: {by: eval_loss, eval_depth: 4}\n"
    "  - name: geometric\n"
    "    base: {rope: rope, warmup_steps: 0}\n"
    "  - name: surgery\n"
    "    from: \"stage:tune\"\n"
    "    base: {init_from: \"stage:geometric\"}\n"
    "    grid: {rope: [spectral, rope]}\n";

typedef struct surgery {
    char *dir;
    bf_store *s;
    bf_lease l[6];   /* by job id: tune 1..4, geometric 5 */
} surgery;

/* The surgery sweep submitted and jobs 1..5 leased, one worker each. */
static surgery *surgery_open(void)
{
    surgery *f = calloc(1, sizeof *f);
    f->dir = bft_tmpdir();
    f->s = bft_open(f->dir, "s.db", NULL);
    bft_submit(f->s, surgery_yaml, 1, NULL);
    for (int i = 1; i <= 5; i++) {
        char worker[16];
        snprintf(worker, sizeof worker, "w%d", i);
        assert_int_equal(bf_store_lease_next(f->s, worker, NULL, 10, 600000,
                                             &f->l[i], NULL), 1);
        assert_int_equal(f->l[i].job_id, i);
    }
    return f;
}

/* The store closed and opened again: a daemon killed and restarted. */
static void surgery_reopen(surgery *f)
{
    bf_store_close(f->s);
    f->s = bft_open(f->dir, "s.db", NULL);
}

static void surgery_close(surgery *f)
{
    for (int i = 1; i <= 5; i++)
        bf_lease_clear(&f->l[i]);
    bf_store_close(f->s);
    bft_rmdir(f->dir);
    free(f);
}

/* Trial `job` ends: succeeded with its final eval's loss, or failed. */
static void trial_ends(surgery *f, int job, int ok, double loss)
{
    bf_error err = {0};
    json_t *b = json_pack("[{s:s, s:i, s:i, s:f, s:f}]", "type", "eval",
                          "step", 100, "depth", 4, "loss", loss, "accuracy",
                          0.5);
    assert_int_equal(bf_store_ingest(f->s, f->l[job].attempt_id, b, NULL,
                                     NULL, &err), 0);
    json_decref(b);
    assert_int_equal(bf_store_flush(f->s, &err), 0);
    assert_int_equal(bf_store_finish_attempt(f->s, f->l[job].attempt_id, ok,
                                             ok ? NULL : "boom", 50, &err), 0);
}

/* The cell's two trials end, the second (the chosen one) better. */
static void cell_selected(surgery *f, int first_trial)
{
    trial_ends(f, first_trial, 1, 2.0);
    trial_ends(f, first_trial + 1, 1, 1.0);
}

/* geometric (job 5, leased as l[5]) ends: succeeded with its final
 * checkpoint, or failed. */
static void source_ends(surgery *f, int ok)
{
    bf_error err = {0};
    if (ok)
        assert_int_equal(bf_store_record_checkpoint(f->s, f->l[5].attempt_id,
                         "/ck/geometric", 100, &err), BF_STORE_OK);
    assert_int_equal(bf_store_finish_attempt(f->s, f->l[5].attempt_id, ok,
                                             ok ? NULL : "boom", 60, &err), 0);
}

static void assert_job(surgery *f, int job, const char *status)
{
    char *got = bft_text(f->s, "SELECT status FROM jobs WHERE job_id = %d",
                         job);
    if (strcmp(got, status) != 0)
        fail_msg("job %d is %s, not %s", job, got, status);
    free(got);
}

/* Job `job` is queued from geometric's checkpoint with exactly the lr and
 * freq_lr_mult of trial `trial`, its cell's chosen one. */
static void assert_both_in(surgery *f, int job, int trial)
{
    assert_job(f, job, "queued");
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs j, jobs t"
                             " WHERE j.job_id = %d AND t.job_id = %d"
                             " AND j.init_from = '/ck/geometric'"
                             " AND j.config -> '$.lr' = t.config -> '$.lr'"
                             " AND j.config -> '$.freq_lr_mult' ="
                             " t.config -> '$.freq_lr_mult'"
                             " AND j.config ->> '$.rope' = t.config ->> '$.rope'",
                             job, trial), 1);
}

static void assert_both_waiting(surgery *f)
{
    assert_job(f, 6, "waiting");
    assert_job(f, 7, "waiting");
}

/* How many of the surgery jobs (6, 7) meet SQL condition `cond`. */
static int64_t surgery_jobs(surgery *f, const char *cond)
{
    return bft_int(f->s, "SELECT count(*) FROM jobs WHERE job_id IN (6, 7)"
                   " AND %s", cond);
}

/* Spectral's job is in (values and checkpoint); rope's, its checkpoint
 * in, waits for its cell's selection, which queues it. */
static void rope_values_last(surgery *f)
{
    assert_both_in(f, 6, 4);
    assert_job(f, 7, "waiting");
    cell_selected(f, 1);
    assert_both_in(f, 7, 2);
}

/* Values first, then the source, with a restart between: the values
 * alone queue nothing (the job has no checkpoint to start from), nor does
 * the revival at open; the source's success queues both. */
static void test_from_values_then_source(void **state)
{
    (void)state;
    surgery *f = surgery_open();
    cell_selected(f, 1);
    cell_selected(f, 3);
    assert_int_equal(surgery_jobs(f, "status = 'waiting' AND hold IS NULL"
                                  " AND init_from IS NULL"), 2);
    surgery_reopen(f);
    assert_both_waiting(f);
    source_ends(f, 1);
    assert_both_in(f, 6, 4);
    assert_both_in(f, 7, 2);
    surgery_close(f);
}

/* The source first, then the values, with a restart between: the
 * checkpoint alone queues nothing (the values are not in), nor does the
 * revival at open; each cell's selection queues its job. */
static void test_from_source_then_values(void **state)
{
    (void)state;
    surgery *f = surgery_open();
    source_ends(f, 1);
    assert_int_equal(surgery_jobs(f, "status = 'waiting' AND hold = 'values'"
                                  " AND init_from = '/ck/geometric'"), 2);
    surgery_reopen(f);
    assert_both_waiting(f);
    cell_selected(f, 3);
    rope_values_last(f);
    surgery_close(f);
}

/* The source fails: both jobs fail, saying so.  Spectral's values come
 * while they are failed; the source is retried and succeeds: spectral's
 * job is queued, rope's waits for its values, then is queued too. */
static void test_from_source_fails_then_retried(void **state)
{
    (void)state;
    surgery *f = surgery_open();
    source_ends(f, 0);
    assert_int_equal(surgery_jobs(f, "status = 'failed'"
                                  " AND error = 'source job 5 failed'"), 2);
    cell_selected(f, 3);
    assert_job(f, 6, "failed");
    bf_error err = {0};
    assert_int_equal(bf_store_retry_job(f->s, 5, 0, 70, &err), BF_STORE_OK);
    assert_both_waiting(f);
    bf_lease_clear(&f->l[5]);
    assert_int_equal(bf_store_lease_next(f->s, "w6", NULL, 80, 600000, &f->l[5],
                                         NULL), 1);
    assert_int_equal(f->l[5].job_id, 5);
    source_ends(f, 1);
    rope_values_last(f);
    surgery_close(f);
}

/* A cell with no trial to choose fails its job, though its source has
 * handed it a checkpoint; the other cell's job is queued. */
static void test_from_no_trial_beside_source(void **state)
{
    (void)state;
    surgery *f = surgery_open();
    source_ends(f, 1);
    trial_ends(f, 3, 0, 1.0);
    trial_ends(f, 4, 0, 1.0);
    assert_job(f, 6, "failed");
    char *why = bft_text(f->s, "SELECT error FROM jobs WHERE job_id = 6");
    assert_non_null(strstr(why, "no values to take from stage tune"));
    free(why);
    cell_selected(f, 1);
    assert_both_in(f, 7, 2);
    surgery_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asha_rule),
        cmocka_unit_test(test_pruned_job_ends_pruned),
        cmocka_unit_test(test_decided_once),
        cmocka_unit_test(test_median_rule),
        cmocka_unit_test(test_synchronous_order),
        cmocka_unit_test(test_synchronous_end_decides),
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_from_selection),
        cmocka_unit_test(test_from_selection_params),
        cmocka_unit_test(test_from_adaptive_seeds),
        cmocka_unit_test(test_from_values_then_source),
        cmocka_unit_test(test_from_source_then_values),
        cmocka_unit_test(test_from_source_fails_then_retried),
        cmocka_unit_test(test_from_no_trial_beside_source),
        cmocka_unit_test(test_accuracy_metric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
