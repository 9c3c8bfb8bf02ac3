/* curves: the report's curves, downsampled while they are read so that a
 * sweep of millions of metric rows yields a few hundred points per group.
 *
 * Training loss: each job's steps fall into BF_CURVE_BUCKETS equal buckets
 * of its run (the job's mean loss per bucket) plus one bucket for its last
 * logged point, kept exactly; per group and bucket, the geometric mean
 * over seeds with its log-scale 95% interval (never below zero), and of
 * a group of one or two seeds each seed's bucket means.
 * Frequencies: per group and (layer, head, pair), omega / omega(first
 * recorded step) averaged over seeds in BF_FREQ_BUCKETS buckets (plus the
 * last point), and the first and last omega for the spectrum. */
#ifndef BF_CURVES_H
#define BF_CURVES_H

#include <jansson.h>

#include "source.h"
#include "sweep_view.h"

#define BF_CURVE_BUCKETS 200
#define BF_FREQ_BUCKETS 40

/* The config fields the curves read of a job (NULL-terminated): a view
 * that holds a job by id alone (bf_sweep_hold.alike) answers with its
 * group's first row, which has the same values. */
extern const char *const bf_curves_job_fields[];

/* [{group, step: [...], mean: [...], low: [...], high: [...], n: [...]}],
 * one per group with training loss; a group of one or two jobs also has
 * seeds: [[...] per job], each job's bucket means (null: none there),
 * which the report draws instead of a band.  NULL after printing the
 * problem. */
json_t *bf_curves_train_loss(const bf_sweep_view *v, bf_source *src);

/* [{group, step: [...], series: [{layer, head, pair, ratio: [...]}],
 *   spectrum: {pair: [...], initial: [...], final: [{layer, head,
 *   omega: [...]}]}}], one per group with learned frequencies. */
json_t *bf_curves_frequencies(const bf_sweep_view *v, bf_source *src);

#endif
