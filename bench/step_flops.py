"""step_flops.py — the FLOP count of one training step of a PyTorch module under a resolved
sparse spec (scripts/sparse_spec.py), for bench_train.py's floor column.

  fwd, bwd = step_flops(module, inputs, resolved)

Counts multiply-adds x 2 of the conv/matmul work only (what dominates; norms, activations,
the loss and the optimizer are left out): every Conv2d and Linear (hooks) and every
torch.matmul between activations (attention's q k^T and p v), in forward order. Backward,
per such layer: the weight gradient when its weight trains (over the trained fraction S/C
of its input channels for a partial weight), and the input gradient when any param used
earlier in the forward trains (a gradient must flow below the layer) — what Pock's
needs-grad walk builds.
"""
import collections


def _events(m, inputs):
    """[(kind, names of params read, MACs)] in forward order: kind "layer" (Conv2d/Linear:
    names = its weight and bias), "matmul" (no params) or "param" (any other module with
    params of its own: norms, embeddings)."""
    import torch
    import torch.nn as nn
    ev, hooks = [], []

    def hook(mod, inp, out, name):
        own = [name + "." + p for p, _ in mod.named_parameters(recurse=False)]
        if isinstance(mod, nn.Conv2d):
            k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
            ev.append(("layer", own, out.numel() * k))
        elif isinstance(mod, nn.Linear):
            ev.append(("layer", own, out.numel() * mod.in_features))
        elif own:
            ev.append(("param", own, 0))

    for name, mod in m.named_modules():
        hooks.append(mod.register_forward_hook(lambda mod, i, o, name=name: hook(mod, i, o, name)))
    real = torch.matmul

    def matmul(a, b, **kw):
        out = real(a, b, **kw)
        if not isinstance(a, nn.Parameter) and not isinstance(b, nn.Parameter):
            ev.append(("matmul", [], out.numel() * a.shape[-1]))
        return out
    torch.matmul = matmul
    try:
        with torch.no_grad():
            m(*inputs)
    finally:
        torch.matmul = real
        for h in hooks:
            h.remove()
    # the root module's own params (a learned position table) come first in the forward
    root = [p for p, _ in m.named_parameters(recurse=False)]
    return ([("param", root, 0)] if root else []) + [e for e in ev if e[0] != "param" or e[1]]


def step_flops(m, inputs, resolved):
    """(forward FLOPs, backward FLOPs) of one step on inputs (their batch included).
    resolved: {param name: None (whole) or S} as sparse_spec.resolve returns."""
    shapes = {n: p.shape for n, p in m.named_parameters()}
    fwd = bwd = 0
    upstream = False  # a param read earlier in the forward trains
    seen = collections.Counter()
    for kind, names, macs in _events(m, inputs):
        seen.update(names)
        fwd += macs
        if kind == "layer":
            w = names[0]
            if w in resolved:
                s = resolved[w]
                bwd += macs if s is None else macs * s // shapes[w][1]
            if upstream:
                bwd += macs
        elif kind == "matmul" and upstream:
            bwd += 2 * macs  # both operands are activations needing a gradient
        if any(n in resolved for n in names):
            upstream = True
    return 2 * fwd, 2 * bwd
