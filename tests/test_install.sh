#!/bin/sh
# test_install.sh — `cmake --install` of a build into a temporary prefix: the files a user
# gets, the example program (examples/runtime) built against that prefix with
# find_package(Pock) and with pkg-config (shared and static libpockrt), each run on a tiny
# artifact compiled by the installed `pock`; the package's version check; and a prefix
# moved elsewhere still working (the package files are relocatable).
# usage: test_install.sh BUILD_DIR SOURCE_DIR        (exit 77: skipped)
set -u
BUILD=$1
SRC=$2
if ! command -v cmake >/dev/null 2>&1; then
  echo "SKIP test_install: cmake is not on PATH"
  exit 77
fi
# A sanitizer build's libpockrt.so needs the sanitizer runtime loaded first, which an
# ordinary program built against the installed package does not arrange.
if command -v readelf >/dev/null 2>&1 && [ -f "$BUILD/runtime/libpockrt.so" ] &&
  readelf -d "$BUILD/runtime/libpockrt.so" | grep -q 'libasan\|libubsan'; then
  echo "SKIP test_install: a sanitizer build (libpockrt.so links the sanitizer runtime)"
  exit 77
fi
T=$(mktemp -d /tmp/pk_install_XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
show() { sed 's/^/    /' "$1" | tail -n 15; }
# run WHAT CMD...: the command must succeed (its output in $T/out).
run() {
  what=$1
  shift
  if "$@" >"$T/out" 2>&1; then pass "$what"; return 0; fi
  fail "$what (exit $?)"
  show "$T/out"
  return 1
}
P=$T/prefix
D=$SRC/examples/digits

run "cmake --install into $P" cmake --install "$BUILD" --prefix "$P" || exit 1
for f in bin/pock bin/pock-rt bin/pock-rt-serve lib/libpockrt.so lib/libpockrt.a include/pock/pockrt.h \
  include/pock/pkrt_kernel.h include/pock/pkrt_status.h lib/pkgconfig/pockrt.pc lib/cmake/Pock/PockConfig.cmake \
  lib/cmake/Pock/PockConfigVersion.cmake share/pock/examples/runtime/train_digits.c; do
  if [ -f "$P/$f" ]; then pass "installed $f"; else fail "missing $f"; fi
done
# The public header must stand alone: nothing from the source tree.
cat >"$T/hdr.c" <<'EOF'
#include <pock/pockrt.h>
#include <string.h>
int main(void) {
  char err[128];
  pkrt_model *m;
  int rc = pkrt_model_open("/nonexistent.pock", NULL, &m, err, sizeof err);
  return !(rc == PKRT_ERR_IO && m == NULL && strstr(err, "nonexistent") &&
           strcmp(pkrt_status_name(PKRT_OK), "ok") == 0);
}
EOF
run "pockrt.h stands alone (C11, -Wall -Wextra -Werror) and links" \
  cc -std=c11 -Wall -Wextra -Werror -I"$P/include" "$T/hdr.c" -o "$T/hdr" -L"$P/lib" -lpockrt \
  -Wl,-rpath,"$P/lib" && run "the status codes and messages of the public API" "$T/hdr"

# A tiny artifact from the installed compiler, and a little data.
run "installed pock compiles the digits MLP" \
  "$P/bin/pock" compile "$D/models/mlp.json" --batch 16 -o "$T/mlp.pock" || exit 1
head -n 160 "$D/target_train.csv" >"$T/train.csv"
head -n 60 "$D/target_test.csv" >"$T/test.csv"
run "installed pock-rt info" "$P/bin/pock-rt" info "$T/mlp.pock"
run "installed pock-rt train" "$P/bin/pock-rt" train "$T/mlp.pock" --data "$T/train.csv" \
  --scale 0.0625 --epochs 2 --checkpoint "$T/rt.ckpt"

# example: ARTIFACT BINARY WHAT — trains 2 epochs, saves and restores a checkpoint.
example() {
  if [ ! -x "$2" ]; then fail "$3: $2 was not built"; return; fi
  if "$2" "$1" "$T/train.csv" "$T/test.csv" 2 "$T/ex.ckpt" >"$T/out" 2>&1 &&
    grep -q "^epoch 2/2 loss" "$T/out" && grep -q "(identical)$" "$T/out"; then
    pass "$3 trains, evaluates and restores its checkpoint"
  else
    fail "$3 run"
    show "$T/out"
  fi
}

# find_package(Pock) with CMAKE_PREFIX_PATH.
cp -r "$P/share/pock/examples/runtime" "$T/ex-cmake"
run "find_package(Pock): configure" cmake -S "$T/ex-cmake" -B "$T/ex-cmake/build" \
  -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release &&
  run "find_package(Pock): build" cmake --build "$T/ex-cmake/build"
example "$T/mlp.pock" "$T/ex-cmake/build/train_digits" "example (find_package)"
run "find_package(Pock): Pock::pockrt_static" cmake -S "$T/ex-cmake" -B "$T/ex-static" \
  -DCMAKE_PREFIX_PATH="$P" -DPOCK_EXAMPLE_STATIC=ON &&
  run "find_package(Pock): static build" cmake --build "$T/ex-static"
example "$T/mlp.pock" "$T/ex-static/train_digits" "example (find_package, static)"

# The version file: asking for a version this is not compatible with must fail.
mkdir "$T/ver"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(v LANGUAGES C)\nfind_package(Pock 9.0 REQUIRED)\n' \
  >"$T/ver/CMakeLists.txt"
if cmake -S "$T/ver" -B "$T/ver/build" -DCMAKE_PREFIX_PATH="$P" >"$T/out" 2>&1; then
  fail "find_package(Pock 9.0) succeeded against $(sed -n 's/^Version: //p' "$P/lib/pkgconfig/pockrt.pc")"
else
  pass "find_package(Pock 9.0) is refused by PockConfigVersion.cmake"
fi

# pkg-config, shared and static.
if command -v pkg-config >/dev/null 2>&1 && command -v make >/dev/null 2>&1; then
  cp -r "$P/share/pock/examples/runtime" "$T/ex-pc"
  if run "pkg-config: make (libpockrt.so)" env PKG_CONFIG_PATH="$P/lib/pkgconfig" make -C "$T/ex-pc" train_digits; then
    example "$T/mlp.pock" "$T/ex-pc/train_digits" "example (pkg-config, shared)"
  fi
  if run "pkg-config: make (libpockrt.a)" env PKG_CONFIG_PATH="$P/lib/pkgconfig" make -C "$T/ex-pc" train_digits_static; then
    example "$T/mlp.pock" "$T/ex-pc/train_digits_static" "example (pkg-config, static)"
    if command -v readelf >/dev/null 2>&1 && readelf -d "$T/ex-pc/train_digits_static" | grep -q 'libpockrt'; then
      fail "the static example still needs libpockrt.so"
    fi
  fi
else
  echo "SKIP pkg-config build: pkg-config or make is not on PATH"
fi

# Relocation: the same prefix under another name still serves find_package.
mv "$P" "$T/moved"
rm -rf "$T/ex-cmake/build"
run "moved prefix: configure" cmake -S "$T/ex-cmake" -B "$T/ex-cmake/build" \
  -DCMAKE_PREFIX_PATH="$T/moved" -DCMAKE_BUILD_TYPE=Release &&
  run "moved prefix: build" cmake --build "$T/ex-cmake/build"
example "$T/mlp.pock" "$T/ex-cmake/build/train_digits" "example (moved prefix)"

echo "$([ $fails -eq 0 ] && echo PASS || echo FAIL) test_install ($fails failures)"
[ $fails -eq 0 ]
