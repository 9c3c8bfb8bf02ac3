/* model_size: the sizes of a model and a job's memory per rank.  The
 * counts follow the layouts engine/model.c allocates (its parameter table
 * and its activation arena, which assert they match). */
#include "model_size.h"

#include <string.h>

#include "vocab.h"

void bf_model_size_from_config(bf_model_shape *s, const bf_job_config *cfg,
                                int vocab)
{
    memset(s, 0, sizeof *s);
    s->vocab = vocab;
    s->d_model = cfg->d_model;
    s->n_layers = cfg->n_layers;
    s->n_heads = cfg->n_heads;
    s->max_seq = cfg->seq_len;
    s->n_positions = cfg->random_positions;
    s->rope = cfg->rope;
    s->rope_base = cfg->rope_base;
    s->spectral_heads = bf_job_config_spectral_heads(cfg);
    s->prope_pairs = bf_job_config_prope_pairs(cfg);
}

size_t bf_model_size_params(const bf_model_shape *s)
{
    size_t V = (size_t)s->vocab, C = (size_t)s->d_model;
    size_t L = (size_t)s->n_layers, NH = (size_t)s->n_heads;
    size_t P = C / NH / 2;
    /* per layer: ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj (weights and
     * biases), log_freq */
    size_t layer = 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C +
                   (C * 4 * C + 4 * C) + (4 * C * C + C) + NH * P;
    return V * C + L * layer + 2 * C;
}

int bf_model_size_table_positions(const bf_model_shape *s, int T)
{
    return s->n_positions > T ? s->n_positions : T;
}

bf_model_act_sizes bf_model_size_acts(const bf_model_shape *s, int B,
                                         int T)
{
    bf_model_act_sizes z;
    size_t P = (size_t)(s->d_model / s->n_heads) / 2;
    z.bt = (size_t)B * T;
    z.btc = z.bt * s->d_model;
    z.att = (size_t)B * s->n_heads * T * T;
    z.theta = (size_t)s->n_layers * s->n_heads * P;
    size_t S = (size_t)bf_model_size_table_positions(s, T);
    int pope = s->rope == BF_ROPE_POPE;
    z.qkv = z.btc * (pope ? 6 : 3);
    z.scratch = z.btc * (pope ? 9 : 6);
    z.table = pope ? 2 * P * S : z.theta * S;
    return z;
}

size_t bf_model_size_act_floats(const bf_model_shape *s, int B, int T)
{
    bf_model_act_sizes z = bf_model_size_acts(s, B, T);
    size_t L = (size_t)s->n_layers;
    /* res, then per layer res2 atty (1) fch dgelu (4 + 4) qkv att and
     * four LayerNorm statistics; lnf dres (1 + 1) scratch; per token
     * logits, lse and ln_f statistics; datt; cos/sin tables; omega and
     * table_theta. */
    return (L + 1) * z.btc + L * (z.btc * 10 + z.qkv + z.att + 4 * z.bt) +
           z.btc * 2 + z.scratch + z.bt * ((size_t)s->vocab + 3) +
           (size_t)T * T + 2 * z.table + 2 * z.theta;
}

int bf_model_size_micro_batch(const bf_model_shape *s, int local_batch, int T)
{
    if (local_batch < 1)
        return 1;
    /* The rotary tables are one per model, not per row: counted at T
     * positions, so random positions leave the micro-batch as it was. */
    bf_model_shape rows_only = *s;
    rows_only.n_positions = 0;
    size_t per_row = bf_model_size_act_floats(&rows_only, 1, T) * sizeof(float);
    size_t budget = 2 * bf_model_size_params(s) * sizeof(float);
    if (budget < (size_t)BF_MICRO_ACT_MIB << 20)
        budget = (size_t)BF_MICRO_ACT_MIB << 20;
    if (budget > (size_t)BF_MICRO_ACT_MAX_MIB << 20)
        budget = (size_t)BF_MICRO_ACT_MAX_MIB << 20;
    int cap = (int)(budget / per_row);
    if (cap < 1)
        cap = 1;
    int n_micro = (local_batch + cap - 1) / cap;
    return (local_batch + n_micro - 1) / n_micro;
}

/* Token buffers of B rows of T: the model's four (inputs, targets, argmax,
 * positions) and the trainer's four of the same size. */
#define TOKEN_BUFFERS 8

void bf_job_memory_of(const bf_job_config *cfg, int nranks,
                      bf_job_memory *out)
{
    bf_model_shape s;
    bf_model_size_from_config(&s, cfg, bf_vocab_size(cfg));
    int n = nranks < 1 ? 1 : nranks;
    int local = cfg->batch_size / n + (cfg->batch_size % n != 0);
    out->micro = bf_model_size_micro_batch(&s, local, cfg->seq_len);
    /* params, grads, two moments (the grads' few extra slots aside) */
    out->params = 4 * bf_model_size_params(&s) * sizeof(float);
    size_t cells = (size_t)out->micro * (size_t)cfg->seq_len;
    out->activations =
        bf_model_size_act_floats(&s, out->micro, cfg->seq_len) * sizeof(float) +
        TOKEN_BUFFERS * cells * sizeof(int);
    out->total = out->params + out->activations;
}

#define GIB(bytes) ((double)(bytes) / (double)(1ULL << 30))

int bf_job_memory_check(const bf_job_config *cfg, int nranks,
                        size_t budget_bytes, const char *budget_name,
                        bf_error *err)
{
    bf_job_memory m;
    bf_job_memory_of(cfg, nranks, &m);
    if (m.total <= budget_bytes)
        return 0;
    int acts = m.activations >= m.params;
    char grows[160];
    if (acts)
        snprintf(grows, sizeof grows, "seq_len %d (with n_heads %d, n_layers "
                 "%d)", cfg->seq_len, cfg->n_heads, cfg->n_layers);
    else
        snprintf(grows, sizeof grows, "d_model %d (with n_layers %d)",
                 cfg->d_model, cfg->n_layers);
    return bf_error_set(err, NULL, 0, acts ? "seq_len" : "d_model",
                        "%s: the job needs %zu bytes (%.1f GiB) of memory per "
                        "rank: "
                        "%.1f GiB of parameters, gradients and AdamW moments "
                        "and %.1f GiB of activations for a micro-batch of %d "
                        "row%s; over %s of %zu bytes (%.1f GiB)", grows,
                        m.total, GIB(m.total), GIB(m.params),
                        GIB(m.activations), m.micro, m.micro == 1 ? "" : "s",
                        budget_name, budget_bytes, GIB(budget_bytes));
}
