#!/usr/bin/env bash
# bench_results: `bifocal results`, `compare` and `report` of one
# 1,000,000-job sweep (tests/client/big_sweeps.py, evaluations and final
# loss per job), through bifocald and with --db; prints each command's time
# and peak memory, and bifocald's peak resident memory after all of them
# (it holds one 1 MiB page per query, so that stays flat).
#
#   bench/bench_results.sh BUILD_DIR [N_JOBS]
#
# BUILD_DIR is a build with tests (the sweep is grown from the database
# tests/client/results_fixture writes).
set -euo pipefail
build=$1 n=${2:-1000000} daemon=
tmp=$(mktemp -d /tmp/bench-results-XXXXXX)
trap 'kill "$daemon" 2>/dev/null || true; rm -rf "$tmp"' EXIT
db=$tmp/b.db
"$build/tests/client/results_fixture" "$db"
start=$(date +%s)
sweep=$(python3 "$(dirname "$0")/../tests/client/big_sweeps.py" "$db" wide "$n" lean)
echo "sweep $sweep: $n jobs written in $(( $(date +%s) - start )) s"
"$build/server/bifocald" --db "$db" --listen 127.0.0.1:0 \
    --port-file "$tmp/port" --log-level warn &
daemon=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
server=(--server "127.0.0.1:$(cat "$tmp/port")" --token-file "$db.token")

# Runs `bifocal ARGS...`, printing its wall time and peak memory.
measure() {
    local label=$1; shift
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$build/client/bifocal" "$@" >/dev/null
    read -r secs kb < "$tmp/t"
    printf '%-40s %7.1f s  client peak %5d MB\n' "$label" "$secs" $((kb / 1024))
}
for cmd in results compare report; do
    out=(); [ "$cmd" = report ] && out=(--json -o "$tmp/r.json")
    measure "$cmd $sweep (through bifocald)" "${server[@]}" "$cmd" "$sweep" "${out[@]}"
    measure "$cmd $sweep --db" "$cmd" "$sweep" --db "$db" "${out[@]}"
done
echo "bifocald peak RSS: $(awk '/VmHWM/ {printf "%d MB", $2 / 1024}' /proc/$daemon/status)"
