#include "args.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

int bf_parse_int_arg(const char *s, long min, long max, int *out)
{
    if (!s || !*s || max > INT_MAX || min < INT_MIN)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}
