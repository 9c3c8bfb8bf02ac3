#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "log.h"

/* Logs and aborts: abort() rather than exit() so a core dump (or the
 * sanitizer's report) shows who asked. */
static void alloc__oom(size_t n)
{
    bf_log_error("out of memory allocating %zu bytes", n);
    abort();
}

void *bf_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        alloc__oom(n);
    return p;
}

void *bf_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        alloc__oom(count * size);
    return p;
}

void *bf_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        alloc__oom(n);
    return q;
}

char *bf_xstrdup(const char *s)
{
    return bf_xstrndup(s, strlen(s));
}

char *bf_xstrndup(const char *s, size_t n)
{
    n = strnlen(s, n);
    char *d = bf_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void bf_alloc_init(void)
{
    json_set_alloc_funcs(bf_xmalloc, free);
}
