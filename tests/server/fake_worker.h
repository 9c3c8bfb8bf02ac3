/* A protocol-level test worker: speaks the worker side of the wire protocol
 * (docs/protocol.md) without training anything, so tests control exactly
 * which message arrives when. */
#ifndef BF_TEST_FAKE_WORKER_H
#define BF_TEST_FAKE_WORKER_H

#include <stdint.h>
#include <jansson.h>

#include "harness.h"

typedef struct bft_worker {
    bf_rpc conn;
    json_t *pushed;          /* server-initiated messages seen (e.g. cancel) */
} bft_worker;

int bft_worker_connect(bft_worker *w, bft_daemon *d, const char *name);
void bft_worker_close(bft_worker *w);

/* Each returns the server's reply (new reference) or NULL on no reply. */
json_t *bft_worker_request_job(bft_worker *w);
/* request_job naming the ask's token (docs/protocol.md) */
json_t *bft_worker_ask(bft_worker *w, const char *request);
/* A request_job naming the worker's trainer (docs/trainers.md). */
json_t *bft_worker_ask_trainer(bft_worker *w, const char *trainer);
json_t *bft_worker_heartbeat(bft_worker *w, int64_t attempt_id);
json_t *bft_worker_metrics(bft_worker *w, int64_t attempt_id, int64_t seq,
                           json_t *records /* stolen */);
json_t *bft_worker_checkpoint(bft_worker *w, int64_t attempt_id,
                              const char *path, int64_t step);
json_t *bft_worker_done(bft_worker *w, int64_t attempt_id);
json_t *bft_worker_failed(bft_worker *w, int64_t attempt_id,
                          const char *error);

/* Waits up to timeout_ms for a server-initiated message of this type
 * (already seen ones count).  New reference or NULL. */
json_t *bft_worker_wait_push(bft_worker *w, const char *type, int timeout_ms);

/* n train records for steps first..first+n-1 (4 metric rows each). */
json_t *bft_train_records(int64_t first, int n);

/* Leases a job, asking under a fresh request token, and returns its
 * attempt id (job id in *job_id), or -1. */
int64_t bft_worker_lease(bft_worker *w, int64_t *job_id);

#endif
