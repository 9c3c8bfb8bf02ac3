/* bench_dispatch: leases granted per second by a real bifocald.
 *
 * G worker groups (threads, each its own connection) ask at once: each
 * requests a job, reports job_done, and asks again until the queue is empty.
 * The figure is jobs leased and finished over the wall time from the first
 * request to the last no_job.
 *
 * usage: bench_dispatch [GROUPS [JOBS]]
 * env:   BIFOCALD (daemon binary; default: the one built with this) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "fake_worker.h"

#define TARGET_LEASES_PER_S 2000.0

typedef struct group_arg {
    bench_client c;
    int leases;
} group_arg;

static void *run_group(void *p)
{
    group_arg *a = p;
    bft_worker w;
    char name[32];
    snprintf(name, sizeof name, "group-%d", a->c.index);
    a->c.failed = bft_worker_connect(&w, a->c.d, name) != 0;
    pthread_barrier_wait(a->c.start);
    while (!a->c.failed) {
        int64_t attempt = bft_worker_lease(&w, NULL);
        if (attempt < 0)
            break;      /* no_job: the queue is drained */
        json_t *r = bft_worker_done(&w, attempt);
        a->c.failed = !r || strcmp(bf_wire_type(r), "ack") != 0;
        json_decref(r);
        a->leases++;
    }
    if (!a->c.failed)
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
    bft_daemon d;
    if (bench_daemon_start(&d, "dispatch", jobs))
        return 1;

    group_arg *args = bf_xcalloc((size_t)groups, sizeof *args);
    double cpu0;
    int failed, leases = 0;
    double elapsed = bench_run_clients(&d, run_group, args, sizeof *args,
                                       groups, &cpu0, &failed);
    for (int i = 0; i < groups; i++)
        leases += args[i].leases;
    long long succeeded = bft_sql_int(&d, "SELECT count(*) FROM jobs "
                                          "WHERE status = 'succeeded'");
    long long attempts = bft_sql_int(&d, "SELECT count(*) FROM attempts");
    double cpu = bft_daemon_cpu_seconds(&d) - cpu0;
    int stopped = bft_daemon_stop(&d, SIGTERM);
    bft_daemon_cleanup(&d);
    free(args);
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
