/* Matrix products of the model's linear layers, on the level's own vectors
 * (vec.h): the shapes the studies train (K = 64 to 1024 channels, a few
 * hundred to a few thousand rows), at which OpenBLAS's copies of both
 * operands into packed panels cost more than they save.
 *
 * gemm.c is compiled once per dispatch level beside layers.c, with
 * BF_GEMM naming that level's copy (engine/meson.build): layers.c calls
 * its own level's copy by that name, and every level's table carries it
 * (layers.h: bf_gemm, the level in use).  Like every kernel it allocates
 * nothing: the one operand it copies, b, goes a panel at a time through
 * the stack. */
#ifndef BF_GEMM_H
#define BF_GEMM_H

#include <stddef.h>

/* A strided view of a matrix: element (i, j) at p[i * rs + j * cs], so a
 * row-major matrix is {p, ld, 1} and its transpose {p, 1, ld}. */
typedef struct bf_mat {
    const float *p;
    size_t rs, cs;
} bf_mat;

/* c [M, N] (rows ldc apart) = init + a [M, K] @ b [K, N], where row i of
 * init is r's row i (r.p NULL: zeros; r.p may be c itself, to add to it)
 * plus bias [N] (NULL: none); K may be 0, which leaves c = init.  a and b
 * each have unit stride along one of their two directions (row-major or
 * transposed).
 *
 * Returns 0, or -1 without touching c when N is not a whole number of the
 * level's vectors or a stride is not as above: the caller then takes
 * cblas.  Deterministic: the sums run in one order for given shapes and
 * level. */
typedef int bf_gemm_fn(float *c, size_t ldc, bf_mat a, bf_mat b, bf_mat r,
                       const float *bias, int M, int N, int K);

#ifdef BF_GEMM
bf_gemm_fn BF_GEMM; /* this level's copy, in the per-level files */
#endif

#endif
