-- Migration 24: a trainer's own parameters (`params` in a job config,
-- docs/job-config.md) as rows: one per (job, parameter), so SQL filters
-- and groups by them as by a column.  jobs.config holds them too
-- (json_extract(config, '$.params.width')); this view saves the json_each.
-- `value` is the JSON value as SQLite reads it: an INTEGER, REAL or TEXT,
-- a boolean 1 or 0 (`type` says 'true' or 'false').
CREATE VIEW job_params AS
SELECT j.job_id, j.sweep_id, j.stage, p.key AS name, p.value AS value,
       p.type AS type
  FROM jobs j, json_each(j.config, '$.params') p;
