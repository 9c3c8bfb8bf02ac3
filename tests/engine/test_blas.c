/* OpenBLAS's sgemm at the kernels the dispatch level pins (engine/isa.h),
 * against a float64 reference on random products: every transpose, sizes
 * from 1 (OpenBLAS's small-matrix paths) to a few hundred (its packed
 * path), padded strides, alpha 1 and 0.37, beta 0, 1 and -0.6.  The pin
 * picks kernels by name, not by what OpenBLAS chose for this CPU, and the
 * machines' images warn that some OpenBLAS builds compute wrong results on
 * some processors: this holds the pinned ones to the numbers.  Runs once
 * per level (meson.build). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cblas.h>
#include <cmocka.h>

#include "alloc.h"
#include "isa.h"
#include "rng.h"
#include "test_isa_util.h"

typedef struct product {
    int m, n, k, ta, tb, lda, ldb, ldc;
    float alpha, beta;
} product;

static product random_product(bf_rng *r, int big)
{
    static const float betas[] = {0.0f, 1.0f, -0.6f};
    int span = big ? 300 : 70;
    product p = {.m = 1 + (int)bf_rng_below(r, (uint32_t)span),
                 .n = 1 + (int)bf_rng_below(r, (uint32_t)span),
                 .k = 1 + (int)bf_rng_below(r, (uint32_t)(big ? 400 : 70)),
                 .ta = (int)bf_rng_below(r, 2),
                 .tb = (int)bf_rng_below(r, 2),
                 .alpha = bf_rng_below(r, 2) ? 1.0f : 0.37f,
                 .beta = betas[bf_rng_below(r, 3)]};
    p.lda = (p.ta ? p.m : p.k) + (int)bf_rng_below(r, 3);
    p.ldb = (p.tb ? p.k : p.n) + (int)bf_rng_below(r, 3);
    p.ldc = p.n + (int)bf_rng_below(r, 3);
    return p;
}

static float *random_floats(bf_rng *r, size_t count)
{
    float *x = bf_xmalloc(count * sizeof *x);
    bf_rng_fill_signed(r, x, count);
    return x;
}

/* The largest error of c = alpha op(a) op(b) + beta c0 over its entries,
 * scaled by sqrt(k) + 1 (a float sum of k terms of size ~1). */
static double product_error(const product *p, bf_rng *r)
{
    size_t rows_a = (size_t)(p->ta ? p->k : p->m);
    size_t rows_b = (size_t)(p->tb ? p->n : p->k);
    float *a = random_floats(r, rows_a * (size_t)p->lda);
    float *b = random_floats(r, rows_b * (size_t)p->ldb);
    float *c = random_floats(r, (size_t)p->m * (size_t)p->ldc);
    double *want = bf_xmalloc((size_t)p->m * (size_t)p->n * sizeof *want);
    for (int i = 0; i < p->m; i++)
        for (int j = 0; j < p->n; j++) {
            double s = 0;
            for (int l = 0; l < p->k; l++)
                s += (double)(p->ta ? a[l * p->lda + i] : a[i * p->lda + l]) *
                     (p->tb ? b[j * p->ldb + l] : b[l * p->ldb + j]);
            want[i * p->n + j] = p->alpha * s +
                                 (p->beta != 0 ? p->beta * c[i * p->ldc + j]
                                               : 0);
        }
    cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans,
                p->tb ? CblasTrans : CblasNoTrans, p->m, p->n, p->k,
                p->alpha, a, p->lda, b, p->ldb, p->beta, c, p->ldc);
    double worst = 0;
    for (int i = 0; i < p->m; i++)
        for (int j = 0; j < p->n; j++) {
            double e = fabs(c[i * p->ldc + j] - want[i * p->n + j]) /
                       (sqrt((double)p->k) + 1.0);
            if (!(e <= worst)) /* a NaN counts as the worst */
                worst = isnan(e) ? INFINITY : e;
        }
    free(a);
    free(b);
    free(c);
    free(want);
    return worst;
}

static void test_sgemm_against_float64(void **state)
{
    (void)state;
    bf_rng r;
    bf_rng_seed(&r, 17);
    for (int i = 0; i < 3000; i++) {
        product p = random_product(&r, i % 100 == 0);
        double e = product_error(&p, &r);
        if (!(e < 1e-5))
            fail_msg("OpenBLAS %s: sgemm %c%c m %d n %d k %d alpha %g beta "
                     "%g: error %.3g (scaled by sqrt(k)+1; float rounding is "
                     "about 1e-6)", bf_isa_blas_core_in_use(),
                     p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.m, p.n, p.k,
                     (double)p.alpha, (double)p.beta, e);
    }
}

int main(void)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgemm_against_float64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
