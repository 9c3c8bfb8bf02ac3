/* Sweep files: expansion (count, order, canonical configs) and every kind of
 * rejection, each naming the file, line, field and value. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "job_config.h"
#include "sweep.h"

/* Collects what bf_sweep_expand visits. */
typedef struct seen {
    size_t n;
    char *json[64];
    char hash[64][17];
} seen;

static int collect(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)err;
    seen *s = ctx;
    assert_int_equal(job->index, s->n);
    assert_true(s->n < 64);
    s->json[s->n] = strdup(job->config_json);
    memcpy(s->hash[s->n], job->hash_hex, 17);
    s->n++;
    return 0;
}

static void seen_free(seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->json[i]);
}

static bf_sweep *parse(const char *yaml, bf_error *err)
{
    return bf_sweep_parse("sweep.yaml", "/sweeps", yaml, strlen(yaml), err);
}

static void expand_ok(const char *yaml, seen *out)
{
    bf_error err = {0};
    bf_sweep *sw = parse(yaml, &err);
    if (!sw)
        fail_msg("parse: %s", err.msg);
    memset(out, 0, sizeof *out);
    if (bf_sweep_expand(sw, collect, out, &err) < 0)
        fail_msg("expand: %s", err.msg);
    assert_int_equal(out->n, sw->n_jobs);
    bf_sweep_free(sw);
}

/* The canonical JSON of defaults + the given fields, built without sweep.c. */
static char *expected_json(const char *fields_json)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    json_t *obj = json_loads(fields_json, 0, NULL);
    assert_non_null(obj);
    assert_int_equal(bf_job_config_apply_json(&cfg, obj, NULL, NULL, NULL), 0);
    json_decref(obj);
    return bf_job_config_to_canonical_json(&cfg);
}

static void test_expansion_order_and_configs(void **state)
{
    (void)state;
    seen s;
    expand_ok("name: order\n"
              "base: {steps: 100, eval_depths: [4, 8]}\n"
              "grid:\n"
              "  rope: [rope, spectral, bifocal]\n"
              "  depth: [2, 4]\n"
              "seeds: 2\n", &s);
    assert_int_equal(s.n, 12);
    /* Last axis and then the seed vary fastest. */
    const char *ropes[] = {"rope", "spectral", "bifocal"};
    for (size_t i = 0; i < s.n; i++) {
        char fields[256];
        snprintf(fields, sizeof fields,
                 "{\"steps\": 100, \"eval_depths\": [4, 8], \"rope\": \"%s\","
                 " \"depth\": %d, \"seed\": %zu}",
                 ropes[i / 4], (i / 2) % 2 ? 4 : 2, i % 2 + 1);
        char *want = expected_json(fields);
        assert_string_equal(s.json[i], want);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx",
                 (unsigned long long)bf_fnv1a64(want, strlen(want)));
        assert_string_equal(s.hash[i], hex);
        free(want);
    }
    seen_free(&s);
}

static void test_seed_forms(void **state)
{
    (void)state;
    seen s;
    expand_ok("name: list\ngrid: {task: [dyck, counter]}\nseeds: [1, 2, 7]\n", &s);
    assert_int_equal(s.n, 6);
    assert_non_null(strstr(s.json[2], "\"seed\":7"));
    assert_non_null(strstr(s.json[5], "\"task\":\"counter\""));
    seen_free(&s);

    expand_ok("name: one\nbase: {seed: 42}\n", &s);   /* no grid, no seeds */
    assert_int_equal(s.n, 1);
    assert_non_null(strstr(s.json[0], "\"seed\":42"));
    seen_free(&s);
}

static void test_header_fields(void **state)
{
    (void)state;
    bf_error err = {0};
    bf_sweep *sw = parse("name: h\nmax_attempts: 5\npriority: -2\n"
                         "description: text\ngrid: {lr: [0.001, 0.002]}\n", &err);
    assert_non_null(sw);
    assert_string_equal(sw->name, "h");
    assert_int_equal(sw->max_attempts, 5);
    assert_int_equal(sw->priority, -2);
    assert_int_equal(sw->n_jobs, 2);
    bf_sweep_free(sw);
    sw = parse("name: d\n", &err);
    assert_int_equal(sw->max_attempts, 3);
    assert_int_equal(sw->priority, 0);
    bf_sweep_free(sw);
}

/* One bad sweep: where it must be reported and what the message contains. */
typedef struct bad_case {
    const char *what, *yaml;
    int line;
    const char *field, *needle;
} bad_case;

static const bad_case bad_cases[] = {
    {"unknown top-level key", "name: x\ngrdi: {rope: [rope]}\n", 2, "grdi", "grdi"},
    {"missing name", "grid: {rope: [rope]}\n", 0, "name", "name"},
    {"empty axis", "name: x\ngrid:\n  rope: []\n", 3, "rope", "empty"},
    {"axis not a list", "name: x\ngrid:\n  rope: spectral\n", 3, "rope", "list"},
    {"axis not a job field", "name: x\ngrid:\n  ropes: [rope]\n", 3, "ropes",
     "not a job-config field"},
    {"bad grid value", "name: x\ngrid:\n  rope:\n    - rope\n    - nope\n", 5, "rope",
     "nope"},
    {"wrong type in grid", "name: x\ngrid:\n  depth: [4, \"eight\"]\n", 3, "depth",
     "eight"},
    {"bad base field", "name: x\nbase:\n  steps: 100\n  stepz: 5\n", 4, "stepz",
     "stepz"},
    {"bad base value", "name: x\nbase:\n  lr: -1.0\n", 3, "lr", "-1"},
    {"cross-field via grid", "name: x\ngrid:\n  rope: [rope]\n  depth:\n    - 4\n"
     "    - 200\n", 6, "seq_len", "depth=200"},
    {"cross-field in base", "name: x\nbase:\n  d_model: 64\n  n_heads: 5\n", 4,
     "n_heads", "n_heads"},
    {"duplicate jobs", "name: x\ngrid:\n  rope: [rope, spectral, rope]\n", 3, "rope",
     "duplicate"},
    {"duplicate seeds", "name: x\nseeds:\n  - 1\n  - 3\n  - 1\n", 5, "seeds",
     "duplicate"},
    {"seeds with base.seed", "name: x\nbase: {seed: 3}\nseeds: 2\n", 2, "seed",
     "conflicts"},
    {"seeds zero", "name: x\nseeds: 0\n", 2, "seeds", "0"},
    {"seeds not integers", "name: x\nseeds: [1, two]\n", 2, "seeds", "two"},
    {"max_attempts zero", "name: x\nmax_attempts: 0\n", 2, "max_attempts", "0"},
    {"not a mapping", "- a\n- b\n", 1, "", "mapping"},
    {"YAML syntax error", "name: x\ngrid: {rope: [rope\n", 0, NULL, "sweep.yaml"},
    {"random_positions short", "name: x\nbase: {seq_len: 64}\n"
     "grid:\n  random_positions: [0, 32]\n", 4, "random_positions",
     "32 is fewer positions than seq_len 64"},
    {"prope_fraction above 1", "name: x\ngrid:\n  rope: [prope]\n"
     "  prope_fraction: [0.5, 2]\n", 4, "prope_fraction", "2 is out of range"},
};

static void test_rejections(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
        const bad_case *c = &bad_cases[i];
        bf_error err = {0};
        bf_sweep *sw = parse(c->yaml, &err);
        int rc = -1;
        if (sw) {
            seen s = {0};
            rc = bf_sweep_expand(sw, collect, &s, &err);
            seen_free(&s);
            bf_sweep_free(sw);
        }
        if (rc == 0)
            fail_msg("%s: accepted", c->what);
        print_message("%-24s -> %s\n", c->what, err.msg);
        assert_string_equal(err.file, "sweep.yaml");
        if (c->line)
            assert_int_equal(err.line, c->line);
        if (c->field)
            assert_string_equal(err.field, c->field);
        if (!strstr(err.msg, c->needle))
            fail_msg("%s: message lacks '%s': %s", c->what, c->needle, err.msg);
        if (c->line) {
            char where[64];
            snprintf(where, sizeof where, "sweep.yaml:%d:", c->line);
            assert_non_null(strstr(err.msg, where));
        }
    }
}

/* The baselines' fields (rope: prope, prope_fraction, random_positions)
 * come from the shared job-config table: a grid over them expands to jobs
 * whose canonical configs carry them. */
static void test_baseline_fields(void **state)
{
    (void)state;
    seen s;
    expand_ok("name: baselines\n"
              "base: {seq_len: 64}\n"
              "grid:\n"
              "  rope: [rope, prope]\n"
              "  prope_fraction: [0.25, 0.5]\n"
              "  random_positions: [0, 256]\n", &s);
    assert_int_equal(s.n, 8);
    for (size_t i = 0; i < s.n; i++) {
        char fields[256];
        snprintf(fields, sizeof fields,
                 "{\"seq_len\": 64, \"rope\": \"%s\", \"prope_fraction\": "
                 "%s, \"random_positions\": %d}", i < 4 ? "rope" : "prope",
                 (i / 2) % 2 ? "0.5" : "0.25", i % 2 ? 256 : 0);
        char *want = expected_json(fields);
        assert_string_equal(s.json[i], want);
        free(want);
    }
    assert_non_null(strstr(s.json[7], "\"prope_fraction\":0.5,"
                                      "\"random_positions\":256,"
                                      "\"rope\":\"prope\""));
    seen_free(&s);
}

/* The visitor can stop the expansion, and its error comes back. */
static int refuse_third(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)ctx;
    return job->index == 2 ? bf_error_set(err, NULL, 0, NULL, "stop here") : 0;
}

static void test_visitor_stops(void **state)
{
    (void)state;
    bf_error err = {0};
    bf_sweep *sw = parse("name: x\nseeds: 5\n", &err);
    assert_int_equal(bf_sweep_expand(sw, refuse_third, NULL, &err), -1);
    assert_string_equal(err.msg, "stop here");
    bf_sweep_free(sw);
}

/* Every example in configs/sweep-*.yaml is a valid sweep. */
static void test_example_configs(void **state)
{
    (void)state;
    const char *root = getenv("BF_SOURCE_ROOT");
    char pattern[1024];
    snprintf(pattern, sizeof pattern, "%s/configs/sweep-*.yaml", root ? root : ".");
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    assert_true(g.gl_pathc >= 3);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "rb");
        assert_non_null(f);
        char text[65536];
        size_t n = fread(text, 1, sizeof text, f);
        fclose(f);
        bf_error err = {0};
        bf_sweep *sw = bf_sweep_parse(g.gl_pathv[i], NULL, text, n, &err);
        if (!sw)
            fail_msg("%s", err.msg);
        seen s = {0};
        int rc = sw->n_jobs <= 64 ? bf_sweep_expand(sw, collect, &s, &err) : -1;
        if (rc < 0)
            fail_msg("%s: %s", g.gl_pathv[i], err.msg);
        assert_true(s.n > 0);
        seen_free(&s);
        bf_sweep_free(sw);
    }
    globfree(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expansion_order_and_configs),
        cmocka_unit_test(test_seed_forms),
        cmocka_unit_test(test_header_fields),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_baseline_fields),
        cmocka_unit_test(test_visitor_stops),
        cmocka_unit_test(test_example_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
