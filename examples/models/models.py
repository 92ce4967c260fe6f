#!/usr/bin/env python3
"""models.py — the example models Pock fine-tunes, as plain PyTorch modules (torch 1.13: no
F.scaled_dot_product_attention and no nn.RMSNorm, so both are written out). Each factory
takes a size: "tiny" for tests (a forward in milliseconds), "standard" (the sizes of the
first benchmarks) or "device" (what an edge device fine-tunes: issue "real models end to
end"). Random init from a seed; scripts/torch2pock.py or torch.onnx converts them.

  mobilenet_v2     MobileNetV2, width 0.35, 10 classes (BN, ReLU6, inverted residuals with
                   depthwise convs): standard 96x96 RGB, device 128x128
  mobilenet_v2_w1  the same at width 1.0: standard 96x96, device 128x128
  resnet18         ResNet-18, basic blocks [2, 2, 2, 2], 10 classes: standard 32x32 RGB with
                   the CIFAR stem (3x3 conv, no max pool); device 64x64 with the ImageNet
                   stem (7x7 stride-2 conv, 3x3 stride-2 max pool), as torchvision's
  bert             BERT-style encoder: 4 layers, d=128, 4 heads, seq 64, vocab 1000, learned
                   positions, post-norm LayerNorm, GELU MLP, classifier on token 0 (2
                   classes); device = standard
  llama            LLaMA-style decoder, byte vocab 256, RMSNorm, rotary embeddings, SwiGLU,
                   causal attention, logits per token: standard 4 blocks, d=256, 4 heads,
                   seq 128; device 6 blocks, d=288, 6 heads, ff 768, seq 128

  /usr/bin/python3 examples/models/models.py --size tiny     # prints each model's size
  /usr/bin/python3 examples/models/models.py --size device --flops  # and its MACs

Every model has `input_shape` (without the batch dim), `input_dtype` and `training_spec`
(what torch2pock writes into the graph's "training" object), and names its modules so that
sparse specs can select the last blocks ("features.N", "layers.layerN.M", "layers.N",
"blocks.N") and the head.
"""
import argparse
import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = ("tiny", "standard", "device")


def _check_size(size):
    if size not in SIZES:
        raise ValueError("size %r: one of %s" % (size, ", ".join(SIZES)))


# ---- conv nets ----

class ConvBNAct(nn.Sequential):
    def __init__(self, cin, cout, k, stride=1, groups=1, act=True):
        layers = [("conv", nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups,
                                     bias=False)),
                  ("bn", nn.BatchNorm2d(cout))]
        if act:
            layers.append(("act", nn.ReLU6()))
        super().__init__(OrderedDict(layers))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand, 3x3 depthwise, 1x1 project; residual when the shape
    is kept."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers.append(("expand", ConvBNAct(cin, hidden, 1)))
        layers += [("dw", ConvBNAct(hidden, hidden, 3, stride, groups=hidden)),
                   ("project", ConvBNAct(hidden, cout, 1, act=False))]
        self.conv = nn.Sequential(OrderedDict(layers))

    def forward(self, x):
        y = self.conv(x)
        return x + y if self.use_res else y


def _divisible(v, d=8):
    """torchvision's _make_divisible: channels rounded to a multiple of d, never below 90%."""
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


class MobileNetV2(nn.Module):
    def __init__(self, width=0.35, classes=10, settings=None, last=1280):
        super().__init__()
        settings = settings or [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        cin = _divisible(32 * width)
        last = _divisible(last * max(1.0, width))
        # features.0 is the stem, then one entry per inverted residual, then the last 1x1
        # conv (torchvision's numbering, so sparse specs can pick "the last block")
        blocks = [ConvBNAct(3, cin, 3, 2)]
        for t, c, n, s in settings:
            cout = _divisible(c * width)
            for i in range(n):
                blocks.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        blocks.append(ConvBNAct(cin, last, 1))
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(last, classes)

    def forward(self, x):
        x = self.pool(self.features(x))
        return self.classifier(x.flatten(1))


def mobilenet_v2(size="standard", seed=0, width=0.35):
    _check_size(size)
    torch.manual_seed(seed)
    if size == "tiny":  # the block kinds of the real one (expand 1 and 6, a residual)
        m = MobileNetV2(width, 10, [(1, 16, 1, 1), (6, 24, 2, 2)], last=32)
        m.input_shape = (3, 16, 16)
    else:
        m = MobileNetV2(width, 10)
        side = 128 if size == "device" else 96
        m.input_shape = (3, side, side)
    m.input_dtype = torch.float32
    m.training_spec = {"loss": "softmax_cross_entropy", "classes": 10,
                       "optimizer": {"kind": "sgd", "lr": 0.01, "momentum": 0.9}}
    return m


def mobilenet_v2_w1(size="standard", seed=0):
    return mobilenet_v2(size, seed, width=1.0)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(OrderedDict([("conv", nn.Conv2d(cin, cout, 1, stride, bias=False)),
                                            ("bn", nn.BatchNorm2d(cout))]))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, widths, depths, classes=10, imagenet_stem=False):
        super().__init__()
        conv = (nn.Conv2d(3, widths[0], 7, 2, 3, bias=False) if imagenet_stem else
                nn.Conv2d(3, widths[0], 3, 1, 1, bias=False))
        stem = [("conv", conv), ("bn", nn.BatchNorm2d(widths[0])), ("relu", nn.ReLU())]
        if imagenet_stem:
            stem.append(("pool", nn.MaxPool2d(3, 2, 1)))
        self.stem = nn.Sequential(OrderedDict(stem))
        layers, cin = [], widths[0]
        for i, (w, n) in enumerate(zip(widths, depths)):
            blocks = []
            for j in range(n):
                blocks.append((str(j), BasicBlock(cin, w, 2 if (j == 0 and i > 0) else 1)))
                cin = w
            layers.append(("layer%d" % (i + 1), nn.Sequential(OrderedDict(blocks))))
        self.layers = nn.Sequential(OrderedDict(layers))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.pool(self.layers(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


def resnet18(size="standard", seed=0):
    _check_size(size)
    torch.manual_seed(seed)
    if size == "tiny":
        m = ResNet([4, 8], [1, 1])
        m.input_shape = (3, 8, 8)
    elif size == "device":
        m = ResNet([64, 128, 256, 512], [2, 2, 2, 2], imagenet_stem=True)
        m.input_shape = (3, 64, 64)
    else:
        m = ResNet([64, 128, 256, 512], [2, 2, 2, 2])
        m.input_shape = (3, 32, 32)
    m.input_dtype = torch.float32
    m.training_spec = {"loss": "softmax_cross_entropy", "classes": 10,
                       "optimizer": {"kind": "sgd", "lr": 0.01, "momentum": 0.9}}
    return m


# ---- transformers ----

def attention(q, k, v, mask, scale):
    """softmax(q k^T * scale + mask) v over (batch, heads, seq, head_dim); scale is
    1 / sqrt(head_dim) and mask is additive, broadcasting to (batch, heads, seq, seq). What
    F.scaled_dot_product_attention does. (Sizes are plain ints so that torch.fx traces it.)"""
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    return torch.matmul(torch.softmax(s + mask, dim=-1), v)


class SelfAttention(nn.Module):
    def __init__(self, d, heads, bias=True):
        super().__init__()
        self.heads, self.d, self.hd = heads, d, d // heads
        self.scale = 1.0 / math.sqrt(d // heads)
        self.q = nn.Linear(d, d, bias=bias)
        self.k = nn.Linear(d, d, bias=bias)
        self.v = nn.Linear(d, d, bias=bias)
        self.o = nn.Linear(d, d, bias=bias)

    def split(self, x):  # (B, T, d) -> (B, H, T, d / H)
        return x.reshape(x.shape[0], x.shape[1], self.heads, self.hd).transpose(1, 2)

    def merge(self, x):  # (B, H, T, hd) -> (B, T, d)
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], self.d)


class BertLayer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.attn = SelfAttention(d, heads)
        self.ln1 = nn.LayerNorm(d, eps=1e-12)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-12)

    def forward(self, x, mask):
        a = self.attn
        y = attention(a.split(a.q(x)), a.split(a.k(x)), a.split(a.v(x)), mask, a.scale)
        x = self.ln1(x + a.o(a.merge(y)))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Bert(nn.Module):
    """Inputs: token ids (B, T) int64 and an attention mask (B, T) float (1.0 = token, 0.0 =
    padding: float so that the graph needs no cast).
    Output: (B, classes) logits from token 0 (the [CLS] position)."""

    def __init__(self, vocab, d, heads, layers, seq, classes=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)  # learned absolute positions
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(d, heads, 4 * d) for _ in range(layers)])
        self.head = nn.Linear(d, classes)

    def forward(self, ids, mask):
        x = self.ln(self.tok(ids) + self.pos)
        # (B, T) 1/0 -> additive (B, 1, 1, T): 0 where attended, -1e4 at padding (BERT's)
        add = (1.0 - mask).reshape(mask.shape[0], 1, 1, mask.shape[1]) * -10000.0
        for layer in self.layers:
            x = layer(x, add)
        return self.head(x[:, 0])


def bert(size="standard", seed=0):
    _check_size(size)
    torch.manual_seed(seed)
    if size == "tiny":
        vocab, d, heads, layers, seq = 50, 16, 2, 2, 8
    else:
        vocab, d, heads, layers, seq = 1000, 128, 4, 4, 64
    m = Bert(vocab, d, heads, layers, seq)
    m.input_shape = (seq,)
    m.input_dtype = torch.int64
    m.vocab = vocab
    m.training_spec = {"loss": "softmax_cross_entropy", "classes": 2,
                       "optimizer": {"kind": "adamw", "lr": 1e-4, "weight_decay": 0.01}}
    return m


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight (LLaMA's; torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq, head_dim, base=10000.0):
    """cos and sin (seq, head_dim) for the rotate-half form (each frequency twice)."""
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def rotate_half(x, half):
    """(x1, x2) -> (-x2, x1) over the last dim, split at `half` (HF LLaMA's rotate_half)."""
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.norm1 = RMSNorm(d)
        self.attn = SelfAttention(d, heads, bias=False)
        self.norm2 = RMSNorm(d)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin, mask):
        a = self.attn
        h = self.norm1(x)
        q, k = a.split(a.q(h)), a.split(a.k(h))
        q = q * cos + rotate_half(q, a.hd // 2) * sin
        k = k * cos + rotate_half(k, a.hd // 2) * sin
        x = x + a.o(a.merge(attention(q, k, a.split(a.v(h)), mask, a.scale)))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    """Input: byte ids (B, T) int64. Output: next-byte logits (B, T, vocab)."""

    def __init__(self, vocab, d, heads, blocks, seq, ff):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        cos, sin = rope_tables(seq, d // heads)
        self.register_buffer("cos", cos.float(), persistent=False)
        self.register_buffer("sin", sin.float(), persistent=False)
        causal = torch.full((seq, seq), -1e9).triu(1)  # 0 on and below the diagonal
        self.register_buffer("causal", causal, persistent=False)
        self.blocks = nn.ModuleList([LlamaBlock(d, heads, ff) for _ in range(blocks)])
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids)
        for b in self.blocks:
            x = b(x, self.cos, self.sin, self.causal)
        return self.lm_head(self.norm(x))


def llama(size="standard", seed=0):
    _check_size(size)
    torch.manual_seed(seed)
    if size == "tiny":
        vocab, d, heads, blocks, seq, ff = 256, 16, 2, 2, 8, 32
    elif size == "device":
        vocab, d, heads, blocks, seq, ff = 256, 288, 6, 6, 128, 768
    else:
        vocab, d, heads, blocks, seq, ff = 256, 256, 4, 4, 128, 688
    m = Llama(vocab, d, heads, blocks, seq, ff)
    m.input_shape = (seq,)
    m.input_dtype = torch.int64
    m.vocab = vocab
    m.training_spec = {"loss": "softmax_cross_entropy", "classes": vocab,
                       "optimizer": {"kind": "adamw", "lr": 3e-4, "weight_decay": 0.1}}
    return m


MODELS = {"mobilenet_v2": mobilenet_v2, "mobilenet_v2_w1": mobilenet_v2_w1,
          "resnet18": resnet18, "bert": bert, "llama": llama}


def forward_macs(m, inputs):
    """Multiply-adds of one forward of m on inputs: every Conv2d and Linear (hooks), plus
    the attention products (q k^T and p v) of the transformers, counted from their shapes."""
    macs = [0]

    def hook(mod, inp, out):
        if isinstance(mod, nn.Conv2d):
            k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
            macs[0] += out.numel() * k
        elif isinstance(mod, nn.Linear):
            macs[0] += out.numel() * mod.in_features
    hs = [mod.register_forward_hook(hook) for mod in m.modules()
          if isinstance(mod, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            m(*inputs)
    finally:
        for h in hs:
            h.remove()
    for att in m.modules():
        if isinstance(att, SelfAttention):
            n, t = inputs[0].shape[0], inputs[0].shape[1]
            macs[0] += 2 * n * t * t * att.d  # q k^T and p v over every head
    return macs[0]


def example_inputs(m, batch=2, seed=0):
    """A batch the model accepts: images, or token ids (and BERT's mask, last 2 padded)."""
    g = torch.Generator().manual_seed(seed)
    if m.input_dtype != torch.int64:
        return (torch.randn((batch,) + tuple(m.input_shape), generator=g),)
    ids = torch.randint(0, m.vocab, (batch,) + tuple(m.input_shape), generator=g)
    if isinstance(m, Bert):
        mask = torch.ones(ids.shape)
        mask[:, -2:] = 0
        return ids, mask
    return (ids,)


def main():
    ap = argparse.ArgumentParser(description="builds each example model and runs a batch")
    ap.add_argument("--size", choices=SIZES, default="tiny")
    ap.add_argument("--flops", action="store_true", help="print each forward's multiply-adds")
    a = ap.parse_args()
    for name, make in MODELS.items():
        m = make(a.size)
        out = m(*example_inputs(m))
        n = sum(p.numel() for p in m.parameters())
        print("%-15s %9d params  input %s  output %s%s" % (
            name, n, tuple(m.input_shape), tuple(out.shape),
            "  %.1f MMAC/sample" % (forward_macs(m, example_inputs(m, 1)) / 1e6)
            if a.flops else ""))


if __name__ == "__main__":
    main()
