/* store_seqs: adaptive seeds (`seeds: {min, max, until: decided}`).
 *
 * A stage's seeds 1..max are stored at submission, those past min held
 * ('waiting' without a source job).  Each non-baseline cell of the stage
 * is one comparison with its baseline cell (table seed_comparisons,
 * migration 16; its rows are made with the sweep's last job, store.c).
 * When a job of a running comparison ends, and every seed pair released
 * so far has ended, the comparison's rule of common/confseq.h (t or sign,
 * the stage's seeds.rule, migration 26) reads the pairs' losses at the
 * analysis block's depth, at the comparison's own level (alpha / m for the
 * m comparisons of its stage, one family: Bonferroni, migration 22), and
 * the state is stored with the log ratios' skewness (the t rule's
 * diagnostic, results/adaptive.c); then, in the same transaction, one more
 * pair is released or the comparison's held seeds are dropped.  A
 * decision is thus never acted on without being stored, nor stored
 * without being acted on, and a daemon killed at any moment resumes from
 * the database alone.  The work per ended job is bounded by max seed
 * pairs, so it needs no slicing.
 *
 * A pair with a job that failed for good, was cancelled on its own or was
 * pruned has ended without a loss: it is left out of the look, and the
 * next pair is released in its place while seeds are left (at max, the
 * comparison ends undecided); so is a pair whose jobs failed with their
 * source while held, at its release.  Cancelling the sweep ends its running
 * comparisons 'cancelled' in the same transaction. */
#include "store_internal.h"

#include <math.h>
#include <stdlib.h>

#include "alloc.h"
#include "confseq.h"

/* A running comparison, as ST_SEQ_RUNNING reads it. */
typedef struct comparison {
    int64_t variant, baseline;  /* cells */
    int depth, min, max, released;
    double margin, alpha;       /* alpha: this comparison's, as stored */
    bf_confseq_rule rule;
} comparison;

/* The comparisons of `cell` still running, into *out (malloc'd). */
static int running_of(bf_store *s, int64_t sweep_id, int64_t cell,
                      comparison **out, int *n, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SEQ_RUNNING);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, cell);
    int rc, cap = 0;
    *out = NULL;
    *n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 4;
            *out = bf_xrealloc(*out, (size_t)cap * sizeof **out);
        }
        (*out)[(*n)++] = (comparison){
            .variant = sqlite3_column_int64(st, 0),
            .baseline = sqlite3_column_int64(st, 1),
            .depth = sqlite3_column_int(st, 2),
            .min = sqlite3_column_int(st, 3),
            .max = sqlite3_column_int(st, 4),
            .released = sqlite3_column_int(st, 5),
            .margin = sqlite3_column_double(st, 6),
            .alpha = sqlite3_column_double(st, 7),
            .rule = (bf_confseq_rule)bf_confseq_rule_parse(
                (const char *)sqlite3_column_text(st, 8))};
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return store__fail(s, err, "reading the comparisons of adaptive "
                           "seeds");
    return 0;
}

/* The log-ratios of c's released pairs that both succeeded, into r (at
 * least c->released long): their count, -2 while a pair is unended, -1
 * on error.  A pair without a positive finite loss on both sides (a
 * failed or diverged job) is left out. */
static int pairs(bf_store *s, int64_t sweep_id, const comparison *c,
                 double *r, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SEQ_PAIRS);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, c->variant);
    sqlite3_bind_int64(st, 3, c->baseline);
    sqlite3_bind_int(st, 4, c->depth);
    sqlite3_bind_int(st, 5, c->released);
    int rc, n = 0, unended = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        unended |= !sqlite3_column_int(st, 0);
        double lv = sqlite3_column_double(st, 1);
        double lb = sqlite3_column_double(st, 2);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL &&
            sqlite3_column_type(st, 2) != SQLITE_NULL && lv > 0 && lb > 0 &&
            isfinite(lv) && isfinite(lb) && n < c->released)
            r[n++] = log(lv / lb);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return store__fail(s, err, "reading the seed pairs of a comparison");
    return unended ? -2 : n;
}

/* x, or NULL (an unbounded end, a skewness not defined yet). */
static void bind_finite(sqlite3_stmt *st, int col, double x)
{
    if (isfinite(x))
        sqlite3_bind_double(st, col, x);
}

/* Stores c's state after its n pairs r; the comparison's seeds move on.
 * 1: one more pair released (c->released counts it), 0: c ended, -1. */
static int decide(bf_store *s, int64_t sweep_id, comparison *c,
                  const double *r, int n, int64_t now_ms, bf_error *err)
{
    double low, high;
    bf_confseq_state state = bf_confseq_decide(c->rule, r, n, c->min,
                                               c->max, c->margin, c->alpha,
                                               &low, &high);
    if (state == BF_CONFSEQ_RUNNING && c->released >= c->max)
        state = BF_CONFSEQ_UNDECIDED;   /* pairs lost to failed jobs */
    int released = c->released + (state == BF_CONFSEQ_RUNNING);
    sqlite3_stmt *st = store__stmt(s, ST_SEQ_UPDATE);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, c->variant);
    sqlite3_bind_text(st, 3, bf_confseq_state_name(state), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, n);
    bind_finite(st, 5, low);
    bind_finite(st, 6, high);
    sqlite3_bind_int(st, 7, state == BF_CONFSEQ_RUNNING ? released
                                                         : c->released);
    sqlite3_bind_int64(st, 8, now_ms);
    bind_finite(st, 9, bf_confseq_skewness(r, n));
    if (store__exec(s, st, err) < 0)
        return -1;
    if (state == BF_CONFSEQ_RUNNING) {
        st = store__stmt(s, ST_SEQ_RELEASE);
        sqlite3_bind_int64(st, 1, sweep_id);
        sqlite3_bind_int64(st, 2, c->variant);
        sqlite3_bind_int64(st, 3, c->baseline);
        sqlite3_bind_int(st, 4, released);
        c->released = released;
        return store__exec(s, st, err) < 0 ? -1 : 1;
    }
    int64_t cells[2] = {c->variant, c->baseline};
    for (int i = 0; i < 2; i++) {
        st = store__stmt(s, ST_SEQ_DROP);
        sqlite3_bind_int64(st, 1, sweep_id);
        sqlite3_bind_int64(st, 2, cells[i]);
        sqlite3_bind_int64(st, 3, now_ms);
        if (store__exec(s, st, err) < 0)
            return -1;
    }
    return store__refresh_sweep(s, sweep_id, err) < 0 ? -1 : 0;
}

/* Looks at c while every pair it released has ended.  A pair released
 * already ended (its jobs failed with their source while held) is lost
 * at once and the next released in its place: no later job end would
 * look at it again. */
static int look(bf_store *s, int64_t sweep_id, comparison *c, int64_t now_ms,
                bf_error *err)
{
    double *r = bf_xmalloc((size_t)(c->max > 0 ? c->max : 1) * sizeof *r);
    int k = 0, moved = 1;
    while (moved == 1 && (k = pairs(s, sweep_id, c, r, err)) >= 0)
        moved = decide(s, sweep_id, c, r, k, now_ms, err);
    free(r);
    return moved < 0 || k == -1 ? -1 : 0;
}

int store__seqs_job_ended(bf_store *s, int64_t job_id, int64_t now_ms,
                          bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SEQ_JOB);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    int64_t sweep_id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    int64_t cell = rc == SQLITE_ROW ? sqlite3_column_int64(st, 1) : 0;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? 0
                                 : store__fail(s, err, "looking up a job's cell");
    comparison *c;
    int n;
    if (running_of(s, sweep_id, cell, &c, &n, err) < 0)
        return -1;
    int result = 0;
    for (int i = 0; i < n && result == 0; i++)
        result = look(s, sweep_id, &c[i], now_ms, err);
    free(c);
    return result;
}

int store__seqs_sweep_cancelled(bf_store *s, int64_t sweep_id, int64_t now_ms,
                                bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SEQ_CANCEL);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, now_ms);
    return store__exec(s, st, err);
}
