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

#include "hash.h"
#include "job_config.h"
#include "sweep.h"

/* Collects what bf_sweep_expand visits (the study config has 108 jobs). */
enum { MAX_SEEN = 128 };
typedef struct seen {
    size_t n;
    char *json[MAX_SEEN];
    char hash[MAX_SEEN][17];
    char *stage[MAX_SEEN];  /* NULL without stages */
    size_t source[MAX_SEEN];
} seen;

static int collect(void *ctx, const bf_sweep_job *job, bf_error *err)
{
    (void)err;
    seen *s = ctx;
    assert_int_equal(job->index, s->n);
    assert_true(s->n < MAX_SEEN);
    s->json[s->n] = strdup(job->config_json);
    memcpy(s->hash[s->n], job->hash_hex, 17);
    s->stage[s->n] = job->stage ? strdup(job->stage) : NULL;
    s->source[s->n] = job->source;
    s->n++;
    return 0;
}

static void seen_free(seen *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->json[i]);
        free(s->stage[i]);
    }
}

static bf_sweep *parse(const char *yaml, bf_error *err)
{
    return bf_sweep_parse("sweep.yaml", "/sweeps", yaml, strlen(yaml), err);
}

/* Expands yaml into out; returns its warnings (new reference). */
static json_t *expand_warn(const char *yaml, seen *out)
{
    bf_error err = {0};
    bf_sweep *sw = parse(yaml, &err);
    if (!sw)
        fail_msg("parse: %s", err.msg);
    memset(out, 0, sizeof *out);
    if (bf_sweep_expand(sw, collect, out, &err) < 0)
        fail_msg("expand: %s", err.msg);
    assert_int_equal(out->n, sw->n_jobs);
    json_t *warnings = json_incref(sw->warnings);
    bf_sweep_free(sw);
    return warnings;
}

static void expand_ok(const char *yaml, seen *out)
{
    json_decref(expand_warn(yaml, out));
}

/* Expands yaml; returns how many warnings it has. */
static size_t warning_count(const char *yaml)
{
    seen s;
    json_t *w = expand_warn(yaml, &s);
    seen_free(&s);
    size_t n = json_array_size(w);
    json_decref(w);
    return n;
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
    {"lr a float32 cannot hold", "name: x\ngrid:\n  lr:\n    - 0.001\n"
     "    - 4.9e-324\n", 5, "lr", "5e-324 is not a normal float32"},
    {"code_dir missing", "name: x\nbase: {task: code, eval_depths: [4]}\n"
     "grid:\n  code_dir: [/nonexistent/bifocal-code]\n", 4, "code_dir",
     "cannot read directory '/nonexistent/bifocal-code'"},
    /* zip and exclude, validated as grid is */
    {"zip lists of unequal length", "name: x\nzip:\n  d_model: [32, 64]\n"
     "  n_heads: [2, 4, 8]\n", 4, "n_heads", "equally long"},
    {"zip field not a job field", "name: x\nzip:\n  d_modle: [32]\n", 3,
     "d_modle", "not a job-config field"},
    {"zip bad value", "name: x\nzip:\n  d_model: [32, 64]\n"
     "  n_heads: [2, four]\n", 4, "n_heads", "zip.n_heads[1]"},
    {"field in grid and zip", "name: x\ngrid: {rope: [rope]}\n"
     "zip:\n  rope: [spectral]\n", 4, "rope", "swept twice"},
    {"exclude value not swept", "name: x\ngrid:\n  rope: [rope, spectral]\n"
     "exclude:\n  - {rope: bifocal}\n", 5, "rope",
     "'bifocal' is not one of the values swept (grid.rope: rope, spectral)"},
    {"exclude field not swept", "name: x\ngrid:\n  rope: [rope, spectral]\n"
     "exclude:\n  - {task: dyck}\n", 5, "task", "not swept by grid or zip"},
    {"exclude bad value", "name: x\ngrid:\n  lr: [0.1, 0.2]\n"
     "exclude:\n  - {lr: fast}\n", 5, "lr", "exclude[0].lr"},
    {"exclude zipped values apart", "name: x\nzip:\n  d_model: [32, 64]\n"
     "  n_heads: [2, 4]\nexclude:\n  - {d_model: 32, n_heads: 4}\n", 6,
     "n_heads", "never comes with"},
    {"exclude everything", "name: x\ngrid:\n  rope: [rope, spectral]\n"
     "exclude:\n  - {rope: rope}\n  - {rope: spectral}\n", 4, "exclude",
     "no job is left"},
    {"exclude not a list", "name: x\ngrid: {rope: [rope]}\n"
     "exclude: {rope: rope}\n", 3, "exclude", "list"},
    /* stages */
    {"grid beside stages", "name: x\ngrid: {rope: [rope]}\nstages:\n"
     "  - {name: a}\n", 2, "grid", "in each stage"},
    {"stage without a name", "name: x\nstages:\n  - {base: {steps: 10}}\n",
     3, "name", "needs a name"},
    {"stage name twice", "name: x\nstages:\n  - name: a\n  - name: a\n", 4,
     "name", "used twice"},
    {"unknown stage key", "name: x\nstages:\n  - name: a\n    seed: 3\n", 4,
     "seed", "unknown stage key"},
    {"stage reference unknown", "name: x\nstages:\n  - name: a\n  - name: b\n"
     "    base: {init_from: \"stage:c\"}\n", 5, "init_from",
     "no stage has that name (earlier stages: a)"},
    {"stage reference not earlier", "name: x\nstages:\n  - name: a\n"
     "    base: {init_from: \"stage:b\"}\n  - name: b\n", 4, "init_from",
     "does not come earlier"},
    {"stage reference to itself", "name: x\nbase: {init_from: \"stage:a\"}\n"
     "stages:\n  - name: a\n", 2, "init_from", "does not come earlier"},
    {"stage reference without stages", "name: x\n"
     "base: {init_from: \"stage:a\"}\n", 2, "init_from", "has no stages"},
    {"no source for a seed", "name: x\nstages:\n  - name: a\n    seeds: 2\n"
     "  - name: b\n    base: {init_from: \"stage:a\"}\n    seeds: 3\n", 6,
     "init_from", "job 5 (stage b: seed=3) finds no source job in stage a: no "
     "job there has seed=3"},
    {"no source for a swept value", "name: x\nstages:\n  - name: a\n"
     "    grid: {task: [dyck]}\n  - name: b\n"
     "    base: {init_from: \"stage:a\"}\n    grid:\n"
     "      task: [dyck, counter]\n", 6, "init_from",
     "no job there has task=counter"},
    {"two sources", "name: x\nstages:\n  - name: a\n"
     "    grid: {lr: [0.001, 0.002]}\n  - name: b\n"
     "    base: {init_from: \"stage:a\"}\n", 6, "init_from",
     "job 3 (stage b: the base config) matches 2 jobs of stage a (jobs 1, 2), "
     "which differ in lr"},
    /* zip labels */
    {"zip label too short", "name: x\nzip:\n  rope: [rope, spectral]\n"
     "  label: [a]\n", 4, "label", "a list of 2 names"},
    {"zip label twice", "name: x\nzip:\n  rope: [rope, spectral]\n"
     "  label:\n    - a\n    - a\n", 6, "label", "names two entries 'a'"},
    {"zip label with a space", "name: x\nzip:\n  rope: [rope, spectral]\n"
     "  label: [a, b c]\n", 4, "label", "label[1] must be a non-empty name"},
    {"zip of a label only", "name: x\nzip:\n  label: [a, b]\n", 3, "label",
     "zips no job-config field"},
    {"zip label in grid", "name: x\ngrid:\n  label: [a, b]\n", 3, "label",
     "not a job-config field"},
    /* analysis: the block on its own, then against the sweep */
    {"analysis not a mapping", "name: x\nanalysis: [loss]\n", 2, "analysis",
     "must be a mapping"},
    {"analysis unknown key", "name: x\nanalysis:\n  alhpa: 0.05\n", 3,
     "analysis.alhpa", "unknown key 'alhpa'"},
    {"analysis metric", "name: x\nanalysis:\n  primary:\n    metric: "
     "perplexity\n", 4, "analysis.primary.metric", "loss or accuracy"},
    {"analysis depth zero", "name: x\nanalysis:\n  primary: {metric: loss,"
     " eval_depth: 0}\n", 3, "analysis.primary.eval_depth", "[1, 256]"},
    {"analysis depth unevaluated", "name: x\nbase: {eval_depths: [4, 8]}\n"
     "analysis:\n  primary:\n    metric: loss\n    eval_depth: 16\n", 6,
     "analysis.primary.eval_depth", "no job of the sweep evaluates at depth 16"},
    {"analysis margin one", "name: x\nanalysis:\n  equivalence_margin: 1\n",
     3, "analysis.equivalence_margin", "(0, 1)"},
    {"analysis alpha", "name: x\nanalysis:\n  alpha: 0.9\n", 3,
     "analysis.alpha", "(0, 0.5]"},
    {"analysis baseline bad value", "name: x\ngrid: {rope: [rope, spectral]}"
     "\nanalysis:\n  baseline:\n    rope: roap\n", 5,
     "analysis.baseline.rope", "roap"},
    {"analysis baseline not swept", "name: x\ngrid: {rope: [rope, spectral]}"
     "\nanalysis:\n  baseline: {task: dyck}\n", 4, "analysis.baseline.task",
     "'task' is not swept by grid or zip"},
    {"analysis baseline value not swept", "name: x\n"
     "grid: {rope: [rope, spectral]}\nanalysis:\n  baseline:\n"
     "    rope: bifocal\n", 5, "analysis.baseline.rope",
     "'bifocal' is not one of the values swept (rope: rope, spectral)"},
    {"analysis baseline unknown label", "name: x\nzip:\n  label: [nope, rope]"
     "\n  rope: [none, rope]\nanalysis:\n  baseline:\n    label: roap\n", 7,
     "analysis.baseline.label", "'roap' names no zip entry (labels: nope, "
     "rope)"},
    {"analysis baseline label without labels", "name: x\n"
     "grid: {rope: [rope, spectral]}\nanalysis:\n  baseline: {label: rope}\n",
     4, "analysis.baseline.label", "'rope' names no zip entry (no zip of the "
     "sweep has a label list)"},
    {"analysis baseline label not a name", "name: x\nanalysis:\n  baseline:\n"
     "    label: [rope]\n", 4, "analysis.baseline.label",
     "must be the name of a zip entry"},
    {"analysis baseline contradicts label", "name: x\nzip:\n"
     "  label: [nope, rope]\n  rope: [none, rope]\nanalysis:\n  baseline:\n"
     "    label: rope\n    rope: none\n", 8, "analysis.baseline.rope",
     "'none' contradicts the label 'rope', whose entry has rope: rope (zip)"},
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

/* A zip may name its entries: the label is no job field, so the jobs are
 * those of the same zip without it. */
static void test_zip_labels(void **state)
{
    (void)state;
    seen with, without;
    expand_ok("name: z\nzip:\n  label: [nope, rope, rope-5e5]\n"
              "  rope: [none, rope, rope]\n  rope_base: [1e4, 1e4, 5e5]\n"
              "seeds: 2\n", &with);
    expand_ok("name: z\nzip:\n  rope: [none, rope, rope]\n"
              "  rope_base: [1e4, 1e4, 5e5]\nseeds: 2\n", &without);
    assert_int_equal(with.n, 6);
    assert_int_equal(with.n, without.n);
    for (size_t i = 0; i < with.n; i++) {
        assert_string_equal(with.json[i], without.json[i]);
        assert_null(strstr(with.json[i], "label"));
    }
    seen_free(&with);
    seen_free(&without);
}

/* An analysis block parsed into its canonical form; a sweep without one
 * gets the defaults. */
static void test_analysis_block(void **state)
{
    (void)state;
    bf_error err = {0};
    bf_sweep *sw = parse("name: a\nbase: {eval_depths: [4, 8]}\n"
                         "grid: {rope: [rope, spectral], rope_base: [1e4, 5e5]}\n"
                         "analysis:\n"
                         "  primary: {metric: accuracy, eval_depth: 8}\n"
                         "  baseline: {rope: rope, rope_base: 10000}\n"
                         "  equivalence_margin: 0.05\n", &err);
    if (!sw)
        fail_msg("parse: %s", err.msg);
    assert_true(sw->has_analysis);
    json_t *j = bf_analysis_to_json(&sw->analysis);
    char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"alpha\":0.050000000000000003,"
                        "\"baseline\":{\"rope\":\"rope\",\"rope_base\":10000.0},"
                        "\"equivalence_margin\":0.050000000000000003,"
                        "\"primary\":{\"eval_depth\":8,\"metric\":\"accuracy\"}}");
    free(text);
    json_decref(j);
    bf_sweep_free(sw);
    sw = parse("name: a\nanalysis: {primary: {metric: loss}}\n", &err);
    assert_non_null(sw);
    assert_true(sw->analysis.has_primary);
    assert_int_equal(sw->analysis.primary_eval_depth, 0);
    assert_null(sw->analysis.baseline);
    bf_sweep_free(sw);
    sw = parse("name: a\n", &err);
    assert_false(sw->has_analysis);
    assert_false(sw->analysis.has_primary);
    assert_true(sw->analysis.alpha == BF_ANALYSIS_ALPHA);
    assert_true(sw->analysis.equivalence_margin == BF_ANALYSIS_MARGIN);
    bf_sweep_free(sw);
}

/* A baseline that names a zip entry by its label stands for the entry's
 * values, in the stage whose zip has it, beside a grid field it adds; the
 * stored block has the values, not the label. */
static void test_analysis_baseline_label(void **state)
{
    (void)state;
    bf_error err = {0};
    bf_sweep *sw = parse("name: a\nstages:\n"
                         "  - name: main\n"
                         "    grid: {lr: [1e-3, 3e-3]}\n"
                         "    zip:\n"
                         "      label: [nope, rope, rope-5e5]\n"
                         "      rope: [none, rope, rope]\n"
                         "      rope_base: [1e4, 1e4, 5e5]\n"
                         "analysis:\n"
                         "  baseline: {label: rope-5e5, lr: 0.001}\n", &err);
    if (!sw)
        fail_msg("parse: %s", err.msg);
    assert_null(sw->analysis.baseline_label);
    char *text = json_dumps(sw->analysis.baseline, JSON_SORT_KEYS |
                                                   JSON_COMPACT);
    assert_string_equal(text, "{\"lr\":0.001,\"rope\":\"rope\","
                        "\"rope_base\":500000.0}");
    free(text);
    bf_sweep_free(sw);
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

/* The surgical integration: every surgery job starts from the
 * geometric job of its seed. */
static void test_stages_surgical(void **state)
{
    (void)state;
    seen s;
    json_t *warnings = expand_warn(
        "name: surgical\n"
        "base: {task: dyck, depth: 4, eval_depths: [4, 8, 16], seq_len: 72}\n"
        "stages:\n"
        "  - name: geometric\n"
        "    base: {rope: rope, steps: 1200}\n"
        "    seeds: 3\n"
        "  - name: surgery\n"
        "    base: {init_from: \"stage:geometric\", steps: 600}\n"
        "    grid: {rope: [rope, spectral, bifocal]}\n"
        "    seeds: 3\n", &s);
    assert_int_equal(s.n, 12);
    assert_int_equal(json_array_size(warnings), 0);
    json_decref(warnings);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(s.stage[i], "geometric");
        assert_int_equal(s.source[i], BF_SWEEP_NO_SOURCE);
        assert_non_null(strstr(s.json[i], "\"steps\":1200"));
        assert_non_null(strstr(s.json[i], "\"init_from\":\"\""));
    }
    const char *ropes[] = {"rope", "spectral", "bifocal"};
    for (size_t i = 3; i < 12; i++) {
        size_t seed = (i - 3) % 3 + 1;
        char fields[256];
        snprintf(fields, sizeof fields, "{\"task\": \"dyck\", \"depth\": 4, "
                 "\"eval_depths\": [4, 8, 16], \"seq_len\": 72, \"init_from\": "
                 "\"stage:geometric\", \"steps\": 600, \"rope\": \"%s\", "
                 "\"seed\": %zu}", ropes[(i - 3) / 3], seed);
        char *want = expected_json(fields);
        assert_string_equal(s.json[i], want);
        free(want);
        assert_string_equal(s.stage[i], "surgery");
        assert_int_equal(s.source[i], seed - 1);   /* geometric, same seed */
    }
    seen_free(&s);
}

/* A source matches on the seed and on every field both stages sweep; a
 * field only the later stage sweeps does not matter. */
static void test_stage_shared_fields(void **state)
{
    (void)state;
    seen s;
    expand_ok("name: shared\n"
              "stages:\n"
              "  - name: a\n"
              "    grid: {task: [dyck, counter]}\n"
              "    seeds: [1, 2]\n"
              "  - name: b\n"
              "    base: {init_from: \"stage:a\"}\n"
              "    grid:\n"
              "      rope: [spectral, bifocal]\n"
              "      task: [counter, dyck]\n"
              "    seeds: [2, 1]\n"
              "  - name: c\n"
              "    base: {init_from: \"stage:b\", steps: 100}\n"
              "    grid:\n"
              "      rope: [spectral, bifocal]\n"
              "      task: [counter, dyck]\n"
              "    seeds: [2, 1]\n", &s);
    assert_int_equal(s.n, 4 + 8 + 8);
    /* a: (dyck,1) (dyck,2) (counter,1) (counter,2) */
    for (size_t i = 4; i < 12; i++) {
        int counter = strstr(s.json[i], "\"task\":\"counter\"") != NULL;
        int seed = strstr(s.json[i], "\"seed\":2") ? 2 : 1;
        assert_int_equal(s.source[i], (size_t)(2 * counter + seed - 1));
    }
    /* c starts from the b job of its own rope, task and seed. */
    for (size_t i = 12; i < 20; i++)
        assert_int_equal(s.source[i], i - 8);
    seen_free(&s);
}

/* zip varies its lists together; exclude leaves combinations out; the
 * order is the grid axes, then the zipped ones, then the seeds. */
static void test_zip_and_exclude(void **state)
{
    (void)state;
    seen s;
    expand_ok("name: zx\n"
              "grid:\n"
              "  rope: [rope, spectral]\n"
              "zip:\n"
              "  d_model: [32, 64]\n"
              "  n_heads: [2, 4]\n"
              "exclude:\n"
              "  - {rope: spectral, d_model: 64}\n"
              "seeds: 2\n", &s);
    assert_int_equal(s.n, 6);
    const char *want[][3] = {
        {"rope", "32", "2"}, {"rope", "64", "4"}, {"spectral", "32", "2"}};
    for (size_t i = 0; i < s.n; i++) {
        char fields[256];
        snprintf(fields, sizeof fields, "{\"rope\": \"%s\", \"d_model\": %s, "
                 "\"n_heads\": %s, \"seed\": %zu}", want[i / 2][0],
                 want[i / 2][1], want[i / 2][2], i % 2 + 1);
        char *json = expected_json(fields);
        assert_string_equal(s.json[i], json);
        free(json);
    }
    seen_free(&s);

    /* Several zipped groups; an excluded value written another way (1e-3
     * for 0.001) is the same value. */
    expand_ok("name: zz\n"
              "zip:\n"
              "  - {d_model: [32, 64], n_heads: [2, 4]}\n"
              "  - {lr: [0.001, 0.003], warmup_steps: [10, 30]}\n"
              "exclude:\n"
              "  - {lr: 1e-3, n_heads: 4}\n", &s);
    assert_int_equal(s.n, 3);
    assert_non_null(strstr(s.json[1], "\"d_model\":32"));
    assert_non_null(strstr(s.json[1], "\"warmup_steps\":30"));
    assert_non_null(strstr(s.json[2], "\"d_model\":64"));
    assert_non_null(strstr(s.json[2], "\"lr\":0.0030000000000000001"));
    seen_free(&s);
}

/* A relative init_from is joined to the sweep file's folder; without one
 * it is refused at its line; absolute paths and stage references stay. */
static void test_relative_init_from(void **state)
{
    (void)state;
    seen s;
    expand_ok("name: rel\ngrid:\n  init_from: [ck/a.safetensors, "
              "/abs/b.safetensors]\n", &s);
    assert_non_null(strstr(s.json[0], "\"init_from\":\"/sweeps/ck/a."
                                      "safetensors\""));
    assert_non_null(strstr(s.json[1], "\"init_from\":\"/abs/b.safetensors\""));
    seen_free(&s);
    const char *yaml = "name: rel\nbase:\n  init_from: ck/a.safetensors\n";
    bf_error err = {0};
    assert_null(bf_sweep_parse("sweep.yaml", NULL, yaml, strlen(yaml), &err));
    assert_int_equal(err.line, 3);
    assert_string_equal(err.field, "init_from");
    assert_non_null(strstr(err.msg, "relative path"));
}

/* Expands yaml, which must fail; err gets why. */
static void expand_fails(const char *yaml, bf_error *err)
{
    bf_sweep *sw = parse(yaml, err);
    if (!sw)
        fail_msg("parse: %s", err->msg);
    seen s;
    memset(&s, 0, sizeof s);
    assert_int_equal(bf_sweep_expand(sw, collect, &s, err), -1);
    seen_free(&s);
    bf_sweep_free(sw);
}

/* A job whose memory per rank cannot fit is refused at submission, naming
 * the field it grows with, its line and the figures; memory_budget_gib
 * moves the bound. */
static void test_memory_budget(void **state)
{
    (void)state;
    bf_error err = {0};
    expand_fails("name: long\nbase:\n  d_model: 32\n  seq_len: 65536\n",
                 &err);
    print_message("%s\n", err.msg);
    assert_string_equal(err.field, "seq_len");
    assert_int_equal(err.line, 4);
    assert_non_null(strstr(err.msg, "of memory per rank"));
    assert_non_null(strstr(err.msg, "over the sweep's memory_budget_gib of "
                                    "68719476736 bytes (64.0 GiB)"));
    expand_fails("name: wide\ngrid:\n  d_model: [64, 8192]\n"
                 "base: {n_layers: 256, n_heads: 32}\n", &err);
    print_message("%s\n", err.msg);
    assert_string_equal(err.field, "d_model");
    assert_int_equal(err.line, 3);
    assert_non_null(strstr(err.msg, "job 2"));
    assert_non_null(strstr(err.msg, "of parameters, gradients and AdamW "
                                    "moments"));
    /* The same long job fits a bigger budget; a tiny one refuses the
     * default job. */
    seen s;
    expand_ok("name: long\nmemory_budget_gib: 1000\nbase:\n  d_model: 32\n"
              "  seq_len: 65536\n", &s);
    assert_int_equal(s.n, 1);
    seen_free(&s);
    const char *bad = "name: b\nmemory_budget_gib: 0\n";
    assert_null(parse(bad, &err));
    assert_string_equal(err.field, "memory_budget_gib");
}

/* An init_from that misses "stage:" by its case or a space is a path
 * relative to the sweep file: it works as one, with a warning. */
static void test_near_stage_ref(void **state)
{
    (void)state;
    seen s;
    json_t *w = expand_warn("name: near\n"
                            "stages:\n"
                            "  - name: a\n"
                            "  - name: b\n"
                            "    base: {init_from: \"STAGE:a\"}\n", &s);
    assert_int_equal(s.n, 2);
    assert_non_null(strstr(s.json[1], "\"init_from\":\"/sweeps/STAGE:a\""));
    seen_free(&s);
    assert_int_equal(json_array_size(w), 1);
    const char *msg = json_string_value(json_array_get(w, 0));
    print_message("warning: %s\n", msg);
    assert_non_null(strstr(msg, "sweep.yaml:5: field 'init_from': "
                                "'/sweeps/STAGE:a' is a file path, not a "
                                "stage reference"));
    json_decref(w);
    const char *near[] = {"stage :a", "Stages:a", " stage:a"};
    for (size_t i = 0; i < sizeof near / sizeof *near; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "name: n\nbase: {init_from: \"%s\"}\n",
                 near[i]);
        assert_int_equal(warning_count(yaml), 1);
    }
    /* a file that merely begins with "stage" is no near miss */
    assert_int_equal(warning_count("name: n\nbase: {init_from: "
                                   "stage1.safetensors}\n"), 0);
}

/* Warnings: a field the variant ignores, a bifocal fraction without a
 * learnable head, jobs that train the same model; none for a clean sweep. */
static void test_warnings(void **state)
{
    (void)state;
    seen s;
    json_t *w = expand_warn("name: w\n"
                            "base:\n"
                            "  n_heads: 4\n"
                            "grid:\n"
                            "  rope: [rope, bifocal]\n"
                            "  spectral_fraction: [0.1, 0.5]\n", &s);
    seen_free(&s);
    size_t n = json_array_size(w);
    for (size_t i = 0; i < n; i++)
        print_message("warning: %s\n", json_string_value(json_array_get(w, i)));
    assert_int_equal(n, 4);
    assert_string_equal(json_string_value(json_array_get(w, 0)),
                        "sweep.yaml:6: field 'spectral_fraction': has no "
                        "effect with rope: rope (1 job, the first job 1: "
                        "rope=rope, spectral_fraction=0.1)");
    assert_string_equal(json_string_value(json_array_get(w, 1)),
                        "sweep.yaml:6: field 'spectral_fraction': 0.1 of 4 "
                        "heads rounds to no head learnable: these bifocal "
                        "jobs train as rope (1 job, the first job 3: "
                        "rope=bifocal, spectral_fraction=0.1)");
    assert_string_equal(json_string_value(json_array_get(w, 2)),
                        "sweep.yaml:6: field 'spectral_fraction': job 2 "
                        "(rope=rope, spectral_fraction=0.5) trains the same "
                        "model as job 1 (rope=rope, spectral_fraction=0.1), "
                        "though they differ in spectral_fraction");
    assert_string_equal(json_string_value(json_array_get(w, 3)),
                        "sweep.yaml:5: field 'rope': job 3 (rope=bifocal, "
                        "spectral_fraction=0.1) trains the same model as job "
                        "1 (rope=rope, spectral_fraction=0.1), though they "
                        "differ in rope");
    json_decref(w);

    w = expand_warn("name: p\nbase: {d_model: 16, n_heads: 4}\n"
                    "grid:\n  rope: [prope, none]\n"
                    "  prope_fraction: [0.25, 1]\n", &s);
    seen_free(&s);
    /* d_head 4: 2 pairs, 0.25 rounds to 1 (real p-RoPE), 1 zeroes both
     * (none); with none prope_fraction does nothing; prope at 1 and none
     * train the same model. */
    char all[4096] = "";
    for (size_t i = 0; i < json_array_size(w); i++)
        strncat(all, json_string_value(json_array_get(w, i)),
                sizeof all - strlen(all) - 1);
    assert_non_null(strstr(all, "1 of the 2 rotary pairs of a head rounds to "
                                "every pair zeroed: these prope jobs train as "
                                "none"));
    assert_non_null(strstr(all, "'prope_fraction': has no effect with rope: "
                                "none"));
    assert_non_null(strstr(all, "job 3 (rope=none, prope_fraction=0.25) trains "
                                "the same model as job 2 (rope=prope, "
                                "prope_fraction=1)"));
    json_decref(w);

    /* Set in the top-level base and the stage's: one warning per job, at
     * the stage's line, the value that counts. */
    w = expand_warn("name: s\nbase: {spectral_fraction: 0.25}\nstages:\n"
                    "  - name: a\n    base: {spectral_fraction: 0.75, "
                    "rope: rope}\n", &s);
    seen_free(&s);
    assert_int_equal(json_array_size(w), 1);
    assert_string_equal(json_string_value(json_array_get(w, 0)),
                        "sweep.yaml:5: field 'spectral_fraction': has no "
                        "effect with rope: rope (1 job, the first job 1: "
                        "stage a: the base config)");
    json_decref(w);

    assert_int_equal(warning_count("name: clean\ngrid:\n  rope: [rope, "
                                   "spectral, bifocal, prope, none]\n"
                                   "seeds: 2\n"), 0);

    /* A zip of variants gives a field its default where it does not
     * apply: that asks for nothing, so nothing is said. */
    assert_int_equal(warning_count("name: variants\nzip:\n"
                                   "  rope:         [none, rope, rope, "
                                   "spectral, spectral]\n"
                                   "  rope_base:    [1.0e4, 1.0e4, 5.0e5, "
                                   "1.0e4, 1.0e4]\n"
                                   "  freq_lr_mult: [1, 1, 1, 1, 10]\n"), 0);
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

/* Every example sweep in configs/ (sweep-*.yaml, the quickstart, the
 * surgical one and the study) is a valid sweep without warnings. */
static void test_example_configs(void **state)
{
    (void)state;
    const char *root = getenv("BF_SOURCE_ROOT");
    char pattern[1024];
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s/configs/sweep-*.yaml", root ? root : ".");
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    snprintf(pattern, sizeof pattern, "%s/configs/quickstart.yaml", root ? root : ".");
    assert_int_equal(glob(pattern, GLOB_APPEND, NULL, &g), 0);
    snprintf(pattern, sizeof pattern, "%s/configs/surgical.yaml", root ? root : ".");
    assert_int_equal(glob(pattern, GLOB_APPEND, NULL, &g), 0);
    snprintf(pattern, sizeof pattern, "%s/configs/study-structure-gap.yaml", root ? root : ".");
    assert_int_equal(glob(pattern, GLOB_APPEND, NULL, &g), 0);
    assert_true(g.gl_pathc >= 7);
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
        int rc = sw->n_jobs <= MAX_SEEN ? bf_sweep_expand(sw, collect, &s, &err) : -1;
        if (rc < 0)
            fail_msg("%s: %s", g.gl_pathv[i], err.msg);
        assert_true(s.n > 0);
        if (json_array_size(sw->warnings) > 0)
            fail_msg("%s: %s", g.gl_pathv[i],
                     json_string_value(json_array_get(sw->warnings, 0)));
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
        cmocka_unit_test(test_analysis_block),
        cmocka_unit_test(test_zip_labels),
        cmocka_unit_test(test_analysis_baseline_label),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_baseline_fields),
        cmocka_unit_test(test_visitor_stops),
        cmocka_unit_test(test_stages_surgical),
        cmocka_unit_test(test_stage_shared_fields),
        cmocka_unit_test(test_zip_and_exclude),
        cmocka_unit_test(test_relative_init_from),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_near_stage_ref),
        cmocka_unit_test(test_example_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
