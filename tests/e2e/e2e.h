/* End-to-end helpers: real worker groups (mpirun + bifocal-worker) against
 * the real bifocald of tests/server/harness.h.  Binaries come from the
 * environment set by tests/e2e/meson.build: BIFOCALD, BIFOCAL,
 * BIFOCAL_WORKER and MPIRUN. */
#ifndef BF_TEST_E2E_H
#define BF_TEST_E2E_H

#include <sys/types.h>
#include <jansson.h>

#include "harness.h"

/* cmocka fixtures: *state is a bft_daemon for the test to start; the
 * teardown kills every group still running and the daemon, pass or fail
 * (a failed assertion skips the rest of the test). */
int e2e_setup(void **state);
int e2e_teardown(void **state);

/* Starts `mpirun -np np bifocal-worker --server ... --token-file ...
 * --checkpoint-dir DIR/ck --name tag ARGS...` (NULL-terminated) in its own
 * process group, output in DIR/<tag>.log.  Returns the pid or -1. */
pid_t e2e_group_start(const bft_daemon *d, int np, const char *tag, ...)
    __attribute__((sentinel));

/* Starts `bifocal-worker --server ... --token-file ... --name tag
 * --work-dir DIR/exec ARGS...` (NULL-terminated; an --exec worker, no
 * mpirun) in its own process group, output in DIR/<tag>.log, with
 * BIFOCAL_TOKEN_FILE set (the worker must not hand it on).  Returns the
 * pid or -1; e2e_group_wait and e2e_group_kill take it. */
pid_t e2e_exec_start(const bft_daemon *d, const char *tag, ...)
    __attribute__((sentinel));

/* Waits for the group to exit: its status (128+N if killed by signal N), or
 * -1 after timeout_ms (the group is then killed). */
int e2e_group_wait(pid_t pid, int timeout_ms);

/* kill -9 of the whole group (mpirun and every rank), then reaps it. */
void e2e_group_kill(pid_t pid);

/* Polls `sqlite3 DB SQL` (one integer) until it is >= at_least or
 * timeout_ms passed; returns the last value. */
long long e2e_wait_sql(bft_daemon *d, const char *sql, long long at_least,
                       int timeout_ms);

/* The text of the first column of sql's first row on d's database, in
 * buf ("" when none, or when the query fails: then said on stderr). */
void e2e_sql_text(const bft_daemon *d, const char *sql, char *buf, size_t cap);

/* `bifocal report SWEEP --json` of d's sweep, read back (new reference),
 * or NULL when the command or the file failed. */
json_t *e2e_report_json(bft_daemon *d, const char *sweep);

/* Whether the group log DIR/<tag>.log contains text. */
int e2e_log_contains(const bft_daemon *d, const char *tag, const char *text);

/* The text of the example configs/NAME from the source tree
 * (BF_SOURCE_ROOT), malloc'd; fails the test when it cannot be read. */
char *e2e_example(const char *name);

/* Rows a schedule "every `every` steps and at the end" produces over
 * steps 1..steps (every <= 0: only at the end). */
int e2e_scheduled(int steps, int every);

/* Milliseconds on a monotonic clock. */

#endif
