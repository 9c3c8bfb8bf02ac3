/* db: read-only access to a Bifocal database file, refusing anything else
 * with a message that names the file and the problem. */
#include "db.h"

#include <stdio.h>
#include <string.h>

#include "job_config.h"

static int count_tables(sqlite3 *db, int *n)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            "   AND name IN ('sweeps', 'jobs', 'evals', 'metrics')",
            -1, &st, NULL) != SQLITE_OK)
        return -1;
    int rc = sqlite3_step(st);
    *n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

static int user_version(sqlite3 *db, int *version)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL)
        != SQLITE_OK)
        return -1;
    int rc = sqlite3_step(st);
    *version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

sqlite3 *bf_db_open(const char *path, int min_version)
{
    sqlite3 *db = NULL;
    /* NOMUTEX: one thread reads; spares a lock per column read. */
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        fprintf(stderr, "bifocal: cannot open database %s: %s\n", path,
                db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    int n_tables = 0, version = 0;
    if (count_tables(db, &n_tables)) {
        fprintf(stderr, "bifocal: %s is not a SQLite database (%s)\n", path,
                sqlite3_errmsg(db));
    } else if (n_tables != 4) {
        fprintf(stderr, "bifocal: %s is a SQLite database but not a Bifocal "
                        "one (it lacks the sweeps, jobs, evals and metrics "
                        "tables)\n", path);
    } else if (user_version(db, &version) || version < min_version) {
        fprintf(stderr, "bifocal: %s has Bifocal schema version %d, older "
                        "than the %d this bifocal reads; start a bifocald "
                        "on it once to upgrade it\n", path, version,
                min_version);
    } else {
        return db;
    }
    sqlite3_close(db);
    return NULL;
}

sqlite3_stmt *bf_db_prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "bifocal: %s: %s\n", sqlite3_db_filename(db, "main"),
                sqlite3_errmsg(db));
        return NULL;
    }
    return st;
}

static json_t *column_json(sqlite3_stmt *st, int i)
{
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT:   return json_real(sqlite3_column_double(st, i));
    case SQLITE_NULL:    return json_null();
    default: break;
    }
    const char *text = (const char *)sqlite3_column_text(st, i);
    json_t *v = NULL;
    if (strcmp(sqlite3_column_name(st, i), "config") == 0)
        v = json_loads(text, 0, NULL);
    bf_db_config_as_read(v);
    return v ? v : json_string(text);
}

void bf_db_config_as_read(json_t *config)
{
    if (!json_is_object(config))
        return;
    if (!json_object_get(config, "trainer"))
        json_object_set_new(config, "trainer",
                            json_string(BF_TRAINER_BUILTIN));
    bf_job_config_json_flatten(config);
}

json_t *bf_db_row(sqlite3_stmt *st)
{
    json_t *row = json_object();
    for (int i = 0; i < sqlite3_column_count(st); i++)
        json_object_set_new(row, sqlite3_column_name(st, i),
                            column_json(st, i));
    return row;
}

int bf_db_each_row(sqlite3 *db, sqlite3_stmt *st, bf_db_row_fn on_row,
                   void *ctx)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *row = bf_db_row(st);
        on_row(ctx, row);
        json_decref(row);
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE)
        return 0;
    fprintf(stderr, "bifocal: %s: %s\n", sqlite3_db_filename(db, "main"),
            sqlite3_errmsg(db));
    return -1;
}

static void append_row(void *rows, json_t *row)
{
    json_array_append(rows, row);
}

json_t *bf_db_rows(sqlite3 *db, sqlite3_stmt *st)
{
    json_t *rows = json_array();
    if (bf_db_each_row(db, st, append_row, rows)) {
        json_decref(rows);
        return NULL;
    }
    return rows;
}
