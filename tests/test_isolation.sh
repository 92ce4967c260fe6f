#!/usr/bin/env bash
# test_isolation.sh — what ships to a fleet device runs alone: the runtime's programs, copied
# into an empty directory with no compiler on PATH (and an empty environment), train the
# digits CNN from an artifact built by `pock compile`; libpockrt, the programs and the
# artifact's kernel object need only the allowed libraries (ELF DT_NEEDED); and under
# `strace -f -e trace=execve` the only program executed is the one started.
#
# usage: test_isolation.sh SRC POCK ARTIFACT_TOOL ISOLATION_TRAIN LIBPOCKRT_SO [POCK_RT [EXAMPLE]]
# (POCK_RT: cli/pock_rt.c; EXAMPLE: examples/runtime's train_digits; "" when not built)
# Exit 77 (skipped) without strace or readelf.
set -uo pipefail
src=$1 pock=$2 tool=$3 trainer=$4 librt=$5 pockrt=${6:-} example=${7:-}
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }
for t in strace readelf; do
  command -v "$t" >/dev/null || { echo "SKIP test_isolation: $t is not installed (scripts/install-deps.sh)"; exit 77; }
done
strace_bin=$(command -v strace)
if ! "$strace_bin" -f -qq -e trace=execve -o /dev/null /bin/true 2>/dev/null; then
  echo "SKIP test_isolation: strace cannot trace here (ptrace not permitted in this container?)"
  exit 77
fi
for f in "$pock" "$tool" "$trainer" "$librt" ${pockrt:+"$pockrt"} ${example:+"$example"}; do
  [ -f "$f" ] || { echo "FAIL setup: $f is not built"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- the artifact, built with the compiler (not part of what ships) ---
mkdir "$tmp/build"
if ! "$pock" compile "$src/examples/digits/models/cnn.json" --batch 32 -o "$tmp/build/cnn.pock" \
    >"$tmp/build/compile.log" 2>&1; then
  fail compile "$(tail -3 "$tmp/build/compile.log")"
  exit 1
fi
"$tool" extract "$tmp/build/cnn.pock" kernels "$tmp/build/kernels.so" || { fail extract "no kernel object"; exit 1; }

# --- dynamic dependencies against the allow-list ---
# Runtime and its programs: libc, libdl, libm, libffi, cJSON, libsodium (+ libpthread and
# the dynamic loader on older glibc). Kernel objects: libc and libm only.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
check_needed() { # NAME FILE REGEX
  local name=$1 file=$2 allow=$3 bad=() lib
  if readelf -d "$file" | grep -q 'libasan\|libubsan'; then
    echo "SKIP test_isolation: a sanitizer build ($name links the sanitizer runtime)"; exit 77
  fi
  while read -r lib; do
    [[ $lib =~ $allow ]] || bad+=("$lib")
  done < <(needed "$file")
  if [ ${#bad[@]} -eq 0 ]; then pass "needed_$name ($(needed "$file" | tr '\n' ' '))"
  else fail "needed_$name" "not allowed: ${bad[*]}"; fi
}
rt_allow='^(libc|libdl|libm|libpthread|libffi|libcjson|libsodium)\.so\.[0-9]+$|^ld-linux[-a-z0-9_]*\.so\.[0-9]+$'
check_needed libpockrt "$librt" "$rt_allow"
check_needed kernels "$tmp/build/kernels.so" '^(libc|libm)\.so\.[0-9]+$'
check_needed isolation_train "$trainer" "^libpockrt\.so(\.[0-9]+)*\$|$rt_allow"
[ -n "$pockrt" ] && check_needed pock-rt "$pockrt" "$rt_allow"
[ -n "$example" ] && check_needed example "$example" "^libpockrt\.so(\.[0-9]+)*\$|$rt_allow"

# --- alone in an empty directory: no compiler, no environment, one execve ---
fleet="$tmp/fleet"
mkdir "$fleet"
cp "$trainer" "$fleet/isolation_train"
cp "$librt" "$fleet/$(basename "$librt")"
soname=$(readelf -d "$librt" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$soname" ] && [ "$soname" != "$(basename "$librt")" ] && cp "$librt" "$fleet/$soname"
cp "$tmp/build/cnn.pock" "$src/examples/digits/target_train.csv" "$src/examples/digits/target_test.csv" "$fleet/"
[ -n "$pockrt" ] && cp "$pockrt" "$fleet/pock-rt"
[ -n "$example" ] && cp "$example" "$fleet/train_digits"
for c in cc gcc clang tcc; do
  if PATH=/nonexistent command -v "$c" >/dev/null 2>&1; then fail no_compiler "$c is still found"; fi
done

# LD_LIBRARY_PATH: a program linked in the build tree has a RUNPATH into it; on a device
# the library sits next to the program (the no_build_tree check proves which one loads).
run_alone() { # NAME ARGS... : runs ./ARGS in $fleet under strace with PATH=/nonexistent
  local name=$1; shift
  local log="$tmp/$name.strace"
  (cd "$fleet" && env -i PATH=/nonexistent HOME="$fleet" LD_LIBRARY_PATH="$fleet" \
     "$strace_bin" -f -qq -e trace=execve,openat -o "$log" "./$1" "${@:2}") >"$tmp/$name.out" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then fail "$name" "exit $rc: $(tail -5 "$tmp/$name.out")"; return; fi
  pass "${name}_runs ($(grep -E 'loss|steps' "$tmp/$name.out" | tail -1))"
  local n
  n=$(grep -c 'execve(' "$log")
  if [ "$n" -eq 1 ] && grep -q "execve(\"./$1\"" "$log"; then pass "${name}_one_execve"
  else fail "${name}_one_execve" "$n execve calls: $(grep 'execve(' "$log" | head -5)"; fi
  # Every library it opened comes from the system or the directory it was copied to:
  # never the build tree.
  local leaked
  leaked=$(grep -E 'openat\(.*\.so[."]' "$log" | grep -v ENOENT | grep -F -e "$src" -e "$(dirname "$librt")" || true)
  if [ -z "$leaked" ]; then pass "${name}_no_build_tree"
  else fail "${name}_no_build_tree" "$(echo "$leaked" | head -3)"; fi
}

run_alone isolation_train isolation_train cnn.pock target_train.csv 2
if [ -n "$pockrt" ]; then
  run_alone pock_rt pock-rt train cnn.pock --data target_train.csv --epochs 2 --scale 0.0625
fi
if [ -n "$example" ]; then
  run_alone example train_digits cnn.pock target_train.csv target_test.csv 2 digits.ckpt
fi

if [ $fails -ne 0 ]; then echo "test_isolation: $fails failed"; exit 1; fi
echo "test_isolation: all passed"
