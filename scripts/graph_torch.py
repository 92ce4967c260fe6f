#!/usr/bin/env python3
"""graph_torch.py — runs a Pock JSON graph (docs/graph-format.md) in PyTorch: the reference
for graphs that are not nn.Sequential (residual nets, attention blocks), trained by torch's
autograd so Pock's compile-time backward is checked against it. Library only:

  g = json.load(open("resnet.json")); w = torch2pock.read_pkw("resnet.pkw")
  m = PockGraph(g, w, dtype=torch.float64)     # params are nn.Parameters, named as in g
  logits = m(x)                                # x: (N, features...) as the graph's input
  logits = m(ids, mask)                        # several inputs (version 2): in the order
                                               # of g["inputs"]; integer ones as int tensors

Ops: matmul, batch_matmul, add, sub, mul, div, relu, sigmoid, tanh, gelu (erf form),
silu, hardsigmoid, hardswish, relu6, leaky_relu, elu, clip, exp, log, sqrt, rsqrt, abs,
neg, reciprocal, softmax, sum, mean, max, conv2d, max_pool2d, avg_pool2d, reshape, slice; broadcasting as numpy. A graph using any
other op raises NotImplementedError (the fixtures do not use it). A node's "outputs" (graph
format version 2) name every compute of the op in order: softmax's are its row max, its row
sum of exp(x - max) (both keepdim) and the result; other ops compute their result only.
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


class PockGraph(nn.Module):
    """params are nn.Parameters; buffers (running statistics) and constants are torch
    buffers, all initialized from the graph's inline "init" or from `weights`."""

    def __init__(self, graph, weights, dtype=torch.float64):
        super().__init__()
        self.graph = graph
        self.params = nn.ParameterDict()
        self.names = {}  # Pock name -> ParameterDict key (which may not contain dots)
        self.held = {}   # buffer/constant Pock name -> buffer attribute
        for p in graph["params"]:
            t = self._value(p, weights, dtype)
            key = p["name"].replace(".", "__")
            self.params[key] = nn.Parameter(t)
            self.names[p["name"]] = key
        for kind in ("buffers", "constants"):
            for i, p in enumerate(graph.get(kind, [])):
                attr = "_%s_%d" % (kind, i)
                self.register_buffer(attr, self._value(p, weights, dtype))
                self.held[p["name"]] = attr

    @staticmethod
    def _value(p, weights, dtype):
        value = p["init"] if "init" in p else weights[p["name"]]
        dt = {"i64": torch.int64, "i32": torch.int32}.get(p.get("dtype"), dtype)
        return torch.as_tensor(value, dtype=dt).reshape(p["shape"]).clone()

    def named_pock_params(self):
        return [(n, self.params[k]) for n, k in self.names.items()]

    def forward(self, *inputs):
        if len(inputs) != len(self.graph["inputs"]):
            raise TypeError("graph_torch: the graph takes %d inputs, got %d"
                            % (len(self.graph["inputs"]), len(inputs)))
        env = {i["name"]: x for i, x in zip(self.graph["inputs"], inputs)}
        for n, k in self.names.items():
            env[n] = self.params[k]
        for n, attr in self.held.items():
            env[n] = getattr(self, attr)
        for node in self.graph["nodes"]:
            ins = [env[i] for i in node["inputs"]]
            attrs = node.get("attrs", {})
            y = self._op(node["op"], ins, attrs, inputs[0].shape[0])
            if "outputs" in node:  # graph format version 2: every compute, the result last
                outs = self._stages(node["op"], ins, attrs) + [y]
                if len(outs) != len(node["outputs"]):
                    raise NotImplementedError("graph_torch: %d outputs of op %r" % (
                        len(node["outputs"]), node["op"]))
                env.update(zip(node["outputs"], outs))
            else:
                env[node["output"]] = y
        return env[self.graph["output"]]

    @staticmethod
    def _stages(op, ins, a):
        """The computes of op's program before its result (pk_graph_name_outputs's order)."""
        if op == "softmax":
            ax = a.get("axis", 0)
            m = ins[0].amax(dim=ax, keepdim=True)
            return [m, torch.exp(ins[0] - m).sum(dim=ax, keepdim=True)]
        return []

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
        if op in ("max_pool2d", "avg_pool2d"):
            t, l, b, r = _pad4(a.get("pad"))
            k, st = _pair(a["kernel"], 1), _pair(a.get("stride"), 1)
            if op == "max_pool2d":  # padding never wins a max
                xp = F.pad(x, (l, r, t, b), value=-float("inf"))
                return F.max_pool2d(xp, k, st, 0, _pair(a.get("dilation"), 1))
            # count_include_pad=False over asymmetric padding: sum / in-bounds count
            ones = F.pad(torch.ones_like(x[:1, :1]), (l, r, t, b))
            xs = F.avg_pool2d(F.pad(x, (l, r, t, b)), k, st, 0)
            return xs / F.avg_pool2d(ones, k, st, 0)
        if op == "reshape":
            shape = [batch if isinstance(d, str) else d for d in a["shape"]]
            return x.reshape(shape)
        if op == "slice":
            return x.narrow(a.get("slice_axis", 0), a.get("slice_start", 0), a["slice_len"])
        raise NotImplementedError("graph_torch: op %r" % op)
