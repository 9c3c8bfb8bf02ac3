/* The C model against PyTorch (tests/reference/torch_ref.py) on the same
 * weights and batch, for every rope variant (and spectral, bifocal, p-RoPE
 * and PoPE again with random positions): loss, predictions, every gradient
 * tensor, and the parameters after one AdamW step.
 *
 * usage: test_model_torch PATH/torch_check.py
 * Fails, saying so, when /usr/bin/python3 cannot import torch: the check
 * against the reference is part of the proof, never skipped (scripts/deps.sh
 * installs python3-torch). */
#include <sys/stat.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "model.h"
#include "rng.h"
#include "test_isa_util.h"
#include "torch_case.h"

enum { V = 11, C = 32, L = 2, NH = 4, T = 16, B = 3, N_CASES = 10,
       N_POS = 4 * T, PROPE_PAIRS = 1 };

static const char *g_script;
static char g_root[64];

typedef struct torch_case {
    bf_rope_kind rope;
    int spectral;
    int random_positions; /* 1: a sorted subset of 0..N_POS-1 per row */
    char dir[128];
    bf_model m;
    int inputs[B * T], targets[B * T], pos[B * T];
    const int *positions; /* pos, or NULL for 0..T-1 */
    float *before; /* parameters as written, for the AdamW comparison */
} torch_case;

static const bf_adamw_hparams HP = {.lr = 1e-2f, .beta1 = 0.9f,
                                    .beta2 = 0.95f, .eps = 1e-6f,
                                    .weight_decay = 0.1f,
                                    .freq_lr_mult = 3.0f};
static const float GRAD_SCALE = 0.03f;

/* A model with non-trivial weights (not the 0.02 init, whose gradients
 * are tiny) and a batch with some non-target positions. */
static void make_case(torch_case *c, int index)
{
    int prope = c->rope == BF_ROPE_PROPE ? PROPE_PAIRS : 0;
    bf_model_shape s = {.vocab = V, .d_model = C, .n_layers = L,
                        .n_heads = NH, .max_seq = T, .rope = c->rope,
                        .rope_base = 10000.0, .spectral_heads = c->spectral,
                        .n_positions = c->random_positions ? N_POS : 0,
                        .prope_pairs = prope};
    bf_error err;
    assert_int_equal(bf_model_create(&c->m, &s, B, T, &err), 0);
    bf_model_init_weights(&c->m, 21 + index);
    bf_rng r;
    bf_rng_seed(&r, 500 + index);
    for (size_t i = 0; i < c->m.num_params; i++)
        c->m.params_memory[i] += (float)(0.1 * bf_rng_normal(&r));
    for (int i = 0; i < B * T; i++) {
        c->inputs[i] = (int)bf_rng_below(&r, V);
        c->targets[i] = i % 4 == 1 ? -1 : (int)bf_rng_below(&r, V);
    }
    for (int b = 0; b < B; b++) /* T sorted distinct positions per row */
        for (int p = 0, taken = 0; taken < T; p++)
            if (!c->random_positions ||
                (int)bf_rng_below(&r, (uint32_t)(N_POS - p)) < T - taken)
                c->pos[b * T + taken++] = p;
    c->positions = c->random_positions ? c->pos : NULL;
    size_t bytes = c->m.num_params * sizeof(float);
    c->before = malloc(bytes);
    memcpy(c->before, c->m.params_memory, bytes);

    snprintf(c->dir, sizeof c->dir, "%s/case%d", g_root, index);
    assert_int_equal(mkdir(c->dir, 0700), 0);
    torch_case_write(c->dir, &c->m, &HP, GRAD_SCALE, c->inputs, c->targets,
                     c->positions, B, T);
}

static void compare_case(torch_case *c)
{
    bf_model *m = &c->m;
    char path[256];
    snprintf(path, sizeof path, "%s/result.json", c->dir);
    json_error_t jerr;
    json_t *res = json_load_file(path, 0, &jerr);
    assert_non_null(res);

    int n;
    bf_model_zero_grad(m);
    double loss = bf_model_forward(m, c->inputs, c->targets, c->positions,
                                   B, T, &n);
    double torch_loss = json_real_value(json_object_get(res, "loss_sum"));
    printf("# %-8s%s loss C %.7f torch %.7f\n", bf_rope_name(c->rope),
           c->random_positions ? " random positions" : "", loss, torch_loss);
    assert_float_equal(loss, torch_loss, 1e-5 * fabs(torch_loss));
    assert_int_equal(n, json_integer_value(json_object_get(res, "n_targets")));
    int pred[B * T];
    bf_model_argmax(m, pred);
    json_t *am = json_object_get(res, "argmax");
    assert_int_equal(json_array_size(am), B * T);
    for (int i = 0; i < B * T; i++)
        assert_int_equal(pred[i], json_integer_value(json_array_get(am, i)));
    json_decref(res);

    bf_model_backward(m, GRAD_SCALE);
    float *want = malloc(m->num_params * sizeof *want);
    torch_case_read_floats(c->dir, "grads.f32", want, m->num_params);
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &m->tensors[k];
        double e = torch_case_rel_diff(m->grads_memory + t->offset,
                                       want + t->offset, t->count);
        printf("#   grad %-9s rel diff %.2e\n", t->name, e);
        assert_true(e < 2e-5); /* observed ~1e-6: float32 op order */
    }

    bf_adamw_step(m, &HP, 1, 1.0f);
    torch_case_read_floats(c->dir, "after.f32", want, m->num_params);
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &m->tensors[k];
        size_t n_el = t->count;
        float *dc = malloc(n_el * sizeof *dc), *dt = malloc(n_el * sizeof *dt);
        for (size_t i = 0; i < n_el; i++) {
            size_t at = t->offset + i;
            dc[i] = m->params_memory[at] - c->before[at];
            dt[i] = want[at] - c->before[at];
        }
        double e = torch_case_rel_diff(dc, dt, n_el);
        printf("#   step %-9s rel diff %.2e\n", t->name, e);
        assert_true(e < 1e-3);
        free(dc);
        free(dt);
    }
    free(want);
}

static void test_against_torch(void **state)
{
    (void)state;
    static torch_case cases[N_CASES] = {
        {.rope = BF_ROPE_NONE, .spectral = 0},
        {.rope = BF_ROPE_GEOMETRIC, .spectral = 0},
        {.rope = BF_ROPE_SPECTRAL, .spectral = NH},
        {.rope = BF_ROPE_BIFOCAL, .spectral = 2},
        {.rope = BF_ROPE_PROPE, .spectral = 0},
        {.rope = BF_ROPE_SPECTRAL, .spectral = NH, .random_positions = 1},
        {.rope = BF_ROPE_BIFOCAL, .spectral = 2, .random_positions = 1},
        {.rope = BF_ROPE_PROPE, .spectral = 0, .random_positions = 1},
        {.rope = BF_ROPE_POPE, .spectral = 0},
        {.rope = BF_ROPE_POPE, .spectral = 0, .random_positions = 1},
    };
    snprintf(g_root, sizeof g_root, "/tmp/bf_torch_check_XXXXXX");
    assert_non_null(mkdtemp(g_root));
    char *dirs[N_CASES];
    for (int i = 0; i < N_CASES; i++) {
        make_case(&cases[i], i);
        dirs[i] = cases[i].dir;
    }
    torch_case_run(g_script, dirs, N_CASES);
    for (int i = 0; i < N_CASES; i++) {
        compare_case(&cases[i]);
        bf_model_free(&cases[i].m);
        free(cases[i].before);
    }
    torch_case_remove_tree(g_root);
}

int main(int argc, char **argv)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    g_script = torch_case_script(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
