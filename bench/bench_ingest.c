/* bench_ingest: metric rows per second committed by a real bifocald.
 *
 * W simulated workers (threads, each its own TCP connection and lease) stream
 * M metrics messages of R train records each (4 metric rows per record) to
 * the daemon on loopback, keeping up to WINDOW messages unacknowledged as a
 * real worker would.  The clock runs from the first message to the last ack
 * (an ack means committed), and the figure is the rows counted in the
 * database at the end over that time.  Then bench/optuna_ingest.py does the
 * same number of reports per worker through Optuna's SQLite storage, and the
 * ratio is printed.
 *
 * usage: bench_ingest [WORKERS [MESSAGES [RECORDS]]]
 * env:   BIFOCALD (daemon binary; default: the one built with this), OPTUNA_SCRIPT (path of optuna_ingest.py;
 *        empty = skip; default: the source tree's), PYTHON (default /usr/bin/python3) */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "fake_worker.h"

#define WINDOW 8
#define TARGET_ROWS_PER_S 200000.0

typedef struct worker_arg {
    bench_client c;
    int messages, records;
    char **frames;            /* pre-encoded, so the bench's own JSON work
                                 is not timed against the daemon */
    size_t *lens;
} worker_arg;

static void encode_messages(worker_arg *a, int64_t attempt)
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
    json_t *r = bf_wire_recv(&w->conn, 60000, &err);
    int ok = r && strcmp(bf_wire_type(r), "ack") == 0;
    if (!ok)
        fprintf(stderr, "bench_ingest: no ack: %s\n",
                r ? json_string_value(json_object_get(r, "message")) : err.msg);
    json_decref(r);
    return ok ? 0 : -1;
}

static void *run_worker(void *p)
{
    worker_arg *a = p;
    bft_worker w;
    char name[32];
    snprintf(name, sizeof name, "bench-%d", a->c.index);
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
        if (++outstanding == WINDOW) {
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

static long long count_rows(const char *db)
{
    sqlite3 *conn;
    sqlite3_stmt *st;
    long long n = -1;
    if (sqlite3_open_v2(db, &conn, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK
        && sqlite3_prepare_v2(conn, "SELECT count(*) FROM metrics", -1, &st,
                              NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(conn);
    return n;
}

/* Runs the Optuna reference; returns its rows/s or -1. */
static double run_optuna(int workers, int reports)
{
    const char *script = getenv("OPTUNA_SCRIPT");
    if (!script || !*script)
        return -1;
    const char *python = getenv("PYTHON");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' '%s' --workers %d --reports %d",
             python && *python ? python : "/usr/bin/python3", script,
             workers, reports);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    double rate = -1;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stdout);
        char *at = strstr(line, "rows_per_s=");
        if (at)
            rate = atof(at + strlen("rows_per_s="));
    }
    return pclose(p) == 0 ? rate : -1;
}

int main(int argc, char **argv)
{
    int workers = argc > 1 ? atoi(argv[1]) : 16;
    int messages = argc > 2 ? atoi(argv[2]) : 40;
    int records = argc > 3 ? atoi(argv[3]) : 500;
    if (workers < 1 || messages < 1 || records < 1) {
        fprintf(stderr, "usage: bench_ingest [WORKERS [MESSAGES [RECORDS]]]\n");
        return 2;
    }
    setenv("OPTUNA_SCRIPT", BENCH_OPTUNA_SCRIPT, 0);
    bft_daemon d;
    if (bench_daemon_start(&d, "ingest", workers))
        return 1;

    worker_arg *args = bf_xcalloc((size_t)workers, sizeof *args);
    for (int i = 0; i < workers; i++)
        args[i] = (worker_arg){ .messages = messages, .records = records };
    double cpu0;
    int failed;
    double elapsed = bench_run_clients(&d, run_worker, args, sizeof *args,
                                       workers, &cpu0, &failed);
    double cpu = bft_daemon_cpu_seconds(&d) - cpu0;
    int stopped = bft_daemon_stop(&d, SIGTERM);
    long long rows = count_rows(d.db);
    long long expected = (long long)workers * messages * records * 4;
    bft_daemon_cleanup(&d);
    free(args);
    if (failed || stopped != 0 || rows != expected) {
        fprintf(stderr, "bench_ingest: FAILED (rows %lld of %lld, daemon "
                "exit %d)\n", rows, expected, stopped);
        return 1;
    }
    double rate = (double)rows / elapsed;
    printf("bifocald ingest: %d workers x %d messages x %d records = %lld "
           "rows in %.3f s: %.0f rows/s (target >= %.0f: %s)\n", workers,
           messages, records, rows, elapsed, rate, TARGET_ROWS_PER_S,
           rate >= TARGET_ROWS_PER_S ? "met" : "MISSED");
    printf("bifocald ingest: daemon CPU %.3f s (%.0f rows per "
           "daemon-CPU-second)\n", cpu, (double)rows / cpu);

    /* Optuna gets a smaller run (it is orders of magnitude slower); rates
     * are comparable, totals are not. */
    double optuna = run_optuna(workers, 50);
    if (optuna > 0)
        printf("ratio bifocald / optuna: %.0fx\n", rate / optuna);
    else
        printf("optuna reference: skipped (set OPTUNA_SCRIPT)\n");
    return 0;
}
