#!/usr/bin/env bash
# The studies, end to end, with `bifocal run` (2 local groups of 1 rank:
# these models are too small for data parallelism to pay; scripts/study.sh
# cost measures it).
#
#   scripts/study.sh [run]      the first study (research/findings.md):
#                               configs/study-structure-gap.yaml into
#                               runs/study.db, then its tables and
#                               figures in research/study/
#   scripts/study.sh analyse    only its tables and figures
#   scripts/study.sh frequency [run|analyse]
#                               Study 2 (issue 20, research/study.md):
#                               configs/study-frequency{,-code,-scale}.yaml
#                               into runs/study-frequency.db, then the
#                               compact data, reports and headline table in
#                               research/study/frequency/
#   scripts/study.sh headline DB
#                               Study 2's headline table (the primary
#                               comparisons), recomputed from DB
#   scripts/study.sh family-seeds DB
#                               each comparison of adaptive seeds in DB
#                               replayed at its stage family's level
#                               (alpha / m, migration 22) on the pairs it
#                               ran: where that rule stops, if it does
#   scripts/study.sh cost       what a study job costs per step, and 2
#                               groups of 1 rank against 1 group of 2
#
# Environment (both studies): STUDY_SMOKE=1 runs a study at smoke scale
# (scripts/study_sweep.py --smoke: the same files, few steps, trials and
# seeds); STUDY_DB and STUDY_OUT move its database and output folder;
# BIFOCAL (the client, with bifocald and bifocal-worker found beside it)
# uses built binaries instead of building.  The first study lives in
# scripts/study_structure_gap.sh, Study 2 in scripts/study_frequency.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
build=${BUILD_DIR:-build}
if [ -z "${BIFOCAL:-}" ]; then
    bf_install_pkgs "${BUILD_PKGS[@]}"
    [ -d "$build" ] || meson setup "$build"
    meson compile -C "$build" bifocal bifocald bifocal-worker
fi
bifocal=${BIFOCAL:-$build/cli/bifocal}
export OPENBLAS_NUM_THREADS=1

# study_slim DB SLIM: the compact copy of a study's database that
# research/study/ keeps (at most 10 MB), from which its tables are printed.
# Per-step training rows go: a job keeps its last train record and its
# first and last frequencies; evaluations (with their per-example
# outcomes), attempts, trials, selections and seed decisions all stay.  A
# rollback journal, not the daemon's WAL: a WAL database cannot be read
# where its folder is read-only (a checkout, a mount).
study_slim() {
    local db=$1 slim=$2
    rm -f "$slim"
    sqlite3 "$db" ".backup '$slim'"
    sqlite3 "$slim" > /dev/null "
      DELETE FROM metrics WHERE step < (SELECT max(step) FROM metrics m
                                         WHERE m.job_id = metrics.job_id);
      DELETE FROM frequencies
       WHERE step > (SELECT min(step) FROM frequencies f
                      WHERE f.job_id = frequencies.job_id)
         AND step < (SELECT max(step) FROM frequencies f
                      WHERE f.job_id = frequencies.job_id);
      VACUUM;
      PRAGMA journal_mode = DELETE;"
    local bytes; bytes=$(stat -c %s "$slim")
    echo "$slim: $bytes bytes"
    if [ "$bytes" -gt $((10 * 1024 * 1024)) ]; then
        echo "study.sh: $slim is over 10 MB" >&2
        return 1
    fi
}

# How far the learnable frequencies moved by each job's last step:
# omega(final) / omega(0) over every learnable (layer, head, pair) of every
# seed, per sweep, stage, task and encoding: the least and the most, the
# geometric mean of the factor either way (how far) and of the ratio
# (which way), and the share that rose.  Both studies print it
# (frequencies.txt).
study_frequencies_sql="
  SELECT j.sweep_id AS sweep, j.stage, j.task, j.rope,
         printf('%.3g', json_extract(j.config, '\$.freq_lr_mult'))
           AS freq_lr_mult,
         count(DISTINCT j.job_id) AS jobs, count(*) AS pairs,
         printf('%.3f', min(fe.omega_ratio)) AS min_ratio,
         printf('%.3f', max(fe.omega_ratio)) AS max_ratio,
         printf('%.3f', exp(avg(abs(ln(fe.omega_ratio)))))
           AS geo_mean_factor,
         printf('%.3f', exp(avg(ln(fe.omega_ratio)))) AS geo_mean_ratio,
         printf('%.2f', avg(fe.omega_ratio > 1)) AS share_rose
    FROM frequency_evolution fe JOIN jobs j USING (job_id)
   WHERE fe.learnable AND fe.step = json_extract(j.config, '\$.steps')
     AND j.status = 'succeeded'
   GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5"

case "${1:-run}" in
    frequency) shift; source scripts/study_frequency.sh; study_frequency "$@"
               exit ;;
    headline) source scripts/study_frequency.sh
              study_headline "${2:?usage: scripts/study.sh headline DB}"
              exit ;;
    family-seeds) source scripts/study_frequency.sh
                  study_family_seeds "${2:?usage: scripts/study.sh family-seeds DB}"
                  exit ;;
    cost) source scripts/study_frequency.sh; study_cost; exit ;;
    run|analyse) source scripts/study_structure_gap.sh
                 study_structure_gap "${1:-run}"; exit ;;
    *) echo "usage: scripts/study.sh [run|analyse|frequency [run|analyse]|headline DB|family-seeds DB|cost]" >&2
       exit 2 ;;
esac

