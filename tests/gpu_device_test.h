/* gpu_device_test.h — what test_gpu_pocl (OpenCL) and test_gpu_cuda_ops (CUDA) share: every
 * operator's forward and gradient kernel with its preset GPU schedule, and sampled configs
 * of every op class, emitted in batches (one program each: PoCL and NVRTC compile a
 * program once) and run on the device by pk_gpu_device_check_loaded against the
 * interpreter; presets with the vectorizing knobs at 2 and 4, whose text must read whole
 * vectors; plus the one-kernel pk_gpu_device_check and a wrong kernel caught naming the
 * element. Header-only; include after pk_test.h. */
#ifndef GPU_DEVICE_TEST_H
#define GPU_DEVICE_TEST_H

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu_test_cases.h"
#include "gpu_test_util.h"

/* Kernels per program: PoCL's compile time grows with the program, so batches keep a
 * failed build's log short while still compiling few programs. */
#define GPU_DEVICE_BATCH 64

typedef struct gpu_device_item {
  const char *label;
  const pk_te_program *prog;
  const pk_schedule *sched;
  pk_gpu_kernel k;
} gpu_device_item;

typedef struct gpu_device_run {
  pk_ctx *ctx;
  pkrt_ctx *rt;
  pkrt_gpu *g;
  pk_gpu_dialect dialect;
  int next_name;      /* kernels are k0, k1, ...: unique within a program */
  int ran, failed;
  double worst;
} gpu_device_run;

static inline double gpu_device_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Lowers and prepares one kernel under a fresh name; false (FAIL printed) when refused. */
static inline bool gpu_device_prepare(gpu_device_run *R, const char *label, const pk_te_program *p,
                                      const pk_schedule *s, gpu_device_item *out) {
  pk_lfunc *f;
  *out = (gpu_device_item){label, p, s, {0}};
  if (pk_sched_lower(R->ctx, p, s, pk_sprintf(R->ctx, "k%d", R->next_name++), &f) == PK_OK &&
      pk_gpu_prepare(R->ctx, f, &out->k) == PK_OK)
    return true;
  printf("FAIL %s: %s\n", label, pk_ctx_error(R->ctx));
  pk_ctx_clear_error(R->ctx);
  R->failed++;
  failures++;
  return false;
}

/* Emits items[0..n) as one program, loads it and checks every kernel. A program that does
 * not build is retried kernel by kernel, so the failure names the kernel. */
static inline void gpu_device_batch(gpu_device_run *R, gpu_device_item *items, int n) {
  if (n == 0) return;
  pk_ctx *ctx = R->ctx;
  pk_gpu_kernel *ks = pk_alloc(ctx, sizeof *ks * (size_t)n);
  for (int i = 0; i < n; i++) ks[i] = items[i].k;
  char *src;
  pkrt_gpu_module *mod = NULL;
  if (pk_cgen_gpu(ctx, R->dialect, ks, n, &src) != PK_OK ||
      pk_gpu_device_load(ctx, R->rt, R->g, ks, n, src, &mod) != PK_OK) {
    if (n == 1) {
      printf("FAIL %s (%s): %.3000s\n", items[0].label, ks[0].desc.name, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      R->ran++;
      R->failed++;
      failures++;
      return;
    }
    pk_ctx_clear_error(ctx);
    for (int i = 0; i < n; i++) gpu_device_batch(R, &items[i], 1);
    return;
  }
  for (int i = 0; i < n; i++) {
    pk_kernel_check_result res;
    R->ran++;
    if (pk_gpu_device_check_loaded(ctx, R->rt, R->g, mod, items[i].prog, items[i].sched, &ks[i],
                                   (uint64_t)(1 + i), NULL, &res) != PK_OK) {
      printf("FAIL %s: %s\n", items[i].label, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      R->failed++;
      failures++;
    } else if (res.worst_ratio > R->worst) {
      R->worst = res.worst_ratio;
    }
  }
  pkrt_gpu_module_free(mod);
}

/* Prepares and checks items in batches of GPU_DEVICE_BATCH. */
static inline void gpu_device_all(gpu_device_run *R, gpu_device_item *items, int n) {
  for (int i = 0; i < n; i += GPU_DEVICE_BATCH)
    gpu_device_batch(R, &items[i], n - i < GPU_DEVICE_BATCH ? n - i : GPU_DEVICE_BATCH);
}

/* The one-kernel entry point on the shared-memory matmul, and a kernel of Y = X * 3
 * checked as Y = X * 2: the mismatch names the kernel and an element. */
static inline void gpu_device_single(gpu_device_run *R) {
  pk_ctx *ctx = R->ctx;
  pk_te_program *mm = gpu_test_parse(ctx, GPU_TEST_MATMUL);
  pk_schedule *s = mm ? gpu_test_matmul_schedule(ctx, mm) : NULL;
  gpu_device_item mmi, it;
  char *mmsrc, *src;
  pk_kernel_check_result res;
  bool ok = s && gpu_device_prepare(R, "matmul_shared", mm, s, &mmi) &&
            pk_cgen_gpu(ctx, R->dialect, &mmi.k, 1, &mmsrc) == PK_OK &&
            pk_gpu_device_check(ctx, R->rt, R->g, mm, s, &mmi.k, mmsrc, 3, &res) == PK_OK;
  check(ok && res.noutputs == 1, "device_check_matmul_shared", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  if (!ok) return;

  pk_te_program *two = gpu_test_parse(ctx, "X = placeholder((300,), f32)\nY = compute((300,), (i) => X[i] * 2.0)\n");
  pk_te_program *three = gpu_test_parse(ctx, "X = placeholder((300,), f32)\nY = compute((300,), (i) => X[i] * 3.0)\n");
  pk_schedule *s3 = three ? pk_sched_new(ctx, three) : NULL;
  ok = two && s3 && pk_sched_split(s3, "t1", "i0", 64) == PK_OK &&
       pk_sched_bind(s3, "t1", "i0.o", "blockIdx.x") == PK_OK &&
       pk_sched_bind(s3, "t1", "i0.i", "threadIdx.x") == PK_OK &&
       gpu_device_prepare(R, "times_three", three, s3, &it) &&
       pk_cgen_gpu(ctx, R->dialect, &it.k, 1, &src) == PK_OK;
  pk_status st = ok ? pk_gpu_device_check(ctx, R->rt, R->g, two, NULL, &it.k, src, 3, &res) : PK_ERR_USAGE;
  const char *msg = pk_ctx_error(ctx);
  check(st == PK_ERR_MISMATCH && strstr(msg, it.k.desc.name) && strstr(msg, "element"),
        "device_check_names_the_element", "%s: %s", pk_status_name(st), msg);
  if (st == PK_ERR_MISMATCH) printf("     a wrong kernel: %s\n", msg);
  pk_ctx_clear_error(ctx);

  /* a workspace: X packed into it by thread 0 (a root stage), read by the block's threads */
  pk_te_program *rev = gpu_test_parse(ctx, "X = placeholder((40, 7), f32)\n"
                                           "Y = compute((7, 40), (i, j) => X[39 - j, i] * 2.0)\n");
  pk_schedule *sw = rev ? pk_sched_new(ctx, rev) : NULL;
  const char *readers[] = {"t1"};
  ok = sw && pk_sched_cache_read(sw, "t0", "ws", 1, readers, 1, 4) == PK_OK &&
       pk_sched_bind(sw, "t1", "i0", "threadIdx.y") == PK_OK &&
       pk_sched_bind(sw, "t1", "i1", "threadIdx.x") == PK_OK &&
       gpu_device_prepare(R, "workspace", rev, sw, &it) &&
       pk_cgen_gpu(ctx, R->dialect, &it.k, 1, &src) == PK_OK &&
       pk_gpu_device_check(ctx, R->rt, R->g, rev, sw, &it.k, src, 5, &res) == PK_OK;
  check(ok && it.k.desc.workspace_bytes > 0, "device_check_workspace", "%lld bytes: %s",
        (long long)it.k.desc.workspace_bytes, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);

  /* f64 in vectors of 2 (vload2, double2): 65 elements over 33 threads, whose last has
   * a lane past the end and takes the scalar loop */
  pk_te_program *dbl = gpu_test_parse(ctx, "X = placeholder((5, 13), f64)\n"
                                           "Y = compute((5, 13), (i, j) => X[i, j] * 2.0 + 1.0)\n");
  pk_schedule *sv = dbl ? pk_sched_new(ctx, dbl) : NULL;
  ok = sv && pk_sched_fuse(sv, "t1", "i0", "i1") == PK_OK &&
       pk_sched_split(sv, "t1", "i0.i1.f", 2) == PK_OK &&
       pk_sched_vectorize(sv, "t1", "i0.i1.f.i") == PK_OK &&
       pk_sched_bind(sv, "t1", "i0.i1.f.o", "threadIdx.x") == PK_OK &&
       gpu_device_prepare(R, "vector_f64", dbl, sv, &it) &&
       pk_cgen_gpu(ctx, R->dialect, &it.k, 1, &src) == PK_OK &&
       strstr(src, R->dialect == PK_GPU_OPENCL ? "vload2(0, &b0[" : "*(const double2 *)&b0[") &&
       strstr(src, "} else {") &&
       pk_gpu_device_check(ctx, R->rt, R->g, dbl, sv, &it.k, src, 7, &res) == PK_OK;
  check(ok, "device_check_vector_f64", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);

  /* the matmul's kernel (3 buffers) against a program of 2 tensors; a source that does
   * not build */
  st = pk_gpu_device_check(ctx, R->rt, R->g, two, NULL, &mmi.k, mmsrc, 3, &res);
  check(st == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), "3 buffers for 2 tensors"),
        "device_check_refuses_other_program", "%s: %s", pk_status_name(st), pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  pkrt_gpu_module *mod = NULL;
  st = pk_gpu_device_load(ctx, R->rt, R->g, &it.k, 1, "this is not a kernel", &mod);
  msg = pk_ctx_error(ctx);
  check(st != PK_OK && !mod && strstr(msg, it.k.desc.name), "device_load_names_build_failure",
        "%s: %s", pk_status_name(st), msg);
  if (st != PK_OK) printf("     a source that does not build: %.160s\n", msg);
  pk_ctx_clear_error(ctx);
}

/* The whole suite on device g in dialect d for target text (e.g. "opencl"). */
static inline void gpu_device_suite(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, pk_gpu_dialect d,
                                    const char *target) {
  gpu_device_run R = {.ctx = ctx, .rt = rt, .g = g, .dialect = d};
  double t0 = gpu_device_now();
  gpu_device_single(&R);

  pk_target *t;
  int n, ns, counts[4];
  gpu_case *cases = pk_target_parse(ctx, target, NULL, &t) == PK_OK ? gpu_test_cases(ctx, t, &n) : NULL;
  if (!cases) {
    check(false, "cases", "%s", pk_ctx_error(ctx));
    return;
  }
  gpu_device_item *items = pk_alloc(ctx, sizeof *items * (size_t)(n + 1));
  int ni = 0, nopreset = 0;
  for (int i = 0; i < n; i++) {
    if (!cases[i].preset) {
      printf("FAIL %s: no GPU preset: %s\n", cases[i].label, cases[i].why ? cases[i].why : "");
      nopreset++;
      failures++;
      continue;
    }
    if (gpu_device_prepare(&R, cases[i].label, cases[i].prog, cases[i].preset, &items[ni])) ni++;
  }
  int shared = 0, workspace = 0, f64 = 0;
  for (int i = 0; i < ni; i++) {
    shared += items[i].k.static_shared_bytes > 0;
    workspace += items[i].k.desc.workspace_bytes > 0;
    f64 += items[i].k.uses_f64;
  }
  gpu_device_all(&R, items, ni);
  check(R.failed == 0 && nopreset == 0, "presets_on_device", "%d of %d kernels failed",
        R.failed + nopreset, n);
  printf("     %d preset kernels (every operator's forward and gradient; %d with shared memory, "
         "%d with a workspace, %d in f64) on the device, worst error/bound %.3g, %.1f s so far\n",
         R.ran, shared, workspace, f64, R.worst, gpu_device_now() - t0);

  int per_class = gpu_test_per_class();
  gpu_sample *samples = gpu_test_samples(ctx, cases, n, per_class, 31, &ns, counts);
  for (int c = 0; c < 4; c++)
    check(counts[c] >= per_class, pk_sprintf(ctx, "samples_%s", pk_task_class_name((pk_task_class)c)),
          "%d legal sampled configs, want %d", counts[c], per_class);
  gpu_device_item *sitems = pk_alloc(ctx, sizeof *sitems * (size_t)(ns + 1));
  int nsi = 0, ran0 = R.ran, failed0 = R.failed;
  R.worst = 0;
  for (int i = 0; i < ns; i++)
    if (gpu_device_prepare(&R, pk_sprintf(ctx, "sample %s %s", samples[i].c->label, samples[i].knobs),
                           samples[i].c->prog, samples[i].sched, &sitems[nsi]))
      nsi++;
  gpu_device_all(&R, sitems, nsi);
  check(R.failed == failed0, "samples_on_device", "%d of %d configs failed", R.failed - failed0, ns);
  printf("     %d sampled configs (%d matmul, %d conv, %d reduction, %d injective) on the device, "
         "worst error/bound %.3g; %d kernels in %.1f s\n",
         R.ran - ran0, counts[0], counts[1], counts[2], counts[3], R.worst, R.ran,
         gpu_device_now() - t0);

  /* presets with the vectorizing knobs at 2 and 4: their text reads whole vectors */
  int nvs, nvi = 0, vector_texts = 0;
  gpu_sample *vs = gpu_test_vector_samples(ctx, cases, n, per_class / 10, &nvs);
  gpu_device_item *vitems = pk_alloc(ctx, sizeof *vitems * (size_t)(nvs + 1));
  for (int i = 0; i < nvs; i++) {
    if (!gpu_device_prepare(&R, pk_sprintf(ctx, "vector %s %s", vs[i].c->label, vs[i].knobs),
                            vs[i].c->prog, vs[i].sched, &vitems[nvi]))
      continue;
    char *src = NULL;
    if (pk_cgen_gpu(ctx, d, &vitems[nvi].k, 1, &src) == PK_OK &&
        (d == PK_GPU_OPENCL ? strstr(src, "vload") || strstr(src, "vstore")
                            : strstr(src, "float4 *)") || strstr(src, "float2 *)")))
      vector_texts++;
    else
      printf("     no vector access: %s %s\n", vs[i].c->label, vs[i].knobs);
    nvi++;
  }
  ran0 = R.ran, failed0 = R.failed;
  gpu_device_all(&R, vitems, nvi);
  check(nvs >= 12 && vector_texts == nvs && R.failed == failed0, "vector_presets_on_device",
        "%d of %d with vector accesses, %d failed", vector_texts, nvs, R.failed - failed0);
}

#endif
