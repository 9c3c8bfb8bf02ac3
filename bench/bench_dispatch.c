/* bench_dispatch: leases granted per second by a real bifocald.
 *
 * G worker groups (threads, each its own connection) ask at once: each
 * requests a job, reports job_done, and asks again until the queue is empty.
 * The figure is jobs leased and finished over the wall time from the first
 * request to the last no_job.
 *
 * usage: bench_dispatch [GROUPS [JOBS]]
 * env:   BIFOCALD (daemon binary; default: the one built with this) */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_worker.h"
#include "harness.h"

#define TARGET_LEASES_PER_S 2000.0

typedef struct group_arg {
    bft_daemon *d;
    int index;
    pthread_barrier_t *start;
    int leases;
    int failed;
} group_arg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *run_group(void *p)
{
    group_arg *a = p;
    bft_worker w;
    char name[32];
    snprintf(name, sizeof name, "group-%d", a->index);
    a->failed = bft_worker_connect(&w, a->d, name) != 0;
    pthread_barrier_wait(a->start);
    while (!a->failed) {
        int64_t attempt = bft_worker_lease(&w, NULL);
        if (attempt < 0)
            break;      /* no_job: the queue is drained */
        json_t *r = bft_worker_done(&w, attempt);
        a->failed = !r || strcmp(bf_wire_type(r), "ack") != 0;
        json_decref(r);
        a->leases++;
    }
    if (!a->failed)
        bft_worker_close(&w);
    return NULL;
}

int main(int argc, char **argv)
{
    int groups = argc > 1 ? atoi(argv[1]) : 64;
    int jobs = argc > 2 ? atoi(argv[2]) : 4000;
    if (groups < 1 || jobs < 1) {
        fprintf(stderr, "usage: bench_dispatch [GROUPS [JOBS]]\n");
        return 2;
    }
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    bft_daemon d;
    if (bft_daemon_start(&d, 60))
        return 1;
    char sweep[128];
    snprintf(sweep, sizeof sweep, "name: dispatch\nseeds: %d\n", jobs);
    if (bft_submit(&d, "dispatch.yaml", sweep, NULL, NULL) < 0) {
        fprintf(stderr, "bench_dispatch: cannot submit the sweep\n");
        bft_daemon_cleanup(&d);
        return 1;
    }

    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)groups + 1);
    group_arg *args = calloc((size_t)groups, sizeof *args);
    pthread_t *threads = calloc((size_t)groups, sizeof *threads);
    for (int i = 0; i < groups; i++) {
        args[i] = (group_arg){ .d = &d, .index = i, .start = &start };
        pthread_create(&threads[i], NULL, run_group, &args[i]);
    }
    double cpu0 = bft_daemon_cpu_seconds(&d);
    pthread_barrier_wait(&start);
    double t0 = now_s();
    int failed = 0, leases = 0;
    for (int i = 0; i < groups; i++) {
        pthread_join(threads[i], NULL);
        failed |= args[i].failed;
        leases += args[i].leases;
    }
    double elapsed = now_s() - t0;
    long long succeeded = bft_sql_int(&d, "SELECT count(*) FROM jobs "
                                          "WHERE status = 'succeeded'");
    long long attempts = bft_sql_int(&d, "SELECT count(*) FROM attempts");
    double cpu = bft_daemon_cpu_seconds(&d) - cpu0;
    int stopped = bft_daemon_stop(&d, SIGTERM);
    bft_daemon_cleanup(&d);
    free(threads);
    free(args);
    pthread_barrier_destroy(&start);
    /* Every job exactly once: no job handed to two groups. */
    if (failed || stopped != 0 || leases != jobs || succeeded != jobs
        || attempts != jobs) {
        fprintf(stderr, "bench_dispatch: FAILED (leases %d, succeeded %lld, "
                "attempts %lld of %d jobs)\n", leases, succeeded, attempts,
                jobs);
        return 1;
    }
    double rate = leases / elapsed;
    printf("bifocald dispatch: %d groups, %d jobs leased+done in %.3f s: "
           "%.0f leases/s (target >= %.0f: %s)\n", groups, leases, elapsed,
           rate, TARGET_LEASES_PER_S,
           rate >= TARGET_LEASES_PER_S ? "met" : "MISSED");
    printf("bifocald dispatch: daemon CPU %.3f s = %.0f us per lease+done "
           "(%.0f leases per daemon-CPU-second)\n", cpu, 1e6 * cpu / leases,
           leases / cpu);
    return 0;
}
