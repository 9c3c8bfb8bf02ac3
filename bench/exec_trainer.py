#!/usr/bin/env python3
"""The trainer of bench/bench_exec.sh: a train record for every step of
its job as fast as python/bifocal_trainer.py writes them, then done; the
exec path's capacity, with no training in the way."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import bifocal_trainer as bt  # noqa: E402

job = bt.Job.from_env()
rec = job.records()
steps = job.config["steps"]
for step in range(job.resume_step + 1, steps + 1):
    rec.train(step, 1.0 / step, 0.001, 1.0, 1000.0)
rec.done(steps, 1.0 / steps, [])
