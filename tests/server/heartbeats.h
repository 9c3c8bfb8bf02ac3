/* A test worker renewing its lease every every_ms on a thread of its own,
 * as a real worker's link thread does (worker/link.c), whatever the
 * caller's thread is busy with (sending a 100,000-job sweep, receiving a
 * 60,000-row reply).  It records each renewal's round trip and whether it
 * was acked: what the daemon's loop costs a worker while it works on
 * something big.  Used by test_daemon_busy (the property: every renewal
 * acked) and bench_submit (the figures). */
#ifndef BF_TEST_HEARTBEATS_H
#define BF_TEST_HEARTBEATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fake_worker.h"

typedef struct bft_heartbeats {
    /* private: under lock, but for the fields set at start */
    bft_worker *w;
    int64_t attempt;
    int every_ms;
    pthread_t thread;
    pthread_mutex_t lock;
    int stop, beats, not_acked;
    char first_refusal[512];
    double *rtt_ms;            /* round trips since the last reset */
    size_t n_rtt, cap_rtt;
} bft_heartbeats;

/* What the renewals so far came to: beats and not_acked (with the first
 * refusal) since the start; n, p50, p99 and max of the round trips since
 * the last reset, in ms (0 when n is 0). */
typedef struct bft_beat_figures {
    int beats, not_acked;
    char first_refusal[512];
    size_t n;
    double p50, p99, max;
} bft_beat_figures;

/* Starts renewing attempt (w's lease) every every_ms; w belongs to the
 * thread until bft_heartbeats_stop. */
void bft_heartbeats_start(bft_heartbeats *h, bft_worker *w, int64_t attempt,
                          int every_ms);
/* A new window of round trips. */
void bft_heartbeats_reset(bft_heartbeats *h);
void bft_heartbeats_figures(bft_heartbeats *h, bft_beat_figures *f);
/* Ends the thread; w is the caller's again. */
void bft_heartbeats_stop(bft_heartbeats *h);

#endif
