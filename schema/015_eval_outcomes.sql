-- Migration 15: per-example outcomes of every evaluation, so that accuracy
-- can be compared example by example (exact McNemar on the discordant
-- pairs, the within-seed variance of a paired difference) rather than
-- only from counts.  One row per eval record that came with its outcomes
-- (an `outcomes` record, common/records.h): `bits` holds bit i % 8 of byte
-- i / 8 = 1 when eval example i was exactly right, n examples in all.
-- Seeds share their eval examples across variants, so example i of two
-- jobs of one seed is the same example.  Jobs of more than 65,536 eval
-- examples, and those that ran before this migration, have no rows.
CREATE TABLE eval_outcomes (
    job_id INTEGER NOT NULL REFERENCES jobs (job_id),
    step   INTEGER NOT NULL,
    depth  INTEGER NOT NULL,
    bits   BLOB    NOT NULL CHECK (length(bits) = (n + 7) / 8),
    n      INTEGER NOT NULL CHECK (n >= 1),
    PRIMARY KEY (job_id, step, depth)
) WITHOUT ROWID;

-- The outcomes of each succeeded job's final evaluation at every depth
-- (the evals row final_evals shows), bits as hex text so that every
-- reader (the `rows` request's JSON too) takes them alike: what compare
-- pairs example by example.
CREATE VIEW final_outcomes AS
SELECT j.sweep_id, o.job_id, o.depth AS eval_depth, o.step, o.n,
       lower(hex(o.bits)) AS bits
  FROM jobs j
  JOIN eval_outcomes o ON o.job_id = j.job_id
   AND o.step = (SELECT max(step) FROM evals
                  WHERE job_id = o.job_id AND depth = o.depth)
 WHERE j.status = 'succeeded';

-- eval_summary gives the numbers `bifocal compare` prints for a group and
-- eval depth, where SQL can compute them (docs/results.md): loss as a
-- geometric mean with the sample sd of its logs (a ratio quantity, so
-- never an arithmetic mean), accuracy's mean and between-seed sd with the
-- pooled Wilson 95% interval over every seed's correct examples
-- (round(accuracy * eval_examples); z = 1.959963984540054), and the final
-- training loss as a geometric mean.  The loss interval needs Student's t
-- quantile, which SQL lacks: compare prints it.  Before this migration
-- the view gave the arithmetic loss_mean and loss_sd.
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
           sqrt(sum(accuracy_dev * accuracy_dev) / (count(accuracy) - 1)) END
                                                AS accuracy_sd,
         -- the pooled proportion and its z^2 / N
         1.0 * sum(round(accuracy * m)) / (count(*) * max(m)) AS p,
         3.8414588206941254 / (count(*) * max(m))              AS z2n,
         count(*) * max(m) AS big_n,
         exp(avg(log_train)) AS train_loss_mean,
         CASE WHEN count(log_train) > 1 THEN
           sqrt(sum(train_dev * train_dev) / (count(log_train) - 1)) END
                                                AS train_loss_log_sd
    FROM d
   GROUP BY sweep_id, stage, group_config, eval_depth)
SELECT sweep_id, stage, group_config, task, rope, depth, eval_depth, n,
       eval_examples, loss_mean, loss_log_sd, accuracy_mean, accuracy_sd,
       max(0.0, (p + z2n / 2) / (1 + z2n) - 1.959963984540054 / (1 + z2n)
                * sqrt(p * (1 - p) / big_n + z2n / (4 * big_n)))
                                                AS accuracy_ci_low,
       min(1.0, (p + z2n / 2) / (1 + z2n) + 1.959963984540054 / (1 + z2n)
                * sqrt(p * (1 - p) / big_n + z2n / (4 * big_n)))
                                                AS accuracy_ci_high,
       train_loss_mean, train_loss_log_sd
  FROM s;
