/* Job configuration: every kind of bad job file gets its own message (naming
 * file, line, field, the bad value and what is allowed), defaults and the
 * example configs validate, and the canonical JSON is deterministic and
 * round-trips. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "job_config.h"
#include "yaml_json.h"

static char tmp_dir[64];

static int make_tmp_dir(void **state)
{
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/bf-jobcfg-XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state)
{
    (void)state;
    return rmdir(tmp_dir);
}

/* Writes `text` to tmp_dir/name; returns the path (static buffer). */
static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void assert_contains(const char *msg, const char *fragment)
{
    if (fragment && !strstr(msg, fragment))
        fail_msg("message \"%s\" lacks \"%s\"", msg, fragment);
}

/* ---- one case per kind of bad job file -------------------------------- */

typedef struct bad_case {
    const char *name;     /* test name */
    const char *file;     /* file name: .yaml or .json */
    const char *text;     /* file contents */
    const char *field;    /* expected err.field */
    int line;             /* expected err.line */
    const char *says[3];  /* fragments the message must contain */
} bad_case;

static const bad_case bad_cases[] = {
    {"unknown_field", "a.yaml", "task: dyck\ndepht: 4\n", "depht", 2,
     {"unknown field", "known fields: task, depth"}},
    {"int_given_real", "a.yaml", "depth: 2.5\n", "depth", 1,
     {"expected an integer", "real 2.5"}},
    {"int_given_string", "a.yaml", "steps: 100\ndepth: \"4\"\n", "depth", 2,
     {"expected an integer", "string \"4\""}},
    {"int_given_real_json", "a.json", "{\n  \"steps\": 100,\n  \"d_model\": 64.0\n}\n",
     "d_model", 3, {"expected an integer", "real 64"}},
    {"real_given_string", "a.yaml", "lr: fast\n", "lr", 1,
     {"expected a number", "string \"fast\""}},
    {"real_given_bool", "a.yaml", "weight_decay: true\n", "weight_decay", 1,
     {"expected a number", "true"}},
    {"string_given_int", "a.yaml", "task: 3\n", "task", 1,
     {"expected a string", "dyck, counter, modarith", "integer 3"}},
    {"path_given_int", "a.yaml", "init_from: 5\n", "init_from", 1,
     {"expected a string", "integer 5"}},
    {"code_dir_given_list", "a.yaml", "task: code\ncode_dir: [a]\n",
     "code_dir", 2, {"expected a string (a path)", "a list"}},
    {"array_given_int", "a.yaml", "eval_depths: 4\n", "eval_depths", 1,
     {"expected a list of integers", "integer 4"}},
    {"array_element_wrong_type", "a.yaml",
     "eval_depths:\n  - 4\n  - eight\n", "eval_depths", 3,
     {"element 1", "string \"eight\""}},
    {"unknown_task", "a.yaml", "task: parity\n", "task", 1,
     {"\"parity\"", "allowed: dyck, counter, modarith"}},
    {"unknown_rope", "a.yaml", "\nrope: alibi\n", "rope", 2,
     {"\"alibi\"", "allowed: none, rope, spectral, bifocal, prope, pope"}},
    {"d_model_not_divisible", "a.yaml", "d_model: 64\nn_heads: 5\n", "n_heads",
     2, {"d_model 64 is not divisible by n_heads 5"}},
    {"odd_d_head", "a.yaml", "d_model: 36\nn_heads: 4\n", "d_model", 1,
     {"d_head", "= 9 must be even"}},
    {"seq_len_too_short", "a.yaml", "seq_len: 64\neval_depths: [4, 16]\n",
     "seq_len", 1, {"seq_len 64 is too short", "depth 16", "seq_len >= 66"}},
    {"seq_len_too_short_default", "a.yaml", "task: modarith\ndepth: 16\n",
     "seq_len", 0, {"seq_len 64 is too short", "modarith", "seq_len >= 68"}},
    {"zero_d_model", "a.yaml", "d_model: 0\n", "d_model", 1,
     {"0 is out of range", "allowed: an integer in 2 .. 8192"}},
    {"zero_batch_size", "a.yaml", "batch_size: 0\n", "batch_size", 1,
     {"0 is out of range", "an integer in 1 .."}},
    {"negative_layers", "a.yaml", "n_layers: -1\n", "n_layers", 1,
     {"-1 is out of range"}},
    {"zero_steps", "a.yaml", "warmup_steps: 0\nsteps: 0\n", "steps", 2,
     {"0 is out of range"}},
    {"zero_eval_examples", "a.yaml", "eval_examples: 0\n", "eval_examples", 1,
     {"0 is out of range"}},
    {"negative_every", "a.yaml", "log_every: -5\n", "log_every", 1,
     {"-5 is out of range", "an integer in 0 .."}},
    {"spectral_fraction_above_1", "a.yaml", "spectral_fraction: 1.5\n",
     "spectral_fraction", 1, {"1.5 is out of range", "[0, 1]"}},
    {"spectral_fraction_negative", "a.yaml", "spectral_fraction: -0.25\n",
     "spectral_fraction", 1, {"-0.25 is out of range"}},
    {"prope_fraction_above_1", "a.yaml", "rope: prope\nprope_fraction: 1.25\n",
     "prope_fraction", 2, {"1.25 is out of range", "[0, 1]"}},
    {"prope_fraction_negative", "a.yaml", "prope_fraction: -0.5\n",
     "prope_fraction", 1, {"-0.5 is out of range", "[0, 1]"}},
    {"random_positions_below_seq_len", "a.yaml",
     "seq_len: 64\nrandom_positions: 32\n", "random_positions", 2,
     {"32 is fewer positions than seq_len 64",
      "allowed: 0 for off, or 64 .. 262144"}},
    {"random_positions_negative", "a.yaml", "random_positions: -1\n",
     "random_positions", 1, {"-1 is out of range", "0 .. 262144"}},
    {"random_positions_too_large", "a.yaml", "random_positions: 262145\n",
     "random_positions", 1, {"262145 is out of range", "0 .. 262144"}},
    {"random_positions_given_real", "a.yaml", "random_positions: 128.5\n",
     "random_positions", 1, {"expected an integer", "real 128.5"}},
    {"negative_lr", "a.yaml", "lr: -1e-3\n", "lr", 1,
     {"-0.001 is out of range", "[0, 10]"}},
    {"rope_base_not_above_1", "a.yaml", "rope_base: 1\n", "rope_base", 1,
     {"1 is out of range", "> 1"}},
    {"grad_clip_zero", "a.yaml", "grad_clip: 0\n", "grad_clip", 1,
     {"out of range", "> 0"}},
    {"negative_weight_decay", "a.yaml", "weight_decay: -0.1\n", "weight_decay",
     1, {"-0.1 is out of range"}},
    /* The trainer computes in float32: below FLT_MIN a value is 0 or
     * subnormal there. */
    {"lr_denormal", "a.yaml", "steps: 10\nlr: 4.9e-324\n", "lr", 2,
     {"5e-324 is not a normal float32", "1.17549e-38 .. 3.40282e+38",
      "allowed: a number in [0, 10]"}},
    {"grad_clip_float_subnormal", "a.yaml", "grad_clip: 1e-39\n",
     "grad_clip", 1, {"1e-39 is not a normal float32", "subnormal or 0",
      "> 0 and <= 1e+12"}},
    {"too_many_eval_depths", "a.yaml",
     "seq_len: 128\neval_depths: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\n",
     "eval_depths", 2, {"lists 17 depths", "1 to 16"}},
    {"empty_eval_depths", "a.yaml", "eval_depths: []\n", "eval_depths", 1,
     {"lists 0 depths"}},
    {"eval_depth_below_1", "a.yaml", "eval_depths:\n  - 4\n  - 0\n",
     "eval_depths", 3, {"element 1 (0) is out of range", "1 .. 256"}},
    {"duplicate_eval_depth", "a.yaml", "eval_depths:\n  - 4\n  - 8\n  - 4\n",
     "eval_depths", 4, {"depth 4 is listed twice"}},
    {"depth_below_1", "a.yaml", "depth: 0\n", "depth", 1,
     {"0 is out of range", "1 .. 256"}},
    {"modulus_below_2", "a.yaml", "modulus: 1\n", "modulus", 1,
     {"1 is out of range", "2 .. 100"}},
    {"dyck_k_zero", "a.yaml", "dyck_k: 0\n", "dyck_k", 1,
     {"0 is out of range", "1 .. 16"}},
    {"dyck_k_too_large", "a.yaml", "dyck_k: 17\n", "dyck_k", 1,
     {"17 is out of range", "1 .. 16"}},
    {"warmup_exceeds_steps", "a.yaml", "steps: 100\nwarmup_steps: 101\n",
     "warmup_steps", 2, {"warmup_steps 101 exceeds steps 100"}},
    {"negative_seed", "a.yaml", "seed: -1\n", "seed", 1,
     {"non-negative integer", "integer -1"}},
    {"seed_too_large", "a.yaml", "seed: 9223372036854775808\n", "seed", 1,
     {"out of range", "2^63-1"}},
    /* 2^53 + 1: a browser would show it as 2^53 (and filter both as one). */
    {"seed_past_2_53", "a.yaml", "seed: 9007199254740993\n", "seed", 1,
     {"9007199254740993 is out of range", "2^53 = 9007199254740992"}},
    {"seed_given_string", "a.yaml", "seed: \"7\"\n", "seed", 1,
     {"non-negative integer", "string \"7\""}},
    {"not_a_mapping", "a.yaml", "- depth\n- 4\n", "", 1,
     {"expected a mapping of job fields", "a list"}},
    {"empty_file", "a.yaml", "", "", 0,
     {"expected a mapping of job fields", "null"}},
    {"yaml_syntax_error", "a.yaml", "task: dyck\nsteps: 100\n  depth: 4\n", "",
     3, {"YAML syntax error"}},
    {"json_syntax_error", "a.json", "{\n  \"depth\": 4,\n  \"steps\" 100\n}\n",
     "", 3, {"YAML syntax error"}},
    {"duplicate_field", "a.yaml", "steps: 100\nlr: 0.1\nsteps: 200\n", "steps",
     3, {"duplicate key 'steps'", "line 1"}},
    /* free-form parameters: the error names params.NAME and its line */
    {"param_bad_name", "a.yaml", "trainer: t\nparams:\n  Lr: 1\n",
     "params.Lr", 3, {"not a parameter name", "lowercase"}},
    {"param_null", "a.yaml", "trainer: t\nparams:\n  a: 1\n  b: null\n",
     "params.b", 4, {"expected a finite number, a string or true/false",
                     "null"}},
    {"param_list", "a.yaml", "trainer: t\nparams.width: [1, 2]\n",
     "params.width", 2, {"expected a finite number", "a list"}},
    {"param_mapping", "a.yaml", "trainer: t\nparams: {a: {b: 1}}\n",
     "params.a", 2, {"expected a finite number", "a mapping"}},
    {"params_not_mapping", "a.yaml", "trainer: t\nparams: 3\n", "params", 2,
     {"expected a mapping of parameter names"}},
    {"param_int_past_2_53", "a.yaml", "trainer: t\nparams:\n"
     "  n: 9007199254740993\n", "params.n", 3, {"out of range", "2^53"}},
    {"param_of_builtin", "a.yaml", "steps: 100\nparams:\n  width: 3\n",
     "params.width", 3, {"trainer builtin reads no free-form parameters",
                         "set trainer:"}},
};
#define N_BAD_CASES (sizeof bad_cases / sizeof bad_cases[0])

static void run_bad_case(void **state)
{
    const bad_case *c = *state;
    const char *path = write_file(c->file, c->text);
    bf_job_config cfg;
    bf_error err;
    assert_int_equal(bf_job_config_load_file(&cfg, path, &err), -1);
    unlink(path);
    assert_string_equal(err.file, path);
    assert_string_equal(err.field, c->field);
    assert_int_equal(err.line, c->line);
    assert_contains(err.msg, path); /* the message is complete on its own */
    if (c->field[0]) {
        char named[160];
        snprintf(named, sizeof named, "field '%s'", c->field);
        assert_contains(err.msg, named);
    }
    if (c->line > 0) {
        char at[300];
        snprintf(at, sizeof at, "%s:%d:", path, c->line);
        assert_contains(err.msg, at);
    }
    for (int i = 0; i < 3; i++)
        assert_contains(err.msg, c->says[i]);
}

static void test_missing_file(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/no-such-job.yaml", tmp_dir);
    bf_job_config cfg;
    bf_error err;
    assert_int_equal(bf_job_config_load_file(&cfg, path, &err), -1);
    assert_string_equal(err.file, path);
    assert_contains(err.msg, path);
    assert_contains(err.msg, "cannot open file");
}

/* ---- good configs ----------------------------------------------------- */

static void test_defaults_are_valid(void **state)
{
    (void)state;
    bf_job_config cfg;
    bf_error err;
    bf_job_config_defaults(&cfg);
    if (bf_job_config_validate(&cfg, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(cfg.task, BF_TASK_DYCK);
    assert_int_equal(cfg.rope, BF_ROPE_GEOMETRIC);
    assert_int_equal(cfg.n_eval_depths, 2);
    assert_int_equal(bf_job_config_max_depth(&cfg), 8);
}

static void test_load_overrides_defaults(void **state)
{
    (void)state;
    const char *path = write_file("good.yaml",
        "# comment\ntask: counter\nrope: bifocal\nlr: 1\nseed: 9007199254740992\n"
        "eval_depths: [2, 12]\nseq_len: 64\ninit_from: ckpt/a.safetensors\n");
    bf_job_config cfg;
    bf_error err;
    if (bf_job_config_load_file(&cfg, path, &err) != 0)
        fail_msg("%s", err.msg);
    unlink(path);
    assert_int_equal(cfg.task, BF_TASK_COUNTER);
    assert_int_equal(cfg.rope, BF_ROPE_BIFOCAL);
    assert_true(cfg.lr == 1.0); /* an integer is a valid real */
    assert_true(cfg.seed == 9007199254740992ULL); /* 2^53, the largest */
    assert_int_equal(cfg.n_eval_depths, 2);
    assert_int_equal(cfg.eval_depths[1], 12);
    assert_string_equal(cfg.init_from, "ckpt/a.safetensors");
    assert_int_equal(cfg.steps, 500); /* untouched fields keep defaults */
    assert_int_equal(bf_job_config_max_depth(&cfg), 12);
}

static void load_example(const char *relative)
{
    const char *root = getenv("BF_SOURCE_ROOT");
    if (!root)
        fail_msg("BF_SOURCE_ROOT is not set (run through meson test)");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, relative);
    bf_job_config cfg;
    bf_error err;
    if (bf_job_config_load_file(&cfg, path, &err) != 0)
        fail_msg("%s", err.msg);
}

static void test_example_configs_are_valid(void **state)
{
    (void)state;
    load_example("configs/job-dyck.yaml");
    load_example("configs/job-counter.json");
    load_example("configs/job-code.yaml");   /* reads the stdlib */
}

/* A config that changes every field away from its default. */
static bf_job_config unusual_config(void)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.task = BF_TASK_MODARITH;
    cfg.depth = 3;
    cfg.n_eval_depths = 3;
    cfg.eval_depths[0] = 2;
    cfg.eval_depths[1] = 9;
    cfg.eval_depths[2] = 5;
    cfg.dyck_k = 3;
    cfg.modulus = 7;
    cfg.rope = BF_ROPE_SPECTRAL;
    cfg.rope_base = 500000.0;
    cfg.spectral_fraction = 0.1;                /* not exact in binary */
    cfg.freq_lr_mult = 3.0000000000000004;      /* needs 17 digits */
    cfg.prope_fraction = 0.3;
    cfg.random_positions = 400;
    cfg.d_model = 96;
    cfg.n_layers = 3;
    cfg.n_heads = 6;
    cfg.seq_len = 100;
    cfg.batch_size = 48;
    cfg.steps = 1234;
    cfg.lr = 3e-4;
    cfg.warmup_steps = 7;
    cfg.weight_decay = 0.0;
    cfg.grad_clip = 0.5;
    cfg.seed = BF_JOB_MAX_SEED;                 /* the largest seed */
    cfg.log_every = 3;
    cfg.eval_every = 0;
    cfg.freq_every = 11;
    cfg.checkpoint_every = 250;
    cfg.eval_examples = 64;
    snprintf(cfg.init_from, sizeof cfg.init_from, "runs/x y/\"q\".safetensors");
    /* not read: the task is not code */
    snprintf(cfg.code_dir, sizeof cfg.code_dir, "/srv/code \"é\"");
    return cfg;
}

static void test_canonical_round_trip(void **state)
{
    (void)state;
    bf_job_config cfg = unusual_config();
    bf_error err;
    if (bf_job_config_validate(&cfg, &err) != 0)
        fail_msg("%s", err.msg);
    char *text = bf_job_config_to_canonical_json(&cfg);
    json_t *parsed = json_loads(text, 0, NULL);
    assert_non_null(parsed);

    bf_job_config back;
    bf_job_config_defaults(&back);
    if (bf_job_config_apply_json(&back, parsed, "canonical", NULL, &err) != 0)
        fail_msg("%s", err.msg);
    assert_memory_equal(&back, &cfg, sizeof cfg); /* every field, exactly */
    char *again = bf_job_config_to_canonical_json(&back);
    assert_string_equal(again, text);
    free(again);
    json_decref(parsed);
    free(text);
}

static void test_canonical_form(void **state)
{
    (void)state;
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    char *text = bf_job_config_to_canonical_json(&cfg);
    assert_null(strchr(text, ' '));  /* compact */
    assert_null(strchr(text, '\n'));
    json_t *obj = json_loads(text, 0, NULL);
    assert_int_equal(json_object_size(obj), 30); /* every field */
    /* Keys appear in sorted order in the bytes. */
    const char *key, *prev = "";
    json_t *v;
    json_object_foreach(obj, key, v) {
        assert_true(strcmp(prev, key) < 0);
        prev = key;
    }
    assert_contains(text, "\"eval_depths\":[4,8]");
    assert_contains(text, "\"lr\":0.001");
    json_decref(obj);
    free(text);
}

/* Equal configs give equal bytes however they were written; any change to
 * a field changes the bytes. */
static void test_canonical_determinism(void **state)
{
    (void)state;
    const char *texts[] = {
        "lr: 0.001\ntask: counter\nsteps: 300\nspectral_fraction: 0.5\n",
        "{\"steps\": 300, \"spectral_fraction\": 5e-1, \"task\": \"counter\"}",
        "task: counter\nsteps: 300\nlr: 1.0e-3\nspectral_fraction: .5\n",
    };
    char *first = NULL;
    for (int i = 0; i < 3; i++) {
        const char *path = write_file(i == 1 ? "d.json" : "d.yaml", texts[i]);
        bf_job_config cfg;
        bf_error err;
        if (bf_job_config_load_file(&cfg, path, &err) != 0)
            fail_msg("%s", err.msg);
        unlink(path);
        char *s = bf_job_config_to_canonical_json(&cfg);
        if (!first)
            first = s;
        else {
            assert_string_equal(s, first);
            free(s);
        }
    }
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    char *defaults = bf_job_config_to_canonical_json(&cfg);
    cfg.lr = nextafter(cfg.lr, 1.0); /* one ulp away */
    char *nudged = bf_job_config_to_canonical_json(&cfg);
    assert_string_not_equal(defaults, nudged);
    assert_string_not_equal(defaults, first);
    free(nudged);
    free(defaults);
    free(first);
}

/* `trainer`: builtin configs keep the canonical bytes (and hashes) they
 * had before the field; another trainer is written and read back; a name
 * that is not an identifier is refused, naming the field. */
static void test_trainer_field(void **state)
{
    (void)state;
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    assert_string_equal(cfg.trainer, "builtin");
    char *text = bf_job_config_to_canonical_json(&cfg);
    /* docs/job-config.md's canonical JSON of the defaults, byte for byte */
    assert_string_equal(text, "{\"batch_size\":32,\"checkpoint_every\":0,"
        "\"code_dir\":\"/usr/lib/python3.11\",\"d_model\":64,\"depth\":4,"
        "\"dyck_k\":2,\"eval_depths\":[4,8],\"eval_every\":100,"
        "\"eval_examples\":128,\"freq_every\":50,\"freq_lr_mult\":1.0,"
        "\"grad_clip\":1.0,\"init_from\":\"\",\"log_every\":10,\"lr\":0.001,"
        "\"modulus\":10,\"n_heads\":4,\"n_layers\":2,\"prope_fraction\":0.25,"
        "\"random_positions\":0,\"rope\":\"rope\",\"rope_base\":10000.0,"
        "\"seed\":1,\"seq_len\":64,\"spectral_fraction\":0.5,\"steps\":500,"
        "\"stop_on_nonfinite\":true,\"task\":\"dyck\",\"warmup_steps\":50,"
        "\"weight_decay\":0.10000000000000001}");
    free(text);

    bf_error err;
    json_t *torch = json_pack("{s:s}", "trainer", "torch_lm-2");
    assert_int_equal(bf_job_config_apply_json(&cfg, torch, "t", NULL, &err),
                     0);
    json_decref(torch);
    assert_int_equal(bf_job_config_validate(&cfg, &err), 0);
    text = bf_job_config_to_canonical_json(&cfg);
    assert_contains(text, "\"trainer\":\"torch_lm-2\"");
    bf_job_config back;
    bf_job_config_defaults(&back);
    json_t *parsed = json_loads(text, 0, NULL);
    assert_int_equal(bf_job_config_apply_json(&back, parsed, "t", NULL, &err),
                     0);
    assert_memory_equal(&back, &cfg, sizeof cfg);
    json_decref(parsed);
    free(text);

    const char *bad[] = { "", "Torch", "1abc", "a b", "a/b", "x\nb",
        "a123456789012345678901234567890123456789012345678901234567890123" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        json_t *o = json_pack("{s:s}", "trainer", bad[i]);
        bf_error_clear(&err);
        assert_int_equal(bf_job_config_apply_json(&cfg, o, "t", NULL, &err),
                         -1);
        assert_contains(err.msg, "trainer");
        assert_contains(err.msg, "not a trainer name");
        json_decref(o);
    }
    json_t *o = json_pack("{s:i}", "trainer", 3);
    assert_int_equal(bf_job_config_apply_json(&cfg, o, "t", NULL, &err), -1);
    assert_contains(err.msg, "trainer");
    json_decref(o);
    assert_string_equal(cfg.trainer, "torch_lm-2");   /* unchanged */
}

/* Free-form parameters: both spellings set the same canonical text, a
 * layer adds to the parameters before it, values keep their JSON type
 * (an integral real becomes the integer), canonical JSON and the hash of
 * a config without params are unchanged, and the bounds hold. */
static void test_params_field(void **state)
{
    (void)state;
    bf_error err;
    bf_job_config a, b;
    bf_job_config_defaults(&a);
    bf_job_config_defaults(&b);
    char *plain = bf_job_config_to_canonical_json(&a);
    json_t *one = json_loads("{\"trainer\": \"torch\", \"params\": "
                             "{\"width\": 256.0, \"act\": \"gelu\"}}", 0, NULL);
    json_t *two = json_loads("{\"params.tied\": false, \"params.drop\": 0.1}",
                             0, NULL);
    assert_int_equal(bf_job_config_apply_json(&a, one, "t", NULL, &err), 0);
    assert_int_equal(bf_job_config_apply_json(&a, two, "t", NULL, &err), 0);
    assert_int_equal(bf_job_config_validate(&a, &err), 0);
    assert_string_equal(a.params, "{\"act\":\"gelu\",\"drop\":0.10000000000000001,"
                        "\"tied\":false,\"width\":256}");
    char *text = bf_job_config_to_canonical_json(&a);
    assert_contains(text, ",\"params\":{\"act\":\"gelu\",");
    json_t *parsed = json_loads(text, 0, NULL);
    assert_int_equal(bf_job_config_apply_json(&b, parsed, "t", NULL, &err), 0);
    assert_memory_equal(&a, &b, sizeof a);   /* canonical JSON reads back */
    json_decref(parsed);
    free(text);

    /* no params: no `params` key, the pinned canonical bytes */
    assert_null(strstr(plain, "params"));
    free(plain);

    assert_true(bf_job_config_has_field("params.width"));
    assert_true(bf_job_config_has_field("params"));
    assert_false(bf_job_config_has_field("params.Width"));
    assert_string_equal(bf_job_config_param_of("params.x"), "x");
    assert_null(bf_job_config_param_of("lr"));
    json_t *ten = json_real(10.0);
    json_t *canon = bf_job_config_canonical_value("params.n", ten, &err);
    assert_true(json_is_integer(canon) && json_integer_value(canon) == 10);
    json_decref(canon);
    json_decref(ten);

    /* bounds: 32 names; a string of 256 bytes */
    bf_job_config_defaults(&b);
    char key[32];
    for (int i = 0; i < BF_PARAMS_MAX; i++) {
        snprintf(key, sizeof key, "params.p%d", i);
        json_t *o = json_pack("{s:i}", key, i);
        assert_int_equal(bf_job_config_apply_json(&b, o, "t", NULL, &err), 0);
        json_decref(o);
    }
    json_t *o = json_pack("{s:i}", "params.extra", 1);
    assert_int_equal(bf_job_config_apply_json(&b, o, "t", NULL, &err), -1);
    assert_contains(err.msg, "at most 32");
    assert_string_equal(err.field, "params.extra");
    json_decref(o);
    char big[BF_PARAM_STRING_MAX + 1];
    memset(big, 'x', BF_PARAM_STRING_MAX);
    big[BF_PARAM_STRING_MAX] = '\0';
    o = json_pack("{s:s}", "params.s", big);
    assert_int_equal(bf_job_config_apply_json(&a, o, "t", NULL, &err), -1);
    assert_contains(err.msg, "at most 255 bytes");
    json_decref(o);
    json_decref(one);
    json_decref(two);

    /* the results commands' view: params.NAME members, and SQL's path */
    json_t *cfg = json_loads("{\"lr\": 0.1, \"params\": {\"w\": 3}}", 0, NULL);
    assert_int_equal(json_integer_value(bf_job_config_json_get(cfg,
                                                               "params.w")), 3);
    bf_job_config_json_flatten(cfg);
    assert_null(json_object_get(cfg, "params"));
    assert_int_equal(json_integer_value(json_object_get(cfg, "params.w")), 3);
    assert_true(json_real_value(json_object_get(cfg, "lr")) == 0.1);
    json_decref(cfg);
}

/* apply_json keeps cfg unchanged on error and reads both forms of lines. */
static void test_apply_json_is_atomic_and_reads_lines(void **state)
{
    (void)state;
    bf_job_config cfg, before;
    bf_job_config_defaults(&cfg);
    before = cfg;
    json_t *obj = json_pack("{s:i, s:s}", "steps", 77, "rope", "sideways");
    json_t *bare = json_pack("{s:i}", "rope", 12);
    bf_error err;
    assert_int_equal(bf_job_config_apply_json(&cfg, obj, "sweep.yaml", bare,
                                              &err), -1);
    assert_memory_equal(&cfg, &before, sizeof cfg);
    assert_int_equal(err.line, 12);
    assert_string_equal(err.field, "rope");
    assert_contains(err.msg, "sweep.yaml:12: field 'rope'");

    json_t *pointers = json_pack("{s:i}", "/rope", 5);
    assert_int_equal(bf_job_config_apply_json(&cfg, obj, "s.yaml", pointers,
                                              &err), -1);
    assert_int_equal(err.line, 5);

    /* validate_in finds the line of the field a cross-field error names. */
    cfg.d_model = 30;
    cfg.n_heads = 4;
    json_t *lines = json_pack("{s:i}", "/n_heads", 9);
    assert_int_equal(bf_job_config_validate_in(&cfg, "s.yaml", lines, &err), -1);
    assert_int_equal(err.line, 9);
    assert_contains(err.msg, "s.yaml:9: field 'n_heads'");
    assert_int_equal(bf_job_config_validate(&cfg, &err), -1);
    assert_int_equal(err.line, 0);
    assert_string_equal(err.field, "n_heads");
    json_decref(lines);
    json_decref(pointers);
    json_decref(bare);
    json_decref(obj);
}

/* Configs built in C (not parsed) get the same checks. */
static void expect_invalid(const bf_job_config *cfg, const char *field,
                           const char *fragment)
{
    bf_error err;
    assert_int_equal(bf_job_config_validate(cfg, &err), -1);
    assert_string_equal(err.field, field);
    assert_contains(err.msg, fragment);
}

static void test_validate_checks_built_configs(void **state)
{
    (void)state;
    bf_job_config good, cfg;
    bf_job_config_defaults(&good);
    cfg = good;
    cfg.seed = (uint64_t)1 << 63;
    expect_invalid(&cfg, "seed", "9223372036854775808 is out of range");
    cfg = good;
    cfg.seed = BF_JOB_MAX_SEED + 1;
    expect_invalid(&cfg, "seed", "9007199254740993 is out of range");
    cfg = good;
    cfg.task = (bf_task_kind)7;
    expect_invalid(&cfg, "task", "unknown task 7");
    cfg = good;
    cfg.rope = (bf_rope_kind)-1;
    expect_invalid(&cfg, "rope", "unknown rope");
    cfg = good;
    cfg.n_eval_depths = 0;
    expect_invalid(&cfg, "eval_depths", "lists 0 depths");
    cfg = good;
    cfg.eval_depths[1] = 300;
    expect_invalid(&cfg, "eval_depths", "element 1 (300) is out of range");
    cfg = good;
    cfg.spectral_fraction = NAN;
    expect_invalid(&cfg, "spectral_fraction", "nan is out of range");
    cfg = good;
    cfg.random_positions = good.seq_len - 1;
    expect_invalid(&cfg, "random_positions", "fewer positions than seq_len");
    cfg.random_positions = good.seq_len;
    bf_error err;
    if (bf_job_config_validate(&cfg, &err) != 0)
        fail_msg("random_positions = seq_len refused: %s", err.msg);
    cfg = good;
    cfg.n_heads = 0; /* checked before d_model % n_heads divides by it */
    expect_invalid(&cfg, "n_heads", "0 is out of range");
    cfg = good;
    memset(cfg.init_from, 'x', sizeof cfg.init_from);
    expect_invalid(&cfg, "init_from", "not NUL-terminated");
    cfg = good;
    memset(cfg.code_dir, 'x', sizeof cfg.code_dir);
    expect_invalid(&cfg, "code_dir", "not NUL-terminated");
}

/* Every real field refuses a value below FLT_MIN that its range admits
 * (float32 makes it 0 or subnormal), naming the field and its line, in a
 * file and in a config built in C; 0 and FLT_MIN itself pass where the
 * range has them. */
static void test_reals_are_normal_float32(void **state)
{
    (void)state;
    bf_job_config good;
    bf_job_config_defaults(&good);
    json_t *all = bf_job_config_to_json(&good);
    const char *field;
    json_t *v;
    int reals = 0;
    json_object_foreach(all, field, v) {
        if (!json_is_real(v))
            continue;
        reals++;
        json_t *lines = json_pack("{si}", field, 7);
        const double tiny[] = {4.9e-324, 1e-39, -1e-39, FLT_MIN / 2};
        for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
            json_t *obj = json_pack("{sf}", field, tiny[i]);
            bf_job_config cfg = good;
            bf_error err;
            assert_int_equal(bf_job_config_apply_json(&cfg, obj, "j.yaml",
                                                      lines, &err), -1);
            assert_string_equal(err.field, field);
            assert_int_equal(err.line, 7);
            json_decref(obj);
        }
        const double normal[] = {0, FLT_MIN, -FLT_MIN};
        for (size_t i = 0; i < sizeof normal / sizeof normal[0]; i++) {
            json_t *obj = json_pack("{sf}", field, normal[i]);
            bf_job_config cfg = good;
            bf_error err;
            if (bf_job_config_apply_json(&cfg, obj, "j.yaml", lines, &err) &&
                !strstr(err.msg, "out of range"))
                fail_msg("%s = %g refused: %s", field, normal[i], err.msg);
            json_decref(obj);
        }
        json_decref(lines);
    }
    json_decref(all);
    assert_int_equal(reals, 7);
    bf_job_config cfg = good;
    cfg.lr = 1e-40;
    expect_invalid(&cfg, "lr", "1e-40 is not a normal float32");
    cfg = good;
    cfg.weight_decay = 4.9e-324;
    expect_invalid(&cfg, "weight_decay", "5e-324 is not a normal float32");
}

/* Which fields a rope variant ignores, and the effective config that
 * makes jobs training the same model compare equal. */
static void test_field_effect(void **state)
{
    (void)state;
    static const struct {
        const char *field;
        int matters[6];   /* none, rope, spectral, bifocal, prope, pope */
    } table[] = {
        {"rope_base",         {0, 1, 1, 1, 1, 1}},
        {"random_positions",  {0, 1, 1, 1, 1, 1}},
        {"spectral_fraction", {0, 0, 0, 1, 0, 0}},
        {"freq_lr_mult",      {0, 0, 1, 1, 0, 0}},
        {"prope_fraction",    {0, 0, 0, 0, 1, 0}},
        {"lr",                {1, 1, 1, 1, 1, 1}},
    };
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        for (int r = 0; r < 6; r++) {
            cfg.rope = (bf_rope_kind)r;
            assert_int_equal(bf_job_config_field_matters(&cfg, table[i].field),
                             table[i].matters[r]);
        }

    /* rope with another spectral_fraction: the same model */
    bf_job_config a, b, ea, eb;
    bf_job_config_defaults(&a);
    b = a;
    b.spectral_fraction = 0.75;
    b.freq_lr_mult = 10;
    bf_job_config_effective(&a, &ea);
    bf_job_config_effective(&b, &eb);
    assert_memory_equal(&ea, &eb, sizeof ea);
    /* bifocal with no learnable head (4 heads x 0.1) is rope */
    b.rope = BF_ROPE_BIFOCAL;
    b.spectral_fraction = 0.1;
    bf_job_config_effective(&b, &eb);
    assert_int_equal(eb.rope, BF_ROPE_GEOMETRIC);
    assert_memory_equal(&ea, &eb, sizeof ea);
    /* bifocal with every head learnable is spectral, freq_lr_mult kept */
    b.spectral_fraction = 1.0;
    bf_job_config_effective(&b, &eb);
    assert_int_equal(eb.rope, BF_ROPE_SPECTRAL);
    assert_true(eb.freq_lr_mult == 10);
    /* prope: no pair zeroed is rope, every pair zeroed is none */
    b = a;
    b.rope = BF_ROPE_PROPE;
    b.prope_fraction = 0.0;
    bf_job_config_effective(&b, &eb);
    assert_memory_equal(&ea, &eb, sizeof ea);
    b.prope_fraction = 1.0;
    bf_job_config_effective(&b, &eb);
    assert_int_equal(eb.rope, BF_ROPE_NONE);
    assert_true(eb.rope_base == 10000.0);
    /* garbage past a path's end does not make another config */
    b = a;
    memset(b.init_from + 1, 'x', 10);
    b.init_from[0] = '\0';
    bf_job_config_effective(&b, &eb);
    assert_memory_equal(&ea, &eb, sizeof ea);
    b = a;
    memset(b.code_dir + strlen(b.code_dir) + 1, 'x', 10);
    bf_job_config_effective(&b, &eb);
    assert_memory_equal(&ea, &eb, sizeof ea);
    /* a real difference stays one */
    b = a;
    b.rope_base = 500000;
    bf_job_config_effective(&b, &eb);
    assert_true(eb.rope_base == 500000);
}

static void test_names_and_derived(void **state)
{
    (void)state;
    for (int t = 0; t < 4; t++)
        assert_int_equal(bf_task_from_name(bf_task_name(t)), t);
    assert_int_equal(bf_task_from_name("code"), BF_TASK_CODE);
    for (int r = 0; r < 6; r++)
        assert_int_equal(bf_rope_from_name(bf_rope_name(r)), r);
    assert_int_equal(bf_rope_from_name("prope"), BF_ROPE_PROPE);
    assert_int_equal(bf_rope_from_name("pope"), BF_ROPE_POPE);
    assert_int_equal(bf_task_from_name("Dyck"), -1);
    assert_int_equal(bf_rope_from_name("geometric"), -1);
    assert_string_equal(bf_rope_name(BF_ROPE_GEOMETRIC), "rope");

    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    cfg.n_heads = 8;
    cfg.spectral_fraction = 0.25;
    cfg.rope = BF_ROPE_BIFOCAL;
    assert_int_equal(bf_job_config_spectral_heads(&cfg), 2);
    cfg.spectral_fraction = 1.0;
    assert_int_equal(bf_job_config_spectral_heads(&cfg), 8);
    cfg.rope = BF_ROPE_SPECTRAL;
    cfg.spectral_fraction = 0.0;
    assert_int_equal(bf_job_config_spectral_heads(&cfg), 8);
    cfg.rope = BF_ROPE_GEOMETRIC;
    assert_int_equal(bf_job_config_spectral_heads(&cfg), 0);
    cfg.rope = BF_ROPE_NONE;
    assert_int_equal(bf_job_config_spectral_heads(&cfg), 0);

    /* p-RoPE: d_head 64/8 = 8, so 4 pairs per head; no learnable heads */
    assert_int_equal(bf_job_config_prope_pairs(&cfg), 0);
    cfg.rope = BF_ROPE_PROPE;
    assert_int_equal(bf_job_config_spectral_heads(&cfg), 0);
    assert_int_equal(bf_job_config_prope_pairs(&cfg), 1); /* default 0.25 */
    cfg.prope_fraction = 0.6;
    assert_int_equal(bf_job_config_prope_pairs(&cfg), 2); /* 2.4 rounds */
    cfg.prope_fraction = 1.0;
    assert_int_equal(bf_job_config_prope_pairs(&cfg), 4);
    cfg.prope_fraction = 0.0;
    assert_int_equal(bf_job_config_prope_pairs(&cfg), 0);
    cfg.rope = BF_ROPE_GEOMETRIC;
    cfg.prope_fraction = 1.0;
    assert_int_equal(bf_job_config_prope_pairs(&cfg), 0); /* prope only */
}

int main(void)
{
    struct CMUnitTest tests[N_BAD_CASES + 16];
    size_t n = 0;
    for (size_t i = 0; i < N_BAD_CASES; i++) {
        struct CMUnitTest t = cmocka_unit_test_prestate(run_bad_case,
                                                        (void *)&bad_cases[i]);
        t.name = bad_cases[i].name;
        tests[n++] = t;
    }
    const struct CMUnitTest good[] = {
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_defaults_are_valid),
        cmocka_unit_test(test_load_overrides_defaults),
        cmocka_unit_test(test_example_configs_are_valid),
        cmocka_unit_test(test_canonical_round_trip),
        cmocka_unit_test(test_canonical_form),
        cmocka_unit_test(test_canonical_determinism),
        cmocka_unit_test(test_trainer_field),
        cmocka_unit_test(test_params_field),
        cmocka_unit_test(test_apply_json_is_atomic_and_reads_lines),
        cmocka_unit_test(test_validate_checks_built_configs),
        cmocka_unit_test(test_reals_are_normal_float32),
        cmocka_unit_test(test_names_and_derived),
        cmocka_unit_test(test_field_effect),
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        tests[n++] = good[i];
    return _cmocka_run_group_tests("test_job_config", tests, n, make_tmp_dir,
                                   remove_tmp_dir);
}
