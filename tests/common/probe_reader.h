/* probe_reader: the numbers of one request line of a test probe
 * (tests/results/stats_probe.c, tests/common/confseq_probe.c), which put a
 * library behind a line protocol for a Python test to check against an
 * independent computation.  Header-only; a bad line exits 2. */
#ifndef BFT_PROBE_READER_H
#define BFT_PROBE_READER_H

#include <stdio.h>
#include <stdlib.h>

enum { PROBE_MAX_N = 256 };

/* Where the next number of the current line starts. */
static char *probe_cursor;

static double probe_next(void)
{
    char *end;
    double x = strtod(probe_cursor, &end);
    if (end == probe_cursor) {
        fprintf(stderr, "probe: expected a number at '%s'\n", probe_cursor);
        exit(2);
    }
    probe_cursor = end;
    return x;
}

/* A count of values, 0..PROBE_MAX_N. */
static int probe_count(void)
{
    int n = (int)probe_next();
    if (n < 0 || n > PROBE_MAX_N) {
        fprintf(stderr, "probe: count %d out of 0..%d\n", n, PROBE_MAX_N);
        exit(2);
    }
    return n;
}

#endif
