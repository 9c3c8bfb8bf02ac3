/* conn: the client's blocking TCP connection to bifocald, with request/reply
 * matching on the "id" field.  The `bifocal` commands, the tests and the
 * benchmarks drive the daemon through it; the worker has its own libuv link
 * (worker/link.h). */
#ifndef BF_CONN_H
#define BF_CONN_H

#include <stdint.h>
#include <jansson.h>

#include "bf_error.h"
#include "wire.h"

typedef struct bf_wire_conn {
    /* public: a test may make one of an accepted socket (fd, then
     * bf_frame_reader_init of rd) */
    int fd;                 /* -1 when closed */
    bf_frame_reader rd;
    /* private */
    int64_t next_id;        /* ids for bf_wire_request */
} bf_wire_conn;

/* Connects to "HOST:PORT" (TCP_NODELAY).  On failure c->fd is -1. */
int bf_wire_connect(bf_wire_conn *c, const char *host_port, bf_error *err);
void bf_wire_close(bf_wire_conn *c);

/* Writes one message completely. */
int bf_wire_send(bf_wire_conn *c, const json_t *msg, bf_error *err);

/* Receives the next message, waiting at most timeout_ms (< 0: forever).
 * New reference, or NULL on timeout, EOF, bad frame (err says which). */
json_t *bf_wire_recv(bf_wire_conn *c, int timeout_ms, bf_error *err);

/* Called for messages that arrive while bf_wire_request waits but are not
 * its reply (e.g. a server-initiated "cancel").  Borrowed reference. */
typedef void (*bf_wire_push_fn)(void *ctx, const json_t *msg);

/* Sets a fresh "id" on msg (which stays the caller's), sends it and waits
 * for the message carrying that id, which it returns (new reference; an
 * "error" reply is returned too, with err filled from it).  Messages that
 * arrive meanwhile go to on_push (may be NULL: they are dropped).  NULL on
 * timeout, EOF or a bad frame. */
json_t *bf_wire_request(bf_wire_conn *c, json_t *msg, int timeout_ms,
                        bf_wire_push_fn on_push, void *ctx, bf_error *err);

/* Sends the hello and checks the reply.  role is "worker" or "client";
 * name/host/ranks matter for workers only (name/host may be NULL for
 * clients).  Returns 0, or -1 with the server's refusal in err. */
int bf_wire_hello(bf_wire_conn *c, const char *token, const char *role,
                  const char *name, const char *host, int ranks,
                  bf_error *err);

#endif
