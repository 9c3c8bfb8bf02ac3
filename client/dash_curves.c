/* dash_curves: a job's metrics, evaluations and frequencies, bucketed by
 * step in SQL (GROUP BY step / b over the tables' keys), so that a job of
 * any length costs one range read of its rows and a few hundred points. */
#include "dash_curves.h"

#include "alloc.h"
#include "db.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Finite REALs only: NaN is stored as the text 'nan', which compares above
 * every number, and infinities lie outside this range. */
#define FINITE(col) col " BETWEEN -1.7976931348623157e308" \
                        " AND 1.7976931348623157e308"

static const char *const metric_keys[] = { "loss", "lr", "grad_norm",
                                           "tokens_per_s" };

/* sql with ?1 the job, ?2 the first step, ?3 the bucket size (a statement
 * without ?2 or ?3 ignores them: binding a missing parameter is a no-op). */
static sqlite3_stmt *prepare(sqlite3 *db, const char *sql, int64_t job,
                             int64_t since, int64_t bucket)
{
    sqlite3_stmt *st = bf_db_prepare(db, sql);
    if (!st)
        return NULL;
    sqlite3_bind_int64(st, 1, job);
    sqlite3_bind_int64(st, 2, since);
    sqlite3_bind_int64(st, 3, bucket);
    return st;
}

static json_t *column_number(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) != SQLITE_INTEGER
        && sqlite3_column_type(st, i) != SQLITE_FLOAT)
        return json_null();
    double x = sqlite3_column_double(st, i);
    return isfinite(x) ? json_real(x) : json_null();
}

/* Appends value to the array under key of obj (made if new). */
static void push(json_t *obj, const char *key, json_t *value)
{
    json_t *a = json_object_get(obj, key);
    if (!a) {
        a = json_array();
        json_object_set_new(obj, key, a);
    }
    json_array_append_new(a, value);
}

static int finish(sqlite3 *db, sqlite3_stmt *st, int rc)
{
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return 0;
    fprintf(stderr, "bifocal dashboard: %s\n", sqlite3_errmsg(db));
    return -1;
}

/* {"loss": {"step": [...], "mean": [...], "min": [...], "max": [...]}, ...} */
static json_t *metrics(sqlite3 *db, int64_t job, int64_t since, int64_t b,
                       int64_t *last)
{
    sqlite3_stmt *st = prepare(db,
        "SELECT key, max(step), avg(value), min(value), max(value)"
        "  FROM metrics"
        " WHERE job_id = ?1 AND key IN (?4, ?5, ?6, ?7) AND step >= ?2"
        "   AND " FINITE("value")
        " GROUP BY key, step / ?3 ORDER BY key, step / ?3", job, since, b);
    if (!st)
        return NULL;
    for (int i = 0; i < 4; i++)
        sqlite3_bind_text(st, 4 + i, metric_keys[i], -1, SQLITE_STATIC);
    json_t *out = json_object();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        json_t *series = json_object_get(out, key);
        if (!series) {
            series = json_object();
            json_object_set_new(out, key, series);
        }
        int64_t step = sqlite3_column_int64(st, 1);
        *last = step > *last ? step : *last;
        push(series, "step", json_integer(step));
        push(series, "mean", column_number(st, 2));
        push(series, "min", column_number(st, 3));
        push(series, "max", column_number(st, 4));
    }
    if (finish(db, st, rc)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* [{"depth": D, "step": [...], "loss": [...], "accuracy": [...]}, ...];
 * loss and accuracy are those of the bucket's newest evaluation (SQLite
 * takes bare columns from the row of max()). */
static json_t *evals(sqlite3 *db, int64_t job, int64_t since, int64_t b,
                     int64_t *last)
{
    sqlite3_stmt *st = prepare(db,
        "SELECT depth, max(step), loss, accuracy FROM evals"
        " WHERE job_id = ?1 AND step >= ?2"
        " GROUP BY depth, step / ?3 ORDER BY depth, step / ?3", job, since, b);
    if (!st)
        return NULL;
    json_t *out = json_array(), *cur = NULL;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_int_t depth = sqlite3_column_int64(st, 0);
        if (!cur || json_integer_value(json_object_get(cur, "depth")) != depth) {
            cur = json_pack("{s:I}", "depth", depth);
            json_array_append_new(out, cur);
        }
        int64_t step = sqlite3_column_int64(st, 1);
        *last = step > *last ? step : *last;
        push(cur, "step", json_integer(step));
        push(cur, "loss", column_number(st, 2));
        push(cur, "accuracy", column_number(st, 3));
    }
    if (finish(db, st, rc)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- frequencies ---------------------------------------------------------- */

typedef struct freq_row {
    int layer, head, pair;
    int64_t step;
    double omega;
} freq_row;

typedef struct freq_rows {
    freq_row *r;
    size_t n, cap;
} freq_rows;

static int read_freq_rows(sqlite3 *db, sqlite3_stmt *st, freq_rows *out)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (out->n == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 256;
            out->r = bf_xrealloc(out->r, out->cap * sizeof *out->r);
        }
        out->r[out->n++] = (freq_row){
            sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
            sqlite3_column_int(st, 2), sqlite3_column_int64(st, 3),
            sqlite3_column_type(st, 4) == SQLITE_FLOAT
                ? sqlite3_column_double(st, 4) : NAN };
    }
    return finish(db, st, rc);
}

static int same_series(const freq_row *a, const freq_row *b)
{
    return a->layer == b->layer && a->head == b->head && a->pair == b->pair;
}

/* The first recorded omega of the series of r (initial rows come in the
 * same order as the rows asked about, so the search resumes at *at). */
static double initial_of(const freq_rows *initial, size_t *at, const freq_row *r)
{
    while (*at < initial->n && !same_series(&initial->r[*at], r)) {
        const freq_row *i = &initial->r[*at];
        if (i->layer > r->layer || (i->layer == r->layer && (i->head > r->head
            || (i->head == r->head && i->pair > r->pair))))
            return NAN;
        (*at)++;
    }
    return *at < initial->n ? initial->r[*at].omega : NAN;
}

static int by_step(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One head's rows rows[0..n): {layer, head, step: [...], ratio: [[pair 0
 * over steps], ...]}, omega over its first recorded value. */
static json_t *head_json(const freq_row *rows, size_t n,
                         const freq_rows *initial, size_t *at)
{
    int64_t *steps = bf_xcalloc(n + 1, sizeof *steps);
    int pairs = 0;
    for (size_t i = 0; i < n; i++) {
        steps[i] = rows[i].step;
        pairs = rows[i].pair + 1 > pairs ? rows[i].pair + 1 : pairs;
    }
    qsort(steps, n, sizeof *steps, by_step);
    size_t n_steps = 0;
    for (size_t i = 0; i < n; i++)
        if (n_steps == 0 || steps[n_steps - 1] != steps[i])
            steps[n_steps++] = steps[i];
    json_t *step = json_array(), *ratio = json_array();
    for (size_t k = 0; k < n_steps; k++)
        json_array_append_new(step, json_integer(steps[k]));
    for (int p = 0; p < pairs; p++) {
        json_t *a = json_array();
        for (size_t k = 0; k < n_steps; k++)
            json_array_append_new(a, json_null());
        json_array_append_new(ratio, a);
    }
    for (size_t i = 0; i < n; i++) {
        int64_t *k = bsearch(&rows[i].step, steps, n_steps, sizeof *steps,
                             by_step);
        double r = rows[i].omega / initial_of(initial, at, &rows[i]);
        if (k && isfinite(r))
            json_array_set_new(json_array_get(ratio, (size_t)rows[i].pair),
                               (size_t)(k - steps), json_real(r));
    }
    free(steps);
    return json_pack("{s:i, s:i, s:o, s:o}", "layer", rows[0].layer, "head",
                     rows[0].head, "step", step, "ratio", ratio);
}

/* [{layer, head, step, ratio}, ...]: every head with learned frequencies
 * (workers record learnable heads only). */
static json_t *frequencies(sqlite3 *db, int64_t job, int64_t since, int64_t b,
                           int64_t *last)
{
    freq_rows initial = { 0 }, rows = { 0 };
    sqlite3_stmt *first = prepare(db,
        "SELECT layer, head, pair, min(step), omega FROM frequencies"
        " WHERE job_id = ?1"
        " GROUP BY layer, head, pair ORDER BY layer, head, pair", job, since, b);
    sqlite3_stmt *st = first && read_freq_rows(db, first, &initial) == 0
        ? prepare(db, "SELECT layer, head, pair, max(step), omega"
                      "  FROM frequencies WHERE job_id = ?1 AND step >= ?2"
                      " GROUP BY layer, head, pair, step / ?3"
                      " ORDER BY layer, head, pair, step / ?3", job, since, b)
        : NULL;
    json_t *out = NULL;
    if (st && read_freq_rows(db, st, &rows) == 0) {
        out = json_array();
        size_t at = 0;
        for (size_t i = 0, end; i < rows.n; i = end) {
            for (end = i; end < rows.n && rows.r[end].layer == rows.r[i].layer
                          && rows.r[end].head == rows.r[i].head; end++)
                *last = rows.r[end].step > *last ? rows.r[end].step : *last;
            json_array_append_new(out, head_json(rows.r + i, end - i, &initial,
                                                 &at));
        }
    }
    free(initial.r);
    free(rows.r);
    return out;
}

/* ---- the reply ------------------------------------------------------------ */

/* The job's configured steps; 0 when there is no such job. */
static int64_t job_steps(sqlite3 *db, int64_t job)
{
    sqlite3_stmt *st = bf_db_prepare(db,
        "SELECT json_extract(config, '$.steps') FROM jobs WHERE job_id = ?1");
    if (!st)
        return 0;
    sqlite3_bind_int64(st, 1, job);
    int64_t steps = sqlite3_step(st) == SQLITE_ROW
                    ? (sqlite3_column_int64(st, 0) > 0
                       ? sqlite3_column_int64(st, 0) : 1) : 0;
    sqlite3_finalize(st);
    return steps;
}

json_t *bf_dash_curves(sqlite3 *db, int64_t job_id, int width, int64_t since)
{
    int64_t steps = job_steps(db, job_id);
    if (steps == 0)
        return NULL;
    int64_t bucket = (steps + width - 1) / width;
    since = since / bucket * bucket;
    int64_t last = -1;
    json_t *m = metrics(db, job_id, since, bucket, &last);
    json_t *e = m ? evals(db, job_id, since, bucket, &last) : NULL;
    json_t *f = e ? frequencies(db, job_id, since, bucket, &last) : NULL;
    if (!f) {
        json_decref(m);
        json_decref(e);
        return NULL;
    }
    int64_t next = last < 0 ? since : last / bucket * bucket;
    return json_pack("{s:I, s:I, s:i, s:I, s:I, s:I, s:o, s:o, s:o}",
                     "job_id", (json_int_t)job_id, "steps", (json_int_t)steps,
                     "width", width, "bucket", (json_int_t)bucket,
                     "since", (json_int_t)since, "next_since", (json_int_t)next,
                     "metrics", m, "evals", e, "frequencies", f);
}
