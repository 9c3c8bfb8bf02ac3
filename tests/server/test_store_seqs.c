/* Adaptive seeds in the store (seeds: {min, max, until: decided}): a
 * comparison with a big effect is decided and stops getting seeds, one
 * with no effect gets a seed pair at a time up to max; the same allocation
 * when the database is closed and reopened after every ended job (a
 * daemon killed and restarted), no job run twice; and the submission's
 * errors, each with its file, line and field. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "test_store_util.h"

#define MAX_SEEDS 8

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

/* Leases, evaluates and succeeds the next job; 0 when none is queued. */
static int run_next(bf_store *s, int64_t now)
{
    bf_lease l;
    bf_error err = {0};
    int rc = bf_store_lease_next(s, "w", now, 60000, &l, &err);
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
    assert_int_equal(bf_store_finish_attempt(s, l.attempt_id, 1, NULL, now,
                                             &err), 0);
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
    while (run_next(s, 10 + ran)) {
        ran++;
        if (restart) {
            bf_store_close(s);
            s = bft_open(dir, "seqs.db", NULL);
        }
    }
    bf_store_close(s);
    return ran;
}

static void check_outcome(const char *dir, int ran)
{
    bf_store *s = bft_open(dir, "seqs.db", NULL);
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
    check_outcome(dir, ran);
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
    check_outcome(b, restarted);
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

/* Submitting `yaml` fails with a message containing `want`. */
static void refused(const char *yaml, const char *want)
{
    char *dir = bft_tmpdir();
    bf_store *s = bft_open(dir, "refused.db", NULL);
    bf_error err = {0};
    int64_t id;
    int n;
    int rc = bf_store_submit_sweep(s, "sweep.yaml", yaml, strlen(yaml), NULL,
                                   1, &id, &n, NULL, &err);
    if (rc == 0 || !strstr(err.msg, want))
        fail_msg("rc %d, error '%s', wanted '%s'", rc, err.msg, want);
    bf_store_close(s);
    bft_rmdir(dir);
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
          "unknown seeds key 'by' (allowed: min, max, until)" },
    };
#undef SEEDS
#undef ANALYSIS
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "%s%s", head, cases[i].tail);
        refused(yaml, cases[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decided_stops_undecided_goes_on),
        cmocka_unit_test(test_restarts_keep_the_allocation),
        cmocka_unit_test(test_submission_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
