#!/usr/bin/env bash
# test_aarch64_qemu.sh — Pock on AArch64 under qemu-user (issue 19). Builds the AArch64
# device build (scripts/build-aarch64.sh --no-install, into BINARY_DIR/aarch64) and runs its
# te/, runtime/ and codegen/ unit tests under qemu-aarch64 (ctest -LE slow); then
# cross-compiles the digits CNN for a Cortex-A78AE on this host, checks this host refuses
# it naming the arch, trains it 10 steps with the AArch64 pock-rt under qemu and the same
# model compiled for this host 10 steps here, and compares the weights (within 1e-5).
# (qemu-user's /proc/cpuinfo is the host's x86 one: the AArch64 pock-rt accepting the
# artifact shows it reads the device's features from the hwcaps, runtime/hwcap.c.)
# Timings under qemu mean nothing: none is reported. Skipped (77) where qemu-aarch64, the
# cross compiler or the :arm64 libraries are not installed (scripts/build-aarch64.sh
# --deps-only installs them).
#   test_aarch64_qemu.sh POCK POCK_RT PKW_CLOSE SOURCE_DIR BINARY_DIR
pock=$(realpath "$1") rt=$(realpath "$2") close=$(realpath "$3") src=$(realpath "$4") bin=$(realpath "$5")

. "$(dirname "$0")/aarch64_test_lib.sh" # skip (77) without qemu/cross tools; $dev
expect device_build 0 "" env BUILD_DIR="$dev" nice "$src/scripts/build-aarch64.sh" --no-install
expect unit_tests_under_qemu 0 "100% tests passed" ctest --test-dir "$dev" -LE slow --output-on-failure
grep -E "^ *[0-9]+/[0-9]+ Test" "$tmp/out" | sed -E 's/ +[0-9.]+ sec$//' # (no timings)

d=$src/examples/digits
compile() { "$pock" compile "$d/models/cnn.json" --sparse "$d/specs/cnn_full.json" --batch 16 "$@"; }
train() { # train RUNNER... ARTIFACT OUT.pkw: 10 steps in file order, one thread
  local n=$#
  "${@:1:n-2}" train "${@:n-1:1}" --data "$d/source_train.csv" --scale 0.0625 --epochs 1 \
    --max-steps 10 --no-shuffle --threads 1 --save "${@:n:1}"
}
expect compile_host 0 "wrote" compile -o "$tmp/host.pock"
expect compile_a78ae 0 "wrote" compile --target 'c -mcpu=cortex-a78ae' --cc aarch64-linux-gnu-gcc \
  -o "$tmp/a78ae.pock"
# NEON's 16-byte vectors from the target's description, whatever this host's are
expect a78ae_16_byte_vectors 0 "C codegen v[0-9]+, 16-byte vectors" \
  compile --target 'c -mcpu=cortex-a78ae' --cc aarch64-linux-gnu-gcc --dump-after codegen \
  -o "$tmp/dump.pock"
expect a78ae_fingerprint 0 "fingerprint +arch aarch64, isa asimd asimddp asimdhp fphp" \
  "$rt" info "$tmp/a78ae.pock"
if [ "$(uname -m)" != aarch64 ]; then
  expect host_refuses_a78ae 1 "target mismatch: fingerprint.must_match.arch: .*'aarch64', this device is '$(uname -m)'" \
    "$rt" train "$tmp/a78ae.pock" --data "$d/source_train.csv" --epochs 1
fi
expect train_host 0 "stopped after 10 steps" train "$rt" "$tmp/host.pock" "$tmp/host.pkw"
expect train_a78ae_under_qemu 0 "stopped after 10 steps" \
  train qemu-aarch64 "$dev/cli/pock-rt" "$tmp/a78ae.pock" "$tmp/a78ae.pkw"
expect same_weights_1e-5 0 "max abs difference" "$close" "$tmp/host.pkw" "$tmp/a78ae.pkw" 1e-5
cat "$tmp/out"
# (and training moved them: the same within 1e-5 is not "both unchanged")
expect weights_trained 1 "max abs difference" "$close" "$d/models/cnn.pkw" "$tmp/a78ae.pkw" 1e-4
finish
