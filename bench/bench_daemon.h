/* What bench_ingest, bench_dispatch and bench_dashboard share: a real bifocald (through the
 * daemon test harness) with a sweep queued, and client threads that get
 * ready first and are then released together, so the clock measures the
 * daemon rather than connection set-up. */
#ifndef BF_BENCH_DAEMON_H
#define BF_BENCH_DAEMON_H

#include <pthread.h>
#include <stddef.h>

#include "harness.h"

/* The first member of each benchmark's thread argument. */
typedef struct bench_client {
    bft_daemon *d;
    int index;                  /* 0..n-1 */
    pthread_barrier_t *start;   /* wait here once ready */
    int failed;
} bench_client;

/* Starts a daemon on a fresh database (logging at warn unless
 * BFT_DAEMON_LOG_LEVEL is set; the binary from BIFOCALD, default the one
 * built with this).  0 or -1. */
int bench_daemon_launch(bft_daemon *d);

/* Submits NAME.yaml, "name: NAME" with `seeds` jobs.  0, or -1 after
 * printing why. */
int bench_daemon_submit(bft_daemon *d, const char *name, int seeds);

/* Both: a daemon with one sweep.  0, or -1 after printing why (the daemon
 * is then cleaned up). */
int bench_daemon_start(bft_daemon *d, const char *name, int seeds);

/* Runs fn on n threads; thread i gets (char *)args + i * size, which starts
 * with a bench_client this fills in.  Returns the wall time from the moment
 * every thread waits at start to the end of the last one; *cpu0 is the
 * daemon's CPU seconds before that, *failed whether any client failed. */
double bench_run_clients(bft_daemon *d, void *(*fn)(void *), void *args,
                         size_t size, int n, double *cpu0, int *failed);

/* A simulated worker streaming metrics (bench_ingest, bench_dashboard):
 * connects as NAME-INDEX, leases a job, pre-encodes its `messages` metrics
 * messages of `records` train records each (4 metric rows per record; the
 * bench's own JSON work is not timed against the daemon) and, once
 * released, sends them keeping up to BENCH_INGEST_WINDOW unacknowledged as
 * a real worker does.  Its thread function is bench_ingest_worker_run. */
#define BENCH_INGEST_WINDOW 8
typedef struct bench_ingest_worker {
    bench_client c;
    int messages, records;
    const char *name;        /* worker name prefix; names must be new while
                                earlier leases of the same name live */
    char **frames;
    size_t *lens;
} bench_ingest_worker;

void *bench_ingest_worker_run(void *arg);

#endif
