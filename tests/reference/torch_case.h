/* The C side of tests/reference/torch_check.py: a case directory holds a
 * C model's parameters, a batch and the AdamW hyperparameters; the script
 * writes PyTorch's loss, gradients (of the checked model and of the fast
 * path bench_train times) and the parameters after one AdamW step there.
 * Used by tests/engine/test_model_torch (the C model against the checked
 * PyTorch model) and tests/reference/test_torch_fast (the fast path
 * against both).  Every function fails the running cmocka test on error. */
#ifndef TORCH_CASE_H
#define TORCH_CASE_H

#include <stddef.h>

#include "model.h"

#define TORCH_CASE_PYTHON "/usr/bin/python3"

/* Writes case.json, params.f32 (m's parameters) and batch.i32 (inputs,
 * targets, positions: B*T each) into dir, which must exist.  pos NULL:
 * 0..T-1 in every row, and PyTorch is told so (default_positions), as the
 * C model is, to take its shared-positions path. */
void torch_case_write(const char *dir, const bf_model *m,
                      const bf_adamw_hparams *hp, float grad_scale,
                      const int *inputs, const int *targets, const int *pos,
                      int B, int T);

/* Runs `python3 script dir...` and asserts it exits 0. */
void torch_case_run(const char *script, char *const *dirs, int n);

/* Reads exactly n floats from dir/name (a shorter or longer file fails). */
void torch_case_read_floats(const char *dir, const char *name, float *p,
                            size_t n);

/* ||a - b|| / ||b|| over n floats, or ||a - b|| when b is all zero. */
double torch_case_rel_diff(const float *a, const float *b, size_t n);

/* The tests' command line, `TEST PATH/torch_check.py`: returns the script
 * path; exits 2 with the usage on another command line, and 1, saying why,
 * when /usr/bin/python3 cannot import torch and numpy: the check is part
 * of the proof, never skipped. */
const char *torch_case_script(int argc, char **argv);

/* Removes the directory tree at root. */
void torch_case_remove_tree(const char *root);

#endif
