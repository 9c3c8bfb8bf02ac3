/* The level's own gemm (engine/gemm.h) against a float64 reference on
 * random products: a and b each row-major or transposed with padded
 * strides, every tile edge (rows past the last whole tile, a last single
 * vector of columns), k across several of its blocks, many rows, init
 * from nothing, from another matrix, or from c itself (adding to it), with
 * and without a bias; and the shapes it must decline (columns not a whole
 * number of the level's vectors, a without a unit stride), leaving c as it
 * was.  Runs once per level (meson.build), each at that level's width. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "isa.h"
#include "layers.h"
#include "rng.h"
#include "test_isa_util.h"

typedef struct product {
    int m, n, k;
    int ta, tb;        /* a, b transposed */
    int lda, ldb, ldc; /* row strides of a, b (as stored) and c */
    int init;          /* 0 none, 1 another matrix, 2 c itself */
    int bias;
} product;

static float *random_floats(bf_rng *r, size_t n)
{
    float *x = bf_xmalloc(n * sizeof *x);
    bf_rng_fill_signed(r, x, n);
    return x;
}

static product random_product(bf_rng *r, int lanes)
{
    /* a few hundred rows now and then, as the model's products have */
    product p = {.m = 1 + (int)bf_rng_below(r, bf_rng_below(r, 20) ? 40 : 600),
                 .n = lanes * (1 + (int)bf_rng_below(r, 7)),
                 /* past GEMM_KC (256) now and then: several k blocks */
                 /* 0 now and then: c = init */
                 .k = (int)bf_rng_below(r, bf_rng_below(r, 4) ? 70 : 700),
                 .ta = (int)bf_rng_below(r, 2),
                 .tb = (int)bf_rng_below(r, 2),
                 .init = (int)bf_rng_below(r, 3),
                 .bias = (int)bf_rng_below(r, 2)};
    p.lda = (p.ta ? p.m : p.k) + (int)bf_rng_below(r, 3);
    p.ldb = (p.tb ? p.k : p.n) + (int)bf_rng_below(r, 3);
    p.ldc = p.n + (int)bf_rng_below(r, 3);
    return p;
}

/* The views of a [m, k] and b [k, n] as stored. */
static bf_mat view_a(const product *p, const float *a)
{
    return p->ta ? (bf_mat){a, 1, (size_t)p->lda}
                 : (bf_mat){a, (size_t)p->lda, 1};
}

static bf_mat view_b(const product *p, const float *b)
{
    return p->tb ? (bf_mat){b, 1, (size_t)p->ldb}
                 : (bf_mat){b, (size_t)p->ldb, 1};
}

/* The largest error of the gemm's c over its entries against float64,
 * scaled by sqrt(k) + 1 (a float sum of k terms of size ~1); also checks
 * that c's padding past n is untouched. */
static double product_error(const product *p, bf_rng *r)
{
    size_t m = (size_t)p->m, n = (size_t)p->n, ldc = (size_t)p->ldc;
    float *a = random_floats(r, (size_t)(p->ta ? p->k : p->m) * p->lda);
    float *b = random_floats(r, (size_t)(p->tb ? p->n : p->k) * p->ldb);
    float *c = random_floats(r, m * ldc);
    float *other = random_floats(r, m * ldc);
    float *bias = random_floats(r, n);
    float *c0 = bf_xmalloc(m * ldc * sizeof *c0);
    memcpy(c0, c, m * ldc * sizeof *c0);
    const float *init = p->init == 1 ? other : p->init == 2 ? c0 : NULL;
    bf_mat av = view_a(p, a), bv = view_b(p, b);
    double worst = 0;
    /* the start: none, another matrix, or c itself (what init reads as
     * c0, c's values before) */
    bf_mat start = p->init == 1   ? (bf_mat){other, ldc, 1}
                   : p->init == 2 ? (bf_mat){c, ldc, 1}
                                  : (bf_mat){NULL, 0, 0};
    int rc = bf_gemm(c, ldc, av, bv, start, p->bias ? bias : NULL, p->m, p->n,
                     p->k);
    if (rc != 0)
        worst = INFINITY;
    for (size_t i = 0; i < m && rc == 0; i++) {
        for (size_t j = 0; j < n; j++) {
            double s = init ? init[i * ldc + j] : 0.0;
            s += p->bias ? bias[j] : 0.0;
            for (size_t l = 0; l < (size_t)p->k; l++)
                s += (double)av.p[i * av.rs + l * av.cs] *
                     bv.p[l * bv.rs + j * bv.cs];
            double e = fabs(c[i * ldc + j] - s) / (sqrt((double)p->k) + 1.0);
            if (!(e <= worst)) /* a NaN counts as the worst */
                worst = isnan(e) ? INFINITY : e;
        }
        for (size_t j = n; j < ldc; j++) /* the padding */
            if (c[i * ldc + j] != c0[i * ldc + j])
                worst = INFINITY;
    }
    free(a), free(b), free(c), free(other), free(bias), free(c0);
    return worst;
}

static void test_gemm_against_float64(void **state)
{
    (void)state;
    bf_rng r;
    bf_rng_seed(&r, 23);
    for (int i = 0; i < 1500; i++) {
        product p = random_product(&r, bf_kernels_active->vec_lanes);
        double e = product_error(&p, &r);
        if (!(e < 1e-5))
            fail_msg("%s gemm: m %d n %d k %d a%s b%s lda %d ldb %d ldc %d "
                     "init %d bias %d: error %.3g (scaled by sqrt(k)+1; "
                     "float rounding is about 1e-6)",
                     bf_isa_name(bf_isa_current()), p.m, p.n, p.k,
                     p.ta ? "^T" : "", p.tb ? "^T" : "", p.lda, p.ldb, p.ldc,
                     p.init, p.bias, e);
    }
}

/* Columns that are not whole vectors, and an a with no unit stride: -1,
 * and c as it was. */
static void test_gemm_declines(void **state)
{
    (void)state;
    int lanes = bf_kernels_active->vec_lanes;
    enum { M = 5, K = 6, MAX_N = 64 };
    float a[M * K * 2], b[K * MAX_N], c[M * MAX_N];
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        a[i] = 1.0f;
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        b[i] = 1.0f;
    for (size_t i = 0; i < sizeof c / sizeof *c; i++)
        c[i] = 7.0f;
    bf_mat none = {NULL, 0, 0};
    int n_bad = lanes + 2;
    assert_int_equal(bf_gemm(c, (size_t)n_bad, (bf_mat){a, K, 1},
                             (bf_mat){b, (size_t)n_bad, 1}, none, NULL, M,
                             n_bad, K),
                     -1);
    assert_int_equal(bf_gemm(c, (size_t)lanes, (bf_mat){a, 2 * K, 2},
                             (bf_mat){b, (size_t)lanes, 1}, none, NULL, M,
                             lanes, K),
                     -1);
    for (size_t i = 0; i < sizeof c / sizeof *c; i++)
        assert_float_equal(c[i], 7.0f, 0.0f);
    /* and the same shape with whole vectors is taken: K ones */
    assert_int_equal(bf_gemm(c, (size_t)lanes, (bf_mat){a, K, 1},
                             (bf_mat){b, (size_t)lanes, 1}, none, NULL, M,
                             lanes, K),
                     0);
    assert_float_equal(c[0], (float)K, 0.0f);
}

int main(void)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_against_float64),
        cmocka_unit_test(test_gemm_declines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
