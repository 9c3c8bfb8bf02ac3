/* data: the exact examples the built-in trainer learns and is evaluated
 * on, printed for another trainer (`bifocal-worker data`, docs/trainers.md),
 * so it needs no second implementation of the tasks. */
#ifndef BF_DATA_H
#define BF_DATA_H

#include <stdio.h>

#include "job_config.h"

/* What bf_data_print prints: OR of these. */
enum {
    BF_DATA_TRAIN = 1,      /* every training row */
    BF_DATA_EVAL = 2,       /* every held-out example */
    BF_DATA_MODEL = 4,      /* the model and optimiser the job defines */
};

/* Prints to out, one JSON object per line: with BF_DATA_MODEL first one
 * line (split "model": config, the job's every field with its defaults,
 * then vocab_size, spectral_heads, prope_pairs, and optimizer: beta1,
 * beta2, eps, min_lr_fraction), so another trainer builds the same model
 * from this code's own facts; with BF_DATA_TRAIN, every row of optimizer
 * steps [from_step, to_step) (split "train": step, row, index, input,
 * target, positions); with BF_DATA_EVAL, every held-out example of each
 * eval depth (split "eval": depth, index, input, target).  Returns 0, or
 * -1 on a write error. */
int bf_data_print(FILE *out, const bf_job_config *cfg, long from_step,
                  long to_step, int what);

#endif
