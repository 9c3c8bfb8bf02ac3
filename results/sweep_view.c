/* sweep_view: a sweep's jobs, what varies between them, and their groups. */
#include "sweep_view.h"

#include "alloc.h"
#include "format.h"
#include "job_config.h"
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

json_t *bf_sweep_view_row_value(const json_t *row, const char *field)
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

/* Every comma-separated piece must be a pair: an empty one (",", "a=1,",
 * "") is refused, not skipped, or it would filter nothing.  0, or -1
 * after saying why; free w->text either way. */
static int where_parse(const char *where, bf_sweep_where *w)
{
    *w = (bf_sweep_where){ .text = bf_xstrdup(where) };
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
            return -1;
        }
        *eq = '\0';
        w->fields[w->n] = p;
        w->values[w->n++] = eq + 1;
    }
    return 0;
}

static int row_matches(const json_t *row, const bf_sweep_where *w)
{
    for (int i = 0; i < w->n; i++) {
        const json_t *value = bf_sweep_view_row_value(row, w->fields[i]);
        if (!value || !bf_sweep_view_value_is(value, w->values[i]))
            return 0;
    }
    return 1;
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
    bf_zip_labels_each(node, add_zip, fields);
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

/* The fields each stage with `from: "stage:NAME"` takes from NAME's
 * selection (the keys of NAME's search space), as the sweep file (source)
 * says: {stage: [field, ...]}, new reference; empty when source does not
 * parse or no stage takes any.  The one answer to "which varying fields
 * are no axes", for the results commands and the dashboard alike. */
static json_t *taken_fields(const char *source)
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

/* A stage's (or file's) search space; an empty object for none. */
static json_t *space_of(const json_t *stage)
{
    json_t *space = json_object_get(json_object_get(stage, "search"), "space");
    return json_is_object(space) ? json_incref(space) : json_object();
}

/* The stages of a sweep file (source, as submitted) that search
 * (`search:`), by name, "" for a file searching at its top level, each
 * with its search space (`space:`, the report's slice axes): an object
 * (new reference; empty when source does not parse). */
static json_t *searched_stages(const char *source)
{
    json_t *searched = json_object();
    bf_error err;
    json_t *sweep = source ? bf_yaml_parse(source, strlen(source), NULL, NULL,
                                           &err) : NULL;
    if (json_object_get(sweep, "search"))
        json_object_set_new(searched, "", space_of(sweep));
    json_t *stage;
    size_t i;
    json_array_foreach(json_object_get(sweep, "stages"), i, stage) {
        const char *name = json_string_value(json_object_get(stage, "name"));
        if (name && json_object_get(stage, "search"))
            json_object_set_new(searched, name, space_of(stage));
    }
    json_decref(sweep);
    return searched;
}

int bf_sweep_view_searched(const bf_sweep_view *v, int group)
{
    if (!v->searched || !v->group_row)
        return 0;
    const char *stage = json_string_value(bf_sweep_view_value(
        v, (size_t)v->group_row[group], "stage"));
    return json_object_get(v->searched, stage ? stage : "") != NULL;
}

/* Adds field to the candidates if config has it and it is none yet. */
static void add_candidate(bf_sweep_view *v, json_t *config, const char *field)
{
    void *iter = json_object_iter_at(config, field);
    if (iter && field_index(v->candidates, v->n_candidates, field) < 0)
        v->candidates[v->n_candidates++] = json_object_iter_key(iter);
}

/* The fields that may vary, in the order the varying ones are listed:
 * "stage", then those of the first job's config that the sweep file's
 * grids and zips list, in its order, then seed, then any other
 * (alphabetical, as configs are stored).  Names point into that config
 * (or are literals). */
static void find_candidates(bf_sweep_view *v, json_t *config)
{
    size_t n = json_object_size(config) + 2;
    v->candidates = bf_xcalloc(n, sizeof *v->candidates);
    v->varies = bf_xcalloc(n, 1);
    v->candidates[v->n_candidates++] = "stage";
    json_t *swept = bf_sweep_view_swept_fields(json_string_value(
        json_object_get(v->sweep, "source")));
    size_t i;
    json_t *name;
    json_array_foreach(swept, i, name)
        add_candidate(v, config, json_string_value(name));
    json_decref(swept);
    add_candidate(v, config, "seed");
    const char *key;
    json_t *value;
    json_object_foreach(config, key, value)
        add_candidate(v, config, key);
}

/* Notes the candidates in which row differs from the first job of its
 * stage ("stage" itself: from the first job). */
static void note_varying(bf_sweep_view *v, const json_t *row)
{
    const json_t *stage = json_object_get(row, "stage");
    const char *key = json_is_string(stage) ? json_string_value(stage) : "";
    json_t *first = json_object_get(v->stage_first, key);
    if (!first)
        json_object_set(v->stage_first, key, first = (json_t *)row);
    for (int k = 0; k < v->n_candidates; k++) {
        int whole = k == 0;     /* "stage": against the first job's */
        const json_t *a = bf_sweep_view_row_value(row, v->candidates[k]);
        const json_t *b = bf_sweep_view_row_value(whole ? v->first : first,
                                                  v->candidates[k]);
        v->varies[k] |= !json_equal(a ? a : json_null(), b ? b : json_null());
    }
}

/* Adds a job's training depth to the distinct ones (a handful). */
static void note_depth(bf_sweep_view *v, json_t *depth)
{
    size_t i;
    json_t *d;
    json_array_foreach(v->depths, i, d)
        if (json_equal(d, depth))
            return;
    if (depth)
        json_array_append(v->depths, depth);
}

void bf_sweep_view_begin(bf_sweep_view *v, int64_t sweep_id, json_t *sweep)
{
    *v = (bf_sweep_view){ .sweep_id = sweep_id, .sweep = json_incref(sweep) };
}

void bf_sweep_view_note(bf_sweep_view *v, json_t *row)
{
    if (v->n_jobs++ == 0) {
        v->first = json_incref(row);
        v->stage_first = json_object();
        v->depths = json_array();
        find_candidates(v, json_object_get(row, "config"));
    }
    const char *status = json_string_value(json_object_get(row, "status"));
    v->n_succeeded += status && strcmp(status, "succeeded") == 0;
    note_varying(v, row);
    note_depth(v, json_object_get(row, "depth"));
}

void bf_sweep_view_note_varies(bf_sweep_view *v, const char *field)
{
    int k = field_index(v->candidates, v->n_candidates, field);
    if (k >= 0)
        v->varies[k] = 1;
}

/* The varying fields from the candidates, the first BF_SWEEP_MAX_FIELDS. */
static void find_varying(bf_sweep_view *v)
{
    for (int k = 0; k < v->n_candidates && v->n_varying < BF_SWEEP_MAX_FIELDS;
         k++)
        if (v->varies[k])
            v->varying[v->n_varying++] = v->candidates[k];
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

/* Whether the job of row took field from a selection and the grouping
 * leaves it out: its value follows from the job's cell, so it is no
 * axis. */
static int taken_by_job(const bf_sweep_view *v, const json_t *row,
                        const char *field)
{
    const char *stage = json_string_value(json_object_get(row, "stage"));
    size_t i;
    json_t *name;
    json_array_foreach(json_object_get(v->taken, stage ? stage : ""), i, name)
        if (strcmp(json_string_value(name), field) == 0)
            return 1;
    return 0;
}

/* {field: value} over the grouping fields, less those the job took from a
 * selection. */
static json_t *group_key(const bf_sweep_view *v, const json_t *row)
{
    json_t *key = json_object();
    for (int i = 0; i < v->n_by; i++)
        if (!taken_by_job(v, row, v->by[i]))
            json_object_set(key, v->by[i],
                            bf_sweep_view_row_value(row, v->by[i]));
    return key;
}

/* The group of a row's job among those found so far (index: their key's
 * text -> group), -1 if none; key_out (when given) its key. */
static int find_group(const bf_sweep_view *v, const json_t *index,
                      const json_t *row, json_t **key_out, char **text_out)
{
    json_t *key = group_key(v, row);
    char *text = json_dumps(key, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_t *found = json_object_get(index, text);
    if (key_out) {
        *key_out = key;
        *text_out = text;
    } else {
        json_decref(key);
        free(text);
    }
    return found ? (int)json_integer_value(found) : -1;
}

/* Whether groups g and h have the same value of grouping field field
 * (both without it, as a stage that took it from a selection: the same). */
static int same_in_groups(const bf_sweep_view *v, const char *field,
                          int g, int h)
{
    json_t *a = json_object_get(json_array_get(v->groups, (size_t)g), field);
    json_t *b = json_object_get(json_array_get(v->groups, (size_t)h), field);
    return a || b ? json_equal(a, b) : 1;
}

int bf_sweep_view_group(bf_sweep_view *v, const json_t *row, json_t *index)
{
    json_t *key;
    char *text;
    int g = find_group(v, index, row, &key, &text);
    if (g < 0) {
        g = v->n_groups++;
        json_object_set_new(index, text, json_integer(g));
        json_array_append(v->groups, key);
    }
    free(text);
    json_decref(key);
    return g;
}

/* The group of row's job, a new one in order of the jobs seen (index:
 * key text -> group; first: per group, its first job's id). */
static int group_of_row(bf_sweep_view *v, const json_t *row, json_t *index,
                        int64_t **first)
{
    int n = v->n_groups, g = bf_sweep_view_group(v, row, index);
    if (g == n) {
        *first = bf_xrealloc(*first, (size_t)v->n_groups * sizeof **first);
        (*first)[g] = json_integer_value(json_object_get(row, "job_id"));
    }
    return g;
}

/* Counts row's job in its group g, a view of every group's counts. */
static void count_job(bf_sweep_view *v, const json_t *row, int g)
{
    if (g == v->n_groups - 1 && v->n_counted < v->n_groups) {   /* new */
        v->group_jobs = bf_xrealloc(v->group_jobs, (size_t)v->n_groups
                                                   * sizeof *v->group_jobs);
        v->group_succeeded = bf_xrealloc(v->group_succeeded,
                                         (size_t)v->n_groups
                                         * sizeof *v->group_succeeded);
        v->group_jobs[g] = v->group_succeeded[g] = 0;
        v->n_counted = v->n_groups;
    }
    const char *s = json_string_value(json_object_get(row, "status"));
    v->group_jobs[g]++;
    v->group_succeeded[g] += s && strcmp(s, "succeeded") == 0;
}

void bf_sweep_view_hold_job(bf_sweep_view *v, const json_t *row, int g,
                            int whole)
{
    size_t n = v->jobs.n_rows, k = v->n_held;
    if ((k & (k - 1)) == 0)     /* room doubles at each power of two */
        v->held = bf_xrealloc(v->held, (2 * k + 1) * sizeof *v->held);
    v->held[v->n_held++] = (bf_sweep_held){
        .id = json_integer_value(json_object_get(row, "job_id")),
        .row = whole ? (int)n : -1, .group = g };
    if (!whole)
        return;
    if ((n & (n - 1)) == 0)
        v->job_group = bf_xrealloc(v->job_group,
                                   (2 * n + 1) * sizeof *v->job_group);
    v->job_group[n] = g;
    bf_row_store_add(&v->jobs, row);
}

/* Orders indexes by the ids they index (ids[a] against ids[b]). */
static int by_id(const void *a, const void *b, void *ids)
{
    int64_t x = ((const int64_t *)ids)[*(const int *)a];
    int64_t y = ((const int64_t *)ids)[*(const int *)b];
    return (x > y) - (x < y);
}

/* Whether hold keeps row, the n-th job seen. */
static int held(const bf_sweep_hold *h, const json_t *row, size_t n)
{
    const char *s = json_string_value(json_object_get(row, "status"));
    return !h->status || n < h->first || (s && strcmp(s, h->status) == 0);
}

/* The jobs not held (pass of order_groups): each of a group held has its
 * first job's id in first and, with h->count, is counted. */
static int visit_not_held(bf_sweep_view *v, bf_source *src,
                          const bf_sweep_hold *h, const json_t *index,
                          int64_t *first)
{
    bf_source_cursor c;
    json_t *row;
    size_t seen = 0;
    if (bf_source_cursor_open(&c, src, "job_results", v->sweep_id) == 0)
        while ((row = bf_sweep_view_next(v, &c))) {
            int64_t id = json_integer_value(json_object_get(row, "job_id"));
            int g = held(h, row, seen++) ? -1
                    : find_group(v, index, row, NULL, NULL);
            if (g < 0)
                continue;
            if (id < first[g])
                first[g] = id;
            if (h->count)
                count_job(v, row, g);
        }
    return bf_source_cursor_close(&c);
}

/* Applies renumber (old group -> new) to a per-group count array. */
static void renumber_counts(size_t *count, const int *order, size_t n)
{
    if (!count)
        return;
    size_t *was = bf_xmalloc((n + 1) * sizeof *was);
    memcpy(was, count, n * sizeof *was);
    for (size_t k = 0; k < n; k++)
        count[k] = was[order[k]];
    free(was);
}

/* Numbers the groups in order of their first job of any status, as a
 * view holding every job numbers them: one more pass over the jobs not
 * held, each looked up in index; memory per group, none per job. */
static int order_groups(bf_sweep_view *v, bf_source *src,
                        const bf_sweep_hold *h, const json_t *index,
                        int64_t *first)
{
    if (visit_not_held(v, src, h, index, first))
        return -1;
    size_t n = (size_t)v->n_groups;
    int *order = bf_xcalloc(n + 1, sizeof *order),
        *renumber = bf_xcalloc(n + 1, sizeof *renumber);
    for (size_t g = 0; g < n; g++)
        order[g] = (int)g;
    qsort_r(order, n, sizeof *order, by_id, first);
    json_t *groups = json_array();
    for (size_t k = 0; k < n; k++) {
        renumber[order[k]] = (int)k;
        json_array_append(groups, json_array_get(v->groups, (size_t)order[k]));
    }
    json_decref(v->groups);
    v->groups = groups;
    for (size_t i = 0; i < v->jobs.n_rows; i++)
        v->job_group[i] = renumber[v->job_group[i]];
    for (size_t i = 0; i < v->n_held; i++)
        v->held[i].group = renumber[v->held[i].group];
    renumber_counts(v->group_jobs, order, n);
    renumber_counts(v->group_succeeded, order, n);
    free(order);
    free(renumber);
    return 0;
}

static int by_job_id(const void *a, const void *b)
{
    const bf_sweep_held *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

void bf_sweep_view_held(bf_sweep_view *v)
{
    /* sorted once, so that lookups by id (millions while curves are read)
     * are binary searches */
    if (v->n_held > 1)
        qsort(v->held, v->n_held, sizeof *v->held, by_job_id);
    /* each group's first job, for its config (a group's jobs share every
     * grouping field) */
    v->group_row = bf_xcalloc((size_t)v->n_groups + 1, sizeof *v->group_row);
    for (int g = 0; g < v->n_groups; g++)
        v->group_row[g] = -1;
    for (size_t i = v->jobs.n_rows; i-- > 0;)
        v->group_row[v->job_group[i]] = (int)i;
}

json_t *bf_sweep_view_next(const bf_sweep_view *v, bf_source_cursor *c)
{
    json_t *row;
    while ((row = bf_source_cursor_next(c)) && !row_matches(row, &v->where))
        ;
    return row;
}

int bf_sweep_view_scan(bf_sweep_view *v, bf_source *src, int64_t sweep_id,
                       const char *by, const char *where)
{
    *v = (bf_sweep_view){ .sweep_id = sweep_id };
    /* --where is checked before the sweep is read: a typo costs nothing,
     * however many jobs the sweep has. */
    if (where && where_parse(where, &v->where) < 0)
        return -1;
    bf_sweep_where w = v->where;
    json_t *sweeps = bf_source_rows(src, "sweeps", sweep_id);
    bf_sweep_view_begin(v, sweep_id, json_array_get(sweeps, 0));
    v->where = w;
    int read = sweeps != NULL;
    json_decref(sweeps);
    bf_source_cursor c;
    json_t *row;
    if (read && bf_source_cursor_open(&c, src, "job_results", sweep_id) == 0)
        while ((row = bf_sweep_view_next(v, &c)))
            bf_sweep_view_note(v, row);
    if (!read || bf_source_cursor_close(&c))
        return -1;
    if (where && v->n_jobs == 0) {
        fprintf(stderr, "bifocal: --where %s: no job of sweep %lld has it\n",
                where, (long long)v->sweep_id);
        return -1;
    }
    return bf_sweep_view_end(v, by);
}

int bf_sweep_view_end(bf_sweep_view *v, const char *by)
{
    find_varying(v);
    if (parse_by(v, by))
        return -1;
    const char *source = json_string_value(json_object_get(v->sweep,
                                                           "source"));
    if (!by)
        v->taken = taken_fields(source);
    v->searched = searched_stages(source);
    v->zips = bf_zip_labels(source);
    v->groups = json_array();
    return 0;
}

/* Per group during a hold: the row of its first job held whole (-1:
 * none yet) and whether it has a job of the hold's status, grown as
 * groups are found; the groups with one counted. */
typedef struct hold_groups {
    int *row;
    unsigned char *of_status;
    int n;
    size_t n_of_status;
} hold_groups;

static void hold_groups_grow(hold_groups *f, int g)
{
    if (g < f->n)
        return;
    int n = 2 * g + 16;
    f->row = bf_xrealloc(f->row, (size_t)n * sizeof *f->row);
    f->of_status = bf_xrealloc(f->of_status, (size_t)n);
    for (int i = f->n; i < n; i++) {
        f->row[i] = -1;
        f->of_status[i] = 0;
    }
    f->n = n;
}

/* Notes that group g has row's job; 0, or -1 after saying that more
 * groups than h->max_groups have a job of h->status. */
static int note_group(const bf_sweep_view *v, const bf_sweep_hold *h,
                      const json_t *row, int g, hold_groups *f)
{
    hold_groups_grow(f, g);
    const char *s = json_string_value(json_object_get(row, "status"));
    if (f->of_status[g] || !h->status || !s || strcmp(s, h->status) != 0)
        return 0;
    f->of_status[g] = 1;
    if (!h->max_groups || ++f->n_of_status <= h->max_groups)
        return 0;
    char *why = bf_sweep_view_too_many_groups(v, h->max_groups, h->status);
    fprintf(stderr, "bifocal: %s\n", why);
    free(why);
    return -1;
}

char *bf_sweep_view_too_many_groups(const bf_sweep_view *v, size_t max,
                                    const char *status)
{
    size_t n = 16;
    for (int i = 0; i < v->n_by; i++)
        n += strlen(v->by[i]) + 2;
    char *by = bf_xcalloc(n, 1);
    strcpy(by, v->n_by ? "" : "nothing");
    for (int i = 0; i < v->n_by; i++)
        strcat(strcat(by, i ? ", " : ""), v->by[i]);
    char *text;
    if (asprintf(&text, "sweep %lld: more than %zu groups have a %s job "
                        "(grouped by %s); compare a part of it (--where "
                        "stage=NAME or FIELD=VALUE) or group by fewer "
                        "fields (--by FIELD,...)", (long long)v->sweep_id,
                 max, status, by) < 0)
        abort();
    free(by);
    return text;
}

/* Whether row has, in every field of alike, the value of row `first` of
 * v->jobs (its group's first held; -1: none yet). */
static int like_first(const bf_sweep_view *v, const json_t *row, int first,
                      const char *const *alike)
{
    if (first < 0)
        return 0;
    for (; alike && *alike; alike++) {
        json_t *a = bf_sweep_view_row_value(row, *alike),
               *b = bf_sweep_view_value(v, (size_t)first, *alike);
        if ((a || b) && !(a && b && json_equal(a, b)))
            return 0;
    }
    return 1;
}

/* Holds row, the n-th job seen, of group g: whole without on_job, among
 * the first ones, or unlike its group's first row held. */
static void hold_kept(bf_sweep_view *v, const bf_sweep_hold *h,
                      const json_t *row, int g, size_t n, hold_groups *f)
{
    int *first = &f->row[g];
    int whole = !h->on_job || n < h->first
                || !like_first(v, row, *first, h->alike);
    if (whole && *first < 0)
        *first = (int)v->jobs.n_rows;
    bf_sweep_view_hold_job(v, row, g, whole);
    if (h->on_job)
        h->on_job(h->ctx, row);
}

int bf_sweep_view_hold(bf_sweep_view *v, bf_source *src,
                       const bf_sweep_hold *h)
{
    hold_groups f = { 0 };
    json_t *index = json_object(), *row;
    int64_t *first = NULL;
    int rc = 0, partial = 0;
    size_t seen = 0;
    bf_source_cursor c;
    if (bf_source_cursor_open(&c, src, "job_results", v->sweep_id) == 0)
        while (rc == 0 && (row = bf_sweep_view_next(v, &c))) {
            int keep = held(h, row, seen);
            partial |= !keep;
            if (keep) {
                int g = group_of_row(v, row, index, &first);
                if (h->count)
                    count_job(v, row, g);
                rc = note_group(v, h, row, g, &f);
                hold_kept(v, h, row, g, seen, &f);
            }
            seen++;
        }
    rc = bf_source_cursor_close(&c) ? -1 : rc;
    free(f.row);
    free(f.of_status);
    if (rc == 0 && partial && (h->count || v->n_groups > 1))
        rc = order_groups(v, src, h, index, first);
    json_decref(index);
    free(first);
    bf_sweep_view_held(v);
    return rc;
}

void bf_sweep_view_clear(bf_sweep_view *v)
{
    json_decref(v->sweep);
    json_decref(v->first);
    json_decref(v->stage_first);
    json_decref(v->depths);
    free(v->candidates);
    free(v->varies);
    free(v->where.text);
    bf_row_store_clear(&v->jobs);
    json_decref(v->groups);
    free(v->job_group);
    free(v->group_jobs);
    free(v->group_succeeded);
    free(v->group_row);
    json_decref(v->zips);
    json_decref(v->taken);
    json_decref(v->searched);
    free(v->held);
    *v = (bf_sweep_view){ 0 };
}

static const bf_sweep_held *held_job(const bf_sweep_view *v, int64_t job_id)
{
    const bf_sweep_held key = { .id = job_id };
    return v->n_held ? bsearch(&key, v->held, v->n_held, sizeof *v->held,
                               by_job_id) : NULL;
}

int bf_sweep_view_config_row(const bf_sweep_view *v, int64_t job_id)
{
    const bf_sweep_held *j = held_job(v, job_id);
    return !j ? -1 : j->row >= 0 ? j->row : v->group_row[j->group];
}

int bf_sweep_view_group_of(const bf_sweep_view *v, int64_t job_id)
{
    const bf_sweep_held *j = held_job(v, job_id);
    return j ? j->group : -1;
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

/* name=value, a real at `digits` significant digits (a label is read, not
 * parsed back: JSON and CSV keep every digit). */
static void label_add(label *l, const char *name, const json_t *value,
                      int digits)
{
    char number[32];
    if (json_is_real(value)) {
        bf_format_number(json_real_value(value), digits, number,
                         sizeof number);
        label_append(l, name, number);
        return;
    }
    char *text = json_is_string(value) ? bf_xstrdup(json_string_value(value))
                                       : json_dumps(value, JSON_ENCODE_ANY);
    label_append(l, name, text);
    free(text);
}

/* The digits group's real value of field needs to print apart from every
 * other group's (bf_format_digits_apart); BF_FORMAT_DIGITS mostly. */
static int digits_among_groups(const bf_sweep_view *v, const char *field,
                               const json_t *value)
{
    int digits = BF_FORMAT_DIGITS;
    for (int g = 0; json_is_real(value) && g < v->n_groups; g++) {
        const json_t *other = json_object_get(
            json_array_get(v->groups, (size_t)g), field);
        if (json_is_number(other)) {
            int d = bf_format_digits_apart(json_real_value(value),
                                           json_number_value(other));
            digits = d > digits ? d : digits;
        }
    }
    return digits;
}

/* Whether grouping field `field` takes two values among the groups (all
 * of them when among is NULL: it is a grouping field, so it does). */
static int differs_among(const bf_sweep_view *v, const char *field,
                         const int *among, int n)
{
    for (int k = 1; among && k < n; k++)
        if (!same_in_groups(v, field, among[0], among[k]))
            return 1;
    return !among;
}

int bf_sweep_view_has_effect(const json_t *config, const char *field)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    const char *rope = json_string_value(json_object_get(config, "rope"));
    int r = rope ? bf_rope_from_name(rope) : -1;
    if (r >= 0)
        cfg.rope = (bf_rope_kind)r;
    return bf_job_config_field_matters(&cfg, field);
}

/* A name for the group's zip entries: each labelled zip the group's jobs
 * belong to whose fields differ among the groups adds its label, and
 * those fields are named no further (covered[i]: by[i] is). */
static void add_zip_names(const bf_sweep_view *v, const json_t *config,
                          const char *stage, const int *among, int n,
                          label *l, char *covered)
{
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
}

/* The grouping fields not covered that differ among the groups, each a
 * pair; with effective, only those with an effect on config's variant. */
static void add_fields(const bf_sweep_view *v, int group, const int *among,
                       int n, const json_t *config, int effective,
                       const char *covered, label *l)
{
    json_t *fields = json_array_get(v->groups, (size_t)group);
    for (int i = 0; i < v->n_by; i++) {
        const json_t *value = json_object_get(fields, v->by[i]);
        if (!covered[i] && value && differs_among(v, v->by[i], among, n)
            && (!effective || bf_sweep_view_has_effect(config, v->by[i])))
            label_add(l, v->by[i], value,
                      digits_among_groups(v, v->by[i], value));
    }
}

char *bf_sweep_view_label_among(const bf_sweep_view *v, int group,
                                const int *among, int n)
{
    if (v->n_by == 0)
        return bf_xstrdup("all jobs");
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
    label l = { .text = bf_xcalloc(1, 1), .cap = 1 };
    char covered[BF_SWEEP_MAX_FIELDS] = { 0 };
    add_zip_names(v, config, stage, among, n, &l, covered);
    add_fields(v, group, among, n, config, 1, covered, &l);
    /* nothing with an effect tells it apart: name what does (the sweep
     * warned of the fields without effect when it was submitted) */
    if (l.len == 0)
        add_fields(v, group, among, n, config, 0, covered, &l);
    json_decref(row);
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
        const char *field = json_string_value(name);
        const json_t *value = json_object_get(config, field);
        if (value && bf_sweep_view_has_effect(config, field))
            label_add(&l, field, value, BF_FORMAT_DIGITS);
    }
    return l.text;
}
