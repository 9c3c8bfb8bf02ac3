/* confseq: anytime-valid confidence sequences for the centre of paired
 * per-seed log loss ratios, and the stopping rules of adaptive seeds
 * (docs/results.md, "Seeds until decided"): rule `t` bounds the mean of
 * Gaussian values of unknown variance, rule `sign` the median of any
 * continuous values.
 *
 * The values are the paired per-seed log loss ratios r = log(L_variant /
 * L_baseline).  The sequence is Lai's (1976) t-mixture, as Wang & Ramdas
 * (2023) state it for an unknown variance: for a candidate mean m, with
 * d = mean - m and Q the sum of squares about the mean,
 *
 *   M_n(m) = sqrt(c^2 / (n + c^2)) * (V / (V - n^2 d^2 / (n + c^2)))^(n/2),
 *   V = Q + n d^2,
 *
 * is a nonnegative martingale under H0: mean = m (for every variance) in
 * the scale-invariant filtration, the mixture over the effect size
 * d / sigma ~ N(0, 1/c^2).  By Ville's inequality P(exists n: M_n(m) >=
 * 1/alpha) <= alpha, so {m : M_n(m) < 1/alpha} covers the true mean at
 * every n at once, however n was chosen: checking after every seed and
 * stopping when it excludes zero keeps the error rate at alpha.  Solved
 * for m the set is an interval, mean -+ sqrt((K - 1) Q / A), with
 * K = (sqrt((n + c^2) / c^2) / alpha)^(2/n) and A = n (1 - K c^2 / (n +
 * c^2)); where A <= 0 (too few values) it is the whole line. */
#ifndef BF_CONFSEQ_H
#define BF_CONFSEQ_H

/* c^2 of the mixture: the effect-size prior N(0, 1/c^2) has sd 2, wide
 * enough for a 30% loss change (log 0.7 = -0.36) over seeds 0.1-0.5 apart
 * in log loss; chosen with bench/bench_seqs (docs/results.md). */
#define BF_CONFSEQ_C2 0.25

/* a of the sign rule's Beta(a, a) mixture over P(r <= m); below 1 it
 * weighs the lopsided splits a real effect makes, so that a clear one is
 * decided with few seeds: 1/4 decides a 30% effect as often as 1/2 or 1
 * with 0.9 and 1.7 fewer seed pairs, 1/10 less often (bench/bench_seqs,
 * docs/results.md). */
#define BF_CONFSEQ_SIGN_A 0.25

/* Which sequence a comparison is decided with (the sweep file's
 * seeds.rule, stored in seed_comparisons.rule). */
typedef enum bf_confseq_rule {
    BF_CONFSEQ_RULE_T = 0,      /* "t": the mean, Gaussian values (default) */
    BF_CONFSEQ_RULE_SIGN,       /* "sign": the median, any continuous values */
    BF_CONFSEQ_N_RULES
} bf_confseq_rule;

/* The rule's name as written and stored: "t", "sign". */
const char *bf_confseq_rule_name(bf_confseq_rule rule);

/* The rule named `name` (NULL: the default, t); -1 for an unknown name. */
int bf_confseq_rule_parse(const char *name);

/* The interval of the sequence at level 1 - alpha after the n values x[]
 * (n >= 0): *low, *high, -INFINITY/INFINITY while it is the whole line
 * (n < 2, no spread, or A <= 0). */
void bf_confseq_interval(const double *x, int n, double alpha,
                         double *low, double *high);

/* The sign rule's interval for the median at level 1 - alpha after the n
 * continuous values x[] (their order does not matter).  For a
 * candidate median m the indicators 1{x_i <= m} are fair coin flips under
 * H0 (independent values of median m, any distribution), and with S of
 * them set
 *
 *   M_n(m) = 2^n B(a + S, a + n - S) / B(a, a),   a = BF_CONFSEQ_SIGN_A,
 *
 * the Beta(a, a) mixture of the likelihood ratios p^S (1 - p)^(n - S) /
 * 2^-n, is a nonnegative martingale of mean 1: Ville's inequality again.
 * M_n depends on m through S only and is convex in S, so the m with M_n <
 * 1/alpha are those with S in some [s_lo, s_hi]: the interval between
 * order statistics [x_(s_lo), x_(s_hi + 1)], an end infinite where s_lo is
 * 0 or s_hi is n. */
void bf_confseq_sign_interval(const double *x, int n, double alpha,
                              double *low, double *high);

/* The adjusted sample skewness G1 of the n values x[] (SciPy's skew with
 * bias=False), NAN below 3 values or without spread; and its standard
 * error under Gaussian values, sqrt(6 n (n - 1) / ((n - 2)(n + 1)(n + 3))).
 * The t rule's diagnostic: a |G1| past twice its standard error says its
 * Gaussian assumption looks violated (a two-sided test at about 5%). */
double bf_confseq_skewness(const double *x, int n);
double bf_confseq_skewness_se(int n);

/* Where a comparison of adaptive seeds stands. */
typedef enum bf_confseq_state {
    BF_CONFSEQ_RUNNING = 0,     /* not known yet: add a seed pair */
    BF_CONFSEQ_LOWER,           /* interval below 0: the variant's loss is lower */
    BF_CONFSEQ_HIGHER,          /* interval above 0 */
    BF_CONFSEQ_EQUIVALENT,      /* interval inside -+log(1 - margin): the
                                   ratio within x(1 - margin)..x1/(1 - margin),
                                   as common/analysis.h's margin */
    BF_CONFSEQ_UNDECIDED,       /* max seeds spent, none of the above */
} bf_confseq_state;

/* The state's name as stored and printed: "running", "lower", "higher",
 * "equivalent", "undecided". */
const char *bf_confseq_state_name(bf_confseq_state s);

/* The rule: the state after the n paired log-ratios x[] of a comparison
 * decided with `rule`, with seeds: {min, max} (1 <= min <= max),
 * equivalence margin (0 < margin < 1, on the ratio) and alpha.  Below min
 * seeds it is running whatever the interval; lower/higher before
 * equivalent, and undecided at max.  *low and *high get the rule's
 * interval (log scale). */
bf_confseq_state bf_confseq_decide(bf_confseq_rule rule, const double *x,
                                   int n, int min, int max, double margin,
                                   double alpha, double *low, double *high);

#endif
