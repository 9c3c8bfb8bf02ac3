/* What the coordinator decides over a search's trials (issue 19; they are
 * stored with their jobs by store.c: `trials`, `prune_rules`,
 * `select_rules`): the selection of each cell's best trials once all have
 * ended (and the chosen values handed to the jobs of a later stage that
 * takes them, `from:`), and the decisions of a stage's prune rule, made when an eval at a rung is stored, in the transaction
 * that stores it, so that a decision is durable before the worker hears it
 * (the ack of that batch and every later reply say cancel) and is never
 * made twice (the key (job, rung) of prune_decisions).
 *
 * The rules (docs/sweeps.md), over the values decided before at the same
 * rung in the job's group (its stage's cell of the grid/zip), NaN worst;
 * a metric where higher is better (eval_accuracy) is ranked by its
 * negation, so below "lower is better" holds for both:
 *   asha    Asynchronous successive halving (Li et al. 2020), as Optuna's
 *           SuccessiveHalvingPruner applies it: with n values at the rung
 *           (this one included), the job goes on when its value is among
 *           the best max(1, floor(n / eta)).
 *   median  Optuna's MedianPruner: the job is pruned when at least
 *           min_trials values came before and its own is worse than
 *           their median.
 * Both depend on the order the values arrive in.  A synchronous asha rule
 * (successive halving, Jamieson & Talwalkar 2016) does not: its trials run
 * on past a rung, and the rung is decided once no live trial of the group
 * (one neither ended nor pruned) lacks a value there, over those values
 * alone: the best max(1, floor(n / eta)) go on, ties by trial number.  A
 * value arriving after its rung was decided (a retried trial) is decided
 * as asha decides it, against the values decided there. */
#include "store_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

/* ---- the rules ------------------------------------------------------------ */

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Whether a value goes on, among the n earlier values at its rung (sorted
 * in place; lower is better, NaN given as +inf). */
static int goes_on(int asha, int param, double value, double *earlier,
                   size_t n)
{
    if (asha) {
        earlier[n] = value;
        qsort(earlier, n + 1, sizeof *earlier, by_value);
        size_t k = (n + 1) / (size_t)param;
        return value <= earlier[k ? k - 1 : 0];
    }
    if (n < (size_t)param)
        return 1;
    qsort(earlier, n, sizeof *earlier, by_value);
    double median = n % 2 ? earlier[n / 2]
                          : (earlier[n / 2 - 1] + earlier[n / 2]) / 2;
    return value <= median;
}

/* The metric's value as the rules rank it: lower is better, NaN +inf. */
static double ranked(double value, int higher_better)
{
    return isnan(value) ? INFINITY : higher_better ? -value : value;
}

/* The values decided before at `rung` among group grp of rule_id, as
 * ranked, in *out (malloc'd, one slot spare); their count, or -1. */
static long competing(bf_store *s, int64_t rule_id, int64_t grp, int64_t rung,
                      int higher_better, double **out, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_COMPETING);
    sqlite3_bind_int64(st, 1, rule_id);
    sqlite3_bind_int64(st, 2, grp);
    sqlite3_bind_int64(st, 3, rung);
    size_t n = 0, cap = 16;
    double *v = bf_xmalloc(cap * sizeof *v);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n + 2 > cap)
            v = bf_xrealloc(v, (cap *= 2) * sizeof *v);
        v[n++] = sqlite3_column_int(st, 0)
                     ? INFINITY
                     : ranked(sqlite3_column_double(st, 1), higher_better);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return store__fail(s, err, "reading a rung's earlier values");
    }
    *out = v;
    return (long)n;
}

static int decide(bf_store *s, int64_t job_id, int64_t rung, double value,
                  int prune, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_DECIDE);
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, rung);
    if (!isnan(value))
        sqlite3_bind_double(st, 3, value);
    sqlite3_bind_text(st, 4, prune ? "prune" : "continue", -1, SQLITE_STATIC);
    if (store__exec(s, st, err) < 0)
        return -1;
    if (!prune || sqlite3_changes(s->db) == 0)
        return 0;
    st = store__stmt(s, ST_PRUNE_REQUEST);
    sqlite3_bind_int64(st, 1, job_id);
    return store__exec(s, st, err);
}

/* ---- synchronous successive halving -------------------------------------- */

typedef struct pending {
    double value;       /* as ranked */
    double raw;         /* as recorded (NaN: none) */
    int64_t trial, job_id;
} pending;

static int by_value_then_trial(const void *a, const void *b)
{
    const pending *x = a, *y = b;
    if (x->value != y->value)
        return (x->value > y->value) - (x->value < y->value);
    if (x->trial != y->trial)
        return (x->trial > y->trial) - (x->trial < y->trial);
    return (x->job_id > y->job_id) - (x->job_id < y->job_id);  /* seeds */
}

static double column_or_nan(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL
               ? NAN : sqlite3_column_double(st, col);
}

/* The values of group grp at rung not yet decided, in *out (malloc'd);
 * their count, or -1. */
static long pending_values(bf_store *s, int64_t rule_id, int64_t grp,
                           int64_t rung, int depth, bf_trial_metric metric,
                           pending **out, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_PENDING);
    sqlite3_bind_int64(st, 1, rule_id);
    sqlite3_bind_int64(st, 2, grp);
    sqlite3_bind_int64(st, 3, rung);
    sqlite3_bind_int(st, 4, depth);
    size_t n = 0, cap = 16;
    pending *v = bf_xmalloc(cap * sizeof *v);
    int rc, accuracy = metric == BF_TRIAL_EVAL_ACCURACY;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap)
            v = bf_xrealloc(v, (cap *= 2) * sizeof *v);
        double raw = column_or_nan(st, accuracy ? 3 : 2);
        v[n++] = (pending){ranked(raw, bf_trial_metric_higher_better(metric)),
                           raw, sqlite3_column_int64(st, 1),
                           sqlite3_column_int64(st, 0)};
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return store__fail(s, err, "reading a rung's undecided values");
    }
    *out = v;
    return (long)n;
}

/* Whether a live trial of group grp, not pruned, has no value at rung
 * yet: 1, 0, or -1. */
static int awaited(bf_store *s, int64_t rule_id, int64_t grp, int64_t rung,
                   int depth, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_AWAITED);
    sqlite3_bind_int64(st, 1, rule_id);
    sqlite3_bind_int64(st, 2, grp);
    sqlite3_bind_int64(st, 3, rung);
    sqlite3_bind_int(st, 4, depth);
    int rc = sqlite3_step(st);
    int out = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_reset(st);
    return out < 0 ? store__fail(s, err, "looking for trials a rung awaits")
                   : out;
}

/* Decides rung when the group awaits no value there: its undecided
 * values ranked, the best max(1, floor(n / eta)) go on.  1 when decided
 * (or nothing left to decide), 0 when still waiting, -1 on error. */
static int decide_rung(bf_store *s, int64_t rule_id, int64_t grp,
                       int64_t rung, int depth, int eta,
                       bf_trial_metric metric, bf_error *err)
{
    int wait = awaited(s, rule_id, grp, rung, depth, err);
    if (wait != 0)
        return wait < 0 ? -1 : 0;
    pending *v = NULL;
    long n = pending_values(s, rule_id, grp, rung, depth, metric, &v, err);
    if (n < 0)
        return -1;
    qsort(v, (size_t)n, sizeof *v, by_value_then_trial);
    long keep = n / eta ? n / eta : 1;
    int rc = 0;
    for (long i = 0; i < n && rc == 0; i++)
        rc = decide(s, v[i].job_id, rung, v[i].raw, i >= keep, err);
    free(v);
    return rc < 0 ? -1 : 1;
}

/* Decides the rungs of group grp of synchronous rule rule_id that no
 * longer wait, in order (a later rung waits while an earlier one does). */
static int settle_group(bf_store *s, int64_t rule_id, int64_t grp,
                        bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_SYNC_RUNGS);
    sqlite3_bind_int64(st, 1, rule_id);
    int64_t rungs[BF_PRUNE_MAX_RUNGS];
    size_t n = 0;
    int eta = 3, depth = 0, rc;
    bf_trial_metric metric = BF_TRIAL_EVAL_LOSS;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < BF_PRUNE_MAX_RUNGS) {
        eta = sqlite3_column_int(st, 0);
        depth = sqlite3_column_int(st, 1);
        bf_trial_metric_parse((const char *)sqlite3_column_text(st, 2),
                              &metric);
        rungs[n++] = sqlite3_column_int64(st, 3);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return store__fail(s, err, "reading a prune rule's rungs");
    for (size_t i = 0; i < n; i++) {
        rc = decide_rung(s, rule_id, grp, rungs[i], depth, eta, metric, err);
        if (rc <= 0)
            return rc;
    }
    return 0;
}

int store__prune_on_end(bf_store *s, int64_t job_id, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_SYNC_TRIAL);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0
               : store__fail(s, err, "looking up the trial's prune rule");
    }
    int64_t rule_id = sqlite3_column_int64(st, 0);
    int64_t grp = sqlite3_column_int64(st, 1);
    sqlite3_reset(st);
    return settle_group(s, rule_id, grp, err);
}

int store__prune_eval(bf_store *s, int64_t job_id, int64_t step,
                      int64_t depth, double loss, double accuracy,
                      bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_RULE_AT);
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, step);
    sqlite3_bind_int64(st, 3, depth);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0
               : store__fail(s, err, "looking up the job's prune rule");
    }
    int64_t rule_id = sqlite3_column_int64(st, 0);
    int asha = strcmp((const char *)sqlite3_column_text(st, 1), "asha") == 0;
    int param = sqlite3_column_int(st, 2);
    int64_t grp = sqlite3_column_int64(st, 3);
    int stopping = sqlite3_column_int(st, 4);
    bf_trial_metric metric = BF_TRIAL_EVAL_LOSS;
    bf_trial_metric_parse((const char *)sqlite3_column_text(st, 5), &metric);
    int synchronous = sqlite3_column_int(st, 6);
    sqlite3_reset(st);
    if (stopping)       /* pruned at an earlier rung, or being cancelled */
        return 0;
    int higher = bf_trial_metric_higher_better(metric);
    double value = metric == BF_TRIAL_EVAL_ACCURACY ? accuracy : loss;
    double *earlier = NULL;
    long n = competing(s, rule_id, grp, step, higher, &earlier, err);
    if (n < 0)
        return -1;
    if (synchronous && n == 0) {    /* the rung is not decided yet */
        free(earlier);
        return settle_group(s, rule_id, grp, err);
    }
    int on = goes_on(asha, param, ranked(value, higher), earlier, (size_t)n);
    free(earlier);
    return decide(s, job_id, step, value, !on, err);
}

/* ---- selection ------------------------------------------------------------ */

/* The jobs taking cell grp's values (`from:`) get those of its chosen
 * trial and are queued (one with a source once the source has handed it
 * its checkpoint: that release queues it); with none chosen they fail,
 * and their own dependents fail next (bf_store_settle). */
static int hand_on_values(bf_store *s, int64_t select_id, int64_t grp,
                          const char *stage, const char *metric, int depth,
                          int64_t now_ms, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_VALUES_CHOSEN);
    sqlite3_bind_int64(st, 1, select_id);
    sqlite3_bind_int64(st, 2, grp);
    if (store__exec(s, st, err) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 0)
        return 0;   /* no stage takes this selection's values */
    st = store__stmt(s, ST_VALUES_FILL);
    sqlite3_bind_int64(st, 1, select_id);
    sqlite3_bind_int64(st, 2, grp);
    if (store__exec(s, st, err) < 0)
        return -1;
    char why[512];
    snprintf(why, sizeof why, "no values to take from stage %s: no trial of "
             "this job's cell there succeeded with an %s at depth %d (all "
             "failed, were pruned or cancelled), so its selection chose none",
             stage, metric, depth);
    st = store__stmt(s, ST_VALUES_FAIL);
    sqlite3_bind_int64(st, 1, select_id);
    sqlite3_bind_int64(st, 2, grp);
    sqlite3_bind_int64(st, 3, now_ms);
    sqlite3_bind_text(st, 4, why, -1, SQLITE_TRANSIENT);
    return store__ids_collect(s, st, &s->unsettled, "failing jobs without "
                              "selected values", err) < 0 ? -1 : 0;
}

int store__select_on_end(bf_store *s, int64_t job_id, int64_t now_ms,
                         bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SELECT_READY);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(st);
        return rc == SQLITE_DONE ? 0
               : store__fail(s, err, "looking up the trial's selection");
    }
    int64_t select_id = sqlite3_column_int64(st, 0);
    int64_t grp = sqlite3_column_int64(st, 1);
    int best = sqlite3_column_int(st, 2), depth = sqlite3_column_int(st, 3);
    const unsigned char *name = sqlite3_column_text(st, 4);
    char stage[128] = "";
    if (name)
        snprintf(stage, sizeof stage, "%s", (const char *)name);
    bf_trial_metric metric = BF_TRIAL_EVAL_LOSS;
    bf_trial_metric_parse((const char *)sqlite3_column_text(st, 5), &metric);
    sqlite3_reset(st);
    st = store__stmt(s, ST_SELECT_RANK);
    sqlite3_bind_int64(st, 1, select_id);
    sqlite3_bind_int64(st, 2, grp);
    sqlite3_bind_int(st, 3, best);
    sqlite3_bind_int(st, 4, depth);
    sqlite3_bind_int(st, 5, bf_trial_metric_higher_better(metric));
    if (store__exec(s, st, err) < 0)
        return -1;
    return hand_on_values(s, select_id, grp, stage,
                          bf_trial_metric_name(metric), depth, now_ms, err);
}
