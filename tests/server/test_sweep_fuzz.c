/* Sweep-file fuzzing: configs/sweep-*.yaml, configs/quickstart.yaml and
 * configs/surgical.yaml (stages, zip, exclude) mutated a few thousand times (tests/common/parse_fuzz.h) and fed to
 * bf_sweep_parse and bf_sweep_expand.  Every result is a success or a
 * failure whose message is non-empty and names the file, with a line > 0
 * when the YAML itself is broken; never a crash or a sanitizer report.
 * Expansion visits exactly n_jobs jobs, each a valid configuration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../common/parse_fuzz.h"
#include "sweep.h"
#include "yaml_json.h"

#define ITERATIONS 800    /* per example file */
#define MAX_EXPAND 20000  /* bigger mutated sweeps are parsed, not expanded */

static const char *const examples[] = {
    "configs/sweep-lr.yaml", "configs/sweep-smoke.yaml",
    "configs/sweep-structure-gap.yaml", "configs/quickstart.yaml",
    "configs/sweep-shapes.yaml", "configs/surgical.yaml",
    "configs/sweep-adaptive.yaml"};

typedef struct visit_ctx { size_t next; } visit_ctx;

static int visit(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    visit_ctx *v = ctx;
    (void)err;
    assert_int_equal(job->index, v->next);
    v->next++;
    assert_int_equal(bf_job_config_validate(job->cfg, NULL), 0);
    assert_non_null(job->config_json);
    assert_int_equal(strlen(job->hash_hex), 16);
    if (job->source != BF_SWEEP_NO_SOURCE)
        assert_true(job->source < job->index);
    return 0;
}

static void fuzz_file(const char *example, uint64_t seed)
{
    bft_fuzz_run run;
    bft_fuzz_begin(&run, example, seed);
    const char *file = strrchr(example, '/') + 1;
    bft_text t = {0};
    int parsed = 0, expanded = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        bft_fuzz_next(&run, &t);
        bf_error err;
        bf_error_clear(&err);
        json_t *doc = bf_yaml_parse(t.p, t.n, file, NULL, &err);
        int yaml_ok = doc != NULL;
        json_decref(doc);
        bf_error_clear(&err);
        bf_sweep *sw = bf_sweep_parse(file, NULL, t.p, t.n, &err);
        if (!sw) {
            bft_assert_error_names(&err, file, !yaml_ok, "parse", &t);
            continue;
        }
        parsed++;
        assert_true(sw->n_jobs >= 1);
        if (sw->n_jobs > MAX_EXPAND) {
            bf_sweep_free(sw);
            continue;
        }
        visit_ctx v = {0};
        bf_error_clear(&err);
        if (bf_sweep_expand(sw, visit, &v, &err) == 0) {
            expanded++;
            assert_int_equal(v.next, sw->n_jobs);
        } else {
            bft_assert_error_names(&err, file, 0, "expand", &t);
            assert_true(v.next < sw->n_jobs);
        }
        bf_sweep_free(sw);
    }
    print_message("%s: %d mutations, %d parse, %d expand\n", example,
                  ITERATIONS, parsed, expanded);
    assert_true(parsed > 0 && parsed < ITERATIONS);
    assert_true(expanded > 0);
    bft_fuzz_end(&run, &t);
}

static uint64_t seed;

static void test_sweep_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof examples / sizeof *examples; i++)
        fuzz_file(examples[i], seed);
}

int main(void)
{
    seed = bft_fuzz_seed(0x5eeb5f0cca1ULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
