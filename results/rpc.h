/* rpc: the client's blocking TCP connection to bifocald, with request/reply
 * matching on the "id" field.  The `bifocal` commands, the tests and the
 * benchmarks drive the daemon through it; the worker has its own libuv link
 * (worker/link.h). */
#ifndef BF_RPC_H
#define BF_RPC_H

#include <stdint.h>
#include <jansson.h>

#include "bf_error.h"
#include "wire.h"

typedef struct bf_rpc {
    /* public: a test may make one of an accepted socket (fd, then
     * bf_frame_reader_init of rd) */
    int fd;                 /* -1 when closed */
    bf_frame_reader rd;
    /* private */
    int64_t next_id;        /* ids for bf_rpc_request */
} bf_rpc;

/* Connects to "HOST:PORT" (TCP_NODELAY).  On failure c->fd is -1. */
int bf_rpc_connect(bf_rpc *c, const char *host_port, bf_error *err);
void bf_rpc_close(bf_rpc *c);

/* Writes one message completely. */
int bf_rpc_send(bf_rpc *c, const json_t *msg, bf_error *err);

/* Receives the next message, waiting at most timeout_ms (< 0: forever).
 * New reference, or NULL on timeout, EOF, bad frame (err says which). */
json_t *bf_rpc_recv(bf_rpc *c, int timeout_ms, bf_error *err);

/* Called for messages that arrive while bf_rpc_request waits but are not
 * its reply (e.g. a server-initiated "cancel").  Borrowed reference. */
typedef void (*bf_rpc_push_fn)(void *ctx, const json_t *msg);

/* Sets a fresh "id" on msg (which stays the caller's), sends it and waits
 * for the message carrying that id, which it returns (new reference; an
 * "error" reply is returned too, with err filled from it).  Messages that
 * arrive meanwhile go to on_push (may be NULL: they are dropped).  NULL on
 * timeout, EOF or a bad frame. */
json_t *bf_rpc_request(bf_rpc *c, json_t *msg, int timeout_ms,
                        bf_rpc_push_fn on_push, void *ctx, bf_error *err);

/* Sends the hello and checks the reply.  role is "worker" or "client";
 * name/host/ranks matter for workers only (name/host may be NULL for
 * clients).  Returns 0, or -1 with the server's refusal in err. */
int bf_rpc_hello(bf_rpc *c, const char *token, const char *role,
                  const char *name, const char *host, int ranks,
                  bf_error *err);

#endif
