#!/usr/bin/env bash
# Quickstart: installs what is missing, builds, and runs the quickstart sweep
# (configs/quickstart.yaml: rope, spectral and bifocal on Dyck-2 at two
# training depths) on the embedded default: one coordinator and one local
# worker group of 2 MPI ranks, started and stopped by `bifocal run`.
#
#   scripts/quickstart.sh [SWEEP_FILE] [bifocal run options...]
#
# The database stays in runs/quickstart.db for sqlite3 queries (see
# docs/schema.md); the coordinator's and workers' log is beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}"

build=${BUILD_DIR:-build}
[ -d "$build" ] || meson setup "$build"
meson compile -C "$build" bifocal bifocald bifocal-worker

sweep=${1:-configs/quickstart.yaml}
shift || true
mkdir -p runs
db=runs/quickstart.db
# A fresh database each time, so the table shows this run only.
rm -rf "$db" "$db"-wal "$db"-shm "$db".checkpoints "$db".log
# bifocal run exits non-zero when a job failed (it lists them); the
# comparison and the report still show what succeeded.
status=0
"$build"/cli/bifocal run "$sweep" --db "$db" "$@" || status=$?

echo
echo "Each variant against plain RoPE (bifocal compare; --verbose for every number):"
"$build"/cli/bifocal compare 1 --db "$db" || status=$?
"$build"/cli/bifocal report 1 --db "$db" -o runs/quickstart-report.html > /dev/null \
    || status=$?

# The structure gap in one sentence: each group's geometric-mean eval loss
# at its shallowest and deepest eval depth (view final_evals).
echo
sqlite3 "$db" "
  WITH g AS (SELECT group_config, rope, eval_depth AS d, min(job_id) AS job,
                    exp(avg(ln(loss))) AS loss
               FROM final_evals WHERE sweep_id = 1
              GROUP BY group_config, eval_depth),
       ends AS (SELECT group_config, rope, min(d) AS lo, max(d) AS hi,
                       min(job) AS job
                  FROM g GROUP BY group_config),
       gap AS (SELECT e.job, e.lo, e.hi,
                      e.rope || ' ' || printf('%.4g', a.loss) || ' -> '
                      || printf('%.4g', b.loss) || ' (x'
                      || printf('%.4g', b.loss / a.loss) || ')' AS words
                 FROM ends e
                 JOIN g a ON a.group_config = e.group_config AND a.d = e.lo
                 JOIN g b ON b.group_config = e.group_config AND b.d = e.hi
                ORDER BY e.job)
  SELECT 'Structure gap, eval loss from depth ' || min(lo) || ' to '
         || max(hi) || ' (geometric mean over seeds): '
         || group_concat(words, ', ') || '.' FROM gap" | fold -s -w 100

cat <<EOT

The report (figures, tables, the sweep file) is runs/quickstart-report.html:
open it in a browser; it needs no network.  With two seeds a group no loss
ratio gets a verdict: a stage with seeds: {min: 3, max: 20, until: decided}
(configs/sweep-adaptive.yaml) adds seed pairs until each comparison is
decided.  Every metric is in $db, e.g.:
  sqlite3 -header -column $db 'SELECT * FROM results'
  sqlite3 -header -column $db "SELECT rope, learnable, max(abs(omega_change)) AS moved
                               FROM frequency_evolution GROUP BY rope, learnable"
EOT
exit "$status"
