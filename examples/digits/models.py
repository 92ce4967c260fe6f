#!/usr/bin/env python3
"""models.py — the digits demo's two models in PyTorch (the definitions Pock's JSON graphs in
models/ are converted from), with a fixed-seed init. Run it to rewrite models/*.json + .pkw.

  /usr/bin/python3 examples/digits/models.py            # writes examples/digits/models/
"""
import collections
import os
import sys

import torch
import torch.nn as nn

# What the demo trains with; goes into each model file's "training" object.
TRAINING = {
    "loss": "softmax_cross_entropy",
    "classes": 10,
    "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3},
}
SEED = 0


def cnn(seed=SEED, dtype=torch.float32):
    """(N, 1, 8, 8) -> 10 logits: conv3x3 1->16 (6x6), conv3x3 16->32 (4x4), maxpool 2
    (2x2), conv3x3 32->64 pad 1 (2x2), ReLU after each conv, global average pool, fc."""
    torch.manual_seed(seed)
    m = nn.Sequential(collections.OrderedDict([
        ("conv1", nn.Conv2d(1, 16, 3)), ("relu1", nn.ReLU()),
        ("conv2", nn.Conv2d(16, 32, 3)), ("relu2", nn.ReLU()),
        ("pool", nn.MaxPool2d(2)),
        ("conv3", nn.Conv2d(32, 64, 3, padding=1)), ("relu3", nn.ReLU()),
        ("gap", nn.AdaptiveAvgPool2d(1)), ("flatten", nn.Flatten()),
        ("fc", nn.Linear(64, 10)),
    ])).to(dtype)
    m.input_shape = (1, 8, 8)
    m.training_spec = TRAINING
    return m


def mlp(seed=SEED, dtype=torch.float32):
    """(N, 64) -> 10 logits: Linear 64-128-64-10 with ReLU between."""
    torch.manual_seed(seed)
    m = nn.Sequential(collections.OrderedDict([
        ("fc1", nn.Linear(64, 128)), ("relu1", nn.ReLU()),
        ("fc2", nn.Linear(128, 64)), ("relu2", nn.ReLU()),
        ("fc3", nn.Linear(64, 10)),
    ])).to(dtype)
    m.input_shape = (64,)
    m.training_spec = TRAINING
    return m


MODELS = {"cnn": cnn, "mlp": mlp}
HEADS = {"cnn": "fc", "mlp": "fc3"}          # the classifier layer of each model
LAST2 = {"cnn": ("conv3", "fc"), "mlp": ("fc2", "fc3")}  # the last two layers
PARTIAL = {"cnn": "conv3", "mlp": "fc2"}     # the layer a partial-channel scheme trains


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "scripts"))
    import torch2pock
    out = os.path.join(here, "models")
    os.makedirs(out, exist_ok=True)
    for name, make in MODELS.items():
        m = make()
        torch2pock.save(m, os.path.join(out, name + ".json"), m.input_shape,
                        name="digits_" + name, training=TRAINING)
        print("wrote", os.path.join(out, name + ".json"))


if __name__ == "__main__":
    main()
