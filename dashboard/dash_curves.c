/* dash_curves: a job's metrics, evaluations and frequencies, bucketed by
 * step as the rows stream by in their key's order (a GROUP BY on step / b
 * would sort them first), so that a job of any length costs one range read
 * of its rows and a few hundred points. */
#include "dash_curves.h"

#include "alloc.h"
#include "db.h"
#include "records.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Finite REALs only: NaN is stored as NULL, which no comparison matches,
 * and infinities lie outside this range (common/records.h). */
#define FINITE(col) col " BETWEEN -1.7976931348623157e308" \
                        " AND 1.7976931348623157e308"

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

/* One bucket of a metric being summed up. */
typedef struct metric_bucket {
    char key[32];
    int64_t index, step;
    double sum, min, max;
    int n;
} metric_bucket;

static void emit_metric(json_t *out, const metric_bucket *m)
{
    json_t *series = json_object_get(out, m->key);
    if (!series) {
        series = json_object();
        json_object_set_new(out, m->key, series);
    }
    push(series, "step", json_integer(m->step));
    push(series, "mean", json_real(m->sum / m->n));
    push(series, "min", json_real(m->min));
    push(series, "max", json_real(m->max));
}

/* {"loss": {"step": [...], "mean": [...], "min": [...], "max": [...]}, ...}
 * for the metrics of common/records.h: the rows come in key order (key,
 * step), so each bucket is summed up as they stream by, with no sort. */
static json_t *metrics(sqlite3 *db, const json_t *table, int64_t job,
                       int64_t since, int64_t b, int64_t *last)
{
    sqlite3_stmt *st = prepare(db,
        "SELECT key, step, value FROM metrics"
        " WHERE job_id = ?1 AND step >= ?2"
        "   AND key IN (SELECT json_extract(value, '$.key')"
        "                FROM json_each(?4))"
        "   AND " FINITE("value") " ORDER BY key, step", job, since, b);
    if (!st)
        return NULL;
    char *keys = json_dumps(table, JSON_COMPACT);
    sqlite3_bind_text(st, 4, keys, -1, free);
    json_t *out = json_object();
    metric_bucket m = { .n = 0 };
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        int64_t step = sqlite3_column_int64(st, 1);
        double v = sqlite3_column_double(st, 2);
        if (m.n && (step / b != m.index || strcmp(key, m.key) != 0)) {
            emit_metric(out, &m);
            m.n = 0;
        }
        if (m.n == 0) {
            m = (metric_bucket){ .index = step / b, .min = v, .max = v };
            snprintf(m.key, sizeof m.key, "%s", key);
        }
        m.step = step;
        m.sum += v;
        m.min = v < m.min ? v : m.min;
        m.max = v > m.max ? v : m.max;
        m.n++;
        *last = step > *last ? step : *last;
    }
    if (m.n)
        emit_metric(out, &m);
    if (finish(db, st, rc)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* [{"depth": D, "step": [...], "loss": [...], "accuracy": [...]}, ...]:
 * each bucket's newest evaluation.  The rows come in (depth, step) order
 * (evals_by_depth); a row is kept when the next one starts another bucket. */
static json_t *evals(sqlite3 *db, int64_t job, int64_t since, int64_t b,
                     int64_t *last)
{
    sqlite3_stmt *st = prepare(db,
        "SELECT depth, step, loss, accuracy FROM evals"
        " WHERE job_id = ?1 AND step >= ?2 ORDER BY depth, step", job, since, b);
    if (!st)
        return NULL;
    json_t *out = json_array(), *cur = NULL, *loss = NULL, *accuracy = NULL;
    int64_t depth = -1, step = -1;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t d = sqlite3_column_int64(st, 0), s = sqlite3_column_int64(st, 1);
        if (cur && (d != depth || s / b != step / b)) {
            push(cur, "step", json_integer(step));
            push(cur, "loss", loss);
            push(cur, "accuracy", accuracy);
            loss = accuracy = NULL;
        }
        if (d != depth) {
            cur = json_pack("{s:I}", "depth", (json_int_t)d);
            json_array_append_new(out, cur);
        }
        json_decref(loss);
        json_decref(accuracy);
        depth = d;
        step = s;
        loss = column_number(st, 2);
        accuracy = column_number(st, 3);
        *last = s > *last ? s : *last;
    }
    if (cur) {
        push(cur, "step", json_integer(step));
        push(cur, "loss", loss);
        push(cur, "accuracy", accuracy);
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

static int same_series(const freq_row *a, const freq_row *b)
{
    return a->layer == b->layer && a->head == b->head && a->pair == b->pair;
}

/* Reads (layer, head, pair, step, omega) rows in key order, keeping of
 * each series' bucket of b steps its newest row (b = 0: every row), as
 * they stream by: no sort. */
static int read_freq_rows(sqlite3 *db, sqlite3_stmt *st, int64_t b,
                          freq_rows *out)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        freq_row r = { sqlite3_column_int(st, 0), sqlite3_column_int(st, 1),
                       sqlite3_column_int(st, 2), sqlite3_column_int64(st, 3),
                       sqlite3_column_type(st, 4) == SQLITE_FLOAT
                           ? sqlite3_column_double(st, 4) : NAN };
        freq_row *prev = out->n ? &out->r[out->n - 1] : NULL;
        if (b && prev && same_series(prev, &r) && prev->step / b == r.step / b) {
            *prev = r;          /* a newer row of the same bucket */
            continue;
        }
        if (out->n == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 256;
            out->r = bf_xrealloc(out->r, out->cap * sizeof *out->r);
        }
        out->r[out->n++] = r;
    }
    return finish(db, st, rc);
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
    sqlite3_stmt *st = first && read_freq_rows(db, first, 0, &initial) == 0
        ? prepare(db, "SELECT layer, head, pair, step, omega FROM frequencies"
                      " WHERE job_id = ?1 AND step >= ?2"
                      " ORDER BY layer, head, pair, step", job, since, b)
        : NULL;
    json_t *out = NULL;
    if (st && read_freq_rows(db, st, b, &rows) == 0) {
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
    json_t *keys = bf_metrics_json();
    json_t *m = metrics(db, keys, job_id, since, bucket, &last);
    json_t *e = m ? evals(db, job_id, since, bucket, &last) : NULL;
    json_t *f = e ? frequencies(db, job_id, since, bucket, &last) : NULL;
    if (!f) {
        json_decref(keys);
        json_decref(m);
        json_decref(e);
        return NULL;
    }
    int64_t next = last < 0 ? since : last / bucket * bucket;
    return json_pack("{s:I, s:I, s:i, s:I, s:I, s:I, s:o, s:o, s:o, s:o}",
                     "job_id", (json_int_t)job_id, "steps", (json_int_t)steps,
                     "width", width, "bucket", (json_int_t)bucket,
                     "since", (json_int_t)since, "next_since", (json_int_t)next,
                     "metric_keys", keys, "metrics", m, "evals", e,
                     "frequencies", f);
}
