/* confseq_probe: common/confseq.c behind a line protocol, for
 * test_confseq.py to check against an independent computation.  One
 * request a line on stdin, one JSON object a line on stdout:
 *   c2                                    the mixture's c^2
 *   cs ALPHA N x1..xN                     the interval
 *   decide ALPHA MARGIN MIN MAX N x1..xN  the rule's state and interval */
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
        if (strncmp(line, "cs ", 3) == 0) {
            probe_cursor = line + 3;
            double alpha = probe_next();
            int n = read_values(x);
            bf_confseq_interval(x, n, alpha, &low, &high);
            printf("{");
        } else if (strncmp(line, "decide ", 7) == 0) {
            probe_cursor = line + 7;
            double alpha = probe_next(), margin = probe_next();
            int min = (int)probe_next(), max = (int)probe_next();
            int n = read_values(x);
            bf_confseq_state s = bf_confseq_decide(x, n, min, max, margin,
                                                   alpha, &low, &high);
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
