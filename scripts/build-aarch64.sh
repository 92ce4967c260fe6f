#!/usr/bin/env bash
# build-aarch64.sh — cross-builds what runs on an AArch64 Linux device (Jetson, Raspberry Pi
# OS 64-bit): libpockrt, pock-rt, pock-rt-serve (remote tuning), and the te/, runtime/ and
# codegen/ unit tests (POCK_DEVICE_ONLY), into BUILD_DIR (default build-aarch64/), with Debian's
# gcc-aarch64-linux-gnu and cmake/aarch64-linux-gnu.cmake. First installs, as root, what
# is missing: the cross compiler, qemu-user, and — after `dpkg --add-architecture arm64` —
# the :arm64 -dev packages libpockrt links (libffi, cJSON, libsodium).
#   scripts/build-aarch64.sh [--no-install | --deps-only] [cmake configure arguments...]
# --no-install: install nothing (fail, naming what is missing); --deps-only: install, no build.
# BUILD_TARGETS="pock-rt pock-rt-serve" builds only those.
# Then `ctest --test-dir build-aarch64` runs the tests under qemu-aarch64 (docs/targets.md).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=build
case ${1:-} in
  --no-install) mode=no-install; shift ;;
  --deps-only) mode=deps-only; shift ;;
esac
build=${BUILD_DIR:-build-aarch64}

packages=(gcc-aarch64-linux-gnu qemu-user libffi-dev:arm64 libcjson-dev:arm64 libsodium-dev:arm64)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$mode" = no-install ]; then
    echo "build-aarch64: missing ${missing[*]} (run scripts/build-aarch64.sh --deps-only as root)" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "build-aarch64: need root to install ${missing[*]}" >&2
    exit 1
  fi
  echo "build-aarch64: installing ${missing[*]}"
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ "$mode" = deps-only ] && exit 0

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" -DPOCK_DEVICE_ONLY=ON "$@" >/dev/null
# BUILD_TARGETS: only these (e.g. pock-rt-serve for the remote-tuning test), else all
cmake --build "$build" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
