/* --exit-when-idle waits --idle-grace seconds without a job before the
 * group exits: a group started before its sweep is submitted (a Slurm job
 * that starts first) takes the sweep's jobs instead of exiting at once.
 * And while a job waits on one running elsewhere (a later stage's on its
 * source) the group stays whatever its grace, and takes the work once it
 * comes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "clock.h"
#include "e2e.h"
#include "fake_worker.h"

#define GRACE_S "4"

static const char sweep[] =
    "name: late\n"
    "base: {d_model: 16, n_layers: 1, n_heads: 2, seq_len: 24,\n"
    "       batch_size: 8, steps: 20, warmup_steps: 2, depth: 2,\n"
    "       eval_depths: [2], log_every: 10, eval_every: 0,\n"
    "       freq_every: 0, eval_examples: 8}\n";

static void test_group_waits_for_a_late_sweep(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    pid_t g = e2e_group_start(d, 1, "early", "--exit-when-idle",
                              "--idle-grace", GRACE_S, NULL);
    assert_true(g > 0);
    /* The group has connected and been told "no job" before the submit. */
    assert_int_equal(e2e_wait_sql(d, "SELECT count(*) FROM workers", 1,
                                  30000), 1);
    bf_sleep_ms(1500);
    assert_int_equal(kill(g, 0), 0);
    assert_true(bft_submit(d, "late.yaml", sweep, NULL, NULL) > 0);
    assert_int_equal(e2e_group_wait(g, 60000), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                    "status = 'succeeded'"), 1);
    assert_true(e2e_log_contains(d, "early", "no job for " GRACE_S " s"));
}

static const char two_stages[] =
    "name: staged\n"
    "base: {d_model: 16, n_layers: 1, n_heads: 2, seq_len: 24,\n"
    "       batch_size: 8, warmup_steps: 2, depth: 2, eval_depths: [2],\n"
    "       log_every: 10, eval_every: 0, freq_every: 0, eval_examples: 8}\n"
    "stages:\n"
    "  - {name: first, base: {steps: 20}}\n"
    "  - {name: second, base: {init_from: \"stage:first\", steps: 10}}\n";

/* Polls the group's log for text while the holder keeps its lease;
 * whether it appeared within timeout_ms. */
static int log_while_holding(bft_daemon *d, const char *tag, const char *text,
                             bft_worker *holder, int64_t attempt,
                             int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 200) {
        if (e2e_log_contains(d, tag, text))
            return 1;
        json_decref(bft_worker_heartbeat(holder, attempt));
        bf_sleep_ms(200);
    }
    return e2e_log_contains(d, tag, text);
}

static void test_group_stays_while_work_is_pending(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 30), 0);
    assert_true(bft_submit(d, "staged.yaml", two_stages, NULL, NULL) > 0);
    /* the first stage's job runs elsewhere: a worker holding its lease */
    bft_worker holder;
    assert_int_equal(bft_worker_connect(&holder, d, "holder"), 0);
    int64_t job = 0, attempt = bft_worker_lease(&holder, &job);
    assert_true(attempt > 0);
    assert_int_equal(job, 1);

    /* grace 0 exits at the first no_job without work pending */
    pid_t g = e2e_group_start(d, 1, "stayer", "--exit-when-idle",
                              "--idle-grace", "0", NULL);
    assert_true(g > 0);
    assert_true(log_while_holding(d, "stayer", "jobs wait on jobs running: "
                                  "staying", &holder, attempt, 60000));
    assert_int_equal(kill(g, 0), 0);

    /* the holder gives the job back; the group trains both stages */
    json_decref(bft_worker_failed(&holder, attempt, "handed back"));
    bft_worker_close(&holder);
    assert_int_equal(e2e_group_wait(g, 150000), 0);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                    "status = 'succeeded'"), 2);
    assert_true(e2e_log_contains(d, "stayer", "no job for 0 s"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_waits_for_a_late_sweep,
                                        e2e_setup, e2e_teardown),
        cmocka_unit_test_setup_teardown(
            test_group_stays_while_work_is_pending, e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
