/* Internals of sweep files shared by their modules, which call each other
 * one way only (the layout test's check_calls.py holds them to it):
 *   sweep_coords.c  below the others: value helpers and a job's coordinates
 *   sweep_search.c  a stage's search: trials sampled into an axis (with
 *                   sweep_sobol.c below it); called by parsing
 *   sweep_prune.c   a stage's prune rule: parsed, then checked per job by
 *                   expansion
 *   sweep_from.c    a stage's `from:`: parsed after every stage, then each
 *                   job matched with its source cell by expansion
 *   sweep.c         parsing: stages, bases, axes, excludes, seeds, references
 *   sweep_expand.c  expansion, validation, duplicates, source matching
 *   sweep_warn.c    the warnings of a sweep (called by expansion)
 * Nothing outside server/sweep/ includes this. */
#ifndef BF_SWEEP_INTERNAL_H
#define BF_SWEEP_INTERNAL_H

#include "sweep.h"

/* An init_from that starts a job from an earlier stage: "stage:NAME". */
#define STAGE_REF "stage:"

#define SWEEP_MAX_AXES 64
#define SWEEP_SEARCH_MAX_TRIALS 100000
#define SWEEP_SOBOL_MAX_DIMS 16
#define SWEEP_SEARCH_MAX_DIMS SWEEP_SOBOL_MAX_DIMS

/* A zip's list of names for its entries: not a job field. */
#define ZIP_LABEL "label"

/* One axis: a grid field, or a zip group of fields varied together.
 * assign[v] is the object {field: value v, ...} handed to
 * bf_job_config_apply_json. */
typedef struct sweep_axis {
    char where[64];      /* "grid" or "zip", "zip[1]": for messages */
    char ptr[96];        /* JSON pointer of its mapping: "/stages/1/zip" */
    size_t n_fields;
    const char **fields; /* borrowed from sw->doc */
    size_t n;            /* values */
    json_t **assign;     /* owned */
    int *lines;          /* [v * n_fields + f]: line of value v of field f */
    const json_t *labels;/* a zip's `label` list (checked), borrowed; or NULL */
} sweep_axis;

/* An exclude rule: a combination is left out when, on every axis the rule
 * names, its value is one the rule matches. */
typedef struct sweep_rule {
    char **match;        /* per axis: NULL (any value) or n flags */
} sweep_rule;

/* Open addressing from a 64-bit hash to a position and a count; equal hashes
 * are taken as equal keys (FNV-1a 64 collides by chance with probability
 * ~n^2/2^65, about 3e-10 for 100,000 jobs). */
typedef struct sweep_map {
    uint64_t *hash;
    size_t *pos1;        /* position + 1; 0 = empty slot */
    size_t *count;
    size_t mask;
} sweep_map;

void sweep__map_init(sweep_map *m, size_t n);
void sweep__map_free(sweep_map *m);
/* Adds one occurrence of h at pos (kept only for the first); returns the
 * first position + 1 if h was there already, else 0. */
size_t sweep__map_add(sweep_map *m, uint64_t h, size_t pos);
/* The first position + 1 of h (0: absent); *count gets how many. */
size_t sweep__map_find(const sweep_map *m, uint64_t h, size_t *count);

/* A stage's init_from "stage:NAME": the source stage and its jobs indexed
 * by the fields a job and its source share. */
typedef struct sweep_ref {
    size_t from;         /* the source stage */
    size_t n_keys;       /* "seed", then the fields both stages sweep */
    const char **keys;   /* borrowed */
    uint64_t *values;    /* per recorded source job: n_keys value hashes */
    size_t n_src, cap;   /* recorded source jobs (in expansion order) */
    sweep_map map;       /* key hash -> first recorded job, count */
} sweep_ref;

/* A stage's `from: "stage:NAME"` (sweep_from.c): the selected values of
 * stage NAME's search, per cell.  ref.keys are the fields NAME sweeps by
 * grid or zip (its cells); one entry is recorded per cell, at its first
 * trial and seed. */
typedef struct sweep_from {
    sweep_ref ref;       /* ref.from: the source stage */
    size_t *groups;      /* per recorded cell: its trial group (trials.grp) */
    int line;            /* of `from:` */
    size_t *checked;     /* the source's trials each cell is validated
                            with: its corners (sweep_from.c), or NULL for
                            all n_checked of them */
    size_t n_checked;
} sweep_from;

/* A base layer of a stage: the top-level base, then the stage's own. */
typedef struct sweep_layer {
    const char *ptr;     /* "/base" or "/stages/N/base" */
    json_t *obj;         /* borrowed from sw->doc (NULL: none) */
} sweep_layer;

struct bf_sweep_stage {
    char *name;          /* NULL for a sweep without stages */
    char ptr[32];        /* "" or "/stages/N": where its keys are */
    char base_ptr[40];   /* "/stages/N/base" */
    json_t *node;        /* its mapping (the doc without stages) */
    sweep_layer layers[2];
    size_t n_layers;
    bf_job_config base;  /* defaults + its layers */
    sweep_axis *axes; /* grid axes, zipped ones, then the search's */
    sweep_axis *search; /* its search axis (the last one), or NULL */
    json_t *search_values; /* owned: {field: [trial values]}; the search
                              axis borrows its field names */
    bf_sweep_prune *prune; /* owned: its early-stopping rule, or NULL */
    bf_sweep_select *select; /* owned: its selection, or NULL */
    char select_ptr[48]; /* "/stages/N/select" */
    char prune_ptr[48];  /* "/stages/N/prune" */
    size_t n_axes;
    sweep_rule *rules;
    size_t n_rules;
    uint64_t *seeds;     /* NULL: the seed comes from base/grid/defaults */
    size_t n_seeds;      /* 1 when seeds is NULL */
    int seed_assigned;   /* seeds is not the file's: one seed past those
                            of the stages that take this one's selection
                            (sweep__from_seeds) */
    int seeds_line;
    size_t seeds_min;    /* adaptive seeds (`until: decided`): the seeds
                            every cell starts with; 0: not adaptive */
    int seeds_rule;      /* their bf_confseq_rule (seeds.rule) */
    size_t n_combos;     /* product of the axis lengths */
    size_t n_jobs;       /* kept combinations times the seeds */
    size_t first_job;    /* sweep index of its first job */
    const char **set_fields; /* every field its layers or axes set, once
                                (borrowed from sw->doc) */
    size_t n_set_fields;
    sweep_ref *refs;     /* the stages its init_from values name */
    size_t n_refs;
    int referenced;      /* a later stage starts from this one */
    sweep_from *from;    /* owned: its `from:`, or NULL */
    int selected_from;   /* a later stage takes this one's selected values */
};

/* A job's coordinates in its stage: the value index on every axis, and
 * its seed index. */
typedef struct sweep_combo {
    size_t pick[SWEEP_MAX_AXES];
    size_t seed;
} sweep_combo;

/* ---- values (sweep_coords.c) ---------------------------------------------- */

/* Appends the printf-formatted text to buf (cap bytes, n used so far, cut
 * short at cap); returns the new length, which may exceed cap - 1. */
size_t sweep__append(char *buf, size_t n, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Line of the node at the printf-formatted JSON pointer. */
int sweep__line(const bf_sweep *sw, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A JSON value as the user wrote it: strings bare, the rest compact JSON. */
void sweep__value_text(const json_t *v, char *buf, size_t cap);

/* The message of e without the "file:line: field 'x': " prefix that
 * bf_error_set put in front, so it can be re-located. */
const char *sweep__error_body(const bf_error *e);

/* Whether combination number `combo` (over the axes, seeds aside) of st is
 * left out by an exclude rule. */
int sweep__excluded(const bf_sweep_stage *st, size_t combo);

/* The axis picks of combination number `combo` of st. */
void sweep__decode(const bf_sweep_stage *st, size_t combo, sweep_combo *c);

/* A job's number in messages: its index from 1, as `bifocal results`
 * counts jobs (and a sweep's first job has id 1 in a new database). */
static inline size_t sweep__job_number(size_t index)
{
    return index + 1;
}

/* Finds job `index`: its stage and coordinates (a scan of the stage's
 * combinations: for error messages only). */
void sweep__locate(const bf_sweep *sw, size_t index, const bf_sweep_stage **st,
                  sweep_combo *c);

/* "stage surgery: rope=spectral, seed=2", or "the base config". */
void sweep__describe(const bf_sweep *sw, const bf_sweep_stage *st,
                    const sweep_combo *c, char *buf, size_t cap);

/* cfg = defaults + st's layers + the values of c + the seed.  A skip
 * leaves one assignment out (skip_axis, or base key skip_key of layer
 * skip_layer), which lets the error path find the one responsible. */
int sweep__build(const bf_sweep *sw, const bf_sweep_stage *st,
                const sweep_combo *c, size_t skip_axis, size_t skip_layer,
                const char *skip_key, bf_job_config *cfg, bf_error *err);

/* Where job c of st got field `field` from: the line of its axis value, or
 * of the last base layer that sets it (0: none sets it). */
int sweep__field_line(const bf_sweep *sw, const bf_sweep_stage *st,
                     const sweep_combo *c, const char *field);

/* The hash of each of ref's key fields' value in job (a config as JSON)
 * into vals, and the hash of those. */
void sweep__key_values(const sweep_ref *ref, const json_t *job, uint64_t *vals);
uint64_t sweep__key_hash(const uint64_t *vals, size_t n);

/* ---- search (sweep_search.c, sweep_sobol.c) ------------------------------ */

/* Samples the trials of the `search` mapping at JSON pointer ptr into
 * *values (new reference): {field: [value of trial 0, 1, ...]}, fields in
 * the order of search.space.  Checks method, trials, seed and every
 * distribution (both bounds of a range, every choice, as grid values);
 * -1 with err set (file, line, field) otherwise. */
int sweep__search_sample(const bf_sweep *sw, const json_t *search,
                        const char *ptr, json_t **values, bf_error *err);

/* Parses the `prune` mapping (at st->prune_ptr; keys already checked)
 * into st->prune: the method and its parameter, the metric, eval_depth,
 * the rungs.  A stage without a search has nothing to prune. */
int sweep__prune_parse(const bf_sweep *sw, bf_sweep_stage *st,
                      const json_t *prune, bf_error *err);

/* *out = the boolean `key` of mapping `block` (at JSON pointer ptr, named
 * `what` in errors: "prune"), 0 when absent; -1 with err set (its line)
 * when it is not true or false. */
int sweep__boolean(const bf_sweep *sw, const json_t *block,
                   const char *ptr, const char *what, const char *key,
                   int *out, bf_error *err);

/* Parses the `select` mapping (at st->select_ptr; keys already checked)
 * into st->select.  A stage without a search has nothing to select. */
int sweep__select_parse(const bf_sweep *sw, bf_sweep_stage *st,
                       const json_t *select, bf_error *err);

/* Checks st's prune rule and selection against a job of it (described by
 * `job`): each eval_depth among its eval_depths (the selection's at most
 * its training depth), every rung before its steps and a multiple of its
 * eval_every. */
int sweep__prune_check_job(const bf_sweep *sw, const bf_sweep_stage *st,
                          const bf_job_config *cfg, const char *job,
                          bf_error *err);

/* Point `index` of the unscrambled Sobol' sequence (Joe & Kuo direction
 * numbers, Gray-code order, as scipy.stats.qmc.Sobol(scramble=False)):
 * out[0 .. dims-1] in [0, 1); dims <= SWEEP_SOBOL_MAX_DIMS. */
void sweep__sobol_point(uint32_t index, size_t dims, double *out);

/* Point `index` of the Sobol' sequence scrambled as
 * scipy.stats.qmc.Sobol(scramble=True) scrambles it (linear matrix
 * scramble and digital shift), its random bits keyed by seed. */
void sweep__sobol_scrambled(uint32_t index, size_t dims, uint64_t seed,
                            double *out);

/* ---- from: a stage taking another's selected values (sweep_from.c) ------ */

/* Parses stage t's `from:` (if any) into st->from: the stage named exists,
 * comes earlier and has a select: with best 1; the stage sets none of the
 * fields taken (its own base, grid, zip, search).  It may also start from
 * a stage's checkpoints (init_from "stage:"). */
int sweep__from_parse(bf_sweep *sw, size_t t, bf_error *err);

/* Keeps stage t's seeds apart from those of the stage its `from:` takes
 * trials from, whose selection they would otherwise confirm on the seed
 * that chose it (the winner's curse): a source that gives no seed of its
 * own takes one past every seed of the stages taking from it; one that
 * gives seeds a taker also has is refused at the line of its seeds.
 * Called for t from the last stage to the first, so that in a chain each
 * source lies past its takers.  0, or -1 with err set. */
int sweep__from_seeds(bf_sweep *sw, size_t t, bf_error *err);

/* Job c (config job, as JSON) of stage src, of trial group `group`:
 * recorded as its cell in every later stage taking src's values (once per
 * cell: at its first trial and seed). */
void sweep__from_record(bf_sweep *sw, const bf_sweep_stage *src,
                        const sweep_combo *c, size_t group, const json_t *job);

/* Validations of a stage's `from:` cells with source trials allowed per
 * expansion: within it every cell is checked with every trial; past it,
 * with the trials at the corners of the search (sweep_from.c). */
#define SWEEP_FROM_CHECKS 1000000

/* The source cell of job `index` (c of st, config cfg, as JSON job) into
 * *group; at its first seed, cfg is also validated with the values of the
 * source trials from->checked (any trial may be selected). */
int sweep__from_match(bf_sweep *sw, const bf_sweep_stage *st,
                      const sweep_combo *c, size_t index,
                      const bf_job_config *cfg, const json_t *job,
                      size_t *group, bf_error *err);

void sweep__from_free(sweep_from *from);

/* ---- warnings (sweep_warn.c) ---------------------------------------------- */

typedef struct sweep_warner sweep_warner;

sweep_warner *sweep__warner_new(const bf_sweep *sw);
/* Looks at job `index` (coordinates c in st, validated config cfg). */
void sweep__warner_job(sweep_warner *w, const bf_sweep_stage *st,
                      const sweep_combo *c, size_t index,
                      const bf_job_config *cfg);
/* The messages (new reference, an array of strings); frees w. */
json_t *sweep__warner_finish(sweep_warner *w);

#endif
