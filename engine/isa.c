/* Runtime CPU dispatch: which copy of layers.c runs; see isa.h. */
#include "isa.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h>

#include "layers.h"

static const char *const isa_names[BF_ISA_COUNT] = {
    [BF_ISA_BASELINE] = "baseline",
    [BF_ISA_AVX2] = "avx2",
    [BF_ISA_AVX512] = "avx512",
};

/* The copies this build carries: the x86-64 levels exist only there
 * (engine/meson.build defines BF_KERNELS_X86). */
static const bf_kernels *const isa_tables[BF_ISA_COUNT] = {
    [BF_ISA_BASELINE] = &bf_kernels_baseline,
#ifdef BF_KERNELS_X86
    [BF_ISA_AVX2] = &bf_kernels_avx2,
    [BF_ISA_AVX512] = &bf_kernels_avx512,
#endif
};

/* OpenBLAS's kernels for each level (OPENBLAS_CORETYPE names).  OpenBLAS
 * picks its own at load time by CPU model, so two nodes at one level
 * could run different products (Cooperlake's and SkylakeX's blockings,
 * Zen's and Haswell's) and round differently; the level pins OpenBLAS
 * too, so that one level means the same instructions in every product and
 * every pass on every node.  Prescott (SSE3), not Opteron, for the
 * baseline: Opteron's kernels use 3DNow! prefetches, which Zen dropped
 * (SIGILL). */
static const char *const isa_blas_cores[BF_ISA_COUNT] = {
#ifdef BF_KERNELS_X86
    [BF_ISA_BASELINE] = "Prescott",
    [BF_ISA_AVX2] = "Haswell",
    [BF_ISA_AVX512] = "SkylakeX",
#endif
};

const bf_kernels *bf_kernels_active = &bf_kernels_baseline;
static bf_isa isa_current = BF_ISA_BASELINE;

const char *bf_isa_name(bf_isa isa)
{
    return isa >= 0 && isa < BF_ISA_COUNT ? isa_names[isa] : "?";
}

/* What the CPU can run; __builtin_cpu_supports also checks that the OS
 * saves the wide registers (XCR0). */
static int isa__cpu_has(bf_isa isa)
{
#ifdef BF_KERNELS_X86
    __builtin_cpu_init();
    switch (isa) {
    case BF_ISA_BASELINE:
        return 1;
    case BF_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case BF_ISA_AVX512:
        return isa__cpu_has(BF_ISA_AVX2) &&
               __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
    default:
        return 0;
    }
#else
    return isa == BF_ISA_BASELINE;
#endif
}

const char *bf_isa_blas_core(bf_isa isa)
{
    return isa >= 0 && isa < BF_ISA_COUNT ? isa_blas_cores[isa] : NULL;
}

const char *bf_isa_blas_core_in_use(void)
{
    return openblas_get_corename();
}

/* Within the tiles' limits the fused attention beats sgemm at every
 * level, whatever OpenBLAS's kernels, at the heads of the study (seq 40,
 * head_dim 16), config A (64, 32) and B (128, 64), so the path depends on
 * the shape alone and a level stays bit-identical.  bench_attention
 * checks the rule at each level on every run (docs/training.md has its
 * latest figures). */
int bf_isa_attention_fused(int T, int head_dim)
{
    return BF_ATT_FUSED_FITS(T, head_dim);
}

int bf_isa_from_name(const char *name, bf_isa *out)
{
    for (int i = 0; i < BF_ISA_COUNT; i++)
        if (strcmp(name, isa_names[i]) == 0) {
            *out = (bf_isa)i;
            return 0;
        }
    return -1;
}

int bf_isa_supported(bf_isa isa)
{
    return isa >= 0 && isa < BF_ISA_COUNT && isa_tables[isa] &&
           isa__cpu_has(isa);
}

bf_isa bf_isa_best(void)
{
    bf_isa best = BF_ISA_BASELINE;
    for (int i = 0; i < BF_ISA_COUNT; i++)
        if (bf_isa_supported((bf_isa)i))
            best = (bf_isa)i;
    return best;
}

bf_isa bf_isa_current(void)
{
    return isa_current;
}

int bf_isa_use(bf_isa isa, bf_error *err)
{
    if (!bf_isa_supported(isa))
        return bf_error_set(err, NULL, 0, NULL,
                            "this CPU or build cannot run the %s kernels "
                            "(best here: %s)",
                            bf_isa_name(isa), bf_isa_name(bf_isa_best()));
    isa_current = isa;
    bf_kernels_active = isa_tables[isa];
    return 0;
}

int bf_isa_use_env(bf_error *err)
{
    const char *want = getenv("BIFOCAL_ISA");
    if (!want || !*want)
        return bf_isa_use(bf_isa_best(), err);
    bf_isa isa;
    if (bf_isa_from_name(want, &isa) != 0)
        return bf_error_set(err, NULL, 0, NULL,
                            "BIFOCAL_ISA: unknown level '%s' (baseline, "
                            "avx2 or avx512)", want);
    if (!bf_isa_supported(isa))
        return bf_error_set(err, NULL, 0, NULL,
                            "BIFOCAL_ISA=%s: this CPU or build cannot run "
                            "it (best here: %s)", want,
                            bf_isa_name(bf_isa_best()));
    return bf_isa_use(isa, err);
}

/* Starts this program again, same pid and arguments, from the file it was
 * loaded from: /proc/self/exe resolved, because exec names the process
 * after the path it is given (ps, pgrep, top and Slurm would have shown
 * every restarted worker as "exe").  Returns only if exec failed. */
static void isa__restart(char **argv)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n > 0) {
        path[n] = '\0';
        execv(path, argv);
    }
    execv("/proc/self/exe", argv);
}

/* OpenBLAS chose its kernels when it was loaded, before any code of ours
 * ran, and reads OPENBLAS_CORETYPE only then: to pin them, the program
 * starts again (same pid, same arguments) with the variable set.  The
 * restarted program finds it set and goes on, as it does when the user set
 * it (their choice stands).  If exec fails it runs on at OpenBLAS's own
 * pick, which bf_isa_blas_core_in_use reports. */
static void isa__pin_blas(char **argv)
{
    const char *want = bf_isa_blas_core(isa_current);
    if (!want || !argv || !argv[0] || getenv("OPENBLAS_CORETYPE"))
        return;
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0)
        return;
    /* Already running them (OpenBLAS's own pick; on a CPU newer than it
     * knows, Prescott's, the baseline's): no restart, but the variable is
     * set all the same, so that it names the kernels in use here too and
     * the processes this one starts pick the same. */
    if (strcasecmp(bf_isa_blas_core_in_use(), want) == 0)
        return;
    isa__restart(argv);
    unsetenv("OPENBLAS_CORETYPE");
}

/* Every program starts on its level before main, OpenBLAS's kernels
 * pinned to it; a bad BIFOCAL_ISA leaves the best level, for the program
 * to refuse through bf_isa_use_env.  glibc passes a constructor of the
 * executable main's arguments. */
__attribute__((constructor)) static void isa__at_start(int argc, char **argv,
                                                       char **envp)
{
    (void)argc;
    (void)envp;
    if (bf_isa_use_env(NULL) != 0)
        bf_isa_use(bf_isa_best(), NULL);
    isa__pin_blas(argv);
}
