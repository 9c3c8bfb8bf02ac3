-- Migration 12: early stopping of a search's trials (issue 19).
-- A trial the coordinator prunes ends in the new job status 'pruned': a
-- final status, never retried, keeping its checkpoint and metrics.
-- `trials` says which search trial a job is and which trials compete with
-- it; `prune_rules` holds each stage's rule; `prune_decisions` every
-- decision, stored in the transaction of the eval that caused it (before
-- any worker is told), in the order made (`seq`), so a restarted daemon
-- never decides twice and the rule can be replayed from the stored evals.
--
-- SQLite cannot change a CHECK constraint in place, so jobs is rebuilt as
-- in migration 4 (https://sqlite.org/lang_altertable.html#otheralter);
-- the views that read it are dropped first and made again below, as they
-- were, sweep_progress with a `pruned` count.

DROP VIEW results;
DROP VIEW frequency_evolution;
DROP VIEW sweep_progress;
DROP VIEW job_results;
DROP VIEW final_evals;
DROP VIEW eval_summary;
DROP VIEW train_loss;
DROP VIEW frequency_history;
DROP VIEW live_jobs;

CREATE TABLE jobs_new (
    job_id           INTEGER PRIMARY KEY,
    sweep_id         INTEGER NOT NULL REFERENCES sweeps (sweep_id),
    idx              INTEGER NOT NULL,        -- 0-based position in expansion order
    config           TEXT    NOT NULL,        -- canonical JSON job config
    config_hash      TEXT    NOT NULL,        -- FNV-1a 64 of config, 16 hex digits
    task             TEXT    NOT NULL,
    rope             TEXT    NOT NULL,
    depth            INTEGER NOT NULL,
    seed             INTEGER NOT NULL,
    learnable_heads  INTEGER NOT NULL,        -- per layer: the last N heads
    status           TEXT    NOT NULL DEFAULT 'queued'
                     CHECK (status IN ('waiting', 'queued', 'running',
                                       'succeeded', 'failed', 'cancelled',
                                       'pruned')),
    priority         INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,  -- used since submit / last retry
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    checkpoint_path  TEXT,                    -- newest checkpoint of any attempt
    checkpoint_step  INTEGER,
    error            TEXT,                    -- why the last attempt failed
    created_ms       INTEGER NOT NULL,
    started_ms       INTEGER,                 -- first lease
    finished_ms      INTEGER,
    stage            TEXT,                    -- its stage's name; NULL without stages
    source_job_id    INTEGER REFERENCES jobs (job_id),  -- init_from "stage:NAME"
    init_from        TEXT,                    -- the source's final checkpoint, once known
    status_seq       INTEGER,                 -- migration 8
    cell             INTEGER,                 -- migration 9
    UNIQUE (sweep_id, config_hash)
);
INSERT INTO jobs_new (job_id, sweep_id, idx, config, config_hash, task, rope,
                      depth, seed, learnable_heads, status, priority, attempts,
                      cancel_requested, checkpoint_path, checkpoint_step, error,
                      created_ms, started_ms, finished_ms, stage,
                      source_job_id, init_from, status_seq, cell)
SELECT job_id, sweep_id, idx, config, config_hash, task, rope, depth, seed,
       learnable_heads, status, priority, attempts, cancel_requested,
       checkpoint_path, checkpoint_step, error, created_ms, started_ms,
       finished_ms, stage, source_job_id, init_from, status_seq, cell
  FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

-- The indexes and the trigger of migrations 4, 6, 8 and 9, as they were.

CREATE INDEX jobs_queue ON jobs (priority DESC, sweep_id, job_id)
    WHERE status = 'queued';
CREATE INDEX jobs_by_source ON jobs (source_job_id)
    WHERE source_job_id IS NOT NULL;
CREATE INDEX jobs_by_sweep_finished ON jobs (sweep_id, finished_ms)
    WHERE finished_ms IS NOT NULL;
CREATE INDEX jobs_by_sweep_change ON jobs (sweep_id, status_seq)
    WHERE status_seq IS NOT NULL;
CREATE TRIGGER jobs_status_seq AFTER UPDATE OF status ON jobs
  WHEN OLD.status IS NOT NEW.status
BEGIN
  UPDATE jobs
     SET status_seq = 1 + coalesce((SELECT max(status_seq) FROM jobs
                                     WHERE sweep_id = NEW.sweep_id
                                       AND status_seq IS NOT NULL), 0)
   WHERE job_id = NEW.job_id;
END;
CREATE INDEX jobs_by_sweep_status ON jobs (sweep_id, status, job_id, cell,
                                           seed);

-- Each stage's rule (sweep.h's bf_sweep_prune): rungs is a JSON array of
-- steps; param is asha's eta or median's min_trials.
CREATE TABLE prune_rules (
    rule_id    INTEGER PRIMARY KEY,
    sweep_id   INTEGER NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
    stage      TEXT,                        -- NULL without stages
    method     TEXT    NOT NULL CHECK (method IN ('asha', 'median')),
    metric     TEXT    NOT NULL CHECK (metric IN ('eval_loss')),
    eval_depth INTEGER NOT NULL,
    rungs      TEXT    NOT NULL,
    param      INTEGER NOT NULL
);
CREATE INDEX prune_rules_by_sweep ON prune_rules (sweep_id);

-- A job of a stage with a search: its trial number and its group (the
-- stage's cell of the grid/zip: the trials that compete), and the rule
-- that prunes it (NULL: the stage does not prune).
CREATE TABLE trials (
    job_id     INTEGER PRIMARY KEY REFERENCES jobs (job_id) ON DELETE CASCADE,
    rule_id    INTEGER REFERENCES prune_rules (rule_id),
    grp        INTEGER NOT NULL,
    trial      INTEGER NOT NULL
);
CREATE INDEX trials_by_group ON trials (rule_id, grp) WHERE rule_id IS NOT NULL;

-- One decision per (job, rung): the metric's value there (NULL: not a
-- finite number, worse than any), whether the job goes on, and its place
-- among the decisions made (seq: 1, 2, ... over the database).
CREATE TABLE prune_decisions (
    job_id     INTEGER NOT NULL REFERENCES jobs (job_id),
    rung       INTEGER NOT NULL,
    value      REAL,
    decision   TEXT    NOT NULL CHECK (decision IN ('continue', 'prune')),
    seq        INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (job_id, rung)
) WITHOUT ROWID;

-- The views of migrations 3, 4, 5, 9 and 11 as they were; sweep_progress
-- counts the pruned jobs, which are done.

CREATE VIEW results AS
SELECT j.sweep_id, j.job_id, j.stage, j.task, j.rope, j.depth, j.seed,
       j.status,
       (SELECT m.value FROM metrics m
         WHERE m.job_id = j.job_id AND m.key = 'loss'
         ORDER BY m.step DESC LIMIT 1)                       AS train_loss,
       e.step AS eval_step, e.loss AS eval_loss, e.accuracy AS eval_accuracy,
       o.depth AS ood_depth, o.loss AS ood_loss, o.accuracy AS ood_accuracy
  FROM jobs j
  LEFT JOIN evals e
    ON e.job_id = j.job_id AND e.depth = j.depth
   AND e.step = (SELECT max(step) FROM evals
                  WHERE job_id = j.job_id AND depth = j.depth)
  LEFT JOIN evals o
    ON o.job_id = j.job_id
   AND o.depth = (SELECT max(value) FROM json_each(j.config, '$.eval_depths'))
   AND o.step = (SELECT max(step) FROM evals
                  WHERE job_id = j.job_id AND depth = o.depth);

CREATE VIEW frequency_evolution AS
SELECT f.job_id, j.rope, f.layer, f.head, f.pair, f.step, f.omega,
       f0.step                                     AS initial_step,
       f0.omega                                    AS initial_omega,
       f.omega - f0.omega                          AS omega_change,
       f.omega / f0.omega                          AS omega_ratio,
       f.head >= json_extract(j.config, '$.n_heads') - j.learnable_heads
                                                   AS learnable
  FROM frequencies f
  JOIN jobs j ON j.job_id = f.job_id
  JOIN frequencies f0
    ON f0.job_id = f.job_id AND f0.layer = f.layer
   AND f0.head = f.head AND f0.pair = f.pair
   AND f0.step = (SELECT min(step) FROM frequencies
                   WHERE job_id = f.job_id AND layer = f.layer
                     AND head = f.head AND pair = f.pair);

CREATE VIEW sweep_progress AS
SELECT s.sweep_id, s.name, s.status,
       count(j.job_id)                                            AS total,
       count(j.job_id) FILTER (WHERE j.status = 'waiting')        AS waiting,
       count(j.job_id) FILTER (WHERE j.status = 'queued')         AS queued,
       count(j.job_id) FILTER (WHERE j.status = 'running')        AS running,
       count(j.job_id) FILTER (WHERE j.status = 'succeeded')      AS succeeded,
       count(j.job_id) FILTER (WHERE j.status = 'failed')         AS failed,
       count(j.job_id) FILTER (WHERE j.status = 'cancelled')      AS cancelled,
       count(j.job_id) FILTER (WHERE j.status = 'pruned')         AS pruned,
       round(100.0 * count(j.job_id) FILTER
                 (WHERE j.status IN ('succeeded', 'failed', 'cancelled',
                                     'pruned'))
             / max(count(j.job_id), 1), 1)                        AS percent_done
  FROM sweeps s
  LEFT JOIN jobs j ON j.sweep_id = s.sweep_id
 GROUP BY s.sweep_id;

CREATE VIEW job_results AS
SELECT r.*, j.error, j.attempts, j.created_ms, j.started_ms, j.finished_ms,
       j.source_job_id, j.init_from, j.config
  FROM results r JOIN jobs j ON j.job_id = r.job_id;

CREATE VIEW final_evals AS
SELECT j.sweep_id, j.stage, json_remove(j.config, '$.seed') AS group_config,
       j.job_id, j.task, j.rope, j.depth, j.seed,
       e.depth AS eval_depth, e.step, e.loss, e.accuracy
  FROM jobs j
  JOIN evals e ON e.job_id = j.job_id
   AND e.step = (SELECT max(step) FROM evals
                  WHERE job_id = e.job_id AND depth = e.depth)
 WHERE j.status = 'succeeded';

CREATE VIEW eval_summary AS
WITH d AS (
  SELECT f.*,
         f.loss - avg(f.loss) OVER g         AS loss_dev,
         f.accuracy - avg(f.accuracy) OVER g AS accuracy_dev
    FROM final_evals f
  WINDOW g AS (PARTITION BY f.sweep_id, f.stage, f.group_config,
                            f.eval_depth))
SELECT sweep_id, stage, group_config, task, rope, depth, eval_depth,
       count(*)                                        AS n,
       avg(loss)                                       AS loss_mean,
       CASE WHEN count(*) > 1
            THEN sqrt(sum(loss_dev * loss_dev) / (count(*) - 1)) END
                                                       AS loss_sd,
       avg(accuracy)                                   AS accuracy_mean,
       CASE WHEN count(*) > 1
            THEN sqrt(sum(accuracy_dev * accuracy_dev) / (count(*) - 1)) END
                                                       AS accuracy_sd
  FROM d
 GROUP BY sweep_id, stage, group_config, eval_depth;

CREATE VIEW train_loss AS
SELECT j.sweep_id, m.job_id, m.step, m.value AS loss
  FROM jobs j
  JOIN metrics m ON m.job_id = j.job_id AND m.key = 'loss'
 WHERE j.status = 'succeeded';

CREATE VIEW frequency_history AS
SELECT j.sweep_id, f.job_id, f.layer, f.head, f.pair, f.step, f.omega
  FROM jobs j
  JOIN frequencies f ON f.job_id = j.job_id
 WHERE j.status = 'succeeded'
   AND f.head >= json_extract(j.config, '$.n_heads') - j.learnable_heads;

CREATE VIEW live_jobs AS
SELECT j.sweep_id, j.job_id, j.config,
       json_extract(j.config, '$.steps')                      AS steps,
       a.attempt_id, a.attempt_no, a.worker,
       a.started_ms                                           AS attempt_started_ms,
       (SELECT max(m.step) FROM metrics m
         WHERE m.job_id = j.job_id AND m.key = 'loss')        AS step,
       (SELECT m.value FROM metrics m
         WHERE m.job_id = j.job_id AND m.key = 'loss'
         ORDER BY m.step DESC LIMIT 1)                        AS loss,
       (SELECT m.value FROM metrics m
         WHERE m.job_id = j.job_id AND m.key = 'tokens_per_s'
         ORDER BY m.step DESC LIMIT 1)                        AS tokens_per_s
  FROM jobs j
  LEFT JOIN attempts a ON a.job_id = j.job_id AND a.outcome = 'running'
 WHERE j.status = 'running';

