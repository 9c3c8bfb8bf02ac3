"""What a trainer run by `bifocal-worker --exec` needs (docs/trainers.md),
standard library only: the job, where to resume, checkpoint paths and
atomic writes, the record writers, a stop flag set by SIGTERM, and a
safetensors writer for the Hugging Face GPT-2 names of docs/checkpoints.md.

    import bifocal_trainer as bt
    job = bt.Job.from_env()            # standalone: bt.Job.standalone(path)
    rec = job.records()
    for step in range(job.resume_step + 1, job.config["steps"] + 1):
        ...                            # one optimizer step
        rec.train(step, loss, lr, grad_norm, tokens_per_s)
        if job.should_stop():
            break
    rec.done(step, train_loss, evals, stopped=job.should_stop())

Under torchrun every rank may call the writers; only rank 0 (RANK, else
0) writes, so each record is sent once.  Standalone (no worker), records
go to stdout, so a trainer can be debugged without a daemon.
"""
import json
import math
import os
import signal
import struct
import sys

RECORD_KINDS = ("train", "eval", "outcomes", "freq", "checkpoint", "done",
                "fail")


def number(x):
    """A record's number: non-finite values travel as "nan", "inf",
    "-inf" (common/records.h), since JSON has no spelling for them."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def rank():
    """This process's rank under torchrun (RANK), else 0."""
    return int(os.environ.get("RANK", "0") or 0)


class Records:
    """The record writers: one JSON object per line, flushed at once, so
    the worker tailing the file sees each record as it happens."""

    def __init__(self, out, writer=True):
        self._out = out
        self._writer = writer

    def write(self, record):
        if record.get("type") not in RECORD_KINDS:
            raise ValueError("unknown record type %r" % record.get("type"))
        if not self._writer:
            return
        self._out.write(json.dumps(record, separators=(",", ":"),
                                   allow_nan=False) + "\n")
        self._out.flush()

    def train(self, step, loss, lr, grad_norm, tokens_per_s):
        self.write({"type": "train", "step": step, "loss": number(loss),
                    "lr": number(lr), "grad_norm": number(grad_norm),
                    "tokens_per_s": number(tokens_per_s)})

    def eval(self, step, depth, loss, accuracy, correct=None):
        """An eval at one depth; `correct`, one bool per example, adds its
        outcomes record (per-example outcomes, for paired statistics)."""
        self.write({"type": "eval", "step": step, "depth": depth,
                    "loss": number(loss), "accuracy": number(accuracy)})
        if correct is not None:
            self.outcomes(step, depth, correct)

    def outcomes(self, step, depth, correct):
        bits = bytearray((len(correct) + 7) // 8)
        for i, ok in enumerate(correct):
            if ok:
                bits[i // 8] |= 1 << (i % 8)
        self.write({"type": "outcomes", "step": step, "depth": depth,
                    "n": len(correct), "bits": bits.hex()})

    def freq(self, step, layer, head, omega):
        self.write({"type": "freq", "step": step, "layer": layer,
                    "head": head, "omega": [number(w) for w in omega]})

    def checkpoint(self, step, path):
        """After the file is complete (write_safetensors is atomic): the
        next attempt resumes from it."""
        self.write({"type": "checkpoint", "step": step, "path": path})

    def done(self, step, train_loss, evals, stopped=False):
        """evals: [(depth, loss, accuracy)] of the final evaluation."""
        self.write({"type": "done", "step": step,
                    "train_loss": number(train_loss), "stopped": stopped,
                    "eval": [{"depth": d, "loss": number(l),
                              "accuracy": number(a)} for d, l, a in evals]})

    def fail(self, step, error):
        """The job cannot run (a bad config, no device): not retried."""
        self.write({"type": "fail", "step": step, "error": str(error)})


class Job:
    """A job and where its attempt keeps things.  Creating one installs
    handlers for SIGTERM and SIGINT that set the stop flag."""

    def __init__(self, config, records_path, checkpoint_dir,
                 resume_checkpoint=None, resume_step=0, job_id=0,
                 attempt_id=0, attempt_dir=None):
        self.config = config
        self.records_path = records_path      # None: stdout
        self.checkpoint_dir = checkpoint_dir
        self.resume_checkpoint = resume_checkpoint or None
        self.resume_step = resume_step
        self.job_id, self.attempt_id = job_id, attempt_id
        self.attempt_dir = attempt_dir
        self._stop = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    @classmethod
    def from_env(cls):
        """The job `bifocal-worker --exec` handed over in the environment
        (docs/trainers.md); standalone when BIFOCAL_JOB is unset is an
        error: use Job.standalone."""
        env = os.environ
        if "BIFOCAL_JOB" not in env:
            raise RuntimeError("BIFOCAL_JOB is not set: not started by "
                               "bifocal-worker --exec (Job.standalone runs "
                               "without it)")
        with open(env["BIFOCAL_JOB"]) as f:
            config = json.load(f)
        return cls(config, env["BIFOCAL_RECORDS"],
                   env["BIFOCAL_CHECKPOINT_DIR"],
                   env.get("BIFOCAL_RESUME_CHECKPOINT") or None,
                   int(env.get("BIFOCAL_RESUME_STEP", "0") or 0),
                   int(env.get("BIFOCAL_JOB_ID", "0") or 0),
                   int(env.get("BIFOCAL_ATTEMPT_ID", "0") or 0),
                   env.get("BIFOCAL_ATTEMPT_DIR"))

    @classmethod
    def standalone(cls, job_file, checkpoint_dir="."):
        """A job file (JSON) run by hand: records on stdout."""
        with open(job_file) as f:
            config = json.load(f)
        return cls(config, None, checkpoint_dir)

    def _on_signal(self, signum, frame):
        self._stop = True

    def should_stop(self):
        """True once SIGTERM or SIGINT came: checkpoint (if it fits the
        worker's grace) and end."""
        return self._stop

    def records(self):
        writer = rank() == 0
        if self.records_path is None:
            return Records(sys.stdout, writer)
        out = open(self.records_path, "a") if writer else None
        return Records(out, writer)

    def checkpoint_path(self, step):
        return os.path.join(self.checkpoint_dir, "step-%06d.safetensors"
                            % step)


def atomic_write(path, data):
    """Replaces path with data (bytes) or leaves it as it was: written as
    PATH.tmp.PID beside it, flushed, fsynced, renamed, the directory
    fsynced (as bf_atomic_file in common/file.h)."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def gpt2_names(n_layers):
    """The weight tensors of a Bifocal checkpoint by their Hugging Face
    GPT-2 names (docs/checkpoints.md), in the engine's order: each kind of
    tensor for every layer in turn, as the model's flat buffer holds them
    (any order reads; this one writes the engine's file)."""
    per_layer = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
                 "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                 "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                 "mlp.c_proj.weight", "mlp.c_proj.bias"]
    layers = range(n_layers)
    return (["wte.weight"]
            + ["h.%d.%s" % (n, kind) for kind in per_layer for n in layers]
            + ["ln_f.weight", "ln_f.bias"]
            + ["h.%d.attn.rope.log_freq" % n for n in layers])


def checkpoint_metadata(config, step, rope, learnable):
    """The __metadata__ of a Bifocal checkpoint (docs/checkpoints.md):
    config is the job's config (a dict), learnable one list of 0/1 per
    layer (which heads learn their frequencies)."""
    return {"format": "bifocal-checkpoint", "format_version": "1",
            "config": json.dumps(config, separators=(",", ":")),
            "rope": rope, "learnable": json.dumps(learnable),
            "step": str(step), "optimizer": "adamw"}


def write_safetensors(path, tensors, metadata):
    """Writes float32 tensors as one safetensors file, atomically.

    tensors: [(name, shape, values)] in file order, values a flat sequence
    of numbers (or bytes already little-endian float32) of prod(shape)
    items; metadata: str -> str.  The header is padded with spaces to a
    multiple of 8 bytes, as the engine writes it."""
    header, blobs, at = {"__metadata__": dict(metadata)}, [], 0
    for name, shape, values in tensors:
        count = 1
        for d in shape:
            count *= d
        blob = values if isinstance(values, (bytes, bytearray)) \
            else struct.pack("<%df" % count, *values)
        if len(blob) != 4 * count:
            raise ValueError("tensor %s: %d bytes for shape %s"
                             % (name, len(blob), list(shape)))
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    atomic_write(path, struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """(metadata, [(name, shape, bytes)] in file order) of a safetensors
    file: enough to inspect a checkpoint or carry its tensors over."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    return metadata, [(name, t["shape"],
                       data[t["data_offsets"][0]:t["data_offsets"][1]])
                      for name, t in tensors]
