/* YAML -> JSON: core-schema typing, the line table, and refused input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "yaml_json.h"

static json_t *parse(const char *text, json_t **lines, bf_error *err)
{
    return bf_yaml_parse(text, strlen(text), "t.yaml", lines, err);
}

/* Parses text expected to fail; checks line and message fragment. */
static void expect_error(const char *text, int line, const char *fragment)
{
    bf_error err;
    json_t *lines = (json_t *)1;
    json_t *v = parse(text, &lines, &err);
    assert_null(v);
    assert_null(lines);
    assert_int_equal(err.line, line);
    assert_string_equal(err.file, "t.yaml");
    if (!strstr(err.msg, fragment))
        fail_msg("message \"%s\" lacks \"%s\"", err.msg, fragment);
}

static void test_scalar_types(void **state)
{
    (void)state;
    const char *text =
        "n1: null\nn2: ~\nn3:\nt: true\nf: False\n"
        "i: 42\nneg: -7\nplus: +3\noct: 0o17\nhex: 0x1F\n"
        "r1: 1e-3\nr2: .5\nr3: 2.\nr4: -1.5E+2\nr5: 0e-400\nr6: 4.9e-324\n"
        "s1: \"4\"\ns2: 'true'\ns3: yes\ns4: 1_000\ns5: hello world\n"
        "s6: |\n  block\n";
    bf_error err;
    json_t *v = parse(text, NULL, &err);
    assert_non_null(v);
    assert_true(json_is_null(json_object_get(v, "n1")));
    assert_true(json_is_null(json_object_get(v, "n2")));
    assert_true(json_is_null(json_object_get(v, "n3")));
    assert_true(json_is_true(json_object_get(v, "t")));
    assert_true(json_is_false(json_object_get(v, "f")));
    assert_int_equal(json_integer_value(json_object_get(v, "i")), 42);
    assert_int_equal(json_integer_value(json_object_get(v, "neg")), -7);
    assert_int_equal(json_integer_value(json_object_get(v, "plus")), 3);
    assert_int_equal(json_integer_value(json_object_get(v, "oct")), 15);
    assert_int_equal(json_integer_value(json_object_get(v, "hex")), 31);
    assert_true(json_is_real(json_object_get(v, "r1")));
    assert_true(json_real_value(json_object_get(v, "r1")) == 1e-3);
    assert_true(json_real_value(json_object_get(v, "r2")) == 0.5);
    assert_true(json_real_value(json_object_get(v, "r3")) == 2.0);
    assert_true(json_real_value(json_object_get(v, "r4")) == -150.0);
    /* 0 spelled small is 0; a subnormal double is read as it is (the job
     * config judges it) */
    assert_true(json_real_value(json_object_get(v, "r5")) == 0.0);
    assert_true(json_real_value(json_object_get(v, "r6")) == 4.9e-324);
    assert_string_equal(json_string_value(json_object_get(v, "s1")), "4");
    assert_string_equal(json_string_value(json_object_get(v, "s2")), "true");
    assert_string_equal(json_string_value(json_object_get(v, "s3")), "yes");
    assert_string_equal(json_string_value(json_object_get(v, "s4")), "1_000");
    assert_string_equal(json_string_value(json_object_get(v, "s5")),
                        "hello world");
    assert_string_equal(json_string_value(json_object_get(v, "s6")), "block\n");
    json_decref(v);
}

static void test_line_table(void **state)
{
    (void)state;
    const char *text =
        "# a sweep\n"              /* 1 */
        "name: demo\n"             /* 2 */
        "base:\n"                  /* 3 */
        "  steps: 200\n"           /* 4 */
        "  eval_depths: [4, 8]\n"  /* 5 */
        "grid:\n"                  /* 6 */
        "  rope:\n"                /* 7 */
        "    - rope\n"             /* 8 */
        "    - bifocal\n"          /* 9 */
        "  a/b~c: 1\n";            /* 10 */
    bf_error err;
    json_t *lines = NULL;
    json_t *v = parse(text, &lines, &err);
    assert_non_null(v);
    assert_non_null(lines);
    assert_int_equal(bf_yaml_line(lines, ""), 2);
    assert_int_equal(bf_yaml_line(lines, "/name"), 2);
    assert_int_equal(bf_yaml_line(lines, "/base"), 3);
    assert_int_equal(bf_yaml_line(lines, "/base/steps"), 4);
    assert_int_equal(bf_yaml_line(lines, "/base/eval_depths/1"), 5);
    assert_int_equal(bf_yaml_line(lines, "/grid/rope"), 7);
    assert_int_equal(bf_yaml_line(lines, "/grid/rope/0"), 8);
    assert_int_equal(bf_yaml_line(lines, "/grid/rope/1"), 9);
    assert_int_equal(bf_yaml_line(lines, "/grid/a~1b~0c"), 10);
    assert_int_equal(bf_yaml_line(lines, "/grid/rope/2"), 0);
    assert_int_equal(bf_yaml_line(lines, "/nothing"), 0);
    assert_int_equal(bf_yaml_line(NULL, "/name"), 0);

    json_t *base = bf_yaml_lines_subtree(lines, "/base");
    assert_int_equal(bf_yaml_line(base, ""), 3);
    assert_int_equal(bf_yaml_line(base, "/steps"), 4);
    assert_int_equal(bf_yaml_line(base, "/eval_depths/0"), 5);
    assert_int_equal(bf_yaml_line(base, "/rope"), 0);
    assert_int_equal(json_object_size(base), 5);
    json_decref(base);
    json_decref(v);
    json_decref(lines);
}

static void test_subtree_respects_boundaries(void **state)
{
    (void)state;
    bf_error err;
    json_t *lines;
    json_t *v = parse("a:\n  x: 1\nab:\n  y: 2\n", &lines, &err);
    assert_non_null(v);
    json_t *a = bf_yaml_lines_subtree(lines, "/a");
    assert_int_equal(bf_yaml_line(a, "/x"), 2);
    assert_int_equal(json_object_size(a), 2); /* "" and "/x", not "/ab..." */
    json_decref(a);
    json_decref(v);
    json_decref(lines);
}

static void test_json_input(void **state)
{
    (void)state;
    const char *text = "{\n\t\"task\":\"dyck\",\n\t\"eval_depths\": [4,\n 8],"
                       "\n\t\"lr\": 1e-3\n}\n";
    bf_error err;
    json_t *lines;
    json_t *v = parse(text, &lines, &err);
    if (!v)
        fail_msg("%s", err.msg);
    assert_string_equal(json_string_value(json_object_get(v, "task")), "dyck");
    assert_int_equal(json_array_size(json_object_get(v, "eval_depths")), 2);
    assert_true(json_real_value(json_object_get(v, "lr")) == 1e-3);
    assert_int_equal(bf_yaml_line(lines, "/task"), 2);
    assert_int_equal(bf_yaml_line(lines, "/eval_depths/1"), 4);
    assert_int_equal(bf_yaml_line(lines, "/lr"), 5);
    json_decref(v);
    json_decref(lines);
}

static void test_empty_document_is_null(void **state)
{
    (void)state;
    bf_error err;
    json_t *v = parse("# only a comment\n", NULL, &err);
    assert_non_null(v);
    assert_true(json_is_null(v));
    json_decref(v);
}

static void test_syntax_error_has_line(void **state)
{
    (void)state;
    expect_error("task: dyck\ndepth: [1, 2\nsteps: 3\n", 3, "YAML syntax error");
    expect_error("a: 1\n  b: 2\n", 2, "YAML syntax error");
}

static void test_duplicate_key(void **state)
{
    (void)state;
    expect_error("steps: 1\nlr: 0.1\nsteps: 2\n", 3,
                 "duplicate key 'steps' (first at line 1)");
    bf_error err;
    assert_null(parse("a:\n  b: 1\n  b: 2\n", NULL, &err));
    assert_string_equal(err.field, "a.b"); /* dotted path of the node */
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.msg, "(first at line 2)")); /* lines not asked */
}

static void test_refused_constructs(void **state)
{
    (void)state;
    expect_error("? [1, 2]\n: 3\n", 1, "mapping keys must be scalars");
    expect_error("a: &x 1\nb: *x\n", 1, "anchors and tags are not supported");
    expect_error("a: 1\nb: *x\n", 2, "aliases (*x) are not supported");
    expect_error("a: !!str 4\n", 1, "anchors and tags are not supported");
    expect_error("--- 1\n--- 2\n", 2, "only one YAML document");
    expect_error("seed: 9223372036854775808\n", 1, "out of range");
    expect_error("x: 1e999\n", 1, "1e999 is out of range (a double would "
                 "hold it as infinity)");
    expect_error("x: 1\ny: -1e-400\n", 2, "-1e-400 is out of range (a double "
                 "would hold it as 0)");

    char deep[200] = "";
    for (int i = 0; i < 70; i++)
        strcat(deep, "[");
    for (int i = 0; i < 70; i++)
        strcat(deep, "]");
    expect_error(deep, 1, "nested deeper than");
}

static void test_big_integers(void **state)
{
    (void)state;
    bf_error err;
    json_t *v = parse("seed: 9223372036854775807\nlow: -9223372036854775808\n",
                      NULL, &err);
    assert_non_null(v);
    assert_true(json_integer_value(json_object_get(v, "seed")) ==
                9223372036854775807LL);
    assert_true(json_integer_value(json_object_get(v, "low")) ==
                -9223372036854775807LL - 1);
    json_decref(v);
}

static void test_parse_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/bf-yaml-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/x.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("a: 1\nb:\n  - 2\n  - x: 3\n", f);
    fclose(f);

    bf_error err;
    json_t *lines;
    json_t *v = bf_yaml_parse_file(path, &lines, &err);
    assert_non_null(v);
    assert_int_equal(bf_yaml_line(lines, "/b/1/x"), 4);
    json_decref(v);
    json_decref(lines);
    unlink(path);

    assert_null(bf_yaml_parse_file(path, &lines, &err));
    assert_null(lines);
    assert_string_equal(err.file, path);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "cannot open file"));
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_types),
        cmocka_unit_test(test_line_table),
        cmocka_unit_test(test_subtree_respects_boundaries),
        cmocka_unit_test(test_json_input),
        cmocka_unit_test(test_empty_document_is_null),
        cmocka_unit_test(test_syntax_error_has_line),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_refused_constructs),
        cmocka_unit_test(test_big_integers),
        cmocka_unit_test(test_parse_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
