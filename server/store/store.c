/* bf_store: opening and migrating the database, transactions, sweep
 * submission, workers and the client's queries.  The queue lives in
 * store_queue.c, metric ingest in store_metrics.c. */
#include "store_internal.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "job_config.h"
#include "job_status.h"
#include "result_views.h"
#include "sweep.h"

/* Waiting this long for a lock held by another process (the sqlite3 CLI,
 * a second daemon by mistake) beats failing with "database is locked". */
#define BUSY_TIMEOUT_MS 5000

static const char *const statement_sql[ST_COUNT] = {
#define BF_STORE_SQL(id, sql) [id] = sql,
    BF_STORE_STATEMENTS(BF_STORE_SQL)
#undef BF_STORE_SQL
};

int bf_store_schema_version(void)
{
    return bf_schema_n_migrations;
}

int store__report(bf_store *s, int rc, int64_t attempt_id, bf_error *err)
{
    if (rc >= 0 || !err)
        return rc;
    if (rc == BF_STORE_FENCED)
        bf_error_set(err, NULL, 0, "attempt_id", "attempt %lld is not its "
                     "job's live lease", (long long)attempt_id);
    else
        *err = s->last;
    return rc;
}

int store__fail(bf_store *s, bf_error *err, const char *what)
{
    /* `what` is often a statement's SQL: cut short, so the cause after it
     * always fits. */
    if (s->db)
        bf_error_set(&s->last, s->path, 0, NULL, "%.200s: %s (SQLite error %d)",
                     what, sqlite3_errmsg(s->db),
                     sqlite3_extended_errcode(s->db));
    else
        bf_error_set(&s->last, s->path, 0, NULL, "%.200s: out of memory", what);
    if (err)
        *err = s->last;
    return -1;
}

sqlite3_stmt *store__stmt(bf_store *s, int id)
{
    sqlite3_stmt *st = s->st[id];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

int store__exec(bf_store *s, sqlite3_stmt *st, bf_error *err)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return store__fail(s, err, sqlite3_sql(st));
    return 0;
}

/* ---- transactions ------------------------------------------------------- */

void store__batch_lost(bf_store *s)
{
    if (!s->batch_lost)
        s->lost = s->last;
    s->batch_lost = 1;
}

/* Ends the open metric batch, committed or (if COMMIT fails) rolled back
 * and marked lost.  A failed COMMIT (disk full, I/O error) may or may not
 * have rolled the transaction back itself, so in_batch is cleared either
 * way: left set over a transaction SQLite had rolled back, every later
 * begin or flush would fail with "no transaction is active", and one
 * SQLITE_FULL would wedge the daemon until restarted. */
static int end_batch(bf_store *s, bf_error *err)
{
    if (!s->in_batch)
        return 0;
    s->in_batch = 0;
    if (store__exec(s, store__stmt(s, ST_COMMIT), err) == 0)
        return 0;
    store__batch_lost(s);
    store__rollback(s);
    return -1;
}

/* Only this call reports (and forgets) a lost batch, so whatever call ended
 * the batch, the daemon's flush that would send its acks sends errors. */
int bf_store_flush(bf_store *s, bf_error *err)
{
    end_batch(s, NULL);
    if (!s->batch_lost)
        return 0;
    s->batch_lost = 0;
    if (err)
        *err = s->lost;
    s->last = s->lost;
    return -1;
}

int store__begin(bf_store *s, bf_error *err)
{
    if (end_batch(s, err) < 0)
        return -1;
    return store__exec(s, store__stmt(s, ST_BEGIN), err);
}

int store__commit(bf_store *s, bf_error *err)
{
    return store__exec(s, store__stmt(s, ST_COMMIT), err);
}

void store__rollback(bf_store *s)
{
    /* Rolls back whatever is open.  A failure here means nothing was (a
     * failed COMMIT may have rolled back already), and is not recorded:
     * s->last keeps the failure that made the caller roll back. */
    sqlite3_stmt *st = store__stmt(s, ST_ROLLBACK);
    sqlite3_step(st);
    sqlite3_reset(st);
    s->in_batch = 0;
}

int store__refresh_sweep(bf_store *s, int64_t sweep_id, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SWEEP_REFRESH);
    sqlite3_bind_int64(st, 1, sweep_id);
    return store__exec(s, st, err);
}

/* ---- open / migrate / close --------------------------------------------- */

static int exec_sql(bf_store *s, const char *sql, bf_error *err)
{
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    bf_error_set(&s->last, s->path, 0, NULL, "%s (SQLite error %d)",
                 msg ? msg : "sqlite3_exec failed",
                 sqlite3_extended_errcode(s->db));
    if (err)
        *err = s->last;
    sqlite3_free(msg);
    return -1;
}

static int read_user_version(bf_store *s, int *version, bf_error *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return store__fail(s, err, "reading the schema version");
    int rc = sqlite3_step(st);
    *version = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : store__fail(s, err, "reading the schema version");
}

/* Whether the open transaction left every foreign key intact: migrations
 * run with the checks off, since rebuilding a table (004_stages) drops and
 * re-creates a parent of other tables' keys. */
static int check_foreign_keys(bf_store *s, bf_error *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "PRAGMA foreign_key_check", -1, &st,
                           NULL) != SQLITE_OK)
        return store__fail(s, err, "checking foreign keys");
    int rc = sqlite3_step(st);
    char table[128] = "";
    if (rc == SQLITE_ROW)
        snprintf(table, sizeof table, "%s",
                 (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW)
        return bf_error_set(err, s->path, 0, NULL, "a row of table %s "
                            "breaks a foreign key", table);
    return rc == SQLITE_DONE ? 0 : store__fail(s, err, "checking foreign keys");
}

/* Applies every migration the database lacks, each in its own transaction
 * together with its user_version bump, so a crash never leaves a half-done
 * step.  The version is re-read under the write lock in case another
 * process migrated in between. */
static int migrate_steps(bf_store *s, bf_error *err)
{
    for (;;) {
        int version;
        if (exec_sql(s, "BEGIN IMMEDIATE", err) < 0)
            return -1;
        if (read_user_version(s, &version, err) < 0)
            goto fail;
        if (version > bf_schema_n_migrations) {
            bf_error_set(err, s->path, 0, NULL,
                         "database schema version %d is newer than this "
                         "bifocald supports (%d); use a newer bifocald",
                         version, bf_schema_n_migrations);
            goto fail;
        }
        if (version == bf_schema_n_migrations)
            return exec_sql(s, "COMMIT", err);
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", version + 1);
        if (exec_sql(s, bf_schema_migrations[version], err) < 0 ||
            exec_sql(s, bump, err) < 0 || check_foreign_keys(s, err) < 0 ||
            exec_sql(s, "COMMIT", err) < 0) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            bf_error_set(err, s->path, 0, NULL,
                         "migration %d failed: %s", version + 1, why);
            goto fail;
        }
    }
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* Foreign keys cannot be switched inside a transaction: off around all the
 * steps, on again whatever happened. */
static int migrate(bf_store *s, bf_error *err)
{
    if (exec_sql(s, "PRAGMA foreign_keys = OFF", err) < 0)
        return -1;
    int rc = migrate_steps(s, err);
    if (exec_sql(s, "PRAGMA foreign_keys = ON", rc == 0 ? err : NULL) < 0)
        rc = -1;
    return rc;
}

/* WAL lets the sqlite3 CLI read while the daemon writes; NORMAL sync is
 * durable across process crashes and loses at most the last commits on
 * power loss, which the workers' acks-after-flush protocol tolerates. */
static int configure(bf_store *s, bf_error *err)
{
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK)
        return store__fail(s, err, "setting WAL mode");
    int ok = sqlite3_step(st) == SQLITE_ROW &&
             strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
    sqlite3_finalize(st);
    if (!ok)
        return bf_error_set(err, s->path, 0, NULL,
                            "cannot switch the database to WAL mode "
                            "(is it on a network file system?)");
    /* A 64 MiB page cache keeps a 100,000-job submission in memory until
     * its commit instead of spilling pages to the WAL part-way.  While a
     * reader (the sqlite3 CLI) holds a transaction no checkpoint can reset
     * the WAL and it grows; journal_size_limit truncates it back to
     * BF_STORE_WAL_LIMIT once a checkpoint completes after the reader
     * leaves, instead of leaving it at its peak for good. */
    char sql[256];
    snprintf(sql, sizeof sql, "PRAGMA synchronous = NORMAL;"
             " PRAGMA foreign_keys = ON; PRAGMA cache_size = -65536;"
             " PRAGMA journal_size_limit = %lld;",
             (long long)BF_STORE_WAL_LIMIT);
    return exec_sql(s, sql, err);
}

static int prepare_all(bf_store *s, bf_error *err)
{
    for (int i = 0; i < ST_COUNT; i++)
        if (sqlite3_prepare_v3(s->db, statement_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &s->st[i], NULL) != SQLITE_OK)
            return store__fail(s, err, statement_sql[i]);
    sqlite3_stmt *st = store__stmt(s, ST_LEASE_MAX_SEQ);
    if (sqlite3_step(st) != SQLITE_ROW)
        return store__fail(s, err, "reading the lease counter");
    s->lease_seq = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    st = store__stmt(s, ST_DATABASE_ID);
    const unsigned char *id = sqlite3_step(st) == SQLITE_ROW
                                  ? sqlite3_column_text(st, 0) : NULL;
    if (id)
        s->database_id = bf_xstrdup((const char *)id);
    sqlite3_reset(st);
    return id ? 0 : store__fail(s, err, "reading the database id");
}

/* A daemon killed while it stored a big sweep left it half-stored (n_jobs
 * still 0): at start nothing else runs yet, so it goes in one go. */
static int discard_abandoned(bf_store *s, bf_error *err)
{
    return exec_sql(s, "BEGIN IMMEDIATE;"
        " DELETE FROM jobs WHERE sweep_id IN"
        "  (SELECT sweep_id FROM sweeps WHERE n_jobs = 0);"
        " DELETE FROM sweeps WHERE n_jobs = 0; COMMIT;", err);
}

/* Finds the ended jobs whose dependents a stopped daemon left waiting,
 * and the revivals it left half-done: bf_store_settle (store_queue.c)
 * finishes them. */
static int load_unsettled(bf_store *s, bf_error *err)
{
    return store__ids_collect(s, store__stmt(s, ST_UNSETTLED_SOURCES),
                              &s->unsettled, "finding unsettled dependents",
                              err) < 0 ||
           store__ids_collect(s, store__stmt(s, ST_REVIVING_SOURCES),
                              &s->reviving, "finding dependents to revive",
                              err) < 0 ||
           store__ids_collect(s, store__stmt(s, ST_REVIVE_ROOTS),
                              &s->revive_roots, "finding retried jobs",
                              err) < 0 ? -1 : 0;
}

int bf_store_open(bf_store **out, const char *path, bf_error *err)
{
    *out = NULL;
    bf_store *s = bf_xcalloc(1, sizeof *s);
    s->path = bf_xstrdup(path);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        NULL) != SQLITE_OK) {
        store__fail(s, err, "cannot open the database");
        bf_store_close(s);
        return -1;
    }
    if (configure(s, err) < 0 || migrate(s, err) < 0
        || discard_abandoned(s, err) < 0 || prepare_all(s, err) < 0
        || load_unsettled(s, err) < 0) {
        bf_store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

int bf_store_open_reader(bf_store **out, const char *path, bf_error *err)
{
    *out = NULL;
    bf_store *s = bf_xcalloc(1, sizeof *s);
    s->path = bf_xstrdup(path);
    int version = 0;
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK
        || read_user_version(s, &version, err) < 0) {
        store__fail(s, err, "cannot open the database to read");
        bf_store_close(s);
        return -1;
    }
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    if (version != bf_schema_n_migrations) {
        bf_error_set(err, path, 0, NULL, "schema version %d, expected %d",
                     version, bf_schema_n_migrations);
        bf_store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

void bf_store_close(bf_store *s)
{
    if (!s)
        return;
    if (s->db) {
        bf_store_flush(s, NULL);
        for (int i = 0; i < ST_COUNT; i++)
            sqlite3_finalize(s->st[i]);
        sqlite3_close(s->db);
    }
    free(s->unsettled.v);
    free(s->reviving.v);
    free(s->revive_roots.v);
    free(s->path);
    free(s->database_id);
    free(s);
}

/* ---- sweeps ------------------------------------------------------------- */

void bf_job_row_from(bf_job_row *row, const bf_sweep_job *job)
{
    row->index = (int64_t)job->index;
    row->config_json = (char *)job->config_json;
    memcpy(row->hash_hex, job->hash_hex, sizeof row->hash_hex);
    row->task = bf_task_name(job->cfg->task);
    row->rope = bf_rope_name(job->cfg->rope);
    snprintf(row->trainer, sizeof row->trainer, "%s", job->cfg->trainer);
    row->depth = job->cfg->depth;
    row->seed = (int64_t)job->cfg->seed;
    row->learnable_heads = bf_job_config_spectral_heads(job->cfg);
    row->stage = job->stage;
    row->source = job->source;
    row->cell = job->cell;
    row->held = job->held;
    row->trial = job->trial;
    row->trial_group = job->trial_group;
    row->prune = job->prune;
    row->select = job->select;
    row->from_stage = job->from_stage;
    row->from_group = job->from_group;
    row->from_fields = job->from_fields;
}

/* ---- search trials (their early stopping: store_prune.c) ---------------- */

static int insert_prune_rule(bf_store *s, int64_t sweep_id,
                             const bf_job_row *row, bf_error *err)
{
    const bf_sweep_prune *p = row->prune;
    json_t *rungs = json_array();
    for (size_t i = 0; i < p->n_rungs; i++)
        json_array_append_new(rungs, json_integer(p->rungs[i]));
    char *text = json_dumps(rungs, JSON_COMPACT);
    json_decref(rungs);
    sqlite3_stmt *st = store__stmt(s, ST_PRUNE_RULE_INSERT);
    sqlite3_bind_int64(st, 1, sweep_id);
    if (row->stage)
        sqlite3_bind_text(st, 2, row->stage, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, p->method == BF_PRUNE_ASHA ? "asha" : "median",
                      -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, p->eval_depth);
    sqlite3_bind_text(st, 5, text, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 6, p->param);
    sqlite3_bind_text(st, 7, bf_trial_metric_name(p->metric), -1,
                      SQLITE_STATIC);
    sqlite3_bind_int(st, 8, p->synchronous);
    free(text);
    return store__exec(s, st, err);
}

static int insert_select_rule(bf_store *s, int64_t sweep_id,
                              const bf_job_row *row, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SELECT_RULE_INSERT);
    sqlite3_bind_int64(st, 1, sweep_id);
    if (row->stage)
        sqlite3_bind_text(st, 2, row->stage, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, row->select->eval_depth);
    sqlite3_bind_int(st, 4, row->select->best);
    sqlite3_bind_text(st, 5, bf_trial_metric_name(row->select->metric), -1,
                      SQLITE_STATIC);
    sqlite3_bind_text(st, 6, row->select->space, -1, SQLITE_STATIC);
    return store__exec(s, st, err);
}

/* What job job_id of row is in its stage's search (its trial, its group,
 * its stage's prune rule and selection, stored with the first of them);
 * nothing for a job without a search. */
static int insert_trial(bf_store *s, int64_t sweep_id, int64_t job_id,
                        const bf_job_row *row, bf_error *err)
{
    if (row->trial == BF_SWEEP_NO_TRIAL)
        return 0;
    if ((row->prune && insert_prune_rule(s, sweep_id, row, err) < 0) ||
        (row->select && insert_select_rule(s, sweep_id, row, err) < 0))
        return -1;
    sqlite3_stmt *st = store__stmt(s, ST_TRIAL_INSERT);
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, sweep_id);
    if (row->stage)
        sqlite3_bind_text(st, 3, row->stage, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (int64_t)row->trial_group);
    sqlite3_bind_int64(st, 5, (int64_t)row->trial);
    return store__exec(s, st, err);
}

/* The selection a job of a `from:` stage takes its values from. */
static int insert_selected_values(bf_store *s, int64_t sweep_id,
                                  int64_t job_id, const bf_job_row *row,
                                  bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_VALUES_INSERT);
    sqlite3_bind_int64(st, 1, job_id);
    sqlite3_bind_int64(st, 2, sweep_id);
    sqlite3_bind_text(st, 3, row->from_stage, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (int64_t)row->from_group);
    sqlite3_bind_text(st, 5, row->from_fields, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, row->held);
    if (store__exec(s, st, err) < 0)
        return -1;
    if (sqlite3_changes(s->db) == 1)
        return 0;
    return bf_error_set(err, NULL, 0, "from", "stage %s has no stored "
                        "selection for job %lld to take values from",
                        row->from_stage, (long long)job_id);
}

/* Inserts row's job; job_ids maps the sweep's job indexes to the job ids
 * stored so far (a job of a later stage names its source's). */
static int insert_job(bf_store *s, int64_t sweep_id, int priority,
                      int64_t now_ms, const bf_job_row *row, int64_t *job_ids,
                      bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_JOB_INSERT);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, row->index);
    sqlite3_bind_text(st, 3, row->config_json, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, row->hash_hex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, row->task, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, row->rope, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 7, row->depth);
    sqlite3_bind_int64(st, 8, row->seed);
    sqlite3_bind_int(st, 9, row->learnable_heads);
    sqlite3_bind_int(st, 10, priority);
    sqlite3_bind_int64(st, 11, now_ms);
    if (row->stage)
        sqlite3_bind_text(st, 12, row->stage, -1, SQLITE_STATIC);
    if (row->source != BF_SWEEP_NO_SOURCE)
        sqlite3_bind_int64(st, 13, job_ids[row->source]);
    sqlite3_bind_int64(st, 14, (int64_t)row->cell);
    const char *hold = row->from_stage ? "values" : row->held ? "seed" : NULL;
    if (hold)   /* jobs.hold (migration 20): why it waits with no source */
        sqlite3_bind_text(st, 15, hold, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 16, row->trainer[0] ? row->trainer
                                              : BF_TRAINER_BUILTIN,
                      -1, SQLITE_STATIC);
    if (store__exec(s, st, err) < 0)
        return -1;
    job_ids[row->index] = sqlite3_last_insert_rowid(s->db);
    if (row->from_stage &&
        insert_selected_values(s, sweep_id, job_ids[row->index], row, err) < 0)
        return -1;
    return insert_trial(s, sweep_id, job_ids[row->index], row, err);
}

typedef struct submit_ctx {
    bf_store *s;
    int64_t sweep_id, now_ms;
    int priority;
    int64_t *job_ids;   /* by job index: where sources are found */
    int db_failed;      /* an insert failed: the database's fault */
} submit_ctx;

static int insert_sweep_job(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    submit_ctx *c = ctx;
    bf_job_row row;
    bf_job_row_from(&row, job);
    if (insert_job(c->s, c->sweep_id, c->priority, c->now_ms, &row,
                   c->job_ids, err) == 0)
        return 0;
    c->db_failed = 1;
    return -1;
}

/* The sweep's analysis block, if the file has one (sweep_analysis). */
static int insert_analysis(bf_store *s, int64_t sweep_id, const bf_analysis *a,
                           bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SWEEP_ANALYSIS_INSERT);
    sqlite3_bind_int64(st, 1, sweep_id);
    if (a->has_primary)
        sqlite3_bind_text(st, 2, bf_analysis_metric_name(a->primary_metric),
                          -1, SQLITE_STATIC);
    if (a->primary_eval_depth)
        sqlite3_bind_int(st, 3, a->primary_eval_depth);
    if (a->baseline) {
        char *baseline = json_dumps(a->baseline, JSON_COMPACT |
                                    JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
        sqlite3_bind_text(st, 4, baseline, -1, SQLITE_TRANSIENT);
        free(baseline);
    }
    sqlite3_bind_double(st, 5, a->equivalence_margin);
    sqlite3_bind_double(st, 6, a->alpha);
    return store__exec(s, st, err);
}

static int insert_sweep(bf_store *s, const bf_sweep *sw, const char *filename,
                        const char *text, size_t len, int64_t now_ms,
                        int64_t *sweep_id, bf_error *err)
{
    sqlite3_stmt *st = store__stmt(s, ST_SWEEP_INSERT);
    sqlite3_bind_text(st, 1, sw->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, filename, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, text, (int)len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, now_ms);
    sqlite3_bind_int(st, 5, sw->max_attempts);
    sqlite3_bind_int(st, 6, sw->priority);
    if (store__exec(s, st, err) < 0)
        return -1;
    *sweep_id = sqlite3_last_insert_rowid(s->db);
    return sw->has_analysis ? insert_analysis(s, *sweep_id, &sw->analysis, err)
                            : 0;
}

int bf_store_strict_refusal(const char *filename, const json_t *warnings,
                            bf_error *err)
{
    size_t n = json_array_size(warnings);
    return bf_error_set(err, filename, 0, NULL, "%zu warning%s, and strict "
                        "submission makes %s errors; the first: %s", n,
                        n == 1 ? "" : "s", n == 1 ? "it" : "them",
                        json_string_value(json_array_get(warnings, 0)));
}

/* The comparisons of sw's stages with adaptive seeds (seed_comparisons;
 * store_seqs.c decides them).  A stage's comparisons are one family: each
 * is decided at alpha / m, m of them (Bonferroni, migration 22). */
static int insert_comparisons(bf_store *s, int64_t sweep_id,
                              const bf_sweep *sw, bf_error *err)
{
    if (!sw->has_analysis || !sw->analysis.baseline)
        return 0;
    /* Written as jobs.config writes its values (job_config.c), so that the
     * patched config compares equal as text. */
    char *baseline = json_dumps(sw->analysis.baseline, JSON_SORT_KEYS |
                                JSON_COMPACT | JSON_REAL_PRECISION(17));
    int rc = 0;
    for (size_t i = 0; i < sw->n_stages && rc == 0; i++) {
        int min, max;
        bf_confseq_rule rule;
        if (!bf_sweep_adaptive_seeds(sw, i, &min, &max, &rule))
            continue;
        sqlite3_stmt *st = store__stmt(s, ST_SEQ_INSERT);
        sqlite3_bind_int64(st, 1, sweep_id);
        const char *stage = bf_sweep_stage_name(sw, i);
        if (stage)
            sqlite3_bind_text(st, 2, stage, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, min);
        sqlite3_bind_int(st, 4, max);
        sqlite3_bind_int(st, 5, sw->analysis.primary_eval_depth);
        sqlite3_bind_text(st, 6, baseline, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 7, sw->analysis.alpha);
        sqlite3_bind_text(st, 8, bf_confseq_rule_name(rule), -1,
                          SQLITE_STATIC);
        rc = store__exec(s, st, err);
    }
    free(baseline);
    return rc;
}

/* The sweep's job count and warnings, once all its jobs are in. */
static int finish_sweep(bf_store *s, int64_t sweep_id, const bf_sweep *sw,
                        bf_error *err)
{
    char *warnings = json_dumps(sw->warnings, JSON_COMPACT);
    sqlite3_stmt *st = store__stmt(s, ST_SWEEP_SET_NJOBS);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)sw->n_jobs);
    sqlite3_bind_text(st, 3, warnings, -1, SQLITE_TRANSIENT);
    free(warnings);
    if (store__exec(s, st, err) < 0)
        return -1;
    return insert_comparisons(s, sweep_id, sw, err);
}

int bf_store_submit_sweep(bf_store *s, const char *filename, const char *text,
                          size_t len, const bf_submit_opts *opts,
                          int64_t now_ms, int64_t *sweep_id, int *n_jobs,
                          json_t **warnings, bf_error *err)
{
    static const bf_submit_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    if (warnings)
        *warnings = NULL;
    if (len > (size_t)BF_SWEEP_MAX_BYTES)
        return bf_error_set(err, filename, 0, NULL,
                            "sweep file is %zu bytes, more than the %d allowed",
                            len, BF_SWEEP_MAX_BYTES);
    bf_sweep *sw = bf_sweep_parse(filename, opts->dir, text, len, err);
    if (!sw)
        return -1;
    submit_ctx c = {.s = s, .now_ms = now_ms, .priority = sw->priority,
                    .job_ids = bf_xcalloc(sw->n_jobs + 1, sizeof *c.job_ids),
                    .db_failed = 1};
    if (store__begin(s, err) < 0)
        goto fail;
    if (insert_sweep(s, sw, filename, text, len, now_ms, &c.sweep_id, err) < 0)
        goto rollback;
    c.db_failed = 0;   /* from here on a job may also be invalid */
    if (bf_sweep_expand(sw, insert_sweep_job, &c, err) < 0)
        goto rollback;
    if (warnings)
        *warnings = json_incref(sw->warnings);
    if (opts->strict && json_array_size(sw->warnings) > 0) {
        bf_store_strict_refusal(filename, sw->warnings, err);
        goto rollback;
    }
    c.db_failed = 1;
    if (finish_sweep(s, c.sweep_id, sw, err) < 0 || store__commit(s, err) < 0)
        goto rollback;
    if (sweep_id)
        *sweep_id = c.sweep_id;
    if (n_jobs)
        *n_jobs = (int)sw->n_jobs;
    free(c.job_ids);
    bf_sweep_free(sw);
    return 0;
rollback:
    store__rollback(s);
    if (warnings && c.db_failed) {
        json_decref(*warnings);
        *warnings = NULL;
    }
fail:
    free(c.job_ids);
    bf_sweep_free(sw);
    return c.db_failed ? BF_STORE_DB_FAILED : BF_STORE_ERR;
}

int store__past(int64_t deadline_us)
{
    return deadline_us && bf_monotonic_us() >= deadline_us;
}

void store__ids_push(store_ids *l, int64_t id)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = bf_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = id;
}

int store__ids_collect(bf_store *s, sqlite3_stmt *st, store_ids *l,
                       const char *what, bf_error *err)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (sqlite3_column_type(st, 0) != SQLITE_NULL)
            store__ids_push(l, sqlite3_column_int64(st, 0));
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : store__fail(s, err, what);
}

int store__exec_slices(bf_store *s, sqlite3_stmt *st, int64_t deadline_us,
                       bf_error *err)
{
    int more;
    do {
        if (store__exec(s, st, err) < 0)   /* resets st, keeps its bindings */
            return -1;
        more = sqlite3_changes(s->db) == STORE_SLICE_ROWS;
    } while (more && !store__past(deadline_us));
    return more;
}

int bf_store_stage_jobs(bf_store *s, bf_stage *stage, const bf_job_row *rows,
                        size_t n, int last, int64_t deadline_us,
                        size_t *n_done, bf_error *err)
{
    assert(n > 0 || last);
    *n_done = 0;
    if (!stage->job_ids)
        stage->job_ids = bf_xcalloc(stage->sweep->n_jobs + 1,
                                    sizeof *stage->job_ids);
    if (store__begin(s, err) < 0)
        return BF_STORE_DB_FAILED;
    int64_t sweep_id = stage->sweep_id;
    int rc = 0;
    if (!sweep_id)
        rc = insert_sweep(s, stage->sweep, stage->filename, stage->text,
                          stage->len, stage->now_ms, &sweep_id, err);
    size_t i = 0;
    while (rc == 0 && i < n && (i == 0 || !store__past(deadline_us)))
        rc = insert_job(s, sweep_id, stage->sweep->priority, stage->now_ms,
                        &rows[i++], stage->job_ids, err);
    if (rc == 0 && last && i == n)
        rc = finish_sweep(s, sweep_id, stage->sweep, err);
    if (rc == 0 && store__commit(s, err) == 0) {
        stage->sweep_id = sweep_id;
        stage->n_stored += i;
        *n_done = i;
        return BF_STORE_OK;
    }
    store__rollback(s);
    return BF_STORE_DB_FAILED;
}

void bf_stage_clear(bf_stage *stage)
{
    free(stage->job_ids);
    stage->job_ids = NULL;
}

int bf_store_discard_staged(bf_store *s, int64_t sweep_id, int64_t deadline_us,
                            bf_error *err)
{
    if (store__begin(s, err) < 0)
        return -1;
    sqlite3_stmt *st = store__stmt(s, ST_STAGED_DELETE_JOBS);
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int(st, 2, STORE_SLICE_ROWS);
    int more = store__exec_slices(s, st, deadline_us, err);
    int rc = more < 0 ? -1 : 0;
    if (rc == 0 && !more) {
        st = store__stmt(s, ST_STAGED_DELETE_SWEEP);
        sqlite3_bind_int64(st, 1, sweep_id);
        rc = store__exec(s, st, err);
    }
    if (rc == 0 && store__commit(s, err) == 0)
        return more;
    store__rollback(s);
    return -1;
}

/* ---- workers ------------------------------------------------------------ */

int bf_store_worker_seen(bf_store *s, const char *name, const char *host,
                         int ranks, int connected, int64_t now_ms,
                         bf_error *err)
{
    if (store__begin(s, err) < 0)
        return -1;
    sqlite3_stmt *st = store__stmt(s, ST_WORKER_SEEN);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, host ? host : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, ranks);
    sqlite3_bind_int(st, 4, connected ? 1 : 0);
    sqlite3_bind_int64(st, 5, now_ms);
    if (store__exec(s, st, err) < 0 || store__commit(s, err) < 0) {
        store__rollback(s);
        return -1;
    }
    return 0;
}

/* ---- queries ------------------------------------------------------------ */

/* JSON has no infinities: they go out as the worker sends them. */
static json_t *real_to_json(double x)
{
    return isinf(x) ? json_string(x > 0 ? "inf" : "-inf") : json_real(x);
}

/* The current row of st as one JSON object keyed by column name.  A
 * column named "config" holds the job's canonical JSON and is returned as
 * an object. */
static json_t *row_to_json(sqlite3_stmt *st)
{
    json_t *row = json_object();
    for (int i = 0; i < sqlite3_column_count(st); i++) {
        const char *name = sqlite3_column_name(st, i);
        const char *text = (const char *)sqlite3_column_text(st, i);
        json_t *v;
        switch (sqlite3_column_type(st, i)) {
        case SQLITE_INTEGER: v = json_integer(sqlite3_column_int64(st, i)); break;
        case SQLITE_FLOAT:   v = real_to_json(sqlite3_column_double(st, i)); break;
        case SQLITE_NULL:    v = json_null(); break;
        default:
            v = strcmp(name, "config") == 0 ? json_loads(text, 0, NULL) : NULL;
            if (!v)
                v = json_string(text);
        }
        json_object_set_new(row, name, v ? v : json_null());
    }
    return row;
}

/* Every row of st as an array of row_to_json objects.  Finalizes st. */
static json_t *rows_to_json(bf_store *s, sqlite3_stmt *st, bf_error *err)
{
    json_t *rows = json_array();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        json_array_append_new(rows, row_to_json(st));
    if (rc != SQLITE_DONE) {
        json_decref(rows);
        store__fail(s, err, sqlite3_sql(st));
        rows = NULL;
    }
    sqlite3_finalize(st);
    return rows;
}

/* Client queries are rare, so they are prepared per call rather than kept. */
static sqlite3_stmt *prepare_query(bf_store *s, const char *sql, bf_error *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        store__fail(s, err, sql);
        return NULL;
    }
    return st;
}

/* Prepared per call like every query here: a reader (bf_store_open_reader)
 * keeps no statements. */
static int sweep_exists(bf_store *s, int64_t sweep_id, bf_error *err)
{
    sqlite3_stmt *st = prepare_query(s, statement_sql[ST_SWEEP_STATUS], err);
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, sweep_id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc != SQLITE_DONE)
        return store__fail(s, err, "looking up the sweep");
    bf_error_set(err, NULL, 0, "sweep", "no sweep with id %lld", (long long)sweep_id);
    return 0;
}

json_t *bf_store_status(bf_store *s, int64_t sweep_id, bf_error *err)
{
    if (sweep_id > 0 && sweep_exists(s, sweep_id, err) <= 0)
        return NULL;
    /* One sweep: an equality the view's grouping can use, so a status poll
     * counts that sweep's jobs only, not every job. */
    sqlite3_stmt *st = prepare_query(s, sweep_id > 0
        ? "SELECT p.*, s.filename, s.priority, s.max_attempts, s.submitted_ms"
          "  FROM sweep_progress p JOIN sweeps s ON s.sweep_id = p.sweep_id"
          " WHERE p.sweep_id = ?1"
        : "SELECT p.*, s.filename, s.priority, s.max_attempts, s.submitted_ms"
          "  FROM sweep_progress p JOIN sweeps s ON s.sweep_id = p.sweep_id"
          " WHERE s.n_jobs > 0 ORDER BY p.sweep_id", err);
    if (!st)
        return NULL;
    sqlite3_bind_int64(st, 1, sweep_id);
    return rows_to_json(s, st, err);
}

#define JOB_COLUMNS                                                         \
    "j.job_id, j.sweep_id, j.idx, j.stage, j.task, j.rope, j.depth, j.seed," \
    " j.status, j.priority, j.attempts, j.cancel_requested,"                \
    " j.checkpoint_path, j.checkpoint_step, j.error, j.created_ms,"         \
    " j.started_ms, j.finished_ms, j.source_job_id, j.config"

/* ---- pages of a result view --------------------------------------------- */

void bf_store_page_clear(bf_store_page *page)
{
    free(page->rows);
    json_decref(page->next);
    *page = (bf_store_page){ 0 };
}

/* A page being filled: rows encoded as they are read, so that it holds
 * its text and one row, never the rows as JSON objects. */
typedef struct page_fill {
    bf_store_page *page;
    size_t cap;
    int max_rows;
    size_t max_bytes;
    json_t *last;          /* the newest row: the cursor is its key */
    int full;
} page_fill;

static void page_append(page_fill *f, const char *text, size_t n)
{
    bf_store_page *p = f->page;
    if (p->len + n + 1 > f->cap) {
        f->cap = 2 * (p->len + n + 1);
        p->rows = bf_xrealloc(p->rows, f->cap);
    }
    memcpy(p->rows + p->len, text, n);
    p->len += n;
    p->rows[p->len] = '\0';
}

static int append_text(const char *text, size_t n, void *f)
{
    page_append(f, text, n);
    return 0;
}

/* The row is encoded straight onto the page's text, not into a string of
 * its own first: a page is the hot path of a million-row read. */
static int page_add_row(page_fill *f, sqlite3_stmt *st)
{
    json_t *row = row_to_json(st);
    if (f->page->n_rows++)
        page_append(f, ",", 1);
    if (json_dump_callback(row, append_text, f, JSON_COMPACT)) {
        json_decref(row);
        return -1;
    }
    json_decref(f->last);
    f->last = row;
    f->full = f->page->n_rows >= f->max_rows
              || f->page->len >= f->max_bytes;
    return 0;
}

static void bind_json(sqlite3_stmt *st, int i, const json_t *v)
{
    if (json_is_integer(v))
        sqlite3_bind_int64(st, i, json_integer_value(v));
    else if (json_is_real(v))
        sqlite3_bind_double(st, i, json_real_value(v));
    else if (json_is_string(v))
        sqlite3_bind_text(st, i, json_string_value(v), -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Reads one part of a page (result_views.h) into f until it is full. */
static int page_read(bf_store *s, const char *view, bf_page_part part,
                     int64_t sweep_id, const json_t *after, page_fill *f,
                     bf_error *err)
{
    char sql[1024];
    if (bf_result_view_sql(view, part, sql, sizeof sql))
        return store__fail(s, err, "building a page's statement");
    sqlite3_stmt *st = prepare_query(s, sql, err);
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, sweep_id);
    sqlite3_bind_int(st, 2, f->max_rows - f->page->n_rows);
    for (int i = 3; i <= sqlite3_bind_parameter_count(st); i++)
        bind_json(st, i, json_array_get(after, (size_t)i - 3));
    int rc;
    while (!f->full && (rc = sqlite3_step(st)) == SQLITE_ROW)
        if (page_add_row(f, st)) {
            sqlite3_finalize(st);
            return store__fail(s, err, "encoding a row");
        }
    if (!f->full && rc != SQLITE_DONE) {
        store__fail(s, err, sql);
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}

/* Whether after is a cursor of a view with this key: its values, scalars,
 * a job id first for a per-job view. */
static int valid_cursor(const json_t *after, int n_key, int per_job)
{
    if (!json_is_array(after) || json_array_size(after) != (size_t)n_key)
        return 0;
    size_t i;
    const json_t *v;
    json_array_foreach(after, i, v)
        if (!(json_is_number(v) || json_is_string(v) || json_is_null(v))
            || (per_job && i == 0 && !json_is_integer(v)))
            return 0;
    return 1;
}

int bf_store_view_page(bf_store *s, const char *view, int64_t sweep_id,
                       const json_t *after, int max_rows, size_t max_bytes,
                       bf_store_page *page, bf_error *err)
{
    assert(max_rows >= 1);
    *page = (bf_store_page){ 0 };
    const char *key[BF_RESULT_VIEW_MAX_KEY];
    int per_job;
    int n_key = bf_result_view_key(view, key, &per_job);
    if (n_key < 0)
        return bf_error_set(err, NULL, 0, "view", "unknown view '%s' "
                            "(allowed: %s)", view, bf_result_view_names());
    if (after && !valid_cursor(after, n_key, per_job))
        return bf_error_set(err, NULL, 0, "after", "not a cursor of view %s:"
                            " give the `next` of the page before (an array "
                            "of %d values)", view, n_key);
    int found = sweep_exists(s, sweep_id, err);
    if (found <= 0)
        return -1;
    page_fill f = { .page = page, .max_rows = max_rows,
                    .max_bytes = max_bytes };
    page_append(&f, "[", 1);
    int rc = 0;
    /* A per-job view's page goes on with the rest of the cursor's job,
     * then the jobs after it; another view's from the cursor on. */
    if (after && per_job && n_key > 1)
        rc = page_read(s, view, BF_PAGE_REST_OF_JOB, sweep_id, after, &f, err);
    if (rc == 0 && !f.full)
        rc = page_read(s, view, !after ? BF_PAGE_FROM_START
                                : per_job ? BF_PAGE_AFTER_JOB : BF_PAGE_AFTER,
                       sweep_id, after, &f, err);
    page_append(&f, "]", 1);
    if (rc == 0 && f.full) {
        page->next = json_array();
        for (int i = 0; i < n_key; i++)
            json_array_append(page->next, json_object_get(f.last, key[i]));
    }
    json_decref(f.last);
    if (rc)
        bf_store_page_clear(page);
    return rc;
}

/* Whether any job has an id past `id` (*rc: SQLite's code when the
 * lookup fails, else left alone). */
static int job_after(bf_store *s, int64_t id, int *rc)
{
    sqlite3_stmt *st = prepare_query(s, "SELECT 1 FROM jobs WHERE job_id > ?1"
                                        " LIMIT 1", NULL);
    if (!st)
        return *rc = SQLITE_NOMEM, 0;
    sqlite3_bind_int64(st, 1, id);
    int step = sqlite3_step(st);
    sqlite3_finalize(st);
    if (step != SQLITE_ROW && step != SQLITE_DONE)
        *rc = step;
    return step == SQLITE_ROW;
}

int bf_store_jobs(bf_store *s, int64_t sweep_id, const char *status,
                  int64_t after, int limit, size_t max_bytes,
                  bf_store_page *page, bf_error *err)
{
    assert(limit >= 1);
    *page = (bf_store_page){ 0 };
    if (status && bf_job_status_parse(status) < 0)
        return bf_error_set(err, NULL, 0, "status",
                            "unknown job status '%s' (allowed: %s)", status,
                            bf_job_status_list());
    if (sweep_id > 0 && sweep_exists(s, sweep_id, err) <= 0)
        return -1;
    /* job_id order from `after` on.  With a sweep and a status, the
     * (sweep_id, status) index gives the rows in job_id order; without a
     * status the scan walks job ids from `after` (+sweep_id keeps the
     * planner off that index, which would sort the whole sweep).  Jobs of
     * a sweep still being stored (n_jobs 0) are not there yet. */
    char sql[768];
    snprintf(sql, sizeof sql, "SELECT " JOB_COLUMNS " FROM jobs j"
             " WHERE j.job_id > ?3 AND j.job_id <= ?4%s%s"
             "   AND (SELECT n_jobs FROM sweeps WHERE sweep_id = j.sweep_id) > 0"
             " ORDER BY j.job_id",
             sweep_id <= 0 ? "" : status ? " AND j.sweep_id = ?1"
                                         : " AND +j.sweep_id = ?1",
             status ? " AND j.status = ?2" : "");
    sqlite3_stmt *st = prepare_query(s, sql, err);
    if (!st)
        return -1;
    sqlite3_bind_int64(st, 1, sweep_id);
    if (status)
        sqlite3_bind_text(st, 2, status, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, after);
    int64_t window_end = after + BF_STORE_JOBS_WINDOW;
    sqlite3_bind_int64(st, 4, window_end);
    page_fill f = { .page = page, .max_rows = limit, .max_bytes = max_bytes };
    page_append(&f, "[", 1);
    int rc = SQLITE_DONE;
    while (!f.full && (rc = sqlite3_step(st)) == SQLITE_ROW)
        if (page_add_row(&f, st)) {
            rc = SQLITE_NOMEM;
            break;
        }
    /* A full page names the next only when a row follows, so that the
     * walk ends on the page with the last row. */
    if (f.full)
        rc = sqlite3_step(st);
    page_append(&f, "]", 1);
    if (rc == SQLITE_ROW)
        page->next = json_integer(json_integer_value(
            json_object_get(f.last, "job_id")));
    else if (rc == SQLITE_DONE && job_after(s, window_end, &rc))
        page->next = json_integer(window_end);
    json_decref(f.last);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        store__fail(s, err, sql);
        bf_store_page_clear(page);
    }
    sqlite3_finalize(st);
    return page->rows ? 0 : -1;
}

json_t *bf_store_workers(bf_store *s, bf_error *err)
{
    sqlite3_stmt *st = prepare_query(s,
        "SELECT name, host, ranks, connected, first_seen_ms, last_seen_ms,"
        "       (SELECT count(*) FROM attempts a WHERE a.worker = w.name"
        "         AND a.outcome = 'running') AS running"
        "  FROM workers w ORDER BY name", err);
    return st ? rows_to_json(s, st, err) : NULL;
}
