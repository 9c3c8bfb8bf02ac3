-- Migration 4: stages.  A job of a later stage starts from the final
-- checkpoint of its source job (jobs.source_job_id) and is 'waiting' until
-- the source has succeeded; jobs.init_from is then that checkpoint's path.
-- Sweeps keep the warnings their submission got.  The result views gain a
-- `stage` column and compare within a stage.
--
-- SQLite cannot change a CHECK constraint in place, so jobs is rebuilt
-- (https://sqlite.org/lang_altertable.html#otheralter): bifocald runs
-- migrations with foreign keys off and checks them before the commit.  The
-- views read jobs, so they are dropped first and made again below.

DROP VIEW results;
DROP VIEW frequency_evolution;
DROP VIEW sweep_progress;
DROP VIEW job_results;
DROP VIEW final_evals;
DROP VIEW eval_summary;
DROP VIEW train_loss;
DROP VIEW frequency_history;

ALTER TABLE sweeps ADD COLUMN warnings TEXT NOT NULL DEFAULT '[]';

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
                                       'succeeded', 'failed', 'cancelled')),
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
    UNIQUE (sweep_id, config_hash)
);
INSERT INTO jobs_new (job_id, sweep_id, idx, config, config_hash, task, rope,
                      depth, seed, learnable_heads, status, priority, attempts,
                      cancel_requested, checkpoint_path, checkpoint_step, error,
                      created_ms, started_ms, finished_ms)
SELECT job_id, sweep_id, idx, config, config_hash, task, rope, depth, seed,
       learnable_heads, status, priority, attempts, cancel_requested,
       checkpoint_path, checkpoint_step, error, created_ms, started_ms,
       finished_ms
  FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

CREATE INDEX jobs_queue ON jobs (priority DESC, sweep_id, job_id)
    WHERE status = 'queued';
CREATE INDEX jobs_by_sweep_status ON jobs (sweep_id, status);
-- A source's dependents, found when it ends.
CREATE INDEX jobs_by_source ON jobs (source_job_id)
    WHERE source_job_id IS NOT NULL;

-- The views of migrations 2 and 3, with `stage` and `waiting`.

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
       round(100.0 * count(j.job_id) FILTER
                 (WHERE j.status IN ('succeeded', 'failed', 'cancelled'))
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
