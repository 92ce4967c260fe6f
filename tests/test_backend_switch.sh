#!/usr/bin/env bash
# test_backend_switch.sh — issue 21's backend switching: with a tuning database where the
# OpenBLAS sgemm extern won the digits MLP's matmul tasks (trained with Adam: an SGD update
# is fused into its weight gradient's matmul, which sgemm cannot compute, leaving the MLP
# no plain matmul; Adam's update is not) (extern_db_fixture: records
# committed directly, nothing timed), `pock compile --db` makes an artifact whose matmul
# steps call cblas_sgemm through libpockrt's libffi path: the schedule dump says so,
# `pock-rt info` lists the extern and its library, libpockrt has no DT_NEEDED on a BLAS,
# and 10 training steps match the artifact without the database (within float rounding:
# sgemm sums in another order). A stand-in library counts the calls (the artifact really
# calls the extern), and a database naming a library this device lacks gives an artifact
# that is refused at load, naming the library.
#   test_backend_switch.sh POCK POCK_RT EXTERN_DB_FIXTURE LIBPOCKRT SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") fixture=$(realpath "$3") libpockrt=$(realpath "$4")
src=$(realpath "$5")
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1
D=$src/examples/digits
model=$D/models/mlp.json
data="--data $D/target_train.csv --scale 0.0625 --epochs 1 --max-steps 10 --no-shuffle"
if ! python3 -c 'import ctypes; ctypes.CDLL("libopenblas.so.0")' 2>/dev/null; then
  echo "SKIP: no libopenblas.so.0 on this machine (scripts/install-deps.sh installs it)"
  exit 77
fi

# close NAME A.pkw B.pkw: every tensor within 1e-4 of its largest magnitude
close() {
  if python3 -c 'import sys, struct
def read(path):
    d = open(path, "rb").read()
    assert d[:4] == b"PKW1", path
    (n,), pos, out = struct.unpack_from("<I", d, 4), 8, {}
    for _ in range(n):
        (l,) = struct.unpack_from("<H", d, pos); name = d[pos + 2:pos + 2 + l].decode(); pos += 2 + l
        dt, rank = struct.unpack_from("<BB", d, pos); pos += 2
        shape = struct.unpack_from("<%dq" % rank, d, pos); pos += 8 * rank
        cnt = 1
        for s in shape: cnt *= s
        fmt, size = ("<%df" % cnt, 4) if dt == 1 else ("<%dd" % cnt, 8)
        out[name] = struct.unpack_from(fmt, d, pos); pos += cnt * size
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
assert list(a) == list(b)
for k in a:
    scale = max(abs(v) for v in b[k]) or 1.0
    err = max(abs(x - y) for x, y in zip(a[k], b[k])) / scale
    assert err <= 1e-4, "%s: %g" % (k, err)' "$2" "$3" >diff.txt 2>&1
  then pass "$1"; else fail "$1" "$(tail -c 300 diff.txt)"; fi
}

expect fixture 0 "^[1-9][0-9]* extern tasks" "$fixture" blas.db "$model" 4 libopenblas.so.0 - adam
expect compile_plain 0 "wrote plain.pock" "$pock" compile "$model" --optimizer adam --batch 4 -o plain.pock
expect compile_extern 0 "wrote blas.pock" "$pock" compile "$model" --optimizer adam --batch 4 --db blas.db -o blas.pock
expect schedule_dump 0 "extern record [0-9a-f]+ .*calls cblas_sgemm in libopenblas\.so\.0" \
  "$pock" compile "$model" --optimizer adam --batch 4 --db blas.db --dump-after schedule
expect info_lists_extern 0 "externs +cblas_sgemm in libopenblas\.so\.0 \(kernels k[0-9]" \
  "$rt" info blas.pock
expect info_plain 0 "externs +none" "$rt" info plain.pock
if command -v readelf >/dev/null; then
  if readelf -d "$libpockrt" | grep NEEDED | grep -qi blas; then
    fail no_dt_needed "$(readelf -d "$libpockrt" | grep NEEDED)"
  else pass no_dt_needed; fi
fi
expect train_plain 0 "stopped after 10 steps" "$rt" train plain.pock $data --save plain.pkw
expect train_extern 0 "stopped after 10 steps" "$rt" train blas.pock $data --save blas.pkw
close weights_match plain.pkw blas.pkw

# A stand-in cblas_sgemm (plain loops) that counts its calls: the artifact calls it.
cat >fake.c <<'C'
#include <stdio.h>
static long calls;
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  (void)order;
  calls++;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float s = 0;
      for (int p = 0; p < k; p++)
        s += (ta == 112 ? a[p * lda + i] : a[i * lda + p]) * (tb == 112 ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
    }
}
__attribute__((destructor)) static void report(void) { fprintf(stderr, "fake sgemm calls %ld\n", calls); }
C
if ${CC:-cc} -shared -fPIC -O2 -o "$tmp/libfake_sgemm.so" fake.c 2>cc.txt; then
  expect fake_fixture 0 "extern tasks" "$fixture" fake.db "$model" 4 "$tmp/libfake_sgemm.so" - adam
  expect fake_compile 0 "wrote fake.pock" "$pock" compile "$model" --optimizer adam --batch 4 --db fake.db -o fake.pock
  expect fake_called 0 "fake sgemm calls [1-9][0-9]*" "$rt" train fake.pock $data --save fake.pkw
  close fake_weights_match plain.pkw fake.pkw
else fail fake_library "$(head -c 300 cc.txt)"; fi

# A library this device lacks: compiling needs no library; loading refuses, naming it.
expect missing_fixture 0 "extern tasks" "$fixture" missing.db "$model" 4 libpock_missing_blas.so.0 - adam
expect missing_compile 0 "wrote missing.pock" \
  "$pock" compile "$model" --optimizer adam --batch 4 --db missing.db -o missing.pock
expect missing_refused 1 "calls cblas_sgemm in libpock_missing_blas\.so\.0 .*cannot load" \
  "$rt" train missing.pock $data
finish
