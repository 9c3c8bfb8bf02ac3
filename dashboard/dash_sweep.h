/* dash_sweep: what the dashboard's sweep page shows of one sweep, held in
 * a few bytes per job so that a sweep of a million jobs costs tens of
 * megabytes, and kept up to date by the jobs that changed rather than
 * rebuilt.
 *
 * Loading reads every job once (id, status, seed and cell) and one config
 * per cell twice, grouping the jobs as compare does (results/sweep_view.h:
 * the same fields, the same groups, in the same order).  From then on only the
 * job status feed is read (jobs.status_seq, schema/008_job_changes.sql):
 * the jobs whose status changed since the last read, which move the counts
 * per status and per group.  The comparison (compare.c's code) reads the
 * succeeded jobs only, and is recomputed by its owner when they changed.
 * The job table is paged: a page is picked from the held jobs (filtered by
 * status and field values, sorted by id, status, a field or the seed) and
 * only its rows are read from job_results.
 *
 * Not thread-safe: its owner (dash_api.c) serialises access. */
#ifndef BF_DASH_SWEEP_H
#define BF_DASH_SWEEP_H

#include <stdint.h>
#include <jansson.h>
#include <sqlite3.h>

#include "job_status.h"
#include "sweep_view.h"

typedef struct bf_dash_sweep bf_dash_sweep;

/* Reads sweep_id of db (read-only) in one snapshot.  NULL when there is no
 * such sweep or the database failed (printed). */
bf_dash_sweep *bf_dash_sweep_load(sqlite3 *db, int64_t sweep_id);
void bf_dash_sweep_free(bf_dash_sweep *s);

/* The changes since the last read, read from db but not yet applied (so
 * that the owner can read without holding its lock and apply with it).
 * NULL on failure (printed). */
typedef struct bf_dash_changes bf_dash_changes;
bf_dash_changes *bf_dash_sweep_read_changes(const bf_dash_sweep *s,
                                            sqlite3 *db);
/* Applies and frees c.  Returns whether the set of succeeded jobs changed
 * (the comparison is then out of date).  A sweep whose job count changed
 * (jobs still being stored when it was loaded) sets *reload. */
int bf_dash_sweep_apply(bf_dash_sweep *s, bf_dash_changes *c, int *reload);

/* The summary of /api/sweeps/N without "counts" (docs/dashboard.md): the
 * sweep, varying fields, groups with their counts, training depths, the
 * comparison of the succeeded jobs, their adaptive seeds, and each field's
 * values (the job table's filter options).  Reads the succeeded jobs from
 * db.  New reference, or NULL (printed). */
json_t *bf_dash_sweep_summary(const bf_dash_sweep *s, sqlite3 *db);

/* The same from what is held, with "compare" and "adaptive_seeds" null
 * (not computed yet): what a page shows while the comparison of a sweep
 * just loaded is computed.  Reads nothing.  New reference. */
json_t *bf_dash_sweep_outline(const bf_dash_sweep *s);

/* {status, total, waiting, queued, running, succeeded, failed, cancelled}. */
json_t *bf_dash_sweep_counts(const bf_dash_sweep *s);
/* The varying fields, in order (new reference). */
json_t *bf_dash_sweep_varying(const bf_dash_sweep *s);

/* A view that names the varying fields and the grouping fields (borrowed
 * from the arrays of names; by may be NULL; at most BF_SWEEP_MAX_FIELDS
 * each), all else zero: all that bf_results_rows reads of a view. */
void bf_dash_names_view(bf_sweep_view *v, const json_t *varying,
                        const json_t *by);

/* What a page of the job table asks for. */
typedef struct bf_dash_page_query {
    long long offset, limit;
    const char *sort;           /* "job_id" (NULL), "status", a varying field */
    int desc;
    int status;                 /* -1: any */
    json_t *where;              /* {field: value} (borrowed), or NULL */
} bf_dash_page_query;

/* The ids of the page's jobs in order (new reference) and in *total how
 * many jobs match.  NULL with *error set (static text) for a sort or
 * filter field that is not a varying field. */
json_t *bf_dash_sweep_page(const bf_dash_sweep *s, const bf_dash_page_query *q,
                           long long *total, const char **error);

#endif
