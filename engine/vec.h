/* The dispatch level's vector: GCC's generic vector of BF_VEC_LANES floats,
 * one register of the instruction set this copy is compiled for (4 SSE2,
 * 8 AVX2, 16 AVX-512).  Included only by the per-level kernel files
 * (layers.c, gemm.c; engine/meson.build), where the level's flags decide
 * the width. */
#ifndef BF_VEC_H
#define BF_VEC_H

#include <string.h>

#if defined(__AVX512F__)
#define BF_VEC_LANES 16
#elif defined(__AVX2__)
#define BF_VEC_LANES 8
#else
#define BF_VEC_LANES 4
#endif

typedef float bf_vec __attribute__((vector_size(BF_VEC_LANES * sizeof(float))));

/* One unaligned load or store: a fixed-size memcpy, which GCC lowers to a
 * single vector move. */
static inline __attribute__((always_inline)) bf_vec bf_vec_load(const float *p)
{
    bf_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void bf_vec_store(float *p,
                                                               bf_vec v)
{
    memcpy(p, &v, sizeof v);
}

#endif
