#!/usr/bin/env bash
# bench_results: `bifocal results`, `compare` and `report` of 1,000,000-job
# sweeps (tests/results/big_sweeps.py), through bifocald and with --db;
# prints each command's time and peak memory, and bifocald's peak resident
# memory after all of them (it holds one 1 MiB page per query, so that
# stays flat).  Four sweeps:
#   all       every job with its evaluations and final loss (every 9th
#             failed), three groups of ~333,000 seeds (`wide ... lean`)
#   few       shaped like a search: trials of 3 seeds, each its own lr (no
#             two configs shared), the first 1,000 jobs succeeded, the rest
#             queued (`search N 1000`)
#   pending   the same with nothing succeeded yet (`search N 0`): compare
#             and report have nothing to show
#   trials    the same with every job succeeded (`search N N`): a group per
#             trial, past what compare and report compare
#             (BF_COMPARE_MAX_GROUPS): they refuse it by name
#
#   bench/bench_results.sh BUILD_DIR [N_JOBS]
#
# BUILD_DIR is a build with tests (the sweeps are grown from the database
# tests/results/results_fixture writes).  VIA=db (or daemon) times one way
# only (default: both); CMDS="compare report" times those commands only
# (default: results compare report); SWEEPS="few trials" grows and times
# those sweeps only (default: all four); BEFORE=PATH also times them with the
# bifocal at PATH with --db, for a before-and-after on the same sweeps.
set -euo pipefail
build=$1 n=${2:-1000000} daemon=
tmp=$(mktemp -d /tmp/bench-results-XXXXXX)
trap 'kill "$daemon" 2>/dev/null || true; rm -rf "$tmp"' EXIT
db=$tmp/b.db
"$build/tests/results/results_fixture" "$db"
grow() {
    local start sweep
    start=$(date +%s)
    sweep=$(python3 "$(dirname "$0")/../tests/results/big_sweeps.py" "$db" "$@")
    echo "sweep $sweep ($*): written in $(( $(date +%s) - start )) s" >&2
    echo "$sweep"
}
sweeps=${SWEEPS:-all few pending trials} timed=()
for name in $sweeps; do
    case $name in
    all) timed+=("all:$(grow wide "$n" lean)") ;;
    few) timed+=("few:$(grow search "$n" 1000)") ;;
    pending) timed+=("pending:$(grow search "$n" 0)") ;;
    trials) timed+=("trials:$(grow search "$n" "$n")") ;;
    *) echo "bench_results: no sweep '$name' (all few pending trials)" >&2
       exit 2 ;;
    esac
done
"$build/server/bifocald" --db "$db" --listen 127.0.0.1:0 \
    --port-file "$tmp/port" --log-level warn &
daemon=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
server=(--server "127.0.0.1:$(cat "$tmp/port")" --token-file "$db.token")

# Runs `bifocal ARGS...` (the one at $client), printing its wall time,
# peak memory and exit status (compare of the pending sweep exits 1:
# nothing to compare).
client=$build/cli/bifocal
measure() {
    local label=$1; shift
    local rc=0
    /usr/bin/time -f "%e %M" -o "$tmp/t" "$client" "$@" \
        >/dev/null 2>"$tmp/err" || rc=$?
    read -r secs kb < <(tail -1 "$tmp/t")
    printf '%-44s %7.1f s  client peak %5d MB  exit %d\n' "$label" "$secs" \
        $((kb / 1024)) "$rc"
}
via=${VIA:-both} cmds=${CMDS:-results compare report}
for s in "${timed[@]}"; do
    name=${s%%:*} sweep=${s#*:}
    for cmd in $cmds; do
        out=(); [ "$cmd" = report ] && out=(--json -o "$tmp/r.json")
        [ "$via" = db ] ||
            measure "$cmd $sweep ($name, through bifocald)" "${server[@]}" \
                "$cmd" "$sweep" "${out[@]}"
        [ "$via" = daemon ] ||
            measure "$cmd $sweep ($name, --db)" "$cmd" "$sweep" --db "$db" \
                "${out[@]}"
    done
done
if [ -n "${BEFORE:-}" ]; then
    client=$BEFORE
    for s in "${timed[@]}"; do
        name=${s%%:*} sweep=${s#*:}
        for cmd in $cmds; do
            out=(); [ "$cmd" = report ] && out=(--json -o "$tmp/r.json")
            measure "$cmd $sweep ($name, --db, before)" "$cmd" "$sweep" \
                --db "$db" "${out[@]}"
        done
    done
fi
echo "bifocald peak RSS: $(awk '/VmHWM/ {printf "%d MB", $2 / 1024}' /proc/$daemon/status)"
