#!/usr/bin/env bash
# demo.sh — the main job: installs what is missing, builds, then compiles every example
# tensor expression to C, runs it against the reference interpreter, and benchmarks the
# matmul against OpenBLAS. (The fine-tuning demo replaces this once the training-graph
# compiler lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=build scripts/build.sh
for f in examples/te/*.te; do
  echo "== pock te run $f"
  build/cli/pock te run "$f"
done
echo "== pock te run examples/te/matmul_512.te --bench"
build/cli/pock te run examples/te/matmul_512.te --bench
echo "== the same TE with a schedule trace (docs/schedule.md)"
build/cli/pock te run examples/te/matmul_512.te --schedule examples/schedules/matmul_512.json --bench
