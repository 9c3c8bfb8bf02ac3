/* kill -9 of a worker group in the middle of a job: after the lease
 * expires the job goes to another group, which resumes from the last
 * checkpoint the coordinator recorded.  In the end every step's metrics are
 * stored exactly once and match, step for step, an uninterrupted run of
 * the same job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "e2e.h"

#define STEPS 400
#define CHECKPOINT_EVERY 100
#define EVAL_EVERY 100
#define FREQ_EVERY 50
#define LEASE_SECONDS 2

static const char sweep_fmt[] =
    "name: %s\n"
    "base: {d_model: 32, n_layers: 2, n_heads: 4, seq_len: 40,\n"
    "       batch_size: 16, steps: %d, warmup_steps: 10, rope: bifocal,\n"
    "       log_every: 1, eval_every: %d, freq_every: %d,\n"
    "       checkpoint_every: %d, eval_examples: 16}\n";

static long long submit(bft_daemon *d, const char *name)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, sweep_fmt, name, STEPS, EVAL_EVERY,
             FREQ_EVERY, CHECKPOINT_EVERY);
    long long sweep = bft_submit(d, "kill.yaml", yaml, NULL, NULL);
    assert_true(sweep > 0);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT job_id FROM jobs WHERE sweep_id = %lld",
             sweep);
    return bft_sql_int(d, sql);
}

static long long count(bft_daemon *d, const char *fmt, long long job)
{
    char sql[512];
    snprintf(sql, sizeof sql, fmt, job);
    return bft_sql_int(d, sql);
}

static void test_kill_worker_group(void **state)
{
    bft_daemon *d = *state;
    assert_int_equal(bft_daemon_start(d, LEASE_SECONDS), 0);
    long long job = submit(d, "interrupted");

    pid_t a = e2e_group_start(d, 2, "group-a", NULL);
    assert_true(a > 0);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT coalesce(max(checkpoint_step), 0) FROM "
             "jobs WHERE job_id = %lld", job);
    assert_true(e2e_wait_sql(d, sql, CHECKPOINT_EVERY, 60000) >=
                CHECKPOINT_EVERY);
    e2e_group_kill(a);
    long long at_kill = count(d, "SELECT coalesce(max(checkpoint_step), 0) "
                              "FROM jobs WHERE job_id = %lld", job);
    assert_true(at_kill < STEPS);   /* it really was in the middle */

    /* A second group waits for the lease to expire, then takes the job. */
    pid_t b = e2e_group_start(d, 2, "group-b", "--max-jobs", "1", NULL);
    assert_true(b > 0);
    assert_int_equal(e2e_group_wait(b, 90000), 0);
    assert_true(e2e_log_contains(d, "group-b", "resuming from"));
    assert_int_equal(count(d, "SELECT count(*) FROM attempts WHERE job_id = "
                           "%lld AND outcome = 'expired'", job), 1);
    assert_int_equal(count(d, "SELECT count(*) FROM jobs WHERE job_id = "
                           "%lld AND status = 'succeeded'", job), 1);

    /* Every step once: the table's key forbids twice, the count forbids
     * gaps. */
    assert_int_equal(count(d, "SELECT count(DISTINCT step) FROM metrics "
                           "WHERE job_id = %lld AND key = 'loss' AND step "
                           "BETWEEN 1 AND 400", job), STEPS);
    assert_int_equal(count(d, "SELECT count(*) FROM evals WHERE job_id = "
                           "%lld", job), 2 * e2e_scheduled(STEPS, EVAL_EVERY));
    long long heads = count(d, "SELECT 2 * learnable_heads FROM jobs WHERE "
                            "job_id = %lld", job);   /* 2 layers */
    assert_true(heads > 0);
    /* d_head 8: 4 pairs per head; learnable heads on schedule, every head
     * (8 in 2 layers) at step 0 and at the last step. */
    assert_int_equal(count(d, "SELECT count(*) FROM frequencies WHERE "
                           "job_id = %lld", job),
                     heads * 4 * (e2e_scheduled(STEPS, FREQ_EVERY) - 1)
                         + 8 * 4 * 2);

    /* The same job, never interrupted, in a sweep of its own. */
    long long ref = submit(d, "reference");
    pid_t c = e2e_group_start(d, 2, "group-c", "--exit-when-idle",
                             "--idle-grace", "0", NULL);
    assert_int_equal(e2e_group_wait(c, 90000), 0);
    char cmp[512];
    snprintf(cmp, sizeof cmp, "SELECT count(*) FROM metrics a JOIN metrics b "
             "ON a.key = b.key AND a.step = b.step WHERE a.key = 'loss' AND "
             "a.job_id = %lld AND b.job_id = %lld AND "
             "abs(a.value - b.value) <= 1e-6 * abs(b.value)", job, ref);
    assert_int_equal(bft_sql_int(d, cmp), STEPS);
    snprintf(cmp, sizeof cmp, "SELECT count(*) FROM evals a JOIN evals b "
             "ON a.step = b.step AND a.depth = b.depth WHERE a.job_id = %lld "
             "AND b.job_id = %lld AND a.loss = b.loss", job, ref);
    assert_int_equal(bft_sql_int(d, cmp), 2 * e2e_scheduled(STEPS,
                                                             EVAL_EVERY));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill_worker_group, e2e_setup,
                                        e2e_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
