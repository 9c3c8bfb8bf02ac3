-- Migration 22: the level each comparison of adaptive seeds is decided at
-- (docs/results.md, Seeds until decided).  The comparisons of one stage
-- form a family, and a difference is called real only after correction
-- for multiple comparisons: each comparison's confidence sequence now
-- holds at alpha / m, m the comparisons of its stage (Bonferroni), so that
-- all m intervals hold at once with probability at least 1 - alpha, at
-- every look and under any dependence between them.  Until now each held
-- at the analysis block's alpha alone; the rows made before this migration
-- keep that level (their decisions were made at it), and say so here.
ALTER TABLE seed_comparisons ADD COLUMN alpha REAL
    CHECK (alpha IS NULL OR (alpha > 0 AND alpha < 1));
UPDATE seed_comparisons
   SET alpha = (SELECT a.alpha FROM sweep_analysis a
                 WHERE a.sweep_id = seed_comparisons.sweep_id);

DROP VIEW adaptive_seeds;
CREATE VIEW adaptive_seeds AS
SELECT c.sweep_id, c.variant_cell, c.stage,
       json_remove(v.config, '$.seed') AS variant_config,
       json_remove(b.config, '$.seed') AS baseline_config,
       c.eval_depth, c.seeds_min, c.seeds_max, c.released, c.state,
       c.n_pairs, c.ci_low, c.ci_high, c.decided_seed, c.alpha
  -- CROSS JOIN keeps the comparisons outermost (migration 17 says why).
  FROM seed_comparisons c
  CROSS JOIN jobs v ON v.sweep_id = c.sweep_id AND v.cell = c.variant_cell
                   AND v.seed = 1
  CROSS JOIN jobs b ON b.sweep_id = c.sweep_id AND b.cell = c.baseline_cell
                   AND b.seed = 1;
