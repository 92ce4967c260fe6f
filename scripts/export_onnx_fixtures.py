#!/usr/bin/env python3
"""export_onnx_fixtures.py — the example models (examples/models, tiny sizes) as ONNX files
exported by PyTorch, with PyTorch's forward outputs and 5 SGD steps of a sparse scheme, for
the ONNX model tests (tests/onnx_tests.cmake: test_onnx_models, test_onnx_train_*).

  build-venv-onnx/bin/python scripts/export_onnx_fixtures.py [--out DIR] [--only MODEL]
  (a venv from scripts/onnx_venv.sh: onnx 1.16.2, onnxruntime, and Debian's torch 1.13)

Output per model, in OUT/MODEL/ (default tests/fixtures/onnx-models):
  MODEL_op13.onnx, MODEL_op17.onnx   torch.onnx.export at opsets 13 and 17 in TRAINING mode
                 (batch norms compute batch statistics and update their running stats),
                 do_constant_folding=False (every initializer keeps its state_dict name),
                 the batch dim symbolic ("N"); inputs named as forward()'s arguments,
                 output "logits"
  MODEL_op13.training.json, ...      the loss and optimizer beside each model (what
                 `pock compile` reads for an ONNX model; the graph JSON's "training" object)
  x.npy [x1.npy], y.npy              the batches of tests/fixtures/train/models/MODEL
  out_train.npy  (4, classes...) f8  PyTorch's forward on batch 1 in model.train() mode: what
                 the imported graph computes (batch norms with batch statistics)
  out_eval.npy                       the same in model.eval() mode (running statistics);
                 only for the models with batch norms (else it equals out_train.npy)
  SCHEME.json    the sparse spec (scripts/gen_model_fixtures.py's)
  MODEL_SCHEME_sgd.pkw               the trained params and every batch norm's running
                 statistics after 5 SGD steps by PyTorch in model.train() mode
  cases.txt, losses.txt              scripts/fixture_cases.py's format, one case per opset

The models are made with gen_model_fixtures.py's seed, so the initializers equal
tests/fixtures/train/models/MODEL/MODEL_f32.pkw (checked here). onnxruntime runs each
export on batch 1 and must agree with PyTorch (checked here).

One scheme per model, to keep the test short: MobileNetV2 trains bias_norms_last (its batch
norms train, so every one uses batch statistics under either bn_mode), the others
partial25_head (ResNet-18: a quarter of the last block's conv input channels, its frozen
batch norms in training mode; BERT and LLaMA: the last block's linears, reached through a
Transpose, a quarter of their input channels, + the head).
"""
# onnx first: importing torch first makes `import onnx` fail in this venv (torch 1.13
# loads an older onnx protobuf module of its own)
import onnx  # noqa: I001
import onnxruntime

import argparse
import copy
import inspect
import io
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_model_fixtures as gm  # noqa: E402
from fixture_cases import Cases  # noqa: E402

OPSETS = (13, 17)
SCHEME = {"mobilenet_v2": "bias_norms_last", "resnet18": "partial25_head",
          "bert": "partial25_head", "llama": "partial25_head"}
TOL = 1e-4  # f32 models


def input_names(m):
    """forward()'s argument names: "x" for the conv nets, "ids" (and BERT's "mask")."""
    return [p for p in inspect.signature(m.forward).parameters]


def export(m, inputs, names, opset):
    """The ONNX model of m, its initializers set back to m's values: tracing in TRAINING
    mode runs the forward, which updates the running statistics of the traced copy."""
    import torch
    from onnx import numpy_helper
    sd = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    f = io.BytesIO()
    axes = {n: {0: "N"} for n in names}
    axes["logits"] = {0: "N"}
    torch.onnx.export(copy.deepcopy(m), tuple(inputs), f, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=names, output_names=["logits"], dynamic_axes=axes)
    model = onnx.load_from_string(f.getvalue())
    for t in model.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(sd[t.name], t.name))
    return model.SerializeToString()


def check_initializers(mname, model, m):
    """Every initializer is a state_dict entry with the values of the committed
    MODEL_f32.pkw (torch2pock's conversion of the same model); every param is one."""
    import torch2pock
    from onnx import numpy_helper
    pkw = torch2pock.read_pkw(os.path.join(ROOT, "tests", "fixtures", "train", "models", mname,
                                           mname + "_f32.pkw"))
    sd = m.state_dict()
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for name, v in inits.items():
        if name not in sd:
            raise SystemExit("%s: initializer %s is no state_dict entry" % (mname, name))
        if name in pkw and not np.array_equal(np.asarray(pkw[name]).reshape(v.shape), v):
            raise SystemExit("%s: initializer %s differs from %s_f32.pkw" % (mname, name, mname))
    missing = [n for n, _ in m.named_parameters() if n not in inits]
    if missing:
        raise SystemExit("%s: params without an initializer: %s" % (mname, missing))
    return len(inits), sum(n in pkw for n in inits)


def check_ort(mname, blob, names, inputs, want):
    """onnxruntime's forward equals PyTorch's in model.train() mode. With graph
    optimizations off: ORT 1.19 fuses Conv + BatchNormalization using the running
    statistics even when the batch norm is in training mode (seen on MobileNetV2's
    project convs: errors of 0.4)."""
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxruntime.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    feeds = {n: v.numpy() for n, v in zip(names, inputs)}
    got = sess.run(["logits"], feeds)[0]
    err = float(np.max(np.abs(got - want)))
    if not err <= TOL * max(1.0, float(np.max(np.abs(want)))):
        raise SystemExit("%s: onnxruntime differs from PyTorch by %.3g" % (mname, err))
    return err


def generate_model(out_dir, mname):
    import torch
    import torch2pock
    d = os.path.join(out_dir, mname)
    os.makedirs(d, exist_ok=True)
    m = gm.make_model(mname, "f32")  # never run: its state is the initial one
    names = input_names(m)
    xs, y = gm.make_batches(gm.make_model(mname, "f64"))  # gen_model_fixtures' batches
    for i, x in enumerate(xs):
        np.save(os.path.join(d, "x%s.npy" % (i or "")), x)
    np.save(os.path.join(d, "y.npy"), y)

    class _Dtype:  # what gm.torch_inputs reads of a Trainer
        tdt, m = torch.float32, None
    holder = _Dtype()
    holder.m = m
    inputs = gm.torch_inputs(holder, xs, 0)
    # forward on batch 1, train mode on a copy (it updates running statistics)
    with torch.no_grad():
        out_eval = copy.deepcopy(m).eval()(*inputs).double().numpy()
        out_train = copy.deepcopy(m).train()(*inputs).double().numpy()
    np.save(os.path.join(d, "out_train.npy"), out_train)
    if any(isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) for mod in m.modules()):
        np.save(os.path.join(d, "out_eval.npy"), out_eval)
    training = {"loss": "softmax_cross_entropy", "optimizer": gm.SGD}
    report = []
    for op in OPSETS:
        blob = export(m, inputs, names, op)
        model = onnx.load_from_string(blob)
        onnx.checker.check_model(model)
        ninit, nsame = check_initializers(mname, model, m)
        err = check_ort(mname, blob, names, inputs, out_train)
        base = "%s_op%d" % (mname, op)
        with open(os.path.join(d, base + ".onnx"), "wb") as f:
            f.write(blob)
        with open(os.path.join(d, base + ".training.json"), "w") as f:
            json.dump(training, f)
            f.write("\n")
        report.append("%s: %d bytes, %d initializers (%d in %s_f32.pkw, equal), "
                      "onnxruntime err %.2g" % (base, len(blob), ninit, nsame, mname, err))
    scheme = SCHEME[mname]
    with open(os.path.join(d, scheme + ".json"), "w") as f:
        json.dump(gm.spec_of(mname, scheme), f)
        f.write("\n")
    # 5 SGD steps in model.train(): the ONNX import trains every batch norm with batch
    # statistics (bn_mode "train"), frozen or not, so none is put in eval mode here
    tr = gm.Trainer(mname, scheme, gm.SGD, "f32")
    tr.frozen_bn = []
    losses = [tr.step(gm.torch_inputs(tr, xs, t), torch.from_numpy(y[t]).long())
              for t in range(gm.STEPS)]
    case = "%s_%s_sgd" % (mname, scheme)
    torch2pock.write_pkw(os.path.join(d, case + ".pkw"), tr.trained())
    table = Cases(gm.STEPS)
    for op in OPSETS:
        table.add("%s_op%d_%s_sgd" % (mname, op, scheme), "%s_op%d.onnx" % (mname, op),
                  scheme + ".json", gm.SGD, TOL, case + ".pkw", losses)
    table.write(d)
    for line in report:
        print(line)
    return len(table)


def generate(out_dir, only=None):
    import torch
    torch.set_num_threads(1)  # summation order fixed: reproducible to the last bit
    return sum(generate_model(out_dir, m) for m in gm.MODELS if only in (None, m))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "onnx-models"))
    ap.add_argument("--only", choices=gm.MODELS, help="only this model")
    a = ap.parse_args()
    print("export_onnx_fixtures: %d cases in %s" % (generate(a.out, a.only), a.out))


if __name__ == "__main__":
    main()
