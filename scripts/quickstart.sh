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
echo "Seed statistics and comparison with plain RoPE (bifocal compare):"
"$build"/cli/bifocal compare 1 --db "$db" || status=$?
echo
"$build"/cli/bifocal report 1 --db "$db" -o runs/quickstart-report.html || status=$?

cat <<EOT

The report (figures, tables, the sweep file) is runs/quickstart-report.html:
open it in a browser; it needs no network.  Every metric is in $db, e.g.:
  sqlite3 -header -column $db 'SELECT * FROM results'
  sqlite3 -header -column $db "SELECT rope, learnable, max(abs(omega_change)) AS moved
                               FROM frequency_evolution GROUP BY rope, learnable"
EOT
exit "$status"
