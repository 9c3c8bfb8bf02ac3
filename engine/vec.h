/* The dispatch level's vector: GCC's generic vector of BF_VEC_LANES floats,
 * one register of the instruction set this copy is compiled for (4 SSE2,
 * 8 AVX2, 16 AVX-512), with its loads, stores and in-register transpose.
 * Included only by the per-level kernel files (layers.c, gemm.c;
 * engine/meson.build), where the level's flags decide the width. */
#ifndef BF_VEC_H
#define BF_VEC_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define BF_VEC_LANES 16
#elif defined(__AVX2__)
#define BF_VEC_LANES 8
#else
#define BF_VEC_LANES 4
#endif

typedef float bf_vec __attribute__((vector_size(BF_VEC_LANES * sizeof(float))));
/* The level's vectors of 32-bit integers, lane for lane with bf_vec: the
 * masks its comparisons give, and the bits of its floats. */
typedef int32_t bf_ivec __attribute__((vector_size(sizeof(bf_vec))));
typedef uint32_t bf_uvec __attribute__((vector_size(sizeof(bf_vec))));

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

/* a > b ? a : b and a < b ? a : b, lane by lane, as x86's maxps and
 * minps take them (b where either is NaN): one instruction each, where
 * GCC lowers the same selects on generic vectors (and bf_expf's clamp in a
 * loop it vectorises) to compares and masked moves.  BF_VEC_PS(op, a, b)
 * is the level's _mm*_op_ps. */
#if BF_VEC_LANES == 16
#define BF_VEC_PS(op, a, b) ((bf_vec)_mm512_##op##_ps((__m512)(a), (__m512)(b)))
#elif BF_VEC_LANES == 8
#define BF_VEC_PS(op, a, b) ((bf_vec)_mm256_##op##_ps((__m256)(a), (__m256)(b)))
#else
#define BF_VEC_PS(op, a, b) ((bf_vec)_mm_##op##_ps((__m128)(a), (__m128)(b)))
#endif

static inline __attribute__((always_inline)) bf_vec bf_vec_max(bf_vec a,
                                                               bf_vec b)
{
    return BF_VEC_PS(max, a, b);
}

static inline __attribute__((always_inline)) bf_vec bf_vec_min(bf_vec a,
                                                               bf_vec b)
{
    return BF_VEC_PS(min, a, b);
}

/* Lane index lists, one entry per lane l: BF_VEC_LANE_LIST(F, h) is
 * F(l, h) for every lane, as __builtin_shufflevector wants its indices
 * (constants, one argument each; GCC 12 and clang both have it, while
 * GCC's own __builtin_shuffle is not in clang, which builds the fuzzers),
 * and BF_VEC_FOR_STEPS(M, x) runs M(x, h) for h = BF_VEC_LANES/2, ..., 2,
 * 1 (log2(BF_VEC_LANES) steps, halving). */
#if BF_VEC_LANES == 16
#define BF_VEC_LANE_LIST(F, h)                                                 \
    F(0, h), F(1, h), F(2, h), F(3, h), F(4, h), F(5, h), F(6, h), F(7, h),    \
    F(8, h), F(9, h), F(10, h), F(11, h), F(12, h), F(13, h), F(14, h),        \
    F(15, h)
#define BF_VEC_FOR_STEPS(M, x) M(x, 8) M(x, 4) M(x, 2) M(x, 1)
#elif BF_VEC_LANES == 8
#define BF_VEC_LANE_LIST(F, h)                                                 \
    F(0, h), F(1, h), F(2, h), F(3, h), F(4, h), F(5, h), F(6, h), F(7, h)
#define BF_VEC_FOR_STEPS(M, x) M(x, 4) M(x, 2) M(x, 1)
#else
#define BF_VEC_LANE_LIST(F, h) F(0, h), F(1, h), F(2, h), F(3, h)
#define BF_VEC_FOR_STEPS(M, x) M(x, 2) M(x, 1)
#endif

/* The in-register transpose of BF_VEC_LANES rows: at step h rows i and
 * i + h (i & h == 0) swap their h-lane chunks across the diagonal,
 *   row i'     chunk c = c even ? row i chunk c     : row i+h chunk c-1
 *   row i+h'   chunk c = c even ? row i chunk c+1   : row i+h chunk c
 * (a lane index of BF_VEC_LANES or more reads the second vector, row
 * i+h), so that after the last step row d holds column d. */
#define BF_VEC_T_LO(l, h) ((l) / (h) % 2 == 0 ? (l) : BF_VEC_LANES + (l) - (h))
#define BF_VEC_T_HI(l, h) ((l) / (h) % 2 == 0 ? (l) + (h) : BF_VEC_LANES + (l))
#define BF_VEC_T_STEP(rows, h)                                                 \
    for (int i = 0; i < BF_VEC_LANES; i++)                                     \
        if (!(i & (h))) {                                                      \
            bf_vec a_ = (rows)[i], b_ = (rows)[i + (h)];                       \
            (rows)[i] = __builtin_shufflevector(                               \
                a_, b_, BF_VEC_LANE_LIST(BF_VEC_T_LO, h));                     \
            (rows)[i + (h)] = __builtin_shufflevector(                         \
                a_, b_, BF_VEC_LANE_LIST(BF_VEC_T_HI, h));                     \
        }

/* rows [BF_VEC_LANES] transposed in place. */
static inline void bf_vec_transpose(bf_vec rows[BF_VEC_LANES])
{
    BF_VEC_FOR_STEPS(BF_VEC_T_STEP, rows)
}

/* The transpose's steps with each pair's two results combined (COMBINE,
 * a macro of two vectors) instead of kept: step h leaves h vectors,
 * vector i's lanes holding partial results of the rows whose index is i
 * plus the lane's bits at and above h. */
#define BF_VEC_REDUCE_STEP(rows, h, COMBINE)                                   \
    for (int i = 0; i < (h); i++) {                                            \
        bf_vec a_ = (rows)[i], b_ = (rows)[i + (h)];                           \
        (rows)[i] = COMBINE(                                                   \
            __builtin_shufflevector(a_, b_, BF_VEC_LANE_LIST(BF_VEC_T_LO, h)), \
            __builtin_shufflevector(a_, b_, BF_VEC_LANE_LIST(BF_VEC_T_HI, h)));\
    }
#define BF_VEC_ADD(x, y) ((x) + (y))
#define BF_VEC_SUMS_STEP(rows, h) BF_VEC_REDUCE_STEP(rows, h, BF_VEC_ADD)

/* Lane r: the sum of rows[r]'s lanes, for all BF_VEC_LANES rows at once
 * (rows is overwritten): 2 shuffles and an add per row, where summing
 * each row alone takes log2(BF_VEC_LANES) dependent steps or, as GCC
 * lowers an `omp simd` reduction, a scalar add a lane through the
 * stack. */
static inline bf_vec bf_vec_row_sums(bf_vec rows[BF_VEC_LANES])
{
    BF_VEC_FOR_STEPS(BF_VEC_SUMS_STEP, rows)
    return rows[0];
}

#endif
