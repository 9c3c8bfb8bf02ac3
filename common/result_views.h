/* result_views: the SQL views (schema/003_result_views.sql,
 * 005_dashboard.sql) that `bifocal results`, `compare`, `report`, `watch`
 * and the dashboard read, one sweep at a time.  The daemon answers the
 * `rows` request with them a page at a time, the client reading a database
 * file (`--db`) in one pass; both run the statements built here, so both
 * give the same rows in the same order.
 *
 * Each view has a key: columns whose values tell its rows of one sweep
 * apart and give their order.  A page ends at a row; the next starts after
 * that row's key (its cursor), so the daemon keeps nothing between pages
 * and each page costs its own rows, not the rows before it. */
#ifndef BF_RESULT_VIEWS_H
#define BF_RESULT_VIEWS_H

#include <stddef.h>

/* Enough for any key (bf_result_view_key). */
#define BF_RESULT_VIEW_MAX_KEY 8

/* The statements of a page.  Each binds ?1 = sweep_id, ?2 = the most rows
 * to return (-1: all) and ?3... = the cursor's values, in key order. */
typedef enum {
    BF_PAGE_FROM_START,    /* the sweep's rows from the first */
    BF_PAGE_AFTER_JOB,     /* per-job views: the rows of the jobs after the
                              cursor's (?3, its job id) */
    BF_PAGE_REST_OF_JOB,   /* per-job views of several rows per job: the
                              cursor job's rows after the cursor */
    BF_PAGE_AFTER,         /* other views: the rows after the cursor */
} bf_page_part;

/* Writes the statement of one part of a page of view into buf.  Returns 0,
 * or -1 if view is not one of the result views (bf_result_view_names) or
 * the part does not apply to it.  BF_PAGE_FROM_START with ?2 = -1 reads
 * the whole sweep in page order (`--db`). */
int bf_result_view_sql(const char *view, bf_page_part part, char *buf,
                       size_t cap);

/* The key of view: its column names (static strings) into columns, their
 * number returned (<= BF_RESULT_VIEW_MAX_KEY), or -1 for an unknown view.
 * *per_job is 1 when the first is job_id and every row belongs to that job:
 * pages then walk the sweep's jobs in id order (BF_PAGE_AFTER_JOB,
 * BF_PAGE_REST_OF_JOB), else they read the view in key order
 * (BF_PAGE_AFTER). */
int bf_result_view_key(const char *view, const char **columns, int *per_job);

/* "job_results, final_evals, ...": for error messages. */
const char *bf_result_view_names(void);

#endif
