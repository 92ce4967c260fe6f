#!/usr/bin/env bash
# test_gpu_train.sh — issue 18's acceptance on OpenCL (PoCL's CPU device in CI): the digits
# MLP and CNN compiled with `--target opencl` train 10 steps with `pock-rt train` to the
# same weights as the C target within 1e-4 (of each tensor's largest magnitude), and the
# steps change the weights; checkpoints resume and --weights starts as on C; `pock-rt info`
# shows the gpu object; what GPU artifacts do not support is refused by name; with NVRTC, a
# CUDA artifact carries the cubin and its PTX and, without a CUDA driver, is refused at
# load naming libcuda. Exit 77 without an OpenCL device.
#   test_gpu_train.sh POCK POCK_RT PKW_CLOSE SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") close=$(realpath "$3") src=$(realpath "$4")
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1
D=$src/examples/digits
data="--data $D/target_train.csv --scale 0.0625 --epochs 1 --no-shuffle"
if ! "$rt" gpu 2>&1 | grep -Eq '^opencl: [1-9][0-9]* device'; then
  echo "SKIP: no OpenCL device ($("$rt" gpu 2>&1 | head -1); Debian: pocl-opencl-icd)"
  exit 77
fi

for m in mlp cnn; do
  expect ${m}_compile_c 0 "wrote c.pock" "$pock" compile "$D/models/$m.json" --batch 4 -o c.pock
  expect ${m}_compile_opencl 0 "wrote cl.pock: [0-9]+ kernels" \
    "$pock" compile "$D/models/$m.json" --batch 4 --target opencl -o cl.pock
  expect ${m}_info 0 "gpu +opencl, buffers at 4096 bytes" "$rt" info cl.pock
  # the plan put every tensor and region at the recorded alignment
  "$pock" compile "$D/models/$m.json" --batch 4 --target opencl --dump-after artifact >man.json 2>&1
  expect ${m}_plan_aligned 0 "^aligned [1-9]" python3 -c 'import json, sys
m = json.load(open(sys.argv[1])); a = m["gpu"]["align"]
bad = [t["name"] for t in m["tensors"] if t["offset"] % a] + [r for r, v in m["regions"].items() if v % a]
print("misaligned %s" % bad if bad else "aligned %d" % len(m["tensors"]))' man.json
  expect ${m}_train_c 0 "stopped after 10 steps" "$rt" train c.pock $data --max-steps 10 --save c.pkw
  expect ${m}_train_opencl 0 "stopped after 10 steps" \
    "$rt" train cl.pock $data --max-steps 10 --save cl.pkw
  expect ${m}_train_opencl_1 0 "stopped after 1 step" \
    "$rt" train cl.pock $data --max-steps 1 --save one.pkw
  expect ${m}_weights_match 0 "max relative difference" "$close" cl.pkw c.pkw 1e-4 --relative
  # steps 2..10 moved the weights on the device (the match is not two untouched copies)
  expect ${m}_weights_moved 1 "max relative difference" "$close" cl.pkw one.pkw 1e-3 --relative
done

# Weights and optimizer state cross the device boundary: a checkpoint resumed, and a
# training run that starts from --weights, give the C target's results (the artifacts of
# the last model, the CNN).
for t in c cl; do
  expect ${t}_checkpoint 0 "checkpoint saved" \
    "$rt" train $t.pock $data --max-steps 5 --checkpoint $t.ckpt --checkpoint-every 5
  expect ${t}_resume 0 "stopped after" "$rt" train $t.pock $data --max-steps 5 --resume $t.ckpt \
    --save ${t}_resumed.pkw
  expect ${t}_from_weights 0 "stopped after 3 steps" \
    "$rt" train $t.pock $data --max-steps 3 --weights c.pkw --save ${t}_from.pkw
done
expect resumed_match 0 "max relative difference" "$close" cl_resumed.pkw c_resumed.pkw 1e-4 --relative
expect from_weights_match 0 "max relative difference" "$close" cl_from.pkw c_from.pkw 1e-4 --relative

M=$D/models/mlp.json
expect refuse_cache_frozen 1 "target 'opencl': --cache-frozen is for C targets only" \
  "$pock" compile "$M" --batch 4 --target opencl --cache-frozen -o x.pock
expect db_missing 1 "none.db: cannot open tuning database" \
  "$pock" compile "$M" --batch 4 --target opencl --db none.db -o x.pock
[ -e x.pock ] && fail no_artifact_on_refusal "x.pock was written" || pass no_artifact_on_refusal

# CUDA: NVRTC builds the cubin and PTX here when the toolkit is installed; running it needs
# the NVIDIA driver, and without one the load says so.
if "$pock" compile "$M" --batch 4 --target "cuda -arch=sm_87" -o cu.pock >out.txt 2>&1; then
  expect cuda_info 0 "cubin for sm_87.*sections .*kernels\.ptx [1-9]" \
    bash -c "'$rt' info cu.pock | tr '\n' ' '"
  if "$rt" gpu 2>&1 | grep -q '^cuda: none'; then
    expect cuda_no_driver 1 "cu.pock: cannot load the CUDA driver libcuda\.so\.1" \
      "$rt" train cu.pock $data --max-steps 1
  fi
else
  echo "SKIP cuda: $(tail -c 300 out.txt)"
fi
finish
