"""python/bifocal_trainer.py against the real programs: its safetensors
writer carries a checkpoint of the built-in trainer over so that
`bifocal-worker eval` scores it exactly as the original, under the GPT-2
names it lists; its record writers print what the contract says (rank 0
only, non-finite numbers spelled); SIGTERM sets its stop flag; an atomic
write leaves nothing beside the file.  (Every record it writes for a job
is also checked by the real worker in test_e2e_exec.)

    test_bifocal_trainer.py BIFOCAL_WORKER
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "python")
sys.path.insert(0, PYTHON_DIR)
import bifocal_trainer as bt  # noqa: E402

WORKER = sys.argv[1]
TINY_JOB = {"task": "dyck", "depth": 3, "eval_depths": [3], "rope": "bifocal",
            "d_model": 16, "n_layers": 2, "n_heads": 2, "seq_len": 16,
            "batch_size": 4, "steps": 4, "warmup_steps": 1, "log_every": 2,
            "eval_every": 4, "freq_every": 4, "checkpoint_every": 4,
            "eval_examples": 8}
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def worker(*args):
    return subprocess.run([WORKER, *args], capture_output=True, text=True,
                          timeout=120)


def test_checkpoint_carried_over(tmp):
    job = os.path.join(tmp, "job.json")
    with open(job, "w") as f:
        json.dump(TINY_JOB, f)
    ck = os.path.join(tmp, "ck")
    r = worker("--job", job, "--checkpoint-dir", ck)
    check(r.returncode == 0, "the built-in trainer wrote a checkpoint "
          "(%s)" % r.stderr.strip()[-200:])
    original = os.path.join(ck, "step-000004.safetensors")
    metadata, tensors = bt.read_safetensors(original)
    names = [n for n, _, _ in tensors]
    weights = bt.gpt2_names(TINY_JOB["n_layers"])
    check(names[:len(weights)] == weights,
          "the engine writes the weights in gpt2_names' order")
    check(names[len(weights):] ==
          ["optimizer.exp_avg." + n for n in weights] +
          ["optimizer.exp_avg_sq." + n for n in weights],
          "then the moments, first and second, by the same names")
    # as a trainer has them: numbers, not the file's bytes
    numbers = [(n, shape, struct.unpack("<%df" % (len(b) // 4), b))
               for n, shape, b in tensors]
    copy = os.path.join(tmp, "copy.safetensors")
    bt.write_safetensors(copy, numbers, metadata)
    inputs = os.path.join(tmp, "in.jsonl")
    with open(inputs, "w") as f:
        f.write('{"input": [3, 5, 4, 2], "target": [-1, -1, 6, 1]}\n')
        f.write('{"input": [3, 3, 2], "target": [-1, 4, 4]}\n')
    a = worker("eval", "--checkpoint", original, "--input", inputs)
    b = worker("eval", "--checkpoint", copy, "--input", inputs)
    check(a.returncode == 0 and a.stdout.strip() != "",
          "eval scores the original (%s)" % a.stderr.strip()[-200:])
    check(b.returncode == 0 and b.stdout == a.stdout,
          "eval scores the copy written by write_safetensors the same "
          "(%s)" % b.stderr.strip()[-200:])
    check(not [n for n in os.listdir(tmp) if ".tmp." in n],
          "the atomic write left no temporary file")


SCRIPT = """
import json, os, signal, sys
sys.path.insert(0, %r)
import bifocal_trainer as bt
job = bt.Job.standalone(sys.argv[1])
rec = job.records()
rec.train(1, float("nan"), 0.001, float("inf"), 10.0)
rec.eval(2, 3, 0.5, 0.25, [True, False, False, True, True, False, False,
                            False, True])
rec.freq(2, 0, 1, [1.0, float("-inf")])
os.kill(os.getpid(), signal.SIGTERM)
rec.done(2, 0.5, [(3, 0.5, 0.25)], stopped=job.should_stop())
rec.fail(2, "no GPU")
""" % PYTHON_DIR


def test_records(tmp):
    job = os.path.join(tmp, "job.json")
    with open(job, "w") as f:
        json.dump(TINY_JOB, f)
    script = os.path.join(tmp, "trainer.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    env = dict(os.environ)
    env.pop("RANK", None)
    r = subprocess.run([sys.executable, script, job], capture_output=True,
                       text=True, env=env, timeout=60)
    lines = r.stdout.splitlines()
    want = [
        '{"type":"train","step":1,"loss":"nan","lr":0.001,'
        '"grad_norm":"inf","tokens_per_s":10.0}',
        '{"type":"eval","step":2,"depth":3,"loss":0.5,"accuracy":0.25}',
        '{"type":"outcomes","step":2,"depth":3,"n":9,"bits":"1901"}',
        '{"type":"freq","step":2,"layer":0,"head":1,"omega":[1.0,"-inf"]}',
        '{"type":"done","step":2,"train_loss":0.5,"stopped":true,'
        '"eval":[{"depth":3,"loss":0.5,"accuracy":0.25}]}',
        '{"type":"fail","step":2,"error":"no GPU"}',
    ]
    check(r.returncode == 0, "the standalone trainer ran (%s)"
          % r.stderr.strip()[-200:])
    for got, expect in zip(lines, want):
        check(got == expect, "record %s" % expect[:40])
    check(len(lines) == len(want), "%d records on stdout, %d expected"
          % (len(lines), len(want)))
    env["RANK"] = "1"
    r = subprocess.run([sys.executable, script, job], capture_output=True,
                       text=True, env=env, timeout=60)
    check(r.returncode == 0 and r.stdout == "",
          "rank 1 writes nothing (%r)" % r.stdout[:80])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_checkpoint_carried_over(tmp)
        test_records(tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
