/* confseq: Lai's t-mixture confidence sequence and the adaptive-seed rule;
 * the derivation and its references are in confseq.h and docs/results.md. */
#include "confseq.h"

#include <assert.h>
#include <math.h>

#include "analysis.h"

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

bf_confseq_state bf_confseq_decide(const double *x, int n, int min, int max,
                                   double margin, double alpha,
                                   double *low, double *high)
{
    assert(min >= 1 && min <= max && margin > 0 && margin < 1);
    bf_confseq_interval(x, n, alpha, low, high);
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
