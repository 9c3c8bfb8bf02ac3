/* submit: a sweep expanded on its own thread, stored by the loop a chunk
 * per pass (submit.h). */
#include "submit.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "chore.h"
#include "clock.h"
#include "code_corpus.h"
#include "sweep.h"

/* Chunks the expanding thread may queue before it waits. */
#define QUEUED_MAX 2

typedef struct chunk {
    bf_job_row rows[BF_SUBMIT_CHUNK];
    size_t n;
    int final;                 /* the sweep's last chunk */
} chunk;

struct bf_submission {
    bf_submits *m;
    bf_submission *next;
    char *filename, *text, *dir;
    size_t len;
    int strict;
    int64_t now_ms;
    bf_submit_done_fn done;
    void *ctx;
    /* EXPANDING: the thread runs; DISCARDING: it ended, the failed
     * sweep's staged rows go a pass at a time.  wake is open in both. */
    enum { WAITING, EXPANDING, DISCARDING } state;
    uv_async_t wake;           /* a chunk is queued, the thread ended, or
                                  the next discarding pass is due */
    uv_thread_t thread;
    int has_thread;
    /* Shared with the thread, under lock. */
    uv_mutex_t lock;
    uv_cond_t room;            /* a queued chunk was taken */
    chunk *queued[QUEUED_MAX];
    int n_queued;
    int stop;                  /* the loop wants no more chunks */
    int thread_done;
    bf_sweep *sweep;           /* set by the thread once validated */
    bf_error thread_err;       /* why parsing or validation failed */
    json_t *refused_warnings;  /* those of a strict refusal */
    /* The thread's own. */
    chunk *filling;
    /* The loop's own. */
    chunk *storing;            /* taken from queued, stored in part */
    size_t n_stored_of;        /* how much of it */
    bf_stage stage;
    int failed_rc;             /* BF_STORE_ERR or _DB_FAILED once failed */
    bf_error err;
    int replied;
};

/* ---- on the expanding thread ---------------------------------------------- */

static int stopped(bf_submission *u)
{
    uv_mutex_lock(&u->lock);
    int stop = u->stop;
    uv_mutex_unlock(&u->lock);
    return stop;
}

/* The first pass: every job is checked, nothing kept. */
static int validate_only(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)job;
    if (!stopped(ctx))
        return 0;
    return bf_error_set(err, NULL, 0, NULL, "the daemon is stopping");
}

/* Queues the filled chunk, waiting for room; -1 when the loop stopped. */
static int push_chunk(bf_submission *u, int final)
{
    chunk *c = u->filling;
    u->filling = NULL;
    c->final = final;
    uv_mutex_lock(&u->lock);
    while (u->n_queued == QUEUED_MAX && !u->stop)
        uv_cond_wait(&u->room, &u->lock);
    int stop = u->stop;
    if (!stop)
        u->queued[u->n_queued++] = c;
    uv_mutex_unlock(&u->lock);
    if (stop) {
        for (size_t i = 0; i < c->n; i++)
            free(c->rows[i].config_json);
        free(c);
        return -1;
    }
    uv_async_send(&u->wake);
    return 0;
}

static int add_row(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    bf_submission *u = ctx;
    if (!u->filling)
        u->filling = bf_xcalloc(1, sizeof *u->filling);
    bf_job_row *row = &u->filling->rows[u->filling->n++];
    bf_job_row_from(row, job);
    row->config_json = bf_xstrdup(job->config_json);
    if (u->filling->n < BF_SUBMIT_CHUNK || push_chunk(u, 0) == 0)
        return 0;
    return bf_error_set(err, NULL, 0, NULL, "the daemon is stopping");
}

/* The file parsed and every job checked (a stop ends it early); NULL with
 * err (and *refused: the warnings of a strict refusal) when it is not to
 * be stored. */
static bf_sweep *checked_sweep(bf_submission *u, json_t **refused,
                               bf_error *err)
{
    if (u->len > (size_t)BF_SWEEP_MAX_BYTES) {
        bf_error_set(err, u->filename, 0, NULL, "sweep file is %zu bytes, "
                     "more than the %d allowed", u->len, BF_SWEEP_MAX_BYTES);
        return NULL;
    }
    bf_sweep *sw = bf_sweep_parse(u->filename, u->dir, u->text, u->len, err);
    if (sw && bf_sweep_expand(sw, validate_only, u, err) < 0) {
        bf_sweep_free(sw);
        return NULL;
    }
    if (sw && u->strict && json_array_size(sw->warnings) > 0) {
        bf_store_strict_refusal(u->filename, sw->warnings, err);
        *refused = json_incref(sw->warnings);
        bf_sweep_free(sw);
        return NULL;
    }
    return sw;
}

static void expand(void *arg)
{
    bf_submission *u = arg;
    bf_error err;
    bf_error_clear(&err);
    json_t *refused = NULL;
    bf_sweep *checked = checked_sweep(u, &refused, &err);
    /* An expansion fills the sweep's source maps: the pass that stores
     * expands a second parse. */
    bf_sweep *sw = checked ? bf_sweep_parse(u->filename, u->dir, u->text,
                                            u->len, &err) : NULL;
    bf_sweep_free(checked);
    if (!sw)   /* refused: keeps no corpus its jobs named */
        bf_code_corpus_drop_idle();
    int stored_all = 0;
    if (sw) {
        uv_mutex_lock(&u->lock);
        u->sweep = sw;
        uv_mutex_unlock(&u->lock);
        /* Checked: only a stop can end this pass early. */
        if (bf_sweep_expand(sw, add_row, u, &err) == 0) {
            if (!u->filling)
                u->filling = bf_xcalloc(1, sizeof *u->filling);
            stored_all = push_chunk(u, 1) == 0;
        }
    }
    uv_mutex_lock(&u->lock);
    if (!stored_all) {
        u->thread_err = err;
        u->refused_warnings = refused;
    }
    u->thread_done = 1;
    uv_mutex_unlock(&u->lock);
    uv_async_send(&u->wake);
}

/* ---- on the loop ----------------------------------------------------------- */

static void start_next(bf_submits *m);

static void free_chunk(chunk *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->rows[i].config_json);
    free(c);
}

static void free_submission(bf_submission *u)
{
    bf_stage_clear(&u->stage);
    bf_sweep_free(u->sweep);
    json_decref(u->refused_warnings);
    free(u->filename);
    free(u->text);
    free(u->dir);
    free(u);
}

static void on_wake_closed(uv_handle_t *h)
{
    bf_submission *u = h->data;
    uv_mutex_destroy(&u->lock);
    uv_cond_destroy(&u->room);
    free_submission(u);
}

/* Tells the submitter how it ended, once. */
static void reply(bf_submission *u, int rc)
{
    if (u->replied)
        return;
    u->replied = 1;
    const json_t *warnings = rc == BF_STORE_OK ? u->sweep->warnings
                                               : u->refused_warnings;
    u->done(u->ctx, rc, u->stage.sweep_id, u->stage.n_stored, warnings,
            rc == BF_STORE_OK ? NULL : &u->err);
}

/* Takes u out of m's list. */
static void unlink_submission(bf_submits *m, bf_submission *u)
{
    bf_submission **p = &m->head, *prev = NULL;
    while (*p != u)
        prev = *p, p = &(*p)->next;
    *p = u->next;
    if (m->tail == u)
        m->tail = prev;
}

/* u, started, leaves the list (freed once its handle closed); a waiting
 * one starts in its place. */
static void retire(bf_submission *u)
{
    bf_submits *m = u->m;
    unlink_submission(m, u);
    m->n_active--;
    uv_close((uv_handle_t *)&u->wake, on_wake_closed);
    start_next(m);
}

/* The sweep cannot be stored: the thread is told to queue no more. */
static void fail(bf_submission *u, int rc, const bf_error *err)
{
    if (u->failed_rc)
        return;
    u->failed_rc = rc;
    u->err = *err;
    uv_mutex_lock(&u->lock);
    u->stop = 1;
    uv_cond_signal(&u->room);
    uv_mutex_unlock(&u->lock);
}

/* The loop's time for one pass of storing: one slice, shared by the
 * submissions being stored. */
static int64_t pass_deadline(const bf_submits *m)
{
    return bf_monotonic_us() + BF_CHORE_SLICE_US / (m->n_active ? m->n_active
                                                                 : 1);
}

/* Stores what of u->storing fits in one pass (one transaction), or drops
 * it once anything failed; frees it when it is all stored. */
static void store_slice(bf_submission *u)
{
    chunk *c = u->storing;
    size_t done = 0;
    if (!u->failed_rc) {
        u->stage.sweep = u->sweep;
        bf_error err;
        bf_error_clear(&err);
        if (bf_store_stage_jobs(u->m->store, &u->stage,
                                c->rows + u->n_stored_of,
                                c->n - u->n_stored_of, c->final,
                                pass_deadline(u->m), &done, &err)
            != BF_STORE_OK)
            fail(u, BF_STORE_DB_FAILED, &err);
    }
    u->n_stored_of += done;
    if (u->failed_rc || u->n_stored_of == c->n) {
        if (!u->failed_rc && c->final)
            reply(u, BF_STORE_OK);
        free_chunk(c);
        u->storing = NULL;
        u->n_stored_of = 0;
    }
}

/* The oldest queued chunk, or NULL; with *thread_done. */
static chunk *take_chunk(bf_submission *u, int *thread_done)
{
    uv_mutex_lock(&u->lock);
    chunk *c = NULL;
    if (u->n_queued > 0) {
        c = u->queued[0];
        u->n_queued--;
        memmove(u->queued, u->queued + 1,
                (size_t)u->n_queued * sizeof u->queued[0]);
        uv_cond_signal(&u->room);
    }
    *thread_done = u->thread_done;
    uv_mutex_unlock(&u->lock);
    return c;
}

/* The thread has ended: a refused sweep was never staged; a failed one is
 * discarded. */
static void expanded(bf_submission *u)
{
    if (u->has_thread)
        uv_thread_join(&u->thread);
    if (!u->replied)   /* refused or stopped before its last chunk */
        fail(u, BF_STORE_ERR, &u->thread_err);
    reply(u, u->failed_rc);
    if (!u->failed_rc || !u->stage.sweep_id || u->m->stopping) {
        /* Stored; nothing staged; or left for the next start. */
        retire(u);
        return;
    }
    u->state = DISCARDING;
    uv_async_send(&u->wake);
}

static void discard_step(bf_submission *u)
{
    bf_error err;
    if (!u->m->stopping
        && bf_store_discard_staged(u->m->store, u->stage.sweep_id,
                                   pass_deadline(u->m), &err) == 1)
        uv_async_send(&u->wake);
    else
        retire(u);
}

/* One pass's storing, or one discarding step, per pass of the loop. */
static void on_wake(uv_async_t *h)
{
    bf_submission *u = h->data;
    if (u->state == DISCARDING) {
        discard_step(u);
        return;
    }
    int thread_done = 0;
    if (!u->storing)
        u->storing = take_chunk(u, &thread_done);
    if (u->storing) {
        store_slice(u);
        uv_async_send(&u->wake);   /* look again next pass */
    } else if (thread_done) {
        expanded(u);
    }
}

static void start(bf_submission *u)
{
    bf_submits *m = u->m;
    m->n_active++;
    u->state = EXPANDING;
    uv_mutex_init(&u->lock);
    uv_cond_init(&u->room);
    uv_async_init(m->loop, &u->wake, on_wake);
    u->wake.data = u;
    u->has_thread = uv_thread_create(&u->thread, expand, u) == 0;
    if (!u->has_thread) {
        bf_error err;
        bf_error_set(&err, NULL, 0, NULL, "cannot start a thread to expand "
                     "the sweep");
        fail(u, BF_STORE_DB_FAILED, &err);
        u->thread_done = 1;        /* as if it had run: ends next pass */
        uv_async_send(&u->wake);
    }
}

/* Starts waiting submissions, oldest first, while fewer than
 * BF_SUBMITS_ACTIVE run. */
static void start_next(bf_submits *m)
{
    for (bf_submission *u = m->head;
         u && m->n_active < BF_SUBMITS_ACTIVE && !m->stopping; u = u->next)
        if (u->state == WAITING)
            start(u);
}

void bf_submits_init(bf_submits *m, uv_loop_t *loop, bf_store *store)
{
    memset(m, 0, sizeof *m);
    m->loop = loop;
    m->store = store;
}

bf_submission *bf_submits_start(bf_submits *m, const char *filename,
                                const char *text, size_t len,
                                const bf_submit_opts *opts, int64_t now_ms,
                                bf_submit_done_fn done, void *ctx)
{
    bf_submission *u = bf_xcalloc(1, sizeof *u);
    u->m = m;
    u->filename = bf_xstrdup(filename);
    u->dir = opts && opts->dir ? bf_xstrdup(opts->dir) : NULL;
    u->strict = opts && opts->strict;
    u->text = bf_xmalloc(len + 1);
    memcpy(u->text, text, len);
    u->text[len] = '\0';
    u->len = len;
    u->now_ms = now_ms;
    u->done = done;
    u->ctx = ctx;
    u->stage.filename = u->filename;
    u->stage.text = u->text;
    u->stage.len = len;
    u->stage.now_ms = now_ms;
    if (m->tail)
        m->tail->next = u;
    else
        m->head = u;
    m->tail = u;
    start_next(m);
    return u;
}

/* u ends with rc and err: at once if it never started (nothing to undo);
 * else its thread stops at its next job or chunk and what it staged is
 * discarded. */
static void end_submission(bf_submits *m, bf_submission *u, int rc,
                           const bf_error *err)
{
    if (u->state != WAITING) {
        fail(u, rc, err);
        return;
    }
    unlink_submission(m, u);
    u->err = *err;
    reply(u, rc);
    free_submission(u);
}

void bf_submits_cancel(bf_submits *m, bf_submission *u, const char *why)
{
    bf_error err;
    bf_error_set(&err, NULL, 0, NULL, "%s", why);
    end_submission(m, u, BF_STORE_ERR, &err);
}

void bf_submits_stop(bf_submits *m)
{
    m->stopping = 1;
    bf_error err;
    bf_error_set(&err, NULL, 0, NULL, "the daemon is stopping");
    for (bf_submission *u = m->head, *next; u; u = next) {
        next = u->next;
        end_submission(m, u, BF_STORE_DB_FAILED, &err);
    }
}
