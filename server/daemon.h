/* The coordinator daemon's internals, shared by its three modules:
 *   net.c      libuv TCP: listening, connections, framing, writes
 *   protocol.c what each message means: dispatch to bf_store, replies,
 *              deferred acks of metrics until the flush that made them durable
 *   daemon.c   the loop: start-up, lease-expiry timer, flush check, signals
 * Everything runs on the one libuv loop thread. */
#ifndef BF_DAEMON_H
#define BF_DAEMON_H

#include <stdint.h>
#include <jansson.h>
#include <uv.h>

#include "bf_error.h"
#include "store.h"
#include "wire.h"

typedef enum { BF_ROLE_NONE = 0, BF_ROLE_WORKER = 1, BF_ROLE_CLIENT = 2 }
    bf_role;

/* An attempt leased (or re-claimed by heartbeat) through a connection, so a
 * cancel reaches the right worker and renewals can be rate-limited. */
typedef struct bf_held_attempt {
    int64_t attempt_id;
    int64_t renewed_ms;
} bf_held_attempt;

typedef struct bf_daemon bf_daemon;

typedef struct bf_conn {
    uv_tcp_t tcp;               /* first: handles are cast back to bf_conn */
    bf_daemon *d;
    struct bf_conn *prev, *next;
    uint64_t serial;            /* for log lines */
    char peer[64];
    bf_frame_reader rd;
    bf_role role;               /* BF_ROLE_NONE until a good hello */
    char name[128];             /* worker name, or "client@PEER" */
    char host[128];             /* worker host from its hello */
    int ranks;
    bf_held_attempt *held;
    int n_held, cap_held;
    json_t *pending_acks;       /* acks to send after the next flush */
    int closing;                /* no more reads or writes */
} bf_conn;

typedef struct bf_daemon_options {
    const char *db_path;
    const char *listen;         /* HOST:PORT, port 0 = any free one */
    const char *token;          /* hex token every hello must present */
    const char *port_file;      /* NULL or where to write the chosen port */
    int lease_seconds;
} bf_daemon_options;

struct bf_daemon {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t lease_timer;
    uv_check_t flush_check;
    uv_signal_t sigint, sigterm;
    uv_timer_t grace_timer;     /* cuts connections that block a stop */
    bf_store *store;
    char token[BF_TOKEN_HEX_LEN + 1];
    int64_t lease_ms;
    size_t max_frame;           /* BF_WIRE_MAX_FRAME */
    int port;                   /* the bound port */
    bf_conn *conns;             /* every open connection */
    uint64_t next_serial;
    int n_pending_acks;         /* over all connections */
    int stopping;
};

/* ---- daemon.c ------------------------------------------------------------- */

/* Opens the store, binds, arms timers and signals.  On error everything
 * opened is closed again. */
int bf_daemon_init(bf_daemon *d, uv_loop_t *loop, const bf_daemon_options *o,
                   bf_error *err);
/* Runs until SIGINT/SIGTERM (or bf_daemon_stop), then flushes and closes the
 * database.  Returns 0 on a clean stop. */
int bf_daemon_run(bf_daemon *d);
/* Starts the orderly shutdown: stop accepting, flush, close everything. */
void bf_daemon_stop(bf_daemon *d);

/* ---- net.c ---------------------------------------------------------------- */

int bf_net_listen(bf_daemon *d, const char *host_port, bf_error *err);
/* Sends msg (the reference is stolen) unless the connection is closing. */
void bf_conn_send(bf_conn *c, json_t *msg);
/* Sends msg (stolen), then closes once it is written. */
void bf_conn_fail(bf_conn *c, json_t *msg);
/* Closes now; pending writes are dropped. */
void bf_conn_close(bf_conn *c);
/* Stops accepting and closes every connection after its pending writes. */
void bf_net_shutdown(bf_daemon *d);
/* The worker connection holding attempt_id, or NULL. */
bf_conn *bf_net_find_holder(bf_daemon *d, int64_t attempt_id);

/* ---- protocol.c ----------------------------------------------------------- */

/* Handles one complete frame from c. */
void bf_protocol_handle(bf_conn *c, const char *line, size_t len);
/* Commits pending metrics and sends the acks they were waiting for. */
void bf_protocol_flush(bf_daemon *d);
/* Bookkeeping when c goes away (worker marked disconnected). */
void bf_protocol_closed(bf_conn *c);
/* Attempt tracking on a connection (used by protocol.c and net.c). */
bf_held_attempt *bf_conn_find_held(bf_conn *c, int64_t attempt_id);

#endif
