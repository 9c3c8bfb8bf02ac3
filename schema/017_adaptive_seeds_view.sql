-- Migration 17: the adaptive_seeds view, what `bifocal watch`, the report
-- and the dashboard show of adaptive seeds (docs/sweeps.md): one row per
-- comparison of seed_comparisons (migration 16) with the configs of its
-- two cells (seed left out), so a reader names them without another query.
CREATE VIEW adaptive_seeds AS
SELECT c.sweep_id, c.variant_cell, c.stage,
       json_remove(v.config, '$.seed') AS variant_config,
       json_remove(b.config, '$.seed') AS baseline_config,
       c.eval_depth, c.seeds_min, c.seeds_max, c.released, c.state,
       c.n_pairs, c.ci_low, c.ci_high, c.decided_seed
  -- CROSS JOIN keeps the comparisons outermost: left to itself, the
  -- planner walked the sweep's jobs for v and again for b inside it, which
  -- on a 1,000,000-job sweep without a single comparison never ended.
  FROM seed_comparisons c
  CROSS JOIN jobs v ON v.sweep_id = c.sweep_id AND v.cell = c.variant_cell
                   AND v.seed = 1
  CROSS JOIN jobs b ON b.sweep_id = c.sweep_id AND b.cell = c.baseline_cell
                   AND b.seed = 1;
