/* data: the exact examples the built-in trainer learns and is evaluated
 * on, printed for another trainer (`bifocal-worker data`, docs/trainers.md),
 * so it needs no second implementation of the tasks. */
#ifndef BF_DATA_H
#define BF_DATA_H

#include <stdio.h>

#include "job_config.h"

/* Prints to out, one JSON object per line: with `train`, every row of
 * optimizer steps [from_step, to_step) (split "train": step, row, index,
 * input, target, positions); with `eval`, every held-out example of each
 * eval depth (split "eval": depth, index, input, target).  Returns 0, or
 * -1 on a write error. */
int bf_data_print(FILE *out, const bf_job_config *cfg, long from_step,
                  long to_step, int train, int eval);

#endif
