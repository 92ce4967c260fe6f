#!/usr/bin/env python3
"""torch2pock.py — writes a PyTorch nn.Sequential-like module as Pock's JSON graph with its
weights in a .pkw side file (docs/graph-format.md). Library + CLI; runs where torch does.

CLI:  torch2pock.py FILE.py:FACTORY OUT.json [--input-shape 1,8,8] [--name NAME]
                    [--training JSON] [--dtype f32|f64] [--seed S]
      torch2pock.py --self-test      converts sample modules, checks each against PyTorch
  FACTORY is a function or class in FILE.py returning the module; the input shape (without
  the batch dim) comes from --input-shape or the module's `input_shape` attribute.
Library:
  graph, tensors = convert(module, (1, 8, 8), name="digits_cnn", training={...})
  save(module, "cnn.json", (1, 8, 8), ...)      # cnn.json + cnn.pkw
  write_pkw(path, {"fc.weight": tensor_or_array, ...}); read_pkw(path) -> {name: ndarray}
"""
import argparse
import importlib.util
import json
import os
import struct
import sys

import numpy as np

PKW_MAGIC = b"PKW1"
PKW_DTYPES = {np.dtype(np.float32): 1, np.dtype(np.float64): 2}
PKW_NP = {1: np.float32, 2: np.float64}


class ConvertError(Exception):
    """A module the converter cannot express exactly in Pock's ops."""


def _to_numpy(t):
    if hasattr(t, "detach"):
        t = t.detach().cpu().numpy()
    return np.ascontiguousarray(t)


def write_pkw(path, tensors):
    """Writes named tensors ({name: array}, insertion order kept) as a .pkw file, atomically
    (temp file + rename) like the runtime's writer, so a crash never leaves half a file."""
    out = bytearray(PKW_MAGIC)
    out += struct.pack("<I", len(tensors))
    for name, t in tensors.items():
        a = _to_numpy(t)
        if a.dtype not in PKW_DTYPES:
            raise ConvertError("%s: dtype %s is not f32/f64" % (name, a.dtype))
        nb = name.encode("utf-8")
        if not 1 <= len(nb) <= 255:
            raise ConvertError("tensor name %r must be 1..255 bytes" % name)
        shape = a.shape if a.ndim else (1,)
        out += struct.pack("<H", len(nb)) + nb
        out += struct.pack("<BB", PKW_DTYPES[a.dtype], len(shape))
        out += struct.pack("<%dq" % len(shape), *shape)
        out += a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_pkw(path):
    """Reads a .pkw file into {name: ndarray} (insertion order = file order)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != PKW_MAGIC:
        raise ConvertError("%s: not a .pkw file (bad magic)" % path)
    (count,) = struct.unpack_from("<I", data, 4)
    pos, out = 8, {}
    for _ in range(count):
        (nlen,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2:pos + 2 + nlen].decode("utf-8")
        pos += 2 + nlen
        dt, rank = struct.unpack_from("<BB", data, pos)
        pos += 2
        shape = struct.unpack_from("<%dq" % rank, data, pos)
        pos += 8 * rank
        if dt not in PKW_NP:
            raise ConvertError("%s: tensor %s has dtype code %d" % (path, name, dt))
        n = int(np.prod(shape))
        itemsize = np.dtype(PKW_NP[dt]).itemsize
        out[name] = np.frombuffer(data, dtype=np.dtype(PKW_NP[dt]).newbyteorder("<"),
                                  count=n, offset=pos).reshape(shape).astype(PKW_NP[dt])
        pos += n * itemsize
    return out


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class _Builder:
    """Accumulates nodes/params while walking; tracks each value's shape on Pock's side
    (batch dim included as the placeholder 1 — only non-batch dims matter for checks)."""

    def __init__(self, dtype):
        self.nodes, self.params, self.tensors = [], [], {}
        self.dtype = dtype

    def param(self, name, value):
        a = _to_numpy(value).astype(self.dtype)
        self.params.append({"name": name, "shape": list(a.shape)})
        self.tensors[name] = a

    def node(self, name, op, inputs, output, attrs=None):
        n = {"name": name, "op": op, "inputs": inputs, "output": output}
        if attrs:
            n["attrs"] = attrs
        self.nodes.append(n)
        return output


def _spatial_pad(m, kernel, dilation):
    """Conv/pool padding as Pock's [top, left, bottom, right]."""
    p = m.padding
    if isinstance(p, str):
        if p == "valid":
            return [0, 0, 0, 0]
        # 'same' (stride 1 only in PyTorch): the extra pad goes bottom/right, as PyTorch.
        tot = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [tot[0] // 2, tot[1] // 2, tot[0] - tot[0] // 2, tot[1] - tot[1] // 2]
    ph, pw = _pair(p)
    return [ph, pw, ph, pw]


def _walk(mod, prefix, b, x, shape, nn, following):
    """Emits the nodes of `mod` applied to value x of shape `shape`; returns (value, shape).
    `following` is the list of modules that run after this one (for flatten elision)."""
    name = prefix or type(mod).__name__.lower()
    kind = type(mod).__name__
    if kind not in _LEAF_KINDS:
        kids = list(mod.named_children())
        if not kids:
            raise ConvertError("%s: module type %s is not supported" % (name, kind))
        # A container: nn.Sequential, or a module whose forward runs its children in
        # registration order (the "Sequential-like" contract the digits models keep).
        for i, (cn, child) in enumerate(kids):
            rest = [c for _, c in kids[i + 1:]] + following
            x, shape = _walk(child, (prefix + "." if prefix else "") + cn, b, x, shape, nn, rest)
        return x, shape

    if kind == "Linear":
        if len(shape) != 2:
            raise ConvertError("%s: Linear on a rank-%d input (flatten first)" % (name, len(shape)))
        if shape[1] != mod.in_features:
            raise ConvertError("%s: expects %d features, gets %d" % (name, mod.in_features, shape[1]))
        b.param(name + ".weight", mod.weight)
        y = b.node(name, "matmul", [x, name + ".weight"], name + ".mm", {"trans_b": True})
        if mod.bias is not None:
            b.param(name + ".bias", mod.bias)
            y = b.node(name + ".add", "add", [y, name + ".bias"], name + ".out")
        return y, [shape[0], mod.out_features]

    if kind == "Conv2d":
        if len(shape) != 4 or shape[1] != mod.in_channels:
            raise ConvertError("%s: expects (N, %d, H, W), gets %s" % (name, mod.in_channels, shape))
        if mod.padding_mode != "zeros":
            raise ConvertError("%s: padding_mode %r (only 'zeros')" % (name, mod.padding_mode))
        k, s, d = _pair(mod.kernel_size), _pair(mod.stride), _pair(mod.dilation)
        pad = _spatial_pad(mod, k, d)
        b.param(name + ".weight", mod.weight)
        attrs = {"stride": list(s), "dilation": list(d), "pad": pad}
        if mod.groups != 1:
            attrs["groups"] = mod.groups
        y = b.node(name, "conv2d", [x, name + ".weight"], name + ".conv", attrs)
        if mod.bias is not None:
            b.param(name + ".bias", _to_numpy(mod.bias).reshape(-1, 1, 1))
            y = b.node(name + ".add", "add", [y, name + ".bias"], name + ".out")
        oh = (shape[2] + pad[0] + pad[2] - d[0] * (k[0] - 1) - 1) // s[0] + 1
        ow = (shape[3] + pad[1] + pad[3] - d[1] * (k[1] - 1) - 1) // s[1] + 1
        if oh < 1 or ow < 1:
            raise ConvertError("%s: output would be empty for input %s" % (name, shape))
        return y, [shape[0], mod.out_channels, oh, ow]

    if kind in ("ReLU", "Sigmoid", "Tanh", "GELU"):
        approx = getattr(mod, "approximate", "none") if kind == "GELU" else "none"
        if approx not in ("none", "tanh"):
            raise ConvertError("%s: GELU(approximate=%r) (Pock's gelu: 'none' or 'tanh')"
                               % (name, approx))
        attrs = {"approximate": "tanh"} if approx == "tanh" else None
        return b.node(name, kind.lower(), [x], name + ".out", attrs), shape

    if kind in ("SiLU", "Hardsigmoid", "Hardswish", "ReLU6"):
        return b.node(name, kind.lower(), [x], name + ".out"), shape

    if kind in ("LeakyReLU", "ELU"):
        alpha = float(mod.negative_slope if kind == "LeakyReLU" else mod.alpha)
        if alpha == 0:  # both are relu then, gradient at 0 included
            return b.node(name, "relu", [x], name + ".out"), shape
        if not alpha > 0:
            raise ConvertError("%s: %s with a negative %s (Pock's alpha is > 0)"
                               % (name, kind, "slope" if kind == "LeakyReLU" else "alpha"))
        return b.node(name, kind.lower().replace("leakyrelu", "leaky_relu"), [x],
                      name + ".out", {"alpha": alpha}), shape

    if kind in ("MaxPool2d", "AvgPool2d"):
        if len(shape) != 4:
            raise ConvertError("%s: expects a rank-4 input, gets %s" % (name, shape))
        if mod.ceil_mode:
            raise ConvertError("%s: ceil_mode=True is not supported" % name)
        k = _pair(mod.kernel_size)
        s = _pair(mod.stride if mod.stride is not None else mod.kernel_size)
        d = _pair(getattr(mod, "dilation", 1))
        ph, pw = _pair(mod.padding)
        attrs = {"kernel": list(k), "stride": list(s), "pad": [ph, pw, ph, pw]}
        if kind == "MaxPool2d":
            if mod.return_indices:
                raise ConvertError("%s: return_indices=True is not supported" % name)
            attrs["dilation"] = list(d)
            op = "max_pool2d"
        else:
            if mod.divisor_override is not None:
                raise ConvertError("%s: divisor_override is not supported" % name)
            if (ph or pw) and mod.count_include_pad:
                # Pock divides by the in-bounds count (count_include_pad=False).
                raise ConvertError("%s: padding with count_include_pad=True (set it False)" % name)
            op = "avg_pool2d"
        oh = (shape[2] + 2 * ph - d[0] * (k[0] - 1) - 1) // s[0] + 1
        ow = (shape[3] + 2 * pw - d[1] * (k[1] - 1) - 1) // s[1] + 1
        return b.node(name, op, [x], name + ".out", attrs), [shape[0], shape[1], oh, ow]

    if kind == "AdaptiveAvgPool2d":
        if _pair(mod.output_size) != (1, 1) or len(shape) != 4:
            raise ConvertError("%s: only AdaptiveAvgPool2d(1) on a rank-4 input" % name)
        # Followed by Flatten (or Linear), the (N, C, 1, 1) -> (N, C) step is free: reduce
        # without keepdims; otherwise keep the 1x1 dims PyTorch has.
        nxt = following[0] if following else None
        flat = nxt is not None and type(nxt).__name__ in ("Flatten", "Linear")
        attrs = {"axes": [2, 3], "keepdims": not flat}
        y = b.node(name, "mean", [x], name + ".out", attrs)
        return y, [shape[0], shape[1]] if flat else [shape[0], shape[1], 1, 1]

    if kind == "Flatten":
        sd, ed = mod.start_dim, mod.end_dim
        r = len(shape)
        sd, ed = sd % r, ed % r
        new = shape[:sd] + [int(np.prod(shape[sd:ed + 1]))] + shape[ed + 1:]
        if new == shape:
            return x, shape
        if sd == 0:
            raise ConvertError("%s: Flatten over the batch dim is not supported" % name)
        attrs = {"shape": ["N"] + new[1:]}
        return b.node(name, "reshape", [x], name + ".out", attrs), new

    if kind == "Identity":
        return x, shape
    raise ConvertError("%s: module type %s is not supported" % (name, kind))


_LEAF_KINDS = {"Linear", "Conv2d", "ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Hardsigmoid",
               "Hardswish", "ReLU6", "LeakyReLU", "ELU", "MaxPool2d", "AvgPool2d",
               "AdaptiveAvgPool2d", "Flatten", "Identity"}


def evaluate(graph, tensors, x):
    """Runs a converted graph with torch.nn.functional on input x (a tensor whose dtype
    matches the graph): the converter's own reference, used by convert(verify=True)."""
    import torch
    import torch.nn.functional as F
    env = {graph["inputs"][0]["name"]: x}
    env.update({k: torch.from_numpy(np.array(v)) for k, v in tensors.items()})
    for n in graph["nodes"]:
        a, at = [env[i] for i in n["inputs"]], n.get("attrs", {})
        op = n["op"]
        if op == "matmul":
            y = a[0] @ (a[1].t() if at.get("trans_b") else a[1])
        elif op == "add":
            y = a[0] + a[1]
        elif op == "conv2d":
            p = at["pad"]
            xp = F.pad(a[0], (p[1], p[3], p[0], p[2]))
            y = F.conv2d(xp, a[1], stride=at["stride"], dilation=at["dilation"],
                         groups=at.get("groups", 1))
        elif op in ("relu", "sigmoid", "tanh"):
            y = getattr(torch, op)(a[0])
        elif op == "gelu":
            y = F.gelu(a[0], approximate=at.get("approximate", "none"))
        elif op in ("silu", "hardsigmoid", "hardswish", "relu6"):
            y = getattr(F, op)(a[0])
        elif op == "leaky_relu":
            y = F.leaky_relu(a[0], at.get("alpha", 0.01))
        elif op == "elu":
            y = F.elu(a[0], at.get("alpha", 1.0))
        elif op == "clip":
            y = torch.clamp(a[0], at["min"], at["max"])
        elif op in ("max_pool2d", "avg_pool2d"):
            p = at["pad"]
            if op == "max_pool2d":
                y = F.max_pool2d(a[0], at["kernel"], at["stride"], (p[0], p[1]),
                                 at["dilation"])
            else:
                y = F.avg_pool2d(a[0], at["kernel"], at["stride"], (p[0], p[1]),
                                 count_include_pad=False)
        elif op == "mean":
            y = a[0].mean(dim=tuple(at["axes"]), keepdim=at.get("keepdims", False))
        elif op == "reshape":
            y = a[0].reshape([a[0].shape[0]] + at["shape"][1:])
        else:
            raise ConvertError("evaluate: op %s" % op)
        env[n["output"]] = y
    return env[graph["output"]]


def convert(module, input_shape, name="model", training=None, input_name="x",
            weights_file=None, dtype=None, verify=True):
    """Returns (graph dict, {param name: ndarray}). input_shape excludes the batch dim.
    dtype: "f32"/"f64", default from the module's parameters. verify: run the module and
    the converted graph on a random batch and require the same output — this is what
    catches a custom forward that does not run its children in order."""
    import torch.nn as nn
    if dtype is None:
        pdt = {p.dtype for p in module.parameters()}
        if len(pdt) > 1:
            raise ConvertError("parameters have mixed dtypes %s" % sorted(map(str, pdt)))
        import torch
        dtype = "f64" if pdt == {torch.float64} else "f32"
        if pdt and pdt not in ({torch.float64}, {torch.float32}):
            raise ConvertError("parameter dtype %s (only float32/float64)" % pdt.pop())
    if dtype not in ("f32", "f64"):
        raise ConvertError("dtype %r (only f32 or f64)" % dtype)
    b = _Builder(np.float32 if dtype == "f32" else np.float64)
    shape = [1] + list(input_shape)
    out, _ = _walk(module, "", b, input_name, shape, nn, [])
    if out == input_name:
        raise ConvertError("the module computes nothing")
    g = {"format": "pock-graph", "version": 1, "name": name, "dtype": dtype}
    if weights_file:
        g["weights_file"] = weights_file
    g["inputs"] = [{"name": input_name, "shape": ["N"] + list(input_shape)}]
    g["params"] = b.params
    g["nodes"] = b.nodes
    g["output"] = out
    if training:
        g["training"] = training
    if verify:
        _verify(module, g, b.tensors, input_shape)
    return g, b.tensors


def _verify(module, g, tensors, input_shape):
    import torch
    tdt = torch.float64 if g["dtype"] == "f64" else torch.float32
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn([3] + list(input_shape), generator=gen, dtype=tdt)
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            p0 = next(module.parameters(), None)
            want = module(x if p0 is None else x.to(p0.dtype)).to(tdt)
            got = evaluate(g, tensors, x)
    finally:
        module.train(was_training)
    if tuple(want.shape) != tuple(got.shape):
        raise ConvertError("converted graph gives shape %s, the module %s"
                           % (tuple(got.shape), tuple(want.shape)))
    err = (want - got).abs().max().item()
    tol = (1e-4 if tdt == torch.float32 else 1e-10) * max(1.0, want.abs().max().item())
    if not err <= tol:
        raise ConvertError("converted graph differs from the module by %.3g (is forward "
                           "running the children in order?)" % err)


def save(module, out_json, input_shape, name=None, training=None, dtype=None):
    """Writes OUT.json and OUT.pkw (weights_file relative to the JSON, as the format says)."""
    base = os.path.splitext(out_json)[0]
    pkw = base + ".pkw"
    g, tensors = convert(module, input_shape, name or os.path.basename(base), training,
                         weights_file=os.path.basename(pkw), dtype=dtype)
    write_pkw(pkw, tensors)
    with open(out_json + ".tmp", "w") as f:
        f.write(dumps_graph(g))
    os.replace(out_json + ".tmp", out_json)
    return g


def dumps_graph(g):
    """The graph as JSON with one line per input, param and node (diffable, readable)."""
    lines = ["{"]
    items = list(g.items())
    for i, (k, v) in enumerate(items):
        end = "," if i + 1 < len(items) else ""
        if isinstance(v, list) and v and isinstance(v[0], dict):
            lines.append(' "%s": [' % k)
            lines += ["  %s%s" % (json.dumps(e), "," if j + 1 < len(v) else "")
                      for j, e in enumerate(v)]
            lines.append(" ]" + end)
        else:
            lines.append(' "%s": %s%s' % (k, json.dumps(v), end))
    return "\n".join(lines + ["}"]) + "\n"


def _load_factory(spec):
    path, _, attr = spec.rpartition(":")
    if not path or not attr:
        raise ConvertError("MODULE_SPEC must be FILE.py:FACTORY, got %r" % spec)
    mspec = importlib.util.spec_from_file_location("torch2pock_user", path)
    if mspec is None:
        raise ConvertError("%s: cannot load as a Python module" % path)
    mod = importlib.util.module_from_spec(mspec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    mspec.loader.exec_module(mod)
    if not hasattr(mod, attr):
        raise ConvertError("%s has no %r" % (path, attr))
    return getattr(mod, attr)


def self_test():
    """Converts a spread of modules (each checked against PyTorch by convert's verify) and
    the unsupported ones (each must raise ConvertError); returns the number of failures."""
    import collections
    import tempfile
    import torch
    import torch.nn as nn
    torch.manual_seed(1)
    od = collections.OrderedDict
    good = [
        ("conv_strided_dilated_grouped_gelu_pools", (4, 13, 11), nn.Sequential(od([
            ("c1", nn.Conv2d(4, 8, 3, stride=2, padding=(1, 2), dilation=2, groups=2)),
            ("g", nn.GELU()), ("blk", nn.Sequential(nn.Conv2d(8, 8, 1, padding="same"),
                                                    nn.Sigmoid())),
            ("ap", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)),
            ("t", nn.Tanh()), ("mp", nn.MaxPool2d(2, stride=1, padding=1)),
            ("fl", nn.Flatten()), ("fc", nn.Linear(8 * 4 * 4, 5))]))),
        ("gap_keepdims_f64", (3, 5, 5), nn.Sequential(
            nn.Conv2d(3, 4, 3, bias=False), nn.AdaptiveAvgPool2d(1)).double()),
        ("mlp_no_bias", (6,), nn.Sequential(nn.Linear(6, 4, bias=False), nn.ReLU(),
                                            nn.Linear(4, 2))),
        # scaled by 4 so that the inputs reach every piece (hardswish's +-3, relu6's 6)
        ("activations", (6,), nn.Sequential(
            nn.Linear(6, 8), nn.LeakyReLU(), nn.Linear(8, 8), nn.ELU(0.5), nn.SiLU(),
            nn.Linear(8, 8), nn.LeakyReLU(0.2), nn.Linear(8, 8), nn.Hardswish(),
            nn.Linear(8, 8), nn.Hardsigmoid(), nn.Linear(8, 8), nn.ReLU6(), nn.ELU(),
            nn.LeakyReLU(0.0)).apply(lambda m: isinstance(m, nn.Linear) and
                                     m.weight.data.mul_(4))),
        ("gelu_tanh", (3,), nn.Sequential(nn.Linear(3, 4), nn.GELU(approximate="tanh"))),
    ]

    class Tangled(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

        def forward(self, x):
            return self.b(x) + self.a(x)

    bad = [("custom_forward", (3,), Tangled()), ("lstm", (3,), nn.Sequential(nn.LSTM(3, 3))),
           ("avgpool_count_include_pad", (1, 4, 4), nn.Sequential(nn.AvgPool2d(2, padding=1))),
           ("leaky_relu_negative_slope", (3,), nn.Sequential(nn.LeakyReLU(-0.1))),
           ("features_mismatch", (3,), nn.Sequential(nn.Linear(4, 2))),
           ("reflect_padding", (1, 4, 4),
            nn.Sequential(nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect")))]
    fails = 0
    for name, shape, m in good:
        try:
            g, w = convert(m, shape)
            with tempfile.TemporaryDirectory() as d:
                save(m, os.path.join(d, "m.json"), shape)
                r = read_pkw(os.path.join(d, "m.pkw"))
            if list(r) != list(w) or any(not np.array_equal(r[k], w[k]) for k in w):
                raise ConvertError(".pkw round trip differs")
            print("PASS %s: %d nodes" % (name, len(g["nodes"])))
        except ConvertError as e:
            fails += 1
            print("FAIL %s: %s" % (name, e))
    for name, shape, m in bad:
        try:
            convert(m, shape)
            fails += 1
            print("FAIL %s: converted, should have been refused" % name)
        except ConvertError as e:
            print("PASS %s refused: %s" % (name, e))
    return fails


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--self-test"]:
        return 1 if self_test() else 0
    ap = argparse.ArgumentParser(description="PyTorch module -> Pock JSON graph + .pkw")
    ap.add_argument("module", help="FILE.py:FACTORY (a function or class returning the module)")
    ap.add_argument("out", help="OUT.json (weights go to OUT.pkw)")
    ap.add_argument("--input-shape", help="input shape without batch, e.g. 1,8,8")
    ap.add_argument("--name", help="graph name (default: the output's base name)")
    ap.add_argument("--training", help="the 'training' object as JSON text")
    ap.add_argument("--dtype", choices=["f32", "f64"], help="default: the parameters' dtype")
    ap.add_argument("--seed", type=int, help="torch.manual_seed before building the module")
    a = ap.parse_args(argv)
    try:
        import torch
        if a.seed is not None:
            torch.manual_seed(a.seed)
        m = _load_factory(a.module)()
        if a.dtype == "f64":
            m = m.double()
        shape = a.input_shape or getattr(m, "input_shape", None)
        if shape is None:
            raise ConvertError("no --input-shape and the module has no input_shape attribute")
        if isinstance(shape, str):
            shape = [int(v) for v in shape.split(",")]
        training = json.loads(a.training) if a.training else getattr(m, "training_spec", None)
        save(m, a.out, shape, a.name, training, a.dtype)
    except (ConvertError, ValueError, OSError) as e:
        print("torch2pock: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
