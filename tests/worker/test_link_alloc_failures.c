/* Allocation-failure injection in the worker's coordinator link
 * (worker/link.c), as test_alloc_failures does for the daemon: a short
 * scenario (connect, hello, request_job, ten train records in metrics
 * batches, a checkpoint, job_done) against a real bifocald runs once to
 * count the link's allocations (this program is linked with common/alloc.c
 * built with BF_ALLOC_INJECT: jansson's and libuv's allocations are
 * counted too, both threads' of them), then again for every N with the
 * N-th allocation failing, and for REPEAT_RUNS values of N with every
 * allocation from the N-th on failing.
 *
 * Each run is a child process.  Whatever N hits, the child either ends the
 * scenario and exits 0 (under ASan: with no leak, LeakSanitizer checks at
 * exit), or aborts through the one out-of-memory policy (SIGABRT after its
 * log line); it never hangs, dies otherwise, or trips a sanitizer.  With
 * the failures repeating, every run must abort: the link cannot finish
 * without memory.  The daemon serves every run and stops cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "harness.h"
#include "link.h"

/* Values of N tried with every allocation from the N-th on failing. */
#define REPEAT_RUNS 16

/* A run that lasts longer has hung: a healthy one takes milliseconds. */
#define RUN_LIMIT_MS 60000

#define STEPS 10

static bft_daemon daemon_;
static char log_path[400];

static void emit(bf_link *l, bf_record r)
{
    bf_link_emit(l, &r);
}

/* The child's part: the link through one attempt, as worker `name` (one
 * per run: the daemon gives no second job to a worker whose attempt an
 * aborted run left live).  0 once it is done. */
static int scenario(const char *name)
{
    bf_link_opts o = { .server = daemon_.addr, .token = daemon_.token,
                       .name = name, .host = "h", .ranks = 1,
                       .batch_ms = 5, .batch_records = 4,
                       .backoff_min_ms = 10, .backoff_max_ms = 40 };
    bf_link *l;
    bf_error err;
    if (bf_link_start(&l, &o, &err) != 0)
        return 1;
    json_t *job = NULL;
    bf_link_no_job none;
    int rc = bf_link_request_job(l, &job, &none, &err);
    if (rc == 1) {
        bf_link_begin_attempt(l, json_integer_value(json_object_get(
                                     job, "attempt_id")), 30);
        for (int step = 1; step <= STEPS; step++) {
            bf_record r = { .kind = BF_RECORD_TRAIN, .step = step };
            r.u.train.value[BF_METRIC_LOSS] = 1.0 / step;
            emit(l, r);
            if (step == STEPS / 2)
                emit(l, (bf_record){ .kind = BF_RECORD_CHECKPOINT,
                                     .step = step,
                                     .u.checkpoint.path = "/ck/5" });
        }
        rc = bf_link_finish_attempt(l, NULL, 0, 10000, &err) == BF_LINK_OK
             ? 0 : 2;
    } else {
        fprintf(stderr, "no job (%d)\n", rc);
        rc = 3;
    }
    json_decref(job);
    bf_link_stop(l);
    fprintf(stderr, "allocations counted: %ld\n", bf_alloc_inject_count());
    return rc;
}

/* Whether the run's log holds needle. */
static int log_has(const char *needle)
{
    return bft_file_lines_with(log_path, needle) > 0;
}

/* Waits for child pid up to RUN_LIMIT_MS; its wait status, or -1 (killed)
 * when it hung. */
static int wait_child(pid_t pid)
{
    int64_t until = bf_monotonic_ms() + RUN_LIMIT_MS;
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (bf_monotonic_ms() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(2000);
    }
    return status;
}

/* One run with the n-th allocation failing (0: none; every one from it on
 * if repeat).  Returns the allocations counted when the run ended the
 * scenario, -1 when it aborted through the out-of-memory policy; fails on
 * anything else. */
static long run_once(long n, int repeat)
{
    char at[32];
    snprintf(at, sizeof at, "%ld", n);
    setenv("BF_ALLOC_FAIL_AT", at, 1);
    setenv("BF_ALLOC_FAIL_REPEAT", repeat ? "1" : "0", 1);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(4);
        char name[64];
        snprintf(name, sizeof name, "w-%ld%s", n, repeat ? "-on" : "");
        bf_alloc_init();
        bf_alloc_inject_arm();
        exit(scenario(name));
    }
    int status = wait_child(pid);
    const char *on = repeat ? " on" : "";
    if (status < 0)
        fail_msg("N=%ld%s: the link hung (log %s)", n, on, log_path);
    if (log_has("Sanitizer"))
        fail_msg("N=%ld%s: a sanitizer report (log %s)", n, on, log_path);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) {
        if (!log_has("out of memory allocating"))
            fail_msg("N=%ld%s: aborted without the out-of-memory line "
                     "(log %s)", n, on, log_path);
        return -1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("N=%ld%s: the link ended with status %#x (log %s)", n, on,
                 status, log_path);
    long counted = bft_file_number_after(log_path, "allocations counted: ");
    assert_true(counted > 0);
    return counted;
}

/* Starts the daemon with a sweep of n_jobs jobs: one per run. */
static void start_daemon(int n_jobs)
{
    assert_int_equal(bft_daemon_start(&daemon_, 30), 0);
    snprintf(log_path, sizeof log_path, "%s/link.log", daemon_.dir);
    char yaml[128];
    snprintf(yaml, sizeof yaml, "name: s\nbase: {steps: 100}\nseeds: %d\n",
             n_jobs);
    int got = 0;
    assert_true(bft_submit(&daemon_, "s.yaml", yaml, &got, NULL) > 0);
    assert_int_equal(got, n_jobs);
}

/* The allocations of one run without failures (on a daemon of its own). */
static long count_allocations(void)
{
    start_daemon(1);
    long total = run_once(0, 0);
    assert_int_equal(bft_stop_and_clean(&daemon_), 0);
    return total;
}

static void test_every_allocation_may_fail(void **state)
{
    (void)state;
    long total = count_allocations();
    /* Threads and timers make the count vary a little run to run: a few
     * more runs than counted. */
    long last = total + total / 10;
    start_daemon((int)last);
    int64_t t0 = bf_monotonic_ms();
    long aborted = 0;
    for (long n = 1; n <= last; n++) {
        long counted = run_once(n, 0);
        /* A run that made its N-th allocation met the failure: it may not
         * have gone on as if nothing happened. */
        if (counted >= n)
            fail_msg("N=%ld: the link made %ld allocations and ended the "
                     "scenario", n, counted);
        aborted += counted < 0;
    }
    print_message("%ld allocations in the link's scenario; %ld runs: %ld "
                  "aborted through the out-of-memory policy, the others "
                  "made fewer than N; %.1f s\n", total, last, aborted,
                  (double)(bf_monotonic_ms() - t0) / 1000.0);
    assert_int_equal(bft_stop_and_clean(&daemon_), 0);
}

static void test_memory_stays_short(void **state)
{
    (void)state;
    long total = count_allocations();
    assert_true(total > REPEAT_RUNS);
    start_daemon(REPEAT_RUNS);
    for (long i = 0; i < REPEAT_RUNS; i++) {
        long n = 1 + (2 * i + 1) * total / (2 * REPEAT_RUNS);
        /* The count varies a little run to run (threads, timers): a run
         * may end before its N-th allocation; one that made it with every
         * later allocation failing may not have finished the scenario. */
        long counted = run_once(n, 1);
        if (counted >= n)
            fail_msg("N=%ld on: the link made %ld allocations and ended the "
                     "scenario with every allocation from the N-th failing",
                     n, counted);
    }
    assert_int_equal(bft_stop_and_clean(&daemon_), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_may_fail),
        cmocka_unit_test(test_memory_stays_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
