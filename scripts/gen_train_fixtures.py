#!/usr/bin/env python3
"""gen_train_fixtures.py — PyTorch's side of the training-equivalence test: trains the digits
MLP and CNN for 10 steps with SGD and AdamW under several sparse-update schemes and writes
the models, batches, specs and resulting weights that tests/test_train_equiv.c replays.

  /usr/bin/python3 scripts/gen_train_fixtures.py [--out tests/fixtures/train]

Output (all small; see cases.txt for the list the C test reads):
  {mlp,cnn}.json/.pkw            the f64 models (torch2pock), {mlp,cnn}_f32.* the f32 ones
  x.npy (10, 4, 64) f64, y.npy (10, 4) int32   the 10 batches, in order (the CNN reads each
                                 row of 64 as its (1, 8, 8) image, row-major)
  {mlp,cnn}_{full,head,bias_head,partial25}.json   sparse-update specs
  CASE.pkw                       the params that trained, after 10 steps (frozen ones must
                                 equal the model's initial values); a partially trained
                                 weight is stored as its trained slice [:, :S] only
  cases.txt                      one line per case:
      case model spec optimizer lr momentum weight_decay tolerance after
  losses.txt                     per case: PyTorch's loss at each of the 10 steps
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
sys.path.insert(0, os.path.join(ROOT, "examples", "digits"))

STEPS, BATCH, SEED = 10, 4, 7
SGD = {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3}
ADAMW = {"kind": "adamw", "lr": 1e-3, "momentum": 0.0, "weight_decay": 1e-2}
TOL = {"f64": 1e-9, "f32": 1e-4}
SCHEMES = ("full", "head", "bias_head", "partial25")
PARTIAL_FRACTION = 0.25


def spec_of(model, scheme):
    """The sparse-update spec JSON (docs/sparse-update.md) of a scheme."""
    import models
    head = models.HEADS[model] + ".*"
    train = {
        "full": [{"all": True}],
        "head": [{"params": head}],
        "bias_head": [{"biases": True}, {"params": head}],
        "partial25": [{"params": [models.PARTIAL[model] + ".weight"],
                       "channels": PARTIAL_FRACTION},
                      {"biases": True}, {"params": head}],
        "last2": [{"last_layers": 2}],
        "partial25_localbias": [{"params": [models.PARTIAL[model] + ".weight"],
                                 "channels": PARTIAL_FRACTION},
                                {"params": [models.PARTIAL[model] + ".bias"]},
                                {"params": head}],
    }[scheme]
    return {"version": 1, "train": train}


def make_batches():
    """Digits-like rows: pixel values k/16 with k in 0..16, about 40% zeros (background)."""
    rng = np.random.default_rng(SEED)
    k = rng.integers(0, 17, size=(STEPS, BATCH, 64))
    x = np.where(rng.random((STEPS, BATCH, 64)) < 0.4, 0, k) / 16.0
    y = rng.integers(0, 10, size=(STEPS, BATCH)).astype(np.int32)
    return x.astype(np.float64), y


class TorchTrainer:
    """A digits model under a scheme and optimizer in PyTorch eager, stepped batch by batch
    (shared with bench/bench_train.py). Frozen params have requires_grad=False; a
    partial-channel scheme splits the layer's weight into a trained slice [:, :S] and a
    frozen rest, concatenated into the weight the layer uses at every step."""

    def __init__(self, model_name, scheme, opt, dtype="f64", model=None):
        import torch
        import models
        self.tdt = torch.float64 if dtype == "f64" else torch.float32
        m = model if model is not None else models.MODELS[model_name](dtype=self.tdt)
        self.m = m
        head = models.HEADS[model_name] + "."
        self.named = collections.OrderedDict(m.named_parameters())
        layer_of = lambda n: n.rsplit(".", 1)[0]
        self.trains = {n: scheme == "full" or n.startswith(head)
                       or (scheme in ("bias_head", "partial25") and n.endswith("bias"))
                       or (scheme == "last2" and layer_of(n) in models.LAST2[model_name])
                       or (scheme == "partial25_localbias"
                           and n == models.PARTIAL[model_name] + ".bias")
                       for n in self.named}
        for n, p in self.named.items():
            p.requires_grad_(self.trains[n])
        opt_params = [p for n, p in self.named.items() if self.trains[n]]
        self.split = None
        if scheme in ("partial25", "partial25_localbias"):
            lname = models.PARTIAL[model_name]
            layer = dict(m.named_modules())[lname]
            w = layer.weight.detach()
            s = max(1, int(round(PARTIAL_FRACTION * w.shape[1])))
            w_tr = w[:, :s].clone().requires_grad_(True)
            w_fr = w[:, s:].clone()
            del layer._parameters["weight"]
            self.split = (layer, w_tr, w_fr, lname + ".weight")
            opt_params.append(w_tr)
            self.trains[lname + ".weight"] = True
        if opt["kind"] == "sgd":
            self.o = torch.optim.SGD(opt_params, lr=opt["lr"], momentum=opt["momentum"],
                                     weight_decay=opt["weight_decay"])
        else:
            self.o = torch.optim.AdamW(opt_params, lr=opt["lr"],
                                       weight_decay=opt["weight_decay"])
        self.in_shape = tuple(m.input_shape)

    def _weight(self):
        import torch
        if self.split:
            self.split[0].weight = torch.cat([self.split[1], self.split[2]], dim=1)

    def step(self, xb, yb):
        """One training step on tensors xb (rows, features...) and yb (rows,) int64;
        returns the loss (a tensor: .item() syncs nothing on the CPU but costs a bit)."""
        import torch.nn.functional as F
        self._weight()
        loss = F.cross_entropy(self.m(xb.reshape((xb.shape[0],) + self.in_shape)), yb)
        self.o.zero_grad()
        loss.backward()
        self.o.step()
        return loss

    def logits(self, xb):
        import torch
        self._weight()
        with torch.no_grad():
            return self.m(xb.reshape((xb.shape[0],) + self.in_shape))

    def trained(self, pock_shapes):
        """{name: tensor} of the params that train, in the Pock graph's shapes (conv biases
        (C, 1, 1)); a partially trained weight as its trained slice (O, S, ...) only — the
        rest is frozen and the test checks it against the initial values."""
        out = collections.OrderedDict()
        for n, p in self.named.items():
            if self.trains[n]:
                out[n] = p.detach().reshape(pock_shapes[n])
        if self.split:
            out[self.split[3]] = self.split[1].detach()
        return out


def train_torch(model_name, scheme, opt, dtype, x, y, pock_shapes):
    """Returns ({name: tensor} of the params that trained after STEPS steps, [loss per
    step])."""
    import torch
    tr = TorchTrainer(model_name, scheme, opt, dtype)
    losses = []
    for t in range(STEPS):
        xb = torch.from_numpy(x[t]).to(tr.tdt)
        losses.append(tr.step(xb, torch.from_numpy(y[t]).long()).item())
    return tr.trained(pock_shapes), losses


def generate(out_dir):
    import torch
    import models
    import torch2pock
    torch.set_num_threads(1)  # summation order fixed: reproducible to the last bit
    os.makedirs(out_dir, exist_ok=True)
    x, y = make_batches()
    np.save(os.path.join(out_dir, "x.npy"), x)
    np.save(os.path.join(out_dir, "y.npy"), y)
    training = {"loss": "softmax_cross_entropy", "classes": 10, "optimizer": SGD}
    lines = ["# case model spec optimizer lr momentum weight_decay tolerance after"]
    loss_lines = ["# case: the mean loss of each of the %d steps (before its update)" % STEPS]
    for mname in ("mlp", "cnn"):
        for dtype in ("f64", "f32"):
            tdt = torch.float64 if dtype == "f64" else torch.float32
            m = models.MODELS[mname](dtype=tdt)
            fname = mname + ("" if dtype == "f64" else "_f32")
            g = torch2pock.save(m, os.path.join(out_dir, fname + ".json"), m.input_shape,
                                name="fixture_" + fname, training=training)
        shapes = {p["name"]: p["shape"] for p in g["params"]}
        for scheme in SCHEMES:
            with open(os.path.join(out_dir, "%s_%s.json" % (mname, scheme)), "w") as f:
                json.dump(spec_of(mname, scheme), f)
                f.write("\n")
        # f64: every scheme with both optimizers; f32: SGD on the full update and on the
        # partial-channel scheme (views), which is where f32 rounding could bite.
        cases = [(s, o, "f64") for s in SCHEMES for o in (SGD, ADAMW)]
        cases += [("full", SGD, "f32"), ("partial25", SGD, "f32")]
        for scheme, opt, dtype in cases:
            case = "%s_%s_%s%s" % (mname, scheme, opt["kind"], "" if dtype == "f64" else "_f32")
            after, losses = train_torch(mname, scheme, opt, dtype, x, y, shapes)
            torch2pock.write_pkw(os.path.join(out_dir, case + ".pkw"), after)
            lines.append("%s %s %s %s %.17g %.17g %.17g %g %s" % (
                case, mname + ("" if dtype == "f64" else "_f32") + ".json",
                "%s_%s.json" % (mname, scheme), opt["kind"], opt["lr"], opt["momentum"],
                opt["weight_decay"], TOL[dtype], case + ".pkw"))
            loss_lines.append(case + " " + " ".join("%.17g" % v for v in losses))
    with open(os.path.join(out_dir, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "losses.txt"), "w") as f:
        f.write("\n".join(loss_lines) + "\n")
    return len(lines) - 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "train"))
    a = ap.parse_args()
    n = generate(a.out)
    print("gen_train_fixtures: %d cases in %s" % (n, a.out))


if __name__ == "__main__":
    main()
