/* bf_store: the coordinator's persistence module, the only code that touches
 * SQLite.  Everything the daemon knows lives in the database file, so a
 * restarted daemon continues exactly where the last one stopped.
 *
 * Threading: one bf_store is used from one thread (the libuv loop).
 * Time: callers pass `now_ms` (milliseconds since the Unix epoch) so tests
 * can drive lease expiry without sleeping.
 * Strings returned in structs are heap-allocated and owned by the struct;
 * free them with the matching *_clear function.  json_t results are new
 * references the caller must json_decref.
 *
 * Errors: one channel.  Every call that can fail takes a `bf_error *err`
 * (may be NULL) and fills it when it returns an error code: what failed,
 * with SQLite's message and result code, or what in the input is wrong.
 *
 * Write batching: metric ingest (bf_store_ingest) writes into an open
 * transaction that bf_store_flush commits; the daemon acknowledges a metrics
 * message only after the flush that made it durable.  Every other mutating
 * call commits before it returns (flushing pending metrics first). */
#ifndef BF_STORE_H
#define BF_STORE_H

#include <stdint.h>
#include <jansson.h>

#include "bf_error.h"
#include "sweep.h"

typedef struct bf_store bf_store;

/* Result codes beyond 0 / -1. */
enum {
    BF_STORE_OK = 0,
    BF_STORE_ERR = -1,
    BF_STORE_FENCED = -2,   /* attempt is no longer the live lease of its job */
    BF_STORE_NOT_FOUND = -3,
    /* The database failed (disk full, I/O error), not the input: the same
     * call may succeed later (bf_store_ingest; the daemon replies `store`,
     * which workers retry, not `bad_records`, which they drop). */
    BF_STORE_DB_FAILED = -4,
    /* The request conflicts with the current state (bf_store_lease_next:
     * the worker already holds a live attempt); err says which. */
    BF_STORE_CONFLICT = -5,
    /* The input contradicts what the store knows (a checkpoint step past
     * the job's steps); err says how. */
    BF_STORE_INVALID = -6
};

/* The WAL file is truncated to this size whenever a checkpoint resets it
 * (journal_size_limit): a reader holding a transaction lets it grow, but
 * not for good. */
#define BF_STORE_WAL_LIMIT ((int64_t)64 << 20)

/* Opens (creating if needed) the database, sets WAL, foreign keys and a busy
 * timeout, and applies the migrations of schema/ up to the newest.  A
 * database newer than this binary is refused with a clear message. */
int bf_store_open(bf_store **out, const char *path, bf_error *err);
void bf_store_close(bf_store *s);   /* flushes, closes cleanly */

/* A read-only connection to the database of a running store, for queries
 * made on another thread than the store's (bifocald's thread pool): WAL
 * lets it read the last committed state while the store writes.  Only the
 * queries below ("queries for the client") may be run on it, each reader
 * from one thread at a time.  Close it with bf_store_close. */
int bf_store_open_reader(bf_store **out, const char *path, bf_error *err);

/* The user_version this binary migrates to. */
int bf_store_schema_version(void);

/* ---- sweeps -------------------------------------------------------------- */

/* How a sweep file is taken (NULL: the defaults, all zero). */
typedef struct bf_submit_opts {
    const char *dir;   /* the file's folder (absolute): a relative init_from
                          is joined to it; NULL: a relative one is refused */
    int strict;        /* a sweep with warnings is rejected */
} bf_submit_opts;

/* Parses, expands and validates a sweep file (YAML), then stores the sweep
 * verbatim and all its jobs in one transaction: a job of a later stage is
 * 'waiting' for its source job, every other one 'queued'.  Any invalid job
 * rejects the whole sweep (err names file, line, field and value) and
 * stores nothing: BF_STORE_ERR; so does a warning with opts->strict.
 * BF_STORE_DB_FAILED when the database failed instead (disk full): the
 * sweep was not at fault.  *warnings (may be NULL) gets the sweep's
 * warnings (sweep.h), also stored with it: a new reference to an array of
 * strings, after success or a --strict rejection; NULL otherwise. */
int bf_store_submit_sweep(bf_store *s, const char *filename, const char *text,
                          size_t len, const bf_submit_opts *opts,
                          int64_t now_ms, int64_t *sweep_id, int *n_jobs,
                          json_t **warnings, bf_error *err);

/* Staged submission: a sweep too big to store in one go without holding
 * the daemon's loop for seconds is stored a chunk of jobs per transaction.
 * Until its last chunk, its row has n_jobs = 0: such a sweep is not there
 * for leasing, lookups by id and the client's queries (bf_store_status,
 * bf_store_jobs, ...), and bf_store_open discards what a killed daemon
 * left of one.  So, as with bf_store_submit_sweep, a sweep is all there
 * or not at all.  The caller parses and expands the sweep (validating it
 * whole first, so that only a database failure can stop it half-way). */
typedef struct bf_job_row {
    int64_t index;
    char *config_json;             /* canonical JSON; owned by the caller */
    char hash_hex[17];
    const char *task, *rope;       /* static names */
    char trainer[BF_TRAINER_NAME_MAX];   /* a copy: rows outlive the job;
                                            "": builtin */
    const char *stage;             /* the sweep's (NULL without stages) */
    size_t source;                 /* a job index, or BF_SWEEP_NO_SOURCE */
    size_t cell;                   /* bf_sweep_job's */
    int held;                      /* bf_sweep_job's: stored waiting */
    size_t trial, trial_group;     /* bf_sweep_job's */
    const bf_sweep_prune *prune;   /* bf_sweep_job's (borrowed) */
    const bf_sweep_select *select; /* bf_sweep_job's (borrowed) */
    const char *from_stage;        /* bf_sweep_job's (borrowed) */
    size_t from_group;
    const char *from_fields;       /* bf_sweep_job's (borrowed) */
    int depth, learnable_heads;
    int64_t seed;
} bf_job_row;

/* row describes job (borrowing its config_json). */
void bf_job_row_from(bf_job_row *row, const bf_sweep_job *job);

typedef struct bf_stage {
    /* public: set by the caller, constant while staging; all borrowed */
    const bf_sweep *sweep;
    const char *filename, *text;
    size_t len;
    int64_t now_ms;
    /* read-only: kept by bf_store_stage_jobs: 0 until the first chunk made
     * the row; the ids of the jobs stored, by index (bf_stage_clear frees
     * them). */
    int64_t sweep_id;
    size_t n_stored;
    int64_t *job_ids;
} bf_stage;

/* Work on many rows is done in slices bounded by time, not by a count of
 * rows: a call given deadline_us (bf_monotonic_us(); 0: none) stops at
 * the first row boundary past it and commits what it did, so one slice
 * holds the daemon's loop about as long in a slow build (ASan, a loaded
 * machine) as in a fast one.  Every call does at least one row, so
 * repeated calls always finish. */

/* Stores jobs of stage from rows[0..n) in one transaction (the first call
 * also the sweep's row) until deadline_us, setting *n_done (>= 1 unless n
 * is 0, which only a last call may be) to how many; last: rows ends the sweep, which becomes visible, with its
 * warnings, in the transaction that stores the last of them (stage->sweep
 * is expanded by then).  A job of a later stage waits for its source,
 * which an earlier call (or this one) stored.  A sweep stored by one call
 * is thus stored exactly like bf_store_submit_sweep stores it.
 * BF_STORE_DB_FAILED (err says why) when the database failed: nothing of
 * this call was stored, and the staged sweep must be discarded. */
int bf_store_stage_jobs(bf_store *s, bf_stage *stage, const bf_job_row *rows,
                        size_t n, int last, int64_t deadline_us,
                        size_t *n_done, bf_error *err);

/* Frees what bf_store_stage_jobs kept in stage. */
void bf_stage_clear(bf_stage *stage);

/* Deletes jobs of a staged sweep (never of a visible one) until
 * deadline_us, and the sweep's row with its last job.  1: more remain,
 * 0: gone, -1 on error. */
int bf_store_discard_staged(bf_store *s, int64_t sweep_id, int64_t deadline_us,
                            bf_error *err);

/* The refusal of a strict submission with these warnings (a non-empty
 * array of strings), in err; returns -1. */
int bf_store_strict_refusal(const char *filename, const json_t *warnings,
                            bf_error *err);

/* ---- the queue ----------------------------------------------------------- */

typedef struct bf_lease {
    int64_t job_id, attempt_id, sweep_id;
    int attempt_no;          /* 1 for the first attempt of the job */
    char *config_json;       /* canonical job config */
    char *resume_checkpoint; /* latest checkpoint reported, or NULL */
    int64_t resume_step;
    int64_t lease_expires_ms;
    int64_t source_job_id;   /* the stage source init_from comes from, or 0 */
    /* The database's id (migration 7: 16 hex digits made at its
     * creation), read at bf_store_open and owned by the store: worker
     * groups keep its checkpoints apart from every other database's
     * (docs/checkpoints.md). */
    const char *database_id;
    int again;   /* the lease of an earlier ask of the same request */
} bf_lease;
void bf_lease_clear(bf_lease *l);

/* Leases the best queued job (priority desc, then round-robin across sweeps,
 * then age) to `worker` as a new running attempt.  A job that starts from
 * its source's checkpoint gets it as its config's init_from.  Returns 1 with
 * *out filled, 0 if nothing is queued, -1 on error, BF_STORE_CONFLICT (err
 * names the attempt) when `worker` still holds a live attempt: a worker
 * group trains one job at a time, so one connection cannot drain the queue.
 * `request` (may be NULL: none) is the worker's token for this ask, stored
 * with the lease: when the live attempt `worker` holds answered the same
 * request, its reply was lost (the connection dropped, the daemon died after
 * the commit), and the same lease is returned again, renewed, with
 * out->again set, instead of the conflict. */
int bf_store_lease_next(bf_store *s, const char *worker, const char *request,
                        int64_t now_ms, int64_t lease_ms, bf_lease *out,
                        bf_error *err);

/* The same for a worker that runs `trainer` (NULL: builtin): only a job
 * whose config names that trainer is leased (jobs.trainer, docs/trainers.md);
 * bf_store_lease_next is this for builtin. */
int bf_store_lease_for(bf_store *s, const char *worker, const char *request,
                       const char *trainer, int64_t now_ms, int64_t lease_ms,
                       bf_lease *out, bf_error *err);

/* Whether more work may come, for a worker of `trainer` (NULL: builtin),
 * of jobs running now: 1 when an active sweep has a job of that trainer
 * waiting (a later stage's on its source, an adaptive seed held until its
 * comparison decides) and a job running (of any trainer), 0 when not, -1
 * on error.  A worker with nothing to lease stays for it (request_job's
 * `pending`, docs/protocol.md). */
int bf_store_work_pending(bf_store *s, const char *trainer, bf_error *err);

/* Extends the lease of a live attempt to now + lease_ms.  BF_STORE_FENCED if
 * the attempt is not the job's live one (expired, finished, cancelled). */
int bf_store_renew(bf_store *s, int64_t attempt_id, int64_t now_ms,
                   int64_t lease_ms, bf_error *err);

/* Expires every lease past its time: the attempt ends with outcome 'expired',
 * the job is re-queued, or failed once max_attempts is used up.
 * *n_expired (may be NULL) gets the count. */
int bf_store_expire_leases(bf_store *s, int64_t now_ms, int *n_expired,
                           bf_error *err);

/* Ends a live attempt: succeeded (error_text NULL) or failed (error_text
 * says why; the job is re-queued unless attempts are used up).
 * BF_STORE_FENCED for a dead attempt.  A job that ends moves on the jobs
 * waiting for it: succeeded, they are queued with its final checkpoint as
 * init_from (or fail, if it recorded none); failed or cancelled, they fail
 * ("source job N failed"), and those waiting for them too. */
int bf_store_finish_attempt(bf_store *s, int64_t attempt_id, int succeeded,
                            const char *error_text, int64_t now_ms,
                            bf_error *err);

/* Ends a live attempt as failed for good: the worker found the job unable to
 * run anywhere (its config, its init_from checkpoint), so the job fails
 * now, whatever attempts are left. */
int bf_store_fail_permanently(bf_store *s, int64_t attempt_id,
                              const char *error_text, int64_t now_ms,
                              bf_error *err);

/* Records the newest checkpoint of a live attempt (told to the next
 * attempt).  BF_STORE_INVALID (err says why) for a step
 * outside the job's 0 .. steps: resuming there would "finish" the job
 * without training it. */
int bf_store_record_checkpoint(bf_store *s, int64_t attempt_id,
                               const char *path, int64_t step, bf_error *err);

/* A live attempt found the job's recorded checkpoint `path` unloadable
 * (truncated, another config, a step past the job's): the job no longer
 * resumes from it (a later attempt starts over unless a newer checkpoint is
 * recorded).  A path that is not the recorded one changes nothing. */
int bf_store_checkpoint_bad(bf_store *s, int64_t attempt_id, const char *path,
                            bf_error *err);

/* Is the job of this attempt being cancelled? 1 yes, 0 no, <0 fenced/error. */
int bf_store_attempt_cancelled(bf_store *s, int64_t attempt_id,
                               bf_error *err);
/* Whether the live attempt was leased to `worker`: 1 yes, 0 no (another
 * worker's, or not live), -1 on error.  Attempt ids are small integers
 * that a fresh database hands out again, so an id alone does not prove that
 * a worker owns the attempt it names. */
int bf_store_attempt_owned_by(bf_store *s, int64_t attempt_id,
                              const char *worker, bf_error *err);

/* ---- metrics ------------------------------------------------------------- */

/* Ingests a JSON array of records for a live attempt, inside the open batch
 * transaction (see bf_store_flush).  Records (the worker's stdout format,
 * common/records.h; the kinds routed to metrics batches):
 *   {"type":"train","step":N,<metric key>:x,...}
 *      -> one metrics row per numeric key other than type/step
 *   {"type":"eval","step":N,"depth":D,"loss":x,"accuracy":x}
 *   {"type":"freq","step":N,"layer":l,"head":h,"omega":[...]}
 * A value is a JSON number or a non-finite one: "nan" or null (stored as
 * NULL: SQLite has no NaN), "inf" / "-inf" (stored as REAL infinities).
 * The same (job, key, step) / (job, step, depth) / (job, step, layer, head,
 * pair) arriving twice is stored once.  Each record is validated on its
 * own: the valid ones are stored, a malformed one costs only itself and is
 * described in *rejected (may be NULL; set to NULL when all are valid,
 * else a new {"count": N, "records": [{"index": i, "field": "records[i].x",
 * "error": "..."}, ...]}
 * listing the first BF_STORE_MAX_REJECTED).  BF_STORE_FENCED for a dead
 * attempt, BF_STORE_DB_FAILED when the database failed (nothing of the
 * batch stored), BF_STORE_ERR when records is not an array.
 * *n_rows (may be NULL) gets the rows newly stored. */
#define BF_STORE_MAX_REJECTED 20
int bf_store_ingest(bf_store *s, int64_t attempt_id, const json_t *records,
                    int *n_rows, json_t **rejected, bf_error *err);

/* Commits the open batch transaction, if any.  Fails (-1) when that commit
 * fails, and also when a batch ingested since the last failed flush was
 * lost otherwise (a failing ingest or an implicit flush by another call
 * rolled it back): so a failed flush means "ack none of the batches since
 * the previous flush"; they are rolled back or, if committed, re-sent
 * batches are no-ops. */
int bf_store_flush(bf_store *s, bf_error *err);

/* ---- cancel / retry ------------------------------------------------------ */

/* Cancels one job: waiting or queued, it becomes cancelled at once (the
 * jobs waiting for it fail); running, it is marked cancel-requested and
 * its live attempt id is returned in *running (malloc'd, caller frees;
 * *n_running 0 or 1) so the daemon can tell the worker; it becomes
 * cancelled when the worker reports back or the lease expires. */
int bf_store_cancel_job(bf_store *s, int64_t job_id, int64_t now_ms,
                        int64_t **running, int *n_running, bf_error *err);

/* A job that ends moves the jobs waiting for it on (queued from its final
 * checkpoint, or failed, and then theirs) in the same transaction, up to a
 * few slices of them; the rest of a big fan-out or cascade is left to
 * bf_store_settle, which the daemon calls a slice per pass while
 * bf_store_unsettled says some are left.  Opening the store finds what a
 * stopped daemon left. */
int bf_store_unsettled(const bf_store *s);
/* Moves waiting dependents on until deadline_us (store.h's slices), at
 * now_ms for those that fail.  1: some are left, 0: none, -1 on error. */
int bf_store_settle(bf_store *s, int64_t now_ms, int64_t deadline_us,
                    bf_error *err);

/* Cancels a sweep, in one short transaction whatever its size: the sweep
 * becomes 'cancelled' (one already done stays done), so none of its jobs
 * is leased any more, and its running jobs are marked as bf_store_cancel_job
 * marks one, their attempts returned in *running, and its comparisons of
 * adaptive seeds still running end 'cancelled' at now_ms.  Its waiting and
 * queued jobs are then cancelled by bf_store_cancel_queued, a slice at a
 * time; a daemon stopped half-way finds the rest with
 * bf_store_cancels_unfinished. */
int bf_store_cancel_sweep(bf_store *s, int64_t sweep_id, int64_t now_ms,
                          int64_t **running, int *n_running, bf_error *err);

/* Cancels the waiting and queued jobs of a cancelled sweep until
 * deadline_us (see above), finished at now_ms.  1: some remain, 0: none
 * left, -1 on error. */
int bf_store_cancel_queued(bf_store *s, int64_t sweep_id, int64_t now_ms,
                           int64_t deadline_us, bf_error *err);

/* The cancelled sweeps that still have waiting or queued jobs, in *ids
 * (malloc'd, caller frees).  0, or -1 on error. */
int bf_store_cancels_unfinished(bf_store *s, int64_t **ids, int *n,
                                bf_error *err);

/* Acknowledges that a cancelled attempt's worker stopped: ends the attempt
 * with outcome 'cancelled' and the job as cancelled. */
int bf_store_attempt_stopped(bf_store *s, int64_t attempt_id, int64_t now_ms,
                            bf_error *err);

/* Re-queues a failed or cancelled job (attempt count reset).  from_scratch:
 * it also forgets the job's checkpoint, so the next attempt starts at step
 * 0 (a checkpoint that keeps failing the job is no longer handed out).  A
 * job of a later stage waits again while its source has not succeeded (a
 * failed or cancelled source is refused: retry that first); the jobs that
 * failed because this one did wait again, and theirs.  Those are revived a
 * few slices now and the rest by bf_store_settle (bf_store_unsettled says
 * so); the job itself waits until all of them wait, so none of them can
 * run before its dependents do.  now_ms: when dependents that fail
 * meanwhile failed. */
int bf_store_retry_job(bf_store *s, int64_t job_id, int from_scratch,
                       int64_t now_ms, bf_error *err);

/* ---- workers ------------------------------------------------------------- */

int bf_store_worker_seen(bf_store *s, const char *name, const char *host,
                         int ranks, int connected, int64_t now_ms,
                         bf_error *err);

/* ---- queries for the client (JSON results) -------------------------------- */

/* Sweeps with their progress (all sweeps if sweep_id <= 0). */
json_t *bf_store_status(bf_store *s, int64_t sweep_id, bf_error *err);
json_t *bf_store_workers(bf_store *s, bf_error *err);

/* A page of a result view's rows, encoded as they go out. */
typedef struct bf_store_page {
    char *rows;        /* the JSON array of the rows, "[{...},...]"; owned */
    size_t len;        /* strlen(rows) */
    int n_rows;
    json_t *next;      /* the cursor after the page's last row (an array,
                          owned; bf_store_jobs: a job id) when the page is
                          full, so more may follow (the next page may be
                          empty); NULL: the last page */
} bf_store_page;

void bf_store_page_clear(bf_store_page *page);

/* A page reads job ids after `after` up to this far: the rows of a sweep
 * being stored, which no page shows, are never read more than this many
 * at a time (a page of them may be empty, with a cursor). */
#define BF_STORE_JOBS_WINDOW 20000

/* A page of jobs in job_id order, encoded like a view's page: of those
 * with after < job_id <= after + BF_STORE_JOBS_WINDOW, filtered by sweep
 * (<= 0: any) and status (NULL: any), at most limit (>= 1) and up to the
 * row that brings the page to max_bytes.  page->next (an integer) is
 * where the next page starts when more may follow: the page's last job
 * id, or the window's end; else NULL.  0, or -1 with err (its field
 * `status` or `sweep` when those are at fault). */
int bf_store_jobs(bf_store *s, int64_t sweep_id, const char *status,
                  int64_t after, int limit, size_t max_bytes,
                  bf_store_page *page, bf_error *err);

/* One page of a result view (common/result_views.h, `results` among them)
 * for a sweep: the rows after the cursor `after` (the `next` of the page
 * before; NULL: from the first row), in the view's key order, at most
 * max_rows (>= 1) of them and none after the one that reaches max_bytes.
 * Only one page is held at a time, however large the sweep: each row is
 * encoded as it is read.  0 with *page filled (the caller clears it), or
 * -1 with err: field "view", "after" or "sweep" when the request is at
 * fault. */
int bf_store_view_page(bf_store *s, const char *view, int64_t sweep_id,
                       const json_t *after, int max_rows, size_t max_bytes,
                       bf_store_page *page, bf_error *err);

#endif
