#!/usr/bin/env python3
"""gen_train_fixtures.py — PyTorch's side of the training-equivalence test: trains the digits
MLP and CNN for 10 steps with SGD and AdamW under several sparse-update schemes and writes
the models, batches, specs and resulting weights that tests/test_train_equiv.c replays.

  /usr/bin/python3 scripts/gen_train_fixtures.py [--out tests/fixtures/train] [--only MODEL]

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
  optim/                         a small MLP graph under the loss and optimizer options
                                 (ignore_index, label_smoothing, clip_global, lr warmup,
                                 gradient accumulation), 5 steps, one graph file per case
  tokens/                        a per-token classifier (N, 8, 10) with labels (5, 4, 8)
                                 (some ignored) and label smoothing, 5 SGD steps
  models/MODEL/                  the example models (examples/models, tiny sizes) trained by
                                 PyTorch under three sparse schemes: gen_model_fixtures.py
  graphs/                        the same for hand-written graphs that are not
                                 nn.Sequential (a residual net, an attention block), full
                                 update over 5 steps, PyTorch running the graph itself
                                 (scripts/graph_torch.py)
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

from fixture_cases import Cases  # noqa: E402

import gen_model_fixtures  # noqa: E402 (the example models' cases, in OUT/models)

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


# ---- graphs that are not nn.Sequential: hand-written Pock graphs, run by graph_torch ----
GRAPH_MODELS = ("resnet", "attn", "bnnet", "normnet")


def _node(name, op, inputs, output, **attrs):
    n = {"name": name, "op": op, "inputs": inputs, "output": output}
    if attrs:
        n["attrs"] = attrs
    return n


def resnet_graph():
    """(N, 64) as (N, 1, 8, 8): conv 1->8, two residual blocks (conv, relu, conv, + skip,
    relu), global mean over H and W, fc 8->10. Conv biases (C, 1, 1)."""
    params, nodes = [("conv0", (8, 1, 3, 3))], [
        _node("in", "reshape", ["x"], "img", shape=["N", 1, 8, 8])]
    h = "img"

    def conv(name, x, relu):
        nodes.append(_node(name, "conv2d", [x, name + ".weight"], name + ".c", pad=1))
        nodes.append(_node(name + ".add", "add", [name + ".c", name + ".bias"], name + ".out"))
        if not relu:
            return name + ".out"
        nodes.append(_node(name + ".relu", "relu", [name + ".out"], name + ".r"))
        return name + ".r"
    h = conv("conv0", h, True)
    for b in (1, 2):
        params += [("b%d.conv1" % b, (8, 8, 3, 3)), ("b%d.conv2" % b, (8, 8, 3, 3))]
        y = conv("b%d.conv1" % b, h, True)
        y = conv("b%d.conv2" % b, y, False)
        nodes.append(_node("b%d.skip" % b, "add", [y, h], "b%d.sum" % b))
        nodes.append(_node("b%d.relu" % b, "relu", ["b%d.sum" % b], "b%d.out" % b))
        h = "b%d.out" % b
    nodes.append(_node("gap", "mean", [h], "gap.out", axes=[2, 3]))
    nodes.append(_node("fc", "matmul", ["gap.out", "fc.weight"], "fc.mm", trans_b=True))
    nodes.append(_node("fc.add", "add", ["fc.mm", "fc.bias"], "fc.out"))
    shapes = []
    for name, w in params:
        shapes += [(name + ".weight", w), (name + ".bias", (w[0], 1, 1))]
    shapes += [("fc.weight", (10, 8)), ("fc.bias", (10,))]
    return shapes, nodes, "fc.out"


def attention_graph():
    """A transformer block without normalization on (N, 64) as 8 tokens of width 8:
    q, k, v projections, softmax(q k^T) v, output projection + residual, a GELU MLP
    8->16->8 + residual, then fc 64->10 on the flattened tokens."""
    nodes, shapes = [_node("tokens", "reshape", ["x"], "t", shape=[-1, 8])], []

    def linear(name, x, i, o):
        shapes.extend([(name + ".weight", (o, i)), (name + ".bias", (o,))])
        nodes.append(_node(name, "matmul", [x, name + ".weight"], name + ".mm", trans_b=True))
        nodes.append(_node(name + ".add", "add", [name + ".mm", name + ".bias"], name + ".out"))
        return name + ".out"
    for p in ("q", "k", "v"):
        linear("attn." + p, "t", 8, 8)
        nodes.append(_node(p + ".heads", "reshape", ["attn.%s.out" % p], p, shape=["N", 8, 8]))
    nodes.append(_node("scores", "batch_matmul", ["q", "k"], "s", trans_b=True))
    nodes.append(_node("softmax", "softmax", ["s"], "p", axis=-1))
    nodes.append(_node("mix", "batch_matmul", ["p", "v"], "o"))
    nodes.append(_node("mix.tokens", "reshape", ["o"], "o2", shape=[-1, 8]))
    y = linear("attn.proj", "o2", 8, 8)
    nodes.append(_node("res1", "add", ["t", y], "r1"))
    h = linear("mlp.fc1", "r1", 8, 16)
    nodes.append(_node("mlp.gelu", "gelu", [h], "g"))
    y = linear("mlp.fc2", "g", 16, 8)
    nodes.append(_node("res2", "add", ["r1", y], "r2"))
    nodes.append(_node("flat", "reshape", ["r2"], "f", shape=["N", 64]))
    linear("head", "f", 64, 10)
    return shapes, nodes, "head.out"


def bn_graph():
    """(N, 64) as (N, 1, 8, 8): conv 1->4 (+ bias), batch_norm (momentum 0.2: off its
    default) with its running stats as buffers, relu, global mean, fc 4->10."""
    nodes = [_node("in", "reshape", ["x"], "img", shape=["N", 1, 8, 8]),
             _node("conv0", "conv2d", ["img", "conv0.weight"], "conv0.c", pad=1),
             _node("conv0.add", "add", ["conv0.c", "conv0.bias"], "conv0.out"),
             _node("bn0", "batch_norm", ["conv0.out", "bn0.weight", "bn0.bias",
                                         "bn0.running_mean", "bn0.running_var"], "bn0.out",
                   momentum=0.2),
             _node("bn0.relu", "relu", ["bn0.out"], "h"),
             _node("gap", "mean", ["h"], "gap.out", axes=[2, 3]),
             _node("fc", "matmul", ["gap.out", "fc.weight"], "fc.mm", trans_b=True),
             _node("fc.add", "add", ["fc.mm", "fc.bias"], "fc.out")]
    # gamma around 1; running stats start off their (0, 1) defaults so that the frozen
    # case really normalizes with them
    shapes = [("conv0.weight", (4, 1, 3, 3)), ("conv0.bias", (4, 1, 1)),
              ("bn0.weight", (4,), "param", lambda r, s: 1 + 0.2 * r.uniform(-1, 1, size=s)),
              ("bn0.bias", (4,)),
              ("bn0.running_mean", (4,), "buffer", lambda r, s: 0.1 * r.uniform(-1, 1, size=s)),
              ("bn0.running_var", (4,), "buffer", lambda r, s: r.uniform(0.5, 1.5, size=s)),
              ("fc.weight", (10, 4)), ("fc.bias", (10,))]
    return shapes, nodes, "fc.out"


def norm_graph():
    """(N, 64) as 4 tokens of width 16: layer_norm over the width, rms_norm over tokens and
    width (normalized_ndim 2), group_norm (2 groups of the 4 channels), fc 64->10; gammas
    around 1, eps off its default once."""
    nodes = [_node("tokens", "reshape", ["x"], "t", shape=["N", 4, 16]),
             _node("ln", "layer_norm", ["t", "ln.weight", "ln.bias"], "t1"),
             _node("rms", "rms_norm", ["t1", "rms.weight"], "t2", normalized_ndim=2, eps=1e-3),
             _node("gn", "group_norm", ["t2", "gn.weight", "gn.bias"], "t3", groups=2),
             _node("flat", "reshape", ["t3"], "f", shape=["N", 64]),
             _node("fc", "matmul", ["f", "fc.weight"], "fc.mm", trans_b=True),
             _node("fc.add", "add", ["fc.mm", "fc.bias"], "fc.out")]

    def gamma(r, s):
        return 1 + 0.2 * r.uniform(-1, 1, size=s)
    shapes = [("ln.weight", (16,), "param", gamma), ("ln.bias", (16,)),
              ("rms.weight", (4, 16), "param", gamma),
              ("gn.weight", (4,), "param", gamma), ("gn.bias", (4,)),
              ("fc.weight", (10, 64)), ("fc.bias", (10,))]
    return shapes, nodes, "fc.out"


GRAPH_BUILDERS = {"resnet": resnet_graph, "attn": attention_graph, "bnnet": bn_graph,
                  "normnet": norm_graph}
FULL_SPEC = {"version": 1, "train": [{"all": True}]}


def graph_cases(mname):
    """(scheme, spec, optimizer, dtype) of each case of a graph model."""
    if mname == "bnnet":  # batch norm trained (batch statistics) and frozen (running stats)
        frozen = {"version": 1, "train": [{"params": ["conv0.*", "fc.*"]}]}
        return [("full", FULL_SPEC, SGD, "f64"), ("frozenbn", frozen, SGD, "f64")]
    if mname == "normnet":  # layer_norm, rms_norm, group_norm: their gradients
        return [("full", FULL_SPEC, SGD, "f64")]
    return [("full", FULL_SPEC, o, d) for o, d in ((SGD, "f64"), (ADAMW, "f64"), (SGD, "f32"))]
GRAPH_STEPS = 5  # PyTorch and Pock both take 5 steps on these (the first 5 batches)


def save_graph_model(out_dir, mname, dtype):
    """Writes MNAME[_f32].json + .pkw (random init, fan-in scaled, fixed seed); returns
    (graph dict, {name: array})."""
    shapes, nodes, output = GRAPH_BUILDERS[mname]()
    rng = np.random.default_rng(11)
    npdt = np.float64 if dtype == "f64" else np.float32
    weights = collections.OrderedDict()
    roles = {}
    for name, shape, *rest in shapes:  # rest: (role, init(rng, shape)) for some
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 4
        if rest:
            roles[name] = rest[0]
            weights[name] = rest[1](rng, shape).astype(npdt)
        else:
            weights[name] = (rng.uniform(-1, 1, size=shape) * 1.5 / np.sqrt(fan)).astype(npdt)
    fname = mname + ("" if dtype == "f64" else "_f32")
    g = {"format": "pock-graph", "version": 1, "name": "fixture_" + fname, "dtype": dtype,
         "weights_file": fname + ".pkw",
         "inputs": [{"name": "x", "shape": ["N", 64]}],
         "params": [dict({"name": n, "shape": list(s)},
                         **({"role": roles[n]} if roles.get(n, "param") != "param" else {}))
                    for n, s, *_ in shapes],
         "nodes": nodes, "output": output}
    import torch2pock
    with open(os.path.join(out_dir, fname + ".json"), "w") as f:
        json.dump(g, f, indent=1)
        f.write("\n")
    torch2pock.write_pkw(os.path.join(out_dir, fname + ".pkw"), weights)
    return g, weights


def train_graph_torch(g, weights, opt, dtype, x, y, spec=FULL_SPEC):
    """PyTorch autograd on the graph's own ops: ({name: tensor} of the trained params and
    the buffers after GRAPH_STEPS steps, [loss per step]). spec: "all" or "params" globs."""
    import fnmatch
    import torch
    import torch.nn.functional as F
    from graph_torch import PockGraph
    tdt = torch.float64 if dtype == "f64" else torch.float32
    m = PockGraph(g, weights, dtype=tdt)
    rule = spec["train"][0]
    for n, p in m.named_pock_params():
        p.requires_grad_(bool(rule.get("all")) or
                         any(fnmatch.fnmatchcase(n, pat) for pat in rule.get("params", [])))
    params = [p for _, p in m.named_pock_params() if p.requires_grad]
    if opt["kind"] == "sgd":
        o = torch.optim.SGD(params, lr=opt["lr"], momentum=opt["momentum"],
                            weight_decay=opt["weight_decay"])
    else:
        o = torch.optim.AdamW(params, lr=opt["lr"], weight_decay=opt["weight_decay"])
    losses = []
    for t in range(GRAPH_STEPS):
        loss = F.cross_entropy(m(torch.from_numpy(x[t]).to(tdt)), torch.from_numpy(y[t]).long())
        o.zero_grad()
        loss.backward()
        o.step()
        losses.append(loss.item())
    after = collections.OrderedDict((n, p.detach()) for n, p in m.named_pock_params()
                                    if p.requires_grad)
    after.update((n, b.detach()) for n, b in m.named_pock_buffers())
    m.eval()  # batch 1 in evaluation mode: batch norm with its running stats
    with torch.no_grad():
        ev = F.cross_entropy(m(torch.from_numpy(x[0]).to(tdt)), torch.from_numpy(y[0]).long())
    return after, losses, ev.item()


def generate_graphs(out_dir, only=None):
    """Full update of the residual net and the attention block (SGD f64 and f32, AdamW
    f64), in out_dir/graphs with its own 5 batches; returns the number of cases."""
    gdir = os.path.join(out_dir, "graphs")
    os.makedirs(gdir, exist_ok=True)
    x, y = make_batches()
    x, y = x[:GRAPH_STEPS], y[:GRAPH_STEPS]
    np.save(os.path.join(gdir, "x.npy"), x)
    np.save(os.path.join(gdir, "y.npy"), y)
    import torch2pock
    table = Cases(GRAPH_STEPS)
    eval_lines = ["# case: the mean loss of batch 1 evaluated (model.eval()) after training"]
    for mname in (m for m in GRAPH_MODELS if only in (None, m)):
        cases = graph_cases(mname)
        for scheme, spec, _, _ in cases:
            with open(os.path.join(gdir, "%s_%s.json" % (mname, scheme)), "w") as f:
                json.dump(spec, f)
                f.write("\n")
        models = {d: save_graph_model(gdir, mname, d) for d in sorted({c[3] for c in cases})}
        for scheme, spec, opt, dtype in cases:
            case = "%s_%s_%s%s" % (mname, scheme, opt["kind"], "" if dtype == "f64" else "_f32")
            after, losses, ev = train_graph_torch(*models[dtype], opt, dtype, x, y, spec)
            if mname == "bnnet":  # eval differs from the training forward only there
                eval_lines.append("%s %.17g" % (case, ev))
            torch2pock.write_pkw(os.path.join(gdir, case + ".pkw"), after)
            table.add(case, mname + ("" if dtype == "f64" else "_f32") + ".json",
                      "%s_%s.json" % (mname, scheme), opt, TOL[dtype], case + ".pkw", losses)
    table.write(gdir)
    with open(os.path.join(gdir, "eval_losses.txt"), "w") as f:
        f.write("\n".join(eval_lines) + "\n")
    return len(table)


# ---- losses and optimizer features (integer labels with ignore_index and label smoothing,
# global-norm clipping, lr warmup, gradient accumulation) on a small MLP graph ----
OPTIM_STEPS = 5
IGNORE = -100  # PyTorch's default ignore_index; two labels of the batches carry it
# case: (optimizer, label_smoothing, clip_global norm (0: off), warmup_steps,
#        schedule (kind, total_steps), accum_steps)
OPTIM_CASES = collections.OrderedDict([
    ("optim_xent_smooth_sgd", (SGD, 0.1, 0, 0, None, 1)),
    ("optim_clip_global_sgd", (SGD, 0.0, 0.05, 0, None, 1)),
    ("optim_clip_global_adamw", (ADAMW, 0.0, 0.05, 0, None, 1)),
    ("optim_warmup_cosine_adamw", (ADAMW, 0.0, 0, 2, ("cosine", 5), 1)),
    ("optim_warmup_constant_sgd", (SGD, 0.0, 0, 3, None, 1)),
    ("optim_accum2_sgd", (SGD, 0.0, 0, 0, None, 2)),
    ("optim_accum2_clip_warmup_adamw", (ADAMW, 0.2, 0.05, 1, ("cosine", 3), 2)),
])


def small_mlp_graph():
    """x (N, 64) -> fc1 16 -> relu -> fc2 10."""
    shapes = [("fc1.weight", (16, 64)), ("fc1.bias", (16,)), ("fc2.weight", (10, 16)),
              ("fc2.bias", (10,))]
    nodes = [_node("fc1", "matmul", ["x", "fc1.weight"], "fc1.mm", trans_b=True),
             _node("fc1.add", "add", ["fc1.mm", "fc1.bias"], "fc1.out"),
             _node("relu", "relu", ["fc1.out"], "h"),
             _node("fc2", "matmul", ["h", "fc2.weight"], "fc2.mm", trans_b=True),
             _node("fc2.add", "add", ["fc2.mm", "fc2.bias"], "fc2.out")]
    return shapes, nodes, "fc2.out"


def optim_training(opt, smooth, clip, warmup, sched, accum):
    """The graph file's training object of a case (docs/graph-format.md)."""
    o = {"kind": opt["kind"], "lr": opt["lr"], "weight_decay": opt["weight_decay"]}
    if opt["kind"] == "sgd":
        o["momentum"] = opt["momentum"]
    if clip:
        o["clip_norm"], o["clip_global"] = clip, True
    if accum > 1:
        o["accum_steps"] = accum
    t = {"loss": "softmax_cross_entropy", "classes": 10, "ignore_index": IGNORE,
         "optimizer": o}
    if smooth:
        t["label_smoothing"] = smooth
    if warmup or sched:
        s = {"kind": sched[0] if sched else "constant"}
        if sched:
            s["total_steps"] = sched[1]
        if warmup:
            s["warmup_steps"] = warmup
        t["lr_schedule"] = s
    return t


def lr_lambda(warmup, sched):
    """transformers' get_{constant,cosine}_schedule_with_warmup (num_cycles 0.5) as a
    LambdaLR factor of s, the optimizer steps already taken."""
    import math

    def f(s):
        if s < warmup:
            return s / warmup
        if not sched:
            return 1.0
        p = min(s - warmup, sched[1] - warmup) / (sched[1] - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * p))
    return f


def train_optim_torch(g, weights, case, x, y):
    """PyTorch on the graph with the case's loss options, clip_grad_norm_, LambdaLR and
    accumulation (each micro-batch's loss / k, step every k-th): ({name: tensor} after
    OPTIM_STEPS steps, [unscaled loss per step])."""
    import torch
    from graph_torch import PockGraph, training_loss
    opt, smooth, clip, warmup, sched, accum = OPTIM_CASES[case]
    m = PockGraph(g, weights, dtype=torch.float64)
    params = [p for _, p in m.named_pock_params()]
    if opt["kind"] == "sgd":
        o = torch.optim.SGD(params, lr=opt["lr"], momentum=opt["momentum"],
                            weight_decay=opt["weight_decay"])
    else:
        o = torch.optim.AdamW(params, lr=opt["lr"], weight_decay=opt["weight_decay"])
    lr_sched = torch.optim.lr_scheduler.LambdaLR(o, lr_lambda(warmup, sched))
    losses = []
    for t in range(OPTIM_STEPS):
        loss = training_loss(g, m(torch.from_numpy(x[t])), torch.from_numpy(y[t]))
        (loss / accum).backward()
        losses.append(loss.item())
        if (t + 1) % accum == 0:
            if clip:
                torch.nn.utils.clip_grad_norm_(params, clip)
            o.step()
            o.zero_grad()
            lr_sched.step()
    return collections.OrderedDict((n, p.detach()) for n, p in m.named_pock_params()), losses


def token_graph():
    """x (N, 64) as 8 tokens of width 8 -> linear 8 -> 10 per token -> (N, 8, 10): a
    per-token classifier (a language model's head)."""
    shapes = [("head.weight", (10, 8)), ("head.bias", (10,))]
    nodes = [_node("tokens", "reshape", ["x"], "t", shape=[-1, 8]),
             _node("head", "matmul", ["t", "head.weight"], "head.mm", trans_b=True),
             _node("head.add", "add", ["head.mm", "head.bias"], "head.out"),
             _node("per_token", "reshape", ["head.out"], "logits", shape=["N", 8, 10])]
    return shapes, nodes, "logits"


def generate_tokens(out_dir):
    """out_dir/tokens: the per-token classifier with labels (steps, batch, 8) including
    IGNORE, label smoothing 0.1, SGD: PyTorch's per-token cross_entropy. Returns 1."""
    import torch
    import torch2pock
    from graph_torch import PockGraph, training_loss
    tdir = os.path.join(out_dir, "tokens")
    os.makedirs(tdir, exist_ok=True)
    x, _ = make_batches()
    x = x[:OPTIM_STEPS]
    rng = np.random.default_rng(17)
    y = rng.integers(0, 10, size=(OPTIM_STEPS, BATCH, 8)).astype(np.int32)
    y[rng.random(y.shape) < 0.15] = IGNORE
    np.save(os.path.join(tdir, "x.npy"), x)
    np.save(os.path.join(tdir, "y.npy"), y)
    with open(os.path.join(tdir, "full.json"), "w") as f:
        json.dump({"version": 1, "train": [{"all": True}]}, f)
        f.write("\n")
    shapes, nodes, output = token_graph()
    w = collections.OrderedDict(
        (n, np.random.default_rng(19).uniform(-1, 1, size=sh) / np.sqrt(8)) for n, sh in shapes)
    case = "tokens_smooth_ignore_sgd"
    g = {"format": "pock-graph", "version": 1, "name": "fixture_" + case, "dtype": "f64",
         "weights_file": case + ".pkw", "inputs": [{"name": "x", "shape": ["N", 64]}],
         "params": [{"name": n, "shape": list(sh)} for n, sh in shapes],
         "nodes": nodes, "output": output,
         "training": optim_training(SGD, 0.1, 0, 0, None, 1)}
    with open(os.path.join(tdir, case + ".json"), "w") as f:
        json.dump(g, f, indent=1)
        f.write("\n")
    torch2pock.write_pkw(os.path.join(tdir, case + ".pkw"), w)
    m = PockGraph(g, w, dtype=torch.float64)
    params = [p for _, p in m.named_pock_params()]
    o = torch.optim.SGD(params, lr=SGD["lr"], momentum=SGD["momentum"],
                        weight_decay=SGD["weight_decay"])
    losses = []
    for t in range(OPTIM_STEPS):
        loss = training_loss(g, m(torch.from_numpy(x[t])), torch.from_numpy(y[t]))
        o.zero_grad()
        loss.backward()
        o.step()
        losses.append(loss.item())
    after = collections.OrderedDict((n, p.detach()) for n, p in m.named_pock_params())
    torch2pock.write_pkw(os.path.join(tdir, case + ".after.pkw"), after)
    table = Cases(OPTIM_STEPS, "the loss")
    table.add(case, case + ".json", "full.json", SGD, TOL["f64"], case + ".after.pkw", losses)
    table.write(tdir)
    return len(table)


def generate_optim(out_dir):
    """out_dir/optim: one small-MLP graph file per case (its training object carries the
    case's options; CASE.pkw its initial weights, CASE.after.pkw PyTorch's after
    OPTIM_STEPS steps); the batches' labels include IGNORE. Returns the number of cases."""
    import torch2pock
    odir = os.path.join(out_dir, "optim")
    os.makedirs(odir, exist_ok=True)
    x, y = make_batches()
    x, y = x[:OPTIM_STEPS], y[:OPTIM_STEPS].copy()
    y[1, 2] = IGNORE
    y[3, 0] = IGNORE
    np.save(os.path.join(odir, "x.npy"), x)
    np.save(os.path.join(odir, "y.npy"), y)
    with open(os.path.join(odir, "full.json"), "w") as f:
        json.dump({"version": 1, "train": [{"all": True}]}, f)
        f.write("\n")
    shapes, nodes, output = small_mlp_graph()
    rng = np.random.default_rng(13)
    weights = collections.OrderedDict()
    for name, shape in shapes:
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 4
        weights[name] = rng.uniform(-1, 1, size=shape) * 1.5 / np.sqrt(fan)
    table = Cases(OPTIM_STEPS, "the loss")
    for case, (opt, *rest) in OPTIM_CASES.items():
        g = {"format": "pock-graph", "version": 1, "name": "fixture_" + case, "dtype": "f64",
             "weights_file": case + ".pkw", "inputs": [{"name": "x", "shape": ["N", 64]}],
             "params": [{"name": n, "shape": list(sh)} for n, sh in shapes],
             "nodes": nodes, "output": output, "training": optim_training(opt, *rest)}
        with open(os.path.join(odir, case + ".json"), "w") as f:
            json.dump(g, f, indent=1)
            f.write("\n")
        torch2pock.write_pkw(os.path.join(odir, case + ".pkw"), weights)
        after, losses = train_optim_torch(g, weights, case, x, y)
        torch2pock.write_pkw(os.path.join(odir, case + ".after.pkw"), after)
        table.add(case, case + ".json", "full.json", opt, TOL["f64"], case + ".after.pkw",
                  losses)
    table.write(odir)
    return len(table)


def generate(out_dir, only=None):
    import torch
    import models
    import torch2pock
    torch.set_num_threads(1)  # summation order fixed: reproducible to the last bit
    os.makedirs(out_dir, exist_ok=True)
    if only == "optim":
        return generate_optim(out_dir)
    if only == "tokens":
        return generate_tokens(out_dir)
    x, y = make_batches()
    np.save(os.path.join(out_dir, "x.npy"), x)
    np.save(os.path.join(out_dir, "y.npy"), y)
    training = {"loss": "softmax_cross_entropy", "classes": 10, "optimizer": SGD}
    table = Cases(STEPS)
    for mname in (m for m in ("mlp", "cnn") if only in (None, m)):
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
            table.add(case, mname + ("" if dtype == "f64" else "_f32") + ".json",
                      "%s_%s.json" % (mname, scheme), opt, TOL[dtype], case + ".pkw", losses)
    table.write(out_dir)
    n = len(table) + generate_graphs(out_dir, only)
    return n + (generate_optim(out_dir) + generate_tokens(out_dir) if only is None else 0)


ONLY_CHOICES = ("mlp", "cnn") + GRAPH_MODELS + ("optim", "tokens") + gen_model_fixtures.MODELS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "train"))
    ap.add_argument("--only", metavar="PREFIX",
                    help="only the cases of the model this case-name prefix names (the test's "
                         "live check, one model a test): " + ", ".join(ONLY_CHOICES))
    a = ap.parse_args()
    only = None
    if a.only is not None:  # the longest model name the prefix starts with ("mlp_full": mlp)
        names = [m for m in ONLY_CHOICES if a.only.startswith(m) or a.only == m + "_"]
        if not names:
            ap.error("--only %r names no model (%s)" % (a.only, ", ".join(ONLY_CHOICES)))
        only = max(names, key=len)
    if only in gen_model_fixtures.MODELS:
        n = gen_model_fixtures.generate(os.path.join(a.out, "models"), only)
    else:
        n = generate(a.out, only)
        if only is None:
            n += gen_model_fixtures.generate(os.path.join(a.out, "models"))
    print("gen_train_fixtures: %d cases in %s" % (n, a.out))


if __name__ == "__main__":
    main()
