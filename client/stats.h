/* stats: the seed statistics of `bifocal compare` and `report`: mean,
 * sample standard deviation and Student-t confidence intervals, and the
 * difference of two groups' means (paired t when both have the same seeds,
 * Welch's t otherwise).  Every interval is two-sided at 95%. */
#ifndef BF_STATS_H
#define BF_STATS_H

#define BF_STATS_LEVEL 0.95

typedef struct bf_stats_summary {
    int n;
    double mean;
    double sd;                  /* sample (n - 1); NAN for n < 2 */
    double ci_low, ci_high;     /* mean -+ t * sd / sqrt(n); NAN for n < 2 */
} bf_stats_summary;

typedef struct bf_stats_diff {
    double diff;                /* mean(a) - mean(b) */
    double ci_low, ci_high;     /* NAN when there are too few values */
    double df;                  /* degrees of freedom of the t used */
    int paired;                 /* 1: paired t over n pairs, 0: Welch */
} bf_stats_diff;

void bf_stats_summarize(const double *x, int n, bf_stats_summary *out);

/* The q-quantile of Student's t with df (> 0, not necessarily whole)
 * degrees of freedom, for 0 < q < 1. */
double bf_stats_t_quantile(double q, double df);

/* a[i] - b[i] over n pairs (the same seed in both groups). */
void bf_stats_paired(const double *a, const double *b, int n,
                     bf_stats_diff *out);

/* mean(a) - mean(b) with Welch's unequal-variance interval. */
void bf_stats_welch(const double *a, int na, const double *b, int nb,
                    bf_stats_diff *out);

#endif
