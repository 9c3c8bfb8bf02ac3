#!/usr/bin/env bash
# Data-parallel throughput of one 2-rank group on config A (bench_group)
# with its ranks on two test hosts, against the same group on one host:
# the gradient allreduce over a real network stack (TCP over veth and a
# bridge, scripts/cluster-hosts.sh) against shared memory.  Both run on the
# same two cores, unbound (each "host" would bind its rank to core 0), and
# alternate three times; the best of each counts.  Needs root.
# usage: bench/bench_cluster.sh [BUILD_DIR] [STEPS]   (default build-bench, 60)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(cd "${1:-build-bench}" && pwd)
steps=${2:-60}
[ "$(id -u)" -eq 0 ] || { echo "bench_cluster: needs root (network namespaces)" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
hosts="$PWD/scripts/cluster-hosts.sh"
export BF_CLUSTER="bfb$$"
tmp=$(mktemp -d)
trap '"$hosts" down "$BF_CLUSTER"; rm -rf "$tmp"' EXIT
"$hosts" up "$BF_CLUSTER" 3
printf 'h2 slots=1\nh3 slots=1\n' > "$tmp/two-hosts"
printf 'h2 slots=2\n' > "$tmp/one-host"

run() {   # run HOSTFILE BTL
    "$hosts" exec "$BF_CLUSTER" h2 mpirun --hostfile "$1" -np 2 \
        --bind-to none --mca plm_rsh_agent "$hosts rsh" --mca btl "$2" \
        --mca btl_tcp_if_include 10.213.0.0/24 \
        --mca oob_tcp_if_include 10.213.0.0/24 -x OPENBLAS_NUM_THREADS \
        "$dir/bench/bench_group" --steps "$steps"
}
tps() { sed -n 's/.* \([0-9]*\) tokens\/s.*/\1/p' <<<"$1"; }
one=0 two=0
for _ in 1 2 3; do
    a=$(run "$tmp/one-host" vader,self)
    b=$(run "$tmp/two-hosts" tcp,self)
    echo "one host (shared memory): $a"
    echo "two hosts (TCP over veth): $b"
    [ "$(tps "$a")" -gt "$one" ] && one=$(tps "$a")
    [ "$(tps "$b")" -gt "$two" ] && two=$(tps "$b")
done
awk -v a="$one" -v b="$two" 'BEGIN { printf "2 ranks on two hosts / on one host (best of 3 each): %d / %d tokens/s = %.3fx\n", b, a, b / a }'
