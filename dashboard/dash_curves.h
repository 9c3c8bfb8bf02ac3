/* dash_curves: one job's curves for the dashboard's job page, downsampled
 * to the page's width while they are read, and read again from a step on
 * ("since") so that a live page fetches only what is new.
 *
 * A job of S steps drawn W points wide has buckets of b = ceil(S / W)
 * steps; bucket k holds steps [k b, (k + 1) b).  Per bucket: of each
 * training metric (bf_metrics, common/records.h) the mean, min and max
 * at the bucket's last step; of each eval depth and each learned frequency
 * the newest value.  Non-finite values (a diverged job's) are left out.
 * With since, only the buckets from the one holding since on are read: the
 * reply's "since" is that bucket's first step (the client replaces what it
 * holds from there on), "next_since" the first step of the newest bucket
 * (which may still fill up) for the next poll.  docs/dashboard.md shows
 * the reply. */
#ifndef BF_DASH_CURVES_H
#define BF_DASH_CURVES_H

#include <stdint.h>
#include <jansson.h>
#include <sqlite3.h>

#define BF_DASH_MIN_WIDTH 16
#define BF_DASH_MAX_WIDTH 4096

/* The curves of job_id for a page width points wide (in range), from step
 * since (>= 0) on.  The reply (new reference), or NULL when there is no
 * such job (or the database failed: printed). */
json_t *bf_dash_curves(sqlite3 *db, int64_t job_id, int width, int64_t since);

#endif
