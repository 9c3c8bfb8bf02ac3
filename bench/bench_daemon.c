#include "bench_daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "fake_worker.h"

int bench_daemon_launch(bft_daemon *d)
{
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    return bft_daemon_start(d, 60);
}

int bench_daemon_submit(bft_daemon *d, const char *name, int seeds)
{
    char file[64], sweep[128];
    snprintf(file, sizeof file, "%s.yaml", name);
    snprintf(sweep, sizeof sweep, "name: %s\nseeds: %d\n", name, seeds);
    if (bft_submit(d, file, sweep, NULL, NULL) < 0) {
        fprintf(stderr, "bench: cannot submit the sweep %s\n", name);
        return -1;
    }
    return 0;
}

int bench_daemon_start(bft_daemon *d, const char *name, int seeds)
{
    if (bench_daemon_launch(d))
        return -1;
    if (bench_daemon_submit(d, name, seeds)) {
        bft_daemon_cleanup(d);
        return -1;
    }
    return 0;
}

/* Thread i's argument in the caller's array of bench_client-led structs. */
static bench_client *client_at(void *args, size_t size, int i)
{
    return (bench_client *)((char *)args + (size_t)i * size);
}

double bench_run_clients(bft_daemon *d, void *(*fn)(void *), void *args,
                         size_t size, int n, double *cpu0, int *failed)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    pthread_t *threads = bf_xcalloc((size_t)n, sizeof *threads);
    for (int i = 0; i < n; i++) {
        bench_client *c = client_at(args, size, i);
        *c = (bench_client){ .d = d, .index = i, .start = &start };
        pthread_create(&threads[i], NULL, fn, c);
    }
    *cpu0 = bft_daemon_cpu_seconds(d);
    pthread_barrier_wait(&start);
    double t0 = bf_now_seconds();
    *failed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        *failed |= client_at(args, size, i)->failed;
    }
    double elapsed = bf_now_seconds() - t0;
    free(threads);
    pthread_barrier_destroy(&start);
    return elapsed;
}

/* ---- a worker streaming metrics ------------------------------------------- */

static void encode_messages(bench_ingest_worker *a, int64_t attempt)
{
    a->frames = bf_xcalloc((size_t)a->messages, sizeof *a->frames);
    a->lens = bf_xcalloc((size_t)a->messages, sizeof *a->lens);
    for (int m = 0; m < a->messages; m++) {
        json_t *msg = json_pack("{s:s, s:I, s:i, s:i, s:o}", "type",
            "metrics", "id", m, "attempt_id", (json_int_t)attempt, "seq", m,
            "records", bft_train_records((int64_t)m * a->records,
                                         a->records));
        a->frames[m] = bf_wire_encode(msg, &a->lens[m]);
        json_decref(msg);
    }
}

static int expect_ack(bft_worker *w)
{
    bf_error err;
    json_t *r = bf_rpc_recv(&w->conn, 60000, &err);
    int ok = r && strcmp(bf_wire_type(r), "ack") == 0;
    if (!ok)
        fprintf(stderr, "bench: no ack: %s\n",
                r ? json_string_value(json_object_get(r, "message")) : err.msg);
    json_decref(r);
    return ok ? 0 : -1;
}

void *bench_ingest_worker_run(void *p)
{
    bench_ingest_worker *a = p;
    bft_worker w;
    char name[64];
    snprintf(name, sizeof name, "%s-%d", a->name, a->c.index);
    int64_t attempt = -1;
    if (bft_worker_connect(&w, a->c.d, name) == 0)
        attempt = bft_worker_lease(&w, NULL);
    a->c.failed = attempt < 0;
    if (!a->c.failed)
        encode_messages(a, attempt);
    pthread_barrier_wait(a->c.start);
    if (a->c.failed)
        return NULL;
    int outstanding = 0;
    for (int m = 0; m < a->messages && !a->c.failed; m++) {
        if (bft_send_raw(&w.conn, a->frames[m], a->lens[m]))
            a->c.failed = 1;
        if (++outstanding == BENCH_INGEST_WINDOW) {
            a->c.failed |= expect_ack(&w) != 0;
            outstanding--;
        }
    }
    while (outstanding-- > 0 && !a->c.failed)
        a->c.failed |= expect_ack(&w) != 0;
    bft_worker_close(&w);
    for (int m = 0; m < a->messages; m++)
        free(a->frames[m]);
    free(a->frames);
    free(a->lens);
    return NULL;
}
