#!/usr/bin/env bash
# test_onnx_export_models.sh — issue 17's acceptance for export: each example model's ONNX
# fixture (tests/fixtures/onnx-models/<model>/<model>_op{13,17}.onnx, its training JSON and
# sparse spec) is compiled, fine-tuned by `pock-rt train --no-shuffle` on the fixture's
# batches, exported with `pock export`, and onnxruntime's output of the exported model
# equals `pock-rt run --scores` within 1e-4. Slow (it compiles every model): label "slow".
# Skipped (77) without the fixtures or a Python with onnx and onnxruntime.
#   test_onnx_export_models.sh POCK POCK_RT SOURCE_DIR [MODEL...]
pock=$(realpath "$1") rt=$(realpath "$2") src=$(realpath "$3")
shift 3
fx=$src/tests/fixtures/onnx-models
[ -d "$fx" ] || { echo "SKIP: no ONNX model fixtures in $fx"; exit 77; }
py=
for c in "${POCK_ONNX_PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$c" ] && "$c" -c 'import importlib.util as u, onnx
assert u.find_spec("onnxruntime")' >/dev/null 2>&1; then py=$c; break; fi
done
[ -n "$py" ] || { echo "SKIP: no Python with onnx and onnxruntime (set POCK_ONNX_PYTHON)"; exit 77; }
. "$(dirname "$0")/cli_test_lib.sh"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mobilenet_v2 resnet18 bert llama)
for m in "${models[@]}"; do
  d=$tmp/$m
  mkdir -p "$d"
  read -r data batch < <("$py" "$src/tests/onnx_export_models.py" data "$fx/$m" "$d")
  spec=$(ls "$fx/$m"/*.json | grep -v training.json | head -1)
  for op in 13 17; do
    model=$fx/$m/${m}_op$op.onnx
    [ -f "$model" ] || { fail "$m-op$op" "no $model"; continue; }
    a=$d/op$op
    if "$pock" compile "$model" --sparse "$spec" --batch "$batch" -o "$a.pock" >"$a.log" 2>&1 &&
       "$rt" train "$a.pock" --data "$data" --epochs 1 --no-shuffle --save "$a.pkw" >>"$a.log" 2>&1 &&
       "$pock" export "$a.pock" --weights "$a.pkw" --onnx "$model" -o "$a.onnx" >>"$a.log" 2>&1 &&
       "$rt" run "$a.pock" --weights "$a.pkw" --data "$data" --scores >"$a.scores" 2>>"$a.log" &&
       "$py" "$src/tests/onnx_export_models.py" check "$a.onnx" "$model" "$d" "$a.scores" >>"$a.log" 2>&1
    then pass "$m-op$op: $(tail -1 "$a.log")"
    else fail "$m-op$op" "$(tail -c 600 "$a.log")"; fi
  done
done
finish
