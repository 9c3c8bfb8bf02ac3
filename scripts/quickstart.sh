#!/usr/bin/env bash
# Quickstart: installs what is missing, builds, trains one small job on the
# Dyck task standalone (no coordinator) and prints a short summary.
#   scripts/quickstart.sh [JOB_FILE]      (default configs/job-dyck.yaml)
# BUILD_DIR (default build) names the meson build directory.
# Every record the worker prints is kept in BUILD_DIR/quickstart/records.jsonl,
# the checkpoints in BUILD_DIR/quickstart/checkpoints/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}"

build=${BUILD_DIR:-build}
[ -d "$build" ] || meson setup "$build"
meson compile -C "$build" bifocal-worker

job=${1:-configs/job-dyck.yaml}
out=$build/quickstart
rm -rf "$out"
mkdir -p "$out"
echo "training $job (records: $out/records.jsonl)" >&2
"$build"/worker/bifocal-worker --job "$job" --checkpoint-dir "$out/checkpoints" \
    | tee "$out/records.jsonl" \
    | grep --line-buffered '"type":"train"' \
    | sed -u 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*/  step \1  loss \2/' >&2

# The last record is the run's summary:
#   {"type":"done","step":N,"train_loss":x,"stopped":b,"eval":[{...},...]}
done_line=$(tail -n 1 "$out/records.jsonl")
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2"; }
echo
echo "finished after $(field step "$done_line") steps"
echo "final train loss:  $(field train_loss "$done_line")"
grep -o '{"depth":[0-9]*,"loss":[^,]*,"accuracy":[^}]*}' <<<"$done_line" |
while read -r ev; do
    printf 'eval depth %-3s loss %-12s exact-match accuracy %s\n' \
        "$(field depth "$ev")" "$(field loss "$ev")" "$(field accuracy "$ev")"
done
echo "checkpoint: $(ls "$out"/checkpoints/step-*.safetensors | tail -n 1)"
