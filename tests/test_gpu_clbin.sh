#!/usr/bin/env bash
# test_gpu_clbin.sh — an OpenCL artifact carries the program binary of the compiling
# machine's device (issue 18, PoCL's CPU device in CI): `pock compile --target opencl` stores
# it as section kernels.clbin with gpu.binary naming the device; `pock-rt train` loads it
# (and says so) to the weights of the source-only artifact (--no-device-binary); an artifact
# whose recorded driver differs, or whose binary the driver refuses (a broken header),
# builds the source and still trains to them. Without a device the compile says so in one
# line and writes the source only. Exit 77 without an OpenCL device.
#   test_gpu_clbin.sh POCK POCK_RT PKW_CLOSE PK_ARTIFACT_TOOL SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") close=$(realpath "$3") tool=$(realpath "$4")
src=$(realpath "$5")
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1
D=$src/examples/digits
M=$D/models/mlp.json
data="--data $D/target_train.csv --scale 0.0625 --epochs 1 --no-shuffle --max-steps 10"
if ! "$rt" gpu 2>&1 | grep -Eq '^opencl: [1-9][0-9]* device'; then
  echo "SKIP: no OpenCL device ($("$rt" gpu 2>&1 | head -1); Debian: pocl-opencl-icd)"
  exit 77
fi

expect compile_binary 0 "wrote cl.pock: .* bytes, OpenCL binary for [^ ]" \
  "$pock" compile "$M" --batch 4 --target opencl -o cl.pock
expect section_clbin 0 "^kernels\.clbin +[1-9]" "$tool" list cl.pock
expect info_binary 0 "gpu binary +OpenCL binary for .*: this device's \(used at load\)" \
  "$rt" info cl.pock
expect compile_source_only 0 "wrote src.pock" \
  "$pock" compile "$M" --batch 4 --target opencl --no-device-binary -o src.pock
no_clbin() {
  if "$tool" list "$2" | grep -q '^kernels\.clbin'; then fail "$1" "$2 has a kernels.clbin section"
  else pass "$1"; fi
}
no_clbin no_section_clbin src.pock
expect refuse_not_opencl 2 "target 'c': --no-device-binary is for OpenCL targets only" \
  "$pock" compile "$M" --batch 4 --no-device-binary -o c.pock

expect train_binary 0 "pock-rt: OpenCL binary for .* \(used\)" \
  "$rt" train cl.pock $data --save bin.pkw
expect train_source 0 "pock-rt: OpenCL source \(the artifact has no device binary\)" \
  "$rt" train src.pock $data --save src.pkw
expect binary_weights_match 0 "max abs difference" "$close" bin.pkw src.pkw 1e-6

# The sections of cl.pock, to re-pack with a changed manifest or binary (fresh checksums)
for s in manifest kernels weights kernels.clbin; do "$tool" extract cl.pock $s $s >/dev/null; done
python3 -c 'import json, sys
m = json.load(open("manifest")); m["gpu"]["binary"]["driver"] += "-other"
json.dump(m, open("manifest.other", "w"))
b = bytearray(open("kernels.clbin", "rb").read()); b[:16] = b"not a binary at!"
open("clbin.broken", "wb").write(b)'
"$tool" pack other.pock manifest=manifest.other kernels=kernels weights=weights \
  kernels.clbin=kernels.clbin >/dev/null
"$tool" pack broken.pock manifest=manifest kernels=kernels weights=weights \
  kernels.clbin=clbin.broken >/dev/null
expect info_other 0 "gpu binary .*driver .*-other\): device differs: built from source" \
  "$rt" info other.pock
expect train_other 0 "OpenCL binary for .* \(device differs: built from source\)" \
  "$rt" train other.pock $data --save other.pkw
expect other_weights_match 0 "max abs difference" "$close" other.pkw src.pkw 1e-6
expect train_broken 0 "OpenCL binary for .* \(refused: built from source\)" \
  "$rt" train broken.pock $data --save broken.pkw
expect broken_weights_match 0 "max abs difference" "$close" broken.pkw src.pkw 1e-6

# No OpenCL platform (the ICD loader finds no driver): the source only, said in one line
mkdir -p no-icd
expect compile_no_device 0 \
  "the artifact holds the OpenCL source only \(no device binary: no OpenCL device 0" \
  env OCL_ICD_VENDORS="$tmp/no-icd" OCL_ICD_FILENAMES= "$pock" compile "$M" --batch 4 \
  --target opencl -o nodev.pock
no_clbin nodev_no_section nodev.pock
finish
