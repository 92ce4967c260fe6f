#!/usr/bin/env python3
"""gen_model_fixtures.py — PyTorch's side of training the example models (examples/models,
tiny sizes) for tests/test_train_equiv.c: each model is converted by torch2pock, trained
by PyTorch itself (the nn.Module, not the converted graph) for 5 steps under three sparse
schemes and two optimizers, and the results are written where the C test replays them.

  /usr/bin/python3 scripts/gen_model_fixtures.py [--out tests/fixtures/train/models]
                                                  [--only MODEL]

Output per model, in OUT/MODEL/ (the layout tests/fixtures/train uses):
  MODEL.json/.pkw, MODEL_f32.json/.pkw    the converted model, f64 and f32
  x.npy (5, 4, features) f8, y.npy (5, 4) i4      the batches (images as flat rows);
                 token models: x.npy (5, 4, T) i4 ids [, x1.npy the mask], y.npy (5, 4[, T])
  full.json, bias_norms_last.json, partial25_head.json   the sparse specs:
      everything; biases (LLaMA has none) + norms + the last block; a quarter of the input
      channels of the last block's convs/linears (its biases and norms whole) + the head
  CASE.pkw       what trained (a partial weight as its trained slice [:, :S]) and the
                 running statistics of batch norms in training mode, after 5 steps
  cases.txt, losses.txt

scripts/gen_train_fixtures.py runs this too: all of it, or --only MODEL for the live check
of tests/test_train_equiv.c.

The reference follows Pock's documented rules (docs/sparse-update.md): a batch norm whose
gamma or beta trains uses batch statistics, a frozen one its running statistics (PyTorch:
that module in eval mode); a partially trained weight is a trained slice [:, :S] (S =
round(0.25 C)) and a frozen rest, concatenated at every step.
"""
import argparse
import collections
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from fixture_cases import Cases  # noqa: E402


def _example_models():
    """examples/models/models.py, loaded under its own name (the digits example has a
    models.py too, which scripts/gen_train_fixtures.py imports in the same process)."""
    import importlib.util
    if "example_models" not in sys.modules:
        path = os.path.join(ROOT, "examples", "models", "models.py")
        spec = importlib.util.spec_from_file_location("example_models", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["example_models"] = mod
        spec.loader.exec_module(mod)
    return sys.modules["example_models"]

MODELS = ("mobilenet_v2", "resnet18", "bert", "llama")
STEPS, BATCH, SEED = 5, 4, 23
SGD = {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3}
ADAMW = {"kind": "adamw", "lr": 1e-3, "momentum": 0.0, "weight_decay": 1e-2}
TOL = {"f64": 1e-9, "f32": 1e-4}
SCHEMES = ("full", "bias_norms_last", "partial25_head")
FRACTION = 0.25
# where each model's numbered blocks live, and its head
BLOCKS = {"mobilenet_v2": "features", "resnet18": "layers.layer2", "bert": "layers",
          "llama": "blocks"}
HEAD = {"mobilenet_v2": "classifier", "resnet18": "fc", "bert": "head", "llama": "lm_head"}


def spec_of(mname, scheme):
    last = {"blocks": {"prefix": BLOCKS[mname], "last": 1}}
    train = {"full": [{"all": True}],
             # LLaMA's linears have no biases (and a spec rule that matches nothing is
             # an error): norms and the last block there
             "bias_norms_last": ([] if mname == "llama" else [{"biases": True}]) +
                                [{"norms": True}, last],
             "partial25_head": [dict(last, channels=FRACTION),
                                {"params": HEAD[mname] + ".*"}]}[scheme]
    return {"version": 1, "train": train}


def _last_block(mname, names):
    """The parameter-name prefix of the block with the highest index under BLOCKS[mname]."""
    p = BLOCKS[mname] + "."
    idx = [int(n[len(p):].split(".")[0]) for n in names
           if n.startswith(p) and n[len(p):].split(".")[0].isdigit()]
    return p + str(max(idx)) + "."


def _norm_modules(m):
    import torch.nn as nn
    return [mod for mod in m.modules()
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm)) or
            type(mod).__name__ == "RMSNorm"]


class Trainer:
    """A model under a scheme and optimizer, trained by PyTorch as Pock documents it."""

    def __init__(self, mname, scheme, opt, dtype):
        import torch
        import torch.nn as nn
        self.tdt = torch.float64 if dtype == "f64" else torch.float32
        self.m = make_model(mname, dtype)
        named = collections.OrderedDict(self.m.named_parameters())
        norm_params = {id(p) for mod in _norm_modules(self.m) for p in mod.parameters()}
        last = _last_block(mname, named)
        head = HEAD[mname] + "."
        trains, partial = {}, []
        for n, p in named.items():
            in_last = n.startswith(last)
            trains[n] = (scheme == "full" or
                         (scheme == "bias_norms_last" and
                          (n.endswith("bias") or id(p) in norm_params or in_last)) or
                         (scheme == "partial25_head" and (in_last or n.startswith(head))))
        if scheme == "partial25_head":  # the last block's conv/linear weights: a slice
            for mn, mod in self.m.named_modules():
                if (mn + ".").startswith(last) and isinstance(mod, (nn.Conv2d, nn.Linear)) \
                        and getattr(mod, "groups", 1) == 1:
                    partial.append((mn, mod))
        for n, p in named.items():
            p.requires_grad_(trains[n])
        # batch norms: batch statistics when their gamma or beta trains (Pock's "auto")
        self.frozen_bn = [mod for mod in _norm_modules(self.m)
                          if isinstance(mod, nn.modules.batchnorm._BatchNorm) and
                          not any(p.requires_grad for p in mod.parameters())]
        self.splits = []
        opt_params = [p for n, p in named.items() if trains[n]]
        for mn, mod in partial:
            w = mod.weight.detach()
            s = int(round(FRACTION * w.shape[1]))
            w_tr = w[:, :s].clone().requires_grad_(True)
            w_fr = w[:, s:].clone()
            opt_params = [p for p in opt_params if p is not mod.weight]
            del mod._parameters["weight"]
            self.splits.append((mod, w_tr, w_fr, mn + ".weight"))
            opt_params.append(w_tr)
        self.trains, self.named = trains, named
        if opt["kind"] == "sgd":
            self.o = torch.optim.SGD(opt_params, lr=opt["lr"], momentum=opt["momentum"],
                                     weight_decay=opt["weight_decay"])
        else:
            self.o = torch.optim.AdamW(opt_params, lr=opt["lr"], weight_decay=opt["weight_decay"])

    def step(self, inputs, y):
        import torch
        import torch.nn.functional as F
        self.m.train()
        for mod in self.frozen_bn:
            mod.eval()
        for mod, w_tr, w_fr, _ in self.splits:
            mod.weight = torch.cat([w_tr, w_fr], dim=1)
        z = self.m(*inputs)
        loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1))  # per token for LMs
        self.o.zero_grad()
        loss.backward()
        self.o.step()
        return loss.item()

    def trained(self):
        """{name: tensor}: the params that trained (a partial weight: its trained slice) and
        the running statistics of batch norms in training mode."""
        import torch.nn as nn
        out = collections.OrderedDict()
        split = {name: w_tr for _, w_tr, _, name in self.splits}
        for n, p in self.named.items():
            if n in split:
                out[n] = split[n].detach()
            elif self.trains[n]:
                out[n] = p.detach()
        for mn, mod in self.m.named_modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm) and mod not in self.frozen_bn:
                out[mn + ".running_mean"] = mod.running_mean.detach()
                out[mn + ".running_var"] = mod.running_var.detach()
        return out


def make_model(mname, dtype):
    import torch
    m = _example_models().MODELS[mname]("tiny", seed=SEED)
    return m.double() if dtype == "f64" else m.to(torch.float32)


def make_batches(m):
    """([inputs], labels) for STEPS batches of BATCH rows: images (N(0, 1), rounded to 1/64
    so f32 holds them exactly) as flat rows; or token ids (BERT: with a float mask whose
    last two positions are padding in half the rows); labels in [0, classes), per token
    for the LM (the next byte)."""
    rng = np.random.default_rng(SEED)
    classes = m.training_spec["classes"]
    if m.input_dtype.is_floating_point:
        feats = int(np.prod(m.input_shape))
        x = np.round(rng.standard_normal((STEPS, BATCH, feats)) * 64) / 64
        return [x], rng.integers(0, classes, size=(STEPS, BATCH)).astype(np.int32)
    seq = m.input_shape[0]
    ids = rng.integers(0, m.vocab, size=(STEPS, BATCH, seq + 1)).astype(np.int32)
    if classes == m.vocab:  # a language model: label t is token t + 1
        return [ids[:, :, :seq]], ids[:, :, 1:].copy()
    mask = np.ones((STEPS, BATCH, seq))
    mask[:, ::2, -2:] = 0
    return [ids[:, :, :seq], mask], rng.integers(0, classes, size=(STEPS, BATCH)).astype(np.int32)


def torch_inputs(tr, xs, t):
    """Batch t of every input as the module takes it."""
    import torch
    out = []
    for x in xs:
        v = torch.from_numpy(x[t])
        if v.is_floating_point():
            v = v.to(tr.tdt).reshape((BATCH,) + (tuple(tr.m.input_shape)
                                                 if len(xs) == 1 else tuple(v.shape[1:])))
        else:
            v = v.long()
        out.append(v)
    return out


def generate_model(out_dir, mname):
    import torch
    import torch2pock
    d = os.path.join(out_dir, mname)
    os.makedirs(d, exist_ok=True)
    training = {"loss": "softmax_cross_entropy", "optimizer": SGD}
    ex = _example_models()
    for dtype in ("f64", "f32"):
        m = make_model(mname, dtype)
        m.example_inputs = lambda batch, m=m: ex.example_inputs(m, batch)
        fname = mname + ("" if dtype == "f64" else "_f32")
        torch2pock.save(m, os.path.join(d, fname + ".json"), m.input_shape,
                        name="fixture_" + fname, training=training)
    xs, y = make_batches(make_model(mname, "f64"))
    for i, x in enumerate(xs):  # one file per model input: x.npy, x1.npy, ...
        np.save(os.path.join(d, "x%s.npy" % (i or "")), x)
    np.save(os.path.join(d, "y.npy"), y)
    for scheme in SCHEMES:
        with open(os.path.join(d, scheme + ".json"), "w") as f:
            json.dump(spec_of(mname, scheme), f)
            f.write("\n")
    cases = [(s, o, "f64") for s in SCHEMES for o in (SGD, ADAMW)] + [("full", SGD, "f32")]
    table = Cases(STEPS)
    for scheme, opt, dtype in cases:
        case = "%s_%s_%s%s" % (mname, scheme, opt["kind"], "" if dtype == "f64" else "_f32")
        tr = Trainer(mname, scheme, opt, dtype)
        losses = [tr.step(torch_inputs(tr, xs, t), torch.from_numpy(y[t]).long())
                  for t in range(STEPS)]
        torch2pock.write_pkw(os.path.join(d, case + ".pkw"), tr.trained())
        table.add(case, mname + ("" if dtype == "f64" else "_f32") + ".json", scheme + ".json",
                  opt, TOL[dtype], case + ".pkw", losses)
    table.write(d)
    return len(table)


def generate(out_dir, only=None):
    import torch
    torch.set_num_threads(1)  # summation order fixed: reproducible to the last bit
    return sum(generate_model(out_dir, m) for m in MODELS if only in (None, m))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "train", "models"))
    ap.add_argument("--only", choices=MODELS, help="only this model's cases")
    a = ap.parse_args()
    print("gen_model_fixtures: %d cases in %s" % (generate(a.out, a.only), a.out))


if __name__ == "__main__":
    main()
