/* results/adaptive.c: a comparison of adaptive seeds in words and JSON, for
 * each state, from rows as the adaptive_seeds view gives them (configs as
 * JSON text, the interval on the log scale, NULL while unbounded). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "adaptive.h"

/* A row: the variant differs from the baseline in lr only. */
static json_t *row(const char *state, int released, json_t *decided,
                   json_t *ci_low, json_t *ci_high)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:o, s:o, s:o}",
        "variant_config", "{\"lr\":1.0000000000000001e-05,\"rope\":\"rope\"}",
        "baseline_config", "{\"lr\":0.0030000000000000001,\"rope\":\"rope\"}",
        "eval_depth", 4, "seeds_min", 3, "seeds_max", 20,
        "released", released, "state", state, "decided_seed", decided,
        "ci_low", ci_low, "ci_high", ci_high);
}

static void expect_line(json_t *r, const char *want)
{
    char *line = bf_adaptive_line(r);
    assert_string_equal(line, want);
    free(line);
}

static void test_running_unbounded(void **state)
{
    (void)state;
    json_t *r = row("running", 3, json_null(), json_null(), json_null());
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: still running, 3 seeds of "
                "at most 20, loss ratio not bounded yet");
    json_t *j = bf_adaptive_json(r);
    assert_true(json_is_null(json_object_get(j, "decided_seed")));
    assert_true(json_is_null(json_object_get(j, "ratio_low")));
    assert_string_equal(json_string_value(json_object_get(j, "variant")),
                        "lr=1e-05");
    json_decref(j);
    json_decref(r);
}

static void test_decided_and_undecided(void **state)
{
    (void)state;
    json_t *r = row("lower", 6, json_integer(6), json_real(log(0.5)),
                    json_real(log(0.8)));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: decided lower at seed 6, "
                "loss ratio in [×0.5, ×0.8]");
    json_t *j = bf_adaptive_json(r);
    /* a row without the level (a database before migration 22) */
    assert_true(json_is_null(json_object_get(j, "alpha")));
    json_decref(j);
    /* with it, the line names it: one of a family of 3 */
    json_object_set_new(r, "alpha", json_real(0.05 / 3));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: decided lower at seed 6, "
                "loss ratio in [×0.5, ×0.8] (98.33% sequence)");
    j = bf_adaptive_json(r);
    assert_true(fabs(json_real_value(json_object_get(j, "alpha")) - 0.05 / 3)
                < 1e-15);
    assert_int_equal(json_integer_value(json_object_get(j, "decided_seed")), 6);
    assert_true(fabs(json_real_value(json_object_get(j, "ratio_high")) - 0.8)
                < 1e-12);
    json_decref(j);
    json_decref(r);
    r = row("undecided", 20, json_integer(20), json_real(log(0.9)),
            json_real(log(1.2)));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: undecided at seed 20 "
                "(max), loss ratio in [×0.9, ×1.2]");
    json_decref(r);
    r = row("running", 7, json_null(), json_real(log(0.9)),
            json_real(log(1.2)));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: still running, 7 seeds of "
                "at most 20, loss ratio in [×0.9, ×1.2]");
    json_decref(r);
}

/* The sign rule names itself and its median; rule t, the default, does
 * not (rows before migration 26 have no rule: t). */
static void test_sign_rule(void **state)
{
    (void)state;
    json_t *r = row("lower", 7, json_integer(7), json_real(log(0.5)),
                    json_real(log(0.8)));
    json_object_set_new(r, "rule", json_string("sign"));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: decided lower at seed 7, "
                "median loss ratio in [×0.5, ×0.8] (sign rule)");
    json_object_set_new(r, "alpha", json_real(0.05));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: decided lower at seed 7, "
                "median loss ratio in [×0.5, ×0.8] (95% sequence, sign "
                "rule)");
    json_t *j = bf_adaptive_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "rule")),
                        "sign");
    json_decref(j);
    json_object_set_new(r, "rule", json_string("t"));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: decided lower at seed 7, "
                "loss ratio in [×0.5, ×0.8] (95% sequence)");
    json_object_del(r, "rule");
    j = bf_adaptive_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "rule")), "t");
    assert_true(json_is_null(json_object_get(j, "skewness")));
    json_decref(j);
    json_decref(r);
}

/* The t rule's diagnostic: a skewness G1 past twice its standard error
 * under Gaussian values (0.637 at 12 pairs: sqrt(6*12*11 / (10*13*15)))
 * adds the hint; one within it, or the sign rule, does not. */
static void test_skew_hint(void **state)
{
    (void)state;
    json_t *r = row("running", 12, json_null(), json_real(log(0.9)),
                    json_real(log(1.2)));
    json_object_set_new(r, "n_pairs", json_integer(12));
    json_object_set_new(r, "skewness", json_real(2.1));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: still running, 12 seeds "
                "of at most 20, loss ratio in [×0.9, ×1.2]; log ratios look "
                "skewed (G1 2.1, 3.3 standard errors from 0 over 12 pairs): "
                "the t rule assumes Gaussian ones, consider seeds.rule: sign");
    json_t *j = bf_adaptive_json(r);
    assert_true(json_is_true(json_object_get(j, "skewed")));
    assert_true(fabs(json_real_value(json_object_get(j, "skewness")) - 2.1)
                < 1e-15);
    json_decref(j);
    json_object_set_new(r, "skewness", json_real(-1.5));    /* 2.35 se */
    char *line = bf_adaptive_line(r);
    assert_non_null(strstr(line, "(G1 -1.5, 2.4 standard errors"));
    free(line);
    json_object_set_new(r, "skewness", json_real(1.2));     /* 1.88 se */
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: still running, 12 seeds "
                "of at most 20, loss ratio in [×0.9, ×1.2]");
    j = bf_adaptive_json(r);
    assert_true(json_is_false(json_object_get(j, "skewed")));
    json_decref(j);
    json_object_set_new(r, "skewness", json_real(2.1));
    json_object_set_new(r, "rule", json_string("sign"));
    line = bf_adaptive_line(r);
    assert_null(strstr(line, "skewed"));
    free(line);
    json_decref(r);
}

/* Its sweep cancelled before it was decided: said so, not "decided". */
/* Labels name the fields that differ and have an effect on the side's
 * encoding (freq_lr_mult on neither rope nor prope: nothing learnable), at
 * 4 significant digits (issue 44: "freq_lr_mult=147" on prope,
 * "lr=0.0017320508075688787"). */
static void test_labels_effective_fields(void **state)
{
    (void)state;
    json_t *r = row("running", 3, json_null(), json_null(), json_null());
    json_object_set_new(r, "variant_config", json_string(
        "{\"lr\":0.0017320508075688787,\"rope\":\"prope\","
        "\"freq_lr_mult\":147.0}"));
    json_object_set_new(r, "baseline_config", json_string(
        "{\"lr\":0.001,\"rope\":\"rope\",\"freq_lr_mult\":1.0}"));
    expect_line(r, "lr=0.001732 rope=prope vs lr=0.001 rope=rope, depth 4: "
                "still running, 3 seeds of at most 20, loss ratio not "
                "bounded yet");
    json_decref(r);
}

static void test_cancelled(void **state)
{
    (void)state;
    json_t *r = row("cancelled", 5, json_integer(5), json_real(log(0.7)),
                    json_real(log(1.1)));
    expect_line(r, "lr=1e-05 vs lr=0.003, depth 4: cancelled undecided at "
                "seed 5 (sweep cancelled), loss ratio in [×0.7, ×1.1]");
    json_t *j = bf_adaptive_json(r);
    assert_string_equal(json_string_value(json_object_get(j, "state")),
                        "cancelled");
    assert_int_equal(json_integer_value(json_object_get(j, "decided_seed")), 5);
    json_decref(j);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_running_unbounded),
        cmocka_unit_test(test_decided_and_undecided),
        cmocka_unit_test(test_cancelled),
        cmocka_unit_test(test_sign_rule),
        cmocka_unit_test(test_skew_hint),
        cmocka_unit_test(test_labels_effective_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
