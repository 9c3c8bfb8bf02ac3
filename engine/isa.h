/* Runtime CPU dispatch of the engine's hot loops.
 *
 * layers.c (every elementwise pass of the model and the optimizer) is
 * compiled once per level below, each copy with that level's instruction
 * set, so one portable binary runs on every node of a mixed cluster and uses
 * the widest vectors each node has.  At start-up the best level the CPU
 * supports is chosen, or the one BIFOCAL_ISA names (baseline, avx2,
 * avx512).  The matrix products are OpenBLAS's, and the level pins its
 * kernels too (bf_isa_blas_core): at start-up, before main, a program whose
 * OpenBLAS picked other kernels than its level's starts itself again (same
 * pid and arguments) with OPENBLAS_CORETYPE set, unless that variable is
 * already set, in which case the user's choice stands.
 *
 * Results are bit-identical within a level; across levels they differ by
 * float rounding (AVX2 fuses multiply-adds, vector widths and OpenBLAS's
 * kernels change the order of sums), so reproducing a run bit for bit on
 * another CPU needs the same level forced on both (docs/training.md). */
#ifndef BF_ISA_H
#define BF_ISA_H

#include "bf_error.h"

typedef enum bf_isa {
    BF_ISA_BASELINE, /* the compiler's portable default (x86-64: SSE2) */
    BF_ISA_AVX2,     /* AVX2 + FMA (x86-64-v3) */
    BF_ISA_AVX512,   /* AVX-512 F/BW/DQ/VL (x86-64-v4) */
    BF_ISA_COUNT
} bf_isa;

/* "baseline", "avx2" or "avx512". */
const char *bf_isa_name(bf_isa isa);

/* The level named `name` into *out; returns 0, or -1 for an unknown name. */
int bf_isa_from_name(const char *name, bf_isa *out);

/* The OpenBLAS core (an OPENBLAS_CORETYPE name) that level isa pins, or
 * NULL where this build pins none. */
const char *bf_isa_blas_core(bf_isa isa);

/* The OpenBLAS core whose kernels run in this process. */
const char *bf_isa_blas_core_in_use(void);

/* Whether attention over T positions with heads of head_dim takes the
 * fused small-head path (layers.h, attention_forward): within its tiles'
 * limits, where it beats sgemm at every level measured (isa.c).  A pure
 * function of its arguments, so every level and core take the same
 * path. */
int bf_isa_attention_fused(int T, int head_dim);

/* Whether this build carries level isa and this CPU (and OS) can run it. */
int bf_isa_supported(bf_isa isa);

/* The widest level bf_isa_supported. */
bf_isa bf_isa_best(void);

/* The level in use. */
bf_isa bf_isa_current(void);

/* Uses level isa from now on.  Returns 0, or -1 with err naming the level
 * when bf_isa_supported says no.  Call it between steps, never while
 * another thread runs the engine. */
int bf_isa_use(bf_isa isa, bf_error *err);

/* Uses the level BIFOCAL_ISA names, or bf_isa_best when it is unset or
 * empty.  Returns 0, or -1 with err naming the variable and its value when
 * the name is unknown or the CPU lacks the level.  Every program runs this
 * at start-up (a constructor, which falls back to bf_isa_best on a bad
 * value); programs call it again to refuse a bad value (bifocal-worker
 * exits with usage status 2). */
int bf_isa_use_env(bf_error *err);

#endif
