/* queries: client queries on libuv's thread pool (queries.h). */
#include "queries.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "wire.h"

void bf_queries_init(bf_queries *qs, uv_loop_t *loop, const char *db_path)
{
    memset(qs, 0, sizeof *qs);
    qs->loop = loop;
    qs->db_path = bf_xstrdup(db_path);
    uv_mutex_init(&qs->lock);
}

void bf_queries_free(bf_queries *qs)
{
    for (int i = 0; i < qs->n_idle; i++)
        bf_store_close(qs->idle[i]);
    free(qs->idle);
    free(qs->db_path);
    uv_mutex_destroy(&qs->lock);
    memset(qs, 0, sizeof *qs);
}

bf_query *bf_query_new(bf_query_kind kind, const json_t *id)
{
    bf_query *q = bf_xcalloc(1, sizeof *q);
    q->kind = kind;
    q->id = id ? json_incref((json_t *)id) : NULL;
    return q;
}

void bf_query_free(bf_query *q)
{
    if (!q)
        return;
    json_decref(q->id);
    free(q->status);
    free(q->view);
    free(q->frame);
    free(q);
}

/* ---- on a pool thread ------------------------------------------------------ */

/* An idle reader, or a new one (NULL with err set if it cannot open). */
static bf_store *take_reader(bf_queries *qs, bf_error *err)
{
    bf_store *r = NULL;
    uv_mutex_lock(&qs->lock);
    if (qs->n_idle > 0)
        r = qs->idle[--qs->n_idle];
    uv_mutex_unlock(&qs->lock);
    if (!r && bf_store_open_reader(&r, qs->db_path, err) < 0)
        return NULL;
    return r;
}

static void give_reader(bf_queries *qs, bf_store *r)
{
    uv_mutex_lock(&qs->lock);
    if (qs->n_idle == qs->cap) {
        qs->cap = qs->cap ? 2 * qs->cap : 4;
        qs->idle = bf_xrealloc(qs->idle, (size_t)qs->cap * sizeof *qs->idle);
    }
    qs->idle[qs->n_idle++] = r;
    uv_mutex_unlock(&qs->lock);
}

/* The store call of each kind; *type and *key name the reply and the
 * field holding the rows. */
static json_t *ask(bf_store *r, bf_query *q, int64_t *next_after,
                   const char **type, const char **key)
{
    *next_after = 0;
    switch (q->kind) {
    case BF_QUERY_STATUS:
        *type = "status", *key = "sweeps";
        return bf_store_status(r, q->sweep_id, &q->err);
    case BF_QUERY_JOBS:
        *type = "jobs", *key = "jobs";
        return bf_store_jobs(r, q->sweep_id, q->status, q->after, q->limit,
                             next_after, &q->err);
    case BF_QUERY_RESULTS:
        *type = "results", *key = "rows";
        return bf_store_results(r, q->sweep_id, &q->err);
    case BF_QUERY_ROWS:
        *type = "rows", *key = "rows";
        return bf_store_view_rows(r, q->view, q->sweep_id, &q->err);
    case BF_QUERY_WORKERS:
        *type = "workers", *key = "workers";
        return bf_store_workers(r, &q->err);
    }
    return NULL;
}

static void run_on_pool(uv_work_t *work)
{
    bf_query *q = (bf_query *)work;
    bf_error_clear(&q->err);
    bf_store *r = take_reader(q->queries, &q->err);
    if (!r) {
        q->code = "store";
        return;
    }
    int64_t next_after;
    const char *type, *key;
    json_t *rows = ask(r, q, &next_after, &type, &key);
    give_reader(q->queries, r);
    if (!rows) {
        /* Refused for its input (no such sweep, an unknown status): the
         * error names the field; a database failure does not. */
        q->code = q->err.field[0] ? "not_found" : "store";
        return;
    }
    json_t *reply = json_pack("{s:s}", "type", type);
    if (q->id)
        json_object_set(reply, "id", q->id);
    json_object_set_new(reply, key, rows);
    if (next_after)
        json_object_set_new(reply, "next_after", json_integer(next_after));
    q->frame = bf_wire_encode(reply, &q->len);
    json_decref(reply);
    if (!q->frame) {
        q->code = "store";
        bf_error_set(&q->err, NULL, 0, NULL, "the reply cannot be encoded");
    }
}

/* ---- back on the loop ------------------------------------------------------ */

static void after_pool(uv_work_t *work, int status)
{
    (void)status;
    bf_query *q = (bf_query *)work;
    char *frame = q->frame;
    q->frame = NULL;
    q->done(q->ctx, q->id, frame, q->len, q->code, &q->err);
    bf_query_free(q);
}

void bf_queries_run(bf_queries *qs, bf_query *q, bf_query_done_fn done,
                    void *ctx)
{
    q->queries = qs;
    q->done = done;
    q->ctx = ctx;
    uv_queue_work(qs->loop, &q->work, run_on_pool, after_pool);
}
