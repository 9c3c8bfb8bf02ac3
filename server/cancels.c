/* cancels: a cancelled sweep's queued jobs, a slice per pass (cancels.h). */
#include "cancels.h"

#include <stdlib.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"

typedef struct drain {
    bf_store *store;
    int64_t sweep_id;
    int64_t now_ms;            /* the jobs' finished_ms */
    bf_cancel_done_fn done;
    void *ctx;
    bf_error err;
} drain;

static int drain_slice(void *ctx, int64_t deadline_us)
{
    drain *d = ctx;
    return bf_store_cancel_queued(d->store, d->sweep_id, d->now_ms,
                                  deadline_us, &d->err);
}

static void drain_done(void *ctx, int rc)
{
    drain *d = ctx;
    if (rc < 0)
        bf_log_error("cancelling the queued jobs of sweep %lld: %s",
                     (long long)d->sweep_id, d->err.msg);
    if (d->done)
        d->done(d->ctx, rc, &d->err);
    free(d);
}

void bf_cancels_drain(bf_chores *chores, bf_store *store, int64_t sweep_id,
                      bf_cancel_done_fn done, void *ctx)
{
    drain *d = bf_xcalloc(1, sizeof *d);
    d->store = store;
    d->sweep_id = sweep_id;
    d->now_ms = bf_wall_ms();
    d->done = done;
    d->ctx = ctx;
    bf_error_clear(&d->err);
    if (bf_chores_start(chores, drain_slice, drain_done, d) < 0)
        drain_done(d, 1);   /* stopping: the next start finishes it */
}

int bf_cancels_resume(bf_chores *chores, bf_store *store, bf_error *err)
{
    int64_t *ids;
    int n;
    if (bf_store_cancels_unfinished(store, &ids, &n, err) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        bf_log_info("finishing the cancel of sweep %lld", (long long)ids[i]);
        bf_cancels_drain(chores, store, ids[i], NULL, NULL);
    }
    free(ids);
    return 0;
}
