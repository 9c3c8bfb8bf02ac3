/* confseq_probe: common/confseq.c behind a line protocol, for
 * test_confseq.py to check against an independent computation.  One
 * request a line on stdin, one JSON object a line on stdout:
 *   c2                                    the mixture's c^2
 *   sign_a                                the sign rule's a
 *   cs ALPHA N x1..xN                     the t rule's interval
 *   sign ALPHA N x1..xN                   the sign rule's interval
 *   skew N x1..xN                         skewness and its standard error
 *   decide [RULE] ALPHA MARGIN MIN MAX N x1..xN
 *                                         the rule's state and interval
 *                                         (RULE t or sign; t without) */
#include "confseq.h"
#include "probe_reader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_values(double *x)
{
    int n = probe_count();
    for (int i = 0; i < n; i++)
        x[i] = probe_next();
    return n;
}

/* JSON has no infinity: null. */
static void bound(const char *key, double x)
{
    if (isfinite(x))
        printf("\"%s\": %.17g", key, x);
    else
        printf("\"%s\": null", key);
}

static void interval_out(double low, double high)
{
    bound("low", low);
    printf(", ");
    bound("high", high);
    printf("}\n");
}

/* "decide"'s optional rule name at probe_cursor, skipped; t without. */
static bf_confseq_rule rule_word(void)
{
    while (*probe_cursor == ' ')
        probe_cursor++;
    size_t len = strcspn(probe_cursor, " \n");
    char name[16] = "";
    if (len >= sizeof name || (*probe_cursor >= '0' && *probe_cursor <= '9')
        || *probe_cursor == '.' || *probe_cursor == '-')
        return BF_CONFSEQ_RULE_T;
    memcpy(name, probe_cursor, len);
    int rule = bf_confseq_rule_parse(name);
    if (rule < 0) {
        fprintf(stderr, "confseq_probe: unknown rule '%s'\n", name);
        exit(2);
    }
    probe_cursor += len;
    return (bf_confseq_rule)rule;
}

static void skew_out(void)
{
    double x[PROBE_MAX_N];
    int n = read_values(x);
    printf("{");
    bound("skewness", bf_confseq_skewness(x, n));
    printf(", ");
    bound("se", n >= 3 ? bf_confseq_skewness_se(n) : NAN);
    printf("}\n");
}

int main(void)
{
    char line[16384];
    while (fgets(line, sizeof line, stdin)) {
        double x[PROBE_MAX_N], low, high;
        if (strcmp(line, "c2\n") == 0) {
            printf("{\"c2\": %.17g}\n", BF_CONFSEQ_C2);
            fflush(stdout);
            continue;
        }
        if (strcmp(line, "sign_a\n") == 0) {
            printf("{\"sign_a\": %.17g}\n", BF_CONFSEQ_SIGN_A);
            fflush(stdout);
            continue;
        }
        if (strncmp(line, "skew ", 5) == 0) {
            probe_cursor = line + 5;
            skew_out();
            fflush(stdout);
            continue;
        }
        if (strncmp(line, "cs ", 3) == 0) {
            probe_cursor = line + 3;
            double alpha = probe_next();
            int n = read_values(x);
            bf_confseq_interval(x, n, alpha, &low, &high);
            printf("{");
        } else if (strncmp(line, "sign ", 5) == 0) {
            probe_cursor = line + 5;
            double alpha = probe_next();
            int n = read_values(x);
            bf_confseq_sign_interval(x, n, alpha, &low, &high);
            printf("{");
        } else if (strncmp(line, "decide ", 7) == 0) {
            probe_cursor = line + 7;
            bf_confseq_rule rule = rule_word();
            double alpha = probe_next(), margin = probe_next();
            int min = (int)probe_next(), max = (int)probe_next();
            int n = read_values(x);
            bf_confseq_state s = bf_confseq_decide(rule, x, n, min, max,
                                                   margin, alpha, &low,
                                                   &high);
            printf("{\"state\": \"%s\", ", bf_confseq_state_name(s));
        } else {
            fprintf(stderr, "confseq_probe: unknown request '%s'\n", line);
            return 2;
        }
        interval_out(low, high);
        fflush(stdout);
    }
    return 0;
}
