#!/usr/bin/env bash
# test_targets_cli.sh — `pock compile --target` for every C form of the grammar: 'c
# -march=haswell' builds 32-byte vector kernels and records haswell's fingerprint, not the
# host's; an artifact for a target this host lacks is refused at load naming the missing
# feature; `pock te c --target` prints each width's code; a build past --build-timeout is
# an error naming the kernel. Usage: test_targets_cli.sh POCK POCK_RT SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
pockrt=$2
src=$3
model=$src/tests/data/graphs/mlp_small.json

if [ "$(uname -m)" != x86_64 ]; then
  echo "SKIP: the -march names here are x86-64's"
  exit 77
fi

# ---- pock te c: each width's vector code
te=$src/examples/te/matmul_512.te
sched=$src/examples/schedules/matmul_512.json
for pair in "x86-64 16" "haswell 32" "skylake-avx512 64"; do
  set -- $pair
  expect "te_c_$1" 0 "C codegen v[0-9]+, $2-byte vectors" "$pock" te c "$te" --schedule "$sched" --target "c -march=$1"
done
expect te_cuda_source 0 'extern "C" __global__ void k0' "$pock" te c "$te" --target 'cuda -arch=sm_90'
expect te_opencl_source 0 '__kernel void k0' "$pock" te c "$te" --target opencl
expect te_gpu_parallel_refused 1 'CPU parallel loop' "$pock" te c "$te" --schedule "$sched" --target opencl
expect te_run_gpu_refused 1 'needs the GPU runtime' "$pock" te run "$te" --target 'cuda -arch=sm_87'
expect compile_opencl 0 'wrote' "$pock" compile "$model" --batch 8 --target opencl -o "$tmp/g.pock"
expect compile_opencl_frozen_refused 1 "target 'opencl': --cache-frozen is for C targets only" \
  "$pock" compile "$model" --batch 8 --target opencl --cache-frozen -o "$tmp/g2.pock"
expect te_bad_target 2 "unknown option '-O3'" "$pock" te c "$te" --target 'c -O3'

# ---- compile for haswell: AVX2 kernels, haswell's fingerprint
expect compile_haswell 0 'wrote' "$pock" compile "$model" --batch 8 --target 'c -march=haswell' -o "$tmp/h.pock"
"$pock" compile "$model" --batch 8 --target 'c -march=haswell' --dump-after codegen >"$tmp/h.c" 2>/dev/null
grep -q '32-byte vectors' "$tmp/h.c" && pass haswell_source_32_bytes || fail haswell_source_32_bytes "$(head -1 "$tmp/h.c")"
"$pock" compile "$model" --batch 8 --target 'c -march=haswell' --dump-after artifact >"$tmp/h.json" 2>/dev/null
if grep -Eq '"target":[[:space:]]*"c -march=haswell"' "$tmp/h.json" && grep -q '"avx2"' "$tmp/h.json" &&
   ! grep -q '"avx512f"' "$tmp/h.json"; then pass haswell_fingerprint
else fail haswell_fingerprint "$(grep -A3 must_match "$tmp/h.json" | head -5)"; fi
if grep -q avx2 /proc/cpuinfo && grep -q fma /proc/cpuinfo; then
  expect haswell_artifact_loads 0 'c -march=haswell' "$pockrt" info "$tmp/h.pock"
fi

# ---- a target this host lacks: built anywhere, refused at load naming the feature
if grep -qw avx512f /proc/cpuinfo; then
  # the host has AVX-512: a made-up feature plays the missing one
  missing=pock_test_feature
  fake="{\"isa\":[\"avx2\",\"$missing\"]}"
  recorded="isa .*$missing" # the (faked) fingerprint is what the artifact demands
else
  missing='avx512[a-z_]*' # the first of the target's AVX-512 features
  fake=
  recorded="isa .*avx512f"
fi
expect compile_skylake 0 'wrote' env POCK_FAKE_FINGERPRINT="$fake" "$pock" compile "$model" --batch 8 \
  --target 'c -march=skylake-avx512' -o "$tmp/s.pock"
expect foreign_fingerprint_recorded 0 "$recorded" "$pockrt" info "$tmp/s.pock"
expect foreign_artifact_refused 1 "target mismatch: .*CPU feature '$missing', which this device lacks" \
  "$pockrt" run "$tmp/s.pock" --data /dev/null
expect foreign_artifact_refused_eval 1 "CPU feature '$missing'" "$pock" eval "$tmp/s.pock" --data /dev/null

# ---- the build time limit
expect build_timeout 1 'kernel k[0-9]+ .*time limit of 0.01 s' env POCK_CACHE_DIR="$tmp/cache" \
  "$pock" compile "$model" --batch 8 --build-timeout 0.01 -o "$tmp/t.pock"
expect build_timeout_usage 2 'build-timeout' "$pock" compile "$model" --build-timeout -1 -o "$tmp/t.pock"

finish
