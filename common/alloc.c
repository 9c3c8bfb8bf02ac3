#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <jansson.h>

#include "log.h"

/* Logs and aborts: abort() rather than exit() so a core dump (or the
 * sanitizer's report) shows who asked. */
static void alloc__oom(size_t n)
{
    bf_log_error("out of memory allocating %zu bytes", n);
    abort();
}

#ifdef BF_ALLOC_INJECT
#include <stdatomic.h>

static atomic_long inject_count;
static atomic_int inject_armed;
static long inject_fail_at;
static int inject_repeat;

void bf_alloc_inject_arm(void)
{
    const char *at = getenv("BF_ALLOC_FAIL_AT");
    const char *repeat = getenv("BF_ALLOC_FAIL_REPEAT");
    inject_fail_at = at ? atol(at) : 0;
    inject_repeat = repeat && atoi(repeat) != 0;
    atomic_store(&inject_count, 0);
    atomic_store(&inject_armed, 1);
}

int bf_alloc_inject_fails(void)
{
    if (!atomic_load(&inject_armed))
        return 0;
    long k = atomic_fetch_add(&inject_count, 1) + 1;
    if (inject_fail_at <= 0)
        return 0;
    return inject_repeat ? k >= inject_fail_at : k == inject_fail_at;
}

long bf_alloc_inject_count(void)
{
    return atomic_load(&inject_count);
}

#define INJECTED_FAILURE() bf_alloc_inject_fails()
#else
#define INJECTED_FAILURE() 0
#endif

void *bf_xmalloc(size_t n)
{
    void *p = INJECTED_FAILURE() ? NULL : malloc(n ? n : 1);
    if (!p)
        alloc__oom(n);
    return p;
}

void *bf_xcalloc(size_t count, size_t size)
{
    void *p = INJECTED_FAILURE() ? NULL
            : calloc(count ? count : 1, size ? size : 1);
    if (!p)
        alloc__oom(count * size);
    return p;
}

void *bf_xcalloc_arena(size_t n)
{
    size_t align = n >= BF_ARENA_HUGE ? BF_ARENA_HUGE : BF_ARENA_LINE;
    void *p = NULL;
    if (INJECTED_FAILURE() || posix_memalign(&p, align, n ? n : 1) != 0)
        alloc__oom(n);
#ifdef MADV_HUGEPAGE
    /* the whole huge pages only: a tail's page would hold more than the
     * array asked for */
    if (n >= BF_ARENA_HUGE)
        (void)madvise(p, n / BF_ARENA_HUGE * BF_ARENA_HUGE, MADV_HUGEPAGE);
#endif
    memset(p, 0, n);
    return p;
}

void *bf_xrealloc(void *p, size_t n)
{
    void *q = INJECTED_FAILURE() ? NULL : realloc(p, n ? n : 1);
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
