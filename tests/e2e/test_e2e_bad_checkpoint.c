/* A recorded checkpoint that cannot be loaded (truncated) is marked bad and
 * the job falls back to its previous good checkpoint.  It used to fail
 * every later attempt with "data_offsets ... out of range", for good. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"
#include "fake_worker.h"

#define JOB_FIELDS "d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40, " \
                   "batch_size: 8, steps: 30, warmup_steps: 0, log_every: 1, " \
                   "eval_every: 0, freq_every: 0, checkpoint_every: 10"

/* Trains the job standalone into dir: step-000010, -20 and -30 there. */
static void train_standalone(bft_daemon *d, const char *dir)
{
    const char *job = bft_write_file(d, "job.yaml", "{" JOB_FIELDS "}\n");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' train --job '%s' --checkpoint-dir '%s' "
             "> /dev/null", bft_env_path("BIFOCAL_WORKER"), job, dir);
    assert_int_equal(system(cmd), 0);
}

static void test_bad_checkpoint_falls_back(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    assert_true(bft_submit(d, "s.yaml", "name: s\nmax_attempts: 3\nbase: {"
                           JOB_FIELDS "}\n", NULL, NULL) > 0);
    /* Where the group keeps the job's checkpoints: its database's own
     * folder of the checkpoint directory (docs/checkpoints.md). */
    char root[400], db_dir[480], dir[500], bad[540], good[540], id[32];
    e2e_sql_text(d, "SELECT database_id FROM database_identity", id,
                 sizeof id);
    assert_true(id[0] != '\0');
    snprintf(root, sizeof root, "%s/ck", d->dir);
    snprintf(db_dir, sizeof db_dir, "%s/db-%s", root, id);
    snprintf(dir, sizeof dir, "%s/job-1", db_dir);
    assert_int_equal(mkdir(root, 0777), 0);
    assert_int_equal(mkdir(db_dir, 0777), 0);
    train_standalone(d, dir);
    snprintf(bad, sizeof bad, "%s/step-000020.safetensors", dir);
    snprintf(good, sizeof good, "%s/step-000010.safetensors", dir);
    assert_int_equal(truncate(bad, 1000), 0);

    /* An attempt recorded the (now truncated) step-20 checkpoint, then
     * failed: the job is queued again with it as its resume point. */
    bft_worker w;
    assert_int_equal(bft_worker_connect(&w, d, "first"), 0);
    int64_t attempt = bft_worker_lease(&w, NULL);
    assert_true(attempt > 0);
    assert_true(bft_reply_is(bft_worker_checkpoint(&w, attempt, bad, 20),
                             "ack"));
    assert_true(bft_reply_is(bft_worker_failed(&w, attempt, "lost"), "ack"));
    bft_worker_close(&w);

    pid_t g = e2e_group_start(d, 1, "group", "--exit-when-idle",
                              "--idle-grace", "0", NULL);
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 120000), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                 "status = 'succeeded'"), 1);
    /* Resumed at step 10: it trained steps 11..30 only. */
    assert_int_equal(bft_sql_int(d, "SELECT min(step) FROM metrics WHERE "
                                 "key = 'loss'"), 11);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics WHERE "
                                 "key = 'loss'"), 20);
    assert_true(e2e_log_contains(d, "group", "cannot be loaded"));
    assert_true(e2e_log_contains(d, "group", "falling back to the older "
                                 "checkpoint"));
    char renamed[560];
    snprintf(renamed, sizeof renamed, "%s.bad", bad);
    assert_int_equal(access(renamed, F_OK), 0);
    assert_int_equal(bft_sql_int(d, "SELECT checkpoint_step FROM jobs"), 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_checkpoint_falls_back,
                                        e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
