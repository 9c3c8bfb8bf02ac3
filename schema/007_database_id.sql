-- Migration 7: the database's identity.  Worker groups write checkpoints
-- to DIR/db-<database_id>/job-<id>/, so two databases whose groups share
-- one checkpoint directory (a cluster's shared file system) never write
-- the same path, and every checkpoint names the database and job it
-- belongs to (docs/checkpoints.md).  16 random hex digits, made once when
-- this migration runs: at creation for a new database, at the upgrade for
-- an older one.  A copy of the database file keeps the id of its original.
CREATE TABLE database_identity (
    only_row    INTEGER PRIMARY KEY CHECK (only_row = 1),
    database_id TEXT    NOT NULL
                CHECK (length(database_id) = 16
                       AND database_id NOT GLOB '*[^0-9a-f]*')
);
INSERT INTO database_identity (only_row, database_id)
VALUES (1, lower(hex(randomblob(8))));
