/* bench_wedge: the legal files that once wedged bifocald (issue 41),
 * through a real daemon over loopback.
 *
 * 1. A search of TRIALS trials whose selection a stage of CELLS cells takes
 *    (from:): the time from sending it to its ack, and meanwhile the
 *    latency of one-job submissions made one after another on another
 *    connection (each must be stored while the big one is: they are
 *    expanded side by side, server/submit.h).
 * 2. bifocald's resident memory after 1,000 one-job `code` sweeps, each
 *    with its own spelling of one code_dir, half of them refused: corpora
 *    are keyed by the directory, and a refused sweep keeps none
 *    (common/code_corpus.h).
 *
 * Usage: bench_wedge [TRIALS CELLS] (default 100000 890000: 990,000 jobs,
 * within the 1,000,000 a sweep may have). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_daemon.h"
#include "clock.h"

enum { SPELLINGS = 1000 };

/* tune: `trials` Sobol' trials over lr; confirm: from: tune, over a grid
 * of warmup_steps x rope_base x steps with about `cells` cells. */
static char *wedge_text(long trials, long cells)
{
    long a = 100, b = 100, c = cells / (a * b) > 0 ? cells / (a * b) : 1;
    char *t = bf_xmalloc(16384);
    size_t n = (size_t)snprintf(t, 16384, "name: wedge\nbase: {depth: 4, "
        "eval_depths: [4]}\nstages:\n  - name: tune\n    search:\n"
        "      method: sobol\n      trials: %ld\n      space: {lr: {uniform: "
        "[0.0001, 0.01]}}\n    select: {by: eval_loss, eval_depth: 4}\n"
        "  - name: confirm\n    from: \"stage:tune\"\n    grid:\n", trials);
    const char *fields[3] = {"warmup_steps", "rope_base", "steps"};
    long sizes[3] = {a, b, c}, first[3] = {0, 1000, 200};
    for (int f = 0; f < 3; f++) {
        n += (size_t)snprintf(t + n, 16384 - n, "      %s: [", fields[f]);
        for (long v = 0; v < sizes[f]; v++)
            n += (size_t)snprintf(t + n, 16384 - n, "%s%ld", v ? ", " : "",
                                  first[f] + v);
        n += (size_t)snprintf(t + n, 16384 - n, "]\n");
    }
    return t;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Part 1; 0 or -1. */
static int wedge(bft_daemon *d, long trials, long cells)
{
    char *text = wedge_text(trials, cells);
    bf_rpc big;
    bf_error err;
    if (bft_connect(d, &big, "client", NULL))
        return -1;
    json_t *msg = json_pack("{s:s, s:s, s:s}", "type", "submit", "filename",
                            "wedge.yaml", "text", text);
    double t0 = bf_now_seconds();
    int rc = bf_rpc_send(&big, msg, &err);
    json_decref(msg);
    free(text);
    double lat[1024];
    int n = 0;
    json_t *reply = NULL;
    while (rc == 0 && !reply && n < 1024) {
        char name[32], yaml[128];
        snprintf(name, sizeof name, "one%d", n);
        snprintf(yaml, sizeof yaml, "name: %s\nbase: {steps: 100}\n", name);
        double s0 = bf_now_seconds();
        if (bft_submit(d, "one.yaml", yaml, NULL, NULL) <= 0) {
            fprintf(stderr, "bench_wedge: a one-job sweep was refused\n");
            rc = -1;
            break;
        }
        lat[n++] = bf_now_seconds() - s0;
        reply = bf_rpc_recv(&big, 1000, &err);
    }
    if (!reply && rc == 0)
        reply = bf_rpc_recv(&big, 3600 * 1000, &err);
    double seconds = bf_now_seconds() - t0;
    bf_rpc_close(&big);
    int ok = reply && strcmp(bf_wire_type(reply), "ack") == 0;
    long jobs = ok ? (long)json_integer_value(json_object_get(reply, "jobs"))
                   : 0;
    json_decref(reply);
    if (!ok || rc) {
        fprintf(stderr, "bench_wedge: the wedge file was not stored\n");
        return -1;
    }
    qsort(lat, (size_t)n, sizeof *lat, by_value);
    printf("wedge file (%ld trials taken by %ld cells): %ld jobs expanded, "
           "validated and stored in %.1f s\n", trials, jobs - trials, jobs,
           seconds);
    printf("  %d one-job submissions meanwhile, one after another: latency "
           "median %.3f s, max %.3f s\n", n, n ? lat[n / 2] : 0,
           n ? lat[n - 1] : 0);
    return 0;
}

/* Part 2; 0 or -1. */
static int spellings(bft_daemon *d)
{
    long before = bft_proc_status_kib(d->pid, "VmRSS"), after_ten = 0;
    int stored = 0, refused = 0;
    for (int i = 0; i < SPELLINGS; i++) {
        char dir[256] = "/usr/lib/python3.11", yaml[512];
        size_t n = strlen(dir);
        for (int k = 0; k < i % 40; k++)
            n += (size_t)snprintf(dir + n, sizeof dir - n, "/.");
        for (int k = 0; k <= i / 40; k++)
            dir[n++] = '/';
        dir[n] = '\0';
        /* Odd ones name seed 1 twice: refused, after validation. */
        snprintf(yaml, sizeof yaml, "name: code%d\nbase: {task: code, "
                 "code_dir: \"%s\", depth: 2, eval_depths: [2], steps: 100}\n"
                 "grid: {seed: [1%s]}\n", i, dir, i % 2 ? ", 1" : "");
        if (bft_submit(d, "code.yaml", yaml, NULL, NULL) > 0)
            stored++;
        else
            refused++;
        if (i == 9)
            after_ten = bft_proc_status_kib(d->pid, "VmRSS");
    }
    long after = bft_proc_status_kib(d->pid, "VmRSS");
    printf("bifocald RSS over %d spellings of code_dir (%d sweeps stored, %d "
           "refused): %.1f MiB before, %.1f MiB after 10, %.1f MiB after "
           "%d (x%.2f of after 10)\n", SPELLINGS, stored, refused,
           before / 1024.0, after_ten / 1024.0, after / 1024.0, SPELLINGS,
           (double)after / (double)after_ten);
    return stored == SPELLINGS / 2 && refused == SPELLINGS / 2 ? 0 : -1;
}

int main(int argc, char **argv)
{
    long trials = 100000, cells = 890000;
    if (argc == 3) {
        trials = atol(argv[1]);
        cells = atol(argv[2]);
    } else if (argc != 1) {
        fprintf(stderr, "usage: bench_wedge [TRIALS CELLS]\n");
        return 2;
    }
    setenv("BFT_DAEMON_LOG_LEVEL", "warn", 0);
    setenv("BIFOCALD", BENCH_BIFOCALD, 0);
    bft_daemon d;
    if (bft_daemon_start(&d, 60))
        return 1;
    int rc = wedge(&d, trials, cells) || spellings(&d);
    bft_daemon_cleanup(&d);
    return rc;
}
