/* bench_submit: a sweep expanding to 100,000 jobs submitted through a real
 * bifocald over loopback, as `bifocal submit` does it: the time from sending
 * the file to the daemon's reply covers parsing, expansion, validation of
 * every job and the transaction that stores them.  Target: under 3 s.
 * Then the same 100,000 jobs as two stages of 50,000, every job of the
 * second matched with its source in the first (docs/sweeps.md), side by
 * side.  bench_store measures the same work without the network, for
 * comparison. */
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "clock.h"

enum { N_LR = 1000, N_SEEDS = 100 };

/* "lr: [0.0001, ..., 0.1]" followed by "seeds: N", indented. */
static size_t axis_text(char *t, size_t cap, const char *indent, int seeds)
{
    size_t n = (size_t)snprintf(t, cap, "%sgrid:\n%s  lr: [", indent, indent);
    for (int i = 0; i < N_LR; i++)
        n += (size_t)snprintf(t + n, cap - n, "%s%.6g", i ? ", " : "",
                              1e-4 * (i + 1));
    return n + (size_t)snprintf(t + n, cap - n, "]\n%sseeds: %d\n", indent,
                                seeds);
}

/* name + a 1000-value lr axis x 100 seeds = 100,000 jobs; staged: two
 * stages of 1000 x 50, the second starting from the first. */
static char *sweep_text(int staged)
{
    size_t cap = 256 + 2 * 24 * N_LR, n = 0;
    char *t = bf_xmalloc(cap);
    if (!staged) {
        n += (size_t)snprintf(t, cap, "name: submit\n");
        axis_text(t + n, cap - n, "", N_SEEDS);
        return t;
    }
    n += (size_t)snprintf(t, cap, "name: staged\nstages:\n  - name: a\n");
    n += axis_text(t + n, cap - n, "    ", N_SEEDS / 2);
    n += (size_t)snprintf(t + n, cap - n, "  - name: b\n    base: "
                          "{init_from: \"stage:a\"}\n");
    axis_text(t + n, cap - n, "    ", N_SEEDS / 2);
    return t;
}

/* Submits one sweep; its seconds, or -1 if it was not stored whole. */
static double submit(bft_daemon *d, int staged, int *n_jobs)
{
    char *text = sweep_text(staged);
    double t0 = bf_now_seconds();
    long long sweep = bft_submit(d, "submit.yaml", text, n_jobs, NULL);
    double seconds = bf_now_seconds() - t0;
    free(text);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE sweep_id = %lld",
             sweep);
    long long stored = sweep > 0 ? bft_sql_int(d, sql) : -1;
    if (stored == N_LR * N_SEEDS)
        return seconds;
    fprintf(stderr, "bench_submit: submission failed (%lld jobs stored)\n",
            stored);
    return -1;
}

int main(void)
{
    bft_daemon d;
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    if (bft_daemon_start(&d, 60))
        return 1;
    int n_jobs = 0, n_staged = 0;
    double flat = submit(&d, 0, &n_jobs);
    double staged = flat < 0 ? -1 : submit(&d, 1, &n_staged);
    bft_daemon_cleanup(&d);
    if (staged < 0)
        return 1;
    printf("submit via bifocald: %d jobs expanded, validated and stored in "
           "%.3f s (%.0f jobs/s; target < 3 s)\n", n_jobs, flat,
           n_jobs / flat);
    printf("the same as two stages (%d jobs matched with their source): "
           "%.3f s, %.2f x the time\n", n_staged / 2, staged, staged / flat);
    return 0;
}
