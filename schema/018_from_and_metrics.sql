-- Migration 18, two parts of issue 19.
--
-- 1. Prune rules and selections rank trials by eval_loss (lower is better)
-- or eval_accuracy (the share of examples with every target right; higher
-- is better).  SQLite cannot change a CHECK constraint in place, so
-- prune_rules and select_rules are rebuilt as in migration 4
-- (https://sqlite.org/lang_altertable.html#otheralter); the tables that
-- refer to them (trials, selections) name them, and the new tables take
-- their names.

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
    best       INTEGER NOT NULL CHECK (best >= 1)
);
INSERT INTO select_rules_new SELECT select_id, sweep_id, stage, metric,
                                    eval_depth, best FROM select_rules;
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
