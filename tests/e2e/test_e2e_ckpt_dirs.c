/* Checkpoint directories end to end, with real mpirun groups: two
 * databases whose groups share one --checkpoint-dir keep their checkpoints
 * apart (a staged sweep of the first starts from its own weights, not the
 * second's job of the same id, issue 15); a stage source's checkpoint that
 * is another job's fails the dependent for good with both owners named;
 * a job over the group's --memory-budget fails for good with the figures
 * instead of taking the group down. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e.h"

#define SMALL "d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40, " \
              "batch_size: 8, warmup_steps: 0, log_every: 1, "       \
              "eval_every: 0, freq_every: 0, steps: 20"

/* Study A: a first stage and a second that starts from it, one job each
 * (jobs 1 and 2).  Study B: one job of the first stage's shape (job 1),
 * told apart by eval_examples. */
static const char study_a[] =
    "name: a\n"
    "max_attempts: 1\n"
    "base: {" SMALL ", eval_examples: 16}\n"
    "stages:\n"
    "  - name: first\n"
    "  - name: second\n"
    "    base: {init_from: \"stage:first\", steps: 10}\n";
static const char study_b[] =
    "name: b\n"
    "base: {" SMALL ", eval_examples: 24, lr: 0.01}\n";

static bft_daemon second_daemon;

static void submit(bft_daemon *d, const char *yaml)
{
    json_t *error = NULL;
    if (bft_submit(d, "s.yaml", yaml, NULL, &error) < 0)
        fail_msg("submit: %s", json_dumps(error, 0));
}

/* One group of one rank that runs at most max_jobs jobs. */
static void run_jobs(bft_daemon *d, const char *tag, const char *max_jobs)
{
    pid_t g = e2e_group_start(d, 1, tag, "--exit-when-idle", "--idle-grace",
                              "0", "--max-jobs", max_jobs, NULL);
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 120000), 0);
}

/* Whether the file at path holds text (the checkpoint's header does). */
static int file_contains(const char *path, const char *text)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    return memmem(buf, n, text, strlen(text)) != NULL;
}

/* A runs its first stage, then B its job 1 into the same directory (B's
 * DIR/ck is a link to A's), then A its second stage. */
static void run_interleaved(bft_daemon *a, bft_daemon *b)
{
    assert_int_equal(bft_daemon_start(a, 10), 0);
    assert_int_equal(bft_daemon_start(b, 10), 0);
    char a_ck[400], b_ck[400];
    snprintf(a_ck, sizeof a_ck, "%s/ck", a->dir);
    snprintf(b_ck, sizeof b_ck, "%s/ck", b->dir);
    assert_int_equal(mkdir(a_ck, 0777), 0);
    assert_int_equal(symlink(a_ck, b_ck), 0);
    submit(a, study_a);
    submit(b, study_b);
    run_jobs(a, "a1", "1");
    assert_int_equal(bft_sql_int(a, "SELECT count(*) FROM jobs WHERE job_id "
                                 "= 1 AND status = 'succeeded'"), 1);
    run_jobs(b, "b1", "1");
    assert_int_equal(bft_sql_int(b, "SELECT count(*) FROM jobs WHERE job_id "
                                 "= 1 AND status = 'succeeded'"), 1);
}

/* The checkpoint paths A's and B's job 1 recorded. */
static void job_1_checkpoints(const bft_daemon *a, const bft_daemon *b,
                              char *a_path, char *b_path, size_t cap)
{
    const char *sql = "SELECT checkpoint_path FROM jobs WHERE job_id = 1";
    e2e_sql_text(a, sql, a_path, cap);
    e2e_sql_text(b, sql, b_path, cap);
}

static void test_two_databases_share_a_directory(void **state)
{
    bft_daemon *a = *state, *b = &second_daemon;
    run_interleaved(a, b);
    run_jobs(a, "a2", "1");
    char a_path[1200], b_path[1200], init[1200];
    job_1_checkpoints(a, b, a_path, b_path, sizeof a_path);
    e2e_sql_text(a, "SELECT init_from FROM jobs WHERE job_id = 2", init,
                 sizeof init);
    print_message("A's job 1: %s\nB's job 1: %s\n", a_path, b_path);
    assert_string_not_equal(a_path, b_path);
    assert_string_equal(init, a_path);
    /* The file A's second stage started from is still A's job 1's. */
    assert_true(file_contains(init, "\\\"eval_examples\\\":16"));
    assert_false(file_contains(init, "\\\"eval_examples\\\":24"));
    assert_int_equal(bft_sql_int(a, "SELECT count(*) FROM jobs WHERE job_id "
                                 "= 2 AND status = 'succeeded'"), 1);
    /* Each path is under its database's id, and the file says so. */
    assert_int_equal(bft_sql_int(a, "SELECT count(*) FROM jobs, "
                                 "database_identity WHERE job_id = 1 AND "
                                 "checkpoint_path LIKE '%/db-' || database_id "
                                 "|| '/job-1/step-000020.safetensors'"), 1);
    char id[32], meta[64];
    e2e_sql_text(a, "SELECT database_id FROM database_identity", id, sizeof id);
    snprintf(meta, sizeof meta, "\"database_id\":\"%s\"", id);
    assert_true(file_contains(init, meta));
    bft_daemon_cleanup(b);
}

/* B's checkpoint of its job 1 where A's job 1's should be (as an older
 * worker sharing the directory would have left it): A's second stage
 * fails on its first attempt, naming both owners, and trains nothing. */
static void test_foreign_source_fails_the_job(void **state)
{
    bft_daemon *a = *state, *b = &second_daemon;
    run_interleaved(a, b);
    char a_path[1200], b_path[1200], cmd[2600];
    job_1_checkpoints(a, b, a_path, b_path, sizeof a_path);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", b_path, a_path);
    assert_int_equal(system(cmd), 0);
    run_jobs(a, "a2", "1");
    char error[2000], b_id[32], want[200];
    e2e_sql_text(a, "SELECT error FROM jobs WHERE job_id = 2", error,
                 sizeof error);
    e2e_sql_text(b, "SELECT database_id FROM database_identity", b_id,
                 sizeof b_id);
    print_message("job 2: %s\n", error);
    snprintf(want, sizeof want, "belongs to job 1 of database %s, not to "
             "job 1 of database", b_id);
    assert_non_null(strstr(error, want));
    assert_int_equal(bft_sql_int(a, "SELECT count(*) FROM jobs WHERE job_id "
                                 "= 2 AND status = 'failed' AND attempts = 1"),
                     1);
    assert_int_equal(bft_sql_int(a, "SELECT count(*) FROM metrics WHERE "
                                 "job_id = 2"), 0);
    bft_daemon_cleanup(b);
}

/* A group whose ranks may allocate 1 MiB: the job fails on its first of
 * 3 attempts with the figures, and the group lives on (exit 0). */
static void test_memory_budget_fails_the_job(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    submit(d, "name: big\nmax_attempts: 3\nbase: {" SMALL "}\n");
    pid_t g = e2e_group_start(d, 2, "group", "--exit-when-idle",
                              "--idle-grace", "0", "--memory-budget", "1",
                              NULL);
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 120000), 0);
    char error[2000];
    e2e_sql_text(d, "SELECT error FROM jobs WHERE job_id = 1", error,
                 sizeof error);
    print_message("job 1: %s\n", error);
    assert_non_null(strstr(error, "the job needs "));
    assert_non_null(strstr(error, "over the worker's memory budget per rank "
                                  "(--memory-budget) of 1048576 bytes"));
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE job_id "
                                 "= 1 AND status = 'failed' AND attempts = 1"),
                     1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_databases_share_a_directory,
                                        e2e_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(test_foreign_source_fails_the_job,
                                        e2e_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(test_memory_budget_fails_the_job,
                                        e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
