#!/usr/bin/env bash
# bench_train.sh — builds Pock if needed (BUILD_DIR, default build/) and runs
# bench/bench_train.py under the Python that has PyTorch; arguments pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [ ! -x "$build/cli/pock" ]; then
  BUILD_DIR=$build scripts/build.sh
fi
# bench_train_step is a CMake target when bench/CMakeLists.txt lists it; build it if so.
cmake --build "$build" --target bench_train_step >/dev/null 2>&1 || true
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
exec /usr/bin/python3 bench/bench_train.py --build "$build" "$@"
