#!/usr/bin/env bash
# Worker-group benchmarks on config A (bench/bench_group.c):
#   1. throughput of one group with np=1 and np=2, side by side, and the
#      ratio (target: np=2 >= 1.8x np=1 on a 2-core machine);
#   2. the overhead of streaming every record (log_every 1, freq_every 1)
#      to a real bifocald, against the same job with records dropped
#      (target: under 2% of step time);
#   3. a whole study job from lease to done, broken down into train, eval,
#      frequency records, checkpoints and streaming (target: all but train
#      under 10% of the job).
# usage: bench/bench_group.sh [BUILD_DIR] [STEPS]   (default build-bench, 60)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-bench}
steps=${2:-60}
export OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# One rank per core, bound: --oversubscribe would put Open MPI in its
# yield-when-idle mode, which costs the np=2 run ~10%.  Rank 0's network
# thread shares rank 0's core, as it does on a fully used node.
mpi=(mpirun --bind-to core -x OPENBLAS_NUM_THREADS)
bench="$dir/bench/bench_group"

source bench/daemon.sh
tmp=$bench_tmp

# np=1 and np=2 alternate three times and the best of each counts, so that
# a burst of load from elsewhere on a shared machine hits both sides alike.
tps() { sed -n 's/.* \([0-9]*\) tokens\/s.*/\1/p' <<<"$1"; }
best1=0 best2=0
for _ in 1 2 3; do
    one=$("${mpi[@]}" -np 1 "$bench" --steps "$steps")
    two=$("${mpi[@]}" -np 2 "$bench" --steps "$steps")
    echo "$one"
    echo "$two"
    [ "$(tps "$one")" -gt "$best1" ] && best1=$(tps "$one")
    [ "$(tps "$two")" -gt "$best2" ] && best2=$(tps "$two")
done
awk -v a="$best1" -v b="$best2" \
    'BEGIN { printf "np=2 / np=1 throughput (best of 3 each): %d / %d tokens/s = %.2fx (target >= 1.8x)\n", b, a, b / a }'

bench_daemon_start "$dir/server/bifocald" "$tmp"
"${mpi[@]}" -np 1 "$bench" --steps "$steps" \
    --server "127.0.0.1:$(cat "$tmp/port")" --token-file "$tmp/bench.db.token"

# A whole study job (the first of configs/study-structure-gap.yaml: 1,500
# steps at the study's size) from lease to done through the same
# bifocald, with its checkpoints on disk, broken down by part.
mkdir "$tmp/checkpoints"
"${mpi[@]}" -np 1 "$bench" --server "127.0.0.1:$(cat "$tmp/port")" \
    --token-file "$tmp/bench.db.token" \
    --study configs/study-structure-gap.yaml \
    --checkpoint-dir "$tmp/checkpoints"
