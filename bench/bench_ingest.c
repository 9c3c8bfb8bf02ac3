/* bench_ingest: metric rows per second committed by a real bifocald.
 *
 * W simulated workers (threads, each its own TCP connection and lease) stream
 * M metrics messages of R train records each (4 metric rows per record) to
 * the daemon on loopback (bench_ingest_worker of bench_daemon.h), keeping up
 * to BENCH_INGEST_WINDOW messages unacknowledged as a
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

#define TARGET_ROWS_PER_S 200000.0

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

    bench_ingest_worker *args = bf_xcalloc((size_t)workers, sizeof *args);
    for (int i = 0; i < workers; i++)
        args[i] = (bench_ingest_worker){ .messages = messages,
                                         .records = records, .name = "bench" };
    double cpu0;
    int failed;
    double elapsed = bench_run_clients(&d, bench_ingest_worker_run, args,
                                       sizeof *args, workers, &cpu0, &failed);
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
