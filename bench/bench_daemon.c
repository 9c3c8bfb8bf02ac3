#include "bench_daemon.h"

#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "clock.h"

int bench_daemon_start(bft_daemon *d, const char *name, int seeds)
{
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    if (bft_daemon_start(d, 60))
        return -1;
    char file[64], sweep[128];
    snprintf(file, sizeof file, "%s.yaml", name);
    snprintf(sweep, sizeof sweep, "name: %s\nseeds: %d\n", name, seeds);
    if (bft_submit(d, file, sweep, NULL, NULL) < 0) {
        fprintf(stderr, "bench_%s: cannot submit the sweep\n", name);
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
