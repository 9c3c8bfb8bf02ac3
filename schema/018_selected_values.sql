-- Migration 18: a later stage taking a selection's values (issue 19,
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
