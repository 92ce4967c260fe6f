#!/usr/bin/env bash
# test_example_cnn.sh — the path of examples/mobilenet_v2's or examples/resnet18's README at
# the tiny size (issue 23): export the model (scripts/model_export.py), render the digits
# task at the tiny input's side (scripts/image_data.py), pretrain with the full spec on the
# source split and save the weights, then fine-tune the pockengine spec from those weights
# (`pock-rt train --weights`) on the target split and evaluate on target_test. Checks that
# every command succeeds, that each training loss falls from epoch 1 to 2, and that
# --weights is what the fine-tune starts from (the pockengine artifact with the pretrained
# weights evaluates exactly as the full one with them, and not as without them).
# Needs a Python with onnx, torch and numpy ($POCK_ONNX_PYTHON, else python3): without one
# the test is skipped (exit 77).
#   test_example_cnn.sh POCK POCK_RT SOURCE_DIR MODEL     MODEL: mobilenet_v2 or resnet18
pock=$(realpath "$1") rt=$(realpath "$2") src=$(realpath "$3") model=$4

# The tiny models' input sides: MobileNetV2 16x16, ResNet 8x8 (examples/models/models.py).
# Their last blocks have other names than the device size's, so the committed pockengine
# spec is renamed: MobileNetV2 tiny has features.0..4 (features.17, .18 -> .3, .4); the tiny
# ResNet has one block per stage and two stages, so its last block is layers.layer2.0
# (blocks prefix layers.layer4 -> layers.layer2, last 2 -> 1).
case $model in
  mobilenet_v2) side=16 rename='s/features\.17\./features.3./g; s/features\.18\./features.4./g' ;;
  resnet18) side=8 rename='s/layers\.layer4/layers.layer2/g; s/"last": 2/"last": 1/' ;;
  *) echo "test_example_cnn.sh: unknown model '$model' (mobilenet_v2 or resnet18)"; exit 2 ;;
esac

py=
for c in "${POCK_ONNX_PYTHON:-}" python3 /usr/bin/python3; do
  # (find_spec: importing torch takes seconds)
  if [ -n "$c" ] && "$c" -c 'import importlib.util as u
assert u.find_spec("onnx") and u.find_spec("torch") and u.find_spec("numpy")' >/dev/null 2>&1
  then py=$c; break; fi
done
if [ -z "$py" ]; then
  echo "SKIP: no Python with onnx, torch and numpy (set POCK_ONNX_PYTHON, e.g. the venv of"
  echo "      scripts/onnx_venv.sh; docs/onnx.md)"
  exit 77
fi
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1

# falls NAME LOG: epoch 2's training loss is below epoch 1's in LOG (pock-rt train's output)
falls() {
  local l1 l2
  l1=$(awk '$1 == "epoch" && $2 ~ /^1\// { print $4 }' "$2")
  l2=$(awk '$1 == "epoch" && $2 ~ /^2\// { print $4 }' "$2")
  if [ -n "$l1" ] && [ -n "$l2" ] && awk -v a="$l1" -v b="$l2" 'BEGIN { exit !(b < a) }'; then
    pass "$1 ($l1 -> $l2)"
  else fail "$1" "loss epoch 1 '$l1', epoch 2 '$l2': $(head -c 300 "$2")"; fi
}

specs=$src/examples/$model/specs
sed "$rename" "$specs/pockengine.json" >pe.json
expect export 0 "wrote .*/$model.onnx \(tiny" \
  "$py" "$src/scripts/model_export.py" "$model" m --size tiny
expect image_data 0 "target_test +222 images, labels 5..9" \
  "$py" "$src/scripts/image_data.py" m --side "$side"
expect compile_full 0 "" \
  "$pock" compile "m/$model.onnx" --batch 32 --sparse "$specs/full.json" -o full.pock
expect compile_pockengine 0 "" \
  "$pock" compile "m/$model.onnx" --batch 32 --sparse pe.json -o pe.pock
expect pretrain 0 "trained [0-9]+ steps" \
  "$rt" train full.pock --data m/source_train_x.npy:m/source_train_y.npy \
  --epochs 2 --lr 0.05 --threads 1 --save pre.pkw
cp out pretrain.log
falls pretrain_loss_falls pretrain.log

# --weights: the pockengine artifact with the pretrained weights is the pretrained model
val=m/source_val_x.npy:m/source_val_y.npy
"$rt" eval full.pock --weights pre.pkw --data "$val" >eval_full 2>&1
"$rt" eval pe.pock --weights pre.pkw --data "$val" >eval_pe 2>&1
"$rt" eval pe.pock --data "$val" >eval_init 2>&1
if grep -q '^loss [0-9.]* accuracy' eval_full && cmp -s eval_full eval_pe &&
   ! cmp -s eval_pe eval_init; then pass weights_loaded
else fail weights_loaded "full: $(cat eval_full); pockengine: $(cat eval_pe); initial: $(cat eval_init)"; fi

expect finetune 0 "trained [0-9]+ steps" \
  "$rt" train pe.pock --weights pre.pkw --data m/target_train_x.npy:m/target_train_y.npy \
  --val m/target_val_x.npy:m/target_val_y.npy --epochs 2 --lr 0.05 --threads 1 --save ft.pkw
cp out finetune.log
falls finetune_loss_falls finetune.log
expect eval 0 "^loss [0-9.]+ accuracy [0-9.]+ rows 222" \
  "$rt" eval pe.pock --weights ft.pkw --data m/target_test_x.npy:m/target_test_y.npy
finish
