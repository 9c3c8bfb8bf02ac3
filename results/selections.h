/* selections: what a stage's `select:` chose in each cell of its search
 * (docs/sweeps.md), as `bifocal compare` and the report show it: from the
 * rows of the trial_selections view (docs/schema.md). */
#ifndef BF_SELECTIONS_H
#define BF_SELECTIONS_H

#include <stdint.h>
#include <stdio.h>
#include <jansson.h>

#include "source.h"

/* The sweep's selections, one object per cell (new reference):
 * {stage, cell (its grid/zip values: "rope=spectral"), metric, eval_depth,
 *  chosen: [trial...], runners_up: [trial...], taken_by: [job ids of a
 *  later stage trained with the chosen values], pruned: [{job_id, trial,
 *  rung, value (the metric's there), values}: the trials its prune rule
 *  stopped, from the search_trials view], text}, a trial being {job_id,
 * trial, value, values: {field: value}}.  An empty array without
 * selections or in a database file older than the view; NULL after
 * printing the problem. */
json_t *bf_selections_read(bf_source *src, int64_t sweep_id);

/* "Selections:" and each cell's text on out; nothing for none. */
void bf_selections_print(FILE *out, const json_t *cells);

#endif
