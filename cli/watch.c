/* watch: a sweep followed through the daemon until it ends.  See watch.h.
 *
 * Each poll asks for the sweep's counts (`status`), its running jobs with
 * their newest step (`rows` of the live_jobs view) and, less often, the
 * workers; results/progress.c turns the running jobs into rates and ETAs.
 * A sweep with adaptive seeds shows each comparison's state too (the
 * adaptive_seeds view, results/adaptive.c). */
#include "watch.h"

#include "adaptive.h"
#include "alloc.h"
#include "clock.h"
#include "format.h"
#include "progress.h"
#include "source.h"
#include "sweep_view.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define BF_WATCH_POLL_MS 500
#define BF_WATCH_WORKERS_EVERY_MS 2000
/* A worker group takes a moment to connect after it starts: "0 workers"
 * is said only once none has been seen for this long. */
#define BF_WATCH_NO_WORKER_GRACE_MS 3000
#define BF_WATCH_BAR 30

typedef struct lines {
    char **line;
    int n, cap;
} lines;

typedef struct watch {
    bf_client *cl;
    bf_source src;              /* the daemon of cl: result views' rows */
    int64_t sweep;
    const bf_watch_opts *o;
    int tty;
    json_t *fields;             /* the sweep file's swept fields */
    bf_progress progress;
    json_t *status;             /* the sweep_progress row */
    json_t *live;               /* live_jobs rows, with rate and eta_s */
    json_t *adaptive;           /* adaptive_seeds rows: its comparisons */
    int workers;                /* connected workers; -1 before known */
    int64_t workers_ms;         /* when they were last counted */
    int64_t worker_seen_ms;     /* when one was last connected (or start) */
    int drawn;                  /* terminal: lines the last frame drew */
    char *printed_status;       /* plain: the counts last printed */
    char *printed_adaptive;     /* plain: the comparisons last printed */
    json_t *printed_tenth;      /* plain: job id -> tenth of steps printed */
    int hint_printed;           /* plain: "0 workers" said */
    json_t *running;            /* plain: job id -> its last live row */
    json_t *ended_counts;       /* plain: the counts when last printed */
    double eta;                 /* the sweep's, in seconds; < 0 unknown */
    int64_t start_ms;
} watch;

/* ---- lines ---------------------------------------------------------------- */

static void add_line(lines *ls, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add_line(lines *ls, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* Config values come from a sweep file: no control character of
     * theirs reaches the terminal. */
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    if (ls->n == ls->cap) {
        ls->cap = ls->cap ? 2 * ls->cap : 16;
        ls->line = bf_xrealloc(ls->line, (size_t)ls->cap * sizeof *ls->line);
    }
    ls->line[ls->n++] = bf_xstrdup(buf);
}

static void free_lines(lines *ls)
{
    for (int i = 0; i < ls->n; i++)
        free(ls->line[i]);
    free(ls->line);
}

/* The bytes of s that fit in cols - 1 terminal columns (one column spare:
 * a character in the last column makes some terminals wrap), counting a
 * UTF-8 sequence as one column and never cutting one apart. */
static size_t fitting(const char *s, int cols)
{
    int used = 0;
    size_t i = 0;
    for (; s[i]; i++) {
        if (((unsigned char)s[i] & 0xC0) == 0x80)
            continue;
        if (++used > cols - 1)
            break;
    }
    return i;
}

/* ---- what is shown -------------------------------------------------------- */

#define COUNT(row, k) ((long long)json_integer_value(json_object_get(row, k)))

static void format_eta(double s, char *buf, size_t cap)
{
    if (s >= 0)
        bf_format_duration(s, buf, cap);
    else
        snprintf(buf, cap, "?");
}

static void sweep_line(watch *w, lines *ls)
{
    const json_t *row = w->status;
    long long total = COUNT(row, "total");
    long long ended = COUNT(row, "succeeded") + COUNT(row, "failed")
                      + COUNT(row, "cancelled") + COUNT(row, "pruned");
    char eta[32];
    format_eta(w->eta, eta, sizeof eta);
    if (!w->tty) {
        add_line(ls, "sweep %lld: %lld/%lld ended (waiting %lld, queued %lld, "
                 "running %lld, succeeded %lld, failed %lld, cancelled %lld, "
                 "pruned %lld), ETA %s", (long long)w->sweep, ended, total,
                 COUNT(row, "waiting"), COUNT(row, "queued"),
                 COUNT(row, "running"), COUNT(row, "succeeded"),
                 COUNT(row, "failed"), COUNT(row, "cancelled"),
                 COUNT(row, "pruned"), eta);
        return;
    }
    char bar[BF_WATCH_BAR + 1];
    int filled = total > 0 ? (int)(BF_WATCH_BAR * ended / total) : 0;
    for (int i = 0; i < BF_WATCH_BAR; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[BF_WATCH_BAR] = '\0';
    /* "waiting N" only in a sweep with stages still to start, "pruned N"
     * only in one whose search prunes */
    char waiting[32] = "", pruned[32] = "";
    if (COUNT(row, "waiting") > 0)
        snprintf(waiting, sizeof waiting, "waiting %lld  ",
                 COUNT(row, "waiting"));
    if (COUNT(row, "pruned") > 0)
        snprintf(pruned, sizeof pruned, "pruned %lld  ", COUNT(row, "pruned"));
    add_line(ls, "sweep %lld [%s] %lld/%lld  running %lld  queued %lld  "
             "%sfailed %lld  %sETA %s", (long long)w->sweep, bar, ended, total,
             COUNT(row, "running"), COUNT(row, "queued"), waiting,
             COUNT(row, "failed"), pruned, eta);
}

static void job_line(watch *w, lines *ls, const json_t *row)
{
    char *label = bf_sweep_view_fields_label(w->fields, json_object_get(row,
                                                                   "config"));
    char loss[32], eta[32];
    const json_t *l = json_object_get(row, "loss");
    if (json_is_number(l))
        snprintf(loss, sizeof loss, "%.4g", json_number_value(l));
    else
        snprintf(loss, sizeof loss, "%s", json_is_string(l)
                                          ? json_string_value(l) : "-");
    format_eta(bf_progress_number(row, "eta_s", -1), eta, sizeof eta);
    add_line(ls, "%sjob %lld %s%sstep %lld/%lld  loss %s  ETA %s",
             w->tty ? "  " : "", COUNT(row, "job_id"), label,
             *label ? "  " : "", (long long)bf_progress_number(row, "step", 0),
             (long long)bf_progress_number(row, "steps", 0), loss, eta);
    free(label);
}

/* One line per comparison of adaptive seeds; into *text too (may be
 * NULL), all of them, to tell when they change. */
static void adaptive_lines(watch *w, lines *ls, char **text)
{
    size_t i, len = 0;
    json_t *row;
    if (text)
        *text = bf_xstrdup("");
    json_array_foreach(w->adaptive, i, row) {
        char *line = bf_adaptive_line(row);
        add_line(ls, "%s%s", w->tty ? "  " : "", line);
        if (text) {
            len += strlen(line) + 1;
            *text = bf_xrealloc(*text, len + 1);
            strcat(strcat(*text, line), "\n");
        }
        free(line);
    }
}

/* "0 workers connected" while jobs wait and none has been for a while. */
static int no_workers(const watch *w, int64_t now)
{
    return w->workers == 0 && COUNT(w->status, "queued") > 0
           && now - w->worker_seen_ms >= BF_WATCH_NO_WORKER_GRACE_MS;
}

static void worker_line(watch *w, lines *ls)
{
    if (w->o->worker_hint)
        add_line(ls, "0 workers connected: start one with: mpirun -np 2 "
                 "bifocal-worker --server %s --token-file %s", w->cl->server,
                 w->cl->token_file);
    else
        add_line(ls, "0 workers connected yet");
}

/* ---- terminal ------------------------------------------------------------- */

static void terminal_size(int *cols, int *rows)
{
    struct winsize ws;
    *cols = 80;
    *rows = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
        if (ws.ws_col > 0)
            *cols = ws.ws_col;
        if (ws.ws_row > 0)
            *rows = ws.ws_row;
    }
}

/* Redraws the frame in place: up to its first line, each line rewritten and
 * the rest of it erased, then everything below erased (the last frame may
 * have had more lines).  A frame never holds more lines than the screen,
 * so its top is always reachable. */
static void draw_frame(watch *w, int64_t now)
{
    int cols, rows;
    terminal_size(&cols, &rows);
    lines ls = { 0 };
    sweep_line(w, &ls);
    adaptive_lines(w, &ls, NULL);
    int hint = no_workers(w, now);
    int n_jobs = (int)json_array_size(w->live);
    int room = rows - 1 - ls.n - hint > 1 ? rows - 1 - ls.n - hint : 1;
    for (int i = 0; i < n_jobs; i++) {
        if (i == room - 1 && n_jobs > room) {
            add_line(&ls, "  ... and %d more running", n_jobs - i);
            break;
        }
        job_line(w, &ls, json_array_get(w->live, (size_t)i));
    }
    if (hint)
        worker_line(w, &ls);
    char *frame = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&frame, &size);
    if (w->drawn > 0)
        fprintf(out, "\r\033[%dA", w->drawn);
    for (int i = 0; i < ls.n; i++) {
        fwrite(ls.line[i], 1, fitting(ls.line[i], cols), out);
        fputs("\033[K\n", out);
    }
    fputs("\033[J", out);
    fclose(out);
    fwrite(frame, 1, size, stdout);
    fflush(stdout);
    free(frame);
    w->drawn = ls.n;
    free_lines(&ls);
}

/* ---- plain lines ---------------------------------------------------------- */

/* The counts of the status row, without what changes every poll. */
static char *counts_text(const json_t *row)
{
    json_t *copy = json_deep_copy(row);
    json_object_del(copy, "percent_done");
    char *text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    return text;
}

static int in_live(const json_t *live, json_int_t job)
{
    size_t i;
    json_t *row;
    json_array_foreach(live, i, row)
        if (json_integer_value(json_object_get(row, "job_id")) == job)
            return 1;
    return 0;
}

/* The statuses a job ends in, as the status row counts them. */
static const char *const ended_statuses[] = { "succeeded", "failed",
                                              "cancelled", "pruned", NULL };

/* The one status whose count rose since the counts last printed, or
 * "ended" when several did. */
static const char *status_risen(const watch *w)
{
    const char *risen = NULL;
    for (int k = 0; ended_statuses[k]; k++)
        if (COUNT(w->status, ended_statuses[k])
            > COUNT(w->ended_counts, ended_statuses[k]))
            risen = risen ? "ended" : ended_statuses[k];
    return risen ? risen : "ended";
}

static long long ended_of(const json_t *row)
{
    long long n = 0;
    for (int k = 0; ended_statuses[k]; k++)
        n += COUNT(row, ended_statuses[k]);
    return n;
}

/* "job 5 succeeded: rope=spectral seed=2, loss 1.234 (3/12 ended, ETA
 * 2m10s)": a line per job that left the running ones since the last poll
 * (one for the count where a job ended unseen between two polls). */
static void job_end_lines(watch *w, lines *ls)
{
    long long ended = ended_of(w->status), before = ended_of(w->ended_counts);
    char eta[32], tail[96];
    format_eta(w->eta, eta, sizeof eta);
    snprintf(tail, sizeof tail, "(%lld/%lld ended, ETA %s)", ended,
             COUNT(w->status, "total"), eta);
    const char *status = status_risen(w);
    long long named = 0;
    const char *key;
    json_t *row, *tmp;
    json_object_foreach_safe(w->running, tmp, key, row) {
        if (in_live(w->live, json_integer_value(json_object_get(row,
                                                                "job_id"))))
            continue;
        char *label = bf_sweep_view_fields_label(
            w->fields, json_object_get(row, "config"));
        const json_t *l = json_object_get(row, "loss");
        char loss[48] = "";
        if (json_is_number(l))
            snprintf(loss, sizeof loss, "%sloss %.4g", *label ? ", " : "",
                     json_number_value(l));
        if (ended > before)
            add_line(ls, "job %s %s: %s%s %s", key, status, label, loss, tail);
        named++;
        free(label);
        json_object_del(w->running, key);
    }
    if (ended - before > named)
        add_line(ls, "%lld job(s) %s %s", ended - before - named, status,
                 tail);
    json_decref(w->ended_counts);
    w->ended_counts = json_deep_copy(w->status);
}

/* The running jobs' last rows, by id: what names a job once it ends. */
static void note_running(watch *w)
{
    size_t i;
    json_t *row;
    json_array_foreach(w->live, i, row) {
        char key[32];
        snprintf(key, sizeof key, "%lld", COUNT(row, "job_id"));
        json_object_set(w->running, key, row);
    }
}

/* Per-step progress (--progress): the counts when they change, a line
 * per running job each tenth of its steps. */
static void progress_lines(watch *w, lines *ls)
{
    char *counts = counts_text(w->status);
    if (!w->printed_status || strcmp(counts, w->printed_status) != 0)
        sweep_line(w, ls);
    free(w->printed_status);
    w->printed_status = counts;
    size_t i;
    json_t *row;
    json_array_foreach(w->live, i, row) {
        char key[32];
        snprintf(key, sizeof key, "%lld", COUNT(row, "job_id"));
        double steps = bf_progress_number(row, "steps", 0);
        json_int_t tenth = steps > 0
            ? (json_int_t)(10 * bf_progress_number(row, "step", 0) / steps) : 0;
        json_t *last = json_object_get(w->printed_tenth, key);
        if (!last || json_integer_value(last) != tenth) {
            job_line(w, ls, row);
            json_object_set_new(w->printed_tenth, key, json_integer(tenth));
        }
    }
}

static void print_plain(watch *w, int64_t now)
{
    lines ls = { 0 };
    if (w->o->progress)
        progress_lines(w, &ls);
    else {
        if (w->ended_counts)
            job_end_lines(w, &ls);
        else {                      /* where the sweep stands at first */
            sweep_line(w, &ls);
            w->ended_counts = json_deep_copy(w->status);
        }
        note_running(w);
    }
    lines comparisons = { 0 };
    char *text;
    adaptive_lines(w, &comparisons, &text);
    if (!w->printed_adaptive || strcmp(text, w->printed_adaptive) != 0)
        for (int k = 0; k < comparisons.n; k++)
            add_line(&ls, "%s", comparisons.line[k]);
    free_lines(&comparisons);
    free(w->printed_adaptive);
    w->printed_adaptive = text;
    int hint = no_workers(w, now);
    if (hint && !w->hint_printed)
        worker_line(w, &ls);
    w->hint_printed = hint;
    for (int k = 0; k < ls.n; k++)
        printf("%s\n", ls.line[k]);
    fflush(stdout);
    free_lines(&ls);
}

/* Without a terminal, the end: "sweep 3 ended in 5m10s: succeeded 10,
 * failed 1, cancelled 0, pruned 1 of 12". */
static void print_summary(const watch *w)
{
    char took[32];
    bf_format_duration((double)(bf_monotonic_ms() - w->start_ms) / 1000.0,
                       took, sizeof took);
    printf("sweep %lld ended in %s: succeeded %lld, failed %lld, cancelled "
           "%lld, pruned %lld of %lld\n", (long long)w->sweep, took,
           COUNT(w->status, "succeeded"), COUNT(w->status, "failed"),
           COUNT(w->status, "cancelled"), COUNT(w->status, "pruned"),
           COUNT(w->status, "total"));
    fflush(stdout);
}

/* ---- polling -------------------------------------------------------------- */

/* The sweep's status row (sweep_progress), in an array. */
static json_t *request_status(watch *w)
{
    json_t *req = json_pack("{s:s, s:I}", "type", "status", "sweep_id",
                            (json_int_t)w->sweep);
    json_t *reply;
    if (bf_session_request(w->cl, req, &reply))
        return NULL;
    json_t *rows = json_incref(json_object_get(reply, "sweeps"));
    json_decref(reply);
    return rows;
}

static int count_workers(watch *w, int64_t now)
{
    if (w->workers >= 0 && now - w->workers_ms < BF_WATCH_WORKERS_EVERY_MS)
        return 0;
    json_t *reply;
    if (bf_session_request(w->cl, json_pack("{s:s}", "type", "workers"),
                          &reply))
        return -1;
    size_t i;
    json_t *row;
    w->workers = 0;
    json_array_foreach(json_object_get(reply, "workers"), i, row)
        w->workers += json_integer_value(json_object_get(row, "connected")) == 1;
    json_decref(reply);
    w->workers_ms = now;
    if (w->workers > 0)
        w->worker_seen_ms = now;
    return 0;
}

/* One poll: 1 when the sweep has ended, 0 when it goes on, -1 on error. */
static int poll_once(watch *w)
{
    json_t *status = request_status(w);
    if (!status)
        return -1;
    json_decref(w->status);
    w->status = json_incref(json_array_get(status, 0));
    json_decref(status);
    if (!w->status) {
        fprintf(stderr, "bifocal: no sweep %lld\n", (long long)w->sweep);
        return -1;
    }
    json_t *live = bf_source_rows(&w->src, "live_jobs", w->sweep);
    json_t *adaptive = bf_source_rows(&w->src, "adaptive_seeds", w->sweep);
    int64_t now = bf_monotonic_ms();
    if (!live || !adaptive || count_workers(w, now)) {
        json_decref(live);
        json_decref(adaptive);
        return -1;
    }
    json_decref(w->live);
    w->live = live;
    json_decref(w->adaptive);
    w->adaptive = adaptive;
    bf_progress_update(&w->progress, w->live, now);
    w->eta = bf_progress_sweep_eta_now(&w->progress, w->status, w->live, now);
    if (w->tty)
        draw_frame(w, now);
    else
        print_plain(w, now);
    const char *s = json_string_value(json_object_get(w->status, "status"));
    long long open = COUNT(w->status, "queued") + COUNT(w->status, "running")
                     + COUNT(w->status, "waiting");
    return (s && strcmp(s, "active") != 0) || open == 0;
}

/* The sweep file's swept fields, which label the running jobs. */
static int load_fields(watch *w)
{
    json_t *rows = bf_source_rows(&w->src, "sweeps", w->sweep);
    if (!rows)
        return -1;
    w->fields = bf_sweep_view_swept_fields(json_string_value(json_object_get(
        json_array_get(rows, 0), "source")));
    json_decref(rows);
    return 0;
}

int bf_client_watch(bf_client *cl, int64_t sweep_id, const bf_watch_opts *o)
{
    watch w = { .cl = cl, .sweep = sweep_id, .o = o,
                .tty = isatty(STDOUT_FILENO), .workers = -1,
                .worker_seen_ms = bf_monotonic_ms(),
                .printed_tenth = json_object(), .running = json_object(),
                .start_ms = bf_monotonic_ms() };
    bf_source_open(&w.src, cl, NULL);   /* no file: cannot fail */
    bf_progress_init(&w.progress);
    int rc = load_fields(&w) ? -1 : 0;
    while (rc == 0) {
        rc = poll_once(&w);
        if (rc != 0)
            break;
        bf_sleep_ms(BF_WATCH_POLL_MS);
        if (o->tick && o->tick(o->ctx))
            rc = -1;
    }
    if (rc > 0 && !w.tty)
        print_summary(&w);
    bf_progress_clear(&w.progress);
    json_decref(w.running);
    json_decref(w.ended_counts);
    json_decref(w.fields);
    json_decref(w.status);
    json_decref(w.live);
    json_decref(w.adaptive);
    json_decref(w.printed_tenth);
    free(w.printed_status);
    free(w.printed_adaptive);
    return rc < 0 ? 1 : 0;
}
