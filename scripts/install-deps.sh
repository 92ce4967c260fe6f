#!/usr/bin/env bash
# install-deps.sh — installs the Debian packages Pock builds and tests with, only those
# missing (run as root on Debian 12; a no-op when everything is there).
set -euo pipefail
packages=(build-essential cmake pkg-config libsqlite3-dev libcjson-dev libffi-dev
          libopenblas-dev libsodium-dev libprotobuf-c-dev protobuf-c-compiler)
# Tests: strace (test_isolation: no program executed), clang + its libFuzzer runtime
# (scripts/fuzz.sh, test_fuzz_artifact_60s; both skip without them).
packages+=(strace clang libclang-rt-14-dev)
# Tests: the venv of the ONNX reference tools (scripts/onnx_venv.sh: onnx, onnxruntime).
packages+=(python3-venv)
# Tests: headless Chromium renders the HTML reports (scripts/report-screenshot.sh: the
# tuning report, issue 22's sparse-search report; both skip without it).
packages+=(chromium)
# AArch64 cross builds and their tests under qemu (issue 19, scripts/build-aarch64.sh,
# test_aarch64_qemu): the cross compiler and qemu-user here; the :arm64 -dev packages
# (dpkg --add-architecture arm64) by `build-aarch64.sh --deps-only` at the end.
packages+=(gcc-aarch64-linux-gnu qemu-user)
# GPU devices (issue 18): OpenCL's C headers build libpockrt (which dlopens the ICD loader
# and the CUDA driver, linking neither); the ICD loader and PoCL run test_gpu_opencl on the CPU.
packages+=(opencl-c-headers ocl-icd-opencl-dev ocl-icd-libopencl1 pocl-opencl-icd)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: need root to install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
"$(dirname "$0")/build-aarch64.sh" --deps-only  # issue 19: the :arm64 libraries libpockrt links
