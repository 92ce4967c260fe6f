#!/bin/sh
# test_gpu_link.sh — GPU support keeps libpockrt shippable: neither libpockrt.so nor pock-rt
# names the OpenCL ICD loader, the CUDA driver or cuBLAS in DT_NEEDED (all dlopened), and
# libpockrt.so stripped stays <= 200 KB (docs/runtime.md); `pock-rt gpu` lists what it sees
# of each API, or why nothing, and exits 0. Exit 77 without readelf/strip.
# usage: test_gpu_link.sh LIBPOCKRT_SO POCK_RT [BUILD_TYPE]
# (the size is checked in optimised builds without sanitizers: Debug and ASan code is larger)
set -u
lib=$1 rt=$2 build_type=${3:-RelWithDebInfo}
for t in readelf strip; do
  command -v "$t" >/dev/null || { echo "SKIP test_gpu_link: $t is not installed"; exit 77; }
done
fails=0
for f in "$lib" "$rt"; do
  bad=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -i -E 'opencl|cuda|nvrtc|cublas')
  if [ -z "$bad" ]; then echo "PASS no_gpu_dt_needed $(basename "$f")"
  else echo "FAIL no_gpu_dt_needed $(basename "$f"): $bad"; fails=$((fails + 1)); fi
done
tmp=$(mktemp /tmp/pk_gpu_link_XXXXXX)
trap 'rm -f "$tmp"' EXIT
strip -o "$tmp" "$lib"
size=$(wc -c <"$tmp" | tr -d ' ')
if readelf -d "$lib" | grep -q 'libasan\|libubsan'; then
  echo "SKIP libpockrt_stripped_size: a sanitizer build ($size bytes)"
elif ! echo "$build_type" | grep -q -x -E 'RelWithDebInfo|Release|MinSizeRel'; then
  echo "SKIP libpockrt_stripped_size: a $build_type build ($size bytes)"
elif [ "$size" -le 204800 ]; then echo "PASS libpockrt_stripped_size $size bytes (<= 200 KB)"
else echo "FAIL libpockrt_stripped_size: $size bytes > 200 KB"; fails=$((fails + 1)); fi
# The dlopen names really are in the library (the GPU code is linked, not dropped).
for s in libOpenCL.so.1 libcuda.so.1; do
  if grep -q "$s" "$tmp"; then echo "PASS dlopens_$s"
  else echo "FAIL dlopens_$s: the name is not in libpockrt"; fails=$((fails + 1)); fi
done
# pock-rt gpu: one line per API whatever is installed (a missing library is a reason, not a
# failure); arguments are a usage error.
out=$("$rt" gpu 2>&1); rc=$?
if [ "$rc" -eq 0 ] && echo "$out" | grep -q '^opencl: ' && echo "$out" | grep -q '^cuda: '; then
  echo "PASS pock_rt_gpu"; echo "$out" | sed 's/^/    /'
else echo "FAIL pock_rt_gpu: exit $rc"; echo "$out" | sed 's/^/    /'; fails=$((fails + 1)); fi
"$rt" gpu extra >/dev/null 2>&1; rc=$?
if [ "$rc" -eq 2 ]; then echo "PASS pock_rt_gpu_usage"
else echo "FAIL pock_rt_gpu_usage: exit $rc, want 2"; fails=$((fails + 1)); fi
[ "$fails" -eq 0 ]
