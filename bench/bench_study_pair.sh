#!/usr/bin/env bash
# A whole study job from lease to done (bench_group --study, the last part
# of bench/bench_group.sh: the first job of configs/study-structure-gap.yaml,
# 1,500 steps at the study's size, evaluations, frequency records and
# checkpoints, every record streamed to a real bifocald), for two release
# trees (e.g. main's and a branch's) run alternately for ROUNDS rounds in
# one go (A B, then B A, ...), so that load from elsewhere hits both alike.
# Prints each run's breakdown, the median of each part per tree, the ratio
# of the medians and the load average before and after.
# usage: bench/bench_study_pair.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
#   (release trees with bifocald and bench_group built, e.g.
#    meson setup B -Dbuildtype=release -Dtests=false &&
#    meson compile -C B bifocald bench_group; default 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
trees=("$1" "$2")
rounds=${3:-3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
source bench/daemon.sh
source bench/pair.sh
out=$bench_tmp

# One study job of tree index $1 in round $2, through its own bifocald on a
# fresh database.
run() {
    local t=${trees[$1]} dir="$out/run-$1-$2"
    mkdir -p "$dir/checkpoints"
    bench_daemon_start "$t/server/bifocald" "$dir"
    mpirun --bind-to core -x OPENBLAS_NUM_THREADS -np 1 "$t/bench/bench_group" \
        --server "127.0.0.1:$(cat "$dir/port")" \
        --token-file "$dir/bench.db.token" \
        --study configs/study-structure-gap.yaml \
        --checkpoint-dir "$dir/checkpoints" > "$out/study-$1-$2"
    bench_daemon_stop
    echo "== $t, round $(($2 + 1))"
    cat "$out/study-$1-$2"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
    bench_pair_round "$r"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$rounds" "${trees[@]}" <<'PY'
import re, statistics, sys
out, rounds, trees = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def figures(i, r):
    text = open(f"{out}/study-{i}-{r}").read()
    f = {"lease to done s":
         float(re.search(r"lease to done ([\d.]+) s", text).group(1))}
    for part in ("train", "eval", "checkpoints"):
        f[f"{part} s"] = float(re.search(rf"^  {part}\s+([\d.]+) s", text,
                                         re.M).group(1))
    return f
runs = [[figures(i, r) for r in range(rounds)] for i in range(len(trees))]
print(f"{'median of ' + str(rounds) + ' rounds':<24} {'before':>10} "
      f"{'after':>10} {'before/after':>13}")
for k in runs[0][0]:
    med = [statistics.median(run[k] for run in runs[i]) for i in range(2)]
    ratio = f"{med[0] / med[1]:.2f}x" if med[1] > 0 else "-"
    print(f"{k:<24} {med[0]:>10.2f} {med[1]:>10.2f} {ratio:>13}")
for i, t in enumerate(trees):
    print(f"  {t}: lease to done s: " +
          ", ".join(f"{run['lease to done s']:.2f}" for run in runs[i]))
print("target: after at least 2x faster from lease to done (before/after "
      ">= 2.00x)")
PY
