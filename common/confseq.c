/* confseq: Lai's t-mixture and the sign test's Beta mixture as confidence
 * sequences, and the adaptive-seed rule on either; the derivations and
 * their references are in confseq.h and docs/results.md. */
#include "confseq.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis.h"

typedef void interval_fn(const double *x, int n, double alpha, double *low,
                         double *high);

/* The rules by bf_confseq_rule: the name and the sequence of each. */
static const struct {
    const char *name;
    interval_fn *interval;
} rules[BF_CONFSEQ_N_RULES] = {
    [BF_CONFSEQ_RULE_T] = {"t", bf_confseq_interval},
    [BF_CONFSEQ_RULE_SIGN] = {"sign", bf_confseq_sign_interval},
};

const char *bf_confseq_rule_name(bf_confseq_rule rule)
{
    return (unsigned)rule < BF_CONFSEQ_N_RULES ? rules[rule].name : "?";
}

int bf_confseq_rule_parse(const char *name)
{
    if (!name)
        return BF_CONFSEQ_RULE_T;
    for (int i = 0; i < BF_CONFSEQ_N_RULES; i++)
        if (strcmp(name, rules[i].name) == 0)
            return i;
    return -1;
}

void bf_confseq_interval(const double *x, int n, double alpha,
                         double *low, double *high)
{
    assert(n >= 0 && alpha > 0 && alpha < 1);
    *low = -INFINITY;
    *high = INFINITY;
    if (n < 2)
        return;
    /* Welford: the sum of squares about the mean without cancellation. */
    double mean = 0, q = 0;
    for (int i = 0; i < n; i++) {
        double delta = x[i] - mean;
        mean += delta / (i + 1);
        q += delta * (x[i] - mean);
    }
    if (!(q > 0) || !isfinite(q))
        return;
    double c2 = BF_CONFSEQ_C2;
    /* K^(n/2) = sqrt((n + c2) / c2) / alpha, computed on the log scale. */
    double log_k = (2.0 / n) * (0.5 * log((n + c2) / c2) - log(alpha));
    double k = exp(log_k);
    double a = n * (1 - k * c2 / (n + c2));
    if (!(a > 0))
        return;
    double half = sqrt(expm1(log_k) * q / a);
    *low = mean - half;
    *high = mean + half;
}

/* log M_n of the sign rule with s of the n indicators set. */
static double log_sign_mixture(int s, int n)
{
    double a = BF_CONFSEQ_SIGN_A;
    return n * log(2.0) + lgamma(a + s) + lgamma(a + n - s) - lgamma(2 * a + n)
           - (2 * lgamma(a) - lgamma(2 * a));
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bf_confseq_sign_interval(const double *x, int n, double alpha,
                              double *low, double *high)
{
    assert(n >= 0 && alpha > 0 && alpha < 1);
    double bar = -log(alpha);
    /* M_n is smallest at s = n / 2 (at most 1 there) and convex in s. */
    int lo = n / 2, hi = n / 2;
    while (lo > 0 && log_sign_mixture(lo - 1, n) < bar)
        lo--;
    while (hi < n && log_sign_mixture(hi + 1, n) < bar)
        hi++;
    *low = -INFINITY;
    *high = INFINITY;
    if (lo == 0 && hi == n)
        return;
    double *sorted = bf_xmalloc((size_t)n * sizeof *sorted);
    memcpy(sorted, x, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_value);
    if (lo > 0)
        *low = sorted[lo - 1];      /* x_(lo), 1-based */
    if (hi < n)
        *high = sorted[hi];         /* x_(hi + 1) */
    free(sorted);
}

double bf_confseq_skewness(const double *x, int n)
{
    if (n < 3)
        return NAN;
    double mean = 0, m2 = 0, m3 = 0;
    for (int i = 0; i < n; i++)
        mean += x[i] / n;
    for (int i = 0; i < n; i++) {
        double d = x[i] - mean;
        m2 += d * d / n;
        m3 += d * d * d / n;
    }
    if (!(m2 > 0))
        return NAN;
    return m3 / pow(m2, 1.5) * sqrt((double)n * (n - 1)) / (n - 2);
}

double bf_confseq_skewness_se(int n)
{
    assert(n >= 3);
    return sqrt(6.0 * n * (n - 1) / ((n - 2.0) * (n + 1.0) * (n + 3.0)));
}

const char *bf_confseq_state_name(bf_confseq_state s)
{
    switch (s) {
    case BF_CONFSEQ_RUNNING: return "running";
    case BF_CONFSEQ_LOWER: return "lower";
    case BF_CONFSEQ_HIGHER: return "higher";
    case BF_CONFSEQ_EQUIVALENT: return "equivalent";
    case BF_CONFSEQ_UNDECIDED: return "undecided";
    }
    return "?";
}

bf_confseq_state bf_confseq_decide(bf_confseq_rule rule, const double *x,
                                   int n, int min, int max, double margin,
                                   double alpha, double *low, double *high)
{
    assert(min >= 1 && min <= max && margin > 0 && margin < 1);
    assert((unsigned)rule < BF_CONFSEQ_N_RULES);
    rules[rule].interval(x, n, alpha, low, high);
    if (n < min)
        return BF_CONFSEQ_RUNNING;
    if (*high < 0)
        return BF_CONFSEQ_LOWER;
    if (*low > 0)
        return BF_CONFSEQ_HIGHER;
    double bound = bf_analysis_log_margin(margin);
    if (*low > -bound && *high < bound)
        return BF_CONFSEQ_EQUIVALENT;
    return n >= max ? BF_CONFSEQ_UNDECIDED : BF_CONFSEQ_RUNNING;
}
