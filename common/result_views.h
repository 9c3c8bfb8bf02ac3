/* result_views: the SQL views (schema/003_result_views.sql,
 * 005_dashboard.sql) that `bifocal results`, `compare`, `report`, `watch`
 * and the dashboard read, one sweep at a time.  The daemon
 * (the `rows` request) and the client reading a database file (`--db`) run
 * the same query, built here, so both give the same rows in the same order. */
#ifndef BF_RESULT_VIEWS_H
#define BF_RESULT_VIEWS_H

#include <stddef.h>

/* Writes "SELECT * FROM <view> WHERE sweep_id = ?1 [ORDER BY ...]" into buf.
 * Returns 0, or -1 if view is not one of the result views (the names are
 * listed by bf_result_view_names). */
int bf_result_view_sql(const char *view, char *buf, size_t cap);

/* "job_results, final_evals, ...": for error messages. */
const char *bf_result_view_names(void);

#endif
