/* common/mem_limit: the least memory limit of a process's cgroup and its
 * ancestors, v2 and v1, over a fake hierarchy in a scratch directory (its
 * file `target` stands for /proc/self/cgroup). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "mem_limit.h"
#include "scratch.h"

/* Writes text to dir/rel, creating the directories on the way. */
static void put(const scratch *s, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", s->dir, rel);
    for (char *p = path + strlen(s->dir) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t limit(const scratch *s)
{
    return bf_mem_cgroup_limit(s->path, s->dir);
}

static void v2_least_of_cgroup_and_ancestors(void **state)
{
    scratch *s = *state;
    put(s, "target", "0::/slurm/job7/step0\n");
    put(s, "slurm/job7/step0/memory.max", "max\n");
    put(s, "slurm/job7/memory.max", "4294967296\n");
    put(s, "slurm/memory.max", "8589934592\n");
    assert_int_equal(limit(s), (size_t)4294967296ull);
    put(s, "memory.max", "1073741824\n");   /* the root's, least */
    assert_int_equal(limit(s), (size_t)1073741824ull);
}

static void v1_memory_controller_line(void **state)
{
    scratch *s = *state;
    put(s, "target", "9:name=systemd:/\n4:memory:/docker/abc\n"
                     "3:cpu,cpuacct:/docker/abc\n0::/\n");
    put(s, "memory/docker/abc/memory.limit_in_bytes", "536870912\n");
    put(s, "memory/memory.limit_in_bytes", "9223372036854771712\n");
    put(s, "cpu,cpuacct/docker/abc/memory.limit_in_bytes", "1\n");
    assert_int_equal(limit(s), (size_t)536870912);
}

/* A namespaced container shows its cgroup's path but mounts it as the
 * root: the limit is found at the root. */
static void path_not_mounted_falls_back_to_root(void **state)
{
    scratch *s = *state;
    put(s, "target", "0::/kubepods/pod1/ctr\n");
    put(s, "memory.max", "2147483648\n");
    assert_int_equal(limit(s), (size_t)2147483648ull);
}

static void no_limit_is_size_max(void **state)
{
    scratch *s = *state;
    assert_int_equal(limit(s), SIZE_MAX);   /* no /proc file */
    put(s, "target", "0::/user.slice\n");
    assert_int_equal(limit(s), SIZE_MAX);   /* no memory.max anywhere */
    put(s, "user.slice/memory.max", "max\n");
    put(s, "memory.max", "garbage\n");
    assert_int_equal(limit(s), SIZE_MAX);
}

static void machine_limit_is_at_most_physical(void **state)
{
    (void)state;
    size_t m = bf_mem_limit();
    assert_true(m > 0);
    assert_true(m <= bf_mem_cgroup_limit("/proc/self/cgroup",
                                         "/sys/fs/cgroup"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(v2_least_of_cgroup_and_ancestors,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(v1_memory_controller_line,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(path_not_mounted_falls_back_to_root,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test_setup_teardown(no_limit_is_size_max,
                                        scratch_setup, scratch_teardown),
        cmocka_unit_test(machine_limit_is_at_most_physical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
