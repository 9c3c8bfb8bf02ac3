/* link: rank 0's connection to the coordinator (bifocald).
 *
 * The link runs a libuv loop in its own thread, so the network keeps going
 * while the training thread is busy: heartbeats every lease/3 keep the lease
 * alive through a long step or evaluation, queued records leave as one
 * `metrics` message every batch_ms (or as soon as batch_records are queued),
 * and a lost connection is re-established with exponential back-off.
 *
 * Nothing is lost and nothing is stored twice: every outgoing message of an
 * attempt (metrics batch, checkpoint report, job_done/job_failed) stays in an
 * ordered outbox until the coordinator acknowledges it; after a reconnect the
 * unacknowledged ones are sent again, byte for byte the same (same attempt
 * id, same seq, same records), and the store drops what it already has.
 * The final report is sent only once everything before it was acknowledged.
 *
 * Threading: the bf_link_* calls are made from ONE thread (the training
 * thread); bf_link_wake may also be called from a signal handler.  A mutex
 * guards everything the two threads share.  docs/protocol.md defines the
 * messages. */
#ifndef BF_LINK_H
#define BF_LINK_H

#include <signal.h>
#include <stdint.h>
#include <jansson.h>

#include "bf_error.h"
#include "records.h"

typedef struct bf_link bf_link;

typedef struct bf_link_opts {
    const char *server;      /* "HOST:PORT" of bifocald */
    const char *token;       /* the shared secret (token file contents) */
    const char *name;        /* worker name the coordinator shows */
    const char *host;        /* this machine's name */
    /* The trainer it runs, sent with each request_job so the coordinator
     * leases only that trainer's jobs (docs/trainers.md); NULL: builtin. */
    const char *trainer;
    int ranks;               /* ranks in the group */
    int batch_ms;            /* flush queued records this often (0: 200) */
    int batch_records;       /* ... or once this many are queued (0: 500) */
    int backoff_min_ms;      /* first reconnect delay (0: 100) */
    int backoff_max_ms;      /* longest reconnect delay (0: 5000) */
    /* When not NULL and set (by a signal handler, which then calls
     * bf_link_wake), bf_link_request_job and bf_link_sleep return
     * BF_LINK_INTERRUPTED. */
    const volatile sig_atomic_t *interrupt;
} bf_link_opts;

/* Results of the blocking calls and of bf_link_attempt_state. */
enum {
    BF_LINK_OK = 0,
    BF_LINK_ERR = -1,          /* the coordinator refused us (err says why) */
    BF_LINK_FENCED = -2,       /* the attempt's lease is lost */
    BF_LINK_INTERRUPTED = -3,  /* opts.interrupt was set */
    BF_LINK_TIMEOUT = -4,
    BF_LINK_CANCELLED = -5     /* the coordinator cancelled the job */
};

/* Copies opts (strings included) and starts the network thread, which
 * connects and says hello in the background.  Fails only on bad opts. */
int bf_link_start(bf_link **out, const bf_link_opts *opts, bf_error *err);

/* Stops the thread at once (whatever is unsent is dropped) and frees. */
void bf_link_stop(bf_link *l);

/* Tells the coordinator that the live attempt's recorded checkpoint `path`
 * would not load (`why`), so the job stops resuming from it.  Queued like
 * a checkpoint report (sent once everything before it is acknowledged). */
void bf_link_checkpoint_bad(bf_link *l, const char *path, const char *why);

/* Makes the network thread look at the shared state now; async-signal-safe. */
void bf_link_wake(bf_link *l);

/* What a `no_job` answer says (docs/protocol.md). */
typedef struct bf_link_no_job {
    int retry_ms;   /* when to ask again */
    int pending;    /* jobs wait on jobs running now: work may come */
} bf_link_no_job;

/* Asks for a job and waits for the answer, across reconnects.  Returns 1
 * with *job = the `job` message (new reference: job_id, attempt_id, config,
 * resume_checkpoint, ...), 0 when nothing is queued (*none says when to
 * ask again and whether work may come), or BF_LINK_ERR /
 * BF_LINK_INTERRUPTED.  A job with a field missing or out of range
 * (attempt_id 0, a string id, ...) is refused with an error in the log and
 * counts as no job. */
int bf_link_request_job(bf_link *l, json_t **job, bf_link_no_job *none,
                        bf_error *err);

/* Waits ms milliseconds: BF_LINK_OK, or BF_LINK_INTERRUPTED / BF_LINK_ERR
 * early. */
int bf_link_sleep(bf_link *l, int ms);

/* Starts streaming for a leased attempt: from now on records are queued for
 * it and heartbeats renew its lease every lease_seconds/3. */
void bf_link_begin_attempt(bf_link *l, int64_t attempt_id, int lease_seconds);

/* Queues one trainer record, routed by its kind (common/records.h; the
 * link copies what it keeps): a record of BF_ROUTE_METRICS goes into
 * metrics batches as its JSON, a checkpoint record becomes a `checkpoint`
 * message sent once the metrics queued before it were acknowledged, and
 * the "done" record is dropped (bf_link_finish_attempt reports the end).
 * Never waits for the network.  Dropped when no attempt is live or it is
 * fenced. */
void bf_link_emit(bf_link *l, const bf_record *record);

/* Whether the live attempt should stop: BF_LINK_OK (keep going),
 * BF_LINK_CANCELLED or BF_LINK_FENCED.  Cheap; called once per step. */
int bf_link_attempt_state(bf_link *l);

/* How long the link has been without a connection to the coordinator
 * (milliseconds; 0 while connected, since the start before the first). */
int64_t bf_link_offline_ms(bf_link *l);

/* Ends the attempt: sends what is queued, waits until every message before
 * was acknowledged, then sends job_done (error NULL) or job_failed{error}
 * (with "permanent": true when permanent: the job fails at once instead of
 * being retried) and waits for its acknowledgement.  timeout_ms < 0 waits for as long as it
 * takes (reconnecting meanwhile), or once opts.interrupt is set, 3 s more at
 * most.  Returns BF_LINK_OK, BF_LINK_FENCED (the
 * lease was lost: nothing more is reported), BF_LINK_TIMEOUT or BF_LINK_ERR.
 * Either way the attempt is over: whatever is left of its outbox is
 * dropped and its heartbeats stop. */
int bf_link_finish_attempt(bf_link *l, const char *error, int permanent,
                           int timeout_ms, bf_error *err);

/* bf_link_finish_attempt for job_id, its result logged (fenced, timed out,
 * refused, or the failure reported).  The job loops of group.c and exec.c
 * end each attempt with it. */
void bf_link_report(bf_link *l, int64_t job_id, const char *error,
                    int permanent, int timeout_ms);

/* Installs SIGTERM/SIGINT handlers that set *flag to the signal and wake
 * `l` (NULL: none; call again with NULL before bf_link_stop), so a
 * blocking call sees opts.interrupt at once. */
void bf_link_catch_stop_signals(volatile sig_atomic_t *flag, bf_link *l);

/* Counters for tests and logs (a snapshot). */
typedef struct bf_link_stats {
    int64_t connects;        /* hellos acknowledged */
    int64_t messages_sent;   /* outbox messages written, resends included */
    int64_t messages_resent; /* of which were resends after a reconnect */
    int64_t records_acked;   /* records in acknowledged metrics messages */
} bf_link_stats;
void bf_link_get_stats(bf_link *l, bf_link_stats *out);

#endif
