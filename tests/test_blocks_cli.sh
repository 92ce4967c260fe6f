#!/usr/bin/env bash
# test_blocks_cli.sh — a transformer-style sparse spec through `pock compile` and `pock
# train`: the linear layers take a rank-3 (N, T, D) input (batch_matmul), "blocks" picks
# the last block by its name prefix and "channels" trains half of its weight's input
# channels. After training, the compiled step has moved exactly the selected parts: the
# trained half of layer.1.fc.weight and its bias and the head, while the other half and
# block 0 keep their initial values bit for bit. Usage: test_blocks_cli.sh POCK
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1

python3 - "$tmp" <<'EOF'
import json, random, struct, sys
d = sys.argv[1]
rng = random.Random(3)
rows, T, D, K = 12, 3, 4, 3
x = [rng.randint(-16, 16) / 8.0 for _ in range(rows * T * D)]
y = [r % K for r in range(rows)]
def npy(path, descr, shape, fmt, vals):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%d%s" % (len(vals), fmt), *vals))
npy(d + "/x.npy", "<f4", "(%d, %d, %d)" % (rows, T, D), "f", x)
npy(d + "/y.npy", "<i4", "(%d,)" % rows, "i", y)
init = lambda n: [round(rng.uniform(-0.5, 0.5), 3) for _ in range(n)]
params, nodes, h = [], [], "x"
for b in range(2):
    p = "layer.%d.fc" % b
    params += [{"name": p + ".weight", "shape": [D, D], "init": init(D * D)},
               {"name": p + ".bias", "shape": [D], "init": init(D)}]
    nodes += [{"name": p, "op": "batch_matmul", "inputs": [h, p + ".weight"], "output": p + ".mm",
               "attrs": {"trans_b": True}},
              {"name": p + ".add", "op": "add", "inputs": [p + ".mm", p + ".bias"], "output": p + ".out"},
              {"name": "layer.%d.act" % b, "op": "tanh", "inputs": [p + ".out"], "output": "layer.%d.act" % b}]
    h = "layer.%d.act" % b
params += [{"name": "head.weight", "shape": [K, D], "init": init(K * D)},
           {"name": "head.bias", "shape": [K], "init": init(K)}]
nodes += [{"name": "pool", "op": "mean", "inputs": [h], "output": "pool", "attrs": {"axes": [1]}},
          {"name": "head", "op": "matmul", "inputs": ["pool", "head.weight"], "output": "head.mm",
           "attrs": {"trans_b": True}},
          {"name": "head.add", "op": "add", "inputs": ["head.mm", "head.bias"], "output": "y"}]
g = {"format": "pock-graph", "version": 1, "name": "blocks",
     "inputs": [{"name": "x", "shape": ["N", T, D]}], "params": params, "nodes": nodes,
     "output": "y", "training": {"optimizer": {"kind": "sgd", "lr": 0.2}}}
json.dump(g, open(d + "/blocks.json", "w"))
json.dump({"version": 1, "train": [{"blocks": {"prefix": "auto", "last": 1}, "channels": 0.5},
                                   {"params": "head.*"}]}, open(d + "/spec.json", "w"))
EOF

expect compile_blocks 0 'wrote' "$pock" compile "$tmp/blocks.json" --batch 4 --sparse "$tmp/spec.json" \
  -o "$tmp/b.pock"
expect dump_rank3_slice 0 'layer\.0\.act\[\.\.\., :2\]' "$pock" compile "$tmp/blocks.json" --batch 4 \
  --sparse "$tmp/spec.json" --dump-after train
expect train_blocks 0 'epoch 2/2 loss' "$pock" train "$tmp/b.pock" --data "$tmp/x.npy:$tmp/y.npy" \
  --epochs 2 --save "$tmp/w.pkw"

# Which values moved, from the .pkw (docs/graph-format.md) against the model's init.
python3 - "$tmp" >"$tmp/moved" <<'EOF'
import json, struct, sys
d = sys.argv[1]
init = {p["name"]: p["init"] for p in json.load(open(d + "/blocks.json"))["params"]}
b = open(d + "/w.pkw", "rb").read()
(n,), pos = struct.unpack_from("<I", b, 4), 8
for _ in range(n):
    (nl,) = struct.unpack_from("<H", b, pos); name = b[pos + 2:pos + 2 + nl].decode(); pos += 2 + nl
    dt, rank = struct.unpack_from("<BB", b, pos); pos += 2
    shape = struct.unpack_from("<%dq" % rank, b, pos); pos += 8 * rank
    cnt = 1
    for s in shape: cnt *= s
    vals = struct.unpack_from("<%df" % cnt, b, pos); pos += 4 * cnt
    f32 = [struct.unpack("<f", struct.pack("<f", v))[0] for v in init[name]]
    moved = "".join("1" if a != c else "0" for a, c in zip(vals, f32))
    print(name, moved)
EOF
want="layer.0.fc.weight 0000000000000000
layer.0.fc.bias 0000
layer.1.fc.weight 1100110011001100
layer.1.fc.bias 1111
head.weight 111111111111
head.bias 111"
[ "$(cat "$tmp/moved")" = "$want" ] && pass trained_exactly_the_selection ||
  fail trained_exactly_the_selection "$(cat "$tmp/moved")"
finish
