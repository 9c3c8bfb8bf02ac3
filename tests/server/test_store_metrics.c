/* Metric ingest: rows per record type, idempotence, whole-batch validation,
 * durability only after flush, and the results / frequency views on top. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store_internal.h"
#include "test_store_util.h"

typedef bft_leased fixture;

static int setup(void **state)
{
    /* One bifocal job: depth 4, eval_depths [4, 8], 4 heads of which 2 learn. */
    *state = bft_leased_open("m.db", "name: m\nbase: {rope: bifocal, depth: 4, "
                             "eval_depths: [4, 8]}\n", 60000);
    return 0;
}

static int teardown(void **state)
{
    bft_leased_close(*state);
    return 0;
}

static json_t *batch(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        fail_msg("bad test JSON: %s", je.text);
    return v;
}

static const char *const good_batch =
    "[{\"type\":\"train\",\"step\":10,\"loss\":2.5,\"lr\":0.001,\"grad_norm\":1.5,"
    "  \"tokens_per_s\":1000},"
    " {\"type\":\"train\",\"step\":20,\"loss\":2.0,\"lr\":0.001,\"grad_norm\":1.2,"
    "  \"tokens_per_s\":1100},"
    " {\"type\":\"eval\",\"step\":20,\"depth\":4,\"loss\":1.9,\"accuracy\":0.5},"
    " {\"type\":\"eval\",\"step\":20,\"depth\":8,\"loss\":3.1,\"accuracy\":0.125},"
    " {\"type\":\"freq\",\"step\":0,\"layer\":0,\"head\":2,\"omega\":[1.0,0.5,0.25]},"
    " {\"type\":\"freq\",\"step\":20,\"layer\":0,\"head\":2,\"omega\":[1.5,0.5,0.125]}]";

static void test_rows_and_idempotence(void **state)
{
    fixture *f = *state;
    bf_error err = {0};
    json_t *b = batch(good_batch);
    int n = -1;
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, 20, &n, &err), 0);
    assert_int_equal(n, 8 + 2 + 6);
    /* The same batch again (a resend after a lost ack): nothing new. */
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, 30, &n, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(bf_store_flush(f->s, &err), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM metrics"), 8);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM evals"), 2);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM frequencies"), 6);
    assert_true(bft_real(f->s, "SELECT value FROM metrics WHERE key = 'grad_norm'"
                               " AND step = 20") == 1.2);
    /* A batch overlapping the stored rows adds only the new ones. */
    json_decref(b);
    b = batch("[{\"type\":\"train\",\"step\":20,\"loss\":2.0},"
              " {\"type\":\"train\",\"step\":30,\"loss\":1.75}]");
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, 40, &n, &err), 0);
    assert_int_equal(n, 1);
    json_decref(b);
    assert_int_equal(bf_store_flush(f->s, &err), 0);

    /* The views see it: newest train loss, eval at depth 4, ood at 8. */
    assert_true(bft_real(f->s, "SELECT train_loss FROM results") == 1.75);
    assert_true(bft_real(f->s, "SELECT eval_accuracy FROM results") == 0.5);
    assert_int_equal(bft_int(f->s, "SELECT ood_depth FROM results"), 8);
    assert_true(bft_real(f->s, "SELECT ood_accuracy FROM results") == 0.125);
    assert_true(bft_real(f->s, "SELECT omega_change FROM frequency_evolution"
                               " WHERE pair = 0 AND step = 20") == 0.5);
    assert_true(bft_real(f->s, "SELECT initial_omega FROM frequency_evolution"
                               " WHERE pair = 2 AND step = 20") == 0.25);
    assert_int_equal(bft_int(f->s, "SELECT min(learnable) FROM frequency_evolution"), 1);
}

/* One malformed record anywhere rejects the whole batch, naming it. */
static void test_bad_batches(void **state)
{
    fixture *f = *state;
    static const struct { const char *json, *field, *needle; } cases[] = {
        {"[{\"type\":\"train\",\"step\":1,\"loss\":1},{\"type\":\"eval\",\"step\":1,"
         "\"depth\":4,\"loss\":1}]", "records[1].accuracy", "accuracy"},
        {"[{\"type\":\"train\",\"step\":-1,\"loss\":1}]", "records[0].step", "step"},
        {"[{\"type\":\"train\",\"step\":1,\"loss\":\"low\"}]", "records[0].loss", "loss"},
        {"[{\"type\":\"train\",\"step\":1},{\"type\":\"weird\",\"step\":1}]",
         "records[1].type", "weird"},
        {"[{\"step\":1}]", "records[0].type", "type"},
        {"[{\"type\":\"freq\",\"step\":1,\"layer\":0,\"head\":0,\"omega\":[1,\"x\"]}]",
         "records[0].omega", "omega[1]"},
        {"[{\"type\":\"freq\",\"step\":1,\"layer\":0,\"head\":0,\"omega\":[]}]",
         "records[0].omega", "omega"},
        {"[{\"type\":\"eval\",\"step\":1,\"depth\":0,\"loss\":1,\"accuracy\":1}]",
         "records[0].depth", "depth"},
        {"[3]", "records", "record 0"},
        {"{\"type\":\"train\"}", "records", "list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bf_error err = {0};
        json_t *b = batch(cases[i].json);
        int n = -1;
        assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, 20, &n, &err),
                         BF_STORE_ERR);
        print_message("%s -> %s\n", cases[i].json, err.msg);
        assert_string_equal(err.field, cases[i].field);
        assert_non_null(strstr(err.msg, cases[i].needle));
        assert_int_equal(n, 0);
        json_decref(b);
    }
    assert_int_equal(bf_store_flush(f->s, NULL), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM metrics"), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM evals"), 0);
}

/* Until flushed, rows are invisible to other connections; a store closed
 * cleanly flushes; another mutating call flushes first. */
static void test_flush_makes_durable(void **state)
{
    fixture *f = *state;
    json_t *b = batch("[{\"type\":\"train\",\"step\":1,\"loss\":1.5}]");
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, 20, NULL, NULL), 0);
    sqlite3 *other;
    assert_int_equal(sqlite3_open(f->path, &other), SQLITE_OK);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(other, "SELECT count(*) FROM metrics", -1, &st, NULL);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_reset(st);
    assert_int_equal(bf_store_renew(f->s, f->l.attempt_id, 30, 60000), 0);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_reset(st);
    json_decref(b);
    b = batch("[{\"type\":\"train\",\"step\":2,\"loss\":1.25}]");
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, 40, NULL, NULL), 0);
    bf_store_close(f->s);
    f->s = bft_open(f->dir, "m.db", NULL);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2);
    sqlite3_finalize(st);
    sqlite3_close(other);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_and_idempotence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_makes_durable, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
