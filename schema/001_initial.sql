-- Migration 1: the tables of the coordinator.
-- Times are milliseconds since the Unix epoch (INTEGER), as the daemon passes
-- them.  Every status column has a CHECK so a bug cannot invent a state.

CREATE TABLE sweeps (
    sweep_id       INTEGER PRIMARY KEY,
    name           TEXT    NOT NULL,
    filename       TEXT    NOT NULL,
    source         TEXT    NOT NULL,          -- the submitted file, verbatim
    submitted_ms   INTEGER NOT NULL,
    status         TEXT    NOT NULL DEFAULT 'active'
                   CHECK (status IN ('active', 'done', 'cancelled')),
    max_attempts   INTEGER NOT NULL CHECK (max_attempts >= 1),
    priority       INTEGER NOT NULL DEFAULT 0,
    n_jobs         INTEGER NOT NULL DEFAULT 0,
    -- Round-robin across sweeps: the queue leases from the active sweep whose
    -- last lease is oldest (a monotonically increasing lease counter, not a
    -- clock, so two leases in the same millisecond still alternate).
    last_lease_seq INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE jobs (
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
                     CHECK (status IN ('queued', 'running', 'succeeded',
                                       'failed', 'cancelled')),
    priority         INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,  -- used since submit / last retry
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    checkpoint_path  TEXT,                    -- newest checkpoint of any attempt
    checkpoint_step  INTEGER,
    error            TEXT,                    -- why the last attempt failed
    created_ms       INTEGER NOT NULL,
    started_ms       INTEGER,                 -- first lease
    finished_ms      INTEGER,
    UNIQUE (sweep_id, config_hash)
);

-- The lease query: highest priority, then the chosen sweep, then oldest job,
-- over queued jobs only.
CREATE INDEX jobs_queue ON jobs (priority DESC, sweep_id, job_id)
    WHERE status = 'queued';
CREATE INDEX jobs_by_sweep_status ON jobs (sweep_id, status);
CREATE INDEX sweeps_active ON sweeps (last_lease_seq, sweep_id)
    WHERE status = 'active';

CREATE TABLE attempts (
    attempt_id       INTEGER PRIMARY KEY,
    job_id           INTEGER NOT NULL REFERENCES jobs (job_id),
    attempt_no       INTEGER NOT NULL,        -- 1, 2, ... over the job's life
    worker           TEXT    NOT NULL,
    started_ms       INTEGER NOT NULL,
    lease_expires_ms INTEGER NOT NULL,
    ended_ms         INTEGER,
    outcome          TEXT    NOT NULL DEFAULT 'running'
                     CHECK (outcome IN ('running', 'succeeded', 'failed',
                                        'expired', 'cancelled')),
    error            TEXT,
    UNIQUE (job_id, attempt_no)
);
CREATE INDEX attempts_live ON attempts (lease_expires_ms)
    WHERE outcome = 'running';

CREATE TABLE metrics (
    job_id INTEGER NOT NULL REFERENCES jobs (job_id),
    key    TEXT    NOT NULL,
    step   INTEGER NOT NULL,
    value  REAL    NOT NULL,
    PRIMARY KEY (job_id, key, step)
) WITHOUT ROWID;

CREATE TABLE evals (
    job_id   INTEGER NOT NULL REFERENCES jobs (job_id),
    step     INTEGER NOT NULL,
    depth    INTEGER NOT NULL,
    loss     REAL    NOT NULL,
    accuracy REAL    NOT NULL,
    PRIMARY KEY (job_id, step, depth)
) WITHOUT ROWID;

-- Key order (job, layer, head, pair, step) keeps one frequency's history
-- together, which is how it is read (frequency_evolution).
CREATE TABLE frequencies (
    job_id INTEGER NOT NULL REFERENCES jobs (job_id),
    step   INTEGER NOT NULL,
    layer  INTEGER NOT NULL,
    head   INTEGER NOT NULL,
    pair   INTEGER NOT NULL,
    omega  REAL    NOT NULL,
    PRIMARY KEY (job_id, layer, head, pair, step)
) WITHOUT ROWID;

CREATE TABLE workers (
    name          TEXT    PRIMARY KEY,
    host          TEXT    NOT NULL,
    ranks         INTEGER NOT NULL,
    connected     INTEGER NOT NULL CHECK (connected IN (0, 1)),
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL
);
