/* compare: seed statistics and comparisons with a baseline group.
 *
 * Per group (jobs that differ only in seed) and eval depth: n, mean, sd and
 * Student-t 95% CI of the final eval loss and exact-match accuracy, and of
 * the final training loss.  Against the baseline group with the same other
 * fields: the difference of means with its 95% CI, paired by seed when both
 * groups hold the same seeds once each, Welch otherwise, and the relative
 * loss change in percent (the difference's interval over the baseline mean,
 * which is taken as exact). */
#include "compare.h"

#include "alloc.h"
#include "format.h"
#include "results.h"
#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The values of one (group, eval depth) cell, one per succeeded job. */
typedef struct cell {
    int group, eval_depth, n, cap;
    int64_t *seed;
    double *loss, *accuracy, *train_loss;
} cell;

typedef struct cells {
    cell *c;
    int n;
} cells;

/* The cell of (group, eval depth), made with room for max_n values. */
static cell *find_cell(cells *cs, int group, int eval_depth, size_t max_n)
{
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].group == group && cs->c[i].eval_depth == eval_depth)
            return &cs->c[i];
    cell *c = &cs->c[cs->n++];
    *c = (cell){ .group = group, .eval_depth = eval_depth, .cap = (int)max_n,
                 .seed = bf_xcalloc(max_n, sizeof *c->seed),
                 .loss = bf_xcalloc(max_n, sizeof *c->loss),
                 .accuracy = bf_xcalloc(max_n, sizeof *c->accuracy),
                 .train_loss = bf_xcalloc(max_n, sizeof *c->train_loss) };
    return c;
}

static void free_cells(cells *cs)
{
    for (int i = 0; i < cs->n; i++) {
        free(cs->c[i].seed);
        free(cs->c[i].loss);
        free(cs->c[i].accuracy);
        free(cs->c[i].train_loss);
    }
    free(cs->c);
}

static int by_group_then_depth(const void *a, const void *b)
{
    const cell *x = a, *y = b;
    if (x->group != y->group)
        return x->group - y->group;
    return x->eval_depth - y->eval_depth;
}

static double number(const json_t *row, const char *key)
{
    const json_t *v = json_object_get(row, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The final training loss of a job (job_results.train_loss). */
static double train_loss_of(const bf_sweep_view *v, int64_t job_id)
{
    int row = bf_sweep_view_row_of(v, job_id);
    return row < 0 ? NAN
                   : number(json_array_get(v->jobs, (size_t)row), "train_loss");
}

static void fill_cells(const bf_sweep_view *v, const json_t *evals, cells *cs)
{
    size_t n_rows = json_array_size(evals), n_jobs = json_array_size(v->jobs);
    size_t *group_size = bf_xcalloc((size_t)v->n_groups + 1, sizeof *group_size);
    for (size_t j = 0; j < n_jobs; j++)
        group_size[v->job_group[j]]++;
    cs->c = bf_xcalloc(n_rows + 1, sizeof *cs->c);
    size_t i;
    json_t *row;
    json_array_foreach(evals, i, row) {
        int64_t job = json_integer_value(json_object_get(row, "job_id"));
        int group = bf_sweep_view_group_of(v, job);
        if (group < 0)
            continue;
        cell *c = find_cell(cs, group,
                            (int)json_integer_value(json_object_get(
                                row, "eval_depth")), group_size[group]);
        if (c->n >= c->cap)     /* one row per job and depth: cannot be */
            continue;
        c->seed[c->n] = json_integer_value(json_object_get(row, "seed"));
        c->loss[c->n] = number(row, "loss");
        c->accuracy[c->n] = number(row, "accuracy");
        c->train_loss[c->n] = train_loss_of(v, job);
        c->n++;
    }
    qsort(cs->c, (size_t)cs->n, sizeof *cs->c, by_group_then_depth);
    free(group_size);
}

/* ---- baseline --------------------------------------------------------- */

/* --baseline FIELD=VALUE[,FIELD=VALUE...]: the baseline of a group is the
 * group whose named fields have those values and whose other grouping
 * fields equal its own.  Several pairs let one baseline serve groups that
 * differ in fields the baseline does not use (e.g. rope=rope,freq_lr_mult=1
 * for spectral groups at two freq_lr_mult values). */
enum { MAX_BASELINE_FIELDS = 8 };

typedef struct baseline {
    int n;                  /* 0: no comparisons */
    const char *field[MAX_BASELINE_FIELDS];   /* owned by the sweep view */
    char *value[MAX_BASELINE_FIELDS];
} baseline;

static void baseline_free(baseline *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->value[i]);
    b->n = 0;
}

static int group_matches(const bf_sweep_view *v, int g, const baseline *b)
{
    const json_t *group = json_array_get(v->groups, (size_t)g);
    for (int i = 0; i < b->n; i++)
        if (!bf_sweep_view_value_is(json_object_get(group, b->field[i]),
                                    b->value[i]))
            return 0;
    return 1;
}

static int any_group_matches(const bf_sweep_view *v, const baseline *b)
{
    for (int g = 0; g < v->n_groups; g++)
        if (group_matches(v, g, b))
            return 1;
    return 0;
}

static const char *grouping_field(const bf_sweep_view *v, const char *name,
                                  size_t len)
{
    for (int i = 0; i < v->n_by; i++)
        if (strlen(v->by[i]) == len && strncmp(v->by[i], name, len) == 0)
            return v->by[i];
    return NULL;
}

/* One FIELD=VALUE of --baseline ARG into b; -1 with a message if bad. */
static int add_pair(const bf_sweep_view *v, const char *arg, const char *pair,
                    size_t len, baseline *b)
{
    const char *eq = memchr(pair, '=', len);
    const char *field = eq ? grouping_field(v, pair, (size_t)(eq - pair)) : NULL;
    if (!field || b->n == MAX_BASELINE_FIELDS) {
        fprintf(stderr, "bifocal: --baseline %s: expected FIELD=VALUE[,...] "
                        "(at most %d) with FIELD one of the grouping fields "
                        "('%.*s' is not)\n", arg, MAX_BASELINE_FIELDS,
                (int)len, pair);
        return -1;
    }
    b->field[b->n] = field;
    b->value[b->n++] = bf_xstrndup(eq + 1, len - (size_t)(eq + 1 - pair));
    return 0;
}

static int parse_baseline(const bf_sweep_view *v, const char *arg, baseline *b)
{
    *b = (baseline){ 0 };
    if (!arg) {     /* default: rope=rope where the sweep groups by rope */
        const char *rope = grouping_field(v, "rope", 4);
        if (rope) {
            b->field[0] = rope;
            b->value[0] = bf_xstrdup("rope");
            b->n = 1;
            if (!any_group_matches(v, b))
                baseline_free(b);
        }
        return 0;
    }
    for (const char *p = arg;; p++) {
        size_t len = strcspn(p, ",");
        if (add_pair(v, arg, p, len, b) < 0) {
            baseline_free(b);
            return -1;
        }
        p += len;
        if (!*p)
            break;
    }
    if (!any_group_matches(v, b)) {
        fprintf(stderr, "bifocal: --baseline %s: no group of sweep %lld has "
                        "%s\n", arg, (long long)v->sweep_id, arg);
        baseline_free(b);
        return -1;
    }
    return 0;
}

static int is_baseline_field(const baseline *b, const char *field)
{
    for (int i = 0; i < b->n; i++)
        if (b->field[i] == field)
            return 1;
    return 0;
}

/* The baseline group of group g: the named fields as the baseline says,
 * every other grouping field as g's.  -1 if there is none; g itself if g
 * is a baseline group. */
static int baseline_of(const bf_sweep_view *v, const baseline *b, int g)
{
    if (!b->n)
        return -1;
    const json_t *mine = json_array_get(v->groups, (size_t)g);
    for (int h = 0; h < v->n_groups; h++) {
        const json_t *other = json_array_get(v->groups, (size_t)h);
        int match = group_matches(v, h, b);
        for (int i = 0; match && i < v->n_by; i++)
            if (!is_baseline_field(b, v->by[i]))
                match = json_equal(json_object_get(mine, v->by[i]),
                                   json_object_get(other, v->by[i]));
        if (match)
            return h;
    }
    return -1;
}

/* ---- rows ------------------------------------------------------------- */

static void set_number(json_t *row, const char *key, double x)
{
    json_object_set_new(row, key, isfinite(x) ? json_real(x) : json_null());
}

/* Accuracy is a fraction: its Student-t interval, which knows no bounds,
 * is clipped to [0, 1] (at n = 2 or 3 it easily reaches past them). */
static void set_summary(json_t *row, const char *prefix, const double *x, int n,
                        int is_fraction)
{
    bf_stats_summary s;
    bf_stats_summarize(x, n, &s);
    if (is_fraction && isfinite(s.ci_low)) {
        s.ci_low = fmax(s.ci_low, 0.0);
        s.ci_high = fmin(s.ci_high, 1.0);
    }
    char key[64];
    const struct { const char *name; double value; } parts[] = {
        { "mean", s.mean }, { "sd", s.sd },
        { "ci_low", s.ci_low }, { "ci_high", s.ci_high } };
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        snprintf(key, sizeof key, "%s_%s", prefix, parts[i].name);
        set_number(row, key, parts[i].value);
    }
}

/* Pairs by seed when both cells hold the same seeds, each once. */
static int same_seeds(const cell *a, const cell *b, int *order)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++) {
        order[i] = -1;
        for (int j = 0; j < b->n; j++)
            if (a->seed[i] == b->seed[j]) {
                if (order[i] >= 0)
                    return 0;
                order[i] = j;
            }
        for (int k = 0; k < i; k++)
            if (order[i] < 0 || order[k] == order[i])
                return 0;
        if (order[i] < 0)
            return 0;
    }
    return 1;
}

static void diff_of(const cell *a, const cell *b, int paired, const int *order,
                    const double *(*values)(const cell *), bf_stats_diff *d)
{
    const double *x = values(a), *y = values(b);
    if (!paired) {
        bf_stats_welch(x, a->n, y, b->n, d);
        return;
    }
    double matched[b->n > 0 ? b->n : 1];
    for (int i = 0; i < a->n; i++)
        matched[i] = y[order[i]];
    bf_stats_paired(x, matched, a->n, d);
}

static const double *loss_of(const cell *c) { return c->loss; }
static const double *accuracy_of(const cell *c) { return c->accuracy; }

static int excludes_zero(const bf_stats_diff *d)
{
    return isfinite(d->ci_low) && (d->ci_low > 0 || d->ci_high < 0);
}

static void set_diff(json_t *row, const char *prefix, const bf_stats_diff *d)
{
    char key[64];
    snprintf(key, sizeof key, "%s_diff", prefix);
    set_number(row, key, d->diff);
    snprintf(key, sizeof key, "%s_diff_ci_low", prefix);
    set_number(row, key, d->ci_low);
    snprintf(key, sizeof key, "%s_diff_ci_high", prefix);
    set_number(row, key, d->ci_high);
    snprintf(key, sizeof key, "%s_diff_excludes_zero", prefix);
    json_object_set_new(row, key, json_boolean(excludes_zero(d)));
}

static const char *judge(const bf_stats_diff *d, const char *higher,
                         const char *lower)
{
    if (!isfinite(d->ci_low))
        return "no interval (one seed per group: run more seeds)";
    if (!excludes_zero(d))
        return "not distinguishable from seed noise";
    return d->diff > 0 ? higher : lower;
}

/* "+12.5%": 3 significant digits, whole numbers from 1000% up (never an
 * exponent). */
static void percent(char *buf, size_t cap, double x)
{
    snprintf(buf, cap, fabs(x) < 1000 ? "%+.3g%%" : "%+.0f%%", x);
}

/* "-9.8% [-21%, +2%]": a loss change in percent with its interval, if any. */
static void percent_change(char *buf, size_t cap, double change, double lo,
                           double hi)
{
    char c[32], l[32], h[32];
    percent(c, sizeof c, change);
    percent(l, sizeof l, lo);
    percent(h, sizeof h, hi);
    if (isfinite(lo))
        snprintf(buf, cap, "%s [%s, %s]", c, l, h);
    else
        snprintf(buf, cap, "%s", c);
}

/* "spectral vs rope, eval depth 16 (paired t, n=3): loss -9.8% [-21%, +2%]
 * not distinguishable from seed noise; accuracy +0.120 [+0.050, +0.190]
 * higher beyond seed noise" */
static char *verdict(const char *label, const char *base_label, const cell *c,
                     const bf_stats_diff *loss, double base_loss,
                     const bf_stats_diff *acc)
{
    char *text = NULL, change[128];
    percent_change(change, sizeof change, 100.0 * loss->diff / base_loss,
                   100.0 * loss->ci_low / base_loss,
                   100.0 * loss->ci_high / base_loss);
    char acc_interval[96] = "";
    if (isfinite(acc->ci_low))
        snprintf(acc_interval, sizeof acc_interval, " [%+.3f, %+.3f]",
                 acc->ci_low, acc->ci_high);
    if (asprintf(&text, "%s vs %s, eval depth %d (%s, n=%d): loss %s "
                        "%s; accuracy %+.3f%s %s", label, base_label,
                 c->eval_depth, loss->paired ? "paired t" : "Welch t", c->n,
                 change,
                 judge(loss, "higher beyond seed noise",
                       "lower beyond seed noise"),
                 acc->diff, acc_interval,
                 judge(acc, "higher beyond seed noise",
                       "lower beyond seed noise")) < 0)
        abort();
    return text;
}

static void compare_with(json_t *row, const bf_sweep_view *v, const cell *c,
                         const cell *base)
{
    int order[c->n > 0 ? c->n : 1];
    int paired = same_seeds(c, base, order) && c->n >= 2;
    bf_stats_diff loss, acc;
    diff_of(c, base, paired, order, loss_of, &loss);
    diff_of(c, base, paired, order, accuracy_of, &acc);
    bf_stats_summary b;
    bf_stats_summarize(base->loss, base->n, &b);
    char *label = bf_sweep_view_label(v, c->group);
    char *base_label = bf_sweep_view_label(v, base->group);
    json_object_set_new(row, "baseline", json_string(base_label));
    json_object_set_new(row, "test", json_string(paired ? "paired" : "welch"));
    set_diff(row, "loss", &loss);
    set_number(row, "loss_reduction_pct", -100.0 * loss.diff / b.mean);
    set_number(row, "loss_reduction_ci_low", -100.0 * loss.ci_high / b.mean);
    set_number(row, "loss_reduction_ci_high", -100.0 * loss.ci_low / b.mean);
    set_diff(row, "accuracy", &acc);
    char *text = verdict(label, base_label, c, &loss, b.mean, &acc);
    json_object_set_new(row, "verdict", json_string(text));
    free(text);
    free(label);
    free(base_label);
}

static const cell *cell_at(const cells *cs, int group, int eval_depth)
{
    for (int i = 0; i < cs->n; i++)
        if (cs->c[i].group == group && cs->c[i].eval_depth == eval_depth)
            return &cs->c[i];
    return NULL;
}

static json_t *cell_row(const bf_sweep_view *v, const cells *cs, const cell *c,
                        const baseline *b)
{
    json_t *row = json_object();
    json_object_update(row, json_array_get(v->groups, (size_t)c->group));
    char *label = bf_sweep_view_label(v, c->group);
    json_object_set_new(row, "group", json_string(label));
    free(label);
    json_object_set_new(row, "eval_depth", json_integer(c->eval_depth));
    json_object_set_new(row, "n", json_integer(c->n));
    set_summary(row, "loss", c->loss, c->n, 0);
    set_summary(row, "accuracy", c->accuracy, c->n, 1);
    set_summary(row, "train_loss", c->train_loss, c->n, 0);
    int base = baseline_of(v, b, c->group);
    const cell *bc = base >= 0 && base != c->group
                         ? cell_at(cs, base, c->eval_depth) : NULL;
    if (base == c->group)
        json_object_set_new(row, "baseline", json_string("(this group)"));
    else if (bc)
        compare_with(row, v, c, bc);
    return row;
}

json_t *bf_compare_rows(const bf_sweep_view *v, bf_source *src,
                        const char *baseline_arg)
{
    if (bf_sweep_view_succeeded(v) == 0) {
        fprintf(stderr, "bifocal: sweep %lld has no succeeded job yet (%zu "
                        "job(s); see bifocal results %lld)\n",
                (long long)v->sweep_id, json_array_size(v->jobs),
                (long long)v->sweep_id);
        return NULL;
    }
    baseline b;
    if (parse_baseline(v, baseline_arg, &b))
        return NULL;
    json_t *evals = bf_source_rows(src, "final_evals", v->sweep_id);
    if (!evals) {
        baseline_free(&b);
        return NULL;
    }
    cells cs = { 0 };
    fill_cells(v, evals, &cs);
    json_t *rows = json_array();
    for (int i = 0; i < cs.n; i++)
        json_array_append_new(rows, cell_row(v, &cs, &cs.c[i], &b));
    free_cells(&cs);
    json_decref(evals);
    baseline_free(&b);
    return rows;
}

/* ---- the command -------------------------------------------------------- */

static char *mean_sd(const json_t *row, const char *prefix, const char *fmt)
{
    char key[64], *text = NULL;
    snprintf(key, sizeof key, "%s_mean", prefix);
    double mean = number(row, key);
    snprintf(key, sizeof key, "%s_sd", prefix);
    double sd = number(row, key);
    char m[32], s[32];
    snprintf(m, sizeof m, fmt, mean);
    snprintf(s, sizeof s, fmt, sd);
    if (asprintf(&text, isfinite(sd) ? "%s ± %s" : "%s", m, s) < 0)
        abort();
    return text;
}

static char *interval(const json_t *row, const char *prefix, const char *fmt)
{
    char key[64], lo[32], hi[32], *text = NULL;
    snprintf(key, sizeof key, "%s_ci_low", prefix);
    double l = number(row, key);
    snprintf(key, sizeof key, "%s_ci_high", prefix);
    double h = number(row, key);
    if (!isfinite(l))
        return bf_xstrdup("");
    snprintf(lo, sizeof lo, fmt, l);
    snprintf(hi, sizeof hi, fmt, h);
    if (asprintf(&text, "[%s, %s]", lo, hi) < 0)
        abort();
    return text;
}

/* "-9.8% [-21%, +2%] *": the loss change against the baseline, starred
 * when its interval excludes zero. */
static char *versus(const json_t *row)
{
    const char *base = json_string_value(json_object_get(row, "baseline"));
    double change = -number(row, "loss_reduction_pct");
    if (!base)
        return bf_xstrdup("");
    if (!isfinite(change))
        return bf_xstrdup("baseline");
    char shown[128], *text = NULL;
    percent_change(shown, sizeof shown, change,
                   -number(row, "loss_reduction_ci_high"),
                   -number(row, "loss_reduction_ci_low"));
    if (asprintf(&text, "%s%s", shown,
                 json_is_true(json_object_get(row, "loss_diff_excludes_zero"))
                     ? " *" : "") < 0)
        abort();
    return text;
}

static void set_text(json_t *row, const char *key, char *text)
{
    json_object_set_new(row, key, json_string(text));
    free(text);
}

/* The table: one line per row with mean ± sd and the intervals, then the
 * verdict lines. */
static void print_table(const json_t *rows)
{
    static const char *const columns[] = {
        "group", "eval_depth", "n", "loss", "loss 95% CI", "accuracy",
        "accuracy 95% CI", "train loss", "loss vs baseline", NULL };
    json_t *shown = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        json_t *s = json_pack("{s:O, s:O, s:O}", "group",
                              json_object_get(row, "group"), "eval_depth",
                              json_object_get(row, "eval_depth"), "n",
                              json_object_get(row, "n"));
        set_text(s, "loss", mean_sd(row, "loss", "%.4g"));
        set_text(s, "loss 95% CI", interval(row, "loss", "%.4g"));
        set_text(s, "accuracy", mean_sd(row, "accuracy", "%.3f"));
        set_text(s, "accuracy 95% CI", interval(row, "accuracy", "%.3f"));
        set_text(s, "train loss", mean_sd(row, "train_loss", "%.4g"));
        set_text(s, "loss vs baseline", versus(row));
        json_array_append_new(shown, s);
    }
    bf_format_print(stdout, shown, columns, BF_FORMAT_TABLE);
    json_decref(shown);
    int header = 0;
    json_array_foreach(rows, i, row) {
        const char *v = json_string_value(json_object_get(row, "verdict"));
        if (v)
            printf("%s%s\n", header++ ? "" : "\n", v);
    }
}

int bf_client_cmd_compare(bf_client *cl, int argc, char **argv)
{
    bf_result_opts o;
    bf_source src;
    int rc = bf_result_command_start(cl, argc, argv, BF_RESULT_OPT_FORMAT
                                     | BF_RESULT_OPT_BY | BF_RESULT_OPT_BASELINE,
                                     &o, &src);
    if (rc)
        return rc;
    bf_sweep_view v;
    json_t *rows = NULL;
    if (bf_sweep_view_load(&v, &src, o.sweep, o.by, o.where) == 0)
        rows = bf_compare_rows(&v, &src, o.baseline);
    if (rows && o.fmt == BF_FORMAT_TABLE)
        print_table(rows);
    else if (rows)
        bf_format_print(stdout, rows, NULL, o.fmt);
    int status = rows ? 0 : 1;
    json_decref(rows);
    bf_sweep_view_clear(&v);
    bf_source_close(&src);
    return status;
}
