-- Migration 13: per-example outcomes of every evaluation, so that accuracy
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
