#include "fake_worker.h"

#include <stdio.h>
#include <string.h>

int bft_worker_connect(bft_worker *w, bft_daemon *d, const char *name)
{
    w->pushed = json_array();
    return bft_connect(d, &w->conn, "worker", name);
}

void bft_worker_close(bft_worker *w)
{
    bf_rpc_close(&w->conn);
    json_decref(w->pushed);
    w->pushed = NULL;
}

static void keep_push(void *ctx, const json_t *msg)
{
    bft_worker *w = ctx;
    json_array_append(w->pushed, (json_t *)msg);
}

static json_t *call(bft_worker *w, json_t *msg)
{
    bf_error err;
    json_t *reply = bf_rpc_request(&w->conn, msg, 5000, keep_push, w, &err);
    json_decref(msg);
    return reply;
}

json_t *bft_worker_request_job(bft_worker *w)
{
    return bft_worker_ask(w, NULL);
}

json_t *bft_worker_ask(bft_worker *w, const char *request)
{
    json_t *m = json_pack("{s:s}", "type", "request_job");
    if (request)
        json_object_set_new(m, "request", json_string(request));
    return call(w, m);
}

json_t *bft_worker_ask_trainer(bft_worker *w, const char *trainer)
{
    return call(w, json_pack("{s:s, s:s}", "type", "request_job", "trainer",
                             trainer));
}

json_t *bft_worker_heartbeat(bft_worker *w, int64_t attempt_id)
{
    return call(w, json_pack("{s:s, s:I}", "type", "heartbeat", "attempt_id",
                             (json_int_t)attempt_id));
}

json_t *bft_worker_metrics(bft_worker *w, int64_t attempt_id, int64_t seq,
                           json_t *records)
{
    return call(w, json_pack("{s:s, s:I, s:I, s:o}", "type", "metrics",
                             "attempt_id", (json_int_t)attempt_id, "seq",
                             (json_int_t)seq, "records", records));
}

json_t *bft_worker_checkpoint(bft_worker *w, int64_t attempt_id,
                              const char *path, int64_t step)
{
    return call(w, json_pack("{s:s, s:I, s:s, s:I}", "type", "checkpoint",
                             "attempt_id", (json_int_t)attempt_id, "path",
                             path, "step", (json_int_t)step));
}

json_t *bft_worker_done(bft_worker *w, int64_t attempt_id)
{
    return call(w, json_pack("{s:s, s:I}", "type", "job_done", "attempt_id",
                             (json_int_t)attempt_id));
}

json_t *bft_worker_failed(bft_worker *w, int64_t attempt_id,
                          const char *error)
{
    return call(w, json_pack("{s:s, s:I, s:s}", "type", "job_failed",
                             "attempt_id", (json_int_t)attempt_id, "error",
                             error));
}

json_t *bft_worker_wait_push(bft_worker *w, const char *type, int timeout_ms)
{
    for (;;) {
        size_t i;
        json_t *m;
        json_array_foreach(w->pushed, i, m)
            if (strcmp(bf_wire_type(m), type) == 0) {
                json_incref(m);
                json_array_remove(w->pushed, i);
                return m;
            }
        bf_error err;
        json_t *next = bf_rpc_recv(&w->conn, timeout_ms, &err);
        if (!next)
            return NULL;
        json_array_append_new(w->pushed, next);
    }
}

json_t *bft_train_records(int64_t first, int n)
{
    json_t *recs = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(recs, json_pack(
            "{s:s, s:I, s:f, s:f, s:f, s:f}", "type", "train", "step",
            (json_int_t)(first + i), "loss", 2.0 / (1.0 + (double)(first + i)),
            "lr", 1e-3, "grad_norm", 0.5, "tokens_per_s", 1e5));
    return recs;
}

int64_t bft_worker_lease(bft_worker *w, int64_t *job_id)
{
    /* a token of its own per ask, as bifocal-worker sends (docs/protocol.md);
     * unique in the process, so no ask repeats another's */
    static int asks;
    char token[32];
    snprintf(token, sizeof token, "fake-%d",
             __atomic_add_fetch(&asks, 1, __ATOMIC_RELAXED));
    json_t *r = bft_worker_ask(w, token);
    int64_t attempt = -1;
    if (r && strcmp(bf_wire_type(r), "job") == 0) {
        attempt = json_integer_value(json_object_get(r, "attempt_id"));
        if (job_id)
            *job_id = json_integer_value(json_object_get(r, "job_id"));
    }
    json_decref(r);
    return attempt;
}
