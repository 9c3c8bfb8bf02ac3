# Before and after, side by side: the round the bench_*_pair.sh scripts
# share; source it, define
#   run TREE ROUND [ARGS...]    one run of tree 0 (before) or 1 (after)
# and call
#   bench_pair_round ROUND [ARGS...]
# for each round: both trees run, before first in even rounds and after
# first in odd ones, so that load from elsewhere and warm caches favour
# neither.
bench_pair_round() {
    local r=$1
    shift
    if ((r % 2 == 0)); then
        run 0 "$r" "$@"; run 1 "$r" "$@"
    else
        run 1 "$r" "$@"; run 0 "$r" "$@"
    fi
}
