-- Migration 9: a job's cell, so that a reader groups a sweep's jobs
-- without parsing their configs (the dashboard's first look at a
-- million-job sweep parsed a million configs: 1.9 s).
--
-- jobs.cell: the jobs of one sweep and stage whose configs differ only in
-- seed share a cell; cells are numbered 0, 1, ... per sweep in the order
-- of their first job.  bifocald sets it at submission (the sweep's
-- expansion, server/sweep/sweep_expand.c); here the jobs already stored
-- get theirs by the same rule.
--
-- The sweep's status index now holds job_id, cell and seed too: a reader
-- gets (status, job id, cell, seed) of every job of a sweep from the index
-- alone (30 bytes a job, not the row's 650), and walks the jobs of one
-- status in job id order without reading their rows (the result views of
-- succeeded jobs page that way: common/result_views.c).
ALTER TABLE jobs ADD COLUMN cell INTEGER;

UPDATE jobs SET cell = numbered.cell
  FROM (SELECT job_id,
               dense_rank() OVER (PARTITION BY sweep_id ORDER BY first) - 1
                 AS cell
          FROM (SELECT job_id, sweep_id,
                       min(job_id) OVER (PARTITION BY sweep_id,
                                         coalesce(stage, ''),
                                         json_remove(config, '$.seed'))
                         AS first
                  FROM jobs)) AS numbered
 WHERE jobs.job_id = numbered.job_id;

DROP INDEX jobs_by_sweep_status;
CREATE INDEX jobs_by_sweep_status ON jobs (sweep_id, status, job_id, cell,
                                           seed);
