/* bench_submit: a sweep expanding to 100,000 jobs submitted through a real
 * bifocald over loopback, as `bifocal submit` does it: the time from sending
 * the file to the daemon's reply covers parsing, expansion, validation of
 * every job and the transaction that stores them.  Target: under 3 s.
 * bench_store measures the same work without the network, for comparison. */
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "clock.h"

enum { N_LR = 1000, N_SEEDS = 100 };

/* name + a 1000-value lr axis x 100 seeds = 100,000 jobs. */
static char *sweep_text(void)
{
    size_t cap = 64 + 24 * N_LR, n = 0;
    char *t = bf_xmalloc(cap);
    n += (size_t)snprintf(t + n, cap - n, "name: submit\ngrid:\n  lr: [");
    for (int i = 0; i < N_LR; i++)
        n += (size_t)snprintf(t + n, cap - n, "%s%.6g", i ? ", " : "",
                              1e-4 * (i + 1));
    snprintf(t + n, cap - n, "]\nseeds: %d\n", N_SEEDS);
    return t;
}

int main(void)
{
    bft_daemon d;
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    if (bft_daemon_start(&d, 60))
        return 1;
    char *text = sweep_text();
    int n_jobs = 0;
    double t0 = bf_now_seconds();
    long long sweep = bft_submit(&d, "submit.yaml", text, &n_jobs, NULL);
    double seconds = bf_now_seconds() - t0;
    free(text);
    long long stored = sweep > 0 ? bft_sql_int(&d, "SELECT count(*) FROM jobs")
                                 : -1;
    bft_daemon_cleanup(&d);
    if (sweep <= 0 || stored != N_LR * N_SEEDS) {
        fprintf(stderr, "bench_submit: submission failed (%lld jobs stored)\n",
                stored);
        return 1;
    }
    printf("submit via bifocald: %d jobs expanded, validated and stored in "
           "%.3f s (%.0f jobs/s; target < 3 s)\n", n_jobs, seconds,
           n_jobs / seconds);
    return 0;
}
