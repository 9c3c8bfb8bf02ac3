/* adaptive: a comparison of adaptive seeds in words.  See adaptive.h. */
#include "adaptive.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "confseq.h"
#include "db.h"
#include "format.h"
#include "sweep_view.h"

/* "lr=1e-05 freq_lr_mult=1": config's values of the fields in which it
 * differs from other, numbers at the terminal's digits (a label, not a
 * record); with effective, only those that change what its rope variant
 * trains. */
static char *fields_label(const json_t *config, const json_t *other,
                          int effective)
{
    size_t cap = 256, len = 0;
    char *text = bf_xcalloc(1, cap);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)config, key, value) {
        if (json_equal(value, json_object_get(other, key))
            || (effective && !bf_sweep_view_has_effect(config, key)))
            continue;
        char item[256], *shown = bf_format_cell(value, 0);
        snprintf(item, sizeof item, "%s=%s", key, shown);
        free(shown);
        if (len + strlen(item) + 2 > cap) {
            cap = 2 * (len + strlen(item) + 2);
            text = bf_xrealloc(text, cap);
        }
        len += (size_t)snprintf(text + len, cap - len, "%s%s", len ? " " : "",
                                item);
    }
    return text;
}

/* The fields of config that differ from other's and have an effect; where
 * none has one (freq_lr_mult compared on fixed RoPE), those that differ. */
static char *label(const json_t *config, const json_t *other)
{
    char *text = fields_label(config, other, 1);
    if (*text)
        return text;
    free(text);
    return fields_label(config, other, 0);
}

/* The two labels, naming only the fields in which the cells differ. */
static void labels(const json_t *row, char **variant, char **baseline)
{
    json_t *v = bf_source_json_object(row, "variant_config");
    json_t *b = bf_source_json_object(row, "baseline_config");
    *variant = label(v, b);
    *baseline = label(b, v);
    json_decref(v);
    json_decref(b);
}

static long long integer(const json_t *row, const char *key)
{
    return (long long)json_integer_value(json_object_get(row, key));
}

/* exp of a log-scale bound; NAN when unbounded (null). */
static double ratio(const json_t *row, const char *key)
{
    const json_t *v = json_object_get(row, key);
    return json_is_number(v) ? exp(json_number_value(v)) : NAN;
}

/* The row's rule: t where it has none (a database before migration 26). */
static const char *rule_of(const json_t *row)
{
    const char *rule = json_string_value(json_object_get(row, "rule"));
    return rule ? rule : bf_confseq_rule_name(BF_CONFSEQ_RULE_T);
}

/* The t rule's diagnostic: its log ratios' skewness G1 in standard errors
 * under Gaussian values, where past 2 (a two-sided test at about 5%);
 * else 0 (the sign rule, fewer than 3 pairs, no skewness stored). */
static double skew_z(const json_t *row)
{
    const json_t *g1 = json_object_get(row, "skewness");
    long long n = integer(row, "n_pairs");
    if (strcmp(rule_of(row), "t") != 0 || !json_is_number(g1) || n < 3)
        return 0;
    double z = json_number_value(g1) / bf_confseq_skewness_se((int)n);
    return fabs(z) > 2 ? z : 0;
}

/* "decided higher at seed 4, loss ratio in [×1.31, ×1.62] (95% sequence)"
 * or "still running, 3 seeds of at most 20, loss ratio not bounded yet";
 * the sign rule's interval is of the median, and said so; a t rule whose
 * log ratios look skewed is told what to do about it.  Caller frees. */
static char *decision(const json_t *row)
{
    char where[96], interval[128], hint[192] = "";
    const char *state = json_string_value(json_object_get(row, "state"));
    if (!state)
        state = "?";
    if (strcmp(state, "running") == 0)
        snprintf(where, sizeof where, "still running, %lld seeds of at most "
                 "%lld", integer(row, "released"), integer(row, "seeds_max"));
    else if (strcmp(state, "undecided") == 0)
        snprintf(where, sizeof where, "undecided at seed %lld (max)",
                 integer(row, "decided_seed"));
    else if (strcmp(state, "cancelled") == 0)
        snprintf(where, sizeof where, "cancelled undecided at seed %lld "
                 "(sweep cancelled)", integer(row, "decided_seed"));
    else
        snprintf(where, sizeof where, "decided %s at seed %lld", state,
                 integer(row, "decided_seed"));
    double lo = ratio(row, "ci_low"), hi = ratio(row, "ci_high");
    /* The level, where the row has it: a stage's family makes it other
     * than the 95% every other interval of the project has. */
    const json_t *alpha = json_object_get(row, "alpha");
    int sign = strcmp(rule_of(row), "t") != 0;
    char level[48] = "";
    if (json_is_number(alpha))
        snprintf(level, sizeof level, " (%.4g%% sequence%s)",
                 100 * (1 - json_number_value(alpha)), sign ? ", sign rule"
                 : "");
    else if (sign)
        snprintf(level, sizeof level, " (sign rule)");
    if (isfinite(lo) && isfinite(hi))
        snprintf(interval, sizeof interval, "%sloss ratio in [×%.3g, ×%.3g]%s",
                 sign ? "median " : "", lo, hi, level);
    else
        snprintf(interval, sizeof interval, "%sloss ratio not bounded yet%s",
                 sign ? "median " : "", level);
    double z = skew_z(row);
    if (z != 0)
        snprintf(hint, sizeof hint, "; log ratios look skewed (G1 %.2g, %.2g "
                 "standard errors from 0 over %lld pairs): the t rule assumes "
                 "Gaussian ones, consider seeds.rule: sign",
                 json_number_value(json_object_get(row, "skewness")), fabs(z),
                 integer(row, "n_pairs"));
    char *text;
    if (asprintf(&text, "%s, %s%s", where, interval, hint) < 0)
        abort();
    return text;
}

char *bf_adaptive_line(const json_t *row)
{
    char *variant, *baseline, *what = decision(row), *line;
    labels(row, &variant, &baseline);
    if (asprintf(&line, "%s vs %s, depth %lld: %s", variant, baseline,
                 integer(row, "eval_depth"), what) < 0)
        abort();
    free(what);
    free(variant);
    free(baseline);
    return line;
}

static json_t *number_or_null(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

json_t *bf_adaptive_json(const json_t *row)
{
    char *variant, *baseline;
    labels(row, &variant, &baseline);
    const json_t *decided = json_object_get(row, "decided_seed");
    json_t *out = json_pack("{s:s, s:s, s:I, s:O, s:I, s:I, s:O, s:o, s:o}",
        "variant", variant, "baseline", baseline,
        "eval_depth", (json_int_t)integer(row, "eval_depth"),
        "state", json_object_get(row, "state"),
        "seeds", (json_int_t)integer(row, "released"),
        "seeds_max", (json_int_t)integer(row, "seeds_max"),
        "decided_seed", json_is_integer(decided) ? decided : json_null(),
        "ratio_low", number_or_null(ratio(row, "ci_low")),
        "ratio_high", number_or_null(ratio(row, "ci_high")));
    /* the level it was decided at; null from a database not yet migrated
     * to 22, whose view has no such column */
    const json_t *alpha = json_object_get(row, "alpha");
    json_object_set_new(out, "alpha", json_is_number(alpha)
                        ? json_real(json_number_value(alpha)) : json_null());
    /* the rule (t before migration 26) and its diagnostic */
    const json_t *g1 = json_object_get(row, "skewness");
    json_object_set_new(out, "rule", json_string(rule_of(row)));
    json_object_set_new(out, "skewness", json_is_number(g1)
                        ? json_real(json_number_value(g1)) : json_null());
    json_object_set_new(out, "skewed", json_boolean(skew_z(row) != 0));
    char *text = bf_adaptive_line(row), *what = decision(row);
    json_object_set_new(out, "text", json_string(text));
    json_object_set_new(out, "decision", json_string(what));
    free(what);
    free(text);
    free(variant);
    free(baseline);
    return out;
}

json_t *bf_adaptive_read(bf_source *src, int64_t sweep_id)
{
    /* a database file from before migration 17 has no such view */
    json_t *rows = bf_source_rows_if_any(src, "adaptive_seeds", sweep_id);
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        json_array_append_new(out, bf_adaptive_json(row));
    json_decref(rows);
    return out;
}

json_t *bf_adaptive_rows(bf_source *src, int64_t sweep_id)
{
    json_t *rows = bf_source_rows_if_any(src, "adaptive_seeds", sweep_id);
    size_t i;
    json_t *row;
    /* read as the view's configs are (bf_db_config_as_read), so that
     * bf_adaptive_find compares like with like */
    static const char *const keys[] = { "variant_config", "baseline_config" };
    json_array_foreach(rows, i, row)
        for (int k = 0; k < 2; k++) {
            json_t *config = bf_source_json_object(row, keys[k]);
            bf_db_config_as_read(config);
            json_object_set_new(row, keys[k], config);
        }
    return rows;
}

const json_t *bf_adaptive_find(const json_t *rows, const json_t *variant,
                               const json_t *baseline, const char *stage,
                               int eval_depth)
{
    size_t i;
    const json_t *row;
    const char *none = "";
    json_array_foreach(rows, i, row) {
        const char *s = json_string_value(json_object_get(row, "stage"));
        if (strcmp(s ? s : none, stage ? stage : none) == 0
            && (!eval_depth || integer(row, "eval_depth") == eval_depth)
            && json_equal(json_object_get(row, "variant_config"), variant)
            && json_equal(json_object_get(row, "baseline_config"), baseline))
            return row;
    }
    return NULL;
}
