/* cancels: the second half of cancelling a sweep.  bf_store_cancel_sweep
 * stops the sweep's leasing and flags its running jobs in one short
 * transaction; its waiting and queued jobs, a million of them perhaps,
 * are then cancelled here a time-bounded slice per pass (chore.h), so the
 * loop keeps serving heartbeats meanwhile.  A daemon stopped half-way
 * finishes the rest when it starts again (bf_cancels_resume). */
#ifndef BF_CANCELS_H
#define BF_CANCELS_H

#include <stdint.h>

#include "bf_error.h"
#include "chore.h"
#include "store.h"

/* rc 0: every waiting and queued job of the sweep is cancelled; 1: the
 * daemon is stopping (the rest is done at its next start); -1: the
 * database failed (err says why; the rest is done at the next start). */
typedef void (*bf_cancel_done_fn)(void *ctx, int rc, const bf_error *err);

/* Cancels the waiting and queued jobs of sweep_id (already cancelled by
 * bf_store_cancel_sweep) on chores, then done(ctx, ...) on the loop;
 * done may be NULL. */
void bf_cancels_drain(bf_chores *chores, bf_store *store, int64_t sweep_id,
                      bf_cancel_done_fn done, void *ctx);

/* Drains every cancel that a stopped daemon left unfinished.  -1 when the
 * database could not say which (err). */
int bf_cancels_resume(bf_chores *chores, bf_store *store, bf_error *err);

#endif
