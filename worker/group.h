/* group: a data-parallel MPI worker group driven by the coordinator.
 *
 *   mpirun -np N bifocal-worker --server HOST:PORT --token-file F
 *          [--checkpoint-dir DIR] [--name NAME] [--max-jobs N]
 *          [--exit-when-idle] [--log-level LEVEL]
 *
 * Rank 0 holds the coordinator link (link.h): it asks for a job, broadcasts
 * it to every rank, and all ranks train it together with bf_trainer
 * (train.h): the global batch is split over ranks and one MPI_Allreduce per
 * step sums the gradients.  Whether to stop after a step (cancel, lost
 * lease, SIGTERM) is agreed by every rank, so all stop after the same step.
 * Checkpoints go to DIR/db-<database_id>/job-<job_id>/, which a re-leased
 * job resumes from; each names its database and job in its metadata.
 * docs/cluster.md explains running groups on a cluster. */
#ifndef BF_GROUP_H
#define BF_GROUP_H

#include <mpi.h>

#include "job_config.h"
#include "link.h"
#include "train.h"

/* Whether argv asks for the coordinator-driven mode (it has --server). */
int bf_group_requested(int argc, char **argv);

/* The whole program in that mode: options, MPI_Init, the job loop,
 * MPI_Finalize.  Exit status: 0 when told to stop (--max-jobs reached, idle
 * with --exit-when-idle, SIGTERM/SIGINT), 1 when the coordinator refused us
 * or MPI failed, 2 on bad usage. */
int bf_group_main(int argc, char **argv);

/* What a rank needs besides the config to train one job; every member
 * may be NULL / 0 (bf_trainer_opts says what each means). */
typedef struct bf_group_job {
    const char *checkpoint_dir, *resume_path;
    const bf_checkpoint_owner *owner, *init_source;
    size_t memory_budget;          /* this rank's, bytes */
} bf_group_job;

/* Trains one job on every rank of comm (collective: every rank calls it
 * with the same arguments, memory_budget aside).  Rank 0's records go to
 * `link` (NULL: they are dropped); training stops early after the step at
 * which any rank saw a stop request (rank 0: cancel or fenced on the link;
 * any rank: SIGTERM or SIGINT once bf_group_main caught them).  *summary
 * (may be NULL) gets where the run ended.  Returns 0; -1 with err when the
 * trainer could not be set up on some rank (every rank returns -1 then,
 * with that rank's message), -3 when that failure is permanent
 * (BF_TRAIN_PERMANENT: the job cannot run anywhere); -2 with err when
 * training failed on this rank mid-run (rank 0 could not write a
 * checkpoint): the other ranks are then inside the next collective, so the
 * caller reports and calls MPI_Abort. */
int bf_group_train(MPI_Comm comm, const bf_job_config *cfg,
                   const bf_group_job *job, bf_link *link,
                   bf_train_summary *summary, bf_error *err);

#endif
