#!/usr/bin/env python3
"""llama_torch.py — a Pock weights file (.pkw) of the LLaMA example in the PyTorch module of
examples/models (llama), for other tools (the benchmark, ONNX Runtime through a re-export):
loads it, evaluates it on a split of scripts/llama_data.py in PyTorch (the same mean
next-byte cross-entropy and per-token accuracy `pock-rt eval` prints), and can save it as
a state_dict that `scripts/model_export.py llama OUT --weights FILE.pt` exports.

  build-venv-onnx/bin/python examples/llama/llama_torch.py WEIGHTS.pkw [--data DIR]
      [--split finetune_test] [--size device] [--save-state-dict FILE.pt] [--threads 1]

Library: `load_pkw(module, path)` copies every tensor of the file into the module's
parameter of the same name (Pock keeps the state_dict names: the ONNX export is made with
do_constant_folding=False), skips the graph's constants (names from "/"), and fails unless
every parameter is there with its shape and no other name is.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import torch2pock  # noqa: E402  (read_pkw: numpy only)


def load_pkw(module, path):
    """Copies PATH's tensors into MODULE's parameters, by name; returns the module."""
    import torch
    tensors = torch2pock.read_pkw(path)
    params = dict(module.named_parameters())
    missing = sorted(set(params) - set(tensors))
    # the file also holds the graph's constants (the rotary tables and causal mask that the
    # module computes itself), named after their ONNX node outputs ("/blocks.0/Constant_4_...")
    extra = sorted(n for n in set(tensors) - set(params) if not n.startswith("/"))
    if missing or extra:
        raise SystemExit("llama_torch: %s does not fit the module: missing %s, unknown %s"
                         % (path, missing[:4] or "none", extra[:4] or "none"))
    with torch.no_grad():
        for name, p in params.items():
            a = tensors[name]
            if tuple(a.shape) != tuple(p.shape):
                raise SystemExit("llama_torch: %s: %s is %s in the file, %s in the module"
                                 % (path, name, tuple(a.shape), tuple(p.shape)))
            p.copy_(torch.from_numpy(np.ascontiguousarray(a)).to(p.dtype))
    return module


def evaluate(module, ids, y, batch=8):
    """(mean cross-entropy per byte, per-token accuracy) over every window."""
    import torch
    import torch.nn.functional as F
    loss, hits, n = 0.0, 0, 0
    with torch.no_grad():
        for s in range(0, len(ids), batch):
            x = torch.from_numpy(ids[s:s + batch])
            t = torch.from_numpy(y[s:s + batch]).reshape(-1)
            logits = module(x).reshape(t.numel(), -1)
            loss += F.cross_entropy(logits, t, reduction="sum").item()
            hits += (logits.argmax(-1) == t).sum().item()
            n += t.numel()
    return loss / n, hits / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights", help="a .pkw file from `pock-rt train --save`")
    ap.add_argument("--data", help="scripts/llama_data.py's OUT: evaluate on --split")
    ap.add_argument("--split", default="finetune_test")
    ap.add_argument("--size", default="device", choices=("tiny", "standard", "device"))
    ap.add_argument("--save-state-dict", metavar="FILE.pt")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    import torch
    import gen_model_fixtures
    torch.set_num_threads(a.threads)
    m = load_pkw(gen_model_fixtures._example_models().llama(a.size), a.weights)
    m.eval()
    print("loaded %d tensors from %s" % (len(list(m.parameters())), a.weights))
    if a.data:
        ids = np.load(os.path.join(a.data, a.split + "_ids.npy"))
        y = np.load(os.path.join(a.data, a.split + "_y.npy"))
        if ids.shape[1] != m.input_shape[0]:
            raise SystemExit("llama_torch: %s windows have %d bytes, the %s model takes %d"
                             % (a.split, ids.shape[1], a.size, m.input_shape[0]))
        loss, acc = evaluate(m, ids, y)
        print("%s: loss %.4f (%.3f bits per byte) accuracy %.4f rows %d"
              % (a.split, loss, loss / np.log(2), acc, len(ids)))
    if a.save_state_dict:
        torch.save(m.state_dict(), a.save_state_dict)
        print("wrote", a.save_state_dict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
