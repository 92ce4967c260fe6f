#!/usr/bin/env python3
"""shape_ops_torch.py — PyTorch's side of a training-equivalence check for the shape and
data-movement ops (slice with a step, transpose, concat, pad, expand, unsqueeze as
reshape), kept out of ctest for its cost (~15 s of compiling): writes a hand-written graph
using them, its batches and PyTorch's weights after 5 steps (graph_torch.py running the
graph), in the layout tests/test_train_equiv.c replays:

  /usr/bin/python3 scripts/shape_ops_torch.py OUT_DIR
  build/tests/test_train_equiv OUT_DIR/graphs     # Pock must reach PyTorch's weights

(where and masked_fill are left out: graph inputs cannot be integer masks yet.)
"""
import os
import sys

import gen_train_fixtures as G


def shapes_graph():
    """x (N, 64) -> fc1 16 -> split into [0, 8), every 2nd of [8, 16) and of [9, 16) ->
    transposed twice -> concat (3 pieces) -> pad 1 before and 2 after with 0.5 -> + a (1, 19)
    param expanded over the batch -> relu -> unsqueeze, expand to (N, 2, 19), flatten ->
    head 38 -> 10."""
    shapes, nodes = [], []
    node = G._node

    def linear(name, x, i, o):
        shapes.extend([(name + ".weight", (o, i)), (name + ".bias", (o,))])
        nodes.append(node(name, "matmul", [x, name + ".weight"], name + ".mm", trans_b=True))
        nodes.append(node(name + ".add", "add", [name + ".mm", name + ".bias"], name + ".out"))
        return name + ".out"
    h = linear("fc1", "x", 64, 16)
    nodes.append(node("a", "slice", [h], "a", slice_axis=1, slice_start=0, slice_len=8))
    nodes.append(node("b", "slice", [h], "b", slice_axis=1, slice_start=8, slice_len=8,
                      slice_step=2))
    nodes.append(node("c", "slice", [h], "c", slice_axis=-1, slice_start=9, slice_len=7,
                      slice_step=2))
    nodes.append(node("bt", "transpose", ["b"], "bt"))
    nodes.append(node("bt2", "transpose", ["bt"], "bt2", perm=[1, 0]))
    nodes.append(node("cat", "concat", ["c", "a", "bt2"], "cat", axis=1))
    nodes.append(node("pad", "pad", ["cat"], "pd", pads=[0, 0, 1, 2], value=0.5))
    shapes.append(("shift", (1, 19)))
    nodes.append(node("ex1", "expand", ["shift"], "sh", shape=["N", -1]))
    nodes.append(node("addsh", "add", ["pd", "sh"], "s"))
    nodes.append(node("relu", "relu", ["s"], "r"))
    nodes.append(node("unsq", "reshape", ["r"], "u", shape=["N", 1, 19]))
    nodes.append(node("ex2", "expand", ["u"], "e", shape=["N", 2, -1]))
    nodes.append(node("flat", "reshape", ["e"], "f", shape=["N", 38]))
    linear("head", "f", 38, 10)
    return shapes, nodes, "head.out"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: shape_ops_torch.py OUT_DIR")
    import torch
    torch.set_num_threads(1)
    G.GRAPH_BUILDERS = {"shapes": shapes_graph}
    G.GRAPH_MODELS = ("shapes",)
    os.makedirs(sys.argv[1], exist_ok=True)
    print("%d cases in %s" % (G.generate_graphs(sys.argv[1]), os.path.join(sys.argv[1], "graphs")))


if __name__ == "__main__":
    main()
