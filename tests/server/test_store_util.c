#include "test_store_util.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "store_internal.h"

const char *const bft_sweep_small =
    "name: small\n"
    "base:\n"
    "  steps: 100\n"
    "  eval_depths: [4, 8]\n"
    "grid:\n"
    "  rope: [rope, spectral, bifocal]\n"
    "  depth: [2, 4]\n"
    "seeds: 2\n"
    "max_attempts: 2\n";

char *bft_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/bf-store-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    return strdup(dir);
}

void bft_rmdir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

bf_store *bft_open(const char *dir, const char *name, char **path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    bf_store *s = NULL;
    bf_error err = {0};
    if (bf_store_open(&s, buf, &err) < 0)
        fail_msg("bf_store_open(%s): %s", buf, err.msg);
    if (path)
        *path = strdup(buf);
    return s;
}

int bft_store_setup(void **state)
{
    bft_store_fixture *f = calloc(1, sizeof *f);
    f->dir = bft_tmpdir();
    f->s = bft_open(f->dir, BFT_STORE_DB, &f->path);
    *state = f;
    return 0;
}

int bft_store_teardown(void **state)
{
    bft_store_fixture *f = *state;
    bf_store_close(f->s);
    bft_rmdir(f->dir);
    free(f->path);
    free(f);
    return 0;
}

int64_t bft_submit(bf_store *s, const char *yaml, int64_t now_ms, int *n_jobs)
{
    int64_t id = 0;
    bf_error err = {0};
    if (bf_store_submit_sweep(s, "sweep.yaml", yaml, strlen(yaml), NULL, now_ms,
                              &id, n_jobs, NULL, &err) < 0)
        fail_msg("submit: %s", err.msg);
    return id;
}

static sqlite3_stmt *query(bf_store *s, const char *fmt, va_list ap)
{
    char *sql = sqlite3_vmprintf(fmt, ap);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s->db));
    if (sqlite3_step(st) != SQLITE_ROW)
        fail_msg("%s: no row (%s)", sql, sqlite3_errmsg(s->db));
    sqlite3_free(sql);
    return st;
}

int64_t bft_int(bf_store *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *st = query(s, fmt, ap);
    va_end(ap);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

double bft_real(bf_store *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *st = query(s, fmt, ap);
    va_end(ap);
    double v = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
    return v;
}

char *bft_text(bf_store *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sqlite3_stmt *st = query(s, fmt, ap);
    va_end(ap);
    const unsigned char *t = sqlite3_column_text(st, 0);
    char *v = t ? strdup((const char *)t) : NULL;
    sqlite3_finalize(st);
    return v;
}

char *bft_run(const char *cmd, int *status)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = 0, cap = 4096;
    char *out = malloc(cap);
    size_t got;
    while ((got = fread(out + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 2)
            out = realloc(out, cap *= 2);
    }
    out[n] = '\0';
    int rc = pclose(p);
    *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return out;
}

bft_leased *bft_leased_open(const char *db_name, const char *yaml,
                            int64_t lease_ms)
{
    bft_leased *f = calloc(1, sizeof *f);
    f->dir = bft_tmpdir();
    f->s = bft_open(f->dir, db_name, &f->path);
    bft_submit(f->s, yaml, 1, NULL);
    assert_int_equal(bf_store_lease_next(f->s, "w", NULL, 10, lease_ms, &f->l, NULL),
                     1);
    return f;
}

void bft_leased_close(bft_leased *f)
{
    bf_lease_clear(&f->l);
    bf_store_close(f->s);
    bft_rmdir(f->dir);
    free(f->path);
    free(f);
}

int bft_cancel_sweep(bf_store *s, int64_t sweep_id, int64_t now_ms,
                     int64_t **running, int *n_running, bf_error *err)
{
    int rc = bf_store_cancel_sweep(s, sweep_id, now_ms, running, n_running,
                                   err);
    if (rc == BF_STORE_OK && bf_store_cancel_queued(s, sweep_id, now_ms, 0,
                                                    err) != 0)
        fail_msg("cancelling the queued jobs: %s", err->msg);
    return rc;
}

/* A page's rows (new reference), checked against its bounds: at most
 * page_rows, and the rows before the last under page_bytes. */
static json_t *page_rows_checked(const bf_store_page *page, int page_rows,
                                 size_t page_bytes)
{
    json_t *rows = json_loadb(page->rows, page->len, 0, NULL);
    assert_true(json_is_array(rows));
    assert_int_equal(json_array_size(rows), page->n_rows);
    assert_true(page->n_rows <= page_rows);
    if (page->n_rows > 1) {
        json_t *before = json_copy(rows);
        json_array_remove(before, json_array_size(before) - 1);
        char *text = json_dumps(before, JSON_COMPACT);
        assert_true(strlen(text) - 1 < page_bytes);
        free(text);
        json_decref(before);
    }
    return rows;
}

json_t *bft_jobs_page(bf_store *s, int64_t sweep_id, const char *status,
                      int64_t after, int limit, size_t max_bytes,
                      int64_t *next, bf_error *err)
{
    bf_store_page page;
    if (bf_store_jobs(s, sweep_id, status, after, limit, max_bytes, &page,
                      err))
        return NULL;
    json_t *rows = page_rows_checked(&page, limit, max_bytes);
    *next = page.next ? json_integer_value(page.next) : 0;
    assert_true(!page.next || *next > after);
    bf_store_page_clear(&page);
    return rows;
}

json_t *bft_view_rows(bf_store *s, const char *view, int64_t sweep_id,
                      int page_rows, size_t page_bytes, bf_error *err)
{
    json_t *all = json_array(), *after = NULL;
    do {
        bf_store_page page;
        if (bf_store_view_page(s, view, sweep_id, after, page_rows,
                               page_bytes, &page, err)) {
            assert_null(after);   /* a cursor it gave is never refused */
            json_decref(all);
            return NULL;
        }
        json_t *rows = page_rows_checked(&page, page_rows, page_bytes);
        json_array_extend(all, rows);
        json_decref(rows);
        /* A cursor follows a full page only, and moves on. */
        assert_true(!page.next || page.n_rows > 0);
        if (after && page.next)
            assert_false(json_equal(after, page.next));
        json_decref(after);
        after = json_incref(page.next);
        bf_store_page_clear(&page);
    } while (after);
    return all;
}
