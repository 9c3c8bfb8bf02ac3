"""big_sweeps: sweeps far larger than any test could train, written with SQL
into a database that results_fixture made (its sweep 1 is the template).

    wide(db, n_jobs, lean)  one sweep of n_jobs jobs: sweep 1's three ropes
                            times seeds 1..n_jobs/3, each job a copy of
                            sweep 1's job of the same rope (its evaluations,
                            logged metrics and frequencies; lean: its
                            evaluations and final loss only); every 9th job
                            failed.  Job rows are ~1 KB as JSON, so 30,000
                            jobs are twice what one 16 MiB frame holds.
    search(db, n_jobs, n_succeeded)
                            one sweep shaped like a big search, mostly
                            pending: trials of 3 seeds each, every trial
                            its own lr (so no two of its jobs' configs are
                            the same but for the seed); the first
                            n_succeeded jobs succeeded (evaluations and
                            final loss of sweep 1's rope job), the rest
                            queued.
    long(db, n_jobs, steps) one sweep of n_jobs succeeded jobs (rope and
                            spectral, seeds 1..) with a training loss logged
                            at every step 1..steps.

Each returns the new sweep's id.  Used by test_results_paged.py and
bench/bench_results.sh (python3 tests/results/big_sweeps.py DB wide N [lean],
DB search N N_SUCCEEDED)."""
import sqlite3
import sys

TEMPLATE_SWEEP = 1


def _new_sweep(c, name, n_jobs):
    c.execute("""INSERT INTO sweeps (name, filename, source, submitted_ms, status,
                                      max_attempts, priority, n_jobs, warnings)
                 SELECT ?, ? || '.yaml', source, submitted_ms, 'done',
                        max_attempts, priority, ?, warnings
                   FROM sweeps WHERE sweep_id = ?""",
              (name, name, n_jobs, TEMPLATE_SWEEP))
    return c.execute("SELECT max(sweep_id) FROM sweeps").fetchone()[0]


def _copy_jobs(c, sweep, n_jobs, ropes, failing_every):
    """Jobs n = 0..n_jobs-1 of sweep: rope ropes[n % len], seed n / len + 1,
    copied from the template job of that rope with seed 1; returns the first
    new job id (they are consecutive)."""
    first = c.execute("SELECT coalesce(max(job_id), 0) + 1 FROM jobs").fetchone()[0]
    c.execute("CREATE TEMP TABLE IF NOT EXISTS template (k INTEGER PRIMARY KEY, job_id INTEGER)")
    c.execute("DELETE FROM template")
    for k, rope in enumerate(ropes):
        c.execute("""INSERT INTO template
                     SELECT ?, job_id FROM jobs
                      WHERE sweep_id = ? AND rope = ? AND seed = 1""", (k, TEMPLATE_SWEEP, rope))
    c.execute("""
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
        INSERT INTO jobs (job_id, sweep_id, idx, config, config_hash, task, rope, depth,
                          seed, learnable_heads, status, priority, attempts, error,
                          created_ms, started_ms, finished_ms)
        SELECT ?2 + i, ?3, i, json_set(j.config, '$.seed', i / ?4 + 1),
               printf('%016x', i), j.task, j.rope, j.depth, i / ?4 + 1, j.learnable_heads,
               CASE WHEN ?5 > 0 AND i % ?5 = ?5 - 1 THEN 'failed' ELSE 'succeeded' END,
               j.priority, 1,
               CASE WHEN ?5 > 0 AND i % ?5 = ?5 - 1 THEN 'loss is NaN at step 120' END,
               j.created_ms, j.started_ms, j.finished_ms
          FROM n JOIN template t ON t.k = i % ?4 JOIN jobs j ON j.job_id = t.job_id""",
              (n_jobs, first, sweep, len(ropes), failing_every))
    return first


def wide(db, n_jobs, lean=False):
    c = sqlite3.connect(db)
    ropes = ["rope", "spectral", "bifocal"]
    sweep = _new_sweep(c, "wide-%d" % n_jobs, n_jobs)
    first = _copy_jobs(c, sweep, n_jobs, ropes, 9)
    _copy_results(c, sweep, first, ropes, lean)
    c.commit()
    c.close()
    return sweep


def _copy_results(c, sweep, first, ropes, lean, only_jobs=""):
    """Each job of sweep gets its template's rows, shifted to its id (lean:
    its evaluations and final loss only); only_jobs: a condition on j."""
    tables = [("evals", "step, depth, loss, accuracy", ""),
              ("metrics", "key, step, value",
               " AND x.key = 'loss' AND x.step = 200" if lean else ""),
              ("frequencies", "step, layer, head, pair, omega", "")]
    for table, cols, only in tables[:2] if lean else tables:
        c.execute("""INSERT INTO %s (job_id, %s)
                     SELECT ?1 + j.idx, %s FROM jobs j
                       JOIN template t ON t.k = j.idx %% ?3
                       JOIN %s x ON x.job_id = t.job_id
                      WHERE j.sweep_id = ?2%s%s""" % (table, cols, ", ".join("x." + f for f in cols.split(", ")), table, only, only_jobs),
                  (first, sweep, len(ropes)))


def search(db, n_jobs, n_succeeded):
    c = sqlite3.connect(db)
    sweep = _new_sweep(c, "search-%d" % n_jobs, n_jobs)
    first = _copy_jobs(c, sweep, n_jobs, ["rope"], 0)
    c.execute("""UPDATE jobs SET seed = idx % 3 + 1,
                        config = json_set(config, '$.seed', idx % 3 + 1,
                                          '$.lr', 0.001 + (idx / 3) * 1e-9),
                        status = CASE WHEN idx < ?2 THEN 'succeeded' ELSE 'queued' END,
                        error = NULL, started_ms = NULL, finished_ms = NULL,
                        attempts = CASE WHEN idx < ?2 THEN 1 ELSE 0 END
                  WHERE sweep_id = ?1""", (sweep, n_succeeded))
    c.execute("""UPDATE jobs SET started_ms = created_ms, finished_ms = created_ms + 60000
                  WHERE sweep_id = ?1 AND idx < ?2""", (sweep, n_succeeded))
    _copy_results(c, sweep, first, ["rope"], True, " AND j.idx < %d" % n_succeeded)
    c.commit()
    c.close()
    return sweep


def long(db, n_jobs, steps):
    c = sqlite3.connect(db)
    sweep = _new_sweep(c, "long-%d" % steps, n_jobs)
    first = _copy_jobs(c, sweep, n_jobs, ["rope", "spectral"], 0)
    for k in range(n_jobs):
        c.execute("""WITH RECURSIVE s(step) AS (SELECT 1 UNION ALL
                                                SELECT step + 1 FROM s WHERE step < ?2)
                     INSERT INTO metrics (job_id, key, step, value)
                     SELECT ?1, 'loss', step, 3.0 / (1.0 + step / 4000.0) + 0.001 * ((step * 7 + ?1) % 11)
                       FROM s""", (first + k, steps))
        c.execute("""INSERT INTO evals (job_id, step, depth, loss, accuracy)
                     SELECT ?1, ?2, depth, loss + 0.01 * ?3, accuracy
                       FROM evals e JOIN template t ON t.k = ?4 AND e.job_id = t.job_id
                      WHERE e.step = (SELECT max(step) FROM evals WHERE job_id = t.job_id)""",
                  (first + k, steps, k, k % 2))
    c.commit()
    c.close()
    return sweep


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] not in ("wide", "search", "long"):
        sys.exit("usage: big_sweeps.py DB wide N_JOBS [lean] | DB search N_JOBS N_SUCCEEDED"
                 " | DB long N_JOBS STEPS")
    if sys.argv[2] == "wide":
        print(wide(sys.argv[1], int(sys.argv[3]), sys.argv[4:] == ["lean"]))
    elif sys.argv[2] == "search":
        print(search(sys.argv[1], int(sys.argv[3]), int(sys.argv[4])))
    else:
        print(long(sys.argv[1], *[int(a) for a in sys.argv[3:]]))
