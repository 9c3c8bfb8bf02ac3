#!/usr/bin/env bash
# Before and after, side by side: bench_ingest and bench_load of two
# release trees (e.g. main's and a branch's) run alternately for ROUNDS
# rounds in one go (A B, then B A, ...), so that load from elsewhere hits
# both alike, and the median of each figure printed for each tree.
# usage: bench/bench_pair.sh BEFORE_BUILD AFTER_BUILD [ROUNDS [LOAD_SECONDS]]
#   (release trees with bifocald, bench_ingest and bench_load built, e.g.
#    meson setup B -Dbuildtype=release -Dtests=false &&
#    meson compile -C B bifocald bench_ingest bench_load; 3 rounds,
#    bench_load phases of 10 s)
set -euo pipefail
source "$(dirname "$0")/pair.sh"
[ $# -ge 2 ] || { sed -n '2,10p' "$0"; exit 2; }
trees=("$1" "$2")
rounds=${3:-3}
load_s=${4:-10}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One run of both benchmarks of tree index $1 in round $2.
run() {
    local t=${trees[$1]}
    BIFOCALD="$t/server/bifocald" "$t/bench/bench_ingest" \
        > "$out/ingest-$1-$2" 2>&1
    BIFOCALD="$t/server/bifocald" "$t/bench/bench_load" "$load_s" \
        > "$out/load-$1-$2" 2>&1
}
for ((r = 0; r < rounds; r++)); do
    bench_pair_round "$r"
done

# The figures: ingest rows/s and rows per daemon CPU-second, and bench_load's
# p99 of lease, heartbeat and metrics (the first table: the working groups).
python3 - "$out" "$rounds" "${trees[@]}" <<'PY'
import re, statistics, sys
out, rounds, trees = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def figures(i, r):
    f = {}
    ingest = open(f"{out}/ingest-{i}-{r}").read()
    m = re.search(r"= [\d,]+ rows in [\d.]+ s: ([\d.]+) rows/s", ingest) or \
        re.search(r"([\d.]+) rows/s", ingest)
    f["ingest rows/s"] = float(m.group(1))
    m = re.search(r"\(([\d.]+) rows per", ingest)
    if m:
        f["ingest rows per daemon CPU s"] = float(m.group(1))
    load = open(f"{out}/load-{i}-{r}").read().split("strangers:")[0]
    for what in ("lease", "heartbeat", "metrics"):
        m = re.search(rf"^{what}\s+\d+\s+p50\s+[\d.]+ ms\s+p99\s+([\d.]+) ms",
                      load, re.M)
        if m:
            f[f"load {what} p99 ms"] = float(m.group(1))
    return f
runs = [[figures(i, r) for r in range(rounds)] for i in range(len(trees))]
keys = list(runs[0][0])
print(f"{'median of ' + str(rounds) + ' rounds':<32} {'before':>12} {'after':>12} {'after/before':>13}")
for k in keys:
    med = [statistics.median(run[k] for run in runs[i]) for i in range(2)]
    print(f"{k:<32} {med[0]:>12.1f} {med[1]:>12.1f} {med[1] / med[0]:>13.2f}")
for i, t in enumerate(trees):
    for k in keys:
        print(f"  {t}: {k}: " + ", ".join(f"{run[k]:.1f}" for run in runs[i]))
PY
