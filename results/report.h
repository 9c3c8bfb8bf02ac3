/* report: what `bifocal report SWEEP [-o FILE.html] [--json] [--baseline
 * F=V] [--db FILE]` writes (its command line is cli/cmd_results.c): one
 * self-contained HTML file (every script, style and datum
 * inline) with the structure-gap figure, training-loss curves, the learned
 * frequencies, the comparison table and verdicts, the per-job table and the
 * sweep file; or, with --json, the report's data alone (docs/results.md
 * describes it): the front-end in results/web/ draws from that JSON. */
#ifndef BF_REPORT_H
#define BF_REPORT_H

#include <stdio.h>
#include <jansson.h>

#include "session.h"
#include "source.h"
#include "sweep_view.h"

/* The parts of the report that need no curves, which the dashboard's sweep
 * page shows too: sweep, varying, fields, groups, train_depths and compare
 * (the rows of bf_compare_rows_of_facts, taken over).  New reference. */
json_t *bf_report_summary(const bf_sweep_view *v, json_t *compare);

/* Writes the report of the sweep (its jobs `where` selects, grouped by
 * `by`, against baseline) to the file output: the HTML page, or with
 * as_json its data alone.  0, or 1 after printing why not. */
int bf_report_write(bf_source *src, int64_t sweep_id, const char *by,
                    const char *where, const char *baseline,
                    const char *output, int as_json);

#endif
