#!/usr/bin/env bash
# gpu.sh — issue 18's run on a machine with an NVIDIA GPU, in one go of at most 8 minutes
# (with a built BUILD_DIR; building adds about a minute on 16 cores). Stages, each under
# its own time limit (60 + 150 + 60 + 180 s), in this order:
#   build  Pock into BUILD_DIR unless it is built there (cmake, a C compiler, pkg-config,
#          libffi, libsodium, libcjson, libsqlite3 and CL/cl.h; DEBS=DIR unpacks the .debs
#          in DIR into OUT_DIR/prefix first, for an image that has none of them)
#   gpu    nvidia-smi and `pock-rt gpu` must see a CUDA device: else stop here, exit 2
#   smoke  (60 s) the digits MLP built for the device's sm_NN trains 10 steps with pock-rt
#          to the C target's weights within 1e-4
#   ops    every operator's kernels on the GPU against the interpreter: bench/gpu_ops.sh
#          (SCALE=ci: 20 sampled configs per op class; SCALE=full for 200, about 5 minutes
#          more)
#   matmul fp32 matmul, the cuda target's preset, beside cuBLAS SGEMM at 1024³, 4096³ and
#          the digits MLP's training shapes, and conv2d 3×3 on the GPU beside the CPU path
#          (the C target's preset on one core) (bench_gpu_matmul)
#   train  the digits CNN and LARGEST (default resnet18) with a sparse (pockengine) and a
#          full spec: a Pock training step on the GPU beside PyTorch CUDA eager on the same
#          data (bench/bench_train.py --target cuda --torch-device cuda), and the CNN's
#          GPU weights after 10 steps against the C target's within 1e-4
# Prints the GPU, driver, date and command, and writes everything to OUT_DIR/gpu.md, ready
# for docs/performance.md; each stage's log is OUT_DIR/STAGE.log.
#
# Usage: [BUILD_DIR=build] [SCALE=ci|full] [LARGEST=resnet18] [DEBS=DIR] bench/gpu.sh [OUT_DIR]
# Exit: 0 every stage ran and passed; 1 a stage failed or timed out (gpu.md says which);
#       2 no NVIDIA GPU seen (the build ran, nothing was measured); 3 Pock cannot be built
#       here (what is missing is named).
# shellcheck disable=SC2317  # the stage functions run through `timeout bash -c`
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD_DIR:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=${1:-gpu-out}
scale=${SCALE:-ci}
largest=${LARGEST:-resnet18}
case $scale in ci|full) ;; *) echo "gpu.sh: SCALE must be ci or full, not '$scale'" >&2; exit 3;; esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
md=$out/gpu.md
command="bench/gpu.sh $*"
start=$(date +%s)
status=0

say() { echo "gpu.sh: $*"; }
elapsed() { echo $(( $(date +%s) - start )); }
# stage NAME LIMIT_S COMMAND: runs the command line (a function below, exported) under
# timeout with its output in OUT_DIR/NAME.log, and records the result
stage() {
  local name=$1 limit=$2 rc=0 t0
  t0=$(date +%s)
  say "[$name] (limit ${limit} s, at $(elapsed) s)"
  timeout "$limit" bash -c "$3" >"$out/$name.log" 2>&1 || rc=$?
  local secs=$(( $(date +%s) - t0 )) result
  case $rc in
    0) result=pass ;;
    124) result="timed out after $limit s"; status=1 ;;
    *) result="FAILED (exit $rc; $name.log)"; status=1 ;;
  esac
  printf '| %s | %s | %s |\n' "$name" "$result" "$secs" >>"$out/stages.md"
  say "[$name] $result ($secs s)"
  return 0
}

# ---- build ----
if [ -n "${DEBS:-}" ]; then
  prefix=$out/prefix
  for deb in "$DEBS"/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  export PATH=$prefix/usr/bin:$PATH
  export CPATH=$prefix/usr/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=$prefix/usr/lib/$multiarch${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$prefix/usr/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$prefix/usr/lib/$multiarch/pkgconfig:$prefix/usr/share/pkgconfig
  # .pc files name /usr as their prefix: point them at the unpacked tree
  export PKG_CONFIG_SYSROOT_DIR=$prefix
fi
if [ ! -x "$build/cli/pock" ] || [ ! -x "$build/bench/bench_gpu_matmul" ]; then
  missing=
  for t in cmake cc pkg-config; do command -v "$t" >/dev/null || missing="$missing $t"; done
  if command -v pkg-config >/dev/null; then
    for p in libffi libsodium libcjson sqlite3; do
      pkg-config --exists "$p" || missing="$missing $p"
    done
  fi
  if [ -n "$missing" ]; then
    say "cannot build Pock here: missing$missing (Debian: cmake gcc pkg-config libffi-dev" \
      "libsodium-dev libcjson-dev libsqlite3-dev opencl-c-headers; or DEBS=DIR with their .debs," \
      "or BUILD_DIR=a build made on the same distribution)" >&2
    exit 3
  fi
  say "building Pock into $build"
  if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
         cmake --build "$build" -j"$(nproc)" --target pock pock-rt pkw_close bench_gpu_matmul \
           bench_train_step test_gpu_cuda test_gpu_nvrtc test_gpu_cuda_ops test_gpu_pocl; } \
       >"$out/build.log" 2>&1; then
    say "cannot build Pock here: the build failed ($out/build.log):" >&2
    tail -5 "$out/build.log" >&2
    exit 3
  fi
fi
pock=$build/cli/pock
rt=$build/cli/pock-rt
close=$build/tests/pkw_close

# ---- the GPU ----
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
      | head -1 || true)
cuda_line=$("$rt" gpu 2>&1 | grep '^cuda:' || true)
if [ -z "$gpu" ] || ! echo "$cuda_line" | grep -Eq '^cuda: [1-9][0-9]* device'; then
  say "no NVIDIA GPU: nvidia-smi ${gpu:+sees $gpu}${gpu:-sees none}; pock-rt gpu: ${cuda_line:-no cuda line}"
  say "stopping before the GPU stages (exit 2): run this on a machine with an NVIDIA GPU"
  exit 2
fi
sm=$("$rt" gpu 2>&1 | sed -n '/^cuda:/,$p' | grep -o 'sm_[0-9]*' | head -1)
target="cuda -arch=${sm:-sm_90}"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64
# cuBLAS also ships in PyTorch's wheels (nvidia-cublas-cu12): the runtime looks there too
py=${PYTHON:-python3}
wheel_libs=$("$py" -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/*.so*")})))' \
  2>/dev/null || true)
[ -n "$wheel_libs" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$wheel_libs
export POCK_CACHE_DIR=$out/kernel-cache

printf '| stage | result | seconds |\n|---|---|---|\n' >"$out/stages.md"

# ---- stages ----
D=$root/examples/digits
digits_data="--data $D/target_train.csv --scale 0.0625 --epochs 1 --no-shuffle"
# weights_match MODEL: C and GPU artifacts train 10 steps to the same weights within 1e-4
weights_match() {
  local m=$1
  # shellcheck disable=SC2086
  "$pock" compile "$D/models/$m.json" --batch 4 -o "$out/$m-c.pock" &&
  "$pock" compile "$D/models/$m.json" --batch 4 --target "$target" -o "$out/$m-gpu.pock" &&
  "$rt" train "$out/$m-c.pock" $digits_data --max-steps 10 --save "$out/$m-c.pkw" &&
  "$rt" train "$out/$m-gpu.pock" $digits_data --max-steps 10 --save "$out/$m-gpu.pkw" &&
  "$close" "$out/$m-gpu.pkw" "$out/$m-c.pkw" 1e-4 --relative
}
matmul() {
  "$build/bench/bench_gpu_matmul" --reps 20 1024x1024x1024 4096x4096x4096 \
    32x256x784tb 256x784x32ta 32x784x256 128x3072x768
}
train() {
  weights_match cnn || return 1
  "$py" bench/bench_train.py --build "$build" --python "$py" --target "$target" \
    --torch-device cuda --models "cnn,$largest" --schemes pockengine,full --batches 8 \
    --threads 1 --rounds 1 --warmup 2 --steps 5 --tools pock,torch --work "$out/train"
}
export pock rt close D digits_data target out root build py largest scale
export -f weights_match matmul train
stage smoke 60 'weights_match mlp'
# shellcheck disable=SC2016  # expanded by the stage's bash, from the exported variables
stage ops 150 'SCALE=$scale TIMEOUT=120 bench/gpu_ops.sh "$build" "$out/ops"'
stage matmul 60 matmul
stage train 180 train

{
  echo "# GPU run ($(date -u +'%Y-%m-%d %H:%M UTC'))"
  echo
  echo "GPU: $gpu (nvidia-smi); $cuda_line. Target: \`$target\`."
  echo "Command: \`$command\` (SCALE=$scale, LARGEST=$largest), $(elapsed) s in all."
  echo
  cat "$out/stages.md"
  echo
  echo "## Operators on the GPU (bench/gpu_ops.sh)"
  echo
  [ -f "$out/ops/gpu_ops.md" ] && sed -n '/^| test/,$p' "$out/ops/gpu_ops.md"
  echo
  echo "## fp32 matmul: preset vs cuBLAS SGEMM; conv2d: GPU vs the CPU path (bench_gpu_matmul)"
  echo
  grep -E '^(\||fp32)' "$out/matmul.log" || echo "(no table: see matmul.log)"
  echo
  echo "## Training steps: Pock on the GPU beside PyTorch CUDA eager (bench_train.py)"
  echo
  grep -E '^\|' "$out/train.log" || echo "(no table: see train.log)"
  echo
  echo "Weights after 10 steps, GPU vs C target (pkw_close, 1e-4 relative):"
  grep -m1 "max relative difference" "$out/smoke.log" | sed 's/^/- mlp: /' || echo "- mlp: -"
  grep -m1 "max relative difference" "$out/train.log" | sed 's/^/- cnn: /' || echo "- cnn: -"
} >"$md"
cat "$md"
exit $status
