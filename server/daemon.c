/* daemon: start-up, the timers and signals of daemon.h, and the orderly
 * stop. */
#include "daemon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "db_lock.h"
#include "file.h"
#include "log.h"
#include "stream.h"

/* How long a stopping daemon waits for replies to drain before it cuts
 * connections that do not read. */
#define BF_SHUTDOWN_GRACE_MS 2000

static void on_lease_timer(uv_timer_t *t)
{
    bf_daemon *d = t->data;
    int n = 0;
    bf_error err = {0};
    if (bf_store_expire_leases(d->store, bf_wall_ms(), &n, &err))
        bf_log_error("lease expiry failed: %s", err.msg);
    else if (n > 0)
        bf_log_info("expired %d lease%s", n, n == 1 ? "" : "s");
    bf_protocol_check_submitters(&d->protocol);
}

static void on_flush_check(uv_check_t *h)
{
    bf_daemon *d = h->data;
    bf_protocol_flush(&d->protocol);
}

static void on_grace_timer(uv_timer_t *t)
{
    bf_daemon *d = t->data;
    bf_net_close_all(&d->net);
}

/* The orderly shutdown: stop accepting, flush, close everything. */
static void stop(bf_daemon *d)
{
    if (d->stopping)
        return;
    d->stopping = 1;
    bf_protocol_flush(&d->protocol);   /* acks for what is durable go out */
    bf_protocol_stop(&d->protocol);
    uv_close((uv_handle_t *)&d->lease_timer, NULL);
    uv_close((uv_handle_t *)&d->flush_check, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    bf_net_shutdown(&d->net);
    uv_timer_start(&d->grace_timer, on_grace_timer, BF_SHUTDOWN_GRACE_MS, 0);
}

static void on_signal(uv_signal_t *h, int signum)
{
    bf_daemon *d = h->data;
    bf_log_info("received %s, stopping", strsignal(signum));
    stop(d);
}

/* Replaced atomically, so a reader polling for the file never sees it
 * half-written, and it names the port of this daemon after a crash. */
static int write_port_file(const char *path, int port, bf_error *err)
{
    char line[16];
    int n = snprintf(line, sizeof line, "%d\n", port);
    return bf_write_file_atomic(path, line, (size_t)n, err);
}

/* Starts the lease timer, the flush check and the signal handlers. */
static void arm(bf_daemon *d, int64_t lease_ms)
{
    /* Expiry is checked twice per lease period (at most once a second), so
     * a dead worker's job is back in the queue within 1.5 lease periods. */
    int64_t every = lease_ms / 2 < 1000 ? lease_ms / 2 : 1000;
    if (every < 100)
        every = 100;
    uv_timer_init(d->loop, &d->lease_timer);
    d->lease_timer.data = d;
    uv_timer_start(&d->lease_timer, on_lease_timer, 0, (uint64_t)every);
    uv_check_init(d->loop, &d->flush_check);
    d->flush_check.data = d;
    uv_check_start(&d->flush_check, on_flush_check);
    uv_signal_init(d->loop, &d->sigint);
    uv_signal_init(d->loop, &d->sigterm);
    d->sigint.data = d->sigterm.data = d;
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    /* Armed only while stopping; unreferenced so it never keeps a loop
     * whose connections are all closed alive. */
    uv_timer_init(d->loop, &d->grace_timer);
    d->grace_timer.data = d;
    uv_unref((uv_handle_t *)&d->grace_timer);
}

int bf_daemon_init(bf_daemon *d, uv_loop_t *loop, const bf_daemon_options *o,
                   bf_error *err)
{
    /* libuv allocates under the one out-of-memory policy too. */
    bf_stream_use_allocator();
    memset(d, 0, sizeof *d);
    d->loop = loop;
    int64_t lease_ms = (int64_t)o->lease_seconds * 1000;
    if (bf_store_open(&d->store, o->db_path, err))
        return -1;
    bf_protocol_init(&d->protocol, loop, &d->net, d->store, o->db_path,
                     o->token, lease_ms);
    d->protocol.max_protocol_errors = o->max_protocol_errors;
    int listening = bf_net_listen(&d->net, loop, o->listen, &o->limits,
                                  &bf_protocol_callbacks, &d->protocol,
                                  err) == 0;
    if (!listening) {
        bf_protocol_stop(&d->protocol);
        uv_run(loop, UV_RUN_DEFAULT);   /* lets the closes complete */
        bf_protocol_free(&d->protocol);
        bf_store_close(d->store);
        d->store = NULL;
        return -1;
    }
    if (o->lock_fd > 0)
        bf_db_lock_describe(o->lock_fd, o->listen, d->net.port);
    /* Armed before the port file says the daemon is up: a SIGTERM sent the
     * moment it appears must be an orderly stop, not a death. */
    arm(d, lease_ms);
    if (o->port_file && write_port_file(o->port_file, d->net.port, err)) {
        stop(d);
        bf_daemon_run(d);
        return -1;
    }
    bf_log_info("listening on port %d, database %s, lease %d s", d->net.port,
                o->db_path, o->lease_seconds);
    return 0;
}

int bf_daemon_run(bf_daemon *d)
{
    uv_run(d->loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&d->grace_timer, NULL);
    uv_run(d->loop, UV_RUN_DEFAULT);
    bf_protocol_free(&d->protocol);
    bf_store_close(d->store);
    d->store = NULL;
    bf_log_info("stopped");
    return 0;
}
