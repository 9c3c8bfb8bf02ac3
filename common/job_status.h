/* job_status: the statuses a job goes through (docs/schema.md, jobs), one
 * table for every program: the store's queries, the dashboard's counts and
 * filters, and the check that the schema's CHECK on jobs.status allows
 * exactly these (tests/server/test_store.c).  The order is the one counts
 * and sorts show. */
#ifndef BF_JOB_STATUS_H
#define BF_JOB_STATUS_H

#define BF_JOB_STATUSES(X)                                                  \
    X(WAITING, "waiting")     /* for its source job, or a held seed */      \
    X(QUEUED, "queued")       /* may be leased */                           \
    X(RUNNING, "running")     /* leased to a worker */                      \
    X(SUCCEEDED, "succeeded")                                               \
    X(FAILED, "failed")                                                     \
    X(CANCELLED, "cancelled")                                               \
    X(PRUNED, "pruned")       /* stopped early by its stage's prune rule */

typedef enum {
#define BF_JOB_STATUS_ENUM(id, name) BF_JOB_##id,
    BF_JOB_STATUSES(BF_JOB_STATUS_ENUM)
#undef BF_JOB_STATUS_ENUM
    BF_JOB_N_STATUSES
} bf_job_status;

/* "waiting", ...; "unknown" out of range. */
const char *bf_job_status_name(int status);
/* The status named name, or -1 (name may be NULL). */
int bf_job_status_parse(const char *name);
/* "waiting, queued, running, succeeded, failed, cancelled, pruned". */
const char *bf_job_status_list(void);

#endif
