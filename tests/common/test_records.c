/* The record contract (common/records.h): each kind's JSON, the metric
 * table, and the spelling of non-finite values both ways. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "records.h"

static char *dump(const bf_record *r)
{
    json_t *j = bf_record_to_json(r);
    assert_non_null(j);
    char *text = json_dumps(j, BF_RECORD_DUMP_FLAGS);
    json_decref(j);
    return text;
}

static void test_train_has_every_metric(void **state)
{
    (void)state;
    bf_record r = {.kind = BF_RECORD_TRAIN, .step = 7};
    for (int i = 0; i < BF_N_METRICS; i++)
        r.u.train.value[i] = i + 0.5;
    r.u.train.value[BF_METRIC_LOSS] = NAN;
    json_t *j = bf_record_to_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "type")), "train");
    assert_int_equal(json_integer_value(json_object_get(j, "step")), 7);
    assert_int_equal(json_object_size(j), 2 + BF_N_METRICS);
    for (int i = 0; i < BF_N_METRICS; i++) {
        double x = 0;
        assert_int_equal(bf_record_number(json_object_get(j, bf_metrics[i].key),
                                          &x), 0);
        if (i == BF_METRIC_LOSS)
            assert_true(isnan(x));
        else
            assert_true(x == i + 0.5);
    }
    json_decref(j);
}

static void test_kinds_as_json(void **state)
{
    (void)state;
    float omega[3] = {1.0f, 0.5f, INFINITY};
    bf_eval_result evals[1] = {{.depth = 4, .loss = 1.5, .accuracy = 0.25}};
    bf_record eval = {.kind = BF_RECORD_EVAL, .step = 3, .u.eval = evals[0]};
    bf_record freq = {.kind = BF_RECORD_FREQ, .step = 0,
                      .u.freq = {.layer = 1, .head = 2, .n = 3, .omega = omega}};
    /* examples 0, 9 and 10 of 11 right: bit 0 of byte 0, bits 1, 2 of 1 */
    static const unsigned char bits[2] = {0x01, 0x06};
    bf_record outcomes = {.kind = BF_RECORD_OUTCOMES, .step = 3,
                          .u.outcomes = {.depth = 4, .n = 11, .bits = bits}};
    bf_record ck = {.kind = BF_RECORD_CHECKPOINT, .step = 9,
                    .u.checkpoint.path = "/ck/9"};
    bf_record done = {.kind = BF_RECORD_DONE, .step = 9,
                      .u.done = {.train_loss = -INFINITY, .diverged = 9,
                                 .n_evals = 1, .evals = evals}};
    const struct { const bf_record *r; const char *json; } cases[] = {
        {&eval, "{\"type\":\"eval\",\"step\":3,\"depth\":4,\"loss\":1.5,"
                "\"accuracy\":0.25}"},
        {&freq, "{\"type\":\"freq\",\"step\":0,\"layer\":1,\"head\":2,"
                "\"omega\":[1.0,0.5,\"inf\"]}"},
        {&outcomes, "{\"type\":\"outcomes\",\"step\":3,\"depth\":4,"
                    "\"n\":11,\"bits\":\"0106\"}"},
        {&ck, "{\"type\":\"checkpoint\",\"step\":9,\"path\":\"/ck/9\"}"},
        {&done, "{\"type\":\"done\",\"step\":9,\"train_loss\":\"-inf\","
                "\"stopped\":false,\"eval\":[{\"depth\":4,\"loss\":1.5,"
                "\"accuracy\":0.25}],\"diverged\":9}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = dump(cases[i].r);
        assert_string_equal(text, cases[i].json);
        free(text);
    }
}

/* What bf_record_to_json writes, bf_record_from_line reads back to the
 * same JSON (every kind, a trainer's fail record too); what breaks the
 * contract is refused, naming the field. */
static void test_records_read_back(void **state)
{
    (void)state;
    const char *lines[] = {
        "{\"type\":\"train\",\"step\":7,\"loss\":\"nan\",\"lr\":0.5,"
        "\"grad_norm\":1.5,\"tokens_per_s\":2.5}",
        "{\"type\":\"eval\",\"step\":3,\"depth\":4,\"loss\":1.5,"
        "\"accuracy\":0.25}",
        "{\"type\":\"freq\",\"step\":0,\"layer\":1,\"head\":2,"
        "\"omega\":[1.0,0.5,\"inf\"]}",
        "{\"type\":\"outcomes\",\"step\":3,\"depth\":4,\"n\":11,"
        "\"bits\":\"0106\"}",
        "{\"type\":\"checkpoint\",\"step\":9,\"path\":\"/ck/9\"}",
        "{\"type\":\"done\",\"step\":9,\"train_loss\":\"-inf\","
        "\"stopped\":false,\"eval\":[{\"depth\":4,\"loss\":1.5,"
        "\"accuracy\":0.25}]}",
        "{\"type\":\"fail\",\"step\":2,\"error\":\"no GPU\"}",
    };
    bf_record_read *rr = malloc(sizeof *rr);
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        bf_error err = {0};
        if (bf_record_from_line(lines[i], strlen(lines[i]), rr, &err) != 0)
            fail_msg("%s: %s", lines[i], err.msg);
        char *text = dump(&rr->r);
        assert_string_equal(text, lines[i]);
        free(text);
        bf_record_read_clear(rr);
    }
    const struct { const char *line, *field; } bad[] = {
        {"[1]", ""},
        {"{\"type\":\"trian\",\"step\":1}", "type"},
        {"{\"type\":\"eval\",\"depth\":4,\"loss\":1,\"accuracy\":1}", "step"},
        {"{\"type\":\"eval\",\"step\":-1,\"depth\":4,\"loss\":1,"
         "\"accuracy\":1}", "step"},
        {"{\"type\":\"train\",\"step\":1,\"loss\":1,\"lr\":\"x\","
         "\"grad_norm\":1,\"tokens_per_s\":1}", "lr"},
        {"{\"type\":\"eval\",\"step\":1,\"depth\":0,\"loss\":1,"
         "\"accuracy\":1}", "depth"},
        {"{\"type\":\"freq\",\"step\":1,\"layer\":0,\"head\":0,"
         "\"omega\":[]}", "omega"},
        {"{\"type\":\"outcomes\",\"step\":1,\"depth\":4,\"n\":11,"
         "\"bits\":\"01\"}", "bits"},
        {"{\"type\":\"checkpoint\",\"step\":1,\"path\":\"\"}", "path"},
        {"{\"type\":\"done\",\"step\":1}", "train_loss"},
        {"{\"type\":\"fail\",\"step\":1,\"error\":3}", "error"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bf_error err = {0};
        assert_int_equal(bf_record_from_line(bad[i].line,
                                             strlen(bad[i].line), rr, &err),
                         -1);
        bf_record_read_clear(rr);
        if (bad[i].field[0] && !strstr(err.msg, bad[i].field))
            fail_msg("%s: '%s' does not name %s", bad[i].line, err.msg,
                     bad[i].field);
    }
    free(rr);
}

/* A records file's line as the exec worker takes it: a blank line is
 * nothing, a NUL byte or a second value after the record is refused
 * (jansson would stop at the NUL and drop the rest unseen), and a line
 * that is a record reads as in test_records_read_back. */
static void test_record_from_line(void **state)
{
    (void)state;
    bf_record_read *rr = malloc(sizeof *rr);
    bf_error err = {0};
    assert_int_equal(bf_record_from_line(" \t\r", 3, rr, &err), 1);
    assert_int_equal(bf_record_from_line("", 0, rr, &err), 1);
    static const char good[] = "{\"type\":\"fail\",\"step\":2,"
                               "\"error\":\"no GPU\"}";
    assert_int_equal(bf_record_from_line(good, sizeof good - 1, rr, &err), 0);
    assert_int_equal(rr->r.kind, BF_RECORD_FAIL);
    assert_string_equal(rr->r.u.fail.error, "no GPU");
    bf_record_read_clear(rr);
    static const char nul[] = "{\"type\":\"fail\",\"step\":2,"
                              "\"error\":\"x\"}\0junk";
    assert_int_equal(bf_record_from_line(nul, sizeof nul - 1, rr, &err), -1);
    assert_non_null(strstr(err.msg, "NUL byte at column 37"));
    bf_record_read_clear(rr);
    static const char two[] = "{\"type\":\"done\"} {}";
    assert_int_equal(bf_record_from_line(two, sizeof two - 1, rr, &err), -1);
    assert_non_null(strstr(err.msg, "not JSON"));
    bf_record_read_clear(rr);
    free(rr);
}

static void test_kind_lookup(void **state)
{
    (void)state;
    for (int k = 0; k < BF_N_RECORD_KINDS; k++)
        assert_int_equal(bf_record_kind_of(bf_record_kinds[k].type), k);
    assert_int_equal(bf_record_kind_of("trian"), -1);
    assert_int_equal(bf_record_kind_of(NULL), -1);
    char list[64];
    bf_record_stored_types(list, sizeof list);
    assert_string_equal(list, "train, eval, freq, outcomes");
}

/* The outcomes' hex read back; every malformed form refused. */
static void test_outcomes_hex(void **state)
{
    (void)state;
    unsigned char bits[4];
    assert_int_equal(bf_outcomes_from_hex("0106", 11, bits), 0);
    assert_int_equal(bits[0], 0x01);
    assert_int_equal(bits[1], 0x06);
    assert_int_equal(bf_outcomes_from_hex("ff", 8, bits), 0);
    assert_int_equal(bits[0], 0xff);
    /* example 11 of 11 does not exist: bit 3 of byte 1 */
    assert_int_equal(bf_outcomes_from_hex("0108", 11, bits), -1);
    assert_int_equal(bf_outcomes_from_hex("01", 11, bits), -1);    /* short */
    assert_int_equal(bf_outcomes_from_hex("010600", 11, bits), -1); /* long */
    assert_int_equal(bf_outcomes_from_hex("0A06", 11, bits), -1);  /* case */
    assert_int_equal(bf_outcomes_from_hex("0g06", 11, bits), -1);
    assert_int_equal(bf_outcomes_from_hex("", 0, bits), -1);
}

static void test_nonfinite_spelling(void **state)
{
    (void)state;
    const double xs[] = {1.25, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
        json_t *v = bf_record_real(xs[i]);
        double back = 0;
        assert_int_equal(bf_record_number(v, &back), 0);
        assert_true(isnan(xs[i]) ? isnan(back) : back == xs[i]);
        json_decref(v);
    }
    double x = 0;
    json_t *null = json_null(), *bad = json_string("NaN");
    assert_int_equal(bf_record_number(null, &x), 0);
    assert_true(isnan(x));
    assert_int_equal(bf_record_number(bad, &x), -1);
    json_decref(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_has_every_metric),
        cmocka_unit_test(test_kinds_as_json),
        cmocka_unit_test(test_kind_lookup),
        cmocka_unit_test(test_records_read_back),
        cmocka_unit_test(test_record_from_line),
        cmocka_unit_test(test_outcomes_hex),
        cmocka_unit_test(test_nonfinite_spelling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
