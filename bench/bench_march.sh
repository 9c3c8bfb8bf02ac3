#!/usr/bin/env bash
# What the portable default build costs: one training step of config A
# (bench/bench_train --child A) built without -march (meson's default, runs
# on every x86-64 CPU), with -Dmarch=x86-64-v3 (AVX2 + FMA: Haswell, Zen
# and later) and with -Dmarch=native (this CPU only).  The builds alternate
# three times and the best step of each counts, so that load from
# elsewhere hits all alike.  Prints tokens/s side by side and the ratios.
# usage: bench/bench_march.sh [BUILD_PREFIX] [STEPS]
#   (release trees BUILD_PREFIX-{portable,x86-64-v3,native}; default
#    build-march, 10 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-build-march}
steps=${2:-10}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

variants=(portable x86-64-v3 native)
for v in "${variants[@]}"; do
    march=$v
    [ "$v" = portable ] && march=""
    [ -d "$prefix-$v" ] || meson setup "$prefix-$v" -Dbuildtype=release \
        -Dtests=false -Dmarch="$march" > /dev/null
    meson compile -C "$prefix-$v" bench_train > /dev/null
done

declare -A best=()
tps() { sed -n 's/.* tokens_per_s=\([0-9.]*\).*/\1/p' <<<"$1"; }
for _ in 1 2 3; do
    for v in "${variants[@]}"; do
        out=$("$prefix-$v/bench/bench_train" --child A "$steps")
        t=$(tps "$out")
        echo "$v: $out"
        awk -v a="$t" -v b="${best[$v]:-0}" 'BEGIN { exit !(a > b) }' && best[$v]=$t
    done
done
awk -v p="${best[portable]}" -v v3="${best[x86-64-v3]}" -v n="${best[native]}" 'BEGIN {
    printf "config A tokens/s (best of 3): portable %.0f | -Dmarch=x86-64-v3 %.0f (%.2fx) | -Dmarch=native %.0f (%.2fx)\n",
        p, v3, v3 / p, n, n / p }'
