#!/usr/bin/env bash
# Records per second through bifocal-worker --exec against the built-in
# path, side by side on one coordinator, and the fixed cost of an exec job.
#   built-in  one job of STEPS steps, a train record each, trained by a
#             worker group of one rank on the smallest model (d_model 16,
#             one layer), so the records, not the model, are the work;
#   exec      the same job with `trainer: bench`, whose trainer
#             (bench/exec_trainer.py, python/bifocal_trainer.py's writers)
#             writes its STEPS train records as fast as it can;
#   fixed     JOBS exec jobs of one step each: lease to done, per job,
#             beside the interpreter's own start-up (PYTHON, default the
#             python3 on PATH: a pyenv shim costs most of a second).
# Rates are each job's train rows over its finished_ms - started_ms in the
# coordinator's database (first lease to done).  Target: exec at least
# half the built-in rate (issue 45).
# usage: bench/bench_exec.sh BUILD [STEPS] [JOBS]   (default 20000 steps,
#        20 one-step jobs)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,19p' "$0"; exit 2; }
build=$1 steps=${2:-20000} jobs=${3:-20}
python=${PYTHON:-$(command -v python3)}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source bench/daemon.sh
out=$bench_tmp
bench_daemon_start "$build/server/bifocald" "$out"
server="127.0.0.1:$(cat "$out/port")" token="$out/bench.db.token"

base="task: dyck, depth: 2, eval_depths: [2], d_model: 16, n_layers: 1,
      n_heads: 2, seq_len: 16, batch_size: 4, steps: $steps,
      warmup_steps: 0, log_every: 1, eval_every: $steps, freq_every: 0,
      checkpoint_every: 0, eval_examples: 8"
submit() {   # NAME TRAINER SEEDS [STEPS]
    printf 'name: %s\nbase: {%s, trainer: %s}\nseeds: %s\n' "$1" \
        "${base/steps: $steps/steps: ${4:-$steps}}" "$2" "$3" > "$out/$1.yaml"
    "$build/cli/bifocal" --server "$server" --token-file "$token" \
        submit "$out/$1.yaml" > /dev/null
}
submit builtin builtin 1
mpirun -np 1 "$build/worker/bifocal-worker" --server "$server" \
    --token-file "$token" --exit-when-idle --idle-grace 0 \
    --log-level warn > /dev/null 2>&1
submit exec bench 1
submit fixed bench "$jobs" 1
"$build/worker/bifocal-worker" --server "$server" --token-file "$token" \
    --exec "$python $PWD/bench/exec_trainer.py" --trainer bench \
    --work-dir "$out/exec" --exit-when-idle --idle-grace 0 \
    --log-level warn > /dev/null 2>&1
bench_daemon_stop
sqlite3 "$out/bench.db" "SELECT job_id, error FROM jobs WHERE status != 'succeeded' LIMIT 2" >&2

sqlite3 -separator ' ' "$out/bench.db" "
SELECT s.name, j.status, count(m.step), j.finished_ms - j.started_ms
  FROM jobs j JOIN sweeps s USING (sweep_id)
  LEFT JOIN metrics m ON m.job_id = j.job_id AND m.key = 'loss'
 GROUP BY j.job_id ORDER BY j.job_id" > "$out/jobs"
python3 - "$out/jobs" "$steps" "$python" <<'PY'
import statistics, subprocess, sys, time
rows = [l.split() for l in open(sys.argv[1])]
steps, python = int(sys.argv[2]), sys.argv[3]
bad = [r for r in rows if r[1] != "succeeded"]
if bad:
    sys.exit("jobs that did not succeed: %s" % bad)
rate = {}
for name in ("builtin", "exec"):
    (_, _, n, ms), = [r for r in rows if r[0] == name]
    if int(n) != steps:
        sys.exit("%s: %s loss rows, %d expected" % (name, n, steps))
    rate[name] = int(n) / (int(ms) / 1000)
    print("%-8s %6d records in %6.2f s: %8.0f records/s"
          % (name, int(n), int(ms) / 1000, rate[name]))
print("exec / built-in: %.2fx (target: at least 0.50x)"
      % (rate["exec"] / rate["builtin"]))
fixed = [int(r[3]) for r in rows if r[0] == "fixed"]
print("fixed cost of an exec job (lease to done, one record), %d jobs: "
      "median %.0f ms, min %d ms, max %d ms"
      % (len(fixed), statistics.median(fixed), min(fixed), max(fixed)))
starts = []
for _ in range(5):
    t0 = time.monotonic()
    subprocess.run([python, "-c", "pass"], check=True)
    starts.append((time.monotonic() - t0) * 1000)
print("of which %s starting: median %.0f ms (5 runs of -c pass)"
      % (python, statistics.median(starts)))
PY
