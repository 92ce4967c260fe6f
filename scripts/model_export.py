#!/usr/bin/env python3
"""model_export.py — one example model of examples/models as the ONNX file Pock compiles,
with its training JSON beside it (loss and optimizer: what `pock compile` reads).

  build-venv-onnx/bin/python scripts/model_export.py MODEL OUT_DIR [--size device]
        [--seed 0] [--opset 17] [--weights FILE.pt]

MODEL: a name of examples/models/models.py's MODELS (mobilenet_v2, mobilenet_v2_w1,
resnet18, bert, llama). Writes OUT_DIR/MODEL.onnx (torch.onnx.export in TRAINING mode, so
batch norms compute batch statistics; do_constant_folding=False, so every initializer
keeps its state_dict name; the batch dim symbolic "N"; inputs named as forward()'s
arguments, output "logits") and OUT_DIR/MODEL.training.json (the model's training_spec).
--weights loads a state_dict saved by torch.save first (a pretrained model); without it
the weights are the seeded random init. Prints the file, its parameter count and the
forward's multiply-adds per sample.
"""
# onnx first: importing torch first makes `import onnx` fail in the reference venv
import onnx  # noqa: I001

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def example_models():
    """examples/models/models.py under the name example_models (examples/digits has a
    models.py too)."""
    import gen_model_fixtures
    return gen_model_fixtures._example_models()


def export_model(name, out_dir, size="device", seed=0, opset=17, weights=None):
    """Writes OUT_DIR/NAME.onnx and NAME.training.json; returns (module, onnx path)."""
    import torch
    import export_onnx_fixtures as eof
    em = example_models()
    if name not in em.MODELS:
        raise SystemExit("model_export: unknown model %r: one of %s" % (name, ", ".join(em.MODELS)))
    m = em.MODELS[name](size, seed=seed)
    if weights:
        m.load_state_dict(torch.load(weights, map_location="cpu"))
    names = eof.input_names(m)
    inputs = em.example_inputs(m, batch=2, seed=seed)
    blob = eof.export(m, inputs, names, opset)
    onnx.checker.check_model(onnx.load_from_string(blob))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + ".onnx")
    with open(path, "wb") as f:
        f.write(blob)
    with open(os.path.join(out_dir, name + ".training.json"), "w") as f:
        json.dump(m.training_spec, f)
        f.write("\n")
    return m, path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--size", default="device", choices=("tiny", "standard", "device"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--weights", help="a state_dict saved by torch.save (default: random init)")
    a = ap.parse_args()
    m, path = export_model(a.model, a.out_dir, a.size, a.seed, a.opset, a.weights)
    em = example_models()
    n = sum(p.numel() for p in m.parameters())
    macs = em.forward_macs(m, em.example_inputs(m, batch=1))
    print("wrote %s (%s, %d params, %.1f MMAC per sample forward) and %s.training.json"
          % (path, a.size, n, macs / 1e6, a.model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
