/* Test harness for the coordinator: runs the real bifocald binary on
 * loopback with a real database in a temporary directory, and talks to it
 * with the wire library.  The binaries come from the environment, set by
 * tests/server/meson.build: BIFOCALD (daemon) and BIFOCAL (client).
 * The daemon logs at BFT_DAEMON_LOG_LEVEL (default debug) into DIR/daemon.log;
 * BFT_KEEP=1 keeps the directory for a look after a failure. */
#ifndef BF_TEST_HARNESS_H
#define BF_TEST_HARNESS_H

#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include <sqlite3.h>

#include "rpc.h"

typedef struct bft_daemon {
    char dir[256];           /* temporary directory, removed by cleanup */
    char db[320], token_file[320], port_file[320], log[320];
    char addr[64];           /* 127.0.0.1:PORT */
    char token[BF_TOKEN_HEX_LEN + 1];
    int lease_seconds;
    /* More bifocald options (NULL-terminated), for every start: set them
     * before bft_daemon_start_with or a restart. */
    const char *extra_args[16];
    pid_t pid;               /* 0 when not running */
} bft_daemon;

/* Makes a fresh directory and starts a daemon in it.  0 or -1. */
int bft_daemon_start(bft_daemon *d, int lease_seconds);
/* The same with more options for bifocald: NULL-terminated, e.g.
 * bft_daemon_start_with(d, 30, "--hello-failures", "0", NULL). */
int bft_daemon_start_with(bft_daemon *d, int lease_seconds, ...)
    __attribute__((sentinel));
/* Stops d with SIGTERM, which must end it cleanly (exit 0: returns 0),
 * and removes its directory. */
int bft_stop_and_clean(bft_daemon *d);
/* Closes the n connections c[0..n). */
void bft_close_all(bf_rpc *c, int n);
/* Starts again on the same database (after a stop), on a new port. */
int bft_daemon_restart(bft_daemon *d);
/* Starts again on the same database AND the same port (for peers that only
 * know HOST:PORT, such as worker groups). */
int bft_daemon_restart_same_port(bft_daemon *d);
/* Sends sig and waits; returns the exit status (128+N if killed by N). */
int bft_daemon_stop(bft_daemon *d, int sig);
/* CPU seconds (user + system) the running daemon has used so far; -1 if
 * unknown.  Benchmarks print it: wall time on a shared machine is noisy. */
double bft_daemon_cpu_seconds(const bft_daemon *d);
/* A memory figure of process pid from /proc/PID/status, in KiB: field is
 * "VmRSS" (resident now) or "VmHWM" (its peak); -1 if unknown. */
long bft_proc_status_kib(pid_t pid, const char *field);
/* Stops a running daemon (SIGKILL) and removes the directory. */
void bft_daemon_cleanup(bft_daemon *d);

/* cmocka fixtures: *state is a started daemon (malloc'd) with a 30 s or a
 * 1 s lease; the teardown fails the test unless it stops cleanly on
 * SIGTERM, then removes it. */
int bft_daemon_setup(void **state);
int bft_daemon_setup_short_lease(void **state);
int bft_daemon_teardown(void **state);
/* A cmocka test with a fresh 30 s-lease daemon of its own. */
#define BFT_DAEMON_TEST(f) \
    cmocka_unit_test_setup_teardown(f, bft_daemon_setup, bft_daemon_teardown)

/* Connects; for role "worker" or "client" also says hello (name used for
 * workers).  role NULL: no hello.  0 or -1. */
int bft_connect(bft_daemon *d, bf_rpc *c, const char *role,
                const char *name);
/* Connects from source address src_ip (any of 127.0.0.0/8 on loopback:
 * each is another peer to the daemon's per-address limits), no hello.
 * 0 or -1. */
int bft_connect_from(bft_daemon *d, bf_rpc *c, const char *src_ip);
/* Sends msg (stolen) with an id and returns the reply (5 s timeout). */
json_t *bft_request(bf_rpc *c, json_t *msg);
/* Whether reply r (stolen, may be NULL) is of this type; says what it was
 * instead on stderr.  For `assert_true(bft_reply_is(r, "ack"))`. */
int bft_reply_is(json_t *r, const char *type);
/* Whether a fresh client connection still gets its status request answered
 * (a status reply with a sweeps array): the daemon is up and serving. */
int bft_serves_status(bft_daemon *d);
/* Whether the next message on c is an error with this code and the
 * daemon then closes c (within 5 s each); says what came instead on
 * stderr.  For `assert_true(bft_refused_with(&c, "auth"))`. */
int bft_refused_with(bf_rpc *c, const char *code);
/* Sends raw bytes. */
int bft_send_raw(bf_rpc *c, const char *bytes, size_t n);
/* Sends a client hello with this token on c, without waiting. */
void bft_send_hello(bf_rpc *c, const char *token);
/* Whether a hello with this token on a fresh connection from src_ip is
 * answered with an ack: 1, or with an error: 0 (its code in code, 32 bytes;
 * "" when no answer came within wait_ms). */
int bft_hello_from(bft_daemon *d, const char *src_ip, const char *token,
                   int wait_ms, char *code);
/* How many lines of the daemon's log hold needle. */
int bft_log_lines_with(bft_daemon *d, const char *needle);
/* How many lines of the file at path hold needle; -1 when it cannot be
 * read. */
int bft_file_lines_with(const char *path, const char *needle);
/* The number right after the last occurrence of prefix in the file at
 * path ("allocations counted: " in a log), or -1 when there is none. */
long bft_file_number_after(const char *path, const char *prefix);

/* Submits a sweep as a client; returns the sweep id (> 0) or -1 with the
 * error reply in *error_out (may be NULL; caller decrefs). */
int64_t bft_submit(bft_daemon *d, const char *filename, const char *yaml,
                   int *n_jobs, json_t **error_out);

/* The integer in the first column of the first row sql returns on db, an
 * open connection to a daemon's database; -1 (saying why on stderr) when
 * the query fails or returns no row. */
long long bft_db_int(sqlite3 *db, const char *sql);

/* Runs `sqlite3 DB SQL` with the real CLI and returns the single integer it
 * prints, or -1. */
long long bft_sql_int(bft_daemon *d, const char *sql);

/* Runs the client binary with the daemon's address and token; its stdout
 * and stderr land in *out / *err (malloc'd, caller frees; may be NULL).
 * Returns the exit status. */
int bft_run_client(bft_daemon *d, char **out, char **err, const char *arg,
                   ...) __attribute__((sentinel));

/* Writes text to DIR/name and returns the path (static buffer). */
const char *bft_write_file(bft_daemon *d, const char *name, const char *text);

/* The value of environment variable env (a binary's path); exits with 2 if
 * it is unset or empty, since no test can run without it. */
const char *bft_env_path(const char *env);


#endif
