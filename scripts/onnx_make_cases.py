#!/usr/bin/env python3
"""onnx_make_cases.py — writes the ONNX fixtures of the math converters
(frontends/onnx/onnx_ops_math.c): tiny single-op models (and the decompositions exporters
emit) built with onnx.helper, run by onnxruntime on fixed inputs, in the layout of ONNX's
backend node tests:

  tests/fixtures/onnx-ops/math_<case>/model.onnx
  tests/fixtures/onnx-ops/math_<case>/test_data_set_0/input_<i>.pb, output_0.pb

and models Pock must refuse, with no data: tests/fixtures/onnx-refused/math_<case>/model.onnx
and expect.txt (what the message must say). The builders and writers are
scripts/onnx_cases.py's; tests/test_onnx_node.c runs both kinds, tests/test_onnx_convert.c
checks the ops each case imports to.

Run with the reference venv (scripts/onnx_venv.sh; onnx 1.16.2, onnxruntime 1.19.2):
  build-venv-onnx/bin/python scripts/onnx_make_cases.py [OUT_ROOT]
Every graph input has dim 0 = 2 (the batch); other operands are initializers or Constant
nodes, so the importer sees PARAM, TPARAM and CONST operands as exporters produce them.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

import onnx_cases as oc

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures")
RNG = np.random.default_rng(17)
F = TensorProto.FLOAT


def rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def const_node(name, value):
    """A Constant node producing `name` (a CONST value for the importer)."""
    return oc.constant_node(name, value, node_name=name + "_const", tensor_name=name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    """inputs: [(name, array)]; outputs: [name] (typed by write_case from onnxruntime's)."""
    return oc.make_model("g", nodes, [oc.vinfo(n, a) for n, a in inputs],
                         [helper.make_tensor_value_info(o, F, None) for o in outputs],
                         [oc.initializer(n, a) for n, a in inits], opset,
                         "pock-onnx_make_cases", 8)


def write_case(name, m, inputs):
    oc.write_case(OUT, "math_" + name, m, inputs)


def case(name, nodes, inputs, inits=(), opset=13, outputs=("y",)):
    write_case(name, model(nodes, inputs, list(outputs), inits, opset), inputs)


def bad(name, op_type, expect, nodes, inputs, inits=(), opset=13):
    """A model Pock refuses with a message naming the node (its op_type) and saying expect."""
    oc.write_refused(OUT, "math", name, model(nodes, inputs, ["y"], inits, opset), expect,
                     op_type)


def node(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), name=op.lower() + "_0", **attrs)


def torch_cases():
    """What torch 1.13 itself exports (training mode, no constant folding): nn.Linear on a
    rank-3 input (MatMul of a Transpose of the weight: a TPARAM) followed by F.gelu (the
    Div/Erf/Add/Mul/Mul chain), at opset 13 and 17."""
    import io

    import torch
    import torch.nn.functional as tF

    class LinearGelu(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 5)

        def forward(self, x):
            return tF.gelu(self.fc(x))

    torch.manual_seed(17)
    mod = LinearGelu()
    x = rand(2, 3, 4)
    for opset in (13, 17):
        buf = io.BytesIO()
        torch.onnx.export(mod, torch.from_numpy(x), buf, opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}})
        m = onnx.load_from_string(buf.getvalue())
        write_case("torch_linear_gelu_op%d" % opset, m, [("x", x)])


def main():
    oc.clean_refused(OUT, "math")
    x23 = rand(2, 3)
    x234 = rand(2, 3, 4)
    pos = rand(2, 3, 4, lo=0.25, hi=3.0)

    # ---- elementwise binary, numpy broadcasting; PARAM, CONST and input operands ----
    case("add_bcast_param", [node("Add", ["x", "b"])], [("x", x234)], [("b", rand(4))])
    case("sub_const_scalar", [const_node("c", np.float32(0.75)), node("Sub", ["c", "x"])],
         [("x", x23)])
    case("mul_inputs", [node("Mul", ["x", "z"])], [("x", x23), ("z", rand(2, 3))])
    case("div_bcast_inputs", [node("Div", ["x", "z"])],
         [("x", x234), ("z", rand(2, 1, 4, lo=0.5, hi=2.0))])
    case("pow_scalar_2", [const_node("e", np.float32(2.0)), node("Pow", ["x", "e"])],
         [("x", x234)])
    case("pow_scalar_half", [const_node("e", np.float32(0.5)), node("Pow", ["x", "e"])],
         [("x", pos)])
    case("pow_scalar_int_exp", [const_node("e", np.int64(3)), node("Pow", ["x", "e"])],
         [("x", x23)])
    case("pow_tensor", [node("Pow", ["x", "z"])], [("x", pos), ("z", rand(2, 3, 4))])

    # ---- unary math and activations ----
    for op, x in [("Sqrt", pos), ("Reciprocal", pos), ("Neg", x234), ("Abs", x234),
                  ("Exp", x234), ("Log", pos), ("Erf", x234), ("Relu", x234),
                  ("Sigmoid", x234), ("Tanh", x234), ("HardSwish", rand(2, 3, 4, lo=-5, hi=5))]:
        case(op.lower(), [node(op, ["x"])], [("x", x)], opset=14 if op == "HardSwish" else 13)
    case("leaky_relu_default", [node("LeakyRelu", ["x"])], [("x", x234)])
    case("leaky_relu_alpha", [node("LeakyRelu", ["x"], alpha=0.3)], [("x", x234)])
    case("leaky_relu_zero", [node("LeakyRelu", ["x"], alpha=0.0)], [("x", x234)])
    case("elu_alpha", [node("Elu", ["x"], alpha=0.5)], [("x", x234)])
    xw = rand(2, 3, 4, lo=-8, hi=8)
    case("clip_both", [const_node("lo", np.float32(-0.5)), const_node("hi", np.float32(0.25)),
                       node("Clip", ["x", "lo", "hi"])], [("x", x234)])
    case("clip_relu6", [const_node("lo", np.float32(0)), const_node("hi", np.float32(6)),
                        node("Clip", ["x", "lo", "hi"])], [("x", xw)])
    case("clip_min_only", [const_node("lo", np.float32(-0.5)), node("Clip", ["x", "lo"])],
         [("x", x234)])
    case("clip_max_only", [const_node("hi", np.float32(0.5)), node("Clip", ["x", "", "hi"])],
         [("x", x234)])
    case("clip_none", [node("Clip", ["x"], ["c"]), node("Relu", ["c"])], [("x", x234)])
    case("hard_sigmoid_default", [node("HardSigmoid", ["x"])], [("x", xw)])
    case("hard_sigmoid_torch", [node("HardSigmoid", ["x"], alpha=1.0 / 6)], [("x", xw)])
    case("gelu_none", [node("Gelu", ["x"])], [("x", x234)], opset=20)
    case("gelu_tanh", [node("Gelu", ["x"], approximate="tanh")], [("x", x234)], opset=20)

    # ---- MatMul: every rank combination, PARAM and TPARAM weights ----
    case("matmul_2d_param", [node("MatMul", ["x", "w"])], [("x", rand(2, 4))],
         [("w", rand(4, 3))])
    case("matmul_tparam_linear",  # nn.Linear on rank-3 input, do_constant_folding=False
         [node("Transpose", ["w"], ["wt"], perm=[1, 0]), node("MatMul", ["x", "wt"])],
         [("x", x234)], [("w", rand(5, 4))])
    case("matmul_tparam_2d",
         [node("Transpose", ["w"], ["wt"], perm=[1, 0]), node("MatMul", ["x", "wt"])],
         [("x", rand(2, 4))], [("w", rand(5, 4))])
    case("matmul_batch_inputs", [node("MatMul", ["x", "z"])],
         [("x", x234), ("z", rand(2, 4, 5))])
    case("matmul_batch_bcast", [node("MatMul", ["x", "w"])], [("x", rand(2, 1, 3, 4))],
         [("w", rand(5, 4, 2))])
    case("matmul_vec_b", [node("MatMul", ["x", "v"])], [("x", x234)], [("v", rand(4))])
    case("matmul_vec_vec", [node("MatMul", ["x", "v"])], [("x", rand(2))], [("v", rand(2))])
    case("matmul_vec_a", [node("MatMul", ["v", "x"])], [("x", rand(2, 4, 3))],
         [("v", rand(4))])

    # ---- Gemm ----
    case("gemm_linear", [node("Gemm", ["x", "w", "b"], transB=1)], [("x", rand(2, 4))],
         [("w", rand(3, 4)), ("b", rand(3))])
    case("gemm_alpha_beta", [node("Gemm", ["x", "w", "c"], alpha=0.5, beta=2.0)],
         [("x", rand(2, 4))], [("w", rand(4, 3)), ("c", rand(1, 3))])
    case("gemm_trans_a_no_c", [node("Gemm", ["x", "w"], transA=1)], [("x", rand(2, 3))],
         [("w", rand(2, 4))])
    case("gemm_tparam",
         [node("Transpose", ["w"], ["wt"], perm=[1, 0]), node("Gemm", ["x", "wt", "b"])],
         [("x", rand(2, 4))], [("w", rand(3, 4)), ("b", rand(3))])

    # ---- Softmax family ----
    case("softmax_last", [node("Softmax", ["x"])], [("x", x234)])
    case("softmax_axis1", [node("Softmax", ["x"], axis=1)], [("x", x234)])
    case("log_softmax_last", [node("LogSoftmax", ["x"], axis=-1)], [("x", x234)])

    # ---- reductions: axes as attribute (13) and as input (ReduceSum 13, all from 18) ----
    case("reduce_mean_attr_keep", [node("ReduceMean", ["x"], axes=[-1])], [("x", x234)])
    case("reduce_max_attr", [node("ReduceMax", ["x"], axes=[1], keepdims=0)], [("x", x234)])
    case("reduce_sum_input", [const_node("ax", np.array([0, 2], np.int64)),
                              node("ReduceSum", ["x", "ax"], keepdims=0)], [("x", x234)])
    case("reduce_sum_all", [node("ReduceSum", ["x"], keepdims=0)], [("x", x234)])
    case("reduce_sum_noop", [const_node("ax", np.zeros(0, np.int64)),
                             node("ReduceSum", ["x", "ax"], ["r"], noop_with_empty_axes=1),
                             node("Relu", ["r"])], [("x", x234)])
    case("reduce_mean_op18", [const_node("ax", np.array([1], np.int64)),
                              node("ReduceMean", ["x", "ax"], keepdims=0)], [("x", x234)],
         opset=18)
    case("reduce_max_op18_all", [node("ReduceMax", ["x"])], [("x", x234)], opset=18)

    # ---- the decompositions exporters emit ----
    # torch 1.13's F.gelu at every opset (onnx_patterns.c makes it one gelu)
    case("gelu_torch_pattern",
         [const_node("s2", np.float32(1.4142135381698608)), const_node("one", np.float32(1.0)),
          const_node("half", np.float32(0.5)),
          helper.make_node("Div", ["x", "s2"], ["d"], name="div"),
          helper.make_node("Erf", ["d"], ["e"], name="erf"),
          helper.make_node("Add", ["e", "one"], ["a"], name="add"),
          helper.make_node("Mul", ["x", "a"], ["m"], name="mul"),
          helper.make_node("Mul", ["m", "half"], ["y"], name="mul_1")], [("x", x234)])
    # the same with the constants made between the links, and Add/Mul operands swapped:
    # still one gelu
    case("gelu_pattern_late_consts",
         [const_node("s2", np.float32(1.4142135381698608)),
          helper.make_node("Div", ["x", "s2"], ["d"], name="div"),
          helper.make_node("Erf", ["d"], ["e"], name="erf"),
          const_node("one", np.float32(1.0)),
          helper.make_node("Add", ["one", "e"], ["a"], name="add"),
          helper.make_node("Mul", ["a", "x"], ["m"], name="mul"),
          const_node("half", np.float32(0.5)),
          helper.make_node("Mul", ["half", "m"], ["y"], name="mul_1")], [("x", x234)])
    # a link read twice (e also feeds the result) is not a gelu: the nodes stay
    case("gelu_pattern_shared",
         [const_node("s2", np.float32(1.4142135381698608)), const_node("one", np.float32(1.0)),
          const_node("half", np.float32(0.5)),
          helper.make_node("Div", ["x", "s2"], ["d"], name="div"),
          helper.make_node("Erf", ["d"], ["e"], name="erf"),
          helper.make_node("Add", ["e", "one"], ["a"], name="add"),
          helper.make_node("Mul", ["x", "a"], ["m"], name="mul"),
          helper.make_node("Mul", ["m", "half"], ["g"], name="mul_1"),
          helper.make_node("Add", ["g", "e"], ["y"], name="add_1")], [("x", x234)])
    # LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div (torch exports it so below opset 17; the
    # importer's onnx_patterns.c makes it one layer_norm)
    case("layer_norm_decomposed",
         [const_node("two", np.float32(2.0)), const_node("eps", np.float32(1e-5)),
          helper.make_node("ReduceMean", ["x"], ["mu"], name="rm0", axes=[-1]),
          helper.make_node("Sub", ["x", "mu"], ["xc"], name="sub"),
          helper.make_node("Pow", ["xc", "two"], ["sq"], name="pow"),
          helper.make_node("ReduceMean", ["sq"], ["var"], name="rm1", axes=[-1]),
          helper.make_node("Add", ["var", "eps"], ["ve"], name="add0"),
          helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
          helper.make_node("Div", ["xc", "sd"], ["xn"], name="div"),
          helper.make_node("Mul", ["xn", "gamma"], ["xg"], name="mul"),
          helper.make_node("Add", ["xg", "beta"], ["y"], name="add1")],
         [("x", x234)], [("gamma", rand(4)), ("beta", rand(4))])
    # the same with the variance read again (so no layer_norm: converted node by node)
    case("layer_norm_shared",
         [const_node("two", np.float32(2.0)), const_node("eps", np.float32(1e-5)),
          helper.make_node("ReduceMean", ["x"], ["mu"], name="rm0", axes=[-1]),
          helper.make_node("Sub", ["x", "mu"], ["xc"], name="sub"),
          helper.make_node("Pow", ["xc", "two"], ["sq"], name="pow"),
          helper.make_node("ReduceMean", ["sq"], ["var"], name="rm1", axes=[-1]),
          helper.make_node("Add", ["var", "eps"], ["ve"], name="add0"),
          helper.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
          helper.make_node("Div", ["xc", "sd"], ["xn"], name="div"),
          helper.make_node("Mul", ["xn", "gamma"], ["xg"], name="mul"),
          helper.make_node("Add", ["xg", "beta"], ["z"], name="add1"),
          helper.make_node("Add", ["z", "var"], ["y"], name="add2")],
         [("x", x234)], [("gamma", rand(4)), ("beta", rand(4))])
    # attention scores scaled by 1 / Sqrt(Constant): the Sqrt and Div fold at import
    case("fold_sqrt_scale",
         [const_node("dk", np.float32(16.0)),
          helper.make_node("Sqrt", ["dk"], ["sdk"], name="sqrt"),
          helper.make_node("Div", ["x", "sdk"], ["y"], name="div")], [("x", x234)])
    # integer arithmetic folded with ONNX's semantics (Div truncates: floor would give
    # other remainders), then used as Pow's exponent tensor; float constants broadcast
    case("fold_int_arith",
         [const_node("a", np.array([7, -7, 9], np.int64)),
          const_node("b", np.array([2, 2, -4], np.int64)),
          helper.make_node("Div", ["a", "b"], ["q"], name="div_int"),  # (3, -3, -2)
          helper.make_node("Mul", ["q", "b"], ["qb"], name="mul_int"),
          helper.make_node("Sub", ["a", "qb"], ["r"], name="sub_int"),  # (1, -1, 1)
          helper.make_node("Pow", ["x", "r"], ["p"], name="pow"),
          const_node("f", np.array([[0.5], [0.25]], np.float32)),
          const_node("g", np.array([1.0, 2.0, -3.0], np.float32)),
          helper.make_node("Mul", ["f", "g"], ["fg"], name="mul_f"),  # (2, 3)
          helper.make_node("Add", ["p", "fg"], ["y"], name="add")],
         [("x", rand(2, 3, lo=0.5, hi=2.0))])
    # every elementwise fold on float constants (and integer Pow, Neg, Abs, Clip),
    # summed into one (2, 3) constant added to x: the graph keeps one add
    fn = []
    terms = []

    def fold(op, ins, **attrs):
        out = "t%d" % len(fn)
        fn.append(helper.make_node(op, ins, [out], name="fold_%d_%s" % (len(fn), op), **attrs))
        return out

    fn += [const_node("c0", np.array([[-1.5, 0.25, 4.0], [0.5, -3.5, 2.0]], np.float32)),
           const_node("i0", np.array([3, -2, 5], np.int64)),
           const_node("i2", np.int64(2)), const_node("ilo", np.int64(-1)),
           const_node("ihi", np.int64(4)), const_node("flo", np.float32(-2.0)),
           const_node("fhi", np.float32(-0.3))]
    a = fold("Abs", ["c0"])
    terms += [a, fold("Exp", [fold("Log", [a])]), fold("Sigmoid", ["c0"]), fold("Erf", ["c0"]),
              fold("Tanh", ["c0"]), fold("Sqrt", [a]), fold("Relu", ["c0"]),
              fold("Clip", [fold("Neg", [fold("Reciprocal", [a])]), "flo", "fhi"]),
              fold("LeakyRelu", ["c0"], alpha=0.1), fold("Elu", ["c0"], alpha=0.7),
              fold("HardSigmoid", ["c0"], alpha=0.3, beta=0.4), fold("HardSwish", ["c0"]),
              fold("Pow", [a, "i2"]), fold("Div", ["c0", a]), fold("Sub", ["c0", a])]
    # (9, 4, 25) -> (4, 4, 4) after the clip (onnxruntime has no integer Relu)
    ipart = fold("Clip", [fold("Abs", [fold("Neg", [fold("Pow", ["i0", "i2"])])]), "ilo", "ihi"])
    ip = fold("Pow", ["c0", ipart])
    total = terms[0]
    for t in terms[1:] + [ip]:
        total = fold("Add", [total, t])
    case("fold_float_all", fn + [helper.make_node("Add", ["x", total], ["y"], name="add")],
         [("x", x23)], opset=14)
    # a constant integer exponent: Add(Div(-7, 2), 6) = 3 (floor division would give 2)
    case("fold_int_exponent",
         [const_node("a", np.int64(-7)), const_node("b", np.int64(2)),
          const_node("c", np.int64(6)),
          helper.make_node("Div", ["a", "b"], ["q"], name="div_int"),
          helper.make_node("Add", ["q", "c"], ["e"], name="add_int"),
          helper.make_node("Pow", ["x", "e"], ["y"], name="pow")], [("x", x23)])

    torch_cases()

    # ---- refused models ----
    bad("clip_min_not_const", "Clip", "must be known at import",
        [node("Clip", ["x", "lo"])], [("x", x23), ("lo", rand(2))])
    bad("leaky_relu_negative", "LeakyRelu", "attribute 'alpha' = -0.5",
        [node("LeakyRelu", ["x"], alpha=-0.5)], [("x", x23)])
    bad("gelu_bad_approximate", "Gelu", 'is neither "none" nor "tanh"',
        [node("Gelu", ["x"], approximate="fast")], [("x", x23)], opset=20)
    bad("reduce_axis_range", "ReduceMean", "axis 3 is out of range for rank 2",
        [node("ReduceMean", ["x"], axes=[3])], [("x", x23)])
    bad("reduce_axes_attr_op18", "ReduceMean", "the axes are its second input",
        [node("ReduceMean", ["x"], axes=[1])], [("x", x23)], opset=18)
    bad("reduce_axis_twice", "ReduceMax", "is listed twice",
        [node("ReduceMax", ["x"], axes=[1, -1])], [("x", x23)])
    bad("gemm_bad_c", "Gemm", "does not broadcast to the result (2, 3)",
        [node("Gemm", ["x", "w", "c"])], [("x", rand(2, 4))],
        [("w", rand(4, 3)), ("c", rand(4))])
    bad("add_int_tensors", "Add", "is int64: Pock computes this op on float tensors only",
        [node("Add", ["x", "z"])],
        [("x", np.zeros((2, 3), np.int64)), ("z", np.ones((2, 3), np.int64))])
    bad("matmul_inner", "MatMul", "inner dims differ",
        [node("MatMul", ["x", "w"])], [("x", rand(2, 4))], [("w", rand(5, 3))])
    bad("softmax_axis", "Softmax", "axis",
        [node("Softmax", ["x"], axis=5)], [("x", x23)])
    bad("relu_unknown_attr", "Relu", "foo",
        [node("Relu", ["x"], foo=1)], [("x", x23)])
    bad("clip_min_above_max", "Clip", "min 1 > max 0",
        [const_node("lo", np.float32(1)), const_node("hi", np.float32(0)),
         node("Clip", ["x", "lo", "hi"])], [("x", x23)])
    bad("fold_int_div_zero", "Div", "integer division by zero",
        [const_node("a", np.array([1], np.int64)), const_node("b", np.array([0], np.int64)),
         node("Div", ["a", "b"], ["q"]), node("Relu", ["x"])], [("x", x23)])


if __name__ == "__main__":
    main()
