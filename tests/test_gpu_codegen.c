/* test_gpu_codegen.c — the GPU lowering check and emitter: a hand-scheduled matmul (blocks,
 * threads, shared k-panels, unrolled register tile) gets its launch and both dialects'
 * text; an unscheduled kernel runs on one thread; several root nests get barriers, and a
 * nest with no bound loop is kept to thread 0; what a GPU cannot run is refused with a
 * message naming it; vectorized loops become vector accesses where they fit (both
 * dialects' text); the backend table's cuda and opencl rows emit and build (the OpenCL
 * image is its source; CUDA goes through NVRTC where it loads). Needs no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_backend.h"
#include "pk_test.h"
#include "gpu_test_util.h"

static bool has(const char *text, const char *needle) { return text && strstr(text, needle); }

static void test_matmul_emit(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, GPU_TEST_MATMUL);
  pk_schedule *s = p ? gpu_test_matmul_schedule(ctx, p) : NULL;
  CHECK(s, "matmul schedule: %s", pk_ctx_error(ctx));
  pk_lfunc *f;
  pk_gpu_kernel k;
  CHECK(pk_sched_lower(ctx, p, s, "k0", &f) == PK_OK && pk_gpu_prepare(ctx, f, &k) == PK_OK,
        "lower/prepare: %s", pk_ctx_error(ctx));
  const pkrt_gpu_kernel_desc *d = &k.desc;
  CHECK(d->grid[0] == 2 && d->grid[1] == 2 && d->grid[2] == 1 && d->block[0] == 8 &&
            d->block[1] == 8 && d->block[2] == 1 && d->nbufs == 3 && d->nscalars == 0 &&
            d->shared_bytes == 0 && k.static_shared_bytes == 2 * 32 * 8 * 4 &&
            !strcmp(d->name, "k0") && d->workload && strlen(d->workload) == 64,
        "launch grid %ux%ux%u block %ux%ux%u shared %lld", d->grid[0], d->grid[1], d->grid[2],
        d->block[0], d->block[1], d->block[2], (long long)k.static_shared_bytes);
  char *cu, *cl;
  CHECK(pk_cgen_gpu(ctx, PK_GPU_CUDA, &k, 1, &cu) == PK_OK &&
            pk_cgen_gpu(ctx, PK_GPU_OPENCL, &k, 1, &cl) == PK_OK,
        "emit: %s", pk_ctx_error(ctx));
  CHECK(has(cu, "extern \"C\" __global__ void k0(const float *__restrict__ b0, const float "
                "*__restrict__ b1, float *__restrict__ b2)") &&
            has(cu, "__shared__ __align__(16) float b4[256];") && has(cu, "__syncthreads();") &&
            has(cu, "= (pk_i64)blockIdx.y;") && has(cu, "= (pk_i64)threadIdx.x;") &&
            has(cu, "#pragma unroll 4") && has(cu, "float b3[16];") && !has(cu, "restrict b"),
        "CUDA text:\n%s", cu);
  CHECK(has(cl, "__kernel void k0(__global const float *restrict b0, __global const float "
                "*restrict b1, __global float *restrict b2)") &&
            has(cl, "__local float b4[256];") &&
            has(cl, "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);") &&
            has(cl, "get_group_id(1)") && has(cl, "get_local_id(0)") &&
            has(cl, "opencl_unroll_hint(4)") && !has(cl, "cl_khr_fp64") && !has(cl, "__shared__"),
        "OpenCL text:\n%s", cl);
  /* the shared panels sit at the kernel's top (OpenCL allows __local only there) */
  const char *body = strstr(cl, "__kernel void k0");
  CHECK(body && strstr(body, "__local float b4") < strstr(body, "get_group_id"),
        "OpenCL __local declared inside the body");
  PASS();
}

/* Both dialects' text of program p lowered with s. */
static bool emit_both(pk_ctx *ctx, const pk_te_program *p, const pk_schedule *s, char **cu,
                      char **cl) {
  pk_lfunc *f;
  pk_gpu_kernel k;
  *cu = *cl = NULL;
  return p && s && pk_sched_lower(ctx, p, s, "k0", &f) == PK_OK &&
         pk_gpu_prepare(ctx, f, &k) == PK_OK && pk_cgen_gpu(ctx, PK_GPU_CUDA, &k, 1, cu) == PK_OK &&
         pk_cgen_gpu(ctx, PK_GPU_OPENCL, &k, 1, cl) == PK_OK;
}

/* Y's loops fused, `lanes` consecutive elements per thread (vectorized), 64 threads. */
static pk_schedule *items_schedule(pk_ctx *ctx, const pk_te_program *p, int ndim, int64_t lanes) {
  pk_schedule *s = p ? pk_sched_new(ctx, p) : NULL;
  const char *S = pk_sprintf(ctx, "t%d", p ? p->ntensors - 1 : 0), *f = "i0";
  if (s && ndim == 2 && pk_sched_fuse(s, S, "i0", "i1") == PK_OK) f = "i0.i1.f";
  bool ok = s && pk_sched_split(s, S, f, lanes) == PK_OK &&
            pk_sched_vectorize(s, S, pk_sprintf(ctx, "%s.i", f)) == PK_OK &&
            pk_sched_split(s, S, pk_sprintf(ctx, "%s.o", f), 64) == PK_OK &&
            pk_sched_bind(s, S, pk_sprintf(ctx, "%s.o.i", f), "threadIdx.x") == PK_OK &&
            pk_sched_bind(s, S, pk_sprintf(ctx, "%s.o.o", f), "blockIdx.x") == PK_OK;
  return ok ? s : NULL;
}

/* Vectorized loops of 2 or 4 lanes read and write whole vectors: the matmul's shared panels
 * (A's through the fused loop's division and modulo), an elementwise kernel with a row
 * broadcast, f64 in twos. CUDA's vector types need alignment: proven for the index, tested
 * at run time for kernel buffers (declared for shared ones), and an index whose first lane
 * is not a multiple of the lanes stays scalar there (OpenCL's vload needs no alignment).
 * A guard some lanes may fail keeps the unrolled loop for them; what does not fit (8
 * lanes, f64 in fours, i32, a strided read) stays unrolled or scalar. */
static void test_vector_emit(pk_ctx *ctx) {
  char *cu, *cl;
  pk_te_program *mm = gpu_test_parse(ctx, GPU_TEST_MATMUL);
  pk_schedule *s = mm ? gpu_test_matmul_schedule_vec(ctx, mm, 4) : NULL;
  CHECK(emit_both(ctx, mm, s, &cu, &cl), "matmul: %s", pk_ctx_error(ctx));
  CHECK(has(cu, "const float4 pk_v0_0 = *(const float4 *)&b0[") &&
            has(cu, "*(const float4 *)&b1[") && has(cu, "*(float4 *)&b4[") &&
            has(cu, "*(float4 *)&b5[") && has(cu, "if (((pk_u64)b0 % 16 == 0)) {") &&
            has(cu, "} else {") && has(cu, "#pragma unroll 4"),
        "matmul CUDA text:\n%s", cu);
  CHECK(has(cl, "const float4 pk_v0_0 = vload4(0, &b0[") && has(cl, "vload4(0, &b1[") &&
            has(cl, "vstore4(pk_s0, 0, &b4[") && has(cl, "vstore4(pk_s0, 0, &b5[") &&
            !has(cl, "pk_u64)b0") && !has(cl, "} else {"),
        "matmul OpenCL text:\n%s", cl);
  for (int order = 0; order < 3; order++) {
    pk_gpu_exec_result r;
    pk_lfunc *f;
    pk_gpu_kernel k;
    CHECK(pk_sched_lower(ctx, mm, s, "k0", &f) == PK_OK && pk_gpu_prepare(ctx, f, &k) == PK_OK &&
              pk_gpu_check(ctx, mm, s, &k, (pk_gpu_order)order, 5, NULL, &r) == PK_OK,
          "matmul executor order %d: %s", order, pk_ctx_error(ctx));
  }

  /* a row broadcast (Y[j] = Y[(4t + l) % 100]); 6400 elements over 1600 threads of 4 */
  pk_te_program *add = gpu_test_parse(ctx, "X = placeholder((64, 100), f32)\n"
                                           "Y = placeholder((100,), f32)\n"
                                           "Z = compute((64, 100), (i, j) => X[i, j] + Y[j])\n");
  CHECK(emit_both(ctx, add, items_schedule(ctx, add, 2, 4), &cu, &cl), "add: %s",
        pk_ctx_error(ctx));
  CHECK(has(cu, "*(const float4 *)&b0[") && has(cu, "*(const float4 *)&b1[pk_mod_i64(") &&
            has(cu, "*(float4 *)&b2[") && has(cu, "((pk_u64)b2 % 16 == 0)"),
        "add CUDA text:\n%s", cu);
  CHECK(has(cl, "vload4(0, &b0[") && has(cl, "vload4(0, &b1[pk_mod_i64(") &&
            has(cl, "pk_s0.w = (pk_v0_0.w + pk_v0_1.w);") && has(cl, "vstore4(pk_s0, 0, &b2["),
        "add OpenCL text:\n%s", cl);

  /* 301 elements: the last thread's lanes fail the guard and take the unrolled loop */
  pk_te_program *odd = gpu_test_parse(ctx, "X = placeholder((301,), f32)\n"
                                           "Y = compute((301,), (i) => X[i] * 2.0)\n");
  CHECK(emit_both(ctx, odd, items_schedule(ctx, odd, 1, 2), &cu, &cl), "odd: %s",
        pk_ctx_error(ctx));
  CHECK(has(cl, "vload2(0, &b0[") && has(cl, "vstore2(pk_s0, 0, &b1[") && has(cl, "} else {") &&
            has(cl, "opencl_unroll_hint(2)") && has(cu, "*(const float2 *)&b0[") &&
            has(cu, "((pk_u64)b1 % 8 == 0) && ((pk_u64)b0 % 8 == 0)"),
        "guarded text:\n%s\n%s", cl, cu);

  /* X[i + 1]: its first lane is not a multiple of 4, so CUDA reads it lane by lane */
  pk_te_program *shift = gpu_test_parse(ctx, "X = placeholder((257,), f32)\n"
                                             "Y = compute((256,), (i) => X[i + 1])\n");
  CHECK(emit_both(ctx, shift, items_schedule(ctx, shift, 1, 4), &cu, &cl), "shift: %s",
        pk_ctx_error(ctx));
  CHECK(has(cl, "vload4(0, &b0[") && !has(cu, "float4 *)&b0[") && has(cu, "*(float4 *)&b1[") &&
            has(cu, "pk_s0.w = b0["),
        "shifted text:\n%s\n%s", cl, cu);

  /* f64: two lanes are double2, four stay unrolled */
  const char *f64 = "X = placeholder((256,), f64)\nY = compute((256,), (i) => X[i] + 1.0)\n";
  pk_te_program *d = gpu_test_parse(ctx, f64);
  CHECK(emit_both(ctx, d, items_schedule(ctx, d, 1, 2), &cu, &cl) &&
            has(cu, "*(const double2 *)&b0[") && has(cl, "const double2 pk_v0_0 = vload2(0, &b0["),
        "f64 x2 text:\n%s\n%s", cu, cl);
  CHECK(emit_both(ctx, d, items_schedule(ctx, d, 1, 4), &cu, &cl) && !has(cu, "double4") &&
            !has(cl, "vload") && has(cl, "opencl_unroll_hint(4)"),
        "f64 x4 text:\n%s", cl);

  /* 8 lanes, i32, a transposed (strided) read: no vector loads there */
  pk_te_program *i32 = gpu_test_parse(ctx, "X = placeholder((256,), i32)\n"
                                           "Y = compute((256,), (i) => X[i] + 1)\n");
  CHECK(emit_both(ctx, i32, items_schedule(ctx, i32, 1, 4), &cu, &cl) && !has(cl, "vload") &&
            !has(cu, "int4") && has(cl, "opencl_unroll_hint(4)"),
        "i32 text:\n%s", cl);
  pk_te_program *wide = gpu_test_parse(ctx, "X = placeholder((1024,), f32)\n"
                                            "Y = compute((1024,), (i) => X[i] * 2.0)\n");
  CHECK(emit_both(ctx, wide, items_schedule(ctx, wide, 1, 8), &cu, &cl) && !has(cl, "vload") &&
            has(cl, "opencl_unroll_hint(8)") && has(cu, "#pragma unroll 8"),
        "8 lanes text:\n%s", cl);
  pk_te_program *tr = gpu_test_parse(ctx, "X = placeholder((16, 32), f32)\n"
                                          "Y = compute((32, 16), (i, j) => X[j, i])\n");
  CHECK(emit_both(ctx, tr, items_schedule(ctx, tr, 2, 4), &cu, &cl) && !has(cl, "vload") &&
            has(cl, "vstore4(pk_s0, 0, &b1[") && has(cl, "pk_s0.y = b0["),
        "transpose text:\n%s", cl);
  PASS();
}

/* A kernel with no bound loop: one thread; its f64 needs cl_khr_fp64 in OpenCL. */
static void test_one_thread(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, "X = placeholder((5, 7), f64)\n"
                                         "Y = compute((5, 7), (i, j) => exp(X[i, j]) % 2.0)\n");
  pk_lfunc *f;
  pk_gpu_kernel k;
  CHECK(p && pk_sched_lower(ctx, p, NULL, "k1", &f) == PK_OK && pk_gpu_prepare(ctx, f, &k) == PK_OK,
        "lower/prepare: %s", pk_ctx_error(ctx));
  for (int i = 0; i < 3; i++) CHECK(k.desc.grid[i] == 1 && k.desc.block[i] == 1, "launch not 1x1");
  CHECK(k.uses_f64, "f64 not seen");
  char *cl, *cu;
  CHECK(pk_cgen_gpu(ctx, PK_GPU_OPENCL, &k, 1, &cl) == PK_OK && has(cl, "cl_khr_fp64") &&
            has(cl, "pk_mod_f64(exp(b0[") && !has(cl, "get_local_id"),
        "OpenCL text: %s", pk_ctx_error(ctx));
  CHECK(pk_cgen_gpu(ctx, PK_GPU_CUDA, &k, 1, &cu) == PK_OK && has(cu, "pk_mod_f64(exp(b0["),
        "CUDA text: %s", pk_ctx_error(ctx));
  PASS();
}

/* Two root nests in one block: a barrier between them; the unbound one runs on thread 0. */
static void test_root_nests(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, "X = placeholder((256,), f32)\n"
                                         "Y = compute((256,), (i) => X[i] * 2.0)\n"
                                         "Z = compute((256,), (i) => Y[255 - i] + 1.0)\n");
  pk_schedule *s = p ? pk_sched_new(ctx, p) : NULL;
  CHECK(s && pk_sched_split(s, "t1", "i0", 64) == PK_OK &&
            pk_sched_bind(s, "t1", "i0.i", "threadIdx.x") == PK_OK,
        "schedule: %s", pk_ctx_error(ctx));
  pk_lfunc *f;
  pk_gpu_kernel k;
  CHECK(pk_sched_lower(ctx, p, s, "k2", &f) == PK_OK && pk_gpu_prepare(ctx, f, &k) == PK_OK,
        "prepare: %s", pk_ctx_error(ctx));
  CHECK(k.desc.block[0] == 64 && k.desc.grid[0] == 1, "launch");
  char *cu;
  CHECK(pk_cgen_gpu(ctx, PK_GPU_CUDA, &k, 1, &cu) == PK_OK, "emit: %s", pk_ctx_error(ctx));
  const char *sync = strstr(cu, "__syncthreads();");
  CHECK(sync && !strstr(sync + 1, "__syncthreads();") && has(sync, "if (v") &&
            has(sync, " < 1) {"),
        "one barrier, then Z's nest on thread 0:\n%s", cu);
  for (int order = 0; order < 3; order++) {
    pk_gpu_exec_result r;
    CHECK(pk_gpu_check(ctx, p, s, &k, (pk_gpu_order)order, 3, NULL, &r) == PK_OK &&
              r.barriers == 1,
          "executor order %d: %s (%lld barriers)", order, pk_ctx_error(ctx), (long long)r.barriers);
  }
  /* the same over several blocks: Z would read what other blocks write */
  CHECK(pk_sched_bind(s, "t1", "i0.o", "blockIdx.x") == PK_OK && pk_sched_lower(ctx, p, s, "k2", &f) == PK_OK,
        "schedule: %s", pk_ctx_error(ctx));
  CHECK(pk_gpu_prepare(ctx, f, &k) == PK_ERR_SCHEDULE && has(pk_ctx_error(ctx), "cannot wait for each other"),
        "blocks: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  PASS();
}

static void expect_refused(pk_ctx *ctx, const char *what, const pk_te_program *p,
                           const pk_schedule *s, const char *message) {
  pk_lfunc *f;
  pk_gpu_kernel k;
  pk_status st = s ? pk_sched_lower(ctx, p, s, "k3", &f) : PK_ERR_SCHEDULE;
  if (st == PK_OK) st = pk_gpu_prepare(ctx, f, &k);
  check(st == PK_ERR_SCHEDULE && has(pk_ctx_error(ctx), message), what, "%s: %s",
        pk_status_name(st), pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

static void test_refusals(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, "X = placeholder((64, 64), f32)\n"
                                         "Y = compute((64, 64), (i, j) => X[i, j] + 1.0)\n");
  pk_schedule *s = pk_sched_new(ctx, p);
  pk_sched_parallel(s, "t1", "i0");
  expect_refused(ctx, "refuses_parallel", p, s, "CPU parallel loop");

  s = pk_sched_new(ctx, p);
  pk_sched_fuse(s, "t1", "i0", "i1");
  pk_sched_bind(s, "t1", "i0.i1.f", "threadIdx.x");
  expect_refused(ctx, "refuses_4096_threads", p, s, "threads per block");

  s = pk_sched_new(ctx, p);
  const char *readers[] = {"t1"};
  pk_sched_cache_read(s, "t0", "local", 1, readers, -1, 0);
  pk_sched_bind(s, "t0.local", "i0", "threadIdx.x");
  pk_sched_bind(s, "t1", "i0", "threadIdx.x");
  expect_refused(ctx, "refuses_thread_shared_local", p, s, "own copy");

  pk_te_program *big = gpu_test_parse(ctx, "X = placeholder((128, 128), f32)\n"
                                           "Y = compute((128, 128), (i, j) => X[i, j] * 2.0)\n");
  s = pk_sched_new(ctx, big);
  pk_sched_cache_read(s, "t0", "shared", 1, readers, -1, 0);
  pk_sched_bind(s, "t1", "i1", "threadIdx.x");
  expect_refused(ctx, "refuses_64k_shared", big, s, "bytes of shared memory");

  /* the matmul's barriers inside a thread loop narrower than the block another nest needs */
  pk_te_program *mm = gpu_test_parse(ctx, "A = placeholder((64, 48), f32)\nB = placeholder((48, 64), f32)\n"
                                          "k = reduce_axis(48)\n"
                                          "C = compute((64, 64), (i, j) => sum(A[i, k] * B[k, j], k))\n"
                                          "D = compute((128,), (i) => 2.0)\n");
  s = mm ? gpu_test_matmul_schedule(ctx, mm) : NULL;
  if (s) pk_sched_bind(s, "t3", "i0", "threadIdx.x");
  expect_refused(ctx, "refuses_divergent_barrier", mm, s, "only some threads");
  PASS();
}

/* The backend table's GPU rows: emit through the unit, build, refuse to load. */
static void test_backend_rows(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, GPU_TEST_MATMUL);
  pk_schedule *s = gpu_test_matmul_schedule(ctx, p);
  pk_lfunc *f;
  CHECK(s && pk_sched_lower(ctx, p, s, "k0", &f) == PK_OK, "lower: %s", pk_ctx_error(ctx));
  const char *targets[] = {"opencl", "cuda -arch=sm_87"};
  for (int i = 0; i < 2; i++) {
    pk_target *t;
    pk_backend *be;
    pk_backend_options bo = {.cache_dir = PK_TEST_CACHE_DIR};
    CHECK(pk_target_parse(ctx, targets[i], NULL, &t) == PK_OK && pk_backend_new(ctx, t, &bo, &be) == PK_OK,
          "%s backend: %s", targets[i], pk_ctx_error(ctx));
    pk_cgen_unit *u;
    CHECK(pk_backend_unit_new(be, &u) == PK_OK && pk_cgen_unit_add(u, f, "matmul") == PK_OK &&
              pk_cgen_unit_count(u) == 1 && pk_cgen_unit_gpu_kernel(u, 0)->desc.block[0] == 8 &&
              has(pk_cgen_unit_kernel_name(u, 0), "k0 matmul"),
          "%s unit: %s", targets[i], pk_ctx_error(ctx));
    pk_build_result r;
    pk_status st = pk_backend_build(be, u, &r);
    if (i == 1 && st == PK_ERR_UNSUPPORTED && has(pk_ctx_error(ctx), "NVRTC")) {
      printf("SKIP cuda build: %s\n", pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
    } else {
      CHECK(st == PK_OK && has(r.path, i ? ".cubin" : ".cl") && has(r.source, "k0("),
            "%s build: %s", targets[i], pk_ctx_error(ctx));
      pkrt_module *m;
      CHECK(pk_backend_load(be, NULL, &r, &m) == PK_ERR_UNSUPPORTED && has(pk_ctx_error(ctx), "GPU runtime"),
            "%s load: %s", targets[i], pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
    }
    pk_cgen_unit_free(u);
  }
  PASS();
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_matmul_emit(ctx);
  test_one_thread(ctx);
  test_vector_emit(ctx);
  test_root_nests(ctx);
  test_refusals(ctx);
  test_backend_rows(ctx);
  pk_ctx_free(ctx);
  return pk_test_summary("gpu_codegen");
}
