#!/usr/bin/env bash
# The study of docs/findings.md, end to end: runs
# configs/study-structure-gap.yaml with `bifocal run` (2 local groups of 1
# rank: these models are too small for data parallelism to pay), then
# writes every table and figure that page shows into docs/study/.
#
#   scripts/study.sh            run the study (runs/study.db), then analyse
#   scripts/study.sh analyse    only the tables and figures, from runs/study.db
#
# The tables are `bifocal compare` output as printed; the figures are the
# `bifocal report` figures saved as PNG by scripts/report_png.js.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}"
scripts/browser-deps.sh
build=${BUILD_DIR:-build}
[ -d "$build" ] || meson setup "$build"
meson compile -C "$build" bifocal bifocald bifocal-worker
bifocal="$build/client/bifocal"
db=runs/study.db out=docs/study
mkdir -p runs "$out"

if [ "${1:-run}" = run ]; then
    rm -rf "$db" "$db"-wal "$db"-shm "$db".checkpoints "$db".log
    start=$SECONDS
    "$bifocal" run configs/study-structure-gap.yaml --db "$db" --groups 2 --ranks 1
    echo "the study took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
fi

# Each encoding against fixed RoPE at base 1e4 (the fields a baseline
# does not use are named so that every group finds it).
baseline=rope=rope,rope_base=10000,freq_lr_mult=1,random_positions=0
spectral="rope=spectral rope_base=10000.0 freq_lr_mult=1.0 random_positions=0"
spectral10="rope=spectral rope_base=10000.0 freq_lr_mult=10.0 random_positions=0"
for task in dyck counter modarith; do
    "$bifocal" compare 1 --db "$db" --where stage=encodings,task=$task \
        --baseline "$baseline" > "$out/encodings-$task.txt"
    "$bifocal" compare 1 --db "$db" --where stage=surgery,task=$task \
        > "$out/surgery-$task.txt"
    "$bifocal" report 1 --db "$db" --where stage=encodings,task=$task \
        --baseline "$baseline" -o "runs/study-$task.html"
    node scripts/report_png.js "runs/study-$task.html" "$out/$task" \
        "$spectral" "$spectral10"
    "$bifocal" report 1 --db "$db" --where stage=surgery,task=$task \
        -o "runs/study-surgery-$task.html"
    node scripts/report_png.js "runs/study-surgery-$task.html" \
        "$out/surgery-$task" "rope=spectral"
done
# Timing and outcome of every job, for the page's cost line.
sqlite3 -header -column "$db" "
  SELECT count(DISTINCT job_id) AS jobs, count(*) AS attempts,
         sum(outcome = 'succeeded') AS succeeded,
         round((max(ended_ms) - min(started_ms)) / 60000.0, 1) AS wall_min,
         round(sum(ended_ms - started_ms) / 60000.0, 1) AS job_min
    FROM attempts" \
    > "$out/cost.txt"
cat "$out/cost.txt"
echo "tables and figures in $out/; reports in runs/study-*.html"
