/* bench_seqs: the adaptive-seed rules (common/confseq.h) simulated, beside
 * fixed-n designs.
 *
 * A comparison is a stream of paired per-seed log loss ratios r_i = effect
 * + noise_i, noise Gaussian or Student t with 3 degrees of freedom (heavy
 * tails), both scaled to sd SIGMA.  The rule sees seeds min..max one pair
 * at a time and stops at lower / higher / equivalent / undecided at max.
 * Under no effect the share decided lower or higher is the false-decision
 * rate, which must be at most alpha; under a true 30% effect (ratio 0.7)
 * the share decided and the seed pairs spent are printed beside:
 *   - a fixed-n paired t-test at the same alpha with the fewest seeds that
 *     decide as often as the rule does, and with max seeds;
 *   - a t-test checked after every seed from min on (the invalid design the
 *     rule replaces), whose false-decision rate passes alpha.
 * Then a stage's family: FAMILY comparisons against one baseline, sharing
 * its seeds, each decided by the rule at alpha (as bifocald did before
 * migration 22) or at alpha / FAMILY (Bonferroni, as it does now): the
 * share of families with at least one false difference, and what the
 * correction costs in seed pairs under a true effect.
 *
 * Last, both rules (t and sign) at seeds 3..20 and 5..16 under five noise
 * shapes of sd SIGMA: Gaussian, t3, gamma of skewness 1 and 1.4, lognormal
 * (log-sd 1, skewness 6.2).  Under no effect, three nulls: the two arms
 * exchangeable within a pair (r the scaled difference of two iid draws:
 * symmetric about 0, mean and median 0: both rules' null), r of mean 0
 * (the t rule's null; the median is not 0 there) and r of median 0 (the
 * sign rule's; the mean is not 0).  Each rule's share decided is a false-
 * decision rate only against its own null, and the run exits 1 where a
 * rule passes alpha on a row where docs/results.md calls it valid.  Under
 * a true 30% effect (exchangeable noise), the share decided lower and the
 * seed pairs spent.  Last, the t rule's diagnostic (|skewness| past twice
 * its standard error, results/adaptive.c): how often it flags the log
 * ratios of mean-0 noise of each shape after n pairs.
 *
 * usage: bench_seqs [--trials N] [--sigma S] [--alpha A] [--seed K]
 *                   [--family M] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "confseq.h"
#include "rng.h"
#include "stats.h"

enum { MIN_SEEDS = 3, MAX_SEEDS = 20 };

#define MARGIN 0.10

typedef struct options {
    int trials, family;
    double sigma, alpha;
    uint64_t seed;
} options;

typedef struct tally {
    long lower, higher, equivalent, undecided;
    double seeds;               /* seed pairs spent, summed */
} tally;

/* The noise shapes, each of mean 0 and sd 1. */
typedef enum shape {
    GAUSSIAN, T3, GAMMA1, GAMMA14, LOGNORMAL, N_SHAPES
} shape;

static const char *const shape_names[N_SHAPES] = {
    "gaussian", "t3", "gamma, skew 1", "gamma, skew 1.4", "lognormal",
};

/* Gamma(k, 1) for k >= 1 (Marsaglia & Tsang 2000). */
static double gamma_draw(bf_rng *r, double k)
{
    double d = k - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double z = bf_rng_normal(r), v = 1 + c * z;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = bf_rng_uniform(r);
        if (log(u) < 0.5 * z * z + d - d * v + d * log(v))
            return d * v;
    }
}

/* One noise draw of mean 0 and sd 1.  Gamma's skewness is 2 / sqrt(k). */
static double noise(bf_rng *r, shape s)
{
    double z = bf_rng_normal(r), chi2 = 0, k;
    switch (s) {
    case GAUSSIAN:
        return z;
    case T3:
        for (int i = 0; i < 3; i++) {
            double w = bf_rng_normal(r);
            chi2 += w * w;
        }
        return z / sqrt(chi2 / 3) / sqrt(3.0);
    case GAMMA1:
    case GAMMA14:
        k = s == GAMMA1 ? 4.0 : (2 / 1.4) * (2 / 1.4);
        return (gamma_draw(r, k) - k) / sqrt(k);
    case LOGNORMAL:
    case N_SHAPES:
        break;
    }
    return (exp(z) - exp(0.5)) / sqrt((exp(1.0) - 1) * exp(1.0));
}

static void draw(const options *o, int heavy, double effect, long trial,
                 double *r)
{
    bf_rng g;
    bf_rng_seed(&g, bf_rng_key(bf_rng_key(o->seed, (uint64_t)heavy), trial));
    for (int i = 0; i < MAX_SEEDS; i++)
        r[i] = effect + o->sigma * noise(&g, heavy ? T3 : GAUSSIAN);
}

/* A family's values, r[j * MAX_SEEDS + i] for comparison j and seed i:
 * effect + sigma (v_ji - b_i) / sqrt(2), b the baseline's Gaussian draw
 * that all comparisons share (their correlation is 1/2). */
static void draw_family(const options *o, double effect, long trial,
                        double *r)
{
    bf_rng g;
    bf_rng_seed(&g, bf_rng_key(bf_rng_key(o->seed, 7), trial));
    for (int i = 0; i < MAX_SEEDS; i++) {
        double b = bf_rng_normal(&g);
        for (int j = 0; j < o->family; j++)
            r[j * MAX_SEEDS + i] = effect + o->sigma * (bf_rng_normal(&g) - b)
                                   / sqrt(2.0);
    }
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void count(tally *t, bf_confseq_state s, int n)
{
    t->lower += s == BF_CONFSEQ_LOWER;
    t->higher += s == BF_CONFSEQ_HIGHER;
    t->equivalent += s == BF_CONFSEQ_EQUIVALENT;
    t->undecided += s == BF_CONFSEQ_UNDECIDED;
    t->seeds += n;
}

/* `rule` at `alpha` with seeds min..max: a seed pair at a time until its
 * state is not running; the state it ends in. */
static bf_confseq_state run_rule(bf_confseq_rule rule, const double *r,
                                 int min, int max, double alpha, tally *t)
{
    double low, high;
    for (int n = min; n <= max; n++) {
        bf_confseq_state s = bf_confseq_decide(rule, r, n, min, max, MARGIN,
                                               alpha, &low, &high);
        if (s != BF_CONFSEQ_RUNNING) {
            count(t, s, n);
            return s;
        }
    }
    return BF_CONFSEQ_UNDECIDED;    /* not reached: max decides */
}

/* The t rule with seeds 3..20, as the tables before the last have it. */
static bf_confseq_state adaptive(const double *r, double alpha, tally *t)
{
    return run_rule(BF_CONFSEQ_RULE_T, r, MIN_SEEDS, MAX_SEEDS, alpha, t);
}

/* The paired t-test's verdict on the first n values. */
static bf_confseq_state t_test(const options *o, const double *r, int n)
{
    bf_stats_summary s;
    bf_stats_summarize(r, n, &s);
    double t = s.mean / (s.sd / sqrt(n));
    if (!(bf_stats_t_p(t, n - 1) < o->alpha))
        return BF_CONFSEQ_UNDECIDED;
    return t < 0 ? BF_CONFSEQ_LOWER : BF_CONFSEQ_HIGHER;
}

/* The invalid design: the t-test checked after every seed. */
static void peeking(const options *o, const double *r, tally *t)
{
    for (int n = MIN_SEEDS; n <= MAX_SEEDS; n++) {
        bf_confseq_state s = t_test(o, r, n);
        if (s != BF_CONFSEQ_UNDECIDED || n == MAX_SEEDS) {
            count(t, s, n);
            return;
        }
    }
}

typedef struct scenario {
    int heavy;
    double effect;              /* true log-ratio */
    tally rule, peek, fixed[MAX_SEEDS + 1];
} scenario;

static void simulate(const options *o, scenario *sc)
{
    double r[MAX_SEEDS];
    for (long i = 0; i < o->trials; i++) {
        draw(o, sc->heavy, sc->effect, i, r);
        adaptive(r, o->alpha, &sc->rule);
        peeking(o, r, &sc->peek);
        for (int n = 2; n <= MAX_SEEDS; n++)
            count(&sc->fixed[n], t_test(o, r, n), n);
    }
}

static void row(const options *o, const char *design, const scenario *sc,
                const tally *t)
{
    double k = o->trials;
    printf("| %-34s | %-8s | %-4s | %5.2f%% | %5.2f%% | %5.2f%% | %6.2f%% "
           "| %5.2f |\n", design, sc->heavy ? "t3" : "gaussian",
           sc->effect < 0 ? "-30%" : "none", 100 * t->lower / k,
           100 * t->higher / k, 100 * t->equivalent / k,
           100 * (t->lower + t->higher + t->equivalent) / k, t->seeds / k);
}

/* The fewest fixed seeds whose t-test decides at least as often as the rule
 * (0: not even max seeds do). */
static int matching_n(const scenario *sc)
{
    long rule = sc->rule.lower + sc->rule.higher;
    for (int n = 2; n <= MAX_SEEDS; n++)
        if (sc->fixed[n].lower + sc->fixed[n].higher >= rule)
            return n;
    return 0;
}

static void report(const options *o, const scenario *sc)
{
    char name[64];
    row(o, "confidence sequence, seeds 3..20", sc, &sc->rule);
    int n = matching_n(sc);
    if (sc->effect < 0 && n > 0) {
        snprintf(name, sizeof name, "fixed-n t-test, n=%d (same share)", n);
        row(o, name, sc, &sc->fixed[n]);
    } else if (sc->effect < 0) {
        printf("| %-34s | %-8s | -30%% | (fixed n up to 20 decides less "
               "often) |\n", "fixed-n t-test", sc->heavy ? "t3" : "gaussian");
    }
    snprintf(name, sizeof name, "fixed-n t-test, n=%d", MAX_SEEDS);
    row(o, name, sc, &sc->fixed[MAX_SEEDS]);
    row(o, "t-test after every seed (invalid)", sc, &sc->peek);
}

/* Families of o->family comparisons, every comparison's effect `effect`,
 * decided at `alpha` each: the share of families with a false difference
 * (a comparison decided against the sign of its effect, or at all under
 * none), and the share of comparisons decided and seed pairs spent;
 * returns the first. */
static double family_row(const options *o, double effect, double alpha,
                         const char *level)
{
    double *r = bf_xmalloc((size_t)o->family * MAX_SEEDS * sizeof *r);
    tally t = {0};
    long wrong_families = 0;
    for (long i = 0; i < o->trials; i++) {
        draw_family(o, effect, i, r);
        int wrong = 0;
        for (int j = 0; j < o->family; j++) {
            bf_confseq_state s = adaptive(r + j * MAX_SEEDS, alpha, &t);
            wrong |= s == BF_CONFSEQ_HIGHER ||
                     (effect == 0 && s == BF_CONFSEQ_LOWER);
        }
        wrong_families += wrong;
    }
    double k = (double)o->trials * o->family;
    printf("| %d comparisons | %-18s | %-4s | %6.2f%% | %6.2f%% | %5.2f |\n",
           o->family, level, effect < 0 ? "-30%" : "none",
           100.0 * wrong_families / o->trials,
           100 * (t.lower + t.higher) / k, t.seeds / k);
    free(r);
    return (double)wrong_families / o->trials;
}

/* 1 when the corrected family errs more than alpha of the time under no
 * effect. */
static int family_report(const options *o)
{
    char level[32];
    printf("\n%d families of %d comparisons sharing the baseline's seeds:\n\n"
           "| family | each decided at | effect | families with a false "
           "difference | comparisons decided lower or higher | seed pairs |"
           "\n|---|---|---|---|---|---|\n", o->trials, o->family);
    snprintf(level, sizeof level, "alpha / %d (now)", o->family);
    int bad = 0;
    for (int e = 0; e < 2; e++) {
        double effect = e ? log(0.7) : 0.0;
        family_row(o, effect, o->alpha, "alpha (before 22)");
        bad |= family_row(o, effect, o->alpha / o->family, level) > o->alpha;
    }
    return bad;
}

/* The nulls of the last table: where r's noise is centred. */
typedef enum centre { EXCHANGEABLE, MEAN0, MEDIAN0, N_CENTRES } centre;

static const char *const centre_names[N_CENTRES] = {
    "exchangeable", "mean 0", "median 0",
};

/* The median of shape s's noise, from 2^20 draws (to about 0.002 sd). */
static double median_of(shape s)
{
    enum { N = 1 << 20 };
    double *x = bf_xmalloc(N * sizeof *x);
    bf_rng g;
    bf_rng_seed(&g, bf_rng_key(99, (uint64_t)s));
    for (int i = 0; i < N; i++)
        x[i] = noise(&g, s);
    qsort(x, N, sizeof *x, by_value);
    double m = (x[N / 2 - 1] + x[N / 2]) / 2;
    free(x);
    return m;
}

/* A trial's r under shape s and null c, plus effect. */
static void draw_shape(const options *o, shape s, centre c, double median,
                       double effect, long trial, double *r)
{
    bf_rng g;
    bf_rng_seed(&g, bf_rng_key(bf_rng_key(o->seed, 100 + 3 * s + c), trial));
    for (int i = 0; i < MAX_SEEDS; i++) {
        double e = noise(&g, s);
        if (c == EXCHANGEABLE)
            e = (e - noise(&g, s)) / sqrt(2.0);
        else if (c == MEDIAN0)
            e -= median;
        r[i] = effect + o->sigma * e;
    }
}

/* Whether docs/results.md calls `rule` valid on shape s under null c:
 * the sign rule on its null and the exchangeable one, every shape; the t
 * rule on the exchangeable null (symmetric log ratios), and on mean 0 for
 * the symmetric shapes only (at skewness 1 it comes near alpha, past 1.4
 * it passes it). */
static int claimed(bf_confseq_rule rule, shape s, centre c)
{
    if (c == EXCHANGEABLE)
        return 1;
    if (rule == BF_CONFSEQ_RULE_SIGN)
        return c == MEDIAN0;
    return c == MEAN0 && s <= T3;
}

static const int ranges[2][2] = {{3, 20}, {5, 16}};

/* "4.12%" with "*" where it is a false-decision rate (the rule's null),
 * "!" where it passes alpha on a row it is claimed valid on; sets *bad. */
static void rate_cell(const options *o, bf_confseq_rule rule, shape s,
                      centre c, const tally *t, int *bad)
{
    double rate = (double)(t->lower + t->higher) / o->trials;
    int own = c == EXCHANGEABLE || (c == MEAN0) == (rule == BF_CONFSEQ_RULE_T);
    int over = claimed(rule, s, c) && rate > o->alpha;
    *bad |= over;
    printf(" %6.2f%%%s | %5.2f |", 100 * rate, over ? "!" : own ? "*" : " ",
           t->seeds / o->trials);
}

/* The rules under no effect and under a 30% one; 1 when a rule passes
 * alpha where it is claimed valid. */
static int rules_report(const options *o)
{
    printf("\nBoth rules, %d comparisons per row (alpha %.3g, sd %.3g); "
           "decided: lower or higher, * a false decision (the rule's own "
           "null), ! above alpha where docs/results.md calls the rule "
           "valid:\n\n| seeds | noise | null | t decided | t seed pairs | "
           "sign decided | sign seed pairs |\n|---|---|---|---|---|---|---|\n",
           o->trials, o->alpha, o->sigma);
    int bad = 0;
    double r[MAX_SEEDS];
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < N_SHAPES; s++) {
            double median = median_of((shape)s);
            for (int c = 0; c < N_CENTRES; c++) {
                tally t[BF_CONFSEQ_N_RULES] = {{0}};
                for (long i = 0; i < o->trials; i++) {
                    draw_shape(o, (shape)s, (centre)c, median, 0, i, r);
                    for (int u = 0; u < BF_CONFSEQ_N_RULES; u++)
                        run_rule((bf_confseq_rule)u, r, ranges[k][0],
                                 ranges[k][1], o->alpha, &t[u]);
                }
                printf("| %d..%d | %s | %s |", ranges[k][0], ranges[k][1],
                       shape_names[s], centre_names[c]);
                for (int u = 0; u < BF_CONFSEQ_N_RULES; u++)
                    rate_cell(o, (bf_confseq_rule)u, (shape)s, (centre)c,
                              &t[u], &bad);
                printf("\n");
            }
        }
    printf("\nUnder a true 30%% effect (ratio 0.7), exchangeable noise:\n\n"
           "| seeds | noise | t decided lower | t seed pairs | sign decided "
           "lower | sign seed pairs |\n|---|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < N_SHAPES; s++) {
            tally t[BF_CONFSEQ_N_RULES] = {{0}};
            for (long i = 0; i < o->trials; i++) {
                draw_shape(o, (shape)s, EXCHANGEABLE, 0, log(0.7), i, r);
                for (int u = 0; u < BF_CONFSEQ_N_RULES; u++)
                    run_rule((bf_confseq_rule)u, r, ranges[k][0],
                             ranges[k][1], o->alpha, &t[u]);
            }
            printf("| %d..%d | %s |", ranges[k][0], ranges[k][1],
                   shape_names[s]);
            for (int u = 0; u < BF_CONFSEQ_N_RULES; u++)
                printf(" %6.2f%% | %5.2f |", 100.0 * t[u].lower / o->trials,
                       t[u].seeds / o->trials);
            printf("\n");
        }
    return bad;
}

/* The share of comparisons whose first n log ratios the diagnostic flags,
 * per shape (mean-0 noise: a skewed shape's differences are what it is
 * for) and n. */
static void diagnostic_report(const options *o)
{
    static const int ns[] = {5, 8, 12, 16, 20};
    printf("\nThe t rule's diagnostic, |G1| > 2 se, share flagged after n "
           "pairs (mean-0 noise):\n\n| noise | n=5 | n=8 | n=12 | n=16 | "
           "n=20 |\n|---|---|---|---|---|---|\n");
    double r[MAX_SEEDS];
    for (int s = 0; s < N_SHAPES; s++) {
        long flagged[5] = {0};
        for (long i = 0; i < o->trials; i++) {
            draw_shape(o, (shape)s, MEAN0, 0, 0, i, r);
            for (int k = 0; k < 5; k++)
                flagged[k] += fabs(bf_confseq_skewness(r, ns[k]))
                              > 2 * bf_confseq_skewness_se(ns[k]);
        }
        printf("| %s |", shape_names[s]);
        for (int k = 0; k < 5; k++)
            printf(" %5.1f%% |", 100.0 * flagged[k] / o->trials);
        printf("\n");
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_seqs [--trials N] [--sigma S] "
            "[--alpha A] [--seed K] [--family M]\n");
    exit(2);
}

static void parse(int argc, char **argv, options *o)
{
    *o = (options){.trials = 10000, .sigma = 0.25, .alpha = 0.05, .seed = 19,
                   .family = 12};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (strcmp(argv[i - 1], "--trials") == 0)
            o->trials = atoi(v);
        else if (strcmp(argv[i - 1], "--sigma") == 0)
            o->sigma = atof(v);
        else if (strcmp(argv[i - 1], "--alpha") == 0)
            o->alpha = atof(v);
        else if (strcmp(argv[i - 1], "--seed") == 0)
            o->seed = strtoull(v, NULL, 10);
        else if (strcmp(argv[i - 1], "--family") == 0)
            o->family = atoi(v);
        else
            usage();
    }
    if (o->trials < 1 || !(o->sigma > 0) || !(o->alpha > 0 && o->alpha < 1)
        || o->family < 1 || o->family > 1000)
        usage();
}

int main(int argc, char **argv)
{
    options o;
    parse(argc, argv, &o);
    printf("%d comparisons per row; per-seed log-ratio noise sd %.3g; "
           "alpha %.3g; equivalence margin +-%.0f%%; c^2 %.3g\n\n",
           o.trials, o.sigma, o.alpha, 100 * MARGIN, BF_CONFSEQ_C2);
    printf("| design | noise | effect | lower | higher | equivalent "
           "| decided | seed pairs |\n|---|---|---|---|---|---|---|---|\n");
    int bad = 0;
    for (int e = 0; e < 2; e++) {
        for (int heavy = 0; heavy < 2; heavy++) {
            scenario *sc = calloc(1, sizeof *sc);
            if (!sc)
                return 1;
            sc->heavy = heavy;
            sc->effect = e ? log(0.7) : 0.0;
            simulate(&o, sc);
            report(&o, sc);
            if (!e && sc->rule.lower + sc->rule.higher > o.alpha * o.trials)
                bad = 1;
            free(sc);
        }
    }
    bad |= family_report(&o);
    bad |= rules_report(&o);
    diagnostic_report(&o);
    if (bad)
        printf("\nFALSE DECISIONS ABOVE ALPHA under no effect\n");
    return bad;
}
