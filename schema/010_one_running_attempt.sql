-- Migration 10: a job has at most one running attempt, enforced by the
-- database rather than only by the store's code paths (lease a queued job,
-- end the live attempt before re-queueing).  A unique partial index over
-- the running attempts: a second 'running' row for the same job is refused
-- with SQLITE_CONSTRAINT_UNIQUE, whatever statement tries to write it.  It
-- holds only the running attempts, so it stays as small as
-- attempts_live_by_worker.
--
-- Depends on nothing after 008 (only on attempts, from 001).  A database
-- that already holds two running attempts of one job (none should: the
-- store never made one) would make the index fail and the daemon refuse to
-- start; its older ones are ended first as 'expired', as the expiry pass
-- would have, so the newest lease of the job stays the live one.
UPDATE attempts
   SET outcome = 'expired',
       ended_ms = lease_expires_ms,
       error = 'ended by migration 10: a newer attempt of the job was running'
 WHERE outcome = 'running'
   AND attempt_id NOT IN (SELECT max(attempt_id) FROM attempts
                           WHERE outcome = 'running' GROUP BY job_id);

CREATE UNIQUE INDEX attempts_one_running ON attempts (job_id)
    WHERE outcome = 'running';
