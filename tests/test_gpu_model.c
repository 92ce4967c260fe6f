/* test_gpu_model.c — the model executor on an OpenCL device (PoCL's CPU device in CI): a
 * GPU step allocates nothing in libpockrt (--wrap counts libpockrt's own calls; the OpenCL
 * driver's are its business) over training steps 2..8, evaluation and inference of the
 * digits MLP and CNN; reading weights and tensors brings the device's values back; and the
 * manifest's GPU checks: a device that needs a coarser alignment than the plan's, format 3
 * with a C target, a GPU target without the "gpu" object, an extern on a GPU kernel, a
 * launch with a zero block. Exit 77 without an OpenCL device. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_driver.h"
#include "pkrt.h"
#include "pock/pkrt_gpu.h"
#include "pock/pockrt.h"
#include "artifact_edit.h"

#define PK_TEST_CHECK_GOTO_DONE
#include "pk_test.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR"
#endif
#define DIGITS PK_SOURCE_DIR "/examples/digits"

#include "alloc_wrap.h"

static int compile(const char *model, const char *target, const char *out) {
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = model;
  o.batch = 8;
  o.target = target;
  o.out = out;
  FILE *log = fopen("/dev/null", "w");
  o.log = log;
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (s != PK_OK) printf("  compile %s for %s: %s\n", model, target, pk_ctx_error(ctx));
  if (log) fclose(log);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : -1;
}

static void feed(pkrt_model *m, int s) {
  int64_t b = pkrt_model_batch(m), f = pkrt_model_features(m);
  float *x = pkrt_model_input(m, NULL);
  int32_t labels[64];
  for (int64_t i = 0; i < b * f; i++) x[i] = (float)((i * 7 + s) % 17) / 16.0f;
  for (int64_t i = 0; i < b; i++) labels[i] = (int32_t)((i + s) % 10);
  pkrt_model_set_labels(m, labels, s == 5 ? b - 3 : b);
}

/* 8 steps on the GPU artifact and on the C one: the same losses, and the device's
 * weights (pkrt_model_tensor brings them back) equal the host's. Steps 2..8, eval and
 * infer make no allocation in libpockrt. */
static void steps(const char *what, const char *gpu_art, const char *c_art) {
  char err[512];
  pkrt_model *m = NULL, *c = NULL;
  CHECK(pkrt_model_open(gpu_art, NULL, &m, err, sizeof err) == 0, "open: %s", err);
  CHECK(pkrt_model_open(c_art, NULL, &c, err, sizeof err) == 0, "open C: %s", err);
  double lg = NAN, lc = NAN, worst = 0, first = NAN, ev = NAN;
  feed(m, 1);
  feed(c, 1);
  CHECK(pkrt_model_train_step(m, &lg) == 0 && pkrt_model_train_step(c, &lc) == 0,
        "step 1: %s %s", pkrt_model_error(m), pkrt_model_error(c));
  allocs = 0;
  int rc = 0;
  for (int s = 2; s <= 8 && rc == 0; s++) {
    feed(c, s);
    rc = pkrt_model_train_step(c, &lc);
    counting = 1;
    feed(m, s);
    if (rc == 0) rc = pkrt_model_train_step(m, &lg);
    counting = 0;
    if (fabs(lg - lc) > worst) worst = fabs(lg - lc);
    if (s == 2) first = lg;
  }
  counting = 1;
  if (rc == 0) rc = pkrt_model_eval_step(m, &ev);
  if (rc == 0) rc = pkrt_model_infer(m);
  counting = 0;
  CHECK(rc == 0, "a step failed: %s", pkrt_model_error(m));
  CHECK(allocs == 0, "steps 2..8, eval and infer made %ld allocations in libpockrt", allocs);
  CHECK(worst < 1e-4 && lg != first && isfinite(ev), "losses differ from the C target's by %g "
        "(step 2 %g, step 8 %g, eval %g)", worst, first, lg, ev);
  pkrt_tensor_info a, b;
  const char *name = strstr(what, "cnn") ? "fc.weight" : "fc1.weight";
  CHECK(pkrt_model_tensor(m, name, &a) == 0 && pkrt_model_tensor(c, name, &b) == 0, "tensor %s",
        name);
  int64_t n = 1;
  for (int d = 0; d < a.ndim; d++) n *= a.shape[d];
  double e = 0, big = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = ((const float *)a.data)[i], y = ((const float *)b.data)[i];
    if (fabs(x - y) > e) e = fabs(x - y);
    if (fabs(y) > big) big = fabs(y);
  }
  CHECK(e <= 1e-4 * big, "%s differs by %g (largest %g)", name, e, big);
  printf("PASS %s (steps 2..8 + eval + infer: 0 allocations; losses %.6f .. %.6f, within %.2g "
         "of C's)\n", what, first, lg, worst);
done:
  counting = 0;
  pkrt_model_close(m);
  pkrt_model_close(c);
}

static void set(cJSON *o, const char *key, cJSON *v) { cJSON_ReplaceItemInObject(o, key, v); }
static void coarse_device(cJSON *j) { set(cJSON_GetObjectItem(j, "gpu"), "align", cJSON_CreateNumber(64)); }
static void c_target(cJSON *j) { set(j, "target", cJSON_CreateString("c")); }
static void no_gpu(cJSON *j) { cJSON_DeleteItemFromObject(j, "gpu"); }
static void zero_block(cJSON *j) {
  cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "kernels"), 2);
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(k, "block"), 1, cJSON_CreateNumber(0));
}
static void extern_kernel(cJSON *j) {
  cJSON *x = cJSON_CreateObject();
  cJSON_AddStringToObject(x, "library", "libopenblas.so.0");
  cJSON_AddStringToObject(x, "symbol", PKRT_SGEMM_SYM);
  cJSON_AddStringToObject(x, "signature", PKRT_SGEMM_SIGNATURE);
  cJSON *xs = cJSON_CreateArray();
  cJSON_AddItemToArray(xs, x);
  set(j, "externs", xs);
  cJSON_AddNumberToObject(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "kernels"), 0), "extern", 0);
}

static void refusals(const char *art, int64_t device_align) {
  const struct {
    const char *name;
    void (*edit)(cJSON *);
    const char *want;
  } cases[] = {
      {"refuse_coarse_device", coarse_device, "needs buffers at multiples of"},
      {"refuse_format3_c_target", c_target, "format: 3, but target 'c' needs format 1 or 2"},
      {"refuse_no_gpu_object", no_gpu, "gpu: missing or not an object"},
      {"refuse_zero_block", zero_block, "kernels[2].block[1]: must be an integer in [1, "},
      {"refuse_opencl_extern", extern_kernel, "externs: OpenCL artifacts call no extern kernel"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (i == 0 && device_align <= 64) { /* this device takes any plan */
      printf("SKIP %s: the device's base alignment is %lld\n", cases[i].name,
             (long long)device_align);
      continue;
    }
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/edit%zu.pock", pk_test_tmpdir(), i);
    pkrt_model *m = NULL;
    int rc = rewrite(art, path, cases[i].edit) == 0 ? pkrt_model_open(path, NULL, &m, err, sizeof err) : -1;
    check(rc != 0 && !m && strstr(err, cases[i].want) && strstr(err, path), cases[i].name,
          "rc %d: %s", rc, err);
    pkrt_model_close(m);
  }
}

int main(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_gpu_info info;
  int n = 0;
  if (pkrt_gpu_list(rt, PKRT_GPU_OPENCL, &info, 1, &n) != PKRT_OK || n == 0) {
    printf("SKIP: no OpenCL device (%s)\n", n == 0 ? "none listed" : pkrt_ctx_error(rt));
    pkrt_ctx_free(rt);
    return 77;
  }
  pkrt_ctx_free(rt);
  if (pk_test_tmpdir_make("pk_gpu_model_") != 0) return 1;
  const char *models[2] = {"mlp", "cnn"};
  char gpu[2][512], c[2][512];
  for (int i = 0; i < 2; i++) {
    char model[512];
    snprintf(model, sizeof model, "%s/models/%s.json", DIGITS, models[i]);
    snprintf(gpu[i], sizeof gpu[i], "%s/%s_cl.pock", pk_test_tmpdir(), models[i]);
    snprintf(c[i], sizeof c[i], "%s/%s_c.pock", pk_test_tmpdir(), models[i]);
    if (compile(model, "opencl", gpu[i]) || compile(model, "c", c[i])) {
      printf("FAIL setup: compile\n");
      return 1;
    }
    steps(models[i], gpu[i], c[i]);
  }
  refusals(gpu[0], info.base_align);
  pk_test_tmpdir_remove();
  return pk_test_summary("test_gpu_model");
}
