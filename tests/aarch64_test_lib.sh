# aarch64_test_lib.sh — sourced by the tests that build for AArch64 and run under qemu
# (test_aarch64_qemu, test_remote_tune): exits 77 (ctest's skip) naming what is not
# installed, else sources cli_test_lib.sh and sets $dev, the device build directory
# (BINARY_DIR/aarch64, which scripts/test.sh builds before the suite).
#   bin=BINARY_DIR; . "$(dirname "$0")/aarch64_test_lib.sh"
missing=
command -v qemu-aarch64 >/dev/null || missing+=" qemu-user"
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=" gcc-aarch64-linux-gnu"
for l in libffi libcjson libsodium; do
  [ -f "/usr/lib/aarch64-linux-gnu/pkgconfig/$l.pc" ] || missing+=" $l-dev:arm64"
done
if [ -n "$missing" ]; then
  echo "SKIP: not installed:$missing (scripts/build-aarch64.sh --deps-only, as root)"
  exit 77
fi
. "$(dirname "${BASH_SOURCE[0]}")/cli_test_lib.sh"
dev=$bin/aarch64
