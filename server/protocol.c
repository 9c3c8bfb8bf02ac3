/* protocol: what each message means.  One handler per message type; each
 * validates its fields, calls the store, and replies.  docs/protocol.md is
 * the reference for every message handled here. */
#include "protocol.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cancels.h"
#include "clock.h"
#include "log.h"

/* The longest checkpoint path recorded (PATH_MAX). */
#define BF_PROTOCOL_MAX_PATH 4096
/* The longest request token (request_job) stored with a lease. */
#define BF_PROTOCOL_MAX_REQUEST 64
#define BF_STR_(x) #x
#define BF_STR(x) BF_STR_(x)
/* How long a worker told "no job" waits before asking again. */
#define BF_NO_JOB_RETRY_MS 1000
/* Metrics renew the lease too, but at most this often per attempt: every
 * renewal is a commit, and a commit per metrics batch would undo batching. */
#define BF_RENEW_INTERVAL_MS 1000

typedef enum { ROLE_NONE = 0, ROLE_WORKER = 1, ROLE_CLIENT = 2 } peer_role;

/* What the protocol knows of one connection (its bf_conn's data).  A
 * reply made off the loop (queries.h, submit.h) holds a reference: the
 * session outlives its connection until that reply is done. */
typedef struct session {
    bf_conn *conn;              /* NULL once the connection closed */
    int refs;
    bf_protocol *p;
    peer_role role;             /* ROLE_NONE until a good hello */
    char name[128];             /* worker name, or "client@PEER" */
    char host[128];             /* worker host from its hello */
    int ranks;
    int protocol_errors;        /* in a row (is_protocol_error) */
    bf_submission *submitting;  /* its sweep being stored, or NULL */
    json_t *pending_acks;       /* acks to send after the next flush */
} session;

/* A line about one connection, within its log budget (net.h). */
#define LOGC(level, s, fmt, ...)                                            \
    do {                                                                    \
        if (bf_log_enabled(level) && bf_conn_log_ok((s)->conn))             \
            bf_log(level, "conn %llu %s: " fmt,                             \
                   (unsigned long long)(s)->conn->serial,                   \
                   (s)->name[0] ? (s)->name : (s)->conn->peer,              \
                   __VA_ARGS__);                                            \
    } while (0)

/* ---- small helpers -------------------------------------------------------- */

/* The codes that say the peer broke the protocol (rather than asked for
 * something the state refuses, or met a store failure). */
static int is_protocol_error(const char *code)
{
    static const char *const codes[] = { "bad_json", "unknown_type",
        "out_of_place", "bad_message", "bad_records" };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(code, codes[i]) == 0)
            return 1;
    return 0;
}

static void reply_error(session *s, const json_t *id, const char *code,
                        const bf_error *err, const char *text)
{
    LOGC(BF_LOG_WARN, s, "error %s: %s", code, text);
    bf_conn_send(s->conn, bf_wire_error(code, id, err, "%s", text));
    int max = s->p->max_protocol_errors;
    if (!is_protocol_error(code) || max <= 0
        || ++s->protocol_errors < max)
        return;
    /* 3 MB of "{}\n" used to cost a million error replies (and log
     * lines): a peer that keeps breaking the protocol is cut off. */
    LOGC(BF_LOG_WARN, s, "%d protocol errors in a row, closing", max);
    bf_conn_fail(s->conn, bf_wire_error("too_many_errors", NULL, NULL,
                 "%d protocol errors in a row: closing the connection",
                 max));
}

static json_t *new_reply(const char *type, const json_t *id)
{
    json_t *m = json_pack("{s:s}", "type", type);
    if (id)
        json_object_set(m, "id", (json_t *)id);
    return m;
}

/* Replies bad_message naming the field and what it must be; returns -1. */
static int bad_field(session *s, const json_t *msg, const json_t *id,
                     const char *key, const char *must_be)
{
    char text[256];
    snprintf(text, sizeof text, "%s: field '%s' must be %s",
             bf_wire_type(msg), key, must_be);
    bf_error e;
    bf_error_set(&e, NULL, 0, key, "must be %s", must_be);
    reply_error(s, id, "bad_message", &e, text);
    return -1;
}

/* Reads an integer field; on a missing/wrong one replies bad_message naming
 * it and returns -1.  optional: absence leaves *out alone and returns 0. */
static int int_field(session *s, const json_t *msg, const json_t *id,
                     const char *key, int optional, int64_t *out)
{
    json_t *v = json_object_get(msg, key);
    if (!v && optional)
        return 0;
    if (!json_is_integer(v))
        return bad_field(s, msg, id, key, "an integer");
    *out = json_integer_value(v);
    return 0;
}

/* The same for a string field. */
static int str_field(session *s, const json_t *msg, const json_t *id,
                     const char *key, int optional, const char **out)
{
    json_t *v = json_object_get(msg, key);
    if (!v && optional)
        return 0;
    if (!json_is_string(v))
        return bad_field(s, msg, id, key, "a string");
    *out = json_string_value(v);
    return 0;
}

/* An id (sweep, job, attempt): an integer >= 1.  A negative one used to
 * pass (`jobs` with sweep_id -1 listed every job of every sweep). */
static int id_field(session *s, const json_t *msg, const json_t *id,
                    const char *key, int optional, int64_t *out)
{
    int64_t v = 1;
    if (int_field(s, msg, id, key, optional, &v))
        return -1;
    if (v < 1)
        return bad_field(s, msg, id, key, "a positive integer");
    if (json_object_get(msg, key))
        *out = v;
    return 0;
}

/* A path the daemon records and hands to the next attempt: 1 ..
 * BF_PROTOCOL_MAX_PATH bytes, printable (no newline to forge a log line). */
static int path_field(session *s, const json_t *msg, const json_t *id,
                      const char *key, const char **out)
{
    if (str_field(s, msg, id, key, 0, out))
        return -1;
    size_t n = json_string_length(json_object_get(msg, key));
    const char *rule = "a path of 1 .. " BF_STR(BF_PROTOCOL_MAX_PATH)
                       " bytes without control characters (newline, NUL)";
    if (n == 0 || n > BF_PROTOCOL_MAX_PATH)
        return bad_field(s, msg, id, key, rule);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)(*out)[i] < 0x20 || (*out)[i] == 0x7f)
            return bad_field(s, msg, id, key, rule);
    return 0;
}

/* Attempt holding goes through the one table of holders.h. */
static bf_held_attempt *held(session *s, int64_t attempt_id)
{
    return bf_holders_held_by(&s->p->holders, s->conn, attempt_id);
}

static bf_held_attempt *hold(session *s, int64_t attempt_id, int64_t now)
{
    return bf_holders_hold(&s->p->holders, s->conn, attempt_id, now);
}

static void release(session *s, int64_t attempt_id)
{
    bf_holders_release(&s->p->holders, s->conn, attempt_id);
}

/* The reply for a store call on an attempt that is no longer live. */
static void reply_fenced(session *s, const json_t *id, int64_t attempt_id)
{
    release(s, attempt_id);
    char text[128];
    snprintf(text, sizeof text,
             "attempt %lld is no longer the live lease of its job: stop it",
             (long long)attempt_id);
    json_t *m = bf_wire_error("fenced", id, NULL, "%s", text);
    json_object_set_new(m, "attempt_id", json_integer(attempt_id));
    LOGC(BF_LOG_INFO, s, "fenced attempt %lld", (long long)attempt_id);
    bf_conn_send(s->conn, m);
}

/* The reply for a store call that failed, err saying why. */
static void reply_store_error(session *s, const json_t *id, const char *what,
                              const bf_error *err)
{
    char text[1200];
    snprintf(text, sizeof text, "%s failed in the store: %s", what, err->msg);
    reply_error(s, id, "store", NULL, text);
}

/* Checks, before any store call on attempt_id, that s's worker may act for
 * it; otherwise replies (fenced, or store) and returns -1.  An attempt this
 * connection holds was leased or re-claimed by this worker already.  Any
 * other must have been leased to a worker of the same name: attempt ids are
 * small integers that a fresh database hands out again, so a worker that
 * outlived its daemon and reconnected to one on a new database (the token
 * file stays when bifocal.db is deleted) used to heartbeat "its" attempt id
 * and take over another worker's live attempt, putting one job on two live
 * workers and mixing their metrics. */
static int check_owner(session *s, const json_t *id, int64_t attempt_id)
{
    if (held(s, attempt_id))
        return 0;
    bf_error err = {0};
    int owned = bf_store_attempt_owned_by(s->p->store, attempt_id, s->name,
                                          &err);
    if (owned == 1)
        return 0;
    if (owned < 0)
        reply_store_error(s, id, "looking up the attempt", &err);
    else
        reply_fenced(s, id, attempt_id);
    return -1;
}

/* Records s's worker in the workers table as connected or not. */
static void record_worker(session *s, int connected)
{
    bf_error err = {0};
    if (bf_store_worker_seen(s->p->store, s->name, s->host, s->ranks,
                             connected, bf_wall_ms(), &err))
        LOGC(BF_LOG_ERROR, s, "recording the worker failed: %s", err.msg);
}

/* Adds "cancel": true to a worker's reply when its job is being cancelled. */
static void mark_cancel(bf_protocol *p, json_t *reply, int64_t attempt_id)
{
    if (bf_store_attempt_cancelled(p->store, attempt_id, NULL) == 1)
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

static void refuse_hello(session *s, const json_t *id, const bf_error *e)
{
    bf_conn_fail(s->conn, bf_wire_error("bad_message", id, e, "hello: %s",
                                        e->msg));
}

/* Reads version, token and role, and refuses the connection (-1) unless
 * the version is ours and the token right. */
static int admit(session *s, json_t *msg, const json_t *id, const char **role)
{
    int64_t version = 0;
    const char *token = NULL;
    if (int_field(s, msg, id, "version", 0, &version)
        || str_field(s, msg, id, "token", 0, &token)
        || str_field(s, msg, id, "role", 0, role)) {
        bf_conn_fail(s->conn, NULL);
        return -1;
    }
    if (version != BF_WIRE_VERSION) {
        char text[128];
        snprintf(text, sizeof text,
                 "protocol version %lld is not supported (server speaks %d)",
                 (long long)version, BF_WIRE_VERSION);
        LOGC(BF_LOG_WARN, s, "refused: %s", text);
        bf_conn_fail(s->conn, bf_wire_error("version", id, NULL, "%s", text));
        return -1;
    }
    if (!token_equal(token, s->p->token)) {
        LOGC(BF_LOG_WARN, s, "refused: %s", "wrong token");
        bf_conn_fail(s->conn, bf_wire_error("auth", id, NULL, "wrong token"));
        return -1;
    }
    return 0;
}

/* A worker's hello names it (name, host, ranks); the workers table records
 * it connected.  -1: refused. */
static int hello_worker(session *s, json_t *msg, const json_t *id)
{
    const char *name = NULL, *host = "";
    int64_t ranks = 1;
    if (str_field(s, msg, id, "name", 0, &name)
        || str_field(s, msg, id, "host", 1, &host)
        || int_field(s, msg, id, "ranks", 1, &ranks)) {
        bf_conn_fail(s->conn, NULL);
        return -1;
    }
    /* The name is kept in s->name and recorded with every lease and on
     * disconnect: one longer than that buffer used to be cut short there,
     * so the workers row of the full name stayed connected forever and a
     * second row appeared.  ranks is kept as an int: 2^32 used to wrap
     * to 0. */
    bf_error e;
    if (!name[0] || strlen(name) >= sizeof s->name) {
        bf_error_set(&e, NULL, 0, "name", "must be non-empty and at most %zu "
                     "bytes", sizeof s->name - 1);
        refuse_hello(s, id, &e);
        return -1;
    }
    if (ranks < 1 || ranks > INT_MAX) {
        bf_error_set(&e, NULL, 0, "ranks", "must be in 1 .. %d", INT_MAX);
        refuse_hello(s, id, &e);
        return -1;
    }
    s->role = ROLE_WORKER;
    s->ranks = (int)ranks;
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->host, sizeof s->host, "%s", host);
    record_worker(s, 1);
    return 0;
}

static void handle_hello(session *s, json_t *msg, const json_t *id)
{
    const char *role = NULL;
    if (admit(s, msg, id, &role) < 0)
        return;
    if (strcmp(role, "client") == 0) {
        s->role = ROLE_CLIENT;
        snprintf(s->name, sizeof s->name, "client@%s", s->conn->peer);
    } else if (strcmp(role, "worker") != 0) {
        bf_error e;
        bf_error_set(&e, NULL, 0, "role", "must be \"worker\" or \"client\"");
        refuse_hello(s, id, &e);
        return;
    } else if (hello_worker(s, msg, id) < 0) {
        return;
    }
    bf_conn_admit(s->conn, s->p->max_frame);   /* no longer a stranger */
    LOGC(BF_LOG_INFO, s, "hello role=%s ranks=%d", role, s->ranks);
    json_t *reply = new_reply("ack", id);
    json_object_set_new(reply, "version", json_integer(BF_WIRE_VERSION));
    json_object_set_new(reply, "lease_seconds",
                        json_integer(s->p->lease_ms / 1000));
    bf_conn_send(s->conn, reply);
}

/* ---- worker messages ------------------------------------------------------ */

/* The `job` reply that hands a lease to a worker. */
static json_t *job_reply(const json_t *id, const bf_lease *lease,
                         int64_t lease_ms)
{
    json_t *config = json_loads(lease->config_json, 0, NULL);
    json_t *r = new_reply("job", id);
    json_object_set_new(r, "job_id", json_integer(lease->job_id));
    json_object_set_new(r, "attempt_id", json_integer(lease->attempt_id));
    json_object_set_new(r, "sweep_id", json_integer(lease->sweep_id));
    json_object_set_new(r, "attempt_no", json_integer(lease->attempt_no));
    json_object_set_new(r, "config", config ? config : json_object());
    json_object_set_new(r, "resume_checkpoint",
                        lease->resume_checkpoint
                            ? json_string(lease->resume_checkpoint)
                            : json_null());
    json_object_set_new(r, "resume_step", json_integer(lease->resume_step));
    json_object_set_new(r, "database_id", json_string(lease->database_id));
    json_object_set_new(r, "source_job_id",
                        json_integer(lease->source_job_id));
    json_object_set_new(r, "lease_seconds", json_integer(lease_ms / 1000));
    return r;
}

/* request_job's optional `request`: the worker's token for one ask, the
 * same on each resend of it; 1 .. BF_PROTOCOL_MAX_REQUEST letters, digits,
 * '-', '_' or '.' (it is stored with the lease and may be logged). */
static int request_field(session *s, const json_t *msg, const json_t *id,
                         const char **out)
{
    if (str_field(s, msg, id, "request", 1, out))
        return -1;
    if (!*out)
        return 0;   /* none named (an older worker) */
    size_t n = strlen(*out);
    int ok = n > 0 && n <= BF_PROTOCOL_MAX_REQUEST &&
             n == json_string_length(json_object_get(msg, "request"));
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)(*out)[i]) || strchr("-_.", (*out)[i]);
    return ok ? 0 : bad_field(s, msg, id, "request", "1 .. "
                              BF_STR(BF_PROTOCOL_MAX_REQUEST) " letters, "
                              "digits, '-', '_' or '.'");
}

/* request_job's optional `trainer`: the trainer the worker runs (a job
 * config's `trainer`, docs/trainers.md); none is builtin. */
static int trainer_field(session *s, const json_t *msg, const json_t *id,
                         const char **out)
{
    if (str_field(s, msg, id, "trainer", 1, out))
        return -1;
    if (!*out || (strlen(*out) == json_string_length(json_object_get(
                      msg, "trainer")) && bf_job_config_trainer_name_ok(*out)))
        return 0;
    return bad_field(s, msg, id, "trainer", "a trainer name (1 .. 63 "
                     "lowercase letters, digits, '_' or '-', starting with a "
                     "letter)");
}

static void handle_request_job(session *s, json_t *msg, const json_t *id)
{
    bf_protocol *p = s->p;
    const char *request = NULL, *trainer = NULL;
    if (request_field(s, msg, id, &request) ||
        trainer_field(s, msg, id, &trainer))
        return;
    int64_t now = bf_wall_ms();
    bf_lease lease;
    bf_error err;
    bf_error_clear(&err);
    int got = bf_store_lease_for(p->store, s->name, request, trainer, now,
                                 p->lease_ms, &lease, &err);
    if (got == BF_STORE_CONFLICT) {
        reply_error(s, id, "busy", &err, err.msg);
        return;
    }
    if (got < 0) {
        reply_error(s, id, "store", &err, err.msg[0] ? err.msg : "lease failed");
        return;
    }
    if (got == 0) {
        int pending = bf_store_work_pending(p->store, trainer, &err);
        if (pending < 0) {
            reply_error(s, id, "store", &err, err.msg);
            return;
        }
        json_t *r = new_reply("no_job", id);
        json_object_set_new(r, "retry_ms", json_integer(BF_NO_JOB_RETRY_MS));
        json_object_set_new(r, "pending", json_boolean(pending));
        bf_conn_send(s->conn, r);
        return;
    }
    hold(s, lease.attempt_id, now);
    LOGC(BF_LOG_INFO, s, "lease job=%lld attempt=%lld (#%d) sweep=%lld%s",
         (long long)lease.job_id, (long long)lease.attempt_id,
         lease.attempt_no, (long long)lease.sweep_id,
         lease.again ? " (again: the request's first reply was lost)" : "");
    bf_conn_send(s->conn, job_reply(id, &lease, p->lease_ms));
    bf_lease_clear(&lease);
}

/* Renews the lease of attempt_id for s; returns the store's result (err,
 * may be NULL, says why it failed). */
static int renew(session *s, int64_t attempt_id, int64_t now, bf_error *err)
{
    int rc = bf_store_renew(s->p->store, attempt_id, now, s->p->lease_ms, err);
    if (rc == BF_STORE_OK)
        hold(s, attempt_id, now)->renewed_ms = now;
    return rc;
}

static void handle_heartbeat(session *s, json_t *msg, const json_t *id)
{
    int64_t attempt = 0;
    if (id_field(s, msg, id, "attempt_id", 0, &attempt)
        || check_owner(s, id, attempt))
        return;
    int64_t now = bf_wall_ms();
    bf_error err = {0};
    int rc = renew(s, attempt, now, &err);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(s, id, attempt);
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_store_error(s, id, "heartbeat", &err);
        return;
    }
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "attempt_id", json_integer(attempt));
    json_object_set_new(r, "lease_seconds",
                        json_integer(s->p->lease_ms / 1000));
    mark_cancel(s->p, r, attempt);
    LOGC(BF_LOG_DEBUG, s, "heartbeat attempt=%lld", (long long)attempt);
    bf_conn_send(s->conn, r);
}

/* A metrics batch the store did not take. */
static void reply_ingest_error(session *s, const json_t *id, int64_t attempt,
                               int rc, const bf_error *err)
{
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND)
        reply_fenced(s, id, attempt);
    else if (rc == BF_STORE_DB_FAILED)
        /* Not the records' fault (disk full, I/O): `store` makes the worker
         * keep the batch and resend it; `bad_records` would make it drop
         * metrics that were never wrong. */
        reply_error(s, id, "store", err,
                    err->msg[0] ? err->msg : "metrics could not be stored");
    else
        reply_error(s, id, "bad_records", err,
                    err->msg[0] ? err->msg : "metrics rejected");
}

/* The ack of a metrics batch waits for the flush that makes it durable. */
static void defer_ack(session *s, const json_t *id, int64_t attempt,
                      int64_t seq, int rows, const json_t *rejected)
{
    json_t *ack = new_reply("ack", id);
    json_object_set_new(ack, "attempt_id", json_integer(attempt));
    json_object_set_new(ack, "seq", json_integer(seq));
    json_object_set_new(ack, "rows", json_integer(rows));
    if (rejected) {
        json_object_set(ack, "rejected", json_object_get(rejected, "records"));
        json_object_set(ack, "rejected_count",
                        json_object_get(rejected, "count"));
    }
    mark_cancel(s->p, ack, attempt);
    json_array_append_new(s->pending_acks, ack);
    s->p->n_pending_acks++;
}

static void handle_metrics(session *s, json_t *msg, const json_t *id)
{
    int64_t attempt = 0, seq = 0;
    if (id_field(s, msg, id, "attempt_id", 0, &attempt)
        || int_field(s, msg, id, "seq", 1, &seq)
        || check_owner(s, id, attempt))
        return;
    json_t *records = json_object_get(msg, "records");
    if (!json_is_array(records)) {
        bf_error e;
        bf_error_set(&e, NULL, 0, "records", "must be an array");
        reply_error(s, id, "bad_message", &e,
                    "metrics: field 'records' must be an array");
        return;
    }
    int64_t now = bf_wall_ms();
    bf_error err;
    bf_error_clear(&err);
    int rows = 0;
    json_t *rejected = NULL;
    int rc = bf_store_ingest(s->p->store, attempt, records, &rows,
                             &rejected, &err);
    if (rc != BF_STORE_OK) {
        reply_ingest_error(s, id, attempt, rc, &err);
        return;
    }
    if (rejected) {
        /* The valid records of the batch are stored all the same. */
        json_t *first = json_array_get(json_object_get(rejected, "records"), 0);
        LOGC(BF_LOG_WARN, s, "metrics attempt=%lld seq=%lld: %lld record(s) "
             "rejected, first: %s", (long long)attempt, (long long)seq,
             (long long)json_integer_value(json_object_get(rejected, "count")),
             json_string_value(json_object_get(first, "error")));
    }
    bf_held_attempt *h = held(s, attempt);
    if (!h || now - h->renewed_ms >= BF_RENEW_INTERVAL_MS)
        renew(s, attempt, now, NULL);
    defer_ack(s, id, attempt, seq, rows, rejected);
    json_decref(rejected);
}

static void handle_checkpoint(session *s, json_t *msg, const json_t *id)
{
    int64_t attempt = 0, step = 0;
    const char *path = NULL;
    if (id_field(s, msg, id, "attempt_id", 0, &attempt)
        || path_field(s, msg, id, "path", &path)
        || int_field(s, msg, id, "step", 0, &step)
        || (step < 0 && bad_field(s, msg, id, "step", "an integer >= 0"))
        || check_owner(s, id, attempt))
        return;
    int64_t now = bf_wall_ms();
    bf_error err = {0};
    int rc = bf_store_record_checkpoint(s->p->store, attempt, path, step,
                                        &err);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(s, id, attempt);
        return;
    }
    if (rc == BF_STORE_INVALID) {
        reply_error(s, id, "invalid", NULL, err.msg);
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_store_error(s, id, "checkpoint", &err);
        return;
    }
    renew(s, attempt, now, NULL);
    LOGC(BF_LOG_INFO, s, "checkpoint attempt=%lld step=%lld %s",
         (long long)attempt, (long long)step, path);
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "attempt_id", json_integer(attempt));
    mark_cancel(s->p, r, attempt);
    bf_conn_send(s->conn, r);
}

/* The job's recorded checkpoint would not load on the worker: it is no
 * longer handed to the job's attempts. */
static void handle_checkpoint_bad(session *s, json_t *msg, const json_t *id)
{
    int64_t attempt = 0;
    const char *path = NULL, *why = "";
    if (id_field(s, msg, id, "attempt_id", 0, &attempt)
        || path_field(s, msg, id, "path", &path)
        || str_field(s, msg, id, "error", 1, &why)
        || check_owner(s, id, attempt))
        return;
    bf_error err = {0};
    int rc = bf_store_checkpoint_bad(s->p->store, attempt, path, &err);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(s, id, attempt);
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_store_error(s, id, "checkpoint_bad", &err);
        return;
    }
    LOGC(BF_LOG_WARN, s, "attempt=%lld: bad checkpoint %s: %.300s",
         (long long)attempt, path, why);
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "attempt_id", json_integer(attempt));
    bf_conn_send(s->conn, r);
}

/* job_done and job_failed: the attempt ends.  A failure report for a job
 * being cancelled is the worker saying it stopped, so the job ends
 * cancelled rather than going back to the queue. */
static void finish(session *s, json_t *msg, const json_t *id, int succeeded)
{
    bf_protocol *p = s->p;
    int64_t attempt = 0;
    const char *error_text = "failed";
    json_t *permanent = json_object_get(msg, "permanent");
    if (id_field(s, msg, id, "attempt_id", 0, &attempt)
        || (!succeeded && str_field(s, msg, id, "error", 1, &error_text))
        || (!succeeded && permanent && !json_is_boolean(permanent)
            && bad_field(s, msg, id, "permanent", "true or false"))
        || check_owner(s, id, attempt))
        return;
    int64_t now = bf_wall_ms();
    int cancelled = !succeeded
        && bf_store_attempt_cancelled(p->store, attempt, NULL) == 1;
    bf_error err = {0};
    int rc = !succeeded && cancelled
        ? bf_store_attempt_stopped(p->store, attempt, now, &err)
        : !succeeded && json_is_true(permanent)
        ? bf_store_fail_permanently(p->store, attempt, error_text, now, &err)
        : bf_store_finish_attempt(p->store, attempt, succeeded,
                                  succeeded ? NULL : error_text, now, &err);
    if (rc == BF_STORE_FENCED || rc == BF_STORE_NOT_FOUND) {
        reply_fenced(s, id, attempt);
        return;
    }
    if (rc != BF_STORE_OK) {
        reply_store_error(s, id, succeeded ? "job_done" : "job_failed", &err);
        return;
    }
    release(s, attempt);
    if (succeeded)
        LOGC(BF_LOG_INFO, s, "done attempt=%lld", (long long)attempt);
    else
        LOGC(BF_LOG_INFO, s, "%s attempt=%lld: %s",
             cancelled ? "stopped" : "failed", (long long)attempt, error_text);
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "attempt_id", json_integer(attempt));
    bf_conn_send(s->conn, r);
}

static void handle_job_done(session *s, json_t *msg, const json_t *id)
{
    finish(s, msg, id, 1);
}

static void handle_job_failed(session *s, json_t *msg, const json_t *id)
{
    finish(s, msg, id, 0);
}

/* ---- client messages ------------------------------------------------------ */

/* ---- replies made off the loop ----------------------------------------- */

static void session_unref(session *s)
{
    if (--s->refs == 0) {
        json_decref(s->pending_acks);
        free(s);
    }
}

/* s's later requests wait until the reply made off the loop is sent:
 * replies go out in request order. */
static session *hold_for_reply(session *s)
{
    s->refs++;
    bf_conn_pause(s->conn);
    return s;
}

/* The reply is out: s reads on (if still connected). */
static void reply_done(session *s)
{
    if (s->conn)
        bf_conn_resume(s->conn);
    session_unref(s);
}

typedef struct submit_wait {
    session *s;
    json_t *id;
    char *filename;
} submit_wait;

static void submit_done(void *ctx, int rc, int64_t sweep_id, size_t n_jobs,
                        const json_t *warnings, const bf_error *err)
{
    submit_wait *w = ctx;
    session *s = w->s;
    s->submitting = NULL;
    if (!s->conn) {
        /* The submitter left; the outcome is in the store anyway. */
    } else if (rc) {
        /* A full disk is not the sweep's fault: `store`, not `invalid`.
         * A --strict refusal lists every warning. */
        const char *code = rc == BF_STORE_DB_FAILED ? "store" : "invalid";
        LOGC(BF_LOG_WARN, s, "error %s: %s", code, err->msg);
        json_t *m = bf_wire_error(code, w->id, err, "%s",
                                  err->msg[0] ? err->msg : "sweep rejected");
        if (warnings)
            json_object_set(m, "warnings", (json_t *)warnings);
        bf_conn_send(s->conn, m);
    } else {
        LOGC(BF_LOG_INFO, s, "submitted sweep %lld from %s: %zu jobs, %zu "
             "warnings", (long long)sweep_id, w->filename, n_jobs,
             json_array_size(warnings));
        json_t *r = new_reply("ack", w->id);
        json_object_set_new(r, "sweep_id", json_integer(sweep_id));
        json_object_set_new(r, "jobs", json_integer((json_int_t)n_jobs));
        json_object_set(r, "warnings", (json_t *)warnings);
        bf_conn_send(s->conn, r);
    }
    reply_done(s);
    json_decref(w->id);
    free(w->filename);
    free(w);
}

/* Expanded off the loop, stored a chunk per pass (submit.h). */
static void handle_submit(session *s, json_t *msg, const json_t *id)
{
    const char *filename = NULL, *text = NULL;
    bf_submit_opts opts = {0};
    json_t *strict = json_object_get(msg, "strict");
    if (str_field(s, msg, id, "filename", 0, &filename)
        || str_field(s, msg, id, "text", 0, &text)
        || str_field(s, msg, id, "dir", 1, &opts.dir)
        || (opts.dir && opts.dir[0] != '/'
            && bad_field(s, msg, id, "dir", "an absolute path"))
        || (strict && !json_is_boolean(strict)
            && bad_field(s, msg, id, "strict", "true or false")))
        return;
    opts.strict = json_is_true(strict);
    submit_wait *w = bf_xcalloc(1, sizeof *w);
    w->s = hold_for_reply(s);
    w->id = id ? json_incref((json_t *)id) : NULL;
    w->filename = bf_xstrdup(filename);
    s->submitting = bf_submits_start(&s->p->submits, filename, text,
                                     json_string_length(json_object_get(msg,
                                                                        "text")),
                                     &opts, bf_wall_ms(), submit_done, w);
}

static void query_done(void *ctx, const json_t *id, char *frame, size_t len,
                       const char *code, const bf_error *err)
{
    session *s = ctx;
    if (s->conn && frame)
        bf_conn_send_frame(s->conn, frame, len);
    else if (s->conn)
        reply_error(s, id, code, err, err->msg);
    else
        free(frame);
    reply_done(s);
}

/* Runs q (taken over) on the thread pool; the reply follows. */
static void run_query(session *s, bf_query *q)
{
    bf_queries_run(&s->p->queries, q, query_done, hold_for_reply(s));
}

/* status / jobs / results / rows / workers: a store query run off the
 * loop (queries.h), answered with a reply named like the request. */
static void handle_status(session *s, json_t *msg, const json_t *id)
{
    bf_query *q = bf_query_new(BF_QUERY_STATUS, id);
    if (id_field(s, msg, id, "sweep_id", 1, &q->sweep_id)) {
        bf_query_free(q);
        return;
    }
    run_query(s, q);
}

static void handle_jobs(session *s, json_t *msg, const json_t *id)
{
    bf_query *q = bf_query_new(BF_QUERY_JOBS, id);
    const char *status = NULL;
    int64_t limit = BF_QUERY_JOBS_DEFAULT_LIMIT;
    if (id_field(s, msg, id, "sweep_id", 1, &q->sweep_id)
        || str_field(s, msg, id, "status", 1, &status)
        || int_field(s, msg, id, "after", 1, &q->after)
        || (q->after < 0
            && bad_field(s, msg, id, "after", "an integer >= 0"))
        || int_field(s, msg, id, "limit", 1, &limit)
        || ((limit < 1 || limit > BF_QUERY_JOBS_MAX_LIMIT)
            && bad_field(s, msg, id, "limit", "an integer in 1 .. "
                         BF_STR(BF_QUERY_JOBS_MAX_LIMIT)))) {
        bf_query_free(q);
        return;
    }
    q->limit = (int)limit;
    q->status = status ? bf_xstrdup(status) : NULL;
    run_query(s, q);
}

/* results / rows: the page's `after` (a cursor, checked against the view
 * by the store) and `limit`, both optional. */
static int page_fields(session *s, json_t *msg, const json_t *id,
                       bf_query *q)
{
    json_t *after = json_object_get(msg, "after");
    int64_t limit = BF_QUERY_ROWS_MAX_LIMIT;
    if ((after && !json_is_array(after)
         && bad_field(s, msg, id, "after", "the `next` of the page before"))
        || int_field(s, msg, id, "limit", 1, &limit)
        || ((limit < 1 || limit > BF_QUERY_ROWS_MAX_LIMIT)
            && bad_field(s, msg, id, "limit", "an integer in 1 .. "
                         BF_STR(BF_QUERY_ROWS_MAX_LIMIT))))
        return -1;
    /* A copy: the pool thread reads it while the loop frees msg. */
    q->cursor = after ? json_deep_copy(after) : NULL;
    q->limit = (int)limit;
    return 0;
}

static void handle_results(session *s, json_t *msg, const json_t *id)
{
    bf_query *q = bf_query_new(BF_QUERY_RESULTS, id);
    if (id_field(s, msg, id, "sweep_id", 0, &q->sweep_id)
        || page_fields(s, msg, id, q)) {
        bf_query_free(q);
        return;
    }
    run_query(s, q);
}

static void handle_rows(session *s, json_t *msg, const json_t *id)
{
    bf_query *q = bf_query_new(BF_QUERY_ROWS, id);
    const char *view = NULL;
    if (int_field(s, msg, id, "sweep_id", 0, &q->sweep_id)
        || str_field(s, msg, id, "view", 0, &view)
        || page_fields(s, msg, id, q)) {
        bf_query_free(q);
        return;
    }
    q->view = bf_xstrdup(view);
    run_query(s, q);
}

static void handle_workers(session *s, json_t *msg, const json_t *id)
{
    (void)msg;
    run_query(s, bf_query_new(BF_QUERY_WORKERS, id));
}

/* Tells each worker holding one of the attempts to stop it. */
static void send_cancels(bf_protocol *p, const int64_t *attempts, int n)
{
    for (int i = 0; i < n; i++) {
        bf_conn *w = bf_holders_holder(&p->holders, attempts[i]);
        if (!w)
            continue;   /* the reply to its next heartbeat tells it */
        LOGC(BF_LOG_INFO, (session *)w->data, "cancel attempt=%lld",
             (long long)attempts[i]);
        bf_conn_send(w, json_pack("{s:s, s:I}", "type", "cancel",
                                  "attempt_id", (json_int_t)attempts[i]));
    }
}

typedef struct cancel_wait {
    session *s;
    json_t *id;
    int n_running;
} cancel_wait;

/* A sweep's queued jobs are all cancelled (or the daemon stops first). */
static void cancel_drained(void *ctx, int rc, const bf_error *err)
{
    cancel_wait *w = ctx;
    session *s = w->s;
    if (s->conn && rc == 0) {
        json_t *r = new_reply("ack", w->id);
        json_object_set_new(r, "running", json_integer(w->n_running));
        bf_conn_send(s->conn, r);
    } else if (s->conn) {
        bf_error e;
        bf_error_set(&e, NULL, 0, NULL, "%s; the cancel is recorded and "
                     "finishes when the daemon starts again",
                     rc > 0 ? "the daemon is stopping" : err->msg);
        reply_error(s, w->id, "store", &e, e.msg);
    }
    reply_done(s);
    json_decref(w->id);
    free(w);
}

/* The cancel is committed: the workers hear at once; the reply to a sweep's
 * waits until its queued jobs are cancelled, a slice per pass. */
static void cancel_accepted(session *s, const json_t *id, int64_t sweep,
                            const int64_t *running, int n_running)
{
    bf_protocol *p = s->p;
    send_cancels(p, running, n_running);
    if (sweep > 0) {
        cancel_wait *w = bf_xcalloc(1, sizeof *w);
        w->s = hold_for_reply(s);
        w->id = id ? json_incref((json_t *)id) : NULL;
        w->n_running = n_running;
        bf_cancels_drain(&p->chores, p->store, sweep, cancel_drained, w);
        return;
    }
    json_t *r = new_reply("ack", id);
    json_object_set_new(r, "running", json_integer(n_running));
    bf_conn_send(s->conn, r);
}

static void handle_cancel(session *s, json_t *msg, const json_t *id)
{
    bf_protocol *p = s->p;
    int64_t sweep = 0, job = 0;
    if (id_field(s, msg, id, "sweep_id", 1, &sweep)
        || id_field(s, msg, id, "job_id", 1, &job))
        return;
    if ((sweep > 0) == (job > 0)) {
        bf_error e;
        bf_error_set(&e, NULL, 0, "sweep_id", "give exactly one of "
                     "sweep_id or job_id");
        reply_error(s, id, "bad_message", &e,
                    "cancel: give exactly one of sweep_id or job_id");
        return;
    }
    int64_t *running = NULL;
    int n_running = 0;
    bf_error err;
    bf_error_clear(&err);
    int rc = sweep > 0
        ? bf_store_cancel_sweep(p->store, sweep, bf_wall_ms(), &running,
                                &n_running, &err)
        : bf_store_cancel_job(p->store, job, bf_wall_ms(), &running,
                              &n_running, &err);
    if (rc != BF_STORE_OK) {
        reply_error(s, id, rc == BF_STORE_NOT_FOUND ? "not_found" : "store",
                    &err, err.msg[0] ? err.msg : "cancel failed");
        free(running);
        return;
    }
    LOGC(BF_LOG_INFO, s, "cancel %s %lld (%d running)",
         sweep > 0 ? "sweep" : "job", (long long)(sweep > 0 ? sweep : job),
         n_running);
    cancel_accepted(s, id, sweep, running, n_running);
    free(running);
}

static void handle_retry(session *s, json_t *msg, const json_t *id)
{
    int64_t job = 0;
    json_t *scratch = json_object_get(msg, "from_scratch");
    if (id_field(s, msg, id, "job_id", 0, &job)
        || (scratch && !json_is_boolean(scratch)
            && bad_field(s, msg, id, "from_scratch", "true or false")))
        return;
    bf_error err;
    bf_error_clear(&err);
    int rc = bf_store_retry_job(s->p->store, job, json_is_true(scratch),
                                bf_wall_ms(), &err);
    if (rc != BF_STORE_OK) {
        reply_error(s, id, rc == BF_STORE_NOT_FOUND ? "not_found" : "invalid",
                    &err, err.msg[0] ? err.msg : "retry refused");
        return;
    }
    LOGC(BF_LOG_INFO, s, "retry job=%lld%s", (long long)job,
         json_is_true(scratch) ? " from scratch" : "");
    bf_conn_send(s->conn, new_reply("ack", id));
}

/* ---- dispatch ------------------------------------------------------------- */

typedef void (*handler_fn)(session *s, json_t *msg, const json_t *id);

static const struct handler {
    const char *type;
    peer_role role;       /* who may send it; NONE = before hello only */
    handler_fn fn;
} handlers[] = {
    { "hello",       ROLE_NONE,   handle_hello },
    { "request_job", ROLE_WORKER, handle_request_job },
    { "heartbeat",   ROLE_WORKER, handle_heartbeat },
    { "metrics",     ROLE_WORKER, handle_metrics },
    { "checkpoint",  ROLE_WORKER, handle_checkpoint },
    { "checkpoint_bad", ROLE_WORKER, handle_checkpoint_bad },
    { "job_done",    ROLE_WORKER, handle_job_done },
    { "job_failed",  ROLE_WORKER, handle_job_failed },
    { "submit",      ROLE_CLIENT, handle_submit },
    { "status",      ROLE_CLIENT, handle_status },
    { "jobs",        ROLE_CLIENT, handle_jobs },
    { "results",     ROLE_CLIENT, handle_results },
    { "workers",     ROLE_CLIENT, handle_workers },
    { "rows",        ROLE_CLIENT, handle_rows },
    { "cancel",      ROLE_CLIENT, handle_cancel },
    { "retry",       ROLE_CLIENT, handle_retry },
};

static const char *role_name(peer_role r)
{
    return r == ROLE_WORKER ? "worker" : r == ROLE_CLIENT ? "client" : "none";
}

static const struct handler *find_handler(const char *type)
{
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (strcmp(handlers[i].type, type) == 0)
            return &handlers[i];
    return NULL;
}

/* A frame that is not a JSON object with a type: a stranger is cut off. */
static void refuse_unparsed(session *s, const bf_error *err)
{
    if (s->role == ROLE_NONE) {
        LOGC(BF_LOG_WARN, s, "refused before hello: %s", err->msg);
        bf_conn_fail(s->conn, bf_wire_error("no_hello", NULL, err,
                     "expected a hello first; got: %s", err->msg));
    } else {
        reply_error(s, NULL, "bad_json", err, err->msg);
    }
}

/* Hands msg to its handler if the connection's role may send it. */
static void dispatch(session *s, json_t *msg)
{
    const json_t *id = json_object_get(msg, "id");
    const char *type = bf_wire_type(msg);
    const struct handler *h = find_handler(type);
    if (s->role == ROLE_NONE && (!h || h->role != ROLE_NONE)) {
        LOGC(BF_LOG_WARN, s, "refused: '%s' before hello", type);
        bf_conn_fail(s->conn, bf_wire_error("no_hello", id, NULL,
                     "the first message must be a hello, not '%s'", type));
    } else if (!h) {
        char text[200];
        snprintf(text, sizeof text, "unknown message type '%.100s'", type);
        reply_error(s, id, "unknown_type", NULL, text);
    } else if (h->role != s->role) {
        char text[200];
        snprintf(text, sizeof text, "'%s' is not allowed for a %s connection",
                 type, role_name(s->role));
        reply_error(s, id, "out_of_place", NULL, text);
    } else {
        int errors = s->protocol_errors;
        h->fn(s, msg, id);
        if (s->protocol_errors == errors)
            s->protocol_errors = 0;    /* a message without a protocol error */
    }
}

/* ---- the connection's life (bf_net_callbacks) ------------------------------ */

static void on_connect(bf_conn *c)
{
    session *s = bf_xcalloc(1, sizeof *s);
    s->conn = c;
    s->refs = 1;
    s->p = c->net->data;
    s->pending_acks = json_array();
    c->data = s;
}

static void on_frame(bf_conn *c, const char *frame, size_t len)
{
    session *s = c->data;
    bf_error err;
    bf_error_clear(&err);
    json_t *msg = bf_wire_parse(frame, len, &err);
    if (!msg) {
        refuse_unparsed(s, &err);
        return;
    }
    dispatch(s, msg);
    json_decref(msg);
}

/* A worker that reconnected leaves its old connection behind, and that one
 * may be noticed dead only after the new hello: it must not mark the worker
 * disconnected while a connection of the same name is open (s's own
 * connection is off the list already). */
static int is_worker_named(bf_conn *o, void *name)
{
    const session *other = o->data;
    return other->role == ROLE_WORKER && strcmp(other->name, name) == 0;
}

static int worker_still_connected(session *s)
{
    return bf_net_each(s->p->net, is_worker_named, s->name);
}

static void on_close(bf_conn *c)
{
    session *s = c->data;
    bf_protocol *p = s->p;
    p->n_pending_acks -= (int)json_array_size(s->pending_acks);
    bf_holders_release_all(&p->holders, c);
    if (s->role == ROLE_WORKER && !worker_still_connected(s))
        record_worker(s, 0);
    json_array_clear(s->pending_acks);
    s->conn = NULL;
    c->data = NULL;
    if (s->submitting)   /* the submitter gave up: nothing of it is kept */
        bf_submits_cancel(&p->submits, s->submitting,
                          "the submitter disconnected");
    session_unref(s);
}

/* A submitter that left while its sweep is being stored (its reads are
 * paused until the reply) cancels it. */
static int cancel_if_gone(bf_conn *c, void *ctx)
{
    (void)ctx;
    session *s = c->data;
    if (s && s->submitting && bf_conn_peer_gone(c))
        bf_submits_cancel(&s->p->submits, s->submitting,
                          "the submitter disconnected");
    return 0;
}

void bf_protocol_check_submitters(bf_protocol *p)
{
    bf_net_each(p->net, cancel_if_gone, NULL);
}

const bf_net_callbacks bf_protocol_callbacks = {
    .on_connect = on_connect,
    .on_frame = on_frame,
    .on_close = on_close,
};

void bf_protocol_init(bf_protocol *p, uv_loop_t *loop, bf_net *net,
                      bf_store *store, const char *db_path, const char *token,
                      int64_t lease_ms)
{
    memset(p, 0, sizeof *p);
    p->net = net;
    p->store = store;
    bf_queries_init(&p->queries, loop, db_path);
    bf_submits_init(&p->submits, loop, store);
    bf_chores_init(&p->chores, loop);
    bf_error err;
    if (bf_cancels_resume(&p->chores, store, &err) < 0)
        bf_log_error("finishing unfinished cancels: %s", err.msg);
    snprintf(p->token, sizeof p->token, "%s", token);
    p->lease_ms = lease_ms;
    p->max_frame = BF_WIRE_MAX_FRAME;
    p->max_protocol_errors = BF_PROTOCOL_MAX_ERRORS;
}

void bf_protocol_stop(bf_protocol *p)
{
    bf_submits_stop(&p->submits);
    bf_chores_stop(&p->chores);
}

void bf_protocol_free(bf_protocol *p)
{
    bf_holders_free(&p->holders);
    bf_queries_free(&p->queries);
}

/* ---- flush ---------------------------------------------------------------- */

/* Sends c the acks that waited for a flush, or (rc != 0) an error in place
 * of each. */
static void send_acks(bf_conn *c, json_t *acks, int rc, const bf_error *err)
{
    size_t i;
    json_t *ack;
    json_array_foreach(acks, i, ack) {
        if (rc == 0)
            bf_conn_send(c, json_incref(ack));
        else
            bf_conn_send(c, bf_wire_error("store", json_object_get(ack, "id"),
                         NULL, "metrics batch seq %lld was not stored: %s",
                         (long long)json_integer_value(
                             json_object_get(ack, "seq")), err->msg));
    }
}

static int settle_slice(void *ctx, int64_t deadline_us)
{
    bf_protocol *p = ctx;
    bf_error err;
    int rc = bf_store_settle(p->store, bf_wall_ms(), deadline_us, &err);
    if (rc < 0)
        bf_log_error("moving waiting jobs on: %s", err.msg);
    return rc;
}

/* A failure (logged) is tried again a second later, not every pass. */
static void settle_done(void *ctx, int rc)
{
    bf_protocol *p = ctx;
    p->settling = 0;
    if (rc < 0)
        p->settle_after_ms = bf_monotonic_ms() + 1000;
}

/* Jobs waiting for a job that ended, beyond the few its ending moved on. */
static void settle_dependents(bf_protocol *p)
{
    if (!p->settling && bf_store_unsettled(p->store)
        && bf_monotonic_ms() >= p->settle_after_ms)
        p->settling = bf_chores_start(&p->chores, settle_slice, settle_done,
                                      p) == 0;
}

/* The outcome of a flush, for every connection's waiting acks. */
typedef struct acks_round {
    int rc;
    bf_error *err;
} acks_round;

/* A send may close its connection (freeing its session): the acks are
 * taken out of the session first. */
static int send_pending_acks(bf_conn *c, void *ctx)
{
    acks_round *round = ctx;
    session *s = c->data;
    json_t *acks = s->pending_acks;
    s->pending_acks = json_array();
    send_acks(c, acks, round->rc, round->err);
    json_decref(acks);
    return 0;
}

void bf_protocol_flush(bf_protocol *p)
{
    settle_dependents(p);
    /* Flushed even with no acks waiting, so that a batch lost without any
     * (its own ingest failed) is reported now, not to a later pass whose
     * acks it would turn into errors. */
    bf_error err;
    bf_error_clear(&err);
    int rc = bf_store_flush(p->store, &err);
    if (rc)
        bf_log_error("flush failed: %s", err.msg);
    if (p->n_pending_acks == 0)
        return;
    acks_round round = { .rc = rc, .err = &err };
    bf_net_each(p->net, send_pending_acks, &round);
    p->n_pending_acks = 0;
}
