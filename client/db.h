/* db: a Bifocal database file opened read-only by the client (`--db FILE`),
 * for reading results with no daemon running: after `bifocal run`, or on a
 * database copied off a cluster. */
#ifndef BF_DB_H
#define BF_DB_H

#include <sqlite3.h>

/* The oldest schema (PRAGMA user_version) the client can read: the one
 * that added the result views (schema/003_result_views.sql). */
#define BF_DB_MIN_VERSION 3

/* Opens path read-only and checks that it is a Bifocal database with the
 * result views.  Returns the handle, or NULL after printing what is wrong
 * ("FILE: not a SQLite database", "... not a Bifocal database", ...). */
sqlite3 *bf_db_open(const char *path);

#endif
