-- Migration 27: synchronous successive halving (issue 46).  A prune rule
-- with synchronous = 1 (`prune: {method: asha, synchronous: true}`)
-- decides a rung once every trial of the cell reached it or ended, over
-- the values alone (ties by trial number), so the same values choose the
-- same survivors whatever order they arrive in (store_prune.c).  Rules
-- stored before this migration are asynchronous, as they were.
ALTER TABLE prune_rules ADD COLUMN synchronous INTEGER NOT NULL DEFAULT 0
    CHECK (synchronous IN (0, 1));
