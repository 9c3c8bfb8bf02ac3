/* `bifocal-worker eval`: scores given token sequences with a checkpoint.
 *
 * Input: one JSON object per line, {"input": [ids], "target": [ids or -1]},
 * both of the same length (1..seq_len of the checkpoint's job), ids below
 * the task's vocabulary; -1 marks a position that is not scored.  Blank
 * lines are skipped; a line with a NUL byte or anything after its object,
 * or longer than 1024 + 32 * seq_len bytes (refused as it is read), is an
 * error.
 * Output (one JSON object per line):
 *   {"loss": x, "targets": n}   per input line: mean cross-entropy over its
 *                               n targets (null when n = 0)
 *   {"mean_loss": x, "targets": total, "lines": n}   at the end: the mean
 *                               over all target tokens of all lines */
#ifndef BF_SCORE_H
#define BF_SCORE_H

#include <stdio.h>

#include "bf_error.h"

/* Returns 0, or -1 with err naming the file, line and field at fault (the
 * lines before a bad one have already been printed). */
int bf_score_file(const char *checkpoint_path, const char *input_path,
                  FILE *out, bf_error *err);

#endif
