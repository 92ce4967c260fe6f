#!/usr/bin/env python3
"""torch2pock.py — writes a PyTorch nn.Module as Pock's JSON graph with its weights in a .pkw
side file (docs/graph-format.md). Library + CLI; runs where torch does.

The module is traced with torch.fx, so any forward that fx can trace converts: residual
adds, attention written with matmul/softmax, x.flatten(1), F.gelu, torch.cat, slicing.
torch.nn layers (and any module named RMSNorm with `weight` and `eps`) become one Pock op
each; functions and tensor methods map one to one. The first call that has no Pock
equivalent stops the conversion with one message naming the module or call. The result is
checked: the module (eval mode) and the graph run by scripts/graph_torch.py must agree on
an example batch.

CLI:  torch2pock.py FILE.py:FACTORY OUT.json [--input-shape 1,8,8] [--name NAME]
                    [--training JSON] [--dtype f32|f64] [--seed S]
      torch2pock.py --self-test      converts sample modules, checks each against PyTorch
  FACTORY is a function or class in FILE.py returning the module; the example batch comes
  from the module's `example_inputs(batch)` method, else a random float batch of the shape
  --input-shape or the module's `input_shape` attribute gives (without the batch dim).
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
# .pkw dtype codes (pkrt_dtype) read_pkw understands: a saved model may hold integer
# constants (a BERT export's shape and index tensors) beside its float weights
PKW_NP = {1: np.float32, 2: np.float64, 3: np.int32, 4: np.int64}


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
    """Accumulates the graph's inputs, params (buffers and constants are params with a
    "role") and nodes; `tensors` holds the values that go into the .pkw file."""

    def __init__(self, dtype):
        self.inputs, self.nodes, self.params = [], [], []
        self.tensors = {}
        self.dtype = dtype

    def input(self, name, shape, dtype):
        e = {"name": name, "shape": shape}
        if dtype not in ("f32", "f64"):
            e["dtype"] = dtype
        self.inputs.append(e)

    def _value(self, name, value, dtype=None):
        a = _to_numpy(value)
        if dtype is None or dtype in ("f32", "f64"):
            a = a.astype(self.dtype)
        self.tensors[name] = a
        return a

    def param(self, name, value):
        a = self._value(name, value)
        self.params.append({"name": name, "shape": list(a.shape)})

    def buffer(self, name, value):
        """State the step updates but does not train (batch norm's running statistics)."""
        a = self._value(name, value)
        self.params.append({"name": name, "shape": list(a.shape), "role": "buffer"})

    def constant(self, name, value, dtype):
        """A tensor no step changes (a causal mask, rotary tables, a scalar operand)."""
        a = self._value(name, np.asarray(value) if isinstance(value, list) else value, dtype)
        e = {"name": name, "shape": list(a.shape) or [1], "role": "constant"}
        if dtype not in ("f32", "f64"):
            e["dtype"] = dtype
        self.params.append(e)

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


class _Val:
    """What an fx node became on Pock's side: a tensor (its Pock name, its shape as traced,
    batch included, its dtype, whether dim 0 is the batch), or a plain Python value (a size,
    a slice). A transpose is kept pending (`pending` = (source, perm)) until a consumer
    needs it, so that a matmul can fold it into trans_a/trans_b instead of copying."""

    def __init__(self, name=None, shape=None, dtype=None, batched=False, py=None,
                 pending=None):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.batched, self.py, self.pending = batched, py, pending

    @property
    def is_tensor(self):
        return self.name is not None or self.pending is not None


def _np_dtype(t):
    import torch
    return {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64",
            torch.int32: "i32"}.get(t.dtype)


class _FxConverter:
    """Converts a torch.fx trace node by node. Every handler gets the node's concrete value
    (from running the trace on example inputs), so shapes never need symbolic reasoning:
    a reshape writes the shape it produced, with the batch dim as "N"."""

    def __init__(self, module, b, example_inputs, input_name="x"):
        import torch
        import torch.fx

        class Tracer(torch.fx.Tracer):
            # RMSNorm is one Pock op; torch 1.13 has no nn.RMSNorm, so any module of that
            # name with `weight` and `eps` is taken as one (else it is traced through).
            def is_leaf_module(self, m, qualname):
                if type(m).__name__ == "RMSNorm" and hasattr(m, "eps"):
                    return True
                return super().is_leaf_module(m, qualname)

        self.torch, self.module, self.b = torch, module, b
        try:
            graph = Tracer().trace(module)
        except Exception as e:  # noqa: BLE001 - torch.fx raises many kinds
            raise ConvertError("torch.fx cannot trace the module: %s" % e) from e
        self.gm = torch.fx.GraphModule(module, graph)
        values = {}

        class Recorder(torch.fx.Interpreter):
            def run_node(self, n):
                v = super().run_node(n)
                values[n] = v
                return v

        try:
            with torch.no_grad():
                Recorder(self.gm).run(*example_inputs)
        except RuntimeError as e:
            raise ConvertError("the module fails on an example batch %s: %s"
                               % ([tuple(x.shape) for x in example_inputs],
                                  str(e).splitlines()[0])) from e
        self.values, self.batch = values, example_inputs[0].shape[0]
        self.input_name, self.ninputs = input_name, len(example_inputs)
        self.vals, self.attrs, self.count = {}, {}, 0

    # ---- helpers ----
    def fail(self, n, what):
        where = n.target if n.op == "call_module" else n.name
        raise ConvertError("%s: %s is not supported" % (where, what))

    def unique(self, base):
        self.count += 1
        return "%s.%d" % (base, self.count)

    def const(self, value, like):
        """A Python number as a (1,) constant tensor of like's dtype."""
        name = self.unique("const")
        self.b.constant(name, [float(value)], like.dtype)
        return _Val(name, [1], like.dtype)

    def tensor(self, v):
        """v materialized: a pending transpose becomes a transpose node."""
        if v.pending is not None and v.name is None:
            src, perm = v.pending
            nm = self.unique("transpose")
            v.name = self.b.node(nm, "transpose", [self.tensor(src).name], nm + ".out",
                                 {"perm": perm})
        return v

    def concrete(self, a):
        """A Python argument (an index: tuples, slices) with its fx nodes' traced values."""
        import torch.fx
        if isinstance(a, torch.fx.Node):
            return self.values[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.concrete(x) for x in a)
        if isinstance(a, slice):
            return slice(self.concrete(a.start), self.concrete(a.stop), self.concrete(a.step))
        return a

    def arg(self, n, a):
        import torch.fx
        if isinstance(a, torch.fx.Node):
            return self.vals[a]
        if isinstance(a, (list, tuple)):
            return [self.arg(n, x) for x in a]
        return _Val(py=a)

    def out(self, n, name, batched):
        """The _Val of node n's result, now Pock tensor `name`."""
        t = self.values[n]
        return _Val(name, list(t.shape), _np_dtype(t), batched)

    def emit(self, n, op, inputs, attrs=None, batched=None, name=None, out=None):
        ins = [self.tensor(v) for v in inputs]
        nm = name or n.name
        y = self.b.node(nm, op, [v.name for v in ins], out or nm + ".out", attrs)
        if batched is None:
            batched = any(v.batched for v in ins)
        return self.out(n, y, batched)

    def axis(self, v, a):
        r = len(v.shape)
        if not -r <= a < r:
            raise ConvertError("axis %d of a rank-%d tensor" % (a, r))
        return a % r

    def shape_attr(self, n, batched):
        """A reshape's target: its traced result shape, dim 0 written "N" when it is the
        batch (Pock fixes the batch at compile time)."""
        shape = list(self.values[n].shape)
        if batched:
            if shape[0] != self.batch:
                self.fail(n, "a reshape that moves the batch dim")
            shape[0] = "N"
        return shape

    # ---- the walk ----
    def run(self):
        out = None
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                t = self.values[n]
                dt = _np_dtype(t)
                if dt is None:
                    self.fail(n, "an input of dtype %s" % t.dtype)
                # one input: the conventional name; several: forward's argument names
                name = self.input_name if self.ninputs == 1 else n.target
                self.b.input(name, ["N"] + list(t.shape[1:]), dt)
                self.vals[n] = _Val(name, list(t.shape), dt, True)
            elif n.op == "get_attr":
                self.vals[n] = self.get_attr(n)
            elif n.op == "call_module":
                self.vals[n] = self.call_module(n)
            elif n.op in ("call_function", "call_method"):
                self.vals[n] = self.call(n)
            elif n.op == "output":
                out = self.arg(n, n.args[0])
        if not isinstance(out, _Val) or not out.is_tensor:
            raise ConvertError("the module must return one tensor")
        return self.tensor(out).name

    def get_attr(self, n):
        import torch
        if n.target in self.attrs:  # fx reads an attribute once per use: one tensor
            return self.attrs[n.target]
        self.attrs[n.target] = v = self._get_attr(n)
        return v

    def _get_attr(self, n):
        import torch
        t = self.values[n]
        if not isinstance(t, torch.Tensor):
            return _Val(py=t)
        if isinstance(t, torch.nn.Parameter):
            self.b.param(n.target, t)
        else:
            if _np_dtype(t) is None:
                self.fail(n, "a buffer of dtype %s" % t.dtype)
            self.b.constant(n.target, t, _np_dtype(t))
        return _Val(n.target, list(t.shape), _np_dtype(t), False)

    def call_module(self, n):
        m = self.gm.get_submodule(n.target)
        kind = type(m).__name__
        args = [self.arg(n, a) for a in n.args]
        if n.kwargs or len(args) != 1 or not args[0].is_tensor:
            self.fail(n, "%s called with %d arguments" % (kind, len(n.args) + len(n.kwargs)))
        x, name = args[0], n.target
        handler = getattr(self, "mod_" + kind, None)
        if handler is None:
            self.fail(n, "module type %s" % kind)
        return handler(n, m, x, name)

    def call(self, n):
        fn = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
        args = [self.arg(n, a) for a in n.args]
        kwargs = {k: self.arg(n, v) for k, v in n.kwargs.items()}
        # Python-level arithmetic on sizes (x.shape[0] // 2): evaluated already.
        flat = [x for a in args + list(kwargs.values())
                for x in (a if isinstance(a, list) else [a])]
        tensors = [a for a in flat if isinstance(a, _Val) and a.is_tensor]
        if fn in ("getattr", "size", "dim") or (not tensors and fn != "getitem"):
            return _Val(py=self.values[n])
        if fn == "getitem" and not args[0].is_tensor:
            return _Val(py=self.values[n])
        handler = getattr(self, "fn_" + fn, None)
        if handler is None:
            self.fail(n, "%s %s" % ("method" if n.op == "call_method" else "function", fn))
        return handler(n, args, kwargs)

    # ---- modules ----
    def mod_Linear(self, n, m, x, name):
        self.b.param(name + ".weight", m.weight)
        w = _Val(name + ".weight", list(m.weight.shape), x.dtype)
        y = self.emit(n, "matmul" if len(x.shape) == 2 else "batch_matmul", [x, w],
                      {"trans_b": True}, name=name, out=name + (".mm" if m.bias is not None
                                                                else ".out"))
        if m.bias is None:
            return y
        self.b.param(name + ".bias", m.bias)
        bias = _Val(name + ".bias", [m.out_features], x.dtype)
        return self.emit(n, "add", [y, bias], name=name + ".add", out=name + ".out")

    def mod_Conv2d(self, n, m, x, name):
        if m.padding_mode != "zeros":
            self.fail(n, "Conv2d padding_mode %r (only 'zeros')" % m.padding_mode)
        k, s, d = _pair(m.kernel_size), _pair(m.stride), _pair(m.dilation)
        self.b.param(name + ".weight", m.weight)
        attrs = {"stride": list(s), "dilation": list(d), "pad": _spatial_pad(m, k, d)}
        if m.groups != 1:
            attrs["groups"] = m.groups
        w = _Val(name + ".weight", list(m.weight.shape), x.dtype)
        y = self.emit(n, "conv2d", [x, w], attrs, name=name,
                      out=name + (".conv" if m.bias is not None else ".out"))
        if m.bias is None:
            return y
        self.b.param(name + ".bias", _to_numpy(m.bias).reshape(-1, 1, 1))
        bias = _Val(name + ".bias", [m.out_channels, 1, 1], x.dtype)
        return self.emit(n, "add", [y, bias], name=name + ".add", out=name + ".out")

    def _norm_params(self, name, m, names):
        out = []
        for p in names:
            t = getattr(m, p)
            if p.startswith("running"):
                self.b.buffer(name + "." + p, t)
            else:
                self.b.param(name + "." + p, t)
            out.append(_Val(name + "." + p, list(t.shape), None))
        return out

    def mod_BatchNorm2d(self, n, m, x, name):
        if not m.affine or not m.track_running_stats or m.momentum is None:
            self.fail(n, "BatchNorm without affine, running stats or momentum")
        ps = self._norm_params(name, m, ["weight", "bias", "running_mean", "running_var"])
        return self.emit(n, "batch_norm", [x] + ps, {"eps": m.eps, "momentum": m.momentum},
                         name=name)

    mod_BatchNorm1d = mod_BatchNorm2d

    def mod_LayerNorm(self, n, m, x, name):
        if not m.elementwise_affine or len(m.normalized_shape) != 1:
            self.fail(n, "LayerNorm over more than the last dim or without affine")
        ps = self._norm_params(name, m, ["weight", "bias"])
        return self.emit(n, "layer_norm", [x] + ps, {"eps": m.eps}, name=name)

    def mod_RMSNorm(self, n, m, x, name):
        ps = self._norm_params(name, m, ["weight"])
        return self.emit(n, "rms_norm", [x] + ps, {"eps": float(m.eps)}, name=name)

    def mod_Embedding(self, n, m, x, name):
        if m.padding_idx is not None or m.max_norm is not None or m.sparse:
            self.fail(n, "Embedding with padding_idx, max_norm or sparse")
        self.b.param(name + ".weight", m.weight)
        w = _Val(name + ".weight", list(m.weight.shape), None)
        return self.emit(n, "embedding", [w, x], batched=x.batched, name=name)

    def _unary(self, n, x, name, op, attrs=None):
        return self.emit(n, op, [x], attrs, name=name)

    def mod_ReLU(self, n, m, x, name): return self._unary(n, x, name, "relu")
    def mod_Sigmoid(self, n, m, x, name): return self._unary(n, x, name, "sigmoid")
    def mod_Tanh(self, n, m, x, name): return self._unary(n, x, name, "tanh")
    def mod_SiLU(self, n, m, x, name): return self._unary(n, x, name, "silu")
    def mod_Hardsigmoid(self, n, m, x, name): return self._unary(n, x, name, "hardsigmoid")
    def mod_Hardswish(self, n, m, x, name): return self._unary(n, x, name, "hardswish")
    def mod_ReLU6(self, n, m, x, name): return self._unary(n, x, name, "relu6")
    def mod_Identity(self, n, m, x, name): return x

    def mod_GELU(self, n, m, x, name):
        return self._gelu(n, x, name, getattr(m, "approximate", "none"))

    def _gelu(self, n, x, name, approximate):
        if approximate == "none":
            return self._unary(n, x, name, "gelu")
        if approximate == "tanh":
            return self._unary(n, x, name, "gelu", {"approximate": "tanh"})
        self.fail(n, "GELU(approximate=%r)" % approximate)

    def _alpha(self, n, x, name, op, alpha):
        if alpha == 0:  # both are relu then, gradient at 0 included
            return self._unary(n, x, name, "relu")
        if not alpha > 0:
            self.fail(n, "%s with a negative slope/alpha (Pock's alpha is > 0)" % op)
        return self._unary(n, x, name, op, {"alpha": float(alpha)})

    def mod_LeakyReLU(self, n, m, x, name):
        return self._alpha(n, x, name, "leaky_relu", m.negative_slope)

    def mod_ELU(self, n, m, x, name): return self._alpha(n, x, name, "elu", m.alpha)

    def mod_Dropout(self, n, m, x, name):
        return x if m.p == 0 else self._unary(n, x, name, "dropout", {"p": float(m.p)})

    def mod_Softmax(self, n, m, x, name):
        return self._unary(n, x, name, "softmax", {"axis": self.axis(x, m.dim)})

    def _pool(self, n, m, x, name, op):
        if m.ceil_mode:
            self.fail(n, "%s with ceil_mode=True" % type(m).__name__)
        k = _pair(m.kernel_size)
        s = _pair(m.stride if m.stride is not None else m.kernel_size)
        ph, pw = _pair(m.padding)
        attrs = {"kernel": list(k), "stride": list(s), "pad": [ph, pw, ph, pw]}
        if op == "max_pool2d":
            if m.return_indices:
                self.fail(n, "MaxPool2d with return_indices=True")
            attrs["dilation"] = list(_pair(m.dilation))
        elif m.divisor_override is not None or ((ph or pw) and m.count_include_pad):
            # Pock divides by the in-bounds count (count_include_pad=False).
            self.fail(n, "AvgPool2d with divisor_override, or with padding and "
                         "count_include_pad=True (Pock divides by the in-bounds count)")
        return self._unary(n, x, name, op, attrs)

    def mod_MaxPool2d(self, n, m, x, name): return self._pool(n, m, x, name, "max_pool2d")
    def mod_AvgPool2d(self, n, m, x, name): return self._pool(n, m, x, name, "avg_pool2d")

    def _flattened_only(self, n):
        """Whether n's one reader flattens it to (N, C): then a global pool need not keep
        its 1x1 dims and the flatten is free."""
        users = list(n.users)
        if len(users) != 1:
            return False
        u = users[0]
        t = self.values.get(u)
        return (u.op == "call_module" and type(self.gm.get_submodule(u.target)).__name__ ==
                "Flatten" or u.op in ("call_function", "call_method") and
                getattr(u.target, "__name__", u.target) in ("flatten", "reshape", "view")) \
            and hasattr(t, "shape") and len(t.shape) == 2

    def mod_AdaptiveAvgPool2d(self, n, m, x, name):
        if _pair(m.output_size) == (1, 1):
            if self._flattened_only(n):
                y = self._unary(n, x, name, "mean", {"axes": [2, 3], "keepdims": False})
                y.shape = y.shape[:2]
                return y
            return self._unary(n, x, name, "mean", {"axes": [2, 3], "keepdims": True})
        return self._unary(n, x, name, "adaptive_avg_pool2d",
                           {"output_size": list(_pair(m.output_size))})

    def mod_Flatten(self, n, m, x, name):
        return self.fn_flatten(n, [x, _Val(py=m.start_dim), _Val(py=m.end_dim)], {})

    # ---- functions and methods ----
    def _binary(self, n, args, op):
        a, c = args[0], args[1]
        if not a.is_tensor:
            a = self.const(a.py, c)
        if not c.is_tensor:
            c = self.const(c.py, a)
        return self.emit(n, op, [a, c])

    def fn_add(self, n, args, kw): return self._binary(n, args, "add")
    def fn_sub(self, n, args, kw): return self._binary(n, args, "sub")
    def fn_mul(self, n, args, kw): return self._binary(n, args, "mul")
    def fn_truediv(self, n, args, kw): return self._binary(n, args, "div")
    fn_div = fn_truediv
    def fn_neg(self, n, args, kw): return self.emit(n, "neg", args[:1])
    def fn_relu(self, n, args, kw): return self.emit(n, "relu", args[:1])
    def fn_silu(self, n, args, kw): return self.emit(n, "silu", args[:1])
    def fn_sigmoid(self, n, args, kw): return self.emit(n, "sigmoid", args[:1])
    def fn_tanh(self, n, args, kw): return self.emit(n, "tanh", args[:1])
    def fn_exp(self, n, args, kw): return self.emit(n, "exp", args[:1])
    def fn_rsqrt(self, n, args, kw): return self.emit(n, "rsqrt", args[:1])
    def fn_sqrt(self, n, args, kw): return self.emit(n, "sqrt", args[:1])
    def fn_contiguous(self, n, args, kw): return args[0]

    def fn_gelu(self, n, args, kw):
        return self._gelu(n, args[0], n.name, kw.get("approximate", _Val(py="none")).py)

    def _dim(self, n, args, kw, pos, default=None):
        v = kw.get("dim", args[pos] if len(args) > pos else _Val(py=default))
        if v.py is None:
            self.fail(n, "a call without dim")
        return self.axis(args[0], v.py)

    def fn_dropout(self, n, args, kw):
        p = kw.get("p", args[1] if len(args) > 1 else _Val(py=0.5)).py
        training = kw.get("training", args[2] if len(args) > 2 else _Val(py=True)).py
        if not training or p == 0:  # F.dropout(x, p, self.training) traced in eval mode
            return args[0]
        return self.emit(n, "dropout", args[:1], {"p": float(p)})

    def fn_softmax(self, n, args, kw):
        return self.emit(n, "softmax", args[:1], {"axis": self._dim(n, args, kw, 1)})

    def fn_log_softmax(self, n, args, kw):
        return self.emit(n, "log_softmax", args[:1], {"axis": self._dim(n, args, kw, 1)})

    def fn_matmul(self, n, args, kw):
        a, c, attrs = args[0], args[1], {}
        for key, v in (("trans_a", a), ("trans_b", c)):
            if v.pending is not None and v.name is None:
                src, perm = v.pending
                r = len(perm)
                if r >= 2 and perm == list(range(r - 2)) + [r - 1, r - 2]:
                    attrs[key] = True
                    if key == "trans_a":
                        a = src
                    else:
                        c = src
        op = "matmul" if len(a.shape) == 2 and len(c.shape) == 2 else "batch_matmul"
        return self.emit(n, op, [a, c], attrs or None)

    fn_bmm = fn_matmul

    def _permute(self, n, x, perm):
        perm = [self.axis(x, p) for p in perm]
        if x.batched and perm[0] != 0:
            self.fail(n, "a transpose that moves the batch dim")
        t = self.values[n]
        return _Val(None, list(t.shape), x.dtype, x.batched, pending=(x, perm))

    def fn_transpose(self, n, args, kw):
        x, d0, d1 = args[0], self.axis(args[0], args[1].py), self.axis(args[0], args[2].py)
        perm = list(range(len(x.shape)))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self._permute(n, x, perm)

    def fn_permute(self, n, args, kw):
        dims = args[1].py if len(args) == 2 and isinstance(args[1].py, (list, tuple)) else \
            [a.py for a in args[1:]]
        return self._permute(n, args[0], list(dims))

    def fn_t(self, n, args, kw): return self._permute(n, args[0], [1, 0])

    def _reshape(self, n, x):
        shape = self.shape_attr(n, x.batched)
        if list(self.values[n].shape) == list(x.shape):
            return x
        return self.emit(n, "reshape", [x], {"shape": shape})

    def fn_reshape(self, n, args, kw): return self._reshape(n, args[0])
    fn_view = fn_reshape
    fn_squeeze = fn_reshape
    fn_unsqueeze = fn_reshape

    def fn_flatten(self, n, args, kw):
        return self._reshape(n, args[0])

    def _reduce(self, n, args, kw, op):
        x = args[0]
        dim = kw.get("dim", args[1] if len(args) > 1 else _Val(py=None)).py
        keep = kw.get("keepdim", args[2] if len(args) > 2 else _Val(py=False)).py
        axes = [] if dim is None else [self.axis(x, d) for d in
                                       (dim if isinstance(dim, (list, tuple)) else [dim])]
        if x.batched and (not axes or 0 in axes):
            self.fail(n, "a %s over the batch dim" % op)
        return self.emit(n, op, [x], {"axes": axes, "keepdims": bool(keep)},
                         batched=x.batched)

    def fn_mean(self, n, args, kw): return self._reduce(n, args, kw, "mean")
    def fn_sum(self, n, args, kw): return self._reduce(n, args, kw, "sum")

    def fn_pow(self, n, args, kw):
        if args[1].py == 2:  # x ** 2 = x * x exactly, gradient included
            return self.emit(n, "mul", [args[0], args[0]])
        if args[1].is_tensor:
            return self.emit(n, "pow", args[:2])
        return self.emit(n, "pow_scalar", args[:1], {"exponent": float(args[1].py)})

    def fn_cat(self, n, args, kw):
        xs = args[0]
        dim = kw.get("dim", args[1] if len(args) > 1 else _Val(py=0)).py
        return self.emit(n, "concat", xs, {"axis": self.axis(xs[0], dim)})

    def fn_getitem(self, n, args, kw):
        """x[...]: slices (step 1 or more) and integer indices on any dim but the batch."""
        x, idx = args[0], self.concrete(n.args[1])
        idx = idx if isinstance(idx, tuple) else (idx,)
        r = len(x.shape)
        if sum(i is Ellipsis for i in idx) > 1 or any(i is None for i in idx):
            self.fail(n, "indexing with None or two ellipses")
        if Ellipsis in idx:
            k = idx.index(Ellipsis)
            idx = idx[:k] + (slice(None),) * (r - len(idx) + 1) + idx[k + 1:]
        idx = idx + (slice(None),) * (r - len(idx))
        y, drop = x, False
        for axis, i in enumerate(idx):
            if isinstance(i, int):
                i, drop = slice(i % x.shape[axis], i % x.shape[axis] + 1), True
            if not isinstance(i, slice):
                self.fail(n, "indexing with %r" % (i,))
            start, stop, step = i.indices(x.shape[axis])
            ln = len(range(start, stop, step))
            if ln == x.shape[axis]:
                continue
            if axis == 0 and x.batched:
                self.fail(n, "slicing the batch dim")
            attrs = {"slice_axis": axis, "slice_start": start, "slice_len": ln}
            if step != 1:
                attrs["slice_step"] = step
            y = self.emit(n, "slice", [y], attrs, name=self.unique(n.name))
        if drop:
            y = self.emit(n, "reshape", [y], {"shape": self.shape_attr(n, x.batched)},
                          name=self.unique(n.name))
        y.shape = list(self.values[n].shape)
        return y


def convert(module, input_shape=None, name="model", training=None, weights_file=None,
            dtype=None, verify=True, example_inputs=None, input_name="x"):
    """Returns (graph dict, {name: ndarray} for the .pkw). The module is traced by torch.fx
    on example inputs (default: the module's `example_inputs(batch)` if it has one, else a
    random float batch of `input_shape`, which excludes the batch dim). dtype: "f32"/"f64",
    default from the module's parameters. verify: run the module (eval mode) and the
    converted graph (scripts/graph_torch.py) on the example batch and require the same
    output."""
    import torch
    if dtype is None:
        pdt = {p.dtype for p in module.parameters()}
        if len(pdt) > 1:
            raise ConvertError("parameters have mixed dtypes %s" % sorted(map(str, pdt)))
        dtype = "f64" if pdt == {torch.float64} else "f32"
        if pdt and pdt not in ({torch.float64}, {torch.float32}):
            raise ConvertError("parameter dtype %s (only float32/float64)" % pdt.pop())
    if dtype not in ("f32", "f64"):
        raise ConvertError("dtype %r (only f32 or f64)" % dtype)
    tdt = torch.float64 if dtype == "f64" else torch.float32
    if example_inputs is None:
        if hasattr(module, "example_inputs"):
            example_inputs = tuple(module.example_inputs(3))
        elif input_shape is None:
            raise ConvertError("no input shape and the module has no example_inputs")
        else:
            gen = torch.Generator().manual_seed(1234)
            example_inputs = (torch.randn([3] + list(input_shape), generator=gen, dtype=tdt),)
    example_inputs = tuple(x.to(tdt) if x.is_floating_point() else x for x in example_inputs)
    b = _Builder(np.float32 if dtype == "f32" else np.float64)
    was_training = module.training
    module.eval()
    try:
        out = _FxConverter(module, b, example_inputs, input_name).run()
        if out in [i["name"] for i in b.inputs]:
            raise ConvertError("the module computes nothing")
        # An integer input's "dtype" is a key of graph format version 2 (a version-1 file
        # that used it would be refused).
        v2 = any("dtype" in i or "batch" in i for i in b.inputs)
        g = {"format": "pock-graph", "version": 2 if v2 else 1, "name": name, "dtype": dtype}
        if weights_file:
            g["weights_file"] = weights_file
        g["inputs"] = b.inputs
        g["params"] = b.params
        g["nodes"] = b.nodes
        g["output"] = out
        if training:
            g["training"] = training
        if verify:
            _verify(module, g, b.tensors, example_inputs)
    finally:
        module.train(was_training)
    return g, b.tensors


def _verify(module, g, tensors, example_inputs):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import graph_torch
    tdt = torch.float64 if g["dtype"] == "f64" else torch.float32
    with torch.no_grad():
        want = module(*example_inputs).to(tdt)
        try:
            got = graph_torch.PockGraph(g, tensors, dtype=tdt).eval()(*example_inputs)
        except NotImplementedError as e:
            raise ConvertError("cannot check the converted graph: %s" % e) from e
    if tuple(want.shape) != tuple(got.shape):
        raise ConvertError("converted graph gives shape %s, the module %s"
                           % (tuple(got.shape), tuple(want.shape)))
    err = (want - got).abs().max().item()
    tol = (1e-4 if tdt == torch.float32 else 1e-10) * max(1.0, want.abs().max().item())
    if not err <= tol:
        raise ConvertError("converted graph differs from the module by %.3g" % err)


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
        ("dropout", (3,), nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.25), nn.Linear(4, 2))),
    ]

    class Tangled(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

        def forward(self, x):
            return self.b(x) + self.a(x)

    good.append(("residual_forward", (3,), Tangled()))
    bad = [("lstm", (3,), nn.Sequential(nn.LSTM(3, 3))),
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
