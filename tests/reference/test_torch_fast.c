/* The PyTorch model bench_train times (BifocalTorch.forward_fast in
 * torch_ref.py) is the same model as the checked one and as the C model:
 * on the bench's own shapes and step-0 weights (study: spectral, config A:
 * bifocal) and on a p-RoPE case with random positions and perturbed
 * weights, its loss equals the C model's and the checked PyTorch model's,
 * and every gradient tensor equals both.  Fails when the fast path drifts
 * from the model the engine is checked against, so the speed it reports is
 * the speed of this model.
 *
 * Runs at the dispatch level BIFOCAL_ISA names (test_isa_util.h).
 *
 * usage: test_torch_fast PATH/torch_check.py */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <jansson.h>

#include "job_config.h"
#include "model.h"
#include "rng.h"
#include "tasks.h"
#include "test_isa_util.h"
#include "torch_case.h"

typedef struct fast_case {
    const char *name;
    int d_model, n_layers, n_heads, seq_len, batch;
    bf_rope_kind rope;
    int spectral_heads, prope_pairs;
    int n_positions;  /* > 0: random sorted positions in 0..n_positions-1 */
    double perturb;   /* std of noise added to the step-0 weights */
} fast_case;

/* study and A are bench_train's configs, at its weights (seed 1) */
static const fast_case CASES[] = {
    {"study", 64, 2, 4, 40, 32, BF_ROPE_SPECTRAL, 4, 0, 0, 0.0},
    {"A", 128, 4, 4, 64, 32, BF_ROPE_BIFOCAL, 2, 0, 0, 0.0},
    {"prope-random-positions", 64, 2, 4, 40, 8, BF_ROPE_PROPE, 0, 4, 160,
     0.1},
    {"pope-random-positions", 64, 2, 4, 40, 8, BF_ROPE_POPE, 0, 0, 160, 0.1},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

/* bench_train's step: its AdamW settings, the mean over the batch */
static const bf_adamw_hparams HP = {.lr = 1e-3f, .beta1 = 0.9f,
                                    .beta2 = 0.95f, .eps = 1e-8f,
                                    .weight_decay = 0.1f,
                                    .freq_lr_mult = 1.0f};

static const char *g_script;

typedef struct case_run {
    bf_model m;
    int *inputs, *targets, *pos; /* [B*T]; pos NULL: 0..T-1 */
    char dir[128];
} case_run;

static int dyck_vocab(void)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.task = BF_TASK_DYCK;
    return bf_vocab_size(&cfg);
}

/* The batch as bench_train draws it (rng seed 2); the random-positions
 * case also drops every fifth target and draws T sorted positions. */
static void make_batch(case_run *r, const fast_case *fc, int V)
{
    int B = fc->batch, T = fc->seq_len;
    r->inputs = malloc(sizeof(int) * B * T);
    r->targets = malloc(sizeof(int) * B * T);
    r->pos = NULL;
    bf_rng g;
    bf_rng_seed(&g, 2);
    for (int i = 0; i < B * T; i++) {
        r->inputs[i] = (int)bf_rng_below(&g, (uint32_t)V);
        r->targets[i] = (int)bf_rng_below(&g, (uint32_t)V);
        if (fc->n_positions && i % 5 == 1)
            r->targets[i] = -1;
    }
    if (!fc->n_positions)
        return;
    r->pos = malloc(sizeof(int) * B * T);
    for (int b = 0; b < B; b++)
        for (int p = 0, taken = 0; taken < T; p++)
            if ((int)bf_rng_below(&g, (uint32_t)(fc->n_positions - p)) <
                T - taken)
                r->pos[b * T + taken++] = p;
}

static void make_case(case_run *r, const fast_case *fc, const char *root)
{
    bf_model_shape s = {.vocab = dyck_vocab(), .d_model = fc->d_model,
                        .n_layers = fc->n_layers, .n_heads = fc->n_heads,
                        .max_seq = fc->seq_len, .rope = fc->rope,
                        .rope_base = 10000.0,
                        .spectral_heads = fc->spectral_heads,
                        .prope_pairs = fc->prope_pairs,
                        .n_positions = fc->n_positions};
    bf_error err;
    assert_int_equal(bf_model_create(&r->m, &s, fc->batch, fc->seq_len, &err),
                     0);
    bf_model_init_weights(&r->m, 1);
    bf_rng g;
    bf_rng_seed(&g, 3);
    for (size_t i = 0; fc->perturb > 0 && i < r->m.num_params; i++)
        r->m.params_memory[i] += (float)(fc->perturb * bf_rng_normal(&g));
    make_batch(r, fc, s.vocab);
    snprintf(r->dir, sizeof r->dir, "%s/%s", root, fc->name);
    assert_int_equal(mkdir(r->dir, 0700), 0);
    float scale = 1.0f / (float)(fc->batch * fc->seq_len);
    torch_case_write(r->dir, &r->m, &HP, scale, r->inputs, r->targets, r->pos,
                     fc->batch, fc->seq_len);
}

static double json_number(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    assert_non_null(v);
    return json_number_value(v);
}

/* Every gradient tensor of a against b, named in the output. */
static void compare_grads(const bf_model *m, const float *a, const float *b,
                          const char *what)
{
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &m->tensors[k];
        double e = torch_case_rel_diff(a + t->offset, b + t->offset,
                                       t->count);
        printf("#   %s grad %-9s rel diff %.2e\n", what, t->name, e);
        assert_true(e < 2e-5); /* observed ~1e-6: float32 op order */
    }
}

static void check_case(case_run *r, const fast_case *fc)
{
    int B = fc->batch, T = fc->seq_len, n;
    bf_model *m = &r->m;
    bf_model_zero_grad(m);
    double c_loss = bf_model_forward(m, r->inputs, r->targets, r->pos, B, T,
                                     &n);
    bf_model_backward(m, 1.0f / (float)(B * T));

    char path[256];
    snprintf(path, sizeof path, "%s/result.json", r->dir);
    json_error_t jerr;
    json_t *res = json_load_file(path, 0, &jerr);
    assert_non_null(res);
    double fast = json_number(res, "loss_sum_fast");
    double checked = json_number(res, "loss_sum");
    json_decref(res);
    printf("# %s: loss C %.7f  PyTorch fast %.7f  checked %.7f\n", fc->name,
           c_loss, fast, checked);
    assert_float_equal(fast, c_loss, 1e-5 * fabs(c_loss));
    assert_float_equal(fast, checked, 1e-5 * fabs(checked));

    float *want = malloc(m->num_params * sizeof *want);
    float *got = malloc(m->num_params * sizeof *got);
    torch_case_read_floats(r->dir, "grads.f32", want, m->num_params);
    torch_case_read_floats(r->dir, "grads_fast.f32", got, m->num_params);
    compare_grads(m, got, want, "fast vs checked");
    compare_grads(m, got, m->grads_memory, "fast vs C");
    free(want);
    free(got);
}

static void test_fast_path_is_the_checked_model(void **state)
{
    (void)state;
    char root[64];
    snprintf(root, sizeof root, "/tmp/bf_torch_fast_XXXXXX");
    assert_non_null(mkdtemp(root));
    static case_run runs[N_CASES];
    char *dirs[N_CASES];
    for (int i = 0; i < N_CASES; i++) {
        make_case(&runs[i], &CASES[i], root);
        dirs[i] = runs[i].dir;
    }
    torch_case_run(g_script, dirs, N_CASES);
    for (int i = 0; i < N_CASES; i++) {
        check_case(&runs[i], &CASES[i]);
        bf_model_free(&runs[i].m);
        free(runs[i].inputs);
        free(runs[i].targets);
        free(runs[i].pos);
    }
    torch_case_remove_tree(root);
}

int main(int argc, char **argv)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    g_script = torch_case_script(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_path_is_the_checked_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
