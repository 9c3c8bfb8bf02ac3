/* model_size: how big a job's model is and how much memory it needs per
 * rank, from its config alone.  The one home of these sizes: the engine
 * allocates by them (engine/model.c asserts its layout matches), the
 * coordinator refuses at submission a job whose estimate is over the
 * sweep's budget, and a worker refuses before allocating one over its own
 * (docs/job-config.md, Memory).
 *
 * Shapes: V vocab, C d_model, L n_layers, NH n_heads, P = C/NH/2 rotary
 * pairs, B micro-batch rows, T sequence length, S = max(random_positions,
 * T) positions the rotary tables cover. */
#ifndef BF_MODEL_SIZE_H
#define BF_MODEL_SIZE_H

#include <stddef.h>

#include "bf_error.h"
#include "job_config.h"

typedef struct bf_model_shape {
    int vocab;          /* V */
    int d_model;        /* C */
    int n_layers;       /* L */
    int n_heads;        /* NH */
    int max_seq;        /* longest T the model will see */
    int n_positions;    /* positions are < max(n_positions, T of create) */
    bf_rope_kind rope;  /* none: no rotation at all */
    double rope_base;   /* geometric init: omega_i = base^(-2i/hd) */
    int spectral_heads; /* learnable heads per layer: the last ones */
    int prope_pairs;    /* pairs per head at omega = 0: the last ones */
} bf_model_shape;

/* Fills a shape from a job config and the task's vocabulary size. */
void bf_model_size_from_config(bf_model_shape *s, const bf_job_config *cfg,
                                int vocab);

/* Floats of the parameter layout (every tensor, log_freq included). */
size_t bf_model_size_params(const bf_model_shape *s);

/* Positions the rotary tables of a model of capacity T cover (S). */
int bf_model_size_table_positions(const bf_model_shape *s, int T);

/* Sizes in floats of the activation buffers of a (B, T) capacity, each
 * for one layer where there is one per layer. */
typedef struct bf_model_act_sizes {
    size_t btc;   /* B*T*C: a residual stream */
    size_t bt;    /* B*T: a statistic per token */
    size_t att;   /* B*NH*T*T: attention weights */
    size_t qkv;   /* B*T*3C, B*T*6C under pope (PoPE's q, k, v) */
    size_t scratch; /* 6 B*T*C, 9 under pope */
    size_t table; /* L*NH*P*S: a rotary table (cos or sin), every layer;
                     hd*S under pope (one table, its hd frequencies) */
    size_t theta; /* L*NH*P: a frequency per pair, every layer */
} bf_model_act_sizes;

bf_model_act_sizes bf_model_size_acts(const bf_model_shape *s, int B,
                                         int T);

/* Floats of all activations of a (B, T) capacity, rotary tables included
 * (what dominates memory per micro-batch): the buffers engine/model.c
 * carves from bf_model_size_acts, summed. */
size_t bf_model_size_act_floats(const bf_model_shape *s, int B, int T);

/* Rows per micro-batch for a local batch of `local_batch` rows of length T:
 * twice the parameters' bytes of activations each, but at least
 * BF_MICRO_ACT_MIB and at most BF_MICRO_ACT_MAX_MIB, at least one row,
 * balanced so that micro-batches differ by at most one row.  Create the
 * model with B = this, and run ceil(local_batch / this) micro-batches per
 * step.
 *
 * Small on purpose: a micro-batch's activations are written by its forward
 * and read back by its backward, and the fewer bytes they take, the more of
 * them the caches still hold (docs/training.md, "Micro-batches the caches
 * hold"; bench/bench_train_pair.sh measures a change of these constants).
 * But each micro-batch reads the weights three times (forward, dinp, dw)
 * and the gradients once: at twice the parameters' bytes that traffic
 * stays below the activations' (at one row a micro-batch it does not).
 * At most 32 MiB, so that a large model's activations take no more
 * memory than one micro-batch of that size.  A constant, not the cache of
 * the machine at hand: the micro-batches decide the order in which
 * gradients add up, and so a step's rounding, which must not depend on
 * the node a job lands on. */
#define BF_MICRO_ACT_MIB 4
#define BF_MICRO_ACT_MAX_MIB 32
int bf_model_size_micro_batch(const bf_model_shape *s, int local_batch, int T);

/* What one rank of a job allocates, in bytes. */
typedef struct bf_job_memory {
    int micro;             /* rows per micro-batch (rank 0's local batch) */
    size_t params;         /* parameters, gradients, two AdamW moments */
    size_t activations;    /* activations, rotary tables, token buffers */
    size_t total;
} bf_job_memory;

/* The memory of rank 0 of a job of cfg (validated) trained on nranks
 * ranks; rank 0 has the largest share of the batch.  nranks = 1 bounds
 * every group size: activations are sized for a micro-batch, which shrinks
 * with the rank's share of the batch. */
void bf_job_memory_of(const bf_job_config *cfg, int nranks,
                      bf_job_memory *out);

/* Refuses (-1) a job whose bf_job_memory_of(cfg, nranks) is over
 * budget_bytes: the message gives the estimate in bytes and GiB, what it
 * is made of and the budget, named by budget_name; err's field is the one
 * the estimate grows with (seq_len where activations dominate, d_model
 * where the parameters do). */
int bf_job_memory_check(const bf_job_config *cfg, int nranks,
                        size_t budget_bytes, const char *budget_name,
                        bf_error *err);

#endif
