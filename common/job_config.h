/* Job configuration: one flat set of named fields, shared by the worker (which
 * trains it) and the coordinator (which validates every expanded sweep job
 * with exactly this code).
 *
 * Field names are the public vocabulary of sweeps, the database and the docs:
 *   task, depth, eval_depths, dyck_k, modulus, code_dir, rope, rope_base,
 *   spectral_fraction, freq_lr_mult, prope_fraction, random_positions,
 *   d_model, n_layers, n_heads, seq_len,
 *   batch_size, steps, lr, warmup_steps, weight_decay, grad_clip, seed,
 *   log_every, eval_every, freq_every, checkpoint_every, init_from,
 *   eval_examples, stop_on_nonfinite, trainer, params
 * Every field has a default (bf_job_config_defaults).  `trainer` names the
 * program that trains the job: "builtin" (this engine, the default) or a
 * name a `bifocal-worker --exec CMD --trainer NAME` declares
 * (docs/trainers.md); the queue leases a job only to a worker of its
 * trainer, and canonical JSON leaves the default out, so the hashes of
 * builtin configs are those they had before the field.
 *
 * `params` holds a trainer's own free-form parameters (docs/job-config.md):
 * name -> finite number, string or boolean, each addressed in sweeps,
 * results and SQL as the field `params.NAME`.  Only an --exec trainer
 * reads them, so a builtin job with params is refused; canonical JSON
 * leaves an empty `params` out, so configs without them keep their hash. */
#ifndef BF_JOB_CONFIG_H
#define BF_JOB_CONFIG_H

#include <stdint.h>
#include <jansson.h>

#include "bf_error.h"
#include "task_kind.h"

#define BF_MAX_EVAL_DEPTHS 16
#define BF_MAX_DEPTH 256     /* largest depth / eval depth a task accepts */
#define BF_PATH_MAX 1024
#define BF_MAX_POSITIONS 262144 /* largest random_positions */
/* code_dir's default: the Python standard library of Debian's python3 */
#define BF_CODE_DIR_DEFAULT "/usr/lib/python3.11"

typedef enum {
    BF_ROPE_NONE,     /* NoPE baseline: no rotation */
    BF_ROPE_GEOMETRIC,/* "rope": fixed base^(-2i/d_head) */
    BF_ROPE_SPECTRAL, /* "spectral": every frequency learnable */
    BF_ROPE_BIFOCAL,  /* "bifocal": last S heads of each layer learnable */
    BF_ROPE_PROPE,    /* "prope": p-RoPE (Barbero et al., ICLR 2025), fixed
                         frequencies with the lowest prope_fraction of each
                         head's pairs at omega = 0 (no position) */
    BF_ROPE_POPE      /* "pope": PoPE (Gopalakrishnan et al., 2025): each
                         q, k component a magnitude softplus(x) at phase
                         position * base^(-c/d_head), c = 0..d_head-1 */
} bf_rope_kind;

/* The largest seed: 2^53, past which a JSON reader holding numbers as
 * doubles (every browser) would show two seeds as one. */
#define BF_JOB_MAX_SEED (1ULL << 53)

/* A trainer name: 1 .. BF_TRAINER_NAME_MAX - 1 lowercase letters, digits,
 * '_' or '-', starting with a letter. */
#define BF_TRAINER_NAME_MAX 64
#define BF_TRAINER_BUILTIN "builtin"

/* Free-form parameters: at most BF_PARAMS_MAX names of 1 ..
 * BF_PARAM_NAME_MAX - 1 characters [a-z][a-z0-9_]*, string values of at
 * most BF_PARAM_STRING_MAX - 1 bytes, integers within +-2^53, and the
 * whole canonical object (job.json's `params`) at most
 * BF_PARAMS_JSON_MAX - 1 bytes: the config stays a flat, copyable struct. */
#define BF_PARAMS_MAX 32
#define BF_PARAM_NAME_MAX 64
#define BF_PARAM_STRING_MAX 256
#define BF_PARAMS_JSON_MAX 1024
#define BF_PARAMS_PREFIX "params."   /* the field of one parameter */

typedef struct bf_job_config {
    bf_task_kind task;
    int depth;                          /* training draws depths 1..depth */
    int eval_depths[BF_MAX_EVAL_DEPTHS];
    int n_eval_depths;
    int dyck_k;
    int modulus;
    bf_rope_kind rope;
    double rope_base;
    double spectral_fraction;
    double freq_lr_mult;
    double prope_fraction;              /* rope: prope only */
    int random_positions;               /* N > 0: training positions are a
                                           sorted random subset of [0, N)
                                           (Ruoss et al., ACL 2023); 0 off */
    int d_model, n_layers, n_heads, seq_len;
    int batch_size;                     /* global, over all ranks */
    int steps;
    double lr;
    int warmup_steps;
    double weight_decay;
    double grad_clip;
    uint64_t seed;                      /* 0 .. BF_JOB_MAX_SEED */
    int log_every, eval_every, freq_every, checkpoint_every; /* 0 = never */
    int eval_examples;                  /* held-out examples per eval depth */
    char init_from[BF_PATH_MAX];        /* checkpoint path, "" = none */
    char code_dir[BF_PATH_MAX];         /* task code: the source tree */
    int stop_on_nonfinite;              /* 1: a non-finite loss fails the job */
    char trainer[BF_TRAINER_NAME_MAX];  /* who trains it, NUL-padded */
    char params[BF_PARAMS_JSON_MAX];    /* canonical JSON object of the
                                           free-form parameters (keys
                                           sorted, compact), "" for none;
                                           NUL-padded */
} bf_job_config;

/* Whether `name` is a job-config field: a builtin one, `params`, or
 * `params.NAME` with a valid parameter name. */
int bf_job_config_has_field(const char *name);

/* NAME of a field `params.NAME`; NULL for any other field. */
const char *bf_job_config_param_of(const char *field);

/* The value of `field` in a config as JSON (bf_job_config_to_json, or a
 * stored config): a field params.NAME is NAME of its `params` object.
 * Borrowed; NULL when the config has no such field. */
json_t *bf_job_config_json_get(const json_t *config, const char *field);

/* Moves each member of config's `params` object to a member params.NAME
 * of config itself: the results commands and the dashboard hold configs
 * so, and treat a parameter as any other field (--where, --by, labels). */
void bf_job_config_json_flatten(json_t *config);

/* Whether name is a valid trainer name (BF_TRAINER_NAME_MAX). */
int bf_job_config_trainer_name_ok(const char *name);

/* Fills every field with its default. */
void bf_job_config_defaults(bf_job_config *cfg);

/* Applies the fields present in `obj` on top of `cfg` (start from defaults).
 * Unknown fields and wrong types are refused.  `params: {NAME: value}`
 * sets each listed parameter and keeps the others (layers of a sweep add
 * to each other's); a key `params.NAME` sets one.  `file` names the source for
 * messages; `lines` (may be NULL) is an object mapping field name -> line
 * number, as produced by bf_yaml_parse for the object's members (keys may
 * be pointers "/steps", "/eval_depths/1" or bare names "steps"; use
 * bf_yaml_lines_subtree for a nested mapping).  Each value's type and range
 * are checked here; on error `cfg` is left unchanged.
 * Does not validate cross-field constraints: call bf_job_config_validate. */
int bf_job_config_apply_json(bf_job_config *cfg, const json_t *obj,
                             const char *file, const json_t *lines,
                             bf_error *err);

/* Checks impossible values and cross-field constraints (d_model % n_heads,
 * odd d_head, seq_len too short for the deepest depth, ...).  The error names
 * the field.  For task code it also loads code_dir's corpus (once per
 * process, code_corpus.h) and refuses a directory that is missing or has
 * no usable file, and a depth or eval depth without snippets there. */
int bf_job_config_validate(const bf_job_config *cfg, bf_error *err);

/* The same, but errors also carry `file` and the line of the offending field
 * from `lines` (same forms as for bf_job_config_apply_json; may be NULL). */
int bf_job_config_validate_in(const bf_job_config *cfg, const char *file,
                              const json_t *lines, bf_error *err);

/* Reads a YAML or JSON job file (JSON is valid YAML), applies it to
 * defaults and validates.  Errors carry file and line. */
int bf_job_config_load_file(bf_job_config *cfg, const char *path, bf_error *err);

/* Canonical JSON: every field (trainer only when not builtin), keys
 * sorted, compact; the same config always gives the same bytes (the
 * coordinator hashes it).  Caller frees. */
char *bf_job_config_to_canonical_json(const bf_job_config *cfg);

/* The same as a jansson object (new reference). */
json_t *bf_job_config_to_json(const bf_job_config *cfg);

/* The canonical value of one field (new reference): 10 and 10.0 of a real
 * field are the same value, "1e-3" of lr is 0.001.  NULL with err set (no
 * file or line: the caller knows them) if the field is unknown or the value
 * does not apply. */
json_t *bf_job_config_canonical_value(const char *field, const json_t *value,
                                      bf_error *err);

/* Names <-> enums; the *_from_name functions return -1 on unknown. */
const char *bf_task_name(bf_task_kind t);
const char *bf_rope_name(bf_rope_kind r);
int bf_task_from_name(const char *s);
int bf_rope_from_name(const char *s);

/* Number of learnable (spectral) heads per layer for this config. */
int bf_job_config_spectral_heads(const bf_job_config *cfg);

/* Rotary pairs per head whose omega is 0 (the lowest-frequency ones):
 * round(prope_fraction * d_head / 2) for rope: prope, else 0. */
int bf_job_config_prope_pairs(const bf_job_config *cfg);

/* Deepest of `depth` and every eval depth. */
int bf_job_config_max_depth(const bf_job_config *cfg);

/* Whether `field` changes what a job of cfg's rope variant trains: 0 for
 * the positional fields a variant ignores (rope_base and random_positions
 * with none; spectral_fraction but with bifocal; freq_lr_mult but with
 * spectral and bifocal; prope_fraction but with prope), 1 for every other
 * field. */
int bf_job_config_field_matters(const bf_job_config *cfg, const char *field);

/* Whether cfg's `field` holds its default value (0 for an unknown field). */
int bf_job_config_field_is_default(const bf_job_config *cfg,
                                   const char *field);

/* cfg as the trainer sees it, into *out: a variant that degenerates to
 * another is renamed (bifocal with no learnable head is rope, with every
 * head learnable spectral; prope with no zeroed pair is rope, with every
 * pair zeroed none), then the
 * fields without effect for the variant are reset to their defaults.  Two
 * jobs with equal effective configs train the same model.  *out is built
 * field by field over zeroed bytes, so equal effective configs are equal
 * bytes (padding included): a hash of the struct finds them. */
void bf_job_config_effective(const bf_job_config *cfg, bf_job_config *out);

#endif
