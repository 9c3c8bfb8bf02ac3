/* sweep_view: a sweep's jobs, what varies between them, and their groups. */
#include "sweep_view.h"

#include "alloc.h"
#include "format.h"
#include "yaml_json.h"
#include "zip_labels.h"

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

json_t *bf_sweep_view_value(const bf_sweep_view *v, size_t row,
                            const char *field)
{
    if (strcmp(field, "stage") == 0)
        return bf_row_store_get(&v->jobs, row, "stage");
    return bf_row_store_config(&v->jobs, row, field);
}

/* The same of a row as read (an object whose config is parsed). */
static json_t *value_in_row(const json_t *row, const char *field)
{
    if (strcmp(field, "stage") == 0)
        return json_object_get(row, "stage");
    return json_object_get(json_object_get(row, "config"), field);
}

int bf_sweep_view_value_is(const json_t *value, const char *text)
{
    char *s = bf_format_cell(value, 1);
    int same = strcmp(s, text) == 0;
    free(s);
    if (!same && json_is_number(value)) {
        char *end;
        double x = strtod(text, &end);
        same = *text && !*end && x == json_number_value(value);
    }
    return same;
}

/* --where FIELD=VALUE[,...], split once: fields[i] = values[i]. */
typedef struct where_pairs {
    char *text;                       /* owned: the list, cut in place */
    const char *fields[BF_SWEEP_MAX_FIELDS], *values[BF_SWEEP_MAX_FIELDS];
    int n;
} where_pairs;

/* Every comma-separated piece must be a pair: an empty one (",", "a=1,",
 * "") is refused, not skipped, or it would filter nothing.  0 (free
 * w->text when done), or -1 after saying why (nothing to free). */
static int where_parse(const char *where, where_pairs *w)
{
    *w = (where_pairs){ .text = bf_xstrdup(where) };
    char *next = w->text;
    while (next) {
        char *p = next, *comma = strchr(p, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        char *eq = strchr(p, '=');
        if (!eq || eq == p || w->n == BF_SWEEP_MAX_FIELDS) {
            fprintf(stderr, "bifocal: --where %s: expected FIELD=VALUE[,...], "
                            "not '%s'%s\n", where, p,
                    w->n == BF_SWEEP_MAX_FIELDS ? " (too many pairs)"
                    : p[0] ? "" : " (an empty pair)");
            free(w->text);
            return -1;
        }
        *eq = '\0';
        w->fields[w->n] = p;
        w->values[w->n++] = eq + 1;
    }
    return 0;
}

static int row_matches(const json_t *row, const where_pairs *w)
{
    for (int i = 0; i < w->n; i++) {
        const json_t *value = value_in_row(row, w->fields[i]);
        if (!value || !bf_sweep_view_value_is(value, w->values[i]))
            return 0;
    }
    return 1;
}

/* Reading the sweep's rows: those --where keeps go into the store. */
typedef struct loading {
    bf_sweep_view *v;
    const where_pairs *w;       /* NULL: keep every row */
} loading;

static void load_row(void *ctx, json_t *row)
{
    loading *l = ctx;
    if (!l->w || row_matches(row, l->w))
        bf_row_store_add(&l->v->jobs, row);
}

/* The stage of a row as an object key ("" without stages); column: the
 * stage column's. */
static const char *stage_key(const bf_sweep_view *v, size_t row, int column)
{
    const char *stage = json_string_value(bf_row_store_at(&v->jobs, row,
                                                          column));
    return stage ? stage : "";
}

/* Whether field takes two values within one stage (in one sweep without
 * stages); "stage" itself varies between stages. */
static int field_varies(const bf_sweep_view *v, const char *field)
{
    int stage = strcmp(field, "stage") == 0, varies = 0;
    int column = bf_row_store_column(&v->jobs, "stage");
    json_t *first = json_object();   /* stage -> its first job's value */
    for (size_t i = 0; i < v->jobs.n_rows && !varies; i++) {
        const char *key = stage ? "" : stage_key(v, i, column);
        json_t *value = stage ? bf_row_store_at(&v->jobs, i, column)
                              : bf_row_store_config(&v->jobs, i, field);
        json_t *seen = json_object_get(first, key);
        if (!seen)
            json_object_set(first, key, value ? value : json_null());
        else if (!json_equal(seen, value ? value : json_null()))
            varies = 1;
    }
    json_decref(first);
    return varies;
}

static void add_varying(bf_sweep_view *v, const char *field)
{
    if (v->n_varying < BF_SWEEP_MAX_FIELDS
        && field_index(v->varying, v->n_varying, field) < 0
        && field_varies(v, field))
        v->varying[v->n_varying++] = field;
}

/* The fields a grid or zip mapping sweeps, in the file's order, into
 * fields (once each). */
static void add_swept(json_t *fields, const json_t *mapping)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)mapping, key, value) {
        size_t i;
        json_t *have;
        int seen = 0;
        json_array_foreach(fields, i, have)
            seen |= strcmp(json_string_value(have), key) == 0;
        if (!seen)
            json_array_append_new(fields, json_string(key));
    }
}

static void add_zip(void *fields, const json_t *zip)
{
    add_swept(fields, zip);
}

/* The swept fields of a sweep file's node (the file, or one stage). */
static void add_node(json_t *fields, const json_t *node)
{
    add_swept(fields, json_object_get(node, "grid"));
    bf_sweep_node_zips(node, add_zip, fields);
}

json_t *bf_sweep_view_swept_fields(const char *source)
{
    json_t *fields = json_array();
    bf_error err;
    json_t *sweep = source ? bf_yaml_parse(source, strlen(source), NULL, NULL,
                                           &err) : NULL;
    add_node(fields, sweep);
    size_t i;
    json_t *stage;
    int seeds = json_object_get(sweep, "seeds") != NULL;
    json_array_foreach(json_object_get(sweep, "stages"), i, stage) {
        add_node(fields, stage);
        seeds |= json_object_get(stage, "seeds") != NULL;
    }
    if (seeds)
        json_array_append_new(fields, json_string("seed"));
    json_decref(sweep);
    return fields;
}

/* How a stage names an earlier one in from: (server/sweep/sweep_from.c). */
static const char STAGE_REF[] = "stage:";

/* The stage of the sweep file named name, or NULL. */
static json_t *stage_named(json_t *stages, const char *name)
{
    size_t i;
    json_t *stage;
    json_array_foreach(stages, i, stage)
        if (json_is_string(json_object_get(stage, "name"))
            && strcmp(json_string_value(json_object_get(stage, "name")),
                      name) == 0)
            return stage;
    return NULL;
}

json_t *bf_sweep_view_taken_fields(const char *source)
{
    json_t *taken = json_object();
    bf_error err;
    json_t *sweep = source ? bf_yaml_parse(source, strlen(source), NULL, NULL,
                                           &err) : NULL;
    json_t *stages = json_object_get(sweep, "stages"), *stage;
    size_t i;
    json_array_foreach(stages, i, stage) {
        const char *from = json_string_value(json_object_get(stage, "from"));
        const char *name = json_string_value(json_object_get(stage, "name"));
        if (!from || !name || strncmp(from, STAGE_REF, strlen(STAGE_REF)))
            continue;
        json_t *fields = json_array();
        json_t *search = json_object_get(stage_named(stages, from + strlen(STAGE_REF)),
                                         "search");
        add_swept(fields, json_object_get(search, "space"));
        json_object_set_new(taken, name, fields);
    }
    json_decref(sweep);
    return taken;
}

/* The varying fields: "stage" in a sweep with stages, then the fields in
 * the order the sweep file's grids and zips list them, then seed, then any
 * other (alphabetical, as configs are stored).  Names point into the first
 * job's config (or are literals). */
static void find_varying(bf_sweep_view *v)
{
    json_t *config = bf_row_store_get(&v->jobs, 0, "config");
    json_t *swept = bf_sweep_view_swept_fields(json_string_value(
        json_object_get(v->sweep, "source")));
    add_varying(v, "stage");
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
        if (strcmp(v->varying[k], "seed") != 0
            && strcmp(v->varying[k], "stage") != 0)
            fprintf(stderr, "%s%s", shown++ ? ", " : "varying: ", v->varying[k]);
    if (!shown)
        fputs("nothing varies but the seed", stderr);
}

/* Sets v->by from the comma-separated list, each a varying field; a sweep
 * with stages groups by stage first whatever the list says. */
static int parse_by(bf_sweep_view *v, const char *by)
{
    if (by && field_index(v->varying, v->n_varying, "stage") >= 0)
        v->by[v->n_by++] = "stage";
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
        if (i < 0 || strcmp(f, "seed") == 0 || strcmp(f, "stage") == 0) {
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

/* Whether the job took field from a selection and the grouping leaves it
 * out: its value follows from the job's cell, so it is no axis.
 * stage_column: the stage column's index. */
static int taken_by_job(const bf_sweep_view *v, size_t job, int stage_column,
                        const char *field)
{
    size_t i;
    json_t *name;
    json_array_foreach(json_object_get(v->taken,
                                       stage_key(v, job, stage_column)),
                       i, name)
        if (strcmp(json_string_value(name), field) == 0)
            return 1;
    return 0;
}

/* {field: value} over the grouping fields, less those the job took from a
 * selection. */
static json_t *group_key(const bf_sweep_view *v, size_t job,
                         int stage_column)
{
    json_t *key = json_object();
    for (int i = 0; i < v->n_by; i++)
        if (!taken_by_job(v, job, stage_column, v->by[i]))
            json_object_set(key, v->by[i],
                            bf_sweep_view_value(v, job, v->by[i]));
    return key;
}

int bf_sweep_view_same_in_groups(const bf_sweep_view *v, const char *field,
                                 int g, int h)
{
    json_t *a = json_object_get(json_array_get(v->groups, (size_t)g), field);
    json_t *b = json_object_get(json_array_get(v->groups, (size_t)h), field);
    return a || b ? json_equal(a, b) : 1;
}

/* Groups in order of their first job, found by their key's text: one pass
 * whatever the number of groups. */
static void group_jobs(bf_sweep_view *v)
{
    v->groups = json_array();
    v->job_group = bf_xcalloc(v->jobs.n_rows + 1, sizeof *v->job_group);
    json_t *index = json_object();      /* key text -> group */
    int stage_column = bf_row_store_column(&v->jobs, "stage");
    for (size_t i = 0; i < v->jobs.n_rows; i++) {
        json_t *key = group_key(v, i, stage_column);
        char *text = json_dumps(key, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_t *found = json_object_get(index, text);
        if (!found) {
            found = json_integer((json_int_t)json_array_size(v->groups));
            json_object_set_new(index, text, found);
            json_array_append(v->groups, key);
        }
        free(text);
        json_decref(key);
        v->job_group[i] = (int)json_integer_value(found);
    }
    json_decref(index);
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
    size_t n = v->jobs.n_rows;
    int64_t *ids = bf_xcalloc(n + 1, sizeof *ids);
    v->sorted_rows = bf_xcalloc(n + 1, sizeof *v->sorted_rows);
    v->sorted_ids = bf_xcalloc(n + 1, sizeof *v->sorted_ids);
    int job_id = bf_row_store_column(&v->jobs, "job_id");
    for (size_t i = 0; i < n; i++) {
        ids[i] = json_integer_value(bf_row_store_at(&v->jobs, i, job_id));
        v->sorted_rows[i] = (int)i;
    }
    qsort_r(v->sorted_rows, n, sizeof *v->sorted_rows, by_id, ids);
    for (size_t i = 0; i < n; i++)
        v->sorted_ids[i] = ids[v->sorted_rows[i]];
    free(ids);
}

/* Each group's first job, for its config (a group's jobs share every
 * grouping field), and the sweep file's named zip entries. */
static void find_group_rows(bf_sweep_view *v)
{
    v->group_row = bf_xcalloc((size_t)v->n_groups + 1, sizeof *v->group_row);
    for (int g = 0; g < v->n_groups; g++)
        v->group_row[g] = -1;
    for (size_t i = v->jobs.n_rows; i-- > 0;)
        v->group_row[v->job_group[i]] = (int)i;
    v->zips = bf_zip_labels(json_string_value(json_object_get(v->sweep,
                                                              "source")));
}

int bf_sweep_view_load(bf_sweep_view *v, bf_source *src, int64_t sweep_id,
                       const char *by, const char *where)
{
    *v = (bf_sweep_view){ .sweep_id = sweep_id };
    /* --where is checked before the sweep is read: a typo costs nothing,
     * however many jobs the sweep has. */
    where_pairs w = { 0 };
    if (where && where_parse(where, &w) < 0)
        return -1;
    json_t *sweeps = bf_source_rows(src, "sweeps", sweep_id);
    loading l = { v, where ? &w : NULL };
    int failed = !sweeps || bf_source_each_row(src, "job_results", sweep_id,
                                               load_row, &l);
    v->sweep = json_incref(json_array_get(sweeps, 0));
    json_decref(sweeps);
    if (!failed && where && v->jobs.n_rows == 0) {
        fprintf(stderr, "bifocal: --where %s: no job of sweep %lld has it\n",
                where, (long long)v->sweep_id);
        failed = 1;
    }
    free(w.text);
    if (failed)
        return -1;
    index_jobs(v);
    find_varying(v);
    if (parse_by(v, by))
        return -1;
    if (!by)
        v->taken = bf_sweep_view_taken_fields(json_string_value(
            json_object_get(v->sweep, "source")));
    group_jobs(v);
    find_group_rows(v);
    return 0;
}

void bf_sweep_view_clear(bf_sweep_view *v)
{
    json_decref(v->sweep);
    bf_row_store_clear(&v->jobs);
    json_decref(v->groups);
    free(v->job_group);
    free(v->group_row);
    json_decref(v->zips);
    json_decref(v->taken);
    free(v->sorted_ids);
    free(v->sorted_rows);
    *v = (bf_sweep_view){ 0 };
}

int bf_sweep_view_row_of(const bf_sweep_view *v, int64_t job_id)
{
    int lo = 0, hi = (int)v->jobs.n_rows - 1;
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

/* Appends one word (a zip entry's name) or pair: "name", "name=text". */
static void label_append(label *l, const char *name, const char *text)
{
    size_t need = strlen(name) + (text ? strlen(text) : 0) + 3;
    if (l->len + need >= l->cap) {
        l->cap = 2 * (l->len + need);
        l->text = bf_xrealloc(l->text, l->cap);
    }
    l->len += (size_t)snprintf(l->text + l->len, l->cap - l->len, "%s%s%s%s",
                               l->len ? " " : "", name, text ? "=" : "",
                               text ? text : "");
}

static void label_add(label *l, const char *name, const json_t *value)
{
    char *text = json_is_string(value) ? bf_xstrdup(json_string_value(value))
                                       : json_dumps(value, JSON_ENCODE_ANY);
    label_append(l, name, text);
    free(text);
}

/* Whether grouping field `field` takes two values among the groups (all
 * of them when among is NULL: it is a grouping field, so it does). */
static int differs_among(const bf_sweep_view *v, const char *field,
                         const int *among, int n)
{
    for (int k = 1; among && k < n; k++)
        if (!bf_sweep_view_same_in_groups(v, field, among[0], among[k]))
            return 1;
    return !among;
}

/* A name for the group's zip entries: each labelled zip the group's jobs
 * belong to whose fields differ among the groups adds its label, and
 * those fields are named no further (covered[i]: by[i] is). */
static void add_zip_names(const bf_sweep_view *v, int group, const int *among,
                          int n, label *l, char *covered)
{
    /* The group's first job's config; a view made without its jobs'
     * configs (the dashboard's) matches on the grouping values. */
    const json_t *values = json_array_get(v->groups, (size_t)group);
    json_t *row = v->group_row ? bf_row_store_row(&v->jobs,
                                     (size_t)v->group_row[group]) : NULL;
    const json_t *config = json_object_get(row, "config");
    const char *stage = json_string_value(json_object_get(row ? row : values,
                                                         "stage"));
    if (!config)
        config = values;
    size_t z, f;
    json_t *zip, *field;
    json_array_foreach(v->zips, z, zip) {
        const char *name = bf_zip_label_of(zip, stage, config);
        int shown = 0;
        json_array_foreach(json_object_get(zip, "fields"), f, field) {
            int i = field_index(v->by, v->n_by, json_string_value(field));
            if (!name || i < 0)
                continue;
            shown |= differs_among(v, v->by[i], among, n);
            covered[i] = 1;
        }
        if (shown)
            label_append(l, name, NULL);
    }
    json_decref(row);
}

char *bf_sweep_view_label_among(const bf_sweep_view *v, int group,
                                const int *among, int n)
{
    if (v->n_by == 0)
        return bf_xstrdup("all jobs");
    json_t *fields = json_array_get(v->groups, (size_t)group);
    label l = { .text = bf_xcalloc(1, 1), .cap = 1 };
    char covered[BF_SWEEP_MAX_FIELDS] = { 0 };
    add_zip_names(v, group, among, n, &l, covered);
    for (int i = 0; i < v->n_by; i++)
        if (!covered[i] && json_object_get(fields, v->by[i])
            && differs_among(v, v->by[i], among, n))
            label_add(&l, v->by[i], json_object_get(fields, v->by[i]));
    return l.text;
}

char *bf_sweep_view_label(const bf_sweep_view *v, int group)
{
    return bf_sweep_view_label_among(v, group, NULL, 0);
}

char *bf_sweep_view_fields_label(const json_t *fields, const json_t *config)
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
    int n = 0, column = bf_row_store_column(&v->jobs, "status");
    for (size_t i = 0; i < v->jobs.n_rows; i++) {
        const char *status = json_string_value(bf_row_store_at(&v->jobs, i,
                                                               column));
        n += status && strcmp(status, "succeeded") == 0;
    }
    return n;
}
