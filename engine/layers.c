/* Forward/backward pairs of the transformer's layers and AdamW's update;
 * see layers.h.
 *
 * Compiled once per dispatch level (engine/meson.build, isa.h) with
 * BF_KERNELS_TABLE naming the one symbol each copy exports, so every
 * function here is static.  Elementwise loops are written so GCC vectorises
 * them at each level's width: no calls into libm inside hot loops (bf_expf
 * below replaces expf/tanhf), reductions carry `omp simd` so they vectorise
 * without -ffast-math, and the file builds with -fno-trapping-math (no
 * code here reads the FP exception flags): with trapping math GCC does not
 * if-convert bf_expf's clamp and leaves every loop that calls it scalar. */
#include "layers.h"
#include "gemm.h"
#include "vec.h"

#ifndef BF_KERNELS_TABLE
#error "BF_KERNELS_TABLE names the table this copy exports (meson.build)"
#endif

#include <assert.h>
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define LN_EPS 1e-5f
#define GELU_SCALE 0.7978845608028654f  /* sqrt(2/pi) */
#define GELU_CUBIC 0.044715f

/* exp(x) for x in [-87, 88] (clamped outside): x = n ln2 + r, |r| <= ln2/2,
 * Cephes' degree-6 polynomial for e^r, 2^n built in the exponent bits.
 * About 1 ulp; branch-free so the loops that call it vectorise.
 * BF_EXP_PARTS is the arithmetic every form shares, bf_expf's on floats
 * and BF_VEC_EXP's on the level's vectors (GCC's vector extension takes
 * the same expressions): from the clamped x[0..n), n_biased (n rounded, by
 * adding and removing 1.5 * 2^23, as floorf would not vectorise; its low
 * mantissa bits then hold n itself) and p = e^r.  n values at a time
 * (at most BF_EXP_MAX_N; a constant wherever it is inlined), each step for
 * all of them before the next: a chain of about 20 dependent operations
 * a value, and n chains reach the core interleaved (GELU's forward and
 * the attention's softmax, below). */
#define BF_EXP_MIN -87.0f
#define BF_EXP_MAX 88.0f
#define BF_EXP_ROUND 12582912.0f  /* 1.5 * 2^23 */
#define BF_EXP_ROUND_BITS 0x4B400000u
#define BF_EXP_MAX_N 4
#define BF_EXP_EACH(n, ...)                                                    \
    for (int j_ = 0; j_ < (n); j_++)                                           \
        __VA_ARGS__;
#define BF_EXP_PARTS(x, n_biased, p, n)                                        \
    do {                                                                       \
        __typeof__((p)[0]) n_[BF_EXP_MAX_N], r_[BF_EXP_MAX_N];                 \
        BF_EXP_EACH(n, n_biased[j_] = x[j_] * 1.44269504088896341f +           \
                                      BF_EXP_ROUND)                            \
        BF_EXP_EACH(n, n_[j_] = n_biased[j_] - BF_EXP_ROUND)                   \
        BF_EXP_EACH(n, r_[j_] = x[j_] - n_[j_] * 0.693359375f +                \
                                n_[j_] * 2.12194440e-4f)                       \
        BF_EXP_EACH(n, p[j_] = r_[j_] * 1.9875691500e-4f + 1.3981999507e-3f)   \
        BF_EXP_EACH(n, p[j_] = p[j_] * r_[j_] + 8.3334519073e-3f)              \
        BF_EXP_EACH(n, p[j_] = p[j_] * r_[j_] + 4.1665795894e-2f)              \
        BF_EXP_EACH(n, p[j_] = p[j_] * r_[j_] + 1.6666665459e-1f)              \
        BF_EXP_EACH(n, p[j_] = p[j_] * r_[j_] + 5.0000001201e-1f)              \
        BF_EXP_EACH(n, p[j_] = p[j_] * r_[j_] * r_[j_] + r_[j_] + 1.0f)        \
    } while (0)

static inline float bf_expf(float x)
{
    /* ternaries, not fminf/fmaxf: those have NaN rules that keep GCC from
     * vectorising them */
    float xs[1] = {x < BF_EXP_MIN   ? BF_EXP_MIN
                   : x > BF_EXP_MAX ? BF_EXP_MAX
                                    : x};
    float n_biased[1], p[1];
    BF_EXP_PARTS(xs, n_biased, p, 1);
    /* 2^n built from n_biased's bits in unsigned arithmetic: a NaN x
     * (a diverged model) gives some scale and a NaN p, so NaN comes out,
     * without the undefined float-to-int conversion of NaN. */
    uint32_t bits;
    memcpy(&bits, n_biased, sizeof bits);
    bits = (bits - BF_EXP_ROUND_BITS + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p[0] * scale;
}

/* x[i] = bf_expf of each lane of x[i], i < n (BF_EXP_PARTS): the same
 * operations in the same order, the clamp as maxps and minps
 * (bf_vec_max: the same values, NaN included). */
#define BF_VEC_EXP(x, n)                                                       \
    do {                                                                       \
        bf_vec n_biased_[BF_EXP_MAX_N], p_[BF_EXP_MAX_N];                      \
        BF_EXP_EACH(n, x[j_] = bf_vec_min((bf_vec){0} + BF_EXP_MAX,            \
                                          bf_vec_max((bf_vec){0} + BF_EXP_MIN, \
                                                     x[j_])))                  \
        BF_EXP_PARTS(x, n_biased_, p_, n);                                     \
        BF_EXP_EACH(n, x[j_] = p_[j_] * (bf_vec)(((bf_uvec)n_biased_[j_] -     \
                                                  BF_EXP_ROUND_BITS + 127u)    \
                                                 << 23))                       \
    } while (0)

static void encoder_forward(float *out, const int *inp, const float *wte, int N,
                            int C)
{
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, wte + (size_t)inp[n] * C,
               (size_t)C * sizeof *out);
}

static void encoder_backward(float *dwte, const float *dout, const int *inp,
                             int N, int C)
{
    for (int n = 0; n < N; n++) {
        float *d = dwte + (size_t)inp[n] * C;
        const float *g = dout + (size_t)n * C;
        for (int i = 0; i < C; i++)
            d[i] += g[i];
    }
}

static void layernorm_apply(float *out, const float *inp, const float *mean,
                            const float *rstd, const float *w, const float *b,
                            int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        for (int i = 0; i < C; i++)
            y[i] = (x[i] - m) * s * w[i] + b[i];
    }
}

/* LayerNorm's row sums a block of BF_VEC_LANES rows at a time, where C is
 * whole vectors: each row's vectors added down to one, then the block's
 * rows summed all at once (bf_vec_row_sums).  Row by row, GCC lowers
 * each `omp simd` reduction to a scalar add a lane through the stack,
 * which at small C takes most of both kernels' time. */
static int ln_blocks(int N, int C)
{
    return C % BF_VEC_LANES == 0 ? N / BF_VEC_LANES * BF_VEC_LANES : 0;
}

/* mean, rstd of rows n0 .. n0 + BF_VEC_LANES - 1 of x [N, C]. */
static void ln_block_stats(float *mean, float *rstd, const float *x, int n0,
                           int C)
{
    bf_vec part[BF_VEC_LANES];
    for (int r = 0; r < BF_VEC_LANES; r++) {
        const float *row = x + (size_t)(n0 + r) * C;
        bf_vec acc = {0};
        for (int c = 0; c < C; c += BF_VEC_LANES)
            acc += bf_vec_load(row + c);
        part[r] = acc;
    }
    bf_vec m = bf_vec_row_sums(part) / (float)C;
    for (int r = 0; r < BF_VEC_LANES; r++) {
        const float *row = x + (size_t)(n0 + r) * C;
        bf_vec acc = {0};
        for (int c = 0; c < C; c += BF_VEC_LANES) {
            bf_vec d = bf_vec_load(row + c) - m[r];
            acc += d * d;
        }
        part[r] = acc;
    }
    bf_vec var = bf_vec_row_sums(part);
    for (int r = 0; r < BF_VEC_LANES; r++) {
        mean[n0 + r] = m[r];
        rstd[n0 + r] = 1.0f / sqrtf(var[r] / (float)C + LN_EPS);
    }
}

static void layernorm_forward(float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b,
                              int N, int C)
{
    int blocked = ln_blocks(N, C);
    for (int n0 = 0; n0 < blocked; n0 += BF_VEC_LANES)
        ln_block_stats(mean, rstd, inp, n0, C);
    for (int n = blocked; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int i = 0; i < C; i++)
            sum += x[i];
        float m = sum / (float)C;
        float var = 0.0f;
#pragma omp simd reduction(+ : var)
        for (int i = 0; i < C; i++)
            var += (x[i] - m) * (x[i] - m);
        mean[n] = m;
        rstd[n] = 1.0f / sqrtf(var / (float)C + LN_EPS);
    }
    layernorm_apply(out, inp, mean, rstd, w, b, N, C);
}

/* The two means LayerNorm's backward takes of each row n, of dnorm = w g
 * and of dnorm xhat, into dm[r] and dxm[r] for the block of
 * BF_VEC_LANES rows from n0 (C whole vectors). */
static void ln_block_grad_means(float *dm, float *dxm, const float *dout,
                                const float *inp, const float *w,
                                const float *mean, const float *rstd, int n0,
                                int C)
{
    bf_vec pd[BF_VEC_LANES], px[BF_VEC_LANES];
    for (int r = 0; r < BF_VEC_LANES; r++) {
        const float *x = inp + (size_t)(n0 + r) * C;
        const float *g = dout + (size_t)(n0 + r) * C;
        float m = mean[n0 + r], s = rstd[n0 + r];
        bf_vec ad = {0}, ax = {0};
        for (int c = 0; c < C; c += BF_VEC_LANES) {
            bf_vec dnorm = bf_vec_load(w + c) * bf_vec_load(g + c);
            ad += dnorm;
            ax += dnorm * ((bf_vec_load(x + c) - m) * s);
        }
        pd[r] = ad;
        px[r] = ax;
    }
    bf_vec vd = bf_vec_row_sums(pd) / (float)C;
    bf_vec vx = bf_vec_row_sums(px) / (float)C;
    for (int r = 0; r < BF_VEC_LANES; r++) {
        dm[r] = vd[r];
        dxm[r] = vx[r];
    }
}

/* Columns c0 .. c0 + nv vectors of a block's backward: dx of each row,
 * and db, dw += the block's column sums, summed in registers (nv, at
 * most LN_COLUMN_VECS, is a constant wherever this is inlined). */
enum { LN_COLUMN_VECS = 4 };
static inline __attribute__((always_inline)) void
ln_block_columns(float *restrict dinp, float *restrict dw,
                 float *restrict db, const float *dout, const float *inp,
                 const float *w, const float *mean, const float *rstd,
                 const float *dm, const float *dxm, int n0, int C, int c0,
                 int nv)
{
    bf_vec sb[LN_COLUMN_VECS] = {{0}}, sw[LN_COLUMN_VECS] = {{0}};
    for (int r = 0; r < BF_VEC_LANES; r++) {
        size_t row = (size_t)(n0 + r) * C + (size_t)c0;
        float m = mean[n0 + r], s = rstd[n0 + r];
        for (int v = 0; v < nv; v++) {
            size_t at = row + (size_t)v * BF_VEC_LANES;
            bf_vec g = bf_vec_load(dout + at);
            bf_vec xhat = (bf_vec_load(inp + at) - m) * s;
            bf_vec wv = bf_vec_load(w + c0 + v * BF_VEC_LANES);
            sb[v] += g;
            sw[v] += xhat * g;
            bf_vec_store(dinp + at, bf_vec_load(dinp + at) +
                                        (wv * g - dm[r] - xhat * dxm[r]) * s);
        }
    }
    for (int v = 0; v < nv; v++) {
        int c = c0 + v * BF_VEC_LANES;
        bf_vec_store(db + c, bf_vec_load(db + c) + sb[v]);
        bf_vec_store(dw + c, bf_vec_load(dw + c) + sw[v]);
    }
}

/* LayerNorm's backward of the block of BF_VEC_LANES rows from n0 (C
 * whole vectors), LN_COLUMN_VECS vectors of columns at a time: added
 * into db and dw row by row, each add would wait on the store of the row
 * before. */
static void ln_block_backward(float *restrict dinp, float *restrict dw,
                              float *restrict db, const float *dout,
                              const float *inp, const float *w,
                              const float *mean, const float *rstd, int n0,
                              int C)
{
    float dm[BF_VEC_LANES], dxm[BF_VEC_LANES];
    ln_block_grad_means(dm, dxm, dout, inp, w, mean, rstd, n0, C);
    int c0 = 0;
    enum { SPAN = LN_COLUMN_VECS * BF_VEC_LANES };
    for (; c0 + SPAN <= C; c0 += SPAN)
        ln_block_columns(dinp, dw, db, dout, inp, w, mean, rstd, dm, dxm, n0,
                         C, c0, LN_COLUMN_VECS);
    for (; c0 < C; c0 += BF_VEC_LANES)
        ln_block_columns(dinp, dw, db, dout, inp, w, mean, rstd, dm, dxm, n0,
                         C, c0, 1);
}

/* restrict: the three outputs and the inputs never overlap (layers.h);
 * without it GCC gives up on the second loop's six-way alias checks and
 * leaves it scalar. */
static void layernorm_backward(float *restrict dinp, float *restrict dw,
                               float *restrict db, const float *dout,
                               const float *inp, const float *w,
                               const float *mean, const float *rstd, int N,
                               int C)
{
    int blocked = ln_blocks(N, C);
    for (int n0 = 0; n0 < blocked; n0 += BF_VEC_LANES)
        ln_block_backward(dinp, dw, db, dout, inp, w, mean, rstd, n0, C);
    for (int n = blocked; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *g = dout + (size_t)n * C;
        float *restrict dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float dnorm_mean = 0.0f, dnorm_xhat_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_xhat_mean)
        for (int i = 0; i < C; i++) {
            float dnorm = w[i] * g[i];
            dnorm_mean += dnorm;
            dnorm_xhat_mean += dnorm * (x[i] - m) * s;
        }
        dnorm_mean /= (float)C;
        dnorm_xhat_mean /= (float)C;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s;
            db[i] += g[i];
            dw[i] += xhat * g[i];
            dx[i] += (w[i] * g[i] - dnorm_mean - xhat * dnorm_xhat_mean) * s;
        }
    }
}

/* out [N,OC] = residual + inp @ w + bias in one pass of this level's
 * gemm, which starts each tile from the bias and adds the residual at its
 * end (gemm.c).
 * cblas only where the gemm declines the shape: there out first gets
 * residual + bias and sgemm adds to it (beta 1), by a copy loop, not
 * memcpy (a libc call a row costs more than a short row). */
static void matmul_forward(float *out, const float *inp, const float *w,
                           const float *bias, const float *residual, int N,
                           int C, int OC)
{
    bf_mat init = {residual, (size_t)OC, 1};
    if (BF_GEMM(out, (size_t)OC, (bf_mat){inp, (size_t)C, 1},
                (bf_mat){w, (size_t)OC, 1}, init, bias, N, OC, C) == 0)
        return;
    for (int n = 0; (residual || bias) && n < N; n++) {
        float *y = out + (size_t)n * OC; /* may be x: no restrict */
        const float *x = residual ? residual + (size_t)n * OC : NULL;
        if (!x)
            for (int o = 0; o < OC; o++)
                y[o] = bias[o];
        else if (bias)
            for (int o = 0; o < OC; o++)
                y[o] = x[o] + bias[o];
        else if (y != x)
            for (int o = 0; o < OC; o++)
                y[o] = x[o];
    }
    float beta = (residual || bias) ? 1.0f : 0.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, C, 1.0f,
                inp, C, w, OC, beta, out, OC);
}

/* dbias [OC] += the column sums of dout [N, OC].  BIAS_COLS columns at a
 * time, summed in registers down all N rows and then added to dbias: a
 * row at a time into dbias itself, each row's add would wait on the
 * store of the row before. */
enum { BIAS_COLS = 64 };
static void bias_backward(float *restrict dbias, const float *restrict dout,
                          int N, int OC)
{
    int o0 = 0;
    for (; o0 + BIAS_COLS <= OC; o0 += BIAS_COLS) {
        float acc[BIAS_COLS] = {0};
        for (int n = 0; n < N; n++)
            for (int k = 0; k < BIAS_COLS; k++)
                acc[k] += dout[(size_t)n * OC + o0 + k];
        for (int k = 0; k < BIAS_COLS; k++)
            dbias[o0 + k] += acc[k];
    }
    for (int o = o0; o < OC; o++) { /* the columns past the last block */
        float acc = 0.0f;
        for (int n = 0; n < N; n++)
            acc += dout[(size_t)n * OC + o];
        dbias[o] += acc;
    }
}

static void matmul_backward(float *dinp, float *dw, float *dbias,
                            const float *dout, const float *inp, const float *w,
                            int N, int C, int OC)
{
    bf_mat dout_m = {dout, (size_t)OC, 1};
    if (dinp && BF_GEMM(dinp, (size_t)C, dout_m, (bf_mat){w, 1, (size_t)OC},
                        (bf_mat){NULL, 0, 0}, NULL, N, C, OC) != 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, OC, 1.0f,
                    dout, OC, w, OC, 0.0f, dinp, C);
    if (!dw)
        return;
    if (BF_GEMM(dw, (size_t)OC, (bf_mat){inp, 1, (size_t)C}, dout_m,
                (bf_mat){dw, (size_t)OC, 1}, NULL, C, OC, N) != 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, OC, N, 1.0f,
                    inp, C, dout, OC, 1.0f, dw, OC);
    if (dbias)
        bias_backward(dbias, dout, N, OC);
}

static void logits_forward(float *logits, const float *inp, const float *wte,
                           int N, int C, int V)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, inp,
                C, wte, C, 0.0f, logits, V);
}

static void logits_backward(float *dinp, float *dwte, const float *dlogits,
                            const float *inp, const float *wte, int N, int C,
                            int V)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f,
                dlogits, V, wte, C, 0.0f, dinp, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f,
                dlogits, V, inp, C, 1.0f, dwte, C);
}

static void rotary_tables(float *cosv, float *sinv, const float *omega, int h,
                          int NH, int S, int P)
{
    /* Angles reach S radians: form them in double so cos/sin of large
     * angles keep float accuracy. */
    for (int p = 0; p < S; p++)
        for (int i = 0; i < P; i++) {
            double a = (double)p * (double)omega[i];
            size_t at = ((size_t)p * NH + h) * P + i;
            cosv[at] = (float)cos(a);
            sinv[at] = (float)sin(a);
        }
}

/* x [2J] rotated in place pair by pair: pair j by the angle whose cos and
 * sin are c[j], s[j] (sign -1 turns it back).  One row's heads are one
 * run of pairs, as the tables keep a position's heads side by side. */
static void rotate_pairs(float *restrict x, const float *restrict c,
                         const float *restrict s, float sign, int J)
{
    for (int j = 0; j < J; j++) {
        float x0 = x[2 * j], x1 = x[2 * j + 1], sj = sign * s[j];
        x[2 * j] = x0 * c[j] - x1 * sj;
        x[2 * j + 1] = x0 * sj + x1 * c[j];
    }
}

static void rotary_forward(float *qkv, const float *cosv, const float *sinv,
                           const int *pos, int B, int T, int C)
{
    for (int n = 0; n < B * T; n++) {
        float *row = qkv + (size_t)n * 3 * C;
        size_t at = (size_t)pos[n] * (C / 2); /* [S, NH, P]: C/2 a position */
        rotate_pairs(row, cosv + at, sinv + at, 1.0f, C / 2);     /* q */
        rotate_pairs(row + C, cosv + at, sinv + at, 1.0f, C / 2); /* k */
    }
}

/* dtheta [J] += the angle's gradient of each of x's J pairs: dL/da =
 * g1 y0 - g0 y1 (g the gradient w.r.t. the rotated pair y), da/dtheta =
 * pos * omega. */
static void rotary_dtheta(float *restrict dtheta, const float *restrict g,
                          const float *restrict y, const float *restrict omega,
                          float pos, int J)
{
    for (int j = 0; j < J; j++)
        dtheta[j] += (g[2 * j + 1] * y[2 * j] - g[2 * j] * y[2 * j + 1]) *
                     pos * omega[j];
}

static void rotary_backward(float *dqkv, float *dtheta, const float *qkv,
                            const float *cosv, const float *sinv,
                            const float *omega, const uint8_t *learnable,
                            const int *pos, int B, int T, int C, int NH)
{
    int hd = C / NH, P = hd / 2;
    for (int n = 0; n < B * T; n++) {
        size_t off = (size_t)n * 3 * C, at = (size_t)pos[n] * (C / 2);
        for (int part = 0; part < 2; part++) {
            float *g = dqkv + off + part * C;
            const float *y = qkv + off + part * C;
            /* each run of adjacent learnable heads in one loop: all heads
             * under spectral RoPE, half under bifocal */
            for (int h0 = 0, h1; learnable && h0 < NH; h0 = h1) {
                for (h1 = h0; h1 < NH && learnable[h1] == learnable[h0]; h1++)
                    ;
                if (learnable[h0])
                    rotary_dtheta(dtheta + h0 * P, g + h0 * hd, y + h0 * hd,
                                  omega + h0 * P, (float)pos[n],
                                  (h1 - h0) * P);
            }
            /* the gradient turns back by the same angle */
            rotate_pairs(g, cosv + at, sinv + at, -1.0f, C / 2);
        }
    }
}

/* PoPE's magnitude: softplus(x) = max(x, 0) + log1p(e), e = e^-|x|, the
 * log1p as log(u) e / (u - 1), u = 1 + e (Goldberg's, exact to a few ulps):
 * libm's log1pf and expf took a third of a pope step (perf), logf and
 * bf_expf much less. */
static inline float softplus(float x)
{
    float e = bf_expf(-fabsf(x)), u = 1.0f + e;
    float l = u == 1.0f ? e : logf(u) * e / (u - 1.0f);
    return (x > 0.0f ? x : 0.0f) + l;
}

/* sqrt(2) on the queries: the attention scales scores by 1/sqrt(2 hd),
 * PoPE's logit is q.k / sqrt(hd). */
#define POPE_Q_GAIN 1.41421356237309505f

static void pope_forward(float *out, const float *qkv, const float *cosv,
                         const float *sinv, const int *pos, int N, int C,
                         int NH)
{
    int hd = C / NH;
    for (int n = 0; n < N; n++) {
        const float *x = qkv + (size_t)n * 3 * C;
        float *y = out + (size_t)n * 6 * C;
        const float *c = cosv + (size_t)pos[n] * hd;
        const float *s = sinv + (size_t)pos[n] * hd;
        /* component j of the row: i of head j / hd; its pair at 2j */
        for (int j = 0, i = 0; j < C; j++, i = (i + 1) % hd) {
            float mq = POPE_Q_GAIN * softplus(x[j]), mk = softplus(x[C + j]);
            float *v = y + 4 * C + 2 * (j - i) + i; /* head's v, padded */
            y[2 * j] = mq * c[i];
            y[2 * j + 1] = mq * s[i];
            y[2 * C + 2 * j] = mk * c[i];
            y[2 * C + 2 * j + 1] = mk * s[i];
            v[0] = x[2 * C + j];
            v[hd] = 0.0f;
        }
    }
}

/* sigmoid(x) = 1 - e^-m from m = softplus(x): below 1/32, where the
 * subtraction loses digits, by the series m (1 - m/2 + m^2/6); both within
 * about 2e-6 relative (libm's expm1f took a fifth of a pope step). */
static inline float sigmoid_of_softplus(float m)
{
    return m < 0.03125f ? m * (1.0f - 0.5f * m * (1.0f - m / 3.0f))
                        : 1.0f - bf_expf(-m);
}

/* d/dx of gain * softplus(x) at angle (c, s), given the gradient g and the
 * value y of the pair, whose magnitude softplus(x) is read back as y's
 * projection on (c, s), y / gain's direction. */
static inline float pope_dx(const float *g, const float *y, float c, float s,
                            float gain)
{
    float mag = (y[0] * c + y[1] * s) / gain;
    return sigmoid_of_softplus(mag) * gain * (g[0] * c + g[1] * s);
}

static void pope_backward(float *dqkv, const float *dout, const float *out,
                          const float *cosv, const float *sinv,
                          const int *pos, int N, int C, int NH)
{
    int hd = C / NH;
    for (int n = 0; n < N; n++) {
        const float *g = dout + (size_t)n * 6 * C;
        const float *y = out + (size_t)n * 6 * C;
        float *dx = dqkv + (size_t)n * 3 * C;
        const float *c = cosv + (size_t)pos[n] * hd;
        const float *s = sinv + (size_t)pos[n] * hd;
        for (int j = 0, i = 0; j < C; j++, i = (i + 1) % hd) {
            dx[j] = pope_dx(g + 2 * j, y + 2 * j, c[i], s[i], POPE_Q_GAIN);
            dx[C + j] = pope_dx(g + 2 * C + 2 * j, y + 2 * C + 2 * j, c[i],
                                s[i], 1.0f);
            dx[2 * C + j] = g[4 * C + 2 * (j - i) + i];
        }
    }
}

/* ------------------------------------------------ attention, small heads
 *
 * The studies' heads are tiny (head_dim 16, seq 40): every product of the
 * sgemm path below is a few hundred multiply-adds, and OpenBLAS packs both
 * operands of each one (12 packed products per head, layer and batch row).
 * The fused path copies the head's [T, hd] tiles once into local tiles (K
 * or V transposed), then works on groups of ATT_ROWS query rows: scores,
 * causal softmax and the weighted sum, only keys up to the group's last row
 * (the causal half).  Its arithmetic is on bf_vec, GCC's generic vector
 * of BF_VEC_LANES floats, one register of the level (4 SSE2, 8 AVX2, 16
 * AVX-512; a vector wider than the level's registers is lowered through
 * the stack): loops over blocks of keys or of head dimensions that plain
 * C leaves to the vectoriser's choices (it spills the accumulators).
 * The tiles are padded with zeros to whole vectors.
 *
 * Limits (layers.h: BF_ATT_FUSED_MAX_T 128, BF_ATT_FUSED_MAX_HD 64): the
 * tiles live on the stack, sized by them (128 KiB in backward at these,
 * already past L1), while sgemm's packing, O(T hd) a product, shrinks
 * against the product's O(T^2 hd) work.  Within them it is the path taken
 * (bf_isa_attention_fused has the figures against sgemm). */
#define ATT_VECS(n) (((n) + BF_VEC_LANES - 1) / BF_VEC_LANES)
enum { ATT_TV = ATT_VECS(BF_ATT_FUSED_MAX_T),   /* vectors of keys */
       ATT_HV = ATT_VECS(BF_ATT_FUSED_MAX_HD) }; /* vectors of a head row */

/* row [hv vectors] = x [hd], zero past hd.  Whole vectors are copied by a
 * fixed-size memcpy (one unaligned load each); a variable-size copy would
 * be a libc call per row. */
static void att_row_load(bf_vec *row, const float *x, int hd, int hv)
{
    int full = hd / BF_VEC_LANES;
    for (int v = 0; v < full; v++)
        memcpy(&row[v], x + v * BF_VEC_LANES, sizeof row[v]);
    if (full < hv) {
        bf_vec tail = {0};
        for (int d = 0; d < hd - full * BF_VEC_LANES; d++)
            tail[d] = x[full * BF_VEC_LANES + d];
        row[full] = tail;
    }
}

/* x [hd] = the first hd floats of row [hv vectors]. */
static void att_row_store(float *x, const bf_vec *row, int hd)
{
    int full = hd / BF_VEC_LANES;
    for (int v = 0; v < full; v++)
        memcpy(x + v * BF_VEC_LANES, &row[v], sizeof row[v]);
    for (int d = 0; d < hd - full * BF_VEC_LANES; d++)
        x[full * BF_VEC_LANES + d] = row[full][d];
}

/* tile [T][hv] = x [T, hd] (row stride `stride`), zero past hd. */
static void att_tile_load(bf_vec *tile, const float *x, int stride, int T,
                          int hd, int hv)
{
    for (int j = 0; j < T; j++)
        att_row_load(tile + (size_t)j * hv, x + (size_t)j * stride, hd, hv);
}

/* x [T, hd] (row stride `stride`) = the first hd floats of tile [T][hv]'s
 * rows. */
static void att_tile_store(float *x, int stride, const bf_vec *tile, int T,
                           int hd, int hv)
{
    for (int j = 0; j < T; j++)
        att_row_store(x + (size_t)j * stride, tile + (size_t)j * hv, hd);
}

/* tt [hd][ATT_TV] = x [T, hd] (row stride `stride`) transposed, its first
 * ATT_VECS(T) vectors a row, zero past key T, so whole vectors of keys up
 * to T can be read: blocks of BF_VEC_LANES keys by BF_VEC_LANES
 * dimensions, each loaded as rows (zero past T and past hd) and transposed
 * in registers. */
static void att_tile_transpose(bf_vec *tt, const float *x, int stride, int T,
                               int hd)
{
    for (int d0 = 0; d0 < hd; d0 += BF_VEC_LANES) {
        int dims = hd - d0 < BF_VEC_LANES ? hd - d0 : BF_VEC_LANES;
        for (int jv = 0; jv < ATT_VECS(T); jv++) {
            bf_vec rows[BF_VEC_LANES];
            for (int i = 0; i < BF_VEC_LANES; i++) {
                int j = jv * BF_VEC_LANES + i;
                if (j < T)
                    att_row_load(&rows[i], x + (size_t)j * stride + d0, dims,
                                 1);
                else
                    rows[i] = (bf_vec){0};
            }
            bf_vec_transpose(rows);
            for (int d = 0; d < dims; d++)
                tt[(size_t)(d0 + d) * ATT_TV + jv] = rows[d];
        }
    }
}

/* ATT_ROWS query rows go through the loops below together: each vector
 * of K^T, V or K loaded is used by every row, and the rows' accumulators
 * are independent chains, so the multiply-adds overlap instead of waiting
 * on each other's latency.  A group past the last row reads the zero rows
 * below and its outputs are dropped.  8 rows on AVX2 and AVX-512, 4 on
 * SSE2, whose 16 narrow registers spill at 8; 16 rows lose more to the
 * causal triangle's waste than they gain (bench/bench_attention_pair.sh
 * at each level measures it; docs/training.md). */
#if BF_VEC_LANES >= 8
enum { ATT_ROWS = 8 };
#else
enum { ATT_ROWS = 4 };
#endif
/* Vectors att_rows_product and att_rows_scatter take at once (of columns;
 * of dimensions): each broadcast of an element then feeds ATT_SPAN
 * multiply-adds, and the scatter keeps the group's rows in registers down
 * all the keys.  2 at every level: faster than one vector at a time at
 * every level and head size, AVX2 included, whose 16 registers spill a
 * little at 8 rows but gain more (bench_attention_pair.sh measures it). */
enum { ATT_SPAN = 2 };
static const float att_zeros[BF_ATT_FUSED_MAX_T > BF_ATT_FUSED_MAX_HD
                                 ? BF_ATT_FUSED_MAX_T
                                 : BF_ATT_FUSED_MAX_HD];

/* out[r][c] = alpha * sum_{i < n} x[r][i] m[i][c] for the columns c <
 * cols, out of row stride ostride, m of row stride mstride (in vectors):
 * ATT_ROWS rows times a matrix, a vector of columns at a time.
 *   - scores: x = q rows, m = K^T [hd][ATT_TV], n = hd, cols = the
 *     vectors of keys up to the group's last row; in backward dP = dY V^T
 *     the same with dy rows and V^T;
 *   - outputs: x = P rows, m = V [T][hv], n = the keys, cols = hv; in
 *     backward dQ = dS K the same with dS rows and K.  Each P or dS row is
 *     zero past its own length, so the group shares one key count. */
static inline __attribute__((always_inline)) void
att_rows_product_span(int span, bf_vec *out, int ostride,
                      const float *const x[ATT_ROWS], const bf_vec *m,
                      int mstride, int n, int c, float alpha)
{
    bf_vec acc[ATT_ROWS][ATT_SPAN] = {{{0}}};
    for (int i = 0; i < n; i++) {
        const bf_vec *mi = m + (size_t)i * mstride + c;
        for (int r = 0; r < ATT_ROWS; r++) {
            float xi = x[r][i];
            for (int s = 0; s < span; s++)
                acc[r][s] += xi * mi[s];
        }
    }
    for (int r = 0; r < ATT_ROWS; r++)
        for (int s = 0; s < span; s++)
            out[r * ostride + c + s] = alpha * acc[r][s];
}

static void att_rows_product(bf_vec *out, int ostride,
                             const float *const x[ATT_ROWS], const bf_vec *m,
                             int mstride, int n, int cols, float alpha)
{
    int c = 0;
    for (; c + ATT_SPAN <= cols; c += ATT_SPAN)
        att_rows_product_span(ATT_SPAN, out, ostride, x, m, mstride, n, c,
                              alpha);
    for (; c < cols; c++)
        att_rows_product_span(1, out, ostride, x, m, mstride, n, c, alpha);
}

/* tile[j] += sum_r w[r][j] x[r] for j < len, x [ATT_ROWS][hv]: in
 * backward, dV (w = P rows, x = dY rows) and dK (w = dS rows, x = Q
 * rows).  ATT_SPAN vectors of dimensions at a time, their ATT_ROWS x
 * ATT_SPAN vectors of x held in registers down all the keys: each key's
 * update then loads only its tile vectors and w's broadcasts, where keys
 * outer reloaded x for every key (a load per multiply-add). */
static inline __attribute__((always_inline)) void
att_rows_scatter_span(int span, bf_vec *tile, const float *const w[ATT_ROWS],
                      const bf_vec *x, int len, int hv, int dv)
{
    bf_vec xr[ATT_ROWS][ATT_SPAN];
    for (int r = 0; r < ATT_ROWS; r++)
        for (int s = 0; s < span; s++)
            xr[r][s] = x[r * hv + dv + s];
    for (int j = 0; j < len; j++) {
        bf_vec *t = tile + (size_t)j * hv + dv, acc[ATT_SPAN];
        for (int s = 0; s < span; s++)
            acc[s] = t[s];
        for (int r = 0; r < ATT_ROWS; r++) {
            float wr = w[r][j];
            for (int s = 0; s < span; s++)
                acc[s] += wr * xr[r][s];
        }
        for (int s = 0; s < span; s++)
            t[s] = acc[s];
    }
}

static void att_rows_scatter(bf_vec *tile, const float *const w[ATT_ROWS],
                             const bf_vec *x, int len, int hv)
{
    int dv = 0;
    for (; dv + ATT_SPAN <= hv; dv += ATT_SPAN)
        att_rows_scatter_span(ATT_SPAN, tile, w, x, len, hv, dv);
    for (; dv < hv; dv++)
        att_rows_scatter_span(1, tile, w, x, len, hv, dv);
}

/* A vector of v's lanes where mask is set, of w's elsewhere (GCC's ?: on
 * vectors is C++ only). */
static inline bf_vec att_select(bf_ivec mask, bf_vec v, bf_vec w)
{
    return (bf_vec)(((bf_ivec)v & mask) | ((bf_ivec)w & ~mask));
}

/* The lanes whose key index (vector c's lane plus BF_VEC_LANES c) is below
 * n. */
#define ATT_LANE_INDEX(l, h) (l)
static inline bf_ivec att_keys_below(int c, int n)
{
    const bf_ivec lane = {BF_VEC_LANE_LIST(ATT_LANE_INDEX, 0)};
    return lane + c * BF_VEC_LANES < n;
}

/* The largest and the sum of v's lanes, by halving: step h meets lane l
 * with lane l + h (mod BF_VEC_LANES), h = BF_VEC_LANES/2, ..., 1, so lane
 * 0 ends with all of them. */
#define ATT_ROTATE(l, h) (((l) + (h)) % BF_VEC_LANES)
#define ATT_MAX_STEP(v, h)                                                     \
    {                                                                          \
        bf_vec w =                                                            \
            __builtin_shufflevector(v, v, BF_VEC_LANE_LIST(ATT_ROTATE, h));   \
        v = bf_vec_max(w, v);                                                  \
    }
#define ATT_SUM_STEP(v, h)                                                     \
    v += __builtin_shufflevector(v, v, BF_VEC_LANE_LIST(ATT_ROTATE, h));

static inline float att_hmax(bf_vec v)
{
    BF_VEC_FOR_STEPS(ATT_MAX_STEP, v)
    return v[0];
}

static inline float att_hsum(bf_vec v)
{
    BF_VEC_FOR_STEPS(ATT_SUM_STEP, v)
    return v[0];
}

/* Vector c of a row of T floats: lanes past T read as zero, and are not
 * written. */
static inline bf_vec att_span_load(const float *row, int c, int T)
{
    bf_vec x;
    int n = T - c * BF_VEC_LANES;
    att_row_load(&x, row + c * BF_VEC_LANES,
                 n < BF_VEC_LANES ? n : BF_VEC_LANES, 1);
    return x;
}

static inline void att_span_store(float *row, int c, int T, bf_vec x)
{
    int n = T - c * BF_VEC_LANES;
    att_row_store(row + c * BF_VEC_LANES, &x,
                  n < BF_VEC_LANES ? n : BF_VEC_LANES);
}

/* The parts of a softmax over e [nv vectors], the scores of a row of n
 * keys (n <= nv BF_VEC_LANES), on whole vectors with the lanes past n
 * masked: plain loops leave the reductions' partial sums on the stack and
 * run a scalar tail on every row.  Always inlined: called, they keep the
 * fused path's scores in memory (bench_attention shows the cost).
 * att_max_lanes: a vector whose largest lane is
 * the row's largest score; att_exp_rows: for m consecutive rows of the
 * causal mask (m <= BF_EXP_MAX_N, rows ATT_TV vectors apart, row i
 * seeing n0 + i keys and of largest score mx[i]), e = e^(e - mx) up to
 * the row's last key, 0 past it, and sum[i] a vector whose lanes add up
 * to row i's sum: the m rows' exponentials of a vector of keys at once,
 * interleaved (BF_VEC_EXP), so that the core has several exponentials'
 * chains in flight (bench_attention_pair.sh measures it). */
static inline __attribute__((always_inline)) bf_vec
att_max_lanes(const bf_vec *e, int n, int nv)
{
    bf_vec mv = (bf_vec){0} - FLT_MAX;
    for (int c = 0; c < nv; c++)
        mv = att_select(att_keys_below(c, n) & (e[c] > mv), e[c], mv);
    return mv;
}

static inline __attribute__((always_inline)) void
att_exp_rows(bf_vec *e, int m, int n0, int nv, const float *mx, bf_vec *sum)
{
    for (int i = 0; i < m; i++)
        sum[i] = (bf_vec){0};
    for (int c = 0; c < nv; c++) {
        bf_vec x[BF_EXP_MAX_N];
        for (int i = 0; i < m; i++)
            x[i] = e[i * ATT_TV + c] - mx[i];
        BF_VEC_EXP(x, m);
        for (int i = 0; i < m; i++) {
            e[i * ATT_TV + c] =
                att_select(att_keys_below(c, n0 + i), x[i], (bf_vec){0});
            sum[i] += e[i * ATT_TV + c];
        }
    }
}

/* e [nv vectors]: a row's scores of n keys in, their causal softmax out,
 * zero past key n. */
static inline __attribute__((always_inline)) void
att_softmax_vecs(bf_vec *e, int n, int nv)
{
    float mx = att_hmax(att_max_lanes(e, n, nv));
    bf_vec sum;
    att_exp_rows(e, 1, n, nv, &mx, &sum);
    float inv = 1.0f / att_hsum(sum);
    for (int c = 0; c < nv; c++)
        e[c] *= inv;
}

/* The largest (att_row_maxes) or the sum (bf_vec_row_sums) of each of
 * BF_VEC_LANES vectors' lanes, all at once: lane r for vector r.  The
 * fused path's groups take their rows' maxima and sums this way, about 2
 * shuffles and an operation a row where one row alone takes a chain of
 * log2(BF_VEC_LANES) dependent steps. */
#define ATT_VMAX(x, y) bf_vec_max(x, y)
#define ATT_MAXES_STEP(rows, h) BF_VEC_REDUCE_STEP(rows, h, ATT_VMAX)
static inline bf_vec att_row_maxes(bf_vec rows[BF_VEC_LANES])
{
    BF_VEC_FOR_STEPS(ATT_MAXES_STEP, rows)
    return rows[0];
}
_Static_assert(ATT_ROWS <= BF_VEC_LANES, "a group's rows fill one vector");

/* Causal softmax of one row of scores, the sgemm path's: the first len
 * entries of src are real, dst gets their probabilities and exact zeros
 * for the rest (future positions), so att @ v can be one sgemm.  dst may
 * be src.  The row's vectors up to len go through att_softmax_vecs on the
 * stack (ATT_VECS(len) of them: 4 len bytes, rounded up). */
static void softmax_causal_row(float *dst, const float *src, int len, int T)
{
    int nv = ATT_VECS(len);
    bf_vec e[nv];
    for (int c = 0; c < nv; c++)
        e[c] = att_span_load(src, c, T);
    att_softmax_vecs(e, len, nv);
    for (int c = 0; c < nv; c++)
        att_span_store(dst, c, T, e[c]);
    if (nv * BF_VEC_LANES < T)
        memset(dst + nv * BF_VEC_LANES, 0,
               (size_t)(T - nv * BF_VEC_LANES) * sizeof *dst);
}

/* Rows of a group whose exponentials att_softmax_rows takes at once. */
enum { ATT_EXP_ROWS = ATT_ROWS < BF_EXP_MAX_N ? ATT_ROWS : BF_EXP_MAX_N };
_Static_assert(ATT_ROWS % ATT_EXP_ROWS == 0, "a group is whole sets");

/* a [rows][T] = the causal softmax of the group's scores s [ATT_ROWS]
 * [ATT_TV] (nv vectors each, overwritten), row r over its t0 + r + 1 keys
 * and zero past them.  The rows past ATT_ROWS of a vector's width are
 * fillers of the reductions. */
static void att_softmax_rows(float *a, int T, bf_vec *s, int t0, int rows,
                             int nv)
{
    bf_vec part[BF_VEC_LANES];
    for (int r = 0; r < BF_VEC_LANES; r++)
        part[r] = r < ATT_ROWS ? att_max_lanes(s + r * ATT_TV, t0 + r + 1, nv)
                               : (bf_vec){0};
    bf_vec mxv = att_row_maxes(part);
    float mx[BF_VEC_LANES];
    memcpy(mx, &mxv, sizeof mx);
    for (int r = 0; r < ATT_ROWS; r += ATT_EXP_ROWS)
        att_exp_rows(s + r * ATT_TV, ATT_EXP_ROWS, t0 + r + 1, nv, mx + r,
                     part + r);
    for (int r = ATT_ROWS; r < BF_VEC_LANES; r++)
        part[r] = (bf_vec){0} + 1.0f;
    bf_vec inv = 1.0f / bf_vec_row_sums(part);
    for (int r = 0; r < rows; r++) {
        bf_vec *e = s + r * ATT_TV;
        for (int c = 0; c < ATT_VECS(T); c++)
            att_span_store(a + (size_t)r * T, c, T,
                           c < nv ? e[c] * inv[r] : (bf_vec){0});
    }
}

/* Softmax backward of a group, in place on ds [ATT_ROWS][ATT_TV] (dP in,
 * dS out, nv vectors each): dS = P * (dP - rowsum(P dP)), with the scores'
 * scale folded in (S = scale Q K^T).  P (the rows pr, T floats each) is
 * zero past each row's length and for the rows past T, so dS is too. */
static void att_softmax_backward_rows(bf_vec *ds,
                                      const float *const pr[ATT_ROWS], int T,
                                      int nv, float scale)
{
    int n = nv * BF_VEC_LANES < T ? nv * BF_VEC_LANES : T;
    bf_vec p[ATT_ROWS][ATT_TV], part[BF_VEC_LANES];
    for (int r = 0; r < BF_VEC_LANES; r++) {
        bf_vec dot = {0};
        if (r < ATT_ROWS) {
            att_row_load(p[r], pr[r], n, nv);
            for (int c = 0; c < nv; c++)
                dot += p[r][c] * ds[r * ATT_TV + c];
        }
        part[r] = dot;
    }
    bf_vec rowdot = bf_vec_row_sums(part);
    for (int r = 0; r < ATT_ROWS; r++)
        for (int c = 0; c < nv; c++) {
            bf_vec *d = ds + r * ATT_TV + c;
            *d = scale * p[r][c] * (*d - rowdot[r]);
        }
}

/* The group of query rows from t0: rows = how many are real, *len = the
 * keys its last real row sees. */
static int att_group(int t0, int T, int *len)
{
    int rows = T - t0 < ATT_ROWS ? T - t0 : ATT_ROWS;
    *len = t0 + rows;
    return rows;
}

/* One (batch row, head): q, k, v [T, hd] of row stride 3C in qkv, y [T, hd]
 * of stride C, a [T, T] the probabilities. */
static void attention_forward_fused(float *y, float *a, const float *q,
                                    const float *k, const float *v, int T,
                                    int C, int hd)
{
    int C3 = 3 * C, hv = ATT_VECS(hd), len;
    bf_vec kt[BF_ATT_FUSED_MAX_HD * ATT_TV], vl[BF_ATT_FUSED_MAX_T * ATT_HV];
    bf_vec s[ATT_ROWS * ATT_TV], yrows[ATT_ROWS * ATT_HV];
    att_tile_transpose(kt, k, C3, T, hd);
    att_tile_load(vl, v, C3, T, hd, hv);
    float scale = 1.0f / sqrtf((float)hd);
    for (int t0 = 0; t0 < T; t0 += ATT_ROWS) {
        int rows = att_group(t0, T, &len);
        const float *qr[ATT_ROWS], *pr[ATT_ROWS];
        for (int r = 0; r < ATT_ROWS; r++) {
            qr[r] = r < rows ? q + (size_t)(t0 + r) * C3 : att_zeros;
            pr[r] = r < rows ? a + (size_t)(t0 + r) * T : att_zeros;
        }
        att_rows_product(s, ATT_TV, qr, kt, ATT_TV, hd, ATT_VECS(len), scale);
        att_softmax_rows(a + (size_t)t0 * T, T, s, t0, rows, ATT_VECS(len));
        att_rows_product(yrows, hv, pr, vl, hv, len, hv, 1.0f);
        for (int r = 0; r < rows; r++)
            att_row_store(y + (size_t)(t0 + r) * C, yrows + r * hv, hd);
    }
}

/* One (batch row, head) of attention_backward: dq, dk, dv [T, hd] of row
 * stride 3C (overwritten), dy [T, hd] of stride C, a [T, T] the forward's
 * probabilities. */
static void attention_backward_fused(float *dq, float *dk, float *dv,
                                     const float *dy, const float *q,
                                     const float *k, const float *v,
                                     const float *a, int T, int C, int hd)
{
    int C3 = 3 * C, hv = ATT_VECS(hd), len;
    bf_vec vt[BF_ATT_FUSED_MAX_HD * ATT_TV], kl[BF_ATT_FUSED_MAX_T * ATT_HV];
    bf_vec dkl[BF_ATT_FUSED_MAX_T * ATT_HV], dvl[BF_ATT_FUSED_MAX_T * ATT_HV];
    bf_vec ds[ATT_ROWS * ATT_TV], qrows[ATT_ROWS * ATT_HV];
    bf_vec grows[ATT_ROWS * ATT_HV], dqrows[ATT_ROWS * ATT_HV];
    att_tile_transpose(vt, v, C3, T, hd);
    att_tile_load(kl, k, C3, T, hd, hv);
    for (int i = 0; i < T * hv; i++)
        dkl[i] = dvl[i] = (bf_vec){0};
    float scale = 1.0f / sqrtf((float)hd);
    for (int t0 = 0; t0 < T; t0 += ATT_ROWS) {
        int rows = att_group(t0, T, &len);
        const float *gr[ATT_ROWS], *pr[ATT_ROWS], *dsr[ATT_ROWS];
        for (int r = 0; r < ATT_ROWS; r++) {
            int real = r < rows;
            att_row_load(grows + r * hv,
                         real ? dy + (size_t)(t0 + r) * C : att_zeros, hd, hv);
            att_row_load(qrows + r * hv,
                         real ? q + (size_t)(t0 + r) * C3 : att_zeros, hd, hv);
            gr[r] = (const float *)(grows + r * hv);
            pr[r] = real ? a + (size_t)(t0 + r) * T : att_zeros;
            dsr[r] = (const float *)(ds + r * ATT_TV);
        }
        /* dP = dY V^T;  dV += P^T dY */
        att_rows_product(ds, ATT_TV, gr, vt, ATT_TV, hd, ATT_VECS(len), 1.0f);
        att_rows_scatter(dvl, pr, grows, len, hv);
        att_softmax_backward_rows(ds, pr, T, ATT_VECS(len), scale);
        /* dQ = dS K;  dK += dS^T Q */
        att_rows_product(dqrows, hv, dsr, kl, hv, len, hv, 1.0f);
        for (int r = 0; r < rows; r++)
            att_row_store(dq + (size_t)(t0 + r) * C3, dqrows + r * hv, hd);
        att_rows_scatter(dkl, dsr, qrows, len, hv);
    }
    att_tile_store(dk, C3, dkl, T, hd, hv);
    att_tile_store(dv, C3, dvl, T, hd, hv);
}

/* ------------------------------------------------ attention, sgemm path */

/* Query rows per attention block.  Block r only needs the keys up to its
 * last row, so the scores above the diagonal outside the blocks on it are
 * never computed: with T = 4 blocks that is 10/16 of the full products. */
enum { ATT_BLOCK = 32 };

static void attention_forward_sgemm(float *y, float *a, const float *q,
                                    const float *k, const float *v, int T,
                                    int C, int hd)
{
    int C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hd);
    for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
        int rows = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
        int keys = r0 + rows;
        float *ar = a + (size_t)r0 * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd,
                    scale, q + (size_t)r0 * C3, C3, k, C3, 0.0f, ar, T);
        for (int t = 0; t < rows; t++)
            softmax_causal_row(ar + (size_t)t * T, ar + (size_t)t * T,
                               r0 + t + 1, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys,
                    1.0f, ar, T, v, C3, 0.0f, y + (size_t)r0 * C, C);
    }
}

static void attention_backward_sgemm(float *dq, float *dk, float *dv,
                                     float *scratch, const float *dy,
                                     const float *q, const float *k,
                                     const float *v, const float *a, int T,
                                     int C, int hd)
{
    int C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hd);
    int last = (T - 1) / ATT_BLOCK * ATT_BLOCK;
    /* last block first: it reaches every key, so it sets dK and dV (beta 0)
     * and the earlier blocks add to them */
    for (int r0 = last; r0 >= 0; r0 -= ATT_BLOCK) {
        int rows = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
        int keys = r0 + rows;
        float beta = r0 == last ? 0.0f : 1.0f;
        const float *ar = a + (size_t)r0 * T;
        const float *dyr = dy + (size_t)r0 * C;
        float *ds = scratch + (size_t)r0 * T;
        /* dP = dY V^T;  dV += P^T dY */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hd,
                    1.0f, dyr, C, v, C3, 0.0f, ds, T);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, hd, rows,
                    1.0f, ar, T, dyr, C, beta, dv, C3);
        /* softmax backward in place: dS = P * (dP - rowsum(P dP)); P is 0
         * above the diagonal, so dS is too */
        for (int t = 0; t < rows; t++) {
            const float *p = ar + (size_t)t * T;
            float *d = ds + (size_t)t * T;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int j = 0; j <= r0 + t; j++)
                dot += p[j] * d[j];
            for (int j = 0; j < keys; j++)
                d[j] = p[j] * (d[j] - dot);
        }
        /* S = scale Q K^T:  dQ = scale dS K,  dK += scale dS^T Q */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, keys,
                    scale, ds, T, k, C3, 0.0f, dq + (size_t)r0 * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys, hd, rows,
                    scale, ds, T, q + (size_t)r0 * C3, C3, beta, dk, C3);
    }
}

/* ------------------------------------------------ attention, per head */

static void attention_forward(float *out, float *att, const float *qkv, int B,
                              int T, int C, int NH, int fused)
{
    int hd = C / NH, C3 = 3 * C;
    assert(!fused || BF_ATT_FUSED_FITS(T, hd));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hd;
            float *a = att + ((size_t)b * NH + h) * T * T;
            float *y = out + (size_t)b * T * C + h * hd;
            if (fused)
                attention_forward_fused(y, a, q, q + C, q + 2 * C, T, C, hd);
            else
                attention_forward_sgemm(y, a, q, q + C, q + 2 * C, T, C, hd);
        }
}

static void attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, int B, int T,
                               int C, int NH, int fused)
{
    int hd = C / NH, C3 = 3 * C;
    assert(!fused || BF_ATT_FUSED_FITS(T, hd));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t off = (size_t)b * T * C3 + h * hd;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + h * hd;
            if (fused)
                attention_backward_fused(dq, dk, dv, dy, q, k, v, a, T, C, hd);
            else
                attention_backward_sgemm(dq, dk, dv, scratch, dy, q, k, v, a,
                                         T, C, hd);
        }
}

/* GELU's tanh form as a sigmoid: 0.5 x (1 + tanh(u)) = x s, s =
 * sigmoid(2u) = 1 / (1 + e^-2u), u = sqrt(2/pi) (x + 0.044715 x^3): one
 * exp and one division an element, and none of the tanh's own arithmetic
 * (1 - 2 / (e^2u + 1)).  Where the tanh form rounds 1 + tanh(u) to exactly
 * 0 (s below 2^-25, x below about -5.5), s is 0 too: the sigmoid's tiny
 * values there would make the GELU's outputs and gradients, and the
 * products they feed, denormal, which slows the SSE2 and AVX2 copies'
 * steps markedly (test_gradcheck_layers asserts none is subnormal). */
#define GELU_S_MIN 0x1p-25f

/* out, dgelu [GELU_STEP] = GELU and its derivative at inp [GELU_STEP]:
 * GELU_VECS vectors at a time, their exponentials interleaved
 * (BF_EXP_PARTS).  -2u = x (-2 sqrt(2/pi) - 2 sqrt(2/pi) 0.044715 x^2)
 * and d gelu / dx = s + 2 x s (1 - s) du/dx, du/dx = sqrt(2/pi) (1 + 3
 * 0.044715 x^2), the constants folded.  The loop GCC vectorises from the
 * same arithmetic on floats makes the clamps compares and masked moves and
 * sends each vector's chain to the core after the last; interleaved, the
 * chains overlap (bench/bench_train_pair.sh measures it;
 * docs/training.md, "Exponentials, GELU and the other elementwise
 * passes"). */
enum { GELU_VECS = 4, GELU_STEP = GELU_VECS * BF_VEC_LANES };
static inline __attribute__((always_inline)) void
gelu_group(float *out, float *dgelu, const float *inp)
{
    bf_vec x[GELU_VECS], x2[GELU_VECS], e[GELU_VECS];
    for (int j = 0; j < GELU_VECS; j++) {
        x[j] = bf_vec_load(inp + j * BF_VEC_LANES);
        x2[j] = x[j] * x[j];
        e[j] = x[j] * (-2.0f * GELU_SCALE +
                       -2.0f * GELU_SCALE * GELU_CUBIC * x2[j]);
    }
    BF_VEC_EXP(e, GELU_VECS);
    for (int j = 0; j < GELU_VECS; j++) {
        bf_vec s = 1.0f / (1.0f + e[j]);
        s = (bf_vec)((bf_ivec)s & ~(s < GELU_S_MIN)); /* NaN stays */
        bf_vec du = GELU_SCALE + 3.0f * GELU_SCALE * GELU_CUBIC * x2[j];
        bf_vec_store(out + j * BF_VEC_LANES, x[j] * s);
        bf_vec_store(dgelu + j * BF_VEC_LANES,
                     s + (x[j] + x[j]) * (s - s * s) * du);
    }
}

/* out, dgelu [n] for inp [n] (out may be inp): whole groups in place, the
 * last elements through a group padded with zeros. */
static void gelu_forward(float *out, float *dgelu, const float *inp, int n)
{
    int i = 0;
    for (; i + GELU_STEP <= n; i += GELU_STEP)
        gelu_group(out + i, dgelu + i, inp + i);
    if (i < n) {
        float x[GELU_STEP] = {0}, o[GELU_STEP], d[GELU_STEP];
        size_t rest = (size_t)(n - i) * sizeof *x;
        memcpy(x, inp + i, rest);
        gelu_group(o, d, x);
        memcpy(out + i, o, rest);
        memcpy(dgelu + i, d, rest);
    }
}

static void gelu_backward(float *dinout, const float *dgelu, int n)
{
    for (int i = 0; i < n; i++)
        dinout[i] *= dgelu[i];
}

static double crossentropy_forward(float *lse, int *argmax, int *n_targets,
                                   const float *logits, const int *targets,
                                   int N, int V)
{
    double loss = 0.0;
    int count = 0;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (z[v] > z[best])
                best = v;
        float mx = z[best], sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int v = 0; v < V; v++)
            sum += bf_expf(z[v] - mx);
        lse[n] = mx + logf(sum);
        argmax[n] = best;
        if (targets[n] >= 0) {
            assert(targets[n] < V);
            loss += (double)lse[n] - (double)z[targets[n]];
            count++;
        }
    }
    *n_targets = count;
    return loss;
}

static void crossentropy_backward(float *dlogits, const float *logits,
                                  const float *lse, const int *targets,
                                  float scale, int N, int V)
{
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        if (targets[n] < 0) {
            memset(d, 0, (size_t)V * sizeof *d);
            continue;
        }
        float l = lse[n];
        for (int v = 0; v < V; v++)
            d[v] = scale * bf_expf(z[v] - l);
        d[targets[n]] -= scale;
    }
}

static double sumsq(const float *x, size_t n)
{
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (size_t i = 0; i < n; i++)
        sum += (double)x[i] * x[i];
    return sum;
}

static void adamw_update(float *p, float *m, float *v, const float *g,
                         size_t n, float grad_scale, float lr, float wd,
                         float beta1, float beta2, float eps, float bias1,
                         float bias2)
{
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        float mhat = m[i] / bias1, vhat = v[i] / bias2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}

const bf_kernels BF_KERNELS_TABLE = {
    .encoder_forward = encoder_forward,
    .encoder_backward = encoder_backward,
    .layernorm_forward = layernorm_forward,
    .layernorm_apply = layernorm_apply,
    .layernorm_backward = layernorm_backward,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    .gemm = BF_GEMM,
    .vec_lanes = BF_VEC_LANES,
    .logits_forward = logits_forward,
    .logits_backward = logits_backward,
    .rotary_tables = rotary_tables,
    .rotary_forward = rotary_forward,
    .rotary_backward = rotary_backward,
    .pope_forward = pope_forward,
    .pope_backward = pope_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .crossentropy_forward = crossentropy_forward,
    .crossentropy_backward = crossentropy_backward,
    .sumsq = sumsq,
    .adamw_update = adamw_update,
};
