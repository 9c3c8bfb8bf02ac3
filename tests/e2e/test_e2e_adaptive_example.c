/* The worked example of adaptive seeds, configs/sweep-adaptive.yaml, end to
 * end with a real mpirun group: read from the source tree and changed only
 * in its caps (steps 300 -> 60, seeds max 20 -> 6) so that it runs in
 * seconds.  Its outcome is whatever training gives; what is checked is
 * that the outcome holds together: every comparison ends; replaying the
 * rule of common/confseq.h on the stored eval losses, seed pair by seed
 * pair, gives the stored state at the stored seed and was undecided at
 * every earlier pair; a decided comparison's held seeds never ran; and
 * `bifocal watch` prints for each comparison the state, seed and interval
 * the database holds.  (test_e2e_seqs drives the mechanism with designed
 * effects and kills the daemon.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confseq.h"
#include "e2e.h"

#define STEPS 60
#define SEEDS_MAX 6
#define DEPTH 8         /* the example's analysis.primary.eval_depth */
#define MARGIN 0.10     /* its (default) equivalence margin and alpha */
#define ALPHA 0.05
#define FAMILY 2        /* its stage's comparisons: spectral and bifocal */

/* In text (malloc'd), the one occurrence of `from` becomes `to`. */
static char *replace_once(char *text, const char *from, const char *to)
{
    char *at = strstr(text, from);
    if (!at || strstr(at + 1, from))
        fail_msg("the example must have '%s' once", from);
    size_t head = (size_t)(at - text), n = strlen(text) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)head, text, to, at + strlen(from));
    free(text);
    return out;
}

/* The example with its caps lowered. */
static char *scaled_example(void)
{
    char *text = e2e_example("sweep-adaptive.yaml");
    char steps[32], max[32];
    snprintf(steps, sizeof steps, "steps: %d", STEPS);
    snprintf(max, sizeof max, "max: %d", SEEDS_MAX);
    text = replace_once(text, "steps: 300", steps);
    return replace_once(text, "max: 20", max);
}

/* A stored comparison. */
typedef struct comparison {
    char rope[16];              /* the variant's encoding */
    long long variant, baseline, seeds_min, released, n_pairs, decided;
    char state[16];
    double low, high;           /* log scale; NAN when NULL */
    double alpha;               /* the level it was decided at */
} comparison;

static double real_or_nan(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL
        ? NAN : sqlite3_column_double(st, col);
}

static int read_comparisons(sqlite3 *db, comparison *c, int cap)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
        "SELECT json_extract(variant_config, '$.rope'), c.variant_cell,"
        " c.baseline_cell, c.seeds_min, c.released, c.n_pairs,"
        " ifnull(c.decided_seed, -1), c.state, c.ci_low, c.ci_high, a.alpha"
        " FROM adaptive_seeds a JOIN seed_comparisons c USING (sweep_id,"
        " variant_cell) ORDER BY c.variant_cell", -1, &st, NULL), SQLITE_OK);
    int n = 0;
    while (n < cap && sqlite3_step(st) == SQLITE_ROW) {
        comparison *x = &c[n++];
        snprintf(x->rope, sizeof x->rope, "%s", sqlite3_column_text(st, 0));
        x->variant = sqlite3_column_int64(st, 1);
        x->baseline = sqlite3_column_int64(st, 2);
        x->seeds_min = sqlite3_column_int64(st, 3);
        x->released = sqlite3_column_int64(st, 4);
        x->n_pairs = sqlite3_column_int64(st, 5);
        x->decided = sqlite3_column_int64(st, 6);
        snprintf(x->state, sizeof x->state, "%s", sqlite3_column_text(st, 7));
        x->low = real_or_nan(st, 8);
        x->high = real_or_nan(st, 9);
        x->alpha = real_or_nan(st, 10);
    }
    sqlite3_finalize(st);
    return n;
}

/* The final eval loss at DEPTH of cell's job of `seed` (all succeeded). */
static double final_loss(sqlite3 *db, long long cell, int seed)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
        "SELECT e.loss FROM jobs j JOIN evals e ON e.job_id = j.job_id"
        " WHERE j.cell = ?1 AND j.seed = ?2 AND j.status = 'succeeded'"
        " AND e.depth = ?3 ORDER BY e.step DESC LIMIT 1", -1, &st, NULL),
        SQLITE_OK);
    sqlite3_bind_int64(st, 1, cell);
    sqlite3_bind_int(st, 2, seed);
    sqlite3_bind_int(st, 3, DEPTH);
    if (sqlite3_step(st) != SQLITE_ROW)
        fail_msg("cell %lld seed %d has no final eval at depth %d", cell,
                 seed, DEPTH);
    double loss = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return loss;
}

static int close_to(double a, double b)
{
    return (isnan(a) && isinf(b)) || a == b || fabs(a - b) <= 1e-9 * fabs(b);
}

/* The rule replayed pair by pair on the stored losses, at the family's
 * level (Bonferroni: alpha / FAMILY): running before the last pair, the
 * stored state and interval at it. */
static void replay(sqlite3 *db, const comparison *c)
{
    double r[SEEDS_MAX], low, high;
    if (!close_to(c->alpha, ALPHA / FAMILY))
        fail_msg("%s: decided at alpha %g, not %g / %d", c->rope, c->alpha,
                 ALPHA, FAMILY);
    for (int n = 1; n <= c->released; n++) {
        r[n - 1] = log(final_loss(db, c->variant, n) /
                       final_loss(db, c->baseline, n));
        bf_confseq_state s = bf_confseq_decide(BF_CONFSEQ_RULE_T, r, n,
                                               (int)c->seeds_min,
                                               SEEDS_MAX, MARGIN,
                                               ALPHA / FAMILY,
                                               &low, &high);
        if (n < c->released && s != BF_CONFSEQ_RUNNING)
            fail_msg("%s: the rule decides %s at pair %d, but the "
                     "coordinator released %lld", c->rope,
                     bf_confseq_state_name(s), n, c->released);
        if (n == c->released && strcmp(bf_confseq_state_name(s), c->state))
            fail_msg("%s: the rule says %s after %d pairs, the coordinator "
                     "stored %s", c->rope, bf_confseq_state_name(s), n,
                     c->state);
    }
    assert_int_equal(c->decided, c->released);
    assert_int_equal(c->n_pairs, c->released);
    if (!close_to(c->low, low) || !close_to(c->high, high))
        fail_msg("%s: stored interval [%g, %g], replayed [%g, %g]", c->rope,
                 c->low, c->high, low, high);
}

/* What watch prints of c: "rope=spectral vs rope=rope, depth 8: decided
 * lower at seed 4, loss ratio in [×0.5, ×0.8] (97.5% sequence)". */
static void expect_printed(const char *out, const comparison *c)
{
    char want[256], ratio[96];
    int n = snprintf(want, sizeof want, "rope=%s vs rope=rope, depth %d: ",
                     c->rope, DEPTH);
    if (strcmp(c->state, "undecided") == 0)
        n += snprintf(want + n, sizeof want - (size_t)n, "undecided at seed "
                      "%lld (max), ", c->decided);
    else
        n += snprintf(want + n, sizeof want - (size_t)n, "decided %s at seed "
                      "%lld, ", c->state, c->decided);
    if (isnan(c->low))
        snprintf(ratio, sizeof ratio, "loss ratio not bounded yet");
    else
        snprintf(ratio, sizeof ratio, "loss ratio in [×%.3g, ×%.3g] (%.4g%% "
                 "sequence)", exp(c->low), exp(c->high),
                 100 * (1 - ALPHA / FAMILY));
    snprintf(want + n, sizeof want - (size_t)n, "%s", ratio);
    if (!strstr(out, want))
        fail_msg("bifocal watch does not print '%s':\n%s", want, out);
}

static void test_example_decides_as_stored(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    char *example = scaled_example();
    assert_true(bft_submit(d, "sweep-adaptive.yaml", example, NULL, NULL) > 0);
    free(example);
    pid_t g = e2e_group_start(d, 1, "group", "--exit-when-idle",
                              "--idle-grace", "0", NULL);
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 170000), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM sweeps WHERE"
                                 " status = 'done'"), 1);
    /* every job succeeded but held seeds a decision made unneeded */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs j WHERE NOT"
                                 " (status = 'succeeded' OR (status ="
                                 " 'cancelled' AND error LIKE 'not needed:%'"
                                 " AND NOT EXISTS (SELECT 1 FROM attempts a"
                                 " WHERE a.job_id = j.job_id)))"), 0);

    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(d->db, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    comparison c[4];
    int n = read_comparisons(db, c, 4);
    assert_int_equal(n, FAMILY);
    char *out = NULL;
    assert_int_equal(bft_run_client(d, &out, NULL, "watch", "1", NULL), 0);
    for (int i = 0; i < n; i++) {
        if (strcmp(c[i].state, "running") == 0)
            fail_msg("%s vs rope still running after the sweep", c[i].rope);
        replay(db, &c[i]);
        expect_printed(out, &c[i]);
    }
    free(out);
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_example_decides_as_stored,
                                        e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
