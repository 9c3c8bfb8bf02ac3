-- Migration 16: adaptive seeds (docs/sweeps.md, Adaptive seeds; the rule in
-- docs/results.md).  A stage with `seeds: {min, max, until: decided}` has
-- every seed 1..max stored at submission, those past `min` 'waiting'
-- without a source job: held until a decision needs them.  Each cell of the
-- stage that is not the analysis block's baseline is compared with the
-- baseline cell of the same other fields: one row here, made with the
-- sweep's last job.  bifocald decides in the transaction that ends a job
-- of the pair (server/store/store_seqs.c), so a decision is stored before
-- it releases or drops a seed, and a restarted daemon goes on from it.
CREATE TABLE seed_comparisons (
    sweep_id      INTEGER NOT NULL
                  REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
    variant_cell  INTEGER NOT NULL,           -- jobs.cell of the variant
    baseline_cell INTEGER NOT NULL,           -- jobs.cell of its baseline
    stage         TEXT,                       -- NULL without stages
    eval_depth    INTEGER NOT NULL CHECK (eval_depth >= 1),
    seeds_min     INTEGER NOT NULL CHECK (seeds_min >= 1),
    seeds_max     INTEGER NOT NULL CHECK (seeds_max >= seeds_min),
    -- seeds 1..released of both cells are queued (or ran); the rest wait
    released      INTEGER NOT NULL
                  CHECK (released BETWEEN seeds_min AND seeds_max),
    state         TEXT    NOT NULL DEFAULT 'running'
                  CHECK (state IN ('running', 'lower', 'higher',
                                   'equivalent', 'undecided')),
    -- the last look: seed pairs it used (both succeeded) and the
    -- confidence sequence's interval of the mean log loss ratio (NULL:
    -- still the whole line)
    n_pairs       INTEGER NOT NULL DEFAULT 0,
    ci_low        REAL,
    ci_high       REAL,
    decided_seed  INTEGER,                    -- seed pairs spent; NULL: running
    decided_ms    INTEGER,
    PRIMARY KEY (sweep_id, variant_cell),
    CHECK ((state = 'running') = (decided_seed IS NULL))
) WITHOUT ROWID;
