/* dash_api: the dashboard's JSON API (docs/dashboard.md lists every
 * endpoint, parameter, cursor and error).  Read-only: every answer comes
 * from the database opened read-only, through the queries the result
 * commands use (results/source.c, sweep_view.c, compare.c, results.c,
 * report.c) and the live_jobs view; none changes anything.
 *
 * A sweep's aggregates (dash_sweep.c: counts, groups, the comparison, the
 * job table's order) are kept for the sweeps asked about and followed by a
 * refresher thread with its own connection, which reads only the jobs
 * whose status changed (the status feed, schema/008_job_changes.sql): the
 * thread that answers never loads a sweep nor recomputes a comparison.
 * The job table is served by page; the live endpoint and a job's curves
 * take a "since" cursor, so a page that polls reads only what is new.
 */
#ifndef BF_DASH_API_H
#define BF_DASH_API_H

#include <jansson.h>
#include <sqlite3.h>

typedef struct bf_dash_api bf_dash_api;

/* db: a Bifocal database opened read-only (bf_db_open), schema version
 * BF_DB_DASHBOARD_VERSION or newer; it stays the caller's and must outlive
 * the API.  db_path names it in messages and locates the daemon's lock
 * file (<db>.lock), whose listen address goes into the hint for starting
 * a worker; the refresher opens it again.  NULL (printed) if it cannot. */
bf_dash_api *bf_dash_api_new(sqlite3 *db, const char *db_path);
void bf_dash_api_free(bf_dash_api *a);

/* Answers a GET of path (which starts with "/api/") with its query string.
 * Returns the HTTP status (200, 400, 404, 500) with the body in *body: JSON
 * text, the caller's to free ({"error": "..."} unless 200; NULL if it could
 * not be encoded).  A sweep's summary is kept as text, so that its answer
 * is a copy, not an encoding of megabytes per request. */
int bf_dash_api_get(bf_dash_api *a, const char *path, const char *query,
                    char **body);

#endif
