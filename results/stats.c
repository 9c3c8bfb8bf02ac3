/* stats: seed statistics.  The t quantile inverts Student's t CDF, written
 * with the regularized incomplete beta function (continued fraction, as in
 * Numerical Recipes' betacf), because Welch's test needs fractional degrees
 * of freedom that a table of whole ones cannot give. */
#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"

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

void bf_stats_running_add(bf_stats_running *r, double x)
{
    /* Welford: no cancellation when the values sit far from zero */
    r->n++;
    double d = x - r->mean;
    r->mean += d / r->n;
    r->m2 += d * (x - r->mean);
}

void bf_stats_running_summary(const bf_stats_running *r, bf_stats_summary *out)
{
    int n = (int)r->n;
    *out = (bf_stats_summary){ .n = n, .mean = n > 0 ? r->mean : NAN,
                               .sd = NAN, .ci_low = NAN, .ci_high = NAN };
    if (n < 2)
        return;
    out->sd = sqrt(r->m2 / (n - 1));
    double half = two_sided_t(n - 1) * out->sd / sqrt(n);
    out->ci_low = out->mean - half;
    out->ci_high = out->mean + half;
}

void bf_stats_summarize(const double *x, int n, bf_stats_summary *out)
{
    bf_stats_running r = { 0 };
    for (int i = 0; i < n; i++)
        bf_stats_running_add(&r, x[i]);
    bf_stats_running_summary(&r, out);
}

/* ---- comparisons -------------------------------------------------------- */

double bf_stats_t_p(double t, double df)
{
    if (!isfinite(t) || !(df > 0))
        return NAN;
    return 2.0 * t_cdf(-fabs(t), df);
}

/* The q-quantile of the standard normal, 0 < q < 1. */
static double z_quantile(double q)
{
    if (!(q > 0.0 && q < 1.0))
        return NAN;
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 200 && hi - lo > 1e-13; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / M_SQRT2) < q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Mean and sample variance of n values (variance NAN below 2). */
static void mean_var(const double *x, int n, double *mean, double *var)
{
    bf_stats_summary s;
    bf_stats_summarize(x, n, &s);
    *mean = s.mean;
    *var = s.sd * s.sd;
}

/* Fills the log-scale interval and p of `out` from log_mean, log_se and df,
 * or says why not.  The t-interval needs 3 values (2 estimate a variance
 * from one degree of freedom, whose interval spans orders of magnitude)
 * and some spread (with none, every seed agrees and the t is infinite). */
static void log_interval(bf_stats_ratio *out, int n_values, const char *what)
{
    out->ratio = exp(out->log_mean);
    out->ci_low = out->ci_high = out->p = NAN;
    if (n_values < 3) {
        snprintf(out->note, sizeof out->note,
                 "seed variance not estimable from %d %s", n_values, what);
        return;
    }
    if (!(out->log_se > 0)) {
        snprintf(out->note, sizeof out->note,
                 "no spread between the %d %s: seed variance not estimable",
                 n_values, what);
        return;
    }
    double half = two_sided_t(out->df) * out->log_se;
    out->ci_low = exp(out->log_mean - half);
    out->ci_high = exp(out->log_mean + half);
    out->p = bf_stats_t_p(out->log_mean / out->log_se, out->df);
}

/* Welch's t on the logs la (na of them) and lb (nb): unpaired seeds. */
static void welch_on_logs(const double *la, int na, const double *lb, int nb,
                          bf_stats_ratio *out)
{
    double ma, va, mb, vb;
    mean_var(la, na, &ma, &va);
    mean_var(lb, nb, &mb, &vb);
    out->log_mean = ma - mb;
    double sa = va / na, sb = vb / nb;
    out->log_se = sqrt(sa + sb);
    out->df = (sa + sb) * (sa + sb)
              / (sa * sa / (na - 1) + sb * sb / (nb - 1));
    log_interval(out, na < nb ? na : nb, "seeds in the smaller group");
}

void bf_stats_log_ratio(const double *a, const double *b, int n,
                        bf_stats_ratio *out)
{
    /* on the heap: a cell of a million-job sweep can hold more seeds
     * than a thread's stack has room for */
    double *la = bf_xmalloc(3 * (size_t)(n > 0 ? n : 1) * sizeof *la);
    double *lb = la + (n > 0 ? n : 1), *lr = lb + (n > 0 ? n : 1);
    int na = 0, nb = 0, np = 0;
    for (int i = 0; i < n; i++) {
        int has_a = isfinite(a[i]) && a[i] > 0, has_b = isfinite(b[i]) && b[i] > 0;
        if (has_a)
            la[na++] = log(a[i]);
        if (has_b)
            lb[nb++] = log(b[i]);
        if (has_a && has_b)
            lr[np++] = log(a[i] / b[i]);
    }
    *out = (bf_stats_ratio){ .n_a = na, .n_b = nb, .ratio = NAN,
                             .log_mean = NAN, .log_se = NAN, .df = NAN };
    if (np >= 2) {              /* pair on the seeds both groups have */
        double var;
        mean_var(lr, np, &out->log_mean, &var);
        out->n_paired = np;
        out->log_se = sqrt(var / np);
        out->df = np - 1;
        log_interval(out, np, "paired seeds");
    } else if (na == 0 || nb == 0) {
        snprintf(out->note, sizeof out->note, "no seed in %s",
                 na == 0 ? "the variant" : "the baseline");
    } else {
        welch_on_logs(la, na, lb, nb, out);
    }
    free(la);
}

/* sd stays the sd of the logs (a spread by a factor exp(sd)). */
void bf_stats_summarize_log(const double *x, int n, bf_stats_summary *out)
{
    double *l = bf_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *l);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > 0 && isfinite(x[i]))
            l[k++] = log(x[i]);
    bf_stats_summarize(l, k, out);
    free(l);
    out->mean = exp(out->mean);
    out->ci_low = exp(out->ci_low);
    out->ci_high = exp(out->ci_high);
}

void bf_stats_wilson(long k, long n, double level, bf_stats_prop *out)
{
    *out = (bf_stats_prop){ NAN, NAN, NAN };
    if (n <= 0 || k < 0 || k > n)
        return;
    double z = z_quantile(0.5 + level / 2.0), p = (double)k / n;
    double z2n = z * z / n, centre = (p + z2n / 2.0) / (1.0 + z2n);
    double half = z / (1.0 + z2n) * sqrt(p * (1.0 - p) / n + z2n / (4.0 * n));
    *out = (bf_stats_prop){ p, fmax(centre - half, 0.0),
                            fmin(centre + half, 1.0) };
}

/* The q-quantile of Beta(a, b): I_x(a, b) increases in x, so bisect. */
static double beta_quantile(double q, double a, double b)
{
    double lo = 0.0, hi = 1.0;
    for (int i = 0; i < 200 && hi - lo > 1e-15; i++) {
        double mid = 0.5 * (lo + hi);
        if (incomplete_beta(a, b, mid) < q)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

void bf_stats_clopper_pearson(long k, long n, double level, bf_stats_prop *out)
{
    *out = (bf_stats_prop){ NAN, NAN, NAN };
    if (n <= 0 || k < 0 || k > n)
        return;
    double tail = (1.0 - level) / 2.0;
    *out = (bf_stats_prop){
        (double)k / n,
        k == 0 ? 0.0 : beta_quantile(tail, k, n - k + 1),
        k == n ? 1.0 : beta_quantile(1.0 - tail, k + 1, n - k) };
}

void bf_stats_newcombe(long k1, long n1, long k2, long n2, double level,
                       double *low, double *high)
{
    bf_stats_prop a, b;
    bf_stats_wilson(k1, n1, level, &a);
    bf_stats_wilson(k2, n2, level, &b);
    double d = a.p - b.p;
    *low = d - sqrt((a.p - a.ci_low) * (a.p - a.ci_low)
                    + (b.ci_high - b.p) * (b.ci_high - b.p));
    *high = d + sqrt((a.ci_high - a.p) * (a.ci_high - a.p)
                     + (b.p - b.ci_low) * (b.p - b.ci_low));
}

double bf_stats_mcnemar_exact(long b, long c)
{
    long n = b + c, k = b < c ? b : c;
    if (n <= 0)
        return 1.0;
    /* P(X <= k) for X ~ Binomial(n, 1/2) is I_{1/2}(n - k, k + 1). */
    double tail = k == n ? 1.0 : incomplete_beta(n - k, k + 1, 0.5);
    return fmin(1.0, 2.0 * tail);
}

/* The indices of the finite p-values, ascending by p, into order[];
 * returns how many. */
static int sorted_finite(const double *p, int n, int *order)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(p[i])) {
            int j = m++;
            for (; j > 0 && p[order[j - 1]] > p[i]; j--)
                order[j] = order[j - 1];
            order[j] = i;
        }
    return m;
}

void bf_stats_holm(const double *p, int n, double *adjusted)
{
    int order[n > 0 ? n : 1];
    int m = sorted_finite(p, n, order);
    for (int i = 0; i < n; i++)
        adjusted[i] = NAN;
    double running = 0.0;
    for (int j = 0; j < m; j++) {
        running = fmax(running, fmin(1.0, (m - j) * p[order[j]]));
        adjusted[order[j]] = running;
    }
}

void bf_stats_bh(const double *p, int n, double *adjusted)
{
    int order[n > 0 ? n : 1];
    int m = sorted_finite(p, n, order);
    for (int i = 0; i < n; i++)
        adjusted[i] = NAN;
    double running = 1.0;
    for (int j = m - 1; j >= 0; j--) {
        running = fmin(running, (double)m * p[order[j]] / (j + 1));
        adjusted[order[j]] = running;
    }
}

double bf_stats_tost_p(const bf_stats_ratio *r, double bound)
{
    if (!isfinite(r->p) || !(bound > 0))
        return NAN;
    double p_above = t_cdf(-(r->log_mean + bound) / r->log_se, r->df);
    double p_below = t_cdf((r->log_mean - bound) / r->log_se, r->df);
    return fmax(p_above, p_below);
}

bf_stats_seed_plan bf_stats_seeds_needed(const bf_stats_ratio *r,
                                         double bound, double alpha,
                                         bf_stats_families family)
{
    double m = fabs(r->log_mean);
    bf_stats_seed_plan plan = {.equivalence = m < bound};
    plan.family = plan.equivalence ? family.equivalences : family.differences;
    if (!(r->log_se > 0) || !isfinite(r->df))
        return plan;
    /* The variance of one seed's log-ratio (paired) or of the sum of one
     * seed per group (Welch, harmonic mean of the group sizes). */
    double n_eff = r->n_paired ? r->n_paired
                               : 2.0 / (1.0 / r->n_a + 1.0 / r->n_b);
    double var = r->log_se * r->log_se * n_eff;
    double level = alpha / (plan.family > 1 ? plan.family : 1);
    /* equivalence: one-sided against the nearer bound; a difference:
     * two-sided against no effect */
    double effect = plan.equivalence ? bound - m : m;
    double z = z_quantile(1.0 - (plan.equivalence ? level
                                                           : level / 2.0))
               + z_quantile(0.8);
    double n = ceil(z * z * var / (effect * effect));
    plan.seeds = n < 3 ? 3 : n > 1e6 ? 1000000 : (int)n;
    return plan;
}

/* The McNemar variance of one seed's accuracy difference, from its
 * discordant pairs d of m examples with net difference delta (in examples):
 * ((b + c)/m - ((b - c)/m)^2) / m. */
static double mcnemar_var(double d, double delta, long m)
{
    return (d / m - (delta / m) * (delta / m)) / m;
}

void bf_stats_newcombe_paired(long both, long first_only, long second_only,
                              long neither, double level, double *low,
                              double *high)
{
    long n = both + first_only + second_only + neither;
    bf_stats_prop a, b;
    bf_stats_wilson(both + first_only, n, level, &a);
    bf_stats_wilson(both + second_only, n, level, &b);
    /* phi of the 2x2 table; 0 when a margin is empty (Newcombe's rule). */
    double den = (double)(both + first_only) * (second_only + neither)
                 * (double)(both + second_only) * (first_only + neither);
    double phi = den > 0 ? ((double)both * neither
                            - (double)first_only * second_only) / sqrt(den)
                         : 0.0;
    double d = a.p - b.p;
    double dl1 = a.p - a.ci_low, du1 = a.ci_high - a.p;
    double dl2 = b.p - b.ci_low, du2 = b.ci_high - b.p;
    *low = d - sqrt(fmax(0.0, dl1 * dl1 - 2 * phi * dl1 * du2 + du2 * du2));
    *high = d + sqrt(fmax(0.0, du1 * du1 - 2 * phi * du1 * dl2 + dl2 * dl2));
}

/* The pooled counts of the seeds both groups hold, into out (n_paired,
 * diff, discordant) and d[] (per-seed differences); returns the sum of the
 * seeds' McNemar variances, each from its own discordant pairs or, without
 * outcomes, from the fewest its counts allow. */
static double pool_seeds(const long *ka, const long *kb, int n, long m,
                         const bf_stats_pairs *pairs, double *d,
                         long sums[2], bf_stats_pairs *pooled,
                         bf_stats_acc_diff *out)
{
    double within = 0.0;
    for (int i = 0; i < n; i++) {
        if (ka[i] < 0 || kb[i] < 0)
            continue;
        long delta = ka[i] - kb[i];
        bf_stats_pairs p = pairs ? pairs[i]
            : (bf_stats_pairs){ 0, delta > 0 ? delta : 0,
                                delta < 0 ? -delta : 0 };
        d[out->n_paired++] = (double)delta / m;
        sums[0] += ka[i];
        sums[1] += kb[i];
        pooled->both += p.both;
        pooled->a_only += p.a_only;
        pooled->b_only += p.b_only;
        within += mcnemar_var(p.a_only + p.b_only, delta, m);
    }
    out->discordant[0] = pooled->a_only;
    out->discordant[1] = pooled->b_only;
    return within;
}

void bf_stats_accuracy_diff(const long *ka, const long *kb, int n, long m,
                            const bf_stats_pairs *pairs,
                            bf_stats_acc_diff *out)
{
    double *d = bf_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *d);  /* heap:
                                        as in bf_stats_log_ratio */
    long sums[2] = { 0, 0 };
    bf_stats_pairs pooled = { 0, 0, 0 };
    *out = (bf_stats_acc_diff){ .diff = NAN, .ci_low = NAN, .ci_high = NAN,
                                .t_p = NAN, .mcnemar_p = NAN, .p = NAN };
    double within = pool_seeds(ka, kb, n, m, pairs, d, sums, &pooled, out);
    int np = out->n_paired;
    double mean = NAN, var = NAN;
    if (np > 0)
        mean_var(d, np, &mean, &var);
    free(d);
    if (np == 0 || m <= 0) {
        snprintf(out->note, sizeof out->note, "no seed in both groups");
        return;
    }
    out->diff = mean;
    if (pairs)
        bf_stats_newcombe_paired(pooled.both, pooled.a_only, pooled.b_only,
                                 np * m - pooled.both - pooled.a_only
                                 - pooled.b_only, BF_STATS_LEVEL,
                                 &out->ci_low, &out->ci_high);
    else
        bf_stats_newcombe(sums[0], np * m, sums[1], np * m, BF_STATS_LEVEL,
                          &out->ci_low, &out->ci_high);
    out->p_exact = pairs != NULL;
    out->mcnemar_p = bf_stats_mcnemar_exact(pooled.a_only, pooled.b_only);
    if (np < 3)
        snprintf(out->note, sizeof out->note,
                 "seed variance not estimable from %d seeds", np);
    else if (!(sqrt(var) >= 1.0 / m))
        snprintf(out->note, sizeof out->note,
                 "seed spread below one example (1/%ld): seed variance not "
                 "estimable", m);
    else {
        double v = fmax(var, within / np);
        out->t_p = bf_stats_t_p(mean / sqrt(v / np), np - 1);
        /* the interval of that t: it excludes 0 exactly when t_p <
         * 1 - level; a difference of accuracies lies in [-1, 1] */
        double half = bf_stats_t_quantile(0.5 + BF_STATS_LEVEL / 2, np - 1)
                      * sqrt(v / np);
        out->ci_low = fmax(-1.0, mean - half);
        out->ci_high = fmin(1.0, mean + half);
        out->ci_seeds = 1;
    }
    out->p = isfinite(out->t_p) ? out->t_p : out->mcnemar_p;
}

void bf_stats_accuracy_interval(const double *acc, int n, long m,
                                bf_stats_prop *out, int *at_seeds)
{
    long k = 0;
    for (int i = 0; i < n; i++)
        k += lround(acc[i] * m);
    bf_stats_wilson(k, (long)n * m, BF_STATS_LEVEL, out);
    *at_seeds = n >= 2;
    if (n < 2)
        return;
    double mean, var, within = 0;
    mean_var(acc, n, &mean, &var);
    for (int i = 0; i < n; i++)
        within += acc[i] * (1 - acc[i]) / (double)m;
    double half = bf_stats_t_quantile(0.5 + BF_STATS_LEVEL / 2, n - 1)
                  * sqrt(fmax(var, within / n) / n);
    out->p = mean;
    out->ci_low = fmax(0.0, fmin(out->ci_low, mean - half));
    out->ci_high = fmin(1.0, fmax(out->ci_high, mean + half));
}

void bf_stats_prob_improvement(const double *a, const double *b, int n,
                               bf_stats_prop *out)
{
    long wins = 0, shared = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(a[i]) && isfinite(b[i])) {
            shared++;
            wins += a[i] < b[i];
        }
    bf_stats_clopper_pearson(wins, shared, BF_STATS_LEVEL, out);
}
