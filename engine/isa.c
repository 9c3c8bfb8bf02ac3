/* Runtime CPU dispatch: which copy of layers.c runs; see isa.h. */
#include "isa.h"

#include <stdlib.h>
#include <string.h>

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

/* Every program starts on its level before main; a bad BIFOCAL_ISA leaves
 * the best one, for the program to refuse through bf_isa_use_env. */
__attribute__((constructor)) static void isa__at_start(void)
{
    if (bf_isa_use_env(NULL) != 0)
        bf_isa_use(bf_isa_best(), NULL);
}
