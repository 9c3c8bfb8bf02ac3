#!/usr/bin/env bash
# `bifocal run` end to end, as a user runs it: one command starts a daemon
# and a local worker group of 2 MPI ranks, trains a three-job sweep (rope,
# spectral, bifocal), prints the results table and stops everything.  Then
# the database is read with the real sqlite3 CLI, as users do.
# Needs BIFOCAL (the client) with BIFOCALD and BIFOCAL_WORKER beside it or in
# the environment.
set -euo pipefail
dir=$(mktemp -d /tmp/bifocal-run-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$dir/r.db.log" ] && tail -n 30 "$dir/r.db.log" >&2; exit 1; }

cat > "$dir/sweep.yaml" <<'YAML'
name: run-e2e
base: {task: dyck, depth: 3, eval_depths: [3, 6], d_model: 32, n_layers: 2,
       n_heads: 4, seq_len: 40, batch_size: 16, steps: 60, warmup_steps: 5,
       lr: 0.01, log_every: 10, eval_every: 30, freq_every: 20,
       checkpoint_every: 30, eval_examples: 16}
grid:
  rope: [rope, spectral, bifocal]
YAML

"$BIFOCAL" run "$dir/sweep.yaml" --db "$dir/r.db" --groups 1 --ranks 2 \
    > "$dir/out" 2> "$dir/err" || { cat "$dir/out" "$dir/err" >&2; fail "bifocal run exited $?"; }
cat "$dir/out"

grep -q '^sweep 1: 3 jobs on 1 worker group(s) x 2 rank(s)' "$dir/out" || fail "no start line"
grep -Eq '^sweep_id +job_id +task +rope +depth' "$dir/out" || fail "no results table header"
[ "$(grep -Ec '^1 +[0-9]+ +dyck +(rope|spectral|bifocal) +3 .*succeeded' "$dir/out")" = 3 ] \
    || fail "the printed table does not show 3 succeeded jobs"
# Without a terminal: a line per job that ends (or per count, for a job
# that ended between two polls), a summary, no per-step lines (issue 44:
# 505 of 671 lines were).
ends=$(awk '/^job [0-9]+ succeeded: .*\([0-9]+\/3 ended, ETA / { n++ }
            /^[0-9]+ job\(s\) succeeded \(/ { n += $1 } END { print n + 0 }' "$dir/out")
[ "$ends" = 3 ] || fail "expected a line per job end (3), got $ends"
grep -Eq '^sweep 1 ended in [0-9.hms]+: succeeded 3, failed 0, cancelled 0, pruned 0 of 3$' \
    "$dir/out" || fail "no summary line"
if grep -Eq 'step [0-9]+/[0-9]+' "$dir/out"; then fail "per-step lines without --progress"; fi

sql() { sqlite3 "$dir/r.db" "$1"; }
expect() { # expect WHAT SQL VALUE
    local got; got=$(sql "$2")
    [ "$got" = "$3" ] || fail "$1: got '$got', expected '$3' ($2)"
}
expect "one results row per job" "SELECT count(*) FROM results" 3
expect "every job succeeded with its metrics" \
    "SELECT count(*) FROM results WHERE status = 'succeeded'
       AND train_loss > 0 AND eval_loss > 0 AND ood_loss > 0
       AND eval_accuracy BETWEEN 0 AND 1 AND ood_accuracy BETWEEN 0 AND 1" 3
expect "every step's loss stored once" \
    "SELECT count(*) FROM metrics WHERE key = 'loss'" $((3 * 6))
expect "both ranks of the group trained" \
    "SELECT ranks FROM workers" 2

# Frequency evolution: the spectral heads move, the geometric ones do not.
last="step = (SELECT max(step) FROM frequencies f WHERE f.job_id = frequency_evolution.job_id)"
expect "learnable heads of spectral and bifocal moved" \
    "SELECT group_concat(DISTINCT rope) FROM (SELECT rope FROM frequency_evolution
      WHERE learnable AND $last AND abs(omega_change) > 0 ORDER BY rope)" "bifocal,spectral"
expect "rope has no learnable head" \
    "SELECT count(*) FROM frequency_evolution WHERE rope = 'rope' AND learnable" 0
fixed=$(sql "SELECT count(*) FROM frequency_evolution WHERE NOT learnable AND $last")
[ "$fixed" -gt 0 ] || fail "no final frequencies of fixed heads recorded"
expect "fixed heads stayed exactly put" \
    "SELECT count(*) FROM frequency_evolution WHERE NOT learnable AND omega_change != 0" 0

# Everything it started has stopped.
if pgrep -f "$dir/r.db" > /dev/null; then fail "processes left running"; fi

# Interrupted half-way (Ctrl-C), then run again on the same database: the
# second run follows the same sweep instead of submitting it twice, and the
# sweep ends with every step stored once.
sed -e 's/steps: 60/steps: 1500/' -e 's/checkpoint_every: 30/checkpoint_every: 100/' \
    -e 's/log_every: 10/log_every: 5/' "$dir/sweep.yaml" > "$dir/long.yaml"
"$BIFOCAL" run "$dir/long.yaml" --db "$dir/i.db" > "$dir/out1" 2>&1 &
run=$!
# Wait for the first job to end and the second to be under way.
for _ in $(seq 1200); do
    n=$(sqlite3 "$dir/i.db" "SELECT count(*) FROM metrics WHERE key = 'loss'" 2>/dev/null || echo 0)
    [ "${n:-0}" -ge 350 ] && break
    sleep 0.05
done
kill -INT "$run"
rc=0; wait "$run" || rc=$?
[ "$rc" = 130 ] || { cat "$dir/out1" >&2; fail "interrupted run exited $rc, expected 130"; }
if pgrep -f "$dir/i.db" > /dev/null; then fail "processes left running after Ctrl-C"; fi
[ "$(sqlite3 "$dir/i.db" "SELECT count(*) FROM jobs WHERE status = 'succeeded'")" -lt 3 ] \
    || fail "the sweep finished before the interruption; nothing was tested"

"$BIFOCAL" run "$dir/long.yaml" --db "$dir/i.db" > "$dir/out2" 2>&1 \
    || { cat "$dir/out2" >&2; fail "second run exited $?"; }
grep -q '^resuming sweep 1' "$dir/out2" || { cat "$dir/out2" >&2; fail "the second run did not resume sweep 1"; }
sql() { sqlite3 "$dir/i.db" "$1"; }
expect "one sweep, not two" "SELECT count(*) FROM sweeps" 1
expect "every job of the resumed sweep succeeded" \
    "SELECT count(*) FROM jobs WHERE status = 'succeeded'" 3
# (An interrupted attempt also reports the loss of the step it stopped at,
# which may lie off the log_every schedule.)
expect "every scheduled loss stored across both runs" \
    "SELECT count(*) FROM metrics WHERE key = 'loss' AND step % 5 = 0" $((3 * 1500 / 5))
# A daemon that never starts listening, interrupted while bifocal run waits
# for it: the run ends at once (130) and stops the daemon it started,
# instead of waiting out the start-up timeout and leaving it running.
printf '#!/bin/sh\necho $$ > "%s"\nexec sleep 600\n' "$dir/hang.pid" > "$dir/hang.sh"
chmod +x "$dir/hang.sh"
BIFOCALD="$dir/hang.sh" "$BIFOCAL" run "$dir/sweep.yaml" --db "$dir/h.db" \
    > "$dir/outh" 2>&1 &
run=$!
for _ in $(seq 100); do [ -s "$dir/hang.pid" ] && break; sleep 0.05; done
[ -s "$dir/hang.pid" ] || fail "bifocal run did not start the fake daemon"
kill -INT "$run"
rc=0; SECONDS=0; wait "$run" || rc=$?
[ "$rc" = 130 ] || { cat "$dir/outh" >&2; fail "run interrupted while its daemon started exited $rc, expected 130"; }
# Less than its 15 s wait for the port (BF_RUN_PORT_WAIT_MS): it did not
# wait the start-up out.
[ "$SECONDS" -lt 15 ] || fail "run took ${SECONDS}s to notice the interruption"
hang=$(cat "$dir/hang.pid")
if kill -0 "$hang" 2> /dev/null; then kill -9 "$hang"; fail "a daemon that never listened was left running"; fi

echo "bifocal run end to end: ok"
