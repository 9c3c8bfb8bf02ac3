#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: once in a normal
# build and once under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}"

run_suite() {
    local dir=$1; shift
    [ -d "$dir" ] || meson setup "$dir" "$@"
    meson compile -C "$dir"
    meson test -C "$dir" --print-errorlogs --num-processes 2
}

run_suite build
# Leak checking is on everywhere except under mpirun (tests/e2e/meson.build
# says why).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run_suite build-asan -Db_sanitize=address,undefined -Db_lundef=false
