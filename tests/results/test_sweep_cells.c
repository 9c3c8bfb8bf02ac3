/* The cells the daemon stores at submission (jobs.cell: migration 9) are
 * the groups bifocal's results commands make (results/sweep_view.c) from
 * the jobs' configs, and the dashboard groups by them: for sweeps with
 * seeds, zips, excludes, stages and none of them, stored whole
 * (bf_store_submit_sweep) and in chunks (bf_store_stage_jobs, as the
 * daemon's submission thread does), every job's cell is the group
 * sweep_view puts it in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"
#include "sweep.h"
#include "sweep_view.h"
#include "test_store_util.h"

static const char *const sweeps[] = {
    /* zip and exclude, two seeds: 5 groups of 2 */
    "name: shapes\nbase: {task: dyck, depth: 4, steps: 60}\n"
    "grid:\n  rope: [none, rope, bifocal]\n"
    "zip:\n  d_model: [32, 64]\n  n_heads: [2, 4]\n"
    "exclude:\n  - {rope: none, d_model: 64}\nseeds: 2\n",
    /* stages, each its own grid, the second from the first */
    "name: staged\nbase: {task: dyck, steps: 60}\n"
    "stages:\n  - {name: a, seeds: 3, grid: {lr: [0.001, 0.002]}}\n"
    "  - {name: b, seeds: 3, base: {init_from: \"stage:a\"},"
    " grid: {lr: [0.001, 0.002], rope: [none, rope]}}\n",
    /* no seeds: every job a group of its own */
    "name: unseeded\nbase: {task: dyck, steps: 60}\n"
    "grid:\n  rope: [none, rope]\n  lr: [0.001, 0.002, 0.003]\n",
    /* nothing but seeds: one group */
    "name: seeds\nbase: {task: dyck, steps: 60}\nseeds: [3, 1, 7, 2]\n",
};

/* Stores a sweep the way the daemon's submission thread does: expanded
 * into rows, stored a few rows per call. */
typedef struct rows {
    bf_job_row row[64];
    size_t n;
} rows;

static int keep_row(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)err;
    rows *r = ctx;
    assert_true(r->n < 64);
    bf_job_row_from(&r->row[r->n], job);
    r->row[r->n++].config_json = strdup(job->config_json);
    return 0;
}

static int64_t submit_in_chunks(bf_store *s, const char *yaml)
{
    bf_error err = {0};
    bf_sweep *sw = bf_sweep_parse("sweep.yaml", NULL, yaml, strlen(yaml), &err);
    assert_non_null(sw);
    rows r = { .n = 0 };
    assert_int_equal(bf_sweep_expand(sw, keep_row, &r, &err), 0);
    bf_stage stage = { .sweep = sw, .filename = "sweep.yaml", .text = yaml,
                       .len = strlen(yaml), .now_ms = 5 };
    for (size_t at = 0; at < r.n;) {
        size_t n = r.n - at < 3 ? r.n - at : 3, done;
        if (bf_store_stage_jobs(s, &stage, r.row + at, n, at + n == r.n, 0,
                                &done, &err))
            fail_msg("stage: %s", err.msg);
        at += done;
    }
    int64_t id = stage.sweep_id;
    for (size_t i = 0; i < r.n; i++)
        free(r.row[i].config_json);
    bf_stage_clear(&stage);
    bf_sweep_free(sw);
    return id;
}

static int64_t column_int(sqlite3 *db, const char *sql, int64_t a, int64_t b)
{
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_int64(st, 1, a);
    sqlite3_bind_int64(st, 2, b);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_type(st, 0), SQLITE_INTEGER);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The stored cells of sweep_id against sweep_view's groups. */
static void check_cells(const char *path, int64_t sweep_id)
{
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    bf_source src = { .db = db, .db_path = path };
    bf_sweep_view v;
    assert_int_equal(bf_sweep_view_scan(&v, &src, sweep_id, NULL, NULL), 0);
    assert_int_equal(bf_sweep_view_hold(&v, &src, &(bf_sweep_hold){0}), 0);
    assert_true(v.jobs.n_rows > 0);
    assert_int_equal(column_int(db, "SELECT count(DISTINCT cell) FROM jobs"
                                    " WHERE sweep_id = ?1", sweep_id, 0),
                     v.n_groups);
    for (size_t i = 0; i < v.jobs.n_rows; i++) {
        int64_t job = json_integer_value(bf_row_store_get(&v.jobs, i,
                                                          "job_id"));
        int64_t stored = column_int(db, "SELECT cell FROM jobs"
                                        " WHERE job_id = ?1", job, 0);
        if (stored != v.job_group[i])
            fail_msg("sweep %lld, job %lld: cell %lld, sweep_view's group %d",
                     (long long)sweep_id, (long long)job, (long long)stored,
                     v.job_group[i]);
    }
    bf_sweep_view_clear(&v);
    sqlite3_close(db);
}

static void test_cells_are_sweep_views_groups(void **state)
{
    bft_store_fixture *f = *state;
    for (size_t k = 0; k < sizeof sweeps / sizeof *sweeps; k++) {
        check_cells(f->path, bft_submit(f->s, sweeps[k], 1, NULL));
        check_cells(f->path, submit_in_chunks(f->s, sweeps[k]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cells_are_sweep_views_groups,
                                        bft_store_setup, bft_store_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
