/* bench_load: the daemon's working groups on a crowded day (issue 11).
 *
 * At once, against one real bifocald (5 s leases, its default limits):
 *   - IDLE idle clients: connections that said hello and then say nothing;
 *   - SLOW slow senders: strangers, each from its own address, sending a
 *     hello a byte a second (the hello timeout cuts them after 10 s; they
 *     connect again);
 *   - GROUPS working groups over real TCP, each a loop of request_job, then
 *     ten rounds of a metrics batch (5 train records) and a heartbeat 100 ms
 *     apart, then job_done.
 * for SECONDS.  Prints the latency of the groups' leases, heartbeats and
 * metrics acks (p50, p99, max; targets: p99 < 50 ms), how many of their
 * messages were answered `fenced` (target 0), and what the idle and slow
 * connections cost the daemon.  Twice: the second time with a search
 * beside the plain sweep (issue 19: 64 trials in each of 8 cells, pruned
 * by ASHA at three rungs), whose jobs the groups lease in turn with the
 * plain sweep's; every metrics batch carries an eval record every other
 * round, so the coordinator decides at each rung, and a group told to
 * cancel stops its job as bifocal-worker does (the job ends pruned).
 *
 * Then strangers from the token holder's own address (issue 15), each for
 * SECONDS against a fresh daemon (its default limits), while a token
 * holder from 127.0.0.1 connects, says hello and asks for the status every
 * 50 ms:
 *   - STRANGERS_IDLE idle strangers: connections from 127.0.0.1 that say
 *     nothing, each one the daemon closes opened again (at most
 *     ATTACK_PER_S connects a second);
 *   - ATTACK_PER_S wrong-token hellos a second from 127.0.0.1, each on a
 *     connection of its own, kept open for a second.
 * Prints the holder's time from connect to its status reply (p50, p99,
 * max; target: every one served, within 2 s).
 *
 * usage: bench_load [SECONDS [GROUPS [IDLE [SLOW]]]]   (20 64 1000 200)
 * env:   BIFOCALD (daemon binary; default: the one built with this) */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "clock.h"
#include "fake_worker.h"
#include "rng.h"

#define TARGET_P99_MS 50.0
#define ROUNDS_PER_JOB 10
#define ROUND_MS 100
#define LEASE_SECONDS 5
#define TARGET_SERVED_MS 2000.0
#define STRANGERS_IDLE 1100
#define ATTACK_PER_S 1000
#define HOLDER_EVERY_MS 50
#define EVAL_EVERY_ROUNDS 2     /* an eval record every 10 steps */

/* The search beside the plain sweep in the second run: 64 trials in each
 * of 8 cells, ASHA at the steps of rounds 2, 4 and 6. */
static const char search_sweep[] =
    "name: search\n"
    "base: {steps: 100, eval_every: 10, eval_depths: [4]}\n"
    "grid: {rope: [none, rope, spectral, bifocal], d_model: [32, 64]}\n"
    "search:\n"
    "  method: random\n"
    "  trials: 64\n"
    "  space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}\n"
    "prune: {method: asha, metric: eval_loss, eval_depth: 4,\n"
    "        rungs: [10, 20, 30], eta: 3}\n";

/* Latencies in ms, one array per kind per group. */
typedef struct samples {
    double *v;
    size_t n, cap;
} samples;

static void add(samples *s, double ms)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = bf_xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = ms;
}

typedef struct group_arg {
    bench_client c;
    double end;                 /* bf_now_seconds() to stop at */
    samples lease, heartbeat, metrics;
    int fenced, errors, jobs, retries, stopped;
} group_arg;

/* Whether reply r (stolen) is an ack; counts fenced and other errors.
 * *cancel (may be NULL) gets whether the ack says to stop the job. */
static int acked(group_arg *a, json_t *r, int *cancel)
{
    const char *type = r ? bf_wire_type(r) : "";
    const char *code = json_string_value(json_object_get(r, "code"));
    int ok = strcmp(type, "ack") == 0;
    if (!ok && code && strcmp(code, "fenced") == 0)
        a->fenced++;
    else if (!ok)
        a->errors++;
    if (cancel)
        *cancel = json_is_true(json_object_get(r, "cancel"));
    json_decref(r);
    return ok;
}

/* A round's metrics batch: 5 train records and, every other round, an
 * eval at depth 4 whose loss is a pure function of (job, step). */
static json_t *round_records(int64_t job_id, int round)
{
    json_t *records = bft_train_records(round * 5 + 1, 5);
    if ((round + 1) % EVAL_EVERY_ROUNDS == 0) {
        int step = (round + 1) * 5;
        double loss = 1.0 + (double)(bf_mix64((uint64_t)job_id * 1000 + step)
                                     % 1000) / 1000;
        json_array_append_new(records, json_pack("{s:s, s:i, s:i, s:f, s:f}",
                              "type", "eval", "step", step, "depth", 4,
                              "loss", loss, "accuracy", 0.5));
    }
    return records;
}

/* One job: ten rounds of metrics and heartbeat, then job_done; stopped
 * early (job_failed, as bifocal-worker reports a stop) when a reply says
 * cancel. */
static void work_on(group_arg *a, bft_worker *w, int64_t attempt,
                    int64_t job_id)
{
    int cancel = 0;
    for (int round = 0; round < ROUNDS_PER_JOB && !cancel; round++) {
        double t0 = bf_now_seconds();
        json_t *r = bft_worker_metrics(w, attempt, round + 1,
                                       round_records(job_id, round));
        add(&a->metrics, 1000 * (bf_now_seconds() - t0));
        if (!acked(a, r, &cancel))
            return;
        t0 = bf_now_seconds();
        r = bft_worker_heartbeat(w, attempt);
        add(&a->heartbeat, 1000 * (bf_now_seconds() - t0));
        if (!acked(a, r, &cancel))
            return;
        bf_sleep_ms(ROUND_MS);
    }
    if (cancel) {
        acked(a, bft_worker_failed(w, attempt, "stopped: cancel"), NULL);
        a->stopped++;
        return;
    }
    acked(a, bft_worker_done(w, attempt), NULL);
    a->jobs++;
}

/* Connects as a worker, trying again as bifocal-worker's link does: 64
 * groups connecting at once from one address are as many strangers as the
 * daemon lets one address hold, and one closed to make room comes back. */
static int connect_group(group_arg *a, bft_worker *w, const char *name)
{
    for (int tries = 0; tries < 100; tries++) {
        if (bft_worker_connect(w, a->c.d, name) == 0)
            return 0;
        bft_worker_close(w);
        a->retries++;
        bf_sleep_ms(20);
    }
    return -1;
}

static void *run_group(void *p)
{
    group_arg *a = p;
    bft_worker w;
    char name[32];
    snprintf(name, sizeof name, "group-%d", a->c.index);
    a->c.failed = connect_group(a, &w, name) != 0;
    pthread_barrier_wait(a->c.start);
    while (!a->c.failed && bf_now_seconds() < a->end) {
        double t0 = bf_now_seconds();
        int64_t job_id = 0;
        int64_t attempt = bft_worker_lease(&w, &job_id);
        add(&a->lease, 1000 * (bf_now_seconds() - t0));
        if (attempt < 0) {
            a->c.failed = 1;   /* the queue holds more than enough jobs */
            break;
        }
        work_on(a, &w, attempt, job_id);
    }
    bft_worker_close(&w);
    return NULL;
}

/* ---- the crowd: idle clients and slow senders ----------------------------- */

typedef struct crowd {
    bft_daemon *d;
    int n_idle, n_slow;
    bf_rpc *idle, *slow;
    int *slow_sent;             /* bytes of its hello each has sent */
    atomic_int stop;
    long cut, refused, reconnects;
} crowd;

static const char slow_hello[] =
    "{\"type\":\"hello\",\"version\":1,\"token\":\"not-the-token\","
    "\"role\":\"client\"}\n";

static void slow_address(int i, char *ip, size_t cap)
{
    snprintf(ip, cap, "127.0.%d.%d", 1 + i / 250, 1 + i % 250);
}

static void slow_connect(crowd *w, int i)
{
    char ip[32];
    slow_address(i, ip, sizeof ip);
    w->slow_sent[i] = 0;
    if (bft_connect_from(w->d, &w->slow[i], ip) != 0)
        w->slow[i].fd = -1;
}

/* Whatever the daemon said to slow sender i (its refusal), read; 1 when
 * the connection ended. */
static int slow_ended(crowd *w, int i)
{
    char buf[4096];
    ssize_t n = recv(w->slow[i].fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
        w->cut += memmem(buf, (size_t)n, "\"timeout\"", 9) != NULL;
        w->refused += memmem(buf, (size_t)n, "\"overloaded\"", 12) != NULL;
        n = recv(w->slow[i].fd, buf, sizeof buf, MSG_DONTWAIT);
    }
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Every second: one more byte from each slow sender; those the daemon
 * closed connect again. */
static void *run_slow(void *p)
{
    crowd *w = p;
    while (!atomic_load(&w->stop)) {
        for (int i = 0; i < w->n_slow; i++) {
            bf_rpc *c = &w->slow[i];
            if (c->fd >= 0 && slow_ended(w, i)) {
                bf_rpc_close(c);
                w->reconnects++;
            }
            if (c->fd < 0) {
                slow_connect(w, i);
                continue;
            }
            if (w->slow_sent[i] < (int)sizeof slow_hello - 1
                && send(c->fd, slow_hello + w->slow_sent[i], 1,
                        MSG_NOSIGNAL) == 1)
                w->slow_sent[i]++;
        }
        bf_sleep_ms(1000);
    }
    return NULL;
}

/* Idle clients the daemon closed (it should close none). */
static int idle_closed(crowd *w)
{
    int closed = 0;
    for (int i = 0; i < w->n_idle; i++) {
        struct pollfd pfd = { .fd = w->idle[i].fd, .events = POLLIN };
        closed += w->idle[i].fd < 0
                  || (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP)));
    }
    return closed;
}

/* ---- figures ---------------------------------------------------------------- */

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Prints the figures of samples all (sorted here; freed). */
static void print_figures(const char *what, samples *all, double target_ms,
                          const char *target)
{
    if (all->n == 0) {
        printf("%-10s no samples\n", what);
        return;
    }
    qsort(all->v, all->n, sizeof *all->v, by_value);
    double p50 = all->v[all->n / 2];
    double p99 = all->v[(size_t)(0.99 * (double)(all->n - 1))];
    double max = all->v[all->n - 1];
    double judged = strcmp(target, "max") == 0 ? max : p99;
    printf("%-10s %7zu   p50 %6.2f ms   p99 %6.2f ms   max %7.2f ms   "
           "(target %s < %.0f ms: %s)\n", what, all->n, p50, p99, max, target,
           target_ms, judged < target_ms ? "met" : "MISSED");
    free(all->v);
    all->v = NULL;
}

/* Prints the figures of all groups' samples of one kind. */
static void report(const char *what, group_arg *args, int groups,
                   size_t offset)
{
    samples all = {0};
    for (int g = 0; g < groups; g++) {
        samples *s = (samples *)((char *)&args[g] + offset);
        for (size_t i = 0; i < s->n; i++)
            add(&all, s->v[i]);
    }
    print_figures(what, &all, TARGET_P99_MS, "p99");
}

/* ---- strangers from the token holder's own address ----------------------- */

#define WRONG_TOKEN "0123456789abcdef0123456789abcdef"

typedef struct attacker {
    bft_daemon *d;
    int wrong;                  /* 1: wrong-token hellos; 0: idle */
    int n;                      /* connections it holds */
    bf_rpc *conns;
    struct pollfd *pfd;
    atomic_int stop;
    long connects, closed_by_daemon;
} attacker;

/* Reads what the daemon said on c; 1 when it closed c. */
static int closed_by_daemon(bf_rpc *c)
{
    char buf[4096];
    ssize_t n;
    while ((n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        ;
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Slot i connects (again) from 127.0.0.1, with a wrong hello if wrong. */
static void attack_from(attacker *a, int i)
{
    bf_rpc_close(&a->conns[i]);
    if (bft_connect_from(a->d, &a->conns[i], "127.0.0.1") != 0)
        a->conns[i].fd = -1;
    else if (a->wrong)
        bft_send_hello(&a->conns[i], WRONG_TOKEN);
    a->connects++;
}

/* Idle: keeps n connections open, opening again each one the daemon
 * closes.  Wrong: a new connection with a wrong hello in the slot of the
 * oldest.  Either at most ATTACK_PER_S connects a second. */
static void *run_attacker(void *p)
{
    attacker *a = p;
    double t0 = bf_now_seconds();
    long next_slot = 0;
    while (!atomic_load(&a->stop)) {
        for (int i = 0; i < a->n; i++)
            a->pfd[i] = (struct pollfd){ .fd = a->conns[i].fd,
                                         .events = POLLIN };
        poll(a->pfd, (nfds_t)a->n, 1);
        for (int i = 0; i < a->n; i++)
            if ((a->pfd[i].revents & (POLLIN | POLLHUP))
                && closed_by_daemon(&a->conns[i])) {
                a->closed_by_daemon++;
                bf_rpc_close(&a->conns[i]);
            }
        long due = (long)((bf_now_seconds() - t0) * ATTACK_PER_S);
        for (int i = 0; i < a->n && a->connects < due; i++) {
            int slot = a->wrong ? (int)(next_slot++ % a->n) : i;
            if (a->wrong || a->conns[slot].fd < 0)
                attack_from(a, slot);
        }
    }
    return NULL;
}

/* One token holder's try: connect from 127.0.0.1, hello, status.  Its time
 * in ms, or -1 (saying why) when it was not served. */
static double holder_served_ms(bft_daemon *d)
{
    double t0 = bf_now_seconds();
    bf_rpc c;
    bf_error err;
    int admitted = bf_rpc_connect(&c, d->addr, &err) == 0
                   && bf_rpc_hello(&c, d->token, "client", NULL, NULL, 1,
                                    &err) == 0;
    json_t *r = admitted
        ? bft_request(&c, json_pack("{s:s}", "type", "status")) : NULL;
    int ok = r && strcmp(bf_wire_type(r), "status") == 0;
    json_decref(r);
    bf_rpc_close(&c);
    if (!ok) {
        /* err says why only when the connect or the hello failed. */
        fprintf(stderr, "bench_load: a token holder was not served: %s\n",
                admitted ? "no status reply" : err.msg);
        return -1;
    }
    return 1000 * (bf_now_seconds() - t0);
}

/* The token holder's figures for SECONDS under one attack, on a fresh
 * daemon.  0, or -1 when the holder was refused or the daemon failed. */
static int strangers_scenario(int wrong, int seconds)
{
    bft_daemon d;
    if (bft_daemon_start(&d, LEASE_SECONDS)) {
        fprintf(stderr, "bench_load: cannot start the daemon\n");
        bft_daemon_cleanup(&d);
        return -1;
    }
    attacker a = { .d = &d, .wrong = wrong,
                   .n = wrong ? ATTACK_PER_S : STRANGERS_IDLE };
    a.conns = bf_xcalloc((size_t)a.n, sizeof *a.conns);
    a.pfd = bf_xcalloc((size_t)a.n, sizeof *a.pfd);
    for (int i = 0; i < a.n; i++)
        a.conns[i].fd = -1;
    pthread_t thread;
    pthread_create(&thread, NULL, run_attacker, &a);
    bf_sleep_ms(1000);   /* the attack under way */
    double cpu0 = bft_daemon_cpu_seconds(&d);
    samples served = {0};
    int refused = 0;
    double end = bf_now_seconds() + seconds;
    while (bf_now_seconds() < end) {
        double ms = holder_served_ms(&d);
        if (ms < 0)
            refused++;
        else
            add(&served, ms);
        bf_sleep_ms(HOLDER_EVERY_MS);
    }
    double cpu = bft_daemon_cpu_seconds(&d) - cpu0;
    atomic_store(&a.stop, 1);
    pthread_join(thread, NULL);
    if (wrong)
        printf("strangers: %d s, %d wrong-token hellos a second from the "
               "token holder's address (%ld sent)\n", seconds, ATTACK_PER_S,
               a.connects);
    else
        printf("strangers: %d s, %d idle strangers from the token holder's "
               "address (%ld connects, %ld of them closed by the daemon)\n",
               seconds, STRANGERS_IDLE, a.connects, a.closed_by_daemon);
    printf("%-10s %7zu served, %d refused (target 0); daemon %.2f CPU s, "
           "RSS %ld KiB\n", "holder", served.n, refused, cpu,
           bft_proc_status_kib(d.pid, "VmRSS"));
    print_figures("served", &served, TARGET_SERVED_MS, "max");
    fflush(stdout);
    for (int i = 0; i < a.n; i++)
        bf_rpc_close(&a.conns[i]);
    free(a.conns);
    free(a.pfd);
    int stopped = bft_daemon_stop(&d, SIGTERM);
    bft_daemon_cleanup(&d);
    return refused || stopped != 0 ? -1 : 0;
}

static void raise_own_descriptor_limit(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
}

/* The working groups beside the crowd for `seconds`, against a fresh
 * daemon; with `search`, the search sweep beside the plain one.  Prints
 * the figures; 0, or 1 when a group failed, a message was fenced or the
 * daemon did not stop cleanly. */
static int groups_scenario(int seconds, int groups, int n_idle, int n_slow,
                           int search)
{
    bft_daemon d;
    if (bft_daemon_start(&d, LEASE_SECONDS)
        || bft_submit(&d, "load.yaml", "name: load\nseeds: 5000\n", NULL,
                      NULL) < 0
        || (search && bft_submit(&d, "search.yaml", search_sweep, NULL,
                                 NULL) < 0)) {
        fprintf(stderr, "bench_load: cannot start the daemon\n");
        bft_daemon_cleanup(&d);
        return 1;
    }
    long rss0 = bft_proc_status_kib(d.pid, "VmRSS");

    crowd w = { .d = &d, .n_idle = n_idle, .n_slow = n_slow };
    w.idle = bf_xcalloc((size_t)n_idle + 1, sizeof *w.idle);
    w.slow = bf_xcalloc((size_t)n_slow + 1, sizeof *w.slow);
    w.slow_sent = bf_xcalloc((size_t)n_slow + 1, sizeof *w.slow_sent);
    int held = 0;
    for (int i = 0; i < n_idle; i++) {
        if (bft_connect(&d, &w.idle[i], "client", NULL) == 0)
            held++;
        else
            w.idle[i].fd = -1;
    }
    for (int i = 0; i < n_slow; i++)
        slow_connect(&w, i);
    pthread_t slow_thread;
    pthread_create(&slow_thread, NULL, run_slow, &w);
    long rss_crowd = bft_proc_status_kib(d.pid, "VmRSS");

    group_arg *args = bf_xcalloc((size_t)groups, sizeof *args);
    double end = bf_now_seconds() + seconds;
    for (int g = 0; g < groups; g++)
        args[g].end = end;
    double cpu0;
    int failed;
    double elapsed = bench_run_clients(&d, run_group, args, sizeof *args,
                                       groups, &cpu0, &failed);
    double cpu = bft_daemon_cpu_seconds(&d) - cpu0;
    atomic_store(&w.stop, 1);
    pthread_join(slow_thread, NULL);
    int closed = idle_closed(&w);

    int fenced = 0, errors = 0, jobs = 0, retries = 0, stopped = 0;
    for (int g = 0; g < groups; g++) {
        fenced += args[g].fenced;
        errors += args[g].errors;
        jobs += args[g].jobs;
        retries += args[g].retries;
        stopped += args[g].stopped;
    }
    printf("bench_load: %d s, %d working groups (lease %d s; %d connects "
           "tried again), %d idle clients (%d held, %d closed by the "
           "daemon), %d slow senders (%ld cut by the hello timeout, %ld "
           "refused, %ld reconnects)%s\n", seconds, groups, LEASE_SECONDS,
           retries, n_idle, held, closed, n_slow, w.cut, w.refused,
           w.reconnects, search ? ", beside a 64-trial ASHA search over 8 "
           "cells" : "");
    printf("%-10s %7s\n", "latency", "n");
    report("lease", args, groups, offsetof(group_arg, lease));
    report("heartbeat", args, groups, offsetof(group_arg, heartbeat));
    report("metrics", args, groups, offsetof(group_arg, metrics));
    printf("jobs done %d, stopped when told %d, in %.1f s; fenced %d (target "
           "0); other errors %d\n", jobs, stopped, elapsed, fenced, errors);
    if (search)
        printf("search: %lld of its 512 jobs leased, %lld prune decisions, "
               "%lld jobs pruned\n", bft_sql_int(&d, "SELECT count(*) FROM "
               "jobs WHERE sweep_id = 2 AND started_ms IS NOT NULL"),
               bft_sql_int(&d, "SELECT count(*) FROM prune_decisions"),
               bft_sql_int(&d, "SELECT count(*) FROM jobs WHERE status = "
                           "'pruned'"));
    printf("daemon: %.2f CPU s over the run; RSS %ld KiB idle, %ld KiB with "
           "the crowd, %ld KiB at the end\n", cpu, rss0, rss_crowd,
           bft_proc_status_kib(d.pid, "VmRSS"));
    fflush(stdout);

    for (int i = 0; i < n_idle; i++)
        bf_rpc_close(&w.idle[i]);
    for (int i = 0; i < n_slow; i++)
        bf_rpc_close(&w.slow[i]);
    int unclean = bft_daemon_stop(&d, SIGTERM);
    bft_daemon_cleanup(&d);
    for (int g = 0; g < groups; g++) {
        free(args[g].lease.v);
        free(args[g].heartbeat.v);
        free(args[g].metrics.v);
    }
    free(args);
    free(w.idle);
    free(w.slow);
    free(w.slow_sent);
    if (failed || unclean != 0 || fenced || errors) {
        fprintf(stderr, "bench_load: FAILED (%s)\n",
                failed ? "a group failed" : unclean ? "unclean stop"
                : "fenced or errors");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 20;
    int groups = argc > 2 ? atoi(argv[2]) : 64;
    int n_idle = argc > 3 ? atoi(argv[3]) : 1000;
    int n_slow = argc > 4 ? atoi(argv[4]) : 200;
    if (seconds < 1 || groups < 1 || n_idle < 0 || n_slow < 0
        || n_slow > 250 * 250) {
        fprintf(stderr, "usage: bench_load [SECONDS [GROUPS [IDLE [SLOW]]]]\n");
        return 2;
    }
    raise_own_descriptor_limit();
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    if (groups_scenario(seconds, groups, n_idle, n_slow, 0))
        return 1;
    printf("\n");
    if (groups_scenario(seconds, groups, n_idle, n_slow, 1))
        return 1;
    printf("\n");
    int strangers_failed = strangers_scenario(0, seconds);
    printf("\n");
    strangers_failed |= strangers_scenario(1, seconds);
    if (strangers_failed) {
        fprintf(stderr, "bench_load: FAILED (a token holder refused, or an "
                "unclean stop)\n");
        return 1;
    }
    return 0;
}
