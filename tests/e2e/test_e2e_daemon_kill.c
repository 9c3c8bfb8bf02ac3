/* kill -9 of the coordinator in the middle of a sweep, then a restart on
 * the same database and port: the group reconnects by itself, re-sends
 * whatever was not acknowledged, and every job finishes with every metric
 * stored exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>

#include "clock.h"
#include "e2e.h"

#define JOBS 3
#define STEPS 300
#define EVAL_EVERY 100
#define FREQ_EVERY 50

static const char sweep_fmt[] =
    "name: restart\n"
    "base: {d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40,\n"
    "       batch_size: 16, steps: %d, warmup_steps: 10, rope: bifocal,\n"
    "       log_every: 1, eval_every: %d, freq_every: %d,\n"
    "       checkpoint_every: 100, eval_examples: 16}\n"
    "seeds: %d\n";

static long long sql1(bft_daemon *d, const char *sql)
{
    return bft_sql_int(d, sql);
}

static void test_kill_coordinator(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    char yaml[512];
    snprintf(yaml, sizeof yaml, sweep_fmt, STEPS, EVAL_EVERY, FREQ_EVERY,
             JOBS);
    int n_jobs = 0;
    assert_true(bft_submit(d, "restart.yaml", yaml, &n_jobs, NULL) > 0);
    assert_int_equal(n_jobs, JOBS);

    pid_t g = e2e_group_start(d, 1, "group", "--exit-when-idle",
                             "--idle-grace", "0", NULL);
    assert_true(g > 0);
    /* Into the second job: one done, one half-streamed. */
    assert_true(e2e_wait_sql(d, "SELECT count(*) FROM metrics WHERE "
                             "key = 'loss'", STEPS + 50, 60000) >= STEPS + 50);
    assert_true(bft_daemon_stop(d, SIGKILL) == 128 + SIGKILL);
    bf_sleep_ms(1000);   /* the group keeps training meanwhile */
    assert_int_equal(bft_daemon_restart_same_port(d), 0);

    assert_int_equal(e2e_group_wait(g, 120000), 0);
    assert_int_equal(sql1(d, "SELECT count(*) FROM jobs WHERE status = "
                          "'succeeded'"), JOBS);
    assert_true(e2e_log_contains(d, "group", "lost the coordinator"));
    /* No metric lost, none twice (keys are unique: counts say no gaps). */
    assert_int_equal(sql1(d, "SELECT count(*) FROM metrics WHERE key = "
                          "'loss'"), JOBS * STEPS);
    assert_int_equal(sql1(d, "SELECT count(*) FROM (SELECT job_id, step "
                          "FROM metrics WHERE key = 'loss' GROUP BY job_id, "
                          "step)"), JOBS * STEPS);
    assert_int_equal(sql1(d, "SELECT count(*) FROM evals"),
                     JOBS * 2 * e2e_scheduled(STEPS, EVAL_EVERY));
    long long heads = sql1(d, "SELECT 2 * learnable_heads FROM jobs "
                           "LIMIT 1");   /* 2 layers */
    assert_true(heads > 0);
    /* d_head 8: 4 pairs per head; learnable heads on schedule, every head
     * (8 in 2 layers) at step 0 and at the last step. */
    long long freq_rows = sql1(d, "SELECT count(*) FROM frequencies");
    assert_int_equal(freq_rows,
                     JOBS * (heads * 4 * (e2e_scheduled(STEPS, FREQ_EVERY) - 1)
                             + 8 * 4 * 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill_coordinator, e2e_setup,
                                        e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
