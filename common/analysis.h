/* The `analysis:` block of a sweep file: how its comparisons are to be read.
 *
 *   analysis:
 *     primary: {metric: loss, eval_depth: 8}  # optional: the primary family
 *     baseline: {rope: rope}                  # optional: the baseline group
 *                                             # ({label: rope}: a zip entry)
 *     equivalence_margin: 0.10                # optional, default 0.10
 *     alpha: 0.05                             # optional, default 0.05
 *
 * primary names the comparisons a study was run for (metric loss or
 * accuracy, at one eval depth, or at every depth without eval_depth): Holm
 * controls the family-wise error within them, Benjamini-Hochberg the false
 * discovery rate over every other comparison.  baseline maps swept fields
 * to the values of the group every other group is compared with, or names
 * a zip entry by its label (`label: [nope, rope]` in a zip; docs/sweeps.md)
 * to stand for the values of that entry.  The
 * equivalence margin is a relative one on the ratio to the baseline (0.10:
 * a variant within ×0.9..×1/0.9 of it is equivalent: symmetric on the log
 * scale, so that swapping variant and baseline keeps the verdict, as
 * bioequivalence's ×0.8..×1.25 is; bf_analysis_log_margin); alpha the level
 * of every test.
 *
 * This module checks the block on its own (types, ranges, job-config
 * fields and values); the sweep parser (server/sweep/sweep.c) checks it
 * against the sweep (a baseline label names a zip entry, whose values
 * replace it; a baseline value is one the sweep sweeps; some job evaluates
 * at the primary depth) and the store keeps it in the
 * `sweep_analysis` table (docs/schema.md), read back by the client. */
#ifndef BF_ANALYSIS_H
#define BF_ANALYSIS_H

#include <jansson.h>

#include "bf_error.h"

#define BF_ANALYSIS_MARGIN 0.10     /* default equivalence_margin */
#define BF_ANALYSIS_ALPHA 0.05      /* default alpha */

typedef enum bf_analysis_metric {
    BF_ANALYSIS_LOSS,
    BF_ANALYSIS_ACCURACY,
} bf_analysis_metric;

/* A parsed block.  baseline and baseline_label are owned
 * (bf_analysis_free). */
typedef struct bf_analysis {
    int has_primary;                 /* the block names a primary family */
    bf_analysis_metric primary_metric;
    int primary_eval_depth;          /* 0: every eval depth */
    json_t *baseline;                /* {field: canonical value}, or NULL */
    /* baseline's `label`, the name of a zip entry: only the sweep file
     * knows its values, so the sweep parser moves them into baseline and
     * frees this (NULL from then on, and in every stored block) */
    char *baseline_label;
    double equivalence_margin;       /* in (0, 1) */
    double alpha;                    /* in (0, 0.5] */
} bf_analysis;

/* No primary family, no baseline, the default margin and alpha: what a
 * sweep without the block gets. */
void bf_analysis_defaults(bf_analysis *a);

/* Fills *a from the block (the value of `analysis:`).  file and lines (the
 * line table of the block, bf_yaml_lines_subtree(lines, "/analysis"); may
 * be NULL) locate errors, which name the field ("analysis.primary.metric").
 * On error *a holds nothing to free. */
int bf_analysis_parse(bf_analysis *a, const json_t *block, const char *file,
                      const json_t *lines, bf_error *err);

/* The equivalence region's half-width on the log-ratio scale, -log(1 -
 * margin): equivalent means |log(ratio)| below it.  Every test of
 * equivalence (compare's TOST, adaptive seeds' confidence sequence) and
 * every plan for one takes the region from here. */
double bf_analysis_log_margin(double margin);

/* "loss" or "accuracy". */
const char *bf_analysis_metric_name(bf_analysis_metric m);

/* Fills *a from a row of the sweep_analysis table as the client's result
 * views give it (an object of its columns; baseline as JSON text), or the
 * defaults for NULL (a sweep without the block).  0, or -1 when the row
 * is not one the store writes (*a then holds the defaults). */
int bf_analysis_from_row(bf_analysis *a, const json_t *row);

/* The block in its canonical form (new reference): every key, defaults
 * filled in, as `compare --format json` prints it. */
json_t *bf_analysis_to_json(const bf_analysis *a);

void bf_analysis_free(bf_analysis *a);

#endif
