/* sweep_view: a sweep's jobs, what varies between them, and their groups. */
#include "sweep_view.h"

#include "alloc.h"
#include "yaml_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int field_index(const char *const *fields, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(fields[i], name) == 0)
            return i;
    return -1;
}

static int field_varies(const json_t *jobs, const char *field)
{
    const json_t *first = json_object_get(
        json_object_get(json_array_get(jobs, 0), "config"), field);
    size_t i;
    json_t *row;
    json_array_foreach(jobs, i, row)
        if (!json_equal(first, json_object_get(json_object_get(row, "config"),
                                               field)))
            return 1;
    return 0;
}

static void add_varying(bf_sweep_view *v, const char *field)
{
    if (v->n_varying < BF_SWEEP_MAX_FIELDS
        && field_index(v->varying, v->n_varying, field) < 0
        && field_varies(v->jobs, field))
        v->varying[v->n_varying++] = field;
}

json_t *bf_sweep_swept_fields(const char *source)
{
    json_t *fields = json_array();
    bf_error err;
    json_t *sweep = source ? bf_yaml_parse(source, strlen(source), NULL, NULL,
                                           &err) : NULL;
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(sweep, "grid"), key, value)
        json_array_append_new(fields, json_string(key));
    if (json_object_get(sweep, "seeds"))
        json_array_append_new(fields, json_string("seed"));
    json_decref(sweep);
    return fields;
}

/* The varying fields: first in the order the sweep file's grid lists them,
 * then seed, then any other (alphabetical, as configs are stored).  Names
 * point into the first job's config. */
static void find_varying(bf_sweep_view *v)
{
    json_t *config = json_object_get(json_array_get(v->jobs, 0), "config");
    json_t *swept = bf_sweep_swept_fields(json_string_value(
        json_object_get(v->sweep, "source")));
    size_t i;
    json_t *name;
    json_array_foreach(swept, i, name) {
        void *iter = json_object_iter_at(config, json_string_value(name));
        if (iter)
            add_varying(v, json_object_iter_key(iter));
    }
    json_decref(swept);
    const char *key;
    json_t *value;
    void *seed = json_object_iter_at(config, "seed");
    if (seed)
        add_varying(v, json_object_iter_key(seed));
    json_object_foreach(config, key, value)
        add_varying(v, key);
}

/* The varying fields but seed, for messages. */
static void print_groupable(const bf_sweep_view *v)
{
    int shown = 0;
    for (int k = 0; k < v->n_varying; k++)
        if (strcmp(v->varying[k], "seed") != 0)
            fprintf(stderr, "%s%s", shown++ ? ", " : "varying: ", v->varying[k]);
    if (!shown)
        fputs("nothing varies but the seed", stderr);
}

/* Sets v->by from the comma-separated list, each a varying field. */
static int parse_by(bf_sweep_view *v, const char *by)
{
    if (!by) {
        for (int i = 0; i < v->n_varying; i++)
            if (strcmp(v->varying[i], "seed") != 0)
                v->by[v->n_by++] = v->varying[i];
        return 0;
    }
    char *list = bf_xstrdup(by), *save = NULL;
    int rc = 0;
    for (char *f = strtok_r(list, ",", &save); f && rc == 0;
         f = strtok_r(NULL, ",", &save)) {
        int i = field_index(v->varying, v->n_varying, f);
        if (i < 0 || strcmp(f, "seed") == 0) {
            fprintf(stderr, "bifocal: --by %s: not a field that varies "
                            "between the jobs of sweep %lld (", f,
                    (long long)v->sweep_id);
            print_groupable(v);
            fputs(")\n", stderr);
            rc = -1;
        } else if (field_index(v->by, v->n_by, f) < 0) {
            v->by[v->n_by++] = v->varying[i];
        }
    }
    free(list);
    return rc;
}

static json_t *group_key(const bf_sweep_view *v, const json_t *job)
{
    json_t *config = json_object_get(job, "config"), *key = json_object();
    for (int i = 0; i < v->n_by; i++)
        json_object_set(key, v->by[i], json_object_get(config, v->by[i]));
    return key;
}

static void group_jobs(bf_sweep_view *v)
{
    v->groups = json_array();
    v->job_group = bf_xcalloc(json_array_size(v->jobs) + 1,
                              sizeof *v->job_group);
    size_t i, g;
    json_t *row, *group;
    json_array_foreach(v->jobs, i, row) {
        json_t *key = group_key(v, row);
        int found = -1;
        json_array_foreach(v->groups, g, group)
            if (json_equal(group, key)) {
                found = (int)g;
                break;
            }
        if (found < 0) {
            found = (int)json_array_size(v->groups);
            json_array_append(v->groups, key);
        }
        json_decref(key);
        v->job_group[i] = found;
    }
    v->n_groups = (int)json_array_size(v->groups);
}

static int by_id(const void *a, const void *b, void *ids)
{
    int64_t x = ((const int64_t *)ids)[*(const int *)a];
    int64_t y = ((const int64_t *)ids)[*(const int *)b];
    return (x > y) - (x < y);
}

/* Sorts the job ids once, so that lookups by id (millions while curves are
 * read) are binary searches. */
static void index_jobs(bf_sweep_view *v)
{
    size_t n = json_array_size(v->jobs);
    int64_t *ids = bf_xcalloc(n + 1, sizeof *ids);
    v->sorted_rows = bf_xcalloc(n + 1, sizeof *v->sorted_rows);
    v->sorted_ids = bf_xcalloc(n + 1, sizeof *v->sorted_ids);
    for (size_t i = 0; i < n; i++) {
        ids[i] = json_integer_value(json_object_get(json_array_get(v->jobs, i),
                                                    "job_id"));
        v->sorted_rows[i] = (int)i;
    }
    qsort_r(v->sorted_rows, n, sizeof *v->sorted_rows, by_id, ids);
    for (size_t i = 0; i < n; i++)
        v->sorted_ids[i] = ids[v->sorted_rows[i]];
    free(ids);
}

int bf_sweep_view_load(bf_sweep_view *v, bf_source *src, int64_t sweep_id,
                       const char *by)
{
    *v = (bf_sweep_view){ .sweep_id = sweep_id };
    json_t *sweeps = bf_source_rows(src, "sweeps", sweep_id);
    if (!sweeps)
        return -1;
    v->sweep = json_incref(json_array_get(sweeps, 0));
    json_decref(sweeps);
    v->jobs = bf_source_rows(src, "job_results", sweep_id);
    if (!v->jobs)
        return -1;
    index_jobs(v);
    find_varying(v);
    if (parse_by(v, by))
        return -1;
    group_jobs(v);
    return 0;
}

void bf_sweep_view_clear(bf_sweep_view *v)
{
    json_decref(v->sweep);
    json_decref(v->jobs);
    json_decref(v->groups);
    free(v->job_group);
    free(v->sorted_ids);
    free(v->sorted_rows);
    *v = (bf_sweep_view){ 0 };
}

int bf_sweep_view_row_of(const bf_sweep_view *v, int64_t job_id)
{
    int lo = 0, hi = (int)json_array_size(v->jobs) - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (v->sorted_ids[mid] == job_id)
            return v->sorted_rows[mid];
        if (v->sorted_ids[mid] < job_id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int bf_sweep_view_group_of(const bf_sweep_view *v, int64_t job_id)
{
    int row = bf_sweep_view_row_of(v, job_id);
    return row < 0 ? -1 : v->job_group[row];
}

/* A label being built: "name=value" pairs separated by spaces. */
typedef struct label {
    char *text;
    size_t len, cap;
} label;

static void label_add(label *l, const char *name, const json_t *value)
{
    char *text = json_is_string(value) ? bf_xstrdup(json_string_value(value))
                                       : json_dumps(value, JSON_ENCODE_ANY);
    size_t need = strlen(name) + strlen(text) + 3;
    if (l->len + need >= l->cap) {
        l->cap = 2 * (l->len + need);
        l->text = bf_xrealloc(l->text, l->cap);
    }
    l->len += (size_t)snprintf(l->text + l->len, l->cap - l->len, "%s%s=%s",
                               l->len ? " " : "", name, text);
    free(text);
}

char *bf_sweep_view_label(const bf_sweep_view *v, int group)
{
    if (v->n_by == 0)
        return bf_xstrdup("all jobs");
    json_t *fields = json_array_get(v->groups, (size_t)group);
    label l = { .text = bf_xcalloc(1, 1), .cap = 1 };
    for (int i = 0; i < v->n_by; i++)
        label_add(&l, v->by[i], json_object_get(fields, v->by[i]));
    return l.text;
}

char *bf_sweep_fields_label(const json_t *fields, const json_t *config)
{
    label l = { .text = bf_xcalloc(1, 1), .cap = 1 };
    size_t i;
    json_t *name;
    json_array_foreach(fields, i, name) {
        const json_t *value = json_object_get(config, json_string_value(name));
        if (value)
            label_add(&l, json_string_value(name), value);
    }
    return l.text;
}

int bf_sweep_view_succeeded(const bf_sweep_view *v)
{
    int n = 0;
    size_t i;
    json_t *row;
    json_array_foreach(v->jobs, i, row) {
        const char *status = json_string_value(json_object_get(row, "status"));
        n += status && strcmp(status, "succeeded") == 0;
    }
    return n;
}
