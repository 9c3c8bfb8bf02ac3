#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: once in a normal
# build and once under AddressSanitizer + UndefinedBehaviorSanitizer, the
# multi-host tests (tests/cluster/run.sh) on the normal build, a release
# build (compiled only), then every fuzz harness for 20 s (scripts/fuzz.sh).
# The last three count as one test each.  Ends with each phase's time and
# one line "tests: N passed, M failed"; the exit status is non-zero if
# anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time, printed at the end: the suite must stay within
# CI's budget on the 2-core machine (CONTRIBUTING.md).
phase_times=()
phase_t0=$SECONDS
phase_done() {
    local s=$((SECONDS - phase_t0))
    phase_times+=("$(printf '  %-34s %3d:%02d' "$1" $((s / 60)) $((s % 60)))")
    phase_t0=$SECONDS
}

source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" "${FUZZ_PKGS[@]}"
scripts/browser-deps.sh
phase_done "packages"

passed=0 failed=0
# meson test's summary: "Ok: N", "Fail: N", "Timeout: N", ...
count() { sed -n "s/^$1: *\([0-9]*\).*/\1/p" "$2" | tail -n 1; }

# run_suite DIR [SETUP_ARGS...]; MESON_TEST_ARGS, if set, go to meson test.
run_suite() {
    local dir=$1; shift
    [ -d "$dir" ] || meson setup "$dir" "$@"
    meson compile -C "$dir"
    local log="$dir/test-summary.txt" rc=0
    # shellcheck disable=SC2086
    meson test -C "$dir" --print-errorlogs --num-processes 2 \
        ${MESON_TEST_ARGS:-} | tee "$log" || rc=$?
    local ok fail timeout xpass
    ok=$(count Ok "$log"); fail=$(count Fail "$log")
    timeout=$(count Timeout "$log"); xpass=$(count "Unexpected Pass" "$log")
    passed=$((passed + ${ok:-0}))
    failed=$((failed + ${fail:-0} + ${timeout:-0} + ${xpass:-0}))
    # A run that died before its summary still counts as a failure.
    [ "$rc" -eq 0 ] || [ $((${fail:-0} + ${timeout:-0} + ${xpass:-0})) -gt 0 ] \
        || failed=$((failed + 1))
}

# The allocation-failure tests (suite `alloc`) run once, under ASan: the
# same runs with every access checked, where a failed allocation's error
# path is most likely to touch freed or unset memory.
MESON_TEST_ARGS="--no-suite alloc" run_suite build
phase_done "build + meson test (build)"

# Multi-host tests (tests/cluster/run.sh): test hosts in network
# namespaces, worker groups across them, a real Slurm.  Needs root, as CI
# runs; it fails, naming the reason, where it cannot make its hosts.
if tests/cluster/run.sh build; then
    passed=$((passed + 1))
else
    echo "tests/cluster/run.sh FAILED" >&2
    failed=$((failed + 1))
fi
phase_done "tests/cluster/run.sh"
# Leak checking is on everywhere except under mpirun (tests/e2e/meson.build
# says why).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The two study tests (suite `study`) train whole smoke studies through the
# same daemon, worker and client paths that the other e2e tests run under
# ASan; they run once, in the normal build: under ASan they took 12 of the
# phase's minutes, alone.
# The benchmarks compile in the normal and release builds; no test runs
# them here.
MESON_TEST_ARGS="--no-suite study" \
    run_suite build-asan -Db_sanitize=address,undefined -Db_lundef=false \
        -Dbench=false
phase_done "build + meson test (build-asan)"

# The release build (scripts/bench.sh's) compiles too: -O3 brings
# warnings of its own (maybe-uninitialized), and -Werror makes them errors.
if { [ -d build-release ] || meson setup build-release -Dbuildtype=release -Dtests=false; } \
        && meson compile -C build-release; then
    passed=$((passed + 1))
else
    echo "the release build (build-release) does not compile" >&2
    failed=$((failed + 1))
fi
phase_done "release build"

# Every libFuzzer harness of tests/fuzz/ for 20 s: a crash fails the run.
if scripts/fuzz.sh 20; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
fi
phase_done "scripts/fuzz.sh 20"

echo "phases (minutes:seconds), $((SECONDS / 60)) minutes in all:"
printf '%s\n' "${phase_times[@]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
