-- Migration 4 (hardening): the indexes the daemon's hot paths need.
--
-- A worker group holds at most one live lease, so every request_job first
-- looks up the worker's live attempt (and `workers` counts them).  Through
-- attempts_live, which is ordered by expiry, that lookup walked every
-- running attempt: with thousands running, leasing dropped from ~7,000 to
-- ~2,300 leases/s in bench_store.  This index finds it in one probe, and
-- stays as small as the set of running attempts.
CREATE INDEX attempts_live_by_worker ON attempts (worker)
    WHERE outcome = 'running';
