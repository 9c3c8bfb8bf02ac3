/* The bifocal transformer: a decoder-only pre-LayerNorm GPT in float32 with
 * rotary position embedding whose frequencies may be learnable per head.
 *
 * Layout follows llm.c: all parameters are one allocation (params_memory),
 * addressed by bf_params; gradients and the two AdamW moments have the same
 * layout, so data-parallel averaging is one allreduce over grads_memory and
 * a checkpoint is a handful of contiguous writes.  Matrices are stored
 * [in, out] row-major (y = x @ W), as Hugging Face GPT-2 stores them.
 *
 * Shapes: V vocab, C d_model, L n_layers, NH n_heads, hd = C/NH,
 *         P = hd/2 rotary pairs, B micro-batch, T sequence length.
 *
 * Rotary: for head h of layer l, pair i of q and k (elements 2i, 2i+1) is
 * rotated by angle p * omega[l][h][i], p the token's position: 0..T-1 in
 * its row unless the caller passes positions (random positional encodings).
 * Parameters hold theta = log(omega) for every head (fixed ones too); the
 * gradient of theta is exact.  freq_learnable[l*NH + h] says whether head h
 * of layer l is spectral (its theta is trained) or geometric (theta never
 * changes).  p-RoPE: the last prope_pairs pairs of every head (the lowest
 * frequencies) have omega = 0 whatever theta holds.
 *
 * PoPE (rope: pope; Gopalakrishnan et al. 2025, arXiv 2509.10534) instead
 * of rotation: component c of a head's q and k becomes a magnitude
 * softplus(x_c) at phase p * theta_c, theta_c = rope_base^(-c/hd) for
 * c = 0..hd-1 (hd frequencies, fixed; log_freq is unused), so the logit is
 * sum_c sp(q_c) sp(k_c) cos((s - t) theta_c) / sqrt(hd).  It runs as an
 * attention of heads of 2 hd over the (cos, sin) pairs, the values padded
 * to 2 hd with zeros (pope_forward, layers.h): qkv keeps 6C a token and
 * the scratch 9 BTC.  The paper's learnable phase bias of the keys
 * (delta_c) is not implemented: PoPE here is its variant without it. */
#ifndef BF_MODEL_H
#define BF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "job_config.h"
#include "model_size.h"

/* bf_model_shape, bf_model_size_from_config, bf_model_size_micro_batch and
 * the sizes they imply live in common/model_size.h, shared with job
 * validation. */

enum { BF_NUM_PARAM_TENSORS = 16 };

/* grads_memory holds num_params gradients and then BF_GRAD_SLOTS floats
 * that belong to the caller: scalars (loss sum, target count, stop votes)
 * placed there ride along the one gradient allreduce of a step, with no
 * copy and no second collective.  The model never reads or clears them. */
enum { BF_GRAD_SLOTS = 4 };

typedef struct bf_params {
    float *wte;       /* [V, C]  tied with the output projection */
    float *ln1w;      /* [L, C] */
    float *ln1b;      /* [L, C] */
    float *qkvw;      /* [L, C, 3C]  q, k, v as consecutive column blocks */
    float *qkvb;      /* [L, 3C] */
    float *attprojw;  /* [L, C, C] */
    float *attprojb;  /* [L, C] */
    float *ln2w;      /* [L, C] */
    float *ln2b;      /* [L, C] */
    float *fcw;       /* [L, C, 4C] */
    float *fcb;       /* [L, 4C] */
    float *fcprojw;   /* [L, 4C, C] */
    float *fcprojb;   /* [L, C] */
    float *lnfw;      /* [C] */
    float *lnfb;      /* [C] */
    float *log_freq;  /* [L, NH, P]  theta = log(omega) */
} bf_params;

/* One parameter tensor of the table, in bf_params order. */
typedef struct bf_param_info {
    const char *name;  /* short name: "wte", "ln1w", ..., "log_freq" */
    size_t offset;     /* in floats from params_memory */
    size_t count;      /* floats in the whole tensor (all layers) */
    int per_layer;     /* 1 if the leading dimension is L */
    int ndim;          /* dims of ONE layer's slice (or of the tensor) */
    int dims[3];       /* shape of one layer's slice */
    int decay;         /* 1: a 2-D weight matrix that gets weight decay */
} bf_param_info;

typedef struct bf_model {
    bf_model_shape shape;
    bf_param_info tensors[BF_NUM_PARAM_TENSORS];
    size_t num_params;
    float *params_memory;  bf_params params;
    float *grads_memory;   bf_params grads;  /* + BF_GRAD_SLOTS floats */
    float *adam_m;         /* first moments, layout of params_memory */
    float *adam_v;         /* second moments */
    uint8_t *freq_learnable; /* [L * NH] */
    int B, T;              /* activation capacity (micro-batch, length) */
    void *impl;            /* activations and scratch, owned by model.c */
} bf_model;

/* Allocates parameters, gradients, moments and activations for micro-batches
 * of up to B rows of up to T tokens; sets freq_learnable from shape.  Does
 * not initialise weights.  Returns 0, or -1 with err set. */
int bf_model_create(bf_model *m, const bf_model_shape *s, int B, int T,
                    bf_error *err);
void bf_model_free(bf_model *m);

/* Weights N(0, 0.02) from `seed`, biases 0, LayerNorm gains 1, theta
 * geometric; zeroes gradients and moments. */
void bf_model_init_weights(bf_model *m, uint64_t seed);

/* Forward over inputs[B*T] with targets[B*T] (-1 = not a target); B <= m->B,
 * T <= m->T.  positions[B*T] gives each token's rotary position, every one
 * below max(shape.n_positions, m->T); NULL means 0..T-1 in every row.
 * Returns the SUM of cross-entropy over target positions and stores their
 * number in *n_targets.  Keeps the activations for backward. */
double bf_model_forward(bf_model *m, const int *inputs, const int *targets,
                        const int *positions, int B, int T, int *n_targets);

/* After bf_model_forward: predicted token (argmax) at each of the B*T
 * positions of the last forward, into out[B*T]. */
void bf_model_argmax(const bf_model *m, int *out);

void bf_model_zero_grad(bf_model *m);

/* Backward of the last forward: ACCUMULATES d(grad_scale * loss_sum)/dparam
 * into grads, so micro-batches and ranks add up.  Pass grad_scale =
 * 1 / (target count of the whole global batch) for a mean loss. */
void bf_model_backward(bf_model *m, float grad_scale);

/* Global L2 norm of the gradients of trainable parameters. */
double bf_model_grad_norm(const bf_model *m);

/* Calls fn(ctx, offset, count, decay, is_freq) for every trainable range of
 * the parameter layout (offsets in floats): each tensor whole, except that
 * log_freq contributes only the P-float slices of its learnable heads.
 * decay: the range gets weight decay; is_freq: learnable theta. */
void bf_model_foreach_trainable(const bf_model *m,
                                void (*fn)(void *ctx, size_t offset,
                                           size_t count, int decay,
                                           int is_freq),
                                void *ctx);

typedef struct bf_adamw_hparams {
    float lr, beta1, beta2, eps, weight_decay;
    float freq_lr_mult;   /* learning-rate multiplier for learnable theta */
} bf_adamw_hparams;

/* One AdamW step (t is 1-based) on grad_scale * grads (grad_scale applies
 * clipping).  Decay only on 2-D weight matrices; learnable theta gets
 * lr * freq_lr_mult and no decay; fixed theta is never touched. */
void bf_adamw_step(bf_model *m, const bf_adamw_hparams *hp, int t,
                   float grad_scale);

/* omega (not theta) of layer l, head h: writes P floats. */
void bf_model_omega(const bf_model *m, int l, int h, float *out);

/* Model FLOPs of one training step on `tokens` tokens of length T
 * (forward + backward, matmuls and attention): for MFU. */
double bf_model_train_flops(const bf_model_shape *s, int T, double tokens);

#endif
