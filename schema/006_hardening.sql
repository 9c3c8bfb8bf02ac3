-- Migration 6 (hardening): the indexes the daemon's hot paths need.
--
-- A worker group holds at most one live lease, so every request_job first
-- looks up the worker's live attempt (and `workers` counts them).  Through
-- attempts_live, which is ordered by expiry, that lookup walked every
-- running attempt: with thousands running, leasing dropped from ~7,000 to
-- ~2,300 leases/s in bench_store.  This index finds it in one probe, and
-- stays as small as the set of running attempts.
CREATE INDEX attempts_live_by_worker ON attempts (worker)
    WHERE outcome = 'running';

-- The lease query picks the sweep first: among active sweeps with a queued
-- job, the highest priority, then the one leased from least recently.
-- Walking this index in that order, it stops at the first such sweep
-- instead of sorting every active sweep on every lease.  (It skips sweeps
-- whose jobs are still being stored, n_jobs = 0, whatever their priority.)
CREATE INDEX sweeps_lease_order ON sweeps (priority DESC, last_lease_seq, sweep_id)
    WHERE status = 'active';
