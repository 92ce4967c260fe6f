#!/usr/bin/env python3
"""onnx_export_models.py — the Python half of test_onnx_export_models.sh (run with a Python
that has onnx and onnxruntime: $POCK_ONNX_PYTHON).

  onnx_export_models.py data FIXTURE_DIR OUT_DIR
      the fixture's batches (x.npy [, x1.npy], y.npy: (steps, rows, ...)) as one data set
      of steps * rows rows in the model's input shapes: OUT_DIR/x.npy [x1.npy] y.npy
  onnx_export_models.py check FT.onnx ORIG.onnx OUT_DIR SCORES
      onnxruntime runs the exported model on OUT_DIR's data; its outputs must equal
      `pock-rt run --scores` (the last numel values of each line) within 1e-4, and differ
      from the original model's (the trained weights were written in)
"""
import sys

import numpy as np
import onnx


def inputs_of(path):
    m = onnx.load(path)
    init = {t.name for t in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in init:
            continue
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        out.append((i.name, i.type.tensor_type.elem_type, dims))
    return out


def data(fixture, out):
    import glob
    import os
    xs = [f for f in sorted(glob.glob(os.path.join(fixture, "x*.npy")))]
    model = sorted(glob.glob(os.path.join(fixture, "*_op17.onnx")))[0]
    for f, (name, et, dims) in zip(xs, inputs_of(model)):
        a = np.load(f)
        a = a.reshape((-1,) + tuple(dims[1:]))
        a = a.astype(np.int64 if et == onnx.TensorProto.INT64 else np.float32)
        np.save(os.path.join(out, os.path.basename(f)), a)
    y = np.load(os.path.join(fixture, "y.npy"))
    np.save(os.path.join(out, "y.npy"), y.reshape((-1,) + y.shape[2:]).astype(np.int64))
    return 0


def run(path, feeds):
    # onnxruntime-training imports torch when it can (seconds): only inference is needed
    sys.modules.setdefault("torch", None)
    import onnxruntime as ort
    so = ort.SessionOptions()
    # ORT 1.19 folds Conv+BatchNormalization with the running stats even in training mode:
    # the exported model is in inference mode, but keep ORT's rewrites out of the comparison
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def check(ft, orig, out, scores):
    import os
    onnx.checker.check_model(onnx.load(ft))
    feeds = {}
    for k, (name, et, dims) in enumerate(inputs_of(ft)):
        feeds[name] = np.load(os.path.join(out, "x.npy" if k == 0 else "x%d.npy" % k))
    y = run(ft, feeds).astype(np.float64)
    n = int(np.prod(y.shape[1:]))
    rows = [line.split() for line in open(scores)]
    pock = np.array([[float(v) for v in r[-n:]] for r in rows]).reshape(y.shape)
    diff = np.abs(y - pock).max() / max(1.0, np.abs(y).max())
    moved = np.abs(run(orig, feeds) - y).max()
    print(f"{os.path.basename(os.path.dirname(ft))}: onnxruntime vs pock-rt run --scores: max rel diff "
          f"{diff:.3g} over {y.shape[0]} rows; moved from the original by {moved:.3g}")
    ok = diff <= 1e-4 and moved > 1e-6
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "data":
        sys.exit(data(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 6 and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    sys.exit(__doc__)
