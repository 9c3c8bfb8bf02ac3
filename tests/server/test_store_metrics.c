/* Metric ingest: rows per record type, idempotence, whole-batch validation,
 * durability only after flush, and the results / frequency views on top. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "records.h"
#include "result_views.h"
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
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, &n, NULL, &err), 0);
    assert_int_equal(n, 8 + 2 + 6);
    /* The same batch again (a resend after a lost ack): nothing new. */
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, &n, NULL, &err), 0);
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
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, &n, NULL, &err), 0);
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

/* A malformed record costs only itself: it is named (index, field, why)
 * and the valid records of its batch are stored.  A batch used to be
 * rejected whole for one bad record, and the worker then dropped it. */
static void test_bad_records(void **state)
{
    fixture *f = *state;
    static const struct { const char *json, *field, *needle; int index; } cases[] = {
        {"[{\"type\":\"train\",\"step\":1,\"loss\":1},{\"type\":\"eval\",\"step\":1,"
         "\"depth\":4,\"loss\":1}]", "records[1].accuracy", "accuracy", 1},
        {"[{\"type\":\"train\",\"step\":-1,\"loss\":1}]", "records[0].step", "step", 0},
        {"[{\"type\":\"train\",\"step\":1,\"loss\":\"low\"}]", "records[0].loss", "loss", 0},
        {"[{\"type\":\"train\",\"step\":1},{\"type\":\"weird\",\"step\":1}]",
         "records[1].type", "weird", 1},
        {"[{\"step\":1}]", "records[0].type", "type", 0},
        {"[{\"type\":\"freq\",\"step\":1,\"layer\":0,\"head\":0,\"omega\":[1,\"x\"]}]",
         "records[0].omega", "omega[1]", 0},
        {"[{\"type\":\"freq\",\"step\":1,\"layer\":0,\"head\":0,\"omega\":[]}]",
         "records[0].omega", "omega", 0},
        {"[{\"type\":\"eval\",\"step\":1,\"depth\":0,\"loss\":1,\"accuracy\":1}]",
         "records[0].depth", "depth", 0},
        {"[{\"type\":\"train\",\"step\":2,\"lr\":0.5},3]", "records", "record 1", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bf_error err = {0};
        json_t *b = batch(cases[i].json), *rejected = NULL;
        int n = -1;
        assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, &n,
                                         &rejected, &err), BF_STORE_OK);
        assert_non_null(rejected);
        json_t *r = json_array_get(json_object_get(rejected, "records"), 0);
        print_message("%s -> %s\n", cases[i].json,
                      json_string_value(json_object_get(r, "error")));
        assert_int_equal(json_integer_value(json_object_get(rejected, "count")), 1);
        assert_int_equal(json_integer_value(json_object_get(r, "index")),
                         cases[i].index);
        assert_string_equal(json_string_value(json_object_get(r, "field")),
                            cases[i].field);
        assert_non_null(strstr(json_string_value(json_object_get(r, "error")),
                               cases[i].needle));
        json_decref(rejected);
        json_decref(b);
    }
    /* Not a list at all: nothing to store. */
    bf_error err = {0};
    json_t *b = batch("{\"type\":\"train\"}");
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, NULL, NULL,
                                     &err), BF_STORE_ERR);
    assert_non_null(strstr(err.msg, "list"));
    json_decref(b);
    assert_int_equal(bf_store_flush(f->s, NULL), 0);
    /* The good records beside the bad ones: loss at step 1, lr at step 2. */
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM metrics"), 2);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM metrics WHERE "
                                   "key = 'lr' AND step = 2"), 1);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM evals"), 0);
}

/* A sample record of a kind the link puts in metrics batches, with the
 * rows it makes; 0 rows for a kind this test does not know yet (which then
 * fails: a new kind needs its storage). */
static int sample_record(bf_record_kind kind, bf_record *r)
{
    static const float omega[2] = {1.0f, 0.25f};
    static const unsigned char outcome_bits[2] = {0xa5, 0x0c};
    *r = (bf_record){.kind = kind, .step = 5};
    switch (kind) {
    case BF_RECORD_TRAIN:
        for (int i = 0; i < BF_N_METRICS; i++)
            r->u.train.value[i] = 1.0 + i;
        return BF_N_METRICS;
    case BF_RECORD_EVAL:
        r->u.eval = (bf_eval_result){.depth = 4, .loss = 1, .accuracy = 0.5};
        return 1;
    case BF_RECORD_FREQ:
        r->u.freq.omega = omega;
        r->u.freq.n = 2;
        return 2;
    case BF_RECORD_OUTCOMES:
        r->u.outcomes.depth = 4;
        r->u.outcomes.n = 12;
        r->u.outcomes.bits = outcome_bits;
        return 1;
    default:
        return 0;
    }
}

/* The contract between the worker and the store: every kind the link sends
 * in metrics batches, as bf_record_to_json writes it, is stored, each of its
 * values once (every metric of the table for a train record). */
static void test_every_batched_kind_stored(void **state)
{
    fixture *f = *state;
    for (int k = 0; k < BF_N_RECORD_KINDS; k++) {
        if (bf_record_kinds[k].route != BF_ROUTE_METRICS)
            continue;
        bf_record r;
        int rows = sample_record((bf_record_kind)k, &r);
        assert_true(rows > 0);
        json_t *b = json_array();
        json_array_append_new(b, bf_record_to_json(&r));
        json_t *rejected = NULL;
        int n = -1;
        bf_error err = {0};
        assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, &n,
                                         &rejected, &err), BF_STORE_OK);
        assert_null(rejected);
        assert_int_equal(n, rows);
        json_decref(b);
    }
    assert_int_equal(bf_store_flush(f->s, NULL), 0);
    for (int i = 0; i < BF_N_METRICS; i++)
        assert_int_equal(bft_int(f->s, "SELECT count(*) FROM metrics WHERE "
                                 "key = '%s' AND value = %d",
                                 bf_metrics[i].key, 1 + i), 1);
    /* The outcomes as the bytes they were, not their hex. */
    char *row = bft_text(f->s, "SELECT hex(bits) || ',' || n || ',' || depth"
                         " FROM eval_outcomes WHERE step = 5");
    assert_string_equal(row, "A50C,12,4");
    free(row);
}

/* A malformed outcomes record is refused with the field at fault; the
 * records beside it are stored. */
static void test_outcomes_rejected(void **state)
{
    fixture *f = *state;
    static const struct { const char *rec, *field, *needle; } bad[] = {
        {"{\"type\":\"outcomes\",\"step\":1,\"depth\":4,\"n\":12,"
         "\"bits\":\"a51c\"}", "records[0].bits", "no bit set past example 12"},
        {"{\"type\":\"outcomes\",\"step\":1,\"depth\":4,\"n\":12,"
         "\"bits\":\"a5\"}", "records[0].bits", "4 lowercase hex digits"},
        {"{\"type\":\"outcomes\",\"step\":1,\"depth\":4,\"n\":70000,"
         "\"bits\":\"00\"}", "records[0].n", "more than 65536"},
        {"{\"type\":\"outcomes\",\"step\":1,\"n\":8,\"bits\":\"00\"}",
         "records[0].depth", "'depth' must be a positive integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *b = json_array();
        json_array_append_new(b, batch(bad[i].rec));
        json_array_append_new(b, json_pack("{s:s, s:i, s:i, s:i, s:s}",
                              "type", "outcomes", "step", 2, "depth",
                              (int)i + 1, "n", 8, "bits", "ff"));
        json_t *rejected = NULL;
        bf_error err = {0};
        assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, NULL,
                                         &rejected, &err), BF_STORE_OK);
        json_t *first = json_array_get(json_object_get(rejected, "records"),
                                       0);
        assert_string_equal(json_string_value(json_object_get(first, "field")),
                            bad[i].field);
        const char *msg = json_string_value(json_object_get(first, "error"));
        if (!strstr(msg, bad[i].needle))
            fail_msg("case %zu: '%s' lacks '%s'", i, msg, bad[i].needle);
        json_decref(rejected);
        json_decref(b);
    }
    assert_int_equal(bf_store_flush(f->s, NULL), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM eval_outcomes"), 4);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM eval_outcomes"
                             " WHERE step = 1"), 0);
}

/* Non-finite values are data: NaN (sent as "nan" or null) is stored as
 * NULL, infinities as REAL. */
static void test_nonfinite_values_stored(void **state)
{
    fixture *f = *state;
    json_t *b = batch("[{\"type\":\"train\",\"step\":3,\"loss\":\"nan\","
                      "\"lr\":0.1,\"grad_norm\":\"inf\",\"tokens_per_s\":null},"
                      "{\"type\":\"eval\",\"step\":3,\"depth\":4,"
                      "\"loss\":\"-inf\",\"accuracy\":\"nan\"},"
                      "{\"type\":\"freq\",\"step\":3,\"layer\":0,\"head\":0,"
                      "\"omega\":[\"nan\",2.0,\"inf\"]}]");
    json_t *rejected = NULL;
    int n = 0;
    bf_error err = {0};
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, &n,
                                     &rejected, &err), BF_STORE_OK);
    assert_null(rejected);
    assert_int_equal(n, 4 + 1 + 3);
    assert_int_equal(bf_store_flush(f->s, NULL), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM metrics WHERE "
                                   "value IS NULL"), 2);
    assert_int_equal(bft_int(f->s, "SELECT value > 1e308 FROM metrics WHERE "
                                   "key = 'grad_norm'"), 1);
    assert_int_equal(bft_int(f->s, "SELECT loss < -1e308 AND accuracy IS NULL"
                                   " FROM evals"), 1);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM frequencies WHERE "
                                   "typeof(omega) = 'real'"), 2);
    /* The client's queries carry NaN as null (JSON has no NaN). */
    json_t *rows = bft_view_rows(f->s, "results", f->l.sweep_id, 10, 1 << 20,
                                 &err);
    assert_non_null(rows);
    assert_true(json_is_null(json_object_get(json_array_get(rows, 0),
                                             "train_loss")));
    json_decref(rows);
    json_decref(b);
}

/* Until flushed, rows are invisible to other connections; a store closed
 * cleanly flushes; another mutating call flushes first. */
static void test_flush_makes_durable(void **state)
{
    fixture *f = *state;
    json_t *b = batch("[{\"type\":\"train\",\"step\":1,\"loss\":1.5}]");
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, NULL, NULL, NULL), 0);
    sqlite3 *other;
    assert_int_equal(sqlite3_open(f->path, &other), SQLITE_OK);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(other, "SELECT count(*) FROM metrics", -1, &st, NULL);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0);
    sqlite3_reset(st);
    assert_int_equal(bf_store_renew(f->s, f->l.attempt_id, 30, 60000, NULL), 0);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_reset(st);
    json_decref(b);
    b = batch("[{\"type\":\"train\",\"step\":2,\"loss\":1.25}]");
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, NULL, NULL, NULL), 0);
    bf_store_close(f->s);
    f->s = bft_open(f->dir, "m.db", NULL);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 2);
    sqlite3_finalize(st);
    sqlite3_close(other);
    json_decref(b);
}

/* Pages of a result view: however small, read one after another through
 * their cursors they give the rows of one page holding all, in the same
 * order: none lost or repeated at a boundary inside a job's rows (train
 * loss, frequencies), between jobs, or in a view keyed by a NULL stage
 * (eval_summary). */
static void test_view_pages(void **state)
{
    (void)state;
    bft_leased *f = bft_leased_open("p.db", "name: p\nbase: {depth: 4, "
        "eval_depths: [4, 8]}\ngrid: {rope: [spectral, bifocal]}\nseeds: 3\n",
        60000);
    bf_error err = {0};
    for (int job = 0; job < 6; job++) {
        if (job > 0) {
            bf_lease_clear(&f->l);
            assert_int_equal(bf_store_lease_next(f->s, "w", NULL, 100 + job, 60000,
                                                 &f->l, NULL), 1);
        }
        char text[2048];
        size_t n = (size_t)snprintf(text, sizeof text, "[");
        for (int step = 1; step <= 9; step++)
            n += (size_t)snprintf(text + n, sizeof text - n, "{\"type\":"
                "\"train\",\"step\":%d,\"loss\":%g},", step, 3.0 / step);
        for (int depth = 4; depth <= 8; depth += 4)
            n += (size_t)snprintf(text + n, sizeof text - n, "{\"type\":"
                "\"eval\",\"step\":10,\"depth\":%d,\"loss\":%g,"
                "\"accuracy\":0.5},{\"type\":\"outcomes\",\"step\":10,"
                "\"depth\":%d,\"n\":4,\"bits\":\"0%d\"},", depth, 1.0 + job,
                depth, job);
        for (int step = 0; step <= 10; step += 10)
            for (int head = 2; head < 4; head++)
                n += (size_t)snprintf(text + n, sizeof text - n, "{\"type\":"
                    "\"freq\",\"step\":%d,\"layer\":0,\"head\":%d,"
                    "\"omega\":[1.0,0.5]},", step, head);
        text[n - 1] = ']';
        json_t *b = batch(text);
        assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, b, NULL,
                                         NULL, &err), 0);
        json_decref(b);
        assert_int_equal(bf_store_flush(f->s, &err), 0);
        if (job < 5)   /* the last stays running: live_jobs has a row */
            assert_int_equal(bf_store_finish_attempt(f->s, f->l.attempt_id, 1,
                                                     NULL, 300, NULL), 0);
    }
    int64_t sweep = f->l.sweep_id;
    const char *views[] = { "sweeps", "job_results", "final_evals",
                            "final_outcomes", "eval_summary", "train_loss", "frequency_history",
                            "live_jobs", "results" };
    for (size_t v = 0; v < sizeof views / sizeof *views; v++) {
        json_t *whole = bft_view_rows(f->s, views[v], sweep, 100000, 1 << 20,
                                      &err);
        assert_non_null(whole);
        assert_int_equal(json_array_size(whole),
                         bft_int(f->s, "SELECT count(*) FROM %s WHERE "
                                 "sweep_id = %lld", views[v],
                                 (long long)sweep));
        assert_true(json_array_size(whole) > 0);
        const int rows[] = { 1, 2, 7 };
        for (size_t k = 0; k < 3; k++) {
            json_t *paged = bft_view_rows(f->s, views[v], sweep, rows[k],
                                          1 << 20, &err);
            if (!json_equal(paged, whole))
                fail_msg("%s in pages of %d rows differs", views[v], rows[k]);
            json_decref(paged);
        }
        /* A byte bound of 1: every row is a page of its own. */
        json_t *paged = bft_view_rows(f->s, views[v], sweep, 100000, 1, &err);
        if (!json_equal(paged, whole))
            fail_msg("%s in pages of one byte differs", views[v]);
        json_decref(paged);
        json_decref(whole);
    }
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM train_loss"), 45);

    /* Bad requests name their field. */
    bf_store_page page;
    assert_int_equal(bf_store_view_page(f->s, "jobs", sweep, NULL, 10, 1000,
                                        &page, &err), -1);
    assert_string_equal(err.field, "view");
    json_t *bad[] = { json_pack("[i]", 3), json_pack("[s, i]", "x", 3),
                      json_pack("[i, [i]]", 3, 1) };
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(bf_store_view_page(f->s, "train_loss", sweep, bad[i],
                                            10, 1000, &page, &err), -1);
        assert_string_equal(err.field, "after");
        json_decref(bad[i]);
    }
    assert_int_equal(bf_store_view_page(f->s, "train_loss", sweep + 1, NULL,
                                        10, 1000, &page, &err), -1);
    assert_string_equal(err.field, "sweep");
    bft_leased_close(f);
}

/* The running jobs a page polls every second are found through the
 * sweep's index: no page of live_jobs walks the sweep's jobs (a million of
 * them took 380 ms a poll when it did). */
static void test_live_jobs_seeks(void **state)
{
    bft_store_fixture *f = *state;
    char sql[1024], plan[1200];
    assert_int_equal(bf_result_view_sql("live_jobs", BF_PAGE_FROM_START, sql,
                                        sizeof sql), 0);
    snprintf(plan, sizeof plan, "EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(f->s->db, plan, -1, &st, NULL),
                     SQLITE_OK);
    int steps = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *detail = (const char *)sqlite3_column_text(st, 3);
        if (strncmp(detail, "SCAN", 4) == 0)
            fail_msg("live_jobs reads the sweep's jobs: %s", detail);
        steps++;
    }
    sqlite3_finalize(st);
    assert_true(steps > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rows_and_idempotence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_batched_kind_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outcomes_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonfinite_values_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_makes_durable, setup, teardown),
        cmocka_unit_test(test_view_pages),
        cmocka_unit_test_setup_teardown(test_live_jobs_seeks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
