/* Synthetic formal-language tasks, generated on the fly.
 *
 * Every example is a pure function of (job seed, stream, example index): no
 * hidden state, so the data never depends on how many ranks share a batch,
 * and a resumed run sees exactly the examples it would have seen.
 *
 * Examples are next-token-prediction rows of fixed length T:
 *   inputs[t]  = token at position t (BF_TOK_PAD after the sequence ends)
 *   targets[t] = token the model must predict at position t (i.e. the
 *                sequence token t+1) when t+1 lies in the answer part, else -1.
 * So the loss is the mean cross-entropy over the answer tokens only.
 *
 * Tasks (cfg->task), each with a recursion-depth knob:
 *   dyck     prefix of a Dyck-k word with exactly `depth` unclosed brackets;
 *            answer = the closing sequence, then END.
 *   counter  `depth` loop iterations over items, some marked; answer = number
 *            of marked items modulo cfg->modulus, then END.
 *   modarith nested expression over digits with + and * mod cfg->modulus,
 *            nesting depth `depth`; answer = its value, then END.
 *   code     a snippet of real source code from cfg->code_dir with exactly
 *            `depth` brackets open (code_corpus.h); answer = the closing
 *            brackets, innermost first, then END.  Training snippets come
 *            from the training files, evaluation ones from the held-out
 *            files.  A code config must have passed bf_job_config_validate,
 *            which loads the corpus (once per process). */
#ifndef BF_TASKS_H
#define BF_TASKS_H

#include <stdint.h>

#include "job_config.h"   /* and task_kind.h: bf_task_max_len */
#include "vocab.h"        /* the token ids, bf_vocab_size */

/* The first training example of optimizer step `step`: step s trains on
 * examples [s * batch_size, (s + 1) * batch_size), however many ranks
 * share them, so the data stream is fixed by the step alone. */
uint64_t bf_task_step_first(const bf_job_config *cfg, int64_t step);

/* Training example `index`: its depth is drawn uniformly from 1..cfg->depth
 * (as a function of seed and index).  Returns the depth used. */
int bf_task_train_example(const bf_job_config *cfg, uint64_t index,
                          int *inputs, int *targets, int T);

/* Rotary positions of training example `index`: with cfg->random_positions
 * N > 0, a sorted random subset of T distinct positions of [0, N) drawn
 * from the example's own key (a pure function of seed and index, like the
 * example); with N = 0, 0..T-1. */
void bf_task_train_positions(const bf_job_config *cfg, uint64_t index,
                             int *positions, int T);

/* Held-out example `index` (0..eval_examples-1) at exactly `depth`; drawn
 * from a stream disjoint from training, so the set per depth is fixed. */
void bf_task_eval_example(const bf_job_config *cfg, int depth, uint64_t index,
                          int *inputs, int *targets, int T);

/* Recursion depth of a generated sequence (tokens up to the answer), as the
 * task defines it: used by tests to prove examples have the requested depth. */
int bf_task_measure_depth(const bf_job_config *cfg, const int *inputs, int T);

#endif
