#!/usr/bin/env python3
"""A trainer for `bifocal-worker --exec` (docs/trainers.md), stdlib only.

It reads the job through python/bifocal_trainer.py and appends, with its
writers, the records `bifocal-worker --job` prints: a train record every
log_every steps, eval and outcomes records every eval_every steps, a freq
record every freq_every, a checkpoint (a safetensors file of one tensor)
and its record every checkpoint_every, then done.  --mode picks a way to
break the contract (those records are written by hand):

  train      the whole job, done, exit 0
  no-done    the whole job, no done record, exit 0
  fail       a fail record, exit 3
  malformed  two train records, then a line that is not a record; waits
  hang       starts an orphan in a session of its own (as torchrun starts
             ranks), writes its pid and the orphan's to
             $BIFOCAL_ATTEMPT_DIR/pids, streams train records forever
  long       a train record, then a line over 1 MiB; waits
  crash      exit 1 with a line on stderr
  --ignore-term  (with hang) both processes ignore SIGTERM
"""
import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import bifocal_trainer as bt  # noqa: E402


def append(out, record):
    out.write(json.dumps(record) + "\n")
    out.flush()


def train_record(step):
    return {"type": "train", "step": step, "loss": 2.0 / step, "lr": 0.001,
            "grad_norm": 1.0, "tokens_per_s": 1000.0}


def due(step, every, steps):
    return every > 0 and (step % every == 0 or step == steps)


def train(job, rec):
    cfg = job.config
    steps = cfg["steps"]
    # A free-form parameter (job.json's params) moves the eval loss, so
    # results that group by it differ.
    width = cfg.get("params", {}).get("width", 1)
    n = cfg.get("eval_examples", 128)
    correct = [i % 2 == 0 for i in range(n)]      # every other one right
    for step in range(job.resume_step + 1, steps + 1):
        if due(step, cfg.get("log_every", 10), steps):
            rec.train(step, 2.0 / step, 0.001, 1.0, 1000.0)
        if due(step, cfg.get("eval_every", 100), steps):
            for depth in cfg.get("eval_depths", [4, 8]):
                rec.eval(step, depth, 0.5 / width, 0.5, correct)
        if due(step, cfg.get("freq_every", 50), steps):
            rec.freq(step, 0, 1, [1.0, 0.5, 0.25])
        if due(step, cfg.get("checkpoint_every", 0), steps):
            path = job.checkpoint_path(step)
            bt.write_safetensors(path, [("wte.weight", [1, 2],
                                         [float(step), 0.5])],
                                 {"step": str(step)})
            rec.checkpoint(step, path)
        if job.should_stop():
            return step
    return steps


def orphan():
    """Starts a process as a launcher starts a rank: in a session of its
    own, its parent gone (so it is no descendant of ours any more); returns
    its pid."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())
            while True:
                time.sleep(0.05)
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    return int(os.read(r, 32))


def hang(out, ignore_term):
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pid = orphan()
    with open(os.path.join(os.environ["BIFOCAL_ATTEMPT_DIR"], "pids"),
              "w") as f:
        f.write("%d %d\n" % (os.getpid(), pid))
    step = 0
    while True:
        step += 1
        append(out, train_record(step))
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="train")
    ap.add_argument("--ignore-term", action="store_true")
    args = ap.parse_args()
    with open(os.environ["BIFOCAL_JOB"]) as f:
        cfg = json.load(f)
    print("fake trainer: job %s attempt %s, mode %s" % (
        os.environ["BIFOCAL_JOB_ID"], os.environ["BIFOCAL_ATTEMPT_ID"],
        args.mode))
    print("fake trainer: CUDA_VISIBLE_DEVICES=%s PYTHONUNBUFFERED=%s" % (
        os.environ.get("CUDA_VISIBLE_DEVICES"),
        os.environ.get("PYTHONUNBUFFERED")))
    tokens = [k for k in os.environ if k.startswith("BIFOCAL_TOKEN")]
    if tokens:
        print("fake trainer: token variables in my environment: %s" % tokens,
              file=sys.stderr)
        return 4
    if args.mode in ("train", "no-done"):
        job = bt.Job.from_env()
        rec = job.records()
        step = train(job, rec)
        if args.mode == "train":
            rec.done(step, 0.01, [], stopped=job.should_stop())
        return 0
    with open(os.environ["BIFOCAL_RECORDS"], "a") as out:
        if args.mode == "fail":
            append(out, train_record(1))
            append(out, {"type": "fail", "step": 1,
                         "error": "fake trainer: this job cannot run"})
            return 3
        if args.mode == "malformed":
            append(out, train_record(1))
            append(out, train_record(2))
            out.write('{"type": "train", "step": 3, "loss": "lots"}\n')
            out.flush()
            time.sleep(60)
            return 0
        if args.mode == "long":       # one line over the 1 MiB limit
            append(out, train_record(1))
            out.write('{"type": "fail", "step": 2, "error": "%s"}\n'
                      % ("x" * (1 << 20)))
            out.flush()
            time.sleep(60)
            return 0
        if args.mode == "hang":
            hang(out, args.ignore_term)
    print("fake trainer: crashing on purpose", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
