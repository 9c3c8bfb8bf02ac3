/* dash_api: routes of the JSON API to the queries behind them.  See
 * dash_api.h; docs/dashboard.md is the reference. */
#include "dash_api.h"

#include "alloc.h"
#include "clock.h"
#include "compare.h"
#include "dash_curves.h"
#include "db.h"
#include "file.h"
#include "http.h"
#include "progress.h"
#include "report.h"
#include "results.h"
#include "source.h"
#include "sweep_view.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHED_SWEEPS 8
#define DEFAULT_WIDTH 800

/* What the API keeps of one sweep. */
typedef struct sweep_entry {
    int64_t sweep_id;           /* 0: a free slot */
    uint64_t used;              /* for least-recently-used eviction */
    char fingerprint[256];      /* of what view, summary and jobs show */
    bf_sweep_view view;
    json_t *summary;            /* the reply of /api/sweeps/N */
    json_t *jobs;               /* the reply of /api/sweeps/N/jobs */
    bf_progress progress;       /* its running jobs, observed over polls */
} sweep_entry;

struct bf_dash_api {
    sqlite3 *db;
    bf_source src;
    char *db_path;
    sweep_entry sweeps[CACHED_SWEEPS];
    uint64_t clock;
};

/* A sweep's jobs in a few numbers: cheap to read (one pass over the
 * sweep's jobs by index), and different whenever a job starts or ends. */
typedef struct sweep_state {
    int found;
    char status[16];
    long long total, queued, running, succeeded, failed, cancelled;
    long long last_started, last_finished;     /* ms; -1: none */
    double queued_steps;                       /* steps of the queued jobs */
} sweep_state;

typedef struct reply {
    int status;
    json_t *body;
} reply;

static reply ok(json_t *body)
{
    return (reply){ 200, body };
}

static reply fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static reply fail(int status, const char *fmt, ...)
{
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return (reply){ status, json_pack("{s:s}", "error", message) };
}

/* ---- reading -------------------------------------------------------------- */

/* The rows of sql with ?1 = id (a statement without ?1 ignores it:
 * binding a missing parameter is a no-op). */
static json_t *query_rows(bf_dash_api *a, const char *sql, int64_t id)
{
    sqlite3_stmt *st = bf_db_prepare(a->db, sql);
    if (!st)
        return NULL;
    sqlite3_bind_int64(st, 1, id);
    return bf_db_rows(a->db, st);
}

static long long column_ll(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL
           ? -1 : (long long)sqlite3_column_int64(st, i);
}

static int read_state(bf_dash_api *a, int64_t sweep, sweep_state *s)
{
    sqlite3_stmt *st = bf_db_prepare(a->db,
        "SELECT s.status, count(j.job_id),"
        "       total(j.status = 'queued'), total(j.status = 'running'),"
        "       total(j.status = 'succeeded'), total(j.status = 'failed'),"
        "       total(j.status = 'cancelled'),"
        "       max(j.started_ms), max(j.finished_ms),"
        "       total(CASE WHEN j.status = 'queued'"
        "                  THEN json_extract(j.config, '$.steps') END)"
        "  FROM sweeps s LEFT JOIN jobs j ON j.sweep_id = s.sweep_id"
        " WHERE s.sweep_id = ?1");
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, sweep);
    int rc = sqlite3_step(st);
    *s = (sweep_state){ 0 };
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        s->found = 1;
        snprintf(s->status, sizeof s->status, "%s",
                 (const char *)sqlite3_column_text(st, 0));
        long long *counts[] = { &s->total, &s->queued, &s->running,
                                &s->succeeded, &s->failed, &s->cancelled,
                                &s->last_started, &s->last_finished };
        for (int i = 0; i < 8; i++)
            *counts[i] = column_ll(st, i + 1);
        s->queued_steps = sqlite3_column_double(st, 9);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

static void fingerprint(const sweep_state *s, char *out, size_t cap)
{
    snprintf(out, cap, "%s %lld %lld %lld %lld %lld %lld %lld %lld", s->status,
             s->total, s->queued, s->running, s->succeeded, s->failed,
             s->cancelled, s->last_started, s->last_finished);
}

/* A cursor (the newest finished_ms), null before any job ended. */
static json_t *cursor_json(long long ms)
{
    return ms >= 0 ? json_integer(ms) : json_null();
}

static json_t *counts_json(const sweep_state *s)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "status",
                     s->status, "total", (json_int_t)s->total, "queued",
                     (json_int_t)s->queued, "running", (json_int_t)s->running,
                     "succeeded", (json_int_t)s->succeeded, "failed",
                     (json_int_t)s->failed, "cancelled",
                     (json_int_t)s->cancelled);
}

/* ---- the sweep cache ------------------------------------------------------ */

static void entry_clear_data(sweep_entry *e)
{
    bf_sweep_view_clear(&e->view);
    json_decref(e->summary);
    json_decref(e->jobs);
    e->summary = e->jobs = NULL;
    e->fingerprint[0] = '\0';
}

/* The sweep's entry: found, or made in a free or the least recently used
 * slot. */
static sweep_entry *entry_of(bf_dash_api *a, int64_t sweep)
{
    sweep_entry *slot = &a->sweeps[0];
    for (int i = 0; i < CACHED_SWEEPS; i++) {
        sweep_entry *e = &a->sweeps[i];
        if (e->sweep_id == sweep) {
            e->used = ++a->clock;
            return e;
        }
        if (e->used < slot->used)
            slot = e;
    }
    entry_clear_data(slot);
    bf_progress_clear(&slot->progress);
    slot->sweep_id = sweep;
    slot->used = ++a->clock;
    return slot;
}

/* Brings the entry's view, summary and jobs up to the sweep's state:
 * recomputed only when the fingerprint changed.  0, or -1 (printed). */
static int entry_load(bf_dash_api *a, sweep_entry *e, const sweep_state *s)
{
    char fp[sizeof e->fingerprint];
    fingerprint(s, fp, sizeof fp);
    if (strcmp(fp, e->fingerprint) == 0)
        return 0;
    entry_clear_data(e);
    if (bf_sweep_view_load(&e->view, &a->src, e->sweep_id, NULL, NULL)) {
        bf_sweep_view_clear(&e->view);
        return -1;
    }
    /* Nothing to compare before a job succeeded: an empty table. */
    json_t *compare = bf_sweep_view_succeeded(&e->view) > 0
                      ? bf_compare_rows(&e->view, &a->src, NULL) : NULL;
    e->summary = bf_report_summary(&e->view, compare ? compare : json_array());
    json_object_set_new(e->summary, "counts", counts_json(s));
    e->jobs = json_pack("{s:o, s:o}", "jobs", bf_results_rows(&e->view),
                        "cursor", cursor_json(s->last_finished));
    snprintf(e->fingerprint, sizeof e->fingerprint, "%s", fp);
    return 0;
}

/* The sweep's state and its entry, loaded; a reply on failure. */
static int open_sweep(bf_dash_api *a, int64_t sweep, sweep_state *s,
                      sweep_entry **e, reply *r)
{
    if (read_state(a, sweep, s)) {
        *r = fail(500, "cannot read %s: %s", a->db_path, sqlite3_errmsg(a->db));
        return -1;
    }
    if (!s->found) {
        *r = fail(404, "no sweep %lld", (long long)sweep);
        return -1;
    }
    *e = entry_of(a, sweep);
    if (entry_load(a, *e, s)) {
        *r = fail(500, "cannot read sweep %lld of %s", (long long)sweep,
                  a->db_path);
        return -1;
    }
    return 0;
}

/* ---- workers -------------------------------------------------------------- */

/* "mpirun ... --server ADDR --token-file DB.token", ADDR from the lock file
 * the daemon keeps beside the database ("pid N, listening on ADDR"). */
static void worker_hint(const bf_dash_api *a, char *out, size_t cap)
{
    char lock[1024], addr[128] = "HOST:PORT";
    snprintf(lock, sizeof lock, "%s.lock", a->db_path);
    bf_error err;
    char *text = bf_read_file(lock, NULL, &err);
    const char *at = text ? strstr(text, "listening on ") : NULL;
    if (at) {
        at += strlen("listening on ");
        size_t n = strcspn(at, " \r\n");
        if (n > 0 && n < sizeof addr)
            snprintf(addr, sizeof addr, "%.*s", (int)n, at);
    }
    free(text);
    snprintf(out, cap, "mpirun -np 2 bifocal-worker --server %s --token-file "
             "%s.token", addr, a->db_path);
}

static json_t *workers_summary(bf_dash_api *a)
{
    json_t *rows = query_rows(a, "SELECT count(*) AS total,"
                                 "       total(connected) AS connected"
                                 "  FROM workers", 0);
    json_t *w = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!w)
        w = json_object();
    json_object_set_new(w, "connected", json_integer((json_int_t)
        json_number_value(json_object_get(w, "connected"))));
    char hint[1200];
    worker_hint(a, hint, sizeof hint);
    json_object_set_new(w, "hint", json_string(hint));
    return w;
}

static reply get_workers(bf_dash_api *a)
{
    json_t *rows = query_rows(a,
        "SELECT name, host, ranks, connected, first_seen_ms, last_seen_ms,"
        "       (SELECT count(*) FROM attempts t WHERE t.worker = w.name"
        "         AND t.outcome = 'running') AS running"
        "  FROM workers w ORDER BY name", 0);
    if (!rows)
        return fail(500, "cannot read the workers of %s", a->db_path);
    return ok(json_pack("{s:o, s:o}", "workers", rows, "summary",
                        workers_summary(a)));
}

/* ---- live progress -------------------------------------------------------- */

/* The running jobs of the sweep with their rate and ETA (the entry's
 * observer updated), each with the swept fields' values and without its
 * config; NULL on failure (printed). */
static json_t *running_jobs(bf_dash_api *a, sweep_entry *e,
                            const json_t *fields)
{
    json_t *live = bf_source_rows(&a->src, "live_jobs", e->sweep_id);
    if (!live)
        return NULL;
    bf_progress_update(&e->progress, live, bf_monotonic_ms());
    size_t i, k;
    json_t *row, *name;
    json_array_foreach(live, i, row) {
        json_t *config = json_object_get(row, "config"), *values = json_object();
        json_array_foreach(fields, k, name) {
            json_t *v = json_object_get(config, json_string_value(name));
            if (v)
                json_object_set(values, json_string_value(name), v);
        }
        json_object_set_new(row, "fields", values);
        json_object_del(row, "config");
    }
    return live;
}

static json_t *eta_json(double eta)
{
    return eta >= 0 ? json_real(eta) : json_null();
}

/* Job rows (as /jobs gives them) of the jobs that ended at since or later. */
static json_t *ended_jobs(bf_dash_api *a, const sweep_entry *e, int64_t since)
{
    sqlite3_stmt *st = bf_db_prepare(a->db,
        "SELECT * FROM job_results WHERE sweep_id = ?1 AND job_id IN"
        " (SELECT job_id FROM jobs WHERE sweep_id = ?1 AND finished_ms >= ?2)"
        " ORDER BY job_id");
    if (!st)
        return NULL;
    sqlite3_bind_int64(st, 1, e->sweep_id);
    sqlite3_bind_int64(st, 2, since);
    json_t *rows = bf_db_rows(a->db, st), *out = json_array();
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        json_array_append_new(out, bf_results_row(&e->view, row));
    json_decref(rows);
    return out;
}

static json_t *varying_names(const sweep_entry *e)
{
    json_t *names = json_array();
    for (int i = 0; i < e->view.n_varying; i++)
        json_array_append_new(names, json_string(e->view.varying[i]));
    return names;
}

static reply get_live(bf_dash_api *a, int64_t sweep, int have_since,
                      int64_t since)
{
    sweep_state s;
    sweep_entry *e;
    reply r;
    if (open_sweep(a, sweep, &s, &e, &r))
        return r;
    json_t *fields = varying_names(e);
    json_t *running = running_jobs(a, e, fields);
    json_decref(fields);
    json_t *ended = running && have_since ? ended_jobs(a, e, since)
                                          : json_array();
    if (!running || !ended) {
        json_decref(running);
        json_decref(ended);
        return fail(500, "cannot read sweep %lld of %s", (long long)sweep,
                    a->db_path);
    }
    double eta = bf_progress_sweep_eta(running, s.queued, s.queued_steps);
    return ok(json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o}",
                        "sweep_id", (json_int_t)sweep,
                        "counts", counts_json(&s), "running", running,
                        "ended", ended, "cursor", cursor_json(s.last_finished),
                        "eta_s", eta_json(eta),
                        "workers", workers_summary(a)));
}

/* ---- sweeps --------------------------------------------------------------- */

static reply get_sweep(bf_dash_api *a, int64_t sweep, int jobs)
{
    sweep_state s;
    sweep_entry *e;
    reply r;
    if (open_sweep(a, sweep, &s, &e, &r))
        return r;
    return ok(json_incref(jobs ? e->jobs : e->summary));
}

/* An active sweep's ETA from its running jobs. */
static json_t *sweep_eta(bf_dash_api *a, const json_t *row)
{
    int64_t id = json_integer_value(json_object_get(row, "sweep_id"));
    const char *status = json_string_value(json_object_get(row, "status"));
    if (!status || strcmp(status, "active") != 0
        || json_integer_value(json_object_get(row, "running")) == 0)
        return json_null();
    sweep_entry *e = entry_of(a, id);
    json_t *fields = json_array();
    json_t *running = running_jobs(a, e, fields);
    json_decref(fields);
    double eta = running ? bf_progress_sweep_eta(running,
        json_integer_value(json_object_get(row, "queued")), -1) : -1;
    json_decref(running);
    return eta_json(eta);
}

static reply get_sweeps(bf_dash_api *a)
{
    json_t *rows = query_rows(a,
        "SELECT p.*, s.filename, s.submitted_ms"
        "  FROM sweep_progress p JOIN sweeps s ON s.sweep_id = p.sweep_id"
        " ORDER BY p.sweep_id DESC", 0);
    if (!rows)
        return fail(500, "cannot read the sweeps of %s", a->db_path);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row)
        json_object_set_new(row, "eta_s", sweep_eta(a, row));
    return ok(json_pack("{s:o, s:o}", "sweeps", rows, "workers",
                        workers_summary(a)));
}

/* ---- one job -------------------------------------------------------------- */

/* The job's live row (rate, ETA) through its sweep's observer, or null. */
static json_t *job_live(bf_dash_api *a, int64_t sweep, int64_t job)
{
    json_t *fields = json_array();
    json_t *running = running_jobs(a, entry_of(a, sweep), fields), *row;
    json_decref(fields);
    json_t *found = NULL;
    size_t i;
    json_array_foreach(running, i, row)
        if (json_integer_value(json_object_get(row, "job_id")) == job)
            found = json_incref(row);
    json_decref(running);
    return found ? found : json_null();
}

static reply get_job(bf_dash_api *a, int64_t job)
{
    json_t *rows = query_rows(a,
        "SELECT r.*, j.checkpoint_step, j.learnable_heads,"
        "       s.name AS sweep_name, s.source AS sweep_source"
        "  FROM job_results r JOIN jobs j ON j.job_id = r.job_id"
        "  JOIN sweeps s ON s.sweep_id = r.sweep_id WHERE r.job_id = ?1", job);
    if (!rows)
        return fail(500, "cannot read job %lld of %s", (long long)job,
                    a->db_path);
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!row)
        return fail(404, "no job %lld", (long long)job);
    json_t *swept = bf_sweep_swept_fields(json_string_value(
        json_object_get(row, "sweep_source"))), *fields = json_object(), *name;
    size_t i;
    json_array_foreach(swept, i, name) {
        json_t *v = json_object_get(json_object_get(row, "config"),
                                    json_string_value(name));
        if (v)
            json_object_set(fields, json_string_value(name), v);
    }
    json_decref(swept);
    json_object_del(row, "sweep_source");
    json_t *attempts = query_rows(a,
        "SELECT attempt_id, attempt_no, worker, started_ms, ended_ms,"
        "       lease_expires_ms, outcome, error"
        "  FROM attempts WHERE job_id = ?1 ORDER BY attempt_no", job);
    int64_t sweep = json_integer_value(json_object_get(row, "sweep_id"));
    const char *status = json_string_value(json_object_get(row, "status"));
    json_t *live = status && strcmp(status, "running") == 0
                   ? job_live(a, sweep, job) : json_null();
    return ok(json_pack("{s:o, s:o, s:o, s:o}", "job", row, "fields", fields,
                        "attempts", attempts ? attempts : json_array(),
                        "live", live));
}

/* ---- parameters and routes ------------------------------------------------ */

/* Query parameter `name` as an integer in [min, max]: 1 and *out when
 * present and valid, 0 when absent, -1 with *r when malformed. */
static int int_param(const char *query, const char *name, long long min,
                     long long max, long long *out, reply *r)
{
    char text[32];
    int found = bf_http_query_param(query, name, text, sizeof text);
    if (found == 0)
        return 0;
    char *end = text;
    errno = 0;
    long long v = found > 0 ? strtoll(text, &end, 10) : 0;
    if (found < 0 || !text[0] || *end || errno || v < min || v > max) {
        if (found < 0)
            snprintf(text, sizeof text, "(malformed)");
        *r = fail(400, "parameter '%s' must be an integer from %lld to %lld, "
                  "not '%s'", name, min, max, text);
        return -1;
    }
    *out = v;
    return 1;
}

/* "123" as a positive id; -1 otherwise. */
static int64_t parse_id(const char *s, size_t len)
{
    if (len == 0 || len > 18)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v > 0 ? v : -1;
}

/* Splits "/api/sweeps/12/live" after "/api/" into at most 3 segments. */
static int split(const char *path, const char *seg[3], size_t len[3])
{
    int n = 0;
    for (const char *p = path; *p && n <= 3;) {
        size_t l = strcspn(p, "/");
        if (n == 3 || l == 0)
            return -1;
        seg[n] = p;
        len[n++] = l;
        p += l + (p[l] == '/');
    }
    return n;
}

static int is(const char *seg, size_t len, const char *word)
{
    return strlen(word) == len && strncmp(seg, word, len) == 0;
}

static reply route(bf_dash_api *a, const char *path, const char *query)
{
    const char *seg[3];
    size_t len[3];
    int n = split(path + strlen("/api/"), seg, len);
    int64_t id = n >= 2 ? parse_id(seg[1], len[1]) : 0;
    if (n >= 2 && id < 0)
        return fail(404, "no such resource: %s (ids are positive integers)",
                    path);
    if (n == 1 && is(seg[0], len[0], "sweeps"))
        return get_sweeps(a);
    if (n == 1 && is(seg[0], len[0], "workers"))
        return get_workers(a);
    if (n >= 2 && is(seg[0], len[0], "sweeps")) {
        if (n == 2)
            return get_sweep(a, id, 0);
        if (is(seg[2], len[2], "jobs"))
            return get_sweep(a, id, 1);
        if (is(seg[2], len[2], "live")) {
            long long since = 0;
            reply r;
            int have = int_param(query, "since", 0, INT64_MAX, &since, &r);
            return have < 0 ? r : get_live(a, id, have, since);
        }
    }
    if (n >= 2 && is(seg[0], len[0], "jobs")) {
        if (n == 2)
            return get_job(a, id);
        if (is(seg[2], len[2], "curves")) {
            long long width = DEFAULT_WIDTH, since = 0;
            reply r;
            if (int_param(query, "width", BF_DASH_MIN_WIDTH, BF_DASH_MAX_WIDTH,
                          &width, &r) < 0
                || int_param(query, "since", 0, INT64_MAX, &since, &r) < 0)
                return r;
            json_t *c = bf_dash_curves(a->db, id, (int)width, since);
            return c ? ok(c) : fail(404, "no job %lld", (long long)id);
        }
    }
    return fail(404, "no such endpoint: %s (docs/dashboard.md lists them)",
                path);
}

int bf_dash_api_get(bf_dash_api *a, const char *path, const char *query,
                    json_t **body)
{
    reply r = route(a, path, query);
    *body = r.body;
    return r.status;
}

bf_dash_api *bf_dash_api_new(sqlite3 *db, const char *db_path)
{
    bf_dash_api *a = bf_xcalloc(1, sizeof *a);
    a->db = db;
    a->db_path = bf_xstrdup(db_path);
    a->src = (bf_source){ .db = db, .db_path = a->db_path };
    return a;
}

void bf_dash_api_free(bf_dash_api *a)
{
    if (!a)
        return;
    for (int i = 0; i < CACHED_SWEEPS; i++) {
        entry_clear_data(&a->sweeps[i]);
        bf_progress_clear(&a->sweeps[i].progress);
    }
    free(a->db_path);
    free(a);
}
