#!/usr/bin/env bash
# test_gpu_tune.sh — issue 18's tuning on OpenCL (PoCL's CPU device in CI): `pock tune` of
# the digits MLP with `--target opencl` and one trial per task stores its records under the
# OpenCL fingerprint (api and device version must-match, the device informative);
# `pock compile --target opencl --db` builds them ("N tuned"), and the tuned artifact trains
# 10 steps to the C target's weights within 1e-4; `cuda -arch=...` without a CUDA device
# is refused naming why. No timing is asserted. Exit 77 without an OpenCL device.
#   test_gpu_tune.sh POCK POCK_RT PKW_CLOSE SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") close=$(realpath "$3") src=$(realpath "$4")
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1
D=$src/examples/digits
M=$D/models/mlp.json
data="--data $D/target_train.csv --scale 0.0625 --epochs 1 --no-shuffle"
if ! "$rt" gpu 2>&1 | grep -Eq '^opencl: [1-9][0-9]* device'; then
  echo "SKIP: no OpenCL device ($("$rt" gpu 2>&1 | head -1); Debian: pocl-opencl-icd)"
  exit 77
fi

expect tune_opencl 0 "done: [1-9][0-9]* new records \(0 failed\) over [1-9][0-9]* tasks" \
  "$pock" tune "$M" --batch 4 --target opencl --db t.db --trials 1 --confirm 0 --min-ms 1
expect records_under_opencl_fingerprint 0 "^ok [1-9][0-9]* records" python3 -c 'import sqlite3, sys, json
db = sqlite3.connect(sys.argv[1])
rows = db.execute("select t.target, t.must_match, t.informative, r.measure_settings, r.timing_method, "
                  "r.arch, r.launch_dims from records r join targets t on t.key = r.target_key").fetchall()
bad = [r for r in rows if r[0] != "opencl" or json.loads(r[1]).get("api") != "opencl"
       or not json.loads(r[1]).get("device_version", "").startswith("OpenCL")
       or "device" not in json.loads(r[2]) or "device events" not in r[3]
       or r[4] != "device events" or r[5] != "opencl" or len(json.loads(r[6])["block"]) != 3]
print("bad %r" % (bad[:1],) if bad or not rows else "ok %d records" % len(rows))' t.db
# the records are the device's: another device version is another fingerprint
expect other_device_untuned 0 "\(0 tuned\)" env POCK_FAKE_FINGERPRINT='{"device_version":"OpenCL 1.2 other"}' \
  "$pock" compile "$M" --batch 4 --target opencl --db t.db -o other.pock
expect compile_tuned 0 "wrote tuned.pock: ([0-9]+) kernels \(\1 tuned\)" \
  "$pock" compile "$M" --batch 4 --target opencl --db t.db -o tuned.pock
expect compile_c 0 "wrote c.pock" "$pock" compile "$M" --batch 4 -o c.pock
expect train_c 0 "stopped after 10 steps" "$rt" train c.pock $data --max-steps 10 --save c.pkw
expect train_tuned 0 "stopped after 10 steps" "$rt" train tuned.pock $data --max-steps 10 --save t.pkw
expect tuned_weights_match 0 "max relative difference" "$close" t.pkw c.pkw 1e-4 --relative

if ! "$rt" gpu 2>&1 | grep -Eq '^cuda: [1-9][0-9]* device'; then
  expect cuda_needs_gpu 1 "target 'cuda -arch=sm_87': .*this machine has none" \
    "$pock" tune "$M" --batch 4 --target "cuda -arch=sm_87" --db cu.db --trials 1
  [ -e cu.db ] && fail cuda_no_db "cu.db was created" || pass cuda_no_db
fi
finish
