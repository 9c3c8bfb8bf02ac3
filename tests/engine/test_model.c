/* Behaviour of the model beyond gradients: the parameter table, shape
 * checks, the activations' alignment at odd shapes, initialisation and
 * determinism, frozen vs learnable frequencies under AdamW, gradient
 * accumulation over micro-batches, the micro-batch rule, and that a tiny
 * model actually learns. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model.h"
#include "rng.h"

enum { V = 11, C = 16, L = 2, T = 8 };

static bf_model_shape tiny_shape(bf_rope_kind rope, int n_heads, int spectral)
{
    bf_model_shape s = {.vocab = V, .d_model = C, .n_layers = L,
                        .n_heads = n_heads, .max_seq = T, .rope = rope,
                        .rope_base = 10000.0, .spectral_heads = spectral};
    return s;
}

static void make_model(bf_model *m, bf_model_shape s, int B, uint64_t seed)
{
    bf_error err;
    assert_int_equal(bf_model_create(m, &s, B, T, &err), 0);
    bf_model_init_weights(m, seed);
}

/* Random rows; every third position is not a target. */
static void make_batch(int *inputs, int *targets, int rows, uint64_t seed)
{
    bf_rng r;
    bf_rng_seed(&r, seed);
    for (int i = 0; i < rows * T; i++) {
        inputs[i] = (int)bf_rng_below(&r, V);
        targets[i] = i % 3 == 2 ? -1 : (int)bf_rng_below(&r, V);
    }
}

static void train_steps(bf_model *m, int B, int steps, float lr)
{
    bf_adamw_hparams hp = {.lr = lr, .beta1 = 0.9f, .beta2 = 0.95f,
                           .eps = 1e-8f, .weight_decay = 0.1f,
                           .freq_lr_mult = 2.0f};
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    for (int step = 1; step <= steps; step++) {
        make_batch(in, tg, B, 1000 + step);
        int n;
        bf_model_zero_grad(m);
        bf_model_forward(m, in, tg, NULL, B, T, &n);
        bf_model_backward(m, 1.0f / (float)n);
        bf_adamw_step(m, &hp, step, 1.0f);
    }
    free(in);
    free(tg);
}

static void test_param_table(void **state)
{
    (void)state;
    bf_model m;
    make_model(&m, tiny_shape(BF_ROPE_BIFOCAL, 4, 1), 2, 1);
    size_t want = (size_t)V * C + 2 * C +
                  (size_t)L * (12 * C * C + 13 * C + 4 * (C / 4 / 2));
    assert_int_equal(m.num_params, want);
    size_t next = 0;
    int decayed = 0;
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &m.tensors[k];
        assert_int_equal(t->offset, next); /* contiguous, in order */
        size_t slice = (size_t)t->dims[0] * (t->ndim == 2 ? t->dims[1] : 1);
        assert_int_equal(t->count, slice * (t->per_layer ? L : 1));
        next += t->count;
        decayed += t->decay;
        if (t->decay)
            assert_int_equal(t->ndim, 2);
    }
    assert_int_equal(next, m.num_params);
    assert_int_equal(decayed, 5);
    assert_string_equal(m.tensors[0].name, "wte");
    assert_string_equal(m.tensors[BF_NUM_PARAM_TENSORS - 1].name, "log_freq");
    assert_ptr_equal(m.params.log_freq,
                     m.params_memory + m.tensors[15].offset);
    assert_ptr_equal(m.grads.fcw, m.grads_memory + m.tensors[9].offset);
    /* bifocal, 4 heads, 1 spectral: the last head of every layer */
    for (int l = 0; l < L; l++)
        for (int h = 0; h < 4; h++)
            assert_int_equal(m.freq_learnable[l * 4 + h], h == 3);
    bf_model_free(&m);
}

static void test_create_rejects_bad_shapes(void **state)
{
    (void)state;
    bf_model m;
    bf_error err;
    bf_model_shape s = tiny_shape(BF_ROPE_GEOMETRIC, 3, 0); /* 16 % 3 */
    assert_int_equal(bf_model_create(&m, &s, 2, T, &err), -1);
    assert_string_equal(err.field, "d_model");
    s = tiny_shape(BF_ROPE_GEOMETRIC, 8, 0); /* head size 2 ok */
    assert_int_equal(bf_model_create(&m, &s, 2, T, &err), 0);
    bf_model_free(&m);
    s = tiny_shape(BF_ROPE_GEOMETRIC, 16, 0); /* head size 1: no pairs */
    assert_int_equal(bf_model_create(&m, &s, 2, T, &err), -1);
    assert_string_equal(err.field, "n_heads");
    assert_non_null(strstr(err.msg, "even"));
    s = tiny_shape(BF_ROPE_BIFOCAL, 2, 3);
    assert_int_equal(bf_model_create(&m, &s, 2, T, &err), -1);
    assert_string_equal(err.field, "spectral_heads");
    s = tiny_shape(BF_ROPE_GEOMETRIC, 2, 0);
    assert_int_equal(bf_model_create(&m, &s, 2, T + 1, &err), -1);
    assert_string_equal(err.field, "seq_len");
    assert_int_equal(bf_model_create(&m, &s, 0, T, &err), -1);
    assert_string_equal(err.field, "batch_size");
    s = tiny_shape(BF_ROPE_NONE, 2, 0);
    s.rope_base = 0.5;
    assert_int_equal(bf_model_create(&m, &s, 2, T, &err), -1);
    assert_string_equal(err.field, "rope_base");
}

/* A shape whose per-token sizes are not whole cache lines (one layer, 7
 * positions, 3 rows: 21 tokens): the buffers of whole rows still start on
 * a line, which the carve asserts as it goes (engine/model.c,
 * acts_create), and the model trains on them. */
static void test_odd_shape_rows_aligned(void **state)
{
    (void)state;
    enum { OT = 7, OB = 3 };
    bf_model_shape s = tiny_shape(BF_ROPE_BIFOCAL, 2, 1);
    s.n_layers = 1;
    s.max_seq = OT;
    bf_model m;
    bf_error err;
    assert_int_equal(bf_model_create(&m, &s, OB, OT, &err), 0);
    bf_model_init_weights(&m, 5);
    int in[OB * OT], tg[OB * OT], n;
    for (int i = 0; i < OB * OT; i++) {
        in[i] = i % V;
        tg[i] = (i + 1) % V;
    }
    bf_model_zero_grad(&m);
    double loss = bf_model_forward(&m, in, tg, NULL, OB, OT, &n);
    assert_int_equal(n, OB * OT);
    assert_true(isfinite(loss) && loss > 0);
    bf_model_backward(&m, 1.0f / (float)n);
    assert_true(bf_model_grad_norm(&m) > 0);
    bf_model_free(&m);
}

static void test_shape_from_config(void **state)
{
    (void)state;
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.n_heads = 4;
    cfg.d_model = 32;
    cfg.rope = BF_ROPE_BIFOCAL;
    cfg.spectral_fraction = 0.5;
    bf_model_shape s;
    bf_model_size_from_config(&s, &cfg, 13);
    assert_int_equal(s.vocab, 13);
    assert_int_equal(s.d_model, 32);
    assert_int_equal(s.n_heads, 4);
    assert_int_equal(s.max_seq, cfg.seq_len);
    assert_int_equal(s.spectral_heads, 2);
    cfg.rope = BF_ROPE_SPECTRAL;
    bf_model_size_from_config(&s, &cfg, 13);
    assert_int_equal(s.spectral_heads, 4);
    cfg.rope = BF_ROPE_GEOMETRIC;
    bf_model_size_from_config(&s, &cfg, 13);
    assert_int_equal(s.spectral_heads, 0);
}

static void test_init(void **state)
{
    (void)state;
    bf_model a, b, c;
    bf_model_shape s = tiny_shape(BF_ROPE_SPECTRAL, 2, 2);
    make_model(&a, s, 2, 42);
    make_model(&b, s, 2, 42);
    make_model(&c, s, 2, 43);
    size_t bytes = a.num_params * sizeof(float);
    assert_memory_equal(a.params_memory, b.params_memory, bytes);
    assert_memory_not_equal(a.params_memory, c.params_memory, bytes);

    /* matrices N(0, 0.02); biases 0; gains 1 */
    const bf_param_info *fc = &a.tensors[9];
    double sum = 0, sumsq = 0;
    for (size_t i = 0; i < fc->count; i++) {
        double x = a.params_memory[fc->offset + i];
        sum += x;
        sumsq += x * x;
    }
    double mean = sum / fc->count, sd = sqrt(sumsq / fc->count - mean * mean);
    assert_true(fabs(mean) < 0.003);
    assert_true(fabs(sd - 0.02) < 0.002);
    for (int i = 0; i < L * 4 * C; i++)
        assert_true(a.params.fcb[i] == 0.0f);
    for (int i = 0; i < C; i++)
        assert_true(a.params.lnfw[i] == 1.0f && a.params.lnfb[i] == 0.0f);

    /* omega = base^(-2i/hd) for every head of every layer */
    int P = C / 2 / 2;
    float om[C];
    for (int l = 0; l < L; l++)
        for (int h = 0; h < 2; h++) {
            bf_model_omega(&a, l, h, om);
            for (int i = 0; i < P; i++)
                assert_float_equal(om[i], pow(10000.0, -2.0 * i / (2 * P)),
                                   1e-6 * om[i]);
        }

    /* same seed, same batch: bitwise the same loss, also after training */
    int in[2 * T], tg[2 * T], n;
    make_batch(in, tg, 2, 5);
    double la = bf_model_forward(&a, in, tg, NULL, 2, T, &n);
    double lb = bf_model_forward(&b, in, tg, NULL, 2, T, &n);
    double lc = bf_model_forward(&c, in, tg, NULL, 2, T, &n);
    assert_memory_equal(&la, &lb, sizeof la);
    assert_true(la != lc);
    train_steps(&a, 2, 3, 1e-2f);
    train_steps(&b, 2, 3, 1e-2f);
    assert_memory_equal(a.params_memory, b.params_memory, bytes);
    bf_model_free(&a);
    bf_model_free(&b);
    bf_model_free(&c);
}

/* Which heads' theta moved after a few AdamW steps, as a bitmask per layer:
 * a head counts as moved only if every one of its pairs changed. */
static void check_frozen_heads(bf_rope_kind rope, int n_heads, int spectral,
                               int want_moving_from)
{
    bf_model m;
    make_model(&m, tiny_shape(rope, n_heads, spectral), 2, 11);
    int P = C / n_heads / 2;
    size_t nf = (size_t)L * n_heads * P;
    float *before = malloc(nf * sizeof *before);
    memcpy(before, m.params.log_freq, nf * sizeof *before);
    train_steps(&m, 2, 3, 1e-2f);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < n_heads; h++) {
            size_t off = ((size_t)l * n_heads + h) * P;
            if (h < want_moving_from) {
                assert_memory_equal(m.params.log_freq + off, before + off,
                                    P * sizeof(float));
                assert_memory_equal(m.adam_m + m.tensors[15].offset + off,
                                    (float[16]){0}, P * sizeof(float));
            } else {
                for (int i = 0; i < P; i++)
                    assert_true(m.params.log_freq[off + i] != before[off + i]);
            }
        }
    free(before);
    bf_model_free(&m);
}

static void test_frequencies_fixed_or_learned(void **state)
{
    (void)state;
    check_frozen_heads(BF_ROPE_GEOMETRIC, 4, 0, 4); /* nothing moves */
    check_frozen_heads(BF_ROPE_NONE, 4, 0, 4);
    check_frozen_heads(BF_ROPE_SPECTRAL, 4, 4, 0);  /* everything moves */
    check_frozen_heads(BF_ROPE_BIFOCAL, 4, 1, 3);   /* only the last head */
    check_frozen_heads(BF_ROPE_BIFOCAL, 4, 2, 2);   /* the last two */
}

/* Backward accumulates: B rows at once equal two halves added up. */
static void test_micro_batches_accumulate(void **state)
{
    (void)state;
    enum { BB = 4, H = BB / 2 };
    bf_model whole, half;
    bf_model_shape s = tiny_shape(BF_ROPE_BIFOCAL, 2, 1);
    make_model(&whole, s, BB, 3);
    make_model(&half, s, H, 3);
    int in[BB * T], tg[BB * T], n_all, n1, n2;
    make_batch(in, tg, BB, 77);

    bf_model_zero_grad(&whole);
    double l_all = bf_model_forward(&whole, in, tg, NULL, BB, T, &n_all);
    bf_model_backward(&whole, 1.0f / (float)n_all);

    bf_model_zero_grad(&half);
    double l1 = bf_model_forward(&half, in, tg, NULL, H, T, &n1);
    bf_model_backward(&half, 1.0f / (float)n_all);
    double l2 = bf_model_forward(&half, in + H * T, tg + H * T, NULL, H, T,
                                 &n2);
    bf_model_backward(&half, 1.0f / (float)n_all);

    assert_int_equal(n1 + n2, n_all);
    assert_float_equal(l1 + l2, l_all, 1e-6 * l_all);
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &whole.tensors[k];
        const float *a = whole.grads_memory + t->offset;
        const float *b = half.grads_memory + t->offset;
        double d2 = 0, a2 = 0;
        for (size_t i = 0; i < t->count; i++) {
            d2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
            a2 += (double)a[i] * a[i];
        }
        if (a2 > 0)
            assert_true(sqrt(d2 / a2) < 1e-5);
        else
            assert_true(d2 == 0); /* fixed theta: zero in both */
    }
    /* the norm skips nothing trainable and counts nothing fixed */
    double sq = 0;
    for (size_t i = 0; i < whole.tensors[15].offset; i++)
        sq += (double)whole.grads_memory[i] * whole.grads_memory[i];
    int P = C / 2 / 2;
    for (int l = 0; l < L; l++) /* head 1 of each layer is the spectral one */
        for (int i = 0; i < P; i++) {
            double g = whole.grads.log_freq[((size_t)l * 2 + 1) * P + i];
            assert_true(g != 0.0);
            sq += g * g;
        }
    assert_float_equal(bf_model_grad_norm(&whole), sqrt(sq),
                       1e-6 * sqrt(sq));
    bf_model_free(&whole);
    bf_model_free(&half);
}

static void test_adamw_update_rule(void **state)
{
    (void)state;
    bf_model m;
    make_model(&m, tiny_shape(BF_ROPE_BIFOCAL, 2, 1), 2, 5);
    float *before = malloc(m.num_params * sizeof *before);
    memcpy(before, m.params_memory, m.num_params * sizeof *before);
    /* gradients everywhere, even where none can arise (fixed theta) */
    for (size_t i = 0; i < m.num_params; i++)
        m.grads_memory[i] = (float)(i % 7) - 3.0f; /* some zero */
    bf_adamw_hparams hp = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.99f,
                           .eps = 1e-8f, .weight_decay = 0.5f,
                           .freq_lr_mult = 3.0f};
    bf_adamw_step(&m, &hp, 1, 0.5f);
    /* at t = 1 the bias-corrected update is g / (|g| + eps) = sign(g) */
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &m.tensors[k];
        float lr = k == 15 ? hp.lr * hp.freq_lr_mult : hp.lr;
        float wd = t->decay ? hp.weight_decay : 0.0f;
        for (size_t j = 0; j < t->count; j++) {
            size_t i = t->offset + j;
            float g = 0.5f * m.grads_memory[i];
            double sign = g > 0 ? 1.0 : g < 0 ? -1.0 : 0.0;
            double want = before[i] - lr * (sign + wd * before[i]);
            int P = C / 2 / 2, head = (int)(j / P) % 2;
            if (k == 15 && head == 0) { /* geometric head: untouched */
                assert_true(m.params_memory[i] == before[i]);
                assert_true(m.adam_m[i] == 0.0f && m.adam_v[i] == 0.0f);
                continue;
            }
            assert_float_equal(m.params_memory[i], want, 1e-6);
        }
    }
    free(before);
    bf_model_free(&m);
}

/* A micro-batch of a long batch (balancing shaves at most a row) holds as
 * many rows of T as fit in budget_bytes of activations. */
static void assert_micro_budget(const bf_model_shape *s, int T,
                                size_t budget_bytes)
{
    bf_model_shape rows_only = *s;
    rows_only.n_positions = 0;
    size_t row = bf_model_size_act_floats(&rows_only, 1, T) * sizeof(float);
    size_t mb = (size_t)bf_model_size_micro_batch(s, 1 << 20, T);
    assert_true(mb * row <= budget_bytes);
    assert_true((mb + 2) * row > budget_bytes);
}

static void test_micro_batch_rule(void **state)
{
    (void)state;
    bf_model_shape a = {.vocab = 16, .d_model = 128, .n_layers = 4,
                        .n_heads = 4, .max_seq = 64, .rope = BF_ROPE_BIFOCAL,
                        .rope_base = 10000, .spectral_heads = 2};
    for (int local = 1; local <= 64; local++) {
        int mb = bf_model_size_micro_batch(&a, local, 64);
        int n = (local + mb - 1) / mb;
        assert_true(mb >= 1 && mb <= local);
        /* balanced: n micro-batches of mb or mb - 1 rows cover local */
        assert_true(n * mb >= local && n * (mb - 1) < local);
    }
    /* longer rows: fewer rows per micro-batch */
    int base = bf_model_size_micro_batch(&a, 1024, 64);
    assert_true(bf_model_size_micro_batch(&a, 1024, 128) < base);
    /* the budget: BF_MICRO_ACT_MIB where the activations decide (the
     * study's size), twice the parameters' bytes where they do (config A,
     * a wider model) */
    bf_model_shape study = a, wide = a;
    study.d_model = 64;
    study.n_layers = 2;
    wide.d_model = 256;
    assert_micro_budget(&study, 40, (size_t)BF_MICRO_ACT_MIB << 20);
    assert_micro_budget(&a, 64, 2 * 4 * bf_model_size_params(&a));
    assert_micro_budget(&wide, 64, 2 * 4 * bf_model_size_params(&wide));
    /* and no more than BF_MICRO_ACT_MAX_MIB, however large the model */
    bf_model_shape large = a;
    large.d_model = 512;
    large.n_layers = 8;
    assert_true(2 * 4 * bf_model_size_params(&large) >
                (size_t)BF_MICRO_ACT_MAX_MIB << 20);
    assert_micro_budget(&large, 16, (size_t)BF_MICRO_ACT_MAX_MIB << 20);
    assert_true(2 * 4 * bf_model_size_params(&study) <
                (size_t)BF_MICRO_ACT_MIB << 20);
    assert_true(2 * 4 * bf_model_size_params(&a) >
                (size_t)BF_MICRO_ACT_MIB << 20);
    assert_int_equal(bf_model_size_micro_batch(&a, 1, 4096), 1);
    assert_int_equal(bf_model_size_micro_batch(&a, 0, 64), 1);
}

static void test_train_flops(void **state)
{
    (void)state;
    bf_model_shape s = {.vocab = 10, .d_model = 8, .n_layers = 2,
                        .n_heads = 2};
    /* 6 * (2 * 12 * 64 + 80) per token + 12 * 2 * T * 8 attention */
    double want = 100.0 * (6.0 * (2 * 12 * 64 + 80) + 12.0 * 2 * 16 * 8);
    assert_float_equal(bf_model_train_flops(&s, 16, 100.0), want, 1e-6);
    /* PoPE: q.k over 2C, 6 T C forward */
    s.rope = BF_ROPE_POPE;
    want = 100.0 * (6.0 * (2 * 12 * 64 + 80) + 18.0 * 2 * 16 * 8);
    assert_float_equal(bf_model_train_flops(&s, 16, 100.0), want, 1e-6);
}

/* A tiny model learns a fixed batch by heart: the loss falls and the
 * argmax predictions become the targets. */
static void test_learns_and_predicts(void **state)
{
    (void)state;
    enum { BB = 4 };
    bf_model m;
    make_model(&m, tiny_shape(BF_ROPE_BIFOCAL, 2, 1), BB, 9);
    int in[BB * T], tg[BB * T], pred[BB * T], n;
    make_batch(in, tg, BB, 8);
    bf_adamw_hparams hp = {.lr = 3e-2f, .beta1 = 0.9f, .beta2 = 0.95f,
                           .eps = 1e-8f, .weight_decay = 0.0f,
                           .freq_lr_mult = 1.0f};
    double first = 0, last = 0;
    for (int step = 1; step <= 150; step++) {
        bf_model_zero_grad(&m);
        last = bf_model_forward(&m, in, tg, NULL, BB, T, &n) / n;
        if (step == 1)
            first = last;
        bf_model_backward(&m, 1.0f / (float)n);
        bf_adamw_step(&m, &hp, step, 1.0f);
    }
    assert_true(first > 2.0);  /* about log(11) at the start */
    assert_true(last < 0.1);
    bf_model_forward(&m, in, tg, NULL, BB, T, &n);
    bf_model_argmax(&m, pred);
    for (int i = 0; i < BB * T; i++) {
        assert_true(pred[i] >= 0 && pred[i] < V);
        if (tg[i] >= 0)
            assert_int_equal(pred[i], tg[i]);
    }
    bf_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_table),
        cmocka_unit_test(test_create_rejects_bad_shapes),
        cmocka_unit_test(test_odd_shape_rows_aligned),
        cmocka_unit_test(test_shape_from_config),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_frequencies_fixed_or_learned),
        cmocka_unit_test(test_micro_batches_accumulate),
        cmocka_unit_test(test_adamw_update_rule),
        cmocka_unit_test(test_micro_batch_rule),
        cmocka_unit_test(test_train_flops),
        cmocka_unit_test(test_learns_and_predicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
