/* bench_report: `bifocal report` and `compare` on a large sweep read from
 * its database file (--db), the way a sweep copied off a cluster is read.
 *
 * Writes, through the real store, a 1,000-job sweep (rope 4 x lr 5 x depth
 * 5 x 10 seeds, 5,000 steps each) with 5,000,000 training-loss rows, 6,000
 * evaluations with their per-example outcomes (128 examples each: compare
 * pairs them) and the learned frequencies of the spectral and bifocal jobs;
 * then runs the real bifocal binary on it and prints wall time, peak memory
 * and output size.  Targets (issue 8): the report in < 5 s and < 20 MB.
 *
 * usage: bench_report [DIR]   (default: a fresh directory under /tmp;
 *                              an existing DIR/report.db is reused) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "store.h"

#define STEPS 5000
#define RECORDS_PER_BATCH 1000

static const char *const sweep =
    "name: bench-report\n"
    "base:\n"
    "  task: dyck\n"
    "  eval_depths: [4, 8, 16]\n"
    "  d_model: 64\n"
    "  n_heads: 4\n"
    "  n_layers: 2\n"
    "  seq_len: 100\n"
    "  steps: 5000\n"
    "grid:\n"
    "  rope: [none, rope, spectral, bifocal]\n"
    "  lr: [0.001, 0.002, 0.003, 0.004, 0.005]\n"
    "  depth: [4, 8, 12, 16, 20]\n"
    "seeds: 10\n";

static void die(const char *what, const bf_error *err)
{
    fprintf(stderr, "bench_report: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static void ingest(bf_store *s, int64_t attempt, json_t *recs, int64_t *rows)
{
    bf_error err;
    int n = 0;
    if (bf_store_ingest(s, attempt, recs, &n, NULL, &err))
        die("ingest", &err);
    *rows += n;
    json_decref(recs);
}

/* One job's records: the loss at every step, evals at the middle and the
 * end, and 11 frequency snapshots of each learnable head. */
static void write_job(bf_store *s, const bf_lease *l, unsigned seed,
                      int64_t *rows)
{
    json_t *config = json_loads(l->config_json, 0, NULL);
    const char *rope = json_string_value(json_object_get(config, "rope"));
    int first_head = strcmp(rope, "spectral") == 0 ? 0
                     : strcmp(rope, "bifocal") == 0 ? 2 : 4;
    json_decref(config);
    json_t *recs = json_array();
    for (int step = 1; step <= STEPS; step++) {
        double noise = (double)rand_r(&seed) / RAND_MAX;
        json_array_append_new(recs, json_pack("{s:s, s:i, s:f}", "type", "train",
            "step", step, "loss", 2.0 / (1.0 + step / 100.0) + 0.1 * noise));
        if (json_array_size(recs) == RECORDS_PER_BATCH) {
            ingest(s, l->attempt_id, recs, rows);
            recs = json_array();
        }
    }
    for (int step = STEPS / 2; step <= STEPS; step += STEPS / 2)
        for (int depth = 4; depth <= 16; depth *= 2) {
            /* 128 eval examples (the default) and their outcomes */
            char hex[33];
            int right = 0;
            for (int b = 0; b < 16; b++) {
                unsigned byte = (unsigned)rand_r(&seed) & 0xff;
                right += __builtin_popcount(byte);
                snprintf(hex + 2 * b, 3, "%02x", byte);
            }
            json_array_append_new(recs, json_pack(
                "{s:s, s:i, s:i, s:f, s:f}", "type", "eval", "step", step,
                "depth", depth, "loss", 1.0 + (double)rand_r(&seed) / RAND_MAX,
                "accuracy", right / 128.0));
            json_array_append_new(recs, json_pack(
                "{s:s, s:i, s:i, s:i, s:s}", "type", "outcomes", "step",
                step, "depth", depth, "n", 128, "bits", hex));
        }
    for (int step = 0; step <= STEPS; step += STEPS / 10)
        for (int layer = 0; layer < 2; layer++)
            for (int head = first_head; head < 4; head++) {
                json_t *omega = json_array();
                for (int p = 0; p < 8; p++)
                    json_array_append_new(omega, json_real(
                        pow(10000.0, -p / 8.0)
                        * (1.0 + step / (double)STEPS * rand_r(&seed) / RAND_MAX)));
                json_array_append_new(recs, json_pack(
                    "{s:s, s:i, s:i, s:i, s:o}", "type", "freq", "step", step,
                    "layer", layer, "head", head, "omega", omega));
            }
    ingest(s, l->attempt_id, recs, rows);
}

static void make_database(const char *path)
{
    bf_store *s;
    bf_error err;
    if (bf_store_open(&s, path, &err))
        die("open", &err);
    int64_t id;
    int n_jobs;
    if (bf_store_submit_sweep(s, "bench-report.yaml", sweep, strlen(sweep),
                              NULL, 0, &id, &n_jobs, NULL, &err))
        die("submit", &err);
    double t0 = bf_now_seconds();
    int64_t rows = 0;
    bf_lease l;
    unsigned seed = 1;
    while (bf_store_lease_next(s, "bench", NULL, 0, 1000000000, &l, &err) == 1) {
        write_job(s, &l, seed++, &rows);
        if (bf_store_flush(s, &err))
            die("flush", &err);
        if (bf_store_finish_attempt(s, l.attempt_id, 1, NULL, 1, NULL))
            die("finish", NULL);
        bf_lease_clear(&l);
    }
    bf_store_close(s);
    printf("database: %d jobs, %lld rows written through the store in %.1f s\n",
           n_jobs, (long long)rows, bf_now_seconds() - t0);
}

/* Runs bifocal with argv, output to /dev/null; prints time and peak RSS. */
static void timed(const char *what, char *const argv[])
{
    fflush(stdout);     /* or the child's exit would print it again */
    double t0 = bf_now_seconds();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status)
        || WEXITSTATUS(status) != 0)
        die(what, NULL);
    printf("%-34s %6.2f s wall  %6.2f s cpu  peak memory %5.1f MB\n", what,
           bf_now_seconds() - t0, ru.ru_utime.tv_sec + ru.ru_stime.tv_sec
           + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec),
           ru.ru_maxrss / 1024.0);
}

static double file_mb(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size / 1048576.0 : -1.0;
}

int main(int argc, char **argv)
{
    char tmpl[] = "/tmp/bf-bench-report-XXXXXX";
    const char *dir = argc > 1 ? argv[1] : mkdtemp(tmpl);
    char db[512], html[512], json[512];
    mkdir(dir, 0755);
    snprintf(db, sizeof db, "%s/report.db", dir);
    snprintf(html, sizeof html, "%s/report.html", dir);
    snprintf(json, sizeof json, "%s/report.json", dir);
    if (access(db, R_OK) != 0)
        make_database(db);
    else
        printf("database: reusing %s\n", db);
    printf("database file: %.1f MB\n", file_mb(db));
    char *report[] = { BENCH_BIFOCAL, "report", "1", "--db", db, "-o", html, NULL };
    char *report_json[] = { BENCH_BIFOCAL, "report", "1", "--db", db, "--json",
                            "-o", json, NULL };
    char *compare[] = { BENCH_BIFOCAL, "compare", "1", "--db", db, NULL };
    char *results[] = { BENCH_BIFOCAL, "results", "1", "--db", db, NULL };
    timed("bifocal report (HTML)", report);
    timed("bifocal report --json", report_json);
    timed("bifocal compare (table)", compare);
    timed("bifocal results (table)", results);
    printf("report: %.2f MB HTML, %.2f MB JSON (targets: < 5 s, < 20 MB)\n",
           file_mb(html), file_mb(json));
    return 0;
}
