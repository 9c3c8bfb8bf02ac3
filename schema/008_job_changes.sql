-- Migration 8: a change feed of job statuses, so that the live dashboard
-- keeps a sweep's aggregates (counts, groups, the comparison) up to date by
-- reading only the jobs whose status changed since it last looked, instead
-- of every job of the sweep (a million, in the largest sweep accepted).
--
-- jobs.status_seq: NULL until the job's status first changes; then, at
-- each change, one more than the sweep's largest status_seq.  The writer
-- is serialised, so within a sweep the numbers rise in commit order and
-- "status_seq > C" read in one snapshot is every job that changed since
-- the snapshot that saw C.  The index holds changed jobs only: storing a
-- sweep's jobs pays nothing for it, a status change one more seek and
-- write (the trigger's), beside the metrics ingest that dominates.
ALTER TABLE jobs ADD COLUMN status_seq INTEGER;

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
