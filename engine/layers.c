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

#ifndef BF_KERNELS_TABLE
#error "BF_KERNELS_TABLE names the table this copy exports (meson.build)"
#endif

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <string.h>

#define LN_EPS 1e-5f
#define GELU_SCALE 0.7978845608028654f  /* sqrt(2/pi) */
#define GELU_CUBIC 0.044715f

/* exp(x) for x in [-87, 88] (clamped outside): x = n ln2 + r, |r| <= ln2/2,
 * Cephes' degree-6 polynomial for e^r, 2^n built in the exponent bits.
 * About 1 ulp; branch-free so the loops that call it vectorise. */
static inline float bf_expf(float x)
{
    /* ternaries, not fminf/fmaxf: those have NaN rules that keep GCC from
     * vectorising them */
    x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    /* round to nearest by adding and removing 1.5 * 2^23 (floorf would
     * not vectorise); the sum's low mantissa bits then hold n itself */
    float n_biased = x * 1.44269504088896341f + 12582912.0f;
    float n = n_biased - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n built from n_biased's bits in unsigned arithmetic: a NaN x
     * (a diverged model) gives some scale and a NaN p, so NaN comes out,
     * without the undefined float-to-int conversion of NaN. */
    uint32_t bits;
    memcpy(&bits, &n_biased, sizeof bits);
    bits = (bits - 0x4B400000u + 127u) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* tanh through exp: saturates cleanly to +-1 thanks to bf_expf's clamp. */
static inline float bf_tanhf(float u)
{
    return 1.0f - 2.0f / (bf_expf(2.0f * u) + 1.0f);
}

static void encoder_forward(float *out, const int *inp, const float *wte, int N,
                            int C)
{
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * C, wte + (size_t)inp[n] * C,
               (size_t)C * sizeof *out);
}

static void encoder_backward(float *dwte, const float *dout, const int *inp, int N,
                             int C)
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

static void layernorm_forward(float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b,
                              int N, int C)
{
    for (int n = 0; n < N; n++) {
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

/* restrict: the three outputs and the inputs never overlap (layers.h);
 * without it GCC gives up on the second loop's six-way alias checks and
 * leaves it scalar. */
static void layernorm_backward(float *restrict dinp, float *restrict dw,
                               float *restrict db, const float *dout,
                               const float *inp, const float *w,
                               const float *mean, const float *rstd, int N,
                               int C)
{
    for (int n = 0; n < N; n++) {
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

static void matmul_forward(float *out, const float *inp, const float *w,
                           const float *bias, const float *residual, int N,
                           int C, int OC)
{
    /* out starts as residual + bias (one pass), then sgemm adds to it */
    for (int n = 0; residual && n < N; n++) {
        float *y = out + (size_t)n * OC;
        const float *x = residual + (size_t)n * OC;
        if (bias)
            for (int o = 0; o < OC; o++)
                y[o] = x[o] + bias[o];
        else if (y != x)
            memcpy(y, x, (size_t)OC * sizeof *y);
    }
    for (int n = 0; !residual && bias && n < N; n++)
        memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof *out);
    float beta = (residual || bias) ? 1.0f : 0.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, C, 1.0f,
                inp, C, w, OC, beta, out, OC);
}

static void matmul_backward(float *dinp, float *dw, float *dbias,
                            const float *dout, const float *inp, const float *w,
                            int N, int C, int OC)
{
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, OC, 1.0f,
                    dout, OC, w, OC, 0.0f, dinp, C);
    if (!dw)
        return;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, OC, N, 1.0f, inp,
                C, dout, OC, 1.0f, dw, OC);
    if (dbias)
        for (int n = 0; n < N; n++) {
            const float *g = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++)
                dbias[o] += g[o];
        }
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

static void rotary_tables(float *cosv, float *sinv, const float *omega, int NH,
                          int S, int P)
{
    /* Angles reach S radians: form them in double so cos/sin of large
     * angles keep float accuracy. */
    for (int h = 0; h < NH; h++)
        for (int p = 0; p < S; p++)
            for (int i = 0; i < P; i++) {
                double a = (double)p * (double)omega[h * P + i];
                size_t at = ((size_t)h * S + p) * P + i;
                cosv[at] = (float)cos(a);
                sinv[at] = (float)sin(a);
            }
}

static void rotary_forward(float *qkv, const float *cosv, const float *sinv,
                           const int *pos, int S, int B, int T, int C, int NH)
{
    int hd = C / NH, P = hd / 2;
    for (int n = 0; n < B * T; n++) {
        float *row = qkv + (size_t)n * 3 * C;
        /* part 0: q, part 1: k */
        for (int part = 0; part < 2; part++)
            for (int h = 0; h < NH; h++) {
                float *x = row + part * C + h * hd;
                const float *c = cosv + ((size_t)h * S + pos[n]) * P;
                const float *s = sinv + ((size_t)h * S + pos[n]) * P;
                for (int i = 0; i < P; i++) {
                    float x0 = x[2 * i], x1 = x[2 * i + 1];
                    x[2 * i] = x0 * c[i] - x1 * s[i];
                    x[2 * i + 1] = x0 * s[i] + x1 * c[i];
                }
            }
    }
}

static void rotary_backward(float *dqkv, float *dtheta, const float *qkv,
                            const float *cosv, const float *sinv,
                            const float *omega, const uint8_t *learnable,
                            const int *pos, int S, int B, int T, int C, int NH)
{
    int hd = C / NH, P = hd / 2;
    for (int n = 0; n < B * T; n++) {
        size_t off = (size_t)n * 3 * C;
        for (int part = 0; part < 2; part++)
            for (int h = 0; h < NH; h++) {
                float *g = dqkv + off + part * C + h * hd;
                const float *y = qkv + off + part * C + h * hd;
                const float *c = cosv + ((size_t)h * S + pos[n]) * P;
                const float *s = sinv + ((size_t)h * S + pos[n]) * P;
                if (learnable && learnable[h]) {
                    /* dL/da = -g0 y1 + g1 y0, da/dtheta = pos * omega */
                    float *dth = dtheta + h * P;
                    const float *om = omega + h * P;
                    for (int i = 0; i < P; i++)
                        dth[i] += (g[2 * i + 1] * y[2 * i] -
                                   g[2 * i] * y[2 * i + 1]) *
                                  (float)pos[n] * om[i];
                }
                for (int i = 0; i < P; i++) {
                    float g0 = g[2 * i], g1 = g[2 * i + 1];
                    g[2 * i] = g0 * c[i] + g1 * s[i];
                    g[2 * i + 1] = g1 * c[i] - g0 * s[i];
                }
            }
    }
}

/* Causal softmax of one row of scores: the first len entries are real, the
 * rest (future positions) become exactly 0 so att @ v can be one sgemm. */
static void softmax_causal_row(float *row, int len, int T)
{
    float mx = row[0];
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < len; j++)
        mx = row[j] > mx ? row[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < len; j++) {
        row[j] = bf_expf(row[j] - mx);
        sum += row[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < len; j++)
        row[j] *= inv;
    memset(row + len, 0, (size_t)(T - len) * sizeof *row);
}

/* Query rows per attention block.  Block r only needs the keys up to its
 * last row, so the scores above the diagonal outside the blocks on it are
 * never computed: with T = 4 blocks that is 10/16 of the full products. */
enum { ATT_BLOCK = 32 };

static void attention_forward(float *out, float *att, const float *qkv, int B,
                              int T, int C, int NH)
{
    int hd = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * C3 + h * hd;
            const float *k = q + C, *v = q + 2 * C;
            float *a = att + ((size_t)b * NH + h) * T * T;
            float *y = out + (size_t)b * T * C + h * hd;
            for (int r0 = 0; r0 < T; r0 += ATT_BLOCK) {
                int rows = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
                int keys = r0 + rows;
                float *ar = a + (size_t)r0 * T;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows,
                            keys, hd, scale, q + (size_t)r0 * C3, C3, k, C3,
                            0.0f, ar, T);
                for (int t = 0; t < rows; t++)
                    softmax_causal_row(ar + (size_t)t * T, r0 + t + 1, T);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows,
                            hd, keys, 1.0f, ar, T, v, C3, 0.0f,
                            y + (size_t)r0 * C, C);
            }
        }
}

static void attention_backward(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, int B, int T,
                               int C, int NH)
{
    int hd = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hd);
    int last = (T - 1) / ATT_BLOCK * ATT_BLOCK;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t off = (size_t)b * T * C3 + h * hd;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + h * hd;
            /* last block first: it reaches every key, so it sets dK and dV
             * (beta 0) and the earlier blocks add to them */
            for (int r0 = last; r0 >= 0; r0 -= ATT_BLOCK) {
                int rows = T - r0 < ATT_BLOCK ? T - r0 : ATT_BLOCK;
                int keys = r0 + rows;
                float beta = r0 == last ? 0.0f : 1.0f;
                const float *ar = a + (size_t)r0 * T;
                const float *dyr = dy + (size_t)r0 * C;
                float *ds = scratch + (size_t)r0 * T;
                /* dP = dY V^T;  dV += P^T dY */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows,
                            keys, hd, 1.0f, dyr, C, v, C3, 0.0f, ds, T);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys,
                            hd, rows, 1.0f, ar, T, dyr, C, beta, dv, C3);
                /* softmax backward in place: dS = P * (dP - rowsum(P dP));
                 * P is 0 above the diagonal, so dS is too */
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
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows,
                            hd, keys, scale, ds, T, k, C3, 0.0f,
                            dq + (size_t)r0 * C3, C3);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, keys,
                            hd, rows, scale, ds, T, q + (size_t)r0 * C3, C3,
                            beta, dk, C3);
            }
        }
}

static void gelu_forward(float *out, const float *inp, int n)
{
    for (int i = 0; i < n; i++) {
        float x = inp[i];
        float t = bf_tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x));
        out[i] = 0.5f * x * (1.0f + t);
    }
}

static void gelu_backward(float *dinout, float *out, const float *inp, int n)
{
    for (int i = 0; i < n; i++) {
        float x = inp[i];
        float t = bf_tanhf(GELU_SCALE * (x + GELU_CUBIC * x * x * x));
        float du = GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
        out[i] = 0.5f * x * (1.0f + t);
        dinout[i] *= 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    }
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
    .logits_forward = logits_forward,
    .logits_backward = logits_backward,
    .rotary_tables = rotary_tables,
    .rotary_forward = rotary_forward,
    .rotary_backward = rotary_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .crossentropy_forward = crossentropy_forward,
    .crossentropy_backward = crossentropy_backward,
    .sumsq = sumsq,
    .adamw_update = adamw_update,
};
