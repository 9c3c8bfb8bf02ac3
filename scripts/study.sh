#!/usr/bin/env bash
# The studies, end to end, with `bifocal run` (2 local groups of 1 rank:
# these models are too small for data parallelism to pay; scripts/study.sh
# cost measures it).
#
#   scripts/study.sh [run]      the first study (docs/findings.md):
#                               configs/study-structure-gap.yaml into
#                               runs/study.db, then analyse
#   scripts/study.sh analyse    only its tables and figures, into docs/study/
#   scripts/study.sh frequency [run|analyse]
#                               Study 2 (issue 20, docs/study.md):
#                               configs/study-frequency{,-code,-scale}.yaml
#                               into runs/study-frequency.db, then the
#                               compact data, reports and headline table in
#                               docs/study/frequency/
#   scripts/study.sh headline DB
#                               Study 2's headline table (the primary
#                               comparisons), recomputed from DB
#   scripts/study.sh cost       what a study job costs per step, and 2
#                               groups of 1 rank against 1 group of 2
#
# Study 2's environment: STUDY_SMOKE=1 runs it at smoke scale
# (scripts/study_sweep.py --smoke: the same files, few steps, trials and
# seeds); STUDY_DB and STUDY_OUT move its database and output folder;
# BIFOCAL (the client, with bifocald and bifocal-worker found beside it)
# uses built binaries instead of building.
#
# The first study's tables are `bifocal compare` output as printed; the
# figures are the `bifocal report` figures saved as PNG by
# scripts/report_png.js.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
build=${BUILD_DIR:-build}
if [ -z "${BIFOCAL:-}" ]; then
    bf_install_pkgs "${BUILD_PKGS[@]}"
    [ -d "$build" ] || meson setup "$build"
    meson compile -C "$build" bifocal bifocald bifocal-worker
fi
bifocal=${BIFOCAL:-$build/client/bifocal}
export OPENBLAS_NUM_THREADS=1

case "${1:-run}" in
    frequency) shift; source scripts/study_frequency.sh; study_frequency "$@"
               exit ;;
    headline) source scripts/study_frequency.sh
              study_headline "${2:?usage: scripts/study.sh headline DB}"
              exit ;;
    cost) source scripts/study_frequency.sh; study_cost; exit ;;
    run|analyse) ;;
    *) echo "usage: scripts/study.sh [run|analyse|frequency [run|analyse]|headline DB|cost]" >&2
       exit 2 ;;
esac

bf_install_pkgs sqlite3
scripts/browser-deps.sh
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
# How far the learnable frequencies moved: omega(final) / omega(0) over
# every learnable (layer, head, pair) of every seed, per stage, task and
# variant.
sqlite3 -header -column "$db" "
  SELECT j.stage, json_extract(j.config, '\$.task') AS task, j.rope,
         json_extract(j.config, '\$.freq_lr_mult') AS freq_lr_mult,
         count(*) AS pairs, printf('%.3f', min(fe.omega_ratio)) AS min_ratio,
         printf('%.3f', max(fe.omega_ratio)) AS max_ratio,
         printf('%.3f', avg(abs(ln(fe.omega_ratio)))) AS mean_abs_log_ratio
    FROM frequency_evolution fe JOIN jobs j USING (job_id)
   WHERE fe.learnable AND fe.step = json_extract(j.config, '\$.steps')
   GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4" > "$out/frequencies.txt"
cat "$out/frequencies.txt"
