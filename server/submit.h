/* submit: sweep submission without holding the loop.  A sweep file may
 * expand to a million jobs (`seeds: 1000000`); parsing, validating and
 * expanding them all, then storing them in one transaction, would hold
 * the loop for tens of seconds, long enough for healthy workers' leases
 * to expire (bench_submit).  So a thread of its own parses the sweep,
 * validates every job
 * (so that an invalid sweep is refused before anything is stored) and
 * expands it again into chunks of BF_SUBMIT_CHUNK jobs; the loop stores one
 * chunk per pass (bf_store_stage_jobs: one transaction each, the sweep
 * visible with its last), serving everything else between chunks.  The
 * thread waits while two chunks are queued, so memory stays bounded.
 *
 * Up to BF_SUBMITS_ACTIVE sweeps are expanded at once, each on its own
 * thread, and stored side by side (each a share of the pass's slice), so
 * that no submission holds the others: a one-job sweep is stored within
 * a few passes while a million-job one is.  Later ones wait, oldest first,
 * for one of those to end.  A submitter that disconnects cancels its
 * submission (bf_submits_cancel): its thread stops at its next job or
 * chunk.  A database failure half-way, or a cancel, discards what was
 * staged (a chunk per pass) and reports BF_STORE_DB_FAILED or
 * BF_STORE_ERR; a daemon stopping meanwhile leaves the staged rows for
 * the next start to discard (bf_store_open). */
#ifndef BF_SUBMIT_H
#define BF_SUBMIT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <uv.h>

#include "bf_error.h"
#include "store.h"

/* The protocol's fuzz harness builds with smaller chunks (scripts/fuzz.sh),
 * so that the small sweeps it can afford span several. */
#ifndef BF_SUBMIT_CHUNK
#define BF_SUBMIT_CHUNK 1000
#endif
/* Sweeps expanded and stored at once: each holds a thread, its parsed file
 * and two chunks. */
#define BF_SUBMITS_ACTIVE 4

/* The outcome, on the loop: BF_STORE_OK with the new sweep; BF_STORE_ERR
 * (the sweep is invalid: err has file, line, field; or strict and with
 * warnings) or BF_STORE_DB_FAILED (err has SQLite's cause), nothing
 * stored.  warnings (borrowed; NULL unless stored or refused as strict)
 * are the sweep's (sweep.h). */
typedef void (*bf_submit_done_fn)(void *ctx, int rc, int64_t sweep_id,
                                  size_t n_jobs, const json_t *warnings,
                                  const bf_error *err);

typedef struct bf_submission bf_submission;

typedef struct bf_submits {
    /* private */
    uv_loop_t *loop;
    bf_store *store;
    bf_submission *head, *tail;   /* in arrival order */
    int n_active;                 /* started, not yet retired */
    int stopping;
} bf_submits;

void bf_submits_init(bf_submits *m, uv_loop_t *loop, bf_store *store);

/* Stores the sweep file text (copied) submitted at now_ms with opts
 * (copied; NULL: the defaults) as bf_store_submit_sweep would, then calls
 * done(ctx, ...) on the loop, once, never before this returns.  The
 * submission is m's: the caller's handle is good until done is called. */
bf_submission *bf_submits_start(bf_submits *m, const char *filename,
                                const char *text, size_t len,
                                const bf_submit_opts *opts, int64_t now_ms,
                                bf_submit_done_fn done, void *ctx);

/* The submitter no longer wants u (done not called yet): it ends with
 * BF_STORE_ERR and `why`, nothing of it kept; done may be called before
 * this returns. */
void bf_submits_cancel(bf_submits *m, bf_submission *u, const char *why);

/* The daemon is stopping: the sweeps being stored stop at their next
 * chunk and every submission ends with BF_STORE_DB_FAILED ("stopping"). */
void bf_submits_stop(bf_submits *m);

#endif
