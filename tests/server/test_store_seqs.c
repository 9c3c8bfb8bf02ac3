/* Adaptive seeds in the store (seeds: {min, max, until: decided}): a
 * comparison with a big effect is decided and stops getting seeds, one
 * with no effect gets a seed pair at a time up to max; the same allocation
 * when the database is closed and reopened after every ended job (a
 * daemon killed and restarted), no job run twice; a stage with `rule:
 * sign` decided by the sign rule; and the submission's errors, each with
 * its file, line and field. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "confseq.h"
#include "fan_out.h"
#include "test_store_util.h"

#define MAX_SEEDS 8
/* The level of each of the sweep's 2 comparisons: one family (its stage),
 * Bonferroni over the analysis block's default alpha 0.05. */
#define FAMILY_ALPHA (0.05 / 2)

/* rope is the baseline; spectral's loss is half of it (decided lower
 * quickly); bifocal's differs by +-20%, no effect on average. */
static const char *const adaptive_sweep =
    "name: adaptive\n"
    "base: {steps: 20, warmup_steps: 0, depth: 4, eval_depths: [4]}\n"
    "grid:\n"
    "  rope: [rope, spectral, bifocal]\n"
    "seeds: {min: 3, max: 8, until: decided}\n"
    "analysis:\n"
    "  primary: {metric: loss, eval_depth: 4}\n"
    "  baseline: {rope: rope}\n";

/* The simulated final eval loss of a job. */
static double loss_of(const char *rope, int64_t seed)
{
    double base = 1.0 + 0.1 * sin(3.0 * (double)seed);
    if (strcmp(rope, "spectral") == 0)
        return base * 0.5 * exp(0.02 * sin(5.0 * (double)seed));
    if (strcmp(rope, "bifocal") == 0)
        return base * exp((seed % 2 ? 0.2 : -0.2) + 0.05 * sin((double)seed));
    return base;
}

static char *text_of(bf_store *s, int64_t job, const char *column)
{
    return bft_text(s, "SELECT %s FROM jobs WHERE job_id = %lld", column,
                    (long long)job);
}

/* The released seeds of the comparison of variant `rope`. */
static int64_t released(bf_store *s, const char *rope)
{
    return bft_int(s, "SELECT c.released FROM seed_comparisons c JOIN jobs j"
                   " ON j.sweep_id = c.sweep_id AND j.cell = c.variant_cell"
                   " WHERE j.rope = '%s' LIMIT 1", rope);
}

/* How a job ends: it succeeds, or its pair is lost to it. */
typedef enum ending { SUCCEEDS, FAILS_FOR_GOOD, PRUNED } ending;
typedef ending (*ending_fn)(const char *rope, int64_t seed);

static ending all_succeed(const char *rope, int64_t seed)
{
    (void)rope;
    (void)seed;
    return SUCCEEDS;
}

/* Ends the leased job l as `how` says (after its eval). */
static void end_job(bf_store *s, const bf_lease *l, ending how, int64_t now)
{
    bf_error err = {0};
    int rc;
    if (how == FAILS_FOR_GOOD) {
        rc = bf_store_fail_permanently(s, l->attempt_id, "diverged", now,
                                       &err);
    } else if (how == PRUNED) {
        /* as store_prune decides at a rung: the decision, then the stop */
        bft_int(s, "INSERT INTO prune_decisions (job_id, rung, value,"
                " decision, seq) VALUES (%lld, 10, 1.0, 'prune', %lld)"
                " RETURNING 1", (long long)l->job_id, (long long)l->job_id);
        bft_int(s, "UPDATE jobs SET cancel_requested = 1 WHERE job_id = %lld"
                " RETURNING 1", (long long)l->job_id);
        rc = bf_store_attempt_stopped(s, l->attempt_id, now, &err);
    } else {
        rc = bf_store_finish_attempt(s, l->attempt_id, 1, NULL, now, &err);
    }
    if (rc != 0)
        fail_msg("ending job %lld: %s", (long long)l->job_id, err.msg);
}

/* Leases, evaluates and ends the next job as `how` says; 0 when none is
 * queued. */
static int run_next(bf_store *s, int64_t now, ending_fn how)
{
    bf_lease l;
    bf_error err = {0};
    int rc = bf_store_lease_next(s, "w", NULL, now, 60000, &l, &err);
    if (rc < 0)
        fail_msg("lease_next: %s", err.msg);
    if (rc == 0)
        return 0;
    char *rope = text_of(s, l.job_id, "rope");
    int64_t seed = bft_int(s, "SELECT seed FROM jobs WHERE job_id = %lld",
                           (long long)l.job_id);
    /* A variant's seed is leased only once its comparison released it. */
    if (strcmp(rope, "rope") != 0 && seed > released(s, rope))
        fail_msg("%s seed %lld leased, released %lld", rope, (long long)seed,
                 (long long)released(s, rope));
    json_t *recs = json_pack("[{s:s,s:i,s:i,s:f,s:f}]", "type", "eval",
                             "step", 20, "depth", 4, "loss",
                             loss_of(rope, seed), "accuracy", 0.5);
    assert_int_equal(bf_store_ingest(s, l.attempt_id, recs, NULL, NULL, &err),
                     0);
    assert_int_equal(bf_store_flush(s, &err), 0);
    end_job(s, &l, how(rope, seed), now);
    json_decref(recs);
    free(rope);
    bf_lease_clear(&l);
    return 1;
}

/* Runs the sweep to its end, reopening the database after every job when
 * `restart`; the jobs that ran. */
static int run_all(const char *dir, int restart)
{
    bf_store *s = bft_open(dir, "seqs.db", NULL);
    bft_submit(s, adaptive_sweep, 1, NULL);
    int ran = 0;
    while (run_next(s, 10 + ran, all_succeed)) {
        ran++;
        if (restart) {
            bf_store_close(s);
            s = bft_open(dir, "seqs.db", NULL);
        }
    }
    bf_store_close(s);
    return ran;
}

/* The stored interval of spectral's comparison is the confidence
 * sequence's at `alpha` over its pairs (every job succeeded). */
static void check_interval(bf_store *s, double alpha)
{
    static const char sql[] = "SELECT c.%s FROM seed_comparisons c JOIN"
                              " jobs j ON j.cell = c.variant_cell WHERE"
                              " j.rope = 'spectral' LIMIT 1";
    int64_t n = bft_int(s, sql, "n_pairs");
    double r[MAX_SEEDS], low, high;
    for (int64_t i = 0; i < n; i++)
        r[i] = log(loss_of("spectral", i + 1) / loss_of("rope", i + 1));
    bf_confseq_interval(r, (int)n, alpha, &low, &high);
    /* the t rule's diagnostic, stored with each look */
    if (fabs(bft_real(s, sql, "skewness") - bf_confseq_skewness(r, (int)n))
        > 1e-12)
        fail_msg("spectral's stored skewness is not its pairs'");
    double stored_low = bft_real(s, sql, "ci_low");
    double stored_high = bft_real(s, sql, "ci_high");
    if (fabs(stored_low - low) > 1e-12 || fabs(stored_high - high) > 1e-12)
        fail_msg("spectral after %lld pairs: stored [%g, %g], at alpha %g"
                 " [%g, %g]", (long long)n, stored_low, stored_high, alpha,
                 low, high);
}

/* The sweep ran to its end (`ran` jobs), each comparison decided at
 * `alpha`. */
static void check_outcome(const char *dir, int ran, double alpha)
{
    bf_store *s = bft_open(dir, "seqs.db", NULL);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM seed_comparisons"
                             " WHERE abs(alpha - %.17g) < 1e-15", alpha), 2);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM adaptive_seeds"
                             " WHERE rule = 't'"), 2);
    check_interval(s, alpha);
    /* spectral: decided lower once the interval is finite (seed 4) */
    char *state = bft_text(s, "SELECT c.state FROM seed_comparisons c JOIN"
                           " jobs j ON j.cell = c.variant_cell"
                           " WHERE j.rope = 'spectral' LIMIT 1");
    assert_string_equal(state, "lower");
    free(state);
    int64_t spent = bft_int(s, "SELECT c.decided_seed FROM seed_comparisons"
                            " c JOIN jobs j ON j.cell = c.variant_cell"
                            " WHERE j.rope = 'spectral' LIMIT 1");
    assert_true(spent >= 3 && spent < MAX_SEEDS);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE rope ="
                             " 'spectral' AND status = 'succeeded'"), spent);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE rope ="
                             " 'spectral' AND status = 'cancelled' AND error"
                             " LIKE 'not needed:%%' AND seed > %lld",
                             (long long)spent), MAX_SEEDS - spent);
    assert_true(bft_real(s, "SELECT c.ci_high FROM seed_comparisons c JOIN"
                         " jobs j ON j.cell = c.variant_cell WHERE j.rope ="
                         " 'spectral' LIMIT 1") < 0);
    /* bifocal: no effect, every seed up to max, undecided there */
    state = bft_text(s, "SELECT c.state || ' ' || c.decided_seed FROM"
                     " seed_comparisons c JOIN jobs j ON j.cell ="
                     " c.variant_cell WHERE j.rope = 'bifocal' LIMIT 1");
    assert_string_equal(state, "undecided 8");
    free(state);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE rope IN"
                             " ('bifocal', 'rope') AND status ="
                             " 'succeeded'"), 2 * MAX_SEEDS);
    /* no comparison of the baseline with itself; each job ran once */
    assert_int_equal(bft_int(s, "SELECT count(*) FROM seed_comparisons"), 2);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM attempts"), ran);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM attempts GROUP BY job_id"
                             " ORDER BY count(*) DESC LIMIT 1"), 1);
    char *sweep = bft_text(s, "SELECT status FROM sweeps");
    assert_string_equal(sweep, "done");
    free(sweep);
    bf_store_close(s);
}

static void test_decided_stops_undecided_goes_on(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    int ran = run_all(dir, 0);
    check_outcome(dir, ran, FAMILY_ALPHA);
    bft_rmdir(dir);
}

/* Closed and reopened after every job: the same jobs run, once each, and
 * the same decisions are stored. */
static void test_restarts_keep_the_allocation(void **state)
{
    (void)state;
    char *a = bft_tmpdir(), *b = bft_tmpdir();
    int straight = run_all(a, 0), restarted = run_all(b, 1);
    assert_int_equal(straight, restarted);
    check_outcome(b, restarted, FAMILY_ALPHA);
    char sql[] = "SELECT group_concat(state || ':' || decided_seed || ':' ||"
                 " n_pairs || ':' || ci_low || ':' || ci_high, ';') FROM"
                 " (SELECT * FROM seed_comparisons ORDER BY variant_cell)";
    bf_store *sa = bft_open(a, "seqs.db", NULL);
    bf_store *sb = bft_open(b, "seqs.db", NULL);
    char *ta = bft_text(sa, "%s", sql), *tb = bft_text(sb, "%s", sql);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    bf_store_close(sa);
    bf_store_close(sb);
    bft_rmdir(a);
    bft_rmdir(b);
}

/* The state, seeds spent and pairs of the comparison of `rope`. */
static char *comparison_of(bf_store *s, const char *rope)
{
    return bft_text(s, "SELECT c.state || ' ' || ifnull(c.decided_seed, '-')"
                    " || ' ' || c.n_pairs FROM seed_comparisons c JOIN jobs j"
                    " ON j.cell = c.variant_cell WHERE j.rope = '%s' LIMIT 1",
                    rope);
}

/* Cancelling the sweep ends its undecided comparisons 'cancelled', with
 * the seeds released and the last look's interval as they were; a job
 * that ends after the cancel changes nothing. */
static void test_cancel_ends_comparisons(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "seqs.db", NULL);
    int64_t sweep = bft_submit(s, adaptive_sweep, 1, NULL);
    for (int i = 0; i < 4; i++)         /* 4 of the 9 first jobs */
        assert_true(run_next(s, 10 + i, all_succeed));
    bf_lease l;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_next(s, "w", NULL, 20, 60000, &l, &err), 1);
    char *before = bft_text(s, "SELECT group_concat(ifnull(ci_low, 'null'),"
                            " ',') FROM seed_comparisons");
    int64_t *running = NULL;
    int n_running = 0;
    assert_int_equal(bft_cancel_sweep(s, sweep, 30, &running, &n_running,
                                      &err), BF_STORE_OK);
    free(running);
    assert_int_equal(bf_store_attempt_stopped(s, l.attempt_id, 40, &err), 0);
    bf_lease_clear(&l);
    const char *ropes[] = {"spectral", "bifocal"};
    for (int i = 0; i < 2; i++) {
        char *c = comparison_of(s, ropes[i]);
        assert_string_equal(c, "cancelled 3 0");
        free(c);
    }
    assert_int_equal(bft_int(s, "SELECT count(*) FROM seed_comparisons"
                             " WHERE decided_ms = 30"), 2);
    char *after = bft_text(s, "SELECT group_concat(ifnull(ci_low, 'null'),"
                           " ',') FROM seed_comparisons");
    assert_string_equal(after, before);
    free(before);
    free(after);
    /* the view watch, report and dashboard read says so */
    assert_int_equal(bft_int(s, "SELECT count(*) FROM adaptive_seeds WHERE"
                             " state = 'cancelled' AND decided_seed = 3"), 2);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE status IN"
                             " ('waiting', 'queued', 'running')"), 0);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* spectral's seed 2 is pruned, bifocal's seed 2 fails for good. */
static ending lose_seed_2(const char *rope, int64_t seed)
{
    if (seed != 2)
        return SUCCEEDS;
    return !strcmp(rope, "spectral") ? PRUNED
         : !strcmp(rope, "bifocal") ? FAILS_FOR_GOOD : SUCCEEDS;
}

/* A pair lost to a pruned job or one that failed for good is left out
 * and replaced by the next pair: neither comparison waits for it, both
 * end as they would, on one pair fewer than the seeds they spent. */
static void test_lost_pairs_are_replaced(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "seqs.db", NULL);
    bft_submit(s, adaptive_sweep, 1, NULL);
    for (int i = 0; run_next(s, 10 + i, lose_seed_2); i++)
        ;
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE rope ="
                             " 'spectral' AND status = 'pruned'"), 1);
    char *c = bft_text(s, "SELECT c.state FROM seed_comparisons c JOIN jobs j"
                       " ON j.cell = c.variant_cell WHERE j.rope = 'spectral'"
                       " LIMIT 1");
    assert_string_equal(c, "lower");
    free(c);
    assert_int_equal(bft_int(s, "SELECT c.decided_seed - c.n_pairs FROM"
                             " seed_comparisons c JOIN jobs j ON j.cell ="
                             " c.variant_cell WHERE j.rope = 'spectral'"
                             " LIMIT 1"), 1);
    c = comparison_of(s, "bifocal");
    assert_string_equal(c, "undecided 8 7");
    free(c);
    char *sweep = bft_text(s, "SELECT status FROM sweeps");
    assert_string_equal(sweep, "done");
    free(sweep);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* The held seeds of the adaptive sweep: seeds 4..8 of its 3 cells. */
#define HELD_SEEDS (3 * (MAX_SEEDS - 3))

static int64_t waiting_held(bf_store *s, int64_t sweep)
{
    return bft_int(s, "SELECT count(*) FROM jobs WHERE sweep_id = %lld"
                   " AND status = 'waiting' AND seed > 3", (long long)sweep);
}

/* A stage taking its values from a selection (from:): 4 tune trials
 * queued, 2 confirm jobs held until the tune cells are selected. */
static const char *const from_sweep =
    "name: from\n"
    "base: {depth: 4, eval_depths: [4], steps: 20, warmup_steps: 0}\n"
    "stages:\n"
    "  - name: tune\n"
    "    grid: {rope: [rope, spectral]}\n"
    "    search: {method: sobol, trials: 2,"
    " space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}}\n"
    "    select: {by: eval_loss, eval_depth: 4}\n"
    "  - name: confirm\n"
    "    from: \"stage:tune\"\n"
    "    grid: {rope: [rope, spectral]}\n";

static int64_t waiting_values(bf_store *s, int64_t sweep)
{
    return bft_int(s, "SELECT count(*) FROM jobs WHERE sweep_id = %lld"
                   " AND stage = 'confirm' AND status = 'waiting'",
                   (long long)sweep);
}

/* A retried source without a source of its own (a revival's root) is
 * queued once the jobs its failure failed wait again; held seeds and jobs
 * waiting for a selection's values also wait without a source, but for a
 * decision, and must not be taken for such roots.  The daemon is killed while the revival of a 300-job fan-out is
 * half done (4 slices of 64 at once, the rest left to bf_store_settle)
 * and restarted: the revival ends, and every held seed still waits. */
static void test_revival_leaves_held_seeds(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "seqs.db", NULL);
    char *fan = bft_fan_out_sweep("{steps: 20, warmup_steps: 0}", 300);
    bft_submit(s, fan, 1, NULL);
    free(fan);
    bf_lease l;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_next(s, "w", NULL, 5, 60000, &l, &err), 1);
    assert_int_equal(l.job_id, 1);
    assert_int_equal(bf_store_fail_permanently(s, l.attempt_id, "boom", 6,
                                               &err), 0);
    bf_lease_clear(&l);
    while (bf_store_unsettled(s))
        assert_int_equal(bf_store_settle(s, 7, 0, &err), 0);
    int64_t sweep = bft_submit(s, adaptive_sweep, 8, NULL);
    assert_int_equal(waiting_held(s, sweep), HELD_SEEDS);
    int64_t from = bft_submit(s, from_sweep, 8, NULL);
    assert_int_equal(waiting_values(s, from), 2);

    assert_int_equal(bf_store_retry_job(s, 1, 0, 9, &err), BF_STORE_OK);
    assert_true(bf_store_unsettled(s));     /* the revival is half done */
    bf_store_close(s);                      /* kill -9 */
    s = bft_open(dir, "seqs.db", NULL);
    assert_true(bf_store_unsettled(s));
    while (bf_store_unsettled(s))
        assert_int_equal(bf_store_settle(s, 10, 0, &err), 0);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE"
                             " source_job_id = 1 AND status = 'waiting'"), 300);
    assert_int_equal(bft_int(s, "SELECT status = 'queued' FROM jobs"
                             " WHERE job_id = 1"), 1);
    assert_int_equal(waiting_held(s, sweep), HELD_SEEDS);
    assert_int_equal(waiting_values(s, from), 2);

    /* Cancelled (its dependents fail), a restart with no revival pending,
     * then a retry: the same. */
    int64_t *running = NULL;
    int n_running = 0;
    assert_int_equal(bf_store_cancel_job(s, 1, 12, &running, &n_running,
                                         &err), BF_STORE_OK);
    free(running);
    while (bf_store_unsettled(s))
        assert_int_equal(bf_store_settle(s, 13, 0, &err), 0);
    bf_store_close(s);
    s = bft_open(dir, "seqs.db", NULL);
    assert_false(bf_store_unsettled(s));
    assert_int_equal(bf_store_retry_job(s, 1, 0, 14, &err), BF_STORE_OK);
    while (bf_store_unsettled(s))
        assert_int_equal(bf_store_settle(s, 15, 0, &err), 0);
    assert_int_equal(bft_int(s, "SELECT status = 'queued' FROM jobs"
                             " WHERE job_id = 1"), 1);
    assert_int_equal(waiting_held(s, sweep), HELD_SEEDS);
    assert_int_equal(waiting_values(s, from), 2);

    /* A held seed cancelled and retried runs: a retry is asked for. */
    int64_t seed = bft_int(s, "SELECT min(job_id) FROM jobs WHERE sweep_id"
                           " = %lld AND seed > 3", (long long)sweep);
    assert_int_equal(bf_store_cancel_job(s, seed, 16, &running, &n_running,
                                         &err), BF_STORE_OK);
    free(running);
    assert_int_equal(bf_store_retry_job(s, seed, 0, 17, &err), BF_STORE_OK);
    assert_int_equal(bft_int(s, "SELECT status = 'queued' AND hold IS NULL"
                             " FROM jobs WHERE job_id = %lld",
                             (long long)seed), 1);
    assert_int_equal(waiting_held(s, sweep), HELD_SEEDS - 1);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* Stage pre trains one job a seed; stage cmp compares three encodings
 * with adaptive seeds, each seed's jobs starting from pre's job of that
 * seed. */
static const char *const staged_sweep =
    "name: staged\n"
    "base: {steps: 20, warmup_steps: 0, depth: 4, eval_depths: [4]}\n"
    "analysis: {primary: {metric: loss, eval_depth: 4},"
    " baseline: {rope: rope}}\n"
    "stages:\n"
    "  - {name: pre, seeds: 8}\n"
    "  - name: cmp\n"
    "    base: {init_from: \"stage:pre\"}\n"
    "    grid: {rope: [rope, spectral, bifocal]}\n"
    "    seeds: {min: 3, max: 8, until: decided}\n";

/* Runs pre's next queued job, which must be job_id: it writes its final
 * checkpoint and succeeds, or, when fails, fails for good; then settles
 * what it leaves. */
static void run_pre_job(bf_store *s, int64_t job_id, int fails, int64_t now)
{
    bf_lease l;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_next(s, "w", NULL, now, 60000, &l, &err), 1);
    assert_int_equal(l.job_id, job_id);
    if (fails) {
        assert_int_equal(bf_store_fail_permanently(s, l.attempt_id, "boom",
                                                   now, &err), 0);
    } else {
        assert_int_equal(bf_store_record_checkpoint(s, l.attempt_id,
                                                    "/ck/pre", 20, &err),
                         BF_STORE_OK);
        assert_int_equal(bf_store_finish_attempt(s, l.attempt_id, 1, NULL,
                                                 now, &err), BF_STORE_OK);
    }
    bf_lease_clear(&l);
    while (bf_store_unsettled(s))
        assert_int_equal(bf_store_settle(s, now, 0, &err), 0);
}

/* A stage with adaptive seeds that starts from an earlier stage: its
 * held seeds wait for their pair's release, not for their source only.
 * When the source succeeds, every seed gets its checkpoint and those up
 * to min are queued; the held ones stay waiting (a restart too), and each
 * runs from that checkpoint once the rule releases it. */
static void test_source_release_leaves_held_seeds(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "seqs.db", NULL);
    int64_t sweep = bft_submit(s, staged_sweep, 1, NULL);
    bf_error err = {0};
    for (int64_t job = 1; job <= MAX_SEEDS; job++)   /* pre, each seed */
        run_pre_job(s, job, 0, 2);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE stage ="
                             " 'cmp' AND status = 'queued'"), 3 * 3);
    assert_int_equal(waiting_held(s, sweep), HELD_SEEDS);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE stage ="
                             " 'cmp' AND init_from = '/ck/pre'"), 3 * MAX_SEEDS);
    bf_store_close(s);
    s = bft_open(dir, "seqs.db", NULL);
    while (bf_store_unsettled(s))
        assert_int_equal(bf_store_settle(s, 5, 0, &err), 0);
    assert_int_equal(waiting_held(s, sweep), HELD_SEEDS);

    for (int i = 0; run_next(s, 10 + i, all_succeed); i++)
        ;
    /* each seed ran from the checkpoint, the unneeded ones never ran */
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE stage ="
                             " 'cmp' AND attempts > 0 AND init_from IS NOT"
                             " '/ck/pre'"), 0);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE stage ="
                             " 'cmp' AND status = 'succeeded'"),
                     2 * MAX_SEEDS + released(s, "spectral"));
    assert_true(released(s, "spectral") < MAX_SEEDS);
    char *st = bft_text(s, "SELECT status FROM sweeps");
    assert_string_equal(st, "done");
    free(st);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* A held seed fails with its source when that fails for good.  Retried
 * after the rule has moved on (here every comparison ended, bifocal's at
 * max with seed 8's pair lost), the source runs again but its held seeds
 * stay failed: revived, they would wait for a release that never comes,
 * and the sweep would never end. */
static void test_retried_source_after_decisions(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "seqs.db", NULL);
    bft_submit(s, staged_sweep, 1, NULL);
    for (int64_t job = 1; job <= MAX_SEEDS; job++)   /* seed 8 fails */
        run_pre_job(s, job, job == MAX_SEEDS, 2);
    for (int i = 0; run_next(s, 10 + i, all_succeed); i++)
        ;
    assert_int_equal(bft_int(s, "SELECT count(*) FROM seed_comparisons"
                             " WHERE state = 'running'"), 0);
    char *before = bft_text(s, "SELECT status FROM sweeps");
    bf_error err = {0};
    assert_int_equal(bf_store_retry_job(s, MAX_SEEDS, 0, 50, &err),
                     BF_STORE_OK);
    while (bf_store_unsettled(s))
        assert_int_equal(bf_store_settle(s, 51, 0, &err), 0);
    run_pre_job(s, MAX_SEEDS, 0, 52);
    assert_int_equal(run_next(s, 53, all_succeed), 0);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs"
                             " WHERE status IN ('waiting', 'queued')"), 0);
    char *after = bft_text(s, "SELECT status FROM sweeps");
    assert_string_equal(after, before);
    free(before);
    free(after);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* A database stored before migration 20 (no jobs.hold) has its held
 * seeds marked when it is upgraded: the rule releases them, a revival
 * leaves them. */
static void test_upgrade_marks_held_seeds(void **state)
{
    (void)state;
    char *dir = bft_tmpdir(), *path = NULL;
    bf_store *s = bft_open(dir, "seqs.db", &path);
    bft_submit(s, adaptive_sweep, 1, NULL);
    bf_store_close(s);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    /* as migration 19 left it: without the columns of 20 to 23, 26 and
     * 27 (the view that 22 makes again reads its column; 23 rebuilt
     * jobs_queue over its own and indexed it) and the views of 24 and 28 */
    assert_int_equal(sqlite3_exec(db, "DROP VIEW job_params;"
                                  " DROP VIEW search_trials;"
                                  " DROP INDEX jobs_waiting_by_trainer;"
                                  " DROP INDEX jobs_queue;"
                                  " CREATE INDEX jobs_queue ON jobs (priority"
                                  " DESC, sweep_id, job_id) WHERE status ="
                                  " 'queued';"
                                  " ALTER TABLE jobs DROP COLUMN trainer;"
                                  " ALTER TABLE jobs DROP COLUMN hold;"
                                  " ALTER TABLE attempts DROP COLUMN request;"
                                  " DROP VIEW adaptive_seeds;"
                                  " ALTER TABLE seed_comparisons DROP COLUMN"
                                  " alpha;"
                                  " ALTER TABLE seed_comparisons DROP COLUMN"
                                  " rule;"
                                  " ALTER TABLE seed_comparisons DROP COLUMN"
                                  " skewness;"
                                  " ALTER TABLE prune_rules DROP COLUMN"
                                  " synchronous;"
                                  " CREATE VIEW adaptive_seeds AS SELECT 1;"
                                  " PRAGMA user_version = 19", NULL, NULL,
                                  NULL), SQLITE_OK);
    sqlite3_close(db);
    s = bft_open(dir, "seqs.db", NULL);

    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE hold ="
                             " 'seed' AND seed > 3 AND status = 'waiting'"),
                     HELD_SEEDS);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs WHERE hold IS"
                             " NULL AND status = 'queued'"), 3 * 3);
    int ran = 0;
    while (run_next(s, 10 + ran, all_succeed))
        ran++;
    bf_store_close(s);
    /* comparisons stored before migration 22 keep the level they were
     * made for: the analysis block's alpha, uncorrected */
    check_outcome(dir, ran, 0.05);
    free(path);
    bft_rmdir(dir);
}

/* `rule: sign`: spectral's loss is half the baseline's at every seed, so
 * every log ratio is below 0, but the sign rule sees only their signs: at
 * alpha 0.05 (one comparison) it bounds the median below 0 from the
 * sixth pair on (M_6 = 20.09 >= 20, M_5 = 10.5; tests/common/
 * test_confseq.py works them out), where the t rule decides at seed 4
 * (check_outcome).  The stored interval is the sign rule's, between two
 * order statistics of the pairs. */
static void test_sign_rule(void **state)
{
    (void)state;
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "sign.db", NULL);
    bft_submit(s, "name: sign\n"
               "base: {steps: 20, warmup_steps: 0, depth: 4, "
               "eval_depths: [4]}\n"
               "grid: {rope: [rope, spectral]}\n"
               "seeds: {min: 3, max: 8, until: decided, rule: sign}\n"
               "analysis:\n"
               "  primary: {metric: loss, eval_depth: 4}\n"
               "  baseline: {rope: rope}\n", 1, NULL);
    for (int i = 0; run_next(s, 10 + i, all_succeed); i++)
        ;
    char *c = bft_text(s, "SELECT rule || ' ' || state || ' ' || decided_seed"
                       " FROM adaptive_seeds");
    assert_string_equal(c, "sign lower 6");
    free(c);
    double r[6], low, high;
    for (int i = 0; i < 6; i++)
        r[i] = log(loss_of("spectral", i + 1) / loss_of("rope", i + 1));
    bf_confseq_sign_interval(r, 6, 0.05, &low, &high);
    assert_true(high < 0);
    assert_true(bft_real(s, "SELECT ci_high FROM seed_comparisons") == high);
    assert_true(bft_real(s, "SELECT ci_low FROM seed_comparisons") == low);
    bf_store_close(s);
    bft_rmdir(dir);
}

/* Submitting `yaml` to s fails with a message containing `want` (and
 * stores nothing, so one store serves every case). */
static void refused(bf_store *s, const char *yaml, const char *want)
{
    bf_error err = {0};
    int64_t id;
    int n;
    int rc = bf_store_submit_sweep(s, "sweep.yaml", yaml, strlen(yaml), NULL,
                                   1, &id, &n, NULL, &err);
    if (rc == 0 || !strstr(err.msg, want))
        fail_msg("rc %d, error '%s', wanted '%s'", rc, err.msg, want);
}

static void test_submission_errors(void **state)
{
    (void)state;
    static const char head[] = "name: bad\nbase: {steps: 20, depth: 4, "
                               "eval_depths: [4]}\ngrid: {rope: [rope, "
                               "spectral]}\n";
#define ANALYSIS "analysis: {primary: {metric: loss, eval_depth: 4}, " \
                 "baseline: {rope: rope}}\n"
#define SEEDS(min, until) "seeds:\n  min: " min "\n  max: 8\n  until: " \
                          until "\n"
    static const struct { const char *tail, *want; } cases[] = {
        { "seeds: {min: 3, max: 8, until: decided}\n",
          "sweep.yaml:4: field 'seeds.until': seeds until decided needs an "
          "analysis: block" },
        { "seeds: {min: 3, max: 8, until: decided}\n"
          "analysis: {baseline: {rope: rope}}\n",
          "sweep.yaml:4: field 'seeds.until': seeds until decided needs "
          "analysis.primary: {metric: loss, eval_depth: D}" },
        { "seeds: {min: 3, max: 8, until: decided}\n"
          "analysis: {primary: {metric: loss, eval_depth: 4}}\n",
          "needs analysis.baseline" },
        { SEEDS("9", "decided") ANALYSIS,
          "sweep.yaml:5: field 'seeds.min': seeds.min 9 is more than "
          "seeds.max 8" },
        { SEEDS("3", "enough") ANALYSIS,
          "sweep.yaml:7: field 'seeds.until': seeds.until must be "
          "'decided'" },
        { SEEDS("0", "decided") ANALYSIS,
          "sweep.yaml:5: field 'seeds.min': seeds.min must be an integer in "
          "[1, 1000]" },
        { "seeds: {min: 3, max: 8, until: decided, by: 2}\n" ANALYSIS,
          "unknown seeds key 'by' (allowed: min, max, until, rule)" },
        { SEEDS("3", "decided") "  rule: median\n" ANALYSIS,
          "sweep.yaml:8: field 'seeds.rule': seeds.rule must be 't' (the "
          "mean, Gaussian log ratios; the default) or 'sign'" },
        { SEEDS("3", "decided") "  rule: [sign]\n" ANALYSIS,
          "sweep.yaml:8: field 'seeds.rule': seeds.rule must be" },
    };
#undef SEEDS
#undef ANALYSIS
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "refused.db", NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "%s%s", head, cases[i].tail);
        refused(s, yaml, cases[i].want);
    }
    assert_int_equal(bft_int(s, "SELECT count(*) FROM sweeps"), 0);
    bf_store_close(s);
    bft_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decided_stops_undecided_goes_on),
        cmocka_unit_test(test_restarts_keep_the_allocation),
        cmocka_unit_test(test_cancel_ends_comparisons),
        cmocka_unit_test(test_lost_pairs_are_replaced),
        cmocka_unit_test(test_revival_leaves_held_seeds),
        cmocka_unit_test(test_source_release_leaves_held_seeds),
        cmocka_unit_test(test_retried_source_after_decisions),
        cmocka_unit_test(test_upgrade_marks_held_seeds),
        cmocka_unit_test(test_sign_rule),
        cmocka_unit_test(test_submission_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
