"""onnx_make_nn_cases.py — tiny single-op ONNX models of the nn family (Conv, pools,
normalizations, Dropout) for the importer's tests, with onnxruntime's outputs.

  build-venv-onnx/bin/python scripts/onnx_make_nn_cases.py [REPO]

writes, under REPO/tests/fixtures (REPO: this script's repository by default):
  onnx-ops/nn_<case>/model.onnx + test_data_set_0/input_0.pb, output_K.pb
      ONNX's backend node-test layout: one input X, outputs by onnxruntime (graph
      optimizations off); nn_torch_cnn_13/17 (a small CNN) and nn_torch_groupnorm_13/17
      are exported by torch 1.13 in training mode, onnxruntime's output checked against
      torch's
  onnx-nn-graph/<case>/model.onnx
      models whose output is random (Dropout in training mode): checked for their graph
  onnx-refused/nn_<case>/model.onnx, expect.txt
      models the importer must refuse, with what the message must say
The builders and writers are scripts/onnx_cases.py's; tests/test_onnx_node.c runs the cases
and the refused models, tests/test_onnx_convert.c checks what each case imports to.
Needs onnx 1.16 and onnxruntime 1.19 (the venv the issue names); inputs come from a fixed
seed, so a rerun writes the same files.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnx_cases as oc

REPO = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
FIX = os.path.join(REPO, "tests", "fixtures")
OPS = os.path.join(FIX, "onnx-ops")
GRAPH = os.path.join(FIX, "onnx-nn-graph")


def rnd(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def model(name, nodes, x, inits, opset, outputs=("Y",)):
    """A graph with input X (x's shape), the initializers `inits` (name -> array) and the
    graph outputs `outputs` (float; conformance() fills in their shapes)."""
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    return oc.make_model(name, nodes, [oc.vinfo("X", x)], outs,
                         [oc.initializer(k, v) for k, v in inits.items()], opset,
                         "onnx_make_nn_cases.py", 8 if opset <= 17 else 9 if opset <= 20 else 10)


def conformance(name, m, x):
    """Runs m on x with onnxruntime (no graph optimizations: it would fuse Conv +
    BatchNormalization with the running statistics even in training mode) and writes the
    case in the node-test layout."""
    oc.write_case(FIX, "nn_" + name, m, [("X", x)], optimize=False)


def node(op, inputs, outputs=("Y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


def conv_cases(rng):
    x = rnd(rng, 2, 3, 5, 5)
    w = rnd(rng, 4, 3, 3, 3)
    conformance("conv_basic", model("conv_basic", [node("Conv", ["X", "W"])], x, {"W": w}, 13), x)
    b = rnd(rng, 4)
    conformance("conv_bias_pads_strides", model("conv_bias_pads_strides", [
        node("Conv", ["X", "W", "B"], pads=[1, 0, 2, 1], strides=[2, 1], kernel_shape=[3, 3])],
        x, {"W": w, "B": b}, 17), x)
    x2 = rnd(rng, 1, 4, 7, 6)
    conformance("conv_group_dilations", model("conv_group_dilations", [
        node("Conv", ["X", "W", "B"], group=2, dilations=[2, 1], pads=[1, 1, 1, 1])],
        x2, {"W": rnd(rng, 6, 2, 3, 2), "B": rnd(rng, 6)}, 13), x2)
    conformance("conv_depthwise", model("conv_depthwise", [
        node("Conv", ["X", "W"], group=4, strides=[2, 2], pads=[1, 1, 1, 1])],
        x2, {"W": rnd(rng, 4, 1, 3, 3)}, 17), x2)
    for ap in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        conformance("conv_" + ap.lower(), model("conv_" + ap.lower(), [
            node("Conv", ["X", "W", "B"], auto_pad=ap, strides=[2, 2])],
            x2, {"W": rnd(rng, 3, 4, 4, 3), "B": rnd(rng, 3)}, 13), x2)


def pool_cases(rng):
    x = rnd(rng, 2, 3, 6, 7)
    conformance("maxpool_basic", model("maxpool_basic", [
        node("MaxPool", ["X"], kernel_shape=[2, 2], strides=[2, 2])], x, {}, 13), x)
    conformance("maxpool_pads_dilations", model("maxpool_pads_dilations", [
        node("MaxPool", ["X"], kernel_shape=[3, 2], pads=[1, 1, 1, 0], strides=[1, 2],
             dilations=[1, 2])], x, {}, 13), x)
    conformance("maxpool_ceil", model("maxpool_ceil", [
        node("MaxPool", ["X"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)], x, {}, 13), x)
    conformance("maxpool_same_upper", model("maxpool_same_upper", [
        node("MaxPool", ["X"], kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER")],
        x, {}, 13), x)
    # the Indices output named but read by nobody
    conformance("maxpool_indices_unread", model("maxpool_indices_unread", [
        node("MaxPool", ["X"], ["Y", "I"], kernel_shape=[2, 2])], x, {}, 13), x)
    conformance("avgpool_basic", model("avgpool_basic", [
        node("AveragePool", ["X"], kernel_shape=[2, 3], strides=[2, 2])], x, {}, 13), x)
    conformance("avgpool_pads_exclude", model("avgpool_pads_exclude", [
        node("AveragePool", ["X"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])],
        x, {}, 13), x)
    conformance("avgpool_pads_include", model("avgpool_pads_include", [
        node("AveragePool", ["X"], kernel_shape=[3, 3], pads=[1, 0, 2, 1],
             count_include_pad=1)], x, {}, 13), x)
    conformance("avgpool_ceil", model("avgpool_ceil", [
        node("AveragePool", ["X"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
        x, {}, 13), x)
    conformance("avgpool_same_lower", model("avgpool_same_lower", [
        node("AveragePool", ["X"], kernel_shape=[2, 3], strides=[2, 1], auto_pad="SAME_LOWER")],
        x, {}, 13), x)
    conformance("avgpool_dilations_19", model("avgpool_dilations_19", [
        node("AveragePool", ["X"], kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 0, 0])],
        x, {}, 19), x)
    conformance("global_avgpool", model("global_avgpool", [
        node("GlobalAveragePool", ["X"])], x, {}, 13), x)


def norm_cases(rng):
    x = rnd(rng, 2, 3, 2, 3)
    st = {"s": rnd(rng, 3), "b": rnd(rng, 3), "m": rnd(rng, 3),
          "v": np.abs(rnd(rng, 3)) + 0.5}
    bn = ["X", "s", "b", "m", "v"]
    conformance("bn_infer", model("bn_infer", [
        node("BatchNormalization", bn, epsilon=1e-3, training_mode=0)], x, st, 15), x)
    conformance("bn_infer_13", model("bn_infer_13", [
        node("BatchNormalization", bn)], x, st, 13), x)
    x2 = rnd(rng, 4, 3)
    conformance("bn_infer_rank2", model("bn_infer_rank2", [
        node("BatchNormalization", bn, momentum=0.8)], x2, st, 15), x2)
    # training mode: batch statistics; the running-stat outputs named, read by nobody
    conformance("bn_train", model("bn_train", [
        node("BatchNormalization", bn, ["Y", "rm", "rv"], training_mode=1)], x, st, 15), x)
    x3 = rnd(rng, 2, 3, 4)
    conformance("ln_axis_last", model("ln_axis_last", [
        node("LayerNormalization", ["X", "s", "b"], axis=-1)],
        x3, {"s": rnd(rng, 4), "b": rnd(rng, 4)}, 17), x3)
    conformance("ln_axis_m2", model("ln_axis_m2", [
        node("LayerNormalization", ["X", "s", "b"], axis=-2, epsilon=1e-3)],
        x3, {"s": rnd(rng, 3, 4), "b": rnd(rng, 3, 4)}, 17), x3)
    # the optional Mean and InvStdDev outputs read: graph outputs 1 and 2
    conformance("ln_stats_read", model("ln_stats_read", [
        node("LayerNormalization", ["X", "s", "b"], ["Y", "Mean", "InvStdDev"], axis=-2)],
        x3, {"s": rnd(rng, 3, 4), "b": rnd(rng, 3, 4)}, 17, ("Y", "Mean", "InvStdDev")), x3)
    conformance("ln_no_bias", model("ln_no_bias", [
        node("LayerNormalization", ["X", "s"], axis=1)], x3, {"s": rnd(rng, 3, 4)}, 17), x3)
    x4 = rnd(rng, 2, 4, 3, 2)
    conformance("gn_18_per_group", model("gn_18_per_group", [
        node("GroupNormalization", ["X", "s", "b"], num_groups=2)],
        x4, {"s": rnd(rng, 2), "b": rnd(rng, 2)}, 18), x4)
    conformance("gn_21_per_channel", model("gn_21_per_channel", [
        node("GroupNormalization", ["X", "s", "b"], num_groups=2, epsilon=1e-4)],
        x4, {"s": rnd(rng, 4), "b": rnd(rng, 4)}, 21), x4)
    conformance("in_4d", model("in_4d", [
        node("InstanceNormalization", ["X", "s", "b"])], x4,
        {"s": rnd(rng, 4), "b": rnd(rng, 4)}, 13), x4)
    x5 = rnd(rng, 2, 3, 5)
    conformance("in_3d", model("in_3d", [
        node("InstanceNormalization", ["X", "s", "b"], epsilon=1e-3)], x5,
        {"s": rnd(rng, 3), "b": rnd(rng, 3)}, 13), x5)


def const(name, value):
    return oc.constant_node(name, value, tensor_name=name)


def dropout_cases(rng):
    # an identity Dropout alone would make the graph's output its input, which the importer
    # refuses for any model; a GlobalAveragePool after it computes something
    x = rnd(rng, 2, 3, 2, 3)
    gap = node("GlobalAveragePool", ["D"])
    conformance("dropout_default", model("dropout_default", [
        node("Dropout", ["X"], ["D"]), gap], x, {}, 13), x)
    conformance("dropout_infer", model("dropout_infer", [
        const("r", np.array(0.3, np.float32)), const("t", np.array(False)),
        node("Dropout", ["X", "r", "t"], ["D", "mask"], seed=3), gap], x, {}, 13), x)
    conformance("dropout_train_ratio0", model("dropout_train_ratio0", [
        const("r", np.array(0.0, np.float32)), const("t", np.array(True)),
        node("Dropout", ["X", "r", "t"], ["D"]), gap], x, {}, 13), x)
    x = rnd(rng, 2, 5)
    # training with ratio > 0: the mask is random, so only the graph is checked
    oc.write_model(os.path.join(GRAPH, "dropout_train"), model("dropout_train", [
        const("r", np.array(0.3, np.float32)), const("t", np.array(True)),
        node("Dropout", ["X", "r", "t"], ["Y", "mask"])], x, {}, 13))


def refused_cases(rng):
    """Malformed or unsupported models, each with a piece of the message it must give
    (besides the node's op type)."""
    def bad(name, op_type, expect, nodes, x, inits, opset, outputs=("Y",)):
        oc.write_refused(FIX, "nn", name, model(name, nodes, x, inits, opset, outputs), expect,
                         op_type)
    x1 = rnd(rng, 1, 2, 5)
    bad("conv_1d", "Conv", "1-D and 3-D Conv are not supported",
        [node("Conv", ["X", "W"])], x1, {"W": rnd(rng, 2, 2, 3)}, 13)
    x = rnd(rng, 1, 2, 5, 5)
    w = rnd(rng, 2, 2, 3, 3)
    bad("conv_kernel_shape", "Conv",
        "kernel_shape = (2, 2) disagrees with the weight's kernel (3, 3)",
        [node("Conv", ["X", "W"], kernel_shape=[2, 2])], x, {"W": w}, 13)
    bad("conv_pads_and_auto_pad", "Conv", "pads is given with auto_pad = SAME_UPPER",
        [node("Conv", ["X", "W"], pads=[1, 1, 1, 1], auto_pad="SAME_UPPER")], x, {"W": w}, 13)
    bad("conv_group", "Conv", "group = 2 does not fit",
        [node("Conv", ["X", "W"], group=2)], x, {"W": w}, 13)
    bad("conv_unknown_attr", "Conv", "'frobnicate' is not supported",
        [node("Conv", ["X", "W"], frobnicate=1)], x, {"W": w}, 13)
    bad("maxpool_indices_read", "MaxPool", "output 1 (Indices",
        [node("MaxPool", ["X"], ["Y", "I"], kernel_shape=[2, 2])], x, {}, 13,
        outputs=("Y", "I"))
    bad("maxpool_no_kernel", "MaxPool", "kernel_shape is missing",
        [node("MaxPool", ["X"])], x, {}, 13)
    bad("avgpool_window_too_big", "AveragePool", "window along H (kernel 7",
        [node("AveragePool", ["X"], kernel_shape=[7, 2])], x, {}, 13)
    st = {"s": rnd(rng, 2), "b": rnd(rng, 2), "m": rnd(rng, 2), "v": np.ones(2, np.float32)}
    bn = ["X", "s", "b", "m", "v"]
    bad("bn_momentum_1", "BatchNormalization", "momentum = 1",
        [node("BatchNormalization", bn, momentum=1.0)], x, st, 15)
    bad("bn_running_mean_read", "BatchNormalization", "output 1 (running_mean",
        [node("BatchNormalization", bn, ["Y", "rm", "rv"], training_mode=1)], x, st, 15,
        outputs=("Y", "rm"))
    bad("bn_scale_shape", "BatchNormalization", "input scale has shape (3)",
        [node("BatchNormalization", ["X", "m", "b", "m", "v"])], x,
        dict(st, m=rnd(rng, 3)), 15)
    x3 = rnd(rng, 2, 3, 4)
    bad("ln_opset_13", "LayerNormalization", "needs opset 17",
        [node("LayerNormalization", ["X", "s"])], x3, {"s": rnd(rng, 4)}, 13)
    bad("ln_scale_shape", "LayerNormalization", "input Scale is float (4)",
        [node("LayerNormalization", ["X", "s"], axis=-2)], x3, {"s": rnd(rng, 4)}, 17)
    bad("gn_groups", "GroupNormalization", "num_groups = 2 does not divide the 3 channels",
        [node("GroupNormalization", ["X", "s", "b"], num_groups=2)], x3,
        {"s": rnd(rng, 2), "b": rnd(rng, 2)}, 18)
    bad("dropout_mask_read", "Dropout", "output 1 (mask",
        [node("Dropout", ["X"], ["Y", "mask"])], x3, {}, 13, outputs=("Y", "mask"))


def torch_cases():
    """A small CNN of only this family's ops, exported by torch 1.13 as the issue says
    (training=TrainingMode.TRAINING, do_constant_folding=False): batch norm on batch
    statistics, names from the module (conv1.weight, bn.running_mean, ...). Opset 13 has
    no LayerNormalization (torch decomposes it), so the LayerNorm is in the opset-17 case
    only. Skipped with a note where torch does not load (it needs /usr/bin/python3's
    site-packages: the issue's venv)."""
    try:
        import io
        import torch
        from torch.onnx import TrainingMode
    except ImportError as e:
        print("torch cases skipped: %s" % e)
        return

    class Net(torch.nn.Module):
        def __init__(self, ln):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.bn = torch.nn.BatchNorm2d(4)
            self.pool = torch.nn.MaxPool2d(2)
            self.conv2 = torch.nn.Conv2d(4, 6, 3, stride=2, padding=(1, 0), groups=2)
            # count_include_pad=True (the default) exports as Pad + AveragePool
            self.avg = torch.nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
            self.ln = torch.nn.LayerNorm(14) if ln else None
            self.gap = torch.nn.AdaptiveAvgPool2d(1)

        def forward(self, x):
            y = self.conv1(x)
            if self.ln is not None:  # before the batch norm: after it, it would undo it
                y = self.ln(y)
            return self.gap(self.avg(self.conv2(self.pool(self.bn(y)))))

    torch.manual_seed(17)
    for opset in (13, 17):
        net = Net(opset >= 17)
        with torch.no_grad():  # running stats other than 0 and 1, so a mix-up shows
            net.bn.running_mean.uniform_(-1, 1)
            net.bn.running_var.uniform_(0.5, 2)
        x = torch.randn(2, 3, 12, 14)
        f = io.BytesIO()
        torch.onnx.export(net, x, f, opset_version=opset, training=TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["X"], output_names=["Y"])
        m = onnx.load_from_string(f.getvalue())
        name = "torch_cnn_%d" % opset
        conformance(name, m, x.numpy())
        net.train()
        with torch.no_grad():
            want = net(x).numpy()
        got = numpy_helper.to_array(onnx.load_tensor(
            os.path.join(OPS, "nn_" + name, "test_data_set_0", "output_0.pb")))
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), "onnxruntime and torch differ"

    # torch 1.13 exports nn.GroupNorm as Reshape (N, G, -1) -> InstanceNormalization with
    # constant ones and zeros -> Reshape back -> Mul weight -> Add bias
    for opset in (13, 17):
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.GroupNorm(2, 4))
        with torch.no_grad():
            net[1].weight.uniform_(0.5, 2)
            net[1].bias.uniform_(-1, 1)
        x = torch.randn(2, 3, 6, 5)
        f = io.BytesIO()
        torch.onnx.export(net, x, f, opset_version=opset, training=TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["X"], output_names=["Y"])
        name = "torch_groupnorm_%d" % opset
        conformance(name, onnx.load_from_string(f.getvalue()), x.numpy())
        with torch.no_grad():
            want = net(x).numpy()
        got = numpy_helper.to_array(onnx.load_tensor(
            os.path.join(OPS, "nn_" + name, "test_data_set_0", "output_0.pb")))
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), "onnxruntime and torch differ"


def main():
    rng = np.random.default_rng(17)
    if os.path.isdir(GRAPH):
        shutil.rmtree(GRAPH)
    oc.clean_refused(FIX, "nn")
    conv_cases(rng)
    pool_cases(rng)
    norm_cases(rng)
    dropout_cases(rng)
    refused_cases(rng)
    torch_cases()


if __name__ == "__main__":
    main()
