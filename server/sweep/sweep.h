/* Sweep files: a YAML description of many job configurations.
 *
 *   name: structure-gap          # required, non-empty string
 *   description: ...             # optional free text
 *   base: {steps: 2000, ...}     # optional job-config fields for every job
 *   grid:                        # optional: cartesian product of job fields
 *     rope: [rope, spectral, bifocal]
 *     task: [dyck, counter]
 *   zip:                         # optional: lists of equal length varied
 *     d_model: [32, 64]          #   together (one axis); a list of such
 *     n_heads: [2, 4]            #   mappings is several zipped axes;
 *     label: [small, big]        #   label (optional) names the entries
 *   exclude:                     # optional: combinations left out, each a
 *     - {rope: rope, task: counter}  # mapping of grid/zip fields to values
 *   seeds: 3                     # optional: N (seeds 1..N), a list [1, 2, 7]
 *                                # or {min, max, until: decided} (docs/sweeps.md)
 *   max_attempts: 3              # optional, >= 1, default 3
 *   priority: 0                  # optional, higher leases first, default 0
 *   memory_budget_gib: 64        # optional: a job's estimated memory per
 *                                #   rank must fit (common/model_size.h)
 *   analysis:                    # optional: how compare reads the sweep
 *     primary: {metric: loss, eval_depth: 8}   # (common/analysis.h)
 *     baseline: {rope: rope}
 *
 * Or, instead of grid/zip/exclude/seeds, `stages:`: a list of mappings, each
 * with a `name` and its own base, grid, zip, exclude and seeds (the top-level
 * base applies to every stage).  A job whose init_from is "stage:NAME"
 * starts from the final checkpoint of the job of the earlier stage NAME
 * whose seed and shared swept fields (swept in both stages) equal its own:
 * its source.  Every such job must find exactly one source.  A stage's
 * `from: "stage:NAME"` takes the values NAME's selection chooses (its
 * search's fields) in the cell of NAME with the job's grid/zip values.
 *
 * Expansion order (deterministic): stages in file order; within a stage
 * the grid axes in file order, then the zipped axes, like nested loops with
 * the first axis outermost, and the seeds innermost of all; excluded
 * combinations are skipped.  Job indices run over the whole sweep.
 *
 * Every job = defaults, then base, then its stage's base, then its axis
 * values, then its seed, and must pass bf_job_config_validate; duplicate
 * configurations are refused.  A relative init_from path is joined to the
 * sweep file's folder (`dir`).  Errors name the file, the line (of the value
 * or base field that caused it), the field and the value. */
#ifndef BF_SWEEP_H
#define BF_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "analysis.h"
#include "bf_error.h"
#include "confseq.h"
#include "job_config.h"

#define BF_SWEEP_MAX_JOBS 1000000
#define BF_SWEEP_MAX_BYTES (4 << 20)
#define BF_SWEEP_MAX_STAGES 64
#define BF_SWEEP_MAX_SEEDS 1000         /* seeds.max of adaptive seeds */
#define BF_SWEEP_NO_SOURCE ((size_t)-1)
#define BF_SWEEP_MEMORY_GIB 64          /* default memory_budget_gib */
#define BF_SWEEP_MAX_MEMORY_GIB (1 << 20)

#define BF_SWEEP_NO_TRIAL ((size_t)-1)
#define BF_PRUNE_MAX_RUNGS 16

typedef struct bf_sweep_stage bf_sweep_stage;

/* What a prune rule or a selection ranks trials by: a field of the eval
 * record at one depth.  eval_loss: lower is better; eval_accuracy (the
 * share of examples with every target right): higher is better. */
typedef enum { BF_TRIAL_EVAL_LOSS, BF_TRIAL_EVAL_ACCURACY } bf_trial_metric;

/* The metric's name in sweep files and the database ("eval_loss"). */
const char *bf_trial_metric_name(bf_trial_metric m);
/* The metric named `name`: 0, or -1 when no metric has that name. */
int bf_trial_metric_parse(const char *name, bf_trial_metric *out);
/* 1 when a higher value is better. */
int bf_trial_metric_higher_better(bf_trial_metric m);

/* A stage's selection (`select:`): once every trial of a cell has ended,
 * the `best` succeeded trials by their final `metric` at eval_depth (a
 * training depth: never a deeper test depth) are chosen. */
typedef struct bf_sweep_select {
    bf_trial_metric metric;
    int eval_depth;
    int best;
    char *space;         /* owned: the search's fields, a JSON array */
} bf_sweep_select;

/* A stage's early-stopping rule (`prune:`) over the trials of its search:
 * when a trial's `metric` at eval_depth is recorded at a rung (a step),
 * the coordinator decides whether it goes on (docs/sweeps.md). */
typedef enum { BF_PRUNE_ASHA, BF_PRUNE_MEDIAN } bf_prune_method;
typedef struct bf_sweep_prune {
    bf_prune_method method;
    bf_trial_metric metric;
    int eval_depth;
    int64_t rungs[BF_PRUNE_MAX_RUNGS];  /* rising steps, each before steps */
    size_t n_rungs;
    int param;           /* asha: eta (the best 1/eta go on); median:
                            min_trials (earlier values needed to prune) */
    int synchronous;     /* asha: a rung decides once every trial of the
                            cell reached it or ended (store_prune.c) */
} bf_sweep_prune;

/* A parsed sweep.  Everything is owned by the struct (bf_sweep_free). */
typedef struct bf_sweep {
    /* read-only: set by bf_sweep_parse and bf_sweep_expand */
    char *file;          /* name used in messages */
    char *dir;           /* folder of relative init_from paths, or NULL */
    char *name;
    int max_attempts;
    int priority;
    int memory_budget_gib; /* every job's estimate per rank is within it */
    size_t n_jobs;       /* over every stage, excluded combinations left out */
    int has_analysis;    /* the file has an `analysis:` block */
    bf_analysis analysis;/* it, checked against the sweep; else defaults */
    /* After a successful bf_sweep_expand: an array of messages (strings),
     * each naming file, line and field: fields without effect for a job's
     * rope variant, bifocal/prope fractions that degenerate, jobs that
     * train the same model.  Owned by the struct. */
    json_t *warnings;
    /* Validations of a `from:` cell with a source trial's values, over
     * every expansion: bounded by SWEEP_FROM_CHECKS per stage and pass,
     * whatever the numbers of cells and trials (tests, benchmarks). */
    size_t from_checks;
    /* private: sweep*.c's */
    json_t *doc, *lines;
    bf_sweep_stage *stages;
    size_t n_stages;
    int has_stages;      /* the file has `stages:` */
} bf_sweep;

/* One expanded job, valid only during the visit callback. */
typedef struct bf_sweep_job {
    size_t index;                /* 0-based, in expansion order */
    const char *stage;           /* its stage's name; NULL without stages */
    size_t source;               /* index of its source job (an earlier
                                    one), or BF_SWEEP_NO_SOURCE */
    size_t cell;                 /* the jobs of its stage whose configs
                                    differ only in seed share it; 0, 1, ...
                                    in order of their first job */
    size_t trial;                /* its trial of its stage's search, or
                                    BF_SWEEP_NO_TRIAL */
    size_t trial_group;          /* with a search: its stage's cell of the
                                    grid/zip (the trials that compete) */
    const bf_sweep_prune *prune; /* its stage's rule, or NULL */
    const bf_sweep_select *select; /* its stage's selection, or NULL */
    const bf_job_config *cfg;    /* validated */
    const char *config_json;     /* bf_job_config_to_canonical_json */
    char hash_hex[17];           /* FNV-1a 64 of config_json */
    int held;                    /* an adaptive seed past `min`: stored
                                    waiting until a decision needs it */
    const char *from_stage;      /* `from:`: the stage whose selection gives
                                    its values (stored waiting until then),
                                    or NULL */
    size_t from_group;           /* with from_stage: its cell there (the
                                    trial group whose chosen values it takes) */
    const char *from_fields;     /* with from_stage: the fields taken (its
                                    search's), a JSON array */
} bf_sweep_job;

/* Return 0 to continue, -1 (with err set) to stop the expansion. */
typedef int (*bf_sweep_visit_fn)(void *ctx, const bf_sweep_job *job,
                                 bf_error *err);

/* Parses and checks the file's structure, every value on its own and every
 * stage reference.  dir (may be NULL) is the absolute folder of the file:
 * a relative init_from is joined to it, and refused without it.  Returns
 * NULL with err set (file, line, field) on any problem. */
bf_sweep *bf_sweep_parse(const char *file, const char *dir, const char *text,
                         size_t len, bf_error *err);

/* Expands, validates, matches every job with its source, and visits every
 * job in order; then fills sw->warnings.  A job that fails validation,
 * duplicates an earlier one or finds no single source stops it with err
 * set; jobs visited before then have been seen, so callers store inside a
 * transaction they roll back on failure. */
int bf_sweep_expand(bf_sweep *sw, bf_sweep_visit_fn visit, void *ctx,
                    bf_error *err);

/* Adaptive seeds of stage number `stage` (< sw->n_stages): 1 when it has
 * `seeds: {min, max, until: decided}` (*min, *max and its seeds.rule
 * *rule set), else 0.  The stage's name (NULL in a sweep without
 * stages). */
int bf_sweep_adaptive_seeds(const bf_sweep *sw, size_t stage, int *min,
                            int *max, bf_confseq_rule *rule);
const char *bf_sweep_stage_name(const bf_sweep *sw, size_t stage);

void bf_sweep_free(bf_sweep *sw);

#endif
