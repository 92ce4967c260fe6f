#!/usr/bin/env bash
# test_inputs_cli.sh — a model with several named inputs end to end: a version-2 graph whose
# inputs x and z (per row) and shift (no batch dim) are summed before a linear layer is
# compiled, trained by `pock train` from X1.npy,X2.npy,X3.npy:Y.npy, evaluated and run by
# pock-rt. The reference is the same linear layer fed u = x + z + shift as one input,
# computed here (values on a 1/16 grid, so every sum is exact in f32): weights, losses and
# predictions must be identical. A model whose first input holds integers (i32 token ids)
# trains from an integer file like the reference. Bad dataset forms fail naming the problem.
# Usage: test_inputs_cli.sh POCK POCK_RT
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
pockrt=$2

# ---- data: 10 rows (batch 4: the last batch is padded), 3 classes
python3 - "$tmp" <<'EOF'
import random, struct, sys
d = sys.argv[1]
def npy(path, descr, shape, vals):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    fmt = {"<f4": "f", "<i4": "i", "<i8": "q"}[descr]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%d%s" % (len(vals), fmt), *vals))
rng = random.Random(7)
grid = lambda: rng.randint(-32, 32) / 16.0
rows = 10
x = [grid() for _ in range(rows * 4)]
z = [grid() for _ in range(rows * 4)]
shift = [0.5, -0.25, 1.0, 0.0625]
u = [x[i] + z[i] + shift[i % 4] for i in range(rows * 4)]
y = [(1 if u[4 * r] + u[4 * r + 1] > 0 else 0) + (1 if u[4 * r + 2] > 1 else 0) for r in range(rows)]
npy(d + "/x.npy", "<f4", "(10, 4)", x)
npy(d + "/z.npy", "<f4", "(10, 4)", z)
npy(d + "/shift.npy", "<f4", "(4,)", shift)
npy(d + "/u.npy", "<f4", "(10, 4)", u)
npy(d + "/y.npy", "<i4", "(10,)", y)
npy(d + "/shift5.npy", "<f4", "(5,)", shift + [0.0])
npy(d + "/zi.npy", "<i4", "(10, 4)", [int(v) for v in z])
npy(d + "/ids.npy", "<i4", "(10, 2)", [rng.randint(0, 999) for _ in range(20)])
npy(d + "/ids_big.npy", "<i8", "(10, 2)", [2**40] * 20)
EOF

params='"params": [
    {"name": "fc.weight", "shape": [3, 4], "init": [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7, -0.8, 0.9, -1.0, 1.1, -1.2]},
    {"name": "fc.bias", "shape": [3], "init": [0.01, 0.02, 0.03]}]'
fc='{"name": "fc", "op": "matmul", "inputs": ["u", "fc.weight"], "output": "fc.mm", "attrs": {"trans_b": true}},
    {"name": "fc.add", "op": "add", "inputs": ["fc.mm", "fc.bias"], "output": "y"}'
training='"training": {"loss": "softmax_cross_entropy", "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9}}'
cat >"$tmp/three.json" <<EOF
{"format": "pock-graph", "version": 2, "name": "three",
  "inputs": [{"name": "x", "shape": ["N", 4]}, {"name": "z", "shape": ["N", 4], "dtype": "f32"},
             {"name": "shift", "shape": [4], "batch": false}],
  $params,
  "nodes": [{"name": "xz", "op": "add", "inputs": ["x", "z"], "output": "xz"},
    {"name": "u", "op": "add", "inputs": ["xz", "shift"], "output": "u"},
    $fc],
  "output": "y", $training}
EOF
cat >"$tmp/one.json" <<EOF
{"format": "pock-graph", "version": 1, "name": "one",
  "inputs": [{"name": "u", "shape": ["N", 4]}],
  $params,
  "nodes": [$fc],
  "output": "y", $training}
EOF

# An integer first input (token ids; no op reads integers yet, so it only travels), then u.
cat >"$tmp/ids.json" <<EOF
{"format": "pock-graph", "version": 2, "name": "ids",
  "inputs": [{"name": "ids", "shape": ["N", 2], "dtype": "i32"}, {"name": "u", "shape": ["N", 4]}],
  $params,
  "nodes": [$fc],
  "output": "y", $training}
EOF

expect compile_three 0 'wrote' "$pock" compile "$tmp/three.json" --batch 4 -o "$tmp/three.pock"
expect compile_one 0 'wrote' "$pock" compile "$tmp/one.json" --batch 4 -o "$tmp/one.pock"
expect info_lists_inputs 0 'input +shift f32 \(4\) \(no batch dim\)' "$pockrt" info "$tmp/three.pock"
grep -Eq 'input +z f32 \(4, 4\)' "$tmp/out" && pass info_input_z || fail info_input_z "$(grep input "$tmp/out")"
grep -q 'manifest v2' "$tmp/out" && pass info_manifest_v2 || fail info_manifest_v2 "$(grep format "$tmp/out")"
expect info_one_input_v1 0 'manifest v1' "$pockrt" info "$tmp/one.pock"

data3="$tmp/x.npy,$tmp/z.npy,$tmp/shift.npy:$tmp/y.npy"
expect train_three 0 'epoch 3/3 loss' "$pock" train "$tmp/three.pock" --data "$data3" --epochs 3 \
  --seed 5 --save "$tmp/w3.pkw"
sed 's/ ms\/step.*//' "$tmp/out" >"$tmp/log3"
expect train_one 0 'epoch 3/3 loss' "$pock" train "$tmp/one.pock" --data "$tmp/u.npy:$tmp/y.npy" \
  --epochs 3 --seed 5 --save "$tmp/w1.pkw"
sed 's/ ms\/step.*//' "$tmp/out" >"$tmp/log1"
cmp -s "$tmp/w3.pkw" "$tmp/w1.pkw" && pass weights_equal_reference ||
  fail weights_equal_reference "trained weights differ from the one-input reference's"
diff -q "$tmp/log3" "$tmp/log1" >/dev/null && pass losses_equal_reference ||
  fail losses_equal_reference "$(diff "$tmp/log3" "$tmp/log1" | head -4)"

# Checkpoints hash every input: stopped after 4 steps, resumed, the run equals the
# uninterrupted one; resuming on data whose second input differs is refused.
expect train_three_stop 0 'stopped after 4 steps' "$pock" train "$tmp/three.pock" --data "$data3" \
  --epochs 3 --seed 5 --max-steps 4 --checkpoint "$tmp/c.ckpt"
expect train_three_resume 0 'epoch 3/3 loss' "$pock" train "$tmp/three.pock" --data "$data3" \
  --epochs 3 --resume "$tmp/c.ckpt" --save "$tmp/w3r.pkw"
cmp -s "$tmp/w3r.pkw" "$tmp/w3.pkw" && pass resume_equals_uninterrupted ||
  fail resume_equals_uninterrupted "resumed weights differ"
expect resume_other_input 1 'c\.ckpt: the checkpoint was taken on other training data' \
  "$pock" train "$tmp/three.pock" --data "$tmp/x.npy,$tmp/x.npy,$tmp/shift.npy:$tmp/y.npy" \
  --epochs 3 --resume "$tmp/c.ckpt"

expect eval_three 0 'loss [0-9.]+ accuracy' "$pockrt" eval "$tmp/three.pock" --data "$data3" \
  --weights "$tmp/w3.pkw"
cp "$tmp/out" "$tmp/eval3"
expect eval_one 0 'loss [0-9.]+ accuracy' "$pockrt" eval "$tmp/one.pock" --data "$tmp/u.npy:$tmp/y.npy" \
  --weights "$tmp/w1.pkw"
cmp -s "$tmp/out" "$tmp/eval3" && pass eval_equal_reference || fail eval_equal_reference "$(cat "$tmp/eval3" "$tmp/out")"
expect run_three 0 '^[0-2] ' "$pockrt" run "$tmp/three.pock" --data "$data3" --weights "$tmp/w3.pkw" --scores
cp "$tmp/out" "$tmp/run3"
expect run_one 0 '^[0-2] ' "$pockrt" run "$tmp/one.pock" --data "$tmp/u.npy:$tmp/y.npy" \
  --weights "$tmp/w1.pkw" --scores
[ "$(wc -l <"$tmp/run3")" -eq 10 ] && cmp -s "$tmp/out" "$tmp/run3" && pass run_equal_reference ||
  fail run_equal_reference "$(head -3 "$tmp/run3")"

expect compile_ids 0 'wrote' "$pock" compile "$tmp/ids.json" --batch 4 -o "$tmp/ids.pock"
expect train_ids 0 'epoch 3/3 loss' "$pock" train "$tmp/ids.pock" --data "$tmp/ids.npy,$tmp/u.npy:$tmp/y.npy" \
  --epochs 3 --seed 5 --save "$tmp/wi.pkw"
cmp -s "$tmp/wi.pkw" "$tmp/w1.pkw" && pass ids_weights_equal_reference ||
  fail ids_weights_equal_reference "trained weights differ from the one-input reference's"
expect ids_float_file 1 "x\.npy: the model's input takes integers \(i32\); the file holds floats" \
  "$pock" train "$tmp/ids.pock" --data "$tmp/x.npy,$tmp/u.npy:$tmp/y.npy" --epochs 1
expect ids_out_of_range 1 "ids_big\.npy: row 1, feature 1: 1099511627776 does not fit the model's i32" \
  "$pock" train "$tmp/ids.pock" --data "$tmp/ids_big.npy,$tmp/u.npy:$tmp/y.npy" --epochs 1

# ---- a dataset that does not fit the model's inputs
expect one_file_for_three 1 '1 feature files for a model with 3 inputs' \
  "$pock" train "$tmp/three.pock" --data "$tmp/x.npy:$tmp/y.npy" --epochs 1
expect csv_for_three 1 'the model has 3 inputs: give one .npy file per input' \
  "$pock" train "$tmp/three.pock" --data "$tmp/nothing.csv" --epochs 1
expect batchless_shape 1 "shift5\.npy: input 'shift' has no batch dim and takes 4 values, the file has 5" \
  "$pock" train "$tmp/three.pock" --data "$tmp/x.npy,$tmp/z.npy,$tmp/shift5.npy:$tmp/y.npy" --epochs 1
expect int_file_for_float 1 "zi\.npy: input 'z' takes f32; the file holds integers" \
  "$pock" train "$tmp/three.pock" --data "$tmp/x.npy,$tmp/zi.npy,$tmp/shift.npy:$tmp/y.npy" --epochs 1
expect rows_differ 1 "shift\.npy: input 'z' needs 10 rows" \
  "$pock" train "$tmp/three.pock" --data "$tmp/x.npy,$tmp/shift.npy,$tmp/shift.npy:$tmp/y.npy" --epochs 1
expect save_over_second_input 1 'z\.npy: is the same file as the input' \
  "$pock" train "$tmp/three.pock" --data "$data3" --epochs 1 --save "$tmp/z.npy"
finish
