#!/usr/bin/env python3
"""copy_onnx_node_tests.py — copies ONNX 1.16.2's backend node tests of the op types Pock
imports into tests/fixtures/onnx-node/ and writes its scope.txt, which tests/test_onnx_node.c
runs: `case in` (must import and match) or `case out <reason>` (counted, not run).

  build-venv-onnx/bin/python scripts/copy_onnx_node_tests.py [--out DIR]

A case is copied when every node of its model is of a supported op type (the issue's list,
SUPPORTED below), its files are small (< MAX_BYTES) and its opset >= 13; the rest of the
rules below only decide in or out, so the committed files show what is not covered.

Frozen operands. The node tests feed every operand as a graph input, also those that ONNX
lets be data but that a static compiler needs at import (Reshape's shape, Slice's starts,
Unsqueeze's axes, Clip's bounds, ...: FREEZE). Like TVM's ONNX tests (freeze_params), such
an input is turned into an initializer holding its test data and its input_N.pb removed (the
later ones renumbered). Those model.onnx files are therefore modified copies: scope.txt says
`frozen` after the case's verdict and README.md says so (Apache-2.0 section 4(b)). Every
copied case, frozen or not, is run by onnxruntime here and must match its outputs.
"""
import onnx  # noqa: I001  (before anything that may import torch)
import onnxruntime

import argparse
import os
import shutil
import sys

import numpy as np
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NODE = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
MAX_BYTES = 64 * 1024

SUPPORTED = set("""Conv Gemm MatMul Add Sub Mul Div Pow Sqrt Reciprocal Neg Abs Exp Log Erf
Relu LeakyRelu Elu Clip Sigmoid HardSigmoid HardSwish Tanh Gelu Softmax LogSoftmax
BatchNormalization LayerNormalization GroupNormalization InstanceNormalization MaxPool
AveragePool GlobalAveragePool Flatten Reshape Transpose Concat Split Slice Gather Unsqueeze
Squeeze Expand Pad ReduceMean ReduceSum ReduceMax Where Equal Cast Constant ConstantOfShape
Identity Dropout Shape Range Trilu""".split())

# op type -> the input positions Pock needs known at import (frozen when a graph input)
FREEZE = {"Reshape": (1,), "Expand": (1,), "Slice": (1, 2, 3, 4), "Unsqueeze": (1,),
          "Squeeze": (1,), "Split": (1,), "Pad": (1, 2, 3), "ReduceMean": (1,),
          "ReduceSum": (1,), "ReduceMax": (1,), "Clip": (1, 2), "ConstantOfShape": (0,),
          "Range": (0, 1, 2), "Trilu": (1,), "Dropout": (1, 2),
          # running statistics: buffers of the model, not data
          "BatchNormalization": (3, 4)}

# the element types Pock computes with (TensorProto.DataType)
T = onnx.TensorProto
DTYPES = {T.FLOAT, T.DOUBLE, T.INT64, T.INT32, T.BOOL}


def verdict(name, m, data):
    """'in' or 'out <reason>' for a copied case's model (frozen inputs are initializers);
    data(input name): that input's value in test_data_set_0."""
    opset = max([o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] or [0])
    if opset < 13:
        return "out opset %d" % opset
    g = m.graph
    for v in list(g.input) + list(g.output):
        et = v.type.tensor_type.elem_type
        if et not in DTYPES:
            return "out %s" % T.DataType.Name(et).lower()
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in g.input}
    types = {v.name: v.type.tensor_type.elem_type for v in g.input}
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        a = {x.name: x for x in n.attribute}
        if n.op_type == "BatchNormalization" and len([o for o in n.output if o]) > 1:
            return "out running-stat outputs (updated in place, not outputs)"
        if n.op_type == "Gather" and n.input[1] in ranks and (data(n.input[1]) < 0).any():
            return ("out negative indices fed at run time (gather reads 0 outside the extent; "
                    "constant indices are wrapped at import)")
        if n.op_type in ("Conv", "MaxPool", "AveragePool"):
            r = ranks.get(n.input[0], 4)
            if r != 4:
                return "out %d-D %s" % (r - 2, "conv" if n.op_type == "Conv" else "pool")
            if "storage_order" in a and a["storage_order"].i:
                return "out storage_order"
            if len([o for o in n.output if o]) > 1:
                return "out MaxPool Indices output"
        if n.op_type == "Dropout" and (len(n.input) > 2 and n.input[2] or
                                       len([o for o in n.output if o]) > 1):
            return "out random dropout mask"
        if n.op_type == "Pad" and "mode" in a and a["mode"].s != b"constant":
            return "out pad mode %s" % a["mode"].s.decode()
    why = runtime_limit(g, types, inits)
    if why:
        return "out " + why
    # the importer makes a graph only of what is computed from the inputs: a model folded
    # to a constant, or passing an input through, is refused by design
    if not g.input:
        return "out no graph input (all constant)"
    dep, alias = {v.name for v in g.input}, {v.name for v in g.input}
    for n in g.node:
        if n.op_type != "Shape" and any(i in dep for i in n.input):
            dep.update(n.output)
        if n.input and n.input[0] in alias and is_identity(n, inits):
            alias.add(n.output[0])
    if g.output[0].name in alias:
        return "out output is an input passed through"
    if g.output[0].name not in dep:
        return "out output folded to a constant at import"
    for v in list(g.input) + list(g.output):
        if any(d.HasField("dim_value") and d.dim_value == 0
               for d in v.type.tensor_type.shape.dim):
            return "out zero-size tensor"
    return "in"


def is_identity(n, inits):
    """n passes its input 0 through unchanged: Identity, Dropout in inference, Clip without
    bounds, the identity Transpose, a Reduce* of no axes with noop_with_empty_axes."""
    a = {x.name: x for x in n.attribute}
    if n.op_type in ("Identity", "Dropout"):
        return True
    if n.op_type == "Clip":
        return not any(n.input[1:])
    if n.op_type == "Transpose":
        return "perm" in a and list(a["perm"].ints) == sorted(a["perm"].ints)
    if n.op_type.startswith("Reduce") and "noop_with_empty_axes" in a and \
            a["noop_with_empty_axes"].i:
        return len(n.input) < 2 or not n.input[1] or inits[n.input[1]].size == 0
    return False


FLOATS = {T.FLOAT, T.DOUBLE}
# Pock computes on float tensors: integer and bool data is evaluated at import only
FLOAT_ONLY = SUPPORTED - {"Cast", "Constant", "ConstantOfShape", "Identity", "Shape", "Range",
                          "Gather", "Where", "Equal", "Trilu"}


def runtime_limit(g, types, inits):
    """Why a node on the graph's inputs (data known only at run time) cannot be imported:
    Pock has no cast and no comparison op, computes on and moves float data only (integer
    indices and conditions aside), and has no reverse; or None."""
    for n in g.node:
        a = {x.name: x for x in n.attribute}
        rt = [types[i] for i in n.input if i in types]  # the run-time inputs' types
        if not rt:
            continue
        if n.op_type == "Cast" and a["to"].i != types.get(n.input[0], a["to"].i):
            return "Cast of a computed tensor (no cast op)"
        if n.op_type == "Equal":
            return "Equal of computed tensors (no comparison op)"
        if n.op_type in FLOAT_ONLY and any(t not in FLOATS for t in rt):
            return "integer or bool arithmetic at run time"
        if n.op_type == "Gather" and types.get(n.input[0], T.FLOAT) not in FLOATS:
            return "integer data through Gather at run time"
        if n.op_type in ("Where", "Trilu") and any(
                types.get(i) not in FLOATS for i in n.input[:3] if i in types and
                not (n.op_type == "Where" and i == n.input[0])):
            return "integer data through %s at run time" % n.op_type
        if n.op_type == "Slice" and len(n.input) > 4 and n.input[4] in inits and \
                (inits[n.input[4]] < 0).any():
            return "negative slice step (no reverse)"
    return None


def freeze(m, read_input):
    """Moves the graph inputs in FREEZE positions to initializers (their values from
    read_input(i)); returns the kept input indices."""
    g = m.graph
    names = [v.name for v in g.input]
    frozen = set()
    for n in g.node:
        for pos in FREEZE.get(n.op_type, ()):
            if pos < len(n.input) and n.input[pos] in names:
                frozen.add(names.index(n.input[pos]))
    for i in sorted(frozen):
        g.initializer.append(numpy_helper.from_array(read_input(i), names[i]))
    keep = [i for i in range(len(names)) if i not in frozen]
    kept = [g.input[i] for i in keep]
    del g.input[:]
    g.input.extend(kept)
    return keep


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def check_ort(m, d, nin):
    """onnxruntime on the (frozen) model reproduces every data set's outputs."""
    sess = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for ds in sorted(x for x in os.listdir(d) if x.startswith("test_data_set_")):
        p = os.path.join(d, ds)
        feeds = {v.name: read_pb(os.path.join(p, "input_%d.pb" % i))
                 for i, v in enumerate(m.graph.input)}
        got = sess.run(None, feeds)
        for k, g in enumerate(got):
            want = read_pb(os.path.join(p, "output_%d.pb" % k))
            if g.shape != want.shape or not np.allclose(g, want, rtol=1e-4, atol=1e-5,
                                                        equal_nan=True):
                return False
    return True


def copy_case(name, out):
    src = os.path.join(NODE, name)
    m = onnx.load(os.path.join(src, "model.onnx"))
    dst = os.path.join(out, name)
    shutil.copytree(src, dst)
    sets = sorted(x for x in os.listdir(dst) if x.startswith("test_data_set_"))
    names = [v.name for v in m.graph.input]  # before freezing: the files' numbering
    nin = len(names)
    keep = freeze(m, lambda i: read_pb(os.path.join(dst, sets[0], "input_%d.pb" % i)))
    v = verdict(name, m, lambda n: read_pb(os.path.join(dst, sets[0], "input_%d.pb" %
                                                        names.index(n))))
    note = ""
    if len(keep) != nin:
        note = " frozen"
        for ds in sets:  # frozen inputs go; later ones are renumbered
            p = os.path.join(dst, ds)
            for new, old in enumerate(keep):
                os.replace(os.path.join(p, "input_%d.pb" % old), os.path.join(p, "tmp_%d" % new))
            for f in os.listdir(p):
                if f.startswith("input_"):
                    os.remove(os.path.join(p, f))
            for new in range(len(keep)):
                os.replace(os.path.join(p, "tmp_%d" % new), os.path.join(p, "input_%d.pb" % new))
        onnx.save(m, os.path.join(dst, "model.onnx"))
        if len(sets) > 1:  # a frozen input holds data set 0's values only
            for ds in sets[1:]:
                shutil.rmtree(os.path.join(dst, ds))
        if v == "in" and not check_ort(m, dst, len(keep)):
            v = "out onnxruntime disagrees with the frozen model"
    return v + note


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "onnx-node"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for d in os.listdir(a.out):
        if d.startswith("test_"):
            shutil.rmtree(os.path.join(a.out, d))
    lines, nin, nout = [], 0, 0
    for name in sorted(os.listdir(NODE)):
        path = os.path.join(NODE, name, "model.onnx")
        if not os.path.exists(path):
            continue
        m = onnx.load(path)
        if not {n.op_type for n in m.graph.node} <= SUPPORTED:
            continue
        size = sum(os.path.getsize(os.path.join(r, f))
                   for r, _, fs in os.walk(os.path.join(NODE, name)) for f in fs)
        if size > MAX_BYTES:
            lines.append("# %s: not copied (%d bytes)" % (name, size))
            continue
        v = copy_case(name, a.out)
        nin += v.startswith("in")
        nout += v.startswith("out")
        lines.append("%s %s" % (name, v))
    with open(os.path.join(a.out, "scope.txt"), "w") as f:
        f.write("# scope.txt — the ONNX 1.16.2 node tests copied here (scripts/"
                "copy_onnx_node_tests.py):\n# `case in` must import and match; "
                "`case out REASON` is counted. `frozen`: model.onnx modified\n# (operands "
                "needed at import moved from graph inputs to initializers; README.md).\n")
        f.write("\n".join(lines) + "\n")
    shutil.copy(os.path.join(ROOT, "frontends", "onnx", "proto", "LICENSE"),
                os.path.join(a.out, "LICENSE"))
    print("copy_onnx_node_tests: %d in scope, %d out, in %s" % (nin, nout, a.out))


if __name__ == "__main__":
    sys.exit(main())
