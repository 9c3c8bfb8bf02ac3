-- Migration 11: one stored form for non-finite values.  An infinity stays a
-- REAL (SQLite keeps IEEE infinities: value > 1e308); NaN, which SQLite
-- cannot hold as a REAL, becomes NULL instead of the text 'nan' that
-- migration 1's NOT NULL columns forced.  Text in a REAL column fooled
-- every reader that is not told: avg() counted 'nan' as 0, max() returned
-- it, "value > 0" matched it (text sorts above every number).  NULL is
-- what SQL means by "no number": aggregates skip it, no comparison matches
-- it, and "value IS NULL" finds exactly the NaNs, since every other row of
-- these tables has a value.
--
-- SQLite cannot drop a NOT NULL constraint in place, so each table is
-- rebuilt (create, copy, drop, rename; https://sqlite.org/lang_altertable.html).
-- legacy_alter_table keeps the rename from checking the views that name the
-- old table while it is gone; they read the new one by the same name.
PRAGMA legacy_alter_table = ON;

CREATE TABLE metrics_new (
    job_id INTEGER NOT NULL REFERENCES jobs (job_id),
    key    TEXT    NOT NULL,
    step   INTEGER NOT NULL,
    value  REAL,                 -- NULL: NaN
    PRIMARY KEY (job_id, key, step)
) WITHOUT ROWID;
INSERT INTO metrics_new
SELECT job_id, key, step,
       CASE WHEN typeof(value) IN ('real', 'integer') THEN value END
  FROM metrics;
DROP TABLE metrics;
ALTER TABLE metrics_new RENAME TO metrics;

CREATE TABLE evals_new (
    job_id   INTEGER NOT NULL REFERENCES jobs (job_id),
    step     INTEGER NOT NULL,
    depth    INTEGER NOT NULL,
    loss     REAL,               -- NULL: NaN
    accuracy REAL,               -- NULL: NaN
    PRIMARY KEY (job_id, step, depth)
) WITHOUT ROWID;
INSERT INTO evals_new
SELECT job_id, step, depth,
       CASE WHEN typeof(loss) IN ('real', 'integer') THEN loss END,
       CASE WHEN typeof(accuracy) IN ('real', 'integer') THEN accuracy END
  FROM evals;
DROP TABLE evals;
ALTER TABLE evals_new RENAME TO evals;
CREATE INDEX evals_by_depth ON evals (job_id, depth, step);

CREATE TABLE frequencies_new (
    job_id INTEGER NOT NULL REFERENCES jobs (job_id),
    step   INTEGER NOT NULL,
    layer  INTEGER NOT NULL,
    head   INTEGER NOT NULL,
    pair   INTEGER NOT NULL,
    omega  REAL,                 -- NULL: NaN
    PRIMARY KEY (job_id, layer, head, pair, step)
) WITHOUT ROWID;
INSERT INTO frequencies_new
SELECT job_id, step, layer, head, pair,
       CASE WHEN typeof(omega) IN ('real', 'integer') THEN omega END
  FROM frequencies;
DROP TABLE frequencies;
ALTER TABLE frequencies_new RENAME TO frequencies;

PRAGMA legacy_alter_table = OFF;
