#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ with clang (ASan + UBSan)
# into build-fuzz/ and runs each for SECONDS (default 60), as many at once
# as there are cores (FUZZ_JOBS), starting from the seed corpus
# tests/fuzz/corpus/NAME (new inputs go to build-fuzz/corpus/NAME, never
# into the repository).  A crash, leak,
# sanitizer report or timeout fails the run; its reproducer lands in
# build-fuzz/ (crash-*, leak-*, timeout-*) and the run's log in
# build-fuzz/NAME.log.  Prints one line per harness with its figures.
#   scripts/fuzz.sh [SECONDS] [NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}" "${FUZZ_PKGS[@]}"

seconds=${1:-60}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(frame protocol job_config sweep checkpoint http records)

out=build-fuzz
mkdir -p "$out"
python3 scripts/embed_sql.py "$out/schema_sql.c" schema/[0-9]*.sql
python3 scripts/embed_files.py "$out/web_assets.c" bf_web results/web/*.html \
    results/web/*.js results/web/*.css results/web/vendor/uplot/uPlot.*

# The engine's kernels once, at the baseline level: meson builds a copy of
# engine/layers.c and gemm.c per dispatch level, and isa.c without BF_KERNELS_X86
# knows only this one.
flags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -Icommon -Istream -Iengine -Iserver -Iserver/sweep
       -Iserver/store
       -Iresults -Idashboard -DBF_KERNELS_TABLE=bf_kernels_baseline -DBF_GEMM=bf_gemm_baseline)
# shellcheck disable=SC2207
libs=($(pkg-config --cflags --libs jansson yaml-0.1 sqlite3 libuv openblas) -lhttp_parser -lm)
common_src=(common/*.c)
stream_src=(stream/*.c)
store_src=(server/sweep/*.c server/store/*.c "$out/schema_sql.c")
# The dashboard and the results it serves; the CLI (cli/) is not needed.
dashboard_src=(results/*.c dashboard/*.c "$out/web_assets.c")

sources_of() {
    case $1 in
        frame|job_config|records) echo "${common_src[@]}" ;;
        sweep) echo "${common_src[@]} server/sweep/*.c" ;;
        protocol) echo "${common_src[@]} ${store_src[@]} server/protocol.c server/holders.c server/queries.c server/submit.c server/chore.c server/cancels.c" ;;
        checkpoint) echo "${common_src[@]} engine/*.c" ;;
        http) echo "${common_src[@]} ${stream_src[@]} ${store_src[@]} ${dashboard_src[@]}" ;;
        *) echo "unknown harness $1" >&2; exit 2 ;;
    esac
}

# The protocol harness submits sweeps of at most 32 jobs (too_big_to_fuzz):
# chunks of 8 make them span several, as big sweeps do in the daemon.
defines_of() {
    case $1 in
        protocol) echo -DBF_SUBMIT_CHUNK=8 ;;
    esac
}

# Builds and runs one harness; prints its line, fails if the run did.
fuzz_one() {
    local h=$1 log="$out/$1.log" rc=0
    # shellcheck disable=SC2046
    clang "${flags[@]}" $(defines_of "$h") -o "$out/fuzz_$h" \
        "tests/fuzz/fuzz_$h.c" $(sources_of "$h") "${libs[@]}" || return 1
    mkdir -p "$out/corpus/$h"
    ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
    "$out/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/$h-" \
        "$out/corpus/$h" "tests/fuzz/corpus/$h" > "$log" 2>&1 || rc=$?
    local execs cov ft units
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    units=$(ls "$out/corpus/$h" | wc -l)
    if [ "$rc" -ne 0 ]; then
        echo "fuzz_$h: FAILED (status $rc) after ${execs:-?} execs; see $log"
        grep -m 3 -E 'ERROR|SUMMARY|runtime error' "$log" || true
        return 1
    fi
    echo "fuzz_$h: ok, ${seconds} s, ${execs:-?} execs, cov ${cov:-?}" \
         "edges, ft ${ft:-?}, corpus $units units"
}

# FUZZ_JOBS harnesses at a time (default: one per core); each prints into
# its own file, shown in the harnesses' order once all have ended.
at_once=${FUZZ_JOBS:-$(nproc)}
pids=()
for h in "${harnesses[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$at_once" ]; do
        wait -n || true
    done
    fuzz_one "$h" > "$out/$h.line" 2>&1 &
    pids+=($!)
done
failed=0
for i in "${!harnesses[@]}"; do
    wait "${pids[$i]}" || failed=1
    cat "$out/${harnesses[$i]}.line"
done
exit "$failed"
