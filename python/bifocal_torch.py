#!/usr/bin/python3
"""The bifocal model in PyTorch, and a trainer of it for
`bifocal-worker --exec` (docs/trainers.md, The PyTorch trainer).

The model (BifocalTorch) is the one implementation of engine/model.h in
PyTorch: the same parameters and layout as the C code (per-layer tensors
stacked with a leading L dimension, matrices stored [in, out], so a flat
float32 dump of params_memory loads directly), the same AdamW groups.
tests/reference/torch_ref.py imports it to check the C kernels and to time
it beside them.

As a trainer it trains a job as the built-in trainer does (engine/train.c):
the same initial weights (the engine's counter-based generator, common/
rng.h, reproduced), the same batches and eval sets (read from
`bifocal-worker data`), AdamW groups, learning-rate schedule and gradient
clipping, the same records; checkpoints in the engine's format
(docs/checkpoints.md) with the AdamW moments, so `bifocal-worker eval`
scores them and a later attempt resumes from them.

    bifocal-worker --server HOST:PORT --token-file DB.token --trainer torch \\
        --exec '/usr/bin/python3 python/bifocal_torch.py [--device cuda]'
    python/bifocal_torch.py --job JOB.json [--checkpoint-dir DIR]
        [--resume CHECKPOINT]         (standalone: records on stdout)
"""
import argparse
import ctypes
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bifocal_trainer as bt  # noqa: E402

# Names in bf_params order, and which get weight decay (2-D matrices).
PARAM_NAMES = ["wte", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw",
               "lnfb", "log_freq"]
DECAY = {"wte", "qkvw", "attprojw", "fcw", "fcprojw"}
ROPE_KINDS = ["none", "rope", "spectral", "bifocal", "prope", "pope"]


class BifocalTorch(torch.nn.Module):
    def __init__(self, V, C, L, NH, rope="bifocal", spectral_heads=0,
                 rope_base=10000.0, prope_pairs=0):
        super().__init__()
        self.V, self.C, self.L, self.NH = V, C, L, NH
        self.hd = C // NH
        self.P = self.hd // 2
        self.rope = rope
        self.rope_base = rope_base
        shapes = {
            "wte": (V, C), "ln1w": (L, C), "ln1b": (L, C),
            "qkvw": (L, C, 3 * C), "qkvb": (L, 3 * C),
            "attprojw": (L, C, C), "attprojb": (L, C),
            "ln2w": (L, C), "ln2b": (L, C),
            "fcw": (L, C, 4 * C), "fcb": (L, 4 * C),
            "fcprojw": (L, 4 * C, C), "fcprojb": (L, C),
            "lnfw": (C,), "lnfb": (C,), "log_freq": (L, NH, self.P),
        }
        for name in PARAM_NAMES:
            setattr(self, name, torch.nn.Parameter(torch.zeros(shapes[name])))
        learn = [rope != "none" and h >= NH - spectral_heads
                 for h in range(NH)]
        self.register_buffer("learnable", torch.tensor(learn))
        # p-RoPE: the last prope_pairs pairs of every head have omega = 0
        rotating = [i < self.P - prope_pairs for i in range(self.P)]
        self.register_buffer("rotating", torch.tensor(rotating))
        self.init_weights(rope_base)

    def init_weights(self, rope_base, seed=0):
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name in PARAM_NAMES:
                p = getattr(self, name)
                if name in DECAY:
                    p.normal_(0.0, 0.02, generator=g)
                elif name.endswith("w"):
                    p.fill_(1.0)
                else:
                    p.zero_()
            i = torch.arange(self.P, dtype=torch.float64)
            theta = -(2.0 * i / self.hd) * math.log(rope_base)
            self.log_freq.copy_(theta.expand(self.L, self.NH, self.P))

    def load_flat(self, flat):
        """flat: 1-D float32 tensor laid out as params_memory."""
        off = 0
        with torch.no_grad():
            for name in PARAM_NAMES:
                p = getattr(self, name)
                p.copy_(flat[off:off + p.numel()].view_as(p))
                off += p.numel()
        assert off == flat.numel()

    def flat(self, grads=False):
        parts = []
        for name in PARAM_NAMES:
            p = getattr(self, name)
            t = p.grad if grads else p
            parts.append(torch.zeros_like(p).view(-1) if t is None
                         else t.detach().reshape(-1))
        return torch.cat(parts)

    def rotate(self, x, cos, sin):
        # x [B, NH, T, hd]; pairs (2i, 2i+1)
        B, NH, T, hd = x.shape
        x = x.view(B, NH, T, hd // 2, 2)
        x0, x1 = x[..., 0], x[..., 1]
        y = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
        return y.view(B, NH, T, hd)

    def polar(self, x, cos, sin):
        """PoPE (engine/model.h): each of x's hd components becomes the
        magnitude softplus(x) at the angle of cos, sin, as [.., 2 hd]
        reals; q.k of two such is sum sp(q) sp(k) cos(angle difference)."""
        m = F.softplus(x)
        return torch.cat((m * cos, m * sin), dim=-1)

    def pope_angles(self, pos):
        """PoPE's angles pos * theta_c [..., hd] in float64, theta_c =
        rope_base^(-c/hd) rounded to float32 as the C tables take it."""
        c = torch.arange(self.hd, dtype=torch.float64, device=pos.device)
        theta = (self.rope_base ** (-c / self.hd)).float().double()
        return pos[..., None] * theta

    def forward(self, idx, targets, pos=None):
        """pos [B, T]: each token's rotary position (default 0..T-1)."""
        B, T = idx.shape
        C, NH, hd = self.C, self.NH, self.hd
        x = self.wte[idx]
        if pos is None:
            pos = torch.arange(T, device=idx.device).expand(B, T)
        pos = pos.to(torch.float64)
        causal = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        for l in range(self.L):
            h = F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], 1e-5)
            qkv = h @ self.qkvw[l] + self.qkvb[l]
            q, k, v = qkv.split(C, dim=2)
            q = q.view(B, T, NH, hd).transpose(1, 2)
            k = k.view(B, T, NH, hd).transpose(1, 2)
            v = v.view(B, T, NH, hd).transpose(1, 2)
            if self.rope == "pope":
                ang = self.pope_angles(pos)[:, None]  # [B, 1, T, hd]
                cos, sin = ang.cos().float(), ang.sin().float()
                q, k = self.polar(q, cos, sin), self.polar(k, cos, sin)
            elif self.rope != "none":
                omega = self.omega(l)
                # angles in float64 as the C tables form them: [B, NH, T, P]
                ang = pos[:, None, :, None] * omega[None, :, None, :]
                cos, sin = ang.cos().float(), ang.sin().float()
                q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + y @ self.attprojw[l] + self.attprojb[l]
            h = F.layer_norm(x, (C,), self.ln2w[l], self.ln2b[l], 1e-5)
            h = F.gelu(h @ self.fcw[l] + self.fcb[l], approximate="tanh")
            x = x + h @ self.fcprojw[l] + self.fcprojb[l]
        x = F.layer_norm(x, (C,), self.lnfw, self.lnfb, 1e-5)
        logits = x @ self.wte.t()
        loss_sum = F.cross_entropy(logits.view(-1, self.V), targets.view(-1),
                                   ignore_index=-1, reduction="sum")
        return logits, loss_sum

    def omega(self, l):
        """Layer l's frequencies [NH, P] in float64, as the C tables use
        them; fixed heads give the same values, but no gradient reaches
        their theta."""
        theta = torch.where(self.learnable[:, None], self.log_freq[l],
                            self.log_freq[l].detach())
        return torch.where(self.rotating, theta.exp(),
                           torch.zeros_like(theta)).double()

    def rotary(self, l, pos):
        """The rotation of layer l as complex factors cos + i sin, angles
        in float64: [T, 1, NH, P] for pos [T] (every row at 0..T-1), else
        [B, T, 1, NH, P] for pos [B, T]."""
        ang = pos[..., None, None] * self.omega(l)  # [..., T, NH, P]
        rot = torch.complex(ang.cos().float(), ang.sin().float())
        return rot.unsqueeze(-3)

    def forward_fast(self, idx, targets, pos=None):
        """forward's model, written for speed on one thread: every head of
        a layer in one batched product, q and k rotated together as complex
        pairs, biases fused into addmm, the rotary factors formed once per
        layer for all rows (the default positions are shared).  The same
        result as forward (tests/reference/test_torch_fast); bench times
        this one."""
        B, T = idx.shape
        C, NH, hd, P = self.C, self.NH, self.hd, self.P
        rows = torch.arange(T, dtype=torch.float64, device=idx.device) \
            if pos is None \
            else pos.to(torch.float64)
        mask = torch.full((T, T), float("-inf"), device=idx.device).triu(1)
        # PoPE's q and k are 2 hd wide (polar): [T or B,T, 1, 1, hd] angles
        width = 2 * hd if self.rope == "pope" else hd
        if self.rope == "pope":
            ang = self.pope_angles(rows)[..., None, None, :]
            pope_cos, pope_sin = ang.cos().float(), ang.sin().float()
        x = F.embedding(idx.view(-1), self.wte)
        for l in range(self.L):
            h = F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], 1e-5)
            qkv = torch.addmm(self.qkvb[l], h, self.qkvw[l]).view(B, T, 3, C)
            qk, v = qkv[:, :, :2], qkv[:, :, 2]
            if self.rope == "pope":
                qk = self.polar(qk.reshape(B, T, 2, NH, hd), pope_cos,
                                pope_sin)
            elif self.rope != "none":
                z = torch.view_as_complex(qk.reshape(B, T, 2, NH, P, 2))
                qk = torch.view_as_real(z * self.rotary(l, rows))
            qk = qk.reshape(B, T, 2, NH, width).permute(2, 0, 3, 1, 4)
            q = qk[0].reshape(B * NH, T, width)
            k = qk[1].reshape(B * NH, T, width)
            v = v.reshape(B, T, NH, hd).transpose(1, 2).reshape(B * NH, T, hd)
            att = torch.baddbmm(mask, q, k.transpose(1, 2),
                                alpha=1.0 / math.sqrt(hd)).softmax(dim=-1)
            y = torch.bmm(att, v).view(B, NH, T, hd).transpose(1, 2)
            x = x + torch.addmm(self.attprojb[l], y.reshape(B * T, C),
                                self.attprojw[l])
            h = F.layer_norm(x, (C,), self.ln2w[l], self.ln2b[l], 1e-5)
            h = F.gelu(torch.addmm(self.fcb[l], h, self.fcw[l]),
                       approximate="tanh")
            x = x + torch.addmm(self.fcprojb[l], h, self.fcprojw[l])
        x = F.layer_norm(x, (C,), self.lnfw, self.lnfb, 1e-5)
        logits = x @ self.wte.t()
        loss_sum = F.cross_entropy(logits, targets.reshape(-1),
                                   ignore_index=-1, reduction="sum")
        return logits.view(B, T, self.V), loss_sum

    def adamw(self, lr, betas, eps, weight_decay, freq_lr_mult):
        """AdamW with the C model's groups: decay on 2-D matrices only,
        learnable theta at lr * freq_lr_mult without decay."""
        decay = [getattr(self, n) for n in PARAM_NAMES if n in DECAY]
        plain = [getattr(self, n) for n in PARAM_NAMES
                 if n not in DECAY and n != "log_freq"]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": plain, "weight_decay": 0.0}]
        if bool(self.learnable.any()):
            groups.append({"params": [self.log_freq], "weight_decay": 0.0,
                           "lr": lr * freq_lr_mult, "freq": True})
        else:
            self.log_freq.requires_grad_(False)
        # foreach: one kernel per step for all tensors, not a Python loop
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps,
                                 foreach=True)


# glibc's mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def keep_heap():
    """Keeps freed tensors' memory in the process, as the C model's
    buffers are allocated once: with glibc's defaults each step's large
    tensors are mmapped and unmapped again, and their pages faulted in anew
    (docs/training.md has the step times either way;
    TORCH_REF_HEAP=glibc-default leaves the defaults, to measure them).
    PyTorch's CPU tuning guide recommends a caching allocator (jemalloc,
    tcmalloc) for the same reason; these two glibc settings do it with
    Debian's python3.  The mmap threshold's largest value is 32 MiB on
    64-bit glibc."""
    if os.environ.get("TORCH_REF_HEAP") == "glibc-default":
        return
    libc = ctypes.CDLL("libc.so.6")
    if not (libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
            and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)):
        sys.exit("bifocal_torch.py: mallopt refused the heap settings")


# ---- the job's config ------------------------------------------------------

OUTCOMES_MAX_EXAMPLES = 65536                 # common/records.h


def model_facts(worker, job_file):
    """What the job defines, from the C code's own home of each fact
    (`bifocal-worker data --split model`): `config` with every field and
    its default, `vocab_size`, `spectral_heads`, `prope_pairs`, and
    `optimizer` (AdamW's beta1, beta2, eps, and bf_lr_at's
    min_lr_fraction)."""
    lines = list(data_lines(worker, job_file, "model"))
    if len(lines) != 1 or lines[0].get("split") != "model":
        raise RuntimeError("%s data --split model: %r" % (worker, lines))
    return lines[0]


def lr_at(facts, n):
    """bf_lr_at (engine/train.c): linear warmup to lr over warmup_steps,
    then a cosine down to min_lr_fraction * lr at the last step."""
    cfg = facts["config"]
    lr, warmup, steps = cfg["lr"], cfg["warmup_steps"], cfg["steps"]
    if n <= warmup:
        return lr * n / (warmup if warmup > 0 else 1)
    p = (n - warmup) / (steps - warmup)
    min_lr = facts["optimizer"]["min_lr_fraction"] * lr
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * p))


def build_model(facts):
    cfg = facts["config"]
    return BifocalTorch(facts["vocab_size"], cfg["d_model"], cfg["n_layers"],
                        cfg["n_heads"], cfg["rope"], facts["spectral_heads"],
                        cfg["rope_base"], facts["prope_pairs"])


# ---- the engine's initial weights ------------------------------------------

M64 = (1 << 64) - 1
GOLDEN = 0x9e3779b97f4a7c15
INIT_STREAM = 0x696e6974      # "init", engine/model.c
INIT_STD = 0.02
def mix64(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def rng_key(key, counter):
    """bf_rng_key (common/rng.h)."""
    return mix64(mix64((key + GOLDEN) & M64) ^ counter)


def rng_normals(key, count):
    """count draws of bf_rng_normal from bf_rng_seed(key): xoshiro256**
    seeded by splitmix64, Box-Muller keeping the cosine half."""
    s, sm = [], key
    for _ in range(4):
        sm = (sm + GOLDEN) & M64
        s.append(mix64(sm))
    s0, s1, s2, s3 = s
    out = [0.0] * count
    cos, log, sqrt, two_pi = math.cos, math.log, math.sqrt, 6.283185307179586
    for i in range(count):
        u = []
        for _ in range(2):
            x = (s1 * 5) & M64
            u.append(((((x << 7) | (x >> 57)) & M64) * 9 & M64) >> 11)
            t = (s1 << 17) & M64
            s2 ^= s0
            s3 ^= s1
            s1 ^= s2
            s0 ^= s3
            s2 ^= t
            s3 = ((s3 << 45) | (s3 >> 19)) & M64
        u1 = 1.0 - u[0] * 2.0 ** -53
        out[i] = INIT_STD * (sqrt(-2.0 * log(u1)) * cos(two_pi * u[1]
                                                        * 2.0 ** -53))
    return out


def builtin_init(model, seed):
    """bf_model_init_weights: each decayed tensor k (bf_params order) from
    its own key, N(0, 0.02) in float32; LayerNorm gains 1, biases 0,
    theta geometric."""
    init_key = rng_key(seed & M64, INIT_STREAM)
    model.init_weights(model.rope_base)
    with torch.no_grad():
        for k, name in enumerate(PARAM_NAMES):
            if name in DECAY:
                p = getattr(model, name)
                values = rng_normals(rng_key(init_key, k), p.numel())
                p.copy_(torch.tensor(values, dtype=torch.float64)
                        .float().view_as(p))


# ---- checkpoints ------------------------------------------------------------

# BifocalTorch's tensors by their GPT-2 names (docs/checkpoints.md).
GPT2_KIND = {"wte": "wte.weight", "ln1w": "ln_1.weight",
             "ln1b": "ln_1.bias", "qkvw": "attn.c_attn.weight",
             "qkvb": "attn.c_attn.bias", "attprojw": "attn.c_proj.weight",
             "attprojb": "attn.c_proj.bias", "ln2w": "ln_2.weight",
             "ln2b": "ln_2.bias", "fcw": "mlp.c_fc.weight",
             "fcb": "mlp.c_fc.bias", "fcprojw": "mlp.c_proj.weight",
             "fcprojb": "mlp.c_proj.bias", "lnfw": "ln_f.weight",
             "lnfb": "ln_f.bias", "log_freq": "attn.rope.log_freq"}
UNSTACKED = {"wte", "lnfw", "lnfb"}


def named_slices(model, tensors=None):
    """[(gpt2 name, tensor view)] in gpt2_names order; tensors maps a
    PARAM_NAMES name to a stacked tensor of its shape (default: the
    parameters)."""
    def get(n):
        return getattr(model, n) if tensors is None else tensors[n]
    by_name = {}
    for n in PARAM_NAMES:
        if n in UNSTACKED:
            by_name[GPT2_KIND[n]] = get(n)
        else:
            for layer in range(model.L):
                by_name["h.%d.%s" % (layer, GPT2_KIND[n])] = get(n)[layer]
    return [(name, by_name[name]) for name in bt.gpt2_names(model.L)]


def f32_bytes(t):
    t = t.detach().to("cpu", torch.float32).contiguous()
    return struct.pack("<%df" % t.numel(), *t.view(-1).tolist())


def moments(model, opt):
    """The AdamW moments of every parameter (zeros where none yet)."""
    out = {}
    for kind in ("exp_avg", "exp_avg_sq"):
        out[kind] = {}
        for n in PARAM_NAMES:
            p = getattr(model, n)
            st = opt.state.get(p, {})
            out[kind][n] = st[kind] if kind in st else torch.zeros_like(p)
    return out


def save_checkpoint(path, model, opt, cfg, config, step):
    """The engine's checkpoint (docs/checkpoints.md): the weights, then the
    moments, `optimizer.exp_avg.NAME` and `optimizer.exp_avg_sq.NAME`;
    the step in the metadata.  Everything resume needs is in the file."""
    m = moments(model, opt)
    tensors = [(name, list(t.shape), f32_bytes(t))
               for name, t in named_slices(model)]
    for kind in ("exp_avg", "exp_avg_sq"):
        tensors += [("optimizer.%s.%s" % (kind, name), list(t.shape),
                     f32_bytes(t))
                    for name, t in named_slices(model, m[kind])]
    learn = model.learnable.tolist()
    learnable = [[int(x) for x in learn] for _ in range(model.L)]
    bt.write_safetensors(path, tensors, bt.checkpoint_metadata(
        config, step, cfg["rope"], learnable))


def read_checkpoint(path):
    """(metadata, {name: float32 tensor}) of a safetensors file."""
    metadata, tensors = bt.read_safetensors(path)
    return metadata, {
        name: torch.tensor(struct.unpack("<%df" % (len(b) // 4), b),
                           dtype=torch.float32).view(shape)
        for name, shape, b in tensors}


class BadCheckpoint(Exception):
    pass


def load_weights(model, path, tensors, prefix=""):
    """Copies the weights (or, with a prefix, their moments) of a
    checkpoint into stacked tensors of the model's shapes: returns them."""
    out = {n: torch.zeros_like(getattr(model, n)) for n in PARAM_NAMES}
    for name, view in named_slices(model, out):
        t = tensors.get(prefix + name)
        if t is None:
            raise BadCheckpoint("%s: no tensor '%s'" % (path, prefix + name))
        if list(t.shape) != list(view.shape):
            raise BadCheckpoint(
                "%s: tensor '%s': shape %s in the checkpoint, %s in this "
                "model" % (path, prefix + name, list(t.shape),
                           list(view.shape)))
        view.copy_(t)
    return out


def set_params(model, values):
    with torch.no_grad():
        for n in PARAM_NAMES:
            getattr(model, n).copy_(values[n])


def resume(model, opt, path, device):
    """Weights, moments and step of this job's own checkpoint."""
    metadata, tensors = read_checkpoint(path)
    step = int(metadata.get("step", "-1"))
    if metadata.get("format") != "bifocal-checkpoint" or step < 0:
        raise BadCheckpoint("%s: not a Bifocal checkpoint" % path)
    set_params(model, load_weights(model, path, tensors))
    m = load_weights(model, path, tensors, "optimizer.exp_avg.")
    v = load_weights(model, path, tensors, "optimizer.exp_avg_sq.")
    if step > 0:
        for group in opt.param_groups:
            for p in group["params"]:
                n = next(k for k in PARAM_NAMES if getattr(model, k) is p)
                opt.state[p] = {"step": torch.tensor(float(step)),
                                "exp_avg": m[n].to(device),
                                "exp_avg_sq": v[n].to(device)}
    return step


def init_from(model, path):
    """Surgical integration (docs/checkpoints.md): every weight and every
    head's theta from a checkpoint of any variant and any trainer; the
    learnable mask is this job's, the moments zero, the step 0."""
    if not os.path.isfile(path):
        raise BadCheckpoint("init_from %s: no such file" % path)
    _, tensors = read_checkpoint(path)
    set_params(model, load_weights(model, path, tensors))


# ---- the data ---------------------------------------------------------------

def find_worker(given):
    """--worker, else the bifocal-worker that started us (the parent), else
    one on PATH, else the build tree's beside this file."""
    if given:
        return given
    try:
        parent = os.readlink("/proc/%d/exe" % os.getppid())
        if os.path.basename(parent) == "bifocal-worker":
            return parent
    except OSError:
        pass
    found = shutil.which("bifocal-worker")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "build", "worker", "bifocal-worker")


def data_lines(worker, job_file, split, steps=None):
    """The examples of `bifocal-worker data`, parsed, as they come."""
    cmd = [worker, "data", "--job", job_file, "--split", split]
    if steps:
        cmd += ["--steps", "%d:%d" % steps]
    # SIGTERM is for the trainer, which stops at a step's end (the worker
    # signals every descendant): the reader must not end under it first.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            preexec_fn=ignore_stop_signals)
    try:
        for line in proc.stdout:
            yield json.loads(line)
        if proc.wait() != 0:
            raise RuntimeError("%s exited with status %d"
                               % (" ".join(cmd), proc.returncode))
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ignore_stop_signals():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def rows_tensors(rows, device, with_positions):
    idx = torch.tensor([r["input"] for r in rows], dtype=torch.long)
    tgt = torch.tensor([r["target"] for r in rows], dtype=torch.long)
    pos = None
    if with_positions:
        pos = torch.tensor([r["positions"] for r in rows], dtype=torch.long)
        if bool((pos == torch.arange(pos.shape[1])).all()):
            pos = None      # the default positions: one table for all rows
    return (idx.to(device), tgt.to(device),
            None if pos is None else pos.to(device))


def batches(worker, job_file, cfg, first_step):
    """(step, idx, tgt, pos) for steps first_step+1 .. steps, streamed."""
    B, rows, step = cfg["batch_size"], [], first_step
    if first_step >= cfg["steps"]:
        return
    for r in data_lines(worker, job_file, "train",
                        (first_step, cfg["steps"])):
        rows.append(r)
        if len(rows) == B:
            step += 1
            yield (step,) + tuple(rows)
            rows = []


# ---- the trainer ------------------------------------------------------------

def due(step, every, last):
    return step == last or (every > 0 and step % every == 0)


class Trainer:
    def __init__(self, job, job_file, args):
        self.job, self.rec = job, job.records()
        self.config = job.config
        self.job_file, self.args = job_file, args
        self.device = torch.device(args.device)
        self.worker = find_worker(args.worker)
        self.facts = model_facts(self.worker, job_file)
        self.cfg = self.facts["config"]
        self.model = build_model(self.facts)
        self.step = 0
        self.loss = float("nan")
        self.evals = []
        self.window = [0.0, 0]

    def start(self):
        """Fresh (the engine's init, or init_from), or resumed.  The
        engine's init runs in Python (bench/bench_torch_trainer.sh times
        it), so only where its weights are used."""
        cfg, model = self.cfg, self.model
        if self.job.resume_checkpoint is None and cfg["init_from"]:
            init_from(model, cfg["init_from"])
        elif self.job.resume_checkpoint is None:
            builtin_init(model, cfg["seed"])
        model.to(self.device)
        adam = self.facts["optimizer"]
        self.opt = model.adamw(cfg["lr"], (adam["beta1"], adam["beta2"]),
                               adam["eps"], cfg["weight_decay"],
                               cfg["freq_lr_mult"])
        if self.job.resume_checkpoint is not None:
            self.step = resume(model, self.opt, self.job.resume_checkpoint,
                               self.device)
            if self.step != self.job.resume_step and self.job.resume_step:
                raise BadCheckpoint(
                    "%s: step %d, the coordinator recorded %d"
                    % (self.job.resume_checkpoint, self.step,
                       self.job.resume_step))

    def train_step(self, idx, tgt, pos):
        cfg, model, opt = self.cfg, self.model, self.opt
        opt.zero_grad(set_to_none=True)
        _, loss_sum = model.forward_fast(idx, tgt, pos)
        n = int((tgt >= 0).sum())
        (loss_sum / max(n, 1)).backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = float(torch.norm(torch.stack([g.double().norm()
                                             for g in grads])))
        if cfg["grad_clip"] > 0 and norm > cfg["grad_clip"]:
            for g in grads:
                g.mul_(cfg["grad_clip"] / norm)
        lr = lr_at(self.facts, self.step + 1)
        for group in opt.param_groups:
            group["lr"] = lr * (cfg["freq_lr_mult"]
                                if group.get("freq") else 1.0)
        opt.step()
        self.step += 1
        loss = float(loss_sum) / n if n > 0 else float("nan")
        return loss, norm, lr

    def load_eval_sets(self):
        sets = {}
        for r in data_lines(self.worker, self.job_file, "eval"):
            sets.setdefault(r["depth"], []).append(r)
        self.eval_sets = [(d, sets.get(d, []))
                          for d in self.cfg["eval_depths"]]

    @torch.no_grad()
    def evaluate(self):
        """Per depth: mean loss over target tokens, exact-match accuracy,
        and each example's outcome (every target position right)."""
        out = []
        for depth, rows in self.eval_sets:
            loss_sum, n, correct = 0.0, 0, []
            for i in range(0, len(rows), 64):
                idx, tgt, _ = rows_tensors(rows[i:i + 64], self.device,
                                           False)
                logits, ls = self.model.forward_fast(idx, tgt)
                loss_sum += float(ls)
                n += int((tgt >= 0).sum())
                ok = (tgt < 0) | (logits.argmax(-1) == tgt)
                correct += ok.all(dim=1).tolist()
            E = self.cfg["eval_examples"]
            out.append((depth, loss_sum / n if n else float("nan"),
                        sum(correct) / E if E else float("nan"), correct))
        return out

    def emit_eval(self):
        self.evals = []
        keep = self.cfg["eval_examples"] <= OUTCOMES_MAX_EXAMPLES
        for depth, loss, acc, correct in self.evaluate():
            self.rec.eval(self.step, depth, loss, acc,
                          correct if keep else None)
            self.evals.append((depth, loss, acc))

    def emit_freqs(self):
        """Learnable heads on the freq_every schedule, every head at the
        first and the last step; nothing for NoPE and PoPE (no rotary
        frequency)."""
        model = self.model
        if model.rope in ("none", "pope"):
            return
        every_head = self.step in (0, self.cfg["steps"])
        for layer in range(model.L):
            omega = model.omega(layer).float().cpu()
            for h in range(model.NH):
                if every_head or bool(model.learnable[h]):
                    self.rec.freq(self.step, layer, h, omega[h].tolist())

    def emit_train(self, norm, lr):
        seconds, steps = self.window
        tokens = steps * self.cfg["batch_size"] * self.cfg["seq_len"]
        self.rec.train(self.step, self.loss, lr, norm,
                       tokens / seconds if seconds > 0 else float("nan"))
        self.window = [0.0, 0]

    def checkpoint(self):
        path = self.job.checkpoint_path(self.step)
        save_checkpoint(path, self.model, self.opt, self.cfg, self.config,
                        self.step)
        self.rec.checkpoint(self.step, path)

    def run(self):
        cfg, rec = self.cfg, self.rec
        self.load_eval_sets()
        if self.step == 0:
            self.emit_freqs()
        stopped = diverged = False
        last = cfg["steps"]
        ckpt = self.job.checkpoint_dir is not None
        for step, *rows in batches(self.worker, self.job_file, cfg,
                                   self.step):
            t0 = time.perf_counter()
            idx, tgt, pos = rows_tensors(rows, self.device, True)
            self.loss, norm, lr = self.train_step(idx, tgt, pos)
            assert self.step == step
            self.window[0] += time.perf_counter() - t0
            self.window[1] += 1
            if not math.isfinite(self.loss) and cfg["stop_on_nonfinite"]:
                self.emit_train(norm, lr)
                diverged = True
                break
            if due(step, cfg["log_every"], last):
                self.emit_train(norm, lr)
            if due(step, cfg["eval_every"], last):
                self.emit_eval()
            if due(step, cfg["freq_every"], last):
                self.emit_freqs()
            if ckpt and due(step, cfg["checkpoint_every"], last):
                self.checkpoint()
            if step < last and self.job.should_stop():
                stopped = True
                if not due(step, cfg["log_every"], last):
                    self.emit_train(norm, lr)
                if ckpt and not due(step, cfg["checkpoint_every"], last):
                    self.checkpoint()
                break
        record = {"type": "done", "step": self.step,
                  "train_loss": bt.number(self.loss), "stopped": stopped,
                  "eval": [{"depth": d, "loss": bt.number(lo),
                            "accuracy": bt.number(a)}
                           for d, lo, a in self.evals]}
        if diverged:
            record["diverged"] = self.step
        rec.write(record)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Trains a Bifocal job in PyTorch: under "
        "`bifocal-worker --exec` (the job from the environment), or a job "
        "file by hand (--job, records on stdout).")
    p.add_argument("--worker", help="the bifocal-worker whose `data` "
                   "gives the examples (default: the one that started "
                   "this trainer, else on PATH, else build/worker/)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")
    p.add_argument("--threads", type=int, default=0,
                   help="torch CPU threads (default: torch's)")
    p.add_argument("--job", help="a job file, run standalone")
    p.add_argument("--checkpoint-dir", help="standalone: write "
                   "checkpoints there")
    p.add_argument("--resume", help="standalone: resume from this "
                   "checkpoint")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.device == "cpu":
        keep_heap()
    if args.job:
        job = bt.Job.standalone(args.job, args.checkpoint_dir)
        job.checkpoint_dir = args.checkpoint_dir
        if args.checkpoint_dir:
            os.makedirs(args.checkpoint_dir, exist_ok=True)
        job.resume_checkpoint = args.resume
        job_file = args.job
    else:
        job = bt.Job.from_env()
        job_file = os.environ["BIFOCAL_JOB"]
    rec = job.records()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        # another worker may have one: not this job's fault, so retried
        sys.exit("bifocal_torch.py: --device %s, but torch sees no CUDA "
                 "device" % args.device)
    trainer = Trainer(job, job_file, args)
    try:
        trainer.start()
    except BadCheckpoint as e:
        rec.fail(0, e)          # the job's own input: not retried
        return 0
    trainer.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
