/* Protocol fuzzing against the real daemon: thousands of messages derived
 * from valid ones (every worker and client message type) and mutated by a
 * seeded PRNG: fields removed, duplicated or given values of other JSON
 * types (null, huge and negative integers, strings, deep arrays, very long
 * strings, NUL bytes), bit flips, truncation, non-UTF-8 and random bytes,
 * garbage lines; before and after a valid hello, over many connections,
 * some of them cut off in the middle of a frame.
 *
 * Meanwhile one never-mutated worker streams valid metrics for its own job
 * (a sweep of its own that no fuzzed message may name).  After every batch
 * the daemon must be alive and answer status on a fresh connection, and the
 * valid batch must be acked.  At the end: the daemon stops cleanly, the
 * database passes integrity_check, the valid job holds exactly the rows of
 * the acked batches, no job has two live attempts, and the daemon's log has
 * no sanitizer report.  The seed is fixed (BFT_FUZZ_SEED overrides it) and
 * printed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "fake_worker.h"
#include "harness.h"
#include "rng.h"
#include "sweep.h"

#define DEFAULT_SEED 0x5eedf0cca1ULL
#define N_BATCHES 64
#define PER_BATCH 64
#define VALID_RECORDS 5       /* train records per valid batch: 20 rows */

typedef struct fuzz {
    bft_daemon *d;
    bf_rng r;
    uint64_t seed;
    bft_worker valid;         /* never mutated */
    int64_t v_attempt, v_job, v_sweep;
    int n_acked;              /* valid batches acked */
    int64_t next_id;
    int n_sent, n_rejected;   /* fuzzed frames sent / candidates dropped */
    int attempt;              /* the current fuzz connection's attempt */
} fuzz;

static uint32_t below(fuzz *f, uint32_t n) { return bf_rng_below(&f->r, n); }
static int chance(fuzz *f, int percent) { return (int)below(f, 100) < percent; }

/* ---- templates: one valid message of each type ----------------------------- */

static const char *const small_sweep =
    "name: fz\nbase: {steps: 100, depth: 2, eval_depths: [2]}\n"
    "grid:\n  rope: [rope, spectral]\nseeds: 2\n";

static json_t *records(fuzz *f)
{
    json_t *a = json_array();
    int n = 1 + (int)below(f, 3);
    for (int i = 0; i < n; i++) {
        int step = (int)below(f, 50);
        switch (below(f, 3)) {
        case 0:
            json_array_append_new(a, json_pack("{s:s, s:i, s:f, s:f}", "type",
                                  "train", "step", step, "loss", 1.5, "lr", 1e-3));
            break;
        case 1:
            json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:f, s:f}", "type",
                                  "eval", "step", step, "depth", 2, "loss", 1.0,
                                  "accuracy", 0.5));
            break;
        default:
            json_array_append_new(a, json_pack("{s:s, s:i, s:i, s:i, s:[f,f]}",
                                  "type", "freq", "step", step, "layer", 0,
                                  "head", 1, "omega", 1.0, 0.5));
        }
    }
    return a;
}

static json_t *worker_template(fuzz *f)
{
    json_int_t a = f->attempt;
    switch (below(f, 8)) {
    case 0: return json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:i}", "type",
                             "hello", "version", 1, "token", f->d->token,
                             "role", "worker", "name", "fz-w", "host", "h",
                             "ranks", 2);
    case 1: return json_pack("{s:s}", "type", "request_job");
    case 2: return json_pack("{s:s, s:I}", "type", "heartbeat", "attempt_id", a);
    case 3: return json_pack("{s:s, s:I, s:s, s:i}", "type", "checkpoint",
                             "attempt_id", a, "path", "/tmp/fz/ck", "step", 10);
    case 4: return json_pack("{s:s, s:I}", "type", "job_done", "attempt_id", a);
    case 5: return json_pack("{s:s, s:I, s:s}", "type", "job_failed",
                             "attempt_id", a, "error", "boom");
    default: return json_pack("{s:s, s:I, s:i, s:o}", "type", "metrics",
                              "attempt_id", a, "seq", (int)below(f, 9),
                              "records", records(f));
    }
}

static json_t *client_template(fuzz *f)
{
    json_int_t job = 1 + below(f, 12), sweep = 1 + below(f, 4);
    switch (below(f, 9)) {
    case 0: return json_pack("{s:s, s:i, s:s, s:s}", "type", "hello",
                             "version", 1, "token", f->d->token, "role",
                             "client");
    case 1: return json_pack("{s:s, s:s, s:s}", "type", "submit", "filename",
                             "fz.yaml", "text", small_sweep);
    case 2: return json_pack("{s:s, s:I}", "type", "status", "sweep_id", sweep);
    case 3: return json_pack("{s:s, s:I}", "type", "cancel", "job_id", job);
    case 4: return json_pack("{s:s, s:I}", "type", "cancel", "sweep_id", sweep);
    case 5: return json_pack("{s:s, s:I}", "type", "retry", "job_id", job);
    case 6: return json_pack("{s:s, s:I}", "type", "jobs", "sweep_id", sweep);
    case 7: return json_pack("{s:s, s:I}", "type", "results", "sweep_id", sweep);
    default: return json_pack("{s:s}", "type", "status");
    }
}

/* ---- mutations ------------------------------------------------------------- */

static json_t *nested_array(int depth)
{
    json_t *v = json_integer(7);
    for (int i = 0; i < depth; i++) {
        json_t *a = json_array();
        json_array_append_new(a, v);
        v = a;
    }
    return v;
}

static json_t *weird_value(fuzz *f)
{
    switch (below(f, 16)) {
    case 0: return json_null();
    case 1: return json_true();
    case 2: return json_integer(INT64_MAX);
    case 3: return json_integer(INT64_MIN);
    case 4: return json_integer(-1);
    case 5: return json_integer(0);
    case 6: return json_real(1e308);
    case 7: return json_string("");
    case 8: return json_string("worker");
    case 9: return json_stringn("a\0b", 3);
    case 10: return nested_array(1 + (int)below(f, 300));
    case 11: return json_object();
    case 12: {
        size_t n = chance(f, 20) ? 200000 : 3000;
        char *s = malloc(n + 1);
        memset(s, 'A' + (int)below(f, 26), n);
        s[n] = '\0';
        json_t *v = json_string(s);
        free(s);
        return v;
    }
    case 13: return json_string("\xe2\x82\xac\xf0\x9f\x98\x80");  /* € 😀 */
    case 14: return json_integer((json_int_t)bf_rng_u64(&f->r));
    default: return json_pack("[i, s, n]", 1, "x", NULL);
    }
}

/* A random member of obj, or (for metrics) of one of its records. */
static json_t *pick_object(fuzz *f, json_t *msg)
{
    json_t *recs = json_object_get(msg, "records");
    if (json_is_array(recs) && json_array_size(recs) && chance(f, 50)) {
        json_t *r = json_array_get(recs, below(f, (uint32_t)json_array_size(recs)));
        if (json_is_object(r))
            return r;
    }
    return msg;
}

static const char *pick_key(fuzz *f, json_t *obj)
{
    size_t n = json_object_size(obj), k = below(f, (uint32_t)(n ? n : 1));
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
        if (k-- == 0)
            return key;
    return NULL;
}

static void mutate_json(fuzz *f, json_t *msg)
{
    json_t *obj = pick_object(f, msg);
    const char *key = pick_key(f, obj);
    static const char *const types[] = {
        "hello", "request_job", "heartbeat", "metrics", "checkpoint",
        "job_done", "job_failed", "submit", "status", "jobs", "results",
        "workers", "cancel", "retry", "train", "eval", "freq", "", "ack",
        "HELLO", "metrics\x01"};
    switch (below(f, 5)) {
    case 0:
        if (key)
            json_object_del(obj, key);
        break;
    case 1:
        if (key)
            json_object_set_new(obj, key, weird_value(f));
        break;
    case 2:
        json_object_set_new(obj, chance(f, 50) ? "extra" : "omega",
                            weird_value(f));
        break;
    case 3:
        json_object_set_new(obj, "type", json_string(
            types[below(f, sizeof types / sizeof *types)]));
        break;
    default:
        json_object_set_new(msg, "id", weird_value(f));
    }
}

typedef struct buf { char *p; size_t n, cap; } buf;

static void buf_reserve(buf *b, size_t more)
{
    if (b->n + more + 1 > b->cap) {
        b->cap = 2 * (b->n + more + 1);
        b->p = realloc(b->p, b->cap);
    }
}

static void buf_insert(buf *b, size_t at, const char *s, size_t n)
{
    buf_reserve(b, n);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, s, n);
    b->n += n;
}

static void mutate_bytes(fuzz *f, buf *b)
{
    static const char *const junk[] = {
        "\0", "\xff", "\xc0\x80", "\xed\xa0\x80", "\xf8\x88\x80\x80\x80", "\n",
        "{", "}", "[", "]", "\"", "\\", ",", ":", "\\u0000", "\\ud800",
        "99999999999999999999999", "-", "1e999", "null", "\r\n", "\t"};
    size_t at = b->n ? below(f, (uint32_t)b->n) : 0;
    switch (below(f, 8)) {
    case 0:
        for (int i = 0, k = 1 + (int)below(f, 8); i < k && b->n; i++)
            b->p[below(f, (uint32_t)b->n)] ^= (char)(1u << below(f, 8));
        break;
    case 1:
        b->n = at;                                  /* truncation */
        break;
    case 2: {
        const char *j = junk[below(f, sizeof junk / sizeof *junk)];
        buf_insert(b, at, j, j[0] ? strlen(j) : 1);
        break;
    }
    case 3: {                                       /* delete a span */
        size_t len = below(f, 16);
        if (at + len > b->n)
            len = b->n - at;
        memmove(b->p + at, b->p + at + len, b->n - at - len);
        b->n -= len;
        break;
    }
    case 4: {                                       /* duplicate a span */
        size_t len = 1 + below(f, 24);
        if (at + len > b->n)
            len = b->n - at;
        char tmp[32];
        memcpy(tmp, b->p + at, len);
        buf_insert(b, at, tmp, len);
        break;
    }
    case 5: {                                       /* a duplicated field */
        const char *dup = chance(f, 50) ? "\"attempt_id\":1," : "\"type\":\"status\",";
        if (b->n && b->p[0] == '{')
            buf_insert(b, 1, dup, strlen(dup));
        break;
    }
    case 6: {                                       /* random bytes */
        int k = 1 + (int)below(f, 16);
        for (int i = 0; i < k; i++) {
            char c = (char)below(f, 256);
            buf_insert(b, b->n ? below(f, (uint32_t)b->n) : 0, &c, 1);
        }
        break;
    }
    default: {                                      /* a garbage line */
        b->n = 0;
        if (chance(f, 10)) {
            size_t depth = 3000 + below(f, 100000);  /* deep nesting */
            buf_reserve(b, depth);
            memset(b->p, chance(f, 50) ? '[' : '{', depth);
            b->n = depth;
        } else {
            int k = (int)below(f, 200);
            buf_reserve(b, (size_t)k);
            for (int i = 0; i < k; i++)
                b->p[b->n++] = (char)below(f, 256);
        }
    }
    }
}

/* Does a frame name what the valid stream owns, or submit a big sweep?
 * Those are left out: the fuzz may break its own jobs, not the one whose
 * rows the test counts, and must stay fast. */
static int frame_is_off_limits(fuzz *f, const char *p, size_t n)
{
    bf_error err;
    json_t *m = bf_wire_parse(p, n, &err);
    if (!m)
        return 0;
    int bad = 0;
    static const char *const keys[] = {"attempt_id", "job_id", "sweep_id"};
    const int64_t owned[] = {f->v_attempt, f->v_job, f->v_sweep};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(m, keys[i]);
        if (json_is_integer(v) && json_integer_value(v) == owned[i])
            bad = 1;
    }
    json_t *text = json_object_get(m, "text");
    if (!bad && json_is_string(text)) {
        bf_sweep *sw = bf_sweep_parse("fz.yaml", NULL, json_string_value(text),
                                      json_string_length(text), &err);
        bad = sw && sw->n_jobs > 64;
        bf_sweep_free(sw);
    }
    json_decref(m);
    return bad;
}

static int line_is_off_limits(fuzz *f, const buf *b)
{
    size_t start = 0;
    for (size_t i = 0; i <= b->n; i++)
        if (i == b->n || b->p[i] == '\n') {
            if (frame_is_off_limits(f, b->p + start, i - start))
                return 1;
            start = i + 1;
        }
    return 0;
}

/* One mutated frame (newline added) derived from a template of `role`. */
static void fuzzed_line(fuzz *f, int worker, buf *b)
{
    for (;;) {
        json_t *m = worker == 1 || (worker == 2 && chance(f, 50))
            ? worker_template(f) : client_template(f);
        json_object_set_new(m, "id", json_integer(++f->next_id));
        int n_json = (int)below(f, 3), n_bytes = (int)below(f, 3);
        if (n_json + n_bytes == 0)
            n_json = 1;
        for (int i = 0; i < n_json; i++)
            mutate_json(f, m);
        char *text = json_dumps(m, JSON_COMPACT);
        json_decref(m);
        b->n = 0;
        buf_insert(b, 0, text, strlen(text));
        free(text);
        for (int i = 0; i < n_bytes; i++)
            mutate_bytes(f, b);
        if (!line_is_off_limits(f, b))
            break;
        f->n_rejected++;
    }
    buf_insert(b, b->n, "\n", 1);
}

/* ---- checks ---------------------------------------------------------------- */

static void assert_daemon_alive(fuzz *f)
{
    int status;
    assert_int_equal(waitpid(f->d->pid, &status, WNOHANG), 0);
    assert_true(bft_serves_status(f->d));
}

/* The valid stream: one untouched metrics batch, which must be acked. */
static void send_valid_batch(fuzz *f)
{
    int64_t first = (int64_t)f->n_acked * VALID_RECORDS + 1;
    json_t *r = bft_worker_metrics(&f->valid, f->v_attempt, f->n_acked + 1,
                                   bft_train_records(first, VALID_RECORDS));
    assert_non_null(r);
    if (strcmp(bf_wire_type(r), "ack") != 0)
        fail_msg("valid metrics not acked: %s", json_dumps(r, 0));
    assert_int_equal(json_integer_value(json_object_get(r, "rows")),
                     4 * VALID_RECORDS);
    json_decref(r);
    f->n_acked++;
}

/* Reads replies until the one with id `want` (1), EOF (0) or timeout (-1). */
static int read_until(bf_rpc *c, int64_t want)
{
    for (;;) {
        bf_error err;
        json_t *m = bf_rpc_recv(c, 5000, &err);
        if (!m)
            return strstr(err.msg, "timed out") || strstr(err.msg, "timeout")
                ? -1 : 0;
        json_t *id = json_object_get(m, "id");
        int hit = json_is_integer(id) && json_integer_value(id) == want;
        json_decref(m);
        if (hit)
            return 1;
    }
}

/* A connection that has said a valid hello: fuzzed frames, then a valid
 * request that must still be answered; maybe cut off mid-frame after. */
static void batch_after_hello(fuzz *f, int worker, int k)
{
    bf_rpc c;
    char name[32];
    snprintf(name, sizeof name, "fz-%d", k);
    assert_int_equal(bft_connect(f->d, &c, worker ? "worker" : "client", name), 0);
    f->attempt = (int)below(f, 40);
    if (worker) {
        json_t *r = bft_request(&c, json_pack("{s:s}", "type", "request_job"));
        assert_non_null(r);
        if (strcmp(bf_wire_type(r), "job") == 0)
            f->attempt = (int)json_integer_value(json_object_get(r, "attempt_id"));
        json_decref(r);
        if (f->attempt == f->v_attempt)
            f->attempt = 0;
    }
    buf b = {0};
    int ok = 1;
    for (int i = 0; i < PER_BATCH && ok; i++) {
        fuzzed_line(f, worker ? 1 : 0, &b);
        /* A third of the connections mix in the other role's messages. */
        if (k % 3 == 0 && chance(f, 30))
            fuzzed_line(f, 2, &b);
        ok = bft_send_raw(&c, b.p, b.n) == 0;
        f->n_sent++;
    }
    assert_true(ok);   /* nothing sent after a hello closes the connection */
    /* Whatever came before, the connection still serves a valid request. */
    int64_t id = ++f->next_id;
    char req[96];
    snprintf(req, sizeof req, "\n{\"type\":\"%s\",\"id\":%" PRId64 "}\n",
             worker ? "request_job" : "workers", id);
    assert_int_equal(bft_send_raw(&c, req, strlen(req)), 0);
    assert_int_equal(read_until(&c, id), 1);
    if (chance(f, 50)) {            /* disconnect in the middle of a frame */
        fuzzed_line(f, worker, &b);
        bft_send_raw(&c, b.p, b.n > 1 ? 1 + below(f, (uint32_t)b.n - 1) : b.n);
    }
    free(b.p);
    bf_rpc_close(&c);
}

/* A connection whose first frames are fuzzed: refused and closed, or (if
 * the mutation left a valid hello) served. */
static void batch_before_hello(fuzz *f)
{
    bf_rpc c;
    assert_int_equal(bft_connect(f->d, &c, NULL, NULL), 0);
    buf b = {0};
    int n = 1 + (int)below(f, 4);
    for (int i = 0; i < n; i++) {
        /* Mostly mutated hellos: the hello is what is checked here. */
        json_t *m = chance(f, 50)
            ? json_pack("{s:s, s:i, s:s, s:s, s:s}", "type", "hello",
                        "version", 1, "token", f->d->token, "role", "worker",
                        "name", "fz-pre")
            : NULL;
        if (m) {
            for (int j = 0, k = 1 + (int)below(f, 2); j < k; j++)
                mutate_json(f, m);
            char *text = json_dumps(m, JSON_COMPACT);
            json_decref(m);
            b.n = 0;
            buf_insert(&b, 0, text, strlen(text));
            free(text);
            if (chance(f, 50))
                mutate_bytes(f, &b);
            if (line_is_off_limits(f, &b))
                b.n = 0;
            buf_insert(&b, b.n, "\n", 1);
        } else {
            fuzzed_line(f, 2, &b);
        }
        if (bft_send_raw(&c, b.p, b.n))
            break;                             /* already closed: fine */
        f->n_sent++;
    }
    if (chance(f, 25)) {                       /* cut off mid-frame */
        fuzzed_line(f, 2, &b);
        bft_send_raw(&c, b.p, b.n > 1 ? 1 + below(f, (uint32_t)b.n - 1) : b.n);
        free(b.p);
        bf_rpc_close(&c);
        return;
    }
    /* A valid request (its newline also ends any unterminated frame): the
     * daemon either refused the connection (one error, then EOF) or
     * answers it.  Every reply is well-formed JSON. */
    int64_t id = ++f->next_id;
    char req[96];
    snprintf(req, sizeof req, "\n{\"type\":\"status\",\"id\":%" PRId64 "}\n", id);
    bft_send_raw(&c, req, strlen(req));
    for (int n_replies = 0;; n_replies++) {
        bf_error err;
        json_t *m = bf_rpc_recv(&c, 5000, &err);
        if (!m) {
            /* EOF; a timeout would mean a hang. */
            if (strstr(err.msg, "timed out"))
                fail_msg("no reply and no EOF before hello: %s", err.msg);
            break;
        }
        const char *type = bf_wire_type(m), *code =
            json_string_value(json_object_get(m, "code"));
        json_t *mid = json_object_get(m, "id");
        int done = json_is_integer(mid) && json_integer_value(mid) == id;
        /* Only the reply to the first frame can refuse the connection. */
        int refused = n_replies == 0 && strcmp(type, "error") == 0 && code
            && (strcmp(code, "no_hello") == 0 || strcmp(code, "auth") == 0
                || strcmp(code, "version") == 0
                || strcmp(code, "bad_message") == 0);
        json_decref(m);
        if (refused) {
            json_t *after = bf_rpc_recv(&c, 5000, &err);
            if (after)
                fail_msg("a refused connection got more: %s",
                         json_dumps(after, 0));
            break;
        }
        if (done)
            break;
    }
    free(b.p);
    bf_rpc_close(&c);
}

/* ---- final checks on the database ------------------------------------------ */

static void check_database(fuzz *f)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(f->d->db, &db, SQLITE_OPEN_READWRITE, NULL),
                     SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st,
                                        NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);

    char sql[512];
    int rows = 4 * VALID_RECORDS * f->n_acked, steps = VALID_RECORDS * f->n_acked;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM metrics WHERE job_id = %"
             PRId64, f->v_job);
    assert_int_equal(bft_db_int(db, sql), rows);
    /* Exactly the acked rows: steps 1..N, the four train keys, the values
     * bft_train_records sends. */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM metrics WHERE job_id = %"
             PRId64 " AND step BETWEEN 1 AND %d AND key IN ('loss', 'lr',"
             " 'grad_norm', 'tokens_per_s') AND value = CASE key"
             " WHEN 'loss' THEN 2.0 / (1.0 + step) WHEN 'lr' THEN 1e-3"
             " WHEN 'grad_norm' THEN 0.5 ELSE 1e5 END", f->v_job, steps);
    assert_int_equal(bft_db_int(db, sql), rows);
    snprintf(sql, sizeof sql, "SELECT (SELECT count(*) FROM evals WHERE job_id"
             " = %1$" PRId64 ") + (SELECT count(*) FROM frequencies WHERE"
             " job_id = %1$" PRId64 ")", f->v_job);
    assert_int_equal(bft_db_int(db, sql), 0);
    /* The valid attempt is still the live lease of its job. */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM attempts WHERE attempt_id"
             " = %" PRId64 " AND outcome = 'running'", f->v_attempt);
    assert_int_equal(bft_db_int(db, sql), 1);
    /* One live attempt per running job, none for any other job. */
    assert_int_equal(bft_db_int(db, "SELECT count(*) FROM (SELECT job_id FROM"
                               " attempts WHERE outcome = 'running'"
                               " GROUP BY job_id HAVING count(*) > 1)"), 0);
    assert_int_equal(bft_db_int(db, "SELECT count(*) FROM jobs j WHERE"
                               " (j.status = 'running') != ((SELECT count(*)"
                               " FROM attempts a WHERE a.job_id = j.job_id"
                               " AND a.outcome = 'running') = 1)"), 0);
    print_message("fuzz: %lld sweeps, %lld attempts, %lld metric rows in all\n",
                  (long long)bft_db_int(db, "SELECT count(*) FROM sweeps"),
                  (long long)bft_db_int(db, "SELECT count(*) FROM attempts"),
                  (long long)bft_db_int(db, "SELECT count(*) FROM metrics"));
    sqlite3_close(db);
}

static void assert_log_clean(fuzz *f)
{
    FILE *log = fopen(f->d->log, "r");
    assert_non_null(log);
    char line[4096];
    while (fgets(line, sizeof line, log))
        if (strstr(line, "runtime error") || strstr(line, "Sanitizer"))
            fail_msg("daemon log: %s", line);
    fclose(log);
}

/* ---- the test -------------------------------------------------------------- */

static void test_daemon_fuzz(void **state)
{
    bft_daemon *d = *state;
    fuzz f = {0};
    const char *env = getenv("BFT_FUZZ_SEED");
    f.seed = env && *env ? strtoull(env, NULL, 0) : DEFAULT_SEED;
    print_message("fuzz seed 0x%llx (BFT_FUZZ_SEED=0x%llx to repeat)\n",
                  (unsigned long long)f.seed, (unsigned long long)f.seed);
    bf_rng_seed(&f.r, f.seed);
    f.d = d;

    /* The valid stream's job, leased before any fuzzed worker asks. */
    int n_jobs = 0;
    f.v_sweep = bft_submit(d, "valid.yaml", "name: valid\nbase: {steps: 100,"
                           " depth: 2, eval_depths: [2]}\npriority: 9\n",
                           &n_jobs, NULL);
    assert_true(f.v_sweep > 0);
    assert_int_equal(bft_worker_connect(&f.valid, d, "valid"), 0);
    f.v_attempt = bft_worker_lease(&f.valid, &f.v_job);
    assert_true(f.v_attempt > 0);
    /* Jobs for the fuzzed workers to lease and break. */
    assert_true(bft_submit(d, "fz.yaml", small_sweep, NULL, NULL) > 0);

    for (int k = 0; k < N_BATCHES; k++) {
        switch (below(&f, 4)) {
        case 0: case 1: batch_after_hello(&f, 1, k); break;
        case 2: batch_after_hello(&f, 0, k); break;
        default:
            for (int i = 0; i < 6; i++)
                batch_before_hello(&f);
        }
        assert_daemon_alive(&f);
        send_valid_batch(&f);
    }
    print_message("fuzz: %d frames sent, %d candidates off limits, %d valid "
                  "batches acked\n", f.n_sent, f.n_rejected, f.n_acked);
    assert_true(f.n_sent >= 2000);
    bft_worker_close(&f.valid);
    assert_int_equal(bft_daemon_stop(d, SIGTERM), 0);
    check_database(&f);
    assert_log_clean(&f);
}

static int setup(void **state)
{
    bft_daemon *d = calloc(1, sizeof *d);
    *state = d;
    /* Every connection comes from 127.0.0.1 and most fuzzed hellos fail,
     * and a batch may hold more bad frames than the daemon takes in a row:
     * without these the daemon would (rightly) back off and cut
     * connections, which test_daemon_hostile checks on its own. */
    return bft_daemon_start_with(d, 30, "--hello-failures", "0",
                                 "--max-protocol-errors", "0", NULL);
}

/* Also after a failed assertion: the daemon is killed, the directory goes. */
static int teardown(void **state)
{
    bft_daemon_cleanup(*state);
    free(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_daemon_fuzz, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
