#!/usr/bin/env python3
"""onnx_cli_models.py — the tiny models and data of test_onnx_cli.sh, built with onnx.helper
(no exporter needed), and the checks that need onnxruntime.

  onnx_cli_models.py make DIR     writes into DIR:
    mlp.onnx       Gemm(transB) + Relu + Gemm, input x (N, 8), 4 classes, opset 17
    mlp.json       the same model as a Pock graph JSON (same param and input names), so the
                   export path is tested whatever ONNX converters are built
    mlp_bn.onnx    mlp with BatchNormalization in training mode (3 outputs) after fc1 and a
                   Dropout with training_mode = true: what torch.onnx.export(training=
                   TrainingMode.TRAINING) writes
    renamed.onnx   mlp whose fc2.weight is called head.weight
    badshape.onnx  mlp whose fc2.bias has 5 values
    otherin.onnx   mlp whose input is called y
    unsup.onnx     Gemm + a com.example:Foo node
    data.csv       20 rows of 8 features and a label in 0..3
    spec.json      fc2.* + half of fc1.weight's input channels
    alien.pkw      a weights file naming a tensor no model has
    partial.pkw    fc1.weight alone; double.pkw: fc1.weight as float64
  onnx_cli_models.py statsmoved BN.pkw
    the batch norm's running mean in BN.pkw differs from mlp_bn.onnx's
  onnx_cli_models.py pkwclose A.pkw B.pkw
    the four mlp params of two weights files agree within 1e-5 (relative)
  onnx_cli_models.py check FT.onnx ORIG.onnx DATA.csv SCORES.txt [BN_FT.onnx]
    FT.onnx passes onnx.checker; onnxruntime's output equals `pock-rt run --scores` (the
    class then the scores per row) within 1e-4 and differs from ORIG.onnx's (the weights
    changed); BN_FT.onnx (the exported mlp_bn.onnx) has its batch norm and dropout in
    inference and equals a NumPy evaluation with the running statistics.
"""
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def weights(seed=0):
    rng = np.random.default_rng(seed)
    return {"fc1.weight": (rng.standard_normal((16, 8)) * 0.3).astype(np.float32),
            "fc1.bias": (rng.standard_normal(16) * 0.1).astype(np.float32),
            "fc2.weight": (rng.standard_normal((4, 16)) * 0.3).astype(np.float32),
            "fc2.bias": (rng.standard_normal(4) * 0.1).astype(np.float32)}


def mlp(w, bn=False, rename=None, input_name="x", extra=None):
    w = dict(w)
    nodes = [helper.make_node("Gemm", [input_name, "fc1.weight", "fc1.bias"], ["h"], name="fc1",
                              transB=1)]
    act_in = "h"
    if bn:
        w.update({"bn.weight": np.linspace(0.5, 1.5, 16, dtype=np.float32),
                  "bn.bias": np.linspace(-0.2, 0.2, 16, dtype=np.float32),
                  "bn.running_mean": np.linspace(-0.1, 0.1, 16, dtype=np.float32),
                  "bn.running_var": np.linspace(0.5, 2.0, 16, dtype=np.float32)})
        nodes.append(helper.make_node(
            "BatchNormalization", ["h", "bn.weight", "bn.bias", "bn.running_mean",
                                   "bn.running_var"], ["hn", "bn.mean_out", "bn.var_out"],
            name="bn", epsilon=1e-5, momentum=0.9, training_mode=1))
        nodes.append(helper.make_node("Constant", [], ["train_flag"], name="flag",
                                      value=helper.make_tensor("v", TensorProto.BOOL, [], [True])))
        nodes.append(helper.make_node("Constant", [], ["ratio"], name="ratio",
                                      value=helper.make_tensor("r", TensorProto.FLOAT, [], [0.5])))
        nodes.append(helper.make_node("Dropout", ["hn", "ratio", "train_flag"], ["hd", "mask"],
                                      name="drop"))
        act_in = "hd"
    nodes.append(helper.make_node("Relu", [act_in], ["a"], name="act"))
    nodes.append(helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["logits"], name="fc2",
                                  transB=1))
    if extra:
        nodes.append(extra)
    if rename:
        w[rename[1]] = w.pop(rename[0])
        for n in nodes:
            n.input[:] = [rename[1] if i == rename[0] else i for i in n.input]
    inits = [numpy_helper.from_array(a, n) for n, a in w.items()]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT,
                                                                       ["N", 8])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])],
                          inits)
    opsets = [helper.make_opsetid("", 17)]
    if extra:
        opsets.append(helper.make_opsetid("com.example", 1))
    m = helper.make_model(g, opset_imports=opsets, producer_name="pock-test")
    m.ir_version = 8  # onnxruntime 1.19 reads IR <= 9
    return m


def graph_json(w):
    def arr(a):
        return [float(v) for v in a.ravel()]
    p = [{"name": n, "shape": list(a.shape), "init": arr(a)} for n, a in w.items()]
    nodes = [{"name": "fc1", "op": "matmul", "inputs": ["x", "fc1.weight"], "output": "fc1.mm",
              "attrs": {"trans_b": True}},
             {"name": "fc1.add", "op": "add", "inputs": ["fc1.mm", "fc1.bias"], "output": "h"},
             {"name": "act", "op": "relu", "inputs": ["h"], "output": "a"},
             {"name": "fc2", "op": "matmul", "inputs": ["a", "fc2.weight"], "output": "fc2.mm",
              "attrs": {"trans_b": True}},
             {"name": "fc2.add", "op": "add", "inputs": ["fc2.mm", "fc2.bias"], "output": "logits"}]
    return {"format": "pock-graph", "version": 1, "name": "mlp",
            "inputs": [{"name": "x", "shape": ["N", 8]}], "params": p, "nodes": nodes,
            "output": "logits",
            "training": {"loss": "softmax_cross_entropy",
                         "optimizer": {"kind": "sgd", "lr": 0.1}}}


def make(d):
    import json
    w = weights()
    onnx.save(mlp(w), f"{d}/mlp.onnx")
    onnx.save(mlp(w, bn=True), f"{d}/mlp_bn.onnx")
    onnx.save(mlp(w, rename=("fc2.weight", "head.weight")), f"{d}/renamed.onnx")
    bad = dict(w)
    bad["fc2.bias"] = np.zeros(5, np.float32)
    onnx.save(mlp(bad), f"{d}/badshape.onnx")
    onnx.save(mlp(w, input_name="y"), f"{d}/otherin.onnx")
    onnx.save(mlp(w, extra=helper.make_node("Foo", ["logits"], ["z"], name="foo",
                                            domain="com.example")), f"{d}/unsup.onnx")
    for name in ("mlp.onnx", "mlp_bn.onnx"):
        onnx.checker.check_model(onnx.load(f"{d}/{name}"))
    with open(f"{d}/mlp.json", "w") as f:
        json.dump(graph_json(w), f)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((20, 8)).astype(np.float32)
    y = rng.integers(0, 4, 20)
    with open(f"{d}/data.csv", "w") as f:
        for r in range(20):
            f.write(",".join("%.9g" % v for v in x[r]) + ",%d\n" % y[r])
    with open(f"{d}/spec.json", "w") as f:
        json.dump({"version": 1, "train": [{"params": "fc2.*"},
                                           {"params": "fc1.weight", "channels": 0.5}]}, f)
    # .pkw (docs/graph-format.md): "PKW1", u32 count, then u16 name length, name, u8 dtype
    # (1: f32), u8 rank, i64 dims, data
    def pkw(path, name, a):
        code = {np.float32: 1, np.float64: 2}[a.dtype.type]
        with open(path, "wb") as f:
            f.write(b"PKW1" + struct.pack("<IH", 1, len(name)) + name.encode() +
                    struct.pack("<BB", code, a.ndim) + struct.pack("<%dq" % a.ndim, *a.shape) +
                    a.tobytes())
    pkw(f"{d}/alien.pkw", "alien.weight", np.ones(2, np.float32))
    pkw(f"{d}/partial.pkw", "fc1.weight", w["fc1.weight"])
    pkw(f"{d}/double.pkw", "fc1.weight", w["fc1.weight"].astype(np.float64))


def run(path, x):
    # onnxruntime-training imports torch when it can (seconds): the test needs only the
    # inference session, so torch is hidden from it
    sys.modules.setdefault("torch", None)
    import onnxruntime as ort
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def check(ft, orig, data, scores, bn_ft=None):
    ok = True
    onnx.checker.check_model(onnx.load(ft))
    x = np.loadtxt(data, delimiter=",", dtype=np.float64)[:, :-1].astype(np.float32)
    y = run(ft, x)
    pock = np.array([[float(v) for v in line.split()[1:]] for line in open(scores)])
    diff = np.abs(y - pock).max() if pock.shape == y.shape else np.inf
    moved = np.abs(run(orig, x) - y).max()
    print(f"ft.onnx vs pock-rt run --scores: max |diff| {diff:.3g} over {len(pock)} rows; "
          f"moved from the original by {moved:.3g}")
    if not diff <= 1e-4:
        print("FAIL: onnxruntime disagrees with pock-rt")
        ok = False
    if not moved > 1e-3:
        print("FAIL: the exported model computes what the original did (weights not replaced?)")
        ok = False
    if bn_ft:
        m = onnx.load(bn_ft)
        onnx.checker.check_model(m)
        bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"][0]
        drop = [n for n in m.graph.node if n.op_type == "Dropout"][0]
        tm = [a.i for a in bn.attribute if a.name == "training_mode"]
        flag_left = any("train_flag" in n.output for n in m.graph.node)
        if len(bn.output) != 1 or tm not in ([], [0]) or len(drop.input) != 2 or flag_left:
            print(f"FAIL: batch norm outputs {list(bn.output)} training_mode {tm}, "
                  f"dropout inputs {list(drop.input)}, its flag's Constant kept: {flag_left}")
            ok = False
        w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        h = x @ w["fc1.weight"].T + w["fc1.bias"]
        h = (h - w["bn.running_mean"]) / np.sqrt(w["bn.running_var"] + 1e-5) * w["bn.weight"] \
            + w["bn.bias"]
        ref = np.maximum(h, 0) @ w["fc2.weight"].T + w["fc2.bias"]
        d = np.abs(run(bn_ft, x) - ref).max()
        print(f"exported batch-norm model vs NumPy inference: max |diff| {d:.3g}")
        if not d <= 1e-4:
            print("FAIL: the batch norm / dropout are not in inference")
            ok = False
        if np.abs(w["fc1.weight"] - weights()["fc1.weight"]).max() < 1e-6:
            print("FAIL: fc1.weight of the batch-norm model was not replaced")
            ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def read_pkw(path):
    """{name: array} of a .pkw file (docs/graph-format.md)."""
    b = open(path, "rb").read()
    assert b[:4] == b"PKW1", path
    (n,), at, out = struct.unpack_from("<I", b, 4), 8, {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<H", b, at)
        name = b[at + 2:at + 2 + ln].decode()
        at += 2 + ln
        dt, rank = b[at], b[at + 1]
        shape = struct.unpack_from("<%dq" % rank, b, at + 2)
        at += 2 + 8 * rank
        dtype = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.int64}[dt]
        count = int(np.prod(shape)) if rank else 1
        out[name] = np.frombuffer(b, dtype, count, at).reshape(shape)
        at += count * np.dtype(dtype).itemsize
    return out


def pkw_close(a, b):
    """The params both files hold agree within 1e-5 (relative to 1 + |value|)."""
    wa, wb = read_pkw(a), read_pkw(b)
    common = sorted(set(wa) & set(wb) & set(weights()))
    worst = max(float(np.max(np.abs(wa[n] - wb[n]) / (1 + np.abs(wb[n])))) for n in common)
    print(f"{a} vs {b}: {len(common)} params, max relative difference {worst:.3g}")
    return 0 if len(common) == 4 and worst <= 1e-5 else 1


def stats_moved(path):
    """Training updated the batch norm's running mean (so export has new statistics to write)."""
    w = read_pkw(path)
    moved = float(np.abs(w["bn.running_mean"] - np.linspace(-0.1, 0.1, 16)).max())
    print(f"{path}: bn.running_mean moved by {moved:.3g} in training")
    return 0 if moved > 1e-4 else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    elif len(sys.argv) == 3 and sys.argv[1] == "statsmoved":
        sys.exit(stats_moved(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "pkwclose":
        sys.exit(pkw_close(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
