-- Migration 20: why a waiting job waits, when no source job says so
-- (issue 19; docs/schema.md, jobs).  A job is `waiting` for its source job
-- (`source_job_id`), for the jobs its failure failed to wait again (a
-- retried job), or held: an adaptive seed past what its comparisons
-- released ('seed', migration 16), or a job of a `from:` stage whose
-- cell's selection is not stored yet ('values', migration 18).  Until now
-- a held job was told from a retried one by `source_job_id IS NULL` plus
-- one exception per kind in each statement that queues a waiting job, and
-- a restart with a revival pending queued the held seeds (the revival read
-- every waiting job without a source as a retried one).  `hold` is that
-- reason, one column every such statement reads: NULL for a job that is
-- not held.  It is set at submission and cleared when the job is released
-- (its seed pair, or its values with no seed held); it means something
-- only while the job is `waiting`, and `bifocal retry` clears it (a retry
-- is asked for: the job runs).
ALTER TABLE jobs ADD COLUMN hold TEXT CHECK (hold IN ('seed', 'values'));

-- The jobs held in a database stored before this migration.
UPDATE jobs SET hold = 'values' WHERE status = 'waiting' AND job_id IN
    (SELECT job_id FROM selected_values WHERE trial_job_id IS NULL);
UPDATE jobs SET hold = 'seed' WHERE status = 'waiting' AND hold IS NULL
   AND seed > (SELECT max(c.released) FROM seed_comparisons c
                WHERE c.sweep_id = jobs.sweep_id
                  AND jobs.cell IN (c.variant_cell, c.baseline_cell));
