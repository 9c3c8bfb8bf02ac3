#!/usr/bin/python3
"""PyTorch reference of the bifocal transformer (engine/model.h).

The model is python/bifocal_torch.py's BifocalTorch (the one PyTorch
implementation, which the PyTorch trainer trains): the same model,
parameter names and layout as the C code (per-layer tensors stacked with a
leading L dimension, matrices stored [in, out]), so a flat float32 dump of
params_memory loads directly.  Used two ways:

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
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from bifocal_torch import BifocalTorch, keep_heap  # noqa: E402,F401

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
