#!/usr/bin/env python3
"""onnx_make_shape_cases.py — ONNX fixtures for the shape, indexing and constant ops
(frontends/onnx/onnx_ops_shape.c, onnx_fold_shape.c): tiny models built with onnx.helper,
run by onnxruntime on fixed inputs, written in the layout of ONNX's backend node tests.

  build-venv-onnx/bin/python scripts/onnx_make_shape_cases.py [--out tests/fixtures]

Writes, for each case,
  OUT/onnx-ops/CASE/model.onnx, test_data_set_0/input_N.pb, output_N.pb
(onnx.numpy_helper.from_array(a, name).SerializeToString(), named like the graph's inputs
and outputs), and for the cases Pock must refuse
  OUT/onnx-refused/shape_CASE/model.onnx, expect.txt (substrings of the error message).

Cases: each op alone on a graph input, and the chains exporters emit: x.reshape(N, T, H, D)
as Shape -> Gather -> Unsqueeze -> Concat -> Reshape on a symbolic batch "N"; a causal mask
from ConstantOfShape / Trilu / Equal / Where over constants, applied with Where or added to
the scores; positions from Range into an embedding; nn.Linear on a rank-3 input as
MatMul(x, Transpose(W)). The builders and writers are scripts/onnx_cases.py's;
tests/test_onnx_node.c checks Pock's import of each against the outputs here (and the
refusals), tests/test_onnx_convert.c the ops each imports to. Deterministic: the same
inputs (seeded) and models every run.
"""
import argparse
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnx_cases as oc

I64_MAX = np.iinfo(np.int64).max
F, I, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value, dtype=np.int64):
    """An initializer (integers: the constant inputs Pock folds; floats: parameters)."""
    return oc.initializer(name, value, dtype)


def constant(name, value, dtype=np.float32):
    """A Constant node (what torch.onnx emits for literals such as -1e9: a constant, where
    a float initializer would be a parameter)."""
    return oc.constant_node(name, np.asarray(value, dtype=dtype), node_name="Constant_" + name)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, name=op + "_" + outs[0], **attrs)


class Case:
    """One model with its inputs; `expect` (what the message must say) and `op_type` (the
    node it must name) set for a model Pock refuses."""

    def __init__(self, name, nodes, inputs, outputs, feeds, inits=(), opset=17, expect=None,
                 op_type=None):
        self.name, self.expect, self.op_type = name, expect, op_type
        # IR 8: what onnxruntime 1.19 reads for every opset used here
        self.model = oc.make_model(name, nodes, inputs, outputs, inits, opset,
                                   "pock-onnx_make_shape_cases", 8)
        self.feeds = feeds


def rnd(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def single_op_cases():
    x234 = rnd(1, 2, 3, 4)
    yield Case("reshape_infer", [node("Reshape", ["x", "s"], ["y"])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 6, 2])], {"x": x234},
               [const("s", [2, -1, 2])])
    yield Case("reshape_copy_zero", [node("Reshape", ["x", "s"], ["y"])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 4, 3])], {"x": x234},
               [const("s", [0, 4, -1])])
    yield Case("flatten_axis2", [node("Flatten", ["x"], ["y"], axis=2)],
               [vi("x", F, [2, 3, 2, 2])], [vi("y", F, [6, 4])], {"x": rnd(2, 2, 3, 2, 2)})
    yield Case("flatten_axis_neg", [node("Flatten", ["x"], ["y"], axis=-1)],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [6, 4])], {"x": x234})
    yield Case("squeeze_axes", [node("Squeeze", ["x", "a"], ["y"])],
               [vi("x", F, [2, 1, 3, 1])], [vi("y", F, [2, 3, 1])], {"x": rnd(3, 2, 1, 3, 1)},
               [const("a", [1])])
    yield Case("squeeze_all", [node("Squeeze", ["x"], ["y"])],
               [vi("x", F, [2, 1, 3, 1])], [vi("y", F, [2, 3])], {"x": rnd(3, 2, 1, 3, 1)})
    yield Case("unsqueeze_two", [node("Unsqueeze", ["x", "a"], ["y"])],
               [vi("x", F, [2, 3])], [vi("y", F, [2, 1, 3, 1])], {"x": rnd(4, 2, 3)},
               [const("a", [1, -1])])
    yield Case("transpose_perm", [node("Transpose", ["x"], ["y"], perm=[0, 2, 1])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 4, 3])], {"x": x234})
    yield Case("transpose_default", [node("Transpose", ["x"], ["y"])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [4, 3, 2])], {"x": x234})
    yield Case("concat_two_inputs", [node("Concat", ["x", "z"], ["y"], axis=1)],
               [vi("x", F, [2, 3]), vi("z", F, [2, 4])], [vi("y", F, [2, 7])],
               {"x": rnd(5, 2, 3), "z": rnd(6, 2, 4)})
    yield Case("concat_with_constant", [constant("c", rnd(7, 2, 2)),
                                        node("Concat", ["c", "x"], ["y"], axis=-1)],
               [vi("x", F, [2, 3])], [vi("y", F, [2, 5])], {"x": rnd(5, 2, 3)})
    yield Case("concat_ten", [node("Concat", ["x"] * 10, ["y"], axis=1)],
               [vi("x", F, [2, 3])], [vi("y", F, [2, 30])], {"x": rnd(8, 2, 3)})
    yield Case("split_sizes", [node("Split", ["x", "s"], ["y0", "y1", "y2"], axis=1)],
               [vi("x", F, [2, 6])], [vi("y0", F, [2, 1]), vi("y1", F, [2, 2]),
                                       vi("y2", F, [2, 3])],
               {"x": rnd(9, 2, 6)}, [const("s", [1, 2, 3])])
    yield Case("split_equal", [node("Split", ["x"], ["y0", "y1"], axis=-1)],
               [vi("x", F, [2, 3, 4])], [vi("y0", F, [2, 3, 2]), vi("y1", F, [2, 3, 2])],
               {"x": x234}, opset=13)
    yield Case("split_num_outputs", [node("Split", ["x"], ["y0", "y1", "y2"], axis=1,
                                          num_outputs=3)],
               [vi("x", F, [2, 5])], [vi("y0", F, [2, 2]), vi("y1", F, [2, 2]),
                                       vi("y2", F, [2, 1])],
               {"x": rnd(10, 2, 5)}, opset=18)
    yield Case("slice_steps", [node("Slice", ["x", "b", "e", "a", "s"], ["y"])],
               [vi("x", F, [2, 5, 6])], [vi("y", F, [2, 2, 3])], {"x": rnd(11, 2, 5, 6)},
               [const("b", [1, -4]), const("e", [I64_MAX, -1]), const("a", [1, 2]),
                const("s", [2, 1])])
    yield Case("slice_negative_steps", [node("Slice", ["x", "b", "e", "a", "s"], ["y"])],
               [vi("x", F, [2, 5, 6])], [vi("y", F, [2, 3, 6])], {"x": rnd(29, 2, 5, 6)},
               [const("b", [-1, I64_MAX]), const("e", [-I64_MAX, -I64_MAX]),
                const("a", [2, 1]), const("s", [-1, -2])])
    yield Case("slice_default_axes", [node("Slice", ["x", "b", "e"], ["y"])],
               [vi("x", F, [2, 5])], [vi("y", F, [1, 3])], {"x": rnd(12, 2, 5)},
               [const("b", [1, 0]), const("e", [2, 3])])
    yield Case("gather_axis1_negative", [node("Gather", ["x", "i"], ["y"], axis=1)],
               [vi("x", F, [2, 5, 3])], [vi("y", F, [2, 2, 2, 3])], {"x": rnd(13, 2, 5, 3)},
               [const("i", [[0, -1], [2, 4]])])
    yield Case("gather_scalar_index", [node("Gather", ["x", "i"], ["y"], axis=1)],
               [vi("x", F, [2, 5])], [vi("y", F, [2])], {"x": rnd(14, 2, 5)},
               [const("i", 3)])
    yield Case("gather_embedding", [node("Gather", ["emb.weight", "ids"], ["y"])],
               [vi("ids", I, [2, 4])], [vi("y", F, [2, 4, 3])],
               {"ids": np.array([[1, 0, 9, 3], [3, 3, 7, 2]], np.int64)},
               [const("emb.weight", rnd(15, 10, 3), np.float32)])
    yield Case("gather_computed_indices", [node("Gather", ["x", "ids"], ["y"], axis=1)],
               [vi("x", F, ["N", 5]), vi("ids", I, [3])], [vi("y", F, ["N", 3])],
               {"x": rnd(16, 2, 5), "ids": np.array([4, 0, 2], np.int64)})
    yield Case("expand_broadcast", [node("Expand", ["x", "s"], ["y"])],
               [vi("x", F, [3, 1])], [vi("y", F, [2, 3, 4])], {"x": rnd(17, 3, 1)},
               [const("s", [2, 1, 4])])
    yield Case("pad_constant_value", [node("Pad", ["x", "p", "v"], ["y"])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 6, 6])], {"x": x234},
               [const("p", [0, 1, 2, 0, 2, 0]), const("v", 0.5, np.float32)])
    yield Case("pad_negative_crops", [node("Pad", ["x", "p"], ["y"])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], {"x": x234},
               [const("p", [0, -1, 1, 0, 1, -1])])
    yield Case("pad_axes", [node("Pad", ["x", "p", "", "a"], ["y"])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 7])], {"x": x234},
               [const("p", [1, 2]), const("a", [-1])], opset=18)
    for mode, opset in (("edge", 18), ("reflect", 18), ("wrap", 19)):
        yield Case("pad_" + mode, [node("Pad", ["x", "p"], ["y"], mode=mode)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 6, 7])], {"x": x234},
                   [const("p", [0, 1, 2, 0, 2, 1])], opset=opset)
    yield Case("where_mask_input", [constant("c", -1e9),
                                    node("Where", ["m", "x", "c"], ["y"])],
               [vi("m", B, [2, 3]), vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
               {"m": np.array([[1, 0, 1], [0, 0, 1]], bool), "x": rnd(18, 2, 3)})
    yield Case("trilu_computed", [node("Trilu", ["x", "k"], ["y"], upper=0)],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], {"x": x234},
               [const("k", 1)], opset=14)
    yield Case("cast_same_type", [node("Cast", ["x"], ["c"], to=F),
                                  node("Transpose", ["c"], ["y"])],
               [vi("x", F, [2, 3])], [vi("y", F, [3, 2])], {"x": rnd(19, 2, 3)})
    yield Case("cast_constant_shape", [constant("s", [2.0, 12.0]),
                                       node("Cast", ["s"], ["s32"], to=TensorProto.INT32),
                                       node("Cast", ["s32"], ["s64"], to=I),
                                       node("Reshape", ["x", "s64"], ["y"])],
               [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 12])], {"x": x234})
    yield Case("constant_of_shape_concat",
               [node("Shape", ["x"], ["n"], end=1),
                node("Concat", ["n", "one"], ["s"], axis=0),
                node("ConstantOfShape", ["s"], ["c"],
                     value=numpy_helper.from_array(np.array([1.5], np.float32))),
                node("Concat", ["x", "c"], ["y"], axis=1)],
               [vi("x", F, [2, 3])], [vi("y", F, [2, 4])], {"x": rnd(20, 2, 3)},
               [const("one", [1])], opset=15)


def chain_cases():
    # x.reshape(N, T, H, D).transpose(1, 2) with N symbolic: the shape chain folds away
    yield Case("chain_reshape_heads",
               [node("Shape", ["x"], ["sh"]),
                node("Gather", ["sh", "zero"], ["n"], axis=0),
                node("Unsqueeze", ["n", "ax0"], ["n1"]),
                node("Concat", ["n1", "thd"], ["s"], axis=0),
                node("Reshape", ["x", "s"], ["r"]),
                node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3])],
               [vi("x", F, ["N", 4, 6])], [vi("y", F, ["N", 2, 4, 3])], {"x": rnd(21, 2, 4, 6)},
               [const("zero", 0), const("ax0", [0]), const("thd", [4, 2, 3])])
    # a causal mask: ones (T, T) -> tril -> == 0 marks the future keys
    mask_nodes = [node("Shape", ["scores"], ["t"], start=2),
                  node("Concat", ["t", "t"], ["tt"], axis=0),
                  node("ConstantOfShape", ["tt"], ["ones"],
                       value=numpy_helper.from_array(np.array([1], np.int64))),
                  node("Trilu", ["ones"], ["tril"], upper=0),
                  node("Equal", ["tril", "zero"], ["future"])]
    scores = vi("scores", F, ["N", 4, 4])
    feeds = {"scores": rnd(22, 2, 4, 4)}
    yield Case("chain_causal_mask_where",
               mask_nodes + [constant("neg", -1e9),
                             node("Where", ["future", "neg", "scores"], ["y"])],
               [scores], [vi("y", F, ["N", 4, 4])], feeds, [const("zero", 0)], opset=15)
    yield Case("chain_causal_mask_add",
               mask_nodes + [constant("neg", -1e9), constant("fzero", 0.0),
                             node("Where", ["future", "neg", "fzero"], ["bias"]),
                             node("Add", ["scores", "bias"], ["y"])],
               [scores], [vi("y", F, ["N", 4, 4])], feeds, [const("zero", 0)], opset=15)
    # token + position embeddings: positions = arange(T) from the ids' shape
    yield Case("chain_position_embedding",
               [node("Gather", ["tok.weight", "ids"], ["tok"]),
                node("Shape", ["ids"], ["sh"]),
                node("Gather", ["sh", "one"], ["t"], axis=0),
                node("Range", ["zero", "t", "one"], ["pos"]),
                node("Gather", ["pos.weight", "pos"], ["pe"]),
                node("Unsqueeze", ["pe", "ax0"], ["pe1"]),
                node("Shape", ["tok"], ["tsh"]),
                node("Expand", ["pe1", "tsh"], ["pe2"]),
                node("Concat", ["tok", "pe2"], ["y"], axis=2)],
               [vi("ids", I, ["N", 4])], [vi("y", F, ["N", 4, 6])],
               {"ids": np.array([[1, 0, 9, 3], [3, 3, 7, 2]], np.int64)},
               [const("tok.weight", rnd(23, 10, 3), np.float32),
                const("pos.weight", rnd(24, 8, 3), np.float32),
                const("zero", 0), const("one", 1), const("ax0", [0])])
    # nn.Linear without bias on a rank-3 input, as torch.onnx exports it
    yield Case("chain_linear_transpose",
               [node("Transpose", ["fc.weight"], ["wt"], perm=[1, 0]),
                node("MatMul", ["x", "wt"], ["y"])],
               [vi("x", F, ["N", 3, 4])], [vi("y", F, ["N", 3, 5])], {"x": rnd(25, 2, 3, 4)},
               [const("fc.weight", rnd(26, 5, 4), np.float32)])
    # a transposed initializer read by something other than MatMul: a transpose node
    yield Case("transpose_param_concat",
               [node("Transpose", ["w"], ["wt"]),
                node("Concat", ["x", "wt"], ["y"], axis=0)],
               [vi("x", F, [2, 5])], [vi("y", F, [6, 5])], {"x": rnd(27, 2, 5)},
               [const("w", rnd(28, 5, 4), np.float32)])


def error_cases():
    x = [vi("x", F, [2, 3, 4])]
    y = [vi("y", F, None)]
    feeds = {}
    yield Case("slice_empty", [node("Slice", ["x", "b", "e", "a"], ["y"])],
               x, y, feeds, [const("b", [2]), const("e", [1]), const("a", [1])],
               expect="the result would be empty on axis 1 (Pock has no empty tensors)",
               op_type="Slice")
    yield Case("equal_computed", [node("Equal", ["x", "x"], ["y"])], x, [vi("y", B, None)],
               feeds, expect="Equal of a tensor computed at run time is not supported",
               op_type="Equal")
    yield Case("reshape_bad_count", [node("Reshape", ["x", "s"], ["y"])], x, y, feeds,
               [const("s", [5, -1])], expect="cannot reshape (2, 3, 4) (24 elements) to",
               op_type="Reshape")
    yield Case("cast_float_to_int", [node("Cast", ["x"], ["y"], to=I)], x,
               [vi("y", I, None)], feeds, expect="cannot cast float to int64 at run time",
               op_type="Cast")
    yield Case("gather_out_of_range", [node("Gather", ["x", "i"], ["y"], axis=1)], x, y,
               feeds, [const("i", [0, 7])], expect="index 7 is outside axis 1 of extent 3",
               op_type="Gather")
    yield Case("pad_mode_unknown", [node("Pad", ["x", "p"], ["y"], mode="symmetric")], x, y,
               feeds, [const("p", [0, 0, 1, 0, 0, 1])],
               expect="is not supported (constant, edge, reflect and wrap are)", op_type="Pad")
    yield Case("transpose_bad_perm", [node("Transpose", ["x"], ["y"], perm=[0, 0, 1])], x, y,
               feeds, expect="is not a permutation of 0..2", op_type="Transpose")
    yield Case("concat_mismatch", [node("Concat", ["x", "z"], ["y"], axis=1)],
               x + [vi("z", F, [2, 3, 5])], y, feeds,
               expect="only axis 1 may differ", op_type="Concat")
    yield Case("unsqueeze_rank_9", [node("Unsqueeze", ["x", "a"], ["y"])], x, y, feeds,
               [const("a", [0, 1, 2, 3, 4, 5])], expect="the result would have rank 9",
               op_type="Unsqueeze")
    yield Case("split_sum_mismatch", [node("Split", ["x", "s"], ["y", "y2"], axis=2)], x,
               y + [vi("y2", F, None)], feeds, [const("s", [1, 2])],
               expect="split (1, 2) adds up to 3, but axis 2 has extent 4", op_type="Split")
    yield Case("range_zero_delta", [node("Range", ["a", "b", "c"], ["r"]),
                                    node("Reshape", ["x", "r"], ["y"])], x, y, feeds,
               [const("a", 0), const("b", 4), const("c", 0)], expect="delta is 0", op_type="Range")
    yield Case("where_int_values", [node("Where", ["m", "i", "j"], ["y"])],
               [vi("m", B, [2, 3]), vi("i", I, [2, 3])], [vi("y", I, None)], feeds,
               [const("j", 0)],
               expect="input 1 holds int64 data computed at run time: Pock's where moves",
               op_type="Where")


def write_case(case, out):
    if case.expect is not None:
        oc.write_refused(out, "shape", case.name, case.model, case.expect, case.op_type)
    else:  # the outputs keep the types the case gives them
        feeds = [(i.name, case.feeds[i.name]) for i in case.model.graph.input]
        oc.write_case(out, case.name, case.model, feeds, retype_outputs=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(here), "tests", "fixtures"))
    args = ap.parse_args()
    oc.clean_refused(args.out, "shape")
    n = 0
    for case in list(single_op_cases()) + list(chain_cases()) + list(error_cases()):
        write_case(case, args.out)
        n += 1
    print("wrote %d cases under %s" % (n, args.out))


if __name__ == "__main__":
    main()
