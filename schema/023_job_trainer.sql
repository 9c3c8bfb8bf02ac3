-- Migration 23: the program that trains a job (docs/trainers.md).  A job's
-- config names its trainer (`trainer`, default "builtin": the engine of
-- bifocal-worker); a worker's request_job names the trainer it runs, and
-- the queue leases a job only to a worker of its trainer, so a builtin
-- group never gets an --exec job and an --exec worker never gets a builtin
-- one.  The lease query walks jobs_queue by trainer first, so a worker
-- skips the other trainers' jobs with one seek per sweep.  Every job stored
-- before this migration is builtin.
ALTER TABLE jobs ADD COLUMN trainer TEXT NOT NULL DEFAULT 'builtin';
DROP INDEX jobs_queue;
CREATE INDEX jobs_queue ON jobs (trainer, priority DESC, sweep_id, job_id)
    WHERE status = 'queued';
-- A no_job's `pending` asks whether a job of the worker's trainer waits in a
-- sweep with a job running: one seek here per active sweep.
CREATE INDEX jobs_waiting_by_trainer ON jobs (sweep_id, trainer)
    WHERE status = 'waiting';
