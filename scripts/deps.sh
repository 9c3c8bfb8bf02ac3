#!/usr/bin/env bash
# Installs the Debian packages Bifocal needs, skipping what is already there.
# Sourced by quickstart.sh and test.sh; safe to run on its own.
set -euo pipefail

BUILD_PKGS=(meson ninja-build pkg-config gcc libc6-dev
            libuv1-dev libsqlite3-dev sqlite3 libjansson-dev libyaml-dev
            libcmocka-dev libopenmpi-dev openmpi-bin libopenblas-dev
            libhttp-parser-dev)
# The model's reference check (tests/reference/torch_check.py) runs PyTorch;
# tests/e2e/test_e2e_run.sh looks for leftover processes with pgrep.
# The report's and the dashboard's browser tests (tests/results/browser)
# drive Debian's chromium with playwright-core from npm
# (scripts/browser-deps.sh installs it; npm is Debian's package unless the
# installed nodejs brings its own).  tests/cli/test_watch_tmux.py drives
# `bifocal watch` in tmux; test_dashboard_http.py reaches the dashboard from
# another host in network namespaces (iproute2, util-linux's unshare).
# tests/e2e/test_e2e_study.sh runs scripts/study.sh frequency, which reads
# the sweep files with python3-yaml, the slim database with sqlite3 and
# compare's JSON with jq.
TEST_PKGS=(python3-torch python3-numpy python3-scipy procps chromium nodejs tmux iproute2
           util-linux python3-yaml sqlite3 jq)
# scripts/coverage.sh: line coverage per folder.
COVERAGE_PKGS=(gcovr)
# scripts/fuzz.sh: libFuzzer harnesses need clang and its runtime.
FUZZ_PKGS=(clang libclang-rt-14-dev)
# The benchmarks' reference implementations.
BENCH_PKGS=(python3-torch python3-optuna python3-numpy)
# tests/cluster: test hosts in network namespaces (iproute2, util-linux's
# unshare), a real Slurm controller and node daemons, MUNGE for their auth.
CLUSTER_PKGS=(iproute2 util-linux slurm-wlm munge sqlite3 procps)

bf_missing_pkgs() {
    local p missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done
    echo "${missing[@]:-}"
}

bf_install_pkgs() {
    local missing
    missing=$(bf_missing_pkgs "$@")
    [ -z "$missing" ] && return 0
    echo "installing: $missing" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=300 install -y -qq $missing
}

# Open MPI refuses to run as root unless told it is intended (CI runs as root).
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# One BLAS thread per process unless the caller says otherwise.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    bf_install_pkgs "${BUILD_PKGS[@]}"
    [ "${1:-}" = "--bench" ] && bf_install_pkgs "${BENCH_PKGS[@]}"
fi
