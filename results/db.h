/* db: a Bifocal database file opened read-only by the client (`--db FILE`),
 * for reading results with no daemon running: after `bifocal run`, or on a
 * database copied off a cluster. */
#ifndef BF_DB_H
#define BF_DB_H

#include <jansson.h>
#include <sqlite3.h>

/* The oldest schema (PRAGMA user_version) the result commands can read:
 * the one that added the result views (schema/003_result_views.sql). */
#define BF_DB_MIN_VERSION 3
/* The dashboard's: live_jobs and its indexes (schema/005_dashboard.sql),
 * the job status feed (schema/008_job_changes.sql). */
#define BF_DB_DASHBOARD_VERSION 8

/* Opens path read-only and checks that it is a Bifocal database of schema
 * version min_version or newer.  Returns the handle, or NULL after printing
 * what is wrong ("FILE: not a SQLite database", "... not a Bifocal
 * database", ...). */
sqlite3 *bf_db_open(const char *path, int min_version);

/* Steps st to its end: one object per row keyed by column name, a
 * "config" column parsed into an object.  Finalizes st.  The array (new
 * reference), or NULL after printing the error with the database's name. */
json_t *bf_db_rows(sqlite3 *db, sqlite3_stmt *st);

/* The row st stands on: an object keyed by column name, a "config"
 * column parsed into an object (new reference). */
json_t *bf_db_row(sqlite3_stmt *st);

/* A stored config as the results commands and the dashboard read it:
 * `trainer` spelled where canonical JSON leaves it out at its default
 * ("builtin"), so that a sweep whose grid crosses trainers groups and
 * labels its builtin jobs like its others, and each parameter a field
 * params.NAME of its own (bf_job_config_json_flatten).  Every row read,
 * from a file (bf_db_row) or a daemon (results/source.c), has it. */
void bf_db_config_as_read(json_t *config);

/* The same rows handed to on_row one at a time (borrowed: the row is freed
 * after the call unless on_row keeps a reference), none held together.
 * Finalizes st.  0, or -1 after printing the error. */
typedef void (*bf_db_row_fn)(void *ctx, json_t *row);
int bf_db_each_row(sqlite3 *db, sqlite3_stmt *st, bf_db_row_fn on_row,
                   void *ctx);

/* Prepares sql; NULL after printing the error with the database's name. */
sqlite3_stmt *bf_db_prepare(sqlite3 *db, const char *sql);

#endif
