-- Migration 14: reserved for another branch of issues 18/19 (placeholder so
-- that branch seqs builds with its 016; the integrator replaces this file
-- with the real migration of that number before merging).
SELECT 1;
