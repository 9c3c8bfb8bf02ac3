/* selections: a search's selections in words.  See selections.h. */
#include "selections.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "format.h"

/* Appends "key=value" (numbers at the terminal's digits: a label, not a
 * record). */
static size_t append_item(char *buf, size_t len, size_t cap, const char *key,
                          const json_t *value)
{
    char *text = bf_format_cell(value, 0);
    int n = snprintf(buf + len, cap - len, "%s%s=%s", len ? " " : "", key,
                     text);
    free(text);
    return n > 0 && (size_t)n < cap - len ? len + (size_t)n : len;
}

/* The key of a row's cell among the selections' (select_id, grp: a cell
 * of trial_selections or search_trials). */
static void cell_key(const json_t *row, char key[48])
{
    snprintf(key, 48, "%lld %lld", (long long)json_integer_value(
                 json_object_get(row, "select_id")),
             (long long)json_integer_value(json_object_get(row, "grp")));
}

/* The key of a row's selection in varying_fields. */
static void select_key(const json_t *row, char key[32])
{
    snprintf(key, 32, "%lld", (long long)json_integer_value(
                                  json_object_get(row, "select_id")));
}

/* The fields, but the searched ones, in which the cells of each selection
 * differ: {select_id: {field: true}} (new reference). */
static json_t *varying_fields(const json_t *rows)
{
    json_t *out = json_object(), *first = NULL;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        char sid[32];
        select_key(row, sid);
        json_t *set = json_object_get(out, sid);
        if (!set) {
            json_object_set_new(out, sid, set = json_object());
            first = row;
        }
        json_t *config = bf_source_json_object(row, "trial_config");
        json_t *other = bf_source_json_object(first, "trial_config");
        json_t *values = bf_source_json_object(row, "trial_values");
        const char *key;
        json_t *value;
        json_object_foreach(config, key, value)
            if (!json_object_get(values, key) &&
                !json_equal(value, json_object_get(other, key)))
                json_object_set_new(set, key, json_true());
        json_decref(config);
        json_decref(other);
        json_decref(values);
    }
    return out;
}

/* A row's cell: its values of the fields that vary among its selection's
 * cells ("rope=spectral"), or "one cell". */
static void cell_label(const json_t *row, const json_t *varying, char *buf,
                       size_t cap)
{
    char sid[32];
    select_key(row, sid);
    const json_t *set = json_object_get(varying, sid);
    json_t *config = bf_source_json_object(row, "trial_config");
    size_t len = 0;
    buf[0] = '\0';
    const char *key;
    json_t *value;
    json_object_foreach(config, key, value)
        if (json_object_get(set, key))
            len = append_item(buf, len, cap, key, value);
    if (!len)
        snprintf(buf, cap, "one cell");
    json_decref(config);
}

static json_t *trial_of(const json_t *row)
{
    return json_pack("{s:O, s:O, s:O, s:o}",
                     "job_id", json_object_get(row, "job_id"),
                     "trial", json_object_get(row, "trial"),
                     "value", json_object_get(row, "value"),
                     "values", bf_source_json_object(row, "trial_values"));
}

/* "lr=0.0012 warmup_steps=10" */
static void values_text(const json_t *trial, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(trial, "values"), key, value)
        len = append_item(buf, len, cap, key, value);
}

/* Appends sep and " job 61 (1.95)", or for a trial stopped at a rung
 * " job 58 at step 50 (1.1)". */
static size_t append_trial(char *text, size_t len, size_t cap,
                           const char *sep, const json_t *trial)
{
    char at[40] = "";
    const json_t *rung = json_object_get(trial, "rung");
    if (json_is_integer(rung))
        snprintf(at, sizeof at, " at step %lld",
                 (long long)json_integer_value(rung));
    int n = len < cap ? snprintf(text + len, cap - len, "%s job %lld%s (%.4g)",
                                 sep, (long long)json_integer_value(
                                     json_object_get(trial, "job_id")),
                                 at, json_number_value(
                                     json_object_get(trial, "value")))
                      : 0;
    return n > 0 ? len + (size_t)n : len;
}

static char *cell_text(const json_t *cell)
{
    size_t cap = 4096, len = 0;
    char *text = bf_xmalloc(cap), values[1024];
    const json_t *chosen = json_object_get(cell, "chosen");
    const char *stage = json_string_value(json_object_get(cell, "stage"));
    const char *metric = json_string_value(json_object_get(cell, "metric"));
    len += (size_t)snprintf(text, cap, "%s%s%s%s: chose", stage ? "stage " :
                            "", stage ? stage : "", stage ? ", " : "",
                            json_string_value(json_object_get(cell, "cell")));
    size_t i;
    json_t *t;
    json_array_foreach(chosen, i, t) {
        values_text(t, values, sizeof values);
        len += (size_t)snprintf(text + len, cap - len, "%s job %lld (trial "
                                "%lld: %s), %s %.4g", i ? ";" : "",
                                (long long)json_integer_value(
                                    json_object_get(t, "job_id")),
                                (long long)json_integer_value(
                                    json_object_get(t, "trial")),
                                values, metric, json_number_value(
                                    json_object_get(t, "value")));
    }
    len += (size_t)snprintf(text + len, cap - len, " at depth %lld",
                            (long long)json_integer_value(
                                json_object_get(cell, "eval_depth")));
    json_array_foreach(json_object_get(cell, "runners_up"), i, t)
        len = append_trial(text, len, cap, i ? "," : "; runners-up:", t);
    json_array_foreach(json_object_get(cell, "taken_by"), i, t)
        if (len < cap)
            len += (size_t)snprintf(text + len, cap - len, "%s %lld",
                                    i ? "," : "; values taken by jobs",
                                    (long long)json_integer_value(t));
    json_array_foreach(json_object_get(cell, "pruned"), i, t)
        len = append_trial(text, len, cap, i ? "," : "; pruned:", t);
    return text;
}

/* Job ids "19,20" as an array. */
static json_t *id_list(const json_t *row)
{
    json_t *ids = json_array();
    const char *text = json_string_value(json_object_get(row, "taken_by"));
    for (char *end; text && *text; text = *end ? end + 1 : end)
        json_array_append_new(ids, json_integer(strtoll(text, &end, 10)));
    return ids;
}

/* The cell a row starts (its rank is 1). */
static json_t *new_cell(const json_t *row, const json_t *varying)
{
    char label[1024];
    cell_label(row, varying, label, sizeof label);
    return json_pack("{s:O, s:s, s:O, s:O, s:[], s:[], s:[], s:[]}",
                     "stage", json_object_get(row, "stage"), "cell", label,
                     "metric", json_object_get(row, "metric"),
                     "eval_depth", json_object_get(row, "eval_depth"),
                     "chosen", "runners_up", "taken_by", "pruned");
}

/* Row (of rank > 1 after its cell's first) into cell. */
static void add_trial(json_t *cell, const json_t *row)
{
    int chosen = json_integer_value(json_object_get(row, "chosen")) == 1;
    json_array_append_new(json_object_get(cell, chosen ? "chosen"
                                          : "runners_up"), trial_of(row));
    if (chosen) {
        json_t *ids = id_list(row);
        json_array_extend(json_object_get(cell, "taken_by"), ids);
        json_decref(ids);
    }
}

/* The trials the cells' prune rules stopped early into their cells
 * (by_key: cell_key -> cell), from the search_trials view (none in a
 * database before migration 28).  0, or -1 after printing the problem. */
static int add_pruned(bf_source *src, int64_t sweep_id, const json_t *by_key)
{
    json_t *rows = bf_source_rows_if_any(src, "search_trials", sweep_id);
    if (!rows)
        return -1;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        const char *status = json_string_value(json_object_get(row, "status"));
        char key[48];
        cell_key(row, key);
        json_t *cell = json_object_get(by_key, key);
        if (!cell || !status || strcmp(status, "pruned") != 0)
            continue;
        json_array_append_new(json_object_get(cell, "pruned"), json_pack(
            "{s:O?, s:O?, s:O?, s:O?, s:o}",
            "job_id", json_object_get(row, "job_id"),
            "trial", json_object_get(row, "trial"),
            "rung", json_object_get(row, "rung"),
            "value", json_object_get(row, "rung_value"),
            "values", bf_source_json_object(row, "trial_values")));
    }
    json_decref(rows);
    return 0;
}

json_t *bf_selections_read(bf_source *src, int64_t sweep_id)
{
    json_t *rows = bf_source_rows_if_any(src, "trial_selections", sweep_id);
    if (!rows)
        return NULL;
    json_t *varying = varying_fields(rows);
    json_t *out = json_array(), *cell = NULL, *by_key = json_object();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {   /* by select_id, grp, rank */
        if (json_integer_value(json_object_get(row, "rank")) == 1) {
            char key[48];
            cell_key(row, key);
            cell = new_cell(row, varying);
            json_array_append_new(out, cell);
            json_object_set(by_key, key, cell);
        }
        if (cell)
            add_trial(cell, row);
    }
    int failed = add_pruned(src, sweep_id, by_key);
    json_decref(by_key);
    if (failed) {
        json_decref(varying);
        json_decref(rows);
        json_decref(out);
        return NULL;
    }
    json_array_foreach(out, i, cell) {
        char *text = cell_text(cell);
        json_object_set_new(cell, "text", json_string(text));
        free(text);
    }
    json_decref(varying);
    json_decref(rows);
    return out;
}

void bf_selections_print(FILE *out, const json_t *cells)
{
    if (json_array_size(cells) == 0)
        return;
    fprintf(out, "\nSelections:\n");
    size_t i;
    json_t *cell;
    json_array_foreach(cells, i, cell)
        fprintf(out, "  %s\n", json_string_value(json_object_get(cell,
                                                                 "text")));
}
