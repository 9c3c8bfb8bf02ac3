#!/usr/bin/python3
"""PyTorch reference of the bifocal transformer (engine/model.h).

The same model, parameter names and layout as the C code (per-layer tensors
stacked with a leading L dimension, matrices stored [in, out]), so a flat
float32 dump of params_memory loads directly.  Used two ways:

  * bench: `torch_ref.py --bench C L NH T B V STEPS [ROPE]` times
    forward_fast + backward + AdamW on one thread and prints
    `torch_tokens_per_s X` (and its best and median step): the fastest
    faithful single-thread PyTorch model we have (torch.compile would be
    next, but this is Debian's torch 1.13, which has neither torch.compile
    nor F.scaled_dot_product_attention: both came in 2.0);
  * tests/reference/torch_check.py imports BifocalTorch to check the C
    model's loss, gradients and AdamW step against forward (written to be
    read), and forward_fast against both (test_torch_fast).
"""
import ctypes
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# Names in bf_params order, and which get weight decay (2-D matrices).
PARAM_NAMES = ["wte", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw",
               "lnfb", "log_freq"]
DECAY = {"wte", "qkvw", "attprojw", "fcw", "fcprojw"}
ROPE_KINDS = ["none", "rope", "spectral", "bifocal", "prope"]


class BifocalTorch(torch.nn.Module):
    def __init__(self, V, C, L, NH, rope="bifocal", spectral_heads=0,
                 rope_base=10000.0, prope_pairs=0):
        super().__init__()
        self.V, self.C, self.L, self.NH = V, C, L, NH
        self.hd = C // NH
        self.P = self.hd // 2
        self.rope = rope
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

    def forward(self, idx, targets, pos=None):
        """pos [B, T]: each token's rotary position (default 0..T-1)."""
        B, T = idx.shape
        C, NH, hd = self.C, self.NH, self.hd
        x = self.wte[idx]
        if pos is None:
            pos = torch.arange(T).expand(B, T)
        pos = pos.to(torch.float64)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(self.L):
            h = F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], 1e-5)
            qkv = h @ self.qkvw[l] + self.qkvb[l]
            q, k, v = qkv.split(C, dim=2)
            q = q.view(B, T, NH, hd).transpose(1, 2)
            k = k.view(B, T, NH, hd).transpose(1, 2)
            v = v.view(B, T, NH, hd).transpose(1, 2)
            if self.rope != "none":
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
        rows = torch.arange(T, dtype=torch.float64) if pos is None \
            else pos.to(torch.float64)
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = F.embedding(idx.view(-1), self.wte)
        for l in range(self.L):
            h = F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], 1e-5)
            qkv = torch.addmm(self.qkvb[l], h, self.qkvw[l]).view(B, T, 3, C)
            qk, v = qkv[:, :, :2], qkv[:, :, 2]
            if self.rope != "none":
                z = torch.view_as_complex(qk.reshape(B, T, 2, NH, P, 2))
                qk = torch.view_as_real(z * self.rotary(l, rows))
            qk = qk.reshape(B, T, 2, NH, hd).permute(2, 0, 3, 1, 4)
            q = qk[0].reshape(B * NH, T, hd)
            k = qk[1].reshape(B * NH, T, hd)
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
                           "lr": lr * freq_lr_mult})
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
        sys.exit("torch_ref.py: mallopt refused the heap settings")


def bench(C, L, NH, T, B, V, steps, rope="bifocal"):
    keep_heap()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    spectral = {"spectral": NH, "bifocal": NH // 2}[rope]
    model = BifocalTorch(V, C, L, NH, rope, spectral)
    opt = model.adamw(1e-3, (0.9, 0.95), 1e-8, 0.1, 1.0)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))

    def step():
        opt.zero_grad(set_to_none=True)
        _, loss_sum = model.forward_fast(idx, tgt)
        (loss_sum / (B * T)).backward()
        opt.step()

    for _ in range(2):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    dt = min(times)  # the best step, as bench_train.c times the C model
    print(f"torch_step_ms {dt * 1e3:.2f}")
    print(f"torch_step_median_ms {statistics.median(times) * 1e3:.2f}")
    print(f"torch_tokens_per_s {B * T / dt:.0f}")


if __name__ == "__main__":
    if len(sys.argv) not in (9, 10) or sys.argv[1] != "--bench":
        sys.exit("usage: torch_ref.py --bench C L NH T B V STEPS "
                 "[spectral|bifocal]")
    bench(*map(int, sys.argv[2:9]), *sys.argv[9:])
