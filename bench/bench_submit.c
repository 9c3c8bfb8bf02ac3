/* bench_submit: a sweep expanding to 100,000 jobs submitted through a real
 * bifocald over loopback, as `bifocal submit` does it: the time from sending
 * the file to the daemon's reply covers parsing, expansion, validation of
 * every job and the transactions that store them.  Target: under 3 s.
 * Then the same 100,000 jobs as two stages of 50,000, every job of the
 * second matched with its source in the first (docs/sweeps.md), side by
 * side, and the first sweep cancelled whole.  Meanwhile a worker renews a
 * lease of another sweep every 20 ms: its heartbeats' round trips (p50,
 * p99, max) show what the submission and the cancel cost everyone else
 * (the loop works on them a 5 ms slice per pass, server/chore.h; target
 * p99 < 50 ms).  bench_store measures the same work without the network,
 * for comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "clock.h"
#include "fake_worker.h"
#include "heartbeats.h"

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

/* The renewals' figures since the last reset, printed for `what`. */
static void print_beats(bft_heartbeats *h, const char *what)
{
    bft_beat_figures f;
    bft_heartbeats_figures(h, &f);
    printf("  heartbeats during %s: %zu, round trip p50 %.1f ms, p99 %.1f ms, "
           "max %.1f ms (target p99 < 50 ms); %d not acked\n", what, f.n,
           f.p50, f.p99, f.max, f.not_acked);
    bft_heartbeats_reset(h);
}

/* Cancels sweep 2 (the first 100,000-job one) whole, as `bifocal cancel`
 * does; its seconds (to the ack, which follows the last queued job), or
 * -1. */
static double cancel_all(bft_daemon *d)
{
    bf_rpc c;
    if (bft_connect(d, &c, "client", NULL))
        return -1;
    double t0 = bf_now_seconds();
    json_t *r = bft_request(&c, json_pack("{s:s, s:i}", "type", "cancel",
                                          "sweep_id", 2));
    double seconds = bf_now_seconds() - t0;
    int acked = r && strcmp(bf_wire_type(r), "ack") == 0;
    json_decref(r);
    bf_rpc_close(&c);
    long long left = bft_sql_int(d, "SELECT count(*) FROM jobs WHERE"
                                    " sweep_id = 2 AND status = 'queued'");
    if (acked && left == 0)
        return seconds;
    fprintf(stderr, "bench_submit: cancel failed (%s, %lld left)\n",
            acked ? "acked" : "not acked", left);
    return -1;
}

int main(void)
{
    bft_daemon d;
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    if (bft_daemon_start(&d, 60))
        return 1;
    bft_worker w;
    int64_t attempt = -1;
    if (bft_submit(&d, "held.yaml", "name: held\nseeds: 1\n", NULL, NULL) != 1
        || bft_worker_connect(&w, &d, "beater") != 0
        || (attempt = bft_worker_lease(&w, NULL)) <= 0) {
        fprintf(stderr, "bench_submit: no lease to renew\n");
        return 1;
    }
    bft_heartbeats h;
    bft_heartbeats_start(&h, &w, attempt, 20);
    int n_jobs = 0, n_staged = 0;
    double flat = submit(&d, 0, &n_jobs);
    if (flat >= 0)
        printf("submit via bifocald: %d jobs expanded, validated and stored "
               "in %.3f s (%.0f jobs/s; target < 3 s)\n", n_jobs, flat,
               n_jobs / flat);
    print_beats(&h, "the submission");
    double staged = flat < 0 ? -1 : submit(&d, 1, &n_staged);
    if (staged >= 0)
        printf("the same as two stages (%d jobs matched with their source): "
               "%.3f s, %.2f x the time\n", n_staged / 2, staged,
               staged / flat);
    bft_heartbeats_reset(&h);
    double cancel = staged < 0 ? -1 : cancel_all(&d);
    if (cancel >= 0)
        printf("cancel of the %d-job sweep: %.3f s\n", n_jobs, cancel);
    print_beats(&h, "the cancel");
    bft_heartbeats_stop(&h);
    bft_worker_close(&w);
    bft_daemon_cleanup(&d);
    return cancel < 0 ? 1 : 0;
}
