/* The layers of the bifocal transformer, each a *_forward / *_backward pair
 * over flat row-major float buffers (llm.c style).
 *
 * Conventions, so callers need not read the bodies:
 *   - N is a number of rows (B*T), C/OC channel counts.
 *   - Backward functions ACCUMULATE (+=) into parameter gradients (dw, db,
 *     dtheta), so micro-batches add up.  Gradients w.r.t. activations are
 *     either accumulated or overwritten as each comment says.
 *   - Every matrix product is one or more cblas_sgemm calls.
 *   - No function allocates; buffers belong to the caller. */
#ifndef BF_LAYERS_H
#define BF_LAYERS_H

#include <stdint.h>

/* out[N,C] = wte[inp[n], :]; wte [V,C]. */
void bf_encoder_forward(float *out, const int *inp, const float *wte, int N,
                        int C);
/* dwte[V,C] += dout rows scattered by token. */
void bf_encoder_backward(float *dwte, const float *dout, const int *inp, int N,
                         int C);

/* LayerNorm over the last dim (eps 1e-5): inp [N,C], w,b [C] -> out [N,C],
 * mean, rstd [N] (kept for backward). */
void bf_layernorm_forward(float *out, float *mean, float *rstd,
                          const float *inp, const float *w, const float *b,
                          int N, int C);
/* out [N,C] = LayerNorm(inp) from saved statistics: lets backward rebuild the
 * output (a matmul input) instead of keeping it. */
void bf_layernorm_apply(float *out, const float *inp, const float *mean,
                        const float *rstd, const float *w, const float *b,
                        int N, int C);
/* dinp [N,C] += ..., dw, db [C] += ...; dout [N,C]. */
void bf_layernorm_backward(float *dinp, float *dw, float *db,
                           const float *dout, const float *inp,
                           const float *w, const float *mean,
                           const float *rstd, int N, int C);

/* out [N,OC] = residual [N,OC] + inp [N,C] @ w [C,OC] + bias [OC]: the
 * residual add comes free with the product.  bias and residual may be NULL;
 * residual may be out itself. */
void bf_matmul_forward(float *out, const float *inp, const float *w,
                       const float *bias, const float *residual, int N,
                       int C, int OC);
/* dinp [N,C] = dout @ w^T (overwritten; skipped if dinp is NULL);
 * dw [C,OC] += inp^T @ dout and dbias [OC] += column sums of dout (skipped
 * if dw is NULL; dbias may be NULL).  dout [N,OC]. */
void bf_matmul_backward(float *dinp, float *dw, float *dbias,
                        const float *dout, const float *inp, const float *w,
                        int N, int C, int OC);

/* Tied output projection: logits [N,V] = inp [N,C] @ wte^T, wte [V,C]. */
void bf_logits_forward(float *logits, const float *inp, const float *wte,
                       int N, int C, int V);
/* dinp [N,C] = dlogits @ wte (overwritten); dwte [V,C] += dlogits^T @ inp. */
void bf_logits_backward(float *dinp, float *dwte, const float *dlogits,
                        const float *inp, const float *wte, int N, int C,
                        int V);

/* cos/sin tables [NH,S,P] for one layer: entry (h, p, i) is of angle
 * p * omega[h*P + i], for the S positions p = 0..S-1. */
void bf_rotary_tables(float *cosv, float *sinv, const float *omega, int NH,
                      int S, int P);
/* Rotates q and k (columns [0,2C) of qkv [B,T,3C]) in place: pair i of head
 * h in row b, slot t by angle pos[b*T+t] * omega[h][i], looked up in tables
 * [NH,S,P]; pos [B*T], every entry in 0..S-1. */
void bf_rotary_forward(float *qkv, const float *cosv, const float *sinv,
                       const int *pos, int S, int B, int T, int C, int NH);
/* dqkv [B,T,3C]: on entry the gradient w.r.t. the ROTATED q,k, on return
 * w.r.t. the unrotated ones (v columns untouched).  qkv holds the rotated
 * values of the forward, pos and the tables are the forward's.  For heads
 * with learnable[h] (learnable may be NULL: none), dtheta [NH,P] += exact
 * dL/dtheta, theta = log(omega) (the angle's derivative is pos * omega). */
void bf_rotary_backward(float *dqkv, float *dtheta, const float *qkv,
                        const float *cosv, const float *sinv,
                        const float *omega, const uint8_t *learnable,
                        const int *pos, int S, int B, int T, int C, int NH);

/* Causal multi-head attention: qkv [B,T,3C] -> out [B,T,C]; att
 * [B,NH,T,T] keeps the softmax probabilities (zeros above the diagonal). */
void bf_attention_forward(float *out, float *att, const float *qkv, int B,
                          int T, int C, int NH);
/* dqkv [B,T,3C] overwritten from dout [B,T,C]; scratch holds T*T floats. */
void bf_attention_backward(float *dqkv, float *scratch, const float *dout,
                           const float *qkv, const float *att, int B, int T,
                           int C, int NH);

/* GELU, tanh approximation, elementwise over n floats. */
void bf_gelu_forward(float *out, const float *inp, int n);
/* dinout: on entry dL/dout, on return dL/dinp.  Also writes out = gelu(inp)
 * again, since backward needs it for the next weight gradient and the
 * forward does not keep it (one pass instead of a stored [N,4C] tensor). */
void bf_gelu_backward(float *dinout, float *out, const float *inp, int n);

/* Cross-entropy over rows whose target is >= 0: logits [N,V] -> returns the
 * SUM of -log softmax[target], *n_targets their count; lse [N] keeps each
 * row's log-sum-exp for backward, argmax [N] each row's prediction. */
double bf_crossentropy_forward(float *lse, int *argmax, int *n_targets,
                               const float *logits, const int *targets,
                               int N, int V);
/* dlogits [N,V] = scale * (softmax - onehot(target)) on target rows, 0 on
 * the others (overwritten; may alias logits). */
void bf_crossentropy_backward(float *dlogits, const float *logits,
                              const float *lse, const int *targets,
                              float scale, int N, int V);

#endif
