/* queries: the client's read requests (status, jobs, results, rows,
 * workers) answered on libuv's thread pool, each over a read-only
 * connection of the pool's (bf_store_open_reader), so that a query over a
 * 100,000-job sweep never holds the loop: heartbeats and leases keep being
 * served meanwhile.  The reply is built and encoded on the pool thread
 * too; the loop only writes it.  A reader sees the last committed state
 * (WAL), which every reply of the loop has committed before it was sent.
 *
 * results, rows and jobs answer a page at a time (docs/protocol.md): a
 * reply holds at most BF_QUERY_PAGE_BYTES of rows (and the one that
 * crosses it) and a cursor when more follow (`next`; `next_after` for
 * jobs), which the client sends back as `after`.  The daemon keeps
 * nothing between pages, so a query costs it one page of memory whatever
 * the sweep's size. */
#ifndef BF_QUERIES_H
#define BF_QUERIES_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <uv.h>

#include "bf_error.h"
#include "store.h"

/* A `jobs` page holds at most this many jobs, and BF_QUERY_PAGE_BYTES
 * (docs/protocol.md). */
#define BF_QUERY_JOBS_DEFAULT_LIMIT 1000
#define BF_QUERY_JOBS_MAX_LIMIT 10000
/* A results, rows or jobs page: at most this many bytes of rows (and the
 * row crossing it: a row is at most a job's config and error) ... */
#define BF_QUERY_PAGE_BYTES ((size_t)1 << 20)
/* ... and at most `limit` rows, 1 .. BF_QUERY_ROWS_MAX_LIMIT (its
 * default). */
#define BF_QUERY_ROWS_MAX_LIMIT 100000

typedef enum {
    BF_QUERY_STATUS,     /* sweep_id (0: all) */
    BF_QUERY_JOBS,       /* sweep_id, status, after, limit */
    BF_QUERY_RESULTS,    /* sweep_id, after, limit: the results view */
    BF_QUERY_ROWS,       /* view, sweep_id, after, limit */
    BF_QUERY_WORKERS,
} bf_query_kind;

typedef struct bf_query bf_query;

/* Called on the loop with the reply: an encoded frame (frame, taken over)
 * or, when the query was refused or failed, NULL with the error's code
 * (not_found, store) and err.  ctx is bf_queries_run's. */
typedef void (*bf_query_done_fn)(void *ctx, const json_t *id, char *frame,
                                 size_t len, const char *code,
                                 const bf_error *err);

struct bf_query {
    /* private */
    uv_work_t work;        /* first: the pool's callbacks cast it back */
    /* public: the request, filled by the caller */
    bf_query_kind kind;
    json_t *id;            /* the request's id (a reference), or NULL */
    int64_t sweep_id, after;   /* after: jobs' */
    int limit;
    char *status, *view;   /* owned; NULL when absent */
    json_t *cursor;        /* results and rows: their `after` (a reference),
                              or NULL for the first page */
    /* read-only: filled on the pool thread, for the done callback */
    char *frame;
    size_t len;
    const char *code;
    bf_error err;
    /* private: the loop's */
    struct bf_queries *queries;
    bf_query_done_fn done;
    void *ctx;
};

/* The pool's read-only connections, opened as needed (at most one per
 * pool thread) and kept. */
typedef struct bf_queries {
    /* private */
    uv_loop_t *loop;
    char *db_path;
    uv_mutex_t lock;       /* guards idle */
    bf_store **idle;
    int n_idle, cap;
} bf_queries;

void bf_queries_init(bf_queries *qs, uv_loop_t *loop, const char *db_path);
/* Closes the readers; no query may be in flight. */
void bf_queries_free(bf_queries *qs);

/* A query of this kind for the request id (referenced), all else zero. */
bf_query *bf_query_new(bf_query_kind kind, const json_t *id);
/* Frees a query that was not run. */
void bf_query_free(bf_query *q);

/* Runs q (taken over) on the pool; done(ctx, ...) follows on the loop. */
void bf_queries_run(bf_queries *qs, bf_query *q, bf_query_done_fn done,
                    void *ctx);

#endif
