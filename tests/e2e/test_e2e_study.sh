#!/usr/bin/env bash
# Study 2 end to end at smoke scale: scripts/study.sh frequency with
# STUDY_SMOKE=1 runs configs/study-frequency{,-code,-scale}.yaml (few
# steps, trials and seeds: scripts/study_sweep.py) with `bifocal run` and
# real worker groups, then writes its research/study output into OUT (the build
# tree, where test_e2e_study_headline.sh finds it while research/study/frequency
# holds no real study).  Checks what the study's statements rest on.
# Usage: test_e2e_study.sh OUT   (BIFOCAL, BIFOCALD, BIFOCAL_WORKER set)
set -euo pipefail
out=$1
root=${BF_SOURCE_ROOT:-$(dirname "$0")/../..}
dir=$(mktemp -d /tmp/bifocal-study-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
db=$dir/study.db
fail() { echo "FAIL: $*" >&2; [ -f "$db.log" ] && tail -n 30 "$db.log" >&2; exit 1; }
rm -rf "$out"
STUDY_SMOKE=1 STUDY_DB=$db STUDY_OUT=$out "$root/scripts/study.sh" frequency \
    > "$dir/log" 2>&1 || { tail -n 40 "$dir/log" >&2; fail "study.sh exited $?"; }

slim=$out/study.db
sql() { sqlite3 "$slim" "$1"; }
expect() { # expect WHAT SQL VALUE
    local got; got=$(sql "$2")
    [ "$got" = "$3" ] || fail "$1: got '$got', expected '$3' ($2)"
}
for f in study.db headline.txt report-1.html report-2.html report-3.html \
         scale-choice.txt modarith.txt cost.txt tuned.txt seeds.txt \
         frequencies.txt surgery-dyck.txt surgery-counter.txt \
         scale-dyck.txt scale-code.txt scale-dyck-loss-depth.png \
         scale-code-accuracy-depth.png; do
    [ -s "$out/$f" ] || fail "no $out/$f"
done
for task in dyck counter code; do
    # the primary family's verdicts: Holm's, or where the stopping rule
    # gave the seeds, the rule's
    grep -q "p_adj=.*(Holm)\|stopping rule (the verdict of record)" \
        "$out/confirm-$task.txt" \
        || fail "confirm-$task.txt has no verdict of the primary family"
    for fig in loss-depth accuracy-depth forest freq-heatmap-1 spectrum-1 \
               freq-heatmap-2 spectrum-2; do
        [ -s "$out/confirm-$task-$fig.png" ] || fail "no confirm-$task-$fig.png"
    done
done
# tuned.txt: a row per chosen trial; seeds.txt: a row per comparison
# (each under a header and a rule).
[ "$(($(wc -l < "$out/tuned.txt") - 2))" = 22 ] \
    || fail "tuned.txt: $(($(wc -l < "$out/tuned.txt") - 2)) rows, not 22"
[ "$(($(wc -l < "$out/seeds.txt") - 2))" = 18 ] \
    || fail "seeds.txt: $(($(wc -l < "$out/seeds.txt") - 2)) rows, not 18"
grep -q "spectral" "$out/frequencies.txt" \
    || fail "frequencies.txt names no spectral job"
expect "three sweeps, named as their files" \
    "SELECT group_concat(name) FROM (SELECT name FROM sweeps ORDER BY sweep_id)" \
    "study-frequency,study-frequency-code,study-frequency-scale"
expect "no job failed, none left unfinished" \
    "SELECT count(*) FROM jobs WHERE status NOT IN ('succeeded', 'pruned', 'cancelled')" 0
expect "every tune cell made a selection (14 formal, 1 modarith, 7 code)" \
    "SELECT count(DISTINCT select_id || '/' || grp) FROM selections WHERE chosen" 22
expect "every confirm job trains at its cell's chosen lr" \
    "SELECT count(*) FROM jobs c WHERE c.stage = 'confirm' AND c.status = 'succeeded'
        AND json_extract(c.config, '\$.lr') NOT IN (
            SELECT json_extract(t.config, '\$.lr') FROM selections s
              JOIN jobs t ON t.job_id = s.job_id
             WHERE s.chosen AND t.sweep_id = c.sweep_id AND t.task = c.task
               AND t.rope = c.rope AND t.stage = 'tune'
               AND json_extract(t.config, '\$.rope_base') = json_extract(c.config, '\$.rope_base')
               AND json_extract(t.config, '\$.random_positions') = json_extract(c.config, '\$.random_positions'))" 0
# (the trial it took, selected_values, is its own cell's: in a smoke run
# several cells may choose equal values)
expect "every surgery job (2 tasks x 3 encodings x 2 seeds) started from a
        geometric checkpoint at its encoding's tuned lr and freq_lr_mult" \
    "SELECT count(*) FROM jobs c JOIN selections s ON s.chosen
       JOIN jobs t ON t.job_id = s.job_id
       JOIN selected_values v ON v.job_id = c.job_id AND v.trial_job_id = t.job_id
      WHERE c.stage = 'surgery' AND c.status = 'succeeded'
        AND c.init_from IS NOT NULL AND c.source_job_id IN
            (SELECT job_id FROM jobs WHERE stage = 'geometric')
        AND t.sweep_id = c.sweep_id AND t.stage = 'tune' AND t.task = c.task
        AND t.rope = c.rope
        AND json_extract(t.config, '\$.rope_base') = json_extract(c.config, '\$.rope_base')
        AND json_extract(t.config, '\$.random_positions') = json_extract(c.config, '\$.random_positions')
        AND json_extract(t.config, '\$.freq_lr_mult') = json_extract(c.config, '\$.freq_lr_mult')
        AND json_extract(t.config, '\$.lr') = json_extract(c.config, '\$.lr')" 12
expect "a seed decision for each of the 18 primary comparisons" \
    "SELECT count(*) FROM seed_comparisons" 18
expect "the slim copy keeps one train row per job and key" \
    "SELECT count(*) FROM (SELECT job_id, key FROM metrics GROUP BY 1, 2 HAVING count(*) > 1)" 0
expect "the slim copy keeps each job's first and last frequencies only" \
    "SELECT count(*) FROM (SELECT job_id FROM frequencies GROUP BY 1 HAVING count(DISTINCT step) > 2)" 0
expect "per-example outcomes kept for every final evaluation" \
    "SELECT count(*) FROM final_evals f WHERE NOT EXISTS (SELECT 1 FROM eval_outcomes o
        WHERE o.job_id = f.job_id AND o.depth = f.eval_depth AND o.step = f.step)" 0
# The scale check runs the baseline and the two best confirm cells by
# depth-4 loss, at the lr they were tuned to, and nothing else.
for sweep_task in "1 dyck" "2 code"; do
    set -- $sweep_task
    want=$(sqlite3 "$slim" "
      SELECT group_concat(rope || '/' || rope_base || '/' || random_positions || '/' || lr, ' ')
        FROM (SELECT j.rope, json_extract(j.config, '\$.rope_base') AS rope_base,
                     json_extract(j.config, '\$.random_positions') AS random_positions,
                     json_extract(j.config, '\$.lr') AS lr,
                     exp(avg(ln(f.loss))) AS l
                FROM final_evals f JOIN jobs j USING (job_id)
               WHERE j.sweep_id = $1 AND j.stage = 'confirm' AND j.task = '$2'
                 AND f.eval_depth = 4
               GROUP BY 1, 2, 3, 4
               ORDER BY (j.rope = 'rope' AND rope_base = 1e4 AND random_positions = 0) DESC, l
               LIMIT 3)")
    got=$(sqlite3 "$slim" "
      SELECT group_concat(e, ' ') FROM (
        SELECT DISTINCT rope || '/' || json_extract(config, '\$.rope_base') || '/'
               || json_extract(config, '\$.random_positions') || '/'
               || json_extract(config, '\$.lr') AS e, min(idx) AS i
          FROM jobs WHERE sweep_id = 3 AND task = '$2' GROUP BY e ORDER BY i)")
    [ "$got" = "$want" ] || fail "scale check on $2 runs '$got', the choice is '$want'"
done
expect "the scale check is d_model 128, 4 layers" \
    "SELECT count(*) FROM jobs WHERE sweep_id = 3 AND (json_extract(config, '\$.d_model') != 128
        OR json_extract(config, '\$.n_layers') != 4)" 0
size=$(stat -c %s "$slim")
[ "$size" -le $((10 * 1024 * 1024)) ] || fail "study.db is $size bytes"
# The stored headline is what the data recompute.
BF_STUDY_DIR=$out "$root/tests/e2e/test_e2e_study_headline.sh" \
    || fail "headline does not recompute"
if pgrep -f "$db" > /dev/null; then fail "processes left running"; fi
echo "study smoke: $(sql "SELECT count(*) FROM jobs") jobs, study.db $size bytes"
