/* --exit-when-idle waits --idle-grace seconds without a job before the
 * group exits: a group started before its sweep is submitted (a Slurm job
 * that starts first) takes the sweep's jobs instead of exiting at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>

#include "clock.h"
#include "e2e.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_waits_for_a_late_sweep,
                                        e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
