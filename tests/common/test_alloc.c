/* bf_xcalloc_arena: zeroed, cache-line aligned, huge-page aligned and
 * marked from BF_ARENA_HUGE up (alloc.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc.h"

static const size_t SIZES[] = {0,
                               1,
                               100,
                               4096 + 3,
                               BF_ARENA_HUGE - 1,
                               BF_ARENA_HUGE,
                               2 * BF_ARENA_HUGE + 12345};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

/* Blocks around n bytes, dirtied and freed: the allocator's next blocks
 * of that size are likely among them. */
static void dirty_heap(size_t n)
{
    enum { BLOCKS = 8 };
    void *q[BLOCKS];
    for (int b = 0; b < BLOCKS; b++) {
        q[b] = malloc(n + 64 * (size_t)b + 1);
        memset(q[b], 0xab, n + 64 * (size_t)b + 1);
    }
    for (int b = 0; b < BLOCKS; b++)
        free(q[b]);
}

/* Zeroed even where the allocator hands back memory just dirtied. */
static void test_zeroed_and_aligned(void **state)
{
    (void)state;
    for (int i = 0; i < N_SIZES; i++) {
        size_t n = SIZES[i];
        for (int round = 0; round < 2; round++) {
            dirty_heap(n);
            unsigned char *p = bf_xcalloc_arena(n);
            uintptr_t at = (uintptr_t)p;
            assert_int_equal(at % BF_ARENA_LINE, 0);
            if (n >= BF_ARENA_HUGE)
                assert_int_equal(at % BF_ARENA_HUGE, 0);
            if (!all_zero(p, n))
                fail_msg("arena of %zu bytes not zeroed (round %d)", n,
                         round);
            memset(p, 0xab, n);
            free(p);
        }
    }
}

/* Whether the mapping holding addr carries the madvise(MADV_HUGEPAGE)
 * flag ("hg" in its VmFlags, proc(5)). */
static int marked_huge(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    int inside = 0, marked = 0;
    uintptr_t a = (uintptr_t)addr;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            inside = a >= lo && a < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0)
            marked = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return marked;
}

/* From BF_ARENA_HUGE up the whole huge pages carry the hint, below it
 * nothing does; where the kernel has no transparent huge pages at all
 * (no /sys/kernel/mm/transparent_hugepage) the hint cannot be seen, and
 * the test says so. */
static void test_huge_page_hint(void **state)
{
    (void)state;
    if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0) {
        print_message("no transparent huge pages in this kernel: the hint "
                      "is not checked\n");
        return;
    }
    unsigned char *big = bf_xcalloc_arena(2 * BF_ARENA_HUGE + 12345);
    unsigned char *small = bf_xcalloc_arena(BF_ARENA_HUGE / 2);
    assert_true(marked_huge(big));
    assert_true(marked_huge(big + 2 * BF_ARENA_HUGE - 1));
    assert_false(marked_huge(small));
    free(big);
    free(small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zeroed_and_aligned),
        cmocka_unit_test(test_huge_page_hint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
