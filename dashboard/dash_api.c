/* dash_api: routes of the JSON API to the queries behind them.  See
 * dash_api.h; docs/dashboard.md is the reference. */
#include "dash_api.h"

#include "alloc.h"
#include "clock.h"
#include "compare.h"
#include "dash_curves.h"
#include "dash_sweep.h"
#include "db.h"
#include "file.h"
#include "http.h"
#include "progress.h"
#include "report.h"
#include "results.h"
#include "source.h"
#include "sweep_view.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Sweeps whose aggregates are kept (a million-job sweep holds ~25 MB):
 * more than the sweeps a team runs at once, so active ones do not evict
 * each other. */
#define CACHED_SWEEPS 16
/* Active sweeps loaded when the dashboard starts. */
#define PREFETCHED_SWEEPS 4
#define DEFAULT_WIDTH 800
/* How often the refresher reads the job status feed of the kept sweeps. */
#define REFRESH_MS 250
/* The comparison is recomputed at most this often while jobs succeed. */
#define COMPARE_EVERY_MS 1000
/* A request about a sweep not loaded yet waits this long for it (a small
 * sweep loads in a few ms); past it the answer says "pending". */
#define FIRST_LOAD_WAIT_MS 200
/* /live's "ended" lists at most this many rows (the newest). */
#define MAX_ENDED 1000
#define DEFAULT_PAGE 100
#define MAX_PAGE 1000

/* A kept sweep.  The refresher thread writes agg and summary under the
 * lock and reads agg without it while busy; the answering thread reads
 * both under the lock and evicts only a slot that is not busy. */
typedef struct sweep_slot {
    int64_t sweep_id;           /* 0: a free slot */
    uint64_t used;              /* for least-recently-used eviction */
    int64_t made_ms;            /* when first asked about (monotonic) */
    bf_dash_sweep *agg;         /* NULL until loaded */
    char *summary;              /* /api/sweeps/N without counts, as JSON text
                                   (dumped once, not per request); NULL: not
                                   yet */
    int compared;               /* summary has its comparison (else it is the
                                   outline of a sweep just loaded) */
    int busy, failed, stale;
    double compared_ms;         /* when summary was computed */
} sweep_slot;

/* The running jobs of a sweep observed over polls (answering thread). */
typedef struct observer {
    int64_t sweep_id;
    uint64_t used;
    bf_progress progress;
} observer;

struct bf_dash_api {
    sqlite3 *db;                /* the answering thread's */
    sqlite3 *bg;                /* the refresher's own connection */
    bf_source src;
    char *db_path;
    pthread_t refresher;
    pthread_mutex_t lock;
    pthread_cond_t wake, loaded;
    int stop, started;
    sweep_slot slots[CACHED_SWEEPS];
    observer observers[CACHED_SWEEPS];
    uint64_t clock;
};

typedef struct reply {
    int status;
    json_t *body;
    char *text;                 /* or the body as JSON text already */
} reply;

/* How every answer is encoded. */
#define JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(7))

static reply ok(json_t *body)
{
    return (reply){ 200, body, NULL };
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
    return (reply){ status, json_pack("{s:s}", "error", message), NULL };
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

/* One integer of sql with ?1 = id: 1 and *out (-1 for NULL) when a row
 * came, 0 when none, -1 on failure. */
static int query_int(bf_dash_api *a, const char *sql, int64_t id, long long *out)
{
    sqlite3_stmt *st = bf_db_prepare(a->db, sql);
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_type(st, 0) == SQLITE_NULL
               ? -1 : (long long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* A cursor (the newest finished_ms), null before any job ended. */
static json_t *cursor_json(long long ms)
{
    return ms >= 0 ? json_integer(ms) : json_null();
}

/* The newest finished_ms of the sweep (one seek of its index); -1: none. */
static long long newest_finished(bf_dash_api *a, int64_t sweep)
{
    long long ms = -1;
    query_int(a, "SELECT max(finished_ms) FROM jobs WHERE sweep_id = ?1"
                 " AND finished_ms IS NOT NULL", sweep, &ms);
    return ms;
}

/* ---- the refresher -------------------------------------------------------- */

/* j as JSON text (NULL if j is), j released. */
static char *dump_stolen(json_t *j)
{
    char *text = j ? json_dumps(j, JSON_FLAGS) : NULL;
    json_decref(j);
    return text;
}

static void slot_clear(sweep_slot *e)
{
    bf_dash_sweep_free(e->agg);
    free(e->summary);
    *e = (sweep_slot){ 0 };
}

/* Loads, follows the feed of, or recomputes the summary of slot e (locked
 * on entry and exit; unlocked while it reads). */
static void refresh_slot(bf_dash_api *a, sweep_slot *e)
{
    int64_t id = e->sweep_id;
    e->busy = 1;
    if (!e->agg) {
        pthread_mutex_unlock(&a->lock);
        bf_dash_sweep *agg = bf_dash_sweep_load(a->bg, id);
        char *outline = agg ? dump_stolen(bf_dash_sweep_outline(agg)) : NULL;
        pthread_mutex_lock(&a->lock);
        e->agg = agg;
        e->failed = !agg;
        e->stale = 1;
        /* The page shows all but the comparison while it is computed (a
         * sweep reloaded keeps its last summary instead). */
        if (!e->summary)
            e->summary = outline;
        else
            free(outline);
        pthread_cond_broadcast(&a->loaded);
    } else {
        pthread_mutex_unlock(&a->lock);
        bf_dash_changes *c = bf_dash_sweep_read_changes(e->agg, a->bg);
        pthread_mutex_lock(&a->lock);
        int reload = 0;
        if (c && bf_dash_sweep_apply(e->agg, c, &reload))
            e->stale = 1;
        if (reload) {           /* jobs were still being stored */
            bf_dash_sweep_free(e->agg);
            e->agg = NULL;
        }
    }
    double now = (double)bf_monotonic_ms();
    if (e->agg && e->stale && now - e->compared_ms >= COMPARE_EVERY_MS) {
        pthread_mutex_unlock(&a->lock);
        char *summary = dump_stolen(bf_dash_sweep_summary(e->agg, a->bg));
        pthread_mutex_lock(&a->lock);
        if (summary) {
            free(e->summary);
            e->summary = summary;
            e->compared = 1;
            e->stale = 0;
        }
        e->failed = !summary && !e->summary;
        e->compared_ms = now;
    }
    e->busy = 0;
    pthread_cond_broadcast(&a->loaded);
}

/* ms from now, on the clock the condition variables wait by
 * (CLOCK_MONOTONIC, set in bf_dash_api_new: a wall-clock jump neither
 * stretches nor cuts a wait). */
static struct timespec deadline_in(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += ms * 1000000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

static void *refresher_main(void *arg)
{
    bf_dash_api *a = arg;
    pthread_mutex_lock(&a->lock);
    while (!a->stop) {
        for (int i = 0; i < CACHED_SWEEPS && !a->stop; i++)
            if (a->slots[i].sweep_id && !a->slots[i].failed)
                refresh_slot(a, &a->slots[i]);
        struct timespec until = deadline_in(REFRESH_MS);
        if (!a->stop)
            pthread_cond_timedwait(&a->wake, &a->lock, &until);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

/* The slot of a sweep, made in a free or the least recently used idle slot
 * (the refresher is told).  Locked. */
static sweep_slot *slot_of(bf_dash_api *a, int64_t sweep)
{
    sweep_slot *pick = NULL;
    for (int i = 0; i < CACHED_SWEEPS; i++) {
        sweep_slot *e = &a->slots[i];
        if (e->sweep_id == sweep) {
            e->used = ++a->clock;
            return e;
        }
        if (!e->busy && (!pick || e->used < pick->used))
            pick = e;
    }
    slot_clear(pick);           /* the refresher works on one slot at a time */
    pick->sweep_id = sweep;
    pick->used = ++a->clock;
    pick->made_ms = bf_monotonic_ms();
    pthread_cond_signal(&a->wake);
    return pick;
}

/* The sweep's slot once it is loaded, waiting up to FIRST_LOAD_WAIT_MS
 * for a first load, and for its first comparison too when compared is set
 * and the sweep was first asked about less than FIRST_LOAD_WAIT_MS ago: a
 * small sweep's first summary comes whole, while a big one's polls take
 * its outline at once (docs/dashboard.md).  Locked; NULL: not loaded yet
 * (*failed set when it could not be). */
static sweep_slot *loaded_slot(bf_dash_api *a, int64_t sweep, int compared,
                               int *failed)
{
    sweep_slot *e = slot_of(a, sweep);
    compared = compared && bf_monotonic_ms() - e->made_ms < FIRST_LOAD_WAIT_MS;
    struct timespec until = deadline_in(FIRST_LOAD_WAIT_MS);
    while (e->sweep_id == sweep && !(e->summary && (e->compared || !compared))
           && !e->failed
           && pthread_cond_timedwait(&a->loaded, &a->lock, &until) == 0)
        ;
    *failed = e->sweep_id == sweep && e->failed;
    if (*failed)
        slot_clear(e);          /* tried again on the next request */
    return e->sweep_id == sweep && e->summary ? e : NULL;
}

/* 0 if the sweep exists, else the reply to give. */
static int check_sweep(bf_dash_api *a, int64_t sweep, reply *r)
{
    long long one;
    int rc = query_int(a, "SELECT 1 FROM sweeps WHERE sweep_id = ?1", sweep, &one);
    if (rc < 0)
        *r = fail(500, "cannot read %s: %s", a->db_path, sqlite3_errmsg(a->db));
    else if (rc == 0)
        *r = fail(404, "no sweep %lld", (long long)sweep);
    return rc == 1 ? 0 : -1;
}

static reply pending(int64_t sweep)
{
    return ok(json_pack("{s:I, s:b}", "sweep_id", (json_int_t)sweep,
                        "pending", 1));
}

static reply load_failed(bf_dash_api *a, int64_t sweep)
{
    return fail(500, "cannot read sweep %lld of %s", (long long)sweep,
                a->db_path);
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

/* The observer of a sweep's running jobs: found, or made in the least
 * recently used place. */
static bf_progress *observer_of(bf_dash_api *a, int64_t sweep)
{
    observer *pick = &a->observers[0];
    for (int i = 0; i < CACHED_SWEEPS; i++) {
        observer *o = &a->observers[i];
        if (o->sweep_id == sweep) {
            o->used = ++a->clock;
            return &o->progress;
        }
        if (o->used < pick->used)
            pick = o;
    }
    bf_progress_clear(&pick->progress);
    pick->sweep_id = sweep;
    pick->used = ++a->clock;
    return &pick->progress;
}

/* {field: value} of config's values of fields (an array of names), those
 * config lacks left out (new reference; the values shared with config). */
static json_t *config_values(const json_t *config, const json_t *fields)
{
    json_t *values = json_object(), *name;
    size_t i;
    json_array_foreach(fields, i, name) {
        json_t *v = json_object_get(config, json_string_value(name));
        if (v)
            json_object_set(values, json_string_value(name), v);
    }
    return values;
}

/* A job's stage (a column, not in its config), or NULL. */
static json_t *job_stage(bf_dash_api *a, int64_t job)
{
    json_t *rows = query_rows(a, "SELECT stage FROM jobs WHERE job_id = ?1"
                                 " AND stage IS NOT NULL", job);
    json_t *stage = json_incref(json_object_get(json_array_get(rows, 0),
                                                "stage"));
    json_decref(rows);
    return stage;
}

/* The running jobs of the sweep with their rate and ETA (its observer
 * updated), each with the values of fields (a stage's name among them)
 * and without its config; NULL on failure (printed). */
static json_t *running_jobs(bf_dash_api *a, int64_t sweep, const json_t *fields)
{
    json_t *live = bf_source_rows(&a->src, "live_jobs", sweep);
    if (!live)
        return NULL;
    bf_progress_update(observer_of(a, sweep), live, bf_monotonic_ms());
    int staged = 0;
    size_t i;
    json_t *row, *name;
    json_array_foreach(fields, i, name)
        staged |= strcmp(json_string_value(name), "stage") == 0;
    json_array_foreach(live, i, row) {
        json_t *values = config_values(json_object_get(row, "config"), fields);
        json_t *stage = staged ? job_stage(a, json_integer_value(
                                     json_object_get(row, "job_id"))) : NULL;
        if (stage)
            json_object_set_new(values, "stage", stage);
        json_object_set_new(row, "fields", values);
        json_object_del(row, "config");
    }
    return live;
}

static json_t *eta_json(double eta)
{
    return eta >= 0 ? json_real(eta) : json_null();
}

/* Job rows (as /jobs gives them) of the ids (an array), in that order. */
static json_t *job_rows(bf_dash_api *a, const json_t *ids, const json_t *varying)
{
    char *list = json_dumps(ids, JSON_COMPACT);
    sqlite3_stmt *st = list ? bf_db_prepare(a->db,
        "SELECT * FROM job_results WHERE job_id IN"
        " (SELECT value FROM json_each(?1))") : NULL;
    if (!st) {
        free(list);
        return NULL;
    }
    sqlite3_bind_text(st, 1, list, -1, SQLITE_TRANSIENT);
    free(list);
    json_t *rows = bf_db_rows(a->db, st);
    if (!rows)
        return NULL;
    json_t *by_id = json_object(), *row, *id;
    size_t i;
    json_array_foreach(rows, i, row) {
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(
            json_object_get(row, "job_id")));
        json_object_set(by_id, key, row);
    }
    bf_sweep_view v;
    bf_dash_names_view(&v, varying, NULL);
    json_array_foreach(ids, i, id) {
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(id));
        json_t *r = json_object_get(by_id, key);
        if (r)
            bf_row_store_add(&v.jobs, r);
    }
    json_t *out = bf_results_rows(&v, SIZE_MAX);
    bf_row_store_clear(&v.jobs);
    json_decref(by_id);
    json_decref(rows);
    return out;
}

/* The jobs that ended at since or later, by id: the newest MAX_ENDED of
 * them (a page that fell that far behind fetches its page again). */
static json_t *ended_jobs(bf_dash_api *a, int64_t sweep, int64_t since,
                          const json_t *varying)
{
    sqlite3_stmt *st = bf_db_prepare(a->db,
        "SELECT job_id FROM (SELECT job_id FROM jobs"
        "  WHERE sweep_id = ?1 AND finished_ms >= ?2"
        "  ORDER BY finished_ms DESC LIMIT ?3) ORDER BY job_id");
    if (!st)
        return NULL;
    sqlite3_bind_int64(st, 1, sweep);
    sqlite3_bind_int64(st, 2, since);
    sqlite3_bind_int(st, 3, MAX_ENDED);
    json_t *ids = json_array();
    while (sqlite3_step(st) == SQLITE_ROW)
        json_array_append_new(ids, json_integer(sqlite3_column_int64(st, 0)));
    sqlite3_finalize(st);
    json_t *rows = job_rows(a, ids, varying);
    json_decref(ids);
    return rows;
}

/* What /live reads of the kept aggregates (all zero while not loaded). */
typedef struct live_counts {
    json_t *counts, *varying;
} live_counts;

static void read_counts(bf_dash_api *a, int64_t sweep, live_counts *c)
{
    int failed;
    pthread_mutex_lock(&a->lock);
    sweep_slot *e = loaded_slot(a, sweep, 0, &failed);
    *c = (live_counts){ .counts = e ? bf_dash_sweep_counts(e->agg) : json_null(),
                        .varying = e ? bf_dash_sweep_varying(e->agg) : json_array() };
    pthread_mutex_unlock(&a->lock);
}

static reply get_live(bf_dash_api *a, int64_t sweep, int have_since,
                      int64_t since)
{
    reply r;
    if (check_sweep(a, sweep, &r))
        return r;
    live_counts c;
    read_counts(a, sweep, &c);
    json_t *running = running_jobs(a, sweep, c.varying);
    json_t *ended = running && have_since ? ended_jobs(a, sweep, since, c.varying)
                                          : json_array();
    json_decref(c.varying);
    if (!running || !ended) {
        json_decref(running);
        json_decref(ended);
        json_decref(c.counts);
        return load_failed(a, sweep);
    }
    double eta = json_is_null(c.counts) ? -1
                 : bf_progress_sweep_eta_now(observer_of(a, sweep), c.counts,
                                             running, bf_monotonic_ms());
    return ok(json_pack("{s:I, s:o, s:b, s:o, s:o, s:o, s:o, s:o}",
                        "sweep_id", (json_int_t)sweep,
                        "counts", c.counts, "pending", json_is_null(c.counts),
                        "running", running, "ended", ended,
                        "cursor", cursor_json(newest_finished(a, sweep)),
                        "eta_s", eta_json(eta),
                        "workers", workers_summary(a)));
}

/* ---- sweeps --------------------------------------------------------------- */

static reply get_summary(bf_dash_api *a, int64_t sweep)
{
    reply r;
    if (check_sweep(a, sweep, &r))
        return r;
    int failed;
    pthread_mutex_lock(&a->lock);
    sweep_slot *e = loaded_slot(a, sweep, 1, &failed);
    char *text = NULL;
    if (e) {                    /* {"counts": ..., and the kept summary's keys */
        static const char key[] = "{\"counts\":";
        char *counts = dump_stolen(bf_dash_sweep_counts(e->agg));
        size_t nk = sizeof key - 1, nc = strlen(counts),
               rest = strlen(e->summary);   /* from its "{" on: its NUL too */
        text = bf_xmalloc(nk + nc + 1 + rest);  /* once: megabytes, not grown */
        memcpy(text, key, nk);
        memcpy(text + nk, counts, nc);
        text[nk + nc] = ',';
        memcpy(text + nk + nc + 1, e->summary + 1, rest);
        free(counts);
    }
    pthread_mutex_unlock(&a->lock);
    return text ? (reply){ 200, NULL, text }
                : failed ? load_failed(a, sweep) : pending(sweep);
}

/* The parameters of a page of the job table (docs/dashboard.md). */
typedef struct page_params {
    bf_dash_page_query q;
    char sort[128];
    json_t *where;
} page_params;

static int is_page_param(const char *name, size_t len)
{
    static const char *const names[] = { "offset", "limit", "sort", "desc",
                                         "status", NULL };
    for (const char *const *n = names; *n; n++)
        if (strlen(*n) == len && strncmp(*n, name, len) == 0)
            return 1;
    return 0;
}

static int int_param(const char *query, const char *name, long long min,
                     long long max, long long *out, reply *r);

/* A field filter FIELD=VALUE: VALUE as JSON if it reads as JSON, else as
 * text (rope=spectral, lr=0.001, rope="spectral" all work). */
static json_t *filter_value(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    return v ? v : json_string(text);
}

/* Reads query into p: every name either a page parameter or a varying
 * field.  0, or -1 with *r. */
static int page_params_read(const char *query, const json_t *varying,
                            page_params *p, reply *r)
{
    *p = (page_params){ .q = { .limit = DEFAULT_PAGE, .status = -1 } };
    long long desc = 0;
    if (int_param(query, "offset", 0, INT64_MAX / 2, &p->q.offset, r) < 0
        || int_param(query, "limit", 1, MAX_PAGE, &p->q.limit, r) < 0
        || int_param(query, "desc", 0, 1, &desc, r) < 0)
        return -1;
    p->q.desc = (int)desc;
    char text[256];
    if (bf_http_query_param(query, "status", text, sizeof text) == 1
        && (p->q.status = bf_job_status_parse(text)) < 0) {
        *r = fail(400, "parameter 'status': '%s' is not a job status (waiting, "
                  "queued, running, succeeded, failed, cancelled, pruned)", text);
        return -1;
    }
    if (bf_http_query_param(query, "sort", p->sort, sizeof p->sort) == 1)
        p->q.sort = p->sort;
    p->where = json_object();
    p->q.where = p->where;
    for (const char *at = query ? query : ""; *at;) {
        size_t len = strcspn(at, "=&"), all = strcspn(at, "&");
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), at);
        if (len > 0 && !is_page_param(at, len)) {
            size_t i;
            json_t *f;
            int known = 0;
            json_array_foreach(varying, i, f)
                known |= strcmp(json_string_value(f), name) == 0;
            if (!known || bf_http_query_param(query, name, text, sizeof text) != 1) {
                *r = fail(400, "parameter '%s': not a page parameter (offset, "
                          "limit, sort, desc, status) nor a field that varies "
                          "in the sweep", name);
                return -1;
            }
            json_object_set_new(p->where, name, filter_value(text));
        }
        at += all + (at[all] == '&');
    }
    return 0;
}

static reply get_jobs(bf_dash_api *a, int64_t sweep, const char *query)
{
    reply r;
    if (check_sweep(a, sweep, &r))
        return r;
    int failed;
    page_params p = { 0 };
    long long total = 0;
    const char *error = NULL;
    json_t *ids = NULL, *varying = NULL;
    pthread_mutex_lock(&a->lock);
    sweep_slot *e = loaded_slot(a, sweep, 0, &failed);
    if (e) {
        varying = bf_dash_sweep_varying(e->agg);
        if (page_params_read(query, varying, &p, &r) == 0
            && !(ids = bf_dash_sweep_page(e->agg, &p.q, &total, &error)))
            r = fail(400, "%s", error);
    }
    pthread_mutex_unlock(&a->lock);
    if (!e) {
        json_decref(p.where);
        return failed ? load_failed(a, sweep) : pending(sweep);
    }
    json_t *rows = ids ? job_rows(a, ids, varying) : NULL;
    json_decref(ids);
    json_decref(varying);
    json_decref(p.where);
    if (!rows)
        return error || r.body ? r : load_failed(a, sweep);
    return ok(json_pack("{s:o, s:I, s:I, s:I, s:s, s:b, s:o}", "jobs", rows,
                        "total", (json_int_t)total,
                        "offset", (json_int_t)p.q.offset,
                        "limit", (json_int_t)p.q.limit,
                        "sort", p.q.sort ? p.q.sort : "job_id", "desc", p.q.desc,
                        "cursor", cursor_json(newest_finished(a, sweep))));
}

/* An active sweep's ETA from its running jobs. */
static json_t *sweep_eta(bf_dash_api *a, const json_t *row)
{
    int64_t id = json_integer_value(json_object_get(row, "sweep_id"));
    const char *status = json_string_value(json_object_get(row, "status"));
    if (!status || strcmp(status, "active") != 0
        || json_integer_value(json_object_get(row, "running")) == 0)
        return json_null();
    json_t *fields = json_array();
    json_t *running = running_jobs(a, id, fields);
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
    json_t *running = running_jobs(a, sweep, fields), *row;
    json_decref(fields);
    json_t *found = NULL;
    size_t i;
    json_array_foreach(running, i, row)
        if (json_integer_value(json_object_get(row, "job_id")) == job)
            found = json_incref(row);
    json_decref(running);
    return found ? found : json_null();
}

/* A job's values of the fields that vary in its sweep, as compare finds
 * them (a search's trial values and the stage among them), or, while the
 * sweep is not loaded, of the fields its file sweeps; row is the job's
 * job_results row with its sweep's source. */
static json_t *job_fields(bf_dash_api *a, int64_t sweep, const json_t *row)
{
    live_counts c;
    read_counts(a, sweep, &c);
    json_decref(c.counts);
    json_t *names = json_array_size(c.varying) ? c.varying
                    : bf_sweep_view_swept_fields(json_string_value(
                          json_object_get(row, "sweep_source")));
    if (names != c.varying)
        json_decref(c.varying);
    json_t *fields = json_object(), *name;
    size_t i;
    json_array_foreach(names, i, name) {
        json_t *v = bf_sweep_view_row_value(row, json_string_value(name));
        if (v && !json_is_null(v))
            json_object_set(fields, json_string_value(name), v);
    }
    json_decref(names);
    return fields;
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
    int64_t sweep = json_integer_value(json_object_get(row, "sweep_id"));
    json_t *fields = job_fields(a, sweep, row);
    json_object_del(row, "sweep_source");
    json_t *attempts = query_rows(a,
        "SELECT attempt_id, attempt_no, worker, started_ms, ended_ms,"
        "       lease_expires_ms, outcome, error"
        "  FROM attempts WHERE job_id = ?1 ORDER BY attempt_no", job);
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
            return get_summary(a, id);
        if (is(seg[2], len[2], "jobs"))
            return get_jobs(a, id, query);
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
                    char **body)
{
    reply r = route(a, path, query);
    *body = r.text ? r.text : dump_stolen(r.body);
    return r.status;
}

/* The newest active sweeps are loaded from the start: a page opened on one
 * of a million jobs need not wait the seconds its first read takes. */
static void prefetch_active(bf_dash_api *a)
{
    sqlite3_stmt *st = bf_db_prepare(a->db,
        "SELECT sweep_id FROM sweeps WHERE status = 'active'"
        " ORDER BY sweep_id DESC LIMIT ?1");
    if (!st)
        return;
    sqlite3_bind_int(st, 1, PREFETCHED_SWEEPS);
    pthread_mutex_lock(&a->lock);
    while (sqlite3_step(st) == SQLITE_ROW)
        slot_of(a, sqlite3_column_int64(st, 0));
    pthread_mutex_unlock(&a->lock);
    sqlite3_finalize(st);
}

bf_dash_api *bf_dash_api_new(sqlite3 *db, const char *db_path)
{
    bf_dash_api *a = bf_xcalloc(1, sizeof *a);
    a->db = db;
    a->db_path = bf_xstrdup(db_path);
    a->src = (bf_source){ .db = db, .db_path = a->db_path };
    for (int i = 0; i < CACHED_SWEEPS; i++)
        bf_progress_init(&a->observers[i].progress);
    pthread_mutex_init(&a->lock, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&a->wake, &monotonic);
    pthread_cond_init(&a->loaded, &monotonic);
    pthread_condattr_destroy(&monotonic);
    /* The refresher reads through its own connection: a SQLite connection
     * serves one statement sequence at a time. */
    a->bg = bf_db_open(db_path, BF_DB_DASHBOARD_VERSION);
    if (!a->bg || pthread_create(&a->refresher, NULL, refresher_main, a) != 0) {
        bf_dash_api_free(a);
        return NULL;
    }
    sqlite3_exec(a->bg, "PRAGMA query_only = 1", NULL, NULL, NULL);
    a->started = 1;
    prefetch_active(a);
    return a;
}

void bf_dash_api_free(bf_dash_api *a)
{
    if (!a)
        return;
    if (a->started) {
        pthread_mutex_lock(&a->lock);
        a->stop = 1;
        pthread_cond_signal(&a->wake);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->refresher, NULL);
    }
    for (int i = 0; i < CACHED_SWEEPS; i++) {
        slot_clear(&a->slots[i]);
        bf_progress_clear(&a->observers[i].progress);
    }
    sqlite3_close(a->bg);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->wake);
    pthread_cond_destroy(&a->loaded);
    free(a->db_path);
    free(a);
}
