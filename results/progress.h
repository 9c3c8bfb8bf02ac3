/* progress: how far a sweep's running jobs are and when they, and the
 * sweep, will end; computed from the live_jobs rows (one per running job,
 * schema/005_dashboard.sql) polled over time.  `bifocal watch` and the
 * dashboard both use it, so both show the same estimates.
 *
 * A job's rate is observed: the steps it advanced since it was first seen
 * in its current attempt, over the time since, once that is at least
 * BF_PROGRESS_MIN_WINDOW_MS; before that, the worker's own tokens_per_s
 * over the tokens of a step (batch_size * seq_len), which leaves out
 * evaluation and checkpoint time.  A job's ETA is its steps left over its
 * rate.  The sweep's is the steps left in its running and queued jobs over
 * the running jobs' rates added up: what the connected workers do
 * together (bf_progress_sweep_eta), or over the sweep's throughput
 * observed since the observer began (bf_progress_sweep_eta_seen), which
 * `bifocal watch` shows: steady where jobs start and end. */
#ifndef BF_PROGRESS_H
#define BF_PROGRESS_H

#include <stdint.h>
#include <jansson.h>

#define BF_PROGRESS_MIN_WINDOW_MS 2000

typedef struct bf_progress_seen {
    /* private (progress.c) */
    int64_t job_id, attempt_id;
    double step;            /* the step when first seen in this attempt */
    int64_t ms;             /* and when */
} bf_progress_seen;

/* What one observer has seen; one per sweep followed. */
typedef struct bf_progress {
    /* private */
    bf_progress_seen *seen;
    int n, cap;
    double job_steps;       /* the steps of every job seen running, */
    long n_jobs_seen;       /* added up, and how many */
    int64_t first_ms;       /* bf_progress_sweep_eta_seen's first call */
    double first_done;      /* and the sweep's steps done then */
    int sweep_seen;
} bf_progress;

void bf_progress_init(bf_progress *p);
void bf_progress_clear(bf_progress *p);

/* Observes live (an array of live_jobs rows) at now_ms (bf_monotonic_ms)
 * and sets in each row "rate" (steps per second) and "eta_s" (seconds to
 * its last step), each null while unknown.  Jobs no longer in live are
 * forgotten. */
void bf_progress_update(bf_progress *p, json_t *live, int64_t now_ms);

/* Seconds until the sweep's last step, or a negative number when unknown
 * (nothing runs): the rows of live after bf_progress_update, and the
 * steps of the queued jobs (queued_steps; negative: n_queued jobs as long
 * as the running ones on average). */
double bf_progress_sweep_eta(const json_t *live, long long n_queued,
                             double queued_steps);

/* Seconds until the sweep's last step from its observed throughput, or
 * a negative number while unknown: its steps done (the ended jobs' at the
 * mean steps of a job seen running, the running ones' reached) since the
 * first call over the time since, at least BF_PROGRESS_MIN_WINDOW_MS of
 * it; the steps left (the running jobs', and the queued and waiting jobs'
 * at that mean) over that rate.  The work of every job and group, what
 * ends between steps (evaluations, checkpoints, a job's start) included,
 * so that a steady sweep's ETA is steady, not each job's extrapolation.
 * status is the sweep's sweep_progress row (its counts), live its
 * live_jobs rows after bf_progress_update at now_ms. */
double bf_progress_sweep_eta_seen(bf_progress *p, const json_t *status,
                                  const json_t *live, int64_t now_ms);

/* The sweep's ETA as `bifocal watch` and the dashboard show it: from its
 * observed throughput (bf_progress_sweep_eta_seen) and, until that is
 * known, from the running jobs' rates with the queued and waiting jobs as
 * long as the running ones (bf_progress_sweep_eta); negative when neither
 * is known. */
double bf_progress_sweep_eta_now(bf_progress *p, const json_t *status,
                                 const json_t *live, int64_t now_ms);

/* A row's number field, or fallback when it is missing, null (NaN, or no
 * value) or text (an infinity, "inf" / "-inf"). */
double bf_progress_number(const json_t *row, const char *key, double fallback);

#endif
