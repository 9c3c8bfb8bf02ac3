-- Migration 26: the rule each comparison of adaptive seeds is decided with
-- (docs/results.md, Seeds until decided), and the t rule's diagnostic.
-- `t` (Lai's t-mixture for the mean of Gaussian log ratios) is what every
-- comparison was decided with until now, so the rows made before this
-- migration say so; `sign` (a Beta-mixture sign test, for the median of
-- any continuous log ratios) is chosen per stage with seeds.rule.  skewness
-- is the adjusted sample skewness of the log ratios of the last look (NULL
-- below 3 pairs or without spread), stored with the state so that readers
-- can tell when the t rule's assumption looks violated.
ALTER TABLE seed_comparisons ADD COLUMN rule TEXT NOT NULL DEFAULT 't'
    CHECK (rule IN ('t', 'sign'));
ALTER TABLE seed_comparisons ADD COLUMN skewness REAL;

DROP VIEW adaptive_seeds;
CREATE VIEW adaptive_seeds AS
SELECT c.sweep_id, c.variant_cell, c.stage,
       json_remove(v.config, '$.seed') AS variant_config,
       json_remove(b.config, '$.seed') AS baseline_config,
       c.eval_depth, c.seeds_min, c.seeds_max, c.released, c.state,
       c.n_pairs, c.ci_low, c.ci_high, c.decided_seed, c.alpha,
       c.rule, c.skewness
  -- CROSS JOIN keeps the comparisons outermost (migration 17 says why).
  FROM seed_comparisons c
  CROSS JOIN jobs v ON v.sweep_id = c.sweep_id AND v.cell = c.variant_cell
                   AND v.seed = 1
  CROSS JOIN jobs b ON b.sweep_id = c.sweep_id AND b.cell = c.baseline_cell
                   AND b.seed = 1;
