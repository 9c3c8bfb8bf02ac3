/* Helpers shared by the store and sweep tests: a scratch directory with a
 * real database file, sweep submission, and one-number SQL queries. */
#ifndef BFT_STORE_UTIL_H
#define BFT_STORE_UTIL_H

#include <stdint.h>

#include "store.h"

/* A fresh directory under $TMPDIR (or /tmp); caller frees, bft_rmdir removes. */
char *bft_tmpdir(void);
/* Removes dir and the files in it (not recursive: the tests make none). */
void bft_rmdir(char *dir);

/* Opens dir/name (asserting success); *path (may be NULL) gets a malloc'd
 * copy of the path. */
bf_store *bft_open(const char *dir, const char *name, char **path);

/* cmocka fixture: *state is a store on BFT_STORE_DB, a fresh database file
 * in a scratch directory (reopen it with bft_open(f->dir, BFT_STORE_DB)). */
#define BFT_STORE_DB "store.db"
typedef struct bft_store_fixture {
    char *dir, *path;
    bf_store *s;
} bft_store_fixture;
int bft_store_setup(void **state);
int bft_store_teardown(void **state);

/* Submits YAML text as "sweep.yaml" at time now_ms, asserting success. */
int64_t bft_submit(bf_store *s, const char *yaml, int64_t now_ms, int *n_jobs);

/* First column of the first row of a printf-formatted query on the store's
 * own connection (so it sees an open batch), asserting a row exists. */
int64_t bft_int(bf_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
double bft_real(bf_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Same for text; returns a malloc'd copy (NULL for SQL NULL). */
char *bft_text(bf_store *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Cancels sweep_id whole, as the daemon does in slices: the sweep's one
 * transaction (bf_store_cancel_sweep, returning its rc, *running and
 * *n_running) then every queued job at now_ms. */
int bft_cancel_sweep(bf_store *s, int64_t sweep_id, int64_t now_ms,
                     int64_t **running, int *n_running, bf_error *err);

/* A page of bf_store_jobs as an array (new reference), its bounds
 * checked; *next gets its next_after (0: none).  NULL with err when
 * refused. */
json_t *bft_jobs_page(bf_store *s, int64_t sweep_id, const char *status,
                      int64_t after, int limit, size_t max_bytes,
                      int64_t *next, bf_error *err);

/* Every row of a result view for a sweep (bf_store_view_page), read in
 * pages of at most page_rows rows and page_bytes bytes, each cursor
 * checked to follow the one before: an array (new reference), or NULL
 * with err when the first page is refused. */
json_t *bft_view_rows(bf_store *s, const char *view, int64_t sweep_id,
                      int page_rows, size_t page_bytes, bf_error *err);

/* Runs a shell command, capturing stdout+stderr into a malloc'd string;
 * *status gets the exit status. */
char *bft_run(const char *cmd, int *status);

/* A store in a fresh directory with `yaml` submitted and its first job
 * leased to worker "w" at time 10 for lease_ms: where the metric tests
 * start.  bft_leased_close frees all of it. */
typedef struct bft_leased {
    char *dir, *path;
    bf_store *s;
    bf_lease l;
} bft_leased;
bft_leased *bft_leased_open(const char *db_name, const char *yaml,
                            int64_t lease_ms);
void bft_leased_close(bft_leased *f);

/* A small valid sweep: 3 ropes x 2 depths x 2 seeds = 12 jobs. */
extern const char *const bft_sweep_small;

#endif
