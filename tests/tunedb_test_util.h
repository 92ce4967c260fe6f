/* tunedb_test_util.h — shared by the tuning-database tests: PASS/FAIL reporting, a
 * scratch directory, and made-up workloads, fingerprints and records (real ids). */
#ifndef TUNEDB_TEST_UTIL_H
#define TUNEDB_TEST_UTIL_H

#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_tunedb.h"

/* unused by the fixture program, which shares the makers only */
__attribute__((unused)) static int failures;
__attribute__((unused)) static int test_failed;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      printf("FAIL %s: ", test_name);                      \
      printf(__VA_ARGS__);                                 \
      printf(" (line %d)\n", __LINE__);                    \
      test_failed = 1;                                     \
      goto done;                                           \
    }                                                      \
  } while (0)

/* A pk_* call that must succeed; on failure prints the context's message. */
#define CHECK_OK(ctx, call) CHECK((call) == PK_OK, "%s: %s", #call, pk_ctx_error(ctx))

typedef void (*test_fn)(const char *test_name, const char *dir);

static inline void run_test(const char *name, test_fn fn, const char *dir) {
  test_failed = 0;
  fn(name, dir);
  if (test_failed) failures++;
  else printf("PASS %s\n", name);
}

static inline char *scratch_dir(void) {
  static char dir[] = "/tmp/pock-tunedb-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(1);
  }
  return dir;
}

static inline void remove_scratch(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static inline char *hex_sha256(pk_ctx *ctx, const char *text) {
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(text, strlen(text), hex);
  return pk_strdup(ctx, hex);
}

/* A workload with a real key (SHA-256 of its text); n makes distinct ones. */
static inline pk_task make_task(pk_ctx *ctx, int n) {
  pk_task t;
  memset(&t, 0, sizeof t);
  t.canonical = pk_sprintf(ctx,
                           "# pock-te canonical v1\nA = placeholder((%d, 64), f32)\n"
                           "B = placeholder((64, 32), f32)\nk = reduce_axis(64)\n"
                           "C = compute((%d, 32), (i, j) => sum(A[i, k] * B[k, j], k))\n",
                           16 * n, 16 * n);
  t.workload = hex_sha256(ctx, t.canonical);
  t.name = pk_sprintf(ctx, "matmul_%dx32x64_f32", 16 * n);
  t.target = "c";
  t.cls = PK_TASK_MATMUL;
  t.flops = 2.0 * 16 * n * 32 * 64;
  t.weight = 1;
  return t;
}

/* A fingerprint keyed like pk_target_fp_detect's: SHA-256("<target>\n<must_match>"). */
static inline pk_target_fp make_fp(pk_ctx *ctx, const char *target, const char *isa_json) {
  pk_target_fp fp;
  fp.target = target;
  fp.must_match = pk_sprintf(ctx, "{\"arch\":\"x86_64\",\"isa\":%s}", isa_json);
  fp.informative = "{\"cores\":8,\"cpu\":\"Test CPU\"}";
  fp.key = hex_sha256(ctx, pk_sprintf(ctx, "%s\n%s", fp.target, fp.must_match));
  return fp;
}

/* Record `trial` of a run: distinct trace per trial; OK records take median_ns. */
static inline pk_record make_record(pk_ctx *ctx, const pk_task *t, const pk_target_fp *fp, int64_t run,
                             int64_t trial, pk_meas_status status, double median_ns,
                             pk_cand_kind kind, const char *compiler) {
  pk_record r;
  memset(&r, 0, sizeof r);
  r.workload = t->workload;
  r.target_key = fp->key;
  r.cand.kind = kind;
  if (kind == PK_CAND_EXTERN) {
    r.cand.extern_lib = "libopenblas.so.0";
    r.cand.extern_sym = "cblas_sgemm";
    r.cand.extern_sig = "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)";
    r.cand.trace_hash = hex_sha256(ctx, pk_sprintf(ctx, "extern:%s %s %s %lld", r.cand.extern_lib,
                                                   r.cand.extern_sym, r.cand.extern_sig,
                                                   (long long)trial));
  } else {
    r.cand.trace = pk_sprintf(ctx, "{\"steps\":[{\"factor\":%lld,\"step\":\"split\"}],\"version\":1}",
                              (long long)trial);
    r.cand.knobs = pk_sprintf(ctx, "{\"tile_i\":%lld}", (long long)trial);
    r.cand.trace_hash = hex_sha256(ctx, r.cand.trace);
  }
  r.meas.status = status;
  if (status == PK_MEAS_OK) {
    r.meas.timing.median_ns = median_ns;
    r.meas.timing.min_ns = median_ns * 0.97;
    r.meas.timing.stddev_ns = median_ns * 0.01;
    r.meas.timing.repeats = 25;
    r.meas.gflops = t->flops / median_ns;
  } else {
    r.meas.error = pk_sprintf(ctx, "%s in trial %lld", pk_meas_status_name(status), (long long)trial);
  }
  r.trial = trial;
  r.run_id = run;
  r.compiler = compiler ? compiler : "gcc (Debian 12.2.0-14) 12.2.0";
  r.flags = "-O3 -march=native -fPIC -fvisibility=hidden";
  r.codegen_version = 2;
  r.pock_version = "0.1.0";
  r.time_unix = 1700000000 + trial;
  r.host = "testhost";
  r.features = "[1.5,2,3]";
  r.measure_settings = "{\"min_ns\":50000000,\"timeout_s\":10}";
  pk_record_make_id(ctx, &r);
  return r;
}

static inline char *db_path(pk_ctx *ctx, const char *dir, const char *name) {
  return pk_sprintf(ctx, "%s/%s", dir, name);
}

#endif
