#!/usr/bin/env python3
"""onnx_export_models.py — the data and the onnxruntime side of test_onnx_export_models.sh:
the example models' ONNX fixtures (tests/fixtures/onnx-models/<model>/: x.npy [, x1.npy],
y.npy hold (steps, batch, ...) batches), fine-tuned by pock and exported, must compute in
onnxruntime what `pock-rt run --scores` prints.

  onnx_export_models.py data FIXTURE_DIR OUT_DIR   writes OUT_DIR/x.npy [x1.npy] y.npy as
      (rows, ...) files for pock-rt (floats as float32) and prints the --data argument
      and the batch
  onnx_export_models.py check FT.onnx ORIG.onnx OUT_DIR SCORES.txt   onnxruntime on FT.onnx
      with OUT_DIR's inputs equals the scores (the last values of each printed row) within
      1e-4, and some initializers differ from ORIG.onnx's (the fine-tuned ones)
"""
import os
import sys

import numpy as np


def inputs(d):
    names = [n for n in ("x.npy", "x1.npy") if os.path.exists(os.path.join(d, n))]
    return [np.load(os.path.join(d, n)) for n in names], names


def data(fixture, out):
    xs, names = inputs(fixture)
    batch = xs[0].shape[1]
    for a, n in zip(xs, names):
        a = a.reshape(-1, *a.shape[2:])
        if a.dtype.kind == "f":
            a = a.astype(np.float32)
        np.save(os.path.join(out, n), a)
    y = np.load(os.path.join(fixture, "y.npy"))
    np.save(os.path.join(out, "y.npy"), y.reshape(-1, *y.shape[2:]).astype(np.int64))
    print(",".join(os.path.join(out, n) for n in names) + ":" + os.path.join(out, "y.npy"),
          batch)


def check(ft, orig, d, scores):
    sys.modules.setdefault("torch", None)  # onnxruntime-training would import it: seconds
    import onnxruntime as ort
    s = ort.InferenceSession(ft, providers=["CPUExecutionProvider"])
    xs, _ = inputs(d)
    feed = {}
    for meta, a in zip(s.get_inputs(), xs):
        want = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
                "tensor(int32)": np.int32, "tensor(double)": np.float64}[meta.type]
        a = a.astype(want)
        # an input of rank > 2 was flattened to (rows, features) in the npy: restore it
        shape = [a.shape[0]] + [int(v) for v in meta.shape[1:]] if all(
            isinstance(v, int) for v in meta.shape[1:]) else a.shape
        feed[meta.name] = a.reshape(shape)
    y = s.run(None, feed)[0]
    per_row = int(np.prod(y.shape[1:]))
    rows = [line.split() for line in open(scores)]
    pock = np.array([[float(v) for v in r[-per_row:]] for r in rows]).reshape(y.shape)
    diff = float(np.abs(pock - y).max())
    # the fine-tuned values are in the file: some initializers differ from the original's
    import onnx
    from onnx import numpy_helper
    before = {t.name: numpy_helper.to_array(t) for t in onnx.load(orig).graph.initializer}
    after = {t.name: numpy_helper.to_array(t) for t in onnx.load(ft).graph.initializer}
    changed = sum(1 for n, a in after.items()
                  if n in before and a.shape == before[n].shape and not np.array_equal(a, before[n]))
    print(f"{os.path.basename(ft)}: onnxruntime vs pock-rt run --scores: max |diff| {diff:.3g} "
          f"over {y.shape}; {changed} initializers fine-tuned")
    return 0 if diff <= 1e-4 and changed > 0 else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "data":
        data(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
