#!/usr/bin/env bash
# Multi-host tests on one machine (docs/cluster.md walks through the same
# steps): four test hosts in network namespaces (scripts/cluster-hosts.sh),
# the coordinator on h1, worker groups spanning hosts through mpirun
# --hostfile, and a real Slurm controller with a node daemon per host.
#
#   tests/cluster/run.sh [BUILD_DIR] [SCENARIO...]
#
# SCENARIO is 1, 2, 3, 4 or slurm (default: all, in that order).  With
# KEEP_WORK=1 the scratch directory (databases, logs) of the last scenario
# is kept and its path printed.  Exits 0
# only if every scenario passed; needs root (CI runs as root) and a kernel
# that allows network namespaces: anything else is a loud failure, never a
# skip.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(1 2 3 4 slurm)

die() { echo "tests/cluster: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root to create network namespaces (CI runs as root)"
for b in server/bifocald worker/bifocal-worker cli/bifocal; do
    [ -x "$BUILD/$b" ] || die "$BUILD/$b is missing: build first (meson compile -C $BUILD)"
done
source "$ROOT/scripts/deps.sh"
bf_install_pkgs "${CLUSTER_PKGS[@]}"

CLUSTER="bfc$$"
# Not under /tmp: each Slurm node gets a /tmp of its own (slurm.sh).
WORK=$(mktemp -d /var/tmp/bifocal-cluster.XXXXXX)
export CLUSTER WORK BUILD
source "$ROOT/tests/cluster/lib.sh"
source "$ROOT/tests/cluster/scenarios.sh"
source "$ROOT/tests/cluster/slurm.sh"

cleanup() {
    "$HOSTS" down "$CLUSTER"
    if [ -n "${KEEP_WORK:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap "exit 130" INT
trap "exit 143" TERM
# The kernel may refuse namespaces (a container without CAP_SYS_ADMIN,
# user.max_net_namespaces = 0): cluster-hosts.sh then names the reason.
"$HOSTS" up "$CLUSTER" 4 || die "cannot make the test hosts (see above)"

# Kills whatever a scenario left on the hosts and plugs every cable back in.
reset_hosts() {
    local k pids
    for k in 1 2 3 4; do
        "$HOSTS" join "$CLUSTER" "h$k"
        pids=$(ip netns pids "$CLUSTER-h$k")
        # shellcheck disable=SC2086
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    done
    [ -n "${KEEP_WORK:-}" ] || rm -rf "${WORK:?}"/*
}

passed=() failed=()
for s in "${scenarios[@]}"; do
    declare -F "scenario_$s" > /dev/null || die "no scenario '$s' (1, 2, 3, 4, slurm)"
    log "== scenario $s"
    t0=$SECONDS rc=0
    # A subshell per scenario: `fail` ends only that one, and its trap
    # stops the daemons and groups it started.
    ( trap 'stop_groups; stop_daemon; slurm_down' EXIT; "scenario_$s" ) || rc=$?
    if [ "$rc" = 0 ]; then
        passed+=("$s ($((SECONDS - t0)) s)")
    else
        failed+=("$s ($((SECONDS - t0)) s)")
    fi
    reset_hosts
done
echo "tests/cluster: passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
