#!/usr/bin/env bash
# The first study end to end at smoke scale: scripts/study.sh with
# STUDY_SMOKE=1 runs configs/study-structure-gap.yaml (few steps and
# seeds: scripts/study_sweep.py) with `bifocal run` and real worker
# groups, then prints its tables and figures into a temporary folder as
# it prints them into research/study/.  Checks what research/findings.md's "The
# first study" rests on: every table, figure and the compact database.
# Usage: test_e2e_study_first.sh   (BIFOCAL, BIFOCALD, BIFOCAL_WORKER set)
set -euo pipefail
root=${BF_SOURCE_ROOT:-$(dirname "$0")/../..}
dir=$(mktemp -d /tmp/bifocal-study-first.XXXXXX)
trap 'rm -rf "$dir"' EXIT
db=$dir/study.db out=$dir/out
fail() { echo "FAIL: $*" >&2; [ -f "$db.log" ] && tail -n 30 "$db.log" >&2; exit 1; }
STUDY_SMOKE=1 STUDY_DB=$db STUDY_OUT=$out "$root/scripts/study.sh" \
    > "$dir/log" 2>&1 || { tail -n 40 "$dir/log" >&2; fail "study.sh exited $?"; }

slim=$out/study.db
for task in dyck counter modarith; do
    for f in encodings-$task.txt surgery-$task.txt; do
        [ -s "$out/$f" ] || fail "no $out/$f"
    done
    for fig in accuracy-depth loss-depth train-loss forest freq-heatmap-1 \
               spectrum-1 freq-heatmap-2 spectrum-2; do
        [ -s "$out/$task-$fig.png" ] || fail "no $task-$fig.png"
    done
    [ -s "$out/surgery-$task-freq-heatmap-1.png" ] \
        || fail "no surgery-$task-freq-heatmap-1.png"
    # 7 encodings against the baseline at 3 depths, each verdict with its
    # p-value adjusted in one Benjamini-Hochberg family (the file
    # declares no primary comparison).
    n=$(grep -c " vs .*, eval depth .*: loss .* p_adj=[^ ]* (BH)" \
             "$out/encodings-$task.txt" || true)
    [ "$n" = 21 ] || fail "encodings-$task.txt: $n BH verdict lines, not 21"
    ! grep -q "(Holm)" "$out/encodings-$task.txt" \
        || fail "encodings-$task.txt applies Holm with no primary family"
    # The compact copy loses nothing the tables read.
    diff <("$BIFOCAL" compare 1 --db "$db" --where stage=encodings,task=$task \
               --baseline rope=rope,rope_base=10000,freq_lr_mult=1,random_positions=0 \
               --verbose) \
         "$out/encodings-$task.txt" > /dev/null \
        || fail "encodings-$task.txt differs when printed from the whole database"
done
sql() { sqlite3 "$slim" "$1"; }
# 3 tasks x (8 encodings + geometric + 3 surgery cells) x 2 smoke seeds.
[ "$(sql "SELECT count(*) FROM jobs WHERE status = 'succeeded'")" = 72 ] \
    || fail "$(sql "SELECT count(*) FROM jobs WHERE status = 'succeeded'") of 72 jobs succeeded"
grep -q "^72 " "$out/cost.txt" || fail "cost.txt does not count 72 jobs"
grep -Eq "encodings +dyck +spectral +10(\.0)? " "$out/frequencies.txt" \
    || fail "frequencies.txt has no row for spectral at freq_lr_mult 10 on dyck"
[ "$(sql "SELECT count(*) FROM (SELECT job_id FROM frequencies GROUP BY 1
          HAVING count(DISTINCT step) > 2)")" = 0 ] \
    || fail "the compact copy keeps more than each job's first and last frequencies"
if pgrep -f "$db" > /dev/null; then fail "processes left running"; fi
echo "first study smoke: $(sql "SELECT count(*) FROM jobs") jobs, study.db $(stat -c %s "$slim") bytes"
