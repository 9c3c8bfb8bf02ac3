/* Restarting the daemon, politely (SIGTERM) and not (SIGKILL), with queued
 * and running jobs in the database: nothing accepted is lost, and running
 * leases are re-claimed by heartbeats or expire. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "fake_worker.h"
#include "harness.h"

static const char sweep_3[] =
    "name: three\n"
    "grid:\n"
    "  rope: [rope, spectral, bifocal]\n";

/* Submits three jobs, leases one and gets 20 records (80 rows) acked. */
static int64_t start_work(bft_daemon *d, bft_worker *w, int64_t *job)
{
    assert_true(bft_submit(d, "three.yaml", sweep_3, NULL, NULL) > 0);
    assert_int_equal(bft_worker_connect(w, d, "w1"), 0);
    int64_t attempt = bft_worker_lease(w, job);
    assert_true(attempt > 0);
    json_t *r = bft_worker_metrics(w, attempt, 1, bft_train_records(0, 20));
    assert_true(bft_reply_is(r, "ack"));
    return attempt;
}

static void assert_nothing_lost(bft_daemon *d)
{
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM sweeps"), 1);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs"), 3);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics"), 80);
}

static void test_sigterm_restart_reclaims_lease(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start(&d, 30), 0);
    bft_worker w;
    int64_t job, attempt = start_work(&d, &w, &job);

    assert_int_equal(bft_daemon_stop(&d, SIGTERM), 0);
    bft_worker_close(&w);
    assert_nothing_lost(&d);

    assert_int_equal(bft_daemon_restart(&d), 0);
    /* The worker comes back with its old attempt id and carries on. */
    assert_int_equal(bft_worker_connect(&w, &d, "w1"), 0);
    json_t *r = bft_worker_heartbeat(&w, attempt);
    assert_true(bft_reply_is(r, "ack"));
    r = bft_worker_metrics(&w, attempt, 2, bft_train_records(20, 5));
    assert_string_equal(bf_wire_type(r), "ack");
    assert_int_equal(json_integer_value(json_object_get(r, "rows")), 20);
    json_decref(r);
    /* The two queued jobs are still there, and the running one is not
     * handed out again. */
    bft_worker other, third;
    assert_int_equal(bft_worker_connect(&other, &d, "w2"), 0);
    assert_int_equal(bft_worker_connect(&third, &d, "w3"), 0);
    int64_t j2, j3;
    assert_true(bft_worker_lease(&other, &j2) > 0);
    assert_true(bft_worker_lease(&third, &j3) > 0);
    assert_true(j2 != job && j3 != job && j2 != j3);
    bft_worker_close(&third);
    assert_int_equal(bft_worker_connect(&third, &d, "w4"), 0);
    r = bft_worker_request_job(&third);
    assert_true(bft_reply_is(r, "no_job"));
    r = bft_worker_done(&w, attempt);
    assert_true(bft_reply_is(r, "ack"));
    bft_worker_close(&third);
    bft_worker_close(&other);
    bft_worker_close(&w);
    assert_int_equal(bft_daemon_stop(&d, SIGTERM), 0);
    assert_int_equal(bft_sql_int(&d, "SELECT count(*) FROM metrics"), 100);
    bft_daemon_cleanup(&d);
}

static void test_sigkill_restart_expires_lease(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start(&d, 1), 0);
    bft_worker w;
    int64_t job, attempt = start_work(&d, &w, &job);

    assert_int_equal(bft_daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    bft_worker_close(&w);
    /* Acked metrics were committed before their ack: a crash keeps them. */
    assert_nothing_lost(&d);

    assert_int_equal(bft_daemon_restart(&d), 0);
    bf_sleep_ms(2000);   /* two lease periods without a heartbeat */
    bft_worker next;
    int found = 0;
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i + 2);
        if (i > 0)
            bft_worker_close(&next);
        assert_int_equal(bft_worker_connect(&next, &d, name), 0);
        json_t *r = bft_worker_request_job(&next);
        assert_string_equal(bf_wire_type(r), "job");
        if (json_integer_value(json_object_get(r, "job_id")) == job) {
            found = 1;
            assert_int_equal(
                json_integer_value(json_object_get(r, "attempt_no")), 2);
        }
        json_decref(r);
    }
    assert_true(found);
    /* The old attempt is dead for good. */
    assert_int_equal(bft_worker_connect(&w, &d, "w1"), 0);
    json_t *r = bft_worker_heartbeat(&w, attempt);
    assert_string_equal(json_string_value(json_object_get(r, "code")),
                        "fenced");
    json_decref(r);
    bft_worker_close(&w);
    bft_worker_close(&next);
    assert_int_equal(bft_daemon_stop(&d, SIGINT), 0);
    assert_nothing_lost(&d);
    bft_daemon_cleanup(&d);
}

/* The daemon commits a lease before it replies, so a reply can be lost
 * with its connection or with the daemon (what a fresh-clone run of
 * test_e2e_prune once hit: a group was told `busy` about a lease it never
 * heard of until it gave up, the job left `running`).  The worker asks
 * again with the same request token, and gets the same lease, renewed; a
 * different token is still `busy`, and the job never runs twice. */
static void test_lost_lease_reply_asked_again(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start(&d, 30), 0);
    assert_true(bft_submit(&d, "three.yaml", sweep_3, NULL, NULL) > 0);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, &d, "w1"), 0);
    json_t *first = bft_worker_ask(&w, "c0ffee-1");   /* the reply "lost" */
    assert_true(bft_reply_is(json_incref(first), "job"));
    bft_worker_close(&w);
    assert_int_equal(bft_daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    assert_int_equal(bft_daemon_restart(&d), 0);

    assert_int_equal(bft_worker_connect(&w, &d, "w1"), 0);
    json_t *r = bft_worker_ask(&w, "c0ffee-1");
    assert_string_equal(bf_wire_type(r), "job");
    const char *same[] = { "job_id", "attempt_id", "attempt_no", "sweep_id" };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        assert_int_equal(json_integer_value(json_object_get(r, same[i])),
                         json_integer_value(json_object_get(first, same[i])));
    assert_true(json_equal(json_object_get(r, "config"),
                           json_object_get(first, "config")));
    int64_t attempt = json_integer_value(json_object_get(r, "attempt_id"));
    json_decref(r);
    r = bft_worker_ask(&w, "c0ffee-2");
    assert_string_equal(json_string_value(json_object_get(r, "code")),
                        "busy");
    json_decref(r);
    assert_true(bft_reply_is(bft_worker_done(&w, attempt), "ack"));
    assert_int_equal(bft_sql_int(&d, "SELECT count(*) FROM attempts"), 1);
    assert_int_equal(bft_sql_int(&d, "SELECT count(*) FROM jobs WHERE "
                                 "attempts = 1 AND status = 'succeeded'"), 1);
    /* a token must be 1 .. 64 letters, digits, '-', '_' or '.' */
    const char *bad[] = { "", "a b", "x\n", "0123456789012345678901234567890"
                          "1234567890123456789012345678901234" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = bft_worker_ask(&w, bad[i]);
        assert_string_equal(json_string_value(json_object_get(r, "code")),
                            "bad_message");
        assert_string_equal(json_string_value(json_object_get(r, "field")),
                            "request");
        json_decref(r);
    }
    json_decref(first);
    bft_worker_close(&w);
    assert_int_equal(bft_daemon_stop(&d, SIGTERM), 0);
    bft_daemon_cleanup(&d);
}

/* A second bifocald on the same database used to start, and both expired
 * leases: now it exits at once, naming the running one. */
static void test_second_daemon_refused(void **state)
{
    (void)state;
    bft_daemon d;
    assert_int_equal(bft_daemon_start(&d, 30), 0);
    char err_path[400];
    snprintf(err_path, sizeof err_path, "%s/second.err", d.dir);
    pid_t pid = fork();
    if (pid == 0) {
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(e, STDERR_FILENO);
        execl(bft_env_path("BIFOCALD"), "bifocald", "--db", d.db, "--listen",
              "127.0.0.1:0", "--token-file", d.token_file, (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    FILE *f = fopen(err_path, "r");
    assert_non_null(f);
    char text[1024] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char running[128];
    snprintf(running, sizeof running, "pid %ld, listening on %s",
             (long)d.pid, d.addr);
    if (!strstr(text, running) || !strstr(text, "in use by another"))
        fail_msg("expected '%s' in: %s", running, text);
    /* The first one is unharmed, and once it stops the database is free. */
    assert_true(bft_serves_status(&d));
    assert_int_equal(bft_daemon_stop(&d, SIGTERM), 0);
    assert_int_equal(bft_daemon_restart(&d), 0);
    assert_true(bft_serves_status(&d));
    assert_int_equal(bft_daemon_stop(&d, SIGTERM), 0);
    bft_daemon_cleanup(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_restart_reclaims_lease),
        cmocka_unit_test(test_sigkill_restart_expires_lease),
        cmocka_unit_test(test_lost_lease_reply_asked_again),
        cmocka_unit_test(test_second_daemon_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
