/* queries: client queries on libuv's thread pool (queries.h). */
#include "queries.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"

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
    json_decref(q->cursor);
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

/* Refused for its input (no such sweep, an unknown view, a bad cursor):
 * the error names the field; a database failure does not. */
static void failed(bf_query *q)
{
    q->code = q->err.field[0] ? "not_found" : "store";
}

/* Encodes the reply of type: the request's id and the fields of extra
 * (stolen), then, when key is not NULL, `"key":text` (text already
 * encoded JSON, so that a page is never held as JSON objects). */
static void encode_reply(bf_query *q, const char *type, json_t *extra,
                         const char *key, const char *text)
{
    json_t *reply = json_pack("{s:s}", "type", type);
    if (q->id)
        json_object_set(reply, "id", q->id);
    json_object_update(reply, extra);
    json_decref(extra);
    char *head = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    if (!head) {
        q->code = "store";
        bf_error_set(&q->err, NULL, 0, NULL, "the reply cannot be encoded");
        return;
    }
    /* head is "{...}": key goes before its closing brace. */
    size_t head_len = strlen(head) - 1;
    q->len = head_len + (key ? strlen(key) + strlen(text) + 4 : 0) + 2;
    q->frame = bf_xmalloc(q->len + 1);
    if (key)
        snprintf(q->frame, q->len + 1, "%.*s,\"%s\":%s}\n", (int)head_len,
                 head, key, text);
    else
        snprintf(q->frame, q->len + 1, "%s\n", head);
    free(head);
}

/* results, rows and jobs: one page, bounded by rows and by bytes; its
 * cursor goes in `next` (`next_after` for jobs). */
static void answer_page(bf_store *r, bf_query *q)
{
    const char *type = q->kind == BF_QUERY_RESULTS ? "results"
                     : q->kind == BF_QUERY_JOBS ? "jobs" : "rows";
    bf_store_page page;
    int rc = q->kind == BF_QUERY_JOBS
        ? bf_store_jobs(r, q->sweep_id, q->status, q->after, q->limit,
                        BF_QUERY_PAGE_BYTES, &page, &q->err)
        : bf_store_view_page(r, q->kind == BF_QUERY_RESULTS ? "results"
                                                            : q->view,
                             q->sweep_id, q->cursor, q->limit,
                             BF_QUERY_PAGE_BYTES, &page, &q->err);
    if (rc) {
        failed(q);
        return;
    }
    json_t *extra = json_object();
    if (page.next)
        json_object_set(extra, q->kind == BF_QUERY_JOBS ? "next_after"
                                                        : "next", page.next);
    encode_reply(q, type, extra, q->kind == BF_QUERY_JOBS ? "jobs" : "rows",
                 page.rows);
    bf_store_page_clear(&page);
}

/* The other kinds: rows as one JSON array, in the field named like the
 * reply's content. */
static void answer_rows(bf_store *r, bf_query *q)
{
    int status = q->kind == BF_QUERY_STATUS;
    json_t *rows = status ? bf_store_status(r, q->sweep_id, &q->err)
                          : bf_store_workers(r, &q->err);
    if (!rows) {
        failed(q);
        return;
    }
    const char *key = status ? "sweeps" : "workers";
    encode_reply(q, status ? "status" : "workers",
                 json_pack("{s:o}", key, rows), NULL, NULL);
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
    if (q->kind == BF_QUERY_RESULTS || q->kind == BF_QUERY_ROWS
        || q->kind == BF_QUERY_JOBS)
        answer_page(r, q);
    else
        answer_rows(r, q);
    give_reader(q->queries, r);
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
