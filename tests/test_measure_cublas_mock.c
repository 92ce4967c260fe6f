/* test_measure_cublas_mock.c — the measurer on a CUDA target measures the cuBLAS
 * candidate (issue 18), against the stand-in driver and libcublas (fixtures/mock_libcuda.c,
 * mock_libcublas.c, first on LD_LIBRARY_PATH) so that every machine with NVRTC runs it:
 * the task space's cuBLAS candidate of the digits MLP's first matmul is checked against
 * the interpreter on the device and timed with device events (ok, the stand-in's 1 ms per
 * call); a library that computes a wrong result (the stand-in's MOCK_CUBLAS_WRONG=1) is
 * wrong, naming the element; a missing libcublas is a runtime error naming it; the CPU's
 * cblas_sgemm on a CUDA target and cuBLAS on a task it does not compute are illegal; the
 * candidate is re-timed in rounds; the worker never holds the driver (one thread).
 * PASS/FAIL; 77 without NVRTC (a CUDA measurer needs it for its kernels). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_measurer.h"
#include "pk_search.h"

static int failures;

#define CHECK(cond, ...)              \
  do {                                \
    bool ok_ = (cond);                \
    printf(ok_ ? "PASS " : "FAIL ");  \
    printf(__VA_ARGS__);              \
    printf("\n");                     \
    if (!ok_) failures++;             \
  } while (0)

/* The digits MLP's fc1 (x · Wᵀ, batch 8): kernel k0 of its CUDA artifact. */
static const char *const FC1_TE =
    "x = placeholder((8, 64), f32)\n"
    "w = placeholder((128, 64), f32)\n"
    "k = reduce_axis(64)\n"
    "y = compute((8, 128), (i, j) => sum(x[i, k] * w[j, k], k))\n";
static const char *const ADD_TE =
    "A = placeholder((64,), f32)\n"
    "B = placeholder((64,), f32)\n"
    "C = compute((64,), (i) => A[i] + B[i])\n";

static int thread_count(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static const char *msg(const pk_measurement *m) { return m->error ? m->error : "(no message)"; }

static pk_status task_of(pk_ctx *ctx, const char *te, const pk_target *t, pk_task *out) {
  pk_te_program *p;
  pk_status s = pk_te_parse(ctx, te, strlen(te), "task.te", &p);
  return s == PK_OK ? pk_task_for_target(ctx, p, t, out) : s;
}

/* A measurer for t; 77 (skip) when NVRTC is missing, 1 on another failure, else 0. */
static int new_measurer(pk_ctx *ctx, const pk_target *t, pk_measurer **m) {
  pk_measure_settings set;
  pk_measure_settings_default(&set);
  set.min_ns = 2000000; /* the stand-in's events: 1 ms a call, so 5 calls */
  set.target = t;
  pk_status s = pk_measurer_new(ctx, &set, m);
  if (s == PK_ERR_UNSUPPORTED && strstr(pk_ctx_error(ctx), "NVRTC")) {
    printf("SKIP: %s\n", pk_ctx_error(ctx));
    return 77;
  }
  if (s != PK_OK) printf("FAIL pk_measurer_new for %s: %s\n", t->text, pk_ctx_error(ctx));
  return s == PK_OK ? 0 : 1;
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  pk_ctx *ctx = pk_ctx_new();
  pk_target *t;
  pk_task fc1, add;
  pk_space *sp;
  if (pk_target_parse(ctx, "cuda -arch=sm_87", NULL, &t) != PK_OK ||
      task_of(ctx, FC1_TE, t, &fc1) != PK_OK || task_of(ctx, ADD_TE, t, &add) != PK_OK ||
      pk_space_new(ctx, &fc1, &sp) != PK_OK) {
    printf("FAIL the target and tasks: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  pk_measurer *m;
  int rc = new_measurer(ctx, t, &m);
  if (rc) return rc;

  /* the space's candidate, its library the default soname list (the stand-in is the first) */
  CHECK(pk_space_nexterns(sp) == 1 && !strcmp(pk_space_extern(sp, 0)->extern_sym, PK_CUBLAS_SYM),
        "the space of a CUDA matmul offers cuBLAS");
  pk_candidate cublas = *pk_space_extern(sp, 0), missing = cublas, cblas = cublas;
  missing.extern_lib = "libcublas-missing.so.99";
  cblas.extern_sym = PK_SGEMM_SYM;
  pk_candidate cands[3] = {cublas, missing, cblas};
  pk_measurement out[3];
  CHECK(pk_measurer_run(m, &fc1, cands, 3, out) == PK_OK, "pk_measurer_run returns OK");
  CHECK(out[0].status == PK_MEAS_OK && out[0].timing.repeats >= 5 &&
            out[0].timing.median_ns == 1e6 && out[0].gflops > 0 && !out[0].launch,
        "cuBLAS checked and timed on the device: %s, %d calls, median %g ns: %s",
        pk_meas_status_name(out[0].status), out[0].timing.repeats, out[0].timing.median_ns,
        msg(&out[0]));
  CHECK(out[1].status == PK_MEAS_RUNTIME_ERROR &&
            strstr(msg(&out[1]), "cannot load libcublas (tried libcublas-missing.so.99)"),
        "no libcublas: %s, naming it: %s", pk_meas_status_name(out[1].status), msg(&out[1]));
  CHECK(out[2].status == PK_MEAS_ILLEGAL && strstr(msg(&out[2]), "cublasSgemm_v2 only"),
        "cblas_sgemm on a CUDA target: %s: %s", pk_meas_status_name(out[2].status), msg(&out[2]));
  pk_measurement other;
  CHECK(pk_measurer_run(m, &add, &cublas, 1, &other) == PK_OK &&
            other.status == PK_MEAS_ILLEGAL && strstr(msg(&other), "does not compute this task"),
        "cuBLAS on an add: %s: %s", pk_meas_status_name(other.status), msg(&other));
  pk_confirmation conf[1];
  CHECK(pk_measurer_confirm(m, &fc1, &cublas, 1, 3, conf) == PK_OK && conf[0].rounds == 3 &&
            conf[0].median_ns == 1e6,
        "cuBLAS re-timed in 3 rounds (got %d, median %g ns)", conf[0].rounds, conf[0].median_ns);
  CHECK(thread_count(pk_measurer_worker_pid(m)) == 1, "the worker still has one thread");
  pk_measurer_free(m);

  /* the fault switch reaches the measuring processes through the worker, forked at new */
  setenv("MOCK_CUBLAS_WRONG", "1", 1);
  rc = new_measurer(ctx, t, &m);
  unsetenv("MOCK_CUBLAS_WRONG");
  if (rc) return rc;
  CHECK(pk_measurer_run(m, &fc1, &cublas, 1, out) == PK_OK && out[0].status == PK_MEAS_WRONG &&
            strstr(msg(&out[0]), "cuBLAS sgemm 8x128x64 on Mock Orin") &&
            strstr(msg(&out[0]), "element [0, 0]"),
        "a libcublas computing a wrong result: %s: %s", pk_meas_status_name(out[0].status),
        msg(&out[0]));
  pk_measurer_free(m);
  pk_space_free(sp);
  pk_ctx_free(ctx);
  printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
