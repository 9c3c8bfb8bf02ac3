/* bench_dashboard: the live dashboard on a large database, and what it costs
 * the daemon writing that database.
 *
 * Writes, through the real store, a 1,000-job sweep (rope 4 x lr 5 x depth
 * 5 x 10 seeds) with ROWS metric rows (default 10,000,000: ROWS / 4,000
 * train records of 4 metrics per job), 6 evaluations and 11 frequency
 * snapshots of each learnable head per job; 990 jobs succeed, 10 stay
 * running.  Then runs the real `bifocal dashboard` on it and times, over
 * HTTP on loopback (median of repeats unless "first"):
 *   the sweep page's data: /api/sweeps/1, its /jobs and /live   < 200 ms
 *   one job's curves downsampled to 1,000 points                < 50 ms
 *   a live update: /live?since=cursor, a running job and its
 *   /curves?since=next_since                                    < 20 ms
 * then, while 4 peers pipeline 64 KiB of `GET /` each and read nothing,
 * the dashboard's peak RSS growth (their output budgets: 4 x 8 MiB) and
 * a reader's requests                                            < 2 s
 * and bifocald's ingest on that database (16 workers x 40 messages x 500
 * records, as bench_ingest) with the dashboard idle and with it polling the
 * sweep being written (its live view, a running job and its curves, the
 * summary: 4 requests every 200 ms, about five open pages' worth): rows/s
 * and rows per second of the daemon's CPU time (steadier on a shared
 * machine), the median of 3 rounds each (alternating), and their ratios.
 * Targets: >= 200,000 rows/s, ratio >= 0.9.
 *
 * The largest sweep the daemon accepts, written straight with SQL (the
 * store would take minutes to submit it): JOBS jobs (1,000,000 by default:
 * rope 4 x lr 10 x depth 25 = 1,000 groups x JOBS / 1,000 seeds), two
 * seeds of each group succeeded with evaluations, 10 running, the rest
 * queued.  A fresh `bifocal dashboard` on it:
 *   the sweep page (summary, first page of the job table, live) from the
 *   first request until all three hold data, then again          < 500 ms
 *   the dashboard's peak RSS                                     < 200 MB
 *   /live while jobs start and end (a writer moves 10 jobs/s
 *   from queued to running and from running to succeeded)        < 50 ms
 *   pages of the job table: first, middle, sorted by a field,
 *   filtered by a field and status, sorted by seed
 *
 * usage: bench_dashboard [ROWS]   (ROWS >= 40,000; 10,000,000 by default)
 *        bench_dashboard --big [JOBS]   (the large sweep only) */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "clock.h"
#include "store.h"

#define JOBS 1000
#define RUNNING 10
#define RECORDS_PER_BATCH 1000
#define WIDTH 1000
#define REPEATS 15
#define INGEST_WORKERS 16
#define POLL_MS 200
#define ROUNDS 3

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_dashboard: %s: %s\n", what, why ? why : "");
    exit(1);
}

/* ---- the database --------------------------------------------------------- */

static void ingest(bf_store *s, int64_t attempt, json_t *recs, int64_t *rows)
{
    bf_error err;
    int n = 0;
    if (bf_store_ingest(s, attempt, recs, &n, NULL, &err)
        || bf_store_flush(s, &err))
        die("ingest", err.msg);
    *rows += n;
    json_decref(recs);
}

/* Records of steps [from, to] of a job: 4 metrics a step, evaluations at
 * the middle and the end, frequencies every tenth of the run. */
static void write_steps(bf_store *s, int64_t attempt, int first_head,
                        int steps, int from, int to, unsigned *seed,
                        int64_t *rows)
{
    json_t *recs = json_array();
    for (int step = from; step <= to; step++) {
        double noise = (double)rand_r(seed) / RAND_MAX;
        json_array_append_new(recs, json_pack(
            "{s:s, s:i, s:f, s:f, s:f, s:f}", "type", "train", "step", step,
            "loss", 2.0 / (1.0 + step / 100.0) + 0.1 * noise, "lr", 0.001,
            "grad_norm", 1.0 + noise, "tokens_per_s", 50000.0 + 1000 * noise));
        if (step % (steps / 2) == 0)
            for (int depth = 4; depth <= 16; depth *= 2)
                json_array_append_new(recs, json_pack(
                    "{s:s, s:i, s:i, s:f, s:f}", "type", "eval", "step", step,
                    "depth", depth, "loss", 1.0 + noise, "accuracy", noise));
        if (step % (steps / 10) == 0)
            for (int layer = 0; layer < 2; layer++)
                for (int head = first_head; head < 4; head++) {
                    json_t *omega = json_array();
                    for (int p = 0; p < 8; p++)
                        json_array_append_new(omega, json_real(
                            pow(10000.0, -p / 8.0) * (1.0 + noise * step / steps)));
                    json_array_append_new(recs, json_pack(
                        "{s:s, s:i, s:i, s:i, s:o}", "type", "freq", "step",
                        step, "layer", layer, "head", head, "omega", omega));
                }
        if (json_array_size(recs) >= RECORDS_PER_BATCH) {
            ingest(s, attempt, recs, rows);
            recs = json_array();
        }
    }
    ingest(s, attempt, recs, rows);
}

static int first_learnable_head(const bf_lease *l)
{
    json_t *config = json_loads(l->config_json, 0, NULL);
    const char *rope = json_string_value(json_object_get(config, "rope"));
    int first = strcmp(rope, "spectral") == 0 ? 0
                : strcmp(rope, "bifocal") == 0 ? 2 : 4;
    json_decref(config);
    return first;
}

static void make_database(const char *path, long long total_rows)
{
    int steps = (int)(total_rows / JOBS / 4);
    char sweep[1024];
    snprintf(sweep, sizeof sweep,
             "name: bench-dashboard\n"
             "base: {task: dyck, eval_depths: [4, 8, 16], d_model: 64,\n"
             "       n_heads: 4, n_layers: 2, seq_len: 100, steps: %d}\n"
             "grid:\n"
             "  rope: [none, rope, spectral, bifocal]\n"
             "  lr: [0.001, 0.002, 0.003, 0.004, 0.005]\n"
             "  depth: [4, 8, 12, 16, 20]\n"
             "seeds: 10\n", steps);
    bf_store *s;
    bf_error err;
    if (bf_store_open(&s, path, &err))
        die("open", err.msg);
    int64_t id;
    int n_jobs;
    if (bf_store_submit_sweep(s, "bench-dashboard.yaml", sweep, strlen(sweep),
                              NULL, 0, &id, &n_jobs, NULL, &err))
        die("submit", err.msg);
    double t0 = bf_now_seconds();
    int64_t rows = 0;
    unsigned seed = 1;
    for (int job = 0; job < JOBS; job++) {
        char worker[32];
        int live = job >= JOBS - RUNNING;
        snprintf(worker, sizeof worker, live ? "live-%d" : "bench", job);
        bf_lease l;
        if (bf_store_lease_next(s, worker, NULL, bf_wall_ms(), 1000000000, &l,
                                &err) != 1)
            die("lease", err.msg);
        write_steps(s, l.attempt_id, first_learnable_head(&l), steps, 1,
                    live ? steps / 2 : steps, &seed, &rows);
        if (!live && bf_store_finish_attempt(s, l.attempt_id, 1, NULL,
                                             bf_wall_ms(), NULL))
            die("finish", NULL);
        bf_lease_clear(&l);
    }
    bf_store_close(s);
    struct stat st;
    stat(path, &st);
    printf("database: %d jobs (%d running), %lld rows (metrics, evals, "
           "frequencies) written through the store in %.1f s; %.0f MB\n",
           n_jobs, RUNNING, (long long)rows, bf_now_seconds() - t0,
           st.st_size / 1048576.0);
}

/* ---- the dashboard and a client of it ------------------------------------- */

static pid_t start_dashboard(const char *db, const char *port_file, int *port)
{
    fflush(stdout);     /* or the child's freopen would print it again */
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        execl(BENCH_BIFOCAL, BENCH_BIFOCAL, "dashboard", "--db", db,
              "--listen", "127.0.0.1:0", "--port-file", port_file,
              "--log-level", "warn", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300; i++) {
        FILE *f = fopen(port_file, "r");
        if (f && fscanf(f, "%d", port) == 1) {
            fclose(f);
            return pid;
        }
        if (f)
            fclose(f);
        bf_sleep_ms(50);
    }
    die("dashboard", "did not start listening");
    return -1;
}

static int http_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect", "the dashboard");
    return fd;
}

/* GET path on a kept-alive connection; the JSON body (new reference) and
 * the milliseconds it took in *ms. */
static json_t *http_get(int fd, const char *path, double *ms)
{
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "\r\n", path);
    double t0 = bf_now_seconds();
    if (write(fd, req, (size_t)n) != n)
        die("write", path);
    size_t cap = 1 << 16, len = 0, head = 0, need = 0;
    char *buf = bf_xmalloc(cap + 1);
    while (!head || len < need) {
        if (len == cap)
            buf = bf_xrealloc(buf, (cap *= 2) + 1);
        ssize_t got = read(fd, buf + len, cap - len);
        if (got <= 0)
            die("read", path);
        len += (size_t)got;
        buf[len] = '\0';
        const char *end = head ? NULL : strstr(buf, "\r\n\r\n");
        if (end) {
            const char *cl = strstr(buf, "Content-Length: ");
            if (strncmp(buf, "HTTP/1.1 200", 12) != 0 || !cl)
                die(path, buf);
            head = (size_t)(end + 4 - buf);
            need = head + strtoul(cl + 16, NULL, 10);
        }
    }
    *ms = 1000 * (bf_now_seconds() - t0);
    json_t *j = json_loadb(buf + head, need - head, 0, NULL);
    free(buf);
    if (!j)
        die("not JSON", path);
    return j;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, by_value);
    return x[n / 2];
}

/* ---- the page timings ----------------------------------------------------- */

/* The sweep page's three requests; their total ms, the jobs' cursor. */
static double sweep_page(int fd, json_int_t *cursor)
{
    double a, b, c;
    json_decref(http_get(fd, "/api/sweeps/1", &a));
    json_t *jobs = http_get(fd, "/api/sweeps/1/jobs?limit=1000", &b);
    if (json_array_size(json_object_get(jobs, "jobs")) != JOBS)
        die("jobs", "not every job listed");
    *cursor = json_integer_value(json_object_get(jobs, "cursor"));
    json_decref(jobs);
    json_decref(http_get(fd, "/api/sweeps/1/live", &c));
    return a + b + c;
}

static void time_pages(int port, long long total_rows)
{
    int fd = http_connect(port);
    json_int_t cursor;
    double first = sweep_page(fd, &cursor), t[REPEATS];
    for (int i = 0; i < REPEATS; i++)
        t[i] = sweep_page(fd, &cursor);
    printf("sweep page data (summary + %d-job table + live), first: %7.1f ms "
           "(target < 200 ms)\n", JOBS, first);
    printf("sweep page data, cached while no job starts or ends:     %7.1f ms\n",
           median(t, REPEATS));
    char path[256];
    snprintf(path, sizeof path, "/api/jobs/1/curves?width=%d", WIDTH);
    json_t *c = http_get(fd, path, &first);
    json_decref(c);
    for (int i = 0; i < REPEATS; i++)
        json_decref(http_get(fd, path, &t[i]));
    printf("one job's curves, %lld metric rows to <= %d points:     %7.1f ms "
           "(first %.1f ms; target < 50 ms)\n", total_rows / JOBS, WIDTH,
           median(t, REPEATS), first);
    /* A live page: the running jobs and the newest buckets of one. */
    json_t *live = http_get(fd, "/api/sweeps/1/live", &first);
    json_int_t job = json_integer_value(json_object_get(json_array_get(
        json_object_get(live, "running"), 0), "job_id"));
    json_decref(live);
    snprintf(path, sizeof path, "/api/jobs/%lld/curves?width=%d", (long long)job,
             WIDTH);
    c = http_get(fd, path, &first);
    json_int_t next = json_integer_value(json_object_get(c, "next_since"));
    json_decref(c);
    for (int i = 0; i < REPEATS; i++) {
        double a, b, d;
        char p1[128], p2[128], p3[128];
        snprintf(p1, sizeof p1, "/api/sweeps/1/live?since=%lld", (long long)cursor);
        snprintf(p2, sizeof p2, "/api/jobs/%lld", (long long)job);
        snprintf(p3, sizeof p3, "/api/jobs/%lld/curves?width=%d&since=%lld",
                 (long long)job, WIDTH, (long long)next);
        json_decref(http_get(fd, p1, &a));
        json_decref(http_get(fd, p2, &b));
        json_decref(http_get(fd, p3, &d));
        t[i] = a + b + d;
    }
    printf("live update (live since cursor, running job, its curves "
           "since): %.1f ms (target < 20 ms)\n", median(t, REPEATS));
    close(fd);
}

/* ---- peers that pipeline and never read ----------------------------------- */

#define PIPELINERS 4
#define PIPELINED_BYTES (64 << 10)

/* PIPELINERS connections each send PIPELINED_BYTES of pipelined `GET /`
 * (about 1,800 requests of the page) and read nothing; meanwhile a reader
 * times the sweeps list.  Each connection's queued answers stop at its
 * 8 MiB output budget (dashboard/http.h), so the dashboard's peak RSS grows
 * by about that per peer, not by the 180 MB of answers each asked for; the
 * reader is served within 2 s. */
static void time_pipelining(pid_t dash, int port)
{
    static const char get[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    size_t per = PIPELINED_BYTES / (sizeof get - 1);
    char *burst = bf_xmalloc(per * (sizeof get - 1));
    for (size_t i = 0; i < per; i++)
        memcpy(burst + i * (sizeof get - 1), get, sizeof get - 1);
    long before = bft_proc_status_kib(dash, "VmHWM");
    int fds[PIPELINERS];
    for (int i = 0; i < PIPELINERS; i++) {
        fds[i] = http_connect(port);
        if (write(fds[i], burst, per * (sizeof get - 1)) < 0)
            die("write", "the pipelined requests");
    }
    free(burst);
    int fd = http_connect(port);
    double t[REPEATS];
    for (int i = 0; i < REPEATS; i++) {
        json_decref(http_get(fd, "/api/sweeps", &t[i]));
        bf_sleep_ms(100);
    }
    close(fd);
    long grown = bft_proc_status_kib(dash, "VmHWM") - before;
    for (int i = 0; i < PIPELINERS; i++)
        close(fds[i]);
    qsort(t, REPEATS, sizeof *t, by_value);
    printf("%d peers pipelining %d KiB of GET / each, never reading: peak "
           "RSS +%.1f MB (their output budgets: %d x 8 MiB); a reader "
           "meanwhile: median %.1f ms, max %.1f ms (target < 2 s)\n",
           PIPELINERS, PIPELINED_BYTES >> 10, grown / 1024.0, PIPELINERS,
           t[REPEATS / 2], t[REPEATS - 1]);
}

/* ---- ingest, alone and polled --------------------------------------------- */

typedef struct poller {
    int port;
    int sweep;
    volatile int stop;
    int requests;
    double ms[100000];
} poller;

static void *poll_main(void *arg)
{
    poller *p = arg;
    int fd = http_connect(p->port);
    char path[256];
    json_int_t cursor = 0, job = 0, next = 0;
    while (!p->stop) {
        double t0 = bf_now_seconds(), ms;
        snprintf(path, sizeof path, "/api/sweeps/%d/live?since=%lld", p->sweep,
                 (long long)cursor);
        json_t *live = http_get(fd, path, &ms);
        p->ms[p->requests++ % 100000] = ms;
        json_t *run = json_array_get(json_object_get(live, "running"), 0);
        if (run && !job)
            job = json_integer_value(json_object_get(run, "job_id"));
        json_decref(live);
        if (job) {
            snprintf(path, sizeof path, "/api/jobs/%lld/curves?width=%d&since=%lld",
                     (long long)job, WIDTH, (long long)next);
            json_t *c = http_get(fd, path, &ms);
            p->ms[p->requests++ % 100000] = ms;
            next = json_integer_value(json_object_get(c, "next_since"));
            json_decref(c);
            snprintf(path, sizeof path, "/api/jobs/%lld", (long long)job);
            json_decref(http_get(fd, path, &ms));
            p->ms[p->requests++ % 100000] = ms;
        }
        snprintf(path, sizeof path, "/api/sweeps/%d", p->sweep);
        json_decref(http_get(fd, path, &ms));
        p->ms[p->requests++ % 100000] = ms;
        int left = POLL_MS - (int)(1000 * (bf_now_seconds() - t0));
        if (left > 0)
            bf_sleep_ms(left);
    }
    close(fd);
    return NULL;
}

/* One round: a new sweep of INGEST_WORKERS jobs streamed into; rows/s,
 * and rows per second of the daemon's own CPU time in *per_cpu. */
static double ingest_round(bft_daemon *d, int round, poller *p, double *per_cpu)
{
    char name[32];
    snprintf(name, sizeof name, "ingest-%d", round);
    if (bench_daemon_submit(d, name, INGEST_WORKERS))
        exit(1);
    bench_ingest_worker args[INGEST_WORKERS];
    for (int i = 0; i < INGEST_WORKERS; i++)
        args[i] = (bench_ingest_worker){ .messages = 40, .records = 500,
                                         .name = name };
    pthread_t thread;
    if (p) {
        p->sweep = round + 2;
        p->stop = 0;
        p->requests = 0;
        pthread_create(&thread, NULL, poll_main, p);
    }
    double cpu0;
    int failed;
    double elapsed = bench_run_clients(d, bench_ingest_worker_run, args,
                                       sizeof *args, INGEST_WORKERS, &cpu0,
                                       &failed);
    if (p) {
        p->stop = 1;
        pthread_join(thread, NULL);
    }
    double rows = (double)INGEST_WORKERS * 40 * 500 * 4;
    *per_cpu = rows / (bft_daemon_cpu_seconds(d) - cpu0);
    if (failed)
        die("ingest", "a worker failed");
    return rows / elapsed;
}

static void time_ingest(bft_daemon *d, int port)
{
    if (bft_daemon_restart(d))
        die("bifocald", "did not restart on the database");
    poller *p = bf_xcalloc(1, sizeof *p);
    p->port = port;
    double rate[2][ROUNDS], per_cpu[2][ROUNDS], ms[ROUNDS];
    int requests[ROUNDS];
    for (int round = 0; round < 2 * ROUNDS; round++) {
        int polling = round % 2, k = round / 2;
        rate[polling][k] = ingest_round(d, round, polling ? p : NULL,
                                        &per_cpu[polling][k]);
        printf("  round %d, dashboard %s: %.0f rows/s, %.0f rows per daemon "
               "CPU second", round + 1, polling ? "polling" : "idle   ",
               rate[polling][k], per_cpu[polling][k]);
        if (polling) {
            requests[k] = p->requests;
            ms[k] = median(p->ms, p->requests < 100000 ? p->requests : 100000);
            printf(" (%d requests, median %.1f ms)", requests[k], ms[k]);
        }
        printf("\n");
    }
    free(p);
    double idle = median(rate[0], ROUNDS), polled = median(rate[1], ROUNDS);
    double idle_cpu = median(per_cpu[0], ROUNDS);
    double polled_cpu = median(per_cpu[1], ROUNDS);
    printf("bifocald ingest, dashboard idle:    %.0f rows/s, %.0f rows per "
           "daemon CPU second (median of %d; target >= 200000 rows/s)\n",
           idle, idle_cpu, ROUNDS);
    printf("bifocald ingest, dashboard polling: %.0f rows/s, %.0f rows per "
           "daemon CPU second (median of %d)\n", polled, polled_cpu, ROUNDS);
    printf("ratio polling / idle: %.3f wall, %.3f per daemon CPU second "
           "(target >= 0.9)\n", polled / idle, polled_cpu / idle_cpu);
}

/* ---- the largest sweep ---------------------------------------------------- */

#define BIG_GROUPS 1000
#define BIG_RUNNING 10
#define BIG_SWEEP 1

static void sql(sqlite3 *db, const char *text)
{
    char *msg = NULL;
    if (sqlite3_exec(db, text, NULL, NULL, &msg) != SQLITE_OK)
        die(text, msg);
}

/* The sweep, its jobs (configs and cells as the store writes them), and
 * what two seeds of each group and the running jobs logged. */
static void make_big_database(const char *path, long long jobs)
{
    bf_store *st;
    bf_error err;
    if (bf_store_open(&st, path, &err))      /* the schema, migrated */
        die("open", err.msg);
    bf_store_close(st);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        die("open", path);
    double t0 = bf_now_seconds();
    char text[4096];
    snprintf(text, sizeof text,
        "INSERT INTO sweeps (sweep_id, name, filename, source, submitted_ms,"
        " max_attempts, n_jobs) VALUES (%d, 'bench-big', 'big.yaml',"
        " 'name: bench-big\nbase: {task: dyck, steps: 1000}\ngrid:\n"
        "  rope: [none, rope, spectral, bifocal]\n"
        "  lr: [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01]\n"
        "  depth: [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,"
        " 21, 22, 23, 24, 25, 26, 27, 28]\nseeds: %lld\n', %lld, 3, %lld)",
        BIG_SWEEP, jobs / BIG_GROUPS, (long long)bf_wall_ms(), jobs);
    sql(db, "BEGIN");
    sql(db, text);
    snprintf(text, sizeof text,
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n"
        "                         WHERE i + 1 < %lld),"
        " p AS (SELECT i, i / %d AS seed,"
        "         CASE (i %% %d) %% 4 WHEN 0 THEN 'none' WHEN 1 THEN 'rope'"
        "              WHEN 2 THEN 'spectral' ELSE 'bifocal' END AS rope,"
        "         0.001 * (1 + (i %% %d) / 4 %% 10) AS lr,"
        "         4 + (i %% %d) / 40 AS depth FROM n)"
        " INSERT INTO jobs (sweep_id, idx, config, config_hash, task, rope,"
        "                   depth, seed, learnable_heads, status, priority,"
        "                   created_ms, cell)"
        " SELECT %d, i, json_set('{\"batch_size\":32,\"checkpoint_every\":0,"
        "\"d_model\":64,\"depth\":4,\"dyck_k\":2,\"eval_depths\":[4,8,16],"
        "\"eval_every\":100,\"eval_examples\":128,\"freq_every\":50,"
        "\"freq_lr_mult\":1.0,\"grad_clip\":1.0,\"init_from\":\"\","
        "\"log_every\":10,\"lr\":0.001,\"modulus\":10,\"n_heads\":4,"
        "\"n_layers\":2,\"prope_fraction\":0.25,\"random_positions\":0,"
        "\"rope\":\"rope\",\"rope_base\":10000.0,\"seed\":1,\"seq_len\":64,"
        "\"spectral_fraction\":0.5,\"steps\":1000,\"stop_on_nonfinite\":true,"
        "\"task\":\"dyck\",\"warmup_steps\":50,\"weight_decay\":0.1}',"
        "   '$.rope', rope, '$.lr', lr, '$.depth', depth, '$.seed', seed),"
        "   printf('%%016x', i), 'dyck', rope, depth, seed, 2, 'queued', 0, %lld,"
        "   i %% %d FROM p",
        jobs, BIG_GROUPS, BIG_GROUPS, BIG_GROUPS, BIG_GROUPS, BIG_SWEEP,
        (long long)bf_wall_ms(), BIG_GROUPS);
    sql(db, text);
    /* Seeds 0 and 1 succeeded: a final evaluation at 3 depths, a loss. */
    sql(db, "UPDATE jobs SET status = 'succeeded', started_ms = created_ms,"
            " finished_ms = created_ms + 60000 WHERE seed < 2");
    sql(db, "INSERT INTO evals (job_id, step, depth, loss, accuracy)"
            " SELECT job_id, 1000, d.value, 1.0 + (job_id % 97) / 100.0,"
            "        0.5 + (job_id % 89) / 200.0"
            "   FROM jobs, json_each('[4,8,16]') d WHERE status = 'succeeded'");
    sql(db, "INSERT INTO metrics (job_id, key, step, value)"
            " SELECT job_id, 'loss', 1000, 0.5 + (job_id % 83) / 100.0"
            "   FROM jobs WHERE status = 'succeeded'");
    sql(db, "COMMIT");
    sqlite3_close(db);
    struct stat stt;
    stat(path, &stt);
    printf("large sweep: %lld jobs (%d groups, %lld succeeded), written with "
           "SQL in %.1f s; %.0f MB\n", jobs, BIG_GROUPS, 2LL * BIG_GROUPS,
           bf_now_seconds() - t0, stt.st_size / 1048576.0);
}

/* A writer moving jobs as a running sweep does: every 100 ms the oldest
 * running job succeeds (its evaluations and loss logged) and a queued one
 * starts (an attempt), so that the dashboard's counts keep moving. */
typedef struct mover {
    const char *db;
    volatile int stop;
    int moved;
} mover;

/* Now in ms since the Unix epoch (bf_wall_ms's scale), in SQL. */
#define NOW_MS " CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

static void *mover_main(void *arg)
{
    mover *m = arg;
    sqlite3 *db;
    if (sqlite3_open(m->db, &db) != SQLITE_OK)
        die("open", m->db);
    sqlite3_busy_timeout(db, 5000);
    while (!m->stop) {
        sql(db, "BEGIN IMMEDIATE");
        sql(db, "CREATE TEMP TABLE IF NOT EXISTS done (job_id INTEGER)");
        sql(db, "DELETE FROM done");
        sql(db, "INSERT INTO done SELECT job_id FROM jobs WHERE sweep_id = 1"
                " AND status = 'running' ORDER BY started_ms, job_id LIMIT 1");
        sql(db, "UPDATE attempts SET outcome = 'succeeded', ended_ms =" NOW_MS
                " WHERE outcome = 'running' AND job_id IN (SELECT job_id FROM done)");
        sql(db, "INSERT OR IGNORE INTO evals (job_id, step, depth, loss, accuracy)"
                " SELECT job_id, 1000, d.value, 1.1, 0.6 FROM done,"
                " json_each('[4,8,16]') d");
        sql(db, "UPDATE jobs SET status = 'succeeded', finished_ms =" NOW_MS
                " WHERE job_id IN (SELECT job_id FROM done)");
        sql(db, "INSERT INTO done SELECT job_id FROM jobs WHERE sweep_id = 1"
                " AND status = 'queued' ORDER BY job_id LIMIT 1");
        sql(db, "UPDATE jobs SET status = 'running', attempts = 1, started_ms ="
                NOW_MS " WHERE job_id = (SELECT max(job_id) FROM done)");
        sql(db, "INSERT INTO attempts (job_id, attempt_no, worker, started_ms,"
                " lease_expires_ms) SELECT max(job_id), 1, 'bench'," NOW_MS ","
                NOW_MS " + 600000 FROM done");
        sql(db, "COMMIT");
        m->moved++;
        bf_sleep_ms(100);
    }
    sqlite3_close(db);
    return NULL;
}

/* GET path until its answer is not "pending" (the sweep still loading). */
static json_t *get_ready(int fd, const char *path, double *ms)
{
    double t0 = bf_now_seconds(), one;
    for (;;) {
        json_t *j = http_get(fd, path, &one);
        if (!json_is_true(json_object_get(j, "pending"))) {
            *ms = 1000 * (bf_now_seconds() - t0);
            return j;
        }
        json_decref(j);
        bf_sleep_ms(20);
    }
}

/* The sweep page's three requests until each has data; *compared: when
 * the summary came with its comparison (asked again until it does; a sweep
 * just read is first answered with its outline), from the start. */
static double big_page(int fd, double *first_answer, double *compared)
{
    double a, b, c, t0 = bf_now_seconds(), one;
    char path[128];
    snprintf(path, sizeof path, "/api/sweeps/%d", BIG_SWEEP);
    if (first_answer) {         /* a fresh dashboard: its first answer */
        json_decref(http_get(fd, path, &one));
        *first_answer = one;
    }
    json_t *summary = get_ready(fd, path, &a);
    snprintf(path, sizeof path, "/api/sweeps/%d/jobs?limit=100", BIG_SWEEP);
    json_t *jobs = get_ready(fd, path, &b);
    if (json_array_size(json_object_get(jobs, "jobs")) != 100)
        die("jobs", "the first page is not 100 rows");
    json_decref(jobs);
    snprintf(path, sizeof path, "/api/sweeps/%d/live", BIG_SWEEP);
    json_decref(get_ready(fd, path, &c));
    double page = 1000 * (bf_now_seconds() - t0);
    snprintf(path, sizeof path, "/api/sweeps/%d", BIG_SWEEP);
    while (json_is_null(json_object_get(summary, "compare"))) {
        json_decref(summary);
        bf_sleep_ms(20);
        summary = http_get(fd, path, &one);
    }
    if (json_array_size(json_object_get(summary, "compare")) != 3 * BIG_GROUPS)
        die("summary", "the comparison is not one row per group and depth");
    json_decref(summary);
    if (compared)
        *compared = 1000 * (bf_now_seconds() - t0);
    return page;
}

static double time_path(int fd, const char *path)
{
    double t[REPEATS];
    for (int i = 0; i < REPEATS; i++)
        json_decref(http_get(fd, path, &t[i]));
    return median(t, REPEATS);
}

static void time_big(const char *dir, long long jobs)
{
    char db[400], port_file[400];
    snprintf(db, sizeof db, "%s/big.db", dir);
    snprintf(port_file, sizeof port_file, "%s/big.port", dir);
    make_big_database(db, jobs);
    int port;
    pid_t dash = start_dashboard(db, port_file, &port);
    int fd = http_connect(port);
    double first_answer, compared;
    double cold = big_page(fd, &first_answer, &compared), warm[REPEATS];
    for (int i = 0; i < REPEATS; i++)
        warm[i] = big_page(fd, NULL, NULL);
    printf("%lld-job sweep page (summary, 100-row job page, live), from a fresh "
           "dashboard: first answer %.1f ms, all three with data %.1f ms "
           "(target < 500 ms), the comparison %.1f ms\n",
           jobs, first_answer, cold, compared);
    printf("%lld-job sweep page, again: %.1f ms (target < 500 ms)\n", jobs,
           median(warm, REPEATS));
    char path[256];
    printf("job table pages (median of %d):\n", REPEATS);
    const char *pages[][2] = {
        { "first page, by id", "limit=100" },
        { "middle page, by id", "limit=100&offset=500000" },
        { "sorted by lr, descending", "limit=100&sort=lr&desc=1&offset=1000" },
        { "filtered rope=spectral, status=queued", "limit=100&rope=spectral&status=queued" },
        { "sorted by seed", "limit=100&sort=seed&offset=250000" } };
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        snprintf(path, sizeof path, "/api/sweeps/%d/jobs?%s", BIG_SWEEP, pages[i][1]);
        printf("  %-40s %7.1f ms\n", pages[i][0], time_path(fd, path));
    }
    /* Jobs start and end while a page polls. */
    mover m = { .db = db };
    pthread_t thread;
    pthread_create(&thread, NULL, mover_main, &m);
    double live[200], summary[200];
    int n = 0;
    snprintf(path, sizeof path, "/api/sweeps/%d/live", BIG_SWEEP);
    char spath[64];
    snprintf(spath, sizeof spath, "/api/sweeps/%d", BIG_SWEEP);
    json_int_t before = -1, after = -1;
    for (; n < 200; n++) {
        json_t *l = http_get(fd, path, &live[n]);
        json_int_t s = json_integer_value(json_object_get(json_object_get(l,
                                          "counts"), "succeeded"));
        before = before < 0 ? s : before;
        after = s;
        json_decref(l);
        json_decref(http_get(fd, spath, &summary[n]));
        bf_sleep_ms(50);
    }
    m.stop = 1;
    pthread_join(thread, NULL);
    qsort(live, (size_t)n, sizeof *live, by_value);
    printf("/live while %d jobs started and %d ended (10 a second): median "
           "%.1f ms, p95 %.1f ms, max %.1f ms (target < 50 ms); succeeded "
           "counted %lld -> %lld\n", m.moved, m.moved, median(live, n),
           live[n * 95 / 100], live[n - 1], (long long)before, (long long)after);
    printf("/api/sweeps/%d meanwhile: median %.1f ms\n", BIG_SWEEP,
           median(summary, n));
    printf("dashboard peak RSS: %.0f MB (target < 200 MB)\n",
           bft_proc_status_kib(dash, "VmHWM") / 1024.0);
    close(fd);
    kill(dash, SIGTERM);
    waitpid(dash, NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--big") == 0) {
        long long jobs = argc > 2 ? atoll(argv[2]) : 1000000;
        if (jobs < 10 * BIG_GROUPS) {
            fprintf(stderr, "usage: bench_dashboard --big [JOBS]   (JOBS >= %d)\n",
                    10 * BIG_GROUPS);
            return 2;
        }
        char dir[] = "/tmp/bench-dashboard-XXXXXX";
        if (!mkdtemp(dir))
            die("mkdtemp", dir);
        time_big(dir, jobs);
        char rm[64];
        snprintf(rm, sizeof rm, "rm -rf %s", dir);
        return system(rm) != 0;
    }
    long long rows = argc > 1 ? atoll(argv[1]) : 10000000;
    if (rows < 40000) {
        fprintf(stderr, "usage: bench_dashboard [ROWS]   (ROWS >= 40000)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    bft_daemon d;
    /* A daemon makes the database (its schema), then the store fills it.
     * bifocald writes its port file a moment before its SIGTERM handler is
     * installed: stop it once it has answered. */
    if (bench_daemon_launch(&d) || !bft_serves_status(&d))
        die("bifocald", "did not start");
    int status = bft_daemon_stop(&d, SIGTERM);
    if (status != 0) {
        fprintf(stderr, "bench_dashboard: bifocald exited %d on SIGTERM "
                "(see %s)\n", status, d.log);
        return 1;
    }
    make_database(d.db, rows);
    char port_file[400];
    snprintf(port_file, sizeof port_file, "%s/dashboard.port", d.dir);
    int port;
    pid_t dash = start_dashboard(d.db, port_file, &port);
    time_pages(port, rows);
    time_pipelining(dash, port);
    time_ingest(&d, port);
    kill(dash, SIGTERM);
    waitpid(dash, NULL, 0);
    time_big(d.dir, 1000000);
    bft_daemon_stop(&d, SIGTERM);
    bft_daemon_cleanup(&d);
    return 0;
}
