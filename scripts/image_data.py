#!/usr/bin/env python3
"""image_data.py — the digits transfer task (examples/digits) as S x S RGB images for the
conv-net examples (MobileNetV2, ResNet-18): a real image task with no download.

  python3 scripts/image_data.py OUT --side S [--seed 0] [--digits DIR]

Reads DIR/{source_train,source_val,target_train,target_val,target_test}.csv (default
examples/digits: 64 pixel columns 0..16, row-major 8x8, then the label; source = digits
0-4, target = digits 5-9, examples/digits/README.md) and writes, per split,
OUT/SPLIT_x.npy (float32, (N, 3, S, S)) and OUT/SPLIT_y.npy (int64, (N,): the digit).

Each image: the 8x8 digit is resized (bilinear, half-pixel centres) to a square of side
round(u * S), u uniform in [0.55, 0.9], placed at a uniform random offset inside the
S x S frame, and used as the alpha of a random foreground colour over a random background
colour (RGB, each channel uniform in [0, 1], redrawn until the two colours' luminances
differ by at least 0.3, so the digit stays visible); then Gaussian pixel noise (sd 0.03),
clipping to [0, 1], and normalization (x - 0.5) / 0.3 (fixed constants, the same for every
split and side). Deterministic: split k's generator is numpy's PCG64 seeded with
(seed, k), so a split does not change when another one does. numpy only.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SPLITS = ("source_train", "source_val", "target_train", "target_val", "target_test")
MEAN, STD = 0.5, 0.3
LUMA = np.array([0.299, 0.587, 0.114])


def resize_matrix(src, dst):
    """(dst, src) bilinear interpolation matrix, half-pixel centres (align_corners=False):
    out = M @ img @ M.T resizes a src x src image to dst x dst."""
    m = np.zeros((dst, src))
    for i in range(dst):
        x = min(max((i + 0.5) * src / dst - 0.5, 0.0), src - 1.0)
        lo = int(np.floor(x))
        hi = min(lo + 1, src - 1)
        m[i, lo] += 1.0 - (x - lo)
        m[i, hi] += x - lo
    return m


def read_split(path):
    """(pixels (N, 8, 8) in [0, 1], labels (N,) int64) from a digits CSV."""
    try:
        a = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except OSError as e:
        raise SystemExit("image_data: %s" % e)
    except ValueError as e:
        raise SystemExit("image_data: %s: not a digits CSV (%s)" % (path, e))
    if a.shape[1] != 65 or a.shape[0] == 0:
        raise SystemExit("image_data: %s: expected rows of 64 pixels + label, got shape %s"
                         % (path, a.shape))
    px, y = a[:, :64], a[:, 64]
    if px.min() < 0 or px.max() > 16 or np.any(y != np.round(y)) or y.min() < 0 or y.max() > 9:
        raise SystemExit("image_data: %s: pixels must be in 0..16 and labels in 0..9" % path)
    return (px / 16.0).reshape(-1, 8, 8), y.astype(np.int64)


def colours(rng):
    """A (foreground, background) RGB pair whose luminances differ by >= 0.3."""
    while True:
        fg, bg = rng.random(3), rng.random(3)
        if abs(float(LUMA @ fg) - float(LUMA @ bg)) >= 0.3:
            return fg, bg


def render(digits, side, rng):
    """(N, 3, side, side) float32 images of (N, 8, 8) digits in [0, 1]."""
    out = np.empty((len(digits), 3, side, side), dtype=np.float32)
    mats = {}
    for n, d in enumerate(digits):
        size = max(2, int(round(rng.uniform(0.55, 0.9) * side)))
        if size not in mats:
            mats[size] = resize_matrix(8, size)
        m = mats[size]
        alpha = np.zeros((side, side))
        r0, c0 = rng.integers(0, side - size + 1, size=2)
        alpha[r0:r0 + size, c0:c0 + size] = np.clip(m @ d @ m.T, 0.0, 1.0)
        fg, bg = colours(rng)
        img = bg[:, None, None] * (1.0 - alpha) + fg[:, None, None] * alpha
        img += rng.normal(0.0, 0.03, img.shape)
        out[n] = (np.clip(img, 0.0, 1.0) - MEAN) / STD
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--side", type=int, required=True, help="image side S (pixels)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--digits", default=os.path.join(ROOT, "examples", "digits"),
                    help="folder of the digits split CSVs (default examples/digits)")
    a = ap.parse_args()
    if a.side < 4:
        raise SystemExit("image_data: --side %d: must be at least 4" % a.side)
    if a.seed < 0:
        raise SystemExit("image_data: --seed %d: must be >= 0" % a.seed)
    os.makedirs(a.out, exist_ok=True)
    for k, split in enumerate(SPLITS):
        digits, y = read_split(os.path.join(a.digits, split + ".csv"))
        x = render(digits, a.side, np.random.default_rng([a.seed, k]))
        np.save(os.path.join(a.out, split + "_x.npy"), x)
        np.save(os.path.join(a.out, split + "_y.npy"), y)
        print("%-12s %4d images, labels %d..%d" % (split, len(y), y.min(), y.max()))
    print("wrote %s/{%s}_{x,y}.npy (3 x %d x %d, seed %d)"
          % (a.out, ",".join(SPLITS), a.side, a.side, a.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
