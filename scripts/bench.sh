#!/usr/bin/env bash
# Builds an optimised tree (-Dbuildtype=release) and runs the benchmarks,
# each printing its figures.  One BLAS thread per process: figures are per
# core.  Benchmarks: add a section below for yours.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
bf_install_pkgs "${BUILD_PKGS[@]}" "${BENCH_PKGS[@]}"
dir=${BENCH_BUILD_DIR:-build-bench}
[ -d "$dir" ] || meson setup "$dir" -Dbuildtype=release -Dtests=false
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

# Builds only benchmark $1, so that a part of the tree that does not build
# stops that benchmark alone.
build() {
    meson compile -C "$dir" "$1" >/dev/null || {
        echo "$1: does not build (see: meson compile -C $dir $1)"
        return 1
    }
}

echo "== bench_train: one training step of the model: portable levels, -Dmarch=native, PyTorch, the targets"
torch_args=()
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    torch_args=(--torch tests/reference/torch_ref.py)
fi
# the same tree built for this CPU only, the portable build's yardstick
[ -d "$dir-native" ] || meson setup "$dir-native" -Dbuildtype=release \
    -Dtests=false -Dmarch=native >/dev/null
native_args=()
meson compile -C "$dir-native" bench_train >/dev/null &&
    native_args=(--native "$dir-native/bench/bench_train")
build bench_train && "$dir/bench/bench_train" "${torch_args[@]}" \
    "${native_args[@]}"

echo "== bench_attention: the attention layer alone, fused small-head path and sgemm at the same heads, and the rule's pick, at every level with its own OpenBLAS core"
if build bench_attention; then
    for level in baseline avx2 avx512; do
        env -u OPENBLAS_CORETYPE BIFOCAL_ISA=$level \
            "$dir/bench/bench_attention" ||
            echo "bench_attention: level $level does not run on this CPU"
    done
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
        echo "(and the best level under this environment's OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)"
        "$dir/bench/bench_attention"
    fi
fi

echo "== bench_gemm: the linear layers' products alone, our gemm against OpenBLAS's sgemm, at every level with its own OpenBLAS core"
if build bench_gemm; then
    for level in baseline avx2 avx512; do
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE BIFOCAL_ISA=$level \
            "$dir/bench/bench_gemm" ||
            echo "bench_gemm: level $level does not run on this CPU, or its products differ"
    done
fi

echo "== bench_tasks: the code task's corpus, examples and steps beside dyck"
build bench_tasks && "$dir/bench/bench_tasks"

echo "== bench_store: 100k-job sweep submission, leasing, direct metric ingest"
build bench_store && "$dir/bench/bench_store"

echo "== bench_submit: a 100k-job sweep submitted through bifocald"
build bifocald && build bench_submit && "$dir/bench/bench_submit"

echo "== bench_wedge: the files that once wedged bifocald, and 1,000 spellings of code_dir"
build bifocald && build bench_wedge && "$dir/bench/bench_wedge"

echo "== bench_ingest: 16 loopback workers streaming metrics into bifocald, vs Optuna"
build bifocald && build bench_ingest && "$dir/bench/bench_ingest"

echo "== bench_dispatch: 64 worker groups leasing jobs from bifocald"
build bifocald && build bench_dispatch && "$dir/bench/bench_dispatch"

echo "== bench_load: 64 working groups beside 1,000 idle clients and 200 slow senders"
build bifocald && build bench_load && "$dir/bench/bench_load"

echo "== bench_group: worker group on config A, np=1 vs np=2, streaming overhead; a study job from lease to done"
build bench_group && build bifocald && bench/bench_group.sh "$dir"

echo "== bench_exec: records per second through bifocal-worker --exec against the built-in path, and an exec job's fixed cost"
build bifocald && build bifocal && build bifocal-worker && bench/bench_exec.sh "$dir"

echo "== bench_report: bifocal report on a 1,000-job sweep with 5M metric rows"
build bifocal && build bench_report && "$dir/bench/bench_report"

echo "== bench_outcomes_size: what per-example outcomes add to the study's database"
build bench_outcomes_size && "$dir/bench/bench_outcomes_size"

echo "== bench_dashboard: the dashboard on a 1,000-job sweep with 10M metric rows, and bifocald's ingest while it polls"
build bifocal && build bifocald && build bench_dashboard && "$dir/bench/bench_dashboard"

echo "== bench_results: results, compare and report of 1,000,000-job sweeps with and without results (--db; VIA=both adds bifocald)"
# It grows its sweeps from tests/results/results_fixture: a build with tests.
results_dir=${RESULTS_BUILD_DIR:-build}
if [ -x "$results_dir/tests/results/results_fixture" ]; then
    VIA=${VIA:-db} bench/bench_results.sh "$results_dir"
else
    echo "bench_results: needs a build with tests at $results_dir (RESULTS_BUILD_DIR)"
fi
