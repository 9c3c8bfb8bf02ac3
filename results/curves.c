/* curves: bucketed training-loss and frequency curves per group. */
#include "curves.h"

#include "alloc.h"
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const bf_curves_job_fields[] = { "steps", "n_layers",
                                             "n_heads", "d_model", NULL };

static double config_number(const bf_sweep_view *v, int job, const char *field)
{
    const json_t *x = bf_sweep_view_value(v, (size_t)job, field);
    return json_is_number(x) ? json_number_value(x) : 0.0;
}

/* The bucket of step in a run of `steps` steps with n equal buckets. */
static int bucket_of(double step, double steps, int n)
{
    int b = steps > 0 ? (int)(step * n / steps) : 0;
    return b < 0 ? 0 : b >= n ? n - 1 : b;
}

static json_t *real_array(const double *x, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, isfinite(x[i]) ? json_real(x[i]) : json_null());
    return a;
}

/* ---- training loss -------------------------------------------------------- */

enum { NB = BF_CURVE_BUCKETS + 1 };     /* the last bucket: the last point */

/* A group of at most this many jobs has its jobs' curves, not a band. */
enum { SEED_LINES = 2 };

/* The train_loss view gives its rows by job, each job's by step
 * (common/result_views.c walks the sweep's jobs by id), so one job's
 * buckets are filled at a time and then folded into its group's: memory
 * per bucket of a group with a curve (a pointer for one without: a
 * search's pending trials), not per job. */
typedef struct group_bucket {
    bf_stats_running log_loss;  /* over jobs: log of the job's bucket mean */
    int jobs;                   /* jobs with a point in the bucket */
    double step;                /* the latest step of any of them */
    double seed[SEED_LINES];    /* the group's first jobs' bucket means (0:
                                   none): drawn where a band of so few
                                   seeds would mean nothing */
} group_bucket;

typedef struct loss_scan {
    const bf_sweep_view *v;
    group_bucket **groups;              /* [group]: its NB buckets, made
                                           at its first job with a curve */
    int *group_jobs;                    /* [group]: its jobs with a curve */
    /* the job being read */
    int64_t job_id;
    int row;                            /* in v->jobs; -1: none */
    double steps;                       /* its configured steps */
    double sum[NB], count[NB], step[NB];
    double last_step, last_loss;
} loss_scan;

/* Moves the job's last point out of its bucket into the last bucket, and
 * adds the job's bucket means to its group's. */
static void end_job(loss_scan *s)
{
    if (s->row < 0)
        return;
    if (s->last_step >= 0) {
        int b = bucket_of(s->last_step, s->steps, BF_CURVE_BUCKETS);
        s->sum[b] -= s->last_loss;
        s->count[b] -= 1;
        s->sum[NB - 1] = s->last_loss;
        s->count[NB - 1] = 1;
        s->step[NB - 1] = s->last_step;
    }
    group_bucket **have = &s->groups[s->v->job_group[s->row]];
    if (!*have)
        *have = bf_xcalloc(NB, sizeof **have);
    group_bucket *g = *have;
    int nth = s->group_jobs[s->v->job_group[s->row]]++;
    for (int b = 0; b < NB; b++) {
        if (s->count[b] <= 0)
            continue;
        double mean = s->sum[b] / s->count[b];
        if (mean > 0 && isfinite(mean)) {   /* as bf_stats_summarize_log */
            bf_stats_running_add(&g[b].log_loss, log(mean));
            if (nth < SEED_LINES)
                g[b].seed[nth] = mean;
        }
        g[b].jobs++;
        if (s->step[b] > g[b].step)
            g[b].step = s->step[b];
    }
    s->row = -1;
}

static void start_job(loss_scan *s, int64_t job_id)
{
    s->job_id = job_id;
    s->row = bf_sweep_view_config_row(s->v, job_id);
    s->steps = s->row < 0 ? 0 : config_number(s->v, s->row, "steps");
    memset(s->sum, 0, sizeof s->sum);
    memset(s->count, 0, sizeof s->count);
    memset(s->step, 0, sizeof s->step);
    s->last_step = -1;
}

static void on_loss_row(void *ctx, const double *x)     /* job_id, step, loss */
{
    loss_scan *s = ctx;
    if (s->row < 0 || (int64_t)x[0] != s->job_id) {
        end_job(s);
        start_job(s, (int64_t)x[0]);
    }
    if (s->row < 0 || !isfinite(x[2]))
        return;
    int b = bucket_of(x[1], s->steps, BF_CURVE_BUCKETS);
    s->sum[b] += x[2];
    s->count[b] += 1;
    if (x[1] > s->step[b])
        s->step[b] = x[1];
    if (x[1] >= s->last_step) {
        s->last_step = x[1];
        s->last_loss = x[2];
    }
}

/* The jobs' bucket means of a group of at most SEED_LINES jobs. */
static json_t *seed_lines(const group_bucket *g, int jobs)
{
    json_t *lines = json_array();
    for (int k = 0; k < jobs; k++) {
        json_t *line = json_array();
        for (int b = 0; b < NB; b++)
            if (g[b].jobs > 0)
                json_array_append_new(line, g[b].seed[k] > 0
                                            ? json_real(g[b].seed[k])
                                            : json_null());
        json_array_append_new(lines, line);
    }
    return lines;
}

static json_t *group_loss_curve(const group_bucket *g, int group, int jobs)
{
    json_t *step = json_array(), *mean = json_array(), *low = json_array(),
           *high = json_array(), *n = json_array();
    for (int b = 0; b < NB; b++) {
        if (g[b].jobs == 0)
            continue;
        bf_stats_summary st;
        bf_stats_running_summary(&g[b].log_loss, &st);
        json_array_append_new(step, json_real(g[b].step));
        json_array_append_new(mean, json_real(exp(st.mean)));
        json_array_append_new(low, isfinite(st.ci_low)
                                       ? json_real(exp(st.ci_low)) : json_null());
        json_array_append_new(high, isfinite(st.ci_high)
                                        ? json_real(exp(st.ci_high)) : json_null());
        json_array_append_new(n, json_integer(g[b].jobs));
    }
    json_t *curve = json_pack("{s:i, s:o, s:o, s:o, s:o, s:o}", "group", group,
                              "step", step, "mean", mean, "low", low,
                              "high", high, "n", n);
    if (json_array_size(step) == 0) {
        json_decref(curve);
        return NULL;
    }
    if (jobs <= SEED_LINES)
        json_object_set_new(curve, "seeds", seed_lines(g, jobs));
    return curve;
}

json_t *bf_curves_train_loss(const bf_sweep_view *v, bf_source *src)
{
    loss_scan *s = bf_xcalloc(1, sizeof *s);
    *s = (loss_scan){ .v = v, .row = -1,
                      .groups = bf_xcalloc((size_t)v->n_groups + 1,
                                           sizeof *s->groups),
                      .group_jobs = bf_xcalloc((size_t)v->n_groups + 1,
                                               sizeof *s->group_jobs) };
    static const char *const columns[] = { "job_id", "step", "loss" };
    json_t *curves = NULL;
    if (bf_source_scan(src, "train_loss", v->sweep_id, columns, 3, on_loss_row,
                       s) == 0) {
        end_job(s);
        curves = json_array();
        for (int g = 0; g < v->n_groups; g++) {
            json_t *c = s->groups[g] ? group_loss_curve(s->groups[g], g,
                                                        s->group_jobs[g])
                                     : NULL;
            if (c)
                json_array_append_new(curves, c);
        }
    }
    for (int g = 0; g < v->n_groups; g++)
        free(s->groups[g]);
    free(s->groups);
    free(s->group_jobs);
    free(s);
    return curves;
}

/* ---- frequencies ---------------------------------------------------------- */

enum { FB = BF_FREQ_BUCKETS + 1 };

/* One group's frequencies: dims from its first job's config. */
typedef struct freq_group {
    int layers, heads, pairs;
    double *ratio_sum, *ratio_n, *step;     /* [series][FB] */
    double *first_sum, *last_sum, *ends_n;  /* [series] */
} freq_group;

typedef struct freq_scan {
    const bf_sweep_view *v;
    freq_group *g;
    /* the frequency being read: rows come by (job, layer, head, pair, step) */
    int64_t job;
    int layer, head, pair;
    double first, last;
    int have;
    freq_group *cur_group;
    size_t cur_series;
    double cur_steps;       /* its job's steps */
} freq_scan;

static void end_series(freq_scan *s)
{
    if (!s->have)
        return;
    freq_group *g = s->cur_group;
    g->first_sum[s->cur_series] += s->first;
    g->last_sum[s->cur_series] += s->last;
    g->ends_n[s->cur_series] += 1;
    s->have = 0;
}

static freq_group *group_dims(freq_scan *s, int job)
{
    freq_group *g = &s->g[s->v->job_group[job]];
    if (g->ratio_sum)
        return g;
    g->layers = (int)config_number(s->v, job, "n_layers");
    g->heads = (int)config_number(s->v, job, "n_heads");
    g->pairs = g->heads > 0
                   ? (int)config_number(s->v, job, "d_model") / g->heads / 2 : 0;
    size_t series = (size_t)g->layers * g->heads * g->pairs + 1;
    g->ratio_sum = bf_xcalloc(series * FB, sizeof(double));
    g->ratio_n = bf_xcalloc(series * FB, sizeof(double));
    g->step = bf_xcalloc(series * FB, sizeof(double));
    g->first_sum = bf_xcalloc(series, sizeof(double));
    g->last_sum = bf_xcalloc(series, sizeof(double));
    g->ends_n = bf_xcalloc(series, sizeof(double));
    return g;
}

/* job_id, layer, head, pair, step, omega */
static void on_freq_row(void *ctx, const double *x)
{
    freq_scan *s = ctx;
    int64_t job_id = (int64_t)x[0];
    int layer = (int)x[1], head = (int)x[2], pair = (int)x[3];
    int same = s->have && job_id == s->job && layer == s->layer
               && head == s->head && pair == s->pair;
    if (!same) {
        end_series(s);
        int job = bf_sweep_view_config_row(s->v, job_id);
        if (job < 0)
            return;
        freq_group *g = group_dims(s, job);
        if (layer < 0 || layer >= g->layers || head < 0 || head >= g->heads
            || pair < 0 || pair >= g->pairs || !(x[5] > 0))
            return;
        s->cur_group = g;
        s->cur_series = ((size_t)layer * g->heads + head) * g->pairs + pair;
        s->cur_steps = config_number(s->v, job, "steps");
        s->job = job_id;
        s->layer = layer;
        s->head = head;
        s->pair = pair;
        s->first = x[5];
        s->have = 1;
    }
    s->last = x[5];
    freq_group *g = s->cur_group;
    double steps = s->cur_steps;
    int b = x[4] >= steps ? FB - 1 : bucket_of(x[4], steps, BF_FREQ_BUCKETS);
    size_t at = s->cur_series * FB + (size_t)b;
    g->ratio_sum[at] += x[5] / s->first;
    g->ratio_n[at] += 1;
    if (x[4] > g->step[at])
        g->step[at] = x[4];
}

/* The buckets any series of the group has, as the x of the figure. */
static json_t *freq_group_json(const freq_group *g, int group)
{
    size_t n_series = (size_t)g->layers * g->heads * g->pairs;
    int used[FB];
    double step[FB];
    int n_used = 0;
    for (int b = 0; b < FB; b++) {
        step[b] = 0;
        for (size_t k = 0; k < n_series; k++)
            if (g->ratio_n[k * FB + b] > 0 && g->step[k * FB + b] > step[b])
                step[b] = g->step[k * FB + b];
        int any = 0;
        for (size_t k = 0; k < n_series && !any; k++)
            any = g->ratio_n[k * FB + b] > 0;
        if (any)
            used[n_used++] = b;
    }
    if (n_used == 0)
        return NULL;
    double xs[FB], ys[FB];
    for (int i = 0; i < n_used; i++)
        xs[i] = step[used[i]];
    json_t *series = json_array(), *finals = json_array();
    double *initial = bf_xcalloc((size_t)g->pairs + 1, sizeof *initial);
    double *initial_n = bf_xcalloc((size_t)g->pairs + 1, sizeof *initial_n);
    for (int l = 0; l < g->layers; l++)
        for (int h = 0; h < g->heads; h++) {
            size_t k0 = ((size_t)l * g->heads + h) * g->pairs;
            if (g->ends_n[k0] <= 0)
                continue;       /* not a learnable head */
            double *final = bf_xcalloc((size_t)g->pairs + 1, sizeof *final);
            for (int p = 0; p < g->pairs; p++) {
                size_t k = k0 + (size_t)p;
                for (int i = 0; i < n_used; i++) {
                    size_t at = k * FB + (size_t)used[i];
                    ys[i] = g->ratio_n[at] > 0 ? g->ratio_sum[at] / g->ratio_n[at]
                                               : NAN;
                }
                json_array_append_new(series, json_pack(
                    "{s:i, s:i, s:i, s:o}", "layer", l, "head", h, "pair", p,
                    "ratio", real_array(ys, n_used)));
                final[p] = g->ends_n[k] > 0 ? g->last_sum[k] / g->ends_n[k] : NAN;
                initial[p] += g->first_sum[k];
                initial_n[p] += g->ends_n[k];
            }
            json_array_append_new(finals, json_pack(
                "{s:i, s:i, s:o}", "layer", l, "head", h, "omega",
                real_array(final, g->pairs)));
            free(final);
        }
    json_t *pair = json_array();
    for (int p = 0; p < g->pairs; p++) {
        json_array_append_new(pair, json_integer(p));
        initial[p] = initial_n[p] > 0 ? initial[p] / initial_n[p] : NAN;
    }
    json_t *out = json_pack("{s:i, s:o, s:o, s:{s:o, s:o, s:o}}", "group",
                            group, "step", real_array(xs, n_used), "series",
                            series, "spectrum", "pair", pair, "initial",
                            real_array(initial, g->pairs), "final", finals);
    free(initial);
    free(initial_n);
    return out;
}

json_t *bf_curves_frequencies(const bf_sweep_view *v, bf_source *src)
{
    freq_scan s = { .v = v, .g = bf_xcalloc((size_t)v->n_groups + 1,
                                            sizeof *s.g) };
    static const char *const columns[] = { "job_id", "layer", "head", "pair",
                                           "step", "omega" };
    json_t *out = NULL;
    if (bf_source_scan(src, "frequency_history", v->sweep_id, columns, 6,
                       on_freq_row, &s) == 0) {
        end_series(&s);
        out = json_array();
        for (int g = 0; g < v->n_groups; g++) {
            json_t *fg = s.g[g].ratio_sum ? freq_group_json(&s.g[g], g) : NULL;
            if (fg)
                json_array_append_new(out, fg);
        }
    }
    for (int g = 0; g < v->n_groups; g++) {
        free(s.g[g].ratio_sum);
        free(s.g[g].ratio_n);
        free(s.g[g].step);
        free(s.g[g].first_sum);
        free(s.g[g].last_sum);
        free(s.g[g].ends_n);
    }
    free(s.g);
    return out;
}
