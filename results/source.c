/* source: result views read through the daemon or straight from a file. */
#include "source.h"

#include "db.h"
#include "result_views.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


int bf_source_open(bf_source *src, bf_client *cl, const char *db_path)
{
    *src = (bf_source){ .cl = cl, .db_path = db_path };
    if (!db_path)
        return 0;
    src->db = bf_db_open(db_path, BF_DB_MIN_VERSION);
    return src->db ? 0 : -1;
}

void bf_source_close(bf_source *src)
{
    sqlite3_close(src->db);
    src->db = NULL;
}

/* Prepares the view's query for one sweep on the file, after checking the
 * sweep is there; NULL after printing why. */
static sqlite3_stmt *prepare_view(bf_source *src, const char *view,
                                  int64_t sweep_id)
{
    char sql[1024];
    if (bf_result_view_sql(view, BF_PAGE_FROM_START, sql, sizeof sql)) {
        fprintf(stderr, "bifocal: unknown view '%s'\n", view);
        return NULL;
    }
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (sqlite3_prepare_v2(src->db, "SELECT 1 FROM sweeps WHERE sweep_id = ?1",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, sweep_id);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!found) {
        fprintf(stderr, "bifocal: no sweep with id %lld in %s\n",
                (long long)sweep_id, src->db_path);
        return NULL;
    }
    if (sqlite3_prepare_v2(src->db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "bifocal: %s: reading %s: %s\n", src->db_path, view,
                sqlite3_errmsg(src->db));
        return NULL;
    }
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int(st, 2, -1);   /* no limit: the whole sweep in page order */
    return st;
}

static int step_failed(bf_source *src, int rc)
{
    if (rc == SQLITE_DONE)
        return 0;
    fprintf(stderr, "bifocal: %s: %s\n", src->db_path, sqlite3_errmsg(src->db));
    return -1;
}

static json_t *file_rows(bf_source *src, const char *view, int64_t sweep_id)
{
    sqlite3_stmt *st = prepare_view(src, view, sweep_id);
    return st ? bf_db_rows(src->db, st) : NULL;
}

/* Replaces the cursor's page with the daemon's next one (the `next` of
 * each page is the `after` of the following).  1 with a page, 0 past the
 * last, -1 after printing the problem. */
static int next_page(bf_source_cursor *c)
{
    if (c->page && !c->after)
        return 0;
    json_t *req = json_pack("{s:s, s:s, s:I}", "type", "rows", "view",
                            c->view, "sweep_id", (json_int_t)c->sweep_id);
    if (c->after)
        json_object_set_new(req, "after", c->after);
    c->after = NULL;
    json_decref(c->page);
    c->page = NULL;
    json_t *reply;
    if (bf_session_request(c->src->cl, req, &reply))
        return -1;
    json_t *rows = json_object_get(reply, "rows");
    c->after = json_incref(json_object_get(reply, "next"));
    if (!json_is_array(rows) || (c->after && json_array_size(rows) == 0)) {
        fprintf(stderr, "bifocal: %s sent a rows reply %s\n",
                c->src->cl->server, json_is_array(rows)
                ? "with a cursor but no rows" : "without rows");
        json_decref(reply);
        return -1;
    }
    c->page = json_incref(rows);
    c->at = 0;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        bf_db_config_as_read(json_object_get(row, "config"));
    json_decref(reply);
    return 1;
}

int bf_source_cursor_open(bf_source_cursor *c, bf_source *src,
                          const char *view, int64_t sweep_id)
{
    *c = (bf_source_cursor){ .src = src, .view = view, .sweep_id = sweep_id };
    if (src->db && !(c->st = prepare_view(src, view, sweep_id)))
        c->failed = 1;
    return c->failed ? -1 : 0;
}

/* The next row of a file's statement (new reference), NULL at its end. */
static json_t *next_file_row(bf_source_cursor *c)
{
    int rc = sqlite3_step(c->st);
    if (rc == SQLITE_ROW)
        return bf_db_row(c->st);
    c->failed = step_failed(c->src, rc) != 0;
    c->done = 1;
    return NULL;
}

/* The next row of the daemon's pages (new reference), NULL past the last. */
static json_t *next_daemon_row(bf_source_cursor *c)
{
    while (!c->page || c->at == json_array_size(c->page)) {
        int rc = next_page(c);
        if (rc <= 0) {
            c->failed = rc < 0;
            c->done = 1;
            return NULL;
        }
    }
    return json_incref(json_array_get(c->page, c->at++));
}

json_t *bf_source_cursor_next(bf_source_cursor *c)
{
    json_decref(c->row);
    c->row = NULL;
    if (!c->done && !c->failed)
        c->row = c->src->db ? next_file_row(c) : next_daemon_row(c);
    return c->row;
}

int bf_source_cursor_close(bf_source_cursor *c)
{
    sqlite3_finalize(c->st);
    json_decref(c->page);
    json_decref(c->after);
    json_decref(c->row);
    int failed = c->failed;
    *c = (bf_source_cursor){ 0 };
    return failed ? -1 : 0;
}

/* Hands each of the daemon's pages of the view to on_page (borrowed): only
 * one page is held at a time.  0, or -1 after printing the problem. */
typedef void (*page_fn)(void *ctx, const json_t *rows);

static int daemon_pages(bf_source *src, const char *view, int64_t sweep_id,
                        page_fn on_page, void *ctx)
{
    bf_source_cursor c;
    bf_source_cursor_open(&c, src, view, sweep_id);
    int rc;
    while ((rc = next_page(&c)) > 0)
        on_page(ctx, c.page);
    bf_source_cursor_close(&c);
    return rc;
}

static void extend(void *all, const json_t *rows)
{
    json_array_extend(all, (json_t *)rows);
}

static json_t *daemon_rows(bf_source *src, const char *view, int64_t sweep_id)
{
    json_t *rows = json_array();
    if (daemon_pages(src, view, sweep_id, extend, rows)) {
        json_decref(rows);
        return NULL;
    }
    return rows;
}

json_t *bf_source_rows(bf_source *src, const char *view, int64_t sweep_id)
{
    return src->db ? file_rows(src, view, sweep_id)
                   : daemon_rows(src, view, sweep_id);
}

int bf_source_each_row(bf_source *src, const char *view, int64_t sweep_id,
                       bf_db_row_fn on_row, void *ctx)
{
    bf_source_cursor c;
    json_t *row;
    if (bf_source_cursor_open(&c, src, view, sweep_id) == 0)
        while ((row = bf_source_cursor_next(&c)))
            on_row(ctx, row);
    return bf_source_cursor_close(&c);
}

int bf_source_progress(bf_source *src, int64_t sweep_id, json_t **row)
{
    json_t *rows = NULL, *reply = NULL;
    if (src->db) {
        sqlite3_stmt *st = bf_db_prepare(src->db,
            "SELECT * FROM sweep_progress WHERE sweep_id = ?1");
        if (st)
            sqlite3_bind_int64(st, 1, sweep_id);
        rows = st ? bf_db_rows(src->db, st) : NULL;
    } else if (bf_session_request(src->cl, json_pack(
                   "{s:s, s:I}", "type", "status", "sweep_id",
                   (json_int_t)sweep_id), &reply) == 0) {
        rows = json_incref(json_object_get(reply, "sweeps"));
        json_decref(reply);
    }
    *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    return rows ? 0 : -1;
}

int bf_source_has_view(bf_source *src, const char *view)
{
    sqlite3_stmt *st = NULL;
    int found = 1;
    if (src->db && sqlite3_prepare_v2(src->db, "SELECT 1 FROM sqlite_schema"
                                      " WHERE name = ?1", -1, &st, NULL)
                   == SQLITE_OK) {
        sqlite3_bind_text(st, 1, view, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return found;
}

json_t *bf_source_rows_if_any(bf_source *src, const char *view,
                              int64_t sweep_id)
{
    return bf_source_has_view(src, view) ? bf_source_rows(src, view, sweep_id)
                                         : json_array();
}

json_t *bf_source_json_object(const json_t *row, const char *key)
{
    const json_t *v = json_object_get(row, key);
    if (json_is_object(v))
        return json_incref((json_t *)v);
    json_t *obj = json_is_string(v) ? json_loads(json_string_value(v), 0,
                                                 NULL) : NULL;
    if (obj && !json_is_object(obj)) {
        json_decref(obj);
        obj = NULL;
    }
    return obj ? obj : json_object();
}

/* Maps the wanted column names to the statement's column indexes. */
static int column_indexes(sqlite3_stmt *st, const char *const *columns, int n,
                          int *index)
{
    for (int c = 0; c < n; c++) {
        index[c] = -1;
        for (int i = 0; i < sqlite3_column_count(st); i++)
            if (strcmp(sqlite3_column_name(st, i), columns[c]) == 0)
                index[c] = i;
        if (index[c] < 0) {
            fprintf(stderr, "bifocal: the view has no column %s\n", columns[c]);
            return -1;
        }
    }
    return 0;
}

static int file_scan(bf_source *src, const char *view, int64_t sweep_id,
                     const char *const *columns, int n,
                     bf_source_row_cb on_row, void *ctx)
{
    sqlite3_stmt *st = prepare_view(src, view, sweep_id);
    if (!st)
        return -1;
    int index[n];
    double values[n];
    int failed = -1;
    if (column_indexes(st, columns, n, index) == 0) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            for (int c = 0; c < n; c++)
                values[c] = sqlite3_column_double(st, index[c]);
            on_row(ctx, values);
        }
        failed = step_failed(src, rc);
    }
    sqlite3_finalize(st);
    return failed;
}

/* bf_source_scan's columns, picked from each row of a page. */
typedef struct scan {
    const char *const *columns;
    int n;
    bf_source_row_cb on_row;
    void *ctx;
} scan;

static void scan_page(void *ctx, const json_t *rows)
{
    scan *sc = ctx;
    double values[sc->n];
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        for (int c = 0; c < sc->n; c++) {
            json_t *v = json_object_get(row, sc->columns[c]);
            values[c] = json_is_number(v) ? json_number_value(v) : NAN;
        }
        sc->on_row(sc->ctx, values);
    }
}

int bf_source_scan(bf_source *src, const char *view, int64_t sweep_id,
                   const char *const *columns, int n_columns,
                   bf_source_row_cb on_row, void *ctx)
{
    if (src->db)
        return file_scan(src, view, sweep_id, columns, n_columns, on_row, ctx);
    scan sc = { columns, n_columns, on_row, ctx };
    return daemon_pages(src, view, sweep_id, scan_page, &sc);
}
