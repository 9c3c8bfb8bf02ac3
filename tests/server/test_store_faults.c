/* Fault injection on the store: SQLite refuses to grow the database
 * (PRAGMA max_page_count on the store's own connection -> SQLITE_FULL) while
 * metrics are ingested and flushed.  The failing call must report an error,
 * nothing half-written may be visible (also after reopening), and once the
 * fault is removed the same batch goes in and is stored exactly once; every
 * other store call keeps working. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store_internal.h"
#include "test_store_util.h"

/* n train records from step first: 4 metric rows each. */
static json_t *train_records(int first, int n)
{
    json_t *recs = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(recs, json_pack(
            "{s:s, s:i, s:f, s:f, s:f, s:f}", "type", "train", "step",
            first + i, "loss", 1.0 / (1 + first + i), "lr", 1e-3,
            "grad_norm", 0.5, "tokens_per_s", 1e5));
    return recs;
}

/* Caps the file at its current size (plus `extra` pages): any statement that
 * needs a new page fails with SQLITE_FULL.  0 lifts the cap again. */
static void cap_pages(bf_store *s, int extra, int on)
{
    char sql[96];
    int64_t pages = bft_int(s, "PRAGMA page_count");
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld",
             on ? (long long)(pages + extra) : 1LL << 30);
    assert_int_equal(sqlite3_exec(s->db, sql, NULL, NULL, NULL), SQLITE_OK);
}

typedef bft_leased fixture;

static int setup(void **state)
{
    *state = bft_leased_open("faults.db", bft_sweep_small, 600000);
    return 0;
}

static int teardown(void **state)
{
    bft_leased_close(*state);
    return 0;
}

static void reopen(fixture *f)
{
    bf_store_close(f->s);
    f->s = bft_open(f->dir, "faults.db", NULL);
}

static int64_t metric_rows(fixture *f)
{
    return bft_int(f->s, "SELECT count(*) FROM metrics");
}

/* What any other reader (the sqlite3 CLI, a restarted daemon) sees: the
 * committed rows, through a connection of its own. */
static int64_t committed_rows(fixture *f)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM metrics", -1,
                                        &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* The store is still fully usable: a heartbeat renews, a lease commits. */
static void assert_store_works(fixture *f)
{
    assert_int_equal(bf_store_renew(f->s, f->l.attempt_id, 20, 600000, NULL),
                     BF_STORE_OK);
    bf_lease other;
    bf_error err = {0};
    assert_int_equal(bf_store_lease_next(f->s, "w2", NULL, 20, 600000, &other, &err), 1);
    assert_int_equal(bf_store_finish_attempt(f->s, other.attempt_id, 1, NULL, 21, NULL),
                     BF_STORE_OK);
    bf_lease_clear(&other);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM (SELECT job_id FROM"
                               " attempts WHERE outcome = 'running'"
                               " GROUP BY job_id HAVING count(*) > 1)"), 0);
}

/* A batch far bigger than the cap: ingest itself fails (the inserts need
 * new pages).  A batch acked earlier in the same transaction may be lost
 * with it (SQLITE_FULL can roll the whole transaction back), so the flush
 * must then fail too rather than claim it durable. */
static void test_ingest_full(void **state)
{
    fixture *f = *state;
    bf_error err = {0};
    /* A small batch goes into the open transaction first. */
    json_t *small = train_records(1, 5);
    int n = -1;
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, small, &n, NULL, &err), 0);
    assert_int_equal(n, 20);
    cap_pages(f->s, 0, 1);
    json_t *big = train_records(100, 3000);
    int rc = bf_store_ingest(f->s, f->l.attempt_id, big, &n, NULL, &err);
    print_message("ingest under the cap: rc %d: %s\n", rc, err.msg);
    assert_int_not_equal(rc, BF_STORE_OK);
    assert_true(err.msg[0] != '\0');
    int flushed = bf_store_flush(f->s, &err);
    int64_t rows = metric_rows(f);
    print_message("flush after the failed ingest: %d (%s), %lld rows\n", flushed,
                  flushed ? err.msg : "ok", (long long)rows);
    /* Either the small batch survived (flush ok, its 20 rows stored) or it
     * did not (flush failed, nothing stored): never half of anything. */
    assert_true((flushed == 0 && rows == 20) || (flushed != 0 && rows == 0));
    assert_int_equal(committed_rows(f), rows);
    cap_pages(f->s, 0, 0);
    /* The same store carries on (the daemon does not reopen it). */
    assert_store_works(f);

    /* Fault removed: both batches again (the worker's resend), once each. */
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, small, &n, NULL, &err), 0);
    assert_int_equal(n, 20 - rows);
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, big, &n, NULL, &err), 0);
    assert_int_equal(n, 12000);
    assert_int_equal(bf_store_flush(f->s, &err), 0);
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, big, &n, NULL, &err), 0);
    assert_int_equal(n, 0);
    assert_int_equal(bf_store_flush(f->s, &err), 0);
    reopen(f);
    assert_int_equal(metric_rows(f), 12020);
    assert_int_equal(bft_int(f->s, "SELECT count(DISTINCT step) FROM metrics"), 3005);
    assert_store_works(f);
    json_decref(small);
    json_decref(big);
}

/* The cap leaves room for the inserts only in the page cache: whatever the
 * statement that hits the wall (insert or commit), the failing call says so,
 * and after the fault the store commits normally. */
static void test_flush_full_then_recover(void **state)
{
    fixture *f = *state;
    bf_error err = {0};
    /* Try several cap sizes so that the fault lands in different places
     * (ingest's inserts, or the commit's page writes). */
    json_t *batch = train_records(1, 400);
    int seen_fail = 0;
    for (int extra = 0; extra < 64; extra = 2 * extra + 1) {
        cap_pages(f->s, extra, 1);
        int n = 0;
        int rc_i = bf_store_ingest(f->s, f->l.attempt_id, batch, &n, NULL, &err);
        int rc_f = bf_store_flush(f->s, &err);
        int64_t rows = metric_rows(f);
        print_message("cap +%d: ingest %d, flush %d, %lld rows%s%s\n", extra,
                      rc_i, rc_f, (long long)rows, rc_i || rc_f ? ": " : "",
                      rc_i || rc_f ? err.msg : "");
        cap_pages(f->s, 0, 0);
        if (rc_i == 0 && rc_f == 0) {
            assert_int_equal(rows, 1600);  /* stored, whole */
            break;
        }
        seen_fail = 1;
        assert_true(err.msg[0] != '\0');
        assert_int_equal(rows, 0);         /* nothing half-written */
        assert_int_equal(committed_rows(f), 0);
        assert_store_works(f);             /* without a reopen */
        reopen(f);
        assert_int_equal(metric_rows(f), 0);
    }
    assert_true(seen_fail);
    /* Without a cap the batch goes in exactly once. */
    int n = -1;
    assert_int_equal(bf_store_ingest(f->s, f->l.attempt_id, batch, &n, NULL, &err), 0);
    assert_int_equal(bf_store_flush(f->s, &err), 0);
    reopen(f);
    assert_int_equal(metric_rows(f), 1600);
    assert_int_equal(bft_int(f->s, "SELECT count(DISTINCT step) FROM metrics"), 400);
    assert_store_works(f);
    json_decref(batch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ingest_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_full_then_recover, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
