-- Migration 18, two parts of issue 19.
--
-- 1. Prune rules and selections rank trials by eval_loss (lower is better)
-- or eval_accuracy (the share of examples with every target right; higher
-- is better).  SQLite cannot change a CHECK constraint in place, so
-- prune_rules and select_rules are rebuilt as in migration 4
-- (https://sqlite.org/lang_altertable.html#otheralter); the tables that
-- refer to them (trials, selections) name them, and the new tables take
-- their names.  select_rules gains `space`: the fields of the stage's
-- search, whose values a selection chooses (rules stored before this
-- migration have '[]').

CREATE TABLE prune_rules_new (
    rule_id    INTEGER PRIMARY KEY,
    sweep_id   INTEGER NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
    stage      TEXT,                        -- NULL without stages
    method     TEXT    NOT NULL CHECK (method IN ('asha', 'median')),
    metric     TEXT    NOT NULL CHECK (metric IN ('eval_loss',
                                                  'eval_accuracy')),
    eval_depth INTEGER NOT NULL,
    rungs      TEXT    NOT NULL,
    param      INTEGER NOT NULL
);
INSERT INTO prune_rules_new SELECT rule_id, sweep_id, stage, method, metric,
                                   eval_depth, rungs, param FROM prune_rules;
DROP TABLE prune_rules;
ALTER TABLE prune_rules_new RENAME TO prune_rules;
CREATE INDEX prune_rules_by_sweep ON prune_rules (sweep_id);

CREATE TABLE select_rules_new (
    select_id  INTEGER PRIMARY KEY,
    sweep_id   INTEGER NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
    stage      TEXT,                        -- NULL without stages
    metric     TEXT    NOT NULL CHECK (metric IN ('eval_loss',
                                                  'eval_accuracy')),
    eval_depth INTEGER NOT NULL,
    best       INTEGER NOT NULL CHECK (best >= 1),
    space      TEXT    NOT NULL DEFAULT '[]'  -- the search's fields (JSON)
);
INSERT INTO select_rules_new (select_id, sweep_id, stage, metric, eval_depth,
                              best)
SELECT select_id, sweep_id, stage, metric, eval_depth, best FROM select_rules;
DROP TABLE select_rules;
ALTER TABLE select_rules_new RENAME TO select_rules;
CREATE INDEX select_rules_by_sweep ON select_rules (sweep_id);

-- 2. A later stage taking a selection's values (issue 19,
-- `from: "stage:NAME"` in docs/sweeps.md).  Each job of such a stage has a
-- `selected_values` row naming the selection and cell it takes its values
-- from; it is stored `waiting`.  In the transaction that stores the cell's
-- selection (`selections`), trial_job_id is set to the chosen trial, the
-- fields taken are copied from that trial's config into the job's
-- `config`, and the job is queued (an adaptive seed past `min` stays held);
-- when the cell has no trial to choose (none succeeded), the job fails,
-- saying so.  jobs.config_hash stays the hash of the config as submitted.

CREATE TABLE selected_values (
    job_id       INTEGER PRIMARY KEY REFERENCES jobs (job_id) ON DELETE CASCADE,
    select_id    INTEGER NOT NULL REFERENCES select_rules (select_id),
    grp          INTEGER NOT NULL,           -- the source cell (trials.grp)
    fields       TEXT    NOT NULL,           -- the fields taken: a JSON array
    held         INTEGER NOT NULL CHECK (held IN (0, 1)),  -- an adaptive
                                             -- seed past min: stays waiting
    trial_job_id INTEGER REFERENCES jobs (job_id)  -- the chosen trial, once
                                                   -- selected; NULL before
);
CREATE INDEX selected_values_by_cell ON selected_values (select_id, grp);

-- 3. What compare and the report show of each selection: one row per
-- ranked trial, with the values of the search's fields it had
-- (trial_values, a JSON object), the cell's config (trial_config, seed
-- left out) and the jobs of a later stage that took its values (taken_by,
-- job ids separated by commas; NULL: none).
CREATE VIEW trial_selections AS
SELECT r.sweep_id, x.select_id, r.stage, x.grp, x.rank, x.chosen, x.job_id,
       t.trial, r.metric, r.eval_depth, x.value,
       (SELECT json_group_object(k.value, j.config -> ('$.' || k.value))
          FROM json_each(r.space) k)                   AS trial_values,
       json_remove(j.config, '$.seed')                 AS trial_config,
       (SELECT group_concat(v.job_id) FROM selected_values v
         WHERE v.select_id = x.select_id AND v.grp = x.grp
           AND v.trial_job_id = x.job_id)               AS taken_by
  FROM selections x
  JOIN select_rules r ON r.select_id = x.select_id
  JOIN jobs j ON j.job_id = x.job_id
  JOIN trials t ON t.job_id = x.job_id;
