#!/usr/bin/env python3
"""graph_torch.py — runs a Pock JSON graph (docs/graph-format.md) in PyTorch: the reference
for graphs that are not nn.Sequential (residual nets, attention blocks), trained by torch's
autograd so Pock's compile-time backward is checked against it. Library only:

  g = json.load(open("resnet.json")); w = torch2pock.read_pkw("resnet.pkw")
  m = PockGraph(g, w, dtype=torch.float64)     # params are nn.Parameters, named as in g
  logits = m(x)                                # x: (N, features...) as the graph's input
  logits = m(ids, mask)                        # several inputs (version 2): in the order
                                               # of g["inputs"]; integer ones as int tensors
  loss = training_loss(g, logits, labels)      # the loss the graph's "training" object names

Ops: matmul, batch_matmul, add, sub, mul, div, relu, sigmoid, tanh, gelu (erf form),
silu, hardsigmoid, hardswish, relu6, leaky_relu, elu, clip, exp, log, sqrt, rsqrt, abs,
neg, reciprocal, erf, softmax, sum, mean, max, conv2d, max_pool2d, avg_pool2d, reshape, slice
(with slice_step), transpose, concat, pad, expand, where, masked_fill; broadcasting as
numpy. Attention family: log_softmax, sdpa, sdpa_masked (written with explicit matmuls:
torch 1.13 has no F.scaled_dot_product_attention), rope, global_avg_pool2d,
adaptive_avg_pool2d, gelu with approximate, pow, pow_scalar. Normalization: batch_norm,
layer_norm, rms_norm, group_norm. A graph using any other op raises NotImplementedError
(the fixtures do not use it).

Params with "role": "buffer" or "constant" are registered buffers (named_pock_buffers);
an integer one ("dtype": "i64"/"i32") keeps its dtype. batch_norm follows Pock's modes: in
train() a layer uses batch statistics and updates its running stats when its gamma or
beta requires grad, or always with bn_mode="train" (PyTorch's own model.train());
otherwise, and in eval(), it uses the running stats. A graph with several inputs takes
them in the order of its "inputs". A node's "outputs" (graph format version 2) name every
compute of the op in order: softmax's are its row max, its row sum of exp(x - max) (both
keepdim) and the result; other ops compute their result only here (a normalization's
saved stages are not modelled: naming them raises NotImplementedError).

Indexing and dropout: gather, embedding (an index outside [0, extent) reads 0 and gets
no gradient, Pock's rule), dropout (Pock's mask: hash(seed, step, flat index), docs/te.md,
bit for bit; a graph's dropout node names its data input only and reads the step's (seed,
step), given in `extra`: m(x, extra={"rng": torch.tensor([seed, step])}); without it, or
at a negative step, dropout passes everything through (evaluation).
"""
import math

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


# ---- attention, softmax family, pooling, activations ----

def _sdpa(q, k, v, mask, a):
    """softmax(Q K^T scale + mask) V, Pock's rules (pk_ops.h): causal keeps key j <= query i
    (top-left aligned, as is_causal); a (B, keys) mask is a padding mask; a row with no key
    left (every score -inf) gives 0, not NaN."""
    s = torch.matmul(q, k.transpose(-1, -2)) * a.get("scale", 1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        if mask.dim() == 2:  # (B, keys) -> (B, 1, ..., 1, keys)
            mask = mask.reshape(mask.shape[0], *([1] * (s.dim() - 2)), mask.shape[1])
        s = s + mask
    if a.get("causal"):
        keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    # the shift does not change the result, so it carries no gradient; the floor keeps a
    # fully masked row at exp(-inf) = 0 (L = 0 then, and P = 0 / max(L, 1) = 0)
    m = s.amax(dim=-1, keepdim=True).detach().clamp(min=torch.finfo(s.dtype).min)
    e = torch.exp(s - m)
    p = e / e.sum(dim=-1, keepdim=True).clamp(min=1.0)
    return torch.matmul(p, v)


def _rope(x, cos, sin):
    """LLaMA's rotate-half form: x cos + rotate_half(x) sin, tables (S, D/2) repeated twice."""
    h = x.shape[-1] // 2
    rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    return x * torch.cat((cos, cos), dim=-1) + rot * torch.cat((sin, sin), dim=-1)


def _attn_family(op, ins, a):
    """The ops of this family; None for the others."""
    if op == "log_softmax":
        return torch.log_softmax(ins[0], dim=a.get("axis", 0))
    if op in ("sdpa", "sdpa_masked"):
        return _sdpa(ins[0], ins[1], ins[2], ins[3] if op == "sdpa_masked" else None, a)
    if op == "rope":
        return _rope(ins[0], ins[1], ins[2])
    if op == "global_avg_pool2d":
        return F.adaptive_avg_pool2d(ins[0], 1)
    if op == "adaptive_avg_pool2d":
        return F.adaptive_avg_pool2d(ins[0], _pair(a["output_size"], 1))
    if op == "gelu":
        return F.gelu(ins[0], approximate=a.get("approximate", "none"))
    if op == "pow":
        return torch.pow(ins[0], ins[1])
    if op == "pow_scalar":
        return torch.pow(ins[0], a["exponent"])
    return None
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
    def __init__(self, graph, weights, dtype=torch.float64, bn_mode="auto"):
        super().__init__()
        self.graph = graph
        self.bn_mode = bn_mode
        self.params = nn.ParameterDict()
        self.names = {}  # Pock name -> ParameterDict key (which may not contain dots)
        self.buffer_names = {}  # buffers and constants: Pock name -> registered buffer name
        for p in graph["params"]:
            t = self._value(p, weights, dtype)
            key = p["name"].replace(".", "__")
            if p.get("role", "param") == "param":
                self.params[key] = nn.Parameter(t)
                self.names[p["name"]] = key
            else:
                self.register_buffer("buf__" + key, t)
                self.buffer_names[p["name"]] = "buf__" + key

    @staticmethod
    def _value(p, weights, dtype):
        value = p["init"] if "init" in p else weights[p["name"]]
        dt = {"i64": torch.int64, "i32": torch.int32}.get(p.get("dtype"), dtype)
        return torch.as_tensor(value, dtype=dt).reshape(p["shape"]).clone()

    def named_pock_params(self):
        return [(n, self.params[k]) for n, k in self.names.items()]

    def named_pock_buffers(self):
        return [(n, getattr(self, k)) for n, k in self.buffer_names.items()]

    def forward(self, *inputs, extra=None):
        if len(inputs) != len(self.graph["inputs"]):
            raise TypeError("graph_torch: the graph takes %d inputs, got %d"
                            % (len(self.graph["inputs"]), len(inputs)))
        env = {i["name"]: x for i, x in zip(self.graph["inputs"], inputs)}
        env.update(extra or {})  # further tensors by name: dropout's (seed, step)
        for n, k in self.names.items():
            env[n] = self.params[k]
        for n, k in self.buffer_names.items():
            env[n] = getattr(self, k)
        for node in self.graph["nodes"]:
            ins = [env[i] for i in node["inputs"]]
            if node["op"] == "dropout" and len(ins) == 1:  # the graph's (seed, step): "rng"
                ins.append(env.get("rng", torch.tensor([0, -1])))  # none given: step -1, off
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

    def _op(self, op, ins, a, batch):
        eps = a.get("eps", 1e-5)
        if op == "batch_norm":
            x, g, b, rm, rv = ins
            train = self.training and (self.bn_mode == "train" or g.requires_grad or
                                       b.requires_grad)
            return F.batch_norm(x, rm, rv, g, b, training=train,
                                momentum=a.get("momentum", 0.1), eps=eps)
        if op in ("layer_norm", "rms_norm"):
            k = a.get("normalized_ndim", 1)
            if op == "layer_norm":
                return F.layer_norm(ins[0], ins[0].shape[-k:], ins[1], ins[2], eps)
            dims = list(range(ins[0].dim() - k, ins[0].dim()))
            x = ins[0]
            return x * torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + eps) * ins[1]
        if op == "group_norm":
            return F.group_norm(ins[0], a.get("groups", 1), ins[1], ins[2], eps)
        return self._plain_op(op, ins, a, batch)

    @staticmethod
    def _stages(op, ins, a):
        """The computes of op's program before its result (pk_graph_name_outputs's order)."""
        if op == "softmax":
            ax = a.get("axis", 0)
            m = ins[0].amax(dim=ax, keepdim=True)
            return [m, torch.exp(ins[0] - m).sum(dim=ax, keepdim=True)]
        return []

    @staticmethod
    def _plain_op(op, ins, a, batch):
        y = _attn_family(op, ins, a)
        if y is not None:
            return y
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
                 "neg": torch.neg, "reciprocal": torch.reciprocal, "erf": torch.erf}
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
            x = x.narrow(a.get("slice_axis", 0), a.get("slice_start", 0), a["slice_len"])
            step = a.get("slice_step", 1)
            if step == 1:
                return x
            axis = a.get("slice_axis", 0) % x.dim()
            return x[(slice(None),) * axis + (slice(None, None, step),)]
        # shape and data movement
        if op == "transpose":
            return x.permute(a["perm"] if "perm" in a else list(range(x.dim()))[::-1])
        if op == "concat":
            return torch.cat(ins, dim=a.get("axis", 0))
        if op == "pad":  # Pock: (before, after) per dim from the first; F.pad: from the last
            pads = a.get("pads", [0] * (2 * x.dim()))
            flat = [p for d in reversed(range(x.dim())) for p in pads[2 * d:2 * d + 2]]
            return F.pad(x, flat, mode="constant", value=a.get("value", 0.0))
        if op == "expand":
            return x.expand([batch if isinstance(d, str) else d for d in a["shape"]])
        if op == "where":
            return torch.where(ins[0] != 0, ins[1], ins[2])
        if op == "masked_fill":
            return x.masked_fill(ins[1] != 0, a.get("value", 0.0))
        # indexing and dropout
        if op in ("gather", "embedding"):
            return _gather(x, ins[1], a.get("axis", 0) if op == "gather" else 0)
        if op == "dropout":
            return _dropout(x, ins[1], a.get("p", 0.0))
        raise NotImplementedError("graph_torch: op %r" % op)


# ---- the loss of the graph's "training" object (Pock adds it at compile time) ----
def training_loss(graph, out, target):
    """PyTorch's loss for the graph's training object: softmax_cross_entropy (default) is
    F.cross_entropy with integer labels — target (N,) for out (N, K), or (N, T) for
    out (N, T, K), a label per token — with the object's ignore_index (default: PyTorch's
    -100) and label_smoothing, mean over the labels that count; mse is F.mse_loss."""
    tr = graph.get("training", {})
    if tr.get("loss", "softmax_cross_entropy") == "mse":
        return F.mse_loss(out, target)
    k = out.shape[-1]
    return F.cross_entropy(out.reshape(-1, k), target.reshape(-1).long(),
                           ignore_index=tr.get("ignore_index", -100),
                           label_smoothing=tr.get("label_smoothing", 0.0))
