#!/usr/bin/env bash
# test_gpu_cublas_tune.sh — cuBLAS wins GPU tuning (issue 18), on the stand-in driver and
# libcublas (fixtures/mock_libcuda.c, mock_libcublas.c; ctest puts them first on
# LD_LIBRARY_PATH): `pock tune` of the digits MLP's first matmul for 'cuda -arch=sm_87'
# measures the cuBLAS candidate (ok; the generated kernel fails to load on the stand-in),
# and `pock compile --target 'cuda -arch=sm_87' --db` of the MLP makes that kernel a call
# of cublasSgemm_v2 in its manifest (`pock-rt info`); the other kernels keep their presets.
# No timing is asserted. Exit 77 without NVRTC.
#   test_gpu_cublas_tune.sh POCK POCK_RT SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") src=$(realpath "$3")
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1
M=$src/examples/digits/models/mlp.json
T="cuda -arch=sm_87"
# k0 of the MLP at batch 8: fc1's x · Wᵀ (the same workload as the compiled kernel's)
cat >fc1.te <<'TE'
x = placeholder((8, 64), f32)
w = placeholder((128, 64), f32)
k = reduce_axis(64)
y = compute((8, 128), (i, j) => sum(x[i, k] * w[j, k], k))
TE
# the preset first, then the externs: two trials measure both
"$pock" tune fc1.te --db t.db --target "$T" --trials 2 --confirm 0 --min-ms 1 >tune.out 2>&1
if grep -q "cannot load NVRTC" tune.out; then
  echo "SKIP: $(grep -m1 "cannot load NVRTC" tune.out)"
  exit 77
fi
expect tune_cublas_best 0 "best .* \(extern cublasSgemm_v2\)" cat tune.out
expect cublas_record_best 0 "^84e91d67baa2 +matmul_8x128x64_f32 +cuda -arch=sm_87 .* extern " \
  "$pock" db best t.db
expect compile_with_cublas 0 "wrote cublas.pock: [0-9]+ kernels \(1 tuned\)" \
  "$pock" compile "$M" --batch 8 --target "$T" --db t.db -o cublas.pock
expect manifest_calls_cublas 0 "externs +cublasSgemm_v2 in libcublas.so.13 .*\(kernels k0\)" \
  "$rt" info cublas.pock
expect k0_is_the_call 0 "k0 +workload 84e91d67baa26e12 .* calls extern 0" "$rt" info cublas.pock
finish
