/* results: `bifocal results SWEEP [--format table|csv|json] [--db FILE]`:
 * one row per job with the config fields that vary in the sweep and the
 * error of a failed job; and the failed-job list that ends `run` and
 * `watch`. */
#ifndef BF_RESULTS_H
#define BF_RESULTS_H

#include <stdint.h>

#include "session.h"
#include "format.h"
#include "source.h"
#include "sweep_view.h"

/* The options of the result commands (results, compare, report): the
 * SWEEP id and --db for all, the others where `allowed` has their bit. */
enum {
    BF_RESULT_OPT_FORMAT = 1, BF_RESULT_OPT_BY = 2, BF_RESULT_OPT_BASELINE = 4,
    BF_RESULT_OPT_OUTPUT = 8, BF_RESULT_OPT_JSON = 16
};
typedef struct bf_result_opts {
    int sweep;
    const char *db;             /* --db FILE, or NULL: the daemon */
    bf_row_format fmt;          /* --format */
    const char *by, *baseline;  /* --by, --baseline */
    const char *where;          /* --where */
    const char *output;         /* -o / --output */
    int json;                   /* --json */
} bf_result_opts;

/* Parses argv (argv[0]: the command) and opens the source it names (the
 * daemon of cl, or --db).  0; or the exit status after printing what is
 * wrong: 2 for bad usage, 1 for a file that cannot be read. */
int bf_result_command_start(bf_client *cl, int argc, char **argv,
                            unsigned allowed, bf_result_opts *o,
                            bf_source *src);

/* The rows a table shows of the first max_rows jobs: per job, its id,
 * task, rope, depth, seed, every other varying config field, outcome,
 * readable times and error. */
json_t *bf_results_rows(const bf_sweep_view *v, size_t max_rows);

/* Prints the results of a sweep in fmt, reading its rows anew for each
 * pass of the printer and holding one at a time; 0, or 1 after printing
 * why not. */
int bf_results_print(bf_source *src, int64_t sweep_id, const char *where,
                     bf_row_format fmt);

/* Lists the sweep's failed jobs with their errors on stderr, holding only
 * them.  Returns 0 when none failed, 1 when some did (or the sweep could
 * not be read). */
int bf_results_check_failed(bf_source *src, int64_t sweep_id);

/* A bf_client_command. */
int bf_client_cmd_results(bf_client *cl, int argc, char **argv);

#endif
