/* source: where `results`, `compare` and `report` read a sweep from: the
 * daemon (the `rows` request, page after page) or a database file opened
 * read-only (`--db FILE`, in one pass).  Both run the same result-view
 * statements (common/result_views.h) and give the same rows in the same
 * order. */
#ifndef BF_SOURCE_H
#define BF_SOURCE_H

#include <stdint.h>
#include <jansson.h>
#include <sqlite3.h>

#include "db.h"
#include "session.h"

typedef struct bf_source {
    /* private */
    bf_client *cl;      /* used when db is NULL */
    sqlite3 *db;        /* --db FILE */
    const char *db_path;
} bf_source;

/* The daemon of cl, or the file db_path when it is not NULL.  0, or -1
 * after printing why the file cannot be read. */
int bf_source_open(bf_source *src, bf_client *cl, const char *db_path);
void bf_source_close(bf_source *src);

/* The rows of a result view for one sweep as an array of objects keyed by
 * column ("config" parsed into an object).  NULL after printing the problem
 * (no such sweep, connection lost, ...). */
json_t *bf_source_rows(bf_source *src, const char *view, int64_t sweep_id);

/* The same rows handed to on_row one at a time (borrowed), holding one
 * page of the daemon's or one row of a file at a time: a sweep of a
 * million jobs is read without its rows ever being held together.  0, or
 * -1 after printing the problem. */
int bf_source_each_row(bf_source *src, const char *view, int64_t sweep_id,
                       bf_db_row_fn on_row, void *ctx);

/* The same rows pulled one at a time, for a caller that reads a sweep in
 * its own loop (bifocal results prints each row as it comes): one page of
 * the daemon's or one row of a file held at a time. */
typedef struct bf_source_cursor {
    /* private */
    bf_source *src;
    const char *view;
    int64_t sweep_id;
    sqlite3_stmt *st;           /* a file's statement */
    json_t *page, *after;       /* the daemon's page and its `next` */
    size_t at;                  /* the page's next row */
    json_t *row;                /* the row last returned */
    int done, failed;
} bf_source_cursor;

/* 0, or -1 after printing the problem (no such sweep, ...); close it
 * either way. */
int bf_source_cursor_open(bf_source_cursor *c, bf_source *src,
                          const char *view, int64_t sweep_id);
/* The next row (borrowed until the next call), or NULL past the last or
 * after a problem (printed; close then returns -1). */
json_t *bf_source_cursor_next(bf_source_cursor *c);
/* 0, or -1 if the rows ended with a problem. */
int bf_source_cursor_close(bf_source_cursor *c);

/* The same for a view a database file may predate (an older schema lacks
 * it): an empty array then. */
json_t *bf_source_rows_if_any(bf_source *src, const char *view,
                              int64_t sweep_id);

/* The sweep's row of the sweep_progress view into *row (its jobs counted
 * by status through the sweep's index: no job row is read; a new
 * reference, NULL when a file has no such sweep).  0, or -1 after
 * printing the problem (the daemon's "no sweep" among them). */
int bf_source_progress(bf_source *src, int64_t sweep_id, json_t **row);

/* Column `key` of a row holding JSON text (a config, a view's JSON
 * object): the object (new reference), or an empty one when absent or not
 * an object. */
json_t *bf_source_json_object(const json_t *row, const char *key);

/* Whether the source has the view: a database file may predate it (the
 * daemon's schema is always current). */
int bf_source_has_view(bf_source *src, const char *view);

/* Streams the named numeric columns of a result view's rows to on_row,
 * values in the order of columns, holding one page of the daemon's at a
 * time and building no JSON for a file (the curves run to millions of
 * rows).  0, or -1 after printing the problem. */
typedef void (*bf_source_row_cb)(void *ctx, const double *values);
int bf_source_scan(bf_source *src, const char *view, int64_t sweep_id,
                   const char *const *columns, int n_columns,
                   bf_source_row_cb on_row, void *ctx);

#endif
