/* session: the connection to the daemon and the pieces of output that the
 * commands share.  See session.h. */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "file.h"

#define BF_CLIENT_TIMEOUT_MS 60000
#define BF_WATCH_POLL_MS 500

/* ---- connection ----------------------------------------------------------- */

/* Connects and says hello as a client, once.  0 or -1 (message printed). */
static int session__connect(bf_client *cl)
{
    if (cl->connected)
        return 0;
    bf_error err;
    bf_error_clear(&err);
    char token[BF_TOKEN_HEX_LEN + 1];
    if (bf_wire_read_token(cl->token_file, token, sizeof token, &err)
        || bf_wire_connect(&cl->conn, cl->server, &err)) {
        fprintf(stderr, "bifocal: %s\n", err.msg);
        return -1;
    }
    if (bf_wire_hello(&cl->conn, token, "client", NULL, NULL, 0, &err)) {
        fprintf(stderr, "bifocal: server %s refused us: %s\n", cl->server,
                err.msg);
        bf_wire_close(&cl->conn);
        return -1;
    }
    cl->connected = 1;
    return 0;
}

void bf_client_close(bf_client *cl)
{
    if (cl->connected)
        bf_wire_close(&cl->conn);
    cl->connected = 0;
}

/* The reply to req (stays the caller's), or NULL after printing why. */
static json_t *session__call(bf_client *cl, json_t *req)
{
    if (session__connect(cl))
        return NULL;
    bf_error err;
    bf_error_clear(&err);
    json_t *reply = bf_wire_request(&cl->conn, req, BF_CLIENT_TIMEOUT_MS,
                                    NULL, NULL, &err);
    if (!reply) {
        fprintf(stderr, "bifocal: %s: %s\n", cl->server, err.msg);
        return NULL;
    }
    if (strcmp(bf_wire_type(reply), "error") == 0) {
        fprintf(stderr, "bifocal: %s\n", err.msg);
        json_decref(reply);
        return NULL;
    }
    return reply;
}

int bf_client_request(bf_client *cl, json_t *req, json_t **reply_out)
{
    json_t *reply = session__call(cl, req);
    json_decref(req);
    if (!reply)
        return 1;
    if (reply_out)
        *reply_out = reply;
    else
        json_decref(reply);
    return 0;
}

/* ---- printing rows -------------------------------------------------------- */

static char *session__cell_text(const json_t *v)
{
    char buf[64];
    if (json_is_null(v) || !v)
        return bf_xstrdup("");
    if (json_is_string(v))
        return bf_xstrdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return bf_xstrdup(buf);
    }
    if (json_is_real(v)) {
        snprintf(buf, sizeof buf, "%.6g", json_real_value(v));
        return bf_xstrdup(buf);
    }
    if (json_is_boolean(v))
        return bf_xstrdup(json_is_true(v) ? "true" : "false");
    return json_dumps(v, JSON_COMPACT);
}

static void session__print_csv_cell(const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
}

/* Rows of flat objects as text: the header and the cells. */
typedef struct row_table {
    size_t n_rows, n_cols;
    const char **keys;   /* [n_cols] the first row's keys, borrowed */
    char **cells;        /* [n_rows * n_cols] */
    size_t *width;       /* [n_cols] widest of the key and the cells */
} row_table;

static void session__table_fill(row_table *t, const json_t *rows)
{
    const json_t *first = json_array_get(rows, 0);
    t->n_rows = json_array_size(rows);
    t->n_cols = json_object_size(first);
    t->keys = bf_xcalloc(t->n_cols, sizeof *t->keys);
    t->width = bf_xcalloc(t->n_cols, sizeof *t->width);
    t->cells = bf_xcalloc(t->n_rows * t->n_cols, sizeof *t->cells);
    size_t c = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)first, key, v) {
        t->keys[c] = key;
        t->width[c] = strlen(key);
        c++;
    }
    for (size_t r = 0; r < t->n_rows; r++)
        for (c = 0; c < t->n_cols; c++) {
            const json_t *row = json_array_get(rows, r);
            char *s = session__cell_text(json_object_get(row, t->keys[c]));
            t->cells[r * t->n_cols + c] = s;
            if (strlen(s) > t->width[c])
                t->width[c] = strlen(s);
        }
}

/* The header line, then one line per row: padded columns or CSV. */
static void session__table_print(const row_table *t, bf_row_format fmt)
{
    for (size_t r = 0; r <= t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) {
            const char *s = r == 0 ? t->keys[c]
                                   : t->cells[(r - 1) * t->n_cols + c];
            if (fmt == BF_FORMAT_CSV) {
                if (c)
                    putchar(',');
                session__print_csv_cell(s);
            } else {
                printf(c + 1 < t->n_cols ? "%-*s  " : "%-*s",
                       (int)t->width[c], s);
            }
        }
        putchar('\n');
    }
}

static void session__table_free(row_table *t)
{
    for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->width);
    free(t->keys);
}

static void session__print_rows(const json_t *rows, bf_row_format fmt)
{
    if (fmt == BF_FORMAT_JSON) {
        char *text = json_dumps(rows, JSON_INDENT(2));
        puts(text);
        free(text);
        return;
    }
    if (json_array_size(rows) == 0) {
        if (fmt == BF_FORMAT_TABLE)
            puts("(none)");
        return;
    }
    row_table t;
    session__table_fill(&t, rows);
    session__table_print(&t, fmt);
    session__table_free(&t);
}

int bf_client_print_rows(bf_client *cl, json_t *req, const char *key,
                         bf_row_format fmt)
{
    json_t *reply;
    if (bf_client_request(cl, req, &reply))
        return 1;
    session__print_rows(json_object_get(reply, key), fmt);
    json_decref(reply);
    return 0;
}

int bf_client_print_results(bf_client *cl, int64_t sweep_id, bf_row_format fmt)
{
    return bf_client_print_rows(cl, json_pack("{s:s, s:I}", "type",
                                              "results", "sweep_id",
                                              (json_int_t)sweep_id),
                                "rows", fmt);
}

/* ---- submit and watch ----------------------------------------------------- */

int bf_client_submit(bf_client *cl, const char *path, int64_t *sweep_id,
                     int *n_jobs)
{
    size_t len;
    bf_error err;
    char *text = bf_read_file(path, &len, &err);
    if (!text) {
        fprintf(stderr, "bifocal: %s\n", err.msg);
        return 1;
    }
    json_t *req = json_pack("{s:s, s:s, s:s%}", "type", "submit",
                            "filename", path, "text", text, len);
    free(text);
    if (!req) {
        fprintf(stderr, "bifocal: %s is not valid UTF-8 text\n", path);
        return 1;
    }
    json_t *reply;
    if (bf_client_request(cl, req, &reply))
        return 1;
    *sweep_id = json_integer_value(json_object_get(reply, "sweep_id"));
    *n_jobs = (int)json_integer_value(json_object_get(reply, "jobs"));
    json_decref(reply);
    return 0;
}

/* One progress line: a bar on a terminal (redrawn in place), plain text
 * otherwise. */
static void session__print_progress(const json_t *row, int tty)
{
#define COUNT(k) ((long long)json_integer_value(json_object_get(row, k)))
    long long total = COUNT("total");
    long long ended = COUNT("succeeded") + COUNT("failed") + COUNT("cancelled");
    if (tty) {
        enum { BAR = 30 };
        char bar[BAR + 1];
        int filled = total > 0 ? (int)(BAR * ended / total) : 0;
        for (int i = 0; i < BAR; i++)
            bar[i] = i < filled ? '#' : '.';
        bar[BAR] = '\0';
        printf("\r\033[Ksweep %lld [%s] %lld/%lld  running %lld  failed %lld",
               COUNT("sweep_id"), bar, ended, total, COUNT("running"),
               COUNT("failed"));
    } else {
        printf("sweep %lld: %lld/%lld ended (queued %lld, running %lld, "
               "succeeded %lld, failed %lld, cancelled %lld)\n",
               COUNT("sweep_id"), ended, total, COUNT("queued"),
               COUNT("running"), COUNT("succeeded"), COUNT("failed"),
               COUNT("cancelled"));
    }
    fflush(stdout);
#undef COUNT
}

int bf_client_watch(bf_client *cl, int64_t sweep, int (*tick)(void *ctx),
                    void *ctx)
{
    int tty = isatty(STDOUT_FILENO);
    char *last = NULL;
    for (;;) {
        json_t *reply;
        if (bf_client_request(cl, json_pack("{s:s, s:I}", "type", "status",
                                            "sweep_id", sweep), &reply)) {
            free(last);
            return 1;
        }
        json_t *row = json_array_get(json_object_get(reply, "sweeps"), 0);
        if (!row) {
            fprintf(stderr, "bifocal: no sweep %lld\n", (long long)sweep);
            json_decref(reply);
            free(last);
            return 1;
        }
        /* Print only what changed, so a log of a non-terminal stays short. */
        char *now = json_dumps(row, JSON_COMPACT | JSON_SORT_KEYS);
        if (!last || strcmp(now, last) != 0)
            session__print_progress(row, tty);
        free(last);
        last = now;
        const char *status = json_string_value(json_object_get(row, "status"));
        long long open =
            json_integer_value(json_object_get(row, "queued"))
            + json_integer_value(json_object_get(row, "running"));
        int ended = (status && strcmp(status, "active") != 0) || open == 0;
        json_decref(reply);
        if (ended)
            break;
        bf_sleep_ms(BF_WATCH_POLL_MS);
        if (tick && tick(ctx)) {
            free(last);
            return 1;
        }
    }
    if (tty)
        putchar('\n');
    free(last);
    return 0;
}

/* ---- a command's arguments ------------------------------------------------ */

int bf_client_args(const bf_option *options, const char **pos,
                   int max_positional, int argc, char **argv)
{
    char prog[64];
    snprintf(prog, sizeof prog, "bifocal %s", argv[0]);
    bf_args a = { .prog = prog, .options = options, .positional = pos,
                  .max_positional = max_positional };
    int rc = bf_args_parse(&a, argc, argv);
    if (rc == BF_ARGS_OK)
        return a.n_positional;
    /* BF_ARGS_HELP cannot come back: bifocal.c prints a command's help
     * when --help is among its arguments, before the command runs. */
    return -1;
}
