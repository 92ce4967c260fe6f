#!/usr/bin/env python3
"""graph_torch.py — runs a Pock JSON graph (docs/graph-format.md) in PyTorch: the reference
for graphs that are not nn.Sequential (residual nets, attention blocks), trained by torch's
autograd so Pock's compile-time backward is checked against it. Library only:

  g = json.load(open("resnet.json")); w = torch2pock.read_pkw("resnet.pkw")
  m = PockGraph(g, w, dtype=torch.float64)     # params are nn.Parameters, named as in g
  logits = m(x)                                # x: (N, features...) as the graph's input

Ops: matmul, batch_matmul, add, sub, mul, div, relu, sigmoid, tanh, gelu (erf form),
silu, hardsigmoid, hardswish, relu6, leaky_relu, elu, clip, exp, log, sqrt, rsqrt, abs,
neg, reciprocal, softmax, sum, mean, max, conv2d, reshape, slice; broadcasting as numpy. A graph using any
other op raises NotImplementedError (the fixtures do not use it).

Indexing and dropout: gather, embedding (an index outside [0, extent) reads 0 and gets
no gradient, Pock's rule), dropout (Pock's mask: hash(seed, step, flat index), docs/te.md,
bit for bit; its S input (seed, step) and integer ids come in `extra` inputs by name:
m(x, extra={"ids": ids, "rng": torch.tensor([seed, step])}).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def _pair(v, default):
    if v is None:
        return (default, default)
    return (v, v) if isinstance(v, int) else tuple(v)


def _pad4(v):
    """Pock's conv padding as [top, left, bottom, right]."""
    if v is None:
        return [0, 0, 0, 0]
    if isinstance(v, int):
        return [v] * 4
    if len(v) == 2:
        return [v[0], v[1], v[0], v[1]]
    return list(v)


# ---- indexing and dropout ----

_M64 = (1 << 64) - 1


def _i64(v):
    """A uint64 constant as the int64 with the same bits (torch has no uint64)."""
    v &= _M64
    return v - (1 << 64) if v >= 1 << 63 else v


def _srl(z, k):
    """Logical right shift of int64 bits (torch's >> is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix64(z):
    z = z + _i64(0x9E3779B97F4A7C15)  # int64 + and * wrap like uint64 on the same bits
    z = (z ^ _srl(z, 30)) * _i64(0xBF58476D1CE4E5B9)
    z = (z ^ _srl(z, 27)) * _i64(0x94D049BB133111EB)
    return z ^ _srl(z, 31)


def pock_hash(a, b, c):
    """docs/te.md's hash(a, b, c) on int64 tensors: an int64 in [0, 2^53)."""
    return _srl(_mix64(_mix64(_mix64(a) ^ b) ^ c), 11)


def _gather(x, idx, axis):
    """X with dim `axis` replaced by idx's dims; out-of-range indices read 0."""
    axis = axis % x.dim()
    idx = idx.long()
    ok = (idx >= 0) & (idx < x.shape[axis])
    flat = torch.where(ok, idx, torch.zeros_like(idx)).reshape(-1)
    y = x.index_select(axis, flat)
    shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    y = y.reshape(shape)
    mask = ok.reshape([1] * axis + list(idx.shape) + [1] * (x.dim() - axis - 1))
    return y * mask.to(y.dtype)


def _dropout(x, s, p):
    if p == 0 or int(s[1]) < 0:  # p = 0, or an evaluation step: the identity
        return x
    flat = torch.arange(x.numel(), dtype=torch.int64).reshape(x.shape)
    h = pock_hash(s[0].long(), s[1].long(), flat)
    keep = h >= int(p * 2.0 ** 53)
    return torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros_like(x))


class PockGraph(nn.Module):
    def __init__(self, graph, weights, dtype=torch.float64):
        super().__init__()
        self.graph = graph
        self.params = nn.ParameterDict()
        self.names = {}  # Pock name -> ParameterDict key (which may not contain dots)
        for p in graph["params"]:
            value = p["init"] if "init" in p else weights[p["name"]]
            t = torch.as_tensor(value, dtype=dtype).reshape(p["shape"]).clone()
            key = p["name"].replace(".", "__")
            self.params[key] = nn.Parameter(t)
            self.names[p["name"]] = key

    def named_pock_params(self):
        return [(n, self.params[k]) for n, k in self.names.items()]

    def forward(self, x, extra=None):
        env = {self.graph["inputs"][0]["name"]: x}
        env.update(extra or {})  # further inputs by name: integer ids, dropout's (seed, step)
        for n, k in self.names.items():
            env[n] = self.params[k]
        for node in self.graph["nodes"]:
            ins = [env[i] for i in node["inputs"]]
            env[node["output"]] = self._op(node["op"], ins, node.get("attrs", {}), x.shape[0])
        return env[self.graph["output"]]

    @staticmethod
    def _op(op, ins, a, batch):
        if op in ("matmul", "batch_matmul"):
            x, y = ins
            if a.get("trans_a"):
                x = x.transpose(-1, -2)
            if a.get("trans_b"):
                y = y.transpose(-1, -2)
            return torch.matmul(x, y)
        binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
        if op in binary:
            return binary[op](ins[0], ins[1])
        unary = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
                 "gelu": F.gelu, "silu": F.silu, "hardsigmoid": F.hardsigmoid,
                 "hardswish": F.hardswish, "relu6": F.relu6, "exp": torch.exp,
                 "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "abs": torch.abs,
                 "neg": torch.neg, "reciprocal": torch.reciprocal}
        if op in unary:
            return unary[op](ins[0])
        if op == "leaky_relu":  # omitted alpha: PyTorch's default, as in Pock
            return F.leaky_relu(ins[0], a.get("alpha", 0.01))
        if op == "elu":
            return F.elu(ins[0], a.get("alpha", 1.0))
        if op == "clip":
            return torch.clamp(ins[0], a["min"], a["max"])
        x = ins[0]
        if op == "softmax":
            return torch.softmax(x, dim=a.get("axis", 0))
        if op in ("sum", "mean", "max"):
            axes = a.get("axes", list(range(x.dim())))
            axes = [axes] if isinstance(axes, int) else (axes or list(range(x.dim())))
            keep = bool(a.get("keepdims", False))
            if op == "sum":
                return x.sum(dim=axes, keepdim=keep)
            if op == "mean":
                return x.mean(dim=axes, keepdim=keep)
            return x.amax(dim=axes, keepdim=keep)
        if op == "conv2d":
            t, l, b, r = _pad4(a.get("pad"))
            return F.conv2d(F.pad(x, (l, r, t, b)), ins[1], stride=_pair(a.get("stride"), 1),
                            dilation=_pair(a.get("dilation"), 1), groups=a.get("groups", 1))
        if op == "reshape":
            shape = [batch if isinstance(d, str) else d for d in a["shape"]]
            return x.reshape(shape)
        if op == "slice":
            return x.narrow(a.get("slice_axis", 0), a.get("slice_start", 0), a["slice_len"])
        # indexing and dropout
        if op in ("gather", "embedding"):
            return _gather(x, ins[1], a.get("axis", 0) if op == "gather" else 0)
        if op == "dropout":
            return _dropout(x, ins[1], a.get("p", 0.0))
        raise NotImplementedError("graph_torch: op %r" % op)
