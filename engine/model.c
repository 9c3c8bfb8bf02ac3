/* The bifocal transformer: parameter table, activations, forward/backward
 * over the layers of layers.h.  See model.h for the contract.
 *
 * Activation memory is kept lean: per layer only what backward cannot
 * cheaply rebuild is stored (residual streams, LayerNorm statistics, qkv
 * after rotation, attention probabilities, attention output, the MLP's
 * GELU outputs and GELU's derivatives there).  LayerNorm outputs are
 * recomputed in backward from those, in the scratch buffer.  GELU's are
 * kept: rebuilding them and the derivative would take an exp and a
 * division an element again in backward (docs/training.md). */
#include "model.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "isa.h"
#include "layers.h"
#include "rng.h"

/* Stream of bf_rng keys reserved for weight initialisation. */
#define INIT_STREAM 0x696e6974ULL /* "init" */
#define INIT_STD 0.02

typedef struct bf_acts {
    float *res;       /* [L+1, B, T, C] residual entering block l (res[L]: ln_f) */
    float *res2;      /* [L, B, T, C] residual after the attention branch */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [L, B*T] */
    float *qkv;       /* [L, B, T, 3C] q and k rotated; [L, B, T, 6C] under
                         pope: PoPE's q, k and padded v (pope_forward) */
    float *att;       /* [L, B, NH, T, T] softmax probabilities */
    float *atty;      /* [L, B, T, C] attention output before c_proj */
    float *fch;       /* [L, B, T, 4C] MLP hidden, after GELU */
    float *dgelu;     /* [L, B, T, 4C] GELU's derivative there */
    float *lnf;       /* [B, T, C] */
    float *lnf_mean, *lnf_rstd; /* [B*T] */
    float *logits;    /* [B, T, V]; backward turns it into dlogits */
    float *lse;       /* [B*T] log-sum-exp per row */
    float *dres;      /* [B, T, C] gradient of the residual stream */
    float *scratch;   /* [6, B, T, C] LN recomputation, branch grads; 9
                         under pope (attention_backward) */
    float *datt;      /* [T, T] */
    float *cosv, *sinv;  /* [L, S, NH, P] rotary tables of positions 0..S-1;
                            [S, hd] under pope */
    float *omega;        /* [L, NH, P] */
    float *table_theta;  /* [L, NH, P] the theta the tables were built from */
    int *inputs, *targets, *argmax, *positions; /* [B*T] of the last forward */
    float *arena;     /* the one float allocation all of the above live in */
    int *int_arena;   /* the one int allocation */
    int S;            /* positions the tables cover */
    int tables_built; /* 0: rebuild every head's table at the next forward */
    int B, T;         /* shape of the last forward, 0: none */
} bf_acts;

/* The parameter table: one row per tensor, in bf_params order. */
static void fill_param_table(bf_model *m)
{
    const bf_model_shape *s = &m->shape;
    int V = s->vocab, C = s->d_model, NH = s->n_heads;
    int P = C / NH / 2;
    struct { const char *name; int per_layer, ndim, d0, d1, decay; } rows[] = {
        {"wte", 0, 2, V, C, 1},          {"ln1w", 1, 1, C, 0, 0},
        {"ln1b", 1, 1, C, 0, 0},         {"qkvw", 1, 2, C, 3 * C, 1},
        {"qkvb", 1, 1, 3 * C, 0, 0},     {"attprojw", 1, 2, C, C, 1},
        {"attprojb", 1, 1, C, 0, 0},     {"ln2w", 1, 1, C, 0, 0},
        {"ln2b", 1, 1, C, 0, 0},         {"fcw", 1, 2, C, 4 * C, 1},
        {"fcb", 1, 1, 4 * C, 0, 0},      {"fcprojw", 1, 2, 4 * C, C, 1},
        {"fcprojb", 1, 1, C, 0, 0},      {"lnfw", 0, 1, C, 0, 0},
        {"lnfb", 0, 1, C, 0, 0},         {"log_freq", 1, 2, NH, P, 0},
    };
    _Static_assert(sizeof rows / sizeof rows[0] == BF_NUM_PARAM_TENSORS,
                   "one row per bf_params field");
    size_t offset = 0;
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        bf_param_info *t = &m->tensors[k];
        size_t slice = (size_t)rows[k].d0 * (rows[k].ndim == 2 ? rows[k].d1 : 1);
        t->name = rows[k].name;
        t->offset = offset;
        t->count = slice * (rows[k].per_layer ? (size_t)s->n_layers : 1);
        t->per_layer = rows[k].per_layer;
        t->ndim = rows[k].ndim;
        t->dims[0] = rows[k].d0;
        t->dims[1] = rows[k].ndim == 2 ? rows[k].d1 : 0;
        t->dims[2] = 0;
        t->decay = rows[k].decay;
        offset += t->count;
    }
    m->num_params = offset;
    /* the estimate job validation refuses big jobs by */
    assert(offset == bf_model_size_params(s));
}

/* Points the 16 fields of p into `memory` following the table. */
static void point_params(bf_params *p, float *memory,
                         const bf_param_info *tensors)
{
    float **slots[BF_NUM_PARAM_TENSORS] = {
        &p->wte, &p->ln1w, &p->ln1b, &p->qkvw, &p->qkvb, &p->attprojw,
        &p->attprojb, &p->ln2w, &p->ln2b, &p->fcw, &p->fcb, &p->fcprojw,
        &p->fcprojb, &p->lnfw, &p->lnfb, &p->log_freq,
    };
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++)
        *slots[k] = memory + tensors[k].offset;
}

static int check_shape(const bf_model_shape *s, int B, int T, bf_error *err)
{
    if (s->vocab < 1)
        return bf_error_set(err, NULL, 0, "vocab", "must be >= 1, got %d",
                            s->vocab);
    if (s->d_model < 2 || s->n_heads < 1 || s->d_model % s->n_heads != 0)
        return bf_error_set(err, NULL, 0, "d_model",
                            "d_model %d must be a positive multiple of "
                            "n_heads %d", s->d_model, s->n_heads);
    if ((s->d_model / s->n_heads) % 2 != 0)
        return bf_error_set(err, NULL, 0, "n_heads",
                            "head size d_model/n_heads = %d must be even "
                            "(rotary pairs)", s->d_model / s->n_heads);
    if (s->n_layers < 1)
        return bf_error_set(err, NULL, 0, "n_layers", "must be >= 1, got %d",
                            s->n_layers);
    if (s->spectral_heads < 0 || s->spectral_heads > s->n_heads)
        return bf_error_set(err, NULL, 0, "spectral_heads",
                            "must be in 0..%d, got %d", s->n_heads,
                            s->spectral_heads);
    int P = s->d_model / s->n_heads / 2;
    if (s->prope_pairs < 0 || s->prope_pairs > P)
        return bf_error_set(err, NULL, 0, "prope_fraction",
                            "%d pairs at omega 0 of %d per head",
                            s->prope_pairs, P);
    if (s->n_positions < 0)
        return bf_error_set(err, NULL, 0, "random_positions",
                            "must be >= 0, got %d", s->n_positions);
    if (!(s->rope_base > 1.0)) /* theta is initialised even without rope */
        return bf_error_set(err, NULL, 0, "rope_base", "must be > 1, got %g",
                            s->rope_base);
    if (B < 1)
        return bf_error_set(err, NULL, 0, "batch_size",
                            "micro-batch must be >= 1, got %d", B);
    if (T < 1 || (s->max_seq > 0 && T > s->max_seq))
        return bf_error_set(err, NULL, 0, "seq_len",
                            "T = %d must be in 1..max_seq %d", T, s->max_seq);
    return 0;
}

static float *alloc_floats(size_t n)
{
    return bf_xcalloc_arena(n * sizeof(float));
}

/* Carves the activations out of one allocation, the buffers of whole
 * rows of C first: the arena starts on a cache line, and where C is a
 * whole number of lines so is every row of theirs, which the products'
 * vector loads want (why: bf_xcalloc_arena, common/alloc.h).  The sizes
 * that need not be whole lines (a statistic per token, the logits,
 * B*NH*T*T) come after them: before them, B*T*L not a multiple of 4
 * misaligned every buffer after the LayerNorm statistics (no shape in
 * configs/ was). */
static bf_acts *acts_create(const bf_model_shape *s, int B, int T)
{
    bf_acts *a = bf_xcalloc(1, sizeof *a);
    size_t total = bf_model_size_act_floats(s, B, T);
    float *base = alloc_floats(total);
    int *ints = bf_xcalloc((size_t)B * T * 4, sizeof(int));
    bf_model_act_sizes z = bf_model_size_acts(s, B, T);
    size_t L = (size_t)s->n_layers;
    float *p = base;
#define CARVE(field, n) (a->field = p, p += (n))
#define CARVE_ROWS(field, n)                                                   \
    (assert(s->d_model * sizeof(float) % BF_ARENA_LINE != 0 ||                 \
            (uintptr_t)p % BF_ARENA_LINE == 0),                                \
     CARVE(field, n))
    CARVE_ROWS(res, (L + 1) * z.btc);
    CARVE_ROWS(res2, L * z.btc);
    CARVE_ROWS(qkv, L * z.qkv);
    CARVE_ROWS(atty, L * z.btc);
    CARVE_ROWS(fch, L * 4 * z.btc);
    CARVE_ROWS(dgelu, L * 4 * z.btc);
    CARVE_ROWS(lnf, z.btc);
    CARVE_ROWS(dres, z.btc);
    CARVE_ROWS(scratch, z.scratch);
    CARVE(att, L * z.att);
    CARVE(datt, (size_t)T * T);
    CARVE(ln1_mean, L * z.bt);
    CARVE(ln1_rstd, L * z.bt);
    CARVE(ln2_mean, L * z.bt);
    CARVE(ln2_rstd, L * z.bt);
    CARVE(lnf_mean, z.bt);
    CARVE(lnf_rstd, z.bt);
    CARVE(logits, z.bt * (size_t)s->vocab);
    CARVE(lse, z.bt);
    CARVE(cosv, z.table);
    CARVE(sinv, z.table);
    CARVE(omega, z.theta);
    CARVE(table_theta, z.theta);
#undef CARVE_ROWS
#undef CARVE
    /* the estimate jobs are refused by must match the carving */
    assert((size_t)(p - base) == total);
    a->arena = base;
    a->int_arena = ints;
    a->inputs = ints;
    a->targets = ints + (size_t)B * T;
    a->argmax = ints + 2 * (size_t)B * T;
    a->positions = ints + 3 * (size_t)B * T;
    a->S = bf_model_size_table_positions(s, T);
    return a;
}

static void acts_free(bf_acts *a)
{
    if (!a)
        return;
    free(a->arena);
    free(a->int_arena);
    free(a);
}

int bf_model_create(bf_model *m, const bf_model_shape *s, int B, int T,
                    bf_error *err)
{
    memset(m, 0, sizeof *m);
    if (check_shape(s, B, T, err) < 0)
        return -1;
    m->shape = *s;
    m->B = B;
    m->T = T;
    fill_param_table(m);
    m->params_memory = alloc_floats(m->num_params);
    m->grads_memory = alloc_floats(m->num_params + BF_GRAD_SLOTS);
    m->adam_m = alloc_floats(m->num_params);
    m->adam_v = alloc_floats(m->num_params);
    m->freq_learnable = bf_xcalloc((size_t)s->n_layers * s->n_heads, 1);
    m->impl = acts_create(s, B, T);
    point_params(&m->params, m->params_memory, m->tensors);
    point_params(&m->grads, m->grads_memory, m->tensors);
    int first_spectral = s->n_heads - s->spectral_heads;
    for (int l = 0; l < s->n_layers; l++)
        for (int h = 0; h < s->n_heads; h++)
            m->freq_learnable[l * s->n_heads + h] =
                s->rope != BF_ROPE_NONE && h >= first_spectral;
    return 0;
}

void bf_model_free(bf_model *m)
{
    free(m->params_memory);
    free(m->grads_memory);
    free(m->adam_m);
    free(m->adam_v);
    free(m->freq_learnable);
    acts_free(m->impl);
    memset(m, 0, sizeof *m);
}

void bf_model_init_weights(bf_model *m, uint64_t seed)
{
    const bf_model_shape *s = &m->shape;
    int NH = s->n_heads, P = s->d_model / NH / 2;
    uint64_t init_key = bf_rng_key(seed, INIT_STREAM);
    memset(m->params_memory, 0, m->num_params * sizeof(float));
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &m->tensors[k];
        float *p = m->params_memory + t->offset;
        if (t->decay) {
            /* Each tensor has its own key: adding a tensor never shifts the
             * draws of the others. */
            bf_rng r;
            bf_rng_seed(&r, bf_rng_key(init_key, (uint64_t)k));
            for (size_t i = 0; i < t->count; i++)
                p[i] = (float)(INIT_STD * bf_rng_normal(&r));
        }
    }
    for (int l = 0; l < s->n_layers; l++) {
        for (int i = 0; i < s->d_model; i++) {
            m->params.ln1w[(size_t)l * s->d_model + i] = 1.0f;
            m->params.ln2w[(size_t)l * s->d_model + i] = 1.0f;
        }
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < P; i++)
                m->params.log_freq[((size_t)l * NH + h) * P + i] =
                    (float)(-(2.0 * i / (2.0 * P)) * log(s->rope_base));
    }
    for (int i = 0; i < s->d_model; i++)
        m->params.lnfw[i] = 1.0f;
    bf_model_zero_grad(m);
    memset(m->adam_m, 0, m->num_params * sizeof(float));
    memset(m->adam_v, 0, m->num_params * sizeof(float));
    ((bf_acts *)m->impl)->tables_built = 0;
}

/* omega of one head's P pairs from its theta; p-RoPE's last prope_pairs
 * are 0 (those channels carry no position). */
static void head_omega(const bf_model_shape *s, const float *theta,
                       float *omega)
{
    int P = s->d_model / s->n_heads / 2;
    for (int i = 0; i < P; i++)
        omega[i] = i < P - s->prope_pairs ? (float)exp((double)theta[i])
                                          : 0.0f;
}

/* PoPE's tables [S, hd], built once: theta_i = base^(-i/hd), hd
 * frequencies (not hd/2), each a column of rotary_tables' [S, hd, 1]. */
static void build_pope_tables(const bf_model_shape *s, bf_acts *a)
{
    int hd = s->d_model / s->n_heads;
    for (int i = 0; i < hd; i++) {
        float theta = (float)pow(s->rope_base, -(double)i / hd);
        bf_rotary_tables(a->cosv, a->sinv, &theta, i, hd, a->S, 1);
    }
    a->tables_built = 1;
}

/* Rebuilds omega and the cos/sin tables (every position 0..S-1) of each
 * head whose theta changed since the last build: micro-batches of one step
 * share the tables, and fixed heads are built once. */
static void refresh_rotary(bf_model *m, bf_acts *a)
{
    const bf_model_shape *s = &m->shape;
    int P = s->d_model / s->n_heads / 2;
    for (int lh = 0; lh < s->n_layers * s->n_heads; lh++) {
        int h = lh % s->n_heads;
        size_t hp = (size_t)lh * P; /* head lh's [P] in omega and theta */
        size_t table = (size_t)(lh - h) * P * a->S; /* its layer's [S,NH,P] */
        const float *theta = m->params.log_freq + hp;
        if (a->tables_built &&
            !memcmp(a->table_theta + hp, theta, P * sizeof *theta))
            continue;
        head_omega(s, theta, a->omega + hp);
        bf_rotary_tables(a->cosv + table, a->sinv + table, a->omega + hp, h,
                         s->n_heads, a->S, P);
        memcpy(a->table_theta + hp, theta, P * sizeof *theta);
    }
    a->tables_built = 1;
}

/* Keeps the forward's positions for backward: the caller's, or 0..T-1. */
static void set_positions(bf_acts *a, const int *positions, int B, int T)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int at = b * T + t;
            a->positions[at] = positions ? positions[at] : t;
            assert(a->positions[at] >= 0 && a->positions[at] < a->S);
        }
}

/* One layer's slices of a bf_params layout: its weights, or their
 * gradients (shapes of one layer, see bf_params). */
typedef struct layer_params {
    float *ln1w, *ln1b;         /* [C] */
    float *qkvw, *qkvb;         /* [C, 3C], [3C] */
    float *attprojw, *attprojb; /* [C, C], [C] */
    float *ln2w, *ln2b;         /* [C] */
    float *fcw, *fcb;           /* [C, 4C], [4C] */
    float *fcprojw, *fcprojb;   /* [4C, C], [C] */
    float *log_freq;            /* [NH, P] */
} layer_params;

static layer_params layer_params_of(const bf_params *p,
                                    const bf_model_shape *s, int l)
{
    size_t C = (size_t)s->d_model, lc = (size_t)l * C;
    size_t hp = (size_t)l * s->n_heads * (C / s->n_heads / 2);
    return (layer_params){
        .ln1w = p->ln1w + lc,
        .ln1b = p->ln1b + lc,
        .qkvw = p->qkvw + lc * 3 * C,
        .qkvb = p->qkvb + lc * 3,
        .attprojw = p->attprojw + lc * C,
        .attprojb = p->attprojb + lc,
        .ln2w = p->ln2w + lc,
        .ln2b = p->ln2b + lc,
        .fcw = p->fcw + lc * 4 * C,
        .fcb = p->fcb + lc * 4,
        .fcprojw = p->fcprojw + lc * 4 * C,
        .fcprojb = p->fcprojb + lc,
        .log_freq = p->log_freq + hp,
    };
}

/* One layer's slices of the activations.  Strides are those of the
 * capacity (m->B, m->T); the rotary tables cover positions 0..S-1. */
typedef struct layer_acts {
    float *x;         /* [B, T, C] residual entering the layer */
    float *x2;        /* [B, T, C] residual after the attention branch */
    float *y;         /* [B, T, C] residual leaving the layer */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [B*T] */
    float *qkv;       /* [B, T, 3C], [B, T, 6C] under pope */
    float *att;       /* [B, NH, T, T] */
    float *atty;      /* [B, T, C] */
    float *fch;       /* [B, T, 4C] after GELU */
    float *dgelu;     /* [B, T, 4C] */
    float *cosv, *sinv; /* [S, NH, P]; [S, hd] under pope, every layer's */
    float *omega;     /* [NH, P] */
} layer_acts;

static layer_acts layer_acts_of(const bf_model *m, int l)
{
    bf_acts *a = m->impl;
    const bf_model_shape *s = &m->shape;
    bf_model_act_sizes cap = bf_model_size_acts(s, m->B, m->T);
    size_t hp = (size_t)l * s->n_heads * (s->d_model / s->n_heads / 2);
    size_t tl = s->rope == BF_ROPE_POPE ? 0 : hp * (size_t)a->S;
    return (layer_acts){
        .x = a->res + l * cap.btc,
        .x2 = a->res2 + l * cap.btc,
        .y = a->res + (l + 1) * cap.btc,
        .ln1_mean = a->ln1_mean + l * cap.bt,
        .ln1_rstd = a->ln1_rstd + l * cap.bt,
        .ln2_mean = a->ln2_mean + l * cap.bt,
        .ln2_rstd = a->ln2_rstd + l * cap.bt,
        .qkv = a->qkv + l * cap.qkv,
        .att = a->att + l * cap.att,
        .atty = a->atty + l * cap.btc,
        .fch = a->fch + l * 4 * cap.btc,
        .dgelu = a->dgelu + l * 4 * cap.btc,
        .cosv = a->cosv + tl,
        .sinv = a->sinv + tl,
        .omega = a->omega + hp,
    };
}

/* dst [N, NH, dhd] from src [N, NH, shd]: each head's first min(dhd, shd)
 * floats, zeros after them in dst.  PoPE's attention has heads of 2 hd
 * whose values are padded with hd zeros (pope_forward). */
static void copy_heads(float *dst, int dhd, const float *src, int shd, int N,
                       int NH)
{
    int hd = dhd < shd ? dhd : shd;
    for (size_t nh = 0; nh < (size_t)N * NH; nh++) {
        memcpy(dst + nh * dhd, src + nh * shd, hd * sizeof *dst);
        memset(dst + nh * dhd + hd, 0, (dhd - hd) * sizeof *dst);
    }
}

/* Layer l's attention from ln [B, T, C] (the scratch's first BTC): qkv,
 * att and atty.  Under pope the raw qkv and the attention's padded output
 * go through the scratch's next 3 BTC. */
static void attention_forward(bf_model *m, const layer_params *w,
                              const layer_acts *la, const float *ln)
{
    bf_acts *a = m->impl;
    const bf_model_shape *s = &m->shape;
    int B = a->B, T = a->T, C = s->d_model, NH = s->n_heads, N = B * T;
    if (s->rope != BF_ROPE_POPE) {
        bf_matmul_forward(la->qkv, ln, w->qkvw, w->qkvb, NULL, N, C, 3 * C);
        if (s->rope != BF_ROPE_NONE)
            bf_rotary_forward(la->qkv, la->cosv, la->sinv, a->positions, B,
                              T, C);
        bf_attention_forward(la->atty, la->att, la->qkv, B, T, C, NH,
                             bf_isa_attention_fused(T, C / NH));
        return;
    }
    float *raw = a->scratch + (size_t)N * C; /* [B, T, 3C] */
    float *y2 = raw;                          /* [B, T, 2C] once raw is spent */
    bf_matmul_forward(raw, ln, w->qkvw, w->qkvb, NULL, N, C, 3 * C);
    bf_pope_forward(la->qkv, raw, la->cosv, la->sinv, a->positions, N, C, NH);
    bf_attention_forward(y2, la->att, la->qkv, B, T, 2 * C, NH,
                         bf_isa_attention_fused(T, 2 * C / NH));
    copy_heads(la->atty, C / NH, y2, 2 * C / NH, N, NH);
}

double bf_model_forward(bf_model *m, const int *inputs, const int *targets,
                        const int *positions, int B, int T, int *n_targets)
{
    bf_acts *a = m->impl;
    const bf_model_shape *s = &m->shape;
    int C = s->d_model, V = s->vocab, N = B * T;
    assert(B >= 1 && B <= m->B && T >= 1 && T <= m->T);
    for (int i = 0; i < N; i++)
        assert(inputs[i] >= 0 && inputs[i] < V && targets[i] < V);
    if (s->rope == BF_ROPE_POPE && !a->tables_built)
        build_pope_tables(s, a);
    else if (s->rope != BF_ROPE_NONE && s->rope != BF_ROPE_POPE)
        refresh_rotary(m, a);
    set_positions(a, positions, B, T);
    a->B = B;
    a->T = T;
    memcpy(a->inputs, inputs, (size_t)N * sizeof *inputs);
    memcpy(a->targets, targets, (size_t)N * sizeof *targets);

    bf_encoder_forward(a->res, inputs, m->params.wte, N, C);
    float *ln = a->scratch; /* [B, T, C] */
    for (int l = 0; l < s->n_layers; l++) {
        layer_params w = layer_params_of(&m->params, s, l);
        layer_acts la = layer_acts_of(m, l);

        bf_layernorm_forward(ln, la.ln1_mean, la.ln1_rstd, la.x, w.ln1w,
                             w.ln1b, N, C);
        attention_forward(m, &w, &la, ln);
        bf_matmul_forward(la.x2, la.atty, w.attprojw, w.attprojb, la.x, N, C,
                          C);

        bf_layernorm_forward(ln, la.ln2_mean, la.ln2_rstd, la.x2, w.ln2w,
                             w.ln2b, N, C);
        bf_matmul_forward(la.fch, ln, w.fcw, w.fcb, NULL, N, C, 4 * C);
        bf_gelu_forward(la.fch, la.dgelu, la.fch, N * 4 * C);
        bf_matmul_forward(la.y, la.fch, w.fcprojw, w.fcprojb, la.x2, N, 4 * C,
                          C);
    }
    const float *x_final = layer_acts_of(m, s->n_layers - 1).y;
    bf_layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x_final,
                         m->params.lnfw, m->params.lnfb, N, C);
    bf_logits_forward(a->logits, a->lnf, m->params.wte, N, C, V);
    return bf_crossentropy_forward(a->lse, a->argmax, n_targets, a->logits,
                                   targets, N, V);
}

void bf_model_argmax(const bf_model *m, int *out)
{
    const bf_acts *a = m->impl;
    memcpy(out, a->argmax, (size_t)a->B * a->T * sizeof *out);
}

void bf_model_zero_grad(bf_model *m)
{
    memset(m->grads_memory, 0, m->num_params * sizeof(float));
}

/* The MLP branch of layer l, backward: y = x2 + gelu(ln2(x2) @ fcw) @
 * fcprojw.  On entry a->dres holds dy; on return, dx2.  Uses all 6 BTC
 * floats of scratch. */
static void mlp_backward(bf_model *m, const layer_params *w,
                         const layer_params *dw, const layer_acts *la)
{
    bf_acts *a = m->impl;
    int C = m->shape.d_model, N = a->B * a->T;
    size_t btc = (size_t)N * C;
    float *dh = a->scratch;              /* [B, T, 4C] */
    float *ln = a->scratch + 4 * btc;    /* [B, T, C] */
    float *dln = ln + btc;               /* [B, T, C] */

    bf_matmul_backward(dh, NULL, NULL, a->dres, NULL, w->fcprojw, N, 4 * C,
                       C);
    bf_gelu_backward(dh, la->dgelu, N * 4 * C);
    bf_matmul_backward(NULL, dw->fcprojw, dw->fcprojb, a->dres, la->fch,
                       NULL, N, 4 * C, C);
    bf_layernorm_apply(ln, la->x2, la->ln2_mean, la->ln2_rstd, w->ln2w,
                       w->ln2b, N, C);
    bf_matmul_backward(dln, dw->fcw, dw->fcb, dh, ln, w->fcw, N, C, 4 * C);
    bf_layernorm_backward(a->dres, dw->ln2w, dw->ln2b, dln, la->x2, w->ln2w,
                          la->ln2_mean, la->ln2_rstd, N, C);
}

/* PoPE's attention backward: dqkv [B, T, 3C] from datty [B, T, C], through
 * the attention's padded heads (scratch's first 8 BTC; datty and dqkv lie
 * after them). */
static void pope_attention_backward(bf_model *m, const layer_acts *la,
                                    const float *datty, float *dqkv)
{
    bf_acts *a = m->impl;
    int B = a->B, T = a->T, C = m->shape.d_model, NH = m->shape.n_heads;
    int N = B * T;
    float *dqkv2 = a->scratch;                     /* [B, T, 6C] */
    float *datty2 = a->scratch + (size_t)6 * N * C; /* [B, T, 2C] */
    copy_heads(datty2, 2 * C / NH, datty, C / NH, N, NH);
    bf_attention_backward(dqkv2, a->datt, datty2, la->qkv, la->att, B, T,
                          2 * C, NH, bf_isa_attention_fused(T, 2 * C / NH));
    bf_pope_backward(dqkv, dqkv2, la->qkv, la->cosv, la->sinv, a->positions,
                     N, C, NH);
}

/* The attention branch of layer l, backward: x2 = x + attn(ln1(x)) @
 * attprojw.  On entry a->dres holds dx2; on return, dx.  Uses the first
 * 6 BTC floats of scratch (9 under pope). */
static void attention_backward(bf_model *m, int l, const layer_params *w,
                               const layer_params *dw, const layer_acts *la)
{
    bf_acts *a = m->impl;
    const bf_model_shape *s = &m->shape;
    int B = a->B, T = a->T, C = s->d_model, NH = s->n_heads, N = B * T;
    size_t btc = (size_t)N * C;
    int pope = s->rope == BF_ROPE_POPE;
    float *datty = a->scratch + (pope ? 8 : 0) * btc; /* [B, T, C] */
    float *dqkv = a->scratch + (pope ? 6 : 1) * btc;  /* [B, T, 3C] */
    float *ln = a->scratch + 4 * btc;    /* [B, T, C] */
    float *dln = a->scratch + 5 * btc;   /* [B, T, C] */

    bf_matmul_backward(datty, dw->attprojw, dw->attprojb, a->dres, la->atty,
                       w->attprojw, N, C, C);
    if (pope)
        pope_attention_backward(m, la, datty, dqkv);
    else
        bf_attention_backward(dqkv, a->datt, datty, la->qkv, la->att, B, T,
                              C, NH, bf_isa_attention_fused(T, C / NH));
    if (s->rope != BF_ROPE_NONE && !pope)
        bf_rotary_backward(dqkv, dw->log_freq, la->qkv, la->cosv, la->sinv,
                           la->omega, m->freq_learnable + l * NH,
                           a->positions, B, T, C, NH);
    bf_layernorm_apply(ln, la->x, la->ln1_mean, la->ln1_rstd, w->ln1w,
                       w->ln1b, N, C);
    bf_matmul_backward(dln, dw->qkvw, dw->qkvb, dqkv, ln, w->qkvw, N, C,
                       3 * C);
    bf_layernorm_backward(a->dres, dw->ln1w, dw->ln1b, dln, la->x, w->ln1w,
                          la->ln1_mean, la->ln1_rstd, N, C);
}

void bf_model_backward(bf_model *m, float grad_scale)
{
    bf_acts *a = m->impl;
    const bf_model_shape *s = &m->shape;
    const bf_params *w = &m->params, *g = &m->grads;
    int N = a->B * a->T, C = s->d_model, V = s->vocab;

    float *dlogits = a->logits; /* overwritten in place */
    bf_crossentropy_backward(dlogits, a->logits, a->lse, a->targets,
                             grad_scale, N, V);
    float *dlnf = a->scratch;
    bf_logits_backward(dlnf, g->wte, dlogits, a->lnf, w->wte, N, C, V);
    memset(a->dres, 0, (size_t)N * C * sizeof *a->dres);
    const float *x_final = layer_acts_of(m, s->n_layers - 1).y;
    bf_layernorm_backward(a->dres, g->lnfw, g->lnfb, dlnf, x_final, w->lnfw,
                          a->lnf_mean, a->lnf_rstd, N, C);

    for (int l = s->n_layers - 1; l >= 0; l--) {
        layer_params lw = layer_params_of(w, s, l);
        layer_params dlw = layer_params_of(g, s, l);
        layer_acts la = layer_acts_of(m, l);
        mlp_backward(m, &lw, &dlw, &la);
        attention_backward(m, l, &lw, &dlw, &la);
    }
    bf_encoder_backward(g->wte, a->dres, a->inputs, N, C);
}

void bf_model_foreach_trainable(const bf_model *m,
                                void (*fn)(void *ctx, size_t offset,
                                           size_t count, int decay,
                                           int is_freq),
                                void *ctx)
{
    int NH = m->shape.n_heads, P = m->shape.d_model / NH / 2;
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &m->tensors[k];
        if (k != BF_NUM_PARAM_TENSORS - 1) {
            fn(ctx, t->offset, t->count, t->decay, 0);
            continue;
        }
        for (int lh = 0; lh < m->shape.n_layers * NH; lh++)
            if (m->freq_learnable[lh])
                fn(ctx, t->offset + (size_t)lh * P, (size_t)P, 0, 1);
    }
}

typedef struct norm_ctx {
    const float *grads;
    double sumsq;
} norm_ctx;

static void add_sumsq(void *ctx, size_t offset, size_t count, int decay,
                      int is_freq)
{
    (void)decay;
    (void)is_freq;
    norm_ctx *c = ctx;
    c->sumsq += bf_sumsq(c->grads + offset, count);
}

double bf_model_grad_norm(const bf_model *m)
{
    norm_ctx c = {m->grads_memory, 0.0};
    bf_model_foreach_trainable(m, add_sumsq, &c);
    return sqrt(c.sumsq);
}

void bf_model_omega(const bf_model *m, int l, int h, float *out)
{
    int NH = m->shape.n_heads, P = m->shape.d_model / NH / 2;
    head_omega(&m->shape, m->params.log_freq + ((size_t)l * NH + h) * P, out);
}

double bf_model_train_flops(const bf_model_shape *s, int T, double tokens)
{
    double C = s->d_model, L = s->n_layers;
    /* weights of every matmul, the tied output projection included */
    double matmul_params = L * 12.0 * C * C + (double)s->vocab * C;
    /* per token and layer: q.k over T keys and att @ v, 2 FLOPs per MAC,
     * forward 4TC, backward twice that; PoPE's q.k is over 2C (6TC; its
     * values' padding is not the model's).  As in PaLM's MFU, the causal
     * mask is not discounted, though attention skips most masked blocks. */
    double attention = (s->rope == BF_ROPE_POPE ? 18.0 : 12.0) * L * T * C;
    return tokens * (6.0 * matmul_params + attention);
}
