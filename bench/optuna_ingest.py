#!/usr/bin/python3
"""The reference for bench_ingest: the same kind of metric ingest through
Optuna's RDB storage on SQLite, i.e. `trial.report(value, step)` per metric
row.  One trial per simulated worker, run one after another (Optuna's SQLite
storage serialises writers anyway).  Prints one line ending in
`rows_per_s=X`, which bench_ingest parses."""
import argparse
import logging
import os
import tempfile
import time

import optuna


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--reports", type=int, default=200,
                    help="reports (metric rows) per worker")
    args = ap.parse_args()
    optuna.logging.set_verbosity(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        storage = "sqlite:///" + os.path.join(tmp, "optuna.db")
        study = optuna.create_study(storage=storage, study_name="ingest")
        t0 = time.perf_counter()
        for _ in range(args.workers):
            trial = study.ask()
            for step in range(args.reports):
                trial.report(2.0 / (1.0 + step), step)
            study.tell(trial, 0.0)
        elapsed = time.perf_counter() - t0
        rows = args.workers * args.reports
        stored = sum(len(t.intermediate_values) for t in study.trials)
        assert stored == rows, (stored, rows)
    print(f"optuna sqlite ingest: {rows} reports in {elapsed:.3f} s: "
          f"rows_per_s={rows / elapsed:.0f}")


if __name__ == "__main__":
    main()
