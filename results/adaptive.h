/* adaptive: the comparisons of a sweep's adaptive seeds (`seeds: {min,
 * max, until: decided}`, docs/sweeps.md) in words, as `bifocal watch`, the
 * report and the dashboard show them: from rows of the adaptive_seeds view
 * (docs/schema.md). */
#ifndef BF_ADAPTIVE_H
#define BF_ADAPTIVE_H

#include <stdint.h>
#include <jansson.h>

#include "source.h"

/* One comparison (a row of adaptive_seeds): "lr=1e-05 vs lr=0.003, depth
 * 4: decided higher at seed 4, loss ratio in [×1.31, ×1.62]", or "...:
 * still running, 3 seeds of at most 20, loss ratio not bounded yet"; with
 * rule sign "median loss ratio in [...] (95% sequence, sign rule)"; with
 * rule t and log ratios whose skewness is past twice its standard error
 * "...; log ratios look skewed (G1 2.1, 2.6 standard errors from 0 over
 * 12 pairs): the t rule assumes Gaussian ones, consider seeds.rule: sign".
 * Caller frees. */
char *bf_adaptive_line(const json_t *row);

/* The row's labels, state and interval by name, for JSON readers (the
 * report, the dashboard, compare): {variant, baseline, eval_depth, state,
 * seeds, seeds_max, decided_seed (null while running), ratio_low,
 * ratio_high (null while unbounded), alpha, rule ("t" or "sign"),
 * skewness (the log ratios' G1, null before 3 pairs), skewed (true when the
 * line gives the hint above), text (bf_adaptive_line), decision (text less
 * the labels and depth)}.  New reference. */
json_t *bf_adaptive_json(const json_t *row);

/* The sweep's comparisons as bf_adaptive_json objects, from src (an array,
 * empty without adaptive seeds or in a database file older than the
 * adaptive_seeds view); NULL after printing the problem. */
json_t *bf_adaptive_read(bf_source *src, int64_t sweep_id);

/* The sweep's comparisons as stored (rows of adaptive_seeds, with
 * variant_config and baseline_config parsed into objects) for
 * bf_adaptive_find: an empty array without adaptive seeds or in a
 * database file older than the view; NULL after printing the problem. */
json_t *bf_adaptive_rows(bf_source *src, int64_t sweep_id);

/* The comparison among rows (bf_adaptive_rows) of the cells whose configs
 * less the seed are variant and baseline, in stage (NULL or "": none), at
 * eval_depth, or at any depth when eval_depth is 0; NULL if none
 * (borrowed). */
const json_t *bf_adaptive_find(const json_t *rows, const json_t *variant,
                               const json_t *baseline, const char *stage,
                               int eval_depth);

#endif
