/* bench_store: the store alone, on a real database file, no network.
 *   1. submit a sweep expanding to 100,000 jobs (lr x seeds): seconds
 *   2. lease from 100,000 queued jobs: leases/s
 *   3. ingest metric rows through bf_store_ingest + bf_store_flush: rows/s
 * Targets: (1) < 3 s, (2) >= 2,000/s, (3) well over 200,000 rows/s.
 * usage: bench_store [DIR]   (default: a fresh directory under /tmp) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "store.h"

#define N_LR 100
#define N_SEEDS 1000            /* N_LR x N_SEEDS = 100,000 jobs */
#define N_LEASES 5000
#define RECORDS_PER_BATCH 250   /* x 4 metric keys = 1,000 rows per batch */
#define N_BATCHES 1000          /* 1,000,000 rows */
#define BATCHES_PER_FLUSH 8     /* the daemon flushes on each loop turn */

static void die(const char *what, const bf_error *err)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static char *sweep_text(void)
{
    size_t cap = 64 + 24 * N_LR, n = 0;
    char *t = bf_xmalloc(cap);
    n += (size_t)snprintf(t + n, cap - n, "name: bench\ngrid:\n  lr: [");
    for (int i = 0; i < N_LR; i++)
        n += (size_t)snprintf(t + n, cap - n, "%s%.6g", i ? ", " : "", 1e-4 * (i + 1));
    snprintf(t + n, cap - n, "]\nseeds: %d\n", N_SEEDS);
    return t;
}

static json_t *train_batch(int first_step)
{
    json_t *b = json_array();
    for (int i = 0; i < RECORDS_PER_BATCH; i++)
        json_array_append_new(b, json_pack("{s:s,s:i,s:f,s:f,s:f,s:f}", "type", "train",
                                           "step", first_step + i, "loss", 2.0 / (i + 1),
                                           "lr", 1e-3, "grad_norm", 0.5,
                                           "tokens_per_s", 1e5));
    return b;
}

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/bf-bench-store-XXXXXX";
    const char *dir = argc > 1 ? argv[1] : mkdtemp(tmpl);
    char path[1024];
    snprintf(path, sizeof path, "%s/bench.db", dir);
    unlink(path);
    bf_store *s;
    bf_error err = {0};
    if (bf_store_open(&s, path, &err) < 0)
        die("open", &err);

    char *text = sweep_text();
    int64_t sweep_id;
    int n_jobs;
    double t0 = bf_now_seconds();
    if (bf_store_submit_sweep(s, "bench.yaml", text, strlen(text), NULL, 0,
                              &sweep_id, &n_jobs, NULL, &err) < 0)
        die("submit", &err);
    double submit_s = bf_now_seconds() - t0;
    printf("submit: %d jobs in %.3f s (%.0f jobs/s; target < 3 s)\n", n_jobs, submit_s,
           n_jobs / submit_s);
    free(text);

    bf_lease l;
    t0 = bf_now_seconds();
    for (int i = 0; i < N_LEASES; i++) {
        /* one worker per lease: a worker holds at most one live lease */
        char worker[32];
        snprintf(worker, sizeof worker, "bench-%d", i);
        if (bf_store_lease_next(s, worker, NULL, i, 60000, &l, &err) != 1)
            die("lease", &err);
        if (i < N_LEASES - 1)
            bf_lease_clear(&l);
    }
    double lease_s = bf_now_seconds() - t0;
    printf("lease: %d leases from %d queued in %.3f s (%.0f leases/s; target >= 2000)\n",
           N_LEASES, n_jobs, lease_s, N_LEASES / lease_s);

    json_t **batches = bf_xmalloc(N_BATCHES * sizeof *batches);
    for (int i = 0; i < N_BATCHES; i++)
        batches[i] = train_batch(i * RECORDS_PER_BATCH);
    long rows = 0;
    t0 = bf_now_seconds();
    for (int i = 0; i < N_BATCHES; i++) {
        int n = 0;
        if (bf_store_ingest(s, l.attempt_id, batches[i], &n, NULL, &err) != 0)
            die("ingest", &err);
        rows += n;
        if ((i + 1) % BATCHES_PER_FLUSH == 0 && bf_store_flush(s, &err) < 0)
            die("flush", &err);
    }
    if (bf_store_flush(s, &err) < 0)
        die("flush", &err);
    double ingest_s = bf_now_seconds() - t0;
    printf("ingest: %ld metric rows in %.3f s (%.0f rows/s; target >> 200000), "
           "%d rows per batch, flush every %d batches\n", rows, ingest_s,
           rows / ingest_s, RECORDS_PER_BATCH * 4, BATCHES_PER_FLUSH);

    for (int i = 0; i < N_BATCHES; i++)
        json_decref(batches[i]);
    free(batches);
    bf_lease_clear(&l);
    bf_store_close(s);
    if (argc <= 1) {
        char side[1100];
        const char *suffixes[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            snprintf(side, sizeof side, "%s%s", path, suffixes[i]);
            unlink(side);
        }
        rmdir(dir);
    }
    return 0;
}
