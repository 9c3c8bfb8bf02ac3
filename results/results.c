/* results: per-job rows that show what varied and why a job failed. */
#include "results.h"

#include "alloc.h"
#include "sweep_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "1h02m", "3m05s", "12.3s" between two times in ms, or null. */
static json_t *duration(const json_t *from_ms, const json_t *to_ms)
{
    if (!json_is_integer(from_ms) || !json_is_integer(to_ms))
        return json_null();
    char buf[32];
    bf_format_duration((double)(json_integer_value(to_ms)
                                - json_integer_value(from_ms)) / 1000.0,
                       buf, sizeof buf);
    return json_string(buf);
}

/* What a results row shows, in order: the job (and its stage, in a sweep
 * with stages), then the varying config fields, then its outcome. */
static const char *const before[] = { "sweep_id", "job_id", "stage", "task",
                                      "rope", "depth", "seed", NULL };
static const char *const after[] = {
    "status", "train_loss", "eval_step", "eval_loss", "eval_accuracy",
    "ood_depth", "ood_loss", "ood_accuracy", NULL };

/* The row a table or CSV shows of a job_results row: the job, the
 * varying config fields, its outcome, readable times and its error; no
 * config blob.  New reference. */
static json_t *results_row(const bf_sweep_view *v, const json_t *row)
{
    int stages = v->n_varying > 0 && strcmp(v->varying[0], "stage") == 0;
    json_t *out = json_object();
    for (int k = 0; before[k]; k++)
        if (stages || strcmp(before[k], "stage") != 0)
            json_object_set(out, before[k], json_object_get(row, before[k]));
    for (int k = 0; k < v->n_varying; k++)
        if (!json_object_get(out, v->varying[k]))
            json_object_set(out, v->varying[k],
                            bf_sweep_view_row_value(row, v->varying[k]));
    for (int k = 0; after[k]; k++)
        json_object_set(out, after[k], json_object_get(row, after[k]));
    json_t *started = json_object_get(row, "started_ms");
    json_object_set_new(out, "started", bf_format_time_ms(started));
    json_object_set_new(out, "took", duration(started, json_object_get(
                                                  row, "finished_ms")));
    json_object_set(out, "error", json_object_get(row, "error"));
    return out;
}

json_t *bf_results_rows(const bf_sweep_view *v, size_t max_rows)
{
    json_t *rows = json_array();
    for (size_t i = 0; i < v->jobs.n_rows && i < max_rows; i++) {
        json_t *row = bf_row_store_row(&v->jobs, i);
        json_array_append_new(rows, results_row(v, row));
        json_decref(row);
    }
    return rows;
}

/* The sweep's rows as the printer asks for them, read from the source
 * anew at each of its passes (a table or CSV makes every row twice, for
 * the widths and for the text): one row held at a time, however many
 * jobs the sweep has. */
typedef struct listing {
    const bf_sweep_view *v;
    bf_source *src;
    bf_source_cursor c;
    int whole;                  /* JSON: the rows as read */
    int failed;
} listing;

static json_t *listed_row(void *ctx, size_t i)
{
    listing *l = ctx;
    if (i == 0) {
        l->failed |= bf_source_cursor_close(&l->c);
        bf_source_cursor_open(&l->c, l->src, "job_results", l->v->sweep_id);
    }
    json_t *row = bf_sweep_view_next(l->v, &l->c);
    if (!row)       /* ended early: the failure shows at close */
        return json_object();
    return l->whole ? json_incref(row) : results_row(l->v, row);
}

int bf_results_print(bf_source *src, int64_t sweep_id, const char *where,
                     bf_row_format fmt)
{
    bf_sweep_view v;
    listing l = { .v = &v, .src = src, .whole = fmt == BF_FORMAT_JSON };
    int failed = bf_sweep_view_scan(&v, src, sweep_id, NULL, where);
    if (!failed) {
        bf_format_print_each(stdout, v.n_jobs, listed_row, &l, NULL, fmt);
        failed = bf_source_cursor_close(&l.c) || l.failed;
    }
    bf_sweep_view_clear(&v);
    return failed ? 1 : 0;
}

int bf_results_check_failed(bf_source *src, int64_t sweep_id)
{
    bf_sweep_view v;
    if (bf_sweep_view_scan(&v, src, sweep_id, NULL, NULL)
        || bf_sweep_view_hold(&v, src,
                              &(bf_sweep_hold){ .status = "failed" })) {
        bf_sweep_view_clear(&v);
        return 1;
    }
    int column = bf_row_store_column(&v.jobs, "error");
    for (size_t i = 0; i < v.jobs.n_rows; i++) {
        if (i == 0)
            fprintf(stderr, "\nfailed jobs of sweep %lld:\n",
                    (long long)sweep_id);
        char *label = bf_sweep_view_label(&v, v.job_group[i]);
        const char *error = json_string_value(bf_row_store_at(&v.jobs, i,
                                                              column));
        fprintf(stderr, "  job %lld (%s seed=%lld): %s\n",
                (long long)json_integer_value(bf_row_store_get(&v.jobs, i,
                                                               "job_id")),
                label,
                (long long)json_integer_value(bf_row_store_get(&v.jobs, i,
                                                               "seed")),
                error ? error : "(no error recorded)");
        free(label);
    }
    size_t n_failed = v.jobs.n_rows;
    if (n_failed)
        fprintf(stderr, "bifocal: %zu of %zu job(s) of sweep %lld failed\n",
                n_failed, v.n_jobs, (long long)sweep_id);
    bf_sweep_view_clear(&v);
    return n_failed > 0;
}
