-- Migration 5: what the live dashboard (`bifocal dashboard`) and `bifocal
-- watch` read while a sweep runs.  docs/schema.md and docs/dashboard.md
-- explain them.  Nothing here indexes metrics: an index on the largest
-- table would slow every ingest, and the metrics key (job_id, key, step)
-- already serves a job's curves and its newest value.

-- The newest evaluation of a job at one depth (results, final_evals) is one
-- seek instead of a scan of the job's evaluations.
CREATE INDEX evals_by_depth ON evals (job_id, depth, step);

-- "Jobs of this sweep that ended since T": the dashboard's live cursor.
CREATE INDEX jobs_by_sweep_finished ON jobs (sweep_id, finished_ms)
    WHERE finished_ms IS NOT NULL;

-- One row per running job: its newest logged step, training loss and
-- throughput (train records, docs/training.md), and the live attempt with
-- the worker holding it.
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
