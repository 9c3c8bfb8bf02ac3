/* Finite-difference checks of every layer's backward in engine/layers.c.
 *
 * Each layer's output is reduced to a scalar L = sum(out * R) with a fixed
 * random R, so the analytic gradient is the layer's backward with dout = R.
 * Buffers the backward accumulates into start non-zero, to prove that it
 * adds rather than overwrites; buffers it overwrites start as garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "layers.h"
#include "test_gradcheck_util.h"
#include "test_isa_util.h"

#define TOL 1e-3    /* relative error; correct code gives 1e-6..2e-4 */
#define EPS 1e-2f
#define MAXCHK 400

enum { N = 6, C = 8, OC = 12, V = 7, B = 2, T = 5, NH = 2, HD = C / NH,
       P = HD / 2 };

static double dot_r(const float *out, const float *r, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)out[i] * r[i];
    return s;
}

static void fill_const(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

/* Subtracts the starting value an accumulating gradient buffer had. */
static void remove_offset(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        x[i] -= v;
}

/* ---------------------------------------------------------------- layernorm */

/* Two shapes: N = 6, C = 8 (rows one at a time at every level but SSE2's,
 * which takes a block of 4 and 2 more), and LN_N = 37, LN_C = 32, whole
 * vectors at every level: blocks of a vector's width of rows
 * (ln_block_stats, ln_block_grad_means) and the rows past them. */
enum { LN_N = 37, LN_C = 32 };

typedef struct ln_ctx {
    int n, c;
    float x[LN_N * LN_C], w[LN_C], b[LN_C], r[LN_N * LN_C], out[LN_N * LN_C],
        mean[LN_N], rstd[LN_N];
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    bf_layernorm_forward(c->out, c->mean, c->rstd, c->x, c->w, c->b, c->n,
                         c->c);
    return dot_r(c->out, c->r, (size_t)c->n * c->c);
}

static void check_layernorm(int rows, int ch)
{
    static ln_ctx c; /* 12 KiB: off the stack */
    c.n = rows;
    c.c = ch;
    size_t nc = (size_t)rows * ch;
    gc_fill_normal(c.x, nc, 1.5, 1);
    gc_fill_normal(c.w, ch, 0.5, 2);
    for (int i = 0; i < ch; i++)
        c.w[i] += 1.0f;
    gc_fill_normal(c.b, ch, 0.5, 3);
    gc_fill_normal(c.r, nc, 1.0, 4);
    ln_loss(&c);

    /* the output really is normalised: mean 0, variance 1 before w, b */
    for (int n = 0; n < rows; n++) {
        double m = 0, v = 0;
        for (int i = 0; i < ch; i++)
            m += (c.out[n * ch + i] - c.b[i]) / c.w[i];
        m /= ch;
        for (int i = 0; i < ch; i++) {
            double z = (c.out[n * ch + i] - c.b[i]) / c.w[i] - m;
            v += z * z;
        }
        assert_true(fabs(m) < 1e-5);
        assert_true(fabs(v / ch - 1.0) < 1e-3);
    }

    static float dx[LN_N * LN_C], again[LN_N * LN_C];
    float dw[LN_C], db[LN_C];
    fill_const(dx, nc, 0.5f);
    fill_const(dw, ch, 0.5f);
    fill_const(db, ch, 0.5f);
    bf_layernorm_backward(dx, dw, db, c.r, c.x, c.w, c.mean, c.rstd, rows,
                          ch);
    remove_offset(dx, nc, 0.5f);
    remove_offset(dw, ch, 0.5f);
    remove_offset(db, ch, 0.5f);
    assert_true(gc_rel_error("layernorm dx", ln_loss, &c, c.x, dx, nc,
                             MAXCHK, EPS) < TOL);
    assert_true(gc_rel_error("layernorm dw", ln_loss, &c, c.w, dw, ch,
                             MAXCHK, EPS) < TOL);
    assert_true(gc_rel_error("layernorm db", ln_loss, &c, c.b, db, ch,
                             MAXCHK, EPS) < TOL);

    /* apply() from the saved statistics rebuilds the forward output */
    ln_loss(&c); /* the checks above left the stats of a perturbed input */
    bf_layernorm_apply(again, c.x, c.mean, c.rstd, c.w, c.b, rows, ch);
    for (size_t i = 0; i < nc; i++)
        assert_float_equal(again[i], c.out[i], 1e-6);
}

static void test_layernorm(void **state)
{
    (void)state;
    check_layernorm(N, C);
    check_layernorm(LN_N, LN_C);
}

/* ------------------------------------------------------------------- matmul */

/* Two shapes: (N, C, OC), whose OC of 12 the level's gemm declines (the
 * forward and dw take cblas), and MM_N x MM_C -> MM_OC, whole vectors at
 * every level (16 and 32 columns), 9 rows past a tile's edge: the gemm
 * (engine/gemm.h) everywhere. */
enum { MM_N = 9, MM_C = 16, MM_OC = 32 };

typedef struct mm_ctx {
    int n, c, oc;
    float x[MM_N * MM_C], w[MM_C * MM_OC], bias[MM_OC], r[MM_N * MM_OC],
        out[MM_N * MM_OC];
} mm_ctx;

static double mm_loss(void *p)
{
    mm_ctx *c = p;
    bf_matmul_forward(c->out, c->x, c->w, c->bias, NULL, c->n, c->c, c->oc);
    return dot_r(c->out, c->r, (size_t)c->n * c->oc);
}

static void check_matmul(int n_rows, int ch, int och)
{
    mm_ctx c = {.n = n_rows, .c = ch, .oc = och};
    size_t nx = (size_t)n_rows * ch, nw = (size_t)ch * och,
           no = (size_t)n_rows * och;
    gc_fill_normal(c.x, nx, 1.0, 10);
    gc_fill_normal(c.w, nw, 1.0, 11);
    gc_fill_normal(c.bias, (size_t)och, 1.0, 12);
    gc_fill_normal(c.r, no, 1.0, 13);
    mm_loss(&c);

    /* forward against a plain triple loop */
    for (int n = 0; n < n_rows; n++)
        for (int o = 0; o < och; o++) {
            double s = c.bias[o];
            for (int i = 0; i < ch; i++)
                s += (double)c.x[n * ch + i] * c.w[i * och + o];
            assert_float_equal(c.out[n * och + o], s, 1e-4);
        }
    /* a residual adds on top, from another buffer or in place, with or
     * without a bias; with neither, out is the product alone (whatever it
     * held before) */
    float res[MM_N * MM_OC], acc[MM_N * MM_OC], nobias[MM_N * MM_OC],
        inplace[MM_N * MM_OC], bare[MM_N * MM_OC];
    gc_fill_normal(res, no, 1.0, 14);
    bf_matmul_forward(acc, c.x, c.w, c.bias, res, n_rows, ch, och);
    memcpy(nobias, res, no * sizeof *res);
    bf_matmul_forward(nobias, c.x, c.w, NULL, nobias, n_rows, ch, och);
    memcpy(inplace, res, no * sizeof *res);
    bf_matmul_forward(inplace, c.x, c.w, c.bias, inplace, n_rows, ch, och);
    fill_const(bare, no, 1e9f);
    bf_matmul_forward(bare, c.x, c.w, NULL, NULL, n_rows, ch, och);
    for (int n = 0; n < n_rows; n++)
        for (int o = 0; o < och; o++) {
            int i = n * och + o;
            assert_float_equal(acc[i] - res[i], c.out[i], 1e-5);
            assert_float_equal(inplace[i], acc[i], 1e-6);
            assert_float_equal(nobias[i] - res[i], c.out[i] - c.bias[o],
                               1e-5);
            assert_float_equal(bare[i], c.out[i] - c.bias[o], 1e-5);
        }

    float dx[MM_N * MM_C], dw[MM_C * MM_OC], db[MM_OC];
    fill_const(dx, nx, 1e9f); /* overwritten */
    fill_const(dw, nw, 0.5f);
    fill_const(db, (size_t)och, 0.5f);
    bf_matmul_backward(dx, dw, db, c.r, c.x, c.w, n_rows, ch, och);
    remove_offset(dw, nw, 0.5f);
    remove_offset(db, (size_t)och, 0.5f);
    assert_true(gc_rel_error("matmul dx", mm_loss, &c, c.x, dx, nx, MAXCHK,
                             EPS) < TOL);
    assert_true(gc_rel_error("matmul dw", mm_loss, &c, c.w, dw, nw, MAXCHK,
                             EPS) < TOL);
    assert_true(gc_rel_error("matmul dbias", mm_loss, &c, c.bias, db,
                             (size_t)och, MAXCHK, EPS) < TOL);
}

static void test_matmul(void **state)
{
    (void)state;
    check_matmul(N, C, OC);          /* cblas where the gemm declines */
    check_matmul(MM_N, MM_C, MM_OC); /* the gemm at every level */
}

/* ----------------------------------------------------- tied logits, encoder */

typedef struct tied_ctx {
    float x[N * C], wte[V * C], r[N * V], out[N * V];
    int tok[N];
    float emb[N * C], remb[N * C];
} tied_ctx;

static double logits_loss(void *p)
{
    tied_ctx *c = p;
    bf_logits_forward(c->out, c->x, c->wte, N, C, V);
    return dot_r(c->out, c->r, N * V);
}

static double encoder_loss(void *p)
{
    tied_ctx *c = p;
    bf_encoder_forward(c->emb, c->tok, c->wte, N, C);
    return dot_r(c->emb, c->remb, N * C);
}

static void test_logits_and_encoder(void **state)
{
    (void)state;
    tied_ctx c;
    gc_fill_normal(c.x, N * C, 1.0, 20);
    gc_fill_normal(c.wte, V * C, 1.0, 21);
    gc_fill_normal(c.r, N * V, 1.0, 22);
    gc_fill_normal(c.remb, N * C, 1.0, 23);
    const int tok[N] = {3, 1, 3, 6, 0, 3}; /* repeats must add up */
    memcpy(c.tok, tok, sizeof tok);

    logits_loss(&c);
    float dx[N * C], dwte[V * C];
    fill_const(dwte, V * C, 0.5f);
    bf_logits_backward(dx, dwte, c.r, c.x, c.wte, N, C, V);
    remove_offset(dwte, V * C, 0.5f);
    assert_true(gc_rel_error("logits dinp", logits_loss, &c, c.x, dx, N * C,
                             MAXCHK, EPS) < TOL);
    assert_true(gc_rel_error("logits dwte", logits_loss, &c, c.wte, dwte,
                             V * C, MAXCHK, EPS) < TOL);

    encoder_loss(&c);
    assert_memory_equal(c.emb + 3 * C, c.wte + 6 * C, C * sizeof(float));
    fill_const(dwte, V * C, 0.5f);
    bf_encoder_backward(dwte, c.remb, c.tok, N, C);
    remove_offset(dwte, V * C, 0.5f);
    assert_true(gc_rel_error("encoder dwte", encoder_loss, &c, c.wte, dwte,
                             V * C, MAXCHK, EPS) < TOL);
}

/* ------------------------------------------------------------------- rotary */

/* Positions: row 0 at 0..T-1, row 1 at a sorted subset of 0..S-1 as random
 * positional encodings give, so dtheta must use the real positions. */
enum { S = 3 * T };
static const int ROT_POS[B * T] = {0, 1, 2, 3, 4, 2, 5, 6, 11, 14};

typedef struct rot_ctx {
    float qkv_in[B * T * 3 * C], qkv[B * T * 3 * C], r[B * T * 3 * C];
    float theta[NH * P], omega[NH * P], cosv[NH * S * P], sinv[NH * S * P];
} rot_ctx;

static double rot_loss(void *p)
{
    rot_ctx *c = p;
    for (int i = 0; i < NH * P; i++)
        c->omega[i] = expf(c->theta[i]);
    for (int h = 0; h < NH; h++)
        bf_rotary_tables(c->cosv, c->sinv, c->omega + h * P, h, NH, S, P);
    memcpy(c->qkv, c->qkv_in, sizeof c->qkv);
    bf_rotary_forward(c->qkv, c->cosv, c->sinv, ROT_POS, B, T, C);
    return dot_r(c->qkv, c->r, B * T * 3 * C);
}

static void test_rotary(void **state)
{
    (void)state;
    _Static_assert(sizeof ROT_POS / sizeof ROT_POS[0] == B * T, "B*T");
    rot_ctx c;
    gc_fill_normal(c.qkv_in, B * T * 3 * C, 1.0, 30);
    gc_fill_normal(c.r, B * T * 3 * C, 1.0, 31);
    gc_fill_normal(c.theta, NH * P, 0.5, 32);
    rot_loss(&c);

    /* position 0 is not rotated; v is never rotated; norms of pairs kept */
    assert_memory_equal(c.qkv, c.qkv_in, 3 * C * sizeof(float));
    for (int n = 0; n < B * T; n++) {
        const float *y = c.qkv + n * 3 * C, *x = c.qkv_in + n * 3 * C;
        assert_memory_equal(y + 2 * C, x + 2 * C, C * sizeof(float));
        for (int i = 0; i < C; i += 2)
            assert_float_equal(y[i] * y[i] + y[i + 1] * y[i + 1],
                               x[i] * x[i] + x[i + 1] * x[i + 1], 1e-5);
    }
    /* the same position rotates alike in any slot: row 0 slot 2 and row 1
     * slot 0 are both at position 2 */
    rot_ctx same = c;
    memcpy(same.qkv_in + (size_t)T * 3 * C, same.qkv_in + 2 * 3 * C,
           3 * C * sizeof(float));
    rot_loss(&same);
    assert_memory_equal(same.qkv + (size_t)T * 3 * C, same.qkv + 2 * 3 * C,
                        3 * C * sizeof(float));

    float d[B * T * 3 * C], dtheta[NH * P];
    const uint8_t learnable[NH] = {0, 1};
    memcpy(d, c.r, sizeof d);
    fill_const(dtheta, NH * P, 0.5f);
    bf_rotary_backward(d, dtheta, c.qkv, c.cosv, c.sinv, c.omega, learnable,
                       ROT_POS, B, T, C, NH);
    remove_offset(dtheta, NH * P, 0.5f);
    assert_true(gc_rel_error("rotary dqkv", rot_loss, &c, c.qkv_in, d,
                             B * T * 3 * C, MAXCHK, EPS) < TOL);
    assert_true(gc_rel_error("rotary dtheta (learnable)", rot_loss, &c,
                             c.theta + P, dtheta + P, P, MAXCHK, 1e-3f) < TOL);
    for (int i = 0; i < P; i++) /* fixed head: no gradient at all */
        assert_true(dtheta[i] == 0.0f);
}

/* --------------------------------------------------------------------- pope */

typedef struct pope_ctx {
    float qkv[B * T * 3 * C], out[B * T * 6 * C], r[B * T * 6 * C];
    float cosv[S * HD], sinv[S * HD], theta[HD];
} pope_ctx;

static double pope_loss(void *p)
{
    pope_ctx *c = p;
    bf_pope_forward(c->out, c->qkv, c->cosv, c->sinv, ROT_POS, B * T, C, NH);
    return dot_r(c->out, c->r, B * T * 6 * C);
}

static double softplus_d(double x) { return log1p(exp(x)); }

/* PoPE's logit from the expanded q, k (as the attention of heads of 2 HD
 * scores them) against sum_i sp(q_i) sp(k_i) cos((s - t) theta_i) /
 * sqrt(HD) in double, for every pair of rows, positions s and t. */
static void check_pope_logits(const pope_ctx *c)
{
    for (int n = 0; n < B * T; n++)
        for (int m = 0; m < B * T; m++)
            for (int h = 0; h < NH; h++) {
                const float *q = c->out + (size_t)n * 6 * C + h * 2 * HD;
                const float *k = c->out + (size_t)m * 6 * C + 2 * C +
                                 h * 2 * HD;
                const float *xq = c->qkv + (size_t)n * 3 * C + h * HD;
                const float *xk = c->qkv + (size_t)m * 3 * C + C + h * HD;
                double got = 0, want = 0, dpos = ROT_POS[n] - ROT_POS[m];
                for (int e = 0; e < 2 * HD; e++)
                    got += (double)q[e] * k[e] / sqrt(2.0 * HD);
                for (int i = 0; i < HD; i++)
                    want += softplus_d(xq[i]) * softplus_d(xk[i]) *
                            cos(dpos * c->theta[i]) / sqrt((double)HD);
                assert_float_equal(got, want, 1e-5);
            }
}

static void test_pope(void **state)
{
    (void)state;
    pope_ctx c;
    gc_fill_normal(c.qkv, B * T * 3 * C, 1.5, 50);
    gc_fill_normal(c.r, B * T * 6 * C, 1.0, 51);
    c.qkv[3] = -9.0f; /* a magnitude near 0: the sigmoid read back */
    for (int i = 0; i < HD; i++) {
        c.theta[i] = powf(10000.0f, -(float)i / HD);
        bf_rotary_tables(c.cosv, c.sinv, &c.theta[i], i, HD, S, 1);
    }
    pope_loss(&c);
    check_pope_logits(&c);
    /* values pass unchanged, each head padded with HD zeros */
    for (int n = 0; n < B * T; n++)
        for (int h = 0; h < NH; h++) {
            const float *y = c.out + (size_t)n * 6 * C + 4 * C + h * 2 * HD;
            assert_memory_equal(y, c.qkv + (size_t)n * 3 * C + 2 * C + h * HD,
                                HD * sizeof(float));
            for (int i = HD; i < 2 * HD; i++)
                assert_true(y[i] == 0.0f);
        }
    float d[B * T * 3 * C];
    fill_const(d, B * T * 3 * C, 1e9f); /* overwritten */
    bf_pope_backward(d, c.r, c.out, c.cosv, c.sinv, ROT_POS, B * T, C, NH);
    assert_true(gc_rel_error("pope dqkv", pope_loss, &c, c.qkv, d,
                             B * T * 3 * C, MAXCHK, EPS) < TOL);
}

/* ---------------------------------------------------------------- attention */

typedef struct att_ctx {
    int b, t;  /* batch and length of this case */
    int fused; /* the path: fused small-head kernel or sgemm */
    float *qkv, *out, *att, *r;
} att_ctx;

static double att_loss(void *p)
{
    att_ctx *c = p;
    bf_attention_forward(c->out, c->att, c->qkv, c->b, c->t, C, NH,
                         c->fused);
    return dot_r(c->out, c->r, (size_t)c->b * c->t * C);
}

/* Both paths, at lengths up to the fused tiles' limit (layers.h,
 * BF_ATT_FUSED_MAX_T) and the sgemm path past it: the fused kernel takes
 * query rows in groups of 4 (T = 5 ends with a group of one real row), the
 * sgemm path's scores come block by block (32 rows) with dK, dV summed
 * over blocks. */
static void check_attention(int b, int t, uint64_t seed, int fused)
{
    att_ctx c = {.b = b, .t = t, .fused = fused};
    size_t n_qkv = (size_t)b * t * 3 * C, n_out = (size_t)b * t * C;
    c.qkv = malloc(n_qkv * sizeof(float));
    c.out = malloc(n_out * sizeof(float));
    c.r = malloc(n_out * sizeof(float));
    c.att = malloc((size_t)b * NH * t * t * sizeof(float));
    gc_fill_normal(c.qkv, n_qkv, 1.0, seed);
    gc_fill_normal(c.r, n_out, 1.0, seed + 1);
    att_loss(&c);

    /* causal rows of probabilities, checked against a double softmax */
    double scale = 1.0 / sqrt((double)HD);
    double *sc = malloc(t * sizeof *sc);
    for (int bb = 0; bb < b; bb++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < t; i++) {
                const float *a = c.att + (((size_t)bb * NH + h) * t + i) * t;
                const float *q = c.qkv + ((size_t)bb * t + i) * 3 * C + h * HD;
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const float *k = c.qkv + ((size_t)bb * t + j) * 3 * C +
                                     C + h * HD;
                    sc[j] = 0;
                    for (int e = 0; e < HD; e++)
                        sc[j] += (double)q[e] * k[e] * scale;
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j <= i; j++)
                    sum += exp(sc[j] - mx);
                for (int j = 0; j < t; j++) {
                    double want = j <= i ? exp(sc[j] - mx) / sum : 0.0;
                    assert_float_equal(a[j], want, 1e-6);
                }
            }
    free(sc);

    float *d = malloc(n_qkv * sizeof(float));
    float *scratch = malloc((size_t)t * t * sizeof(float));
    fill_const(d, n_qkv, 1e9f); /* overwritten */
    fill_const(scratch, (size_t)t * t, 1e9f);
    bf_attention_backward(d, scratch, c.r, c.qkv, c.att, b, t, C, NH, fused);
    char what[64];
    snprintf(what, sizeof what, "attention dqkv (T=%d, %s)", t,
             fused ? "fused" : "sgemm");
    assert_true(gc_rel_error(what, att_loss, &c, c.qkv, d, n_qkv, MAXCHK,
                             EPS) < TOL);
    free(d);
    free(scratch);
    free(c.qkv);
    free(c.out);
    free(c.r);
    free(c.att);
}

static void test_attention(void **state)
{
    (void)state;
    for (int fused = 0; fused <= 1; fused++) {
        check_attention(B, T, 40, fused);
        check_attention(1, 32, 42, fused);
        check_attention(1, BF_ATT_FUSED_MAX_T, 44, fused);
    }
    check_attention(1, BF_ATT_FUSED_MAX_T + 6, 46, 0);
}

/* --------------------------------------------------------------------- gelu */

enum { NG = 97 };

typedef struct gelu_ctx {
    float x[NG], out[NG], dgelu[NG], r[NG];
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    bf_gelu_forward(c->out, c->dgelu, c->x, NG);
    return dot_r(c->out, c->r, NG);
}

static void test_gelu(void **state)
{
    (void)state;
    /* accuracy of the vectorised tanh over the whole range, saturation
     * included, against libm in double */
    enum { NS = 2001 };
    static float xs[NS], ys[NS], dgs[NS];
    for (int i = 0; i < NS; i++)
        xs[i] = -20.0f + 40.0f * (float)i / (NS - 1);
    bf_gelu_forward(ys, dgs, xs, NS);
    for (int i = 0; i < NS; i++) {
        double x = xs[i];
        double want = 0.5 * x *
                      (1.0 + tanh(0.7978845608028654 *
                                  (x + 0.044715 * x * x * x)));
        assert_float_equal(ys[i], want, 1e-6 * fmax(1.0, fabs(x)));
    }
    /* each element as alone: the kernel's groups of vectors and its last
     * elements, padded, give the same values */
    for (int i = 0; i < NS; i += 7) {
        float y1, dg1;
        bf_gelu_forward(&y1, &dg1, &xs[i], 1);
        assert_memory_equal(&y1, &ys[i], sizeof y1);
        assert_memory_equal(&dg1, &dgs[i], sizeof dg1);
    }
    /* Nothing subnormal, out or back: where 1 + tanh(u) rounds to 0 the
     * output and the derivative are exactly 0.  Subnormals there slowed
     * the SSE2 and AVX2 copies (docs/training.md). */
    static float ds[NS];
    for (int i = 0; i < NS; i++)
        ds[i] = 1.0f;
    bf_gelu_backward(ds, dgs, NS);
    for (int i = 0; i < NS; i++) {
        assert_int_not_equal(fpclassify(ys[i]), FP_SUBNORMAL);
        assert_int_not_equal(fpclassify(ds[i]), FP_SUBNORMAL);
        if (xs[i] < -6.0f)
            assert_true(ys[i] == 0.0f && ds[i] == 0.0f);
    }

    gelu_ctx c;
    gc_fill_normal(c.x, NG, 2.0, 50);
    gc_fill_normal(c.r, NG, 1.0, 51);
    gelu_loss(&c);
    /* backward: dL/dout times the derivative the forward kept */
    float d[NG];
    memcpy(d, c.r, sizeof d);
    bf_gelu_backward(d, c.dgelu, NG);
    /* in place (out = inp, as the model runs it): the same values */
    float inplace[NG], dg[NG];
    memcpy(inplace, c.x, sizeof inplace);
    bf_gelu_forward(inplace, dg, inplace, NG);
    assert_memory_equal(inplace, c.out, sizeof inplace);
    assert_memory_equal(dg, c.dgelu, sizeof dg);
    assert_true(gc_rel_error("gelu dx", gelu_loss, &c, c.x, d, NG, MAXCHK,
                             1e-3f) < TOL);
}

/* ------------------------------------------------------------ cross-entropy */

typedef struct ce_ctx {
    float logits[N * V], lse[N];
    int targets[N], argmax[N], count;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    return bf_crossentropy_forward(c->lse, c->argmax, &c->count, c->logits,
                                   c->targets, N, V);
}

static void test_crossentropy(void **state)
{
    (void)state;
    ce_ctx c;
    gc_fill_normal(c.logits, N * V, 2.0, 60);
    const int targets[N] = {2, -1, 0, 6, -1, 5};
    memcpy(c.targets, targets, sizeof targets);
    double loss = ce_loss(&c);
    assert_int_equal(c.count, 4);

    double want = 0.0;
    for (int n = 0; n < N; n++) {
        const float *z = c.logits + n * V;
        int best = 0;
        double sum = 0.0;
        for (int v = 0; v < V; v++) {
            sum += exp(z[v]);
            if (z[v] > z[best])
                best = v;
        }
        assert_int_equal(c.argmax[n], best);
        assert_float_equal(c.lse[n], log(sum), 1e-5);
        if (targets[n] >= 0)
            want += log(sum) - z[targets[n]];
    }
    assert_float_equal(loss, want, 1e-5);

    float d[N * V], d4[N * V];
    bf_crossentropy_backward(d, c.logits, c.lse, c.targets, 1.0f, N, V);
    assert_true(gc_rel_error("crossentropy dlogits", ce_loss, &c, c.logits, d,
                             N * V, MAXCHK, 1e-3f) < TOL);
    for (int v = 0; v < V; v++) /* non-target rows carry no gradient */
        assert_true(d[1 * V + v] == 0.0f && d[4 * V + v] == 0.0f);
    ce_loss(&c); /* lse of the unperturbed logits again */
    bf_crossentropy_backward(d4, c.logits, c.lse, c.targets, 0.25f, N, V);
    for (int i = 0; i < N * V; i++)
        assert_float_equal(d4[i], 0.25f * d[i], 1e-7 + 1e-6 * fabsf(d[i]));
}

/* A diverged model's NaN stays NaN through every exp (so the trainer sees a
 * non-finite loss and stops), huge inputs saturate, and neither takes an
 * undefined path (the ASan+UBSan build runs this). */
static void test_nonfinite_inputs(void **state)
{
    (void)state;
    float z[V] = {0.5f, NAN, -1.0f, 2.0f, 0.0f, 1.0f, -2.0f};
    float lse[1];
    int argmax[1], n = 0;
    const int target[1] = {0};
    assert_true(isnan(bf_crossentropy_forward(lse, argmax, &n, z, target, 1,
                                              V)));
    float big[V] = {1e30f, -1e30f, 3e38f, -3e38f, 0.0f, 1.0f, 2.0f};
    double loss = bf_crossentropy_forward(lse, argmax, &n, big, target, 1, V);
    assert_true(isfinite(loss) && loss >= 0.0);

    float in[4] = {NAN, 1e30f, -1e30f, 0.5f}, out[4], dout[4];
    bf_gelu_forward(out, dout, in, 4);
    assert_true(isnan(out[0]));
    assert_true(isfinite(out[3]));
}

int main(void)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_logits_and_encoder),
        cmocka_unit_test(test_rotary),
        cmocka_unit_test(test_pope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_nonfinite_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
