#!/usr/bin/env bash
# bench_train.sh — builds Pock if needed (BUILD_DIR, default build/) and runs
# bench/bench_train.py under the reference venv's Python (build-venv-onnx, else
# $POCK_ONNX_PYTHON, else /usr/bin/python3, which has PyTorch but no ONNX Runtime);
# arguments pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [ ! -x "$build/cli/pock" ]; then
  BUILD_DIR=$build scripts/build.sh
fi
# bench_train_step is a CMake target when bench/CMakeLists.txt lists it; build it if so.
cmake --build "$build" --target bench_train_step >/dev/null 2>&1 || true
py=/usr/bin/python3
for c in build-venv-onnx/bin/python "${POCK_ONNX_PYTHON:-}"; do
  if [ -n "$c" ] && [ -x "$c" ]; then py=$c; break; fi
done
exec "$py" bench/bench_train.py --build "$build" --python "$py" "$@"
