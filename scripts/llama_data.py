#!/usr/bin/env python3
"""llama_data.py — cuts the LLaMA example's text (examples/llama/data/text.txt) into
next-byte windows for `pock-rt train` / `eval`: the first half for pretraining, the second
half (different subject and register) for fine-tuning. Needs only numpy (any Python
that has it: the reference venv, or /usr/bin/python3).

  build-venv-onnx/bin/python scripts/llama_data.py OUT [--seq 128] [--stride 64] [--text PATH]

The text is split into its two halves at the paragraph break (a blank line) nearest its
middle byte, then each half into contiguous regions, in order, by fixed fractions:

  first half   pretrain_train 90%   pretrain_val 10%
  second half  finetune_train 70%   finetune_val 15%   finetune_test 15%

(region boundaries are whole bytes; no byte belongs to two regions, so no window of one
split sees a byte of another). Each region gives windows of T + 1 bytes starting every
--stride bytes, plus one ending at the region's last byte when the stride leaves a tail:
ids = bytes [s, s + T) and y = bytes [s + 1, s + T + 1) (the next byte of each position).
Writes OUT/{split}_ids.npy and OUT/{split}_y.npy, both (N, T) int64 — the model's input
and the per-token labels `pock-rt train --data OUT/S_ids.npy:OUT/S_y.npy` reads — and
prints each split's rows and bytes. T must match the exported model's sequence length
(128 at --size device and standard, 8 at tiny). The text must be ASCII.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(HERE, "..", "examples", "llama", "data", "text.txt")

# (split, fraction of its half), in text order; each half's fractions sum to 1
HALVES = ((("pretrain_train", 0.90), ("pretrain_val", 0.10)),
          (("finetune_train", 0.70), ("finetune_val", 0.15), ("finetune_test", 0.15)))


def halves(data):
    """The text's two halves, cut at the start of the paragraph nearest the middle byte."""
    starts = [i for i in range(2, len(data)) if data[i - 2:i] == b"\n\n"]
    if not starts:
        raise SystemExit("llama_data: the text has no blank line to split its halves at")
    cut = min(starts, key=lambda i: abs(i - len(data) // 2))
    return data[:cut], data[cut:]


def windows(region, seq, stride):
    """(ids, y): every window of seq + 1 bytes starting at a multiple of stride, and one
    ending at the region's end if the last of those stops short of it."""
    n = len(region) - seq - 1
    if n < 0:
        return None
    starts = list(range(0, n + 1, stride))
    if starts[-1] != n:
        starts.append(n)
    b = np.frombuffer(region, dtype=np.uint8).astype(np.int64)
    ids = np.stack([b[s:s + seq] for s in starts])
    y = np.stack([b[s + 1:s + seq + 1] for s in starts])
    return ids, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seq", type=int, default=128, help="bytes per window (T); the model's")
    ap.add_argument("--stride", type=int, default=64, help="bytes between window starts")
    ap.add_argument("--text", default=TEXT)
    a = ap.parse_args()
    if a.seq < 1 or a.stride < 1:
        raise SystemExit("llama_data: --seq and --stride must be >= 1")
    with open(a.text, "rb") as f:
        data = f.read()
    if any(c > 127 for c in data):
        raise SystemExit("llama_data: %s is not ASCII (byte %d)"
                         % (a.text, next(i for i, c in enumerate(data) if c > 127)))
    os.makedirs(a.out, exist_ok=True)
    for half, splits in zip(halves(data), HALVES):
        pos = 0
        for k, (name, frac) in enumerate(splits):
            end = len(half) if k == len(splits) - 1 else pos + int(round(frac * len(half)))
            w = windows(half[pos:end], a.seq, a.stride)
            if w is None:
                raise SystemExit("llama_data: %s has %d bytes, fewer than --seq %d + 1"
                                 % (name, end - pos, a.seq))
            np.save(os.path.join(a.out, name + "_ids.npy"), w[0])
            np.save(os.path.join(a.out, name + "_y.npy"), w[1])
            print("%-15s %5d windows of %d from bytes [%d, %d) of its half (%d bytes)"
                  % (name, len(w[0]), a.seq, pos, end, end - pos))
            pos = end
    print("wrote %s/{pretrain_train,pretrain_val,finetune_train,finetune_val,finetune_test}"
          "_{ids,y}.npy (int64, (N, %d))" % (a.out, a.seq))
    return 0


if __name__ == "__main__":
    sys.exit(main())
