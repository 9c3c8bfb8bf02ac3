/* protocol: what each message means.  One handler per message type; each
 * validates its fields, calls the store, and replies.  docs/protocol.md is
 * the reference for every message handled here. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "daemon.h"
#include "log.h"

/* How long a worker told "no job" waits before asking again. */
#define BF_NO_JOB_RETRY_MS 1000
/* Metrics renew the lease too, but at most this often per attempt: every
 * renewal is a commit, and a commit per metrics batch would undo batching. */
#define BF_RENEW_INTERVAL_MS 1000

#define LOGC(level, c, fmt, ...)                                            \
    bf_log(level, "conn %llu %s: " fmt, (unsigned long long)(c)->serial,    \
           (c)->name[0] ? (c)->name : (c)->peer, __VA_ARGS__)

/* ---- small helpers -------------------------------------------------------- */

static void reply_error(bf_conn *c, const json_t *id, const char *code,
                        const bf_error *err, const char *text)
{
    LOGC(BF_LOG_WARN, c, "error %s: %s", code, text);
    bf_conn_send(c, bf_wire_error(code, id, err, "%s", text));
}

static json_t *new_reply(const char *type, const json_t *id)
{
    json_t *m = json_pack("{s:s}", "type", type);
    if (id)
        json_object_set(m, "id", (json_t *)id);
    return m;
}

/* Reads an integer field; on a missing/wrong one replies bad_message naming
 * it and returns -1.  optional: absence leaves *out alone and returns 0. */
static int int_field(bf_conn *c, const json_t *msg, const json_t *id,
                     const char *key, int optional, int64_t *out)
{
    json_t *v = json_object_get(msg, key);
    if (!v && optional)
        return 0;
    if (!json_is_integer(v)) {
        char text[256];
        snprintf(text, sizeof text, "%s: field '%s' must be an integer",
                 bf_wire_type(msg), key);
        bf_error e;
        bf_error_set(&e, NULL, 0, key, "must be an integer");
        reply_error(c, id, "bad_message", &e, text);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

static int str_field(bf_conn *c, const json_t *msg, const json_t *id,
                     const char *key, int optional, const char **out)
{
    json_t *v = json_object_get(msg, key);
    if (!v && optional)
        return 0;
    if (!json_is_string(v)) {
        char text[256];
        snprintf(text, sizeof text, "%s: field '%s' must be a string",
                 bf_wire_type(msg), key);
        bf_error e;
        bf_error_set(&e, NULL, 0, key, "must be a string");
        reply_error(c, id, "bad_message", &e, text);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

bf_held_attempt *bf_conn_find_held(bf_conn *c, int64_t attempt_id)
{
    for (int i = 0; i < c->n_held; i++)
        if (c->held[i].attempt_id == attempt_id)
            return &c->held[i];
    return NULL;
}

static void release(bf_conn *c, int64_t attempt_id)
{
    bf_held_attempt *h = bf_conn_find_held(c, attempt_id);
    if (h)
        *h = c->held[--c->n_held];
}

static bf_held_attempt *hold(bf_conn *c, int64_t attempt_id, int64_t now)
{
    bf_held_attempt *h = bf_conn_find_held(c, attempt_id);
    if (h)
        return h;
    /* A worker that reconnected may leave its old, half-dead connection
     * behind: the attempt belongs to the newest one, where cancels go. */
    for (bf_conn *other; (other = bf_net_find_holder(c->d, attempt_id));)
        release(other, attempt_id);
    if (c->n_held == c->cap_held) {
        c->cap_held = c->cap_held ? 2 * c->cap_held : 4;
        c->held = bf_xrealloc(c->held, (size_t)c->cap_held * sizeof *c->held);
    }
    h = &c->held[c->n_held++];
    h->attempt_id = attempt_id;
    h->renewed_ms = now;
    return h;
}

/* The reply for a store call on an attempt that is no longer live. */
static void reply_fenced(bf_conn *c, const json_t *id, int64_t attempt_id)
{
    release(c, attempt_id);
    char text[128];
    snprintf(text, sizeof text,
             "attempt %lld is no longer the live lease of its job: stop it",
             (long long)attempt_id);
    json_t *m = bf_wire_error("fenced", id, NULL, "%s", text);
    json_object_set_new(m, "attempt_id", json_integer(attempt_id));
    LOGC(BF_LOG_INFO, c, "fenced attempt %lld", (long long)attempt_id);
    bf_conn_send(c, m);
}

/* The reply for a store call that takes no bf_error: the cause is the
 * store's last error. */
static void reply_store_error(bf_conn *c, const json_t *id, const char *what)
{
    char text[1200];
    snprintf(text, sizeof text, "%s failed in the store: %s", what,
             bf_store_last_error(c->d->store));
    reply_error(c, id, "store", NULL, text);
}

/* Checks, before any store call on attempt_id, that c's worker may act for
 * it; otherwise replies (fenced, or store) and returns -1.  An attempt this
 * connection holds was leased or re-claimed by this worker already.  Any
 * other must have been leased to a worker of the same name: attempt ids are
 * small integers that a fresh database hands out again, so a worker that
 * outlived its daemon and reconnected to one on a new database (the token
 * file stays when bifocal.db is deleted) used to heartbeat "its" attempt id
 * and take over another worker's live attempt, putting one job on two live
 * workers and mixing their metrics. */
static int check_owner(bf_conn *c, const json_t *id, int64_t attempt_id)
{
    if (bf_conn_find_held(c, attempt_id))
        return 0;
    int owned = bf_store_attempt_owned_by(c->d->store, attempt_id, c->name);
    if (owned == 1)
        return 0;
    if (owned < 0)
        reply_store_error(c, id, "looking up the attempt");
    else
        reply_fenced(c, id, attempt_id);
    return -1;
}

/* Records c's worker in the workers table as connected or not. */
static void record_worker(bf_conn *c, int connected)
{
    if (bf_store_worker_seen(c->d->store, c->name, c->host, c->ranks,
                             connected, bf_wall_ms()))
        LOGC(BF_LOG_ERROR, c, "recording the worker failed: %s",
             bf_store_last_error(c->d->store));
}

/* Adds "cancel": true to a worker's reply when its job is being cancelled. */
static void mark_cancel(bf_daemon *d, json_t *reply, int64_t attempt_id)
{
    if (bf_store_attempt_cancelled(d->store, attempt_id) == 1)
        json_object_set_new(reply, "cancel", json_true());
}

/* ---- hello ---------------------------------------------------------------- */

/* Compares without an early exit so the time taken says nothing about
 * how much of a guessed token was right. */
static int token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned diff = (unsigned)(la ^ lb);
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)a[i] ^ (unsigned char)b[i];
    return diff == 0;
}

static void handle_hello(bf_conn *c, json_t *msg, const json_t *id)
{
    bf_daemon *d = c->d;
    int64_t version = 0;
    const char *token = NULL, *role = NULL;
    if (int_field(c, msg, id, "version", 0, &version)
        || str_field(c, msg, id, "token", 0, &token)
        || str_field(c, msg, id, "role", 0, &role)) {
        bf_conn_fail(c, NULL);
        return;
    }
    if (version != BF_WIRE_VERSION) {
        char text[128];
        snprintf(text, sizeof text,
                 "protocol version %lld is not supported (server speaks %d)",
                 (long long)version, BF_WIRE_VERSION);
        LOGC(BF_LOG_WARN, c, "refused: %s", text);
        bf_conn_fail(c, bf_wire_error("version", id, NULL, "%s", text));
        return;
    }
    if (!token_equal(token, d->token)) {
        LOGC(BF_LOG_WARN, c, "refused: %s", "wrong token");
        bf_conn_fail(c, bf_wire_error("auth", id, NULL, "wrong token"));
        return;
    }
    json_t *reply = new_reply("ack", id);
    json_object_set_new(reply, "version", json_integer(BF_WIRE_VERSION));
    json_object_set_new(reply, "lease_seconds",
                        json_integer(d->lease_ms / 1000));
    if (strcmp(role, "client") == 0) {
        c->role = BF_ROLE_CLIENT;
        snprintf(c->name, sizeof c->name, "client@%s", c->peer);
    } else if (strcmp(role, "worker") == 0) {
        const char *name = NULL, *host = "";
        int64_t ranks = 1;
        if (str_field(c, msg, id, "name", 0, &name)
            || str_field(c, msg, id, "host", 1, &host)
            || int_field(c, msg, id, "ranks", 1, &ranks)) {
            json_decref(reply);
            bf_conn_fail(c, NULL);
            return;
        }
        /* The name is kept in c->name and recorded with every lease and
         * on disconnect: one longer than that buffer used to be cut short
         * there, so the workers row of the full name stayed connected
         * forever and a second row appeared.  ranks is kept as an int: 2^32
         * used to wrap to 0. */
        int name_ok = name[0] && strlen(name) < sizeof c->name;
        if (!name_ok || ranks < 1 || ranks > INT_MAX) {
            json_decref(reply);
            bf_error e;
            if (!name_ok)
                bf_error_set(&e, NULL, 0, "name", "must be non-empty and at "
                             "most %zu bytes", sizeof c->name - 1);
            else
                bf_error_set(&e, NULL, 0, "ranks", "must be in 1 .. %d",
                             INT_MAX);
            bf_conn_fail(c, bf_wire_error("bad_message", id, &e, "hello: %s",
                                          e.msg));
            return;
        }
        c->role = BF_ROLE_WORKER;
        c->ranks = (int)ranks;
        snprintf(c->name, sizeof c->name, "%s", name);
        snprintf(c->host, sizeof c->host, "%s", host);
        record_worker(c, 1);
    } else {
        json_decref(reply);
        bf_error e;
        bf_error_set(&e, NULL, 0, "role", "must be \"worker\" or \"client\"");
        bf_conn_fail(c, bf_wire_error("bad_message", id, &e, "hello: %s",
                                      e.msg));
        return;
    }
    c->rd.max_frame = d->max_frame;   /* no longer a stranger */
    LOGC(BF_LOG_INFO, c, "hello role=%s ranks=%d", role, c->ranks);
    bf_conn_send(c, reply);
}

/* ---- worker messages ------------------------------------------------------ */

static void handle_request_job(bf_conn *c, json_t *msg, const json_t *id)
{
    (void)msg;
    bf_daemon *d = c->d;
    int64_t now = bf_wall_ms();
    bf_lease lease;
    bf_error err;
    bf_error_clear(&err);
    int got = bf_store_lease_next(d->store, c->name, now, d->lease_ms, &lease,
                                  &err);
    if (got < 0) {
        reply_error(c, id, "store", &err, err.msg[0] ? err.msg : "lease failed");
        return;
    }
    if (got == 0) {
        json_t *r = new_reply("no_job", id);
        json_object_set_new(r, "retry_ms", json_integer(BF_NO_JOB_RETRY_MS));
        bf_conn_send(c, r);
        return;
    }
    hold(c, lease.attempt_id, now);
    json_t *config = json_loads(lease.config_json, 0, NULL);
    json_t *r = new_reply("job", id);
    json_object_set_new(r, "job_id", json_integer(lease.job_id));
    json_object_set_new(r, "attempt_id", json_integer(lease.attempt_id));
    json_object_set_new(r, "sweep_id", json_integer(lease.sweep_id));
    json_object_set_new(r, "attempt_no", json_integer(lease.attempt_no));
    json_object_set_new(r, "config", config ? config : json_object());
    json_object_set_new(r, "resume_checkpoint",
                        lease.resume_checkpoint
                            ? json_string(lease.resume_checkpoint)
                            : json_null());
    json_object_set_new(r, "resume_step", json_integer(lease.resume_step));
    json_object_set_new(r, "lease_seconds", json_integer(d->lease_ms / 1000));
    LOGC(BF_LOG_INFO, c, "lease job=%lld attempt=%lld (#%d) sweep=%lld",
         (long long)lease.job_id, (long long)lease.attempt_id,
         lease.attempt_no, (long long)lease.sweep_id);
    bf_lease_clear(&lease);
    bf_conn_send(c, r);
}

/* Renews the lease of attempt_id for c; returns the store's result. */
static int renew(bf_conn *c, int64_t attempt_id, int64_t now)
{
    int rc = bf_store_renew(c->d->store, attempt_id, now, c->d->lease_ms);
    if (rc == BF_STORE_OK)
        hold(c, attempt_id, now)->renewed_ms = now;
    return rc;
}

static void handle_heartbeat(bf_conn *c, json_t *msg, const json_t *id)
{
    int64_t attempt = 0;
    if (int_field(c, msg, id, "attempt_id", 0, &attempt)
        || check_owner(c, id, attempt))
        return;
    int64_t now = bf_wall_ms();
    int rc = renew(c, attempt, now);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(c, id, attempt);
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_store_error(c, id, "heartbeat");
        return;
    }
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "attempt_id", json_integer(attempt));
    json_object_set_new(r, "lease_seconds",
                        json_integer(c->d->lease_ms / 1000));
    mark_cancel(c->d, r, attempt);
    LOGC(BF_LOG_DEBUG, c, "heartbeat attempt=%lld", (long long)attempt);
    bf_conn_send(c, r);
}

static void handle_metrics(bf_conn *c, json_t *msg, const json_t *id)
{
    bf_daemon *d = c->d;
    int64_t attempt = 0, seq = 0;
    if (int_field(c, msg, id, "attempt_id", 0, &attempt)
        || int_field(c, msg, id, "seq", 1, &seq)
        || check_owner(c, id, attempt))
        return;
    json_t *records = json_object_get(msg, "records");
    if (!json_is_array(records)) {
        bf_error e;
        bf_error_set(&e, NULL, 0, "records", "must be an array");
        reply_error(c, id, "bad_message", &e,
                    "metrics: field 'records' must be an array");
        return;
    }
    int64_t now = bf_wall_ms();
    bf_error err;
    bf_error_clear(&err);
    int rows = 0;
    int rc = bf_store_ingest(d->store, attempt, records, now, &rows, &err);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(c, id, attempt);
        return;
    }
    if (rc == BF_STORE_DB_FAILED) {
        /* Not the records' fault (disk full, I/O): `store` makes the worker
         * keep the batch and resend it; `bad_records` would make it drop
         * metrics that were never wrong. */
        reply_error(c, id, "store", &err,
                    err.msg[0] ? err.msg : "metrics could not be stored");
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_error(c, id, "bad_records", &err,
                    err.msg[0] ? err.msg : "metrics rejected");
        return;
    }
    bf_held_attempt *h = bf_conn_find_held(c, attempt);
    if (!h || now - h->renewed_ms >= BF_RENEW_INTERVAL_MS)
        renew(c, attempt, now);

    json_t *ack = new_reply("ack", id);
    json_object_set_new(ack, "attempt_id", json_integer(attempt));
    json_object_set_new(ack, "seq", json_integer(seq));
    json_object_set_new(ack, "rows", json_integer(rows));
    mark_cancel(d, ack, attempt);
    json_array_append_new(c->pending_acks, ack);
    d->n_pending_acks++;
}

static void handle_checkpoint(bf_conn *c, json_t *msg, const json_t *id)
{
    int64_t attempt = 0, step = 0;
    const char *path = NULL;
    if (int_field(c, msg, id, "attempt_id", 0, &attempt)
        || str_field(c, msg, id, "path", 0, &path)
        || int_field(c, msg, id, "step", 0, &step)
        || check_owner(c, id, attempt))
        return;
    int64_t now = bf_wall_ms();
    int rc = bf_store_record_checkpoint(c->d->store, attempt, path, step, now);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(c, id, attempt);
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_store_error(c, id, "checkpoint");
        return;
    }
    renew(c, attempt, now);
    LOGC(BF_LOG_INFO, c, "checkpoint attempt=%lld step=%lld %s",
         (long long)attempt, (long long)step, path);
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "attempt_id", json_integer(attempt));
    mark_cancel(c->d, r, attempt);
    bf_conn_send(c, r);
}

/* job_done and job_failed: the attempt ends.  A failure report for a job
 * being cancelled is the worker saying it stopped, so the job ends
 * cancelled rather than going back to the queue. */
static void finish(bf_conn *c, json_t *msg, const json_t *id, int succeeded)
{
    bf_daemon *d = c->d;
    int64_t attempt = 0;
    const char *error_text = "failed";
    if (int_field(c, msg, id, "attempt_id", 0, &attempt)
        || (!succeeded && str_field(c, msg, id, "error", 1, &error_text))
        || check_owner(c, id, attempt))
        return;
    int64_t now = bf_wall_ms();
    int cancelled = !succeeded
        && bf_store_attempt_cancelled(d->store, attempt) == 1;
    int rc = !succeeded && cancelled
        ? bf_store_attempt_stopped(d->store, attempt, now)
        : bf_store_finish_attempt(d->store, attempt, succeeded,
                                  succeeded ? NULL : error_text, now);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(c, id, attempt);
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_store_error(c, id, succeeded ? "job_done" : "job_failed");
        return;
    }
    release(c, attempt);
    if (succeeded)
        LOGC(BF_LOG_INFO, c, "done attempt=%lld", (long long)attempt);
    else
        LOGC(BF_LOG_INFO, c, "%s attempt=%lld: %s",
             cancelled ? "stopped" : "failed", (long long)attempt, error_text);
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "attempt_id", json_integer(attempt));
    bf_conn_send(c, r);
}

static void handle_job_done(bf_conn *c, json_t *msg, const json_t *id)
{
    finish(c, msg, id, 1);
}

static void handle_job_failed(bf_conn *c, json_t *msg, const json_t *id)
{
    finish(c, msg, id, 0);
}

/* ---- client messages ------------------------------------------------------ */

static void handle_submit(bf_conn *c, json_t *msg, const json_t *id)
{
    const char *filename = NULL, *text = NULL;
    if (str_field(c, msg, id, "filename", 0, &filename)
        || str_field(c, msg, id, "text", 0, &text))
        return;
    int64_t sweep_id = 0;
    int n_jobs = 0;
    bf_error err;
    bf_error_clear(&err);
    if (bf_store_submit_sweep(c->d->store, filename, text,
                              json_string_length(json_object_get(msg, "text")),
                              bf_wall_ms(), &sweep_id, &n_jobs, &err)) {
        reply_error(c, id, "invalid", &err,
                    err.msg[0] ? err.msg : "sweep rejected");
        return;
    }
    LOGC(BF_LOG_INFO, c, "submitted sweep %lld from %s: %d jobs",
         (long long)sweep_id, filename, n_jobs);
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "sweep_id", json_integer(sweep_id));
    json_object_set_new(r, "jobs", json_integer(n_jobs));
    bf_conn_send(c, r);
}

/* status / jobs / results / workers: a store query wrapped in a reply named
 * like the request, under `key`.  A query refused for its input names the
 * field (no such sweep, an unknown status); a database failure does not. */
static void reply_query(bf_conn *c, const json_t *id, const char *type,
                        const char *key, json_t *result, const bf_error *err)
{
    if (!result) {
        reply_error(c, id, err->field[0] ? "not_found" : "store", err,
                    err->msg);
        return;
    }
    json_t *r = new_reply(type, id);
    json_object_set_new(r, key, result);
    bf_conn_send(c, r);
}

static void handle_status(bf_conn *c, json_t *msg, const json_t *id)
{
    int64_t sweep = 0;
    if (int_field(c, msg, id, "sweep_id", 1, &sweep))
        return;
    bf_error err;
    bf_error_clear(&err);
    json_t *res = bf_store_status(c->d->store, sweep, &err);
    reply_query(c, id, "status", "sweeps", res, &err);
}

static void handle_jobs(bf_conn *c, json_t *msg, const json_t *id)
{
    int64_t sweep = 0;
    const char *status = NULL;
    if (int_field(c, msg, id, "sweep_id", 1, &sweep)
        || str_field(c, msg, id, "status", 1, &status))
        return;
    bf_error err;
    bf_error_clear(&err);
    json_t *res = bf_store_jobs(c->d->store, sweep, status, &err);
    reply_query(c, id, "jobs", "jobs", res, &err);
}

static void handle_results(bf_conn *c, json_t *msg, const json_t *id)
{
    int64_t sweep = 0;
    if (int_field(c, msg, id, "sweep_id", 0, &sweep))
        return;
    bf_error err;
    bf_error_clear(&err);
    json_t *res = bf_store_results(c->d->store, sweep, &err);
    reply_query(c, id, "results", "rows", res, &err);
}

static void handle_workers(bf_conn *c, json_t *msg, const json_t *id)
{
    (void)msg;
    bf_error err;
    bf_error_clear(&err);
    json_t *res = bf_store_workers(c->d->store, &err);
    reply_query(c, id, "workers", "workers", res, &err);
}

/* Tells each worker holding one of the attempts to stop it. */
static void send_cancels(bf_daemon *d, const int64_t *attempts, int n)
{
    for (int i = 0; i < n; i++) {
        bf_conn *w = bf_net_find_holder(d, attempts[i]);
        if (!w)
            continue;   /* the reply to its next heartbeat tells it */
        LOGC(BF_LOG_INFO, w, "cancel attempt=%lld", (long long)attempts[i]);
        bf_conn_send(w, json_pack("{s:s, s:I}", "type", "cancel",
                                  "attempt_id", (json_int_t)attempts[i]));
    }
}

static void handle_cancel(bf_conn *c, json_t *msg, const json_t *id)
{
    bf_daemon *d = c->d;
    int64_t sweep = 0, job = 0;
    if (int_field(c, msg, id, "sweep_id", 1, &sweep)
        || int_field(c, msg, id, "job_id", 1, &job))
        return;
    if ((sweep > 0) == (job > 0)) {
        bf_error e;
        bf_error_set(&e, NULL, 0, "sweep_id", "give exactly one of "
                     "sweep_id or job_id");
        reply_error(c, id, "bad_message", &e,
                    "cancel: give exactly one of sweep_id or job_id");
        return;
    }
    int64_t *running = NULL;
    int n_running = 0;
    bf_error err;
    bf_error_clear(&err);
    int64_t now = bf_wall_ms();
    int rc = sweep > 0
        ? bf_store_cancel_sweep(d->store, sweep, now, &running, &n_running,
                                &err)
        : bf_store_cancel_job(d->store, job, now, &running, &n_running, &err);
    if (rc != BF_STORE_OK) {
        reply_error(c, id, rc == BF_STORE_NOT_FOUND ? "not_found" : "store",
                    &err, err.msg[0] ? err.msg : "cancel failed");
        free(running);
        return;
    }
    LOGC(BF_LOG_INFO, c, "cancel %s %lld (%d running)",
         sweep > 0 ? "sweep" : "job", (long long)(sweep > 0 ? sweep : job),
         n_running);
    send_cancels(d, running, n_running);
    free(running);
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "running", json_integer(n_running));
    bf_conn_send(c, r);
}

static void handle_retry(bf_conn *c, json_t *msg, const json_t *id)
{
    int64_t job = 0;
    if (int_field(c, msg, id, "job_id", 0, &job))
        return;
    bf_error err;
    bf_error_clear(&err);
    int rc = bf_store_retry_job(c->d->store, job, &err);
    if (rc != BF_STORE_OK) {
        reply_error(c, id, rc == BF_STORE_NOT_FOUND ? "not_found" : "invalid",
                    &err, err.msg[0] ? err.msg : "retry refused");
        return;
    }
    LOGC(BF_LOG_INFO, c, "retry job=%lld", (long long)job);
    bf_conn_send(c, new_reply("ack", id));
}

/* ---- dispatch ------------------------------------------------------------- */

typedef void (*handler_fn)(bf_conn *c, json_t *msg, const json_t *id);

static const struct handler {
    const char *type;
    bf_role role;       /* who may send it; NONE = before hello only */
    handler_fn fn;
} handlers[] = {
    { "hello",       BF_ROLE_NONE,   handle_hello },
    { "request_job", BF_ROLE_WORKER, handle_request_job },
    { "heartbeat",   BF_ROLE_WORKER, handle_heartbeat },
    { "metrics",     BF_ROLE_WORKER, handle_metrics },
    { "checkpoint",  BF_ROLE_WORKER, handle_checkpoint },
    { "job_done",    BF_ROLE_WORKER, handle_job_done },
    { "job_failed",  BF_ROLE_WORKER, handle_job_failed },
    { "submit",      BF_ROLE_CLIENT, handle_submit },
    { "status",      BF_ROLE_CLIENT, handle_status },
    { "jobs",        BF_ROLE_CLIENT, handle_jobs },
    { "results",     BF_ROLE_CLIENT, handle_results },
    { "workers",     BF_ROLE_CLIENT, handle_workers },
    { "cancel",      BF_ROLE_CLIENT, handle_cancel },
    { "retry",       BF_ROLE_CLIENT, handle_retry },
};

static const char *role_name(bf_role r)
{
    return r == BF_ROLE_WORKER ? "worker" : r == BF_ROLE_CLIENT ? "client"
                                                                : "none";
}

void bf_protocol_handle(bf_conn *c, const char *line, size_t len)
{
    bf_error err;
    bf_error_clear(&err);
    json_t *msg = bf_wire_parse(line, len, &err);
    if (!msg) {
        if (c->role == BF_ROLE_NONE) {
            LOGC(BF_LOG_WARN, c, "refused before hello: %s", err.msg);
            bf_conn_fail(c, bf_wire_error("no_hello", NULL, &err,
                         "expected a hello first; got: %s", err.msg));
        } else {
            reply_error(c, NULL, "bad_json", &err, err.msg);
        }
        return;
    }
    const json_t *id = json_object_get(msg, "id");
    const char *type = bf_wire_type(msg);
    const struct handler *h = NULL;
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (strcmp(handlers[i].type, type) == 0)
            h = &handlers[i];

    if (c->role == BF_ROLE_NONE && (!h || h->role != BF_ROLE_NONE)) {
        LOGC(BF_LOG_WARN, c, "refused: '%s' before hello", type);
        bf_conn_fail(c, bf_wire_error("no_hello", id, NULL,
                     "the first message must be a hello, not '%s'", type));
    } else if (!h) {
        char text[200];
        snprintf(text, sizeof text, "unknown message type '%.100s'", type);
        reply_error(c, id, "unknown_type", NULL, text);
    } else if (h->role != c->role) {
        char text[200];
        snprintf(text, sizeof text, "'%s' is not allowed for a %s connection",
                 type, role_name(c->role));
        reply_error(c, id, "out_of_place", NULL, text);
    } else {
        h->fn(c, msg, id);
    }
    json_decref(msg);
}

void bf_protocol_flush(bf_daemon *d)
{
    /* Flushed even with no acks waiting, so that a batch lost without any
     * (its own ingest failed) is reported now, not to a later pass whose
     * acks it would turn into errors. */
    bf_error err;
    bf_error_clear(&err);
    int rc = bf_store_flush(d->store, &err);
    if (rc)
        bf_log_error("flush failed: %s", err.msg);
    if (d->n_pending_acks == 0)
        return;
    /* A send may close its connection (and unlink it): keep `next`, and
     * take each connection's acks out before sending them. */
    for (bf_conn *c = d->conns, *next; c; c = next) {
        next = c->next;
        json_t *acks = c->pending_acks;
        c->pending_acks = json_array();
        size_t i;
        json_t *ack;
        json_array_foreach(acks, i, ack) {
            if (rc == 0)
                bf_conn_send(c, json_incref(ack));
            else
                bf_conn_send(c, bf_wire_error("store",
                             json_object_get(ack, "id"), NULL,
                             "metrics batch seq %lld was not stored: %s",
                             (long long)json_integer_value(
                                 json_object_get(ack, "seq")), err.msg));
        }
        json_decref(acks);
    }
    d->n_pending_acks = 0;
}

void bf_protocol_closed(bf_conn *c)
{
    if (c->role != BF_ROLE_WORKER)
        return;
    /* A worker that reconnected leaves its old connection behind, and that
     * one may be noticed dead only after the new hello: it must not mark
     * the worker disconnected while a connection of the same name is open
     * (c is already unlinked from d->conns). */
    for (bf_conn *o = c->d->conns; o; o = o->next)
        if (o->role == BF_ROLE_WORKER && strcmp(o->name, c->name) == 0)
            return;
    record_worker(c, 0);
}
