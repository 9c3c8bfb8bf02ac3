/* Sweep-file fuzzing: configs/sweep-*.yaml and configs/quickstart.yaml
 * mutated a few thousand times (tests/common/parse_fuzz.h) and fed to
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
    "configs/sweep-structure-gap.yaml", "configs/quickstart.yaml"};

static void check_failure(const bf_error *err, const char *file,
                          int need_line, const char *stage, const bft_text *t)
{
    if (!err->msg[0] || strcmp(err->file, file) != 0 || !strstr(err->msg, file)
        || (need_line && err->line <= 0))
        fail_msg("bad %s error (line %d, file '%s'): '%s'\n--- input (%zu "
                 "bytes) ---\n%.2000s", stage, err->line, err->file, err->msg,
                 t->n, t->p);
}

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
    return 0;
}

static void fuzz_file(const char *example, uint64_t seed)
{
    const char *root = getenv("BF_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root ? root : ".", example);
    size_t len = 0;
    char *orig = bft_slurp(path, &len);
    if (!orig)
        fail_msg("cannot read %s", path);
    const char *file = strrchr(example, '/') + 1;
    bf_rng r;
    bf_rng_seed(&r, bf_rng_key(seed, (uint64_t)strlen(example)));
    bft_text t = {0};
    int parsed = 0, expanded = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        bft_text_set(&t, orig, len);
        for (int k = 0, n = 1 + (int)bf_rng_below(&r, 4); k < n; k++)
            bft_mutate_text(&r, &t);
        bf_error err;
        bf_error_clear(&err);
        json_t *doc = bf_yaml_parse(t.p, t.n, file, NULL, &err);
        int yaml_ok = doc != NULL;
        json_decref(doc);
        bf_error_clear(&err);
        bf_sweep *sw = bf_sweep_parse(file, t.p, t.n, &err);
        if (!sw) {
            check_failure(&err, file, !yaml_ok, "parse", &t);
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
            check_failure(&err, file, 0, "expand", &t);
            assert_true(v.next < sw->n_jobs);
        }
        bf_sweep_free(sw);
    }
    print_message("%s: %d mutations, %d parse, %d expand\n", example,
                  ITERATIONS, parsed, expanded);
    assert_true(parsed > 0 && parsed < ITERATIONS);
    assert_true(expanded > 0);
    free(t.p);
    free(orig);
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
