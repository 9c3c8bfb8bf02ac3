#!/usr/bin/env bash
# The live dashboard end to end, in a real browser: `bifocal run` starts a
# daemon, a worker group of 2 MPI ranks and the dashboard, and trains a
# three-job sweep (rope, spectral, bifocal) while headless chromium
# (tests/results/browser/check_dashboard.js) watches it: a running job's
# step advances, the figures draw, a job page updates, no console error.
# Then the run is interrupted (Ctrl-C) and must stop everything it started.
# Screenshots land in OUT_DIR (the build tree).
#
#   test_e2e_dashboard.sh OUT_DIR     (env: BIFOCAL, BIFOCALD, BIFOCAL_WORKER)
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
browser="$here/../results/browser"
if [ ! -d "$browser/node_modules/playwright-core" ]; then
    echo "FAIL: playwright-core is not installed: run scripts/browser-deps.sh" >&2
    exit 1
fi
dir=$(mktemp -d /tmp/bifocal-dashboard-test.XXXXXX)
run=""
cleanup() {
    [ -n "$run" ] && kill -INT "$run" 2>/dev/null && wait "$run" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/run.out" >&2 || true; tail -n 30 "$dir/d.db.log" >&2 || true; exit 1; }

# Long enough per job (4000 steps) for the browser to see one run: the
# job page opens on job 2, which must still be running then, and with it
# `bifocal run` and its dashboard (at 600 steps job 2 once ended a moment
# after the page opened; at 1500 the dashboard was gone once on a fresh
# clone, as if the whole sweep had ended).
# The run is interrupted once the check is done, so longer jobs cost only
# the wait for job 1 to end.
cat > "$dir/sweep.yaml" <<'YAML'
name: dashboard-e2e
base: {task: dyck, depth: 3, eval_depths: [3, 6], d_model: 32, n_layers: 1,
       n_heads: 4, seq_len: 40, batch_size: 16, steps: 4000, warmup_steps: 5,
       lr: 0.01, log_every: 5, eval_every: 100, freq_every: 50,
       checkpoint_every: 0, eval_examples: 16}
grid:
  rope: [rope, spectral, bifocal]
YAML

"$BIFOCAL" run "$dir/sweep.yaml" --db "$dir/d.db" --groups 1 --ranks 2 \
    --dashboard 127.0.0.1:0 > "$dir/run.out" 2>&1 &
run=$!
url=""
for _ in $(seq 600); do
    url=$(sed -n 's|^dashboard: \(http://[^/]*\)/sweeps/1$|\1|p' "$dir/run.out")
    [ -n "$url" ] && break
    kill -0 "$run" 2>/dev/null || fail "bifocal run exited before printing the dashboard's URL"
    sleep 0.1
done
[ -n "$url" ] || fail "bifocal run printed no dashboard URL"
echo "dashboard at $url"

node "$browser/check_dashboard.js" "$url" "$out" || fail "the dashboard check failed"

kill -INT "$run"
rc=0; wait "$run" || rc=$?
run=""
[ "$rc" = 130 ] || fail "the interrupted run exited $rc, expected 130"
if pgrep -f "$dir/d.db" > /dev/null; then fail "processes left running"; fi
echo "dashboard end to end: ok"
