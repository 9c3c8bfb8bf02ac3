-- Migration 25: eval_summary's accuracy interval moves to the seed.
-- compare's accuracy interval is now the t-interval over seeds (the unit
-- replicated; docs/results.md), which needs Student's t quantile, which
-- SQL lacks, so the view no longer gives accuracy_ci_low/high (Wilson's
-- over the examples pooled across seeds, narrower than the seeds allow
-- whenever they disagree) and gives instead accuracy_se, the standard
-- error at the seeds as compare takes it: the seeds' variance, never
-- below the mean binomial variance of one seed's examples, over n.
-- compare's interval is accuracy_mean -+ t(0.975, n - 1) * accuracy_se,
-- widened to at least Wilson's over the pooled examples, cut to [0, 1].
DROP VIEW eval_summary;
CREATE VIEW eval_summary AS
WITH f AS (
  SELECT e.*, ln(e.loss) AS log_loss, ln(r.train_loss) AS log_train,
         json_extract(e.group_config, '$.eval_examples') AS m
    FROM final_evals e JOIN results r ON r.job_id = e.job_id),
d AS (
  SELECT f.*,
         f.log_loss - avg(f.log_loss) OVER g   AS loss_dev,
         f.accuracy - avg(f.accuracy) OVER g   AS accuracy_dev,
         f.log_train - avg(f.log_train) OVER g AS train_dev
    FROM f
  WINDOW g AS (PARTITION BY f.sweep_id, f.stage, f.group_config,
                            f.eval_depth)),
s AS (
  SELECT sweep_id, stage, group_config, task, rope, depth, eval_depth,
         count(*) AS n, max(m) AS eval_examples,
         exp(avg(log_loss)) AS loss_mean,
         CASE WHEN count(log_loss) > 1 THEN
           sqrt(sum(loss_dev * loss_dev) / (count(log_loss) - 1)) END
                                                AS loss_log_sd,
         avg(accuracy) AS accuracy_mean,
         CASE WHEN count(accuracy) > 1 THEN
           sum(accuracy_dev * accuracy_dev) / (count(accuracy) - 1) END
                                                AS accuracy_var,
         avg(accuracy * (1 - accuracy) / m)     AS binomial_var,
         exp(avg(log_train)) AS train_loss_mean,
         CASE WHEN count(log_train) > 1 THEN
           sqrt(sum(train_dev * train_dev) / (count(log_train) - 1)) END
                                                AS train_loss_log_sd
    FROM d
   GROUP BY sweep_id, stage, group_config, eval_depth)
SELECT sweep_id, stage, group_config, task, rope, depth, eval_depth, n,
       eval_examples, loss_mean, loss_log_sd, accuracy_mean,
       sqrt(accuracy_var) AS accuracy_sd,
       sqrt(max(accuracy_var, binomial_var) / n) AS accuracy_se,
       train_loss_mean, train_loss_log_sd
  FROM s;
