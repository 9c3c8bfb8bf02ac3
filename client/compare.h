/* compare: `bifocal compare SWEEP [--by FIELD,...] [--baseline FIELD=VALUE]
 * [--format table|csv|json] [--db FILE]`: seed statistics per group and
 * eval depth, and each group against its baseline (docs/results.md). */
#ifndef BF_COMPARE_H
#define BF_COMPARE_H

#include <jansson.h>

#include "session.h"
#include "source.h"
#include "sweep_view.h"

/* One object per (group, eval depth), as `compare --format json` prints
 * them.  baseline is "FIELD=VALUE" or NULL (rope=rope where the sweep has
 * it).  NULL after printing the problem (no succeeded job, bad baseline). */
json_t *bf_compare_rows(const bf_sweep_view *v, bf_source *src,
                        const char *baseline);

/* A bf_client_command. */
int bf_client_cmd_compare(bf_client *cl, int argc, char **argv);

#endif
