#!/usr/bin/env python3
"""ort_train_check.py — checks bench/ort_train_worker.py against PyTorch: the losses of the
first steps, and the test loss and accuracy after them, equal PyTorch's for the same
trainable set, optimizer and batches, on the example models at tiny size.

  build-venv-onnx/bin/python bench/ort_train_check.py [--models mobilenet_v2,llama]
        [--cases full/adamw,full/sgd,last4/sgd] [--steps 4] [--keep DIR]

For each model (default: all four of examples/models at tiny size) it exports the ONNX
file (scripts/model_export.py's export, training mode), draws 32 training and 16 test rows
(random inputs, random labels; LLaMA per-token labels), and runs the worker in this process
for each case (default: all three): full/adamw, every parameter with AdamW (weight decay
0.01); full/sgd, every parameter with plain SGD; last4/sgd, the last 4 parameters (a sparse
set) with SGD. PyTorch trains the same module from
the same initial weights on the same batches (torch.optim.AdamW with eps 1e-8, or SGD;
frozen parameters requires_grad=False; batch norms in train mode), then evaluates in eval
mode (batch norms with the running statistics the worker copied back). Prints one line per
case; exits 1 when a loss differs by more than 1e-4 (relative) or the test loss by more
than 2e-4, 77 when onnxruntime-training or torch is missing (the ctest skip).

Also checked by hand (2026-12-02): the pretrained MiniLM (scripts/minilm_export.py OUT
--seq 32, its sample batch of 8, AdamW lr 2e-5, weight decay 0.01): the worker's losses of
5 steps equal examples/minilm/torch_steps.py's to its 6 printed decimals for head.*
(0.693900 ... 0.691040), norms + biases + head (... 0.688026) and every parameter
(0.693900 0.628279 0.566910 0.508538 0.452460); and every device-size example model
(--size device: resnet18, mobilenet_v2, llama, bert; every parameter and the last two,
SGD and AdamW, batch 8) trains and evaluates through it.
"""
# onnx first: importing torch first makes `import onnx` fail in the reference venv
try:
    import onnx  # noqa: F401,I001
except ImportError:  # not the reference venv: main() says so and skips
    onnx = None

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

MODELS = ("mobilenet_v2", "resnet18", "bert", "llama")
ROWS, TEST_ROWS, BATCH = 32, 16, 8
LOSS_TOL, TEST_TOL = 1e-4, 2e-4
CASES = {"full/adamw": ("full", "adamw", 1e-3, 0.01), "full/sgd": ("full", "sgd", 0.05, 0.0),
         "last4/sgd": ("last4", "sgd", 0.05, 0.0)}


def make_data(em, m, rows, seed):
    """(inputs, labels) as torch tensors: example_inputs' rows and labels in the model's
    classes (per token for an output with a sequence axis)."""
    import torch
    inputs = em.example_inputs(m, batch=rows, seed=seed)
    with torch.no_grad():
        out = m(*inputs)
    g = torch.Generator().manual_seed(seed + 1)
    labels = torch.randint(0, out.shape[-1], out.shape[:-1], generator=g)
    return inputs, labels


def save_npy(d, tag, inputs, labels):
    """tag_0.npy, tag_1.npy, ..., tag_y.npy; returns the worker's X,X2:Y spec."""
    import numpy as np
    xs = []
    for k, t in enumerate(inputs):
        p = os.path.join(d, "%s_%d.npy" % (tag, k))
        np.save(p, t.numpy())
        xs.append(p)
    y = os.path.join(d, tag + "_y.npy")
    np.save(y, labels.numpy().astype(np.int32))
    return ",".join(xs) + ":" + y


def torch_run(em, name, names, opt, lr, wd, train, test, steps):
    """PyTorch's losses of the first `steps` steps and (test loss, test acc) after them."""
    import torch
    import torch.nn.functional as F
    m = em.MODELS[name]("tiny", seed=0).to(torch.float32)
    m.train()
    params = []
    for n, p in m.named_parameters():
        p.requires_grad_(n in names)
        if n in names:
            params.append(p)
    o = (torch.optim.AdamW(params, lr=lr, weight_decay=wd, eps=1e-8) if opt == "adamw"
         else torch.optim.SGD(params, lr=lr))

    def ce(out, y):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    losses = []
    for s in range(steps):
        r = (s * BATCH) % ROWS
        out = m(*[x[r:r + BATCH] for x in train[0]])
        loss = ce(out, train[1][r:r + BATCH])
        o.zero_grad()
        loss.backward()
        o.step()
        losses.append(loss.item())
    m.eval()
    with torch.no_grad():
        out = m(*test[0])
        tl = ce(out, test[1]).item()
        acc = (out.argmax(-1) == test[1]).double().mean().item()
    return losses, tl, acc


def check_model(em, wk, name, cases, steps, d):
    import model_export
    m, path = model_export.export_model(name, d, size="tiny")
    train, test = make_data(em, m, ROWS, 1), make_data(em, m, TEST_ROWS, 2)
    dspec, tspec = save_npy(d, "train", *train), save_npy(d, "test", *test)
    all_params = [n for n, _ in m.named_parameters()]
    sets = {"full": all_params, "last4": all_params[-4:]}
    bad = 0
    for set_name, opt, lr, wd in (CASES[c] for c in cases):
        names = sets[set_name]
        tfile = os.path.join(d, "%s.txt" % set_name)
        with open(tfile, "w") as f:
            f.write("\n".join(names) + "\n")
        a = wk.parse_args(["--onnx", path, "--trainable", tfile, "--optimizer", opt,
                           "--lr", str(lr), "--weight-decay", str(wd), "--data", dspec,
                           "--test", tspec, "--batch", str(BATCH), "--warmup", "0",
                           "--steps", str(steps)])
        try:
            got = wk.run(a)
        except wk.Failure as e:
            print("FAIL %s %s %s: the worker failed: %s" % (name, set_name, opt, e))
            bad += 1
            continue
        want, tl, acc = torch_run(em, name, set(names), opt, lr, wd, train, test, steps)
        dl = max(abs(x - y) / max(1.0, abs(y)) for x, y in zip(got["losses"], want))
        dt = abs(got["test_loss"] - tl) / max(1.0, abs(tl))
        ok = len(got["losses"]) == steps and dl <= LOSS_TOL and dt <= TEST_TOL
        bad += not ok
        print("%s %-12s %-5s %-5s losses %s (PyTorch %s, max rel diff %.1e), test loss %.5f "
              "(PyTorch %.5f) acc %.4f (PyTorch %.4f)" % (
                  "ok  " if ok else "FAIL", name, set_name, opt,
                  " ".join("%.5f" % v for v in got["losses"]),
                  " ".join("%.5f" % v for v in want), dl, got["test_loss"], tl, got["acc"],
                  acc))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--cases", default=",".join(CASES), help="of %s" % ", ".join(CASES))
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--keep", help="write the exports and data here (default: a temp folder)")
    a = ap.parse_args()
    models = [s for s in a.models.split(",") if s]
    unknown = [s for s in models if s not in MODELS]
    if unknown or not models:
        raise SystemExit("ort_train_check: --models: one or more of %s" % ", ".join(MODELS))
    cases = [s for s in a.cases.split(",") if s]
    if not cases or any(c not in CASES for c in cases):
        raise SystemExit("ort_train_check: --cases: one or more of %s" % ", ".join(CASES))
    if not 1 <= a.steps <= 8:
        raise SystemExit("ort_train_check: --steps must be in 1..8 (the worker keeps 8 losses)")
    try:
        if onnx is None:
            raise ImportError("no module named 'onnx'")
        import onnxruntime.training.api  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("skip: %s (run it with the reference venv, build-venv-onnx/bin/python)" % e)
        return 77
    import gen_model_fixtures
    import ort_train_worker as wk
    em = gen_model_fixtures._example_models()
    bad = 0
    with tempfile.TemporaryDirectory(prefix="ort_check_") as tmp:
        for name in models:
            d = os.path.join(a.keep or tmp, name)
            os.makedirs(d, exist_ok=True)
            bad += check_model(em, wk, name, cases, a.steps, d)
    print("%d case%s differ from PyTorch" % (bad, "" if bad == 1 else "s") if bad
          else "every case equals PyTorch")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
