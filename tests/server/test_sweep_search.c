/* A stage's search: the Sobol' points against scipy's (unscrambled point
 * by point, scrambled by their nets and discrepancy), the trials as an
 * axis (order, values, a pure function of the search's seed) and every
 * rejection of a bad search block, each naming file, line and field. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sweep_internal.h"

/* Printed by tests/server/sobol_reference.py (scipy.stats.qmc.Sobol,
 * scramble=False, bits=32): point i, every dimension as x * 2^32.  The
 * late indices exercise the direction numbers' recurrence. */
static const struct {
    uint32_t index;
    uint32_t x[SWEEP_SOBOL_MAX_DIMS];
} scipy_points[] = {
    {0, {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}},
    {1, {2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u, 2147483648u}},
    {2, {3221225472u, 1073741824u, 1073741824u, 1073741824u, 3221225472u, 3221225472u, 1073741824u, 3221225472u, 3221225472u, 3221225472u, 3221225472u, 3221225472u, 1073741824u, 1073741824u, 3221225472u, 1073741824u}},
    {3, {1073741824u, 3221225472u, 3221225472u, 3221225472u, 1073741824u, 1073741824u, 3221225472u, 1073741824u, 1073741824u, 1073741824u, 1073741824u, 1073741824u, 3221225472u, 3221225472u, 1073741824u, 3221225472u}},
    {4, {1610612736u, 1610612736u, 2684354560u, 3758096384u, 1610612736u, 536870912u, 1610612736u, 3758096384u, 3758096384u, 2684354560u, 3758096384u, 1610612736u, 1610612736u, 2684354560u, 1610612736u, 3758096384u}},
    {5, {3758096384u, 3758096384u, 536870912u, 1610612736u, 3758096384u, 2684354560u, 3758096384u, 1610612736u, 1610612736u, 536870912u, 1610612736u, 3758096384u, 3758096384u, 536870912u, 3758096384u, 1610612736u}},
    {6, {2684354560u, 536870912u, 3758096384u, 2684354560u, 2684354560u, 3758096384u, 536870912u, 536870912u, 536870912u, 1610612736u, 536870912u, 2684354560u, 536870912u, 3758096384u, 2684354560u, 2684354560u}},
    {7, {536870912u, 2684354560u, 1610612736u, 536870912u, 536870912u, 1610612736u, 2684354560u, 2684354560u, 2684354560u, 3758096384u, 2684354560u, 536870912u, 2684354560u, 1610612736u, 536870912u, 536870912u}},
    {8, {805306368u, 1342177280u, 4026531840u, 1879048192u, 2415919104u, 1342177280u, 1879048192u, 4026531840u, 4026531840u, 1342177280u, 2952790016u, 268435456u, 4026531840u, 4026531840u, 3489660928u, 4026531840u}},
    {9, {2952790016u, 3489660928u, 1879048192u, 4026531840u, 268435456u, 3489660928u, 4026531840u, 1879048192u, 1879048192u, 3489660928u, 805306368u, 2415919104u, 1879048192u, 1879048192u, 1342177280u, 1879048192u}},
    {10, {4026531840u, 268435456u, 2952790016u, 805306368u, 1342177280u, 2415919104u, 805306368u, 805306368u, 805306368u, 2415919104u, 1879048192u, 3489660928u, 2952790016u, 2952790016u, 268435456u, 2952790016u}},
    {11, {1879048192u, 2415919104u, 805306368u, 2952790016u, 3489660928u, 268435456u, 2952790016u, 2952790016u, 2952790016u, 268435456u, 4026531840u, 1342177280u, 805306368u, 805306368u, 2415919104u, 805306368u}},
    {12, {1342177280u, 805306368u, 1342177280u, 2415919104u, 4026531840u, 1879048192u, 268435456u, 268435456u, 268435456u, 4026531840u, 1342177280u, 1879048192u, 2415919104u, 1342177280u, 2952790016u, 268435456u}},
    {13, {3489660928u, 2952790016u, 3489660928u, 268435456u, 1879048192u, 4026531840u, 2415919104u, 2415919104u, 2415919104u, 1879048192u, 3489660928u, 4026531840u, 268435456u, 3489660928u, 805306368u, 2415919104u}},
    {14, {2415919104u, 1879048192u, 268435456u, 3489660928u, 805306368u, 2952790016u, 1342177280u, 3489660928u, 3489660928u, 805306368u, 2415919104u, 2952790016u, 3489660928u, 268435456u, 1879048192u, 1342177280u}},
    {15, {268435456u, 4026531840u, 2415919104u, 1342177280u, 2952790016u, 805306368u, 3489660928u, 1342177280u, 1342177280u, 2952790016u, 268435456u, 805306368u, 1342177280u, 2415919104u, 4026531840u, 3489660928u}},
    {16, {402653184u, 2013265920u, 2013265920u, 2818572288u, 1207959552u, 4160749568u, 2281701376u, 3623878656u, 2013265920u, 671088640u, 402653184u, 1744830464u, 2818572288u, 2818572288u, 1476395008u, 134217728u}},
    {17, {2550136832u, 4160749568u, 4160749568u, 671088640u, 3355443200u, 2013265920u, 134217728u, 1476395008u, 4160749568u, 2818572288u, 2550136832u, 3892314112u, 671088640u, 671088640u, 3623878656u, 2281701376u}},
    {18, {3623878656u, 939524096u, 939524096u, 3892314112u, 2281701376u, 939524096u, 3355443200u, 402653184u, 3087007744u, 3892314112u, 3623878656u, 2818572288u, 3892314112u, 3892314112u, 2550136832u, 1207959552u}},
    {19, {1476395008u, 3087007744u, 3087007744u, 1744830464u, 134217728u, 3087007744u, 1207959552u, 2550136832u, 939524096u, 1744830464u, 1476395008u, 671088640u, 1744830464u, 1744830464u, 402653184u, 3355443200u}},
    {20, {2013265920u, 402653184u, 3623878656u, 1207959552u, 671088640u, 3623878656u, 3892314112u, 939524096u, 2550136832u, 2281701376u, 4160749568u, 134217728u, 3355443200u, 134217728u, 939524096u, 3892314112u}},
    {21, {4160749568u, 2550136832u, 1476395008u, 3355443200u, 2818572288u, 1476395008u, 1744830464u, 3087007744u, 402653184u, 134217728u, 2013265920u, 2281701376u, 1207959552u, 2281701376u, 3087007744u, 1744830464u}},
    {22, {3087007744u, 1476395008u, 2550136832u, 134217728u, 3892314112u, 402653184u, 2818572288u, 4160749568u, 1476395008u, 1207959552u, 939524096u, 3355443200u, 2281701376u, 1207959552u, 4160749568u, 2818572288u}},
    {23, {939524096u, 3623878656u, 402653184u, 2281701376u, 1744830464u, 2550136832u, 671088640u, 2013265920u, 3623878656u, 3355443200u, 3087007744u, 1207959552u, 134217728u, 3355443200u, 2013265920u, 671088640u}},
    {24, {671088640u, 671088640u, 2281701376u, 3623878656u, 3623878656u, 2818572288u, 4160749568u, 671088640u, 2281701376u, 2013265920u, 2818572288u, 2013265920u, 1476395008u, 1476395008u, 2281701376u, 4160749568u}},
    {25, {2818572288u, 2818572288u, 134217728u, 1476395008u, 1476395008u, 671088640u, 2013265920u, 2818572288u, 134217728u, 4160749568u, 671088640u, 4160749568u, 3623878656u, 3623878656u, 134217728u, 2013265920u}},
    {26, {3892314112u, 1744830464u, 3355443200u, 2550136832u, 402653184u, 1744830464u, 3087007744u, 3892314112u, 1207959552u, 3087007744u, 1744830464u, 3087007744u, 402653184u, 402653184u, 1207959552u, 3087007744u}},
    {27, {1744830464u, 3892314112u, 1207959552u, 402653184u, 2550136832u, 3892314112u, 939524096u, 1744830464u, 3355443200u, 939524096u, 3892314112u, 939524096u, 2550136832u, 2550136832u, 3355443200u, 939524096u}},
    {28, {1207959552u, 1207959552u, 671088640u, 939524096u, 3087007744u, 2281701376u, 2550136832u, 3355443200u, 1744830464u, 3623878656u, 1207959552u, 402653184u, 939524096u, 4160749568u, 3892314112u, 402653184u}},
    {29, {3355443200u, 3355443200u, 2818572288u, 3087007744u, 939524096u, 134217728u, 402653184u, 1207959552u, 3892314112u, 1476395008u, 3355443200u, 2550136832u, 3087007744u, 2013265920u, 1744830464u, 2550136832u}},
    {30, {2281701376u, 134217728u, 1744830464u, 2013265920u, 2013265920u, 1207959552u, 3623878656u, 134217728u, 2818572288u, 402653184u, 2281701376u, 3623878656u, 2013265920u, 3087007744u, 671088640u, 1476395008u}},
    {31, {134217728u, 2281701376u, 3892314112u, 4160749568u, 4160749568u, 3355443200u, 1476395008u, 2281701376u, 671088640u, 2550136832u, 134217728u, 1476395008u, 4160749568u, 939524096u, 2818572288u, 3623878656u}},
    {100, {1778384896u, 1107296256u, 3321888768u, 3120562176u, 3791650816u, 3187671040u, 100663296u, 2046820352u, 2717908992u, 2986344448u, 1979711488u, 2919235584u, 2046820352u, 3657433088u, 1375731712u, 2113929216u}},
    {1000, {943718400u, 415236096u, 2227175424u, 2906652672u, 1203765248u, 3896508416u, 197132288u, 3862953984u, 2151677952u, 297795584u, 364904448u, 1094713344u, 692060160u, 1648361472u, 616562688u, 1589641216u}},
    {4095, {1048576u, 4042260480u, 1435500544u, 3872391168u, 4038066176u, 338690048u, 4077912064u, 1678770176u, 823132160u, 1058013184u, 2446327808u, 1380974592u, 1584398336u, 2232418304u, 2366636032u, 1789919232u}},
    {12345, {2752774144u, 3493593088u, 688652288u, 2262564864u, 3816030208u, 252968960u, 546570240u, 486801408u, 3443785728u, 1845231616u, 319029248u, 2571894784u, 3998482432u, 4045144064u, 148111360u, 2752249856u}},
    {65535, {65536u, 4294901760u, 2421489664u, 3271884800u, 1085997056u, 2344288256u, 2221342720u, 3125346304u, 3844407296u, 703922176u, 739180544u, 308740096u, 4013359104u, 1409875968u, 1977548800u, 2058420224u}},
    {99999, {195198976u, 3616178176u, 2911797248u, 3941433344u, 1191542784u, 3543564288u, 2610855936u, 757497856u, 3510140928u, 1360822272u, 724008960u, 3752689664u, 481329152u, 4133847040u, 1285586944u, 3408756736u}},
};

static void test_sobol_matches_scipy(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scipy_points / sizeof *scipy_points; i++) {
        double u[SWEEP_SOBOL_MAX_DIMS];
        sweep__sobol_point(scipy_points[i].index, SWEEP_SOBOL_MAX_DIMS, u);
        for (size_t d = 0; d < SWEEP_SOBOL_MAX_DIMS; d++)
            if ((uint32_t)(u[d] * 0x1.0p32) != scipy_points[i].x[d])
                fail_msg("point %u, dimension %zu: %u, scipy %u",
                         scipy_points[i].index, d + 1,
                         (uint32_t)(u[d] * 0x1.0p32), scipy_points[i].x[d]);
    }
}

/* Also printed by sobol_reference.py: scipy's centred discrepancy (the
 * squared value) of unscrambled points 0 .. 63 in 4 dimensions, and of
 * SEEDS scrambled sequences' first N points in D dimensions, its mean and
 * standard deviation. */
#define UNSCRAMBLED_CD_64_4 0.0012377966129335505
#define SCIPY_SCRAMBLED_CD_MEAN 0.00011293952659469086
#define SCIPY_SCRAMBLED_CD_SD 9.6038193667714065e-07
enum { SEEDS = 64, N = 256, D = 4 };

/* scipy.stats.qmc.discrepancy(x, method="CD"): Hickernell's centred L2
 * discrepancy, squared, of n points of [0, 1)^d (x row-major). */
static double centred_discrepancy(const double *x, size_t n, size_t d)
{
    double one = 0, two = 0;
    for (size_t i = 0; i < n; i++) {
        double p = 1;
        for (size_t k = 0; k < d; k++) {
            double a = fabs(x[i * d + k] - 0.5);
            p *= 1 + 0.5 * a - 0.5 * a * a;
        }
        one += p;
        for (size_t j = 0; j < n; j++) {
            double q = 1;
            for (size_t k = 0; k < d; k++)
                q *= 1 + 0.5 * fabs(x[i * d + k] - 0.5) +
                     0.5 * fabs(x[j * d + k] - 0.5) -
                     0.5 * fabs(x[i * d + k] - x[j * d + k]);
            two += q;
        }
    }
    return pow(13.0 / 12.0, (double)d) - 2.0 / (double)n * one +
           two / ((double)n * (double)n);
}

/* The first n points of the sequence (scrambled with seed, or not). */
static void first_points(size_t n, size_t d, int scrambled, uint64_t seed,
                         double *x)
{
    for (size_t i = 0; i < n; i++)
        if (scrambled)
            sweep__sobol_scrambled((uint32_t)i, d, seed, x + i * d);
        else
            sweep__sobol_point((uint32_t)i, d, x + i * d);
}

/* Scrambled points are as even as scipy's: the formula reproduces scipy's
 * discrepancy of the unscrambled points, and the mean over SEEDS seeds of
 * the scrambled points' is scipy's within 3 standard errors of the
 * difference (both samples' spread as scipy's). */
static void test_scrambled_discrepancy(void **state)
{
    (void)state;
    static double x[N * D];
    first_points(64, D, 0, 0, x);
    assert_true(fabs(centred_discrepancy(x, 64, D) - UNSCRAMBLED_CD_64_4) <
                1e-12 * UNSCRAMBLED_CD_64_4);
    double sum = 0;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        first_points(N, D, 1, seed, x);
        sum += centred_discrepancy(x, N, D);
    }
    double mean = sum / SEEDS;
    double tolerance = 3 * SCIPY_SCRAMBLED_CD_SD * sqrt(2.0 / SEEDS);
    if (fabs(mean - SCIPY_SCRAMBLED_CD_MEAN) > tolerance)
        fail_msg("mean discrepancy %.6g, scipy's %.6g (tolerance %.3g)", mean,
                 SCIPY_SCRAMBLED_CD_MEAN, tolerance);
}

/* Whether the first 2^k points put one in each interval of width 2^-k of
 * dimension d, and, over dimensions 0 and 1 (a (0, m, 2)-net), one in each
 * box 2^-a by 2^-(k-a). */
static void assert_net(const double *x, size_t k, size_t dims)
{
    size_t n = (size_t)1 << k;
    for (size_t a = 0; a <= k; a++) {
        unsigned char seen[1 << 10] = {0};
        for (size_t i = 0; i < n; i++) {
            size_t box = (size_t)(x[i * dims] * (double)(1 << a)) << (k - a) |
                         (size_t)(x[i * dims + 1] * (double)(1 << (k - a)));
            if (seen[box]++)
                fail_msg("2^%zu points: two in box %zu (a = %zu)", k, box, a);
        }
    }
    for (size_t d = 2; d < dims; d++) {
        unsigned char seen[1 << 10] = {0};
        for (size_t i = 0; i < n; i++)
            if (seen[(size_t)(x[i * dims + d] * (double)n)]++)
                fail_msg("2^%zu points: two in one interval of dimension %zu",
                         k, d + 1);
    }
}

/* Scrambled points keep the nets of the first 2^k points, are a pure
 * function of (seed, index), differ between seeds, scramble the digits
 * (not only shift them), and point 0 is never the corner (no coordinate
 * 0) over a thousand seeds. */
static void test_scrambled_points(void **state)
{
    (void)state;
    enum { DIMS = SWEEP_SOBOL_MAX_DIMS, K = 10 };
    static double x[(1 << K) * DIMS], again[DIMS], other[DIMS];
    static const uint64_t seeds[] = {0, 1, 1234567, 7};   /* 7 last */
    for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++) {
        first_points((size_t)1 << K, DIMS, 1, seeds[s], x);
        for (size_t k = 0; k <= K; k++)
            assert_net(x, k, DIMS);
    }
    sweep__sobol_scrambled(1000, DIMS, 7, again);
    assert_memory_equal(x + 1000 * DIMS, again, sizeof again);
    sweep__sobol_scrambled(1000, DIMS, 8, other);
    for (size_t d = 0; d < DIMS; d++)
        assert_true(other[d] != again[d]);
    /* more than a digital shift: point 1 xor point 0 is L (1/2), 1/2 and
     * random later digits, no longer the unscrambled point 1's 1/2 */
    for (size_t d = 0; d < DIMS; d++) {
        uint32_t gap = (uint32_t)(x[DIMS + d] * 0x1.0p32) ^
                       (uint32_t)(x[d] * 0x1.0p32);
        assert_true(gap >> 31 == 1 && gap != 1u << 31);
    }
    for (uint64_t seed = 0; seed < 1000; seed++) {
        sweep__sobol_scrambled(0, DIMS, seed, other);
        for (size_t d = 0; d < DIMS; d++)
            assert_true(other[d] > 0);
    }
}

/* The jobs of yaml, in expansion order: canonical configs, sources and
 * the stage and cell whose selected values each takes. */
typedef struct jobs {
    size_t n;
    json_t *cfg[64];
    char from_stage[64][16];   /* "" for none */
    size_t source[64], trial_group[64], from_group[64];
} jobs;

static int collect(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)err;
    jobs *j = ctx;
    assert_true(j->n < 64);
    snprintf(j->from_stage[j->n], sizeof j->from_stage[j->n], "%s",
             job->from_stage ? job->from_stage : "");
    j->source[j->n] = job->source;
    j->trial_group[j->n] = job->trial_group;
    j->from_group[j->n] = job->from_group;
    j->cfg[j->n++] = json_loads(job->config_json, 0, NULL);
    return 0;
}

static void expand(const char *yaml, jobs *out)
{
    bf_error err = {0};
    bf_sweep *sw = bf_sweep_parse("sweep.yaml", "/sweeps", yaml, strlen(yaml),
                                  &err);
    if (!sw)
        fail_msg("parse: %s", err.msg);
    memset(out, 0, sizeof *out);
    if (bf_sweep_expand(sw, collect, out, &err) < 0)
        fail_msg("expand: %s", err.msg);
    bf_sweep_free(sw);
}

static void jobs_free(jobs *j)
{
    for (size_t i = 0; i < j->n; i++)
        json_decref(j->cfg[i]);
}

static int count_job(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)job;
    (void)err;
    (*(size_t *)ctx)++;
    return 0;
}

static double real_of(const json_t *cfg, const char *field)
{
    return json_number_value(json_object_get(cfg, field));
}

static const char sobol_search[] =
    "name: tune\n"
    "base: {steps: 400}\n"
    "grid:\n"
    "  rope: [rope, spectral]\n"
    "search:\n"
    "  method: sobol\n"
    "  trials: 4\n"
    "  space:\n"
    "    lr: {loguniform: [1.0e-4, 1.0e-2]}\n"
    "    warmup_steps: {choice: [50, 100, 200]}\n"
    "    rope_base: {uniform: [1000, 20000]}\n";

/* Every cell of the grid gets the trials, innermost, with the values of
 * the Sobol' points mapped onto the space. */
static void test_sobol_trials(void **state)
{
    (void)state;
    jobs j;
    expand(sobol_search, &j);
    assert_int_equal(j.n, 8);
    for (size_t i = 0; i < 8; i++) {
        const char *rope = json_string_value(json_object_get(j.cfg[i], "rope"));
        assert_string_equal(rope, i < 4 ? "rope" : "spectral");
        /* trial i % 4 has the same values in both cells */
        assert_true(real_of(j.cfg[i], "lr") == real_of(j.cfg[i % 4], "lr"));
    }
    /* point 0 is the origin: every low bound, the first choice */
    assert_true(fabs(real_of(j.cfg[0], "lr") - 1e-4) < 1e-12);
    assert_int_equal(json_integer_value(json_object_get(j.cfg[0],
                                                        "warmup_steps")), 50);
    /* point 1 is (0.5, 0.5, 0.5): the geometric mean, the middle choice */
    assert_true(fabs(real_of(j.cfg[1], "lr") - 1e-3) < 1e-12);
    assert_int_equal(json_integer_value(json_object_get(j.cfg[1],
                                                        "warmup_steps")), 100);
    assert_true(real_of(j.cfg[1], "rope_base") == 10500);
    /* point 2 is (0.75, 0.25, 0.25) */
    assert_true(fabs(real_of(j.cfg[2], "lr") - pow(10, -2.5)) < 1e-12);
    assert_int_equal(json_integer_value(json_object_get(j.cfg[2],
                                                        "warmup_steps")), 50);
    jobs_free(&j);
}

/* scramble: true places trial t at the scrambled point t of the seed:
 * trial 0's lr is exp of the log-range at its first coordinate, not the
 * low bound. */
static void test_scrambled_trials(void **state)
{
    (void)state;
    static const char scrambled[] =
        "name: tune\nsearch:\n  method: sobol\n  scramble: true\n"
        "  seed: 5\n  trials: 4\n  space:\n"
        "    lr: {loguniform: [1.0e-4, 1.0e-2]}\n";
    jobs j;
    expand(scrambled, &j);
    assert_int_equal(j.n, 4);
    for (size_t t = 0; t < 4; t++) {
        double u;
        sweep__sobol_scrambled((uint32_t)t, 1, 5, &u);
        double lr = exp(log(1e-4) + u * (log(1e-2) - log(1e-4)));
        assert_true(fabs(real_of(j.cfg[t], "lr") - lr) < 1e-9 * lr);
    }
    assert_true(real_of(j.cfg[0], "lr") > 1e-4);
    jobs_free(&j);
}

static const char random_search[] =
    "name: tune\n"
    "base: {steps: 400}\n"
    "search:\n"
    "  method: random\n"
    "  trials: 16\n"
    "  seed: %d\n"
    "  space:\n"
    "    lr: {loguniform: [1.0e-4, 1.0e-2]}\n"
    "    warmup_steps: {uniform: [10, 300]}\n";

/* A random search is a pure function of its seed: the same file gives the
 * same trials, another seed other ones; every draw lies in the space, an
 * integer field's draws are integers. */
static void test_random_trials(void **state)
{
    (void)state;
    char yaml[sizeof random_search + 16];
    jobs a, b, c;
    snprintf(yaml, sizeof yaml, random_search, 7);
    expand(yaml, &a);
    expand(yaml, &b);
    snprintf(yaml, sizeof yaml, random_search, 8);
    expand(yaml, &c);
    assert_int_equal(a.n, 16);
    size_t differ = 0;
    for (size_t i = 0; i < a.n; i++) {
        assert_true(json_equal(a.cfg[i], b.cfg[i]));
        differ += !json_equal(a.cfg[i], c.cfg[i]);
        double lr = real_of(a.cfg[i], "lr");
        assert_true(lr >= 1e-4 && lr <= 1e-2);
        json_t *warmup = json_object_get(a.cfg[i], "warmup_steps");
        assert_true(json_is_integer(warmup));
        assert_true(json_integer_value(warmup) >= 10 &&
                    json_integer_value(warmup) <= 300);
    }
    assert_int_equal(differ, 16);
    jobs_free(&a);
    jobs_free(&b);
    jobs_free(&c);
}

/* A search block in a stage of a staged sweep. */
static void test_search_in_stage(void **state)
{
    (void)state;
    jobs j;
    expand("name: s\n"
           "stages:\n"
           "  - name: tune\n"
           "    grid: {rope: [rope, spectral]}\n"
           "    search:\n"
           "      method: random\n"
           "      trials: 3\n"
           "      space: {lr: {loguniform: [1.0e-4, 1.0e-2]}}\n"
           "    seeds: 2\n"
           "  - name: confirm\n"
           "    seeds: 1\n", &j);
    assert_int_equal(j.n, 2 * 3 * 2 + 1);
    /* seeds innermost: jobs 0 and 1 are trial 0 with seeds 1 and 2 */
    assert_true(real_of(j.cfg[0], "lr") == real_of(j.cfg[1], "lr"));
    assert_true(real_of(j.cfg[0], "lr") != real_of(j.cfg[2], "lr"));
    jobs_free(&j);
}

/* Surgical integration at the tuned values: a stage that starts from
 * geometric's checkpoints (init_from) and takes tune's selected values
 * (from:).  Each job has its source (geometric, same seed) and the tune
 * cell of its own rope, whatever the order of its grid. */
static void test_from_beside_init_from(void **state)
{
    (void)state;
    static const char yaml[] =
        "name: x\nbase: {depth: 4, eval_depths: [4]}\nstages:\n"
        "  - name: tune\n    grid: {rope: [rope, spectral]}\n"
        "    search: {method: random, trials: 2,"
        " space: {lr: {uniform: [0.001, 0.01]}}}\n"
        "    select: {by: eval_loss, eval_depth: 4}\n"
        "  - name: geometric\n    base: {rope: rope}\n    seeds: 2\n"
        "  - name: surgery\n    from: \"stage:tune\"\n"
        "    base: {init_from: \"stage:geometric\", warmup_steps: 0}\n"
        "    grid: {rope: [spectral, rope]}\n    seeds: 2\n";
    jobs j;
    expand(yaml, &j);
    /* tune 0..3 (rope 0, 1; spectral 2, 3), geometric 4, 5, surgery
     * spectral 6, 7 and rope 8, 9 (seeds 1, 2) */
    assert_int_equal(j.n, 10);
    for (size_t i = 6; i < 10; i++) {
        assert_string_equal(j.from_stage[i], "tune");
        assert_int_equal(j.source[i], 4 + (i % 2));
        size_t tune_job = i < 8 ? 2 : 0;
        assert_string_equal(json_string_value(json_object_get(j.cfg[i],
                            "rope")), json_string_value(json_object_get(
                            j.cfg[tune_job], "rope")));
        assert_int_equal(j.from_group[i], j.trial_group[tune_job]);
    }
    assert_int_not_equal(j.trial_group[0], j.trial_group[2]);
    jobs_free(&j);
}

/* A tune of `trials` trials taken (from:) by a confirm stage of `cells`
 * cells (a grid of warmup_steps), confirm's base d_model d; the sweep
 * expanded once, counting its jobs; the from: validations made, or -1
 * with err when it is refused. */
static long from_checks(int trials, int cells, int d, size_t *n_jobs,
                        bf_error *err)
{
    static char yaml[16384];
    assert_true(cells * 8 + 512 < (int)sizeof yaml);
    int n = sprintf(yaml, "name: x\nbase: {depth: 4, eval_depths: [4]}\n"
                    "stages:\n  - name: tune\n    search:\n"
                    "      method: sobol\n      trials: %d\n      space:\n"
                    "        lr: {uniform: [0.001, 0.01]}\n"
                    "        n_heads: {choice: [4, 8]}\n"
                    "    select: {by: eval_loss, eval_depth: 4}\n"
                    "  - name: confirm\n    from: \"stage:tune\"\n"
                    "    base: {d_model: %d, steps: 4000}\n"
                    "    grid: {warmup_steps: [",
                    trials, d);
    for (int c = 0; c < cells; c++)
        n += sprintf(yaml + n, "%s%d", c ? ", " : "", c);
    strcpy(yaml + n, "]}\n");
    bf_sweep *sw = bf_sweep_parse("sweep.yaml", "/sweeps", yaml, strlen(yaml),
                                  err);
    if (!sw)
        fail_msg("parse: %s", err->msg);
    *n_jobs = 0;
    long checks = bf_sweep_expand(sw, count_job, n_jobs, err) == 0
                  ? (long)sw->from_checks : -1;
    bf_sweep_free(sw);
    return checks;
}

/* Checking a from: stage's cells with the source's trials costs about the
 * jobs, not cells x trials: every trial while the product is within
 * SWEEP_FROM_CHECKS, past it each searched field's lowest and highest
 * value (lr's, n_heads' 4 and 8: at most four trials), not every one of
 * 3,000 trials for each of 700 cells. */
static void test_from_checks_bounded(void **state)
{
    (void)state;
    bf_error err = {0};
    size_t n_jobs = 0;
    assert_int_equal(from_checks(100, 10, 64, &n_jobs, &err), 100 * 10);
    assert_int_equal(n_jobs, 110);
    long checks = from_checks(3000, 700, 64, &n_jobs, &err);
    assert_int_equal(n_jobs, 3700);
    assert_true(checks >= 700 * 2 && checks <= 700 * 4);
    assert_true(3000L * 700 > SWEEP_FROM_CHECKS);
}

/* Past the budget, a corner trial that fails a cell is still found:
 * n_heads 8 does not divide d_model 40. */
static void test_from_corner_refused(void **state)
{
    (void)state;
    bf_error err = {0};
    size_t n_jobs = 0;
    assert_int_equal(from_checks(3000, 700, 40, &n_jobs, &err), -1);
    assert_string_equal(err.field, "d_model");
    if (!strstr(err.msg, "\"n_heads\":8"))
        fail_msg("names no trial of n_heads 8: %s", err.msg);
}

typedef struct bad_case {
    const char *what, *yaml;
    int line;
    const char *field, *needle;
} bad_case;

#define SEARCH(body) "name: x\nsearch:\n  method: random\n  trials: 4\n" body
#define PRUNE_SELECT(rule) "name: x\nbase: {depth: 4, eval_depths: [4, "  \
    "8]}\nsearch:\n  method: random\n  trials: 4\n"                      \
    "  space: {lr: {uniform: [0.001, 0.01]}}\nselect: " rule "\n"
#define PRUNE(rule) "name: x\nbase: {steps: 100, eval_every: 10, "      \
    "eval_depths: [4]}\nsearch:\n  method: random\n  trials: 4\n"      \
    "  space: {lr: {uniform: [0.001, 0.01]}}\nprune: " rule "\n"
#define TUNE_SEEDS(seeds) "name: x\nbase: {depth: 4, eval_depths: [4]}\n" \
    "stages:\n  - name: tune\n    grid: {rope: [rope, spectral]}\n"      \
    "    search: {method: random, trials: 2,"                              \
    " space: {lr: {uniform: [0.001, 0.01]}}}\n"                          \
    "    select: {by: eval_loss, eval_depth: 4}\n" seeds                  \
    "  - name: confirm\n    from: \"stage:tune\"\n"                       \
    "    grid: {rope: [rope, spectral]}\n    seeds: 3\n"
#define TUNE_THEN(sel, later) "name: x\nbase: {depth: 4, eval_depths: "   \
    "[4]}\nstages:\n  - name: tune\n    grid: {rope: [rope, spectral]}\n" \
    "    search:\n      method: random\n      trials: 4\n"               \
    "      space: {lr: {uniform: [0.001, 0.01]}}\n    select: " sel "\n"  \
    "  - name: confirm\n" later
#define SEL1 "{by: eval_loss, eval_depth: 4}"
static const bad_case bad_cases[] = {
    {"unknown method", "name: x\nsearch:\n  method: grid\n  trials: 4\n"
     "  space: {lr: {uniform: [0.1, 0.2]}}\n", 3, "method", "random or sobol"},
    {"zero trials", "name: x\nsearch:\n  method: sobol\n  trials: 0\n"
     "  space: {lr: {uniform: [0.1, 0.2]}}\n", 4, "trials", "[1, 100000]"},
    {"unknown search key", SEARCH("  space: {lr: {uniform: [0.1, 0.2]}}\n"
     "  pruner: asha\n"), 6, "pruner", "unknown search key"},
    {"no space", SEARCH(""), 2, "space", "search.space must map"},
    {"unknown distribution", SEARCH("  space:\n    lr: {normal: [0, 1]}\n"),
     6, "lr", "one of {uniform"},
    {"range of one number", SEARCH("  space:\n    lr: {uniform: [0.1]}\n"),
     6, "lr", "two numbers"},
    {"empty range", SEARCH("  space:\n    lr: {uniform: [0.2, 0.1]}\n"),
     6, "lr", "is empty"},
    {"loguniform from 0", SEARCH("  space:\n    lr: {loguniform: [0, 0.1]}\n"),
     6, "lr", "above 0"},
    {"bound out of the field's range",
     SEARCH("  space:\n    lr: {loguniform: [1.0e-4, 20]}\n"), 6, "lr",
     "search.space.lr: the high bound: 20 is out of range"},
    /* float32 would make it 0: refused by the job config's rule */
    {"loguniform from a denormal",
     SEARCH("  space:\n    lr: {loguniform: [4.9e-324, 1.0e-2]}\n"), 6, "lr",
     "search.space.lr: the low bound: 5e-324 is not a normal float32"},
    {"uniform to a float32 subnormal",
     SEARCH("  space:\n    weight_decay: {uniform: [0, 1.0e-39]}\n"), 6,
     "weight_decay", "the high bound: 1e-39 is not a normal float32"},
    {"bad choice", SEARCH("  space:\n    rope: {choice: [rope, nope]}\n"),
     6, "rope", "choice[1]"},
    {"not a job field", SEARCH("  space:\n    lrr: {uniform: [0.1, 0.2]}\n"),
     6, "lrr", "lrr"},
    {"searched and swept", "name: x\ngrid: {lr: [0.1]}\n"
     "search:\n  method: random\n  trials: 4\n"
     "  space:\n    lr: {uniform: [0.1, 0.2]}\n", 7, "lr", "swept twice"},
    {"duplicate trials", SEARCH("  space:\n    rope: {choice: [rope]}\n"),
     6, "rope", "duplicate"},
    {"exclude a searched field", SEARCH("  space:\n"
     "    lr: {uniform: [0.1, 0.2]}\nexclude:\n  - {lr: 0.1}\n"), 8, "lr",
     "is searched"},
    /* prune: the rule on its own, then against every job */
    {"scramble with random", SEARCH("  scramble: true\n"
     "  space: {lr: {uniform: [0.1, 0.2]}}\n"), 5, "scramble",
     "applies to method sobol"},
    {"scramble not a boolean", "name: x\nsearch:\n  method: sobol\n"
     "  scramble: 1\n  trials: 4\n  space: {lr: {uniform: [0.1, 0.2]}}\n",
     4, "scramble", "true or false"},
    {"prune without search", "name: x\nprune: {method: asha}\n", 2,
     "prune", "has no search"},
    {"unknown prune method", PRUNE("{method: hyperband, metric: eval_loss, "
     "eval_depth: 4, rungs: [20]}"), 7, "method", "asha or median"},
    {"unknown metric", PRUNE("{method: asha, metric: accuracy, eval_depth: 4, "
     "rungs: [20]}"), 7, "metric", "'accuracy' is not a metric"},
    {"unknown prune key", PRUNE("{method: asha, metric: eval_loss, "
     "eval_depth: 4, rungs: [20], patience: 2}"), 7, "patience",
     "unknown prune key"},
    {"eta with median", PRUNE("{method: median, metric: eval_loss, "
     "eval_depth: 4, rungs: [20], eta: 3}"), 7, "eta", "no effect"},
    {"synchronous median", PRUNE("{method: median, metric: eval_loss, "
     "eval_depth: 4, rungs: [20], synchronous: true}"), 7, "synchronous",
     "applies to method asha"},
    {"eta below 2", PRUNE("{method: asha, metric: eval_loss, eval_depth: 4, "
     "rungs: [20], eta: 1}"), 7, "eta", "[2, 1000]"},
    {"rungs not rising", PRUNE("{method: asha, metric: eval_loss, "
     "eval_depth: 4, rungs: [40, 20]}"), 7, "rungs", "rungs[1]"},
    {"rung beyond steps", PRUNE("{method: asha, metric: eval_loss, "
     "eval_depth: 4, rungs: [20, 100]}"), 7, "rungs",
     "prune.rungs[1] = 100 is not before the last step of job 1"},
    {"rung off the eval steps", PRUNE("{method: asha, metric: eval_loss, "
     "eval_depth: 4, rungs: [25]}"), 7, "rungs", "eval_every 10"},
    {"eval_depth not evaluated", PRUNE("{method: asha, metric: eval_loss, "
     "eval_depth: 8, rungs: [20]}"), 7, "eval_depth",
     "not among the eval_depths"},
    /* select */
    {"select without search", "name: x\nselect: {by: eval_loss}\n", 2,
     "select", "has no search"},
    {"select by an unknown metric", PRUNE_SELECT("{by: accuracy, "
     "eval_depth: 4}"), 7, "by", "'accuracy' is not a metric"},
    {"select deeper than training", PRUNE_SELECT("{by: eval_loss, "
     "eval_depth: 8}"), 7, "eval_depth", "deeper than the training depth 4"},
    {"select more than the trials", PRUNE_SELECT("{by: eval_loss, "
     "eval_depth: 4, best: 5}"), 7, "best", "[1, 4]"},
    /* from: a later stage taking a selection's values */
    {"from an unknown stage", TUNE_THEN(SEL1, "    from: \"stage:tuned\"\n"),
     12, "from", "no earlier stage has that name"},
    {"from without stage:", TUNE_THEN(SEL1, "    from: tune\n"), 12, "from",
     "must be \"stage:NAME\""},
    {"from a stage without select", "name: x\nstages:\n  - name: a\n"
     "  - name: b\n    from: \"stage:a\"\n", 5, "from", "has no select:"},
    {"from with best 2", TUNE_THEN("{by: eval_loss, eval_depth: 4, best: 2}",
     "    from: \"stage:tune\"\n"), 10, "best", "(best: 1)"},
    {"from and the stage's grid", TUNE_THEN(SEL1, "    from: \"stage:tune\"\n"
     "    grid: {lr: [0.1, 0.2]}\n"), 13, "lr", "set it in one place"},
    {"from and the stage's base", TUNE_THEN(SEL1, "    from: \"stage:tune\"\n"
     "    base: {lr: 0.1}\n"), 13, "lr", "set it in one place"},
    {"from a cell that is not there", TUNE_THEN(SEL1, "    from: "
     "\"stage:tune\"\n    grid: {rope: [rope, bifocal]}\n"), 12, "from",
     "job 10 (stage confirm: rope=bifocal) finds no cell of stage tune to "
     "take values from: no cell there has rope=bifocal"},
    {"from and init_from, lr set", TUNE_THEN(SEL1, "    from: \"stage:tune\"\n"
     "    base: {init_from: \"stage:tune\", rope: rope, lr: 0.1}\n"), 13,
     "lr", "set it in one place"},
    {"from values that fail a job", "name: x\nstages:\n  - name: tune\n"
     "    search:\n      method: sobol\n      trials: 2\n"
     "      space: {n_heads: {choice: [4, 8]}}\n"
     "    select: {by: eval_loss, eval_depth: 4}\n  - name: confirm\n"
     "    from: \"stage:tune\"\n    base: {d_model: 40}\n", 10, "d_model",
     "job 3 (stage confirm: the base config) with the values of trial 1 of "
     "stage tune ({\"n_heads\":8}), which its selection may choose"},
    {"search beside stages", "name: x\nsearch: {method: random}\n"
     "stages:\n  - name: a\n", 2, "search", "in each stage"},
    /* free-form parameters: errors name params.NAME at its line */
    {"a parameter's bad name", "name: x\nbase: {trainer: t}\ngrid:\n"
     "  params.Width: [1, 2]\n", 4, "params.Width", "not a job-config field"},
    {"a parameter given a list", "name: x\nbase: {trainer: t}\ngrid:\n"
     "  params.w:\n    - 1\n    - [2]\n", 6, "params.w",
     "expected a finite number"},
    {"a parameter for builtin", "name: x\ngrid:\n  params.w: [1, 2]\n", 3,
     "params.w", "trainer builtin reads no free-form parameters"},
    /* a source stage's own seeds may not be its taker's */
    {"tune on confirm's seeds", TUNE_SEEDS("    seeds: [7, 2]\n"), 8,
     "seeds", "stage tune's seed 2 is also a seed of stage confirm, which "
     "takes its selected trials (from: at line 10)"},
    {"tune's base seed on confirm's", TUNE_SEEDS("    base: {seed: 3}\n"), 8,
     "seeds", "give tune seeds past 3, or none (it then takes 4)"},
    {"a parameter's search bound", "name: x\nbase: {trainer: t}\nsearch:\n"
     "  method: random\n  trials: 2\n  space:\n"
     "    params.w: {uniform: [1, 1.0e300]}\n", 7, "params.w", "out of range"},
};

static const json_t *param_of(const json_t *cfg, const char *name)
{
    return json_object_get(json_object_get(cfg, "params"), name);
}

/* A trainer's own parameters sweep as builtin fields do: `params:` in a
 * base, params.NAME in grid, zip, exclude and search (integer bounds give
 * integer draws), and a from: stage takes the selected trial's values. */
static void test_params_fields(void **state)
{
    (void)state;
    static const char yaml[] =
        "name: p\nbase: {trainer: fake, depth: 4, eval_depths: [4],"
        " params: {act: gelu}}\nstages:\n"
        "  - name: tune\n    grid: {params.width: [64, 128]}\n"
        "    zip: {params.drop: [0.0, 0.5], lr: [0.001, 0.002]}\n"
        "    exclude: [{params.width: 128, params.drop: 0.5}]\n"
        "    search: {method: sobol, trials: 2, space:"
        " {params.beta: {uniform: [0.1, 0.9]}, params.k: {uniform: [1, 8]}}}\n"
        "    select: {by: eval_loss, eval_depth: 4}\n"
        "  - name: confirm\n    from: \"stage:tune\"\n"
        "    base: {steps: 1000}\n"
        "    grid: {params.width: [64, 128]}\n"
        "    zip: {params.drop: [0.0, 0.5], lr: [0.001, 0.002]}\n"
        "    exclude: [{params.width: 128, params.drop: 0.5}]\n";
    jobs j;
    expand(yaml, &j);
    /* tune: 3 cells (64/0.0, 64/0.5, 128/0.0) x 2 trials; confirm: 3 */
    assert_int_equal(j.n, 9);
    for (size_t i = 0; i < j.n; i++) {
        const json_t *c = j.cfg[i];
        assert_string_equal(json_string_value(param_of(c, "act")), "gelu");
        assert_true(json_is_integer(param_of(c, "width")));
        if (i >= 6)
            continue;   /* confirm's trial values come with the selection */
        assert_true(json_is_integer(param_of(c, "k")));
        double beta = json_real_value(param_of(c, "beta"));
        assert_true(beta >= 0.1 && beta <= 0.9);
    }
    int width[] = {64, 64, 64, 64, 128, 128};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(json_integer_value(param_of(j.cfg[i], "width")),
                         width[i]);
        assert_true(json_equal(param_of(j.cfg[i], "beta"),
                               param_of(j.cfg[i % 2], "beta")));
    }
    /* 0.0 is the integer 0 (one spelling), 0.5 a real */
    assert_true(json_is_integer(param_of(j.cfg[0], "drop")));
    assert_true(json_real_value(param_of(j.cfg[2], "drop")) == 0.5);
    for (size_t i = 6; i < 9; i++) {
        assert_string_equal(j.from_stage[i], "tune");
        assert_int_equal(json_integer_value(json_object_get(j.cfg[i],
                                                            "steps")), 1000);
        assert_int_equal(j.from_group[i], j.trial_group[2 * (i - 6)]);
    }
    jobs_free(&j);
}

static uint64_t seed_of(const json_t *cfg)
{
    return (uint64_t)json_integer_value(json_object_get(cfg, "seed"));
}

/* A stage whose selection a later stage takes (from:) never shares a
 * seed with it: given none, its trials take one past every taker's
 * seeds, and in a chain each source lies past its takers. */
static void test_from_seeds_apart(void **state)
{
    (void)state;
    jobs j;
    expand(TUNE_SEEDS(""), &j);
    /* tune: 2 cells x 2 trials; confirm: 2 cells x seeds 1..3 */
    assert_int_equal(j.n, 4 + 6);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(seed_of(j.cfg[i]), 4);
    for (size_t i = 4; i < 10; i++)
        assert_true(seed_of(j.cfg[i]) >= 1 && seed_of(j.cfg[i]) <= 3);
    jobs_free(&j);

    static const char chain[] =
        "name: c\nbase: {depth: 4, eval_depths: [4]}\nstages:\n"
        "  - name: a\n    search: {method: random, trials: 2,"
        " space: {lr: {uniform: [0.001, 0.01]}}}\n"
        "    select: {by: eval_loss, eval_depth: 4}\n"
        "  - name: b\n    from: \"stage:a\"\n"
        "    search: {method: random, trials: 2,"
        " space: {weight_decay: {uniform: [0.0, 0.1]}}}\n"
        "    select: {by: eval_loss, eval_depth: 4}\n"
        "  - name: c\n    from: \"stage:b\"\n    seeds: [1, 2]\n";
    expand(chain, &j);
    assert_int_equal(j.n, 2 + 2 + 2);
    assert_int_equal(seed_of(j.cfg[0]), 4);     /* a: past b */
    assert_int_equal(seed_of(j.cfg[2]), 3);     /* b: past c */
    assert_int_equal(seed_of(j.cfg[4]), 1);
    jobs_free(&j);
}

static void test_rejections(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const bad_case *c = &bad_cases[i];
        bf_error err = {0};
        bf_sweep *sw = bf_sweep_parse("sweep.yaml", "/sweeps", c->yaml,
                                      strlen(c->yaml), &err);
        int rc = -1;
        if (sw) {
            jobs j = {0};
            rc = bf_sweep_expand(sw, collect, &j, &err);
            jobs_free(&j);
            bf_sweep_free(sw);
        }
        if (rc == 0)
            fail_msg("%s: accepted", c->what);
        print_message("%-32s -> %s\n", c->what, err.msg);
        assert_int_equal(err.line, c->line);
        assert_string_equal(err.field, c->field);
        if (!strstr(err.msg, c->needle))
            fail_msg("%s: message lacks '%s': %s", c->what, c->needle, err.msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sobol_matches_scipy),
        cmocka_unit_test(test_scrambled_points),
        cmocka_unit_test(test_scrambled_discrepancy),
        cmocka_unit_test(test_sobol_trials),
        cmocka_unit_test(test_scrambled_trials),
        cmocka_unit_test(test_random_trials),
        cmocka_unit_test(test_search_in_stage),
        cmocka_unit_test(test_from_beside_init_from),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_params_fields),
        cmocka_unit_test(test_from_seeds_apart),
        cmocka_unit_test(test_from_checks_bounded),
        cmocka_unit_test(test_from_corner_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
