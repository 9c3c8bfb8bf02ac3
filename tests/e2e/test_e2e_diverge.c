/* A job that diverges (lr 10, a huge freq_lr_mult) ends `failed` with
 * "diverged at step N" and keeps every row up to step N.  It used to end
 * `succeeded` with no metric, eval or frequency row at all: the worker sent
 * its non-finite loss as null, the daemon rejected the whole batch and the
 * worker dropped it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

static const char diverging_sweep[] =
    "name: diverge\n"
    "max_attempts: 1\n"
    "base: {d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40,\n"
    "       batch_size: 8, steps: 200, warmup_steps: 0, lr: 10,\n"
    "       freq_lr_mult: 1000000, rope: spectral, log_every: 1,\n"
    "       eval_every: 0, freq_every: 1, checkpoint_every: 0}\n";

static void test_diverged_job_fails_keeping_rows(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    assert_true(bft_submit(d, "diverge.yaml", diverging_sweep, NULL, NULL) > 0);
    pid_t g = e2e_group_start(d, 1, "group", "--exit-when-idle",
                              "--idle-grace", "0", NULL);
    assert_true(g > 0);
    assert_int_equal(e2e_group_wait(g, 120000), 0);

    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM jobs WHERE "
                                 "status = 'failed'"), 1);
    /* N is the last step with a loss row, the one whose loss is NaN. */
    long long n = bft_sql_int(d, "SELECT max(step) FROM metrics "
                                 "WHERE key = 'loss'");
    assert_true(n >= 1 && n < 200);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE error = "
             "'diverged at step %lld'", n);
    assert_int_equal(bft_sql_int(d, sql), 1);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM attempts WHERE "
                                 "outcome = 'failed' AND error LIKE "
                                 "'diverged at step %'"), 1);
    /* Every step's loss and lr up to N, the last one non-finite. */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics WHERE "
                                 "key = 'loss'"), n);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM metrics WHERE "
                                 "key = 'lr'"), n);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM metrics WHERE key = "
             "'loss' AND step = %lld AND (value IS NULL OR abs(value) > "
             "1e308)", n);
    assert_int_equal(bft_sql_int(d, sql), 1);
    /* The step-0 frequencies (2 layers x 4 heads x 4 pairs, d_head 8)
     * and those of every step before N. */
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM frequencies "
                                 "WHERE step = 0"), 2 * 4 * 4);
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT step) FROM frequencies "
             "WHERE step < %lld", n);
    assert_int_equal(bft_sql_int(d, sql), n);
    assert_true(e2e_log_contains(d, "group", "diverged at step"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_diverged_job_fails_keeping_rows,
                                        e2e_setup, e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
