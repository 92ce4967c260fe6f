#!/usr/bin/env python3
"""sparse_spec.py — resolves a Pock sparse-update spec (docs/sparse-update.md) against a
PyTorch module's named parameters by Pock's own rules, and sets the module up to train
exactly that: the reference trainer of bench/torch_train_worker.py and the trainable-name
list of bench/ort_train_worker.py.

  import sparse_spec
  spec = sparse_spec.load("examples/llama/specs/pockengine.json")
  r = sparse_spec.resolve(spec, module, inputs=example_batch)   # {name: S or None}
  params, splits = sparse_spec.apply(module, r)                # requires_grad, slices
  ... each step: sparse_spec.join(splits) before the forward ...

  /usr/bin/python3 scripts/sparse_spec.py SPEC.json MODEL [--size tiny]
      prints what trains in examples/models' MODEL (name, and S/C for a partial weight)

resolve() returns {param name: None (trains whole) or S (trains input channels [0, S))};
params not in it are frozen. The rules, as graph/sparse_apply.c applies them to the
graph: a union of rules; "params" globs (fnmatch), "biases" (names ending in "bias"),
"norms" (params of BatchNorm/LayerNorm/GroupNorm and RMSNorm modules), "all", "blocks"
(prefix.<i>.*, prefix "auto" = the one most params have), "last_layers" (Conv2d/Linear
modules in forward order: needs `inputs`); "channels" f in (0, 1] (S = round(f C), half
away from zero), an integer k >= 2, or "channel_count"; outside a params rule it narrows
only the layer weights (Conv2d/Linear weights) and the rule's other params train whole.
Errors (SpecError) where Pock refuses: unknown keys, a glob that matches nothing, partial
channels on a grouped conv, a count above C, and so on. A partially trained weight is
split by apply() into a trained slice [:, :S] and a frozen rest, concatenated along axis 1
at every step (join), as scripts/gen_model_fixtures.py's Trainer does.
"""
import argparse
import collections
import fnmatch
import json
import math
import os
import sys

SELECTORS = ("params", "biases", "norms", "all", "blocks", "last_layers")
MODIFIERS = ("channels", "channel_count")


class SpecError(ValueError):
    """A spec Pock would refuse, or one this resolver cannot mirror."""


def load(path):
    """The spec at path as a dict (parsed, not yet checked: resolve() checks it)."""
    try:
        with open(path) as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        raise SpecError("%s: %s" % (path, e))
    if isinstance(spec, dict):
        spec.setdefault("_file", path)
    return spec


def _norm_modules(m):
    import torch.nn as nn
    kinds = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)
    return [(n, mod) for n, mod in m.named_modules()
            if isinstance(mod, kinds) or type(mod).__name__ == "RMSNorm"]


def _layers(m):
    """{module name: module} of the Conv2d and Linear modules (Pock's conv2d/matmul
    layers: the nodes that read a weight as their second input)."""
    import torch.nn as nn
    return {n: mod for n, mod in m.named_modules() if isinstance(mod, (nn.Conv2d, nn.Linear))}


def layer_order(m, inputs):
    """Names of the Conv2d/Linear modules in the order a forward on inputs calls them."""
    import torch
    order, hooks = [], []
    for n, mod in _layers(m).items():
        hooks.append(mod.register_forward_hook(
            lambda mod, i, o, n=n: order.append(n) if n not in order else None))
    try:
        with torch.no_grad():
            m(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return order


def _block_of(name):
    """(prefix, index) of a name prefix.<i>.rest (the first all-digit component after the
    first), or None: graph/sparse_apply.c's block_of."""
    parts = name.split(".")
    for k in range(1, len(parts) - 1):
        if parts[k].isdigit() and len(parts[k]) <= 9:
            return ".".join(parts[:k]), int(parts[k])
    return None


def select_blocks(names, blk, where):
    """The names in the blocks a "blocks" object selects (graph/sparse_apply.c's
    select_blocks: "auto" takes the prefix most params have; the last n indices)."""
    if not isinstance(blk, dict) or set(blk) - {"prefix", "last"}:
        raise SpecError("%s: blocks: an object with \"last\" and optionally \"prefix\"" % where)
    last, prefix = blk.get("last"), blk.get("prefix", "auto")
    if not isinstance(last, int) or isinstance(last, bool) or last < 1:
        raise SpecError("%s: blocks.last must be an integer >= 1" % where)
    if prefix == "auto":
        count = collections.Counter(b[0] for b in map(_block_of, names) if b)
        if not count:
            raise SpecError("%s: blocks: no param is named PREFIX.<index>.*" % where)
        best = max(count.values())
        tops = sorted(p for p, c in count.items() if c == best)
        if len(tops) > 1:
            raise SpecError("%s: blocks: \"prefix\": \"auto\" is ambiguous: '%s' and '%s' both "
                            "number %d params" % (where, tops[0], tops[1], best))
        prefix = tops[0]
    of = {}
    for n in names:
        rest = n[len(prefix) + 1:].split(".") if n.startswith(prefix + ".") else []
        if len(rest) > 1 and rest[0].isdigit() and len(rest[0]) <= 9:
            of[n] = int(rest[0])
    idx = sorted(set(of.values()))
    if not idx:
        raise SpecError("%s: blocks: no param is named '%s.<index>.*'" % (where, prefix))
    if last > len(idx):
        raise SpecError("%s: blocks.last %d but '%s' has %d blocks" % (where, last, prefix,
                                                                       len(idx)))
    cut = idx[-last]
    return {n for n, i in of.items() if i >= cut}


def _channels(rule, where):
    """('fraction', f) / ('count', k) / None of a rule's channel modifier."""
    if "channels" in rule and "channel_count" in rule:
        raise SpecError("%s: \"channels\" and \"channel_count\" both given" % where)
    if "channel_count" in rule:
        k = rule["channel_count"]
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise SpecError("%s: channel_count must be an integer >= 1" % where)
        return ("count", k)
    if "channels" in rule:
        v = rule["channels"]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SpecError("%s: channels must be a number" % where)
        if isinstance(v, int) and v >= 2:
            return ("count", v)
        if 0 < v <= 1:
            return ("fraction", float(v))
        raise SpecError("%s: channels %r: a fraction in (0, 1] or an integer >= 2" % (where, v))
    return None


def _partial_s(mod, pname, ch, where):
    """S for a partial rule on weight pname of layer module mod (Pock's check_partial and
    channels_of)."""
    import torch.nn as nn
    if isinstance(mod, nn.Conv2d) and mod.groups > 1:
        raise SpecError("%s: partial channels on '%s': a grouped conv2d (groups %d; only "
                        "groups 1 is supported)" % (where, pname, mod.groups))
    c = mod.weight.shape[1]
    if ch[0] == "count":
        if ch[1] > c:
            raise SpecError("%s: channel count %d is out of range for '%s' (1..%d input "
                            "channels)" % (where, ch[1], pname, c))
        return ch[1]
    s = int(math.floor(ch[1] * c + 0.5))  # C's round(): half away from zero
    if s < 1:
        raise SpecError("%s: channels fraction %g of '%s' (%d input channels) rounds to 0"
                        % (where, ch[1], pname, c))
    return s


def resolve(spec, m, inputs=None):
    """{name: None (whole) or S (input channels [0, S))} of the params of module m that
    spec trains; spec None means everything. inputs (a tuple for m's forward) is needed by
    "last_layers" only."""
    named = collections.OrderedDict(m.named_parameters())
    if spec is None:
        return collections.OrderedDict((n, None) for n in named)
    file = spec.get("_file", "spec") if isinstance(spec, dict) else "spec"
    if not isinstance(spec, dict) or spec.get("version") != 1 or \
            not isinstance(spec.get("train"), list) or \
            set(spec) - {"version", "train", "description", "_file"}:
        raise SpecError("%s: a spec is {\"version\": 1, \"train\": [rules]}" % file)
    layers = _layers(m)
    weight_of = {ln + ".weight": mod for ln, mod in layers.items()}
    owner = {}  # param name -> its layer's module name (weights and biases of layers)
    for ln, mod in layers.items():
        for pn, _ in mod.named_parameters(recurse=False):
            owner[ln + "." + pn] = ln
    norm = {mn + "." + pn for mn, mod in _norm_modules(m)
            for pn, _ in mod.named_parameters(recurse=False)}
    whole, part = set(), {}
    for ri, rule in enumerate(spec["train"]):
        where = "%s: train[%d]" % (file, ri)
        if not isinstance(rule, dict):
            raise SpecError("%s: a rule is an object" % where)
        sel = [k for k in rule if k in SELECTORS]
        bad = [k for k in rule if k not in SELECTORS + MODIFIERS]
        if bad or len(sel) != 1:
            raise SpecError("%s: exactly one selector of %s (got %s)" % (
                where, ", ".join(SELECTORS), ", ".join(sorted(rule)) or "none"))
        sel = sel[0]
        ch = _channels(rule, where)
        if ch and sel in ("biases", "norms"):
            raise SpecError("%s: channels on a %s rule" % (where, sel))
        if sel == "params":
            globs = rule["params"] if isinstance(rule["params"], list) else [rule["params"]]
            if not globs or not all(isinstance(g, str) and g for g in globs):
                raise SpecError("%s: params: a non-empty name or list of names" % where)
            groups = []
            for g in globs:
                hit = [n for n in named if fnmatch.fnmatchcase(n, g)]
                if not hit:
                    raise SpecError("%s: \"%s\" matches no param" % (where, g))
                groups.append(hit)
        elif sel in ("biases", "all", "norms"):
            if rule[sel] is not True:
                raise SpecError("%s: \"%s\" must be true" % (where, sel))
            hit = [n for n in named if sel == "all" or
                   (sel == "biases" and n.endswith("bias")) or (sel == "norms" and n in norm)]
            if not hit:
                raise SpecError("%s: \"%s\" selects no param in this model" % (where, sel))
            groups = [hit]
        elif sel == "blocks":
            chosen = select_blocks(list(named), rule["blocks"], where)
            groups = [[n for n in named if n in chosen]]
        else:  # last_layers
            k = rule["last_layers"]
            if inputs is None:
                raise SpecError("%s: last_layers needs the model's forward order (inputs)"
                                % where)
            order = layer_order(m, inputs)
            if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= len(order):
                raise SpecError("%s: last_layers %r but the model has %d layers"
                                % (where, k, len(order)))
            last = set(order[len(order) - k:])
            groups = [[n for n in named if owner.get(n) in last]]
        for hit in groups:
            for n in hit:
                if ch is None or (sel != "params" and n not in weight_of):
                    whole.add(n)
                    continue
                if n not in weight_of or named[n].dim() < 2:
                    raise SpecError("%s: partial channels on '%s', which is not the weight of "
                                    "a conv2d/linear layer" % (where, n))
                part[n] = max(part.get(n, 0), _partial_s(weight_of[n], n, ch, where))
    out = collections.OrderedDict()
    for n, p in named.items():
        if n in whole or (n in part and part[n] >= p.shape[1]):
            out[n] = None
        elif n in part:
            out[n] = part[n]
    return out


def apply(m, resolved):
    """Sets requires_grad by resolved (frozen: False) and splits each partial weight into a
    trained slice [:, :S] and a frozen rest (the module's weight becomes their concat at
    every join()). Returns (the tensors an optimizer updates, splits)."""
    import torch
    named = collections.OrderedDict(m.named_parameters())
    mods = dict(m.named_modules())
    params, splits = [], []
    for n, p in named.items():
        p.requires_grad_(n in resolved)
        if resolved.get(n, 0) is None:
            params.append(p)
    for n, s in resolved.items():
        if s is None:
            continue
        mod = mods[n.rsplit(".", 1)[0]]
        w = mod.weight.detach()
        w_tr = w[:, :s].clone().requires_grad_(True)
        w_fr = w[:, s:].clone()
        del mod._parameters["weight"]
        mod.weight = torch.cat([w_tr, w_fr], dim=1)
        splits.append((mod, w_tr, w_fr, n))
        params.append(w_tr)
    return params, splits


def join(splits):
    """Rebuilds each split weight from its slices (call before every forward: the
    concat is what autograd differentiates into the trained slice)."""
    import torch
    for mod, w_tr, w_fr, _ in splits:
        mod.weight = torch.cat([w_tr, w_fr], dim=1)


def counts(m, resolved):
    """(trained values, partial weights): how much of m the resolution trains."""
    named = dict(m.named_parameters())
    total = 0
    for n, s in resolved.items():
        p = named[n]
        total += p.numel() if s is None else p.numel() // p.shape[1] * s
    return total, sum(1 for s in resolved.values() if s is not None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("model", help="a name of examples/models/models.py's MODELS")
    ap.add_argument("--size", default="tiny", choices=("tiny", "standard", "device"))
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_model_fixtures
    em = gen_model_fixtures._example_models()
    if a.model not in em.MODELS:
        raise SystemExit("sparse_spec: unknown model %r: one of %s" % (a.model, ", ".join(em.MODELS)))
    m = em.MODELS[a.model](a.size)
    try:
        r = resolve(load(a.spec), m, em.example_inputs(m, 2))
    except SpecError as e:
        raise SystemExit("sparse_spec: %s" % e)
    named = dict(m.named_parameters())
    for n, s in r.items():
        print(n if s is None else "%s  channels %d/%d" % (n, s, named[n].shape[1]))
    total, npart = counts(m, r)
    print("%d of %d values train (%d partial weights)" % (
        total, sum(p.numel() for p in named.values()), npart))
    return 0


if __name__ == "__main__":
    sys.exit(main())
