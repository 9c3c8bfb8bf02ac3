/* Fault injection on the real daemon: its file-size limit (RLIMIT_FSIZE,
 * set from outside with prlimit) drops to one byte, so every write SQLite
 * makes to the WAL fails (EFBIG: bifocald ignores SIGXFSZ itself; this
 * process restores its default so the daemon inherits nothing) and the flush of a metrics batch fails.  The daemon must not ack
 * that batch (it answers `store`, which workers retry), must stay up, must
 * not leave the batch half-written, and once the limit is lifted the
 * worker's resend is stored exactly once and every other call works.
 * Every store failure carries its cause into the reply and the log. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "clock.h"
#include "fake_worker.h"
#include "file.h"
#include "harness.h"

static void set_fsize(bft_daemon *d, rlim_t soft)
{
    struct rlimit old, lim;
    assert_int_equal(prlimit(d->pid, RLIMIT_FSIZE, NULL, &old), 0);
    lim.rlim_cur = soft;
    lim.rlim_max = old.rlim_max;
    assert_int_equal(prlimit(d->pid, RLIMIT_FSIZE, &lim, NULL), 0);
}

/* Committed state, as any other reader sees it. */
static sqlite3_int64 q_int(bft_daemon *d, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open_v2(d->db, &db, SQLITE_OPEN_READWRITE, NULL),
                     SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    sqlite3_int64 v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static const char *code_of(const json_t *m)
{
    const char *c = json_string_value(json_object_get(m, "code"));
    return c ? c : "";
}

/* Submits a two-job sweep and leases a job to a new worker "w"; returns
 * the attempt. */
static int64_t lease_to_new_worker(bft_daemon *d, bft_worker *w, int64_t *job)
{
    assert_true(bft_submit(d, "s.yaml", "name: s\nbase: {steps: 100, depth: 2,"
                           " eval_depths: [2]}\nseeds: 2\n", NULL, NULL) > 0);
    assert_int_equal(bft_worker_connect(w, d, "w"), 0);
    int64_t attempt = bft_worker_lease(w, job);
    assert_true(attempt > 0);
    return attempt;
}

static void test_failed_flush_not_acked(void **state)
{
    bft_daemon *d = *state;
    bft_worker w;
    int64_t job = 0, attempt = lease_to_new_worker(d, &w, &job);
    json_t *r = bft_worker_metrics(&w, attempt, 1, bft_train_records(1, 5));
    assert_true(bft_reply_is(r, "ack"));

    set_fsize(d, 1);
    json_t *big = bft_train_records(100, 500);
    r = bft_worker_metrics(&w, attempt, 2, json_incref(big));
    assert_non_null(r);
    print_message("metrics under the fault: %s %s\n", bf_wire_type(r),
                  json_string_value(json_object_get(r, "message")));
    assert_string_equal(bf_wire_type(r), "error");
    assert_string_equal(code_of(r), "store");   /* retried, not dropped */
    json_decref(r);
    /* Still up, nothing of the failed batch visible. */
    int status;
    assert_int_equal(waitpid(d->pid, &status, WNOHANG), 0);
    assert_int_equal(q_int(d, "SELECT count(*) FROM metrics"), 20);

    set_fsize(d, RLIM_INFINITY);
    /* The worker's resend: stored once; a second resend adds nothing. */
    r = bft_worker_metrics(&w, attempt, 2, json_incref(big));
    assert_string_equal(bf_wire_type(r), "ack");
    assert_int_equal(json_integer_value(json_object_get(r, "rows")), 2000);
    json_decref(r);
    r = bft_worker_metrics(&w, attempt, 2, json_incref(big));
    assert_string_equal(bf_wire_type(r), "ack");
    assert_int_equal(json_integer_value(json_object_get(r, "rows")), 0);
    json_decref(r);
    json_decref(big);
    /* Everything else works again: heartbeat, finishing, the next lease. */
    r = bft_worker_heartbeat(&w, attempt);
    assert_true(bft_reply_is(r, "ack"));
    r = bft_worker_done(&w, attempt);
    assert_true(bft_reply_is(r, "ack"));
    int64_t next = bft_worker_lease(&w, NULL);
    assert_true(next > attempt);
    bft_worker_close(&w);

    assert_int_equal(q_int(d, "SELECT count(*) FROM metrics"), 2020);
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT step) FROM metrics"
             " WHERE job_id = %lld", (long long)job);
    assert_int_equal(q_int(d, sql), 505);
    assert_int_equal(q_int(d, "SELECT count(*) FROM (SELECT job_id FROM"
                              " attempts WHERE outcome = 'running'"
                              " GROUP BY job_id HAVING count(*) > 1)"), 0);
}

/* A fault while several batches wait in one transaction: none of them is
 * acked, and all of them are stored once after the resend. */
static void test_fault_across_workers(void **state)
{
    bft_daemon *d = *state;
    assert_true(bft_submit(d, "s.yaml", "name: s\nbase: {steps: 100, depth: 2,"
                           " eval_depths: [2]}\nseeds: 3\n", NULL, NULL) > 0);
    bft_worker w[3];
    int64_t att[3];
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", i);
        assert_int_equal(bft_worker_connect(&w[i], d, name), 0);
        att[i] = bft_worker_lease(&w[i], NULL);
        assert_true(att[i] > 0);
    }
    set_fsize(d, 1);
    /* Pipelined: all three sent before any reply is read, so they may land
     * in one pass (one transaction) or several. */
    for (int i = 0; i < 3; i++) {
        json_t *m = json_pack("{s:s, s:I, s:i, s:o, s:I}", "type", "metrics",
                              "attempt_id", (json_int_t)att[i], "seq", 1,
                              "records", bft_train_records(1, 100), "id",
                              (json_int_t)(100 + i));
        assert_int_equal(bf_rpc_send(&w[i].conn, m, NULL), 0);
        json_decref(m);
    }
    for (int i = 0; i < 3; i++) {
        bf_error err;
        json_t *r = bf_rpc_recv(&w[i].conn, 5000, &err);
        assert_non_null(r);
        assert_string_equal(bf_wire_type(r), "error");
        assert_string_equal(code_of(r), "store");
        json_decref(r);
    }
    assert_int_equal(q_int(d, "SELECT count(*) FROM metrics"), 0);
    set_fsize(d, RLIM_INFINITY);
    for (int i = 0; i < 3; i++) {
        json_t *r = bft_worker_metrics(&w[i], att[i], 1, bft_train_records(1, 100));
        assert_string_equal(bf_wire_type(r), "ack");
        assert_int_equal(json_integer_value(json_object_get(r, "rows")), 400);
        json_decref(r);
        bft_worker_close(&w[i]);
    }
    assert_int_equal(q_int(d, "SELECT count(*) FROM metrics"), 1200);
}

/* A store failure reaches the worker with its cause (SQLite's message and
 * result code), not just "failed in the store". */
static void test_store_reply_has_its_cause(void **state)
{
    bft_daemon *d = *state;
    bft_worker w;
    int64_t attempt = lease_to_new_worker(d, &w, NULL);
    set_fsize(d, 1);
    json_t *r = bft_worker_heartbeat(&w, attempt);
    assert_non_null(r);
    const char *msg = json_string_value(json_object_get(r, "message"));
    print_message("heartbeat under the fault: %s\n", msg);
    assert_string_equal(code_of(r), "store");
    assert_non_null(strstr(msg, "heartbeat failed in the store: "));
    assert_non_null(strstr(msg, "COMMIT: disk I/O error (SQLite error "));
    json_decref(r);
    set_fsize(d, RLIM_INFINITY);
    r = bft_worker_heartbeat(&w, attempt);
    assert_true(bft_reply_is(r, "ack"));
    bft_worker_close(&w);
}

/* The same for the daemon's own store calls, which only the log sees: a
 * lease-expiry pass that cannot get the write lock (another process holds
 * it past the busy timeout) logs why.  The log is a file, so this fault is a
 * lock rather than the file-size limit. */
static void test_store_log_has_its_cause(void **state)
{
    bft_daemon *d = *state;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(d->db, &db, SQLITE_OPEN_READWRITE, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                     SQLITE_OK);
    char *line = NULL;
    for (int waited = 0; !line && waited < 20000; waited += 200) {
        bf_sleep_ms(200);
        char *log = bf_read_file(d->log, NULL, NULL);
        assert_non_null(log);
        const char *at = strstr(log, "lease expiry failed: ");
        if (at)
            line = strndup(at, strcspn(at, "\n"));
        free(log);
    }
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    assert_non_null(line);
    print_message("%s\n", line);
    assert_non_null(strstr(line, "database is locked (SQLite error 5)"));
    free(line);
    assert_true(bft_serves_status(d));
}

/* A submission the disk cannot take is a storage failure (`store`, with
 * the cause), not a bad sweep: it used to be answered `invalid`. */
static void test_submit_on_full_disk_is_store(void **state)
{
    bft_daemon *d = *state;
    set_fsize(d, 1);
    json_t *error = NULL;
    assert_int_equal(bft_submit(d, "s.yaml", "name: s\nseeds: 3\n", NULL,
                                &error), -1);
    assert_non_null(error);
    print_message("submit under the fault: %s\n",
                  json_string_value(json_object_get(error, "message")));
    assert_string_equal(code_of(error), "store");
    json_decref(error);
    set_fsize(d, RLIM_INFINITY);
    assert_true(bft_submit(d, "s.yaml", "name: s\nseeds: 3\n", NULL,
                           NULL) > 0);
    assert_int_equal(q_int(d, "SELECT count(*) FROM jobs"), 3);
}

int main(void)
{
    /* The default action (kill) is what bifocald inherits: it must ignore
     * SIGXFSZ on its own so that a write past the limit fails with EFBIG
     * (a store error) instead of killing it without a log line. */
    signal(SIGXFSZ, SIG_DFL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_failed_flush_not_acked,
                                        bft_daemon_setup, bft_daemon_teardown),
        cmocka_unit_test_setup_teardown(test_fault_across_workers,
                                        bft_daemon_setup, bft_daemon_teardown),
        cmocka_unit_test_setup_teardown(test_store_reply_has_its_cause,
                                        bft_daemon_setup, bft_daemon_teardown),
        cmocka_unit_test_setup_teardown(test_store_log_has_its_cause,
                                        bft_daemon_setup, bft_daemon_teardown),
        cmocka_unit_test_setup_teardown(test_submit_on_full_disk_is_store,
                                        bft_daemon_setup, bft_daemon_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
