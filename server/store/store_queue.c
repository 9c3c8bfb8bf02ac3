/* The queue: leases, their renewal and expiry, the end of attempts, cancel
 * and retry.
 *
 * An attempt is live while its outcome is 'running'; every call naming an
 * attempt that is not live (ended, expired, cancelled, or unknown) returns
 * BF_STORE_FENCED, which tells the daemon to make that worker stop.  A lease
 * past its expiry stays live until bf_store_expire_leases runs, so a worker
 * reconnecting to a restarted daemon can still renew it. */
#include "store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

void bf_lease_clear(bf_lease *l)
{
    free(l->config_json);
    free(l->resume_checkpoint);
    memset(l, 0, sizeof *l);
}

static char *column_strdup(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? bf_xstrdup((const char *)t) : NULL;
}

/* ---- leasing ------------------------------------------------------------ */

/* Picks the best queued job: 1 found, 0 none, -1 error. */
static int pick_job(bf_store *s, const char *trainer, int64_t *job_id,
                    bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_LEASE_PICK);
    sqlite3_bind_text(st, 1, trainer, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *job_id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, err, "choosing the next job");
    return rc == SQLITE_ROW;
}

/* What the worker is handed about job_id into out (config with init_from,
 * resume point, source, sweep). */
static int load_leased_job(bf_store *s, int64_t job_id, bf_lease *out,
                           bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_JOB_LEASED);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        out->config_json = column_strdup(st, 0);
        out->resume_checkpoint = column_strdup(st, 1);
        out->resume_step = sqlite3_column_int64(st, 2);
        out->source_job_id = sqlite3_column_int64(st, 3);
        out->sweep_id = sqlite3_column_int64(st, 4);
        out->database_id = s->database_id;
    }
    sqlite3_reset(st);
    return rc == SQLITE_ROW ? 0 : store__fail(s, err, "reading the job");
}

static int start_job(bf_store *s, int64_t job_id, int64_t now_ms,
                     bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_JOB_START);
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, now_ms);
    return store__exec(s, st, err);
}

static int insert_attempt(bf_store *s, const char *worker, const char *request,
                          int64_t now_ms, bf_lease *out, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPT_INSERT);
    sqlite3_bind_int64(st, 1, out->job_id);
    sqlite3_bind_text(st, 2, worker, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now_ms);
    sqlite3_bind_int64(st, 4, out->lease_expires_ms);
    sqlite3_bind_text(st, 5, request, -1, SQLITE_STATIC);   /* NULL: none */
    if (sqlite3_step(st) != SQLITE_ROW)
        return store__fail(s, err, "recording the attempt");
    out->attempt_id = sqlite3_column_int64(st, 0);
    out->attempt_no = sqlite3_column_int(st, 1);
    return store__exec(s, st, err);
}

static int touch_sweep(bf_store *s, int64_t sweep_id, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_LEASE_TOUCH_SWEEP);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, s->lease_seq + 1);
    /* Counted even if the transaction rolls back: gaps are harmless, only
     * monotonicity matters. */
    s->lease_seq++;
    return store__exec(s, st, err);
}

/* The live attempt worker holds, if any, into out (attempt_id 0: none);
 * *same_request: it was leased in answer to request (never for NULL). */
static int find_live_attempt(bf_store *s, const char *worker,
                             const char *request, bf_lease *out,
                             int *same_request, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_WORKER_LIVE_ATTEMPT);
    sqlite3_bind_text(st, 1, worker, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    *same_request = 0;
    if (rc == SQLITE_ROW) {
        out->attempt_id = sqlite3_column_int64(st, 0);
        out->job_id = sqlite3_column_int64(st, 1);
        out->attempt_no = sqlite3_column_int(st, 2);
        const unsigned char *r = sqlite3_column_text(st, 3);
        *same_request = request && r && strcmp((const char *)r, request) == 0;
    }
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, err, "looking up the worker's attempts");
    return 0;
}

/* BF_STORE_CONFLICT: worker holds the live attempt in held and must end
 * it first, since a worker group trains one job at a time. */
static int still_held(const char *worker, const bf_lease *held, bf_error *err)
{
    bf_error_set(err, NULL, 0, "attempt_id", "worker '%s' still holds live "
                 "attempt %lld (job %lld): report job_done or job_failed for "
                 "it (or let its lease expire) before asking for another job",
                 worker, (long long)held->attempt_id,
                 (long long)held->job_id);
    return BF_STORE_CONFLICT;
}

/* The same request asked again (its reply was lost): the lease it was
 * answered with, renewed from now (1, or -1).  Nothing else changes: the
 * worker never heard of the attempt, so nothing was reported on it. */
static int lease_again(bf_store *s, int64_t now_ms, int64_t lease_ms,
                       bf_lease *out, bf_error *err)
{
    out->lease_expires_ms = now_ms + lease_ms;
    out->again = 1;
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPT_RENEW);
    sqlite3_bind_int64(st, 1, out->attempt_id);
    sqlite3_bind_int64(st, 2, out->lease_expires_ms);
    if (store__exec(s, st, err) < 0 ||
        load_leased_job(s, out->job_id, out, err) < 0)
        return -1;
    return 1;
}

/* A new lease of the best queued job: 1, 0 when none is queued, -1. */
/* Rows of job_id from step `from` on, of every table a trainer's records
 * fill, deleted (ST_RETIRE_*). */
static int retire_rows(bf_store *s, int64_t job_id, int64_t from,
                       bf_error *err)
{
    static const int stmts[] = { ST_RETIRE_METRICS, ST_RETIRE_EVALS,
                                 ST_RETIRE_OUTCOMES, ST_RETIRE_FREQS };
    for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++) {
        sqlite3_stmt *st = store__stmt(s, stmts[i]);
        sqlite3_bind_int64(st, 1, job_id);
        sqlite3_bind_int64(st, 2, from);
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE)
            return store__fail(s, err, "retiring an earlier attempt's rows");
    }
    return 0;
}

/* A built-in job's next attempt resends what it resends bit for bit, so
 * the rows kept (INSERT OR IGNORE) are its own; another trainer's may
 * differ, and its rows past the resume point would splice into the curve
 * the new attempt draws: they are retired (docs/trainers.md). */
static int retire_if_not_reproducible(bf_store *s, const char *trainer,
                                      const bf_lease *l, bf_error *err)
{
    if (l->attempt_no <= 1 || strcmp(trainer, BF_TRAINER_BUILTIN) == 0)
        return 0;
    return retire_rows(s, l->job_id,
                       l->resume_checkpoint ? l->resume_step + 1 : 0, err);
}

static int lease_new(bf_store *s, const char *worker, const char *request,
                     const char *trainer, int64_t now_ms, int64_t lease_ms,
                     bf_lease *out, bf_error *err)
{
    int found = pick_job(s, trainer, &out->job_id, err);
    if (found <= 0)
        return found;
    out->lease_expires_ms = now_ms + lease_ms;
    if (start_job(s, out->job_id, now_ms, err) < 0 ||
        load_leased_job(s, out->job_id, out, err) < 0 ||
        insert_attempt(s, worker, request, now_ms, out, err) < 0 ||
        retire_if_not_reproducible(s, trainer, out, err) < 0 ||
        touch_sweep(s, out->sweep_id, err) < 0)
        return -1;
    return 1;
}

int bf_store_lease_next(bf_store *s, const char *worker, const char *request,
                        int64_t now_ms, int64_t lease_ms, bf_lease *out,
                        bf_error *err)
{
    return bf_store_lease_for(s, worker, request, NULL, now_ms, lease_ms, out,
                              err);
}

int bf_store_lease_for(bf_store *s, const char *worker, const char *request,
                       const char *trainer, int64_t now_ms, int64_t lease_ms,
                       bf_lease *out, bf_error *err)
{
    if (!trainer)
        trainer = BF_TRAINER_BUILTIN;
    memset(out, 0, sizeof *out);
    if (store__begin(s, err) < 0)
        return -1;
    int same_request;
    int rc = find_live_attempt(s, worker, request, out, &same_request, err);
    if (rc == 0 && !out->attempt_id)
        rc = lease_new(s, worker, request, trainer, now_ms, lease_ms, out,
                       err);
    else if (rc == 0)
        rc = same_request ? lease_again(s, now_ms, lease_ms, out, err)
                          : still_held(worker, out, err);
    if (rc == 1 && store__commit(s, err) == 0)
        return 1;
    store__rollback(s);
    bf_lease_clear(out);
    return rc == 1 ? -1 : rc;
}

int bf_store_work_pending(bf_store *s, const char *trainer, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_WORK_PENDING);
    sqlite3_bind_text(st, 1, trainer ? trainer : BF_TRAINER_BUILTIN, -1,
                      SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int pending = rc == SQLITE_ROW && sqlite3_column_int(st, 0);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW)
        return store__fail(s, err, "looking for work pending");
    return pending;
}

/* ---- live attempts ------------------------------------------------------ */

typedef struct live_attempt {
    int64_t attempt_id, job_id, sweep_id;
    int cancel_requested, attempts, max_attempts;
    int pruned;          /* the coordinator decided to prune its job */
} live_attempt;

/* 1 live, 0 not live (fenced), -1 error. */
static int load_live(bf_store *s, int64_t attempt_id, live_attempt *a)
{
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPT_LIVE);
    sqlite3_bind_int64(st, 1, attempt_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        a->attempt_id = attempt_id;
        a->job_id = sqlite3_column_int64(st, 0);
        a->sweep_id = sqlite3_column_int64(st, 1);
        a->cancel_requested = sqlite3_column_int(st, 2);
        a->attempts = sqlite3_column_int(st, 3);
        a->max_attempts = sqlite3_column_int(st, 4);
        a->pruned = sqlite3_column_int(st, 5);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, NULL, "looking up the attempt");
    return rc == SQLITE_ROW;
}

/* Opens a transaction and loads the live attempt: BF_STORE_OK with the
 * transaction open, else FENCED/ERR with it closed. */
static int begin_live(bf_store *s, int64_t attempt_id, live_attempt *a)
{
    if (store__begin(s, NULL) < 0)
        return BF_STORE_ERR;
    int live = load_live(s, attempt_id, a);
    if (live == 1)
        return BF_STORE_OK;
    store__rollback(s);
    return live == 0 ? BF_STORE_FENCED : BF_STORE_ERR;
}

static int commit_or_rollback(bf_store *s, int rc)
{
    if (rc == 0 && store__commit(s, NULL) == 0)
        return BF_STORE_OK;
    store__rollback(s);
    return BF_STORE_ERR;
}

/* ---- stages: the jobs waiting for a source -------------------------------- */

/* The final checkpoint of job_id (its step is the job's steps) into path:
 * 1 found, 0 none, -1 error. */
static int final_checkpoint(bf_store *s, int64_t job_id, char *path,
                            size_t cap, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_FINAL_CHECKPOINT);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    const unsigned char *text = rc == SQLITE_ROW ? sqlite3_column_text(st, 0)
                                                 : NULL;
    if (text)
        snprintf(path, cap, "%s", (const char *)text);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, err, "looking up the final checkpoint");
    return text != NULL;
}

/* ---- dependents: a source's waiting jobs move on, a slice at a time ---- */

/* Statements of dependents moved on within the call that ended their
 * source: a small fan-out (and a short failure cascade) is settled at once,
 * a big one by bf_store_settle over later passes. */
#define SETTLE_AT_ONCE 4

/* A slice of source's waiting dependents fail (why: for them); each failed
 * one is pushed, since its own dependents fail next.  1: more may remain. */
static int fail_slice(bf_store *s, int64_t source, const char *why,
                      int64_t now_ms, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_DEPENDENTS_FAIL);
    sqlite3_bind_int64(st, 1, source);
    sqlite3_bind_int64(st, 2, now_ms);
    sqlite3_bind_text(st, 3, why, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 4, STORE_SLICE_ROWS);
    size_t before = s->unsettled.n;
    if (store__ids_collect(s, st, &s->unsettled, "failing dependent jobs",
                           err) < 0)
        return -1;
    return s->unsettled.n - before == STORE_SLICE_ROWS;
}

static int release_slice(bf_store *s, int64_t source, const char *path,
                         bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_DEPENDENTS_RELEASE);
    sqlite3_bind_int64(st, 1, source);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, STORE_SLICE_ROWS);
    if (store__exec(s, st, err) < 0)
        return -1;
    return sqlite3_changes(s->db) == STORE_SLICE_ROWS;
}

/* One statement's slice of source's waiting dependents moves on, as the
 * source's status says: succeeded, queued from its final checkpoint;
 * failed or cancelled, failed; otherwise (retried meanwhile) nothing.
 * 1: more may remain, 0: none, -1 on error. */
static int move_on_slice(bf_store *s, int64_t source, const char *status,
                         int64_t now_ms, bf_error *err)
{
    char why[256], path[4200];
    if (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0 ||
        strcmp(status, "pruned") == 0) {
        snprintf(why, sizeof why, "source job %lld failed%s%s",
                 (long long)source, strcmp(status, "failed") ? ": " : "",
                 strcmp(status, "failed") ? status : "");
        return fail_slice(s, source, why, now_ms, err);
    }
    if (strcmp(status, "succeeded") != 0)
        return 0;
    int found = final_checkpoint(s, source, path, sizeof path, err);
    if (found < 0)
        return -1;
    if (found)
        return release_slice(s, source, path, err);
    snprintf(why, sizeof why, "source job %lld succeeded without a final "
             "checkpoint to start from (its worker group needs "
             "--checkpoint-dir)", (long long)source);
    return fail_slice(s, source, why, now_ms, err);
}

/* A slice of source's dependents moved on (move_on_slice); its sweep may
 * be done once the last of them is. */
static int settle_slice(bf_store *s, int64_t source, int64_t now_ms,
                        bf_error *err)
{
    char status[16] = "";
    int64_t sweep_id = 0;
    sqlite3_stmt *st = store__stmt(s, ST_JOB_STATUS);
    sqlite3_bind_int64(st, 1, source);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        snprintf(status, sizeof status, "%s",
                 (const char *)sqlite3_column_text(st, 0));
        sweep_id = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, err, "looking up a source job");
    int more = move_on_slice(s, source, status, now_ms, err);
    if (more == 0 && sweep_id && store__refresh_sweep(s, sweep_id, err) < 0)
        return -1;
    return more;
}

/* The retried jobs without a source are queued: every revival is done. */
static int release_revive_roots(bf_store *s, bf_error *err)
{
    for (; s->revive_roots.n > 0; s->revive_roots.n--) {
        sqlite3_stmt *st = store__stmt(s, ST_REVIVE_ROOT_RELEASE);
        sqlite3_bind_int64(st, 1, s->revive_roots.v[s->revive_roots.n - 1]);
        if (store__exec(s, st, err) < 0)
            return -1;
    }
    return 0;
}

/* One statement of the revival on top of the stack: a slice of its failed
 * dependents wait again and go on the stack; the last slice of the last
 * revival queues the retried jobs.  1: more may remain, 0: none, -1. */
static int revive_slice(bf_store *s, bf_error *err)
{
    int64_t source = s->reviving.v[--s->reviving.n];
    sqlite3_stmt *st = store__stmt(s, ST_DEPENDENTS_REVIVE);
    sqlite3_bind_int64(st, 1, source);
    sqlite3_bind_int(st, 2, STORE_SLICE_ROWS);
    size_t before = s->reviving.n;
    int rc = store__ids_collect(s, st, &s->reviving, "reviving dependent jobs",
                                err);
    if (rc < 0 || s->reviving.n - before == STORE_SLICE_ROWS)
        store__ids_push(&s->reviving, source);   /* failed, or more left */
    if (rc < 0)
        return -1;
    if (s->reviving.n > 0)
        return 1;
    return release_revive_roots(s, err) < 0 ? -1 : 0;
}

/* One statement of the ended job on top of the unsettled stack. */
static int settle_next(bf_store *s, int64_t now_ms, bf_error *err)
{
    int64_t source = s->unsettled.v[--s->unsettled.n];
    int more = settle_slice(s, source, now_ms, err);
    if (more)   /* or failed: still to do */
        store__ids_push(&s->unsettled, source);
    return more;
}

static int work_left(const bf_store *s)
{
    return s->reviving.n > 0 || s->unsettled.n > 0;
}

/* Works the revivals, then the unsettled stack (in the open transaction)
 * until deadline_us or, max_statements > 0, that many statements.
 * 1: some left, 0: none, -1 on error. */
static int settle_work(bf_store *s, int64_t now_ms, int64_t deadline_us,
                       int max_statements, bf_error *err)
{
    for (int done = 0; work_left(s);) {
        int rc = s->reviving.n > 0 ? revive_slice(s, err)
                                   : settle_next(s, now_ms, err);
        if (rc < 0)
            return -1;
        if (++done == max_statements || store__past(deadline_us))
            break;
    }
    return work_left(s);
}

/* Job job_id has just become `status`: if that ends it, the jobs waiting
 * for it move on, the first few slices now, the rest by bf_store_settle
 * (a job that goes back to the queue moves nothing, and costs no query). */
static int source_ended(bf_store *s, int64_t job_id, const char *status,
                        int64_t now_ms, bf_error *err)
{
    if (strcmp(status, "succeeded") != 0 && strcmp(status, "failed") != 0
        && strcmp(status, "cancelled") != 0 && strcmp(status, "pruned") != 0)
        return 0;
    if (store__seqs_job_ended(s, job_id, now_ms, err) < 0)
        return -1;
    store__ids_push(&s->unsettled, job_id);
    return settle_work(s, now_ms, 0, SETTLE_AT_ONCE, err) < 0 ? -1 : 0;
}

int bf_store_unsettled(const bf_store *s)
{
    return work_left(s);
}

int bf_store_settle(bf_store *s, int64_t now_ms, int64_t deadline_us,
                    bf_error *err)
{
    if (store__begin(s, err) < 0)
        return -1;
    int more = settle_work(s, now_ms, deadline_us, 0, err);
    if (more >= 0 && store__commit(s, err) == 0)
        return more;
    store__rollback(s);
    return -1;
}

/* ---- ending attempts ------------------------------------------------------ */

/* Ends attempt `a` with `outcome` and moves its job on: succeeded and
 * cancelled are final; failed and expired re-queue the job unless it is
 * being cancelled (then cancelled) or has used its attempts, or the failure
 * is permanent (then failed).  A job the coordinator pruned ends pruned
 * instead of cancelled, and also instead of succeeded when it finished
 * before it heard (the decision was stored first, and selection and the
 * views count it pruned).  The jobs waiting for it move on too. */
static int settle(bf_store *s, const live_attempt *a, const char *outcome,
                  const char *error, int permanent, int64_t now_ms)
{
    const char *job_status;
    char why[512], job_error[1200];
    if (strcmp(outcome, "succeeded") == 0)
        job_status = a->pruned ? "pruned" : outcome;
    else if (strcmp(outcome, "cancelled") == 0 || a->cancel_requested)
        job_status = a->pruned ? "pruned" : "cancelled";
    else if (a->attempts >= a->max_attempts || permanent)
        job_status = "failed";
    else
        job_status = "queued";
    if (strcmp(outcome, "expired") == 0) {
        snprintf(why, sizeof why, "lease expired after %d attempt%s", a->attempts,
                 a->attempts == 1 ? "" : "s");
        error = why;
    }
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPT_END);
    sqlite3_bind_int64(st, 1, a->attempt_id);
    sqlite3_bind_text(st, 2, outcome, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, now_ms);
    if (error)
        sqlite3_bind_text(st, 4, error, -1, SQLITE_TRANSIENT);
    if (store__exec(s, st, NULL) < 0)
        return -1;
    st = store__stmt(s, ST_JOB_SETTLE);
    sqlite3_bind_int64(st, 1, a->job_id);
    sqlite3_bind_text(st, 2, job_status, -1, SQLITE_STATIC);
    if (strcmp(job_status, "queued") != 0)
        sqlite3_bind_int64(st, 3, now_ms);
    if (strcmp(job_status, "cancelled") == 0 ||
        strcmp(job_status, "pruned") == 0)
        error = job_status;
    else if (permanent && error) {
        snprintf(job_error, sizeof job_error, "%s (a permanent error: not "
                 "retried)", error);
        error = job_error;
    }
    if (error)
        sqlite3_bind_text(st, 4, error, -1, SQLITE_TRANSIENT);
    if (store__exec(s, st, NULL) < 0 ||
        source_ended(s, a->job_id, job_status, now_ms, NULL) < 0 ||
        (strcmp(job_status, "queued") != 0 &&
         (store__prune_on_end(s, a->job_id, NULL) < 0 ||
          store__select_on_end(s, a->job_id, now_ms, NULL) < 0)))
        return -1;
    return store__refresh_sweep(s, a->sweep_id, NULL);
}

int bf_store_renew(bf_store *s, int64_t attempt_id, int64_t now_ms,
                   int64_t lease_ms, bf_error *err)
{
    live_attempt a = { 0 };
    int rc = begin_live(s, attempt_id, &a);
    if (rc != BF_STORE_OK)
        return store__report(s, rc, attempt_id, err);
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPT_RENEW);
    sqlite3_bind_int64(st, 1, attempt_id);
    sqlite3_bind_int64(st, 2, now_ms + lease_ms);
    return store__report(s, commit_or_rollback(s, store__exec(s, st, NULL)),
                         attempt_id, err);
}

int bf_store_finish_attempt(bf_store *s, int64_t attempt_id, int succeeded,
                            const char *error_text, int64_t now_ms,
                            bf_error *err)
{
    live_attempt a = { 0 };
    int rc = begin_live(s, attempt_id, &a);
    if (rc != BF_STORE_OK)
        return store__report(s, rc, attempt_id, err);
    const char *outcome = succeeded ? "succeeded" : "failed";
    if (!succeeded && !error_text)
        error_text = "failed (no reason given)";
    rc = settle(s, &a, outcome, succeeded ? NULL : error_text, 0, now_ms);
    return store__report(s, commit_or_rollback(s, rc), attempt_id, err);
}

int bf_store_fail_permanently(bf_store *s, int64_t attempt_id,
                              const char *error_text, int64_t now_ms,
                              bf_error *err)
{
    live_attempt a = { 0 };
    int rc = begin_live(s, attempt_id, &a);
    if (rc != BF_STORE_OK)
        return store__report(s, rc, attempt_id, err);
    rc = settle(s, &a, "failed", error_text ? error_text
                : "failed (no reason given)", 1, now_ms);
    return store__report(s, commit_or_rollback(s, rc), attempt_id, err);
}

int bf_store_attempt_stopped(bf_store *s, int64_t attempt_id, int64_t now_ms,
                             bf_error *err)
{
    live_attempt a = { 0 };
    int rc = begin_live(s, attempt_id, &a);
    if (rc != BF_STORE_OK)
        return store__report(s, rc, attempt_id, err);
    rc = settle(s, &a, "cancelled", NULL, 0, now_ms);
    return store__report(s, commit_or_rollback(s, rc), attempt_id, err);
}

/* The job's own step count, for the refusal message. */
static int64_t job_steps(bf_store *s, int64_t job_id)
{
    sqlite3_stmt *st = store__stmt(s, ST_JOB_STEPS);
    sqlite3_bind_int64(st, 1, job_id);
    int64_t steps = sqlite3_step(st) == SQLITE_ROW
                    ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_reset(st);
    return steps;
}

int bf_store_record_checkpoint(bf_store *s, int64_t attempt_id,
                               const char *path, int64_t step, bf_error *err)
{
    live_attempt a = { 0 };
    int rc = begin_live(s, attempt_id, &a);
    if (rc != BF_STORE_OK)
        return store__report(s, rc, attempt_id, err);
    sqlite3_stmt *st = store__stmt(s, ST_JOB_CHECKPOINT);
    sqlite3_bind_int64(st, 1, a.job_id);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, step);
    int ok = store__exec(s, st, NULL) == 0;
    if (ok && sqlite3_changes(s->db) == 0) {
        bf_error_set(&s->last, NULL, 0, "step", "checkpoint step %lld is "
                     "outside job %lld's 0 .. %lld steps: refused",
                     (long long)step, (long long)a.job_id,
                     (long long)job_steps(s, a.job_id));
        store__rollback(s);
        return store__report(s, BF_STORE_INVALID, attempt_id, err);
    }
    return store__report(s, commit_or_rollback(s, ok ? 0 : -1), attempt_id,
                         err);
}

int bf_store_checkpoint_bad(bf_store *s, int64_t attempt_id, const char *path,
                            bf_error *err)
{
    live_attempt a = { 0 };
    int rc = begin_live(s, attempt_id, &a);
    if (rc != BF_STORE_OK)
        return store__report(s, rc, attempt_id, err);
    sqlite3_stmt *st = store__stmt(s, ST_JOB_CHECKPOINT_BAD);
    sqlite3_bind_int64(st, 1, a.job_id);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
    return store__report(s, commit_or_rollback(s, store__exec(s, st, NULL)),
                         attempt_id, err);
}

int bf_store_attempt_cancelled(bf_store *s, int64_t attempt_id, bf_error *err)
{
    live_attempt a = { 0 };
    int live = load_live(s, attempt_id, &a);
    if (live <= 0)
        return store__report(s, live == 0 ? BF_STORE_FENCED : BF_STORE_ERR,
                             attempt_id, err);
    return a.cancel_requested;
}

int bf_store_attempt_owned_by(bf_store *s, int64_t attempt_id,
                              const char *worker, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPT_OWNER);
    sqlite3_bind_int64(st, 1, attempt_id);
    sqlite3_bind_text(st, 2, worker, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int owned = rc == SQLITE_ROW && sqlite3_column_int(st, 0) == 1;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, err, "looking up the attempt's worker");
    return owned;
}

int bf_store_expire_leases(bf_store *s, int64_t now_ms, int *n_expired,
                           bf_error *err)
{
    if (n_expired)
        *n_expired = 0;
    if (store__begin(s, err) < 0)
        return BF_STORE_ERR;
    /* Collect first: settling writes the table the query reads. */
    store_ids ids = {0};
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPTS_EXPIRED);
    sqlite3_bind_int64(st, 1, now_ms);
    int failed = store__ids_collect(s, st, &ids, "listing expired leases",
                                    NULL) < 0;
    size_t n = ids.n;
    for (size_t i = 0; i < n && !failed; i++) {
        live_attempt a = { 0 };
        failed = load_live(s, ids.v[i], &a) != 1 ||
                 settle(s, &a, "expired", NULL, 0, now_ms) < 0;
    }
    free(ids.v);
    if (commit_or_rollback(s, failed ? -1 : 0) != BF_STORE_OK)
        return store__report(s, BF_STORE_ERR, 0, err);
    if (n_expired)
        *n_expired = (int)n;
    return BF_STORE_OK;
}

/* ---- cancel / retry ----------------------------------------------------- */

/* Flags the running jobs of a sweep or one job (running_stmt's ?1) as
 * cancel-requested and returns their live attempts. */
static int flag_running(bf_store *s, int running_stmt, int64_t id,
                        int64_t **running, int *n_running, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, running_stmt);
    sqlite3_bind_int64(st, 1, id);
    store_ids l = {0};
    int rc = store__ids_collect(s, st, &l, "flagging running jobs", err);
    *running = l.v;
    *n_running = (int)l.n;
    return rc;
}

static int set_sweep_status(bf_store *s, int64_t sweep_id, const char *status,
                            bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SWEEP_SET_STATUS);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_text(st, 2, status, -1, SQLITE_STATIC);
    return store__exec(s, st, err);
}

/* Reads a job's status and sweep: 1 found, 0 not (err set), -1 error. */
static int get_job(bf_store *s, int64_t job_id, char *status, size_t cap,
                   int64_t *sweep_id, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_JOB_GET);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        snprintf(status, cap, "%s", (const char *)sqlite3_column_text(st, 0));
        *sweep_id = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        bf_error_set(err, NULL, 0, "job", "no job with id %lld", (long long)job_id);
    else if (rc != SQLITE_ROW)
        return store__fail(s, err, "looking up the job");
    return rc == SQLITE_ROW;
}

static int finish_cancel(bf_store *s, int rc, int64_t **running, int *n_running,
                         bf_error *err)
{
    if (rc == 0 && store__commit(s, err) == 0)
        return BF_STORE_OK;
    store__rollback(s);
    free(*running);
    *running = NULL;
    *n_running = 0;
    return rc == BF_STORE_NOT_FOUND ? BF_STORE_NOT_FOUND : BF_STORE_ERR;
}

int bf_store_cancel_sweep(bf_store *s, int64_t sweep_id, int64_t now_ms,
                          int64_t **running, int *n_running, bf_error *err)
{
    *running = NULL;
    *n_running = 0;
    if (store__begin(s, err) < 0)
        return BF_STORE_ERR;
    sqlite3_stmt *st = store__stmt(s, ST_SWEEP_STATUS);
    sqlite3_bind_int64(st, 1, sweep_id);
    int found = sqlite3_step(st);
    /* A sweep that is already done stays done: nothing of it was cancelled. */
    int was_done = found == SQLITE_ROW &&
                   strcmp((const char *)sqlite3_column_text(st, 0), "done") == 0;
    sqlite3_reset(st);
    int rc = 0;
    if (found == SQLITE_DONE) {
        bf_error_set(err, NULL, 0, "sweep", "no sweep with id %lld", (long long)sweep_id);
        rc = BF_STORE_NOT_FOUND;
    } else if (found != SQLITE_ROW) {
        rc = store__fail(s, err, "looking up the sweep");
    } else if (flag_running(s, ST_CANCEL_RUNNING_SWEEP, sweep_id, running,
                            n_running, err) < 0 ||
               (!was_done && (set_sweep_status(s, sweep_id, "cancelled",
                                               err) < 0 ||
                              store__seqs_sweep_cancelled(s, sweep_id, now_ms,
                                                          err) < 0))) {
        rc = -1;
    }
    return finish_cancel(s, rc, running, n_running, err);
}

int bf_store_cancel_queued(bf_store *s, int64_t sweep_id, int64_t now_ms,
                           int64_t deadline_us, bf_error *err)
{
    if (store__begin(s, err) < 0)
        return -1;
    sqlite3_stmt *st = store__stmt(s, ST_CANCEL_QUEUED_SWEEP);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, now_ms);
    sqlite3_bind_int(st, 3, STORE_SLICE_ROWS);
    int more = store__exec_slices(s, st, deadline_us, err);
    if (more >= 0 && store__commit(s, err) == 0)
        return more;
    store__rollback(s);
    return -1;
}

int bf_store_cancels_unfinished(bf_store *s, int64_t **ids, int *n,
                                bf_error *err)
{
    store_ids l = {0};
    int rc = store__ids_collect(s, store__stmt(s, ST_CANCELS_UNFINISHED), &l,
                                "looking up unfinished cancels", err);
    if (rc < 0) {
        free(l.v);
        l = (store_ids){0};
    }
    *ids = l.v;
    *n = (int)l.n;
    return rc;
}

static int cancel_queued_job(bf_store *s, int64_t job_id, int64_t now_ms,
                             bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_CANCEL_QUEUED_JOB);
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, now_ms);
    return store__exec(s, st, err);
}

int bf_store_cancel_job(bf_store *s, int64_t job_id, int64_t now_ms,
                        int64_t **running, int *n_running, bf_error *err)
{
    *running = NULL;
    *n_running = 0;
    if (store__begin(s, err) < 0)
        return BF_STORE_ERR;
    char status[16];
    int64_t sweep_id;
    int found = get_job(s, job_id, status, sizeof status, &sweep_id, err);
    int rc;
    if (found <= 0)
        rc = found == 0 ? BF_STORE_NOT_FOUND : -1;
    else if (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0)
        rc = bf_error_set(err, NULL, 0, "job", "job %lld has already %s; nothing "
                          "to cancel", (long long)job_id, status);
    else
        rc = cancel_queued_job(s, job_id, now_ms, err) < 0 ||
             flag_running(s, ST_CANCEL_RUNNING_JOB, job_id, running, n_running,
                          err) < 0 ||
             /* cancelled now, not once its worker stops */
             ((strcmp(status, "waiting") == 0 || strcmp(status, "queued") == 0)
              && source_ended(s, job_id, "cancelled", now_ms, err) < 0) ||
             store__refresh_sweep(s, sweep_id, err) < 0 ? -1 : 0;
    return finish_cancel(s, rc, running, n_running, err);
}

/* Whether job_id may start again as far as its source goes: a failed or
 * cancelled source refuses (BF_STORE_ERR, err says so), as does one that
 * succeeded without a final checkpoint.  *source: its id, 0 if none. */
static int check_retry_source(bf_store *s, int64_t job_id, int64_t *source,
                              bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_JOB_SOURCE);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    *source = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    char source_status[16] = "";
    if (rc == SQLITE_ROW)
        snprintf(source_status, sizeof source_status, "%s",
                 (const char *)sqlite3_column_text(st, 1));
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, err, "looking up the job's source");
    if (!*source)
        return 0;
    if (strcmp(source_status, "failed") == 0 ||
        strcmp(source_status, "cancelled") == 0)
        return bf_error_set(err, NULL, 0, "job", "job %lld starts from job "
                            "%lld, which has %s: retry job %lld first",
                            (long long)job_id, (long long)*source,
                            source_status, (long long)*source);
    if (strcmp(source_status, "succeeded") != 0)
        return 0;
    char path[4200];
    int found = final_checkpoint(s, *source, path, sizeof path, err);
    if (found == 0)
        return bf_error_set(err, NULL, 0, "job", "job %lld starts from job "
                            "%lld, which succeeded without a final "
                            "checkpoint", (long long)job_id,
                            (long long)*source);
    return found < 0 ? -1 : 0;
}

/* Whether job_id, if it takes a selection's values (`from:`), has them:
 * a job whose cell chose no trial refuses (BF_STORE_ERR, err says so). */
static int check_retry_values(bf_store *s, int64_t job_id, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_VALUES_PENDING);
    sqlite3_bind_int64(st, 1, job_id);
    int rc = sqlite3_step(st);
    char stage[128] = "";
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(stage, sizeof stage, "%s",
                 (const char *)sqlite3_column_text(st, 0));
    sqlite3_reset(st);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return store__fail(s, err, "looking up the job's selected values");
    return bf_error_set(err, NULL, 0, "job", "job %lld takes its values from "
                        "stage %s's selection, which chose no trial of its "
                        "cell: retry a trial of that cell first (its values "
                        "are filled in when the cell is selected again)",
                        (long long)job_id, stage);
}

/* The retried job waits while the dependents its failure failed wait
 * again, a few slices now and the rest by bf_store_settle; then it is
 * queued (without a source), or moves on as its source's dependent. */
static int retry_revive(bf_store *s, int64_t job_id, int64_t source,
                        int64_t now_ms, bf_error *err)
{
    if (source)
        store__ids_push(&s->unsettled, source);
    else
        store__ids_push(&s->revive_roots, job_id);
    store__ids_push(&s->reviving, job_id);
    return settle_work(s, now_ms, 0, SETTLE_AT_ONCE, err) < 0 ? -1 : 0;
}

int bf_store_retry_job(bf_store *s, int64_t job_id, int from_scratch,
                       int64_t now_ms, bf_error *err)
{
    if (store__begin(s, err) < 0)
        return BF_STORE_ERR;
    char status[16];
    int64_t sweep_id, source = 0;
    int found = get_job(s, job_id, status, sizeof status, &sweep_id, err);
    int rc = found == 0 ? BF_STORE_NOT_FOUND : found < 0 ? -1 : 0;
    if (rc == 0 && strcmp(status, "failed") != 0 && strcmp(status, "cancelled") != 0)
        rc = bf_error_set(err, NULL, 0, "job", "job %lld is %s; only failed or "
                          "cancelled jobs can be retried", (long long)job_id, status);
    if (rc == 0)
        rc = check_retry_source(s, job_id, &source, err);
    if (rc == 0)
        rc = check_retry_values(s, job_id, err);
    if (rc == 0) {
        sqlite3_stmt *st = store__stmt(s, ST_JOB_RETRY);
        sqlite3_bind_int64(st, 1, job_id);
        sqlite3_bind_int(st, 2, from_scratch != 0);
        rc = store__exec(s, st, err) < 0 ||
             set_sweep_status(s, sweep_id, "active", err) < 0 ||
             retry_revive(s, job_id, source, now_ms, err) < 0 ? -1 : 0;
    }
    if (rc == 0 && store__commit(s, err) == 0)
        return BF_STORE_OK;
    store__rollback(s);
    return rc == BF_STORE_NOT_FOUND ? rc : BF_STORE_ERR;
}
