/* stats: seed statistics.  The t quantile inverts Student's t CDF, written
 * with the regularized incomplete beta function (continued fraction, as in
 * Numerical Recipes' betacf), because Welch's test needs fractional degrees
 * of freedom that a table of whole ones cannot give. */
#include "stats.h"

#include <math.h>

/* Continued fraction of I_x(a, b) (modified Lentz), valid for
 * x < (a + 1) / (a + b + 2). */
static double beta_continued_fraction(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / (fabs(d) < tiny ? tiny : d);
    double h = d;
    for (int m = 1; m <= 300; m++) {
        for (int odd = 0; odd < 2; odd++) {
            double num = odd
                ? -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
                : m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
            d = 1.0 + num * d;
            d = 1.0 / (fabs(d) < tiny ? tiny : d);
            c = 1.0 + num / c;
            if (fabs(c) < tiny)
                c = tiny;
            h *= d * c;
            if (odd && fabs(d * c - 1.0) < 1e-15)
                return h;
        }
    }
    return h;
}

/* The regularized incomplete beta function I_x(a, b). */
static double incomplete_beta(double a, double b, double x)
{
    if (x <= 0.0)
        return 0.0;
    if (x >= 1.0)
        return 1.0;
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b)
                       + a * log(x) + b * log1p(-x));
    if (x < (a + 1.0) / (a + b + 2.0))
        return front * beta_continued_fraction(a, b, x) / a;
    return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

/* P(T <= t) for Student's t with df degrees of freedom. */
static double t_cdf(double t, double df)
{
    double tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    return t >= 0 ? 1.0 - tail : tail;
}

double bf_stats_t_quantile(double q, double df)
{
    if (!(q > 0.0 && q < 1.0 && df > 0.0))
        return NAN;
    if (q < 0.5)
        return -bf_stats_t_quantile(1.0 - q, df);
    /* t_cdf is increasing: bisect.  1e7 bounds every quantile used here
     * (q = 0.975 at df = 0.1 is about 5e5). */
    double lo = 0.0, hi = 1e7;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * (1.0 + lo); i++) {
        double mid = 0.5 * (lo + hi);
        if (t_cdf(mid, df) < q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* The t of a 95% two-sided interval.  Whole degrees of freedom repeat
 * (one per bucket of every curve), so those are remembered. */
static double two_sided_t(double df)
{
    static double known[1024];
    int whole = df == floor(df) && df >= 1 && df < 1024;
    if (whole && known[(int)df] > 0)
        return known[(int)df];
    double t = bf_stats_t_quantile(0.5 + BF_STATS_LEVEL / 2.0, df);
    if (whole)
        known[(int)df] = t;
    return t;
}

void bf_stats_summarize(const double *x, int n, bf_stats_summary *out)
{
    double sum = 0.0, ss = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    double mean = n > 0 ? sum / n : NAN;
    for (int i = 0; i < n; i++)
        ss += (x[i] - mean) * (x[i] - mean);
    *out = (bf_stats_summary){ .n = n, .mean = mean, .sd = NAN,
                               .ci_low = NAN, .ci_high = NAN };
    if (n < 2)
        return;
    out->sd = sqrt(ss / (n - 1));
    double half = two_sided_t(n - 1) * out->sd / sqrt(n);
    out->ci_low = mean - half;
    out->ci_high = mean + half;
}

void bf_stats_paired(const double *a, const double *b, int n,
                     bf_stats_diff *out)
{
    double d[n > 0 ? n : 1];
    for (int i = 0; i < n; i++)
        d[i] = a[i] - b[i];
    bf_stats_summary s;
    bf_stats_summarize(d, n, &s);
    *out = (bf_stats_diff){ .diff = s.mean, .ci_low = s.ci_low,
                            .ci_high = s.ci_high, .df = n - 1, .paired = 1 };
}

void bf_stats_welch(const double *a, int na, const double *b, int nb,
                    bf_stats_diff *out)
{
    bf_stats_summary sa, sb;
    bf_stats_summarize(a, na, &sa);
    bf_stats_summarize(b, nb, &sb);
    *out = (bf_stats_diff){ .diff = sa.mean - sb.mean, .ci_low = NAN,
                            .ci_high = NAN, .df = NAN, .paired = 0 };
    if (na < 2 || nb < 2)
        return;
    double va = sa.sd * sa.sd / na, vb = sb.sd * sb.sd / nb;
    double se = sqrt(va + vb);
    if (se == 0.0) {        /* no spread at all: the difference is exact */
        out->ci_low = out->ci_high = out->diff;
        out->df = na + nb - 2;
        return;
    }
    out->df = (va + vb) * (va + vb)
              / (va * va / (na - 1) + vb * vb / (nb - 1));
    double half = two_sided_t(out->df) * se;
    out->ci_low = out->diff - half;
    out->ci_high = out->diff + half;
}
