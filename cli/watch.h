/* watch: following a sweep until it ends (`bifocal watch`, `bifocal run`).
 *
 * On a terminal: the sweep's bar with its ETA, one line per running job
 * (id, swept fields, step/steps, loss, ETA), redrawn in place every poll;
 * each line is cut to the terminal's width, so none wraps and the redraw
 * (cursor up, rewrite each line, erase the rest of it and of the screen)
 * leaves no fragment of an older, longer line at any width.  Otherwise:
 * plain lines, where the sweep stands, then one per job that ends (its
 * status, fields and loss, the sweep's count and ETA) and a summary at the
 * end; with progress, instead, a line whenever the counts change and per
 * running job each tenth of its steps.  When no worker is connected it
 * says so instead of sitting at 0/N.  The sweep's ETA is its observed
 * throughput's (bf_progress_sweep_eta_seen). */
#ifndef BF_WATCH_H
#define BF_WATCH_H

#include <stdint.h>

#include "session.h"

typedef struct bf_watch_opts {
    /* Runs between polls (may be NULL); non-zero stops the watch with 1. */
    int (*tick)(void *ctx);
    void *ctx;
    /* Whether "0 workers connected" also says how to start one (not when
     * the caller starts the workers itself, as `bifocal run` does). */
    int worker_hint;
    /* Without a terminal: per-step progress lines, not job ends alone. */
    int progress;
} bf_watch_opts;

/* Follows the sweep through the daemon of cl until it ends.  Returns 0
 * when it ended, 1 when it could not be followed (message printed) or
 * tick stopped it. */
int bf_client_watch(bf_client *cl, int64_t sweep_id, const bf_watch_opts *o);

#endif
