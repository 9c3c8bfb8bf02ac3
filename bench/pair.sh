# Before and after, side by side: the round the bench_*_pair.sh scripts
# share; source it, define
#   run TREE ROUND [ARGS...]    one run of tree 0 (before) or 1 (after)
# and call
#   bench_pair_round ROUND [ARGS...]
# for each round (or bench_pair_rounds ROUNDS for all of them): both
# trees run, before first in even rounds and after first in odd ones, so
# that load from elsewhere and warm caches favour neither.
# bench_pair_start sets up what the kernels' pairs share: one BLAS
# thread, each dispatch level with its own OpenBLAS core (the image's
# pin unset), and $out, a scratch folder removed at exit.
bench_pair_round() {
    local r=$1
    shift
    if ((r % 2 == 0)); then
        run 0 "$r" "$@"; run 1 "$r" "$@"
    else
        run 1 "$r" "$@"; run 0 "$r" "$@"
    fi
}

bench_pair_rounds() {
    local r
    for ((r = 0; r < $1; r++)); do
        bench_pair_round "$r"
    done
}

bench_pair_start() {
    export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
    unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
}
