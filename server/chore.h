/* chore: work too big for one pass of the loop (cancelling the million
 * queued jobs of a sweep), done in slices, one slice per pass.  A slice is
 * bounded by time (BF_CHORE_SLICE_US), never by a count of rows: a count
 * that fits the slice in a release build takes many times longer under
 * ASan or on a loaded machine, long enough for healthy workers' leases to expire
 * while their heartbeats wait unread.  Between slices the loop serves
 * every connection.
 *
 * Chores take turns: each pass runs one slice of the oldest chore and moves
 * it to the back, so the loop spends at most one slice per pass on chores
 * however many there are.  The sweep submission (submit.c) bounds its own
 * per-pass storing by the same budget. */
#ifndef BF_CHORE_H
#define BF_CHORE_H

#include <stdint.h>
#include <uv.h>

/* The time one pass may spend on background work, in microseconds. */
#define BF_CHORE_SLICE_US 5000

/* Does one slice, stopping at the first row boundary past deadline_us
 * (bf_monotonic_us()): 1 more to do, 0 finished, -1 failed. */
typedef int (*bf_chore_slice_fn)(void *ctx, int64_t deadline_us);
/* The chore ended: rc 0 finished, -1 a slice failed, 1 stopped by
 * bf_chores_stop before it finished.  Called once, on the loop. */
typedef void (*bf_chore_done_fn)(void *ctx, int rc);

typedef struct bf_chore bf_chore;

typedef struct bf_chores {
    /* private */
    uv_idle_t idle;            /* runs while any chore is queued */
    bf_chore *head, *tail;
    int stopping;
} bf_chores;

/* The idle handle is closed by bf_chores_stop (before uv_loop_close). */
void bf_chores_init(bf_chores *m, uv_loop_t *loop);

/* Queues a chore: slice(ctx, deadline) on later passes until it returns
 * other than 1, then done(ctx, rc).  Neither is called before this
 * returns.  -1 (nothing queued, ctx still the caller's) once stopping. */
int bf_chores_start(bf_chores *m, bf_chore_slice_fn slice,
                    bf_chore_done_fn done, void *ctx);

/* Ends every queued chore with done(ctx, 1) and closes the handle; no
 * chore may be started after. */
void bf_chores_stop(bf_chores *m);

#endif
