#!/bin/sh
# aarch64-qemu-cc.sh — the C compiler of an AArch64 device build's codegen tests under
# qemu-aarch64 (tests/aarch64.cmake): the cross compiler, which runs on the host when an
# emulated test starts it. -march=native, which only a compiler running on the device can
# resolve, becomes the compiler's default CPU (armv8-a: every AArch64 CPU runs it).
for a; do
  shift
  [ "$a" = -march=native ] || set -- "$@" "$a"
done
exec aarch64-linux-gnu-gcc "$@"
