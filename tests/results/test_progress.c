/* results/progress.c: observed step rates, the fallback to the worker's own
 * throughput, job and sweep ETAs, against numbers worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "progress.h"

/* A live_jobs row: 16 x 40 tokens a step. */
static json_t *row(int job, int attempt, double step, double steps,
                   double tokens_per_s)
{
    return json_pack("{s:i, s:i, s:f, s:f, s:f, s:{s:i, s:i}}", "job_id", job,
                     "attempt_id", attempt, "step", step, "steps", steps,
                     "tokens_per_s", tokens_per_s, "config", "batch_size", 16,
                     "seq_len", 40);
}

static double num(const json_t *live, size_t i, const char *key)
{
    return bf_progress_number(json_array_get(live, i), key, NAN);
}

static void test_reported_then_observed_rate(void **state)
{
    (void)state;
    bf_progress p;
    bf_progress_init(&p);
    /* First sight: the worker's 3200 tokens/s are 5 steps/s. */
    json_t *live = json_pack("[o]", row(1, 5, 100, 1000, 3200));
    bf_progress_update(&p, live, 0);
    assert_float_equal(num(live, 0, "rate"), 5.0, 1e-9);
    assert_float_equal(num(live, 0, "eta_s"), 180.0, 1e-9);
    json_decref(live);
    /* 10 s later at step 300: 20 steps/s observed, 35 s to go. */
    live = json_pack("[o]", row(1, 5, 300, 1000, 3200));
    bf_progress_update(&p, live, 10000);
    assert_float_equal(num(live, 0, "rate"), 20.0, 1e-9);
    assert_float_equal(num(live, 0, "eta_s"), 35.0, 1e-9);
    json_decref(live);
    /* A new attempt (resumed at 50) starts over: the reported rate. */
    live = json_pack("[o]", row(1, 6, 50, 1000, 6400));
    bf_progress_update(&p, live, 11000);
    assert_float_equal(num(live, 0, "rate"), 10.0, 1e-9);
    json_decref(live);
    bf_progress_clear(&p);
}

static void test_unknown_and_done(void **state)
{
    (void)state;
    bf_progress p;
    bf_progress_init(&p);
    json_t *live = json_pack("[o, o]", row(1, 1, 0, 1000, 0),
                             row(2, 2, 1000, 1000, 3200));
    bf_progress_update(&p, live, 0);
    assert_true(json_is_null(json_object_get(json_array_get(live, 0), "rate")));
    assert_true(json_is_null(json_object_get(json_array_get(live, 0), "eta_s")));
    assert_float_equal(num(live, 1, "eta_s"), 0.0, 0);
    json_decref(live);
    /* Job 1 stops running and comes back: seen afresh, not from t=0. */
    live = json_pack("[o]", row(2, 2, 1000, 1000, 3200));
    bf_progress_update(&p, live, 5000);
    assert_int_equal(p.n, 1);
    json_decref(live);
    live = json_pack("[o]", row(1, 1, 400, 1000, 0));
    bf_progress_update(&p, live, 9000);
    assert_true(json_is_null(json_object_get(json_array_get(live, 0), "rate")));
    json_decref(live);
    bf_progress_clear(&p);
}

static void test_sweep_eta(void **state)
{
    (void)state;
    bf_progress p;
    bf_progress_init(&p);
    json_t *live = json_pack("[o, o]", row(1, 1, 300, 1000, 12800),
                             row(2, 2, 500, 1000, 6400));
    bf_progress_update(&p, live, 0);          /* 20 and 10 steps/s */
    /* 700 + 500 left, 2 queued jobs as long as the running ones: 3200
     * steps at 30 steps/s. */
    assert_float_equal(bf_progress_sweep_eta(live, 2, -1), 3200.0 / 30, 1e-9);
    assert_float_equal(bf_progress_sweep_eta(live, 2, 500), 1700.0 / 30, 1e-9);
    json_t *none = json_array();
    assert_true(bf_progress_sweep_eta(none, 3, -1) < 0);
    json_decref(none);
    json_decref(live);
    bf_progress_clear(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reported_then_observed_rate),
        cmocka_unit_test(test_unknown_and_done),
        cmocka_unit_test(test_sweep_eta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
