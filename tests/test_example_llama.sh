#!/usr/bin/env bash
# test_example_llama.sh — examples/llama/README.md's commands at the tiny size (issue 23):
# export the tiny LLaMA, cut the committed text into 8-byte windows, compile the full and
# PockEngine-style artifacts, pretrain (full) on the first half, fine-tune (pockengine)
# from the pretrained weights on the second half, evaluate on its test split. Asserts
# each command succeeds, the pretraining loss falls from epoch 1 to 2 and below the
# untrained model's on the held-out pretrain_val, and fine-tuning lowers the test loss of
# the pretrained weights. Needs a Python with onnx and torch ($POCK_ONNX_PYTHON): else
# skipped (exit 77).
#   test_example_llama.sh POCK POCK_RT SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") src=$(realpath "$3")
py=${POCK_ONNX_PYTHON:-}
if [ -z "$py" ] || ! "$py" -c 'import onnx, numpy, torch' >/dev/null 2>&1; then
  echo "SKIP: no Python with onnx, numpy and torch (POCK_ONNX_PYTHON; scripts/onnx_venv.sh)"
  exit 77
fi
. "$(dirname "$0")/cli_test_lib.sh"
specs=$src/examples/llama/specs d=$tmp/llama
data="--data $d/pretrain_train_ids.npy:$d/pretrain_train_y.npy"
ft="--data $d/finetune_train_ids.npy:$d/finetune_train_y.npy"
pval="--data $d/pretrain_val_ids.npy:$d/pretrain_val_y.npy"
test="--data $d/finetune_test_ids.npy:$d/finetune_test_y.npy"
loss() { awk '$1 == "loss" {print $2}' "$tmp/out"; }
epoch_loss() { awk -v e="$1" '$1 == "epoch" && $2 ~ "^" e "/" {print $4}' "$tmp/out"; }
below() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a + 0 < b + 0 && a != "")}'; }

expect export 0 "wrote .*llama.onnx \(tiny" "$py" "$src/scripts/model_export.py" llama "$d" \
  --size tiny
expect data 0 "finetune_test +[0-9]+ windows of 8" "$py" "$src/scripts/llama_data.py" "$d" \
  --seq 8
for s in full pockengine; do
  expect "compile_$s" 0 "wrote .*$s.pock" "$pock" compile "$d/llama.onnx" --batch 8 \
    --sparse "$specs/$s.json" -o "$d/$s.pock"
done

# pretraining: full update, 2 epochs of 41 steps (lr 1e-2: the tiny model learns fast)
expect untrained_val 0 "^loss [0-9.]+ accuracy" "$rt" eval "$d/full.pock" $pval
l0=$(loss)
expect pretrain 0 "trained [0-9]+ steps" "$rt" train "$d/full.pock" $data --epochs 2 --lr 1e-2 \
  --save "$d/pre.pkw"
e1=$(epoch_loss 1) e2=$(epoch_loss 2)
if below "$e2" "$e1"; then pass "pretrain_loss_falls ($e1 -> $e2)"
else fail pretrain_loss_falls "epoch losses '$e1' '$e2'"; fi
expect pretrained_val 0 "^loss [0-9.]+ accuracy" "$rt" eval "$d/full.pock" \
  --weights "$d/pre.pkw" $pval
l1=$(loss)
if below "$l1" "$l0"; then pass "pretrain_val_loss ($l0 -> $l1)"
else fail pretrain_val_loss "untrained '$l0', pretrained '$l1'"; fi

# fine-tuning: the PockEngine-style scheme from the pretrained weights on the second half
expect pretrained_test 0 "^loss [0-9.]+ accuracy" "$rt" eval "$d/pockengine.pock" \
  --weights "$d/pre.pkw" $test
t0=$(loss)
expect finetune 0 "trained [0-9]+ steps" "$rt" train "$d/pockengine.pock" \
  --weights "$d/pre.pkw" $ft --epochs 2 --lr 1e-2 --save "$d/ft.pkw"
expect finetuned_test 0 "^loss [0-9.]+ accuracy" "$rt" eval "$d/pockengine.pock" \
  --weights "$d/ft.pkw" $test
t1=$(loss)
if below "$t1" "$t0"; then pass "finetune_test_loss ($t0 -> $t1)"
else fail finetune_test_loss "pretrained '$t0', fine-tuned '$t1'"; fi
finish
