/* Internals of bf_store shared by its modules:
 *   store.c          open, migrations, transactions, sweeps, workers, queries
 *   store_queue.c    leases, attempts, cancel, retry
 *   store_metrics.c  batched metric ingest
 *   store_seqs.c     adaptive seeds: the comparisons, decided as jobs end
 *   store_prune.c    the early stopping of search trials
 * Its functions are named store__* (libuv's uv__ convention): internal to the
 * store, not part of bf_store's API in store.h.  Nothing outside the files in
 * server/store/ and the store tests includes this. */
#ifndef BF_STORE_INTERNAL_H
#define BF_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store.h"

/* The migrations of schema/, embedded by scripts/embed_sql.py:
 * bf_schema_migrations[i] takes a database from user_version i to i + 1. */
extern const char *const bf_schema_migrations[];
extern const int bf_schema_n_migrations;

/* Every statement the store runs, prepared once at open.  X(id, sql). */
#define BF_STORE_STATEMENTS(X)                                                 \
    X(ST_BEGIN, "BEGIN IMMEDIATE")                                             \
    X(ST_COMMIT, "COMMIT")                                                     \
    X(ST_ROLLBACK, "ROLLBACK")                                                 \
    X(ST_SAVEPOINT, "SAVEPOINT ingest")                                        \
    X(ST_RELEASE, "RELEASE ingest")                                            \
    X(ST_ROLLBACK_TO, "ROLLBACK TO ingest")                                    \
    /* sweeps and jobs */                                                      \
    X(ST_SWEEP_INSERT,                                                         \
      "INSERT INTO sweeps (name, filename, source, submitted_ms,"              \
      " max_attempts, priority) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")              \
    X(ST_SWEEP_ANALYSIS_INSERT,                                                \
      "INSERT INTO sweep_analysis (sweep_id, primary_metric,"                  \
      " primary_eval_depth, baseline, equivalence_margin, alpha)"             \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6)")                                      \
    X(ST_SWEEP_SET_NJOBS,                                                      \
      "UPDATE sweeps SET n_jobs = ?2, warnings = ?3 WHERE sweep_id = ?1")      \
    /* A sweep whose jobs are still being stored (n_jobs 0) is not there   \
     * yet: lookups by id do not find it, nor its jobs. */                  \
    X(ST_SWEEP_STATUS,                                                         \
      "SELECT status FROM sweeps WHERE sweep_id = ?1 AND n_jobs > 0")          \
    X(ST_SWEEP_SET_STATUS, "UPDATE sweeps SET status = ?2 WHERE sweep_id = ?1")\
    /* An active sweep with nothing left to run is done. */                    \
    X(ST_SWEEP_REFRESH,                                                        \
      "UPDATE sweeps SET status = 'done' WHERE sweep_id = ?1"                  \
      " AND status = 'active' AND NOT EXISTS (SELECT 1 FROM jobs"              \
      " WHERE sweep_id = ?1 AND status IN ('waiting', 'queued', 'running'))")  \
    /* Waiting: for a source job (?13), or held for a decision or a     \
     * selection's values (?15). */   \
    X(ST_JOB_INSERT,                                                           \
      "INSERT INTO jobs (sweep_id, idx, config, config_hash, task, rope,"      \
      " depth, seed, learnable_heads, priority, created_ms, stage,"            \
      " source_job_id, cell, hold, trainer, status)"                           \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"  \
      " ?15, ?16, CASE WHEN ?13 IS NULL AND ?15 IS NULL THEN 'queued'"         \
      " ELSE 'waiting' END)")                                                  \
    X(ST_JOB_GET,                                                              \
      "SELECT j.status, j.sweep_id FROM jobs j JOIN sweeps s"                  \
      " ON s.sweep_id = j.sweep_id WHERE j.job_id = ?1 AND s.n_jobs > 0")      \
    /* Removes a staged sweep's jobs a chunk at a time, newest first (a    \
     * job's source is an older one), then the sweep; never those of a     \
     * published one. */                                                    \
    X(ST_STAGED_DELETE_JOBS,                                                   \
      "DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM jobs"              \
      " WHERE sweep_id = ?1 ORDER BY job_id DESC LIMIT ?2)"                    \
      " AND (SELECT n_jobs FROM sweeps WHERE sweep_id = ?1) = 0")              \
    X(ST_STAGED_DELETE_SWEEP,                                                  \
      "DELETE FROM sweeps WHERE sweep_id = ?1 AND n_jobs = 0")                 \
    /* stages: a job's source, a source's final checkpoint, its dependents */ \
    X(ST_JOB_SOURCE,                                                           \
      "SELECT s.job_id, s.status FROM jobs j"                                  \
      " JOIN jobs s ON s.job_id = j.source_job_id WHERE j.job_id = ?1")        \
    X(ST_FINAL_CHECKPOINT,                                                     \
      "SELECT checkpoint_path FROM jobs WHERE job_id = ?1"                     \
      " AND checkpoint_step = json_extract(config, '$.steps')")                \
    /* A source's waiting dependents move on ?3 at a time (a slice of     \
     * store.h): given its checkpoint ?2 and queued, a held one (jobs.hold: \
     * an adaptive seed, or a job whose selected values are not in yet)    \
     * left waiting for its release with the checkpoint (a waiting job has \
     * none until then); or failed (?3 says why) and returned, since       \
     * theirs fail next. */                                                 \
    X(ST_DEPENDENTS_RELEASE,                                                   \
      "UPDATE jobs SET init_from = ?2, status = CASE WHEN hold IS NULL"        \
      " THEN 'queued' ELSE status END"                                         \
      " WHERE job_id IN (SELECT job_id FROM jobs INDEXED BY jobs_by_source"    \
      " WHERE source_job_id = ?1 AND status = 'waiting' AND init_from IS NULL" \
      " LIMIT ?3)")                                                            \
    X(ST_DEPENDENTS_FAIL,                                                      \
      "UPDATE jobs SET status = 'failed', finished_ms = ?2, error = ?3"        \
      " WHERE job_id IN (SELECT job_id FROM jobs INDEXED BY jobs_by_source"    \
      " WHERE source_job_id = ?1 AND status = 'waiting' LIMIT ?4)"             \
      " RETURNING job_id")                                                     \
    X(ST_JOB_STATUS, "SELECT status, sweep_id FROM jobs WHERE job_id = ?1")    \
    /* Ended sources with waiting dependents not handed a checkpoint yet:  \
     * what a stopped daemon left. */                                      \
    X(ST_UNSETTLED_SOURCES,                                                    \
      "SELECT DISTINCT j.source_job_id FROM jobs j JOIN jobs src"              \
      " ON src.job_id = j.source_job_id WHERE j.status = 'waiting'"            \
      " AND j.init_from IS NULL"                                               \
      " AND src.status IN ('succeeded', 'failed', 'cancelled', 'pruned')")     \
    /* A retried job: a slice of the dependents its failure failed (they   \
     * never ran) wait again, while it waits itself, and are returned,     \
     * since theirs wait again next.  A held adaptive seed waits again     \
     * only while the rule may still release it (a running comparison of   \
     * its cell has not reached its seed): one the rule released while it  \
     * was failed was a lost pair, replaced, and one whose comparisons     \
     * ended is not needed; revived, either would wait for ever. */        \
    X(ST_DEPENDENTS_REVIVE,                                                    \
      "UPDATE jobs SET status = 'waiting', error = NULL, finished_ms = NULL"  \
      " WHERE job_id IN (SELECT job_id FROM jobs INDEXED BY jobs_by_source"    \
      " WHERE source_job_id = ?1 AND status = 'failed' AND attempts = 0"       \
      " AND (hold IS NOT 'seed' OR EXISTS (SELECT 1 FROM seed_comparisons c"   \
      "  WHERE c.sweep_id = jobs.sweep_id AND c.state = 'running'"             \
      "  AND jobs.cell IN (c.variant_cell, c.baseline_cell)"                   \
      "  AND jobs.seed > c.released))"                                         \
      " LIMIT ?2) AND (SELECT status FROM jobs WHERE job_id = ?1) = 'waiting'" \
      " RETURNING job_id")                                                     \
    /* Revivals a stopped daemon left: waiting jobs with such dependents,  \
     * and the retried jobs without a source that wait for them to end:   \
     * those not held (jobs.hold: an adaptive seed, a job of a `from:`     \
     * stage waits with no source too, for a decision, not a revival). */  \
    X(ST_REVIVING_SOURCES,                                                     \
      "SELECT DISTINCT d.source_job_id FROM jobs d JOIN jobs src"              \
      " ON src.job_id = d.source_job_id WHERE d.status = 'failed'"             \
      " AND d.attempts = 0 AND src.status = 'waiting'")                        \
    X(ST_REVIVE_ROOTS,                                                         \
      "SELECT job_id FROM jobs WHERE status = 'waiting'"                       \
      " AND source_job_id IS NULL AND hold IS NULL")                           \
    X(ST_REVIVE_ROOT_RELEASE,                                                  \
      "UPDATE jobs SET status = 'queued' WHERE job_id = ?1"                    \
      " AND status = 'waiting' AND source_job_id IS NULL AND hold IS NULL")    \
    /* the queue */                                                            \
    /* The sweep first: among the active, published sweeps with a queued  \
     * job (a job's priority is its sweep's), the highest priority, then   \
     * the one leased from least recently (a walk of sweeps_lease_order    \
     * that stops at the first such sweep; a sweep being stored, n_jobs 0, \
     * is skipped whatever its priority); then its oldest queued job, a    \
     * walk of jobs_queue in job_id order that stops at the first row.     \
     * Only jobs of the asking worker's trainer (?1) count, at every step. \
     * INDEXED BY fails loudly at open if an index went missing. */         \
    X(ST_LEASE_PICK,                                                           \
      "WITH pick(sid, pr) AS (SELECT s.sweep_id, s.priority"                   \
      "   FROM sweeps s INDEXED BY sweeps_lease_order"                         \
      "   WHERE s.status = 'active' AND s.n_jobs > 0 AND EXISTS (SELECT 1"     \
      "     FROM jobs q INDEXED BY jobs_queue WHERE q.status = 'queued'"       \
      "       AND q.trainer = ?1 AND q.priority = s.priority"                  \
      "       AND q.sweep_id = s.sweep_id)"                                    \
      "   ORDER BY s.priority DESC, s.last_lease_seq, s.sweep_id LIMIT 1)"     \
      " SELECT j.job_id FROM jobs j INDEXED BY jobs_queue"                     \
      "  WHERE j.status = 'queued' AND j.trainer = ?1"                         \
      "    AND j.priority = (SELECT pr FROM pick)"                              \
      "    AND j.sweep_id = (SELECT sid FROM pick) ORDER BY j.job_id LIMIT 1") \
    /* Whether an active sweep has a job of trainer ?1 waiting (a later   \
     * stage's, a held seed) and a job running, whose end may release it: \
     * each probe is a seek in an index, not a count (asked at every      \
     * no_job). */                                                         \
    X(ST_WORK_PENDING,                                                         \
      "SELECT EXISTS (SELECT 1 FROM sweeps s WHERE s.status = 'active'"        \
      "  AND EXISTS (SELECT 1 FROM jobs j INDEXED BY jobs_waiting_by_trainer"  \
      "              WHERE j.sweep_id = s.sweep_id AND j.trainer = ?1"        \
      "              AND j.status = 'waiting')"                               \
      "  AND EXISTS (SELECT 1 FROM jobs j WHERE j.sweep_id = s.sweep_id"       \
      "              AND j.status = 'running'))")                             \
    X(ST_LEASE_MAX_SEQ, "SELECT coalesce(max(last_lease_seq), 0) FROM sweeps") \
    X(ST_LEASE_TOUCH_SWEEP,                                                    \
      "UPDATE sweeps SET last_lease_seq = ?2 WHERE sweep_id = ?1")             \
    X(ST_JOB_START,                                                            \
      "UPDATE jobs SET status = 'running', attempts = attempts + 1,"           \
      " started_ms = coalesce(started_ms, ?2) WHERE job_id = ?1")              \
    /* What a lease hands the worker about its job (bf_lease). */            \
    X(ST_JOB_LEASED,                                                           \
      "SELECT CASE WHEN init_from IS NULL THEN config"                         \
      "  ELSE json_set(config, '$.init_from', init_from) END,"                 \
      " checkpoint_path, checkpoint_step,"                                     \
      " CASE WHEN init_from IS NULL THEN 0 ELSE source_job_id END, sweep_id"   \
      " FROM jobs WHERE job_id = ?1")                                          \
    X(ST_DATABASE_ID, "SELECT database_id FROM database_identity")             \
    X(ST_ATTEMPT_INSERT,                                                       \
      "INSERT INTO attempts (job_id, attempt_no, worker, started_ms,"          \
      " lease_expires_ms, request) SELECT ?1, coalesce(max(attempt_no), 0)"    \
      " + 1, ?2, ?3, ?4, ?5 FROM attempts WHERE job_id = ?1"                   \
      " RETURNING attempt_id, attempt_no")                                     \
    X(ST_ATTEMPT_LIVE,                                                         \
      "SELECT a.job_id, j.sweep_id, j.cancel_requested, j.attempts,"           \
      " s.max_attempts, EXISTS (SELECT 1 FROM prune_decisions d"               \
      " WHERE d.job_id = a.job_id AND d.decision = 'prune')"                   \
      " FROM attempts a JOIN jobs j ON j.job_id = a.job_id"                    \
      " JOIN sweeps s ON s.sweep_id = j.sweep_id"                              \
      " WHERE a.attempt_id = ?1 AND a.outcome = 'running'")                    \
    X(ST_WORKER_LIVE_ATTEMPT,                                                  \
      "SELECT attempt_id, job_id, attempt_no, request FROM attempts"           \
      " INDEXED BY attempts_live_by_worker"                                    \
      " WHERE outcome = 'running' AND worker = ?1 LIMIT 1")                    \
    X(ST_ATTEMPT_OWNER,                                                        \
      "SELECT worker = ?2 FROM attempts"                                       \
      " WHERE attempt_id = ?1 AND outcome = 'running'")                        \
    X(ST_ATTEMPT_RENEW,                                                        \
      "UPDATE attempts SET lease_expires_ms = ?2"                              \
      " WHERE attempt_id = ?1 AND outcome = 'running'")                        \
    X(ST_ATTEMPT_END,                                                          \
      "UPDATE attempts SET outcome = ?2, ended_ms = ?3, error = ?4"            \
      " WHERE attempt_id = ?1 AND outcome = 'running'")                        \
    X(ST_ATTEMPTS_EXPIRED,                                                     \
      "SELECT attempt_id FROM attempts WHERE outcome = 'running'"              \
      " AND lease_expires_ms <= ?1 ORDER BY lease_expires_ms")                 \
    /* early stopping (store_prune.c): a stage's rule once per sweep, a  \
     * search trial's row; the rule of a job whose eval ?3 at step ?2 is   \
     * at one of its rungs; the values decided before at that rung among   \
     * its competitors; a decision, numbered in the order made. */        \
    X(ST_PRUNE_RULE_INSERT,                                                    \
      "INSERT INTO prune_rules (sweep_id, stage, method, metric, eval_depth,"  \
      " rungs, param, synchronous) SELECT ?1, ?2, ?3, ?7, ?4, ?5, ?6, ?8"      \
      " WHERE NOT"                                                             \
      " EXISTS (SELECT 1 FROM prune_rules WHERE sweep_id = ?1 AND stage IS ?2)")\
    X(ST_SELECT_RULE_INSERT,                                                   \
      "INSERT INTO select_rules (sweep_id, stage, metric, eval_depth, best,"   \
      " space) SELECT ?1, ?2, ?5, ?3, ?4, ?6 WHERE NOT EXISTS (SELECT 1"       \
      " FROM select_rules WHERE sweep_id = ?1 AND stage IS ?2)")               \
    X(ST_TRIAL_INSERT,                                                         \
      "INSERT INTO trials (job_id, rule_id, grp, trial, select_id) VALUES"     \
      " (?1, (SELECT rule_id FROM prune_rules WHERE sweep_id = ?2"             \
      " AND stage IS ?3), ?4, ?5, (SELECT select_id FROM select_rules"         \
      " WHERE sweep_id = ?2 AND stage IS ?3))")                                \
    /* selection: the cell of an ended trial, when none of its trials is  \
     * left to run and it has no selection yet; then its ranking. */      \
    X(ST_SELECT_READY,                                                         \
      "SELECT t.select_id, t.grp, r.best, r.eval_depth, r.stage, r.metric"     \
      " FROM trials t"                                                         \
      " JOIN select_rules r ON r.select_id = t.select_id WHERE t.job_id = ?1"  \
      " AND NOT EXISTS (SELECT 1 FROM selections x WHERE x.select_id ="        \
      " t.select_id AND x.grp = t.grp) AND NOT EXISTS (SELECT 1 FROM trials o" \
      " INDEXED BY trials_by_select JOIN jobs j ON j.job_id = o.job_id"        \
      " WHERE o.select_id = t.select_id AND o.grp = t.grp"                     \
      " AND j.status IN ('waiting', 'queued', 'running'))")                    \
    /* ?5: the metric is eval_accuracy (higher is better), else eval_loss */\
    X(ST_SELECT_RANK,                                                          \
      "INSERT INTO selections (select_id, grp, rank, job_id, value, chosen)"   \
      " SELECT ?1, ?2, rank, job_id, v, rank <= ?3 FROM (SELECT job_id, v,"    \
      " row_number() OVER (ORDER BY CASE WHEN ?5 THEN -v ELSE v END,"          \
      " job_id) AS rank FROM (SELECT j.job_id,"                                \
      " CASE WHEN ?5 THEN e.accuracy ELSE e.loss END AS v"                     \
      " FROM trials t INDEXED BY trials_by_select"                             \
      " JOIN jobs j ON j.job_id = t.job_id JOIN evals e ON e.job_id ="         \
      " j.job_id AND e.depth = ?4 AND e.step = json_extract(j.config,"         \
      " '$.steps') WHERE t.select_id = ?1 AND t.grp = ?2"                      \
      " AND j.status = 'succeeded' AND NOT EXISTS (SELECT 1"                   \
      " FROM prune_decisions d WHERE d.job_id = j.job_id"                      \
      " AND d.decision = 'prune')) WHERE v IS NOT NULL)")                      \
    /* from: a job taking a selection's values (selected_values); once \
     * the cell is ranked: its chosen trial, its waiting jobs filled from  \
     * that trial's config and queued (a held seed stays waiting, and so   \
     * does a job whose source has not handed it its checkpoint: the       \
     * source's release queues it), or, with no trial chosen, failed (?4   \
     * says why) and returned, since theirs fail next. */                  \
    X(ST_VALUES_INSERT,                                                        \
      "INSERT INTO selected_values (job_id, select_id, grp, fields, held)"     \
      " SELECT ?1, select_id, ?4, ?5, ?6 FROM select_rules"                    \
      " WHERE sweep_id = ?2 AND stage IS ?3")                                  \
    X(ST_VALUES_CHOSEN,                                                        \
      "UPDATE selected_values SET trial_job_id = (SELECT job_id"               \
      " FROM selections WHERE select_id = ?1 AND grp = ?2 AND chosen"          \
      " ORDER BY rank LIMIT 1) WHERE job_id IN (SELECT job_id"                 \
      " FROM selected_values INDEXED BY selected_values_by_cell"               \
      " WHERE select_id = ?1 AND grp = ?2)")                                   \
    /* (a job that never ran, failed or cancelled before a retried     \
     * trial's selection, gets the values too: its own retry runs them) */ \
    /* (a field params.NAME goes into the config's params object: one  \
     * patch of the builtin fields, one of the parameters) */           \
    X(ST_VALUES_FILL,                                                          \
      "UPDATE jobs SET config = json_patch(json_patch(config, (SELECT"         \
      " json_group_object(k.value, t.config -> ('$.' || k.value))"             \
      " FROM selected_values v JOIN jobs t ON t.job_id = v.trial_job_id,"      \
      " json_each(v.fields) k WHERE v.job_id = jobs.job_id"                    \
      " AND k.value NOT LIKE 'params.%')), (SELECT CASE WHEN count(*) > 0"     \
      " THEN json_object('params', json_group_object(substr(k.value, 8),"      \
      " t.config -> ('$.' || k.value))) ELSE '{}' END"                         \
      " FROM selected_values v JOIN jobs t ON t.job_id = v.trial_job_id,"      \
      " json_each(v.fields) k WHERE v.job_id = jobs.job_id"                    \
      " AND k.value LIKE 'params.%')),"                                        \
      " hold = CASE WHEN status = 'waiting' AND (SELECT held"                  \
      " FROM selected_values WHERE job_id = jobs.job_id) THEN 'seed' END,"     \
      " status = CASE WHEN status <> 'waiting' OR (SELECT held"                \
      " FROM selected_values WHERE job_id = jobs.job_id)"                      \
      " OR (source_job_id IS NOT NULL AND init_from IS NULL) THEN status"      \
      " ELSE 'queued' END"                                                     \
      " WHERE job_id IN (SELECT job_id FROM selected_values"                   \
      " INDEXED BY selected_values_by_cell WHERE select_id = ?1 AND grp = ?2"  \
      " AND trial_job_id IS NOT NULL) AND attempts = 0"                        \
      " AND status IN ('waiting', 'failed', 'cancelled')")                     \
    /* A job whose values are not known (its cell chose no trial yet). */ \
    X(ST_VALUES_PENDING,                                                       \
      "SELECT r.stage FROM selected_values v JOIN select_rules r"              \
      " ON r.select_id = v.select_id WHERE v.job_id = ?1"                      \
      " AND v.trial_job_id IS NULL")                                           \
    X(ST_VALUES_FAIL,                                                          \
      "UPDATE jobs SET status = 'failed', finished_ms = ?3, error = ?4"        \
      " WHERE job_id IN (SELECT job_id FROM selected_values"                   \
      " INDEXED BY selected_values_by_cell WHERE select_id = ?1 AND grp = ?2"  \
      " AND trial_job_id IS NULL) AND status = 'waiting' RETURNING job_id")    \
    X(ST_PRUNE_RULE_AT,                                                        \
      "SELECT r.rule_id, r.method, r.param, t.grp, j.cancel_requested,"        \
      " r.metric, r.synchronous"                                               \
      " FROM trials t JOIN prune_rules r ON r.rule_id = t.rule_id"             \
      " JOIN jobs j ON j.job_id = t.job_id WHERE t.job_id = ?1"                \
      " AND r.eval_depth = ?3 AND EXISTS (SELECT 1 FROM json_each(r.rungs)"    \
      " WHERE value = ?2)")                                                    \
    X(ST_PRUNE_COMPETING,                                                      \
      "SELECT d.value IS NULL, d.value FROM trials t INDEXED BY trials_by_group"\
      " JOIN prune_decisions d ON d.job_id = t.job_id AND d.rung = ?3"         \
      " WHERE t.rule_id = ?1 AND t.grp = ?2")                                  \
    X(ST_PRUNE_DECIDE,                                                         \
      "INSERT INTO prune_decisions (job_id, rung, value, decision, seq)"       \
      " VALUES (?1, ?2, ?3, ?4,"                                               \
      " 1 + coalesce((SELECT max(seq) FROM prune_decisions), 0))"              \
      " ON CONFLICT DO NOTHING")                                               \
    /* synchronous rules: a trial's rule and group; the rule's rungs in   \
     * order; whether a live trial of the group, not pruned, still lacks   \
     * an eval at rung ?3 (depth ?4); the values there not yet decided,    \
     * but for trials pruned at an earlier rung. */                       \
    X(ST_PRUNE_SYNC_TRIAL,                                                     \
      "SELECT t.rule_id, t.grp FROM trials t JOIN prune_rules r"               \
      " ON r.rule_id = t.rule_id WHERE t.job_id = ?1 AND r.synchronous")       \
    X(ST_PRUNE_SYNC_RUNGS,                                                     \
      "SELECT r.param, r.eval_depth, r.metric, k.value FROM prune_rules r,"    \
      " json_each(r.rungs) k WHERE r.rule_id = ?1 ORDER BY k.key")             \
    X(ST_PRUNE_AWAITED,                                                        \
      "SELECT EXISTS (SELECT 1 FROM trials t INDEXED BY trials_by_group"       \
      " JOIN jobs j ON j.job_id = t.job_id WHERE t.rule_id = ?1"               \
      " AND t.grp = ?2 AND j.status IN ('waiting', 'queued', 'running')"       \
      " AND NOT EXISTS (SELECT 1 FROM prune_decisions d"                       \
      " WHERE d.job_id = t.job_id AND d.decision = 'prune')"                   \
      " AND NOT EXISTS (SELECT 1 FROM evals e WHERE e.job_id = t.job_id"       \
      " AND e.step = ?3 AND e.depth = ?4))")                                   \
    X(ST_PRUNE_PENDING,                                                        \
      "SELECT t.job_id, t.trial, e.loss, e.accuracy"                           \
      " FROM trials t INDEXED BY trials_by_group JOIN evals e"                 \
      " ON e.job_id = t.job_id AND e.step = ?3 AND e.depth = ?4"               \
      " WHERE t.rule_id = ?1 AND t.grp = ?2 AND NOT EXISTS (SELECT 1"          \
      " FROM prune_decisions d WHERE d.job_id = t.job_id"                      \
      " AND (d.rung = ?3 OR d.decision = 'prune'))")                           \
    X(ST_PRUNE_REQUEST,                                                        \
      "UPDATE jobs SET cancel_requested = 1 WHERE job_id = ?1"                 \
      " AND status = 'running'")                                               \
    X(ST_JOB_SETTLE,                                                           \
      "UPDATE jobs SET status = ?2, finished_ms = ?3, error = ?4"              \
      " WHERE job_id = ?1")                                                    \
    /* A step outside the job's 0 .. steps changes nothing (refused). */      \
    X(ST_JOB_CHECKPOINT,                                                       \
      "UPDATE jobs SET checkpoint_path = ?2, checkpoint_step = ?3"             \
      " WHERE job_id = ?1 AND ?3 BETWEEN 0 AND json_extract(config, '$.steps')")\
    X(ST_JOB_STEPS, "SELECT json_extract(config, '$.steps') FROM jobs"         \
      " WHERE job_id = ?1")                                                    \
    /* A checkpoint that would not load: the job no longer resumes from it. */ \
    X(ST_JOB_CHECKPOINT_BAD,                                                   \
      "UPDATE jobs SET checkpoint_path = NULL, checkpoint_step = NULL"         \
      " WHERE job_id = ?1 AND checkpoint_path = ?2")                           \
    /* cancel / retry, by sweep (?1 = sweep_id) or by job (?1 = job_id) */     \
    /* ?3 of them at a time (a slice: store.h) */                             \
    X(ST_CANCEL_QUEUED_SWEEP,                                                  \
      "UPDATE jobs SET status = 'cancelled', finished_ms = ?2,"                \
      " error = 'cancelled' WHERE job_id IN (SELECT job_id FROM jobs"          \
      " INDEXED BY jobs_by_sweep_status WHERE sweep_id = ?1"                   \
      " AND status IN ('waiting', 'queued') LIMIT ?3)")                        \
    X(ST_CANCELS_UNFINISHED,                                                   \
      "SELECT sweep_id FROM sweeps s WHERE status = 'cancelled'"               \
      " AND EXISTS (SELECT 1 FROM jobs j INDEXED BY jobs_by_sweep_status"      \
      " WHERE j.sweep_id = s.sweep_id AND j.status IN ('waiting', 'queued'))"  \
      " ORDER BY sweep_id")                                                    \
    X(ST_CANCEL_QUEUED_JOB,                                                    \
      "UPDATE jobs SET status = 'cancelled', finished_ms = ?2,"                \
      " error = 'cancelled' WHERE job_id = ?1"                                 \
      " AND status IN ('waiting', 'queued')")                                  \
    X(ST_CANCEL_RUNNING_SWEEP,                                                 \
      "UPDATE jobs SET cancel_requested = 1"                                   \
      " WHERE sweep_id = ?1 AND status = 'running'"                            \
      " RETURNING (SELECT attempt_id FROM attempts a"                          \
      "  WHERE a.job_id = jobs.job_id AND a.outcome = 'running')")             \
    X(ST_CANCEL_RUNNING_JOB,                                                   \
      "UPDATE jobs SET cancel_requested = 1"                                   \
      " WHERE job_id = ?1 AND status = 'running'"                              \
      " RETURNING (SELECT attempt_id FROM attempts a"                          \
      "  WHERE a.job_id = jobs.job_id AND a.outcome = 'running')")             \
    X(ST_JOB_RETRY,                                                            \
      "UPDATE jobs SET status = 'waiting', init_from = NULL, attempts = 0,"    \
      " hold = NULL,"                                                          \
      " cancel_requested = 0, error = NULL, finished_ms = NULL,"               \
      " checkpoint_path = CASE WHEN ?2 THEN NULL ELSE checkpoint_path END,"    \
      " checkpoint_step = CASE WHEN ?2 THEN NULL ELSE checkpoint_step END"     \
      " WHERE job_id = ?1 AND status IN ('failed', 'cancelled')")              \
    /* adaptive seeds (store_seqs.c) */                                        \
    /* Each cell of the stage (its seed-1 job) with the config it is and  \
     * the config its baseline has, made once per cell; the match then    \
     * compares texts only. */                                             \
    X(ST_SEQ_INSERT,                                                           \
      "WITH cells AS MATERIALIZED (SELECT cell,"                               \
      "  json_remove(config, '$.seed') AS own,"                                \
      "  json_remove(json_patch(config, ?6), '$.seed') AS wants"               \
      "  FROM jobs WHERE sweep_id = ?1 AND stage IS ?2 AND seed = 1)"          \
      " INSERT INTO seed_comparisons (sweep_id, variant_cell, baseline_cell,"  \
      " stage, eval_depth, seeds_min, seeds_max, released, alpha, rule)"       \
      " SELECT ?1, v.cell, b.cell, ?2, ?5, ?3, ?4, ?3,"                        \
      " ?7 / count(*) OVER (), ?8"                                             \
      " FROM cells v JOIN cells b ON b.own = v.wants AND b.cell <> v.cell")    \
    X(ST_SEQ_JOB, "SELECT sweep_id, cell FROM jobs WHERE job_id = ?1")         \
    X(ST_SEQ_RUNNING,                                                          \
      "SELECT c.variant_cell, c.baseline_cell, c.eval_depth, c.seeds_min,"     \
      " c.seeds_max, c.released, a.equivalence_margin, c.alpha, c.rule"        \
      " FROM seed_comparisons c JOIN sweep_analysis a USING (sweep_id)"        \
      " WHERE c.sweep_id = ?1 AND c.state = 'running'"                         \
      " AND (c.variant_cell = ?2 OR c.baseline_cell = ?2)")                    \
    /* Per released seed: both ended (pruned too: a pruned job never runs  \
     * again), and each loss at the depth when both succeeded (the newest   \
     * eval there, as final_evals). */                                      \
    X(ST_SEQ_PAIRS,                                                            \
      "SELECT v.status IN ('succeeded', 'failed', 'cancelled', 'pruned')"      \
      "   AND b.status IN ('succeeded', 'failed', 'cancelled', 'pruned'),"     \
      " (SELECT e.loss FROM evals e WHERE e.job_id = v.job_id"                 \
      "   AND e.depth = ?4 AND b.status = 'succeeded'"                         \
      "   AND v.status = 'succeeded' ORDER BY e.step DESC LIMIT 1),"           \
      " (SELECT e.loss FROM evals e WHERE e.job_id = b.job_id"                 \
      "   AND e.depth = ?4 AND b.status = 'succeeded'"                         \
      "   AND v.status = 'succeeded' ORDER BY e.step DESC LIMIT 1)"            \
      " FROM jobs v JOIN jobs b ON b.sweep_id = v.sweep_id AND b.cell = ?3"    \
      "  AND b.seed = v.seed"                                                  \
      " WHERE v.sweep_id = ?1 AND v.cell = ?2 AND v.seed <= ?5")               \
    X(ST_SEQ_UPDATE,                                                           \
      "UPDATE seed_comparisons SET state = ?3, n_pairs = ?4, ci_low = ?5,"     \
      " ci_high = ?6, released = ?7, skewness = ?9,"                           \
      " decided_seed = CASE WHEN ?3 = 'running' THEN NULL ELSE ?7 END,"        \
      " decided_ms = CASE WHEN ?3 = 'running' THEN NULL ELSE ?8 END"           \
      " WHERE sweep_id = ?1 AND variant_cell = ?2 AND state = 'running'")      \
    X(ST_SEQ_RELEASE,                                                          \
      "UPDATE jobs SET hold = NULL, status = CASE WHEN source_job_id IS NULL"  \
      " OR init_from IS NOT NULL THEN 'queued' ELSE status END"                \
      " WHERE sweep_id = ?1"                                                   \
      " AND cell IN (?2, ?3) AND seed = ?4 AND status = 'waiting'"             \
      " AND hold = 'seed'")                                                    \
    /* Its sweep cancelled: every comparison still running ends so,        \
     * keeping its seeds and the interval of its last look. */              \
    X(ST_SEQ_CANCEL,                                                           \
      "UPDATE seed_comparisons SET state = 'cancelled',"                       \
      " decided_seed = released, decided_ms = ?2"                              \
      " WHERE sweep_id = ?1 AND state = 'running'")                            \
    /* A cell's held seeds, once no comparison of it is running. */         \
    X(ST_SEQ_DROP,                                                             \
      "UPDATE jobs SET status = 'cancelled', finished_ms = ?3,"                \
      " error = 'not needed: the comparisons this seed would serve are"        \
      " decided' WHERE sweep_id = ?1 AND cell = ?2 AND status = 'waiting'"     \
      " AND hold = 'seed' AND NOT EXISTS (SELECT 1"                            \
      "  FROM seed_comparisons WHERE sweep_id = ?1 AND state = 'running'"      \
      "  AND (variant_cell = ?2 OR baseline_cell = ?2))")                      \
    /* metrics */                                                              \
    X(ST_METRIC_INSERT,                                                        \
      "INSERT OR IGNORE INTO metrics (job_id, key, step, value)"               \
      " VALUES (?1, ?2, ?3, ?4)")                                              \
    X(ST_EVAL_INSERT,                                                          \
      "INSERT OR IGNORE INTO evals (job_id, step, depth, loss, accuracy)"      \
      " VALUES (?1, ?2, ?3, ?4, ?5)")                                          \
    X(ST_OUTCOMES_INSERT,                                                      \
      "INSERT OR IGNORE INTO eval_outcomes (job_id, step, depth, bits, n)"     \
      " VALUES (?1, ?2, ?3, ?4, ?5)")                                          \
    X(ST_FREQ_INSERT,                                                          \
      "INSERT OR IGNORE INTO frequencies (job_id, step, layer, head, pair,"    \
      " omega) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")                               \
    /* A new attempt of a trainer that is not bit-reproducible: the rows \
     * the dead attempts sent past the resume point ?2 (the first step the \
     * new one sends) are retired, so its own rows take their steps.      */\
    X(ST_RETIRE_METRICS, "DELETE FROM metrics WHERE job_id = ?1 AND step >= ?2")\
    X(ST_RETIRE_EVALS, "DELETE FROM evals WHERE job_id = ?1 AND step >= ?2")   \
    X(ST_RETIRE_OUTCOMES,                                                      \
      "DELETE FROM eval_outcomes WHERE job_id = ?1 AND step >= ?2")            \
    X(ST_RETIRE_FREQS,                                                         \
      "DELETE FROM frequencies WHERE job_id = ?1 AND step >= ?2")              \
    /* workers */                                                              \
    X(ST_WORKER_SEEN,                                                          \
      "INSERT INTO workers (name, host, ranks, connected, first_seen_ms,"      \
      " last_seen_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?5)"                         \
      " ON CONFLICT (name) DO UPDATE SET host = excluded.host,"                \
      " ranks = excluded.ranks, connected = excluded.connected,"               \
      " last_seen_ms = excluded.last_seen_ms")

enum {
#define BF_STORE_ENUM(id, sql) id,
    BF_STORE_STATEMENTS(BF_STORE_ENUM)
#undef BF_STORE_ENUM
    ST_COUNT
};

/* A growing list of row ids (v malloc'd; free(v) frees it). */
typedef struct store_ids {
    int64_t *v;
    size_t n, cap;
} store_ids;

void store__ids_push(store_ids *l, int64_t id);
/* Steps st (bound) to its end, appending every row's column 0 that is not
 * NULL to l.  0, or -1 with err ("what: SQLite's message"). */
int store__ids_collect(bf_store *s, sqlite3_stmt *st, store_ids *l,
                       const char *what, bf_error *err);

struct bf_store {
    sqlite3 *db;
    char *path;
    int in_batch;          /* a metric batch transaction is open */
    /* A batch was lost (its commit failed, or a failing statement rolled
     * the whole batch transaction back) since the last bf_store_flush that
     * reported an error: the next flush fails, so no ack waiting for it is
     * sent; `lost` says why. */
    int batch_lost;
    bf_error lost;
    int64_t lease_seq;     /* last value given to sweeps.last_lease_seq */
    char *database_id;     /* database_identity, read at open */
    sqlite3_stmt *st[ST_COUNT];
    /* Why the last failing internal step failed, for the public call
     * that returns its error (store__report copies it to that call's err). */
    bf_error last;
    /* Ended jobs whose waiting dependents may still have to move on (a
     * stack; bf_store_settle).  Only a hint: each is looked at afresh. */
    store_ids unsettled;
    /* Retried jobs and the dependents revived so far, whose own failed
     * dependents wait again next (a stack, worked before `unsettled`: no
     * waiting job moves on while a revival is under way, so none runs
     * before the jobs that depend on it wait again), and the retried jobs
     * without a source, queued once the stack is empty.  Hints too. */
    store_ids reviving;
    store_ids revive_roots;
};

/* The statement `id`, reset and with its bindings cleared, ready to bind. */
sqlite3_stmt *store__stmt(bf_store *s, int id);

/* Fills err (and s->last) with "what: SQLite's message (SQLite error
 * CODE)", the extended result code.  Returns -1. */
int store__fail(bf_store *s, bf_error *err, const char *what);

/* A public call's return: rc, with err (may be NULL) filled when rc is an
 * error: BF_STORE_FENCED names attempt_id, the others copy s->last (the
 * step that failed).  For the calls whose steps report to s->last only. */
int store__report(bf_store *s, int rc, int64_t attempt_id, bf_error *err);

/* Write transactions.  begin commits an open metric batch first, so every
 * call but ingest leaves the database committed when it returns. */
int store__begin(bf_store *s, bf_error *err);
int store__commit(bf_store *s, bf_error *err);
void store__rollback(bf_store *s);

/* Marks the open metric batch as lost (why: s->last) so that the next
 * bf_store_flush fails. */
void store__batch_lost(bf_store *s);

/* Runs a statement that returns no rows (or whose rows are not needed).
 * Returns 0, or -1 with err set. */
int store__exec(bf_store *s, sqlite3_stmt *st, bf_error *err);

/* Adaptive seeds (store_seqs.c), in the caller's transaction: what
 * job_id's end decides.  For each running comparison it belongs to whose
 * released seed pairs have all ended, the rule's state is stored, then the
 * next pair released or the unneeded held seeds dropped.  0, or -1 with
 * err set. */
int store__seqs_job_ended(bf_store *s, int64_t job_id, int64_t now_ms,
                          bf_error *err);
/* Ends every running comparison of a sweep being cancelled as
 * 'cancelled' at now_ms, so none releases another seed.  0, or -1. */
int store__seqs_sweep_cancelled(bf_store *s, int64_t sweep_id, int64_t now_ms,
                                bf_error *err);

/* Marks the sweep done once none of its jobs is queued or running. */
/* Whether a time-bounded slice given deadline_us (store.h) stops now. */
int store__past(int64_t deadline_us);
/* Rows one statement of such a slice deletes or updates: few enough that
 * the clock is looked at often, enough that a statement's own cost is
 * spread. */
#define STORE_SLICE_ROWS 64
/* Runs st (bound, STORE_SLICE_ROWS its LIMIT) until it changes fewer rows
 * than that or deadline_us passes (at least once), in the open
 * transaction.  1: more may remain, 0: none, -1 on error. */
int store__exec_slices(bf_store *s, sqlite3_stmt *st, int64_t deadline_us,
                       bf_error *err);

int store__refresh_sweep(bf_store *s, int64_t sweep_id, bf_error *err);

/* ---- early stopping (store_prune.c) ------------------------------------ */

/* Trial job_id has just ended: when it was the last of its cell to run
 * and its stage selects, ranks the cell's succeeded trials into
 * `selections` (013_select.sql), and the jobs taking the cell's values
 * (`from:`, 018_from_and_metrics.sql) get them and are queued, or fail
 * when no trial was chosen.  In the open transaction. */
int store__select_on_end(bf_store *s, int64_t job_id, int64_t now_ms,
                         bf_error *err);

/* An eval of job_id at (step, depth) was just stored: when that is a rung
 * of the job's prune rule, decides whether the job goes on, stores the
 * decision and, to prune, marks the job cancel-requested (so the replies
 * to its worker say cancel once this commits).  The rule's metric is the
 * loss or the accuracy given; NaN is worse than any value.
 * In the open transaction; 0, or -1 with err set. */
int store__prune_eval(bf_store *s, int64_t job_id, int64_t step,
                      int64_t depth, double loss, double accuracy,
                      bf_error *err);

/* Trial job_id has just ended: under a synchronous rule, the rungs its
 * cell waited on it for are decided now (before its selection, which
 * never chooses a pruned trial).  In the open transaction. */
int store__prune_on_end(bf_store *s, int64_t job_id, bf_error *err);

#endif
