/* Metric ingest: the worker's train / eval / freq / outcomes records into
 * the metrics, evals, frequencies and eval_outcomes tables, inside one
 * long batch transaction that bf_store_flush commits (see store.h).  Each record's primary key makes a
 * re-sent record a no-op (INSERT OR IGNORE), so a worker may resend a batch
 * whose ack it never saw. */
#include "store_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "records.h"

/* One pass over the records.  With `s` NULL it only validates; with a
 * store it also writes.  Sharing the walk keeps validation and writing from
 * drifting apart. */
typedef struct walk {
    bf_store *s;          /* NULL: validate only */
    int64_t job_id;
    int n_rows;
    bf_error *err;
} walk;

/* "record 3: ..." with field "records[3].loss". */
static int record_error(walk *w, size_t i, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int record_error(walk *w, size_t i, const char *field, const char *fmt, ...)
{
    char path[160], body[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(path, sizeof path, "records[%zu].%s", i, field);
    return bf_error_set(w->err, NULL, 0, path, "record %zu: %s", i, body);
}

static int get_int(walk *w, size_t i, const json_t *rec, const char *type,
                   const char *field, json_int_t min, json_int_t *out)
{
    json_t *v = json_object_get(rec, field);
    if (!json_is_integer(v) || json_integer_value(v) < min)
        return record_error(w, i, field, "%s record: '%s' must be a %s integer",
                            type, field, min > 0 ? "positive" : "non-negative");
    *out = json_integer_value(v);
    return 0;
}

/* The storage rule of common/records.h: infinities are REALs, NaN (which
 * SQLite cannot hold) is NULL (docs/schema.md, 010_nonfinite.sql). */
static void bind_value(sqlite3_stmt *st, int col, double x)
{
    if (isnan(x))
        sqlite3_bind_null(st, col);
    else
        sqlite3_bind_double(st, col, x);
}

static int get_number(walk *w, size_t i, const json_t *rec, const char *type,
                      const char *field, double *out)
{
    if (bf_record_number(json_object_get(rec, field), out) < 0)
        return record_error(w, i, field, "%s record: '%s' must be "
                            BF_RECORD_NUMBER_RULE, type, field);
    return 0;
}

/* Steps an INSERT OR IGNORE and counts the row if it was new. */
static int insert(walk *w, sqlite3_stmt *st)
{
    if (store__exec(w->s, st, w->err) < 0)
        return -1;
    w->n_rows += sqlite3_changes(w->s->db);
    return 0;
}

/* {"type":"train","step":N,"loss":x,...}: every other key is a metric. */
static int walk_train(walk *w, size_t i, const json_t *rec, json_int_t step)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)rec, key, v) {
        if (strcmp(key, "type") == 0 || strcmp(key, "step") == 0)
            continue;
        double x;
        if (bf_record_number(v, &x) < 0)
            return record_error(w, i, key, "train record: '%s' must be "
                                BF_RECORD_NUMBER_RULE, key);
        if (!w->s)
            continue;
        sqlite3_stmt *st = store__stmt(w->s, ST_METRIC_INSERT);
        sqlite3_bind_int64(st, 1, w->job_id);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, step);
        bind_value(st, 4, x);
        if (insert(w, st) < 0)
            return -1;
    }
    return 0;
}

/* Statement id with the key of an eval's row bound: job, step, depth. */
static sqlite3_stmt *eval_row(walk *w, int id, json_int_t step,
                              json_int_t depth)
{
    sqlite3_stmt *st = store__stmt(w->s, id);
    sqlite3_bind_int64(st, 1, w->job_id);
    sqlite3_bind_int64(st, 2, step);
    sqlite3_bind_int64(st, 3, depth);
    return st;
}

/* {"type":"eval","step":N,"depth":D,"loss":x,"accuracy":x} */
static int walk_eval(walk *w, size_t i, const json_t *rec, json_int_t step)
{
    json_int_t depth = 0;
    double loss = 0, accuracy = 0;
    if (get_int(w, i, rec, "eval", "depth", 1, &depth) < 0 ||
        get_number(w, i, rec, "eval", "loss", &loss) < 0 ||
        get_number(w, i, rec, "eval", "accuracy", &accuracy) < 0)
        return -1;
    if (!w->s)
        return 0;
    sqlite3_stmt *st = eval_row(w, ST_EVAL_INSERT, step, depth);
    bind_value(st, 4, loss);
    bind_value(st, 5, accuracy);
    int before = w->n_rows;
    if (insert(w, st) < 0)
        return -1;
    /* a new eval (not a resent one) may be at a rung of a search's rule */
    return w->n_rows > before ? store__prune_eval(w->s, w->job_id, step,
                                                  depth, loss, accuracy,
                                                  w->err) : 0;
}

/* {"type":"freq","step":N,"layer":l,"head":h,"omega":[...]}: pair = index. */
static int walk_freq(walk *w, size_t i, const json_t *rec, json_int_t step)
{
    json_int_t layer = 0, head = 0;
    if (get_int(w, i, rec, "freq", "layer", 0, &layer) < 0 ||
        get_int(w, i, rec, "freq", "head", 0, &head) < 0)
        return -1;
    json_t *omega = json_object_get(rec, "omega");
    if (!json_is_array(omega) || json_array_size(omega) == 0)
        return record_error(w, i, "omega",
                            "freq record: 'omega' must be a non-empty list of numbers");
    size_t pair;
    json_t *v;
    json_array_foreach(omega, pair, v) {
        double x;
        if (bf_record_number(v, &x) < 0)
            return record_error(w, i, "omega", "freq record: omega[%zu] must "
                                "be " BF_RECORD_NUMBER_RULE, pair);
        if (!w->s)
            continue;
        sqlite3_stmt *st = store__stmt(w->s, ST_FREQ_INSERT);
        sqlite3_bind_int64(st, 1, w->job_id);
        sqlite3_bind_int64(st, 2, step);
        sqlite3_bind_int64(st, 3, layer);
        sqlite3_bind_int64(st, 4, head);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)pair);
        bind_value(st, 6, x);
        if (insert(w, st) < 0)
            return -1;
    }
    return 0;
}

/* {"type":"outcomes","step":N,"depth":D,"n":E,"bits":"hex"}: the bits
 * stored as a BLOB (common/records.h). */
static int walk_outcomes(walk *w, size_t i, const json_t *rec,
                         json_int_t step)
{
    json_int_t depth = 0, n = 0;
    if (get_int(w, i, rec, "outcomes", "depth", 1, &depth) < 0 ||
        get_int(w, i, rec, "outcomes", "n", 1, &n) < 0)
        return -1;
    if (n > BF_OUTCOMES_MAX_EXAMPLES)
        return record_error(w, i, "n", "outcomes record: 'n' %lld is more "
                            "than %d examples", (long long)n,
                            BF_OUTCOMES_MAX_EXAMPLES);
    const char *hex = json_string_value(json_object_get(rec, "bits"));
    unsigned char bits[BF_OUTCOMES_BYTES(BF_OUTCOMES_MAX_EXAMPLES)];
    if (!hex || bf_outcomes_from_hex(hex, (int)n, bits) < 0)
        return record_error(w, i, "bits", "outcomes record: 'bits' must be "
                            "%zu lowercase hex digits, no bit set past "
                            "example %lld", 2 * BF_OUTCOMES_BYTES(n),
                            (long long)n);
    if (!w->s)
        return 0;
    sqlite3_stmt *st = eval_row(w, ST_OUTCOMES_INSERT, step, depth);
    sqlite3_bind_blob(st, 4, bits, (int)BF_OUTCOMES_BYTES(n), SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, n);
    return insert(w, st);
}

typedef int (*record_writer)(walk *w, size_t i, const json_t *rec,
                             json_int_t step);

/* The storage of each kind the link sends in metrics batches
 * (BF_ROUTE_METRICS in common/records.h): its fields, read and written
 * into its table; a kind routed elsewhere has none. */
static const record_writer writers[BF_N_RECORD_KINDS] = {
    [BF_RECORD_TRAIN] = walk_train,
    [BF_RECORD_EVAL]  = walk_eval,
    [BF_RECORD_FREQ]  = walk_freq,
    [BF_RECORD_OUTCOMES] = walk_outcomes,
};

static int type_error(walk *w, size_t i, const char *type)
{
    char allowed[128];
    bf_record_stored_types(allowed, sizeof allowed);
    if (!type)
        return record_error(w, i, "type", "'type' must be one of %s",
                            allowed);
    return record_error(w, i, "type", "unknown type '%.64s' (allowed: %s)",
                        type, allowed);
}

/* One record, validated (w->s NULL) or written. */
static int walk_record(walk *w, size_t i, const json_t *rec)
{
    if (!json_is_object(rec))
        return bf_error_set(w->err, NULL, 0, "records", "record %zu is not an "
                            "object", i);
    const char *type = json_string_value(json_object_get(rec, "type"));
    int kind = bf_record_kind_of(type);
    if (kind < 0 || !writers[kind])
        return type_error(w, i, type);
    json_int_t step = 0;
    if (get_int(w, i, rec, type, "step", 0, &step) < 0)
        return -1;
    return writers[kind](w, i, rec, step);
}

/* Validates every record; the bad ones are marked in bad[] and, when
 * rejected is not NULL, described in *rejected (see store.h). */
static void validate_records(const json_t *records, char *bad,
                             json_t **rejected)
{
    size_t n_bad = 0, i;
    json_t *rec, *first = json_array();
    json_array_foreach(records, i, rec) {
        bf_error e;
        walk v = {.err = &e};
        if (walk_record(&v, i, rec) == 0)
            continue;
        bad[i] = 1;
        if (n_bad++ < BF_STORE_MAX_REJECTED)
            json_array_append_new(first, json_pack("{s:I, s:s, s:s}",
                "index", (json_int_t)i, "field", e.field, "error", e.msg));
    }
    if (rejected && n_bad > 0)
        *rejected = json_pack("{s:I, s:o}", "count", (json_int_t)n_bad,
                              "records", first);
    else
        json_decref(first);
}

/* Writes every record not marked bad. */
static int write_records(walk *w, const json_t *records, const char *bad)
{
    size_t i;
    json_t *rec;
    json_array_foreach(records, i, rec)
        if (!bad[i] && walk_record(w, i, rec) < 0)
            return -1;
    return 0;
}

/* The job of a live attempt: 1, or 0 when fenced, -1 on error. */
static int live_job(bf_store *s, int64_t attempt_id, int64_t *job_id, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_ATTEMPT_LIVE);
    sqlite3_bind_int64(st, 1, attempt_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *job_id = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store__fail(s, err, "looking up the attempt");
    if (rc == SQLITE_DONE)
        bf_error_set(err, NULL, 0, "attempt_id", "attempt %lld is not live (fenced)",
                     (long long)attempt_id);
    return rc == SQLITE_ROW;
}

/* The records not marked bad, into the open batch transaction. */
static int write_valid(bf_store *s, int64_t attempt_id, const json_t *records,
                       const char *bad, int *n_rows, bf_error *err)
{
    walk w = {.err = err};
    if (!s->in_batch) {
        if (store__exec(s, store__stmt(s, ST_BEGIN), err) < 0)
            return BF_STORE_DB_FAILED;
        s->in_batch = 1;
    }
    int live = live_job(s, attempt_id, &w.job_id, err);
    if (live <= 0)
        return live == 0 ? BF_STORE_FENCED : BF_STORE_DB_FAILED;
    /* A savepoint per call: a failure part-way (disk full) takes back this
     * batch only, not the others waiting in the same transaction. */
    if (store__exec(s, store__stmt(s, ST_SAVEPOINT), err) < 0)
        return BF_STORE_DB_FAILED;
    w.s = s;
    if (write_records(&w, records, bad) < 0) {
        /* SQLITE_FULL / IOERR may have rolled back the whole batch
         * transaction, taking other batches still waiting for their acks
         * with it: then the flush must fail (so none is acked) and the next
         * ingest must begin a new transaction. */
        if (sqlite3_get_autocommit(s->db)) {
            store__batch_lost(s);
            s->in_batch = 0;
            return BF_STORE_DB_FAILED;
        }
        store__exec(s, store__stmt(s, ST_ROLLBACK_TO), NULL);
        store__exec(s, store__stmt(s, ST_RELEASE), NULL);
        return BF_STORE_DB_FAILED;
    }
    if (store__exec(s, store__stmt(s, ST_RELEASE), err) < 0)
        return BF_STORE_DB_FAILED;
    if (n_rows)
        *n_rows = w.n_rows;
    return BF_STORE_OK;
}

int bf_store_ingest(bf_store *s, int64_t attempt_id, const json_t *records,
                    int *n_rows, json_t **rejected, bf_error *err)
{
    if (n_rows)
        *n_rows = 0;
    if (rejected)
        *rejected = NULL;
    if (!json_is_array(records))
        return bf_error_set(err, NULL, 0, "records", "records must be a list");
    char *bad = bf_xcalloc(json_array_size(records) + 1, 1);
    validate_records(records, bad, rejected);
    int rc = write_valid(s, attempt_id, records, bad, n_rows, err);
    free(bad);
    return rc;
}