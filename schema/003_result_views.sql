-- Migration 3: the views behind `bifocal results`, `compare` and `report`,
-- read the same way through the daemon (the `rows` request) and straight
-- from the file (`--db`).  docs/schema.md explains them.
--
-- A *group* is the set of jobs of a sweep whose configs differ only in their
-- seed: group_config is the job's config without "seed", so jobs group by
-- every field that varies in the sweep except the seed.

-- One row per job: the `results` columns plus what a reader needs to tell
-- jobs apart and to see why one failed.
CREATE VIEW job_results AS
SELECT r.*, j.error, j.attempts, j.created_ms, j.started_ms, j.finished_ms,
       j.config
  FROM results r JOIN jobs j ON j.job_id = r.job_id;

-- The newest evaluation of each succeeded job at each evaluated depth.
CREATE VIEW final_evals AS
SELECT j.sweep_id, json_remove(j.config, '$.seed') AS group_config,
       j.job_id, j.task, j.rope, j.depth, j.seed,
       e.depth AS eval_depth, e.step, e.loss, e.accuracy
  FROM jobs j
  JOIN evals e ON e.job_id = j.job_id
   AND e.step = (SELECT max(step) FROM evals
                  WHERE job_id = e.job_id AND depth = e.depth)
 WHERE j.status = 'succeeded';

-- Seed statistics of final_evals: per group and eval depth, the number of
-- seeds and the mean and sample standard deviation (NULL for one seed) of
-- loss and accuracy.
CREATE VIEW eval_summary AS
WITH d AS (
  SELECT f.*,
         f.loss - avg(f.loss) OVER g         AS loss_dev,
         f.accuracy - avg(f.accuracy) OVER g AS accuracy_dev
    FROM final_evals f
  WINDOW g AS (PARTITION BY f.sweep_id, f.group_config, f.eval_depth))
SELECT sweep_id, group_config, task, rope, depth, eval_depth,
       count(*)                                        AS n,
       avg(loss)                                       AS loss_mean,
       CASE WHEN count(*) > 1
            THEN sqrt(sum(loss_dev * loss_dev) / (count(*) - 1)) END
                                                       AS loss_sd,
       avg(accuracy)                                   AS accuracy_mean,
       CASE WHEN count(*) > 1
            THEN sqrt(sum(accuracy_dev * accuracy_dev) / (count(*) - 1)) END
                                                       AS accuracy_sd
  FROM d
 GROUP BY sweep_id, group_config, eval_depth;

-- Training loss of succeeded jobs, one row per logged step: the curves of
-- the report, read in (job_id, step) order straight off the metrics key.
CREATE VIEW train_loss AS
SELECT j.sweep_id, m.job_id, m.step, m.value AS loss
  FROM jobs j
  JOIN metrics m ON m.job_id = j.job_id AND m.key = 'loss'
 WHERE j.status = 'succeeded';

-- Recorded frequencies of the learnable heads (the last learnable_heads
-- of each layer) of succeeded jobs, in the table's key order (one
-- frequency's history together).
CREATE VIEW frequency_history AS
SELECT j.sweep_id, f.job_id, f.layer, f.head, f.pair, f.step, f.omega
  FROM jobs j
  JOIN frequencies f ON f.job_id = j.job_id
 WHERE j.status = 'succeeded'
   AND f.head >= json_extract(j.config, '$.n_heads') - j.learnable_heads;
