"""python/bifocal_torch.py, the PyTorch trainer, against the built-in one
(`bifocal-worker --job`): from the same step-0 weights and the same
batches, its training losses track the built-in trainer's within 1e-3
relative over the first 50 steps at every encoding (none, rope, spectral,
bifocal, prope, pope), where the built-in's loss falls by a fifth at
least, and so do its learning rates, evals and frequencies,
on the counter and modarith tasks and with random positions too; a
wrong learning-rate schedule is caught by the same comparison; a resumed
run continues the uninterrupted one exactly; SIGTERM ends a run with a
checkpoint of its last step; `bifocal-worker eval` scores
its checkpoint, and the built-in trainer starts from it (init_from) as
the PyTorch trainer does; init_from a built-in checkpoint of another
variant (surgical integration) tracks the built-in trainer's init_from
too.

    test_bifocal_torch.py BIFOCAL_WORKER

Needs PyTorch (Debian's python3-torch, which scripts/deps.sh installs):
run by an interpreter without it, it re-runs itself with /usr/bin/python3,
and fails saying so when that has none either.
"""
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
try:
    import torch
except ImportError:
    if sys.executable != "/usr/bin/python3" and \
            os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("FAIL PyTorch is not installed for %s (nor /usr/bin/python3): "
          "scripts/deps.sh installs Debian's python3-torch" % sys.executable)
    sys.exit(1)
import bifocal_torch as btorch  # noqa: E402

WORKER = os.path.abspath(sys.argv[1])
ENCODINGS = ["none", "rope", "spectral", "bifocal", "prope", "pope"]
TOL = 1e-3
STEPS = 50
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def job(tmp, name, **fields):
    config = {"task": "dyck", "depth": 3, "eval_depths": [3, 4],
              "rope": "bifocal", "d_model": 16, "n_layers": 2,
              "n_heads": 2, "seq_len": 20, "batch_size": 4, "steps": STEPS,
              "warmup_steps": 5, "lr": 3e-3, "log_every": 1,
              "eval_every": 25, "freq_every": 10, "eval_examples": 16}
    config.update(fields)
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def records(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def builtin(job_file, checkpoint_dir=None):
    args = [WORKER, "--job", job_file]
    if checkpoint_dir:
        args += ["--checkpoint-dir", checkpoint_dir]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "bifocal-worker --job %s%s"
          % (os.path.basename(job_file),
             r.returncode and " (%s)" % r.stderr.strip()[-200:] or ""))
    return records(r.stdout)


def torch_trainer(job_file, *args):
    """The PyTorch trainer in this process (one torch import for all
    runs), standalone: its records."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = btorch.main(["--job", job_file, "--worker", WORKER,
                          "--threads", "1", *args])
    check(rc == 0, "bifocal_torch.py --job %s %s" % (
        os.path.basename(job_file), " ".join(args)))
    return records(out.getvalue())


def rel(a, b):
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-12)


def by_kind(recs, kind):
    return [r for r in recs if r["type"] == kind]


def worst(got, want, kind, field, key=lambda r: r["step"]):
    """The largest relative difference of field over the records of kind,
    matched by key; inf when the two lists do not pair up."""
    a = {key(r): r[field] for r in by_kind(got, kind)}
    b = {key(r): r[field] for r in by_kind(want, kind)}
    if not b or set(a) != set(b):
        return float("inf")
    return max(max(rel(x, y) for x, y in zip(a[k], b[k]))
               if isinstance(b[k], list) else rel(a[k], b[k]) for k in b)


def compare(got, want, what):
    """got (PyTorch) tracks want (built-in): every train loss and lr, every
    eval loss and outcome, every frequency.  Returns the worst train-loss
    difference."""
    loss = worst(got, want, "train", "loss")
    check(loss <= TOL, "%s: train losses within %g relative over %d "
          "records (worst %.2e)" % (what, TOL, len(by_kind(want, "train")),
                                    loss))
    lr = worst(got, want, "train", "lr")
    check(lr <= 1e-6, "%s: the same learning rates (worst %.2e)"
          % (what, lr))
    ev = worst(got, want, "eval", "loss",
               key=lambda r: (r["step"], r["depth"]))
    check(ev <= TOL, "%s: eval losses within %g (worst %.2e)"
          % (what, TOL, ev))
    outcomes = lambda recs: [(r["step"], r["depth"], r["n"], r["bits"])  # noqa
                             for r in by_kind(recs, "outcomes")]
    check(outcomes(got) == outcomes(want) and outcomes(want),
          "%s: the same per-example outcomes" % what)
    freq_key = lambda r: (r["step"], r["layer"], r["head"])  # noqa: E731
    fr = worst(got, want, "freq", "omega", key=freq_key) \
        if by_kind(want, "freq") else (0.0 if not by_kind(got, "freq")
                                       else float("inf"))
    check(fr <= TOL, "%s: the same frequency records, omega within %g "
          "(worst %.2e)" % (what, TOL, fr))
    check(by_kind(got, "done") and by_kind(got, "done")[0]["step"] ==
          by_kind(want, "done")[0]["step"], "%s: done at the same step"
          % what)
    return loss


def test_equivalence(tmp):
    figures = []
    for rope in ENCODINGS:
        f = job(tmp, rope, rope=rope)
        want = builtin(f)
        losses = [r["loss"] for r in by_kind(want, "train")]
        check(losses and losses[-1] < 0.8 * losses[0],
              "%s: the built-in trainer's loss falls (%s)"
              % (rope, losses and "%.3f -> %.3f" % (losses[0], losses[-1])))
        got = torch_trainer(f)
        figures.append((rope, compare(got, want, rope)))
    print("worst relative train-loss difference over %d steps: %s"
          % (STEPS, ", ".join("%s %.1e" % x for x in figures)))
    # the other tasks' vocabularies, and random positions
    for name, fields in (("counter", {"task": "counter", "modulus": 5}),
                         ("modarith", {"task": "modarith", "modulus": 5}),
                         ("random-positions", {"random_positions": 64})):
        f = job(tmp, name, seq_len=32, **fields)
        compare(torch_trainer(f), builtin(f), name)

    # The comparison can fail: the schedule without its warmup.
    f = job(tmp, "wrong-lr", rope="bifocal")
    want = builtin(f)
    right = btorch.lr_at
    btorch.lr_at = lambda facts, n: right(
        dict(facts, config=dict(facts["config"], warmup_steps=0)), n)
    try:
        got = torch_trainer(f)
    finally:
        btorch.lr_at = right
    check(worst(got, want, "train", "loss") > TOL,
          "a schedule without warmup is caught (worst %.2e)"
          % worst(got, want, "train", "loss"))


def test_checkpoint_resume(tmp):
    f = job(tmp, "ck", rope="bifocal", checkpoint_every=25)
    ck = os.path.join(tmp, "torch-ck")
    whole = torch_trainer(f, "--checkpoint-dir", ck)
    paths = [r["path"] for r in by_kind(whole, "checkpoint")]
    check([r["step"] for r in by_kind(whole, "checkpoint")] == [25, 50],
          "checkpoints at 25 and 50")
    resumed = torch_trainer(f, "--resume", paths[0])
    tail = [r for r in by_kind(whole, "train") if r["step"] > 25]
    check([(r["step"], r["loss"]) for r in by_kind(resumed, "train")] ==
          [(r["step"], r["loss"]) for r in tail],
          "resumed at 25, steps 26..50 repeat the uninterrupted run's "
          "losses exactly")
    c_ck = os.path.join(tmp, "builtin-ck")
    builtin(f, c_ck)
    inputs = os.path.join(tmp, "in.jsonl")
    with open(inputs, "w") as out:
        out.write('{"input": [3, 5, 4, 2], "target": [-1, -1, 6, 1]}\n')
        out.write('{"input": [3, 3, 2], "target": [-1, 4, 4]}\n')
    scores = []
    for path in (paths[1], os.path.join(c_ck, "step-000050.safetensors")):
        r = subprocess.run([WORKER, "eval", "--checkpoint", path, "--input",
                            inputs], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0, "bifocal-worker eval --checkpoint %s %s"
              % (os.path.basename(os.path.dirname(path)),
                 r.stderr.strip()[-200:]))
        scores.append(records(r.stdout)[-1]["mean_loss"] if r.stdout
                      else float("nan"))
    check(rel(scores[0], scores[1]) <= TOL, "eval scores the PyTorch "
          "checkpoint as the built-in one (%s)" % scores)
    # the other way: the built-in trainer starts from a PyTorch checkpoint
    f = job(tmp, "from-torch", rope="spectral", steps=20, warmup_steps=2,
            init_from=paths[1])
    compare(torch_trainer(f), builtin(f), "init_from a PyTorch checkpoint, "
            "both trainers")


def test_sigterm(tmp):
    """SIGTERM to the trainer's process group, as the worker sends it to
    every descendant (the data reader too): the trainer finishes its step,
    reports it, checkpoints and ends with done (stopped)."""
    f = job(tmp, "term", rope="bifocal", steps=100000, warmup_steps=10)
    ck = os.path.join(tmp, "term-ck")
    p = subprocess.Popen([sys.executable, btorch.__file__, "--job", f,
                          "--worker", WORKER, "--threads", "1",
                          "--checkpoint-dir", ck], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    recs = []
    for line in p.stdout:
        recs.append(json.loads(line))
        if recs[-1]["type"] == "train" and recs[-1]["step"] >= 20:
            os.killpg(p.pid, signal.SIGTERM)
            break
    recs += records(p.stdout.read())
    rc = p.wait(timeout=60)
    done = recs[-1]
    check(rc == 0 and done["type"] == "done" and done["stopped"] is True
          and 20 <= done["step"] < 100000, "SIGTERM: done, stopped, at "
          "step %s (exit %d)" % (done.get("step"), rc))
    last = done["step"]
    check([r["step"] for r in by_kind(recs, "checkpoint")] == [last] and
          os.path.isfile(by_kind(recs, "checkpoint")[0]["path"]),
          "SIGTERM: a checkpoint of the last step")
    check(by_kind(recs, "train")[-1]["step"] == last,
          "SIGTERM: the last step's train record")


def test_init_from(tmp):
    src = job(tmp, "src", rope="rope", steps=20, warmup_steps=2)
    c_ck = os.path.join(tmp, "src-ck")
    builtin(src, c_ck)
    source = os.path.join(c_ck, "step-000020.safetensors")
    f = job(tmp, "carried", rope="spectral", init_from=source, seed=7)
    want = builtin(f)
    got = torch_trainer(f)
    compare(got, want, "init_from a built-in rope checkpoint into spectral")
    fresh = torch_trainer(job(tmp, "fresh", rope="spectral", seed=7))
    check(worst(fresh, want, "train", "loss") > TOL,
          "a fresh start does not track it (init_from was used)")
    bad = job(tmp, "bad", rope="spectral", init_from=source, d_model=32)
    recs = torch_trainer(bad)
    check([r["type"] for r in recs] == ["fail"] and
          "shape [7, 16] in the checkpoint, [7, 32] in this model"
          in recs[0]["error"], "init_from of other shapes: a fail record "
          "naming the shapes (%s)" % recs[-1:])


def main():
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        test_equivalence(tmp)
        test_checkpoint_resume(tmp)
        test_sigterm(tmp)
        test_init_from(tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("%d failure(s)" % 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
