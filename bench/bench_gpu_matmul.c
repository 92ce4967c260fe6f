/* bench_gpu_matmul.c — fp32 matmul on CUDA device 0 (bench/gpu.sh's tables): Pock's GPU
 * kernel with the preset schedule of the cuda target (autotune/space_gpu.c) beside cuBLAS
 * SGEMM called as artifacts call it (pkrt_gpu_blas_sgemm), both timed with device events,
 * the median of repeats after a warm-up. Each generated result is compared with cuBLAS's
 * on the same random inputs first (max |diff| <= 1e-3 · (1 + max |C|) · sqrt(K) / 32), so
 * a fast wrong kernel cannot pass. Then conv2d 3×3 (N=8, C=O=64, 32×32, pad 1): the cuda
 * preset on the GPU, checked against the interpreter, beside the C target's preset on one
 * CPU core (the CPU path, bench_util's timer). Prints markdown tables.
 *
 * Usage: bench_gpu_matmul [--reps N] [MxNxK[tA][tB] ...]
 *   shapes: "4096x4096x4096", "32x256x784tb" (B stored N×K), "256x784x32ta" (A stored K×M);
 *   default: 1024³, 4096³ and the digits MLP's training shapes.
 * Exit: 0 all ran and matched; 1 a result differed or a build failed; 2 no CUDA device
 * (or no libnvrtc / libcublas, named). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "pk_gpu.h"
#include "pk_ops.h"
#include "pk_search.h"
#include "pkrt.h"
#include "pock/pkrt_gpu.h"

typedef struct shape {
  int64_t m, n, k;
  bool ta, tb;
} shape;

static const char *const default_shapes[] = {"1024x1024x1024", "4096x4096x4096",
                                             "32x256x784tb", "256x784x32ta", "32x784x256"};

static bool parse_shape(const char *s, shape *out) {
  char rest[8] = "";
  long long m, n, k;
  if (sscanf(s, "%lldx%lldx%lld%7s", &m, &n, &k, rest) < 3 || m < 1 || n < 1 || k < 1 ||
      m > 65536 || n > 65536 || k > 65536)
    return false;
  *out = (shape){m, n, k, strstr(rest, "ta") != NULL, strstr(rest, "tb") != NULL};
  return strspn(rest, "tab") == strlen(rest);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of reps timed calls (after two untimed); < 0 on a failed call. */
typedef pkrt_status (*timed_fn)(void *arg, double *ms);
static double median_ms(timed_fn fn, void *arg, int reps) {
  double *t = calloc((size_t)reps, sizeof *t), ms;
  for (int i = 0; i < 2; i++)
    if (fn(arg, &ms) != PKRT_OK) goto fail;
  for (int i = 0; i < reps; i++)
    if (fn(arg, &t[i]) != PKRT_OK) goto fail;
  qsort(t, (size_t)reps, sizeof *t, cmp_double);
  ms = t[reps / 2];
  free(t);
  return ms;
fail:
  free(t);
  return -1;
}

typedef struct call {
  pkrt_gpu_module *mod;
  pkrt_gpu_blas *blas;
  const shape *s;
  pkrt_gpu_ptr v[3]; /* A, B, C */
  pkrt_gpu_ptr c2;   /* cuBLAS's C */
} call;

static pkrt_status run_kernel(void *arg, double *ms) {
  call *c = arg;
  return pkrt_gpu_launch(c->mod, 0, c->v, 3, NULL, 0, NULL, ms);
}

static pkrt_status run_cublas(void *arg, double *ms) {
  call *c = arg;
  const shape *s = c->s;
  return pkrt_gpu_blas_sgemm(c->blas, s->ta, s->tb, (int32_t)s->m, (int32_t)s->n,
                             (int32_t)s->k, &c->v[0], (int32_t)(s->ta ? s->m : s->k), &c->v[1],
                             (int32_t)(s->tb ? s->k : s->n), &c->c2, (int32_t)s->n, ms);
}

/* The preset schedule of p for target; NULL with a message. */
static pk_schedule *preset(pk_ctx *ctx, const pk_te_program *p, const char *target) {
  pk_task task;
  pk_schedule *sched = NULL;
  if (pk_task_from_program(ctx, p, target, &task) == PK_OK)
    sched = pk_space_default_schedule(ctx, &task, NULL);
  if (!sched) fprintf(stderr, "bench_gpu_matmul: %s preset: %s\n", target, pk_ctx_error(ctx));
  return sched;
}

/* Builds p's preset kernel for the device's arch and loads it (*k: its launch); NULL with a
 * message. */
static pkrt_gpu_module *load_preset_program(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g,
                                            const pk_te_program *p, pk_schedule **sched,
                                            pk_gpu_kernel *k) {
  pk_lfunc *f;
  char *src;
  pkrt_gpu_module *mod = NULL;
  const char *target = pk_sprintf(ctx, "cuda -arch=sm_%d", pkrt_gpu_describe(g)->sm);
  if (!(*sched = preset(ctx, p, target))) return NULL;
  if (pk_sched_lower(ctx, p, *sched, "k0", &f) != PK_OK || pk_gpu_prepare(ctx, f, k) != PK_OK ||
      pk_cgen_gpu(ctx, PK_GPU_CUDA, k, 1, &src) != PK_OK ||
      pk_gpu_device_load(ctx, rt, g, k, 1, src, &mod) != PK_OK) {
    fprintf(stderr, "bench_gpu_matmul: preset kernel: %s\n", pk_ctx_error(ctx));
    return NULL;
  }
  return mod;
}

static pkrt_gpu_module *load_preset(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const shape *s) {
  pk_op_params prm = {.ninputs = 2};
  prm.in[0] = (pk_op_input){2, {s->ta ? s->k : s->m, s->ta ? s->m : s->k}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){2, {s->tb ? s->n : s->k, s->tb ? s->k : s->n}, PKRT_DTYPE_F32};
  prm.attrs.trans_a = s->ta;
  prm.attrs.trans_b = s->tb;
  pk_te_program *p = NULL;
  pk_schedule *sched;
  pk_gpu_kernel k;
  if (pk_op_build(ctx, PK_OP_MATMUL, &prm, &p) != PK_OK) {
    fprintf(stderr, "bench_gpu_matmul: matmul: %s\n", pk_ctx_error(ctx));
    return NULL;
  }
  return load_preset_program(ctx, rt, g, p, &sched, &k);
}

typedef struct conv_call {
  pkrt_gpu_module *mod;
  pkrt_gpu_ptr v[3], ws;
  bool has_ws;
} conv_call;

static pkrt_status run_conv(void *arg, double *ms) {
  conv_call *c = arg;
  return pkrt_gpu_launch(c->mod, 0, c->v, 3, NULL, 0, c->has_ws ? &c->ws : NULL, ms);
}

/* conv2d 3×3 on the GPU (cuda preset, checked against the interpreter) beside the C
 * target's preset on this CPU core. */
static int bench_conv(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, int reps) {
  pk_op_params prm = {.ninputs = 2};
  prm.in[0] = (pk_op_input){4, {8, 64, 32, 32}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){4, {64, 64, 3, 3}, PKRT_DTYPE_F32};
  prm.attrs.pad[0] = prm.attrs.pad[1] = prm.attrs.pad[2] = prm.attrs.pad[3] = 1;
  pk_te_program *p;
  pk_te_ref *ref;
  pk_host_buffers hb;
  pk_cc *cc;
  pk_target *t;
  pk_schedule *gsched, *csched;
  pk_gpu_kernel k;
  pk_kernel_check_result res;
  conv_call c = {0};
  pkrt_gpu_mem *mem = NULL;
  int bad = 1;
  if (pk_op_build(ctx, PK_OP_CONV2D, &prm, &p) != PK_OK ||
      pk_bench_inputs(ctx, p, 3, &ref, &hb) != PK_OK) {
    fprintf(stderr, "bench_gpu_matmul: conv2d: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  if (!(c.mod = load_preset_program(ctx, rt, g, p, &gsched, &k))) goto done;
  if (pk_gpu_device_check_loaded(ctx, rt, g, c.mod, p, gsched, &k, 3, ref, &res) != PK_OK) {
    fprintf(stderr, "bench_gpu_matmul: conv2d on the GPU: %s\n", pk_ctx_error(ctx));
    goto done;
  }
  size_t off = 0, ws = (size_t)k.desc.workspace_bytes;
  size_t bytes[3];
  for (int i = 0; i < 3; i++) {
    bytes[i] = 4;
    for (int d = 0; d < p->tensors[i]->ndim; d++) bytes[i] *= (size_t)p->tensors[i]->shape[d];
  }
  if (pkrt_gpu_mem_new(g, bytes[0] + bytes[1] + bytes[2] + ws + 4 * 256, &mem) != PKRT_OK)
    goto done;
  for (int i = 0; i < 3; i++) {
    if (pkrt_gpu_mem_view(mem, off, bytes[i], &c.v[i]) != PKRT_OK) goto done;
    off = (off + bytes[i] + 255) / 256 * 256;
  }
  if ((c.has_ws = ws > 0) && pkrt_gpu_mem_view(mem, off, ws, &c.ws) != PKRT_OK) goto done;
  double gpu_ms = median_ms(run_conv, &c, reps);
  if (gpu_ms < 0) goto done;
  /* the CPU path: the C target's preset, one core, checked and timed by bench_util */
  if (pk_target_parse(ctx, "c", NULL, &t) != PK_OK ||
      pk_cc_new_target(ctx, NULL, t, 600, &cc) != PK_OK ||
      !(csched = preset(ctx, p, "c"))) {
    fprintf(stderr, "bench_gpu_matmul: the C target: %s\n", pk_ctx_error(ctx));
    goto done;
  }
  double cpu_ns = pk_bench_time_scheduled(ctx, cc, rt, p, csched, PK_MEASURE_MIN_NS, &hb);
  if (cpu_ns < 0) goto done;
  double gf = 2.0 * 8 * 64 * 32 * 32 * 64 * 9 / 1e6;
  printf("\n| conv2d 3×3, N=8, C=O=64, 32×32, pad 1 | GPU ms | GPU GFLOP/s | CPU ms (1 core) | "
         "CPU GFLOP/s | GPU speed-up | GPU error / bound |\n|---|---|---|---|---|---|---|\n"
         "| preset | %.3f | %.0f | %.3f | %.1f | %.0f× | %.2f |\n",
         gpu_ms, gf / gpu_ms, cpu_ns / 1e6, gf / (cpu_ns / 1e6), cpu_ns / 1e6 / gpu_ms,
         res.worst_ratio);
  bad = 0;
done:
  if (bad) fprintf(stderr, "bench_gpu_matmul conv2d: %s\n", pkrt_ctx_error(rt));
  pkrt_gpu_module_free(c.mod);
  pkrt_gpu_mem_free(mem);
  pk_host_buffers_free(&hb);
  return bad;
}

static int bench(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, pkrt_gpu_blas *blas, const shape *s,
                 const char *name, int reps) {
  size_t na = (size_t)(s->m * s->k), nb = (size_t)(s->k * s->n), nc = (size_t)(s->m * s->n);
  size_t off[5] = {0}, bytes[4] = {na * 4, nb * 4, nc * 4, nc * 4};
  for (int i = 0; i < 4; i++) off[i + 1] = (off[i] + bytes[i] + 255) / 256 * 256;
  pkrt_gpu_mem *mem = NULL;
  call c = {.blas = blas, .s = s};
  float *h = malloc(bytes[0] + bytes[1]), *c1 = malloc(bytes[2]), *c2 = malloc(bytes[3]);
  int rc = 1;
  if (!h || !c1 || !c2 || pkrt_gpu_mem_new(g, off[4], &mem) != PKRT_OK) goto done;
  for (int i = 0; i < 3; i++)
    if (pkrt_gpu_mem_view(mem, off[i], bytes[i], &c.v[i]) != PKRT_OK) goto done;
  if (pkrt_gpu_mem_view(mem, off[3], bytes[3], &c.c2) != PKRT_OK) goto done;
  uint64_t x = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < na + nb; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    h[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
  }
  if (pkrt_gpu_copy_to(mem, off[0], h, bytes[0]) != PKRT_OK ||
      pkrt_gpu_copy_to(mem, off[1], h + na, bytes[1]) != PKRT_OK)
    goto done;
  if (!(c.mod = load_preset(ctx, rt, g, s))) goto done;
  double ms_k, ms_b;
  if (run_kernel(&c, &ms_k) != PKRT_OK || run_cublas(&c, &ms_b) != PKRT_OK ||
      pkrt_gpu_copy_from(mem, off[2], c1, bytes[2]) != PKRT_OK ||
      pkrt_gpu_copy_from(mem, off[3], c2, bytes[3]) != PKRT_OK)
    goto done;
  double worst = 0, big = 0;
  for (size_t i = 0; i < nc; i++) {
    worst = fmax(worst, fabs((double)c1[i] - c2[i]));
    big = fmax(big, fabs((double)c2[i]));
  }
  double tol = 1e-3 * (1 + big) * sqrt((double)s->k) / 32;
  ms_k = median_ms(run_kernel, &c, reps);
  ms_b = median_ms(run_cublas, &c, reps);
  if (ms_k < 0 || ms_b < 0) goto done;
  double gf = 2.0 * (double)s->m * (double)s->n * (double)s->k / 1e6;
  printf("| %s | %.3f | %.0f | %.3f | %.0f | %.0f %% | %.1e%s |\n", name, ms_k, gf / ms_k, ms_b,
         gf / ms_b, 100 * ms_b / ms_k, worst, worst <= tol ? "" : " **WRONG**");
  rc = worst <= tol ? 0 : 1;
done:
  if (rc) fprintf(stderr, "bench_gpu_matmul %s: %s\n", name, pkrt_ctx_error(rt));
  pkrt_gpu_module_free(c.mod);
  pkrt_gpu_mem_free(mem);
  free(h), free(c1), free(c2);
  return rc;
}

int main(int argc, char **argv) {
  int reps = 20, first = 1;
  if (argc > 2 && !strcmp(argv[1], "--reps")) {
    reps = atoi(argv[2]);
    first = 3;
    if (reps < 1 || reps > 10000) {
      fprintf(stderr, "bench_gpu_matmul: --reps must be 1..10000, not '%s'\n", argv[2]);
      return 1;
    }
  }
  int nshapes = argc > first ? argc - first : (int)(sizeof default_shapes / sizeof *default_shapes);
  const char *const *names = argc > first ? (const char *const *)argv + first : default_shapes;
  shape *shapes = calloc((size_t)nshapes, sizeof *shapes);
  for (int i = 0; i < nshapes; i++)
    if (!parse_shape(names[i], &shapes[i])) {
      fprintf(stderr, "bench_gpu_matmul: shape '%s' is not MxNxK[ta][tb] (each 1..65536)\n",
              names[i]);
      return 1;
    }
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_ctx *ctx = pk_ctx_new();
  pkrt_gpu *g = NULL;
  pkrt_gpu_blas *blas = NULL;
  int n = 0;
  if (pkrt_gpu_list(rt, PKRT_GPU_CUDA, NULL, 0, &n) != PKRT_OK || n == 0 ||
      pkrt_gpu_open(rt, PKRT_GPU_CUDA, 0, &g) != PKRT_OK ||
      pkrt_gpu_blas_open(g, NULL, &blas) != PKRT_OK) {
    printf("bench_gpu_matmul: no CUDA device with cuBLAS: %s\n",
           n == 0 && !*pkrt_ctx_error(rt) ? "the driver sees no device" : pkrt_ctx_error(rt));
    return 2;
  }
  const pkrt_gpu_info *info = pkrt_gpu_describe(g);
  printf("fp32 matmul on %s (%s, CUDA driver %s), median of %d, preset schedule\n\n",
         info->name, info->version, info->driver, reps);
  printf("| shape | Pock ms | Pock GFLOP/s | cuBLAS ms | cuBLAS GFLOP/s | Pock / cuBLAS | "
         "max diff |\n");
  printf("|---|---|---|---|---|---|---|\n");
  int bad = 0;
  for (int i = 0; i < nshapes; i++) bad |= bench(ctx, rt, g, blas, &shapes[i], names[i], reps);
  bad |= bench_conv(ctx, rt, g, reps);
  pkrt_gpu_blas_close(blas);
  pkrt_gpu_close(g);
  pk_ctx_free(ctx);
  pkrt_ctx_free(rt);
  free(shapes);
  return bad;
}
