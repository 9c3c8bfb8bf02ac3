/* `bifocal cancel SWEEP` on a running sweep: the running job stops within
 * a few seconds and, like the queued one, ends cancelled; the group then
 * asks for the next job and trains it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "e2e.h"

/* Far more steps than the test waits for: only a cancel ends it. */
static const char long_sweep[] =
    "name: endless\n"
    "base: {d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40,\n"
    "       batch_size: 8, steps: 1000000, log_every: 10, eval_every: 0,\n"
    "       freq_every: 0, checkpoint_every: 0}\n"
    "seeds: 2\n";
static const char short_sweep[] =
    "name: after\n"
    "base: {d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40,\n"
    "       batch_size: 8, steps: 50, warmup_steps: 5, log_every: 10,\n"
    "       eval_examples: 16}\n";

static void test_cancel_running_sweep(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, 10), 0);
    long long sweep = bft_submit(d, "endless.yaml", long_sweep, NULL, NULL);
    assert_true(sweep > 0);
    pid_t g = e2e_group_start(d, 2, "group", "--exit-when-idle",
                             "--idle-grace", "0", NULL);
    assert_true(g > 0);
    /* Running, and streaming. */
    assert_true(e2e_wait_sql(d, "SELECT count(*) FROM metrics WHERE "
                             "key = 'loss'", 3, 60000) >= 3);
    long long after = bft_submit(d, "after.yaml", short_sweep, NULL, NULL);
    assert_true(after > 0);

    char id[32], *out = NULL;
    snprintf(id, sizeof id, "%lld", sweep);
    assert_int_equal(bft_run_client(d, &out, NULL, "cancel", id, NULL), 0);
    free(out);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE sweep_id = "
             "%lld AND status = 'cancelled'", sweep);
    /* The running job stops after its current step; the wait only guards
     * against a hang. */
    assert_int_equal(e2e_wait_sql(d, sql, 2, 60000), 2);
    assert_int_equal(bft_sql_int(d, "SELECT count(*) FROM attempts WHERE "
                                 "outcome = 'cancelled'"), 1);

    /* The group moved on to the next sweep's job, then found nothing. */
    assert_int_equal(e2e_group_wait(g, 60000), 0);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM jobs WHERE sweep_id = "
             "%lld AND status = 'succeeded'", after);
    assert_int_equal(bft_sql_int(d, sql), 1);
    assert_true(e2e_log_contains(d, "group", "cancelled"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cancel_running_sweep, e2e_setup,
                                        e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
