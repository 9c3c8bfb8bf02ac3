/* Sweep files: parsing.  Every value is checked on its own here, with the
 * line it came from, before any job is expanded (sweep_expand.c).  See
 * sweep.h for the format. */
#include "sweep_internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "confseq.h"
#include "yaml_json.h"

static const char *const top_level_keys[] = {
    "name", "description", "base", "grid", "zip", "exclude", "seeds",
    "search", "prune", "select", "stages", "max_attempts", "priority",
    "memory_budget_gib", "analysis"};
static const char *const stage_keys[] = {
    "name", "description", "base", "grid", "zip", "exclude", "seeds",
    "search", "prune", "select", "from"};
/* Keys that belong in each stage once a sweep has stages. */
static const char *const per_stage_keys[] = {"grid", "zip", "exclude",
                                             "seeds", "search", "prune",
                                             "select"};
static const char *const search_keys[] = {"method", "trials", "seed",
                                          "scramble", "space"};
static const char *const prune_keys[] = {"method", "metric", "eval_depth",
                                         "rungs", "eta", "min_trials",
                                         "synchronous"};
static const char *const select_keys[] = {"by", "eval_depth", "best"};

#define COUNT_OF(a) (sizeof (a) / sizeof *(a))

/* ---- small helpers ------------------------------------------------------ */

/* "a, b, c" of a list of names. */
static void join(const char *const *names, size_t n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "",
                                names[i]);
}

static int in_list(const char *const *names, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], key) == 0)
            return 1;
    return 0;
}

/* ---- the header --------------------------------------------------------- */

static int check_keys(const bf_sweep *sw, const json_t *node, const char *ptr,
                      const char *const *allowed, size_t n, const char *what,
                      bf_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)node, key, v) {
        if (in_list(allowed, n, key))
            continue;
        char names[256];
        join(allowed, n, names, sizeof names);
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/%s", ptr, key),
                            key, "unknown %s key '%s' (allowed: %s)", what,
                            key, names);
    }
    return 0;
}

static int parse_int(const bf_sweep *sw, const char *key, long long lo,
                     long long hi, int dflt, int *out, bf_error *err)
{
    json_t *v = json_object_get(sw->doc, key);
    *out = dflt;
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char text[128];
        sweep__value_text(v, text, sizeof text);
        return bf_error_set(err, sw->file, sweep__line(sw, "/%s", key), key,
                            "'%s' must be an integer in [%lld, %lld]", text, lo, hi);
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int parse_header(bf_sweep *sw, bf_error *err)
{
    json_t *name = json_object_get(sw->doc, "name");
    if (!json_is_string(name) || json_string_length(name) == 0)
        return bf_error_set(err, sw->file, sweep__line(sw, "/name"), "name",
                            "a sweep needs a name (a non-empty string)");
    json_t *desc = json_object_get(sw->doc, "description");
    if (desc && !json_is_string(desc))
        return bf_error_set(err, sw->file, sweep__line(sw, "/description"),
                            "description", "must be a string");
    sw->name = bf_xstrdup(json_string_value(name));
    if (parse_int(sw, "max_attempts", 1, 1000, 3, &sw->max_attempts, err) < 0)
        return -1;
    if (parse_int(sw, "memory_budget_gib", 1, BF_SWEEP_MAX_MEMORY_GIB,
                  BF_SWEEP_MEMORY_GIB, &sw->memory_budget_gib, err) < 0)
        return -1;
    return parse_int(sw, "priority", INT_MIN, INT_MAX, 0, &sw->priority, err);
}

/* ---- init_from paths ------------------------------------------------------ */

/* A relative init_from in obj becomes dir/path: the client knows the sweep
 * file's folder, the workers do not. */
static int resolve_path(const bf_sweep *sw, json_t *obj, int line,
                        bf_error *err)
{
    json_t *v = json_object_get(obj, "init_from");
    const char *path = json_string_value(v);
    if (!path || !path[0] || path[0] == '/' ||
        strncmp(path, STAGE_REF, strlen(STAGE_REF)) == 0)
        return 0;
    if (!sw->dir)
        return bf_error_set(err, sw->file, line, "init_from", "'%s' is a "
                            "relative path, and this submission does not say "
                            "which folder it is relative to (bifocal submit "
                            "resolves it against the sweep file's folder): "
                            "give an absolute path", path);
    char joined[BF_PATH_MAX];
    if ((size_t)snprintf(joined, sizeof joined, "%s/%s", sw->dir, path) >=
        sizeof joined)
        return bf_error_set(err, sw->file, line, "init_from", "%s/%s is "
                            "longer than %d bytes", sw->dir, path,
                            BF_PATH_MAX - 1);
    json_object_set_new(obj, "init_from", json_string(joined));
    return 0;
}

/* ---- stages, bases ---------------------------------------------------------- */

static int check_layer(const bf_sweep *sw, const sweep_layer *layer,
                       bf_error *err)
{
    if (!json_is_object(layer->obj))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s", layer->ptr),
                            "base", "must be a mapping of job-config fields");
    return resolve_path(sw, layer->obj,
                        sweep__line(sw, "%s/init_from", layer->ptr), err);
}

/* st->base = defaults + every layer, each field checked on its own line. */
static int apply_layers(const bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    bf_job_config_defaults(&st->base);
    for (size_t i = 0; i < st->n_layers; i++) {
        json_t *lines = bf_yaml_lines_subtree(sw->lines, st->layers[i].ptr);
        int rc = bf_job_config_apply_json(&st->base, st->layers[i].obj,
                                          sw->file, lines, err);
        json_decref(lines);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int valid_stage_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.-", *s))
            return 0;
    return 1;
}

static int init_stage(bf_sweep *sw, size_t i, json_t *node, bf_error *err)
{
    bf_sweep_stage *st = &sw->stages[i];
    snprintf(st->ptr, sizeof st->ptr, "/stages/%zu", i);
    st->node = node;
    if (!json_is_object(node))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s", st->ptr),
                            "stages", "stages[%zu] must be a mapping (name, "
                            "base, grid, zip, exclude, seeds)", i);
    if (check_keys(sw, node, st->ptr, stage_keys, COUNT_OF(stage_keys),
                   "stage", err) < 0)
        return -1;
    const char *name = json_string_value(json_object_get(node, "name"));
    int line = sweep__line(sw, "%s/name", st->ptr);
    if (!name || !valid_stage_name(name))
        return bf_error_set(err, sw->file, line ? line : sweep__line(sw, "%s",
                            st->ptr), "name", "stages[%zu] needs a name of "
                            "letters, digits, '_', '.' or '-'", i);
    for (size_t j = 0; j < i; j++)
        if (strcmp(sw->stages[j].name, name) == 0)
            return bf_error_set(err, sw->file, line, "name", "stage name "
                                "'%s' is used twice (stages[%zu] and "
                                "stages[%zu])", name, j, i);
    st->name = bf_xstrdup(name);
    json_t *base = json_object_get(node, "base");
    snprintf(st->base_ptr, sizeof st->base_ptr, "%s/base", st->ptr);
    if (base)
        st->layers[st->n_layers++] = (sweep_layer){st->base_ptr, base};
    return 0;
}

/* The stages of the file, or one unnamed stage of the whole file. */
static int parse_stages(bf_sweep *sw, bf_error *err)
{
    json_t *stages = json_object_get(sw->doc, "stages");
    sweep_layer top = {"/base", json_object_get(sw->doc, "base")};
    if (top.obj && check_layer(sw, &top, err) < 0)
        return -1;
    if (!stages) {
        sw->n_stages = 1;
        sw->stages = bf_xcalloc(1, sizeof *sw->stages);
        sw->stages[0].node = sw->doc;
        if (top.obj)
            sw->stages[0].layers[sw->stages[0].n_layers++] = top;
        return 0;
    }
    sw->has_stages = 1;
    for (size_t k = 0; k < COUNT_OF(per_stage_keys); k++)
        if (json_object_get(sw->doc, per_stage_keys[k]))
            return bf_error_set(err, sw->file, sweep__line(sw, "/%s",
                                per_stage_keys[k]), per_stage_keys[k],
                                "a sweep with stages gives %s in each stage "
                                "(only base applies to every stage)",
                                per_stage_keys[k]);
    size_t n = json_array_size(stages);
    if (!json_is_array(stages) || n == 0 || n > BF_SWEEP_MAX_STAGES)
        return bf_error_set(err, sw->file, sweep__line(sw, "/stages"),
                            "stages", "must be a list of 1 to %d stages",
                            BF_SWEEP_MAX_STAGES);
    sw->stages = bf_xcalloc(n, sizeof *sw->stages);
    for (size_t i = 0; i < n; i++) {
        sw->n_stages++;
        if (top.obj)
            sw->stages[i].layers[sw->stages[i].n_layers++] = top;
        if (init_stage(sw, i, json_array_get(stages, i), err) < 0)
            return -1;
    }
    for (size_t i = 0; i < n; i++) {
        bf_sweep_stage *st = &sw->stages[i];
        if (st->n_layers > 0 && check_layer(sw, &st->layers[st->n_layers - 1],
                                            err) < 0)
            return -1;
    }
    return 0;
}

/* ---- axes: grid and zip ------------------------------------------------------ */

/* An axis already sweeping `field` in st, for the one-axis-per-field rule. */
static const sweep_axis *axis_with(const bf_sweep_stage *st,
                                      const char *field, size_t *f_out)
{
    for (size_t a = 0; a < st->n_axes; a++)
        for (size_t f = 0; f < st->axes[a].n_fields; f++)
            if (strcmp(st->axes[a].fields[f], field) == 0) {
                if (f_out)
                    *f_out = f;
                return &st->axes[a];
            }
    return NULL;
}

/* Checks one field's list of an axis: a job field, swept once, a non-empty
 * list of n values (n = 0: any length). */
static int check_field_list(const bf_sweep *sw, const bf_sweep_stage *st,
                            const sweep_axis *axis, const char *field,
                            const json_t *values, size_t n, bf_error *err)
{
    int line = sweep__line(sw, "%s/%s", axis->ptr, field);
    int known = bf_job_config_has_field(field);
    const sweep_axis *other = axis_with(st, field, NULL);
    if (!known)
        return bf_error_set(err, sw->file, line, field, "%s axis '%s' is not "
                            "a job-config field", axis->where, field);
    if (other)
        return bf_error_set(err, sw->file, line, field, "'%s' is swept twice "
                            "(in %s and %s); a field takes one axis", field,
                            other->where, axis->where);
    if (!json_is_array(values))
        return bf_error_set(err, sw->file, line, field, "%s axis '%s' must be "
                            "a list of values", axis->where, field);
    if (json_array_size(values) == 0)
        return bf_error_set(err, sw->file, line, field, "%s axis '%s' is "
                            "empty", axis->where, field);
    if (n && json_array_size(values) != n)
        return bf_error_set(err, sw->file, line, field, "%s.%s has %zu values "
                            "but %s.%s has %zu: zipped lists vary together, "
                            "so they must be equally long", axis->where,
                            field, json_array_size(values), axis->where,
                            axis->fields[0], n);
    return 0;
}

/* A zip's `label` list names its entries (the client's group names):
 * one non-empty string per entry, each once, without spaces or '=' so
 * that a label reads as one word beside field=value pairs. */
static int check_zip_labels(const bf_sweep *sw, const sweep_axis *axis,
                            const json_t *labels, bf_error *err)
{
    int line = sweep__line(sw, "%s/" ZIP_LABEL, axis->ptr);
    if (axis->n_fields == 0)
        return bf_error_set(err, sw->file, line, ZIP_LABEL, "%s names its "
                            "entries but zips no job-config field",
                            axis->where);
    if (!json_is_array(labels) || json_array_size(labels) != axis->n)
        return bf_error_set(err, sw->file, line, ZIP_LABEL, "%s.label must "
                            "be a list of %zu names, one per entry (as long "
                            "as %s.%s)", axis->where, axis->n, axis->where,
                            axis->fields[0]);
    for (size_t v = 0; v < axis->n; v++) {
        const char *name = json_string_value(json_array_get(labels, v));
        int at = sweep__line(sw, "%s/" ZIP_LABEL "/%zu", axis->ptr, v);
        if (!name || !name[0] || strpbrk(name, " \t=,"))
            return bf_error_set(err, sw->file, at, ZIP_LABEL, "%s.label[%zu]"
                                " must be a non-empty name without spaces, "
                                "',' or '='", axis->where, v);
        for (size_t u = 0; u < v; u++)
            if (!strcmp(name, json_string_value(json_array_get(labels, u))))
                return bf_error_set(err, sw->file, at, ZIP_LABEL, "%s.label "
                                    "names two entries '%s' ([%zu] and "
                                    "[%zu])", axis->where, name, u, v);
    }
    return 0;
}

/* Fills axis from the mapping `fields` {field: [values]} (only its member
 * `only` for a grid axis; NULL: all of them, zipped, a zip's `label` list
 * aside), checking every value on its own so type and name errors point
 * at the value's line before any expansion.  Field names stay borrowed
 * from the mapping. */
static int parse_axis(bf_sweep *sw, bf_sweep_stage *st, sweep_axis *axis,
                      json_t *fields, const char *only, bf_error *err)
{
    axis->fields = bf_xcalloc(json_object_size(fields) + 1,
                              sizeof *axis->fields);
    const char *field;
    json_t *values;
    json_object_foreach(fields, field, values) {
        if ((only && strcmp(field, only) != 0) ||
            (!only && strcmp(field, ZIP_LABEL) == 0))
            continue;
        if (check_field_list(sw, st, axis, field, values, axis->n, err) < 0)
            return -1;
        axis->fields[axis->n_fields++] = field;
        axis->n = json_array_size(values);
    }
    axis->assign = bf_xcalloc(axis->n, sizeof *axis->assign);
    axis->lines = bf_xcalloc(axis->n * axis->n_fields, sizeof *axis->lines);
    for (size_t v = 0; v < axis->n; v++) {
        axis->assign[v] = json_object();
        for (size_t f = 0; f < axis->n_fields; f++) {
            const char *name = axis->fields[f];
            json_t *value = json_array_get(json_object_get(fields, name), v);
            int line = sweep__line(sw, "%s/%s/%zu", axis->ptr, name, v);
            if (!line)  /* a sampled trial: the line of its distribution */
                line = sweep__line(sw, "%s/%s", axis->ptr, name);
            axis->lines[v * axis->n_fields + f] = line;
            json_t *one = json_pack("{sO}", name, value);
            json_t *canon = resolve_path(sw, one, line, err) < 0 ? NULL
                : bf_job_config_canonical_value(name, json_object_get(one,
                                                                      name),
                                                err);
            if (!canon) {
                json_decref(one);
                bf_error inner = *err;
                return bf_error_set(err, sw->file, line, name, "%s.%s[%zu]: "
                                    "%s", axis->where, name, v,
                                    bf_error_body(&inner));
            }
            json_decref(canon);
            json_object_update(axis->assign[v], one);
            json_decref(one);
        }
    }
    json_t *labels = only ? NULL : json_object_get(fields, ZIP_LABEL);
    if (labels && check_zip_labels(sw, axis, labels, err) < 0)
        return -1;
    axis->labels = labels;
    return 0;
}

static sweep_axis *new_axis(bf_sweep_stage *st, const char *where,
                               const char *ptr)
{
    sweep_axis *axis = &st->axes[st->n_axes++];
    snprintf(axis->where, sizeof axis->where, "%s", where);
    snprintf(axis->ptr, sizeof axis->ptr, "%s", ptr);
    return axis;
}

static int parse_grid(bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    json_t *grid = json_object_get(st->node, "grid");
    if (!grid)
        return 0;
    if (!json_is_object(grid))
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/grid", st->ptr),
                            "grid", "must be a mapping from job-config field "
                            "to a list of values");
    char ptr[64];
    snprintf(ptr, sizeof ptr, "%s/grid", st->ptr);
    const char *field;
    json_t *values;
    json_object_foreach(grid, field, values) {
        if (st->n_axes >= SWEEP_MAX_AXES)
            return bf_error_set(err, sw->file, sweep__line(sw, "%s", ptr),
                                "grid", "more than %d axes", SWEEP_MAX_AXES);
        if (parse_axis(sw, st, new_axis(st, "grid", ptr), grid, field,
                       err) < 0)
            return -1;
    }
    return 0;
}

/* zip: one mapping of equally long lists, or a list of such mappings. */
static int parse_zip(bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    json_t *zip = json_object_get(st->node, "zip");
    if (!zip)
        return 0;
    int line = sweep__line(sw, "%s/zip", st->ptr);
    size_t n = json_is_array(zip) ? json_array_size(zip) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *group = json_is_array(zip) ? json_array_get(zip, i) : zip;
        char where[32], ptr[96];
        snprintf(where, sizeof where, json_is_array(zip) ? "zip[%zu]" : "zip",
                 i);
        snprintf(ptr, sizeof ptr, json_is_array(zip) ? "%s/zip/%zu" : "%s/zip",
                 st->ptr, i);
        if (!json_is_object(group) || json_object_size(group) == 0)
            return bf_error_set(err, sw->file, line, "zip", "%s must be a "
                                "mapping from job-config field to a list of "
                                "values, the lists equally long", where);
        if (st->n_axes >= SWEEP_MAX_AXES)
            return bf_error_set(err, sw->file, line, "zip", "more than %d "
                                "axes", SWEEP_MAX_AXES);
        if (parse_axis(sw, st, new_axis(st, where, ptr), group, NULL,
                       err) < 0)
            return -1;
    }
    return 0;
}

/* The stage's mapping `key` (search, prune, select), at JSON pointer ptr,
 * with only the keys `keys`: *out, or NULL when the stage has none. */
static int stage_block(const bf_sweep *sw, const bf_sweep_stage *st,
                       const char *key, const char *ptr,
                       const char *const *keys, size_t n, json_t **out,
                       bf_error *err)
{
    *out = json_object_get(st->node, key);
    if (!*out)
        return 0;
    if (!json_is_object(*out)) {
        char names[256];
        join(keys, n, names, sizeof names);
        return bf_error_set(err, sw->file, sweep__line(sw, "%s", ptr), key,
                            "must be a mapping (%s)", names);
    }
    return check_keys(sw, *out, ptr, keys, n, key, err);
}

/* search: one more axis, innermost but for the seeds, whose values are
 * the sampled trials (sweep_search.c), checked as a zip group's are. */
static int parse_search(bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    char ptr[96];
    snprintf(ptr, sizeof ptr, "%s/search", st->ptr);
    json_t *search;
    if (stage_block(sw, st, "search", ptr, search_keys,
                    COUNT_OF(search_keys), &search, err) < 0)
        return -1;
    if (!search)
        return 0;
    if (sweep__search_sample(sw, search, ptr, &st->search_values, err) < 0)
        return -1;
    if (st->n_axes >= SWEEP_MAX_AXES)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s", ptr),
                            "search", "more than %d axes", SWEEP_MAX_AXES);
    snprintf(ptr, sizeof ptr, "%s/search/space", st->ptr);
    st->search = new_axis(st, "search", ptr);
    return parse_axis(sw, st, st->search, st->search_values, NULL, err);
}

/* prune and select: what the coordinator decides over the search's
 * trials (sweep_prune.c). */
static int parse_prune(bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    snprintf(st->prune_ptr, sizeof st->prune_ptr, "%s/prune", st->ptr);
    json_t *prune;
    if (stage_block(sw, st, "prune", st->prune_ptr, prune_keys,
                    COUNT_OF(prune_keys), &prune, err) < 0)
        return -1;
    return prune ? sweep__prune_parse(sw, st, prune, err) : 0;
}

static int parse_select(bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    snprintf(st->select_ptr, sizeof st->select_ptr, "%s/select", st->ptr);
    json_t *select;
    if (stage_block(sw, st, "select", st->select_ptr, select_keys,
                    COUNT_OF(select_keys), &select, err) < 0)
        return -1;
    return select ? sweep__select_parse(sw, st, select, err) : 0;
}

/* ---- exclude ---------------------------------------------------------------- */

/* The values of axis field (a, f) equal to `value` get flag 1 in match (the
 * flags already 0 stay 0); returns how many are still 1. */
static size_t mark_matches(const sweep_axis *axis, size_t f,
                           const json_t *value, char *match)
{
    const char *field = axis->fields[f];
    size_t left = 0;
    for (size_t v = 0; v < axis->n; v++) {
        json_t *mine = bf_job_config_canonical_value(
            field, json_object_get(axis->assign[v], field), NULL);
        match[v] = match[v] && json_equal(mine, value);
        left += match[v] != 0;
        json_decref(mine);
    }
    return left;
}

/* "a, b, c": the values of field f of axis. */
static void axis_values(const sweep_axis *axis, size_t f, char *buf,
                        size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t v = 0; v < axis->n && len < cap; v++) {
        char text[128];
        sweep__value_text(json_object_get(axis->assign[v], axis->fields[f]),
                         text, sizeof text);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", v ? ", " : "",
                                text);
    }
}

static int parse_rule_field(const bf_sweep *sw, bf_sweep_stage *st,
                            sweep_rule *rule, size_t i, const char *field,
                            const json_t *value, bf_error *err)
{
    int line = sweep__line(sw, "%s/exclude/%zu/%s", st->ptr, i, field);
    size_t f;
    const sweep_axis *axis = axis_with(st, field, &f);
    if (axis && axis == st->search)
        return bf_error_set(err, sw->file, line, field, "exclude[%zu].%s: "
                            "'%s' is searched: its values are drawn at "
                            "submission, and a rule names grid or zip "
                            "values", i, field, field);
    if (!axis)
        return bf_error_set(err, sw->file, line, field, "exclude[%zu].%s: "
                            "'%s' is not swept by grid or zip%s%s", i, field,
                            field, st->name ? " in stage " : "",
                            st->name ? st->name : "");
    json_t *canon = bf_job_config_canonical_value(field, value, err);
    if (!canon) {
        bf_error inner = *err;
        return bf_error_set(err, sw->file, line, field, "exclude[%zu].%s: %s",
                            i, field, bf_error_body(&inner));
    }
    size_t a = (size_t)(axis - st->axes);
    if (!rule->match[a]) {
        rule->match[a] = bf_xmalloc(axis->n);
        memset(rule->match[a], 1, axis->n);
    }
    size_t left = mark_matches(axis, f, canon, rule->match[a]);
    json_decref(canon);
    if (left > 0)
        return 0;
    char text[128], values[512];
    sweep__value_text(value, text, sizeof text);
    axis_values(axis, f, values, sizeof values);
    return bf_error_set(err, sw->file, line, field, "exclude[%zu].%s: '%s' "
                        "%s (%s.%s: %s), so the rule leaves nothing out", i,
                        field, text, axis->n_fields > 1 ? "never comes with "
                        "the other zipped values the rule names"
                        : "is not one of the values swept", axis->where,
                        field, values);
}

static int parse_excludes(bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    json_t *ex = json_object_get(st->node, "exclude");
    if (!ex)
        return 0;
    int line = sweep__line(sw, "%s/exclude", st->ptr);
    if (!json_is_array(ex))
        return bf_error_set(err, sw->file, line, "exclude", "must be a list "
                            "of mappings, each from grid or zip fields to "
                            "the values of a combination to leave out");
    st->rules = bf_xcalloc(json_array_size(ex) + 1, sizeof *st->rules);
    for (size_t i = 0; i < json_array_size(ex); i++) {
        json_t *rule = json_array_get(ex, i);
        sweep_rule *r = &st->rules[st->n_rules++];
        r->match = bf_xcalloc(st->n_axes + 1, sizeof *r->match);
        if (!json_is_object(rule) || json_object_size(rule) == 0)
            return bf_error_set(err, sw->file, sweep__line(sw, "%s/exclude/%zu",
                                st->ptr, i), "exclude", "exclude[%zu] must be "
                                "a non-empty mapping of grid or zip fields to "
                                "values", i);
        const char *field;
        json_t *value;
        json_object_foreach(rule, field, value)
            if (parse_rule_field(sw, st, r, i, field, value, err) < 0)
                return -1;
    }
    return 0;
}

/* ---- seeds ---------------------------------------------------------------- */

/* seeds conflicts with a seed given any other way in the stage. */
static int check_seed_conflict(const bf_sweep *sw, const bf_sweep_stage *st,
                               bf_error *err)
{
    for (size_t i = 0; i < st->n_layers; i++)
        if (json_object_get(st->layers[i].obj, "seed"))
            return bf_error_set(err, sw->file, sweep__line(sw, "%s/seed",
                                st->layers[i].ptr), "seed", "base.seed "
                                "conflicts with seeds; give one of them");
    const sweep_axis *axis = axis_with(st, "seed", NULL);
    if (axis)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/seed",
                            axis->ptr), "seed", "%s.seed conflicts with "
                            "seeds; give one of them", axis->where);
    return 0;
}

/* seeds: {min: N, max: M, until: decided, rule: R}: seeds 1..M are
 * expanded (and validated) now; the store holds those past the first N
 * until a decision needs them (store_seqs.c), made with rule R
 * (common/confseq.h; t without). */
static int parse_adaptive_seeds(bf_sweep *sw, bf_sweep_stage *st,
                                const json_t *seeds, bf_error *err)
{
    static const char *const keys[] = {"min", "max", "until", "rule"};
    char ptr[64];
    snprintf(ptr, sizeof ptr, "%s/seeds", st->ptr);
    if (check_keys(sw, seeds, ptr, keys, COUNT_OF(keys), "seeds", err) < 0)
        return -1;
    json_int_t bound[2];
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(seeds, keys[i]);
        int line = v ? sweep__line(sw, "%s/%s", ptr, keys[i]) : st->seeds_line;
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > BF_SWEEP_MAX_SEEDS)
            return bf_error_set(err, sw->file, line, i ? "seeds.max"
                                : "seeds.min", "seeds.%s must be an integer "
                                "in [1, %d]", keys[i], BF_SWEEP_MAX_SEEDS);
        bound[i] = json_integer_value(v);
    }
    if (bound[0] > bound[1])
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/min", ptr),
                            "seeds.min", "seeds.min %lld is more than "
                            "seeds.max %lld", (long long)bound[0],
                            (long long)bound[1]);
    const char *until = json_string_value(json_object_get(seeds, "until"));
    if (!until || strcmp(until, "decided") != 0)
        return bf_error_set(err, sw->file, json_object_get(seeds, "until")
                            ? sweep__line(sw, "%s/until", ptr) : st->seeds_line,
                            "seeds.until", "seeds.until must be 'decided' "
                            "(seeds: {min, max, until: decided} adds seeds "
                            "until each comparison is decided)");
    const json_t *rule = json_object_get(seeds, "rule");
    st->seeds_rule = bf_confseq_rule_parse(json_string_value(rule));
    if ((rule && !json_is_string(rule)) || st->seeds_rule < 0)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/rule", ptr),
                            "seeds.rule", "seeds.rule must be 't' (the mean, "
                            "Gaussian log ratios; the default) or 'sign' (the "
                            "median, any log ratios)");
    st->seeds_min = (size_t)bound[0];
    st->n_seeds = (size_t)bound[1];
    st->seeds = bf_xmalloc(st->n_seeds * sizeof *st->seeds);
    for (size_t i = 0; i < st->n_seeds; i++)
        st->seeds[i] = i + 1;
    return 0;
}

static int parse_seeds(bf_sweep *sw, bf_sweep_stage *st, bf_error *err)
{
    st->n_seeds = 1;
    json_t *seeds = json_object_get(st->node, "seeds");
    if (!seeds)
        return 0;
    st->seeds_line = sweep__line(sw, "%s/seeds", st->ptr);
    if (check_seed_conflict(sw, st, err) < 0)
        return -1;
    if (json_is_object(seeds))
        return parse_adaptive_seeds(sw, st, seeds, err);
    if (json_is_integer(seeds)) {
        json_int_t n = json_integer_value(seeds);
        if (n < 1 || n > BF_SWEEP_MAX_JOBS)
            return bf_error_set(err, sw->file, st->seeds_line, "seeds",
                                "seeds: %lld must be in [1, %d] (seeds N means "
                                "seeds 1..N)", (long long)n, BF_SWEEP_MAX_JOBS);
        st->n_seeds = (size_t)n;
        st->seeds = bf_xmalloc(st->n_seeds * sizeof *st->seeds);
        for (size_t i = 0; i < st->n_seeds; i++)
            st->seeds[i] = i + 1;
    } else if (json_is_array(seeds) && json_array_size(seeds) > 0) {
        st->n_seeds = json_array_size(seeds);
        st->seeds = bf_xmalloc(st->n_seeds * sizeof *st->seeds);
        for (size_t i = 0; i < st->n_seeds; i++) {
            json_t *v = json_array_get(seeds, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                char text[128];
                sweep__value_text(v, text, sizeof text);
                return bf_error_set(err, sw->file, sweep__line(sw, "%s/seeds/%zu",
                                    st->ptr, i), "seeds", "seeds[%zu]: '%s' is "
                                    "not a non-negative integer", i, text);
            }
            st->seeds[i] = (uint64_t)json_integer_value(v);
        }
    } else {
        return bf_error_set(err, sw->file, st->seeds_line, "seeds",
                            "seeds must be a positive integer N, a non-empty "
                            "list of seeds or {min, max, until: decided}");
    }
    return 0;
}

/* ---- counting ------------------------------------------------------------- */

static int too_many(const bf_sweep *sw, bf_error *err)
{
    return bf_error_set(err, sw->file, sweep__line(sw, sw->has_stages
                        ? "/stages" : "/grid"), "grid", "the sweep expands to "
                        "more than %d jobs", BF_SWEEP_MAX_JOBS);
}

/* n_combos, and n_jobs without the excluded combinations; *budget is what
 * is left of BF_SWEEP_MAX_JOBS over the stages. */
static int count_jobs(const bf_sweep *sw, bf_sweep_stage *st, size_t *budget,
                      bf_error *err)
{
    size_t n = 1;
    for (size_t a = 0; a < st->n_axes; a++) {
        if (n > *budget / st->axes[a].n)
            return too_many(sw, err);
        n *= st->axes[a].n;
    }
    if (n > *budget / st->n_seeds)
        return too_many(sw, err);
    st->n_combos = n;
    size_t kept = 0;
    for (size_t c = 0; c < n; c++)
        kept += !sweep__excluded(st, c);
    if (kept == 0)
        return bf_error_set(err, sw->file, sweep__line(sw, "%s/exclude",
                            st->ptr), "exclude", "exclude leaves out every "
                            "combination%s%s: no job is left", st->name ?
                            " of stage " : "", st->name ? st->name : "");
    st->n_jobs = kept * st->n_seeds;
    *budget -= st->n_jobs;
    return 0;
}

static void add_set_field(bf_sweep_stage *st, const char *field)
{
    if (!in_list(st->set_fields, st->n_set_fields, field))
        st->set_fields[st->n_set_fields++] = field;
}

/* The fields st's layers and axes set, for the warnings. */
static void collect_set_fields(bf_sweep_stage *st)
{
    size_t cap = 1;
    for (size_t i = 0; i < st->n_layers; i++)
        cap += json_object_size(st->layers[i].obj);
    for (size_t a = 0; a < st->n_axes; a++)
        cap += st->axes[a].n_fields;
    st->set_fields = bf_xcalloc(cap, sizeof *st->set_fields);
    for (size_t i = 0; i < st->n_layers; i++) {
        const char *key;
        json_t *v;
        json_object_foreach(st->layers[i].obj, key, v)
            add_set_field(st, key);
    }
    for (size_t a = 0; a < st->n_axes; a++)
        for (size_t f = 0; f < st->axes[a].n_fields; f++)
            add_set_field(st, st->axes[a].fields[f]);
}

static int parse_stage(bf_sweep *sw, bf_sweep_stage *st, size_t *budget,
                       bf_error *err)
{
    st->axes = bf_xcalloc(SWEEP_MAX_AXES, sizeof *st->axes);
    if (apply_layers(sw, st, err) < 0 || parse_grid(sw, st, err) < 0 ||
        parse_zip(sw, st, err) < 0 || parse_search(sw, st, err) < 0 ||
        parse_prune(sw, st, err) < 0 || parse_select(sw, st, err) < 0 ||
        parse_excludes(sw, st, err) < 0 ||
        parse_seeds(sw, st, err) < 0 || count_jobs(sw, st, budget, err) < 0)
        return -1;
    collect_set_fields(st);
    st->first_job = sw->n_jobs;
    sw->n_jobs += st->n_jobs;
    return 0;
}

/* ---- stage references --------------------------------------------------------- */

/* The key fields of a reference from stage t to stage s: the seed, then
 * every field both sweep (init_from aside: it is the reference itself). */
static void ref_keys(const bf_sweep_stage *t, const bf_sweep_stage *s,
                     sweep_ref *ref)
{
    size_t cap = 1;
    for (size_t a = 0; a < t->n_axes; a++)
        cap += t->axes[a].n_fields;
    ref->keys = bf_xcalloc(cap, sizeof *ref->keys);
    ref->keys[ref->n_keys++] = "seed";
    for (size_t a = 0; a < t->n_axes; a++)
        for (size_t f = 0; f < t->axes[a].n_fields; f++) {
            const char *field = t->axes[a].fields[f];
            if (strcmp(field, "seed") != 0 && strcmp(field, "init_from") != 0
                && axis_with(s, field, NULL))
                ref->keys[ref->n_keys++] = field;
        }
}

static int check_ref(bf_sweep *sw, size_t t, const char *value, int line,
                     bf_error *err)
{
    if (strncmp(value, STAGE_REF, strlen(STAGE_REF)) != 0)
        return 0;
    const char *name = value + strlen(STAGE_REF);
    bf_sweep_stage *st = &sw->stages[t];
    if (!sw->has_stages)
        return bf_error_set(err, sw->file, line, "init_from", "'%s' names a "
                            "stage, but this sweep has no stages:", value);
    size_t s = 0;
    while (s < sw->n_stages && strcmp(sw->stages[s].name, name) != 0)
        s++;
    if (s == sw->n_stages || s >= t) {
        const char *names[BF_SWEEP_MAX_STAGES] = {0};
        for (size_t i = 0; i < t; i++)
            names[i] = sw->stages[i].name;
        char earlier[512];
        join(names, t, earlier, sizeof earlier);
        return bf_error_set(err, sw->file, line, "init_from", "'%s' in stage "
                            "%s: %s (earlier stages: %s)", value, st->name,
                            s == sw->n_stages ? "no stage has that name"
                            : "that stage does not come earlier",
                            t ? earlier : "none");
    }
    for (size_t r = 0; r < st->n_refs; r++)
        if (st->refs[r].from == s)
            return 0;
    sweep_ref *ref = &st->refs[st->n_refs++];
    ref->from = s;
    ref_keys(st, &sw->stages[s], ref);
    sw->stages[s].referenced = 1;
    return 0;
}

/* Every stage its jobs' init_from values name exists and comes earlier. */
static int parse_refs(bf_sweep *sw, bf_error *err)
{
    for (size_t t = 0; t < sw->n_stages; t++) {
        bf_sweep_stage *st = &sw->stages[t];
        size_t f;
        const sweep_axis *axis = axis_with(st, "init_from", &f);
        st->refs = bf_xcalloc(axis ? axis->n + 1 : 1, sizeof *st->refs);
        if (!axis) {
            sweep_combo none = {{0}, 0};
            if (check_ref(sw, t, st->base.init_from,
                          sweep__field_line(sw, st, &none, "init_from"),
                          err) < 0)
                return -1;
            continue;
        }
        for (size_t v = 0; v < axis->n; v++) {
            const char *value = json_string_value(
                json_object_get(axis->assign[v], "init_from"));
            if (check_ref(sw, t, value, axis->lines[v * axis->n_fields + f],
                          err) < 0)
                return -1;
        }
    }
    return 0;
}

/* ---- analysis ------------------------------------------------------------ */

/* The baseline's field is swept in some stage, and its value is one of the
 * values swept there. */
static int check_baseline_field(const bf_sweep *sw, const char *field,
                                const json_t *value, bf_error *err)
{
    int line = sweep__line(sw, "/analysis/baseline/%s", field);
    char name[160], text[128], values[512] = "";
    snprintf(name, sizeof name, "analysis.baseline.%s", field);
    sweep__value_text(value, text, sizeof text);
    const sweep_axis *axis = NULL;
    for (size_t i = 0; i < sw->n_stages; i++) {
        size_t f;
        axis = axis_with(&sw->stages[i], field, &f);
        if (!axis)
            continue;
        char *match = bf_xmalloc(axis->n);
        memset(match, 1, axis->n);
        size_t left = mark_matches(axis, f, value, match);
        free(match);
        if (left > 0)
            return 0;
        axis_values(axis, f, values, sizeof values);
    }
    if (!values[0])
        return bf_error_set(err, sw->file, line, name, "'%s' is not swept by "
                            "grid or zip, so no group differs from the "
                            "baseline in it", field);
    return bf_error_set(err, sw->file, line, name, "'%s' is not one of the "
                        "values swept (%s: %s)", text, field, values);
}

static int depths_have(const int *depths, int n, int depth)
{
    for (int i = 0; i < n; i++)
        if (depths[i] == depth)
            return 1;
    return 0;
}

/* Some job of the sweep evaluates at `depth`: a stage's base does, or a
 * value of its eval_depths axis. */
static int evaluated_at(const bf_sweep *sw, int depth)
{
    for (size_t i = 0; i < sw->n_stages; i++) {
        const bf_sweep_stage *st = &sw->stages[i];
        size_t f;
        const sweep_axis *axis = axis_with(st, "eval_depths", &f);
        if (!axis && depths_have(st->base.eval_depths,
                                 st->base.n_eval_depths, depth))
            return 1;
        for (size_t v = 0; axis && v < axis->n; v++) {
            const json_t *list = json_object_get(axis->assign[v],
                                                 "eval_depths");
            size_t k;
            json_t *d;
            json_array_foreach(list, k, d)
                if (json_integer_value(d) == depth)
                    return 1;
        }
    }
    return 0;
}

/* Adds the values of zip entry v of axis to the baseline; an error when
 * the baseline gives one of its fields another value. */
static int add_entry_values(bf_sweep *sw, const sweep_axis *axis, size_t v,
                            bf_error *err)
{
    json_t *baseline = sw->analysis.baseline;
    for (size_t f = 0; f < axis->n_fields; f++) {
        const char *field = axis->fields[f];
        json_t *value = bf_job_config_canonical_value(
            field, json_object_get(axis->assign[v], field), NULL);
        const json_t *given = json_object_get(baseline, field);
        if (given && !json_equal(given, value)) {
            char a[128], b[128], name[160];
            sweep__value_text(given, a, sizeof a);
            sweep__value_text(value, b, sizeof b);
            json_decref(value);
            snprintf(name, sizeof name, "analysis.baseline.%s", field);
            return bf_error_set(err, sw->file, sweep__line(
                                    sw, "/analysis/baseline/%s", field), name,
                                "'%s' contradicts the label '%s', whose "
                                "entry has %s: %s (%s)", a,
                                sw->analysis.baseline_label, field, b,
                                axis->where);
        }
        json_object_set_new(baseline, field, value);
    }
    return 0;
}

/* baseline: {label: NAME} stands for the values of the zip entry NAME
 * (in whichever stage's zip names it; entries of the same name must agree).
 * An unknown name is an error listing the labels there are. */
static int resolve_baseline_label(bf_sweep *sw, bf_error *err)
{
    const char *name = sw->analysis.baseline_label;
    char known[512] = "";
    size_t len = 0;
    int found = 0;
    for (size_t i = 0; i < sw->n_stages; i++)
        for (size_t x = 0; x < sw->stages[i].n_axes; x++) {
            const sweep_axis *axis = &sw->stages[i].axes[x];
            for (size_t v = 0; axis->labels && v < axis->n; v++) {
                const char *label = json_string_value(
                    json_array_get(axis->labels, v));
                if (strcmp(label, name) != 0) {
                    if (len < sizeof known)
                        len += (size_t)snprintf(known + len, sizeof known - len,
                                                "%s%s", len ? ", " : "", label);
                    continue;
                }
                if (add_entry_values(sw, axis, v, err) < 0)
                    return -1;
                found = 1;
            }
        }
    if (!found)
        return bf_error_set(err, sw->file, sweep__line(sw, "/analysis/"
                            "baseline/" ZIP_LABEL), "analysis.baseline.label",
                            "'%s' names no zip entry (%s%s)", name,
                            known[0] ? "labels: " : "no zip of the sweep has "
                            "a label list", known);
    free(sw->analysis.baseline_label);
    sw->analysis.baseline_label = NULL;
    return 0;
}

static int parse_analysis(bf_sweep *sw, bf_error *err)
{
    bf_analysis_defaults(&sw->analysis);
    json_t *block = json_object_get(sw->doc, "analysis");
    if (!block)
        return 0;
    json_t *lines = bf_yaml_lines_subtree(sw->lines, "/analysis");
    int rc = bf_analysis_parse(&sw->analysis, block, sw->file, lines, err);
    json_decref(lines);
    if (rc < 0)
        return -1;
    sw->has_analysis = 1;
    const bf_analysis *a = &sw->analysis;
    if (a->primary_eval_depth && !evaluated_at(sw, a->primary_eval_depth))
        return bf_error_set(err, sw->file, sweep__line(sw, "/analysis/primary/"
                            "eval_depth"), "analysis.primary.eval_depth", "no "
                            "job of the sweep evaluates at depth %d (give it "
                            "in eval_depths)", a->primary_eval_depth);
    if (a->baseline_label && resolve_baseline_label(sw, err) < 0)
        return -1;
    const char *field;
    json_t *value;
    json_object_foreach(a->baseline, field, value)
        if (check_baseline_field(sw, field, value, err) < 0)
            return -1;
    return 0;
}

/* ---- adaptive seeds ------------------------------------------------------ */

/* A stage with `until: decided` needs a comparison to decide: the analysis
 * block's baseline and a primary loss at one eval depth; and no later
 * stage may start from it (its unneeded seeds never run). */
static int check_adaptive(const bf_sweep *sw, bf_error *err)
{
    for (size_t i = 0; i < sw->n_stages; i++) {
        const bf_sweep_stage *st = &sw->stages[i];
        if (!st->seeds_min)
            continue;
        const bf_analysis *a = &sw->analysis;
        const char *lack = !sw->has_analysis ? "an analysis: block"
            : !a->baseline ? "analysis.baseline"
            : !a->has_primary || a->primary_metric != BF_ANALYSIS_LOSS
              || !a->primary_eval_depth
            ? "analysis.primary: {metric: loss, eval_depth: D}" : NULL;
        if (lack)
            return bf_error_set(err, sw->file, st->seeds_line, "seeds.until",
                                "seeds until decided%s%s needs %s: the "
                                "comparison it decides (baseline, loss at "
                                "one eval depth)", st->name ? " in stage "
                                : "", st->name ? st->name : "", lack);
        if (st->referenced)
            return bf_error_set(err, sw->file, st->seeds_line, "seeds.until",
                                "stage %s has seeds until decided, so a "
                                "later stage cannot start from it (the seeds "
                                "it does not need never run)", st->name);
    }
    return 0;
}

int bf_sweep_adaptive_seeds(const bf_sweep *sw, size_t stage, int *min,
                            int *max, bf_confseq_rule *rule)
{
    const bf_sweep_stage *st = &sw->stages[stage];
    *min = (int)st->seeds_min;
    *max = (int)st->n_seeds;
    *rule = (bf_confseq_rule)st->seeds_rule;
    return st->seeds_min > 0;
}

const char *bf_sweep_stage_name(const bf_sweep *sw, size_t stage)
{
    return sw->stages[stage].name;
}

/* ---- the whole file ------------------------------------------------------- */

bf_sweep *bf_sweep_parse(const char *file, const char *dir, const char *text,
                         size_t len, bf_error *err)
{
    bf_sweep *sw = bf_xcalloc(1, sizeof *sw);
    sw->file = bf_xstrdup(file ? file : "<sweep>");
    sw->dir = dir ? bf_xstrdup(dir) : NULL;
    sw->doc = bf_yaml_parse(text, len, sw->file, &sw->lines, err);
    if (!sw->doc)
        goto fail;
    if (!json_is_object(sw->doc)) {
        bf_error_set(err, sw->file, 1, NULL, "a sweep file must be a mapping "
                     "(name, base, grid, zip, exclude, seeds, search, prune, "
                     "select, stages, max_attempts, priority, "
                     "memory_budget_gib, analysis)");
        goto fail;
    }
    if (check_keys(sw, sw->doc, "", top_level_keys, COUNT_OF(top_level_keys),
                   "sweep", err) < 0 || parse_header(sw, err) < 0 ||
        parse_stages(sw, err) < 0)
        goto fail;
    size_t budget = BF_SWEEP_MAX_JOBS;
    for (size_t i = 0; i < sw->n_stages; i++)
        if (parse_stage(sw, &sw->stages[i], &budget, err) < 0)
            goto fail;
    if (parse_refs(sw, err) < 0)
        goto fail;
    for (size_t t = 0; t < sw->n_stages; t++)
        if (sweep__from_parse(sw, t, err) < 0)
            goto fail;
    for (size_t t = sw->n_stages; t-- > 0;)
        if (sweep__from_seeds(sw, t, err) < 0)
            goto fail;
    if (parse_analysis(sw, err) < 0 || check_adaptive(sw, err) < 0)
        goto fail;
    return sw;
fail:
    bf_sweep_free(sw);
    return NULL;
}

static void free_stage(bf_sweep_stage *st)
{
    for (size_t a = 0; a < st->n_axes; a++) {
        for (size_t v = 0; st->axes[a].assign && v < st->axes[a].n; v++)
            json_decref(st->axes[a].assign[v]);
        free(st->axes[a].assign);
        free(st->axes[a].lines);
        free(st->axes[a].fields);
    }
    for (size_t r = 0; r < st->n_rules; r++) {
        for (size_t a = 0; a < st->n_axes; a++)
            free(st->rules[r].match[a]);
        free(st->rules[r].match);
    }
    for (size_t r = 0; r < st->n_refs; r++) {
        free(st->refs[r].keys);
        free(st->refs[r].values);
        sweep__map_free(&st->refs[r].map);
    }
    json_decref(st->search_values);
    sweep__from_free(st->from);
    free(st->prune);
    if (st->select)
        free(st->select->space);
    free(st->select);
    free(st->set_fields);
    free(st->refs);
    free(st->rules);
    free(st->axes);
    free(st->seeds);
    free(st->name);
}

void bf_sweep_free(bf_sweep *sw)
{
    if (!sw)
        return;
    for (size_t i = 0; i < sw->n_stages; i++)
        free_stage(&sw->stages[i]);
    free(sw->stages);
    bf_analysis_free(&sw->analysis);
    json_decref(sw->warnings);
    json_decref(sw->doc);
    json_decref(sw->lines);
    free(sw->name);
    free(sw->dir);
    free(sw->file);
    free(sw);
}
