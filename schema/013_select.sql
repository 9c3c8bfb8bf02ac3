-- Migration 13: the selection of a search's best trials (issue 19).  A
-- stage with `select:` has a select_rules row; its trials point at it;
-- once every trial of a cell has ended, the coordinator ranks the cell's
-- succeeded trials by their final eval_loss at the rule's depth (a training
-- depth) and stores the ranking in `selections`, in the transaction that
-- ended the last trial: the chosen trials (rank <= best) and the
-- runners-up, with the value that ranked them.

CREATE TABLE select_rules (
    select_id  INTEGER PRIMARY KEY,
    sweep_id   INTEGER NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
    stage      TEXT,                        -- NULL without stages
    metric     TEXT    NOT NULL CHECK (metric IN ('eval_loss')),
    eval_depth INTEGER NOT NULL,
    best       INTEGER NOT NULL CHECK (best >= 1)
);
CREATE INDEX select_rules_by_sweep ON select_rules (sweep_id);

ALTER TABLE trials ADD COLUMN select_id INTEGER REFERENCES select_rules (select_id);
CREATE INDEX trials_by_select ON trials (select_id, grp) WHERE select_id IS NOT NULL;

CREATE TABLE selections (
    select_id  INTEGER NOT NULL REFERENCES select_rules (select_id),
    grp        INTEGER NOT NULL,            -- the cell (trials.grp)
    rank       INTEGER NOT NULL,            -- 1: best
    job_id     INTEGER NOT NULL REFERENCES jobs (job_id),
    value      REAL    NOT NULL,            -- its final eval_loss
    chosen     INTEGER NOT NULL CHECK (chosen IN (0, 1)),
    PRIMARY KEY (select_id, grp, rank)
) WITHOUT ROWID;
