/* bench_seqs: the adaptive-seed rule (common/confseq.h) simulated, beside
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

/* One noise draw of sd 1: Gaussian, or Student t3 / sqrt(3). */
static double noise(bf_rng *r, int heavy)
{
    double z = bf_rng_normal(r);
    if (!heavy)
        return z;
    double chi2 = 0;
    for (int i = 0; i < 3; i++) {
        double w = bf_rng_normal(r);
        chi2 += w * w;
    }
    return z / sqrt(chi2 / 3) / sqrt(3.0);
}

static void draw(const options *o, int heavy, double effect, long trial,
                 double *r)
{
    bf_rng g;
    bf_rng_seed(&g, bf_rng_key(bf_rng_key(o->seed, (uint64_t)heavy), trial));
    for (int i = 0; i < MAX_SEEDS; i++)
        r[i] = effect + o->sigma * noise(&g, heavy);
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

static void count(tally *t, bf_confseq_state s, int n)
{
    t->lower += s == BF_CONFSEQ_LOWER;
    t->higher += s == BF_CONFSEQ_HIGHER;
    t->equivalent += s == BF_CONFSEQ_EQUIVALENT;
    t->undecided += s == BF_CONFSEQ_UNDECIDED;
    t->seeds += n;
}

/* The rule at `alpha`: a seed pair at a time until its state is not
 * running; the state it ends in. */
static bf_confseq_state adaptive(const double *r, double alpha, tally *t)
{
    double low, high;
    for (int n = MIN_SEEDS; n <= MAX_SEEDS; n++) {
        bf_confseq_state s = bf_confseq_decide(BF_CONFSEQ_RULE_T, r, n,
                                               MIN_SEEDS, MAX_SEEDS,
                                               MARGIN, alpha, &low, &high);
        if (s != BF_CONFSEQ_RUNNING) {
            count(t, s, n);
            return s;
        }
    }
    return BF_CONFSEQ_UNDECIDED;    /* not reached: max decides */
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
    if (bad)
        printf("\nFALSE DECISIONS ABOVE ALPHA under no effect\n");
    return bad;
}
