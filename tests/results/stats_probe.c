/* stats_probe: results/stats.c behind a line protocol, for test_stats.py to
 * check against SciPy.  One request a line on stdin, one JSON object a line
 * on stdout:
 *   ratio N a1..aN b1..bN     (nan marks a missing seed)
 *   glog N x1..xN
 *   wilson K N | cp K N | newcombe K1 N1 K2 N2 | mcnemar B C
 *   holm N p1..pN | bh N p1..pN
 *   acc N M ka1..kaN kb1..kbN [B C]   (-1 marks a missing seed)
 *   pi N a1..aN b1..bN
 *   tq Q DF */
#include "stats.h"
#include "analysis.h"
#include "../common/probe_reader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void read_n(double *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = probe_next();
}

/* JSON has no NaN: null. */
static void num(const char *key, double x, int last)
{
    if (isfinite(x))
        printf("\"%s\": %.17g", key, x);
    else
        printf("\"%s\": null", key);
    printf(last ? "}\n" : ", ");
}

static void ratio(void)
{
    double a[PROBE_MAX_N], b[PROBE_MAX_N];
    int n = probe_count();
    read_n(a, n);
    read_n(b, n);
    bf_stats_ratio r;
    bf_stats_log_ratio(a, b, n, &r);
    printf("{\"note\": \"%s\", \"n_paired\": %d, ", r.note, r.n_paired);
    num("ratio", r.ratio, 0);
    num("lo", r.ci_low, 0);
    num("hi", r.ci_high, 0);
    num("df", r.df, 0);
    /* margin 0.10, alpha 0.05; alone, then in families of 8 */
    double bound = bf_analysis_log_margin(0.10);
    bf_stats_seed_plan alone = bf_stats_seeds_needed(
        &r, bound, 0.05, (bf_stats_families){1, 1});
    bf_stats_seed_plan of_8 = bf_stats_seeds_needed(
        &r, bound, 0.05, (bf_stats_families){8, 8});
    num("tost", bf_stats_tost_p(&r, bound), 0);
    num("seeds", alone.seeds, 0);
    num("seeds_of_8", of_8.seeds, 0);
    num("p", r.p, 1);
}

static void prop(void (*method)(long, long, double, bf_stats_prop *))
{
    long k = (long)probe_next(), n = (long)probe_next();
    bf_stats_prop p;
    method(k, n, BF_STATS_LEVEL, &p);
    printf("{");
    num("p", p.p, 0);
    num("lo", p.ci_low, 0);
    num("hi", p.ci_high, 1);
}

static void adjust(void (*method)(const double *, int, double *))
{
    double p[PROBE_MAX_N], adj[PROBE_MAX_N];
    int n = probe_count();
    read_n(p, n);
    method(p, n, adj);
    printf("{\"adjusted\": [");
    for (int i = 0; i < n; i++) {
        printf(i ? ", " : "");
        if (isfinite(adj[i]))
            printf("%.17g", adj[i]);
        else
            printf("null");
    }
    printf("]}\n");
}

static void acc(void)
{
    long ka[PROBE_MAX_N], kb[PROBE_MAX_N];
    bf_stats_pairs pairs[PROBE_MAX_N];
    int n = probe_count();
    long m = (long)probe_next();
    for (int i = 0; i < 2 * n; i++)
        (i < n ? ka : kb)[i % n] = (long)probe_next();
    /* then, optionally, each seed's pairs: both, a only, b only */
    int has = strspn(probe_cursor, " \t\n") != strlen(probe_cursor);
    for (int i = 0; has && i < n; i++) {
        pairs[i].both = (long)probe_next();
        pairs[i].a_only = (long)probe_next();
        pairs[i].b_only = (long)probe_next();
    }
    bf_stats_acc_diff d;
    bf_stats_accuracy_diff(ka, kb, n, m, has ? pairs : NULL, &d);
    printf("{\"note\": \"%s\", \"p_exact\": %d, \"ci_seeds\": %d, ",
           d.note, d.p_exact, d.ci_seeds);
    num("diff", d.diff, 0);
    num("lo", d.ci_low, 0);
    num("hi", d.ci_high, 0);
    num("t_p", d.t_p, 0);
    num("mcnemar_p", d.mcnemar_p, 0);
    printf("\"discordant\": [%ld, %ld], ", d.discordant[0], d.discordant[1]);
    num("p", d.p, 1);
}

static void request(char *line)
{
    char *name = strtok(line, " \t\n");
    probe_cursor = name + strlen(name) + 1;
    if (!strcmp(name, "ratio"))
        ratio();
    else if (!strcmp(name, "glog")) {
        double x[PROBE_MAX_N];
        int n = probe_count();
        read_n(x, n);
        bf_stats_summary s;
        bf_stats_summarize_log(x, n, &s);
        printf("{");
        num("mean", s.mean, 0);
        num("lo", s.ci_low, 0);
        num("hi", s.ci_high, 1);
    } else if (!strcmp(name, "wilson"))
        prop(bf_stats_wilson);
    else if (!strcmp(name, "cp"))
        prop(bf_stats_clopper_pearson);
    else if (!strcmp(name, "newcombe_paired")) {
        long t[4];
        for (int i = 0; i < 4; i++)
            t[i] = (long)probe_next();
        double lo, hi;
        bf_stats_newcombe_paired(t[0], t[1], t[2], t[3], BF_STATS_LEVEL, &lo,
                                 &hi);
        printf("{");
        num("lo", lo, 0);
        num("hi", hi, 1);
    } else if (!strcmp(name, "newcombe")) {
        long k1 = (long)probe_next(), n1 = (long)probe_next(), k2 = (long)probe_next(),
             n2 = (long)probe_next();
        double lo, hi;
        bf_stats_newcombe(k1, n1, k2, n2, BF_STATS_LEVEL, &lo, &hi);
        printf("{");
        num("lo", lo, 0);
        num("hi", hi, 1);
    } else if (!strcmp(name, "mcnemar")) {
        long b = (long)probe_next(), c = (long)probe_next();
        printf("{");
        num("p", bf_stats_mcnemar_exact(b, c), 1);
    } else if (!strcmp(name, "holm"))
        adjust(bf_stats_holm);
    else if (!strcmp(name, "bh"))
        adjust(bf_stats_bh);
    else if (!strcmp(name, "acc"))
        acc();
    else if (!strcmp(name, "pi")) {
        double a[PROBE_MAX_N], b[PROBE_MAX_N];
        int n = probe_count();
        read_n(a, n);
        read_n(b, n);
        bf_stats_prop p;
        bf_stats_prob_improvement(a, b, n, &p);
        printf("{");
        num("p", p.p, 0);
        num("lo", p.ci_low, 0);
        num("hi", p.ci_high, 1);
    } else if (!strcmp(name, "accint")) {    /* n m acc... */
        double a[PROBE_MAX_N];
        int n = probe_count();
        long m = (long)probe_next();
        read_n(a, n);
        bf_stats_prop p;
        int at_seeds;
        bf_stats_accuracy_interval(a, n, m, &p, &at_seeds);
        printf("{\"at_seeds\": %d, ", at_seeds);
        num("lo", p.ci_low, 0);
        num("hi", p.ci_high, 1);
    } else if (!strcmp(name, "tq")) {
        double q = probe_next(), df = probe_next();
        printf("{");
        num("t", bf_stats_t_quantile(q, df), 1);
    } else {
        fprintf(stderr, "stats_probe: unknown request '%s'\n", name);
        exit(2);
    }
    fflush(stdout);
}

int main(void)
{
    char line[65536];
    while (fgets(line, sizeof line, stdin))
        if (strspn(line, " \t\n") != strlen(line))
            request(line);
    return 0;
}
