#!/usr/bin/env bash
# Before and after, side by side: the attention layer alone (bench_attention,
# forward + backward, both paths at the heads of the study, config A and
# config B) for two release trees, run alternately for ROUNDS rounds (each
# round one bench_attention run of its best of 3).  Prints, per shape and
# path, each tree's median milliseconds and the median of the rounds'
# ratios (before / after: above 1 is faster after).  A path the change
# does not touch is the gauge of the machine's noise.
# usage: bench/bench_attention_pair.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]
#   ROUNDS default 6; release trees with bench_attention built, e.g.
#   meson setup B -Dbuildtype=release -Dtests=false.  BIFOCAL_ISA picks
#   the level (default the widest the CPU has), each level with its own
#   OpenBLAS core.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
trees=("$1" "$2")
rounds=${3:-6}
source "$(dirname "$0")/pair.sh"
bench_pair_start

# "T hd path ms" lines of tree $1 in round $2, into $out/$1-$2
run() {
    "${trees[$1]}/bench/bench_attention" 3 |
        awk '$1 == "T" && ($5 == "fused" || $5 == "sgemm") && $7 == "ms" {
                 print $2, $4, $5, $6 }' > "$out/$1-$2"
}
bench_pair_rounds "$rounds"
echo "bench_attention 3, ${BIFOCAL_ISA:-widest} level, $rounds alternated" \
     "rounds, milliseconds"
python3 - "$out" "$rounds" "${trees[@]}" <<'PY'
import collections, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
ms = collections.defaultdict(lambda: ([], []))  # (T, hd, path) -> runs
for tree in (0, 1):
    for r in range(rounds):
        for line in open(f"{out}/{tree}-{r}"):
            T, hd, path, t = line.split()
            ms[(int(T), int(hd), path)][tree].append(float(t))
print("  %-22s %10s %10s  %s" % ("seq, head_dim, path", "before", "after",
                                 "before / after"))
for key in sorted(ms):
    before, after = ms[key]
    if len(before) != rounds or len(after) != rounds:
        continue  # a path one tree runs and the other does not
    ratios = [b / a for b, a in zip(before, after)]
    print("  %-22s %10.3f %10.3f  x%.3f  (rounds: %s)"
          % ("%d, %d, %s" % key, statistics.median(before),
             statistics.median(after), statistics.median(ratios),
             " ".join("x%.2f" % x for x in ratios)))
PY
