/* The sweep text of a stage fan-out, shared by the store's and the
 * daemon's tests of it: one source job (stage a) and n dependents (stage
 * b, a grid of n learning rates, all starting from it); base is the flow
 * mapping of fields both stages share.  Header-only: the store tests and
 * the daemon tests link different helper libraries. */
#ifndef BF_TEST_FAN_OUT_H
#define BF_TEST_FAN_OUT_H

#include <stdio.h>
#include <string.h>

#include "alloc.h"

/* malloc'd; caller frees. */
static inline char *bft_fan_out_sweep(const char *base, int n)
{
    size_t cap = 256 + strlen(base) + (size_t)n * 16;
    char *t = bf_xmalloc(cap);
    size_t len = (size_t)snprintf(t, cap, "name: fan\nbase: %s\nstages:\n"
                                  "  - {name: a, seeds: 1}\n  - name: b\n"
                                  "    base: {init_from: \"stage:a\"}\n"
                                  "    grid:\n      lr: [", base);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(t + len, cap - len, "%s%g", i ? ", " : "",
                                1e-5 * (i + 1));
    snprintf(t + len, cap - len, "]\n");
    return t;
}

#endif
