/* The layers of the bifocal transformer, each a *_forward / *_backward pair
 * over flat row-major float buffers (llm.c style), and AdamW's update.
 *
 * Conventions, so callers need not read the bodies:
 *   - N is a number of rows (B*T), C/OC channel counts.
 *   - Backward functions ACCUMULATE (+=) into parameter gradients (dw, db,
 *     dtheta), so micro-batches add up.  Gradients w.r.t. activations are
 *     either accumulated or overwritten as each comment says.
 *   - The linear layers' products are the level's own gemm (gemm.h),
 *     cblas_sgemm where it declines a shape; the rest are cblas_sgemm
 *     calls, except the attention of small heads (a fused kernel;
 *     attention_forward).
 *   - No function allocates; buffers belong to the caller.
 *
 * layers.c is compiled once per dispatch level (isa.h), each copy exporting
 * one bf_kernels table; callers use the names bf_<kernel> below, which go
 * through the table of the level in use. */
#ifndef BF_LAYERS_H
#define BF_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "gemm.h"

/* The fused small-head attention's limits: sequence length and head_dim.
 * Its tiles live on the stack, sized by them; within them it beats the
 * sgemm path (bf_isa_attention_fused, isa.h). */
#define BF_ATT_FUSED_MAX_T 128
#define BF_ATT_FUSED_MAX_HD 64
/* Whether T positions with heads of hd fit the fused path's tiles. */
#define BF_ATT_FUSED_FITS(T, hd)                                               \
    ((T) <= BF_ATT_FUSED_MAX_T && (hd) <= BF_ATT_FUSED_MAX_HD)

typedef struct bf_kernels {

    /* out[N,C] = wte[inp[n], :]; wte [V,C]. */
    void (*encoder_forward)(float *out, const int *inp, const float *wte, int N,
                            int C);
    /* dwte[V,C] += dout rows scattered by token. */
    void (*encoder_backward)(float *dwte, const float *dout, const int *inp,
                             int N, int C);

    /* LayerNorm over the last dim (eps 1e-5): inp [N,C], w,b [C] -> out [N,C],
     * mean, rstd [N] (kept for backward). */
    void (*layernorm_forward)(float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b,
                              int N, int C);
    /* out [N,C] = LayerNorm(inp) from saved statistics: lets backward
     * rebuild the output (a matmul input) instead of keeping it. */
    void (*layernorm_apply)(float *out, const float *inp, const float *mean,
                            const float *rstd, const float *w, const float *b,
                            int N, int C);
    /* dinp [N,C] += ..., dw, db [C] += ...; dout [N,C]. */
    void (*layernorm_backward)(float *dinp, float *dw, float *db,
                               const float *dout, const float *inp,
                               const float *w, const float *mean,
                               const float *rstd, int N, int C);

    /* out [N,OC] = residual [N,OC] + inp [N,C] @ w [C,OC] + bias [OC]: the
     * residual add comes free with the product.  bias and residual may be NULL;
     * residual may be out itself. */
    void (*matmul_forward)(float *out, const float *inp, const float *w,
                           const float *bias, const float *residual, int N,
                           int C, int OC);
    /* dinp [N,C] = dout @ w^T (overwritten; skipped if dinp is NULL);
     * dw [C,OC] += inp^T @ dout and dbias [OC] += column sums of dout (skipped
     * if dw is NULL; dbias may be NULL).  dout [N,OC]. */
    void (*matmul_backward)(float *dinp, float *dw, float *dbias,
                            const float *dout, const float *inp, const float *w,
                            int N, int C, int OC);
    /* The level's matrix product (gemm.h), which the two above run on; it
     * takes column counts in whole vectors of vec_lanes floats (vec.h). */
    bf_gemm_fn *gemm;
    int vec_lanes;

    /* Tied output projection: logits [N,V] = inp [N,C] @ wte^T, wte [V,C]. */
    void (*logits_forward)(float *logits, const float *inp, const float *wte,
                           int N, int C, int V);
    /* dinp [N,C] = dlogits @ wte (overwritten);
     * dwte [V,C] += dlogits^T @ inp. */
    void (*logits_backward)(float *dinp, float *dwte, const float *dlogits,
                            const float *inp, const float *wte, int N, int C,
                            int V);

    /* Head h's entries of one layer's cos/sin tables [S,NH,P]: entry (p, h,
     * i) is of angle p * omega[i] (omega [P], the head's), for the S
     * positions p = 0..S-1.  Position-major, so that a row's heads are one
     * run of C/2 pairs, rotated in one loop (P is 8 at the studies' heads:
     * half a vector a head). */
    void (*rotary_tables)(float *cosv, float *sinv, const float *omega, int h,
                          int NH, int S, int P);
    /* Rotates q and k (columns [0,2C) of qkv [B,T,3C]) in place: pair i of head
     * h in row b, slot t by angle pos[b*T+t] * omega[h][i], looked up in tables
     * [S,NH,P]; pos [B*T], every entry in 0..S-1. */
    void (*rotary_forward)(float *qkv, const float *cosv, const float *sinv,
                           const int *pos, int B, int T, int C);
    /* dqkv [B,T,3C]: on entry the gradient w.r.t. the ROTATED q,k, on return
     * w.r.t. the unrotated ones (v columns untouched).  qkv holds the rotated
     * values of the forward, pos and the tables are the forward's.  For heads
     * with learnable[h] (learnable may be NULL: none), dtheta [NH,P] += exact
     * dL/dtheta, theta = log(omega) (the angle's derivative is pos * omega). */
    void (*rotary_backward)(float *dqkv, float *dtheta, const float *qkv,
                            const float *cosv, const float *sinv,
                            const float *omega, const uint8_t *learnable,
                            const int *pos, int B, int T, int C, int NH);

    /* PoPE: qkv [N,3C] -> out [N,6C], the qkv of an attention of C' = 2C
     * (heads of 2 hd) that gives PoPE's logits.  Component i of head h of q
     * becomes the pair sqrt(2) softplus(q_i) (cos, sin) of angle pos[n] *
     * theta_i, k's the same without the sqrt(2) (which makes the
     * attention's 1/sqrt(2 hd) PoPE's 1/sqrt(hd)); v's head is v_h then hd
     * zeros, so the first hd of each head of the output are PoPE's.  Tables
     * cosv, sinv [S, hd]: entry (p, i) of angle p * theta_i. */
    void (*pope_forward)(float *out, const float *qkv, const float *cosv,
                         const float *sinv, const int *pos, int N, int C,
                         int NH);
    /* dqkv [N,3C] (overwritten) from dout [N,6C], the gradient w.r.t.
     * pope_forward's out [N,6C] (whose values it reads back: no other
     * state is kept); the padding's gradient is dropped. */
    void (*pope_backward)(float *dqkv, const float *dout, const float *out,
                          const float *cosv, const float *sinv,
                          const int *pos, int N, int C, int NH);

    /* Causal multi-head attention: qkv [B,T,3C] -> out [B,T,C]; att
     * [B,NH,T,T] keeps the softmax probabilities (zeros above the diagonal).
     * fused: the fused small-head path without sgemm (only for T <=
     * BF_ATT_FUSED_MAX_T and C/NH <= BF_ATT_FUSED_MAX_HD), else sgemm; both
     * give the same results up to float rounding, and backward takes the
     * forward's path. */
    void (*attention_forward)(float *out, float *att, const float *qkv, int B,
                              int T, int C, int NH, int fused);
    /* dqkv [B,T,3C] overwritten from dout [B,T,C]; scratch holds T*T floats. */
    void (*attention_backward)(float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, int B, int T,
                               int C, int NH, int fused);

    /* GELU, tanh approximation, elementwise over n floats: out = gelu(inp)
     * and dgelu = its derivative at inp, kept for backward (out may be
     * inp: in place). */
    void (*gelu_forward)(float *out, float *dgelu, const float *inp, int n);
    /* dinout: on entry dL/dout, on return dL/dinp = dL/dout * dgelu. */
    void (*gelu_backward)(float *dinout, const float *dgelu, int n);

    /* Cross-entropy over rows whose target is >= 0: logits [N,V] -> returns the
     * SUM of -log softmax[target], *n_targets their count; lse [N] keeps each
     * row's log-sum-exp for backward, argmax [N] each row's prediction. */
    double (*crossentropy_forward)(float *lse, int *argmax, int *n_targets,
                                   const float *logits, const int *targets,
                                   int N, int V);
    /* dlogits [N,V] = scale * (softmax - onehot(target)) on target rows, 0 on
     * the others (overwritten; may alias logits). */
    void (*crossentropy_backward)(float *dlogits, const float *logits,
                                  const float *lse, const int *targets,
                                  float scale, int N, int V);

    /* Sum of squares of x [n], accumulated in double (the gradient norm the
     * trainer clips with). */
    double (*sumsq)(const float *x, size_t n);

    /* AdamW on n parameters: m, v [n] the moments, g [n] the gradients
     * times grad_scale, bias1/bias2 = 1 - beta^t, decoupled decay wd (as
     * torch AdamW: p -= lr * (update + wd * p)). */
    void (*adamw_update)(float *p, float *m, float *v, const float *g,
                         size_t n, float grad_scale, float lr, float wd,
                         float beta1, float beta2, float eps, float bias1,
                         float bias2);

} bf_kernels;

/* The table of the level in use (isa.c sets it; never NULL). */
extern const bf_kernels *bf_kernels_active;

/* One table per level layers.c is compiled for (isa.c picks among them). */
extern const bf_kernels bf_kernels_baseline;
extern const bf_kernels bf_kernels_avx2;
extern const bf_kernels bf_kernels_avx512;

#define bf_encoder_forward (bf_kernels_active->encoder_forward)
#define bf_encoder_backward (bf_kernels_active->encoder_backward)
#define bf_layernorm_forward (bf_kernels_active->layernorm_forward)
#define bf_layernorm_apply (bf_kernels_active->layernorm_apply)
#define bf_layernorm_backward (bf_kernels_active->layernorm_backward)
#define bf_matmul_forward (bf_kernels_active->matmul_forward)
#define bf_matmul_backward (bf_kernels_active->matmul_backward)
#define bf_gemm (bf_kernels_active->gemm)
#define bf_logits_forward (bf_kernels_active->logits_forward)
#define bf_logits_backward (bf_kernels_active->logits_backward)
#define bf_rotary_tables (bf_kernels_active->rotary_tables)
#define bf_rotary_forward (bf_kernels_active->rotary_forward)
#define bf_rotary_backward (bf_kernels_active->rotary_backward)
#define bf_pope_forward (bf_kernels_active->pope_forward)
#define bf_pope_backward (bf_kernels_active->pope_backward)
#define bf_attention_forward (bf_kernels_active->attention_forward)
#define bf_attention_backward (bf_kernels_active->attention_backward)
#define bf_gelu_forward (bf_kernels_active->gelu_forward)
#define bf_gelu_backward (bf_kernels_active->gelu_backward)
#define bf_crossentropy_forward (bf_kernels_active->crossentropy_forward)
#define bf_crossentropy_backward (bf_kernels_active->crossentropy_backward)
#define bf_sumsq (bf_kernels_active->sumsq)
#define bf_adamw_update (bf_kernels_active->adamw_update)

#endif
