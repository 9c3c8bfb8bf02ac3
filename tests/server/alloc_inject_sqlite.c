/* Linked into bifocald-allocfail only: SQLite's allocations go through the
 * same injection counter as bf_xmalloc's (common/alloc.h), so the N-th
 * allocation of the daemon may be one of SQLite's, which then returns
 * SQLITE_NOMEM instead of memory.  Installed before main, before SQLite is
 * first used. */
#include <sqlite3.h>

#include "alloc.h"

static sqlite3_mem_methods real;

static void *counted_malloc(int n)
{
    return bf_alloc_inject_fails() ? NULL : real.xMalloc(n);
}

static void *counted_realloc(void *p, int n)
{
    return bf_alloc_inject_fails() ? NULL : real.xRealloc(p, n);
}

__attribute__((constructor)) static void count_sqlite_allocations(void)
{
    sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real);
    sqlite3_mem_methods counted = real;
    counted.xMalloc = counted_malloc;
    counted.xRealloc = counted_realloc;
    sqlite3_config(SQLITE_CONFIG_MALLOC, &counted);
}
