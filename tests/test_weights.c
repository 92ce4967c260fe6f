/* test_weights.c — the .pkw weights file: round trip, exact bytes, every error the reader
 * reports, and a fuzz loop over mutated files (no crash, no leak). Prints PASS/FAIL. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pkrt.h"
#include "pk_test.h"

static void test_round_trip(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  float w[6] = {1, 2, 3, 4, 5, 6};
  double b[2] = {-0.5, 1e300};
  int64_t iv[1] = {42};
  pkrt_wtensor t[3] = {
      {"fc.weight", PKRT_DTYPE_F32, 2, {2, 3}, w},
      {"fc.bias", PKRT_DTYPE_F64, 1, {2}, b},
      {"scalar", PKRT_DTYPE_I64, 0, {0}, iv},
  };
  const char *p = pk_test_path("rt.pkw");
  CHECK(pkrt_weights_write(rt, p, t, 3) == PKRT_OK, "write: %s", pkrt_ctx_error(rt));
  /* The exact bytes of the documented layout. */
  size_t n;
  unsigned char *bytes = pk_test_read_file(p, &n);
  size_t want = 8 + (2 + 9 + 2 + 16 + 24) + (2 + 7 + 2 + 8 + 16) + (2 + 6 + 2 + 0 + 8);
  CHECK(bytes && n == want, "file is %zu bytes, want %zu", n, want);
  CHECK(memcmp(bytes, "PKW1\3\0\0\0\x09\0fc.weight\x01\x02\x02\0\0\0\0\0\0\0\x03", 30) == 0,
        "header bytes differ");
  free(bytes);
  pkrt_arena *a = pkrt_arena_new(0);
  pkrt_wtensor *r;
  int cnt;
  CHECK(pkrt_weights_read(rt, a, p, &r, &cnt) == PKRT_OK, "read: %s", pkrt_ctx_error(rt));
  CHECK(cnt == 3, "count %d", cnt);
  CHECK(strcmp(r[0].name, "fc.weight") == 0 && r[0].dtype == PKRT_DTYPE_F32 && r[0].ndim == 2 &&
            r[0].shape[0] == 2 && r[0].shape[1] == 3 && memcmp(r[0].data, w, sizeof w) == 0,
        "tensor 0 differs");
  CHECK(strcmp(r[1].name, "fc.bias") == 0 && memcmp(r[1].data, b, sizeof b) == 0, "tensor 1");
  CHECK(r[2].ndim == 0 && *(const int64_t *)r[2].data == 42, "scalar tensor");
  CHECK(((uintptr_t)r[0].data & 63) == 0, "data not 64-byte aligned");
  /* No temp file is left behind. */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", pk_test_tmpdir());
  CHECK(system(cmd) != 0, "temporary file left in %s", pk_test_tmpdir());
  pkrt_arena_free(a);
  pkrt_ctx_free(rt);
  printf("PASS %s\n", __func__);
}

static void expect_parse_error(pkrt_ctx *rt, const void *b, size_t n, const char *needle,
                               const char *label) {
  pkrt_arena *a = pkrt_arena_new(0);
  pkrt_wtensor *r;
  int cnt;
  pkrt_status st = pkrt_weights_parse(rt, a, "w.pkw", b, n, &r, &cnt);
  if (st != PKRT_ERR_INPUT || !strstr(pkrt_ctx_error(rt), needle)) {
    printf("FAIL test_errors %s: status %d, message '%s', want '%s'\n", label, st,
           pkrt_ctx_error(rt), needle);
    failures++;
  }
  pkrt_arena_free(a);
}

static void test_errors(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  int f0 = failures;
  expect_parse_error(rt, "PKW2\0\0\0\0", 8, "not a weights file", "magic");
  expect_parse_error(rt, "PKW1\1\0", 6, "truncated", "count");
  expect_parse_error(rt, "PKW1\xff\xff\xff\x7f", 8, "truncated", "huge count");
  unsigned char good[] = "PKW1\1\0\0\0\1\0a\1\1\2\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
  size_t glen = 8 + 2 + 1 + 2 + 8 + 4; /* shape (2) f32 but only one element's bytes */
  expect_parse_error(rt, good, glen, "truncated in tensor 'a' data", "data");
  unsigned char b2[64];
  memcpy(b2, good, glen);
  b2[11] = 9; /* dtype */
  expect_parse_error(rt, b2, glen, "unknown dtype 9", "dtype");
  memcpy(b2, good, glen);
  b2[12] = 9; /* rank */
  expect_parse_error(rt, b2, glen, "rank 9", "rank");
  memcpy(b2, good, glen);
  b2[8] = 0; /* name length 0 */
  expect_parse_error(rt, b2, glen, "name of 0 bytes", "empty name");
  memcpy(b2, good, glen);
  b2[20] = 0x80; /* shape[0] negative */
  expect_parse_error(rt, b2, glen, "negative dim", "negative dim");
  /* shape 2^62 x 2^62 overflows. */
  unsigned char ov[] = "PKW1\1\0\0\0\1\0a\1\2\0\0\0\0\0\0\0\x40\0\0\0\0\0\0\0\x40";
  expect_parse_error(rt, ov, sizeof ov - 1, "truncated", "overflow");
  /* Two tensors with the same name. */
  unsigned char dup[] = "PKW1\2\0\0\0\1\0a\1\0\0\0\0\0\1\0a\1\0\0\0\0\0";
  expect_parse_error(rt, dup, sizeof dup - 1, "duplicate tensor name 'a'", "duplicate");
  unsigned char trail[] = "PKW1\1\0\0\0\1\0a\1\0\0\0\0\0X";
  expect_parse_error(rt, trail, sizeof trail - 1, "unexpected bytes", "trailing");
  /* Writer refuses what the reader would refuse. */
  float v = 1;
  pkrt_wtensor t[2] = {{"x", PKRT_DTYPE_F32, 0, {0}, &v}, {"x", PKRT_DTYPE_F32, 0, {0}, &v}};
  if (pkrt_weights_write(rt, pk_test_path("dup.pkw"), t, 2) != PKRT_ERR_INPUT ||
      !strstr(pkrt_ctx_error(rt), "duplicate")) {
    printf("FAIL test_errors writer duplicate: %s\n", pkrt_ctx_error(rt));
    failures++;
  }
  t[1].name = "y";
  t[1].dtype = PKRT_DTYPE_BOOL;
  if (pkrt_weights_write(rt, pk_test_path("bool.pkw"), t, 2) != PKRT_ERR_INPUT) {
    printf("FAIL test_errors writer bool dtype accepted\n");
    failures++;
  }
  if (access(pk_test_path("dup.pkw"), F_OK) == 0 || access(pk_test_path("bool.pkw"), F_OK) == 0) {
    printf("FAIL test_errors: a refused write left a file\n");
    failures++;
  }
  /* Missing file: an I/O error naming the path. */
  pkrt_arena *a = pkrt_arena_new(0);
  pkrt_wtensor *r;
  int cnt;
  if (pkrt_weights_read(rt, a, pk_test_path("missing.pkw"), &r, &cnt) != PKRT_ERR_IO ||
      !strstr(pkrt_ctx_error(rt), "missing.pkw")) {
    printf("FAIL test_errors missing file: %s\n", pkrt_ctx_error(rt));
    failures++;
  }
  pkrt_arena_free(a);
  pkrt_ctx_free(rt);
  if (failures == f0) printf("PASS %s\n", __func__);
}

/* xorshift: deterministic mutations. */
static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void test_fuzz(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  float w[12];
  for (int i = 0; i < 12; i++) w[i] = (float)i;
  pkrt_wtensor t[3] = {{"a", PKRT_DTYPE_F32, 2, {3, 4}, w},
                       {"bb", PKRT_DTYPE_F32, 1, {4}, w},
                       {"c", PKRT_DTYPE_F64, 1, {2}, w}};
  const char *p = pk_test_path("fuzz.pkw");
  CHECK(pkrt_weights_write(rt, p, t, 3) == PKRT_OK, "write: %s", pkrt_ctx_error(rt));
  size_t n;
  unsigned char *orig = pk_test_read_file(p, &n);
  unsigned char *m = malloc(n + 16);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  int ok = 0, bad = 0;
  for (int it = 0; it < 20000; it++) {
    memcpy(m, orig, n);
    size_t len = n;
    int k = 1 + (int)(rng(&s) % 4);
    for (int j = 0; j < k; j++) {
      switch (rng(&s) % 4) {
      case 0: m[rng(&s) % len] ^= (unsigned char)(1u << (rng(&s) % 8)); break;
      case 1: m[rng(&s) % len] = (unsigned char)rng(&s); break;
      case 2: len = rng(&s) % (len + 1); break;
      default: m[rng(&s) % len] = (unsigned char)(rng(&s) % 2 ? 0xff : 0); break;
      }
      if (len == 0) break;
    }
    pkrt_arena *a = pkrt_arena_new(0);
    pkrt_wtensor *r;
    int cnt;
    pkrt_status st = pkrt_weights_parse(rt, a, "fuzz", m, len, &r, &cnt);
    if (st == PKRT_OK) {
      ok++;
      /* Whatever was accepted must be consistent: every tensor's bytes inside the file. */
      size_t total = 0;
      for (int i = 0; i < cnt; i++) {
        int64_t ne = 1;
        for (int d = 0; d < r[i].ndim; d++) ne *= r[i].shape[d];
        total += (size_t)ne * pkrt_dtype_size(r[i].dtype);
      }
      if (total > len) {
        printf("FAIL test_fuzz: accepted %zu data bytes from a %zu-byte file\n", total, len);
        failures++;
        pkrt_arena_free(a);
        break;
      }
    } else {
      bad++;
      if (!*pkrt_ctx_error(rt)) {
        printf("FAIL test_fuzz: error without a message\n");
        failures++;
      }
    }
    pkrt_arena_free(a);
  }
  free(m);
  free(orig);
  pkrt_ctx_free(rt);
  printf("PASS %s (%d accepted, %d refused)\n", __func__, ok, bad);
}

int main(void) {
  if (pk_test_tmpdir_make("pk_test_weights.") != 0) return 1;
  test_round_trip();
  test_errors();
  test_fuzz();
  pk_test_tmpdir_remove();
  printf(failures ? "FAIL test_weights (%d)\n" : "PASS test_weights\n", failures);
  return failures != 0;
}
