#!/usr/bin/env bash
# test_onnx_export_models.sh — issue 17's round trip on every example model (tiny, exported
# by PyTorch at opset 17: tests/fixtures/onnx-models): `pock compile` with the fixture's
# sparse scheme, `pock-rt train` over the fixture's batches in file order, `pock export`
# of the trained weights into the ONNX model, and onnxruntime running the exported model
# equals `pock-rt run --scores` within 1e-4 (and differs from the untrained model).
# Needs a Python with onnx and onnxruntime ($POCK_ONNX_PYTHON): else skipped (exit 77).
#   test_onnx_export_models.sh POCK POCK_RT SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") src=$(realpath "$3")
py=${POCK_ONNX_PYTHON:-}
if [ -z "$py" ] || ! "$py" -c 'import importlib.util as u, onnx
assert u.find_spec("onnxruntime")' >/dev/null 2>&1; then
  echo "SKIP: no Python with onnx and onnxruntime (POCK_ONNX_PYTHON; scripts/onnx_venv.sh)"
  exit 77
fi
. "$(dirname "$0")/cli_test_lib.sh"
for m in mobilenet_v2 resnet18 bert llama; do
  fx=$src/tests/fixtures/onnx-models/$m d=$tmp/$m
  mkdir -p "$d"
  spec=$(awk '!/^#/ {print $3; exit}' "$fx/cases.txt")
  "$py" "$src/tests/onnx_export_models.py" data "$fx" "$d" || { fail "$m" "data"; continue; }
  xs=$(ls "$d"/x*.npy | paste -sd, -)
  expect "${m}_compile" 0 "wrote" "$pock" compile "$fx/${m}_op17.onnx" --batch 4 \
    --sparse "$fx/$spec" -o "$d/m.pock"
  expect "${m}_train" 0 "trained 5 steps" "$rt" train "$d/m.pock" --data "$xs:$d/y.npy" \
    --epochs 1 --no-shuffle --save "$d/ft.pkw"
  expect "${m}_export" 0 "wrote .*ft.onnx" "$pock" export "$d/m.pock" --weights "$d/ft.pkw" \
    --onnx "$fx/${m}_op17.onnx" -o "$d/ft.onnx"
  "$rt" run "$d/m.pock" --weights "$d/ft.pkw" --data "$xs:$d/y.npy" --scores >"$d/scores.txt"
  if "$py" "$src/tests/onnx_export_models.py" check "$d/ft.onnx" "$fx/${m}_op17.onnx" "$d" \
      "$d/scores.txt" >"$d/check.txt" 2>&1 && grep -q '^PASS' "$d/check.txt"; then
    pass "${m}_onnxruntime_equals_pock_rt"
  else fail "${m}_onnxruntime_equals_pock_rt" "$(tail -c 600 "$d/check.txt")"; fi
  grep -h "max rel diff" "$d/check.txt"
done
finish
