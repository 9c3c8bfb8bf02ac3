/* Parser fuzzing: the example job files (configs/job-*) mutated a few
 * thousand times (tests/common/parse_fuzz.h) and fed to bf_yaml_parse and
 * bf_job_config_load_file.  Every result is a success or a failure whose
 * message is non-empty and names the file, with a line > 0 when the YAML
 * itself is broken; never a crash or a sanitizer report.  The sweep files
 * get the same treatment in tests/server/test_sweep_fuzz.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "job_config.h"
#include "parse_fuzz.h"
#include "yaml_json.h"

#define ITERATIONS 1500   /* per example file */

static const char *const examples[] = {"configs/job-dyck.yaml",
                                       "configs/job-counter.json"};

static void check_failure(const bf_error *err, const char *file,
                          int need_line, const bft_text *t)
{
    if (!err->msg[0] || strcmp(err->file, file) != 0 || !strstr(err->msg, file)
        || (need_line && err->line <= 0))
        fail_msg("bad error for %s (line %d, file '%s'): '%s'\n--- input "
                 "(%zu bytes) ---\n%.2000s", file, err->line, err->file,
                 err->msg, t->n, t->p);
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
    char tmpl[] = "/tmp/bf-parse-fuzz-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char file[1100];
    snprintf(file, sizeof file, "%s/job%s", tmpl,
             strstr(example, ".json") ? ".json" : ".yaml");

    bf_rng r;
    bf_rng_seed(&r, bf_rng_key(seed, (uint64_t)strlen(example)));
    bft_text t = {0};
    int ok_yaml = 0, ok_job = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        bft_text_set(&t, orig, len);
        for (int k = 0, n = 1 + (int)bf_rng_below(&r, 4); k < n; k++)
            bft_mutate_text(&r, &t);

        bf_error err;
        bf_error_clear(&err);
        json_t *lines = NULL;
        json_t *doc = bf_yaml_parse(t.p, t.n, file, &lines, &err);
        if (doc) {
            ok_yaml++;
            assert_non_null(lines);
        } else {
            assert_null(lines);
            check_failure(&err, file, 1, &t);
        }
        json_decref(doc);
        json_decref(lines);

        FILE *f = fopen(file, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(t.p, 1, t.n, f), t.n);
        fclose(f);
        bf_job_config cfg;
        bf_error_clear(&err);
        if (bf_job_config_load_file(&cfg, file, &err) == 0) {
            ok_job++;
            char *canon = bf_job_config_to_canonical_json(&cfg);
            assert_non_null(canon);
            free(canon);
        } else {
            /* Broken YAML: the same error, with its line. */
            check_failure(&err, file, !doc, &t);
        }
    }
    print_message("%s: %d mutations, %d parse as YAML, %d load as jobs\n",
                  example, ITERATIONS, ok_yaml, ok_job);
    /* The mutations are small enough that some still parse, and strong
     * enough that some do not. */
    assert_true(ok_yaml > 0 && ok_yaml < ITERATIONS);
    assert_true(ok_job > 0 && ok_job < ok_yaml);
    unlink(file);
    rmdir(tmpl);
    free(t.p);
    free(orig);
}

static uint64_t seed;

static void test_job_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof examples / sizeof *examples; i++)
        fuzz_file(examples[i], seed);
}

int main(void)
{
    seed = bft_fuzz_seed(0x9a75ef0cca1ULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
