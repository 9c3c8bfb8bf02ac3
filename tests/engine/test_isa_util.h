/* The dispatch level an engine test runs at: tests/engine/meson.build runs
 * the gradient checks, the PyTorch cross-check and the trainer's tests once
 * per level, naming it in BIFOCAL_ISA. */
#ifndef TEST_ISA_UTIL_H
#define TEST_ISA_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "isa.h"

/* Puts the level BIFOCAL_ISA names in use and says which.  Returns 0, 77
 * (meson's SKIP, with the reason on stderr) when this CPU lacks the level,
 * or 1 for an unknown name. */
static inline int test_isa_from_env(void)
{
    const char *want = getenv("BIFOCAL_ISA");
    bf_isa isa = bf_isa_best();
    if (want && *want && bf_isa_from_name(want, &isa) != 0) {
        fprintf(stderr, "FAIL: BIFOCAL_ISA: unknown level '%s'\n", want);
        return 1;
    }
    bf_error err;
    if (bf_isa_use(isa, &err) != 0) {
        fprintf(stderr, "SKIP: %s\n", err.msg);
        return 77;
    }
    fprintf(stderr, "dispatch level: %s\n", bf_isa_name(isa));
    return 0;
}

#endif
