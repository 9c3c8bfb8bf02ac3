/* daemon: the coordinator's event loop, which bifocald's main runs.  It
 * owns the store, the transport (net.h) and the protocol (protocol.h) that
 * serves the transport's connections, and runs beside them
 *   - a timer that expires overdue leases (re-queueing their jobs),
 *   - a check handle, run once per loop iteration after all I/O callbacks,
 *     that commits the metrics ingested during the iteration in one
 *     transaction and then sends their acks,
 *   - SIGINT/SIGTERM handlers for an orderly stop.
 * Everything runs on the one libuv loop thread. */
#ifndef BF_DAEMON_H
#define BF_DAEMON_H

#include <stdint.h>
#include <uv.h>

#include "bf_error.h"
#include "net.h"
#include "protocol.h"
#include "store.h"

typedef struct bf_daemon_options {
    const char *db_path;
    const char *listen;         /* HOST:PORT, port 0 = any free one */
    const char *token;          /* hex token every hello must present */
    const char *port_file;      /* NULL or where to write the chosen port */
    int lease_seconds;
    bf_net_limits limits;       /* what strangers may do (net.h) */
    int max_protocol_errors;    /* in a row, then closed; 0: never */
    /* > 0: the database's lock (db_lock.h), told the bound address before
     * the port file is written */
    int lock_fd;
} bf_daemon_options;

typedef struct bf_daemon {
    /* private */
    uv_loop_t *loop;
    bf_store *store;
    bf_net net;
    bf_protocol protocol;
    uv_timer_t lease_timer;
    uv_check_t flush_check;
    uv_signal_t sigint, sigterm;
    uv_timer_t grace_timer;     /* cuts connections that block a stop */
    int stopping;
} bf_daemon;

/* Opens the store, binds, arms timers and signals.  On error everything
 * opened is closed again. */
int bf_daemon_init(bf_daemon *d, uv_loop_t *loop, const bf_daemon_options *o,
                   bf_error *err);
/* Runs until SIGINT/SIGTERM, then stops in order (stop accepting, flush,
 * let the replies drain) and closes the database.  Returns 0 on a clean
 * stop. */
int bf_daemon_run(bf_daemon *d);

#endif
