-- Migration 14: a sweep's `analysis:` block (docs/sweeps.md, Analysis;
-- common/analysis.h), stored as the submission parsed and checked it, so
-- that compare, report and whatever plans more seeds read the same
-- declaration without parsing the file again.  One row per sweep that has
-- the block; a sweep without one has no row and is read with the defaults
-- (no primary family, no baseline, margin 0.10, alpha 0.05).  The row goes
-- with its sweep (ON DELETE CASCADE: a half-stored sweep discarded).
CREATE TABLE sweep_analysis (
    sweep_id           INTEGER PRIMARY KEY
                       REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
    -- the primary family: its metric (NULL: none declared) ...
    primary_metric     TEXT CHECK (primary_metric IN ('loss', 'accuracy')),
    -- ... at one eval depth (NULL: every depth)
    primary_eval_depth INTEGER CHECK (primary_eval_depth >= 1),
    -- {field: value, ...} of the baseline group, values canonical as in
    -- jobs.config (NULL: none declared)
    baseline           TEXT CHECK (baseline IS NULL OR
                                   json_type(baseline) = 'object'),
    equivalence_margin REAL NOT NULL
                       CHECK (equivalence_margin > 0 AND
                              equivalence_margin < 1),
    alpha              REAL NOT NULL CHECK (alpha > 0 AND alpha <= 0.5),
    CHECK (primary_eval_depth IS NULL OR primary_metric IS NOT NULL)
);
