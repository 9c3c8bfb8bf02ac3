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

/* A steady sweep, simulated: N_JOBS jobs of 1000 steps on 2 workers,
 * each 3 s starting, 40 s training at 25 steps/s, 17 s evaluating and
 * checkpointing at its last step: a round of 2 jobs every 60 s. */
enum { N_JOBS = 16, JOB_MS = 60000, WORKERS = 2 };

static double job_step(int64_t u_ms)
{
    return u_ms < 3000 ? 0 : u_ms < 43000 ? 25.0 * (double)(u_ms - 3000) / 1000
                                          : 1000;
}

/* The sweep's status row and live rows at t_ms. */
static void steady_sweep_at(int64_t t_ms, json_t **status, json_t **live)
{
    long round = (long)(t_ms / JOB_MS);
    long ended = WORKERS * round < N_JOBS ? WORKERS * round : N_JOBS;
    *live = json_array();
    for (int w = 0; w < WORKERS && ended + w < N_JOBS; w++) {
        double step = job_step(t_ms % JOB_MS);
        json_array_append_new(*live, row((int)(ended + w + 1), 1, step, 1000,
                                         step > 0 && step < 1000 ? 16000
                                                                 : 0));
    }
    long running = (long)json_array_size(*live);
    *status = json_pack("{s:I, s:I, s:I}", "succeeded", (json_int_t)ended,
                        "running", (json_int_t)running, "queued",
                        (json_int_t)(N_JOBS - ended - running));
}

/* The sweep's ETA from its observed throughput stays within 25% of the
 * time truly left on a steady sweep, polled every 0.5 s, from its second
 * round while a quarter of it is left; extrapolating each running job
 * (bf_progress_sweep_eta) misses its evaluations and is out by a third
 * at each round's last step. */
static void test_sweep_eta_seen_steady(void **state)
{
    (void)state;
    bf_progress p;
    bf_progress_init(&p);
    const int64_t end_ms = (int64_t)JOB_MS * N_JOBS / WORKERS;
    double worst = 0;
    for (int64_t t = 0; t < end_ms; t += 500) {
        json_t *status, *live;
        steady_sweep_at(t, &status, &live);
        bf_progress_update(&p, live, t);
        double eta = bf_progress_sweep_eta_seen(&p, status, live, t);
        double left = (double)(end_ms - t) / 1000;
        if (t >= JOB_MS + 1000 && left >= 0.25 * (double)end_ms / 1000) {
            double off = fabs(eta - left) / left;
            worst = off > worst ? off : worst;
        }
        json_decref(status);
        json_decref(live);
    }
    assert_true(worst > 0 && worst <= 0.25);
    bf_progress_clear(&p);
}

/* Unknown until BF_PROGRESS_MIN_WINDOW_MS has passed with steps done; a
 * count that goes back (a job retried) starts the window again. */
static void test_sweep_eta_seen_window(void **state)
{
    (void)state;
    bf_progress p;
    bf_progress_init(&p);
    json_t *status = json_pack("{s:i, s:i}", "succeeded", 1, "queued", 2);
    json_t *live = json_pack("[o]", row(2, 1, 100, 1000, 3200));
    bf_progress_update(&p, live, 0);
    assert_true(bf_progress_sweep_eta_seen(&p, status, live, 0) < 0);
    json_decref(live);
    live = json_pack("[o]", row(2, 1, 300, 1000, 3200));
    bf_progress_update(&p, live, 1000);
    assert_true(bf_progress_sweep_eta_seen(&p, status, live, 1000) < 0);
    json_decref(live);
    /* 400 steps in 4 s; 500 + 2 x 1000 left: 25 s */
    live = json_pack("[o]", row(2, 1, 500, 1000, 3200));
    bf_progress_update(&p, live, 4000);
    assert_float_equal(bf_progress_sweep_eta_seen(&p, status, live, 4000),
                       2500.0 / 100, 1e-9);
    json_decref(live);
    live = json_pack("[o]", row(2, 2, 0, 1000, 3200));
    bf_progress_update(&p, live, 5000);
    assert_true(bf_progress_sweep_eta_seen(&p, status, live, 5000) < 0);
    json_decref(live);
    json_decref(status);
    bf_progress_clear(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reported_then_observed_rate),
        cmocka_unit_test(test_unknown_and_done),
        cmocka_unit_test(test_sweep_eta),
        cmocka_unit_test(test_sweep_eta_seen_steady),
        cmocka_unit_test(test_sweep_eta_seen_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
