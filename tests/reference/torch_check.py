#!/usr/bin/python3
"""Runs the PyTorch reference on cases written by test_model_torch.c.

usage: torch_check.py DIR...   (exit 77 when torch is not installed)

Each DIR holds case.json (shape, grad_scale, AdamW hyperparameters),
params.f32 (params_memory) and batch.i32 (inputs, targets, then rotary
positions, B*T each; case.json's default_positions: 0..T-1 in every row,
passed to the model as pos None).
Writes, in DIR: result.json (loss_sum, n_targets, argmax; loss_sum_fast of
the fast path), grads.f32 (the gradient of grad_scale * loss_sum, params
layout), grads_fast.f32 (the same from BifocalTorch.forward_fast, the
path bench_train times) and after.f32 (the parameters after one AdamW step
on grads.f32).
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import BifocalTorch  # noqa: E402


def run_case(d):
    with open(os.path.join(d, "case.json")) as f:
        c = json.load(f)
    B, T = c["B"], c["T"]
    model = BifocalTorch(c["V"], c["C"], c["L"], c["NH"], c["rope"],
                         c["spectral_heads"], c["rope_base"],
                         c["prope_pairs"])
    flat = np.fromfile(os.path.join(d, "params.f32"), dtype=np.float32)
    model.load_flat(torch.from_numpy(flat))
    batch = np.fromfile(os.path.join(d, "batch.i32"), dtype=np.int32)
    idx = torch.from_numpy(batch[:B * T].astype(np.int64)).view(B, T)
    tgt = torch.from_numpy(batch[B * T:2 * B * T].astype(np.int64)).view(B, T)
    pos = None if c["default_positions"] else \
        torch.from_numpy(batch[2 * B * T:].astype(np.int64)).view(B, T)

    # the fast path bench_train times, on the same weights and batch first
    _, fast_loss_sum = model.forward_fast(idx, tgt, pos)
    (fast_loss_sum * c["grad_scale"]).backward()
    model.flat(grads=True).numpy().astype(np.float32).tofile(
        os.path.join(d, "grads_fast.f32"))
    model.zero_grad(set_to_none=True)

    opt = model.adamw(c["lr"], (c["beta1"], c["beta2"]), c["eps"],
                      c["weight_decay"], c["freq_lr_mult"])
    logits, loss_sum = model(idx, tgt, pos)
    (loss_sum * c["grad_scale"]).backward()
    model.flat(grads=True).numpy().astype(np.float32).tofile(
        os.path.join(d, "grads.f32"))
    opt.step()
    model.flat().numpy().astype(np.float32).tofile(
        os.path.join(d, "after.f32"))
    result = {"loss_sum": float(loss_sum),
              "loss_sum_fast": float(fast_loss_sum),
              "n_targets": int((tgt >= 0).sum()),
              "argmax": logits.argmax(-1).view(-1).tolist()}
    with open(os.path.join(d, "result.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    torch.set_num_threads(1)
    for d in sys.argv[1:]:
        run_case(d)
