/* report: `bifocal report SWEEP [-o FILE.html] [--json] [--baseline F=V]
 * [--db FILE]`: one self-contained HTML file (every script, style and datum
 * inline) with the structure-gap figure, training-loss curves, the learned
 * frequencies, the comparison table and verdicts, the per-job table and the
 * sweep file; or, with --json, the report's data alone (docs/results.md
 * describes it): the front-end in client/web/ draws from that JSON. */
#ifndef BF_REPORT_H
#define BF_REPORT_H

#include <stdio.h>
#include <jansson.h>

#include "session.h"
#include "source.h"

/* The report data of a sweep, or of its jobs matching where (NULL: all;
 * see bf_sweep_view_load); NULL after printing the problem. */
json_t *bf_report_data(bf_source *src, int64_t sweep_id, const char *where,
                       const char *baseline);

/* Writes the page: the template with the embedded front-end and data. */
int bf_report_write_html(FILE *out, const json_t *data);

/* A bf_client_command. */
int bf_client_cmd_report(bf_client *cl, int argc, char **argv);

#endif
