-- Migration 2: read-only views for people at the sqlite3 prompt and for the
-- client's `results` / `status` commands.  docs/schema.md explains them.

-- One row per job.  train_loss is the newest training loss; eval_* is the
-- newest evaluation at the training depth; ood_* the newest evaluation at the
-- deepest depth listed in the job's eval_depths.
CREATE VIEW results AS
SELECT j.sweep_id, j.job_id, j.task, j.rope, j.depth, j.seed, j.status,
       (SELECT m.value FROM metrics m
         WHERE m.job_id = j.job_id AND m.key = 'loss'
         ORDER BY m.step DESC LIMIT 1)                       AS train_loss,
       e.step AS eval_step, e.loss AS eval_loss, e.accuracy AS eval_accuracy,
       o.depth AS ood_depth, o.loss AS ood_loss, o.accuracy AS ood_accuracy
  FROM jobs j
  LEFT JOIN evals e
    ON e.job_id = j.job_id AND e.depth = j.depth
   AND e.step = (SELECT max(step) FROM evals
                  WHERE job_id = j.job_id AND depth = j.depth)
  LEFT JOIN evals o
    ON o.job_id = j.job_id
   AND o.depth = (SELECT max(value) FROM json_each(j.config, '$.eval_depths'))
   AND o.step = (SELECT max(step) FROM evals
                  WHERE job_id = j.job_id AND depth = o.depth);

-- Every recorded frequency with its first recorded value (normally step 0)
-- and the change since.  A head is learnable when it is one of the last
-- `learnable_heads` heads of its layer (spectral: all, bifocal: the last S).
CREATE VIEW frequency_evolution AS
SELECT f.job_id, j.rope, f.layer, f.head, f.pair, f.step, f.omega,
       f0.step                                     AS initial_step,
       f0.omega                                    AS initial_omega,
       f.omega - f0.omega                          AS omega_change,
       f.omega / f0.omega                          AS omega_ratio,
       f.head >= json_extract(j.config, '$.n_heads') - j.learnable_heads
                                                   AS learnable
  FROM frequencies f
  JOIN jobs j ON j.job_id = f.job_id
  JOIN frequencies f0
    ON f0.job_id = f.job_id AND f0.layer = f.layer
   AND f0.head = f.head AND f0.pair = f.pair
   AND f0.step = (SELECT min(step) FROM frequencies
                   WHERE job_id = f.job_id AND layer = f.layer
                     AND head = f.head AND pair = f.pair);

-- Progress of every sweep; percent_done counts jobs that have ended
-- (succeeded, failed or cancelled).
CREATE VIEW sweep_progress AS
SELECT s.sweep_id, s.name, s.status,
       count(j.job_id)                                            AS total,
       count(j.job_id) FILTER (WHERE j.status = 'queued')         AS queued,
       count(j.job_id) FILTER (WHERE j.status = 'running')        AS running,
       count(j.job_id) FILTER (WHERE j.status = 'succeeded')      AS succeeded,
       count(j.job_id) FILTER (WHERE j.status = 'failed')         AS failed,
       count(j.job_id) FILTER (WHERE j.status = 'cancelled')      AS cancelled,
       round(100.0 * count(j.job_id) FILTER
                 (WHERE j.status IN ('succeeded', 'failed', 'cancelled'))
             / max(count(j.job_id), 1), 1)                        AS percent_done
  FROM sweeps s
  LEFT JOIN jobs j ON j.sweep_id = s.sweep_id
 GROUP BY s.sweep_id;
