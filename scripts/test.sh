#!/usr/bin/env bash
# test.sh — installs what is missing, builds, and runs the whole test suite: first the te/,
# runtime/ and codegen unit tests under ASan+UBSan+LSan, then every test in a normal build
# (its ctest summary is the last thing printed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
# test_random_graph's kernels, shared by the two stages (the generated C is the same).
export POCK_TEST_KERNEL_CACHE="$PWD/build-kernel-cache"

BUILD_DIR=build-asan scripts/build.sh -DPOCK_SANITIZE=ON
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L sanitize --output-on-failure -j"$jobs"

# The ONNX checks' reference (onnx, onnxruntime from PyPI, in a venv of their own): the
# tests that need it skip, saying why, where PyPI cannot be reached.
if scripts/onnx_venv.sh "$PWD/build-venv-onnx"; then
  export POCK_ONNX_PYTHON="$PWD/build-venv-onnx/bin/python"
else
  echo "test.sh: no ONNX reference venv (PyPI unreachable?): onnxruntime checks will skip"
fi
BUILD_DIR=build scripts/build.sh
# The AArch64 device build (issue 19: its unit tests and remote tuning run under qemu) is
# built here like the host's, so that its tests time what they test, not the cross build.
# Where its tools are missing, or it fails, the tests skip or report it themselves.
if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then
  BUILD_DIR="$PWD/build/aarch64" scripts/build-aarch64.sh --no-install ||
    echo "test.sh: the AArch64 device build failed: test_aarch64_qemu will say why"
fi
ctest --test-dir build --output-on-failure -j"$jobs"
