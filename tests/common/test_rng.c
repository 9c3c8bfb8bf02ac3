/* Counter-based RNG: keyed streams are reproducible and distinct, and the
 * draws have the distributions rng.h promises. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rng.h"

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_same_key_same_stream(void **state)
{
    (void)state;
    bf_rng a, b, c;
    bf_rng_seed(&a, bf_rng_key(bf_rng_key(42, 1), 7));
    bf_rng_seed(&b, bf_rng_key(bf_rng_key(42, 1), 7));
    bf_rng_seed(&c, bf_rng_key(bf_rng_key(42, 2), 7)); /* other stream */
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = bf_rng_u64(&a);
        assert_true(x == bf_rng_u64(&b));
        differ += x != bf_rng_u64(&c);
    }
    assert_int_equal(differ, 100);
}

static void test_keys_are_distinct(void **state)
{
    (void)state;
    enum { N = 20000 };
    uint64_t *keys = malloc(2 * N * sizeof *keys);
    for (uint64_t i = 0; i < N; i++) {
        keys[i] = bf_rng_key(bf_rng_key(1, 1), i);
        keys[N + i] = bf_rng_key(bf_rng_key(1, 2), i);
    }
    qsort(keys, 2 * N, sizeof *keys, compare_u64);
    for (int i = 1; i < 2 * N; i++)
        assert_true(keys[i] != keys[i - 1]);
    free(keys);
}

static void test_below_is_uniform_and_bounded(void **state)
{
    (void)state;
    bf_rng r;
    bf_rng_seed(&r, 99);
    enum { BINS = 7, DRAWS = 70000 };
    int count[BINS] = {0};
    for (int i = 0; i < DRAWS; i++) {
        uint32_t v = bf_rng_below(&r, BINS);
        assert_true(v < BINS);
        count[v]++;
    }
    double chi2 = 0, expect = (double)DRAWS / BINS;
    for (int b = 0; b < BINS; b++)
        chi2 += (count[b] - expect) * (count[b] - expect) / expect;
    assert_true(chi2 < 30.0); /* 6 dof: p ~ 4e-5 */
    for (int i = 0; i < 100; i++)
        assert_int_equal(bf_rng_below(&r, 1), 0);
}

static void test_uniform_and_normal_moments(void **state)
{
    (void)state;
    bf_rng r;
    bf_rng_seed(&r, 2024);
    enum { N = 50000 };
    double sum = 0, nsum = 0, nsq = 0;
    for (int i = 0; i < N; i++) {
        double u = bf_rng_uniform(&r);
        assert_true(u >= 0.0 && u < 1.0);
        sum += u;
        double z = bf_rng_normal(&r);
        assert_true(isfinite(z));
        nsum += z;
        nsq += z * z;
    }
    assert_true(fabs(sum / N - 0.5) < 0.01);
    assert_true(fabs(nsum / N) < 0.03);
    assert_true(fabs(nsq / N - 1.0) < 0.03);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_key_same_stream),
        cmocka_unit_test(test_keys_are_distinct),
        cmocka_unit_test(test_below_is_uniform_and_bounded),
        cmocka_unit_test(test_uniform_and_normal_moments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
