/* The dispatch level and the OpenBLAS kernels it pins (engine/isa.h).
 * Runs once per level, named in BIFOCAL_ISA (meson.build). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>

#include "isa.h"
#include "layers.h"
#include "test_isa_util.h"

/* Before main, the program pinned OpenBLAS to its level's core by starting
 * again with OPENBLAS_CORETYPE set, unless the variable was set already
 * (the user's choice stands).  Either way the variable is set now and
 * names the kernels in use: a failed restart leaves it unset, and a pin
 * OpenBLAS ignored leaves it naming other kernels than run. */
static void test_blas_core_is_the_pinned_one(void **state)
{
    (void)state;
    const char *pinned = getenv("OPENBLAS_CORETYPE");
    const char *in_use = bf_isa_blas_core_in_use();
    if (!bf_isa_blas_core(bf_isa_current()))
        return; /* a build with no x86 levels pins nothing */
    assert_non_null(pinned);
    assert_non_null(in_use);
    if (strcasecmp(pinned, in_use) != 0)
        fail_msg("OPENBLAS_CORETYPE=%s but OpenBLAS runs %s kernels", pinned,
                 in_use);
}

/* The restart that pinned the core keeps the program's name: the kernel
 * names a process after the path exec was given, and /proc/self/exe made
 * every restarted worker "exe" to ps, pgrep and Slurm (the cluster test's
 * pgrep -x bifocal-worker found no ranks).  Where no restart happened (the
 * variable set before start, or OpenBLAS's own pick already the level's)
 * this holds trivially; on a CPU OpenBLAS does not know, the avx2 and
 * avx512 runs restart. */
static void test_restart_keeps_the_name(void **state)
{
    (void)state;
    char exe[PATH_MAX], comm[64] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    FILE *f = fopen("/proc/self/comm", "r");
    assert_non_null(f);
    assert_non_null(fgets(comm, sizeof comm, f));
    fclose(f);
    comm[strcspn(comm, "\n")] = '\0';
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    /* the kernel keeps the first 15 bytes */
    if (strncmp(comm, base, 15) != 0)
        fail_msg("running as '%s', the program is %s", comm, exe);
}

/* Each level pins its own core, and every name goes back to its level. */
static void test_levels_and_cores(void **state)
{
    (void)state;
    for (int l = 0; l < BF_ISA_COUNT; l++) {
        bf_isa back;
        assert_int_equal(bf_isa_from_name(bf_isa_name((bf_isa)l), &back), 0);
        assert_int_equal(back, l);
        const char *core = bf_isa_blas_core((bf_isa)l);
        for (int m = 0; core && m < l; m++)
            assert_string_not_equal(core, bf_isa_blas_core((bf_isa)m));
    }
    bf_isa out = BF_ISA_AVX2;
    assert_int_equal(bf_isa_from_name("avx512f", &out), -1);
    assert_int_equal(out, BF_ISA_AVX2);
    assert_null(bf_isa_blas_core(BF_ISA_COUNT));
}

/* The fused attention runs inside its tiles' limits, at every level with
 * any kernels (it beats sgemm at every shape measured, isa.c), and not
 * past them. */
static void test_attention_rule(void **state)
{
    (void)state;
    assert_true(bf_isa_attention_fused(40, 16));
    assert_true(bf_isa_attention_fused(64, 32));
    assert_true(bf_isa_attention_fused(128, 64));
    assert_true(bf_isa_attention_fused(BF_ATT_FUSED_MAX_T, 16));
    assert_false(bf_isa_attention_fused(BF_ATT_FUSED_MAX_T + 1, 16));
    assert_false(bf_isa_attention_fused(40, BF_ATT_FUSED_MAX_HD + 1));
}

int main(void)
{
    int isa_status = test_isa_from_env();
    if (isa_status != 0)
        return isa_status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas_core_is_the_pinned_one),
        cmocka_unit_test(test_restart_keeps_the_name),
        cmocka_unit_test(test_levels_and_cores),
        cmocka_unit_test(test_attention_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
