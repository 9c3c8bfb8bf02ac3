/* Checkpoints: a bf_model (weights and AdamW moments) and its job config in
 * one safetensors file, named like Hugging Face GPT-2 so standard tools can
 * read the weights.  docs/checkpoints.md lists every tensor and metadata key.
 *
 * Three ways in:
 *   resume      the same job continues: config must match, params, moments
 *               and step are restored, so training continues bit-identically
 *               (the data stream is a pure function of the step; there is no
 *               other RNG state).
 *   init_from   surgical integration: weights and every head's log_freq are
 *               copied from a checkpoint of ANY positional variant into a
 *               model built for this job's variant; moments stay zero.
 *   weights     the `eval` command: weights only, config from the file. */
#ifndef BF_CHECKPOINT_H
#define BF_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "job_config.h"
#include "model.h"
#include "safetensors.h"

#define BF_CHECKPOINT_FORMAT "bifocal-checkpoint"
#define BF_CHECKPOINT_VERSION 1

/* A coordinator's database id: 16 lowercase hex digits (schema/007). */
#define BF_DATABASE_ID_LEN 16

/* Whose checkpoint it is: a job of a coordinator's database (metadata
 * "database_id" and "job_id").  A job trained without a coordinator
 * (bifocal-worker --job) has no owner: database_id "". */
typedef struct bf_checkpoint_owner {
    char database_id[BF_DATABASE_ID_LEN + 1];
    int64_t job_id;
} bf_checkpoint_owner;

/* The failure of a check that found another job's checkpoint. */
#define BF_CHECKPOINT_FOREIGN (-2)

/* An open, validated checkpoint file. */
typedef struct bf_checkpoint {
    bf_st_file *file;
    bf_job_config cfg;     /* the job that wrote it (metadata "config") */
    const char *config_json; /* canonical config text, owned by `file` */
    int step;              /* optimizer steps completed */
    bf_checkpoint_owner owner; /* database_id "": written without one */
} bf_checkpoint;

/* Fills owner; 0, or -1 when database_id is not BF_DATABASE_ID_LEN
 * lowercase hex digits or job_id < 1 (err names the field). */
int bf_checkpoint_owner_set(bf_checkpoint_owner *owner,
                            const char *database_id, int64_t job_id,
                            bf_error *err);

/* Writes m's parameters and moments, cfg, owner (may be NULL: none) and
 * step atomically to path. */
int bf_checkpoint_save(const char *path, const bf_model *m,
                       const bf_job_config *cfg,
                       const bf_checkpoint_owner *owner, int step,
                       bf_error *err);

/* Opens and validates a checkpoint (format, version, config, step).  Caller
 * closes with bf_checkpoint_close. */
int bf_checkpoint_open(bf_checkpoint *ck, const char *path, bf_error *err);
void bf_checkpoint_close(bf_checkpoint *ck);

/* Copies every parameter tensor (log_freq included) into m.  A missing
 * tensor or a shape that differs from m's is an error naming the tensor and
 * both shapes. */
int bf_checkpoint_load_params(const bf_checkpoint *ck, bf_model *m,
                              bf_error *err);
/* Copies the AdamW moments into m (same checks). */
int bf_checkpoint_load_moments(const bf_checkpoint *ck, bf_model *m,
                               bf_error *err);

/* Resume: refuses a checkpoint of another owner (BF_CHECKPOINT_FOREIGN,
 * err names both; one without an owner passes, and any when owner is NULL
 * or has none), or whose config
 * differs from cfg (the message lists the differing fields) or whose step
 * is past cfg->steps (-1), then loads params and moments; *step gets the
 * step to continue from. */
int bf_checkpoint_resume(const char *path, bf_model *m,
                         const bf_job_config *cfg,
                         const bf_checkpoint_owner *owner, int *step,
                         bf_error *err);

/* The checks of bf_checkpoint_resume without loading anything: whether
 * the file opens and validates and the job of cfg may continue from it.
 * *step (may be NULL) gets its step.  0, -1 or BF_CHECKPOINT_FOREIGN. */
int bf_checkpoint_check_resume(const char *path, const bf_job_config *cfg,
                               const bf_checkpoint_owner *owner, int *step,
                               bf_error *err);

/* Surgical integration: params from any variant's checkpoint; gradients
 * and moments are zeroed, so the caller starts at step 0.  source (may be
 * NULL: any checkpoint) is the job the checkpoint must belong to, a stage
 * source: another job's is refused (BF_CHECKPOINT_FOREIGN). */
int bf_checkpoint_init_from(const char *path,
                            const bf_checkpoint_owner *source, bf_model *m,
                            bf_error *err);

/* ---- checkpoint directories ------------------------------------------------ */

/* DIR/step-%06d.safetensors */
void bf_checkpoint_step_path(char *buf, size_t cap, const char *dir,
                             int step);

/* Saves DIR/step-NNNNNN.safetensors (owner as for bf_checkpoint_save),
 * then atomically points DIR/latest at it.  path_out (may be NULL)
 * receives the checkpoint's path. */
int bf_checkpoint_save_in_dir(const char *dir, const bf_model *m,
                              const bf_job_config *cfg,
                              const bf_checkpoint_owner *owner, int step,
                              char *path_out, size_t cap, bf_error *err);

/* Path of the checkpoint DIR/latest names: 1 found, 0 none yet, -1 error. */
int bf_checkpoint_latest(const char *dir, char *path_out, size_t cap,
                         bf_error *err);

#endif
