/* progress: observed step rates and ETAs of running jobs and sweeps. */
#include "progress.h"

#include "alloc.h"
#include "records.h"

#include <math.h>
#include <stdlib.h>

void bf_progress_init(bf_progress *p)
{
    *p = (bf_progress){ 0 };
}

void bf_progress_clear(bf_progress *p)
{
    free(p->seen);
    *p = (bf_progress){ 0 };
}

double bf_progress_number(const json_t *row, const char *key, double fallback)
{
    const json_t *v = json_object_get(row, key);
    return json_is_number(v) ? json_number_value(v) : fallback;
}

/* What is known about the job of row, found or made; kept only while the
 * job runs (forget_stopped drops the rest). */
static bf_progress_seen *seen_of(bf_progress *p, const json_t *row,
                                 int64_t now_ms, double step)
{
    int64_t job = (int64_t)bf_progress_number(row, "job_id", 0);
    int64_t attempt = (int64_t)bf_progress_number(row, "attempt_id", 0);
    for (int i = 0; i < p->n; i++) {
        bf_progress_seen *s = &p->seen[i];
        if (s->job_id != job)
            continue;
        /* A new attempt (or a step that went back): start over. */
        if (s->attempt_id != attempt || step < s->step)
            *s = (bf_progress_seen){ job, attempt, step, now_ms };
        return s;
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        p->seen = bf_xrealloc(p->seen, (size_t)p->cap * sizeof *p->seen);
    }
    p->seen[p->n] = (bf_progress_seen){ job, attempt, step, now_ms };
    p->job_steps += bf_progress_number(row, "steps", 0);
    p->n_jobs_seen++;
    return &p->seen[p->n++];
}

static int in_rows(const json_t *live, int64_t job)
{
    size_t i;
    json_t *row;
    json_array_foreach(live, i, row)
        if ((int64_t)bf_progress_number(row, "job_id", 0) == job)
            return 1;
    return 0;
}

static void forget_stopped(bf_progress *p, const json_t *live)
{
    int kept = 0;
    for (int i = 0; i < p->n; i++)
        if (in_rows(live, p->seen[i].job_id))
            p->seen[kept++] = p->seen[i];
    p->n = kept;
}

/* Steps per second from the worker's own throughput figure (the live_jobs
 * column named after its metric). */
static double reported_rate(const json_t *row)
{
    const json_t *config = json_object_get(row, "config");
    double tokens = bf_progress_number(
        row, bf_metrics[BF_METRIC_TOKENS_PER_S].key, NAN);
    double per_step = bf_progress_number(config, "batch_size", NAN)
                      * bf_progress_number(config, "seq_len", NAN);
    return tokens > 0 && per_step > 0 ? tokens / per_step : NAN;
}

static json_t *number_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

void bf_progress_update(bf_progress *p, json_t *live, int64_t now_ms)
{
    forget_stopped(p, live);
    size_t i;
    json_t *row;
    json_array_foreach(live, i, row) {
        double step = bf_progress_number(row, "step", 0);
        double steps = bf_progress_number(row, "steps", NAN);
        const bf_progress_seen *s = seen_of(p, row, now_ms, step);
        double window_s = (double)(now_ms - s->ms) / 1000.0;
        double rate = window_s * 1000.0 >= BF_PROGRESS_MIN_WINDOW_MS
                      && step > s->step ? (step - s->step) / window_s
                                        : reported_rate(row);
        double left = steps - step;
        double eta = left <= 0 ? 0 : rate > 0 ? left / rate : NAN;
        json_object_set_new(row, "rate", number_or_null(rate));
        json_object_set_new(row, "eta_s", number_or_null(eta));
    }
}

double bf_progress_sweep_eta(const json_t *live, long long n_queued,
                             double queued_steps)
{
    double rate = 0, left = 0, steps = 0;
    size_t i, n = json_array_size(live);
    json_t *row;
    json_array_foreach(live, i, row) {
        double job_steps = bf_progress_number(row, "steps", 0);
        double step = bf_progress_number(row, "step", 0);
        double r = bf_progress_number(row, "rate", NAN);
        steps += job_steps;
        left += job_steps > step ? job_steps - step : 0;
        rate += r > 0 ? r : 0;
    }
    if (n == 0 || !(rate > 0))
        return -1;
    left += queued_steps >= 0 ? queued_steps
                              : (double)n_queued * steps / (double)n;
    return left / rate;
}

static double count(const json_t *status, const char *key)
{
    return bf_progress_number(status, key, 0);
}

double bf_progress_sweep_eta_now(bf_progress *p, const json_t *status,
                                 const json_t *live, int64_t now_ms)
{
    double eta = bf_progress_sweep_eta_seen(p, status, live, now_ms);
    /* a waiting job (its source stage still training) runs later too */
    return eta >= 0 ? eta
           : bf_progress_sweep_eta(live, (long long)(count(status, "queued")
                                                     + count(status, "waiting")),
                                   -1);
}

double bf_progress_sweep_eta_seen(bf_progress *p, const json_t *status,
                                  const json_t *live, int64_t now_ms)
{
    if (p->n_jobs_seen == 0)
        return -1;
    double mean = p->job_steps / (double)p->n_jobs_seen;
    double done = mean * (count(status, "succeeded") + count(status, "failed")
                          + count(status, "cancelled")
                          + count(status, "pruned"));
    double left = mean * (count(status, "queued") + count(status, "waiting"));
    size_t i;
    json_t *row;
    json_array_foreach(live, i, row) {
        double step = bf_progress_number(row, "step", 0),
               steps = bf_progress_number(row, "steps", 0);
        done += step;
        left += steps > step ? steps - step : 0;
    }
    /* the first sight, or a count that went back (a job retried) */
    if (!p->sweep_seen || done < p->first_done) {
        p->sweep_seen = 1;
        p->first_ms = now_ms;
        p->first_done = done;
    }
    double window_s = (double)(now_ms - p->first_ms) / 1000.0;
    if (window_s * 1000.0 < BF_PROGRESS_MIN_WINDOW_MS || done <= p->first_done)
        return -1;
    return left / ((done - p->first_done) / window_s);
}
