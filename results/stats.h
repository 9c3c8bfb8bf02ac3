/* stats: the seed statistics of `bifocal compare`, `report` and the
 * dashboard, one home for every method so every surface prints the same
 * numbers: Student-t summaries, geometric-mean loss ratios (paired, partly
 * paired or Welch on logs), binomial intervals (Wilson, Clopper-Pearson,
 * Newcombe), exact McNemar, Holm and Benjamini-Hochberg, TOST and the
 * probability of improvement.  docs/results.md cites each.  Intervals are
 * two-sided at 95% unless a level is passed. */
#ifndef BF_STATS_H
#define BF_STATS_H

#define BF_STATS_LEVEL 0.95

typedef struct bf_stats_summary {
    int n;
    double mean;
    double sd;                  /* sample (n - 1); NAN for n < 2 */
    double ci_low, ci_high;     /* mean -+ t * sd / sqrt(n); NAN for n < 2 */
} bf_stats_summary;

void bf_stats_summarize(const double *x, int n, bf_stats_summary *out);

/* The same summary built one value at a time, holding no values (curves
 * of a million jobs).  Start from a zeroed struct. */
typedef struct bf_stats_running {
    long n;
    double mean, m2;            /* m2: sum of squared deviations */
} bf_stats_running;

void bf_stats_running_add(bf_stats_running *r, double x);
void bf_stats_running_summary(const bf_stats_running *r, bf_stats_summary *out);

/* The q-quantile of Student's t with df (> 0, not necessarily whole)
 * degrees of freedom, for 0 < q < 1. */
double bf_stats_t_quantile(double q, double df);

/* ---- comparisons a reviewer accepts ----------------------------------
 *
 * Every p-value is two-sided.  A comparison that cannot be estimated says
 * why in `note` and leaves its interval and p NAN. */

/* The two-sided p of a t statistic with df degrees of freedom. */
double bf_stats_t_p(double t, double df);


/* The geometric-mean ratio of a positive quantity (loss) of a variant to
 * its baseline, a[i] / b[i] per seed i.  a and b are aligned by seed over
 * n seeds; NAN marks a seed one group lacks.  With 2 or more shared seeds
 * the log-ratios of the shared seeds are paired (partial pairing: n_paired
 * says how many); otherwise Welch's t on the logs of each group's seeds.
 * The interval is exp of the log-scale t-interval, so it never reaches
 * zero.  No interval (note set) below 3 values or with no spread. */
typedef struct bf_stats_ratio {
    int n_a, n_b;               /* seeds with a value in a, in b */
    int n_paired;               /* shared seeds paired; 0 for Welch */
    double ratio;               /* exp(mean log a - mean log b) */
    double ci_low, ci_high;     /* exp of the log-scale interval */
    double log_mean, log_se, df;
    double p;                   /* H0: ratio = 1 */
    char note[96];              /* "", or why there is no interval */
} bf_stats_ratio;

void bf_stats_log_ratio(const double *a, const double *b, int n,
                        bf_stats_ratio *out);

/* A geometric mean of positive values with its log-scale t-interval (the
 * group summary of loss: it never goes below zero). */
void bf_stats_summarize_log(const double *x, int n, bf_stats_summary *out);

/* Binomial proportion k / n: Wilson's score interval (Wilson 1927) and
 * Clopper-Pearson's exact one (1934), both inside [0, 1] by construction. */
typedef struct bf_stats_prop {
    double p, ci_low, ci_high;
} bf_stats_prop;

void bf_stats_wilson(long k, long n, double level, bf_stats_prop *out);
void bf_stats_clopper_pearson(long k, long n, double level,
                              bf_stats_prop *out);

/* Newcombe's hybrid score interval (1998, method 10) for k1/n1 - k2/n2,
 * from the two Wilson intervals: inside [-1, 1] by construction. */
void bf_stats_newcombe(long k1, long n1, long k2, long n2, double level,
                       double *low, double *high);

/* The exact McNemar test: two-sided binomial p of b against c
 * discordant pairs, b + c trials at one half. */
double bf_stats_mcnemar_exact(long b, long c);

/* Holm's step-down (1979) and Benjamini-Hochberg's step-up (1995)
 * adjustments of n p-values into adjusted[] (the caller's, n long).  NAN
 * p-values are left NAN and do not count in the family. */
void bf_stats_holm(const double *p, int n, double *adjusted);
void bf_stats_bh(const double *p, int n, double *adjusted);

/* TOST (Schuirmann 1987) on a log-ratio: the larger of the two one-sided
 * p-values that the log-ratio lies inside (-bound, bound) (bound:
 * bf_analysis_log_margin of the equivalence margin). */
double bf_stats_tost_p(const bf_stats_ratio *r, double bound);

/* The sizes of the two families a comparison's loss verdict is corrected
 * in: `differences` p-values of differences (loss and accuracy) and
 * `equivalences` TOST p-values. */
typedef struct bf_stats_families {
    int differences, equivalences;
} bf_stats_families;

/* What a fixed-n design would take to decide a comparison: seeds (0 if
 * not estimable), for which test (equivalence: TOST, else a difference)
 * and the size of that test's family. */
typedef struct bf_stats_seed_plan {
    int seeds, equivalence, family;
} bf_stats_seed_plan;

/* The seeds a fixed-n paired design would need (normal approximation,
 * power 80%) to tell a log-scale effect from zero, two-sided at alpha /
 * differences, or, when the effect is inside (-bound, bound), to show
 * equivalence, TOST at alpha / equivalences: Bonferroni over the family
 * the verdict's p is corrected in, the level Holm's first step and
 * Benjamini-Hochberg's smallest threshold ask of a p, so conservative for
 * both. */
bf_stats_seed_plan bf_stats_seeds_needed(const bf_stats_ratio *r,
                                         double bound, double alpha,
                                         bf_stats_families family);

/* Newcombe's interval for a difference of paired proportions (1998b,
 * method 10): the Wilson intervals of both margins combined with the
 * correlation phi of the 2x2 table of pairs (both right, only the first,
 * only the second, neither): inside [-1, 1] by construction. */
void bf_stats_newcombe_paired(long both, long first_only, long second_only,
                              long neither, double level, double *low,
                              double *high);

/* One seed's eval examples judged on both sides, from per-example
 * outcomes: right on both, only on the variant, only on the baseline
 * (the rest, of m, wrong on both). */
typedef struct bf_stats_pairs {
    long both, a_only, b_only;
} bf_stats_pairs;

/* Accuracy of a variant against its baseline from per-seed counts of
 * correct examples (ka[i], kb[i] of m each; ka[i] < 0 or kb[i] < 0 marks a
 * missing seed).  The interval is at the level of the p beside it: the
 * seeds' t-interval where the paired t decides, the examples' (Newcombe)
 * only where McNemar does (seed variance not estimable).  pairs, when not NULL, holds each seed's per-example
 * outcomes (pairs[i] for every seed both hold): then the exact McNemar
 * test counts the pooled discordant pairs, each seed's McNemar variance
 * is its own, and Newcombe's interval is the paired one.  Without them the
 * exact McNemar p is only bounded from below (the fewest discordant pairs
 * the counts allow), `p_exact` says which, and Newcombe's interval treats
 * the sides as independent. */
typedef struct bf_stats_acc_diff {
    int n_paired;
    double diff;                /* mean per-seed difference of accuracy */
    double ci_low, ci_high;     /* at the seeds (ci_seeds) the t-interval
                                   of t_p, within [-1, 1]; else Newcombe
                                   over the pooled examples */
    int ci_seeds;               /* 1: the interval is at the seed, the
                                   unit replicated, as t_p is */
    double t_p;                 /* paired t on per-seed differences with a
                                   variance no smaller than McNemar's;
                                   NAN when not estimable (see note) */
    double mcnemar_p;           /* exact McNemar (or its lower bound) */
    long discordant[2];         /* pooled: variant only, baseline only
                                   right (the fewest possible without
                                   pairs) */
    int p_exact;                /* 1: mcnemar_p from per-example outcomes */
    double p;                   /* t_p when finite, else mcnemar_p */
    char note[96];              /* "", or why t_p is NAN */
} bf_stats_acc_diff;

void bf_stats_accuracy_diff(const long *ka, const long *kb, int n, long m,
                            const bf_stats_pairs *pairs,
                            bf_stats_acc_diff *out);

/* A group's mean accuracy over its seeds (acc[i] of m examples each)
 * with an interval at the seed, the unit replicated: the t-interval of
 * the per-seed accuracies, their variance never below the examples'
 * binomial variance (mean of a(1-a)/m: seeds that agree by chance are no
 * evidence of a zero spread), cut to [0, 1], and never narrower than
 * Wilson's over the pooled examples (which seeds all at 0 or 1 would
 * otherwise shrink to a point).  One seed: Wilson's over its examples,
 * *at_seeds 0. */
void bf_stats_accuracy_interval(const double *acc, int n, long m,
                                bf_stats_prop *out, int *at_seeds);

/* rliable's probability of improvement over shared seeds: the fraction on
 * which a < b (lower loss; ties count as no improvement), with its
 * Clopper-Pearson interval. */
void bf_stats_prob_improvement(const double *a, const double *b, int n,
                               bf_stats_prop *out);

#endif
