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
echo "bifocal run end to end: ok"
