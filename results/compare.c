/* compare: seed statistics and comparisons with a baseline group, every
 * number from stats.c (docs/results.md names the methods).
 *
 * Per group (jobs that differ only in seed) and eval depth: n, the
 * geometric mean of final eval and training loss with its log-scale
 * interval, and accuracy's mean, seed spread and t-interval over seeds.
 * Against the baseline group with the same other fields: the geometric-mean
 * loss ratio (paired on the seeds both hold, Welch on logs when none), the
 * accuracy difference (Newcombe; paired t or exact McNemar), TOST at the
 * equivalence margin, the probability of improvement, and p-values
 * adjusted by Benjamini-Hochberg over the whole table; then a verdict. */
#include "compare.h"

#include "adaptive.h"
#include "alloc.h"
#include "analysis.h"
#include "format.h"
#include "job_config.h"
#include "records.h"
#include "results.h"
#include "selections.h"
#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What compare keeps of a succeeded job beside its evaluations (24
 * bytes, not its row): its final training loss and eval examples. */
typedef struct job_fact {
    int64_t id;
    double train_loss;          /* job_results.train_loss */
    long examples;              /* its config's eval_examples, else the
                                   default */
} job_fact;

/* The succeeded jobs' facts, by id ascending (sort_facts). */
struct bf_compare_facts {
    job_fact *f;
    size_t n, cap;
};
typedef struct bf_compare_facts job_facts;

static double number(const json_t *row, const char *key)
{
    const json_t *v = json_object_get(row, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void add_fact(job_facts *fs, int64_t id, const json_t *train_loss,
                     const json_t *examples)
{
    if (fs->n == fs->cap) {
        fs->cap = 2 * fs->cap + 1024;
        fs->f = bf_xrealloc(fs->f, fs->cap * sizeof *fs->f);
    }
    bf_job_config defaults;
    bf_job_config_defaults(&defaults);
    fs->f[fs->n++] = (job_fact){
        .id = id,
        .train_loss = json_is_number(train_loss)
                      ? json_number_value(train_loss) : NAN,
        .examples = json_is_integer(examples) && json_integer_value(examples) > 0
                    ? (long)json_integer_value(examples)
                    : defaults.eval_examples };
}

static int is_succeeded(const json_t *status)
{
    return json_is_string(status)
           && strcmp(json_string_value(status), "succeeded") == 0;
}

bf_compare_facts *bf_compare_facts_new(void)
{
    return bf_xcalloc(1, sizeof(bf_compare_facts));
}

void bf_compare_facts_free(bf_compare_facts *facts)
{
    if (facts)
        free(facts->f);
    free(facts);
}

/* A job_results row as the view reads it (bf_sweep_hold.on_job). */
void bf_compare_facts_add(void *facts, const json_t *row)
{
    if (is_succeeded(json_object_get(row, "status")))
        add_fact(facts, json_integer_value(json_object_get(row, "job_id")),
                 json_object_get(row, "train_loss"),
                 bf_sweep_view_row_value(row, "eval_examples"));
}

static int by_fact_id(const void *a, const void *b)
{
    const job_fact *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static void sort_facts(job_facts *fs)
{
    if (fs->n > 1)
        qsort(fs->f, fs->n, sizeof *fs->f, by_fact_id);
}

static const job_fact *fact_of(const job_facts *fs, int64_t id)
{
    const job_fact key = { .id = id };
    return fs->n ? bsearch(&key, fs->f, fs->n, sizeof *fs->f, by_fact_id)
                 : NULL;
}

/* The values of one (group, eval depth) cell, one per succeeded job:
 * 32 bytes each, and the outcomes where the sweep has them. */
typedef struct cell {
    int group, eval_depth, n, cap;
    long examples;              /* eval examples of each value's eval */
    int64_t *seed, *job;
    double *loss, *accuracy;
    unsigned char **outcomes;   /* per value: its eval's per-example
                                   outcomes (records.h), or NULL; NULL
                                   before the cell's first */
} cell;

/* The cells being filled from final_evals' rows, read one at a time (a
 * sweep of a million jobs has three million): each found by its key, with
 * room for its group's succeeded jobs. */
typedef struct cells {
    cell *c;
    int n, cap;
    const bf_sweep_view *v;
    const job_facts *facts;
    json_t *index;              /* "GROUP DEPTH" -> its cell */
    size_t *group_size;         /* per group: its succeeded jobs */
} cells;

static void cell_key(char key[32], int group, int eval_depth)
{
    snprintf(key, 32, "%d %d", group, eval_depth);
}

static cell *cell_of_key(const cells *cs, int group, int eval_depth)
{
    char key[32];
    cell_key(key, group, eval_depth);
    json_t *at = json_object_get(cs->index, key);
    return at ? &cs->c[json_integer_value(at)] : NULL;
}

/* The cell of (group, eval depth), made if new. */
static cell *find_cell(cells *cs, int group, int eval_depth)
{
    cell *have = cell_of_key(cs, group, eval_depth);
    if (have)
        return have;
    if (cs->n == cs->cap) {
        cs->cap = 2 * cs->cap + 16;
        cs->c = bf_xrealloc(cs->c, (size_t)cs->cap * sizeof *cs->c);
    }
    char key[32];
    cell_key(key, group, eval_depth);
    json_object_set_new(cs->index, key, json_integer(cs->n));
    size_t max_n = cs->group_size[group];
    cell *c = &cs->c[cs->n++];
    *c = (cell){ .group = group, .eval_depth = eval_depth, .cap = (int)max_n,
                 .seed = bf_xcalloc(max_n, sizeof *c->seed),
                 .job = bf_xcalloc(max_n, sizeof *c->job),
                 .loss = bf_xcalloc(max_n, sizeof *c->loss),
                 .accuracy = bf_xcalloc(max_n, sizeof *c->accuracy) };
    return c;
}

static void free_cells(cells *cs)
{
    for (int i = 0; i < cs->n; i++) {
        for (int k = 0; cs->c[i].outcomes && k < cs->c[i].n; k++)
            free(cs->c[i].outcomes[k]);
        free(cs->c[i].outcomes);
        free(cs->c[i].job);
        free(cs->c[i].seed);
        free(cs->c[i].loss);
        free(cs->c[i].accuracy);
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

/* One row of final_evals: the value of its job in its cell. */
static void add_eval(void *ctx, json_t *row)
{
    cells *cs = ctx;
    int64_t job = json_integer_value(json_object_get(row, "job_id"));
    int group = bf_sweep_view_group_of(cs->v, job);
    const job_fact *fact = fact_of(cs->facts, job);
    if (group < 0 || !fact)
        return;
    cell *c = find_cell(cs, group, (int)json_integer_value(json_object_get(
                                           row, "eval_depth")));
    if (c->n >= c->cap)     /* one row per succeeded job and depth */
        return;
    c->seed[c->n] = json_integer_value(json_object_get(row, "seed"));
    c->job[c->n] = job;
    c->loss[c->n] = number(row, "loss");
    c->accuracy[c->n] = number(row, "accuracy");
    c->examples = fact->examples;
    c->n++;
}

/* One row of final_outcomes: the per-example outcomes of its job's value
 * (when it has as many examples as the cell).  Both views give their rows
 * by job id, so a cell's jobs are ascending: found by bisection. */
static void add_outcomes(void *ctx, json_t *row)
{
    cells *cs = ctx;
    int64_t job = json_integer_value(json_object_get(row, "job_id"));
    cell *c = cell_of_key(cs, bf_sweep_view_group_of(cs->v, job),
                      (int)json_integer_value(json_object_get(row,
                                                              "eval_depth")));
    if (!c || json_integer_value(json_object_get(row, "n")) != c->examples)
        return;
    int lo = 0, hi = c->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->job[mid] < job)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!c->outcomes)
        c->outcomes = bf_xcalloc((size_t)c->cap + 1, sizeof *c->outcomes);
    if (lo == c->n || c->job[lo] != job || c->outcomes[lo])
        return;
    unsigned char *bits = bf_xmalloc(BF_OUTCOMES_BYTES(c->examples));
    const char *hex = json_string_value(json_object_get(row, "bits"));
    if (hex && !bf_outcomes_from_hex(hex, (int)c->examples, bits))
        c->outcomes[lo] = bits;
    else
        free(bits);
}

/* The sweep's cells from its final evaluations and their outcomes, read
 * row by row; in order of group, then depth.  0, or -1 (printed). */
static int read_cells(const bf_sweep_view *v, bf_source *src,
                      const job_facts *facts, cells *cs)
{
    *cs = (cells){ .v = v, .facts = facts, .index = json_object(),
                   .group_size = bf_xcalloc((size_t)v->n_groups + 1,
                                            sizeof *cs->group_size) };
    for (size_t j = 0; j < facts->n; j++) {
        int g = bf_sweep_view_group_of(v, facts->f[j].id);
        if (g >= 0)
            cs->group_size[g]++;
    }
    int rc = bf_source_each_row(src, "final_evals", v->sweep_id, add_eval, cs);
    if (rc == 0 && bf_source_has_view(src, "final_outcomes"))
        rc = bf_source_each_row(src, "final_outcomes", v->sweep_id,
                                add_outcomes, cs);
    json_decref(cs->index);
    free(cs->group_size);
    if (cs->n > 1)
        qsort(cs->c, (size_t)cs->n, sizeof *cs->c, by_group_then_depth);
    return rc;
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
    int *of;                /* per group: its baseline group, -1 for none
                               (once parsed) */
} baseline;

static void baseline_free(baseline *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->value[i]);
    free(b->of);
    b->of = NULL;
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

static int is_baseline_field(const baseline *b, const char *field)
{
    for (int i = 0; i < b->n; i++)
        if (b->field[i] == field)
            return 1;
    return 0;
}

/* Group g's values of the grouping fields the baseline does not name, as
 * JSON text (caller frees): a group and its baseline group share it.  A
 * field a group lacks (a value its stage took with from:, or one only some
 * stages have) is left out of its key, so two groups that both lack it
 * still match, as sweep_view groups them. */
static char *key_beside_baseline(const bf_sweep_view *v, const baseline *b,
                                 int g)
{
    const json_t *fields = json_array_get(v->groups, (size_t)g);
    json_t *key = json_object();
    for (int i = 0; i < v->n_by; i++) {
        json_t *x = json_object_get(fields, v->by[i]);
        if (x && !is_baseline_field(b, v->by[i]))
            json_object_set(key, v->by[i], x);
    }
    char *text = json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS
                                 | JSON_REAL_PRECISION(17));
    json_decref(key);
    return text;
}

/* The baseline group of every group: among the groups that have the
 * baseline's values, the first with the group's other grouping fields (g
 * itself for a baseline group); -1 if none.  Found by key, once, so that
 * a sweep of a thousand groups costs a thousand look-ups, not a million
 * comparisons.  Whether any group has the baseline's values. */
static int mark_baseline_groups(const bf_sweep_view *v, baseline *b)
{
    json_t *first = json_object();     /* key -> first baseline group */
    char **keys = bf_xcalloc((size_t)v->n_groups + 1, sizeof *keys);
    int any = 0;
    for (int g = 0; g < v->n_groups; g++) {
        int is_base = group_matches(v, g, b);
        keys[g] = key_beside_baseline(v, b, g);
        if (is_base && keys[g] && !json_object_get(first, keys[g]))
            json_object_set_new(first, keys[g], json_integer(g));
        any |= is_base;
    }
    b->of = bf_xcalloc((size_t)v->n_groups + 1, sizeof *b->of);
    for (int g = 0; g < v->n_groups; g++) {
        json_t *h = keys[g] ? json_object_get(first, keys[g]) : NULL;
        b->of[g] = h ? (int)json_integer_value(h) : -1;
        free(keys[g]);
    }
    free(keys);
    json_decref(first);
    return any;
}

static const char *grouping_field(const bf_sweep_view *v, const char *name,
                                  size_t len)
{
    for (int i = 0; i < v->n_by; i++)
        if (strlen(v->by[i]) == len && strncmp(v->by[i], name, len) == 0)
            return v->by[i];
    return NULL;
}

/* A canonical config value as --baseline takes it (malloc'd). */
static char *value_text(const json_t *value)
{
    return json_is_string(value) ? bf_xstrdup(json_string_value(value))
                                 : json_dumps(value, JSON_ENCODE_ANY);
}

/* label=NAME of --baseline ARG: the values of the zip entry the sweep file
 * calls NAME, over the grouping fields; -1 with a message if none is. */
static int add_label(const bf_sweep_view *v, const char *arg,
                     const char *name, size_t len, baseline *b)
{
    size_t i, j;
    json_t *zip, *entry;
    json_array_foreach(v->zips, i, zip)
        json_array_foreach(json_object_get(zip, "entries"), j, entry) {
            const char *label = json_string_value(json_object_get(entry,
                                                                  "label"));
            if (strlen(label) != len || strncmp(label, name, len) != 0)
                continue;
            const char *key;
            json_t *value;
            json_object_foreach(json_object_get(entry, "values"), key, value) {
                const char *field = grouping_field(v, key, strlen(key));
                if (field && b->n < MAX_BASELINE_FIELDS) {
                    b->field[b->n] = field;
                    b->value[b->n++] = value_text(value);
                }
            }
            return 0;
        }
    fprintf(stderr, "bifocal: --baseline %s: no zip entry of sweep %lld is "
                    "labelled '%.*s'\n", arg, (long long)v->sweep_id, (int)len,
            name);
    return -1;
}

/* One FIELD=VALUE (or label=NAME) of --baseline ARG into b; -1 with a
 * message if bad. */
static int add_pair(const bf_sweep_view *v, const char *arg, const char *pair,
                    size_t len, baseline *b)
{
    if (len > 6 && strncmp(pair, "label=", 6) == 0)
        return add_label(v, arg, pair + 6, len - 6, b);
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
            if (!mark_baseline_groups(v, b))
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
    if (!mark_baseline_groups(v, b)) {
        fprintf(stderr, "bifocal: --baseline %s: no group of sweep %lld has "
                        "%s\n", arg, (long long)v->sweep_id, arg);
        baseline_free(b);
        return -1;
    }
    return 0;
}

/* ---- rows ------------------------------------------------------------- */

static void set_number(json_t *row, const char *key, double x)
{
    json_object_set_new(row, key, isfinite(x) ? json_real(x) : json_null());
}

static void set_prefixed(json_t *row, const char *prefix, const char *name,
                         double x)
{
    char key[64];
    snprintf(key, sizeof key, "%s_%s", prefix, name);
    set_number(row, key, x);
}

/* A positive quantity (loss): geometric mean, the sd of the logs, and the
 * log-scale t-interval, which never reaches zero. */
static void set_log_summary(json_t *row, const char *prefix, const double *x,
                            int n)
{
    bf_stats_summary s;
    bf_stats_summarize_log(x, n, &s);
    set_prefixed(row, prefix, "mean", s.mean);
    set_prefixed(row, prefix, "log_sd", s.sd);
    set_prefixed(row, prefix, "ci_low", s.ci_low);
    set_prefixed(row, prefix, "ci_high", s.ci_high);
}

/* Accuracy: the mean over seeds with its interval at the seeds
 * (bf_stats_accuracy_interval), and the spread between seeds. */
static void set_accuracy_summary(json_t *row, const cell *c)
{
    bf_stats_summary s;
    bf_stats_summarize(c->accuracy, c->n, &s);
    bf_stats_prop w;
    int at_seeds;
    bf_stats_accuracy_interval(c->accuracy, c->n, c->examples, &w, &at_seeds);
    set_number(row, "accuracy_mean", s.mean);
    set_number(row, "accuracy_sd", s.sd);
    set_number(row, "accuracy_ci_low", w.ci_low);
    set_number(row, "accuracy_ci_high", w.ci_high);
    json_object_set_new(row, "accuracy_ci_unit",
                        json_string(at_seeds ? "seeds" : "examples"));
}

/* A seed of a cell and where it stands there. */
typedef struct seed_at {
    int64_t seed;
    int index;
} seed_at;

static int seed_at_cmp(const void *p, const void *q)
{
    const seed_at *a = p, *b = q;
    return (a->seed > b->seed) - (a->seed < b->seed);
}

/* For each seed of a, where b holds the same seed, or -1 (malloc'd).  By
 * b's seeds sorted: a cell of a million-job sweep holds hundreds of
 * thousands of seeds, and matching each against each never ended. */
static int *match_seeds(const cell *a, const cell *b)
{
    seed_at *sorted = bf_xmalloc(((size_t)b->n + 1) * sizeof *sorted);
    for (int j = 0; j < b->n; j++)
        sorted[j] = (seed_at){ b->seed[j], j };
    qsort(sorted, (size_t)b->n, sizeof *sorted, seed_at_cmp);
    int *match = bf_xmalloc(((size_t)a->n + 1) * sizeof *match);
    for (int i = 0; i < a->n; i++) {
        seed_at key = { a->seed[i], 0 };
        const seed_at *hit = bsearch(&key, sorted, (size_t)b->n,
                                     sizeof *sorted, seed_at_cmp);
        match[i] = hit ? hit->index : -1;
    }
    free(sorted);
    return match;
}

/* The seeds of a and b, aligned by match (match_seeds): the values of a
 * and b at each seed either holds (NAN where one lacks it); returns how
 * many seeds. */
static int align(const cell *a, const cell *b, const int *match,
                 const double *(*values)(const cell *), double *x, double *y)
{
    unsigned char *shared = bf_xcalloc((size_t)b->n + 1, 1);
    int n = 0;
    for (int i = 0; i < a->n; i++) {
        x[n] = values(a)[i];
        y[n++] = match[i] >= 0 ? values(b)[match[i]] : NAN;
        if (match[i] >= 0)
            shared[match[i]] = 1;
    }
    for (int j = 0; j < b->n; j++)
        if (!shared[j]) {
            x[n] = NAN;
            y[n++] = values(b)[j];
        }
    free(shared);
    return n;
}

static const double *loss_of(const cell *c) { return c->loss; }
static const double *accuracy_of(const cell *c) { return c->accuracy; }

/* Correct examples per seed; -1 where the seed is missing. */
static void counts(const double *acc, int n, long m, long *k)
{
    for (int i = 0; i < n; i++)
        k[i] = isfinite(acc[i]) ? lround(acc[i] * m) : -1;
}

/* Examples right on both, on a's only, on b's only, over m outcomes. */
static bf_stats_pairs pair_counts(const unsigned char *a,
                                  const unsigned char *b, long m)
{
    bf_stats_pairs p = { 0, 0, 0 };
    for (size_t i = 0; i < BF_OUTCOMES_BYTES(m); i++) {
        p.both += __builtin_popcount(a[i] & b[i]);
        p.a_only += __builtin_popcount(a[i] & ~b[i] & 0xff);
        p.b_only += __builtin_popcount(~a[i] & b[i] & 0xff);
    }
    return p;
}

/* Each seed's pairs of examples, aligned as align() aligns the seeds (a's
 * first): 1, or 0 when a seed both hold lacks outcomes on either side,
 * so that the accuracy comparison falls back to the counts. */
static int align_pairs(const cell *a, const cell *b, const int *match,
                       bf_stats_pairs *pairs)
{
    for (int i = 0; i < a->n; i++) {
        int j = match[i];
        pairs[i] = (bf_stats_pairs){ 0, 0, 0 };
        if (j < 0)
            continue;
        if (!a->outcomes || !a->outcomes[i] || !b->outcomes
            || !b->outcomes[j])
            return 0;
        pairs[i] = pair_counts(a->outcomes[i], b->outcomes[j], a->examples);
    }
    return 1;
}

/* "rope=spectral vs rope=rope": the two groups named by the fields in
 * which they differ (the table's labels name every field that varies
 * among all its groups); in a sweep with stages, after the stage both
 * belong to ("stage=second: rope=spectral vs rope=rope"). */
static void set_compared(json_t *row, const bf_sweep_view *v, int group,
                         int base)
{
    int pair[2] = { group, base };
    char *a = bf_sweep_view_label_among(v, group, pair, 2);
    char *b = bf_sweep_view_label_among(v, base, pair, 2);
    const char *stage = v->n_by > 0 && strcmp(v->by[0], "stage") == 0
        ? json_string_value(json_object_get(json_array_get(v->groups,
                                                           (size_t)group),
                                            "stage"))
        : NULL;
    json_object_set_new(row, "compared", stage
        ? json_pack("s+++++", "stage=", stage, ": ", a, " vs ", b)
        : json_pack("s++", a, " vs ", b));
    free(a);
    free(b);
}

/* The numbers of one comparison, by the names docs/results.md lists, and
 * its loss ratio's statistics in *r_out; the verdict and the seeds that
 * would decide wait for the adjusted p-values (judge_rows). */
static void compare_with(json_t *row, const bf_sweep_view *v, const cell *c,
                         const cell *base, const bf_analysis *a,
                         bf_stats_ratio *r_out)
{
    /* on the heap: a cell of a million-job sweep can hold more seeds
     * than the stack has room for (it overflowed there) */
    size_t cap = (size_t)c->n + (size_t)base->n + 1;
    double *x = bf_xmalloc(2 * cap * sizeof *x), *y = x + cap;
    long *ka = bf_xmalloc(2 * cap * sizeof *ka), *kb = ka + cap;
    bf_stats_pairs *pairs = bf_xmalloc(cap * sizeof *pairs);
    int *match = match_seeds(c, base);
    int n = align(c, base, match, loss_of, x, y);
    bf_stats_ratio r;
    bf_stats_log_ratio(x, y, n, &r);
    bf_stats_prop pi;
    bf_stats_prob_improvement(x, y, n, &pi);
    align(c, base, match, accuracy_of, x, y);
    counts(x, n, c->examples, ka);
    counts(y, n, c->examples, kb);
    bf_stats_acc_diff acc;
    int exact = c->examples == base->examples
                && align_pairs(c, base, match, pairs);
    bf_stats_accuracy_diff(ka, kb, n, c->examples, exact ? pairs : NULL,
                           &acc);
    free(x);
    free(ka);
    free(pairs);
    free(match);

    char *base_label = bf_sweep_view_label(v, base->group);
    json_object_set_new(row, "baseline", json_string(base_label));
    free(base_label);
    set_compared(row, v, c->group, base->group);
    json_object_set_new(row, "test", json_string(r.n_paired ? "paired"
                                                            : "welch"));
    json_object_set_new(row, "n_paired", json_integer(r.n_paired));
    json_object_set_new(row, "n_baseline", json_integer(base->n));
    set_number(row, "loss_ratio", r.ratio);
    set_number(row, "loss_ratio_ci_low", r.ci_low);
    set_number(row, "loss_ratio_ci_high", r.ci_high);
    set_number(row, "loss_p", r.p);
    set_number(row, "alpha", a->alpha);
    set_number(row, "equivalence_margin", a->equivalence_margin);
    set_number(row, "loss_tost_p", bf_stats_tost_p(
                   &r, bf_analysis_log_margin(a->equivalence_margin)));
    json_object_set_new(row, "loss_note", json_string(r.note));
    set_number(row, "accuracy_diff", acc.diff);
    set_number(row, "accuracy_diff_ci_low", acc.ci_low);
    set_number(row, "accuracy_diff_ci_high", acc.ci_high);
    json_object_set_new(row, "accuracy_diff_ci_unit",
                        json_string(acc.ci_seeds ? "seeds" : "examples"));
    /* A bound is no p: it stays out of the family Benjamini-Hochberg
     * adjusts (a p below the truth would lower the others' adjusted p). */
    set_number(row, "accuracy_p",
               isfinite(acc.t_p) || acc.p_exact ? acc.p : NAN);
    set_number(row, "accuracy_mcnemar_p", acc.mcnemar_p);
    json_object_set_new(row, "accuracy_mcnemar_exact",
                        json_boolean(acc.p_exact));
    json_object_set_new(row, "accuracy_discordant",
                        json_pack("[I, I]", (json_int_t)acc.discordant[0],
                                  (json_int_t)acc.discordant[1]));
    json_object_set_new(row, "accuracy_note", json_string(acc.note));
    set_number(row, "prob_improvement", pi.p);
    set_number(row, "prob_improvement_ci_low", pi.ci_low);
    set_number(row, "prob_improvement_ci_high", pi.ci_high);
    *r_out = r;
}

/* The config of group g's jobs less the seed, as adaptive_seeds names
 * a cell (new reference). */
static json_t *group_config(const bf_sweep_view *v, int g)
{
    if (!v->group_row)
        return NULL;
    json_t *config = json_deep_copy(bf_row_store_get(&v->jobs,
                                                     (size_t)v->group_row[g],
                                                     "config"));
    json_object_del(config, "seed");
    return config;
}

/* A comparison whose seeds a stopping rule released (`seeds: {until:
 * decided}`) gets the rule's decision as `stopping_rule`, at its eval
 * depth or, for another depth of the same two cells, at the rule's: its
 * seeds were stopped on the data, so a fixed-n test of them is
 * descriptive and joins no family (adjust_rows); the rule's is the
 * verdict of record. */
static void mark_stopped(json_t *row, const bf_sweep_view *v, int group,
                         int base, int eval_depth, const json_t *rules)
{
    if (!json_array_size(rules))
        return;
    json_t *variant = group_config(v, group), *baseline = group_config(v, base);
    const char *stage = json_string_value(bf_sweep_view_value(
        v, (size_t)v->group_row[group], "stage"));
    const json_t *rule = bf_adaptive_find(rules, variant, baseline, stage,
                                          eval_depth);
    if (!rule)
        rule = bf_adaptive_find(rules, variant, baseline, stage, 0);
    if (rule)
        json_object_set_new(row, "stopping_rule", bf_adaptive_json(rule));
    json_decref(variant);
    json_decref(baseline);
}

/* Whether a row's seeds were stopped by a rule (mark_stopped). */
static int stopped(const json_t *row)
{
    return json_object_get(row, "stopping_rule") != NULL;
}

/* The cell of (group, eval depth) once read: the cells are in that order. */
static const cell *cell_at(const cells *cs, int group, int eval_depth)
{
    const cell key = { .group = group, .eval_depth = eval_depth };
    return bsearch(&key, cs->c, (size_t)cs->n, sizeof *cs->c,
                   by_group_then_depth);
}

/* The row of cell c; *r gets its loss ratio's statistics when it is
 * compared with a baseline (else it is left as it is). */
static json_t *cell_row(const bf_sweep_view *v, const cells *cs, const cell *c,
                        const baseline *b, const bf_analysis *a,
                        const json_t *rules, bf_stats_ratio *r)
{
    json_t *row = json_object();
    json_object_update(row, json_array_get(v->groups, (size_t)c->group));
    char *label = bf_sweep_view_label(v, c->group);
    json_object_set_new(row, "group", json_string(label));
    free(label);
    json_object_set_new(row, "eval_depth", json_integer(c->eval_depth));
    json_object_set_new(row, "n", json_integer(c->n));
    json_object_set_new(row, "eval_examples", json_integer(c->examples));
    set_log_summary(row, "loss", c->loss, c->n);
    set_accuracy_summary(row, c);
    double *train_loss = bf_xcalloc((size_t)c->n + 1, sizeof *train_loss);
    for (int k = 0; k < c->n; k++)  /* every value's job has its fact */
        train_loss[k] = fact_of(cs->facts, c->job[k])->train_loss;
    set_log_summary(row, "train_loss", train_loss, c->n);
    free(train_loss);
    /* a search's trials are candidates, not comparisons: one seed each,
     * chosen among by the selection (printed below the table) */
    int searched = bf_sweep_view_searched(v, c->group);
    if (searched)
        json_object_set_new(row, "search_trial", json_true());
    int base = b->n && !searched ? b->of[c->group] : -1;
    const cell *bc = base >= 0 && base != c->group
                         ? cell_at(cs, base, c->eval_depth) : NULL;
    if (base == c->group)
        json_object_set_new(row, "baseline", json_string("(this group)"));
    else if (bc) {
        compare_with(row, v, c, bc, a, r);
        mark_stopped(row, v, c->group, bc->group, c->eval_depth, rules);
    }
    return row;
}

/* ---- verdicts ------------------------------------------------------------ */

/* The two metrics whose p-values are adjusted, in the order of
 * bf_analysis_metric. */
static const char *const metric_keys[2] = { "loss", "accuracy" };

/* Whether metric k of row is in the sweep's primary family (its
 * analysis: block names the metric and this eval depth, or every depth). */
static int in_primary(const json_t *row, int k, const bf_analysis *a)
{
    return a->has_primary && (int)a->primary_metric == k &&
           (!a->primary_eval_depth || json_integer_value(json_object_get(
                row, "eval_depth")) == a->primary_eval_depth);
}

/* A kind of p-value the corrections adjust: "" differences (loss_p,
 * accuracy_p), "_tost" equivalences (loss_tost_p, TOST; loss only). */
typedef struct p_kind {
    const char *test;
    int n_metrics;      /* the first n of metric_keys */
} p_kind;

static const p_kind DIFFERENCES = {"", 2}, EQUIVALENCES = {"_tost", 1};

/* Holm within the primary family (Holm 1979: family-wise error),
 * Benjamini-Hochberg over every other p of the kind in the table (the
 * false discovery rate), written back as METRIC<test>_p_adjusted with the
 * correction that made it (METRIC<test>_correction); family[f] gets how
 * many p-values family f (0 primary, 1 the rest) holds.  Equivalences are
 * families of their own, split as the differences are: a verdict of
 * equivalence is a claim like a difference, and uncorrected, one of many
 * TOSTs passes by chance as often as one of many t-tests (Lauzon & Caffo
 * 2009). */
static void adjust_rows(json_t *rows, const bf_analysis *a, p_kind kind,
                        int family[2])
{
    size_t n = json_array_size(rows), i;
    double *p[2], *adj = bf_xcalloc(2 * n + 1, sizeof *adj);
    for (int f = 0; f < 2; f++)     /* family 0: primary, 1: the rest */
        p[f] = bf_xcalloc(2 * n + 1, sizeof **p);
    char key[64];
    json_t *row;
    json_array_foreach(rows, i, row)
        for (int k = 0; k < 2; k++) {
            snprintf(key, sizeof key, "%s%s_p", metric_keys[k], kind.test);
            int f = !in_primary(row, k, a);
            p[f][2 * i + k] = k < kind.n_metrics && !stopped(row)
                              ? number(row, key) : NAN;
            p[!f][2 * i + k] = NAN;
            family[f] += isfinite(p[f][2 * i + k]);
        }
    for (int f = 0; f < 2; f++) {
        (f ? bf_stats_bh : bf_stats_holm)(p[f], (int)(2 * n), adj);
        json_array_foreach(rows, i, row)
            for (int k = 0; k < kind.n_metrics; k++) {
                snprintf(key, sizeof key, "%s%s_p", metric_keys[k],
                         kind.test);
                if (!json_object_get(row, key) || stopped(row) ||
                    f != !in_primary(row, k, a))
                    continue;
                snprintf(key, sizeof key, "%s%s_p_adjusted", metric_keys[k],
                         kind.test);
                set_number(row, key, adj[2 * i + k]);
                snprintf(key, sizeof key, "%s%s_correction", metric_keys[k],
                         kind.test);
                json_object_set_new(row, key, json_string(
                    f ? "benjamini-hochberg" : "holm"));
            }
    }
    free(p[0]);
    free(p[1]);
    free(adj);
}

/* "+12.5%": 3 significant digits, whole numbers from 1000% up (never an
 * exponent). */
static void percent(char *buf, size_t cap, double x)
{
    snprintf(buf, cap, fabs(x) < 1000 ? "%+.3g%%" : "%+.0f%%", x);
}

/* "×0.91 (-9.1%) [×0.8, ×1.03]": a ratio as a factor and a percent change,
 * with its interval if any; never past -100%. */
static void ratio_text(char *buf, size_t cap, double ratio, double lo, double hi)
{
    char pct[32];
    percent(pct, sizeof pct, 100.0 * (ratio - 1.0));
    if (isfinite(lo))
        snprintf(buf, cap, "×%.3g (%s) [×%.3g, ×%.3g]", ratio, pct, lo, hi);
    else
        snprintf(buf, cap, "×%.3g (%s)", ratio, pct);
}

/* "p=0.012 p_adj=0.048 (Holm) ", the correction named as it is short. */
static int p_text(char *buf, size_t cap, const json_t *row, const char *metric)
{
    char key[64];
    snprintf(key, sizeof key, "%s_p", metric);
    double p = number(row, key);
    snprintf(key, sizeof key, "%s_p_adjusted", metric);
    double adj = number(row, key);
    snprintf(key, sizeof key, "%s_correction", metric);
    const char *c = json_string_value(json_object_get(row, key));
    return snprintf(buf, cap, "p=%.2g p_adj=%.2g (%s) ", p, adj,
                    c && !strcmp(c, "holm") ? "Holm" : "BH");
}

/* "×0.9..×1.11": the equivalence region of the margin. */
static void margin_text(char *buf, size_t cap, double margin)
{
    snprintf(buf, cap, "×%.3g..×%.3g", 1.0 - margin, 1.0 / (1.0 - margin));
}

/* "p=0.012 p_adj=0.048 (BH) lower", "TOST p=0.004 p_adj=0.02 (BH)
 * equivalent within ×0.9..×1.11", or "undecided: why". */
static void loss_verdict(char *buf, size_t cap, const json_t *row)
{
    double p = number(row, "loss_p"), adj = number(row, "loss_p_adjusted");
    double ratio = number(row, "loss_ratio"), alpha = number(row, "alpha");
    const char *note = json_string_value(json_object_get(row, "loss_note"));
    if (!isfinite(p)) {
        snprintf(buf, cap, "undecided: %s", note ? note : "no interval");
        return;
    }
    if (!(adj < alpha) && number(row, "loss_tost_p_adjusted") < alpha) {
        char region[64];
        margin_text(region, sizeof region,
                    number(row, "equivalence_margin"));
        int n = snprintf(buf, cap, "TOST ");
        n += p_text(buf + n, cap - n, row, "loss_tost");
        snprintf(buf + n, cap - n, "equivalent within %s", region);
        return;
    }
    int n = p_text(buf, cap, row, "loss");
    if (adj < alpha)
        snprintf(buf + n, cap - n, ratio < 1 ? "lower" : "higher");
    else
        snprintf(buf + n, cap - n, "undecided: about %lld seeds would %s",
                 (long long)json_integer_value(json_object_get(
                     row, "loss_seeds_needed")),
                 strcmp(json_string_value(json_object_get(
                            row, "loss_seeds_test")), "equivalence")
                     ? "decide" : "show equivalence");
}

/* A t verdict needs an estimable seed variance; without it the exact
 * McNemar test on the pooled discordant examples decides, which from
 * per-seed counts alone is only a lower bound on p (per-example outcomes
 * give it exactly). */
static void accuracy_verdict(char *buf, size_t cap, const json_t *row)
{
    double p = number(row, "accuracy_p"), adj = number(row, "accuracy_p_adjusted");
    const char *note = json_string_value(json_object_get(row, "accuracy_note"));
    double mcnemar = number(row, "accuracy_mcnemar_p");
    const json_t *disc = json_object_get(row, "accuracy_discordant");
    if (!isfinite(p) && isfinite(mcnemar)) {
        snprintf(buf, cap, "undecided: %s; exact McNemar p >= %.2g from the "
                           "counts (needs per-example outcomes)", note, mcnemar);
        return;
    }
    if (!isfinite(p)) {
        snprintf(buf, cap, "undecided: %s", note && *note ? note : "no seed");
        return;
    }
    int n = 0;
    if (note && *note)
        n = snprintf(buf, cap, "%s, so exact McNemar on %lld vs %lld "
                     "discordant examples: ", note,
                     (long long)json_integer_value(json_array_get(disc, 0)),
                     (long long)json_integer_value(json_array_get(disc, 1)));
    n += p_text(buf + n, cap - (size_t)n, row, "accuracy");
    snprintf(buf + n, cap - (size_t)n, "%s",
             adj >= number(row, "alpha") ? "undecided"
             : number(row, "accuracy_diff") > 0 ? "higher" : "lower");
}

/* The verdict of a comparison whose seeds a rule stopped: the rule's
 * decision first, the fixed-n line after it as descriptive (its own
 * verdict words left out; text is that line, freed here). */
static char *stopped_verdict(const json_t *row, char *text)
{
    const json_t *rule = json_object_get(row, "stopping_rule");
    long long depth = json_integer_value(json_object_get(rule, "eval_depth"));
    char at[48] = "";
    if (depth != json_integer_value(json_object_get(row, "eval_depth")))
        snprintf(at, sizeof at, " at eval depth %lld", depth);
    const char *colon = strstr(text, "): ");
    int head = colon ? (int)(colon - text) + 1 : 0;
    char *out;
    if (asprintf(&out, "%.*s: stopping rule%s (the verdict of record): %s; "
                       "descriptive after its stop, no verdict:%s",
                 head, text, at, json_string_value(json_object_get(
                     rule, "decision")), colon ? colon + 2 : text) < 0)
        abort();
    free(text);
    return out;
}

/* "rope=spectral vs rope=rope, eval depth 16 (paired on 3 shared seeds, n=3 vs 3):
 * loss ×0.91 (-9.1%) [×0.8, ×1.03] p=0.08 p_adj=0.16 undecided: about 7
 * seeds would decide; accuracy +0.120 [+0.050, +0.190] p=... higher;
 * P(improvement) 0.67 [0.094, 0.99]" */
static char *verdict(const json_t *row)
{
    char loss[160], lv[160], av[320], *text = NULL;
    ratio_text(loss, sizeof loss, number(row, "loss_ratio"),
               number(row, "loss_ratio_ci_low"),
               number(row, "loss_ratio_ci_high"));
    if (stopped(row)) {
        snprintf(lv, sizeof lv, "p=%.2g", number(row, "loss_p"));
        snprintf(av, sizeof av, "p=%.2g", number(row, "accuracy_p"));
    } else {
        loss_verdict(lv, sizeof lv, row);
        accuracy_verdict(av, sizeof av, row);
    }
    long long paired = json_integer_value(json_object_get(row, "n_paired"));
    char design[96];
    int len = paired ? snprintf(design, sizeof design, "paired on %lld shared "
                                "seeds, ", paired)
                     : snprintf(design, sizeof design, "Welch on logs, ");
    snprintf(design + len, sizeof design - len, "n=%lld vs %lld",
             (long long)json_integer_value(json_object_get(row, "n")),
             (long long)json_integer_value(json_object_get(row, "n_baseline")));
    /* an interval over examples pooled across seeds says so: it is not
     * at the unit replicated, and is narrower than one at the seeds */
    const char *unit = json_string_value(json_object_get(
        row, "accuracy_diff_ci_unit"));
    const char *pooled = unit && strcmp(unit, "examples") == 0
                         ? " over examples" : "";
    if (asprintf(&text, "%s, eval depth %lld (%s): loss %s %s; "
                        "accuracy %+.3f [%+.3f, %+.3f]%s %s; P(improvement) "
                        "%.2f [%.2f, %.2f]",
                 json_string_value(json_object_get(row, "compared")),
                 (long long)json_integer_value(json_object_get(row,
                                                               "eval_depth")),
                 design, loss, lv, number(row, "accuracy_diff"),
                 number(row, "accuracy_diff_ci_low"),
                 number(row, "accuracy_diff_ci_high"), pooled, av,
                 number(row, "prob_improvement"),
                 number(row, "prob_improvement_ci_low"),
                 number(row, "prob_improvement_ci_high")) < 0)
        abort();
    return stopped(row) ? stopped_verdict(row, text) : text;
}

/* Adjusts the p-values of differences and of equivalence of one stage's
 * rows, then writes each compared row's seed plan (loss_seeds_needed,
 * _test, _family: from its loss ratio's statistics in ratios[], one a
 * row, at the level of its test's family) and its verdict. */
static void judge_stage(json_t *rows, const bf_stats_ratio *ratios,
                        const bf_analysis *a)
{
    int diffs[2] = { 0, 0 }, equivs[2] = { 0, 0 };
    adjust_rows(rows, a, DIFFERENCES, diffs);
    adjust_rows(rows, a, EQUIVALENCES, equivs);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        if (json_object_get(row, "loss_ratio") && stopped(row)) {
            char *text = verdict(row);
            json_object_set_new(row, "verdict", json_string(text));
            free(text);
        } else if (json_object_get(row, "loss_ratio")) {
            int f = !in_primary(row, BF_ANALYSIS_LOSS, a);
            bf_stats_seed_plan plan = bf_stats_seeds_needed(
                &ratios[i], bf_analysis_log_margin(a->equivalence_margin),
                a->alpha, (bf_stats_families){diffs[f], equivs[f]});
            json_object_set_new(row, "loss_seeds_test", json_string(
                plan.equivalence ? "equivalence" : "difference"));
            json_object_set_new(row, "loss_seeds_family",
                                json_integer(plan.family));
            json_object_set_new(row, "loss_seeds_needed",
                                json_integer(plan.seeds));
            char *text = verdict(row);
            json_object_set_new(row, "verdict", json_string(text));
            free(text);
        }
}

/* The stage of a row ("" in a sweep without stages). */
static const char *stage_of(const json_t *row)
{
    const char *s = json_string_value(json_object_get(row, "stage"));
    return s ? s : "";
}

/* Judges the rows stage by stage: each stage's comparisons are families
 * of their own, so a search stage's trials never share a correction with
 * the confirm stage's, and `--where stage=NAME` leaves that stage's
 * adjusted p-values as they are in the whole table. */
static void judge_rows(json_t *rows, const bf_stats_ratio *ratios,
                       const bf_analysis *a)
{
    size_t n = json_array_size(rows), i, j;
    unsigned char *done = bf_xcalloc(n + 1, 1);
    bf_stats_ratio *part_ratios = bf_xcalloc(n + 1, sizeof *part_ratios);
    for (i = 0; i < n; i++) {
        if (done[i])
            continue;
        const char *stage = stage_of(json_array_get(rows, i));
        json_t *part = json_array();
        for (j = i; j < n; j++)
            if (!done[j] && strcmp(stage_of(json_array_get(rows, j)),
                                   stage) == 0) {
                part_ratios[json_array_size(part)] = ratios[j];
                json_array_append(part, json_array_get(rows, j));
                done[j] = 1;
            }
        judge_stage(part, part_ratios, a);
        json_decref(part);
    }
    free(part_ratios);
    free(done);
}

/* The sweep's analysis: block (stored at submission), or the defaults
 * for a sweep without one or a database that predates them. */
static int load_analysis(const bf_sweep_view *v, bf_source *src,
                         bf_analysis *a)
{
    json_t *rows = bf_source_rows_if_any(src, "sweep_analysis", v->sweep_id);
    int rc = rows ? bf_analysis_from_row(a, json_array_get(rows, 0)) : -1;
    if (rows && rc)
        fprintf(stderr, "bifocal: sweep %lld: its stored analysis block "
                        "cannot be read\n", (long long)v->sweep_id);
    json_decref(rows);
    return rc;
}

/* The analysis block's baseline as --baseline would give it, over the
 * grouping fields (one the compared jobs share cannot tell groups apart);
 * NULL when it names none of them.  Caller frees. */
static char *declared_baseline(const bf_sweep_view *v, const bf_analysis *a)
{
    char *arg = NULL;
    size_t len = 0;
    int n = 0;
    FILE *out = open_memstream(&arg, &len);
    const char *field;
    json_t *value;
    json_object_foreach(a->baseline, field, value) {
        if (!grouping_field(v, field, strlen(field)))
            continue;
        char *text = value_text(value);
        fprintf(out, "%s%s=%s", n++ ? "," : "", field, text);
        free(text);
    }
    fclose(out);
    if (n == 0) {
        free(arg);
        return NULL;
    }
    return arg;
}

/* The baseline: --baseline, else the sweep's declared one, else rope=rope
 * (parse_baseline).  A declared one no group of the compared set has
 * leaves it without comparisons, as the default does. */
static int choose_baseline(const bf_sweep_view *v, const bf_analysis *a,
                           const char *arg, baseline *b)
{
    char *declared = arg ? NULL : declared_baseline(v, a);
    int rc = parse_baseline(v, arg ? arg : declared, b);
    if (declared && rc) {
        *b = (baseline){ 0 };
        rc = 0;
    }
    free(declared);
    return rc;
}

/* What compare and report say when there is nothing to compare. */
static void print_none_succeeded(int64_t sweep_id, long long n_jobs)
{
    fprintf(stderr, "bifocal: sweep %lld has no succeeded job yet (%lld "
                    "job(s); see bifocal results %lld)\n",
            (long long)sweep_id, n_jobs, (long long)sweep_id);
}

/* Whether the sweep, whole, has a succeeded job, from the counts of its
 * jobs by status (its index), before anything of them is read: 1, or 0
 * after saying there is none; -1 after printing a problem.  A sweep not
 * there is left to the reading that follows to name. */
static int any_succeeded(bf_source *src, int64_t sweep_id)
{
    json_t *progress;
    if (bf_source_progress(src, sweep_id, &progress))
        return -1;
    json_t *n = json_object_get(progress, "succeeded");
    int any = !progress || !json_is_integer(n) || json_integer_value(n) > 0;
    if (!any)
        print_none_succeeded(sweep_id, json_integer_value(
                                 json_object_get(progress, "total")));
    json_decref(progress);
    return any;
}

int bf_compare_view_load(bf_sweep_view *v, bf_source *src, int64_t sweep_id,
                         const char *by, const char *where,
                         const bf_sweep_hold *h)
{
    *v = (bf_sweep_view){ 0 };
    if (!where && any_succeeded(src, sweep_id) <= 0)
        return -1;
    if (bf_sweep_view_scan(v, src, sweep_id, by, where))
        return -1;
    if (v->n_succeeded == 0) {
        print_none_succeeded(sweep_id, (long long)v->n_jobs);
        return -1;
    }
    return bf_sweep_view_hold(v, src, h);
}

/* bf_compare_rows_of_facts of sorted facts. */
static json_t *compare_rows(const bf_sweep_view *v, bf_source *src,
                           const char *baseline_arg, const job_facts *facts)
{
    bf_analysis a;
    baseline b;
    if (load_analysis(v, src, &a))
        return NULL;
    if (choose_baseline(v, &a, baseline_arg, &b)) {
        bf_analysis_free(&a);
        return NULL;
    }
    cells cs = { 0 };
    json_t *rows = NULL, *rules = bf_adaptive_rows(src, v->sweep_id);
    if (rules && read_cells(v, src, facts, &cs) == 0) {
        rows = json_array();
        bf_stats_ratio *ratios = bf_xcalloc((size_t)cs.n + 1, sizeof *ratios);
        for (int i = 0; i < cs.n; i++)
            json_array_append_new(rows, cell_row(v, &cs, &cs.c[i], &b, &a,
                                                 rules, &ratios[i]));
        judge_rows(rows, ratios, &a);
        free(ratios);
    }
    json_decref(rules);
    free_cells(&cs);
    baseline_free(&b);
    bf_analysis_free(&a);
    return rows;
}

json_t *bf_compare_rows_of_facts(const bf_sweep_view *v, bf_source *src,
                                 const char *baseline_arg,
                                 bf_compare_facts *facts)
{
    sort_facts(facts);
    return compare_rows(v, src, baseline_arg, facts);
}

/* ---- the command -------------------------------------------------------- */

/* "0.123 ± 0.004" (accuracy), "0.123 ×/ 1.4" (loss: geometric mean and
 * the spread factor exp(sd of the logs)). */
static char *mean_sd(const json_t *row, const char *prefix, const char *fmt)
{
    char key[64], *text = NULL;
    snprintf(key, sizeof key, "%s_mean", prefix);
    double mean = number(row, key);
    snprintf(key, sizeof key, "%s_sd", prefix);
    double sd = number(row, key);
    const char *sign = "±";
    if (!json_object_get(row, key)) {
        snprintf(key, sizeof key, "%s_log_sd", prefix);
        sd = exp(number(row, key));
        sign = "×/";
    }
    char m[32], s[32];
    snprintf(m, sizeof m, fmt, mean);
    snprintf(s, sizeof s, fmt, sd);
    if (asprintf(&text, isfinite(sd) ? "%s %s %s" : "%s", m, sign, s) < 0)
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

/* "×0.91 (-9.1%) [×0.8, ×1.03] *": the loss ratio to the baseline,
 * starred when its adjusted p is below alpha. */
static char *versus(const json_t *row)
{
    const char *base = json_string_value(json_object_get(row, "baseline"));
    double ratio = number(row, "loss_ratio");
    if (!base)
        return bf_xstrdup("");
    if (!isfinite(ratio))
        return bf_xstrdup("baseline");
    char shown[128], *text = NULL;
    ratio_text(shown, sizeof shown, ratio, number(row, "loss_ratio_ci_low"),
               number(row, "loss_ratio_ci_high"));
    if (asprintf(&text, "%s%s", shown,
                 number(row, "loss_p_adjusted") < number(row, "alpha")
                 ? " *" : "")
        < 0)
        abort();
    return text;
}

static void set_text(json_t *row, const char *key, char *text)
{
    json_object_set_new(row, key, json_string(text));
    free(text);
}

/* "loss at eval depth 8": the metric and depths of the Holm family into
 * buf ("" when there is none). */
static void holm_family(const json_t *rows, char *buf, size_t cap)
{
    long long depths[64];
    int n = 0, metric = -1;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        for (int k = 0; k < 2; k++) {
            char key[64];
            snprintf(key, sizeof key, "%s_correction", metric_keys[k]);
            const char *c = json_string_value(json_object_get(row, key));
            long long d = json_integer_value(json_object_get(row,
                                                             "eval_depth"));
            int seen = 0;
            for (int j = 0; j < n; j++)
                seen |= depths[j] == d;
            if (!c || strcmp(c, "holm"))
                continue;
            metric = k;
            if (!seen && n < 64)
                depths[n++] = d;
        }
    size_t len = 0;
    buf[0] = '\0';
    for (int j = 0; metric >= 0 && j < n && len < cap; j++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld",
                                j ? ", " : (metric ? "accuracy at eval depth "
                                            : "loss at eval depth "),
                                depths[j]);
}

/* How the verdicts were judged: the methods, the corrections and the
 * family each covers, alpha and the margin (the same on every row). */
static void print_footer(const json_t *rows)
{
    const json_t *first = NULL;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        if (!first && json_object_get(row, "alpha"))
            first = row;
    char holm[160], families[320];
    holm_family(rows, holm, sizeof holm);
    if (holm[0])
        snprintf(families, sizeof families, "Holm (family-wise) within the "
                 "primary family the sweep file declares (%s), "
                 "Benjamini-Hochberg (BH) over every other p", holm);
    else
        snprintf(families, sizeof families, "Benjamini-Hochberg (BH) over "
                 "every p above, one family (the sweep file declares no "
                 "primary comparisons)");
    char region[64];
    margin_text(region, sizeof region, number(first, "equivalence_margin"));
    int trials = 0;
    json_array_foreach(rows, i, row)
        trials |= json_is_true(json_object_get(row, "search_trial"));
    printf("\nLoss: geometric means and ratios, log-scale t-intervals; "
           "accuracy: t-intervals over seeds (one seed: Wilson over its "
           "examples; differences McNemar decides: Newcombe over "
           "examples).  %sSeeds a stopping rule stopped: its verdict, the "
           "rest descriptive.  p_adj, within each stage: %s; "
           "TOST p-values of equivalence within %s corrected alike, in "
           "families of their own; verdicts at alpha %.2g; * marks p_adj < "
           "alpha (docs/results.md).\n", trials ? "A search's trials are "
           "candidates for its selection (below), not comparisons.  " : "",
           families, region, number(first, "alpha"));
}

/* The table: one line per row with mean ± sd and the intervals, then the
 * verdict lines. */
static void print_table(const json_t *rows)
{
    static const char *const columns[] = {
        "group", "eval_depth", "n", "loss", "loss 95% CI", "accuracy",
        "accuracy 95% CI", "train loss", "loss ratio to baseline", NULL };
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
        set_text(s, "loss ratio to baseline", versus(row));
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
    if (header)
        print_footer(rows);
}

/* ---- the compact table (the default) --------------------------------------- */

/* The widest line the default output prints: a terminal of 100 columns
 * shows it whole (issue 44: lines of up to 404). */
#define BF_COMPARE_COLUMNS 100

/* Terminal columns of s up to its end or a newline: a UTF-8 sequence is
 * one. */
static size_t columns_of(const char *s)
{
    size_t n = 0;
    for (; *s && *s != '\n'; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* text wrapped at word boundaries to BF_COMPARE_COLUMNS, each line after
 * the first indented by indent blanks. */
static void print_wrapped(FILE *out, const char *text, int indent)
{
    size_t used = strspn(text, " ");   /* its own indent kept */
    const char *p = text + used;
    fprintf(out, "%*s", (int)used, "");
    for (int first = 1; *p; first = 0) {
        size_t len = strcspn(p, " "), width = 0;
        for (size_t k = 0; k < len; k++)
            width += ((unsigned char)p[k] & 0xC0) != 0x80;
        if (!first && used + 1 + width > BF_COMPARE_COLUMNS) {
            fprintf(out, "\n%*s", indent, "");
            used = (size_t)indent;
        } else if (!first) {
            fputc(' ', out);
            used++;
        }
        fwrite(p, 1, len, out);
        used += width;
        p += len;
        p += strspn(p, " ");
    }
    fputc('\n', out);
}

/* A line too wide, a clause ("; ") to a line, the later ones indented,
 * each wrapped at words if still too wide. */
static void print_clauses(FILE *out, const char *line, int indent)
{
    for (const char *p = line; *p;) {
        const char *end = strstr(p, "; ");
        size_t len = end ? (size_t)(end - p) + 1 : strlen(p);
        char *clause;
        if (asprintf(&clause, "%*s%.*s", p == line ? 0 : indent, "",
                     (int)len, p) < 0)
            abort();
        print_wrapped(out, clause, indent + 2);
        free(clause);
        p += len + (end ? 1 : 0);
    }
}

/* Each line of text (made by a printer into memory) within
 * BF_COMPARE_COLUMNS (print_clauses). */
static void print_lines_fitting(FILE *out, const char *text, int indent)
{
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, "\n");
        char *line = bf_xstrndup(p, len);
        if (columns_of(line) > BF_COMPARE_COLUMNS)
            print_clauses(out, line, indent);
        else
            fprintf(out, "%s\n", line);
        free(line);
        p += len + (p[len] == '\n');
    }
}

/* A label less the "stage=NAME " its section names. */
static const char *without_stage(const json_t *row, const char *key)
{
    const char *label = json_string_value(json_object_get(row, key));
    if (!label)
        return "";
    if (*stage_of(row) && strncmp(label, "stage=", 6) == 0
        && strchr(label, ' '))
        return strchr(label, ' ') + 1;
    return label;
}

/* The baseline every compared row of a stage shares, by label; NULL when
 * they have several (each line then names its own). */
static const char *shared_baseline(const json_t *rows, const char *stage)
{
    const char *shared = NULL;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        if (!json_object_get(row, "verdict") || strcmp(stage_of(row), stage))
            continue;
        const char *b = without_stage(row, "baseline");
        if (shared && strcmp(shared, b) != 0)
            return NULL;
        shared = b;
    }
    return shared;
}

/* "decided at 4/8", "running, 3/8": where a stopping rule
 * (bf_adaptive_json) stands, in seeds released of its most. */
static char *rule_state(const json_t *rule)
{
    const char *state = json_string_value(json_object_get(rule, "state"));
    long long seeds = json_integer_value(json_object_get(rule, "seeds")),
              max = json_integer_value(json_object_get(rule, "seeds_max")),
              at = json_integer_value(json_object_get(rule, "decided_seed"));
    char *text;
    int rc;
    if (!state || strcmp(state, "running") == 0)
        rc = asprintf(&text, "running, %lld/%lld", seeds, max);
    else if (strcmp(state, "undecided") == 0
             || strcmp(state, "cancelled") == 0)
        rc = asprintf(&text, "%s at %lld/%lld", state, at, max);
    else
        rc = asprintf(&text, "decided at %lld/%lld", at, max);
    if (rc < 0)
        abort();
    return text;
}

/* The distinct notes of undecided verdicts without an interval, numbered
 * in order of first use: "(1)" in the table, the note below it. */
static int note_number(json_t *notes, const char *note)
{
    size_t i;
    json_t *n;
    json_array_foreach(notes, i, n)
        if (strcmp(json_string_value(n), note) == 0)
            return (int)i + 1;
    json_array_append_new(notes, json_string(note));
    return (int)json_array_size(notes);
}

/* The verdict of a row in a word or two: the stopping rule's where it
 * stopped the seeds, "undecided, ~N seeds" where more seeds would decide,
 * "undecided (k)" where note k below says why there is no interval. */
static char *short_verdict(const json_t *row, json_t *notes)
{
    const json_t *rule = json_object_get(row, "stopping_rule");
    const char *state = json_string_value(json_object_get(rule, "state"));
    double alpha = number(row, "alpha");
    const char *note = json_string_value(json_object_get(row, "loss_note"));
    char *text;
    int rc;
    if (rule)
        rc = asprintf(&text, "%s (rule)", state && strcmp(state, "running")
                                          && strcmp(state, "cancelled")
                                          ? state : "undecided");
    else if (!isfinite(number(row, "loss_p")))
        rc = asprintf(&text, "undecided (%d)",
                      note_number(notes, note && *note ? note
                                                       : "no interval"));
    else if (number(row, "loss_p_adjusted") < alpha)
        rc = asprintf(&text, "%s", number(row, "loss_ratio") < 1 ? "lower"
                                                                 : "higher");
    else if (number(row, "loss_tost_p_adjusted") < alpha)
        rc = asprintf(&text, "equivalent");
    else
        rc = asprintf(&text, "undecided, ~%lld seeds",
                      (long long)json_integer_value(json_object_get(
                          row, "loss_seeds_needed")));
    if (rc < 0)
        abort();
    return text;
}

/* "[0.7641, 0.9228]" of a row's loss ratio, "" without an interval. */
static char *ratio_interval(const json_t *row)
{
    double lo = number(row, "loss_ratio_ci_low");
    char *text;
    if (!isfinite(lo))
        return bf_xstrdup("");
    if (asprintf(&text, "[%.4g, %.4g]", lo,
                 number(row, "loss_ratio_ci_high")) < 0)
        abort();
    return text;
}

/* The cells of one comparison's line: its variant, against its
 * baseline unless the section names the one they share. */
static json_t *compact_row(const json_t *row, int shared, json_t *notes)
{
    json_t *s = json_object();
    if (shared)
        json_object_set_new(s, "variant", json_string(without_stage(row,
                                                                  "group")));
    else
        json_object_set_new(s, "variant", json_sprintf(
            "%s vs %s", without_stage(row, "group"),
            without_stage(row, "baseline")));
    json_object_set(s, "depth", json_object_get(row, "eval_depth"));
    json_object_set_new(s, "n", json_sprintf(
        "%lld vs %lld",
        (long long)json_integer_value(json_object_get(row, "n")),
        (long long)json_integer_value(json_object_get(row, "n_baseline"))));
    set_number(s, "loss ratio", number(row, "loss_ratio"));
    set_text(s, "95% CI", ratio_interval(row));
    double p_adj = number(row, "loss_p_adjusted");
    if (isfinite(p_adj))
        json_object_set_new(s, "p_adj", json_sprintf("%.3g", p_adj));
    set_text(s, "verdict", short_verdict(row, notes));
    const json_t *rule = json_object_get(row, "stopping_rule");
    if (rule)
        set_text(s, "stopping rule", rule_state(rule));
    return s;
}

/* A table of shown rows that fits BF_COMPARE_COLUMNS: as it is, or with
 * its first column (the long labels) numbered and listed below it. */
static void print_fitting(const json_t *shown, const char *const *columns)
{
    char *text = NULL;
    size_t size = 0, widest = 0;
    FILE *mem = open_memstream(&text, &size);
    bf_format_print(mem, shown, columns, BF_FORMAT_TABLE);
    fclose(mem);
    for (const char *p = text; *p; p += strcspn(p, "\n") + (p[strcspn(
                                        p, "\n")] == '\n')) {
        size_t w = columns_of(p);
        widest = w > widest ? w : widest;
    }
    if (widest <= BF_COMPARE_COLUMNS) {
        fputs(text, stdout);
        free(text);
        return;
    }
    free(text);
    json_t *numbered = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(shown, i, row) {
        json_t *copy = json_copy(row);
        json_object_set_new(copy, columns[0], json_sprintf("#%zu", i + 1));
        json_array_append_new(numbered, copy);
    }
    bf_format_print(stdout, numbered, columns, BF_FORMAT_TABLE);
    json_decref(numbered);
    json_array_foreach(shown, i, row) {
        char *line;
        if (asprintf(&line, "#%zu %s", i + 1, json_string_value(
                         json_object_get(row, columns[0]))) < 0)
            abort();
        print_wrapped(stdout, line, 4);
        free(line);
    }
}

/* The comparisons of one stage ("" for none): a line each. */
static void print_comparisons(const json_t *rows, const char *stage,
                              json_t *notes)
{
    static const char *const columns[] = {
        "variant", "depth", "n", "loss ratio", "95% CI", "p_adj", "verdict",
        "stopping rule", NULL };
    const char *baseline = shared_baseline(rows, stage);
    json_t *shown = json_array();
    int rules = 0;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        if (json_object_get(row, "verdict")
            && strcmp(stage_of(row), stage) == 0) {
            json_array_append_new(shown, compact_row(row, baseline != NULL,
                                                     notes));
            rules |= stopped(row);
        }
    if (json_array_size(shown) == 0) {
        json_decref(shown);
        return;
    }
    char *head;
    if ((*stage ? asprintf(&head, "stage %s, %s%s:", stage,
                           baseline ? "against " : "",
                           baseline ? baseline : "comparisons")
                : asprintf(&head, "%s%s:", baseline ? "Against " : "Comparisons",
                           baseline ? baseline : "")) < 0)
        abort();
    print_wrapped(stdout, head, 4);
    free(head);
    const char *const without_rule[] = { columns[0], columns[1], columns[2],
        columns[3], columns[4], columns[5], columns[6], NULL };
    print_fitting(shown, rules ? columns : without_rule);
    json_decref(shown);
}

/* The most trials of a search the table lists; --verbose lists all. */
#define BF_COMPARE_TRIALS_SHOWN 5

static int by_loss_mean(const void *a, const void *b)
{
    double x = number(*(json_t *const *)a, "loss_mean"),
           y = number(*(json_t *const *)b, "loss_mean");
    return (x > y) - (x < y);
}

/* The trials of a stage's search its prune rule stopped, by the
 * selections (bf_selections_read) of its cells. */
static size_t pruned_in(const json_t *chosen, const char *stage)
{
    size_t i, n = 0;
    json_t *cell;
    json_array_foreach(chosen, i, cell) {
        const char *s = json_string_value(json_object_get(cell, "stage"));
        if (strcmp(s ? s : "", stage) == 0)
            n += json_array_size(json_object_get(cell, "pruned"));
    }
    return n;
}

/* A search stage's trials at one eval depth, best loss first: its values
 * and final eval loss, the first BF_COMPARE_TRIALS_SHOWN, and how many its
 * prune rule stopped (chosen: the selections). */
static void print_search(const json_t *rows, const json_t *chosen,
                         const char *stage, long long depth)
{
    size_t i, n = 0;
    json_t *row;
    json_t **trials = bf_xcalloc(json_array_size(rows) + 1, sizeof *trials);
    json_array_foreach(rows, i, row)
        if (json_is_true(json_object_get(row, "search_trial"))
            && strcmp(stage_of(row), stage) == 0
            && json_integer_value(json_object_get(row, "eval_depth")) == depth)
            trials[n++] = row;
    qsort(trials, n, sizeof *trials, by_loss_mean);
    size_t pruned = pruned_in(chosen, stage);
    char stopped[64] = "";
    if (pruned)
        snprintf(stopped, sizeof stopped, " (%zu more pruned: Selections)",
                 pruned);
    printf("search%s%s: %zu trials finished%s, final eval loss at depth "
           "%lld, best first%s\n", *stage ? " " : "", stage, n, stopped,
           depth, n > BF_COMPARE_TRIALS_SHOWN ? " (--verbose lists all)" : "");
    json_t *shown = json_array();
    for (i = 0; i < n && i < BF_COMPARE_TRIALS_SHOWN; i++) {
        const char *label = json_string_value(json_object_get(trials[i],
                                                              "group"));
        if (*stage && strncmp(label, "stage=", 6) == 0 && strchr(label, ' '))
            label = strchr(label, ' ') + 1;
        json_t *s = json_pack("{s:s}", "trial", label);
        set_number(s, "loss", number(trials[i], "loss_mean"));
        json_array_append_new(shown, s);
    }
    static const char *const columns[] = { "trial", "loss", NULL };
    print_fitting(shown, columns);
    json_decref(shown);
    free(trials);
}

/* Each search's trials, by stage and depth in order of first row. */
static void print_searches(const json_t *rows, const json_t *chosen)
{
    json_t *done = json_object();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        if (!json_is_true(json_object_get(row, "search_trial")))
            continue;
        long long depth = json_integer_value(json_object_get(row,
                                                             "eval_depth"));
        char *key;
        if (asprintf(&key, "%lld %s", depth, stage_of(row)) < 0)
            abort();
        if (!json_object_get(done, key)) {
            json_object_set_new(done, key, json_true());
            print_search(rows, chosen, stage_of(row), depth);
            putchar('\n');
        }
        free(key);
    }
    json_decref(done);
}

/* The stages of the compared rows, in order of first row ("" for none). */
static json_t *stages_compared(const json_t *rows)
{
    json_t *stages = json_array();
    size_t i, j;
    json_t *row, *s;
    json_array_foreach(rows, i, row) {
        int seen = !json_object_get(row, "verdict");
        json_array_foreach(stages, j, s)
            seen |= strcmp(json_string_value(s), stage_of(row)) == 0;
        if (!seen)
            json_array_append_new(stages, json_string(stage_of(row)));
    }
    return stages;
}

/* Each group's seeds in a line, when nothing is compared (no baseline). */
static void print_groups(const json_t *rows)
{
    static const char *const columns[] = {
        "group", "depth", "n", "loss", "loss 95% CI", "accuracy", NULL };
    json_t *shown = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        if (json_is_true(json_object_get(row, "search_trial")))
            continue;
        json_t *s = json_pack("{s:O, s:O, s:O}", "group",
                              json_object_get(row, "group"), "depth",
                              json_object_get(row, "eval_depth"), "n",
                              json_object_get(row, "n"));
        set_number(s, "loss", number(row, "loss_mean"));
        set_text(s, "loss 95% CI", interval(row, "loss", "%.4g"));
        set_number(s, "accuracy", number(row, "accuracy_mean"));
        json_array_append_new(shown, s);
    }
    if (json_array_size(shown))
        print_fitting(shown, columns);
    json_decref(shown);
}

/* What the table's columns and verdicts mean, once below it. */
static void print_legend(const json_t *rows, const json_t *notes)
{
    const json_t *first = NULL;
    size_t i;
    json_t *row;
    int rules = 0, staged = 0;
    json_array_foreach(rows, i, row) {
        if (!first && json_object_get(row, "alpha"))
            first = row;
        rules |= stopped(row);
        staged |= *stage_of(row) != '\0';
    }
    char holm[160], region[64], *text;
    holm_family(rows, holm, sizeof holm);
    margin_text(region, sizeof region, number(first, "equivalence_margin"));
    if (asprintf(&text, "loss ratio: the variant's geometric-mean final "
                 "eval loss over its baseline's (below 1: lower), paired on "
                 "the seeds both ran (Welch on logs where none), with its "
                 "95%% log-scale t-interval.  p_adj: the loss ratio's p "
                 "adjusted%s, %s%s%s.  Verdict at alpha "
                 "%.3g: lower or higher when p_adj < alpha, equivalent when "
                 "the TOST p within %s is; otherwise undecided, and ~N seeds "
                 "is about how many seeds per group would decide.%s  "
                 "Accuracy, P(improvement) and every p: --verbose; every "
                 "number: --format json (docs/results.md).",
                 staged ? " within each stage" : "", holm[0] ? "Holm (family-wise) over the primary family ("
                         : "Benjamini-Hochberg over every comparison",
                 holm, holm[0] ? "), Benjamini-Hochberg over the rest" : "",
                 number(first, "alpha"), region,
                 rules ? "  stopping rule: the anytime-valid rule of the "
                         "sweep's adaptive seeds; where it stopped the seeds "
                         "its decision is the verdict (rule), and the "
                         "fixed-n numbers are descriptive." : "") < 0)
        abort();
    putchar('\n');
    print_wrapped(stdout, text, 0);
    free(text);
    json_array_foreach(notes, i, row) {
        char *note;
        if (asprintf(&note, "(%zu) %s: no interval, add seeds.", i + 1,
                     json_string_value(row)) < 0)
            abort();
        print_wrapped(stdout, note, 4);
        free(note);
    }
}

/* The default table: each search in brief, one line per comparison by
 * stage, what they mean once below, within BF_COMPARE_COLUMNS (chosen:
 * the selections). */
static void print_compact(const json_t *rows, const json_t *chosen)
{
    print_searches(rows, chosen);
    json_t *stages = stages_compared(rows), *notes = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(stages, i, s) {
        if (i)
            putchar('\n');
        print_comparisons(rows, json_string_value(s), notes);
    }
    if (json_array_size(stages))
        print_legend(rows, notes);
    else
        print_groups(rows);
    json_decref(notes);
    json_decref(stages);
}

/* The selections of a sweep's searches, each line wrapped. */
static void print_selections_wrapped(const json_t *chosen)
{
    char *text = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&text, &size);
    bf_selections_print(mem, chosen);
    fclose(mem);
    print_lines_fitting(stdout, text, 4);
    free(text);
}

int bf_compare_print(bf_source *src, int64_t sweep_id, const char *by,
                     const char *where, const char *baseline,
                     bf_row_format fmt, int verbose)
{
    bf_sweep_view v;
    json_t *rows = NULL;
    /* the succeeded jobs' facts, not their rows: memory per job compact */
    job_facts facts = { 0 };
    bf_sweep_hold h = { .status = "succeeded",
                        .max_groups = BF_COMPARE_MAX_GROUPS,
                        .on_job = bf_compare_facts_add, .ctx = &facts };
    if (bf_compare_view_load(&v, src, sweep_id, by, where, &h) == 0)
        rows = bf_compare_rows_of_facts(&v, src, baseline, &facts);
    free(facts.f);
    json_t *chosen = rows && fmt == BF_FORMAT_TABLE
                     ? bf_selections_read(src, sweep_id) : NULL;
    if (rows && fmt == BF_FORMAT_TABLE && verbose) {
        print_table(rows);
        bf_selections_print(stdout, chosen);
    } else if (rows && fmt == BF_FORMAT_TABLE) {
        print_compact(rows, chosen);
        print_selections_wrapped(chosen);
    } else if (rows)
        bf_format_print(stdout, rows, NULL, fmt);
    int status = rows ? 0 : 1;
    json_decref(chosen);
    json_decref(rows);
    bf_sweep_view_clear(&v);
    return status;
}
