#!/usr/bin/env bash
# The PyTorch trainer (python/bifocal_torch.py) beside the built-in one on
# CPU, one thread each, the same job run standalone (no coordinator):
#   builtin   bifocal-worker --job JOB
#   torch     PYTHON python/bifocal_torch.py --job JOB --threads 1
# JOB is the default model (d_model 64, 2 layers, 4 heads, seq_len 64,
# batch 32) on Dyck with rope ROPE (default bifocal), STEPS steps (default
# 200), a train record every step, no eval until the last step.  Prints
# per trainer the median tokens_per_s of its train records (the steps
# alone), its steps per second over the whole run's wall clock (start-up,
# data and evaluation included), the last train loss of each, and how far
# apart their losses are along the way (the same batches and initial
# weights: float32 rounding of two implementations is all that differs),
# and how long the PyTorch trainer's Python takes to draw the engine's
# initial weights (a fresh start without init_from).
# usage: bench/bench_torch_trainer.sh BUILD [STEPS] [ROPE]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,16p' "$0"; exit 2; }
build=$1 steps=${2:-200} rope=${3:-bifocal}
python=${PYTHON:-/usr/bin/python3}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/job.json" <<EOF
{"task": "dyck", "rope": "$rope", "steps": $steps, "warmup_steps": 20,
 "log_every": 1, "eval_every": 0, "freq_every": 0}
EOF

run() {   # NAME CMD...: the records in $tmp/NAME.jsonl, seconds in NAME.s
    local name=$1 t0 t1
    shift
    t0=$(date +%s.%N)
    "$@" > "$tmp/$name.jsonl" 2> "$tmp/$name.err"
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l > "$tmp/$name.s"
}
run builtin "$build/worker/bifocal-worker" --job "$tmp/job.json"
run torch "$python" python/bifocal_torch.py --job "$tmp/job.json" \
    --worker "$build/worker/bifocal-worker" --threads 1

"$python" - "$tmp" "$steps" <<'EOF'
import json, statistics, sys
tmp, steps = sys.argv[1], int(sys.argv[2])
rate = {}
for name in ("builtin", "torch"):
    recs = [json.loads(l) for l in open("%s/%s.jsonl" % (tmp, name))]
    train = [r for r in recs if r["type"] == "train"]
    tps = statistics.median(r["tokens_per_s"] for r in train)
    wall = float(open("%s/%s.s" % (tmp, name)).read())
    rate[name] = tps
    print("%-8s median %.0f tokens/s (steps only); %.1f steps/s over "
          "%.2f s wall clock; last loss %.6f"
          % (name, tps, steps / wall, wall, train[-1]["loss"]))
print("torch/builtin tokens/s: %.2f" % (rate["torch"] / rate["builtin"]))
loss = {}
for name in ("builtin", "torch"):
    loss[name] = {r["step"]: r["loss"] for r in map(json.loads, open(
        "%s/%s.jsonl" % (tmp, name))) if r["type"] == "train"}
sys.path.insert(0, "python")
import time, bifocal_torch as bt
t0 = time.perf_counter()
bt.rng_normals(bt.rng_key(1, 1), 1000000)
print("the engine's initial weights in Python: %.2f us a weight "
      "(1,000,000 drawn)" % (time.perf_counter() - t0))
print("relative train-loss difference: " + ", ".join(
    "step %d %.1e" % (s, abs(loss["torch"][s] - loss["builtin"][s])
                      / loss["builtin"][s])
    for s in (1, 25, 50, 75, 100, 150, 200) if s <= steps))
EOF
