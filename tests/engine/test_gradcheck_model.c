/* Finite-difference check of the whole model: the gradient of the mean
 * loss w.r.t. every parameter tensor, log_freq included, for every
 * positional variant (none, rope, prope, spectral, bifocal, pope), with
 * positions 0..T-1 and with random positions (a sorted subset of 0..3T-1
 * per row). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model.h"
#include "test_gradcheck_util.h"
#include "test_isa_util.h"

#define TOL 5e-3     /* whole-model float32 rounding gives ~1e-4..1e-3 */
#define EPS 1e-2f
#define PER_TENSOR 48 /* sampled entries per tensor */

enum { V = 11, C = 16, L = 2, NH = 2, T = 8, B = 2, P = C / NH / 2,
       N_POS = 3 * T, PROPE_PAIRS = 1 };

typedef struct model_ctx {
    bf_model m;
    int inputs[B * T], targets[B * T], pos[B * T];
    const int *positions; /* pos, or NULL for 0..T-1 */
} model_ctx;

static double mean_loss(void *p)
{
    model_ctx *c = p;
    int n;
    double sum = bf_model_forward(&c->m, c->inputs, c->targets, c->positions,
                                  B, T, &n);
    return sum / n;
}

/* A model with O(1) weights: with the 0.02 init most gradients would be
 * too small for float32 finite differences to resolve. */
static void setup_model(model_ctx *c, bf_rope_kind rope, int spectral,
                        int random_positions)
{
    bf_model_shape s = {.vocab = V, .d_model = C, .n_layers = L,
                        .n_heads = NH, .max_seq = T, .rope = rope,
                        .rope_base = 10000.0, .spectral_heads = spectral,
                        .n_positions = random_positions ? N_POS : 0,
                        .prope_pairs = rope == BF_ROPE_PROPE ? PROPE_PAIRS
                                                             : 0};
    bf_error err;
    assert_int_equal(bf_model_create(&c->m, &s, B, T, &err), 0);
    bf_model_init_weights(&c->m, 7);
    for (int k = 0; k < BF_NUM_PARAM_TENSORS; k++) {
        const bf_param_info *t = &c->m.tensors[k];
        float *p = c->m.params_memory + t->offset;
        gc_fill_normal(p, t->count, t->decay ? 0.3 : 0.2, 100 + k);
        int is_gain = !strcmp(t->name, "ln1w") || !strcmp(t->name, "ln2w") ||
                      !strcmp(t->name, "lnfw");
        /* gains near 1; omega spread over (0.2, 1.6) so every pair turns */
        for (size_t i = 0; i < t->count; i++)
            p[i] += is_gain ? 1.0f : !strcmp(t->name, "log_freq") ? -0.5f : 0;
    }
    bf_rng r;
    bf_rng_seed(&r, 99);
    for (int i = 0; i < B * T; i++) {
        c->inputs[i] = (int)bf_rng_below(&r, V);
        c->targets[i] = i % 3 == 0 ? -1 : (int)bf_rng_below(&r, V);
    }
    /* each row: T distinct sorted positions of 0..N_POS-1 */
    for (int b = 0; b < B; b++)
        for (int p = 0, taken = 0; p < N_POS && taken < T; p++)
            if ((int)bf_rng_below(&r, (uint32_t)(N_POS - p)) < T - taken)
                c->pos[b * T + taken++] = p;
    c->positions = random_positions ? c->pos : NULL;
}

/* p-RoPE's zeroed pairs carry no position: changing their theta changes
 * nothing, while the other pairs' theta does. */
static void check_prope_pairs_inert(model_ctx *c)
{
    double before = mean_loss(c);
    float *theta = c->m.params.log_freq; /* layer 0, head 0 */
    theta[P - 1] += 1.0f;
    assert_true(mean_loss(c) == before);
    theta[P - 1] -= 1.0f;
    theta[0] += 0.5f;
    assert_true(mean_loss(c) != before);
    theta[0] -= 0.5f;
    float omega[P];
    bf_model_omega(&c->m, 0, 0, omega);
    assert_true(omega[P - 1] == 0.0f && omega[0] > 0.0f);
}

static void check_variant(bf_rope_kind rope, int spectral,
                          int random_positions)
{
    model_ctx *c = calloc(1, sizeof *c);
    setup_model(c, rope, spectral, random_positions);
    bf_model *m = &c->m;
    int n;
    bf_model_zero_grad(m);
    bf_model_forward(m, c->inputs, c->targets, c->positions, B, T, &n);
    bf_model_backward(m, 1.0f / (float)n);

    for (int k = 0; k < BF_NUM_PARAM_TENSORS - 1; k++) {
        const bf_param_info *t = &m->tensors[k];
        char what[64];
        snprintf(what, sizeof what, "%s%s %s", bf_rope_name(rope),
                 random_positions ? "+rand" : "", t->name);
        double e = gc_rel_error(what, mean_loss, c,
                                m->params_memory + t->offset,
                                m->grads_memory + t->offset, t->count,
                                PER_TENSOR, EPS);
        assert_true(e < TOL);
    }
    /* log_freq: exact gradient on learnable heads, none on fixed ones */
    const bf_param_info *lf = &m->tensors[BF_NUM_PARAM_TENSORS - 1];
    int checked = 0;
    for (int lh = 0; lh < L * NH; lh++) {
        size_t off = lf->offset + (size_t)lh * P;
        if (!m->freq_learnable[lh]) {
            for (int i = 0; i < P; i++)
                assert_true(m->grads_memory[off + i] == 0.0f);
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "%s%s log_freq[%d][%d]",
                 bf_rope_name(rope), random_positions ? "+rand" : "",
                 lh / NH, lh % NH);
        assert_true(gc_rel_error(what, mean_loss, c, m->params_memory + off,
                                 m->grads_memory + off, P, P, 1e-3f) < TOL);
        checked++;
    }
    int want = rope == BF_ROPE_NONE ? 0 : L * spectral;
    assert_int_equal(checked, want);
    if (rope == BF_ROPE_NONE || rope == BF_ROPE_POPE) {
        /* without rotation (PoPE's frequencies are fixed) theta has no
         * effect at all */
        double before = mean_loss(c);
        m->params.log_freq[0] += 1.0f;
        assert_true(mean_loss(c) == before);
    }
    if (rope == BF_ROPE_PROPE)
        check_prope_pairs_inert(c);
    if (random_positions && rope != BF_ROPE_NONE) {
        /* the positions are used: 0..T-1 gives another loss */
        double at_random = mean_loss(c);
        c->positions = NULL;
        assert_true(mean_loss(c) != at_random);
    }
    bf_model_free(m);
    free(c);
}

/* Every variant with positions 0..T-1, then with random positions. */
static void check_both(bf_rope_kind rope, int spectral)
{
    check_variant(rope, spectral, 0);
    check_variant(rope, spectral, 1);
}

static void test_none(void **state) { (void)state; check_both(BF_ROPE_NONE, 0); }
static void test_rope(void **state) { (void)state; check_both(BF_ROPE_GEOMETRIC, 0); }
static void test_prope(void **state) { (void)state; check_both(BF_ROPE_PROPE, 0); }
static void test_spectral(void **state) { (void)state; check_both(BF_ROPE_SPECTRAL, NH); }
static void test_bifocal(void **state) { (void)state; check_both(BF_ROPE_BIFOCAL, 1); }
static void test_pope(void **state) { (void)state; check_both(BF_ROPE_POPE, 0); }

int main(void)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_prope),
        cmocka_unit_test(test_spectral),
        cmocka_unit_test(test_bifocal),
        cmocka_unit_test(test_pope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
