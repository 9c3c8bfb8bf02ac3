-- Migration 19: a comparison of adaptive seeds ends 'cancelled' when its
-- sweep is cancelled (docs/sweeps.md, Adaptive seeds).  Until now it stayed
-- 'running' for ever, and watch, the report and the dashboard said "still
-- running" of a sweep that would never run another seed.  A cancelled
-- comparison keeps what it had when the sweep was cancelled: the seed
-- pairs released to it (decided_seed), the pairs of its last look
-- (n_pairs) and that look's interval (ci_low, ci_high).
--
-- SQLite cannot change a CHECK constraint in place, so seed_comparisons
-- is rebuilt (https://sqlite.org/lang_altertable.html#otheralter) with
-- 'cancelled' among its states; the adaptive_seeds view (migration 17)
-- that reads it is dropped first and made again below, as it was.

DROP VIEW adaptive_seeds;

CREATE TABLE seed_comparisons_new (
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
    -- running, decided (lower, higher, equivalent), undecided at max, or
    -- cancelled with its sweep before it was decided
    state         TEXT    NOT NULL DEFAULT 'running'
                  CHECK (state IN ('running', 'lower', 'higher',
                                   'equivalent', 'undecided', 'cancelled')),
    -- the last look: seed pairs it used (both succeeded) and the
    -- confidence sequence's interval of the mean log loss ratio (NULL:
    -- still the whole line)
    n_pairs       INTEGER NOT NULL DEFAULT 0,
    ci_low        REAL,
    ci_high       REAL,
    decided_seed  INTEGER,                    -- seed pairs spent; NULL: running
    decided_ms    INTEGER,                    -- when it ended
    PRIMARY KEY (sweep_id, variant_cell),
    CHECK ((state = 'running') = (decided_seed IS NULL))
) WITHOUT ROWID;

INSERT INTO seed_comparisons_new
SELECT sweep_id, variant_cell, baseline_cell, stage, eval_depth, seeds_min,
       seeds_max, released, state, n_pairs, ci_low, ci_high, decided_seed,
       decided_ms
  FROM seed_comparisons;
DROP TABLE seed_comparisons;
ALTER TABLE seed_comparisons_new RENAME TO seed_comparisons;

CREATE VIEW adaptive_seeds AS
SELECT c.sweep_id, c.variant_cell, c.stage,
       json_remove(v.config, '$.seed') AS variant_config,
       json_remove(b.config, '$.seed') AS baseline_config,
       c.eval_depth, c.seeds_min, c.seeds_max, c.released, c.state,
       c.n_pairs, c.ci_low, c.ci_high, c.decided_seed
  -- CROSS JOIN keeps the comparisons outermost (migration 17 says why).
  FROM seed_comparisons c
  CROSS JOIN jobs v ON v.sweep_id = c.sweep_id AND v.cell = c.variant_cell
                   AND v.seed = 1
  CROSS JOIN jobs b ON b.sweep_id = c.sweep_id AND b.cell = c.baseline_cell
                   AND b.seed = 1;
