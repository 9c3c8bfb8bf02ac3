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

static void fuzz_file(const char *example, uint64_t seed)
{
    bft_fuzz_run run;
    bft_fuzz_begin(&run, example, seed);
    char tmpl[] = "/tmp/bf-parse-fuzz-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char file[1100];
    snprintf(file, sizeof file, "%s/job%s", tmpl,
             strstr(example, ".json") ? ".json" : ".yaml");

    bft_text t = {0};
    int ok_yaml = 0, ok_job = 0;
    for (int it = 0; it < ITERATIONS; it++) {
        bft_fuzz_next(&run, &t);

        bf_error err;
        bf_error_clear(&err);
        json_t *lines = NULL;
        json_t *doc = bf_yaml_parse(t.p, t.n, file, &lines, &err);
        if (doc) {
            ok_yaml++;
            assert_non_null(lines);
        } else {
            assert_null(lines);
            bft_assert_error_names(&err, file, 1, "YAML", &t);
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
            bft_assert_error_names(&err, file, !doc, "job", &t);
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
    bft_fuzz_end(&run, &t);
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
