/* The `analysis:` block of a sweep file, checked on its own (analysis.h). */
#include "analysis.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "job_config.h"
#include "yaml_json.h"

static const char *const metric_names[] = {"loss", "accuracy"};

double bf_analysis_log_margin(double margin)
{
    return -log1p(-margin);
}

const char *bf_analysis_metric_name(bf_analysis_metric m)
{
    return metric_names[m];
}

/* The metric named name, or -1 for any other name. */
static int metric_from_name(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (name && strcmp(name, metric_names[i]) == 0)
            return i;
    return -1;
}

void bf_analysis_defaults(bf_analysis *a)
{
    *a = (bf_analysis){.equivalence_margin = BF_ANALYSIS_MARGIN,
                       .alpha = BF_ANALYSIS_ALPHA};
}

void bf_analysis_free(bf_analysis *a)
{
    json_decref(a->baseline);
    a->baseline = NULL;
    free(a->baseline_label);
    a->baseline_label = NULL;
}

/* Where a problem is: the block's file, the line of `ptr` in it. */
typedef struct where {
    const char *file;
    const json_t *lines;
} where;

static int line_of(const where *w, const char *ptr)
{
    int line = bf_yaml_line(w->lines, ptr);
    return line ? line : bf_yaml_line(w->lines, "");
}

/* Only the keys of `allowed` (NULL-terminated) in obj. */
static int check_keys(const where *w, const json_t *obj, const char *ptr,
                      const char *what, const char *const *allowed,
                      bf_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0)
            i++;
        if (allowed[i])
            continue;
        char at[128], field[128];
        snprintf(at, sizeof at, "%s/%s", ptr, key);
        snprintf(field, sizeof field, "%s.%s", what, key);
        return bf_error_set(err, w->file, line_of(w, at), field,
                            "unknown key '%s' in %s", key, what);
    }
    return 0;
}

static int parse_primary(bf_analysis *a, const where *w, const json_t *p,
                         bf_error *err)
{
    static const char *const keys[] = {"metric", "eval_depth", NULL};
    if (!json_is_object(p))
        return bf_error_set(err, w->file, line_of(w, "/primary"),
                            "analysis.primary", "must be a mapping {metric: "
                            "loss|accuracy, eval_depth: N}");
    if (check_keys(w, p, "/primary", "analysis.primary", keys, err) < 0)
        return -1;
    const json_t *metric = json_object_get(p, "metric");
    int m = metric_from_name(json_string_value(metric));
    if (m < 0) {
        char *text = json_dumps(metric, JSON_ENCODE_ANY | JSON_COMPACT);
        bf_error_set(err, w->file, line_of(w, "/primary/metric"),
                     "analysis.primary.metric", "%s must be loss or accuracy",
                     text ? text : "(missing)");
        free(text);
        return -1;
    }
    const json_t *depth = json_object_get(p, "eval_depth");
    if (depth && (!json_is_integer(depth) || json_integer_value(depth) < 1 ||
                  json_integer_value(depth) > BF_MAX_DEPTH))
        return bf_error_set(err, w->file, line_of(w, "/primary/eval_depth"),
                            "analysis.primary.eval_depth", "must be an "
                            "integer in [1, %d]", BF_MAX_DEPTH);
    a->has_primary = 1;
    a->primary_metric = (bf_analysis_metric)m;
    a->primary_eval_depth = depth ? (int)json_integer_value(depth) : 0;
    return 0;
}

/* {label: NAME}: a zip entry's name, whose values the sweep parser finds. */
static int parse_label(bf_analysis *a, const where *w, const json_t *label,
                       bf_error *err)
{
    const char *name = json_string_value(label);
    if (!name || !name[0])
        return bf_error_set(err, w->file, line_of(w, "/baseline/label"),
                            "analysis.baseline.label", "must be the name of "
                            "a zip entry (a zip's `label` list)");
    a->baseline_label = bf_xstrdup(name);
    return 0;
}

/* {field: value}: job-config fields, each value as the job would take it,
 * and perhaps a zip entry's label. */
static int parse_baseline(bf_analysis *a, const where *w, const json_t *b,
                          bf_error *err)
{
    if (!json_is_object(b) || json_object_size(b) == 0)
        return bf_error_set(err, w->file, line_of(w, "/baseline"),
                            "analysis.baseline", "must be a non-empty mapping "
                            "of swept fields to the baseline's values (or "
                            "{label: NAME} of a zip entry)");
    a->baseline = json_object();
    const char *field;
    json_t *value;
    json_object_foreach((json_t *)b, field, value) {
        if (!strcmp(field, "label")) {
            if (parse_label(a, w, value, err) < 0) {
                bf_analysis_free(a);
                return -1;
            }
            continue;
        }
        bf_error inner = {0};
        json_t *canon = bf_job_config_canonical_value(field, value, &inner);
        if (!canon) {
            char at[160], name[160];
            snprintf(at, sizeof at, "/baseline/%s", field);
            snprintf(name, sizeof name, "analysis.baseline.%s", field);
            bf_analysis_free(a);
            return bf_error_set(err, w->file, line_of(w, at), name, "%s",
                                bf_error_body(&inner));
        }
        json_object_set_new(a->baseline, field, canon);
    }
    return 0;
}

/* A real in (lo, hi] (or (lo, hi) when open), or its default if absent. */
static int parse_level(const where *w, const json_t *block, const char *key,
                       double hi, int open, double *out, bf_error *err)
{
    const json_t *v = json_object_get(block, key);
    if (!v)
        return 0;
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x > 0) || x > hi || (open && x == hi)) {
        char at[64], field[64];
        snprintf(at, sizeof at, "/%s", key);
        snprintf(field, sizeof field, "analysis.%s", key);
        return bf_error_set(err, w->file, line_of(w, at), field, "must be a "
                            "number in (0, %g%c", hi, open ? ')' : ']');
    }
    *out = x;
    return 0;
}

int bf_analysis_parse(bf_analysis *a, const json_t *block, const char *file,
                      const json_t *lines, bf_error *err)
{
    static const char *const keys[] = {"primary", "baseline",
                                       "equivalence_margin", "alpha", NULL};
    where w = {file, lines};
    bf_analysis_defaults(a);
    if (!json_is_object(block))
        return bf_error_set(err, file, line_of(&w, ""), "analysis", "must be "
                            "a mapping (primary, baseline, "
                            "equivalence_margin, alpha)");
    const json_t *primary = json_object_get(block, "primary");
    const json_t *baseline = json_object_get(block, "baseline");
    if (check_keys(&w, block, "", "analysis", keys, err) < 0 ||
        (primary && parse_primary(a, &w, primary, err) < 0) ||
        parse_level(&w, block, "equivalence_margin", 1, 1,
                    &a->equivalence_margin, err) < 0 ||
        parse_level(&w, block, "alpha", 0.5, 0, &a->alpha, err) < 0)
        return -1;
    return baseline ? parse_baseline(a, &w, baseline, err) : 0;
}

json_t *bf_analysis_to_json(const bf_analysis *a)
{
    json_t *primary = json_null();
    if (a->has_primary) {
        primary = json_pack("{ss}", "metric",
                            bf_analysis_metric_name(a->primary_metric));
        if (a->primary_eval_depth)
            json_object_set_new(primary, "eval_depth",
                                json_integer(a->primary_eval_depth));
    }
    return json_pack("{sosOsfsf}", "primary", primary, "baseline",
                     a->baseline ? a->baseline : json_null(),
                     "equivalence_margin", a->equivalence_margin,
                     "alpha", a->alpha);
}

int bf_analysis_from_row(bf_analysis *a, const json_t *row)
{
    bf_analysis_defaults(a);
    if (!row)
        return 0;
    const json_t *metric = json_object_get(row, "primary_metric");
    const json_t *depth = json_object_get(row, "primary_eval_depth");
    const char *baseline = json_string_value(json_object_get(row,
                                                             "baseline"));
    int m = metric_from_name(json_string_value(metric));
    json_t *b = baseline ? json_loads(baseline, 0, NULL) : NULL;
    bf_analysis r = {
        .has_primary = m >= 0, .primary_metric = m >= 0 ? m : 0,
        .primary_eval_depth = (int)json_integer_value(depth),
        .baseline = b,
        .equivalence_margin = json_number_value(json_object_get(
            row, "equivalence_margin")),
        .alpha = json_number_value(json_object_get(row, "alpha")) };
    if ((m < 0 && metric && !json_is_null(metric)) || (baseline && !json_is_object(b))
        || !(r.equivalence_margin > 0 && r.equivalence_margin < 1)
        || !(r.alpha > 0 && r.alpha <= 0.5)) {
        json_decref(b);
        return -1;
    }
    *a = r;
    return 0;
}
