/* Job configuration: defaults, JSON in, validation, canonical JSON out.
 *
 * One table (job_fields) describes every field once: its name, how it is
 * stored and the range a single value may take.  Parsing, range checks and
 * serialisation all walk that table, so adding a field is one line here
 * (plus its default and docs/job-config.md). */
#include "job_config.h"

#include <ctype.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code_corpus.h"
#include "yaml_json.h"

typedef enum {
    KIND_INT,    /* int, JSON integer */
    KIND_REAL,   /* double, JSON integer or real */
    KIND_SEED,   /* uint64_t, JSON integer 0 .. BF_JOB_MAX_SEED */
    KIND_TASK,   /* bf_task_kind, JSON string */
    KIND_ROPE,   /* bf_rope_kind, JSON string */
    KIND_DEPTHS, /* eval_depths + n_eval_depths, JSON array of integers */
    KIND_PATH,   /* char[BF_PATH_MAX], JSON string (NUL-padded) */
    KIND_BOOL,   /* int 0 / 1, JSON true / false */
    KIND_NAME,   /* char[BF_TRAINER_NAME_MAX], a trainer name (NUL-padded) */
    KIND_PARAMS  /* char[BF_PARAMS_JSON_MAX], canonical JSON (NUL-padded) */
} field_kind;

typedef struct field_spec {
    const char *name;
    field_kind kind;
    size_t offset;
    /* Allowed range of one value (of each element for KIND_DEPTHS). */
    double min, max;
    int min_exclusive; /* value must be > min instead of >= min */
} field_spec;

#define FIELD(name, kind, lo, hi) \
    {#name, kind, offsetof(bf_job_config, name), lo, hi, 0}
#define FIELD_ABOVE(name, kind, lo, hi) \
    {#name, kind, offsetof(bf_job_config, name), lo, hi, 1}

static const field_spec job_fields[] = {
    FIELD(task, KIND_TASK, 0, 0),
    FIELD(depth, KIND_INT, 1, BF_MAX_DEPTH),
    FIELD(eval_depths, KIND_DEPTHS, 1, BF_MAX_DEPTH),
    FIELD(dyck_k, KIND_INT, 1, 16),
    FIELD(modulus, KIND_INT, 2, 100),
    FIELD(rope, KIND_ROPE, 0, 0),
    FIELD_ABOVE(rope_base, KIND_REAL, 1, 1e12),
    FIELD(spectral_fraction, KIND_REAL, 0, 1),
    FIELD(freq_lr_mult, KIND_REAL, 0, 1e6),
    FIELD(prope_fraction, KIND_REAL, 0, 1),
    /* 0 (off) or >= seq_len, checked in validate_cross */
    FIELD(random_positions, KIND_INT, 0, BF_MAX_POSITIONS),
    FIELD(d_model, KIND_INT, 2, 8192),
    FIELD(n_layers, KIND_INT, 1, 256),
    FIELD(n_heads, KIND_INT, 1, 1024),
    FIELD(seq_len, KIND_INT, 2, 65536),
    FIELD(batch_size, KIND_INT, 1, 1 << 24),
    FIELD(steps, KIND_INT, 1, INT_MAX),
    FIELD(lr, KIND_REAL, 0, 10),
    FIELD(warmup_steps, KIND_INT, 0, INT_MAX),
    FIELD(weight_decay, KIND_REAL, 0, 10),
    FIELD_ABOVE(grad_clip, KIND_REAL, 0, 1e12),
    FIELD(seed, KIND_SEED, 0, 0), /* 0 .. 2^53, checked as an integer */
    FIELD(log_every, KIND_INT, 0, INT_MAX),
    FIELD(eval_every, KIND_INT, 0, INT_MAX),
    FIELD(freq_every, KIND_INT, 0, INT_MAX),
    FIELD(checkpoint_every, KIND_INT, 0, INT_MAX),
    FIELD(eval_examples, KIND_INT, 1, 1 << 24),
    FIELD(init_from, KIND_PATH, 0, 0),
    FIELD(code_dir, KIND_PATH, 0, 0),
    FIELD(stop_on_nonfinite, KIND_BOOL, 0, 1),
    FIELD(trainer, KIND_NAME, 0, 0),
    FIELD(params, KIND_PARAMS, 0, 0),
};
#define N_JOB_FIELDS (sizeof job_fields / sizeof job_fields[0])

static const char *const task_names[] = {"dyck", "counter", "modarith",
                                         "code"};
static const char *const rope_names[] = {"none", "rope", "spectral", "bifocal",
                                         "prope", "pope"};
#define N_TASKS 4
#define N_ROPES 6

void bf_job_config_defaults(bf_job_config *cfg)
{
    /* Zero everything first so that equal configs are equal bytes, padding
     * and the tails of the paths included. */
    memset(cfg, 0, sizeof *cfg);
    cfg->task = BF_TASK_DYCK;
    cfg->depth = 4;
    cfg->eval_depths[0] = 4;
    cfg->eval_depths[1] = 8;
    cfg->n_eval_depths = 2;
    cfg->dyck_k = 2;
    cfg->modulus = 10;
    cfg->rope = BF_ROPE_GEOMETRIC;
    cfg->rope_base = 10000.0;
    cfg->spectral_fraction = 0.5;
    cfg->freq_lr_mult = 1.0;
    cfg->prope_fraction = 0.25;
    cfg->random_positions = 0;
    cfg->d_model = 64;
    cfg->n_layers = 2;
    cfg->n_heads = 4;
    cfg->seq_len = 64;
    cfg->batch_size = 32;
    cfg->steps = 500;
    cfg->lr = 1e-3;
    cfg->warmup_steps = 50;
    cfg->weight_decay = 0.1;
    cfg->grad_clip = 1.0;
    cfg->seed = 1;
    cfg->log_every = 10;
    cfg->eval_every = 100;
    cfg->freq_every = 50;
    cfg->checkpoint_every = 0;
    cfg->eval_examples = 128;
    cfg->init_from[0] = '\0';
    snprintf(cfg->code_dir, sizeof cfg->code_dir, "%s", BF_CODE_DIR_DEFAULT);
    cfg->stop_on_nonfinite = 1;
    snprintf(cfg->trainer, sizeof cfg->trainer, "%s", BF_TRAINER_BUILTIN);
}

int bf_job_config_trainer_name_ok(const char *name)
{
    size_t n = strnlen(name, BF_TRAINER_NAME_MAX);
    if (n == 0 || n >= BF_TRAINER_NAME_MAX || !islower((unsigned char)name[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)name[i]) &&
            !isdigit((unsigned char)name[i]) && !strchr("_-", name[i]))
            return 0;
    return 1;
}

/* ---- names ------------------------------------------------------------ */

static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

const char *bf_task_name(bf_task_kind t)
{
    return (unsigned)t < N_TASKS ? task_names[t] : "?";
}

const char *bf_rope_name(bf_rope_kind r)
{
    return (unsigned)r < N_ROPES ? rope_names[r] : "?";
}

int bf_task_from_name(const char *s)
{
    return name_index(task_names, N_TASKS, s);
}

int bf_rope_from_name(const char *s)
{
    return name_index(rope_names, N_ROPES, s);
}

/* "a, b, c" */
static void join_names(const char *const *names, int n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "",
                                names[i]);
}

/* ---- field access ----------------------------------------------------- */

#define FIELD_PTR(type, cfg, f) ((type *)((char *)(cfg) + (f)->offset))
#define FIELD_CPTR(type, cfg, f) \
    ((const type *)((const char *)(cfg) + (f)->offset))

static const field_spec *find_field(const char *name)
{
    for (size_t i = 0; i < N_JOB_FIELDS; i++)
        if (strcmp(job_fields[i].name, name) == 0)
            return &job_fields[i];
    return NULL;
}

static int param_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= BF_PARAM_NAME_MAX || !islower((unsigned char)name[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)name[i]) &&
            !isdigit((unsigned char)name[i]) && name[i] != '_')
            return 0;
    return 1;
}

const char *bf_job_config_param_of(const char *field)
{
    size_t n = strlen(BF_PARAMS_PREFIX);
    return strncmp(field, BF_PARAMS_PREFIX, n) == 0 ? field + n : NULL;
}

int bf_job_config_has_field(const char *name)
{
    const char *param = bf_job_config_param_of(name);
    return param ? param_name_ok(param) : find_field(name) != NULL;
}

/* cfg's free-form parameters as an object (new reference; empty: none). */
static json_t *params_object(const bf_job_config *cfg)
{
    json_t *obj = cfg->params[0] ? json_loads(cfg->params, 0, NULL) : NULL;
    return obj ? obj : json_object();
}

json_t *bf_job_config_json_get(const json_t *config, const char *field)
{
    const char *param = bf_job_config_param_of(field);
    return param ? json_object_get(json_object_get(config, "params"), param)
                 : json_object_get(config, field);
}

void bf_job_config_json_flatten(json_t *config)
{
    json_t *params = json_incref(json_object_get(config, "params"));
    if (!json_is_object(params)) {
        json_decref(params);
        return;
    }
    json_object_del(config, "params");
    const char *name;
    json_t *value;
    json_object_foreach(params, name, value) {
        char field[BF_PARAM_NAME_MAX + sizeof BF_PARAMS_PREFIX];
        snprintf(field, sizeof field, BF_PARAMS_PREFIX "%s", name);
        json_object_set(config, field, value);
    }
    json_decref(params);
}

/* Line of field `name` (element `index` when >= 0) in `lines`, which may
 * use pointer keys ("/eval_depths/1") or bare names ("eval_depths").  An
 * element without its own line falls back to the field's line. */
static int field_line(const json_t *lines, const char *name, int index)
{
    if (!lines)
        return 0;
    char key[192];
    const json_t *v = NULL;
    if (index >= 0) {
        snprintf(key, sizeof key, "/%s/%d", name, index);
        v = json_object_get(lines, key);
    }
    if (!v) {
        snprintf(key, sizeof key, "/%s", name);
        v = json_object_get(lines, key);
    }
    if (!v)
        v = json_object_get(lines, name);
    return json_is_integer(v) ? (int)json_integer_value(v) : 0;
}

/* Shortest spelling that reads back as exactly v: messages show "0.1",
 * not "0.10000000000000001". */
static void format_real(double v, char *buf, size_t cap)
{
    if (v == floor(v) && fabs(v) < 1e15) { /* integral: "300", not "3e+02" */
        snprintf(buf, cap, "%.0f", v);
        return;
    }
    for (int digits = 1; digits < 17; digits++) {
        snprintf(buf, cap, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
    snprintf(buf, cap, "%.17g", v);
}

/* How a JSON value reads in an error message: `string "4"`, `real 2.5`. */
static void describe_value(const json_t *v, char *buf, size_t cap)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        snprintf(buf, cap, "string \"%.80s\"", json_string_value(v));
        break;
    case JSON_INTEGER:
        snprintf(buf, cap, "integer %lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL: {
        char real[32];
        format_real(json_real_value(v), real, sizeof real);
        snprintf(buf, cap, "real %s", real);
        break;
    }
    case JSON_TRUE:
        snprintf(buf, cap, "true");
        break;
    case JSON_FALSE:
        snprintf(buf, cap, "false");
        break;
    case JSON_NULL:
        snprintf(buf, cap, "null");
        break;
    case JSON_ARRAY:
        snprintf(buf, cap, "a list");
        break;
    case JSON_OBJECT:
        snprintf(buf, cap, "a mapping");
        break;
    }
}

static int in_range(const field_spec *f, double v)
{
    int above_min = f->min_exclusive ? v > f->min : v >= f->min;
    return above_min && v <= f->max; /* false for NaN too */
}

/* "an integer in 1 .. 256", "a number in [0, 1]", "a number > 1 and <= 1e12" */
static void describe_range(const field_spec *f, char *buf, size_t cap)
{
    if (f->kind == KIND_REAL && f->min_exclusive)
        snprintf(buf, cap, "a number > %g and <= %g", f->min, f->max);
    else if (f->kind == KIND_REAL)
        snprintf(buf, cap, "a number in [%g, %g]", f->min, f->max);
    else
        snprintf(buf, cap, "an integer in %.0f .. %.0f", f->min, f->max);
}

/* The trainer computes in float32: a real that becomes 0 or subnormal
 * there (below FLT_MIN), or overflows to inf, is no value it can use. */
static int float_usable(double v)
{
    return v == 0 || (fabs(v) <= FLT_MAX && isnormal((float)v));
}

/* Range check of one number.  The message shows the value, as element
 * `element` of a list when element >= 0.  Formats only on failure: sweeps
 * validate every expanded job. */
static int check_range(const field_spec *f, double v, int element,
                       const char *file, int line, bf_error *err)
{
    int ranged = in_range(f, v);
    if (ranged && (f->kind != KIND_REAL || float_usable(v)))
        return 0;
    char shown[32], allowed[96];
    format_real(v, shown, sizeof shown);
    describe_range(f, allowed, sizeof allowed);
    if (ranged)
        return bf_error_set(err, file, line, f->name, "%s is not a normal "
                            "float32, and the trainer computes in float32 "
                            "(normal magnitudes: %g .. %g; smaller ones are "
                            "subnormal or 0 there, larger ones inf; allowed: "
                            "%s)", shown, FLT_MIN, FLT_MAX, allowed);
    if (element >= 0)
        return bf_error_set(err, file, line, f->name, "element %d (%s) is out "
                            "of range (allowed: %s)", element, shown, allowed);
    return bf_error_set(err, file, line, f->name, "%s is out of range "
                        "(allowed: %s)", shown, allowed);
}

/* ---- JSON -> config --------------------------------------------------- */

typedef struct apply_ctx {
    const char *file;
    const json_t *lines;
    bf_error *err;
} apply_ctx;

static int type_error(const apply_ctx *c, const field_spec *f, int line,
                      const char *expected, const json_t *v)
{
    char got[128];
    describe_value(v, got, sizeof got);
    return bf_error_set(c->err, c->file, line, f->name,
                        "expected %s, got %s", expected, got);
}

static int apply_int(const apply_ctx *c, const field_spec *f, const json_t *v,
                     int line, int *out)
{
    if (!json_is_integer(v))
        return type_error(c, f, line, "an integer", v);
    json_int_t x = json_integer_value(v);
    if (check_range(f, (double)x, -1, c->file, line, c->err) < 0)
        return -1;
    *out = (int)x;
    return 0;
}

static int apply_enum(const apply_ctx *c, const field_spec *f, const json_t *v,
                      int line, const char *const *names, int n, int *out)
{
    char allowed[128];
    join_names(names, n, allowed, sizeof allowed);
    if (!json_is_string(v)) {
        char expected[160];
        snprintf(expected, sizeof expected, "a string (one of %s)", allowed);
        return type_error(c, f, line, expected, v);
    }
    int i = name_index(names, n, json_string_value(v));
    if (i < 0)
        return bf_error_set(c->err, c->file, line, f->name,
                            "unknown value \"%.80s\" (allowed: %s)",
                            json_string_value(v), allowed);
    *out = i;
    return 0;
}

static int apply_depths(const apply_ctx *c, const field_spec *f,
                        const json_t *v, int line, bf_job_config *cfg)
{
    if (!json_is_array(v))
        return type_error(c, f, line, "a list of integers", v);
    size_t n = json_array_size(v);
    if (n < 1 || n > BF_MAX_EVAL_DEPTHS)
        return bf_error_set(c->err, c->file, line, f->name,
                            "lists %zu depths (allowed: 1 to %d depths)", n,
                            BF_MAX_EVAL_DEPTHS);
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(v, i);
        int item_line = field_line(c->lines, f->name, (int)i);
        if (!json_is_integer(item)) {
            char expected[64];
            snprintf(expected, sizeof expected, "an integer at element %zu", i);
            return type_error(c, f, item_line, expected, item);
        }
        json_int_t x = json_integer_value(item);
        if (check_range(f, (double)x, (int)i, c->file, item_line, c->err) < 0)
            return -1;
        cfg->eval_depths[i] = (int)x;
    }
    for (size_t i = n; i < BF_MAX_EVAL_DEPTHS; i++)
        cfg->eval_depths[i] = 0;
    cfg->n_eval_depths = (int)n;
    return 0;
}

#define TRAINER_NAME_RULE "1 .. 63 lowercase letters, digits, '_' or '-', " \
    "starting with a letter"

/* A trainer name: an identifier, since workers match it byte for byte. */
static int apply_name(const apply_ctx *c, const field_spec *f,
                      const json_t *v, int line, char *out)
{
    if (!json_is_string(v))
        return type_error(c, f, line, "a string (" TRAINER_NAME_RULE ")", v);
    const char *name = json_string_value(v);
    if (strlen(name) != json_string_length(v) ||
        !bf_job_config_trainer_name_ok(name))
        return bf_error_set(c->err, c->file, line, f->name, "\"%.80s\" is "
                            "not a trainer name (" TRAINER_NAME_RULE ")",
                            name);
    memset(out, 0, BF_TRAINER_NAME_MAX);
    memcpy(out, name, strlen(name));
    return 0;
}

/* ---- free-form parameters ------------------------------------------- */

#define PARAM_NAME_RULE "1 .. 63 lowercase letters, digits or '_', " \
    "starting with a letter"
#define PARAM_MAX_INT (1LL << 53)

/* Line of parameter `name`: given in a `params` mapping or as a dotted
 * key. */
static int param_line(const json_t *lines, const char *name)
{
    char key[96];
    snprintf(key, sizeof key, "params/%s", name);
    int line = field_line(lines, key, -1);
    if (line)
        return line;
    snprintf(key, sizeof key, BF_PARAMS_PREFIX "%s", name);
    line = field_line(lines, key, -1);
    return line ? line : field_line(lines, "params", -1);
}

static int param_error(const apply_ctx *c, const char *name, const char *msg)
{
    char field[96];
    snprintf(field, sizeof field, BF_PARAMS_PREFIX "%.63s", name);
    return bf_error_set(c->err, c->file, param_line(c->lines, name), field,
                        "%s", msg);
}

/* v as one canonical spelling (new reference), or NULL with the error: an
 * integral real is the integer (10.0 and 10 hash alike, as for builtin
 * fields), -0.0 is 0. */
static json_t *param_value(const apply_ctx *c, const char *name,
                           const json_t *v)
{
    char got[128], msg[256];
    describe_value(v, got, sizeof got);
    if (json_is_boolean(v))
        return json_incref((json_t *)v);
    if (json_is_string(v)) {
        size_t n = json_string_length(v);
        if (n < BF_PARAM_STRING_MAX && strlen(json_string_value(v)) == n)
            return json_incref((json_t *)v);
        snprintf(msg, sizeof msg, "a string value has at most %d bytes and "
                 "no NUL", BF_PARAM_STRING_MAX - 1);
        param_error(c, name, msg);
        return NULL;
    }
    double x = json_number_value(v);
    if (!json_is_number(v) || !isfinite(x)) {
        snprintf(msg, sizeof msg, "expected a finite number, a string or "
                 "true/false, got %s", got);
        param_error(c, name, msg);
        return NULL;
    }
    int integral = json_is_integer(v) || x == floor(x);
    /* an integer JSON value compared exactly: 2^53 + 1 is no double */
    json_int_t n = json_integer_value(v);
    int too_big = json_is_integer(v) ? n > PARAM_MAX_INT || n < -PARAM_MAX_INT
                                     : integral && fabs(x) > (double)PARAM_MAX_INT;
    if (too_big) {
        snprintf(msg, sizeof msg, "%s is out of range (integers: within "
                 "+-2^53, the integers a JSON reader holds exactly)", got);
        param_error(c, name, msg);
        return NULL;
    }
    return json_is_integer(v) ? json_incref((json_t *)v)
           : integral ? json_integer((json_int_t)x) : json_real(x);
}

/* Sets parameter `name` in next->params, which stays canonical text. */
static int apply_param(const apply_ctx *c, const char *name, const json_t *v,
                       bf_job_config *next)
{
    if (!param_name_ok(name))
        return param_error(c, name, "not a parameter name ("
                           PARAM_NAME_RULE ")");
    json_t *value = param_value(c, name, v);
    if (!value)
        return -1;
    json_t *params = params_object(next);
    json_object_set_new(params, name, value);
    char *text = json_dumps(params, JSON_SORT_KEYS | JSON_COMPACT |
                                        JSON_REAL_PRECISION(17));
    size_t count = json_object_size(params);
    json_decref(params);
    size_t len = strlen(text);
    if (count <= BF_PARAMS_MAX && len < BF_PARAMS_JSON_MAX) {
        /* NUL-padded, so that equal configs are equal bytes */
        memset(next->params, 0, sizeof next->params);
        memcpy(next->params, text, len);
    }
    free(text);
    char msg[128];
    if (count > BF_PARAMS_MAX)
        snprintf(msg, sizeof msg, "one parameter too many (at most %d)",
                 BF_PARAMS_MAX);
    else if (len >= BF_PARAMS_JSON_MAX)
        snprintf(msg, sizeof msg, "the parameters take %zu bytes of JSON "
                 "(at most %d)", len, BF_PARAMS_JSON_MAX - 1);
    else
        return 0;
    return param_error(c, name, msg);
}

/* `params: {NAME: value, ...}`: each listed parameter set, the rest kept. */
static int apply_params(const apply_ctx *c, const field_spec *f,
                        const json_t *v, bf_job_config *cfg)
{
    if (!json_is_object(v))
        return type_error(c, f, field_line(c->lines, f->name, -1),
                          "a mapping of parameter names to values", v);
    const char *name;
    const json_t *value;
    json_object_foreach((json_t *)v, name, value)
        if (apply_param(c, name, value, cfg) < 0)
            return -1;
    return 0;
}

static int apply_field(const apply_ctx *c, const field_spec *f,
                       const json_t *v, bf_job_config *cfg)
{
    int line = field_line(c->lines, f->name, -1);
    switch (f->kind) {
    case KIND_INT:
        return apply_int(c, f, v, line, FIELD_PTR(int, cfg, f));
    case KIND_REAL: {
        if (!json_is_number(v))
            return type_error(c, f, line, "a number", v);
        double x = json_number_value(v);
        if (check_range(f, x, -1, c->file, line, c->err) < 0)
            return -1;
        *FIELD_PTR(double, cfg, f) = x + 0.0; /* -0.0 -> 0.0: one spelling */
        return 0;
    }
    case KIND_SEED:
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return type_error(c, f, line, "a non-negative integer "
                              "(0 .. 2^53)", v);
        *FIELD_PTR(uint64_t, cfg, f) = (uint64_t)json_integer_value(v);
        return 0;
    case KIND_TASK:
        return apply_enum(c, f, v, line, task_names, N_TASKS,
                          (int *)FIELD_PTR(bf_task_kind, cfg, f));
    case KIND_ROPE:
        return apply_enum(c, f, v, line, rope_names, N_ROPES,
                          (int *)FIELD_PTR(bf_rope_kind, cfg, f));
    case KIND_DEPTHS:
        return apply_depths(c, f, v, line, cfg);
    case KIND_PATH: {
        if (!json_is_string(v))
            return type_error(c, f, line, "a string (a path)", v);
        size_t n = json_string_length(v);
        if (n >= BF_PATH_MAX || strlen(json_string_value(v)) != n)
            return bf_error_set(c->err, c->file, line, f->name,
                                "path is too long or contains NUL (at most "
                                "%d bytes)", BF_PATH_MAX - 1);
        memcpy(FIELD_PTR(char, cfg, f), json_string_value(v), n + 1);
        return 0;
    }
    case KIND_BOOL:
        if (!json_is_boolean(v))
            return type_error(c, f, line, "true or false", v);
        *FIELD_PTR(int, cfg, f) = json_is_true(v);
        return 0;
    case KIND_NAME:
        return apply_name(c, f, v, line, FIELD_PTR(char, cfg, f));
    case KIND_PARAMS:
        return apply_params(c, f, v, cfg);
    }
    return bf_error_set(c->err, c->file, line, f->name, "unhandled field kind");
}

static int unknown_field(const apply_ctx *c, const char *key)
{
    char known[600];
    size_t len = 0;
    known[0] = '\0';
    for (size_t i = 0; i < N_JOB_FIELDS && len < sizeof known; i++)
        len += (size_t)snprintf(known + len, sizeof known - len, "%s%s",
                                i ? ", " : "", job_fields[i].name);
    return bf_error_set(c->err, c->file, field_line(c->lines, key, -1), key,
                        "unknown field (known fields: %s)", known);
}

int bf_job_config_apply_json(bf_job_config *cfg, const json_t *obj,
                             const char *file, const json_t *lines,
                             bf_error *err)
{
    apply_ctx c = {file, lines, err};
    if (!json_is_object(obj)) {
        char got[128];
        describe_value(obj, got, sizeof got);
        int root_line = (int)json_integer_value(json_object_get(lines, ""));
        return bf_error_set(err, file, root_line, NULL,
                            "expected a mapping of job fields, got %s", got);
    }
    bf_job_config next = *cfg; /* commit only when every field applies */
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        const char *param = bf_job_config_param_of(key);
        const field_spec *f = find_field(key);
        if (param ? apply_param(&c, param, v, &next) < 0
                  : !f ? unknown_field(&c, key) < 0
                       : apply_field(&c, f, v, &next) < 0)
            return -1;
    }
    *cfg = next;
    return 0;
}

/* ---- validation ------------------------------------------------------- */

/* Bytes a field takes in bf_job_config. */
static size_t field_size(const field_spec *f)
{
    switch (f->kind) {
    case KIND_REAL:
        return sizeof(double);
    case KIND_SEED:
        return sizeof(uint64_t);
    case KIND_DEPTHS:
        return sizeof ((bf_job_config *)0)->eval_depths;
    case KIND_PATH:
        return BF_PATH_MAX;
    case KIND_NAME:
        return BF_TRAINER_NAME_MAX;
    case KIND_PARAMS:
        return BF_PARAMS_JSON_MAX;
    default:
        return sizeof(int);
    }
}

/* The number stored in an int or real field, for the range check. */
static double numeric_value(const bf_job_config *cfg, const field_spec *f)
{
    switch (f->kind) {
    case KIND_INT:
        return *FIELD_CPTR(int, cfg, f);
    case KIND_REAL:
        return *FIELD_CPTR(double, cfg, f);
    default:
        return 0;
    }
}

/* Per-field checks: every value in its own range, enums known, the eval
 * depth list well-formed. */
static int validate_fields(const bf_job_config *cfg, const apply_ctx *c)
{
    for (size_t i = 0; i < N_JOB_FIELDS; i++) {
        const field_spec *f = &job_fields[i];
        int line = field_line(c->lines, f->name, -1);
        if ((f->kind == KIND_INT || f->kind == KIND_REAL) &&
            check_range(f, numeric_value(cfg, f), -1, c->file, line,
                        c->err) < 0)
            return -1;
        /* JSON readers (the dashboard's and report's pages) hold numbers
         * as doubles: past 2^53 two seeds would print and filter as one. */
        if (f->kind == KIND_SEED && cfg->seed > BF_JOB_MAX_SEED)
            return bf_error_set(c->err, c->file, line, f->name, "%llu is out "
                                "of range (allowed: 0 .. 2^53 = %llu, the "
                                "integers a JSON reader holds exactly)",
                                (unsigned long long)cfg->seed,
                                (unsigned long long)BF_JOB_MAX_SEED);
        if ((f->kind == KIND_PATH || f->kind == KIND_PARAMS) &&
            !memchr(FIELD_CPTR(char, cfg, f), '\0', field_size(f)))
            return bf_error_set(c->err, c->file, line, f->name,
                                "text is not NUL-terminated");
        if (f->kind == KIND_NAME &&
            !bf_job_config_trainer_name_ok(FIELD_CPTR(char, cfg, f)))
            return bf_error_set(c->err, c->file, line, f->name,
                                "not a trainer name (" TRAINER_NAME_RULE ")");
    }
    if ((unsigned)cfg->task >= N_TASKS)
        return bf_error_set(c->err, c->file, field_line(c->lines, "task", -1),
                            "task", "unknown task %d", (int)cfg->task);
    if ((unsigned)cfg->rope >= N_ROPES)
        return bf_error_set(c->err, c->file, field_line(c->lines, "rope", -1),
                            "rope", "unknown rope %d", (int)cfg->rope);
    return 0;
}

static int validate_eval_depths(const bf_job_config *cfg, const apply_ctx *c)
{
    const field_spec *f = find_field("eval_depths");
    int n = cfg->n_eval_depths;
    if (n < 1 || n > BF_MAX_EVAL_DEPTHS)
        return bf_error_set(c->err, c->file, field_line(c->lines, f->name, -1),
                            f->name, "lists %d depths (allowed: 1 to %d "
                            "depths)", n, BF_MAX_EVAL_DEPTHS);
    for (int i = 0; i < n; i++) {
        int line = field_line(c->lines, f->name, i);
        if (check_range(f, cfg->eval_depths[i], i, c->file, line, c->err) < 0)
            return -1;
        for (int j = 0; j < i; j++)
            if (cfg->eval_depths[j] == cfg->eval_depths[i])
                return bf_error_set(c->err, c->file, line, f->name,
                                    "depth %d is listed twice (elements %d "
                                    "and %d); each depth may appear once",
                                    cfg->eval_depths[i], j, i);
    }
    return 0;
}

/* The builtin engine reads no free-form parameter: one in its job would
 * change nothing but the hash, so two runs of one model would look like
 * two configs. */
static int validate_params_trainer(const bf_job_config *cfg,
                                   const apply_ctx *c)
{
    if (!cfg->params[0] || strcmp(cfg->trainer, BF_TRAINER_BUILTIN) != 0)
        return 0;
    json_t *params = params_object(cfg);
    const char *name = json_object_iter_key(json_object_iter(params));
    char msg[160];
    snprintf(msg, sizeof msg, "trainer builtin reads no free-form "
             "parameters, so params.%s would change nothing (set trainer: "
             "to the trainer that reads it, docs/trainers.md)",
             name ? name : "?");
    int rc = param_error(c, name ? name : "?", msg);
    json_decref(params);
    return rc;
}

/* Constraints between fields.  Each error names the field a user would
 * change and shows the values involved. */
static int validate_cross(const bf_job_config *cfg, const apply_ctx *c)
{
    if (cfg->d_model % cfg->n_heads != 0)
        return bf_error_set(c->err, c->file,
                            field_line(c->lines, "n_heads", -1), "n_heads",
                            "d_model %d is not divisible by n_heads %d",
                            cfg->d_model, cfg->n_heads);
    int d_head = cfg->d_model / cfg->n_heads;
    if (d_head % 2 != 0)
        return bf_error_set(c->err, c->file,
                            field_line(c->lines, "d_model", -1), "d_model",
                            "d_head = d_model / n_heads = %d / %d = %d must be "
                            "even (rotary embeddings rotate pairs)",
                            cfg->d_model, cfg->n_heads, d_head);
    if (cfg->warmup_steps > cfg->steps)
        return bf_error_set(c->err, c->file,
                            field_line(c->lines, "warmup_steps", -1),
                            "warmup_steps", "warmup_steps %d exceeds steps %d "
                            "(allowed: 0 .. steps)", cfg->warmup_steps,
                            cfg->steps);
    if (cfg->random_positions != 0 && cfg->random_positions < cfg->seq_len)
        return bf_error_set(c->err, c->file,
                            field_line(c->lines, "random_positions", -1),
                            "random_positions", "%d is fewer positions than "
                            "seq_len %d (allowed: 0 for off, or %d .. %d)",
                            cfg->random_positions, cfg->seq_len, cfg->seq_len,
                            BF_MAX_POSITIONS);
    int deepest = bf_job_config_max_depth(cfg);
    int need = bf_task_max_len(cfg->task, deepest);
    if (cfg->seq_len < need)
        return bf_error_set(c->err, c->file,
                            field_line(c->lines, "seq_len", -1), "seq_len",
                            "seq_len %d is too short: task %s at depth %d (the "
                            "deepest of depth and eval_depths) needs up to %d "
                            "tokens (allowed: seq_len >= %d)", cfg->seq_len,
                            bf_task_name(cfg->task), deepest, need, need);
    return 0;
}

/* Every depth trained and evaluated has snippets in its split (training
 * depths 1..depth in the training files, each eval depth in the held-out
 * ones). */
static int code_depths(const bf_job_config *cfg,
                       const bf_code_corpus *corpus, const apply_ctx *c)
{
    for (int d = 1; d <= cfg->depth; d++)
        if (bf_code_snippet_count(corpus, BF_CODE_TRAIN, d) == 0)
            return bf_error_set(c->err, c->file,
                                field_line(c->lines, "depth", -1), "depth",
                                "depth %d: the training files of code_dir "
                                "'%s' hold no snippet of depth %d (allowed: "
                                "depths with snippets, `bifocal-worker "
                                "code-stats` lists them)", cfg->depth,
                                cfg->code_dir, d);
    for (int i = 0; i < cfg->n_eval_depths; i++)
        if (bf_code_snippet_count(corpus, BF_CODE_EVAL,
                                  cfg->eval_depths[i]) == 0)
            return bf_error_set(c->err, c->file,
                                field_line(c->lines, "eval_depths", i),
                                "eval_depths", "element %d (%d): the "
                                "held-out files of code_dir '%s' hold no "
                                "snippet of that depth (allowed: depths "
                                "with snippets, `bifocal-worker code-stats` "
                                "lists them)", i, cfg->eval_depths[i],
                                cfg->code_dir);
    return 0;
}

/* Task code: the corpus loads, and has the job's depths. */
static int validate_code(const bf_job_config *cfg, const apply_ctx *c)
{
    bf_error why;
    const bf_code_corpus *corpus = bf_code_corpus_get(cfg->code_dir, &why);
    if (!corpus)
        return bf_error_set(c->err, c->file,
                            field_line(c->lines, "code_dir", -1), "code_dir",
                            "%s", why.msg);
    int rc = code_depths(cfg, corpus, c);
    bf_code_corpus_put(corpus);
    return rc;
}

int bf_job_config_validate_in(const bf_job_config *cfg, const char *file,
                              const json_t *lines, bf_error *err)
{
    apply_ctx c = {file, lines, err};
    if (validate_fields(cfg, &c) < 0 || validate_eval_depths(cfg, &c) < 0 ||
        validate_cross(cfg, &c) < 0 || validate_params_trainer(cfg, &c) < 0)
        return -1;
    if (cfg->task == BF_TASK_CODE && validate_code(cfg, &c) < 0)
        return -1;
    return 0;
}

int bf_job_config_validate(const bf_job_config *cfg, bf_error *err)
{
    return bf_job_config_validate_in(cfg, NULL, NULL, err);
}

int bf_job_config_load_file(bf_job_config *cfg, const char *path, bf_error *err)
{
    json_t *lines = NULL;
    json_t *root = bf_yaml_parse_file(path, &lines, err);
    if (!root)
        return -1;
    bf_job_config_defaults(cfg);
    int rc = bf_job_config_apply_json(cfg, root, path, lines, err);
    if (rc == 0)
        rc = bf_job_config_validate_in(cfg, path, lines, err);
    json_decref(root);
    json_decref(lines);
    return rc;
}

/* ---- config -> JSON --------------------------------------------------- */

static json_t *field_to_json(const bf_job_config *cfg, const field_spec *f)
{
    switch (f->kind) {
    case KIND_INT:
        return json_integer(*FIELD_CPTR(int, cfg, f));
    case KIND_REAL:
        return json_real(*FIELD_CPTR(double, cfg, f));
    case KIND_SEED:
        return json_integer((json_int_t)cfg->seed);
    case KIND_TASK:
        return json_string(bf_task_name(cfg->task));
    case KIND_ROPE:
        return json_string(bf_rope_name(cfg->rope));
    case KIND_DEPTHS: {
        json_t *arr = json_array();
        for (int i = 0; i < cfg->n_eval_depths && i < BF_MAX_EVAL_DEPTHS; i++)
            json_array_append_new(arr, json_integer(cfg->eval_depths[i]));
        return arr;
    }
    case KIND_PATH:
        return json_stringn(FIELD_CPTR(char, cfg, f),
                            strnlen(FIELD_CPTR(char, cfg, f), BF_PATH_MAX));
    case KIND_BOOL:
        return json_boolean(*FIELD_CPTR(int, cfg, f));
    case KIND_NAME:
        return json_stringn(FIELD_CPTR(char, cfg, f),
                            strnlen(FIELD_CPTR(char, cfg, f),
                                    BF_TRAINER_NAME_MAX));
    case KIND_PARAMS:
        return params_object(cfg);
    }
    return json_null();
}

json_t *bf_job_config_canonical_value(const char *field, const json_t *value,
                                      bf_error *err)
{
    bf_job_config cfg;
    bf_job_config_defaults(&cfg);
    json_t *assign = json_pack("{sO}", field, (json_t *)value);
    int rc = bf_job_config_apply_json(&cfg, assign, NULL, NULL, err);
    json_decref(assign);
    if (rc < 0)
        return NULL;
    const char *param = bf_job_config_param_of(field);
    if (!param)
        return field_to_json(&cfg, find_field(field));
    json_t *params = params_object(&cfg);
    json_t *canon = json_incref(json_object_get(params, param));
    json_decref(params);
    return canon;
}

json_t *bf_job_config_to_json(const bf_job_config *cfg)
{
    json_t *obj = json_object();
    for (size_t i = 0; i < N_JOB_FIELDS; i++) {
        const field_spec *f = &job_fields[i];
        /* Left out at its default: a builtin job's config, and its hash,
         * stay what they were before trainers had names. */
        if (f->kind == KIND_NAME &&
            strcmp(FIELD_CPTR(char, cfg, f), BF_TRAINER_BUILTIN) == 0)
            continue;
        if (f->kind == KIND_PARAMS && !cfg->params[0])
            continue; /* the same: configs without params keep their hash */
        json_object_set_new(obj, f->name, field_to_json(cfg, f));
    }
    return obj;
}

char *bf_job_config_to_canonical_json(const bf_job_config *cfg)
{
    json_t *obj = bf_job_config_to_json(cfg);
    /* 17 significant digits make every double round-trip exactly. */
    char *s = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT |
                                  JSON_REAL_PRECISION(17));
    json_decref(obj);
    return s;
}

/* ---- derived quantities ----------------------------------------------- */

int bf_job_config_spectral_heads(const bf_job_config *cfg)
{
    switch (cfg->rope) {
    case BF_ROPE_SPECTRAL:
        return cfg->n_heads;
    case BF_ROPE_BIFOCAL:
        return (int)lround(cfg->n_heads * cfg->spectral_fraction);
    default:
        return 0;
    }
}

int bf_job_config_prope_pairs(const bf_job_config *cfg)
{
    if (cfg->rope != BF_ROPE_PROPE || cfg->n_heads < 1)
        return 0;
    int pairs = cfg->d_model / cfg->n_heads / 2;
    return (int)lround(pairs * cfg->prope_fraction);
}

int bf_job_config_max_depth(const bf_job_config *cfg)
{
    int deepest = cfg->depth;
    for (int i = 0; i < cfg->n_eval_depths && i < BF_MAX_EVAL_DEPTHS; i++)
        if (cfg->eval_depths[i] > deepest)
            deepest = cfg->eval_depths[i];
    return deepest;
}

/* ---- fields without effect -------------------------------------------- */

#define ROPE_BIT(r) (1u << (r))
#define ALL_ROPES ((1u << N_ROPES) - 1)

/* The positional fields and the variants that use them; every other field
 * matters to every variant. */
static const struct {
    const char *field;
    unsigned ropes;
} rope_fields[] = {
    {"rope_base", ALL_ROPES & ~ROPE_BIT(BF_ROPE_NONE)},
    {"random_positions", ALL_ROPES & ~ROPE_BIT(BF_ROPE_NONE)},
    {"spectral_fraction", ROPE_BIT(BF_ROPE_BIFOCAL)},
    {"freq_lr_mult", ROPE_BIT(BF_ROPE_SPECTRAL) | ROPE_BIT(BF_ROPE_BIFOCAL)},
    {"prope_fraction", ROPE_BIT(BF_ROPE_PROPE)},
};
#define N_ROPE_FIELDS (sizeof rope_fields / sizeof rope_fields[0])

int bf_job_config_field_matters(const bf_job_config *cfg, const char *field)
{
    for (size_t i = 0; i < N_ROPE_FIELDS; i++)
        if (strcmp(rope_fields[i].field, field) == 0)
            return (unsigned)cfg->rope < N_ROPES &&
                   (rope_fields[i].ropes & ROPE_BIT(cfg->rope)) != 0;
    return 1;
}

/* cfg into out field by field over zeroed bytes, the paths' tails zeroed:
 * equal configs become equal bytes, whatever padding and tails held. */
static void copy_fields(const bf_job_config *cfg, bf_job_config *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < N_JOB_FIELDS; i++) {
        const field_spec *f = &job_fields[i];
        memcpy((char *)out + f->offset, (const char *)cfg + f->offset,
               field_size(f));
        if (f->kind == KIND_PATH || f->kind == KIND_NAME ||
            f->kind == KIND_PARAMS) {
            char *text = FIELD_PTR(char, out, f);
            size_t len = strnlen(text, field_size(f));
            memset(text + len, 0, field_size(f) - len);
        }
    }
    out->n_eval_depths = cfg->n_eval_depths;
}

int bf_job_config_field_is_default(const bf_job_config *cfg,
                                   const char *field)
{
    const field_spec *f = find_field(field);
    if (!f)
        return 0;
    bf_job_config defaults;
    bf_job_config_defaults(&defaults);
    return memcmp((const char *)cfg + f->offset,
                  (const char *)&defaults + f->offset, field_size(f)) == 0;
}

void bf_job_config_effective(const bf_job_config *cfg, bf_job_config *out)
{
    copy_fields(cfg, out);
    int learnable = bf_job_config_spectral_heads(cfg);
    if (cfg->rope == BF_ROPE_BIFOCAL && learnable == 0)
        out->rope = BF_ROPE_GEOMETRIC;
    else if (cfg->rope == BF_ROPE_BIFOCAL && learnable == cfg->n_heads)
        out->rope = BF_ROPE_SPECTRAL;
    else if (cfg->rope == BF_ROPE_PROPE && bf_job_config_prope_pairs(cfg) == 0)
        out->rope = BF_ROPE_GEOMETRIC;
    else if (cfg->rope == BF_ROPE_PROPE &&
             bf_job_config_prope_pairs(cfg) == cfg->d_model / cfg->n_heads / 2)
        out->rope = BF_ROPE_NONE;   /* every omega 0: no rotation at all */
    bf_job_config defaults;
    bf_job_config_defaults(&defaults);
    for (size_t i = 0; i < N_ROPE_FIELDS; i++) {
        const field_spec *f = find_field(rope_fields[i].field);
        if (bf_job_config_field_matters(out, f->name))
            continue;
        memcpy((char *)out + f->offset, (const char *)&defaults + f->offset,
               field_size(f));
    }
}
