/* client: the commands of `bifocal`.  Every command is a request to the
 * daemon over the wire protocol (docs/protocol.md) and a printer of its
 * reply; the daemon does all the work.  Arguments follow common/args. */
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_dashboard.h"
#include "command.h"
#include "cmd_results.h"
#include "dashboard.h"
#include "results.h"
#include "run.h"
#include "watch.h"

/* ---- argument helpers ----------------------------------------------------- */

/* Requests req (taken over) and prints the array under `key` of the reply
 * (bf_format_print_readable: JSON whole; a table or CSV without the config
 * and with readable times).  0 or 1. */
static int print_rows(bf_client *cl, json_t *req, const char *key,
                      bf_row_format fmt)
{
    json_t *reply;
    if (bf_session_request(cl, req, &reply))
        return 1;
    bf_format_print_readable(stdout, json_object_get(reply, key), fmt);
    json_decref(reply);
    return 0;
}

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

/* ---- commands ------------------------------------------------------------- */

static int cmd_submit(bf_client *cl, int argc, char **argv)
{
    const char *file;
    int strict = 0;
    const bf_option options[] = { BF_OPT_FLAG("strict", &strict), BF_OPT_END };
    int n = bf_command_args(options, &file, 1, argc, argv);
    if (n < 0)
        return 2;
    if (n != 1)
        return usage_error(argv[0], "expected one sweep FILE");
    int64_t sweep;
    int n_jobs;
    if (bf_session_submit(cl, file, strict, &sweep, &n_jobs))
        return 1;
    printf("sweep %lld: %d jobs\n", (long long)sweep, n_jobs);
    return 0;
}

/* The value of --format; -1 after printing a bad one. */
static int format_of(const char *cmd, const char *name, bf_row_format *fmt)
{
    if (bf_format_parse(name, fmt) == 0)
        return 0;
    usage_error(cmd, "--format is table, csv or json");
    return -1;
}

static int cmd_status(bf_client *cl, int argc, char **argv)
{
    const char *sweep_arg, *format = "table";
    const bf_option options[] = {
        BF_OPT_STR("format", "table|csv|json", &format), BF_OPT_END,
    };
    json_int_t sweep = 0;
    bf_row_format fmt;
    int n = bf_command_args(options, &sweep_arg, 1, argc, argv);
    if (n < 0 || (n == 1 && parse_id("SWEEP", sweep_arg, &sweep))
        || format_of(argv[0], format, &fmt))
        return 2;
    json_t *req = json_pack("{s:s}", "type", "status");
    if (n == 1)
        json_object_set_new(req, "sweep_id", json_integer(sweep));
    return print_rows(cl, req, "sweeps", fmt);
}

/* Asks for the pages of jobs after `after` until `limit` jobs (0: all)
 * are in *jobs; *next is where more would start (0: none).  0 or 1. */
static int fetch_jobs(bf_client *cl, const json_t *filter, json_int_t after,
                      int limit, json_t *jobs, json_int_t *next)
{
    enum { PAGE = 1000 };   /* the daemon's default page */
    for (;;) {
        int left = limit ? limit - (int)json_array_size(jobs) : PAGE;
        json_t *req = json_deep_copy(filter), *reply;
        json_object_set_new(req, "after", json_integer(after));
        json_object_set_new(req, "limit", json_integer(left < PAGE ? left
                                                                   : PAGE));
        if (bf_session_request(cl, req, &reply))
            return 1;
        json_array_extend(jobs, json_object_get(reply, "jobs"));
        *next = json_integer_value(json_object_get(reply, "next_after"));
        json_decref(reply);
        if (!*next || (limit && (int)json_array_size(jobs) >= limit))
            return 0;
        after = *next;
    }
}

static int cmd_jobs(bf_client *cl, int argc, char **argv)
{
    const char *sweep_arg = NULL, *status = NULL, *format = "table";
    const char *after_arg = NULL;
    int limit = 0;
    const bf_option options[] = {
        BF_OPT_STR("sweep", "N", &sweep_arg),
        BF_OPT_STR("status", "S", &status),
        BF_OPT_INT("limit", "N", &limit, 1, 1000000000),
        BF_OPT_STR("after", "JOB", &after_arg),
        BF_OPT_STR("format", "table|csv|json", &format),
        BF_OPT_END,
    };
    json_int_t sweep = 0, after = 0, next = 0;
    bf_row_format fmt;
    if (bf_command_args(options, NULL, 0, argc, argv) < 0
        || (sweep_arg && parse_id("--sweep", sweep_arg, &sweep))
        || (after_arg && parse_id("--after", after_arg, &after))
        || format_of(argv[0], format, &fmt))
        return 2;
    json_t *filter = json_pack("{s:s}", "type", "jobs");
    if (sweep_arg)
        json_object_set_new(filter, "sweep_id", json_integer(sweep));
    if (status)
        json_object_set_new(filter, "status", json_string(status));
    json_t *jobs = json_array();
    int rc = fetch_jobs(cl, filter, after, limit, jobs, &next);
    if (rc == 0) {
        bf_format_print_readable(stdout, jobs, fmt);
        if (next)
            fprintf(stderr, "bifocal: more jobs follow: add --after %lld\n",
                    (long long)next);
    }
    json_decref(jobs);
    json_decref(filter);
    return rc;
}

static int cmd_cancel(bf_client *cl, int argc, char **argv)
{
    const char *job = NULL, *sweep;
    const bf_option options[] = { BF_OPT_STR("job", "N", &job), BF_OPT_END };
    int n = bf_command_args(options, &sweep, 1, argc, argv);
    if (n < 0)
        return 2;
    if ((n == 1) == (job != NULL))
        return usage_error(argv[0], "expected SWEEP or --job N");
    json_int_t id;
    if (parse_id(job ? "--job" : "SWEEP", job ? job : sweep, &id))
        return 2;
    json_t *reply;
    if (bf_session_request(cl, json_pack("{s:s, s:I}", "type", "cancel",
                                        job ? "job_id" : "sweep_id", id),
                          &reply))
        return 1;
    printf("cancelled (%lld running job(s) told to stop)\n",
           (long long)json_integer_value(json_object_get(reply, "running")));
    json_decref(reply);
    return 0;
}

static int cmd_retry(bf_client *cl, int argc, char **argv)
{
    const char *job_arg = NULL;
    int scratch = 0;
    const bf_option options[] = {
        BF_OPT_STR("job", "N", &job_arg),
        BF_OPT_FLAG("from-scratch", &scratch),
        BF_OPT_END,
    };
    if (bf_command_args(options, NULL, 0, argc, argv) < 0)
        return 2;
    if (!job_arg)
        return usage_error(argv[0], "expected --job N [--from-scratch]");
    json_int_t job;
    if (parse_id("--job", job_arg, &job))
        return 2;
    if (bf_session_request(cl, json_pack("{s:s, s:I, s:b}", "type", "retry",
                                        "job_id", job, "from_scratch",
                                        scratch), NULL))
        return 1;
    printf("job %lld re-queued%s\n", (long long)job,
           scratch ? " (from step 0)" : "");
    return 0;
}

static int cmd_workers(bf_client *cl, int argc, char **argv)
{
    const char *format = "table";
    const bf_option options[] = {
        BF_OPT_STR("format", "table|csv|json", &format), BF_OPT_END,
    };
    bf_row_format fmt;
    if (bf_command_args(options, NULL, 0, argc, argv) < 0
        || format_of(argv[0], format, &fmt))
        return 2;
    return print_rows(cl, json_pack("{s:s}", "type", "workers"),
                                "workers", fmt);
}

static int cmd_watch(bf_client *cl, int argc, char **argv)
{
    const char *sweep_arg;
    bf_watch_opts o = { .worker_hint = 1 };
    const bf_option options[] = {
        BF_OPT_FLAG("progress", &o.progress),
        BF_OPT_END,
    };
    int n = bf_command_args(options, &sweep_arg, 1, argc, argv);
    if (n < 0)
        return 2;
    if (n != 1)
        return usage_error(argv[0], "expected one SWEEP id");
    json_int_t sweep = 0;
    if (parse_id("SWEEP", sweep_arg, &sweep))
        return 2;
    if (bf_client_watch(cl, sweep, &o))
        return 1;
    bf_source src;
    bf_source_open(&src, cl, NULL);
    return bf_results_check_failed(&src, sweep);
}

const bf_client_command bf_client_commands[] = {
    { "submit", "FILE [--strict]",
      "Submits a sweep file (YAML).  Prints the sweep id and the number of "
      "jobs it expanded to, and its warnings (fields without effect for a "
      "job's rope variant, bifocal or prope fractions that make another "
      "variant, jobs that train the same model); a rejected sweep prints "
      "the server's error, naming file, line and field.  A relative "
      "init_from is relative to the file's folder.  --strict rejects a "
      "sweep with warnings.", cmd_submit },
    { "status", "[SWEEP] [--format table|csv|json]",
      "Progress of every sweep, or of one.", cmd_status },
    { "jobs", "[--sweep N] [--status S] [--limit N] [--after JOB] "
      "[--format table|csv|json]",
      "Lists jobs in job id order, optionally of one sweep and/or in one "
      "status (waiting, queued, running, succeeded, failed, cancelled, "
      "pruned): all "
      "of them, or the first N (--limit) with an id above JOB (--after; the "
      "command says where more follow).  The daemon sends them in pages of "
      "at most 1,000.  The table leaves out the config (JSON has it).",
      cmd_jobs },
    { "cancel", "SWEEP | --job N",
      "Cancels a sweep or one job: queued jobs at once, running ones are "
      "told to stop.", cmd_cancel },
    { "retry", "--job N [--from-scratch]",
      "Puts a failed or cancelled job back in the queue; --from-scratch "
      "also forgets its checkpoint, so it starts again at step 0.",
      cmd_retry },
    { "watch", "SWEEP [--progress]",
      "Follows a sweep until it ends: on a terminal its progress bar and "
      "ETA and one line per running job (id, swept fields, step/steps, "
      "loss, ETA), redrawn in place; otherwise one line per job that ends "
      "and a summary (--progress: a line per change and per tenth of each "
      "running job's steps).  The ETA is the sweep's observed throughput "
      "over every job's steps.  Says "
      "so when no worker is connected.  Then lists the failed jobs with "
      "their errors and exits 1 if there are any.", cmd_watch },
    { "results", "SWEEP [--where FIELD=VALUE[,...]] [--format table|csv|json] "
      "[--db FILE]",
      "One row per job: the config fields that vary in the sweep, losses "
      "and accuracies at the training depth and the deepest evaluation "
      "depth, times and the error of a failed job (JSON: every column and "
      "the full config).  --where keeps the jobs with those config values "
      "(or stage=NAME).  --db reads a database file instead of the "
      "daemon.", bf_client_cmd_results },
    { "compare", "SWEEP [--where FIELD=VALUE[,...]] [--by FIELD,...] "
      "[--baseline FIELD=VALUE[,...]] [--format table|csv|json] [--verbose] "
      "[--db FILE]",
      "Seed statistics (docs/results.md): per group of jobs that differ "
      "only in their seed (or per --by fields) and eval depth, n, the "
      "geometric-mean eval loss and pooled accuracy with their 95% "
      "intervals; each group against its baseline (--baseline, or "
      "label=NAME for a named zip entry; default the sweep file's "
      "analysis.baseline, else rope=rope): the loss ratio on the seeds both "
      "share (paired log ratio, else Welch on the logs), the accuracy "
      "difference (exact McNemar on the examples where outcomes pair), "
      "p-values adjusted for multiplicity (Holm over a declared primary "
      "family, Benjamini-Hochberg over the rest) and a verdict: lower, "
      "higher, equivalent within the margin, or undecided with the seeds "
      "that would decide it.  A stage that takes values from a selection "
      "(from:) also prints what was chosen.  The table fits 100 columns: "
      "each search's best trials, a line per comparison (loss ratio, "
      "interval, p_adj, verdict, the stopping rule's state), what they "
      "mean once below; --verbose: every group's statistics and a long "
      "line per comparison.  --where keeps the jobs with "
      "those values, as if the sweep held no others.  --db reads a "
      "database file instead of the daemon.",
      bf_client_cmd_compare },
    { "report", "SWEEP [-o FILE.html] [--json] [--where FIELD=VALUE[,...]] "
      "[--by FIELD,...] [--baseline FIELD=VALUE[,...]] [--db FILE]",
      "Writes one self-contained HTML report (no network needed): accuracy "
      "and loss against eval depth, training-loss curves, learned "
      "frequencies, the comparison and per-job tables and the sweep file.  "
      "--where restricts it to the jobs with those values; --by groups "
      "them as compare's --by does.  --json writes "
      "the report's data instead.  Default output: "
      "bifocal-report-SWEEP.html.", bf_client_cmd_report },
    { "run", "FILE [--db FILE] [--groups G] [--ranks N] [--checkpoint-dir DIR] "
      "[--lease-seconds S] [--strict] [--dashboard HOST:PORT] "
      "[--no-dashboard] [--progress]",
      "The embedded default: starts a coordinator on a free loopback port "
      "(database ./bifocal.db or --db, token and log beside it), G local "
      "worker groups of N MPI ranks (default 1 x 2) and a dashboard (bifocal "
      "dashboard on --dashboard, default 127.0.0.1:8080, any free port if "
      "that one is taken; its URL is printed; --no-dashboard: none), "
      "submits the sweep FILE, "
      "shows its progress (without a terminal: a line per job that ends "
      "and a summary; --progress: per-step lines too), prints the results "
      "table (and the failed jobs, "
      "exiting 1 if any) and stops everything; "
      "the database stays for sqlite3 queries.  Checkpoints go to "
      "DB.checkpoints/ unless --checkpoint-dir says otherwise.  --strict "
      "rejects a sweep with warnings (see submit).",
      bf_client_cmd_run },
    { "dashboard", "[--db FILE] [--listen HOST:PORT] [--token-file FILE] "
      "[--port-file FILE] [--log-level LEVEL] [--session-ttl SECONDS]",
      "Serves a live view of the database's sweeps over HTTP (default "
      "http://" BF_DASHBOARD_DEFAULT_LISTEN "/): every sweep with its "
      "progress; a sweep's running jobs, structure-gap figure, comparison "
      "and job table; a job's curves, evaluations and frequencies; and the "
      "JSON API behind them (docs/dashboard.md).  Opens the database "
      "(default ./bifocal.db) read-only, so it never blocks the daemon.  "
      "On loopback anyone on this machine may look; beyond it the daemon's "
      "token (DB.token, or --token-file) is asked for once at /login, and "
      "the browser gets a session of this dashboard (a cookie, never the "
      "token) lasting --session-ttl (default 12 h).  --port-file writes the "
      "bound port (with --listen HOST:0).",
      bf_client_cmd_dashboard },
    { "workers", "[--format table|csv|json]",
      "Workers known to the server, connected or not.", cmd_workers },
    { NULL, NULL, NULL, NULL },
};
