#!/usr/bin/env bash
# Whole study jobs (1,500 steps with their evaluations, frequency records
# and checkpoints) trained by two trees' bifocal-worker --job, alternated
# for ROUNDS rounds (A B, then B A, ...) so load from elsewhere hits both
# alike; prints every run's wall time, the medians per job and tree and
# their ratio.  Unlike bench_study_pair.sh it needs nothing but the worker,
# so BEFORE can be any old tree, e.g. the portable build from before the
# runtime CPU dispatch (880fac6): what issue 17's "at least 2x faster than
# today's portable build" is measured against.  Lease, streaming and the
# done ack are left out; bench_group --study measures them at 0.1% of a job.
# The jobs are those of SWEEP (default configs/study-structure-gap.yaml)
# numbered JOBS (default "1 13": its NoPE and spectral Dyck jobs, seed 1),
# as AFTER's bifocald expands them.
# usage: bench/bench_job_pair.sh BEFORE_BUILD AFTER_BUILD [ROUNDS] [SWEEP] [JOBS]
#   (release trees with bifocal-worker; AFTER also with bifocald and
#    bifocal, e.g. meson setup B -Dbuildtype=release -Dtests=false &&
#    meson compile -C B; default 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,17p' "$0"; exit 2; }
trees=("$1" "$2")
rounds=${3:-3}
sweep=${4:-configs/study-structure-gap.yaml}
read -r -a jobs <<< "${5:-1 13}"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
source bench/daemon.sh
source bench/pair.sh
out=$bench_tmp

# The jobs' configs, as the coordinator hands them to a worker.
bench_daemon_start "${trees[1]}/server/bifocald" "$out"
"${trees[1]}/cli/bifocal" --server "127.0.0.1:$(cat "$out/port")" \
    --token-file "$out/bench.db.token" submit "$sweep" >/dev/null
bench_daemon_stop
# code_dir (the code task's corpus, unused by the formal tasks) came after
# the dispatch, and older workers refuse fields they do not know.
for j in "${jobs[@]}"; do
    sqlite3 "$out/bench.db" "SELECT json_remove(config, '$.code_dir') FROM
        jobs WHERE job_id = $j" > "$out/job-$j.json"
    [ -s "$out/job-$j.json" ] || { echo "no job $j in $sweep" >&2; exit 2; }
    echo "job $j: $(cat "$out/job-$j.json")"
done

# One job of tree index $1 in round $2: its wall time in seconds.
run() {
    local t=${trees[$1]} j=$3 start=$EPOCHREALTIME
    "$t/worker/bifocal-worker" --job "$out/job-$j.json" \
        --checkpoint-dir "$out/ck-$1-$2-$j" > /dev/null 2>&1
    echo "$1 $j $start $EPOCHREALTIME" >> "$out/times"
    echo "  $t, round $(($2 + 1)), job $j: $(awk 'END { printf "%.2f", $4 - $3 }' "$out/times") s"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
    for j in "${jobs[@]}"; do
        bench_pair_round "$r" "$j"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out/times" "${trees[@]}" <<'PY'
import statistics, sys
times, trees = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(times):
    tree, job, start, end = line.split()
    runs.setdefault((int(tree), job), []).append(float(end) - float(start))
print(f"{'median wall time':<18} {'before':>9} {'after':>9} {'before/after':>13}")
for job in dict.fromkeys(j for _, j in runs):
    before, after = (statistics.median(runs[(i, job)]) for i in (0, 1))
    print(f"{'job ' + job + ' s':<18} {before:>9.2f} {after:>9.2f} "
          f"{before / after:>12.2f}x")
print(f"before: {trees[0]}; after: {trees[1]}; target: after at least 2x "
      "faster (before/after >= 2.00x)")
PY
