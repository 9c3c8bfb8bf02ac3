/* results: what `bifocal results SWEEP [--format table|csv|json] [--db
 * FILE]` prints (the command itself is cli/cmd_results.c): one row per job
 * with the config fields that vary in the sweep and the error of a failed
 * job; and the failed-job list that ends `run` and `watch`. */
#ifndef BF_RESULTS_H
#define BF_RESULTS_H

#include <stdint.h>

#include "session.h"
#include "format.h"
#include "source.h"
#include "sweep_view.h"

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

#endif
