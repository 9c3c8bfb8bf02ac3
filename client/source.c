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

/* Asks the daemon for the view's pages one after another (the `next` of
 * each is the `after` of the following), handing each page's rows to
 * on_page (borrowed): only one page is held at a time.  0, or -1 after
 * printing the problem. */
typedef void (*page_fn)(void *ctx, const json_t *rows);

static int daemon_pages(bf_source *src, const char *view, int64_t sweep_id,
                        page_fn on_page, void *ctx)
{
    json_t *after = NULL;
    do {
        json_t *req = json_pack("{s:s, s:s, s:I}", "type", "rows", "view",
                                view, "sweep_id", (json_int_t)sweep_id);
        if (after)
            json_object_set_new(req, "after", after);
        json_t *reply;
        if (bf_client_request(src->cl, req, &reply))
            return -1;
        json_t *rows = json_object_get(reply, "rows");
        after = json_incref(json_object_get(reply, "next"));
        if (!json_is_array(rows) || (after && json_array_size(rows) == 0)) {
            fprintf(stderr, "bifocal: %s sent a rows reply %s\n",
                    src->cl->server, json_is_array(rows)
                    ? "with a cursor but no rows" : "without rows");
            json_decref(after);
            json_decref(reply);
            return -1;
        }
        on_page(ctx, rows);
        json_decref(reply);
    } while (after);
    return 0;
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

/* bf_source_each_row's callback, called for each row of a page. */
typedef struct each_row {
    bf_db_row_fn on_row;
    void *ctx;
} each_row;

static void each_row_of_page(void *ctx, const json_t *rows)
{
    each_row *e = ctx;
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        e->on_row(e->ctx, row);
}

int bf_source_each_row(bf_source *src, const char *view, int64_t sweep_id,
                       bf_db_row_fn on_row, void *ctx)
{
    if (src->db) {
        sqlite3_stmt *st = prepare_view(src, view, sweep_id);
        return st ? bf_db_each_row(src->db, st, on_row, ctx) : -1;
    }
    each_row e = { on_row, ctx };
    return daemon_pages(src, view, sweep_id, each_row_of_page, &e);
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
