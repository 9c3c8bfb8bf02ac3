/* The training loop: one job config in, records out.
 *
 * The same bf_trainer serves the standalone `bifocal-worker --job` and the
 * MPI worker group: data parallelism is expressed only through `rank`,
 * `nranks` and the allreduce hook, so the group can wrap it unchanged.
 *
 * One optimizer step s (0-based) on rank r of N:
 *   1. the step's global batch is examples [s*B, (s+1)*B) of the training
 *      stream; the rows are split over ranks as evenly as possible (the
 *      first B % N ranks take one more; with B < N some take none), and
 *      each rank runs its rows in micro-batches, ACCUMULATING summed-loss
 *      gradients;
 *   2. ONE allreduce of [grads..., loss_sum, n_targets];
 *   3. gradients are scaled by 1/n_targets (a mean over the global batch's
 *      target tokens), clipped to global norm grad_clip, and every rank
 *      takes the same AdamW step, so all replicas stay identical.
 * Evaluation splits each depth's held-out examples over ranks the same way
 * and allreduces [loss_sum, n_targets, n_exact] per depth.
 * docs/training.md describes the schedule and the records. */
#ifndef BF_TRAIN_H
#define BF_TRAIN_H

#include <stddef.h>
#include <jansson.h>

#include "checkpoint.h"
#include "job_config.h"
#include "model.h"
#include "records.h"

typedef struct bf_train_hooks {
    void *ctx;
    /* Sums n floats over all ranks in place; NULL in a single process.
     * Collective: every rank calls it in the same order — once per training
     * step (the gradient buffer with the loss sum, target count and stop
     * votes in its trailing slots, so results do not depend on nranks) and
     * once per evaluation (per eval depth 3 floats, then ceil(E / 16)
     * floats of per-example outcomes, E = eval_examples, when E <=
     * BF_OUTCOMES_MAX_EXAMPLES). */
    void (*allreduce_sum)(void *ctx, float *buf, size_t n);
    /* Receives every record on rank 0 (train, eval and its outcomes,
     * freq, checkpoint, done);
     * the record and what it points to are valid during the call only.
     * May be NULL. */
    void (*emit)(void *ctx, const bf_record *record);
    /* Polled on every rank once per step, just before the gradient
     * allreduce: non-zero asks to stop after this step (cancel, SIGTERM).
     * The ranks' answers are summed in that same allreduce, so all ranks
     * stop after the same step even when only one of them asked, without
     * a collective of their own.  May be NULL. */
    int (*should_stop)(void *ctx);
} bf_train_hooks;

typedef struct bf_trainer_opts {
    int rank, nranks;              /* 0, 1 in a single process */
    const char *checkpoint_dir;    /* NULL: never write checkpoints */
    const char *resume_path;       /* checkpoint of THIS job to continue
                                      from, NULL: fresh start (init_from) */
    /* The job's owner, written into its checkpoints; a resume checkpoint
     * of another owner is refused.  NULL: none (no coordinator). */
    const bf_checkpoint_owner *owner;
    /* The job init_from must belong to (a stage source); NULL: any. */
    const bf_checkpoint_owner *init_source;
    /* Bytes this rank may allocate (0: no check): a job whose estimate
     * (bf_job_memory_of) is over it fails permanently, before anything is
     * allocated, instead of aborting on out-of-memory. */
    size_t memory_budget;
    bf_train_hooks hooks;
} bf_trainer_opts;

/* Where a run's time went, for the lease-to-done breakdown
 * (bench/bench_group.c --study).  Each part excludes the others: the
 * records an evaluation emits count as streaming, not evaluation. */
typedef enum bf_train_part {
    BF_PART_TRAIN,       /* optimizer steps: forward, backward, AdamW */
    BF_PART_EVAL,        /* evaluations */
    BF_PART_FREQ,        /* reading the frequencies for freq records */
    BF_PART_CHECKPOINT,  /* writing checkpoints */
    BF_PART_STREAM,      /* inside the emit hook (rank 0) */
    BF_PART_COUNT
} bf_train_part;

/* Where a run ended. */
typedef struct bf_train_summary {
    double seconds[BF_PART_COUNT]; /* this run's time in each part */
    int step;                 /* optimizer steps completed */
    double train_loss;        /* loss of the last step's batch (NaN: none) */
    int n_evals;              /* 0 until the first evaluation */
    bf_eval_result evals[BF_MAX_EVAL_DEPTHS];  /* the latest evaluation */
    int stopped;              /* 1: should_stop ended it early */
    int diverged;             /* the step whose loss was not finite, when
                                 stop_on_nonfinite ended the run; else 0 */
    char checkpoint[BF_PATH_MAX + 64];         /* last written, or "" */
} bf_train_summary;

typedef struct bf_trainer bf_trainer;

/* bf_trainer_create's failure when the job itself cannot run, on any
 * worker and at any attempt: its model cannot be built or does not fit
 * in opts->memory_budget, its init_from
 * checkpoint is missing, unreadable, of other shapes or another job's
 * than opts->init_source, or its resume checkpoint is another owner's. */
#define BF_TRAIN_PERMANENT (-2)

/* Builds the model for cfg (validated by the caller), initialises it from
 * the seed, then from opts->resume_path (same config required) or else from
 * cfg->init_from (surgical integration).  Copies opts; the strings in it
 * must outlive the trainer.  Returns 0, BF_TRAIN_PERMANENT, or -1 for
 * any other failure (a resume checkpoint that will not load). */
int bf_trainer_create(bf_trainer **out, const bf_job_config *cfg,
                      const bf_trainer_opts *opts, bf_error *err);
void bf_trainer_free(bf_trainer *t);

/* Trains up to cfg->steps (or until should_stop, or until the loss turns
 * non-finite with cfg->stop_on_nonfinite: summary.diverged), emitting
 * records, evaluating and checkpointing on schedule; ends with a "done"
 * record.  Divergence is an outcome of the job, not an error: returns 0. */
int bf_trainer_run(bf_trainer *t, bf_error *err);

/* One optimizer step (no records): the pieces bf_trainer_run is made of,
 * for tests and benchmarks.  Outputs may be NULL. */
void bf_trainer_step(bf_trainer *t, double *loss, double *grad_norm,
                     double *lr);
/* Evaluates every eval depth into out[cfg->n_eval_depths]. */
void bf_trainer_evaluate(bf_trainer *t, bf_eval_result *out);

/* The per-example outcomes of eval depth number k of the last evaluation,
 * over every rank's examples (common/records.h: BF_OUTCOMES_BYTES of
 * eval_examples bytes, example i bit i % 8 of byte i / 8), owned by t and
 * valid until the next call; NULL for a job of more than
 * BF_OUTCOMES_MAX_EXAMPLES eval examples, which has none. */
const unsigned char *bf_trainer_outcomes(bf_trainer *t, int k);

int bf_trainer_current_step(const bf_trainer *t);
const bf_train_summary *bf_trainer_summary(const bf_trainer *t);
/* The trainer's model (owned by the trainer). */
bf_model *bf_trainer_model(bf_trainer *t);

/* The optimiser's constants (AdamW's betas and epsilon, and the floor of
 * bf_lr_at's cosine as a fraction of lr): one home, which `bifocal-worker
 * data --split model` prints for other trainers (docs/trainers.md). */
#define BF_ADAM_BETA1 0.9f
#define BF_ADAM_BETA2 0.95f
#define BF_ADAM_EPS 1e-8f
#define BF_MIN_LR_FRACTION 0.1

/* Learning rate of the step that completes step number n (1..steps):
 * linear warm-up to lr over warmup_steps, then cosine to 0.1*lr at steps. */
double bf_lr_at(const bf_job_config *cfg, int n);

#endif
