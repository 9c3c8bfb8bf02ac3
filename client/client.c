/* client: the commands of `bifocal`.  Every command is a request to the
 * daemon over the wire protocol (docs/protocol.md) and a printer of its
 * reply; the daemon does all the work. */
#include "client.h"

#include "clock.h"
#include "file.h"
#include "run.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BF_CLIENT_TIMEOUT_MS 60000
#define BF_WATCH_POLL_MS 500

/* ---- connection ----------------------------------------------------------- */

int bf_client_connect(bf_client *cl)
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

json_t *bf_client_call(bf_client *cl, json_t *req)
{
    if (bf_client_connect(cl))
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

/* ---- argument helpers ----------------------------------------------------- */

static int parse_id(const char *what, const char *s, json_int_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v <= 0) {
        fprintf(stderr, "bifocal: %s must be a positive integer, not '%s'\n",
                what, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int usage_error(const char *cmd, const char *text)
{
    fprintf(stderr, "bifocal %s: %s (see bifocal %s --help)\n", cmd, text,
            cmd);
    return 2;
}

/* Runs the request and prints nothing; 0 or 1. */
static int call_and_drop(bf_client *cl, json_t *req, json_t **reply_out)
{
    json_t *reply = bf_client_call(cl, req);
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

static char *cell_text(const json_t *v)
{
    char buf[64];
    if (json_is_null(v) || !v)
        return strdup("");
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return strdup(buf);
    }
    if (json_is_real(v)) {
        snprintf(buf, sizeof buf, "%.6g", json_real_value(v));
        return strdup(buf);
    }
    if (json_is_boolean(v))
        return strdup(json_is_true(v) ? "true" : "false");
    return json_dumps(v, JSON_COMPACT);
}

static void print_csv_cell(const char *s)
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

/* Prints an array of flat objects; the columns are the keys of the first
 * row, in the order the server sent them. */
static void print_rows(const json_t *rows, bf_row_format fmt)
{
    if (fmt == BF_FORMAT_JSON) {
        char *text = json_dumps(rows, JSON_INDENT(2));
        puts(text);
        free(text);
        return;
    }
    size_t n_rows = json_array_size(rows);
    if (n_rows == 0) {
        if (fmt == BF_FORMAT_TABLE)
            puts("(none)");
        return;
    }
    const json_t *first = json_array_get(rows, 0);
    size_t n_cols = json_object_size(first);
    const char **keys = calloc(n_cols, sizeof *keys);
    size_t *width = calloc(n_cols, sizeof *width);
    char **cells = calloc(n_rows * n_cols, sizeof *cells);
    size_t c = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)first, key, v) {
        keys[c] = key;
        width[c] = strlen(key);
        c++;
    }
    for (size_t r = 0; r < n_rows; r++)
        for (c = 0; c < n_cols; c++) {
            char *s = cell_text(json_object_get(json_array_get(rows, r),
                                                keys[c]));
            cells[r * n_cols + c] = s;
            if (strlen(s) > width[c])
                width[c] = strlen(s);
        }
    for (size_t r = 0; r <= n_rows; r++) {
        for (c = 0; c < n_cols; c++) {
            const char *s = r == 0 ? keys[c] : cells[(r - 1) * n_cols + c];
            if (fmt == BF_FORMAT_CSV) {
                if (c)
                    putchar(',');
                print_csv_cell(s);
            } else {
                printf(c + 1 < n_cols ? "%-*s  " : "%-*s", (int)width[c], s);
            }
        }
        putchar('\n');
    }
    for (size_t i = 0; i < n_rows * n_cols; i++)
        free(cells[i]);
    free(cells);
    free(width);
    free(keys);
}

/* Requests `req`, prints the array under `key` of the reply as a table. */
static int query_and_print(bf_client *cl, json_t *req, const char *key,
                           bf_row_format fmt)
{
    json_t *reply;
    if (call_and_drop(cl, req, &reply))
        return 1;
    print_rows(json_object_get(reply, key), fmt);
    json_decref(reply);
    return 0;
}

/* ---- commands ------------------------------------------------------------- */

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
    if (call_and_drop(cl, req, &reply))
        return 1;
    *sweep_id = json_integer_value(json_object_get(reply, "sweep_id"));
    *n_jobs = (int)json_integer_value(json_object_get(reply, "jobs"));
    json_decref(reply);
    return 0;
}

static int cmd_submit(bf_client *cl, int argc, char **argv)
{
    if (argc != 2)
        return usage_error(argv[0], "expected one sweep FILE");
    int64_t sweep;
    int n_jobs;
    if (bf_client_submit(cl, argv[1], &sweep, &n_jobs))
        return 1;
    printf("sweep %lld: %d jobs\n", (long long)sweep, n_jobs);
    return 0;
}

static int cmd_status(bf_client *cl, int argc, char **argv)
{
    json_t *req = json_pack("{s:s}", "type", "status");
    json_int_t sweep;
    if (argc > 2 || (argc == 2 && parse_id("SWEEP", argv[1], &sweep))) {
        json_decref(req);
        return usage_error(argv[0], "expected at most one SWEEP id");
    }
    if (argc == 2)
        json_object_set_new(req, "sweep_id", json_integer(sweep));
    return query_and_print(cl, req, "sweeps", BF_FORMAT_TABLE);
}

static int cmd_jobs(bf_client *cl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "sweep", required_argument, NULL, 's' },
        { "status", required_argument, NULL, 't' },
        { NULL, 0, NULL, 0 } };
    json_t *req = json_pack("{s:s}", "type", "jobs");
    json_int_t sweep;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (opt == 's' && parse_id("--sweep", optarg, &sweep) == 0)
            json_object_set_new(req, "sweep_id", json_integer(sweep));
        else if (opt == 't')
            json_object_set_new(req, "status", json_string(optarg));
        else {
            json_decref(req);
            return usage_error(argv[0], "bad option");
        }
    }
    if (optind != argc) {
        json_decref(req);
        return usage_error(argv[0], "unexpected argument");
    }
    return query_and_print(cl, req, "jobs", BF_FORMAT_TABLE);
}

static int cmd_cancel(bf_client *cl, int argc, char **argv)
{
    json_int_t id;
    json_t *req;
    if (argc == 3 && strcmp(argv[1], "--job") == 0) {
        if (parse_id("--job", argv[2], &id))
            return 2;
        req = json_pack("{s:s, s:I}", "type", "cancel", "job_id", id);
    } else if (argc == 2) {
        if (parse_id("SWEEP", argv[1], &id))
            return 2;
        req = json_pack("{s:s, s:I}", "type", "cancel", "sweep_id", id);
    } else {
        return usage_error(argv[0], "expected SWEEP or --job N");
    }
    json_t *reply;
    if (call_and_drop(cl, req, &reply))
        return 1;
    printf("cancelled (%lld running job(s) told to stop)\n",
           (long long)json_integer_value(json_object_get(reply, "running")));
    json_decref(reply);
    return 0;
}

static int cmd_retry(bf_client *cl, int argc, char **argv)
{
    json_int_t job;
    if (argc != 3 || strcmp(argv[1], "--job") != 0)
        return usage_error(argv[0], "expected --job N");
    if (parse_id("--job", argv[2], &job))
        return 2;
    if (call_and_drop(cl, json_pack("{s:s, s:I}", "type", "retry", "job_id",
                                    job), NULL))
        return 1;
    printf("job %lld re-queued\n", (long long)job);
    return 0;
}

static int cmd_results(bf_client *cl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "format", required_argument, NULL, 'f' },
        { NULL, 0, NULL, 0 } };
    bf_row_format fmt = BF_FORMAT_TABLE;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (opt != 'f')
            return usage_error(argv[0], "bad option");
        if (strcmp(optarg, "table") == 0)
            fmt = BF_FORMAT_TABLE;
        else if (strcmp(optarg, "csv") == 0)
            fmt = BF_FORMAT_CSV;
        else if (strcmp(optarg, "json") == 0)
            fmt = BF_FORMAT_JSON;
        else
            return usage_error(argv[0], "--format is table, csv or json");
    }
    json_int_t sweep;
    if (optind + 1 != argc)
        return usage_error(argv[0], "expected one SWEEP id");
    if (parse_id("SWEEP", argv[optind], &sweep))
        return 2;
    return bf_client_print_results(cl, sweep, fmt);
}

int bf_client_print_results(bf_client *cl, int64_t sweep_id, bf_row_format fmt)
{
    return query_and_print(cl, json_pack("{s:s, s:I}", "type", "results",
                                         "sweep_id", (json_int_t)sweep_id),
                           "rows", fmt);
}

static int cmd_workers(bf_client *cl, int argc, char **argv)
{
    if (argc != 1)
        return usage_error(argv[0], "takes no arguments");
    return query_and_print(cl, json_pack("{s:s}", "type", "workers"),
                           "workers", BF_FORMAT_TABLE);
}

/* One progress line: a bar on a terminal (redrawn in place), plain text
 * otherwise. */
static void print_progress(const json_t *row, int tty)
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

static int cmd_watch(bf_client *cl, int argc, char **argv)
{
    json_int_t sweep;
    if (argc != 2)
        return usage_error(argv[0], "expected one SWEEP id");
    if (parse_id("SWEEP", argv[1], &sweep))
        return 2;
    return bf_client_watch(cl, sweep, NULL, NULL);
}

int bf_client_watch(bf_client *cl, int64_t sweep, int (*tick)(void *ctx),
                    void *ctx)
{
    int tty = isatty(STDOUT_FILENO);
    char *last = NULL;
    for (;;) {
        json_t *reply;
        if (call_and_drop(cl, json_pack("{s:s, s:I}", "type", "status",
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
            print_progress(row, tty);
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

const bf_client_command bf_client_commands[] = {
    { "submit", "FILE",
      "Submits a sweep file (YAML).  Prints the sweep id and the number of "
      "jobs it expanded to; a rejected sweep prints the server's error, "
      "naming file, line and field.", cmd_submit },
    { "status", "[SWEEP]",
      "Progress of every sweep, or of one.", cmd_status },
    { "jobs", "[--sweep N] [--status S]",
      "Lists jobs, optionally of one sweep and/or in one status (queued, "
      "running, succeeded, failed, cancelled).", cmd_jobs },
    { "cancel", "SWEEP | --job N",
      "Cancels a sweep or one job: queued jobs at once, running ones are "
      "told to stop.", cmd_cancel },
    { "retry", "--job N",
      "Puts a failed or cancelled job back in the queue.", cmd_retry },
    { "watch", "SWEEP",
      "Follows a sweep until it ends: a progress bar on a terminal, one "
      "line per change otherwise.", cmd_watch },
    { "results", "SWEEP [--format table|csv|json]",
      "One row per job: losses and accuracies at the training depth and the "
      "deepest evaluation depth.", cmd_results },
    { "run", "FILE [--db FILE] [--groups G] [--ranks N] [--checkpoint-dir DIR] "
      "[--lease-seconds S]",
      "The embedded default: starts a coordinator on a free loopback port "
      "(database ./bifocal.db or --db, token and log beside it), G local "
      "worker groups of N MPI ranks (default 1 x 2), submits the sweep FILE, "
      "shows its progress, prints the results table and stops everything; "
      "the database stays for sqlite3 queries.  Checkpoints go to "
      "DB.checkpoints/ unless --checkpoint-dir says otherwise.",
      bf_client_cmd_run },
    { "workers", "",
      "Workers known to the server, connected or not.", cmd_workers },
    { NULL, NULL, NULL, NULL },
};
