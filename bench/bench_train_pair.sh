#!/usr/bin/env bash
# Before and after, side by side: one training step of the model
# (bench_train --child, the best step of a run) for two release trees
# (e.g. main's and a branch's), run alternately for ROUNDS rounds in one go
# (A B, then B A, ...), so that load from elsewhere hits both alike.
# Prints each tree's min/median/max tokens/s and the median of the
# rounds' ratios (after / before), with every round's ratio.
# usage: bench/bench_train_pair.sh BEFORE_BUILD AFTER_BUILD [CONFIG [STEPS [ROUNDS]]]
#   CONFIG study|A|B (default study), STEPS a run (default 100), ROUNDS
#   (default 6); release trees with bench_train built, e.g.
#   meson setup B -Dbuildtype=release -Dtests=false &&
#   meson compile -C B bench_train.  BIFOCAL_ISA picks the level (default
#   the widest the CPU has), each level with its own OpenBLAS core.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
trees=("$1" "$2")
config=${3:-study} steps=${4:-100} rounds=${5:-6}
source "$(dirname "$0")/pair.sh"
bench_pair_start

# tokens/s of tree $1 in round $2, into $out/$1-$2
run() {
    "${trees[$1]}/bench/bench_train" --child "$config" "$steps" |
        sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p' > "$out/$1-$2"
}
bench_pair_rounds "$rounds"
echo "bench_train --child $config $steps, ${BIFOCAL_ISA:-widest} level," \
     "$rounds alternated rounds"
python3 - "$out" "$rounds" "${trees[@]}" <<'EOF'
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
before, after = ([float(open(f"{out}/{i}-{r}").read()) for r in range(rounds)]
                 for i in (0, 1))
for tree, xs in zip(sys.argv[3:5], (before, after)):
    print("  %-40s tokens/s min %.0f median %.0f max %.0f"
          % (tree, min(xs), statistics.median(xs), max(xs)))
ratios = [a / b for a, b in zip(after, before)]
print("  after / before: median x%.3f  (rounds: %s)"
      % (statistics.median(ratios), " ".join("x%.2f" % r for r in ratios)))
EOF
