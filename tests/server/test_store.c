/* The store's database: opening, pragmas, migrations, submission, reopening,
 * the client queries, and the sqlite3 CLI reading while the store writes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "job_status.h"
#include "store_internal.h"
#include "test_store_util.h"

static const char *sqlite3_cli;   /* argv[1] */

typedef bft_store_fixture fixture;
#define setup bft_store_setup
#define teardown bft_store_teardown

static void test_open_sets_pragmas(void **state)
{
    fixture *f = *state;
    char *mode = bft_text(f->s, "PRAGMA journal_mode");
    assert_string_equal(mode, "wal");
    free(mode);
    assert_int_equal(bft_int(f->s, "PRAGMA foreign_keys"), 1);
    assert_int_equal(bft_int(f->s, "PRAGMA synchronous"), 1);   /* NORMAL */
    assert_int_equal(bft_int(f->s, "PRAGMA user_version"), bf_store_schema_version());
    assert_true(bf_store_schema_version() >= 2);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sqlite_schema WHERE type = "
                                   "'view' AND name IN ('results', 'frequency_evolution',"
                                   " 'sweep_progress')"), 3);
}

static void test_submit_stores_sweep_and_jobs(void **state)
{
    fixture *f = *state;
    int n = 0;
    int64_t id = bft_submit(f->s, bft_sweep_small, 1000, &n);
    assert_int_equal(n, 12);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE sweep_id = %lld",
                             (long long)id), 12);
    char *src = bft_text(f->s, "SELECT source FROM sweeps WHERE sweep_id = %lld",
                         (long long)id);
    assert_string_equal(src, bft_sweep_small);   /* verbatim */
    free(src);
    assert_int_equal(bft_int(f->s, "SELECT max_attempts FROM sweeps"), 2);
    assert_int_equal(bft_int(f->s, "SELECT n_jobs FROM sweeps"), 12);
    assert_int_equal(bft_int(f->s, "SELECT submitted_ms FROM sweeps"), 1000);
    /* Columns agree with the canonical config they were taken from. */
    assert_int_equal(bft_int(f->s,
        "SELECT count(*) FROM jobs WHERE rope = json_extract(config, '$.rope')"
        " AND task = json_extract(config, '$.task')"
        " AND depth = json_extract(config, '$.depth')"
        " AND seed = json_extract(config, '$.seed') AND status = 'queued'"), 12);
    /* Job idx 5 = rope spectral (axis 0 index 1), depth 2, seed 2. */
    char *rope = bft_text(f->s, "SELECT rope || ',' || depth || ',' || seed FROM jobs"
                                " WHERE idx = 5");
    assert_string_equal(rope, "spectral,2,2");
    free(rope);
    assert_int_equal(bft_int(f->s, "SELECT count(DISTINCT config_hash) FROM jobs"), 12);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE rope = 'spectral'"
                                   " AND learnable_heads = 4"), 4);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE rope = 'bifocal'"
                                   " AND learnable_heads = 2"), 4);
}

static void test_rejected_sweep_stores_nothing(void **state)
{
    fixture *f = *state;
    /* The 4th job is invalid: the first three were already inserted inside
     * the transaction, and must be rolled back with the sweep row. */
    const char *bad = "name: bad\ngrid:\n  depth: [2, 4, 8, 200]\n";
    bf_error err = {0};
    int64_t id = -7;
    int n = -7;
    assert_int_equal(bf_store_submit_sweep(f->s, "bad.yaml", bad, strlen(bad), NULL, 1,
                                           &id, &n, NULL, &err), -1);
    assert_string_equal(err.file, "bad.yaml");
    assert_int_equal(err.line, 3);
    assert_string_equal(err.field, "seq_len");
    assert_non_null(strstr(err.msg, "depth=200"));
    assert_int_equal(id, -7);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweeps"), 0);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 0);
    /* And the store still works afterwards. */
    bft_submit(f->s, bft_sweep_small, 2, &n);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs"), 12);
}

/* The analysis block is stored as parsed (canonical values, defaults filled
 * in); a sweep without one has no row. */
static void test_submit_stores_analysis(void **state)
{
    fixture *f = *state;
    int64_t plain = bft_submit(f->s, "name: plain\n", 1, NULL);
    int64_t id = bft_submit(f->s, "name: a\ngrid: {rope: [rope, spectral],"
                            " lr: [1e-3, 2e-3]}\nanalysis:\n"
                            "  primary: {metric: loss, eval_depth: 8}\n"
                            "  baseline: {lr: 1e-3, rope: rope}\n", 2, NULL);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM sweep_analysis"
                             " WHERE sweep_id = %lld", (long long)plain), 0);
    char *row = bft_text(f->s, "SELECT primary_metric || '|' ||"
                         " primary_eval_depth || '|' || baseline || '|' ||"
                         " equivalence_margin || '|' || alpha"
                         " FROM sweep_analysis WHERE sweep_id = %lld",
                         (long long)id);
    assert_string_equal(row, "loss|8|{\"lr\":0.001,\"rope\":\"rope\"}|0.1|0.05");
    free(row);
    /* The baseline's values are those of jobs.config, so SQL finds the
     * baseline jobs by them. */
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs j, sweep_analysis a"
        " WHERE j.sweep_id = a.sweep_id AND NOT EXISTS (SELECT 1 FROM"
        " json_each(a.baseline) b WHERE json_extract(j.config, '$.' || b.key)"
        " IS NOT b.value)"), 1);
}

static void test_reopen_keeps_queue(void **state)
{
    fixture *f = *state;
    bft_submit(f->s, bft_sweep_small, 1, NULL);
    bf_lease l;
    bf_error err;
    assert_int_equal(bf_store_lease_next(f->s, "w1", NULL, 100, 5000, &l, &err), 1);
    int64_t attempt = l.attempt_id, job = l.job_id;
    bf_lease_clear(&l);
    bf_store_close(f->s);

    f->s = bft_open(f->dir, BFT_STORE_DB, NULL);
    assert_int_equal(bft_int(f->s, "SELECT count(*) FROM jobs WHERE status = 'queued'"), 11);
    assert_int_equal(bft_int(f->s, "SELECT status = 'running' FROM jobs WHERE job_id = %lld",
                             (long long)job), 1);
    assert_int_equal(bft_int(f->s, "SELECT lease_expires_ms FROM attempts WHERE"
                                   " attempt_id = %lld", (long long)attempt), 5100);
    /* The worker reconnects with its attempt id and renews ... */
    assert_int_equal(bf_store_renew(f->s, attempt, 200, 5000, NULL), BF_STORE_OK);
    /* ... and the next lease is a different job. */
    assert_int_equal(bf_store_lease_next(f->s, "w2", NULL, 300, 5000, &l, &err), 1);
    assert_int_not_equal(l.job_id, job);
    bf_lease_clear(&l);
    /* A daemon down for longer than the lease: the expiry pass ends it. */
    int n = 0;
    assert_int_equal(bf_store_expire_leases(f->s, 5200, &n, NULL), BF_STORE_OK);
    assert_int_equal(n, 1);
    assert_int_equal(bf_store_renew(f->s, attempt, 5300, 5000, NULL), BF_STORE_FENCED);
}

/* Builds a version-1 database by hand, the way an older bifocald left it. */
static void make_v1_database(const char *path)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, bf_schema_migrations[0], NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
        "PRAGMA user_version = 1;"
        "INSERT INTO sweeps (name, filename, source, submitted_ms, max_attempts, n_jobs)"
        " VALUES ('old', 'old.yaml', 'name: old', 5, 3, 3);"
        "INSERT INTO jobs (sweep_id, idx, config, config_hash, task, rope, depth, seed,"
        " learnable_heads, priority, created_ms)"
        " VALUES (1, 0, '{\"depth\":4,\"eval_depths\":[4,8],\"n_heads\":4,"
        "\"seed\":1}', 'abc', 'dyck', 'rope', 4, 1, 0, 0, 5),"
        " (1, 1, '{\"depth\":6,\"eval_depths\":[4,8],\"n_heads\":4,"
        "\"seed\":1}', 'abd', 'dyck', 'rope', 6, 1, 0, 0, 5),"
        " (1, 2, '{\"depth\":4,\"eval_depths\":[4,8],\"n_heads\":4,"
        "\"seed\":2}', 'abe', 'dyck', 'rope', 4, 2, 0, 0, 5);"
        "INSERT INTO evals VALUES (1, 10, 8, 1.5, 0.25);"
        "INSERT INTO attempts (job_id, attempt_no, worker, started_ms,"
        " lease_expires_ms) VALUES (1, 1, 'old-worker', 6, 9);"
        "INSERT INTO metrics VALUES (1, 'loss', 10, 2.5);"
        /* Non-finite values as migrations 1 to 9 stored them: NaN as the
         * text 'nan', infinities as REAL. */
        "INSERT INTO metrics VALUES (1, 'loss', 5, 'nan'),"
        " (1, 'grad_norm', 10, 9e999);"
        "INSERT INTO evals VALUES (1, 10, 4, 'nan', 'nan');"
        "INSERT INTO frequencies VALUES (1, 10, 0, 0, 0, 'nan'),"
        " (1, 10, 0, 0, 1, 0.5);",
        NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_migrates_older_database(void **state)
{
    fixture *f = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/old.db", f->dir);
    make_v1_database(path);
    bf_store *s = bft_open(f->dir, "old.db", NULL);
    assert_int_equal(bft_int(s, "PRAGMA user_version"), bf_store_schema_version());
    /* Data kept, and the views of migration 2 work on it. */
    assert_int_equal(bft_int(s, "SELECT count(*) FROM jobs"), 3);
    assert_int_equal(bft_int(s, "SELECT total FROM sweep_progress WHERE sweep_id = 1"), 3);
    assert_true(bft_real(s, "SELECT ood_accuracy FROM results WHERE job_id = 1") == 0.25);
    /* Migration 4 rebuilt jobs: its rows, and the keys pointing at them,
     * are intact; the new columns read as a sweep without stages. */
    assert_int_equal(bft_int(s, "SELECT count(*) FROM attempts a JOIN jobs j"
                                " USING (job_id)"), 1);
    assert_true(bft_real(s, "SELECT train_loss FROM results WHERE job_id = 1") == 2.5);
    assert_int_equal(bft_int(s, "SELECT stage IS NULL AND source_job_id IS NULL"
                                " AND status = 'queued' FROM jobs"), 1);
    assert_int_equal(bft_int(s, "SELECT waiting FROM sweep_progress"), 0);
    /* Migration 9: jobs that differ only in seed share a cell, numbered in
     * order of their first job. */
    char *cells = bft_text(s, "SELECT group_concat(cell, ',') FROM"
                              " (SELECT cell FROM jobs ORDER BY job_id)");
    assert_string_equal(cells, "0,1,0");
    free(cells);
    char *warnings = bft_text(s, "SELECT warnings FROM sweeps");
    assert_string_equal(warnings, "[]");
    free(warnings);
    /* Migration 11: NaN is NULL, infinities and numbers are kept. */
    assert_int_equal(bft_int(s, "SELECT (SELECT count(*) FROM metrics WHERE"
        " typeof(value) = 'text') + (SELECT count(*) FROM evals WHERE"
        " typeof(loss) = 'text' OR typeof(accuracy) = 'text') + (SELECT"
        " count(*) FROM frequencies WHERE typeof(omega) = 'text')"), 0);
    assert_int_equal(bft_int(s, "SELECT value IS NULL FROM metrics WHERE"
                                " key = 'loss' AND step = 5"), 1);
    assert_int_equal(bft_int(s, "SELECT value > 1e308 FROM metrics WHERE"
                                " key = 'grad_norm'"), 1);
    assert_int_equal(bft_int(s, "SELECT loss IS NULL AND accuracy IS NULL"
                                " FROM evals WHERE depth = 4"), 1);
    assert_int_equal(bft_int(s, "SELECT count(omega) FROM frequencies"), 1);
    assert_true(bft_real(s, "SELECT avg(value) FROM metrics WHERE"
                            " key = 'loss'") == 2.5);
    assert_int_equal(bft_int(s, "SELECT count(*) FROM sqlite_master WHERE"
                                " name = 'evals_by_depth'"), 1);
    assert_int_equal(bft_int(s, "PRAGMA foreign_keys"), 1);
    assert_int_not_equal(sqlite3_exec(s->db, "INSERT INTO attempts (job_id,"
        " attempt_no, worker, started_ms, lease_expires_ms) VALUES (99, 1,"
        " 'w', 1, 2)", NULL, NULL, NULL), SQLITE_OK);
    bf_store_close(s);
}

/* A database that (against the rule) holds two running attempts of a job
 * still opens: migration 10 ends the older one as expired before its
 * unique index makes a second running attempt impossible. */
static void test_migration_ends_duplicate_running(void **state)
{
    fixture *f = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/old.db", f->dir);
    make_v1_database(path);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "INSERT INTO attempts (job_id, attempt_no,"
        " worker, started_ms, lease_expires_ms) VALUES (1, 2, 'new-worker', 7,"
        " 12)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    bf_store *s = bft_open(f->dir, "old.db", NULL);
    char *live = bft_text(s, "SELECT group_concat(worker) FROM attempts"
                             " WHERE outcome = 'running'");
    assert_string_equal(live, "new-worker");
    free(live);
    assert_int_equal(bft_int(s, "SELECT ended_ms FROM attempts WHERE"
                                " worker = 'old-worker' AND outcome = 'expired'"),
                     9);
    bf_store_close(s);
}

static void test_refuses_newer_database(void **state)
{
    fixture *f = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/new.db", f->dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", bf_store_schema_version() + 1);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    bf_store *s = (bf_store *)1;
    bf_error err = {0};
    assert_int_equal(bf_store_open(&s, path, &err), -1);
    assert_null(s);
    assert_non_null(strstr(err.msg, "newer"));
    assert_non_null(strstr(err.msg, path));
    /* Refused, not touched: still the newer version. */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), bf_store_schema_version() + 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The real sqlite3 CLI reads while the store holds an open batch
 * transaction (WAL): it sees the last committed state, never "locked". */
static void test_cli_reads_during_open_batch(void **state)
{
    fixture *f = *state;
    bft_submit(f->s, bft_sweep_small, 1, NULL);
    bf_lease l;
    bf_error err;
    assert_int_equal(bf_store_lease_next(f->s, "w", NULL, 10, 60000, &l, &err), 1);
    json_t *recs = json_pack("[{s:s,s:i,s:f}]", "type", "train", "step", 1, "loss", 2.5);
    int n = 0;
    assert_int_equal(bf_store_ingest(f->s, l.attempt_id, recs, &n, NULL, &err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(f->s->in_batch, 1);

    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' -bail '%s' 'SELECT count(*) FROM jobs;"
             " SELECT count(*) FROM metrics; SELECT count(*) FROM sweep_progress;'",
             sqlite3_cli, f->path);
    int status;
    char *out = bft_run(cmd, &status);
    assert_int_equal(status, 0);
    assert_null(strstr(out, "locked"));
    assert_string_equal(out, "12\n0\n1\n");   /* the metric is not committed yet */
    free(out);

    assert_int_equal(bf_store_flush(f->s, &err), 0);
    out = bft_run(cmd, &status);
    assert_int_equal(status, 0);
    assert_string_equal(out, "12\n1\n1\n");
    free(out);
    json_decref(recs);
    bf_lease_clear(&l);
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* While a reader holds a transaction no checkpoint can reset the WAL, so
 * it grows; once the reader leaves, it must shrink back under 64 MiB (it
 * used to stay at its peak, 221 MB in one case, for good). */
static void test_wal_bounded_once_readers_leave(void **state)
{
    fixture *f = *state;
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", f->path);
    sqlite3 *reader;
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_open(f->path, &reader), SQLITE_OK);
    assert_int_equal(sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(reader, "SELECT count(*) FROM jobs",
                                        -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);   /* the snapshot */
    sqlite3_finalize(st);
    /* One commit per call, each rewriting its pages into the WAL. */
    const long limit = (long)BF_STORE_WAL_LIMIT;   /* 64 MiB */
    for (int i = 0; file_size(wal) <= limit + (8L << 20); i++) {
        char host[32];
        snprintf(host, sizeof host, "h%d", i);
        assert_int_equal(bf_store_worker_seen(f->s, "w", host, 1, 1, i, NULL), 0);
    }
    sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(reader);
    for (int i = 0; i < 2000 && file_size(wal) > limit; i++)
        assert_int_equal(bf_store_worker_seen(f->s, "w", "h", 1, 1, i, NULL), 0);
    assert_true(file_size(wal) <= limit);
}

static void test_queries(void **state)
{
    fixture *f = *state;
    bf_error err = {0};
    int64_t id = bft_submit(f->s, bft_sweep_small, 1, NULL);
    assert_int_equal(bf_store_worker_seen(f->s, "gpu-a", "host1", 4, 1, 50, NULL), 0);
    assert_int_equal(bf_store_worker_seen(f->s, "gpu-a", "host1", 8, 0, 60, NULL), 0);
    bf_lease l;
    assert_int_equal(bf_store_lease_next(f->s, "gpu-a", NULL, 70, 1000, &l, &err), 1);

    json_t *st = bf_store_status(f->s, id, &err);
    assert_non_null(st);
    assert_int_equal(json_array_size(st), 1);
    json_t *row = json_array_get(st, 0);
    assert_int_equal(json_integer_value(json_object_get(row, "total")), 12);
    assert_int_equal(json_integer_value(json_object_get(row, "queued")), 11);
    assert_int_equal(json_integer_value(json_object_get(row, "running")), 1);
    assert_string_equal(json_string_value(json_object_get(row, "name")), "small");
    json_decref(st);

    int64_t next = -1;
    json_t *jobs = bft_jobs_page(f->s, id, "running", 0, 100, 1 << 20,
                                 &next, &err);
    assert_int_equal(json_array_size(jobs), 1);
    assert_int_equal(next, 0);
    row = json_array_get(jobs, 0);
    assert_int_equal(json_integer_value(json_object_get(row, "job_id")), l.job_id);
    assert_true(json_is_object(json_object_get(row, "config")));
    json_decref(jobs);
    jobs = bft_jobs_page(f->s, 0, NULL, 0, 100, 1 << 20, &next, &err);
    assert_int_equal(json_array_size(jobs), 12);
    json_decref(jobs);
    /* Pages of 5: 5, 5, 2, each naming where the next starts. */
    int64_t after = 0;
    size_t sizes[3];
    for (int page = 0; page < 3; page++) {
        jobs = bft_jobs_page(f->s, id, NULL, after, 5, 1 << 20, &next, &err);
        sizes[page] = json_array_size(jobs);
        int64_t first = json_integer_value(json_object_get(
            json_array_get(jobs, 0), "job_id"));
        assert_true(first > after);
        assert_int_equal(next == 0, page == 2);
        json_decref(jobs);
        after = next;
    }
    assert_int_equal(sizes[0], 5);
    assert_int_equal(sizes[1], 5);
    assert_int_equal(sizes[2], 2);
    /* Pages bounded by bytes too: 1,000 bytes hold a row or two (a row is
     * its config and more), each page ends at the row that crosses them
     * (bft_jobs_page checks), and the walk sees every job once, in order. */
    after = 0;
    int n_pages = 0, n_jobs = 0;
    do {
        jobs = bft_jobs_page(f->s, id, NULL, after, 100, 1000, &next, &err);
        assert_true(json_array_size(jobs) >= 1);
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            int64_t job = json_integer_value(json_object_get(
                json_array_get(jobs, i), "job_id"));
            assert_true(job > after);
            after = job;
            n_jobs++;
        }
        assert_true(!next || next == after);
        json_decref(jobs);
        n_pages++;
    } while (next);
    assert_int_equal(n_jobs, 12);
    assert_true(n_pages >= 6);
    assert_null(bft_jobs_page(f->s, 0, "sleeping", 0, 100, 1 << 20, &next,
                              &err));
    assert_non_null(strstr(err.msg, "sleeping"));
    assert_null(bf_store_status(f->s, 999, &err));
    assert_non_null(strstr(err.msg, "999"));

    json_t *res = bft_view_rows(f->s, "results", id, 5, 1 << 20, &err);
    assert_int_equal(json_array_size(res), 12);
    assert_true(json_is_null(json_object_get(json_array_get(res, 0), "train_loss")));
    json_decref(res);

    json_t *w = bf_store_workers(f->s, &err);
    assert_int_equal(json_array_size(w), 1);
    row = json_array_get(w, 0);
    assert_int_equal(json_integer_value(json_object_get(row, "ranks")), 8);
    assert_int_equal(json_integer_value(json_object_get(row, "connected")), 0);
    assert_int_equal(json_integer_value(json_object_get(row, "first_seen_ms")), 50);
    assert_int_equal(json_integer_value(json_object_get(row, "last_seen_ms")), 60);
    assert_int_equal(json_integer_value(json_object_get(row, "running")), 1);
    json_decref(w);
    bf_lease_clear(&l);
}

/* A page reads at most BF_STORE_JOBS_WINDOW job ids: the one job of a
 * sweep stored after 2.5 windows of another's comes on the third page,
 * the two before it empty but for their cursors: a sweep being stored,
 * whose rows no page shows, costs a page a window at most. */
static void test_jobs_pages_bounded(void **state)
{
    fixture *f = *state;
    bf_error err = {0};
    char yaml[128];
    snprintf(yaml, sizeof yaml, "name: wide\nbase: {steps: 100}\nseeds: %d\n",
             BF_STORE_JOBS_WINDOW * 5 / 2);
    bft_submit(f->s, yaml, 1, NULL);
    int64_t one = bft_submit(f->s, "name: one\nbase: {steps: 100}\n", 2, NULL);
    int64_t after = 0, next = 0;
    for (int page = 1; page <= 3; page++) {
        json_t *jobs = bft_jobs_page(f->s, one, NULL, after, 10, 1 << 20,
                                     &next, &err);
        assert_non_null(jobs);
        assert_int_equal(json_array_size(jobs), page == 3);
        assert_int_equal(next, page == 3 ? 0 : page * BF_STORE_JOBS_WINDOW);
        json_decref(jobs);
        after = next;
    }
}

/* The schema's CHECK on jobs.status allows exactly the statuses of
 * common/job_status.h, in its order: one table for the store, the
 * dashboard and the database. */
static void test_job_statuses_match_schema(void **state)
{
    fixture *f = *state;
    char *sql = bft_text(f->s, "SELECT sql FROM sqlite_master WHERE type ="
                               " 'table' AND name = 'jobs'");
    const char *p = strstr(sql, "status IN (");
    assert_non_null(p);
    p += strlen("status IN (");
    int n = 0;
    while (*p && *p != ')') {
        const char *open = strchr(p, '\'');
        assert_non_null(open);
        const char *close = strchr(open + 1, '\'');
        assert_non_null(close);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(close - open - 1), open + 1);
        assert_string_equal(name, bf_job_status_name(n));
        n++;
        p = close + 1;
        while (*p == ',' || *p == ' ' || *p == '\n')
            p++;
    }
    assert_int_equal(n, BF_JOB_N_STATUSES);
    free(sql);
}

int main(int argc, char **argv)
{
    sqlite3_cli = argc > 1 ? argv[1] : "sqlite3";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_sets_pragmas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs_pages_bounded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_job_statuses_match_schema, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_submit_stores_sweep_and_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejected_sweep_stores_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_stores_analysis, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reopen_keeps_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrates_older_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migration_ends_duplicate_running,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_newer_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cli_reads_during_open_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_bounded_once_readers_leave,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
