/* The `bifocal` client binary against a real daemon: output, exit status
 * and error messages of every command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "fake_worker.h"
#include "file.h"
#include "harness.h"

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_submit_status_jobs(void **state)
{
    bft_daemon *d = *state;
    const char *path = bft_write_file(d, "four.yaml",
        "name: four\ngrid:\n  rope: [rope, spectral]\nseeds: 2\n");
    char *out, *err;
    assert_int_equal(bft_run_client(d, &out, &err, "submit", path, NULL), 0);
    assert_string_equal(out, "sweep 1: 4 jobs\n");
    free(out);
    free(err);

    assert_int_equal(bft_run_client(d, &out, &err, "status", NULL), 0);
    assert_non_null(strstr(out, "four"));
    assert_int_equal(count_lines(out), 2);   /* header + one sweep */
    free(out);
    free(err);

    assert_int_equal(bft_run_client(d, &out, &err, "jobs", "--sweep", "1",
                                    "--status", "queued", NULL), 0);
    assert_int_equal(count_lines(out), 5);   /* header + 4 jobs */
    free(out);
    free(err);

    assert_int_equal(bft_run_client(d, &out, &err, "results", "1",
                                    "--format", "csv", NULL), 0);
    assert_int_equal(count_lines(out), 5);
    assert_non_null(strstr(out, "job_id"));
    free(out);
    free(err);

    assert_int_equal(bft_run_client(d, &out, &err, "results", "1",
                                    "--format", "json", NULL), 0);
    json_t *rows = json_loads(out, 0, NULL);
    assert_true(json_is_array(rows));
    assert_int_equal(json_array_size(rows), 4);
    json_decref(rows);
    free(out);
    free(err);
}

static void test_rejected_sweep_names_place(void **state)
{
    bft_daemon *d = *state;
    const char *path = bft_write_file(d, "bad.yaml",
        "name: bad\ngrid:\n  rope: [rope, sideways]\n");
    char *out, *err;
    assert_int_not_equal(bft_run_client(d, &out, &err, "submit", path, NULL),
                         0);
    assert_string_equal(out, "");
    assert_non_null(strstr(err, "bad.yaml:3"));
    assert_non_null(strstr(err, "rope"));
    assert_non_null(strstr(err, "sideways"));
    free(out);
    free(err);
}

static void test_cancel_watch_retry_workers(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_submit(d, "two.yaml",
                     "name: two\ngrid:\n  rope: [rope, spectral]\n", NULL,
                     NULL), 1);
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "gpu-box"), 0);
    int64_t job, attempt = bft_worker_lease(&w, &job);
    assert_true(attempt > 0);

    char *out, *err;
    assert_int_equal(bft_run_client(d, &out, &err, "workers", NULL), 0);
    assert_non_null(strstr(out, "gpu-box"));
    free(out);
    free(err);

    assert_int_equal(bft_run_client(d, &out, &err, "cancel", "1", NULL), 0);
    assert_non_null(strstr(out, "1 running"));
    free(out);
    free(err);
    json_t *push = bft_worker_wait_push(&w, "cancel", 5000);
    assert_non_null(push);
    json_decref(push);
    json_decref(bft_worker_failed(&w, attempt, "cancelled"));

    /* Every job has ended: watch prints the final state and returns. */
    assert_int_equal(bft_run_client(d, &out, &err, "watch", "1", NULL), 0);
    assert_non_null(strstr(out, "2/2 ended"));
    assert_non_null(strstr(out, "cancelled 2"));
    free(out);
    free(err);

    char jobarg[32];
    snprintf(jobarg, sizeof jobarg, "%lld", (long long)job);
    assert_int_equal(bft_run_client(d, &out, &err, "retry", "--job", jobarg,
                                    NULL), 0);
    free(out);
    free(err);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs "
                                    "WHERE status = 'queued'"), 1);
    bft_worker_close(&w);
}

static void test_usage_and_failures(void **state)
{
    bft_daemon *d = *state;
    const char *cmds[] = { "submit", "status", "jobs", "cancel", "retry",
                           "watch", "results", "workers" };
    char *out, *err;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        assert_int_equal(bft_run_client(d, &out, &err, cmds[i], "--help",
                                        NULL), 0);
        assert_non_null(strstr(out, cmds[i]));
        free(out);
        free(err);
    }
    assert_int_equal(bft_run_client(d, &out, &err, "frobnicate", NULL), 2);
    assert_non_null(strstr(err, "unknown command"));
    free(out);
    free(err);
    assert_int_equal(bft_run_client(d, &out, &err, "results", NULL), 2);
    free(out);
    free(err);
    assert_int_not_equal(bft_run_client(d, &out, &err, "status", "12345",
                                        "extra", NULL), 0);
    free(out);
    free(err);

    /* A wrong token is refused with the server's reason. */
    const char *bad = bft_write_file(d, "bad.token",
                                     "00ff00ff00ff00ff00ff00ff00ff00ff\n");
    assert_int_equal(chmod(bad, 0600), 0);
    snprintf(d->token_file, sizeof d->token_file, "%s", bad);
    assert_int_equal(bft_run_client(d, &out, &err, "status", NULL), 1);
    assert_non_null(strstr(err, "wrong token"));
    free(out);
    free(err);
}

/* Runs `timeout 20 $ENV ARGS` with stderr in *err (caller frees); returns
 * the exit status.  The timeout ends a daemon that took bad options for
 * good ones and started serving (exit 124). */
static int run_program(bft_daemon *d, const char *env, const char *args,
                       char **err)
{
    char cmd[2048], path[400];
    snprintf(path, sizeof path, "%s/program.err", d->dir);
    snprintf(cmd, sizeof cmd, "timeout 20 %s %s >/dev/null 2>%s",
             bft_env_path(env), args, path);
    int st = system(cmd);
    bf_error e;
    *err = bf_read_file(path, NULL, &e);
    assert_non_null(*err);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* One option convention (common/args): no prefix matching, and an unknown
 * option is named as such, with the valid ones, in every program. */
static void test_unknown_options_refused(void **state)
{
    bft_daemon *d = *state;
    char *out, *err;
    assert_int_equal(bft_run_client(d, &out, &err, "status", "--verbose",
                                    NULL), 2);
    assert_non_null(strstr(err, "unknown option '--verbose'"));
    assert_non_null(strstr(err, "valid options:"));
    assert_null(strstr(err, "SWEEP must be"));
    assert_string_equal(out, "");
    free(out);
    free(err);
    /* getopt_long took "--form" for "--format". */
    assert_int_equal(bft_run_client(d, &out, &err, "results", "1", "--form",
                                    "csv", NULL), 2);
    assert_non_null(strstr(err, "unknown option '--form'"));
    assert_non_null(strstr(err, "--format table|csv|json"));
    free(out);
    free(err);

    /* getopt_long took "--port 9" for "--port-file 9" and served on the
     * default address. */
    char args[1024];
    snprintf(args, sizeof args, "--db %s/other.db --listen 127.0.0.1:0 "
             "--port 9", d->dir);
    assert_int_equal(run_program(d, "BIFOCALD", args, &err), 2);
    assert_non_null(strstr(err, "bifocald: unknown option '--port'"));
    assert_non_null(strstr(err, "--port-file FILE"));
    free(err);
    assert_int_equal(run_program(d, "BIFOCALD", "--lease-seconds=0", &err),
                     2);
    assert_non_null(strstr(err, "--lease-seconds"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        BFT_DAEMON_TEST(test_submit_status_jobs),
        BFT_DAEMON_TEST(test_rejected_sweep_names_place),
        BFT_DAEMON_TEST(test_cancel_watch_retry_workers),
        BFT_DAEMON_TEST(test_usage_and_failures),
        BFT_DAEMON_TEST(test_unknown_options_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
