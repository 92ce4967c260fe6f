#!/usr/bin/env bash
# gpu_ops.sh — correctness of every operator on a GPU machine (issue 18): generated kernels
# NVRTC-compiled and launched on CUDA device 0, and on OpenCL device 0 where one exists,
# against the reference interpreter (tests/gpu_device_test.h): every operator's forward
# and gradient kernel with its preset GPU schedule and 200 sampled configs per op class
# (POCK_TEST_SCALE=full; SCALE=ci for 20), plus the runtime's hand-written CUDA kernels
# and NVRTC for sm_80/87/90. The part of bench/gpu.sh that says "every op on the GPU".
# Needs the NVIDIA driver and the CUDA toolkit (libnvrtc); builds the tests into BUILD_DIR
# when they are missing (cmake and a C compiler then; or copy a build dir made on a machine
# of the same distribution). Writes OUT_DIR/gpu_ops.md (a table) and one log per test;
# exits 0 when every test ran and passed, 1 when one failed, 2 when no GPU was seen.
#
# Usage: [SCALE=full|ci] [TIMEOUT=600] bench/gpu_ops.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-gpu-ops-out}
scale=${SCALE:-full}
case $scale in full|ci) ;; *) echo "gpu_ops.sh: SCALE must be full or ci, not '$scale'" >&2; exit 2;; esac
tests="test_gpu_cuda test_gpu_nvrtc test_gpu_cuda_ops test_gpu_pocl"
missing=
for t in $tests; do [ -x "$build/tests/$t" ] || missing="$missing $t"; done
if [ -n "$missing" ]; then
  echo "gpu_ops.sh: building$missing into $build"
  [ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$build" -j"$(nproc)" --target $missing >/dev/null
fi
mkdir -p "$out"
# libnvrtc where the toolkit keeps it, when the loader path does not have it
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64
export POCL_CACHE_DIR=$out/pocl-cache
[ "$scale" = full ] && export POCK_TEST_SCALE=full
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
{
  echo "# GPU operator correctness ($(date -u +%Y-%m-%d), scale $scale)"
  echo
  echo "GPU: ${gpu:-none seen by nvidia-smi}. Command: \`SCALE=$scale bench/gpu_ops.sh $build $out\`."
  echo
  echo "| test | result | seconds | what ran |"
  echo "|---|---|---|---|"
} > "$out/gpu_ops.md"
status=0
for t in $tests; do
  start=$(date +%s%N)
  rc=0
  timeout "${TIMEOUT:-600}" "$build/tests/$t" > "$out/$t.log" 2>&1 || rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  secs=$((ms / 1000)).$((ms % 1000 / 100))
  case $rc in
    0) result=pass ;;
    77) result=$(grep -m1 -iE 'skip' "$out/$t.log" | cut -c1-160 || true); result=${result:-skipped} ;;
    124) result="timed out"; status=1 ;;
    *) result="FAILED (rc $rc, $(grep -c '^FAIL' "$out/$t.log" || true) FAIL lines)"; status=1 ;;
  esac
  # the tests' own counts: lines that say how many kernels or configs ran
  what=$(grep -E 'kernels|configs|device 0' "$out/$t.log" | sed 's/^ *//' | tr '\n' ' ' | cut -c1-600 | sed 's/|/\\|/g' || true)
  printf '| %s | %s | %s | %s |\n' "$t" "$result" "$secs" "$what" >> "$out/gpu_ops.md"
  echo "$t: $result ($secs s)"
done
cat "$out/gpu_ops.md"
if grep -q '^| test_gpu_cuda_ops | skipped' "$out/gpu_ops.md"; then
  echo "gpu_ops.sh: no CUDA GPU was used (see $out/test_gpu_cuda_ops.log)" >&2
  exit 2
fi
exit $status
