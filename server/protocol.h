/* protocol: what each message means (docs/protocol.md is the reference).
 * It serves the connections of a bf_net through bf_protocol_callbacks:
 * every frame is parsed, checked against the connection's role, handed to
 * its handler, which calls the store and replies.  Acks of metrics wait
 * for the flush that makes their batch durable. */
#ifndef BF_PROTOCOL_H
#define BF_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "chore.h"
#include "holders.h"
#include "net.h"
#include "queries.h"
#include "store.h"
#include "submit.h"
#include "wire.h"

#define BF_PROTOCOL_MAX_ERRORS 100

typedef struct bf_protocol {
    /* public */
    /* A connection is closed after this many protocol errors in a row
     * (bad JSON, unknown types, bad fields); 0: never.  Default
     * BF_PROTOCOL_MAX_ERRORS. */
    int max_protocol_errors;
    size_t max_frame;           /* after a good hello: BF_WIRE_MAX_FRAME */
    /* read-only */
    bf_net *net;                /* the connections served */
    bf_store *store;
    char token[BF_TOKEN_HEX_LEN + 1];   /* every hello must present it */
    int64_t lease_ms;
    /* private */
    bf_holders holders;         /* which connection holds each attempt */
    bf_queries queries;         /* client queries, off the loop */
    bf_submits submits;         /* sweeps being expanded and stored */
    bf_chores chores;           /* slices of big work, a slice per pass */
    int settling;               /* the chore of bf_store_settle is queued */
    int64_t settle_after_ms;    /* not before (monotonic), after a failure */
    int n_pending_acks;         /* over all connections */
} bf_protocol;

/* For bf_net_listen, with the bf_protocol as its data. */
extern const bf_net_callbacks bf_protocol_callbacks;

/* Serves net's connections on loop with store (its database at db_path,
 * opened again read-only for queries off the loop), and finishes the
 * sweep cancels a stopped daemon left half-done (cancels.h). */
void bf_protocol_init(bf_protocol *p, uv_loop_t *loop, bf_net *net,
                      bf_store *store, const char *db_path, const char *token,
                      int64_t lease_ms);
/* Commits pending metrics and sends the acks that waited for it (or, if
 * the commit failed, `store` errors in their place); queues the chore
 * that moves dependents on when the store has some left (store.h). */
void bf_protocol_flush(bf_protocol *p);

/* Cancels the submissions whose submitters have disconnected (called
 * with the lease timer: a cancel is noticed within a second). */
void bf_protocol_check_submitters(bf_protocol *p);
/* The daemon is stopping: a sweep being stored stops (submit.h), and so
 * do the chores (chore.h). */
void bf_protocol_stop(bf_protocol *p);
/* Frees what the protocol holds; its connections are closed already and
 * nothing runs off the loop any more. */
void bf_protocol_free(bf_protocol *p);

#endif
