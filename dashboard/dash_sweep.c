/* dash_sweep: a sweep's jobs in a few bytes each, its counts moved by the
 * status feed, its job table paged from them.  See dash_sweep.h. */
#include "dash_sweep.h"

#include "adaptive.h"
#include "alloc.h"
#include "compare.h"
#include "db.h"
#include "hash.h"
#include "job_config.h"
#include "report.h"
#include "source.h"
#include "sweep_view.h"
#include "zip_labels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Filter options are listed up to this many values a field (a sweep of a
 * million seeds would make a select of a million options). */
#define MAX_LISTED_VALUES 1000
/* Training depths are 1 .. 256 (common/job_config.c). */
#define MAX_DEPTHS 256

/* The jobs that differ only in seed. */
typedef struct group {
    long long count[BF_JOB_N_STATUSES];
} group;

struct bf_dash_sweep {
    int64_t sweep_id;
    json_t *sweep;              /* the sweeps row */
    /* The grouping, as compare's (results/sweep_view.h, one row noted per
     * cell): its groups are view.groups, {by field: value} each. */
    bf_sweep_view view;
    json_t *varying;            /* view.varying, names in order */
    json_t *by;                 /* view.by: the grouping fields */
    size_t n;                   /* jobs, by id: */
    int64_t *ids, *seed;
    int32_t *group;
    uint8_t *status;
    int n_groups;
    group *groups;
    json_t *train_depths;
    json_t *seeds;              /* the distinct seeds (or null: too many) */
    long long count[BF_JOB_N_STATUSES];
    int64_t seq;                /* the newest status_seq applied */
};

struct bf_dash_changes {
    size_t n, cap;
    int64_t *ids;
    uint8_t *status;
    int64_t seq, n_jobs;
    char sweep_status[16];
};

/* ---- values --------------------------------------------------------------- */

/* Numbers by value (1 and 1.0 are one value), strings as text, null first. */
static int value_cmp(const json_t *a, const json_t *b)
{
    int ta = a ? json_typeof(a) : JSON_NULL, tb = b ? json_typeof(b) : JSON_NULL;
    if (json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        return (x > y) - (x < y);
    }
    if (json_is_string(a) && json_is_string(b))
        return strcmp(json_string_value(a), json_string_value(b));
    if (ta != tb)
        return ta - tb;
    char *x = json_dumps(a, JSON_ENCODE_ANY | JSON_SORT_KEYS);
    char *y = json_dumps(b, JSON_ENCODE_ANY | JSON_SORT_KEYS);
    int c = strcmp(x ? x : "", y ? y : "");
    free(x);
    free(y);
    return c;
}

static int index_of(const json_t *names, const char *name)
{
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n)
        if (strcmp(json_string_value(n), name) == 0)
            return (int)i;
    return -1;
}

static int find_job(const bf_dash_sweep *s, int64_t id)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->ids[lo] == id ? (int)lo : -1;
}

/* ---- loading -------------------------------------------------------------- */

/* What the two passes over the jobs gather beside the held arrays: the
 * first reads them and notes one row per cell (a cell's jobs differ only
 * in seed) for the varying fields, the second groups them. */
typedef struct load_pass {
    sqlite3_stmt *row;          /* one job's stage, depth and config */
    int64_t *cell;              /* per job held: its cell (-1: none) */
    int *cell_group;            /* per cell: its group, -1 not yet, -2
                                   noted (first pass) */
    int64_t n_cells;
    json_t *index;              /* group key text -> group */
    int64_t min_seed, max_seed;
    int64_t depths[MAX_DEPTHS];
    int n_depths;
} load_pass;

/* A job as the sweep's index gives it (jobs_by_sweep_status). */
typedef struct indexed_job {
    int64_t id, seed;
    int64_t cell;               /* -1: none stored (its own cell) */
    int status;
} indexed_job;

/* Training depths number a handful: a list searched in place. */
static void add_depth(load_pass *p, int64_t depth)
{
    for (int i = 0; i < p->n_depths; i++)
        if (p->depths[i] == depth)
            return;
    if (p->n_depths < MAX_DEPTHS)
        p->depths[p->n_depths++] = depth;
}

/* The row of the job with this id as the results commands read its config
 * (bf_db_row); NULL on a database error. */
static json_t *job_row(load_pass *p, int64_t id)
{
    sqlite3_reset(p->row);
    sqlite3_bind_int64(p->row, 1, id);
    return sqlite3_step(p->row) == SQLITE_ROW ? bf_db_row(p->row) : NULL;
}

/* Notes cell's row (the first pass), once a cell, and its depth; 0, or
 * -1. */
static int note_cell(bf_dash_sweep *s, load_pass *p, const indexed_job *j)
{
    if (j->cell >= p->n_cells) {
        int64_t n = 2 * j->cell + 1024;
        p->cell_group = bf_xrealloc(p->cell_group, (size_t)n * sizeof *p->cell_group);
        for (int64_t c = p->n_cells; c < n; c++)
            p->cell_group[c] = -1;
        p->n_cells = n;
    }
    if (j->cell >= 0 && p->cell_group[j->cell] == -2)
        return 0;
    json_t *row = job_row(p, j->id);
    if (!row)
        return -1;
    bf_sweep_view_note(&s->view, row);
    add_depth(p, json_integer_value(json_object_get(row, "depth")));
    json_decref(row);
    if (j->cell >= 0)
        p->cell_group[j->cell] = -2;
    return 0;
}

/* The group of the job with this id, from its row (the second pass). */
static int group_of_job(bf_dash_sweep *s, load_pass *p, int64_t id)
{
    json_t *row = job_row(p, id);
    if (!row)
        return -1;
    int g = bf_sweep_view_group(&s->view, row, p->index);
    if (g == s->n_groups) {
        s->groups = bf_xrealloc(s->groups, (size_t)(g + 1) * sizeof *s->groups);
        s->groups[g] = (group){ 0 };
        s->n_groups++;
    }
    json_decref(row);
    return g;
}

/* The sweep's jobs of one status in id order, as its index holds them
 * (jobs_by_sweep_status: sweep, status, id, cell, seed; migration 009):
 * one cursor per status, whose heads are merged by id, so that a million
 * jobs go straight into the held arrays, in order, with no copy and no
 * sort. */
typedef struct status_cursor {
    sqlite3_stmt *st;           /* NULL once past its last job */
    indexed_job head;
} status_cursor;

/* Steps c to its next job; 0, or -1 on a database error. */
static int cursor_next(status_cursor *c)
{
    int rc = sqlite3_step(c->st);
    if (rc == SQLITE_ROW) {
        c->head.id = sqlite3_column_int64(c->st, 0);
        c->head.seed = sqlite3_column_int64(c->st, 1);
        c->head.cell = sqlite3_column_type(c->st, 2) == SQLITE_NULL
                       ? -1 : sqlite3_column_int64(c->st, 2);
        return 0;
    }
    sqlite3_finalize(c->st);
    c->st = NULL;
    return rc == SQLITE_DONE ? 0 : -1;
}

/* A cursor per status (the statuses the schema's CHECK allows), each on
 * its first job.  0, or -1 (the cursors made are finalized). */
static int open_cursors(sqlite3 *db, int64_t sweep_id,
                        status_cursor c[BF_JOB_N_STATUSES])
{
    for (int k = 0; k < BF_JOB_N_STATUSES; k++) {
        c[k] = (status_cursor){ .head.status = k };
        c[k].st = bf_db_prepare(db,
            "SELECT job_id, seed, cell FROM jobs INDEXED BY jobs_by_sweep_status"
            " WHERE sweep_id = ?1 AND status = ?2 ORDER BY job_id");
        if (c[k].st) {
            sqlite3_bind_int64(c[k].st, 1, sweep_id);
            sqlite3_bind_text(c[k].st, 2, bf_job_status_name(k), -1, SQLITE_STATIC);
        }
        if (!c[k].st || cursor_next(&c[k])) {
            for (int i = 0; i <= k; i++)
                sqlite3_finalize(c[i].st);
            return -1;
        }
    }
    return 0;
}

/* The cursor whose head has the lowest id, or NULL when all are done. */
static status_cursor *lowest(status_cursor c[BF_JOB_N_STATUSES])
{
    status_cursor *best = NULL;
    for (int k = 0; k < BF_JOB_N_STATUSES; k++)
        if (c[k].st && (!best || c[k].head.id < best->head.id))
            best = &c[k];
    return best;
}

/* The held arrays with room for cap jobs. */
static void resize_jobs(bf_dash_sweep *s, load_pass *p, size_t cap)
{
    s->ids = bf_xrealloc(s->ids, (cap + 1) * sizeof *s->ids);
    s->seed = bf_xrealloc(s->seed, (cap + 1) * sizeof *s->seed);
    s->group = bf_xrealloc(s->group, (cap + 1) * sizeof *s->group);
    s->status = bf_xrealloc(s->status, cap + 1);
    p->cell = bf_xrealloc(p->cell, (cap + 1) * sizeof *p->cell);
}

static void push_job(bf_dash_sweep *s, load_pass *p, const indexed_job *j)
{
    p->min_seed = s->n == 0 || j->seed < p->min_seed ? j->seed : p->min_seed;
    p->max_seed = s->n == 0 || j->seed > p->max_seed ? j->seed : p->max_seed;
    s->ids[s->n] = j->id;
    s->seed[s->n] = j->seed;
    p->cell[s->n] = j->cell;
    s->status[s->n++] = (uint8_t)j->status;
    s->count[j->status]++;
}

/* The first pass: every job of the sweep into the held arrays, by id (its
 * status, seed and cell), and a row per cell noted.  0, or -1 (printed). */
static int read_jobs(bf_dash_sweep *s, sqlite3 *db, load_pass *p)
{
    json_int_t expect = json_integer_value(json_object_get(s->sweep, "n_jobs"));
    /* sweeps.n_jobs at once: no copy as they come (more only if jobs
     * were still being stored). */
    size_t cap = expect > 0 ? (size_t)expect : 1024;
    resize_jobs(s, p, cap);
    status_cursor cursors[BF_JOB_N_STATUSES];
    if (open_cursors(db, s->sweep_id, cursors)) {
        fprintf(stderr, "bifocal dashboard: %s\n", sqlite3_errmsg(db));
        return -1;
    }
    int rc = 0;
    status_cursor *c;
    while (rc == 0 && (c = lowest(cursors))) {
        if (s->n == cap)
            resize_jobs(s, p, cap *= 2);
        push_job(s, p, &c->head);
        rc = note_cell(s, p, &c->head) || cursor_next(c) ? -1 : 0;
    }
    if (rc)
        fprintf(stderr, "bifocal dashboard: %s\n", sqlite3_errmsg(db));
    for (int k = 0; k < BF_JOB_N_STATUSES; k++)
        sqlite3_finalize(cursors[k].st);
    return rc;
}

/* The second pass, over the held jobs: each job's group, a row read per
 * cell (the others of the cell differ from it only in seed).  0, or -1. */
static int group_jobs(bf_dash_sweep *s, load_pass *p)
{
    for (size_t j = 0; j < s->n; j++) {
        int64_t c = p->cell[j];
        int *known = c >= 0 ? &p->cell_group[c] : NULL;
        int g = known && *known >= 0 ? *known : group_of_job(s, p, s->ids[j]);
        if (g < 0)
            return -1;
        if (known)
            *known = g;
        s->group[j] = g;
        s->groups[g].count[s->status[j]]++;
    }
    return 0;
}

/* The names of the view's fields as a JSON array. */
static json_t *names_json(const char *const *names, int n)
{
    json_t *out = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(out, json_string(names[i]));
    return out;
}

/* Both passes, the grouping found between them as compare finds it. */
static int group_sweep(bf_dash_sweep *s, sqlite3 *db, load_pass *p)
{
    bf_sweep_view_begin(&s->view, s->sweep_id, s->sweep);
    p->row = bf_db_prepare(db, "SELECT stage, depth, config FROM jobs"
                               " WHERE job_id = ?1");
    if (!p->row || read_jobs(s, db, p))
        return -1;
    /* the rows noted are one per cell: seeds that vary within one, unseen */
    if (p->min_seed != p->max_seed)
        bf_sweep_view_note_varies(&s->view, "seed");
    if (bf_sweep_view_end(&s->view, NULL))
        return -1;
    s->varying = names_json(s->view.varying, s->view.n_varying);
    s->by = names_json(s->view.by, s->view.n_by);
    return group_jobs(s, p);
}

static int64_t newest_seq(sqlite3 *db, int64_t sweep_id)
{
    sqlite3_stmt *st = bf_db_prepare(db, "SELECT max(status_seq) FROM jobs"
                                         " WHERE sweep_id = ?1"
                                         " AND status_seq IS NOT NULL");
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, sweep_id);
    int64_t seq = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0)
                                                 : -1;
    sqlite3_finalize(st);
    return seq;
}

static int by_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The distinct seeds in order; null past MAX_LISTED_VALUES.  One pass
 * with a small open-addressed set (a million jobs share a few seeds), then
 * a sort of the few. */
static json_t *seed_values(const bf_dash_sweep *s)
{
    enum { SLOTS = 4 * MAX_LISTED_VALUES };     /* at most a quarter full */
    int64_t slot[SLOTS], distinct[MAX_LISTED_VALUES + 1];
    unsigned char used[SLOTS] = { 0 };          /* linear probing */
    size_t n = 0;
    for (size_t i = 0; i < s->n && n <= MAX_LISTED_VALUES; i++) {
        size_t h = (size_t)(bf_fnv1a64(&s->seed[i], sizeof s->seed[i]) % SLOTS);
        while (used[h] && slot[h] != s->seed[i])
            h = (h + 1) % SLOTS;
        if (!used[h]) {
            used[h] = 1;
            slot[h] = s->seed[i];
            distinct[n++] = s->seed[i];
        }
    }
    if (n > MAX_LISTED_VALUES)
        return json_null();
    qsort(distinct, n, sizeof *distinct, by_int64);
    json_t *out = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(out, json_integer(distinct[i]));
    return out;
}

static int load_in_snapshot(bf_dash_sweep *s, sqlite3 *db)
{
    bf_source src = { .db = db, .db_path = sqlite3_db_filename(db, "main") };
    json_t *rows = bf_source_rows(&src, "sweeps", s->sweep_id);
    s->sweep = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!s->sweep)
        return -1;
    load_pass p = { .index = json_object() };
    int rc = group_sweep(s, db, &p);
    s->train_depths = json_array();
    for (int d = 0; d < p.n_depths; d++)
        json_array_append_new(s->train_depths, json_integer(p.depths[d]));
    if (rc == 0) {
        s->seeds = seed_values(s);
        s->seq = newest_seq(db, s->sweep_id);
        rc = s->seq < 0 ? -1 : 0;
    }
    sqlite3_finalize(p.row);
    free(p.cell);
    free(p.cell_group);
    json_decref(p.index);
    return rc;
}

bf_dash_sweep *bf_dash_sweep_load(sqlite3 *db, int64_t sweep_id)
{
    bf_dash_sweep *s = bf_xcalloc(1, sizeof *s);
    s->sweep_id = sweep_id;
    /* One read transaction: the jobs and the feed's cursor agree. */
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    int rc = load_in_snapshot(s, db);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc) {
        bf_dash_sweep_free(s);
        return NULL;
    }
    return s;
}

void bf_dash_sweep_free(bf_dash_sweep *s)
{
    if (!s)
        return;
    json_decref(s->sweep);
    bf_sweep_view_clear(&s->view);
    json_decref(s->varying);
    json_decref(s->by);
    json_decref(s->train_depths);
    json_decref(s->seeds);
    free(s->ids);
    free(s->seed);
    free(s->group);
    free(s->status);
    free(s->groups);
    free(s);
}

/* ---- the feed ------------------------------------------------------------- */

static int read_feed(const bf_dash_sweep *s, sqlite3 *db, bf_dash_changes *c)
{
    sqlite3_stmt *st = bf_db_prepare(db,
        "SELECT job_id, status, status_seq FROM jobs"
        " WHERE sweep_id = ?1 AND status_seq > ?2 ORDER BY status_seq");
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, s->sweep_id);
    sqlite3_bind_int64(st, 2, s->seq);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 64;
            c->ids = bf_xrealloc(c->ids, c->cap * sizeof *c->ids);
            c->status = bf_xrealloc(c->status, c->cap * sizeof *c->status);
        }
        int status = bf_job_status_parse((const char *)sqlite3_column_text(st, 1));
        c->ids[c->n] = sqlite3_column_int64(st, 0);
        c->status[c->n++] = (uint8_t)(status < 0 ? 0 : status);
        c->seq = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return -1;
    st = bf_db_prepare(db, "SELECT status, n_jobs FROM sweeps WHERE sweep_id = ?1");
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, s->sweep_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        snprintf(c->sweep_status, sizeof c->sweep_status, "%s",
                 (const char *)sqlite3_column_text(st, 0));
        c->n_jobs = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

static void changes_free(bf_dash_changes *c)
{
    if (!c)
        return;
    free(c->ids);
    free(c->status);
    free(c);
}

bf_dash_changes *bf_dash_sweep_read_changes(const bf_dash_sweep *s,
                                            sqlite3 *db)
{
    bf_dash_changes *c = bf_xcalloc(1, sizeof *c);
    c->seq = s->seq;
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    int rc = read_feed(s, db, c);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc) {
        fprintf(stderr, "bifocal dashboard: reading sweep %lld: %s\n",
                (long long)s->sweep_id, sqlite3_errmsg(db));
        changes_free(c);
        return NULL;
    }
    return c;
}

int bf_dash_sweep_apply(bf_dash_sweep *s, bf_dash_changes *c, int *reload)
{
    int succeeded_changed = 0;
    *reload = c->n_jobs > 0 && (size_t)c->n_jobs != s->n;
    for (size_t i = 0; i < c->n && !*reload; i++) {
        int j = find_job(s, c->ids[i]);
        if (j < 0) {
            *reload = 1;
            break;
        }
        int was = s->status[j], now = c->status[i];
        if (was == now)
            continue;
        group *g = &s->groups[s->group[j]];
        g->count[was]--;
        g->count[now]++;
        s->count[was]--;
        s->count[now]++;
        s->status[j] = (uint8_t)now;
        succeeded_changed |= was == BF_JOB_SUCCEEDED || now == BF_JOB_SUCCEEDED;
    }
    s->seq = c->seq;
    if (c->sweep_status[0])
        json_object_set_new(s->sweep, "status", json_string(c->sweep_status));
    changes_free(c);
    return succeeded_changed;
}

/* ---- counts --------------------------------------------------------------- */

json_t *bf_dash_sweep_counts(const bf_dash_sweep *s)
{
    json_t *c = json_pack("{s:O, s:I}", "status",
                          json_object_get(s->sweep, "status"),
                          "total", (json_int_t)s->n);
    for (int i = 0; i < BF_JOB_N_STATUSES; i++)
        json_object_set_new(c, bf_job_status_name(i), json_integer(s->count[i]));
    return c;
}

json_t *bf_dash_sweep_varying(const bf_dash_sweep *s)
{
    return json_incref(s->varying);
}

/* ---- the summary ---------------------------------------------------------- */

/* The strings of names into out, at most BF_SWEEP_MAX_FIELDS; how many. */
static int names_into(const char **out, const json_t *names)
{
    int n = 0;
    for (size_t i = 0; i < json_array_size(names) && n < BF_SWEEP_MAX_FIELDS; i++)
        out[n++] = json_string_value(json_array_get(names, i));
    return n;
}

void bf_dash_names_view(bf_sweep_view *v, const json_t *varying,
                        const json_t *by)
{
    *v = (bf_sweep_view){ 0 };
    v->n_varying = names_into(v->varying, varying);
    v->n_by = names_into(v->by, by);
}

/* A view of the sweep as report.c reads one: the grouping's, every group,
 * no job.  Its parts are the sweep's (borrowed): clear it with
 * view_clear, not bf_sweep_view_clear. */
static void groups_view(const bf_dash_sweep *s, bf_sweep_view *v)
{
    *v = s->view;
    v->jobs = (bf_row_store){ 0 };
    v->job_group = NULL;
    v->group_row = NULL;
    v->held = NULL;
    v->n_held = 0;
}

/* The succeeded jobs as succeeded_view reads them. */
typedef struct succeeded_read {
    const bf_dash_sweep *s;
    bf_sweep_view *v;
    bf_compare_facts *facts;
    unsigned char *whole;       /* per group: its first job held whole */
} succeeded_read;

static void hold_succeeded(void *ctx, json_t *row)
{
    succeeded_read *r = ctx;
    int j = find_job(r->s, json_integer_value(json_object_get(row, "job_id")));
    if (j < 0)
        return;
    int g = r->s->group[j];
    bf_sweep_view_hold_job(r->v, row, g, !r->whole[g]);
    r->whole[g] = 1;
    bf_compare_facts_add(r->facts, row);
}

/* The same as `bifocal compare` reads one (compare.c): the succeeded jobs
 * held by id, each group's first one whole (its label's config), their
 * facts gathered.  0, or -1 (printed). */
static int succeeded_view(const bf_dash_sweep *s, sqlite3 *db, bf_sweep_view *v,
                          bf_compare_facts *facts)
{
    groups_view(s, v);
    sqlite3_stmt *st = bf_db_prepare(db,
        "SELECT * FROM job_results WHERE sweep_id = ?1 AND status = 'succeeded'"
        " ORDER BY job_id");
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, s->sweep_id);
    succeeded_read r = { s, v, facts, bf_xcalloc((size_t)s->n_groups + 1, 1) };
    int rc = bf_db_each_row(db, st, hold_succeeded, &r);
    free(r.whole);
    bf_sweep_view_held(v);
    return rc;
}

/* Frees what succeeded_view made (the rest is the sweep's). */
static void view_clear(bf_sweep_view *v)
{
    free(v->group_row);
    bf_row_store_clear(&v->jobs);
    free(v->job_group);
    free(v->held);
}

static json_t *groups_json(const bf_dash_sweep *s, const bf_sweep_view *v)
{
    json_t *out = json_array();
    for (int g = 0; g < s->n_groups; g++) {
        long long jobs = 0;
        for (int k = 0; k < BF_JOB_N_STATUSES; k++)
            jobs += s->groups[g].count[k];
        char *label = bf_sweep_view_label(v, g);
        json_array_append_new(out, json_pack("{s:s, s:O, s:I, s:I}",
            "label", label, "fields", json_array_get(s->view.groups, (size_t)g),
            "jobs", (json_int_t)jobs, "succeeded",
            (json_int_t)s->groups[g].count[BF_JOB_SUCCEEDED]));
        free(label);
    }
    return out;
}

/* The value of field in group g's grouping values (borrowed; NULL if none). */
static json_t *group_value(const bf_dash_sweep *s, int g, const char *field)
{
    return json_object_get(json_array_get(s->view.groups, (size_t)g), field);
}

typedef struct by_field {
    const bf_dash_sweep *s;
    const char *field;
} by_field;

static int by_field_then_group(const void *a, const void *b, void *ctx)
{
    const by_field *f = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int c = value_cmp(group_value(f->s, x, f->field), group_value(f->s, y, f->field));
    return c ? c : (x > y) - (x < y);
}

/* The groups in the order of field's values, ties by group (caller frees). */
static int *groups_by_value(const bf_dash_sweep *s, const char *field)
{
    int *order = bf_xcalloc((size_t)s->n_groups + 1, sizeof *order);
    for (int g = 0; g < s->n_groups; g++)
        order[g] = g;
    by_field f = { s, field };
    qsort_r(order, (size_t)s->n_groups, sizeof *order, by_field_then_group, &f);
    return order;
}

/* {field: [its distinct values, in order]} over the varying fields. */
static json_t *values_json(const bf_dash_sweep *s)
{
    json_t *out = json_object();
    size_t i;
    json_t *name;
    json_array_foreach(s->varying, i, name) {
        const char *f = json_string_value(name);
        if (strcmp(f, "seed") == 0) {
            json_object_set(out, f, s->seeds);
            continue;
        }
        int *order = groups_by_value(s, f);
        json_t *list = json_array(), *prev = NULL;
        for (int k = 0; k < s->n_groups; k++) {
            json_t *v = group_value(s, order[k], f);
            if (k == 0 || value_cmp(v, prev) != 0)
                json_array_append(list, v ? v : json_null());
            prev = v;
        }
        free(order);
        json_object_set_new(out, f, list);
    }
    return out;
}

/* The summary of v (whose jobs report.c need not walk: the groups, depths
 * and job count are this sweep's, not those of its succeeded jobs) with
 * compare and adaptive (stolen). */
static json_t *summary_of(const bf_dash_sweep *s, bf_sweep_view *v,
                          json_t *compare, json_t *adaptive)
{
    bf_row_store_clear(&v->jobs);
    json_t *summary = bf_report_summary(v, compare);
    json_object_set_new(summary, "groups", groups_json(s, v));
    json_object_set(summary, "train_depths", s->train_depths);
    json_object_set_new(json_object_get(summary, "sweep"), "n_jobs",
                        json_integer((json_int_t)s->n));
    json_object_set_new(summary, "values", values_json(s));
    json_object_set_new(summary, "adaptive_seeds", adaptive);
    return summary;
}

json_t *bf_dash_sweep_outline(const bf_dash_sweep *s)
{
    bf_sweep_view v;
    groups_view(s, &v);
    json_t *outline = summary_of(s, &v, json_null(), json_null());
    view_clear(&v);
    return outline;
}

/* Why the succeeded jobs are not compared (caller frees), as compare says
 * it: more than BF_COMPARE_MAX_GROUPS groups have one; NULL if they are. */
static char *too_many_groups(const bf_dash_sweep *s)
{
    size_t n = 0;
    for (int g = 0; g < s->n_groups; g++)
        n += s->groups[g].count[BF_JOB_SUCCEEDED] > 0;
    return n <= BF_COMPARE_MAX_GROUPS ? NULL
           : bf_sweep_view_too_many_groups(&s->view, BF_COMPARE_MAX_GROUPS,
                                           "succeeded");
}

json_t *bf_dash_sweep_summary(const bf_dash_sweep *s, sqlite3 *db)
{
    bf_sweep_view v;
    bf_source src = { .db = db, .db_path = sqlite3_db_filename(db, "main") };
    char *refused = too_many_groups(s);
    if (refused) {              /* as compare refuses: memory per group */
        groups_view(s, &v);
        json_t *summary = summary_of(s, &v, json_array(), json_array());
        json_object_set_new(summary, "compare_refused", json_string(refused));
        free(refused);
        return summary;
    }
    bf_compare_facts *facts = bf_compare_facts_new();
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    int rc = succeeded_view(s, db, &v, facts);
    /* Nothing to compare before a job succeeded: an empty table. */
    json_t *compare = rc ? NULL : v.n_held == 0 ? json_array()
                      : bf_compare_rows_of_facts(&v, &src, NULL, facts);
    json_t *adaptive = compare ? bf_adaptive_read(&src, s->sweep_id) : NULL;
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    json_t *summary = compare ? summary_of(s, &v, compare, adaptive
                                           ? adaptive : json_array())
                              : NULL;
    bf_compare_facts_free(facts);
    view_clear(&v);
    return summary;
}

/* ---- a page of the job table ---------------------------------------------- */

/* Per group, whether its values pass the filter; -1 for a field that is
 * not a grouping one (or *seed set for a seed filter). */
static int match_groups(const bf_dash_sweep *s, const json_t *where,
                        uint8_t *ok, int *has_seed, int64_t *seed)
{
    for (int g = 0; g < s->n_groups; g++)
        ok[g] = 1;
    *has_seed = 0;
    const char *f;
    json_t *want;
    json_object_foreach((json_t *)where, f, want) {
        if (strcmp(f, "seed") == 0 && index_of(s->varying, f) >= 0) {
            *has_seed = 1;
            *seed = json_is_integer(want) ? json_integer_value(want) : -1;
            continue;
        }
        if (index_of(s->by, f) < 0)
            return -1;
        for (int g = 0; g < s->n_groups; g++)
            ok[g] &= value_cmp(group_value(s, g, f), want) == 0;
    }
    return 0;
}

/* The rank of each group in the order of field's values (equal values,
 * equal ranks); the number of ranks. */
static int rank_groups(const bf_dash_sweep *s, const char *field, int *rank)
{
    int *order = groups_by_value(s, field), ranks = 0;
    for (int k = 0; k < s->n_groups; k++) {
        if (k > 0 && value_cmp(group_value(s, order[k], field),
                               group_value(s, order[k - 1], field)) != 0)
            ranks++;
        rank[order[k]] = ranks;
    }
    free(order);
    return s->n_groups ? ranks + 1 : 0;
}

typedef struct page_ctx {
    const bf_dash_sweep *s;
    const bf_dash_page_query *q;
    const uint8_t *group_ok;
    int has_seed;
    int64_t seed;
} page_ctx;

static int job_matches(const page_ctx *c, size_t j)
{
    return (c->q->status < 0 || c->s->status[j] == c->q->status)
           && c->group_ok[c->s->group[j]]
           && (!c->has_seed || c->s->seed[j] == c->seed);
}

/* The job at position j of the order by id (reversed when desc). */
static size_t nth(const page_ctx *c, size_t j)
{
    return c->q->desc ? c->s->n - 1 - j : j;
}

/* Ordered by a small rank per job (status, or a field's group rank), ties
 * by id: one pass counts the matches per rank, a second places each job
 * of the page at its position.  O(jobs), no sort. */
static json_t *page_by_rank(const page_ctx *c, const int *group_rank,
                            int ranks, long long *total)
{
    const bf_dash_sweep *s = c->s;
    long long *before = bf_xcalloc((size_t)ranks + 1, sizeof *before);
    long long *seen = bf_xcalloc((size_t)ranks + 1, sizeof *seen);
    for (size_t j = 0; j < s->n; j++)
        if (job_matches(c, j))
            before[group_rank ? group_rank[s->group[j]] : s->status[j]]++;
    long long sum = 0;
    for (int r = 0; r < ranks; r++) {
        int k = c->q->desc ? ranks - 1 - r : r;
        long long n = before[k];
        before[k] = sum;
        sum += n;
    }
    *total = sum;
    long long first = c->q->offset, end = first + c->q->limit;
    end = end < sum ? end : sum;
    json_t *ids = json_array();
    for (long long i = first; i < end; i++)
        json_array_append_new(ids, json_null());
    for (size_t i = 0; i < s->n && first < end; i++) {
        size_t j = nth(c, i);
        if (!job_matches(c, j))
            continue;
        int k = group_rank ? group_rank[s->group[j]] : s->status[j];
        long long pos = before[k] + seen[k]++;
        if (pos >= first && pos < end)
            json_array_set_new(ids, (size_t)(pos - first), json_integer(s->ids[j]));
    }
    free(before);
    free(seen);
    return ids;
}

static int by_seed_then_id(const void *a, const void *b, void *sweep)
{
    const bf_dash_sweep *s = sweep;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (s->seed[x] != s->seed[y])
        return s->seed[x] < s->seed[y] ? -1 : 1;
    return (x > y) - (x < y);
}

/* Ordered by seed: the matching jobs sorted (seeds are not a small set). */
static json_t *page_by_seed(const page_ctx *c, long long *total)
{
    const bf_dash_sweep *s = c->s;
    size_t *match = bf_xcalloc(s->n + 1, sizeof *match), n = 0;
    for (size_t j = 0; j < s->n; j++)
        if (job_matches(c, j))
            match[n++] = j;
    qsort_r(match, n, sizeof *match, by_seed_then_id, (void *)s);
    *total = (long long)n;
    json_t *ids = json_array();
    for (long long i = c->q->offset; i < (long long)n
                                     && i < c->q->offset + c->q->limit; i++)
        json_array_append_new(ids, json_integer(s->ids[match[
            c->q->desc ? (long long)n - 1 - i : i]]));
    free(match);
    return ids;
}

json_t *bf_dash_sweep_page(const bf_dash_sweep *s, const bf_dash_page_query *q,
                           long long *total, const char **error)
{
    const char *sort = q->sort ? q->sort : "job_id";
    int by_id = strcmp(sort, "job_id") == 0, by_status = strcmp(sort, "status") == 0;
    int by_seed = strcmp(sort, "seed") == 0 && index_of(s->varying, "seed") >= 0;
    if (!by_id && !by_status && !by_seed && index_of(s->by, sort) < 0) {
        *error = "sort: not job_id, status or a field that varies in the sweep";
        return NULL;
    }
    uint8_t *ok = bf_xcalloc((size_t)s->n_groups + 1, 1);
    page_ctx c = { .s = s, .q = q, .group_ok = ok };
    if (q->where && match_groups(s, q->where, ok, &c.has_seed, &c.seed)) {
        free(ok);
        *error = "filter: not a field that varies in the sweep";
        return NULL;
    }
    json_t *ids;
    if (by_seed) {
        ids = page_by_seed(&c, total);
    } else if (by_status || by_id) {
        /* by id: one rank, so the order is the id order */
        int *zero = by_id ? bf_xcalloc((size_t)s->n_groups + 1, sizeof *zero) : NULL;
        ids = page_by_rank(&c, zero, by_id ? 1 : BF_JOB_N_STATUSES, total);
        free(zero);
    } else {
        int *rank = bf_xcalloc((size_t)s->n_groups + 1, sizeof *rank);
        ids = page_by_rank(&c, rank, rank_groups(s, sort, rank), total);
        free(rank);
    }
    free(ok);
    return ids;
}
