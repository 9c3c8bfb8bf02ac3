-- Migration 28: every trial of a search that selects, with what came of
-- it, so that a search is shown as a search (the report's Search section,
-- docs/results.md): its cell (select_id, grp: those of selections), its
-- status, the last rung the prune rule decided at with the metric's value
-- there (NULL without one), and its values of the searched fields.
-- trial_selections ranks only the trials that finished; a pruned trial is
-- here with the rung it reached.
CREATE VIEW search_trials AS
SELECT j.sweep_id, t.select_id, t.grp, t.trial, j.job_id, j.status,
       d.rung, d.value AS rung_value,
       (SELECT json_group_object(k.value, j.config -> ('$.' || k.value))
          FROM select_rules r, json_each(r.space) k
         WHERE r.select_id = t.select_id)                 AS trial_values
  FROM trials t
  JOIN jobs j ON j.job_id = t.job_id
  LEFT JOIN prune_decisions d ON d.job_id = t.job_id
   AND d.rung = (SELECT max(e.rung) FROM prune_decisions e
                  WHERE e.job_id = t.job_id)
 WHERE t.select_id IS NOT NULL;
