/* Matrix products for the linear layers; see gemm.h.
 *
 * The register-tile scheme of Goto & van de Geijn (2008, "Anatomy of
 * high-performance matrix multiplication") and BLIS's micro-kernel: a tile
 * holds GEMM_MR rows of c by GEMM_NR vectors of columns in registers and
 * runs down k, broadcasting one element of a per row and loading GEMM_NR
 * vectors of b per step.
 *
 * Unlike OpenBLAS, a is never copied.  The model's a is row-major
 * (forward, dinp) or a transposed view whose GEMM_MR elements per k sit
 * side by side in one row (dw = inp^T @ dout); both are read in place.
 * b is copied into a stack panel of GEMM_KC x GEMM_NC, a panel at a time:
 * transposed, so that a step's vectors are contiguous, and row-major too,
 * because rows OC floats apart fall into a few L1 sets (read in place, the
 * wide layers' forward products trail OpenBLAS's: bench_gemm shows it).
 * A row-major b is copied by the first row tile, which reads it in place
 * and stores each row it loads into the panel, so that the loads from L3
 * (a weight, every micro-batch) overlap that tile's products instead of
 * stalling a copy loop.  k runs in blocks of GEMM_KC, so a panel of b
 * stays in L1 while every row tile of a passes over it; a's rows run
 * whole, since blocking them for L2 gained nothing.
 * bench/bench_gemm.c measures it against OpenBLAS and
 * bench/bench_train_pair.sh on whole steps (docs/training.md). */
#include "gemm.h"
#include "vec.h"

#ifndef BF_GEMM
#error "BF_GEMM names this level's copy (engine/meson.build)"
#endif

/* Rows of a tile: GEMM_MR x GEMM_NR accumulators, the GEMM_NR vectors of
 * b and one broadcast fit the level's registers (16 on SSE2 and AVX2: 6
 * rows, 15 in use; 32 on AVX-512: 8 rows, 19 in use, the rest free for
 * the loads in flight). */
#if BF_VEC_LANES == 16
#define GEMM_MR 8
#else
#define GEMM_MR 6
#endif
enum {
    GEMM_NR = 2,                        /* vectors of columns in a tile */
    GEMM_NC = GEMM_NR * BF_VEC_LANES,   /* columns in a tile */
    GEMM_KC = 256,                      /* k per block: the b panel's rows */
};

/* c [mr, nr vectors] = init + a [mr, kc] @ b [kc, nr vectors], b's rows
 * ldb apart; init as in bf_gemm (r rows ldr apart).  pack, where not
 * NULL, gets each row of b as it is loaded (rows GEMM_NC apart): the
 * panel's copy made by the first tile that reads it.  mr, nr and whether
 * pack is NULL are constants wherever this is inlined, so the
 * accumulators are registers. */
static inline __attribute__((always_inline)) void
gemm_tile(int mr, int nr, int kc, const float *a, size_t a_rs, size_t a_ks,
          const float *b, size_t ldb, float *pack, float *c, size_t ldc,
          const float *r, size_t ldr, const float *bias)
{
    bf_vec acc[GEMM_MR][GEMM_NR];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            acc[i][j] = bias ? bf_vec_load(bias + j * BF_VEC_LANES)
                             : (bf_vec){0};
    /* r's rows are added at the end, fetched meanwhile: where r is far
     * (dw's gradient, from L3 every micro-batch), starting the sums from
     * them would make every multiply-add of the tile wait on them */
    for (int i = 0; r && i < mr; i++) {
        __builtin_prefetch(r + i * ldr);
        __builtin_prefetch(r + i * ldr + nr * BF_VEC_LANES - 1);
    }
    for (int k = 0; k < kc; k++) {
        bf_vec bk[GEMM_NR];
        for (int j = 0; j < nr; j++) {
            bk[j] = bf_vec_load(b + k * ldb + j * BF_VEC_LANES);
            if (pack)
                bf_vec_store(pack + k * GEMM_NC + j * BF_VEC_LANES, bk[j]);
        }
        for (int i = 0; i < mr; i++) {
            float ai = a[i * a_rs + k * a_ks];
            for (int j = 0; j < nr; j++)
                acc[i][j] += ai * bk[j];
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            if (r)
                acc[i][j] += bf_vec_load(r + i * ldr + j * BF_VEC_LANES);
            bf_vec_store(c + i * ldc + j * BF_VEC_LANES, acc[i][j]);
        }
}

/* gemm_tile with mr and nr as constants: the full tile, or the last rows
 * (M not a multiple of GEMM_MR) and the last single vector of columns. */
static inline __attribute__((always_inline)) void
gemm_tile_any(int mr, int nr, int kc, const float *a, size_t a_rs,
              size_t a_ks, const float *b, size_t ldb, float *pack, float *c,
              size_t ldc, const float *r, size_t ldr, const float *bias)
{
#define GEMM_TILE(m)                                                           \
    case m:                                                                    \
        if (nr == GEMM_NR)                                                     \
            gemm_tile(m, GEMM_NR, kc, a, a_rs, a_ks, b, ldb, pack, c, ldc, r,  \
                      ldr, bias);                                              \
        else                                                                   \
            gemm_tile(m, 1, kc, a, a_rs, a_ks, b, ldb, pack, c, ldc, r, ldr,   \
                      bias);                                                   \
        return;
    switch (mr) {
        GEMM_TILE(1)
        GEMM_TILE(2)
        GEMM_TILE(3)
        GEMM_TILE(4)
        GEMM_TILE(5)
        GEMM_TILE(6)
#if GEMM_MR == 8
        GEMM_TILE(7)
        GEMM_TILE(8)
#endif
    }
#undef GEMM_TILE
}

/* panel [kc, GEMM_NC] = transposed b's rows k0.. and columns j0.. (nc of
 * them; b has unit stride down k), a block of BF_VEC_LANES x BF_VEC_LANES
 * at a time, transposed in registers (a scalar copy with a strided side
 * is slow enough to show in a step's profile). */
static void gemm_pack_b(float *restrict panel, bf_mat b, int k0, int kc,
                        int j0, int nc)
{
    /* nc is whole vectors (bf_gemm); k in whole blocks of BF_VEC_LANES,
     * then one at a time */
    int kv = kc - kc % BF_VEC_LANES;
    for (int jb = 0; jb < nc; jb += BF_VEC_LANES) {
        const float *col = b.p + (size_t)(j0 + jb) * b.cs + (size_t)k0;
        for (int kb = 0; kb < kv; kb += BF_VEC_LANES) {
            bf_vec rows[BF_VEC_LANES];
            for (int j = 0; j < BF_VEC_LANES; j++)
                rows[j] = bf_vec_load(col + (size_t)j * b.cs + kb);
            bf_vec_transpose(rows);
            for (int k = 0; k < BF_VEC_LANES; k++)
                bf_vec_store(panel + (size_t)(kb + k) * GEMM_NC + jb, rows[k]);
        }
        for (int k = kv; k < kc; k++)
            for (int j = 0; j < BF_VEC_LANES; j++)
                panel[(size_t)k * GEMM_NC + jb + j] = col[(size_t)j * b.cs + k];
    }
}

/* The blocks of bf_gemm, with a's strides passed as they are known: one
 * of them the constant 1 at each call, so the tiles address a's elements
 * from one pointer (a run-time pair of strides costs every broadcast its
 * own index arithmetic, out of registers). */
static inline __attribute__((always_inline)) void
gemm_blocks(float *c, size_t ldc, const float *a, size_t a_rs, size_t a_ks,
            bf_mat b, bf_mat r, const float *bias, int M, int N, int K)
{
    float panel[GEMM_KC * GEMM_NC];
    /* k0 == 0 runs even when K is 0: c is then init */
    for (int k0 = 0; k0 == 0 || k0 < K; k0 += GEMM_KC) {
        int kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
        /* the first block starts from init, the rest from c */
        const float *r0 = k0 == 0 ? r.p : c;
        size_t ldr = k0 == 0 ? r.rs : ldc;
        const float *bias0 = k0 == 0 ? bias : NULL;
        const float *a_k = a + (size_t)k0 * a_ks;
        for (int j0 = 0; j0 < N; j0 += GEMM_NC) {
            int nc = N - j0 < GEMM_NC ? N - j0 : GEMM_NC;
            int nr = nc / BF_VEC_LANES;
            float *c_j = c + j0;
            const float *r_j = r0 ? r0 + j0 : NULL;
            const float *bias_j = bias0 ? bias0 + j0 : NULL;
            int i0 = 0;
            if (b.cs == 1) {
                /* row-major b: the first row tile reads it in place and
                 * leaves the panel behind, so that the loads from far
                 * away (a weight, from L3) overlap its products */
                int mr = M < GEMM_MR ? M : GEMM_MR;
                gemm_tile_any(mr, nr, kc, a_k, a_rs, a_ks,
                              b.p + (size_t)k0 * b.rs + j0, b.rs, panel, c_j,
                              ldc, r_j, ldr, bias_j);
                i0 = mr;
            } else {
                gemm_pack_b(panel, b, k0, kc, j0, nc);
            }
            for (; i0 < M; i0 += GEMM_MR) {
                int mr = M - i0 < GEMM_MR ? M - i0 : GEMM_MR;
                gemm_tile_any(mr, nr, kc, a_k + (size_t)i0 * a_rs, a_rs, a_ks,
                              panel, GEMM_NC, NULL, c_j + (size_t)i0 * ldc,
                              ldc, r_j ? r_j + (size_t)i0 * ldr : NULL, ldr,
                              bias_j);
            }
        }
    }
}

int BF_GEMM(float *c, size_t ldc, bf_mat a, bf_mat b, bf_mat r,
            const float *bias, int M, int N, int K)
{
    if (N % BF_VEC_LANES != 0 || (b.cs != 1 && b.rs != 1))
        return -1;
    if (a.cs == 1)
        gemm_blocks(c, ldc, a.p, a.rs, 1, b, r, bias, M, N, K);
    else if (a.rs == 1)
        gemm_blocks(c, ldc, a.p, 1, a.cs, b, r, bias, M, N, K);
    else
        return -1;
    return 0;
}
