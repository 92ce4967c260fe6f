"""onnx_cases.py — what the ONNX fixture generators share (scripts/onnx_make_cases.py,
onnx_make_nn_cases.py, onnx_make_shape_cases.py): model builders and the two writers,
a case in the layout of ONNX's backend node tests with onnxruntime's outputs

  FIXTURES/onnx-ops/<case>/model.onnx, test_data_set_0/input_N.pb, output_N.pb

and a model Pock must refuse (tests/fixtures/onnx-refused/README.md)

  FIXTURES/onnx-refused/<family>_<case>/model.onnx, expect.txt

tests/test_onnx_node.c runs both. Deterministic: nothing here draws random numbers or reads
the clock, so the same cases give the same bytes. Needs onnx 1.16 and onnxruntime 1.19
(build-venv-onnx, made by scripts/onnx_venv.sh).
"""
import glob
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper


def vinfo(name, arr):
    """The value info of a tensor like arr (its dtype and shape)."""
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype),
                                         arr.shape)


def initializer(name, value, dtype=None):
    """An initializer: floats are params to the importer, integers constants it folds."""
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def constant_node(out, value, node_name=None, tensor_name=None):
    """A Constant node producing `out` (a constant to the importer, never a param).
    value: a numpy array (or scalar) as is; its tensor is named tensor_name (none if None)."""
    t = numpy_helper.from_array(np.asarray(value), tensor_name) if tensor_name is not None \
        else numpy_helper.from_array(np.asarray(value))
    kw = {"name": node_name} if node_name is not None else {}
    return helper.make_node("Constant", [], [out], value=t, **kw)


def make_model(graph_name, nodes, inputs, outputs, inits, opset, producer, ir_version):
    """A model of the default domain at `opset`. inputs, outputs: value infos; inits:
    TensorProtos. ir_version explicit: onnxruntime 1.19 reads up to 10."""
    g = helper.make_graph(nodes, graph_name, list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name=producer)
    m.ir_version = ir_version
    return m


def write_model(d, m):
    """Makes directory d anew (what was there goes) and writes m as d/model.onnx."""
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())


def _write_tensor(path, arr, name):
    # np.asarray, not np.ascontiguousarray: that makes a rank-0 output rank 1 (from_array
    # writes C order from any layout)
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(arr), name).SerializeToString())


def write_case(fixtures, case, m, feeds, optimize=True, retype_outputs=True):
    """Runs m with onnxruntime on feeds ([(input name, array)], in the graph's input order)
    and writes FIXTURES/onnx-ops/<case> in the node-test layout.
    optimize=False: no graph optimizations (onnxruntime 1.19 fuses Conv + BatchNormalization
    with the running statistics even in training mode). retype_outputs: the graph outputs get
    the dtypes and shapes onnxruntime computed (for outputs the builder left untyped).
    The model passes onnx's full check first."""
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = sess.run(None, dict(feeds))
    if retype_outputs:
        for o, y in zip(m.graph.output, outs):
            o.CopyFrom(vinfo(o.name, y))
    onnx.checker.check_model(m, full_check=True)
    d = os.path.join(fixtures, "onnx-ops", case)
    write_model(d, m)
    data = os.path.join(d, "test_data_set_0")
    os.makedirs(data)
    for k, (n, a) in enumerate(feeds):
        _write_tensor(os.path.join(data, "input_%d.pb" % k), a, n)
    for k, (o, y) in enumerate(zip(m.graph.output, outs)):
        _write_tensor(os.path.join(data, "output_%d.pb" % k), y, o.name)


def clean_refused(fixtures, family):
    """Removes FIXTURES/onnx-refused/<family>_* (a generator writes all of its own anew, so
    a case it no longer makes does not linger)."""
    for d in glob.glob(os.path.join(fixtures, "onnx-refused", family + "_*")):
        shutil.rmtree(d)


def write_refused(fixtures, family, case, m, expect, op_type=None):
    """Writes FIXTURES/onnx-refused/<family>_<case>: m (not checked: it may be malformed on
    purpose) and expect.txt, whose lines the error message must each contain: `expect` (the
    problem) and, given op_type, "(<op_type>)" (the node the message names)."""
    d = os.path.join(fixtures, "onnx-refused", "%s_%s" % (family, case))
    write_model(d, m)
    lines = [expect] + (["(%s)" % op_type] if op_type else [])
    with open(os.path.join(d, "expect.txt"), "w") as f:
        f.write("".join(line + "\n" for line in lines))
