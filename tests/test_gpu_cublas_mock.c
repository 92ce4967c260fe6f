/* test_gpu_cublas_mock.c — cuBLAS as the CUDA extern kernel (runtime/gpu_cublas.c) against
 * stand-ins for the driver and libcublas (fixtures/mock_libcuda.c, mock_libcublas.c, found
 * through LD_LIBRARY_PATH), so that every machine runs it: the handle made at open with the
 * device's context current and bound to the device's stream, destroyed at close; the
 * row-major call as cuBLAS's column-major one (operands swapped, m and n swapped, each
 * transpose kept) for all four transposes, checked against a host matmul; event timing;
 * no allocation per call; operands too big for their views refused; and a libcublas that
 * is missing or is not cuBLAS refused naming it. At the model level (the digits MLP built
 * for cuda with its first matmul made the cuBLAS extern, as a record of it would): the
 * manifest is accepted, the handle is made at open and destroyed when the open fails
 * later (the stand-in driver loads no real image), and a missing libcublas or the CPU's
 * cblas_sgemm in a CUDA artifact is refused by name. And the GPU measurer's check of a
 * cuBLAS candidate (pk_gpu_cublas_check_timed): right on the task's inputs then timed,
 * wrong when the stand-in's fault switch is on, a missing libcublas named, a shape that is
 * not the program's refused. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact_edit.h"
#include "gpu_impl.h"
#include "pk_search.h"
#include "pk_test.h"
#include "pock/pockrt.h"

static int counting;
static long allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__wrap_malloc(size_t n) { allocs += counting; return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { allocs += counting; return __real_calloc(a, b); }

#define MOCK_CUBLAS "libcublas.so.13" /* the stand-in: the first soname cuBLAS is tried by */
enum { M = 3, N = 4, K = 5 };

static pkrt_ctx *rt;
static pkrt_gpu *g;
static void *mock; /* the stand-in, for its counters */

static int has(const char *needle) { return strstr(pkrt_ctx_error(rt), needle) != NULL; }
static int live(void) { return ((int (*)(void))dlsym(mock, "mock_cublas_live"))(); }

/* Row-major operands of op(A) (M×K) and op(B) (K×N) stored transposed where asked. */
static void test_sgemm(pkrt_gpu_blas *b, pkrt_gpu_mem *mem, int ta, int tb) {
  float a[M * K], bb[K * N], c[M * N], want[M * N];
  for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7) - 2.5f;
  for (int i = 0; i < K * N; i++) bb[i] = (float)(i % 5) * 0.5f - 1;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = 0;
      for (int l = 0; l < K; l++)
        s += (ta ? a[l * M + i] : a[i * K + l]) * (tb ? bb[j * K + l] : bb[l * N + j]);
      want[i * N + j] = s;
    }
  pkrt_gpu_ptr va, vb, vc;
  CHECK(pkrt_gpu_mem_view(mem, 0, sizeof a, &va) == PKRT_OK &&
            pkrt_gpu_mem_view(mem, 256, sizeof bb, &vb) == PKRT_OK &&
            pkrt_gpu_mem_view(mem, 512, sizeof c, &vc) == PKRT_OK &&
            pkrt_gpu_copy_to(mem, 0, a, sizeof a) == PKRT_OK &&
            pkrt_gpu_copy_to(mem, 256, bb, sizeof bb) == PKRT_OK,
        "views: %s", pkrt_ctx_error(rt));
  int lda = ta ? M : K, ldb = tb ? K : N;
  pkrt_status st = pkrt_gpu_blas_sgemm(b, ta, tb, M, N, K, &va, lda, &vb, ldb, &vc, N, NULL);
  CHECK(st == PKRT_OK && pkrt_gpu_copy_from(mem, 512, c, sizeof c) == PKRT_OK,
        "ta %d tb %d: %s", ta, tb, pkrt_ctx_error(rt));
  const int *l = ((const int *(*)(void))dlsym(mock, "mock_cublas_last"))();
  /* column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: B's op first, n before m, ldb before lda */
  CHECK(l[0] == tb && l[1] == ta && l[2] == N && l[3] == M && l[4] == K && l[5] == ldb &&
            l[6] == lda && l[7] == N,
        "ta %d tb %d: cublasSgemm got ops %d %d, m %d n %d k %d, lda %d ldb %d ldc %d", ta, tb,
        l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]);
  for (int i = 0; i < M * N; i++)
    CHECK(c[i] == want[i], "ta %d tb %d: C[%d] = %g, want %g", ta, tb, i, c[i], want[i]);
  PASS();
}

static void test_handle(pkrt_gpu_blas *b, pkrt_gpu_mem *mem) {
  void *stream = NULL;
  CHECK(pkrt_gpu_cuda_stream(g, &stream) == PKRT_OK && stream, "%s", pkrt_ctx_error(rt));
  CHECK(live() == 1, "%d cuBLAS handles live after open, want 1", live());
  CHECK(((void *(*)(void))dlsym(mock, "mock_cublas_stream"))() == stream,
        "the handle is not bound to the device's stream");
  pkrt_gpu_ptr v;
  CHECK(pkrt_gpu_mem_view(mem, 0, 1024, &v) == PKRT_OK, "%s", pkrt_ctx_error(rt));
  double ms = -1;
  pkrt_status st = PKRT_OK;
  counting = 1;
  for (int r = 0; r < 20 && st == PKRT_OK; r++)
    st = pkrt_gpu_blas_sgemm(b, 0, 0, 4, 4, 4, &v, 4, &v, 4, &v, 4, r % 2 ? &ms : NULL);
  counting = 0;
  /* the stand-in driver counts one "millisecond" per launch, the stand-in sgemm one */
  CHECK(st == PKRT_OK && allocs == 0 && ms == 1, "%ld allocations over 20 calls, %g ms: %s",
        allocs, ms, pkrt_ctx_error(rt));
  st = pkrt_gpu_blas_sgemm(b, 0, 0, 32, 32, 32, &v, 32, &v, 32, &v, 32, NULL);
  CHECK(st == PKRT_ERR_INPUT && has("m 32, n 32, k 32") && has("do not fit"),
        "32^3 in a 1 KiB view: %s", pkrt_ctx_error(rt));
  PASS();
}

static void test_refused(void) {
  pkrt_gpu_blas *b = NULL;
  pkrt_status st = pkrt_gpu_blas_open(g, "libcublas-missing.so.99", &b);
  CHECK(st == PKRT_ERR_EXTERN && !b && has("cannot load libcublas (tried libcublas-missing.so.99)"),
        "missing: %s", pkrt_ctx_error(rt));
  st = pkrt_gpu_blas_open(g, "libcuda.so.1", &b);
  CHECK(st == PKRT_ERR_EXTERN && !b && has("cublasCreate_v2 not found in libcuda.so.1"),
        "not cuBLAS: %s", pkrt_ctx_error(rt));
  PASS();
}

/* C[3,4] = A[5,3]ᵀ·B[5,4]: the cuBLAS candidate of this task, as the measurer finds it. */
static const char *const SGEMM_TA_TE =
    "A = placeholder((5, 3), f32)\n"
    "B = placeholder((5, 4), f32)\n"
    "k = reduce_axis(5)\n"
    "C = compute((3, 4), (i, j) => sum(A[k, i] * B[k, j], k))\n";

static void test_measure(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_te_program *p;
  pk_sgemm_shape shape;
  CHECK(pk_te_parse(ctx, SGEMM_TA_TE, strlen(SGEMM_TA_TE), "ta.te", &p) == PK_OK &&
            pk_match_sgemm(p, &shape) && shape.trans_a && !shape.trans_b,
        "the task: %s", pk_ctx_error(ctx));
  const int *l = ((const int *(*)(void))dlsym(mock, "mock_cublas_last"))();
  int calls = l[8], live0 = live();
  pk_timing t = {0};
  pk_kernel_check_result res;
  /* the soname list: the first that loads is used */
  const char *libs = "libcublas-missing.so.99 " MOCK_CUBLAS;
  pk_status st = pk_gpu_cublas_check_timed(ctx, rt, g, p, libs, &shape, 1, NULL, 2000000, &res,
                                           &t);
  /* the check's call, then the timed ones: 5 of the stand-in's 1 ms each pass 2 ms */
  CHECK(st == PK_OK && res.noutputs == 1 && res.worst_ratio <= 1 && t.repeats == 5 &&
            t.median_ns == 1e6 && l[8] == calls + 1 + t.repeats && l[1] == 1 && l[2] == 4 &&
            l[3] == 3 && live() == live0,
        "status %d, %d outputs (worst %g), %d repeats, %d calls, ops %d %d m %d n %d: %s", st,
        res.noutputs, res.worst_ratio, t.repeats, l[8] - calls, l[0], l[1], l[2], l[3],
        pk_ctx_error(ctx));
  setenv("MOCK_CUBLAS_WRONG", "1", 1); /* the stand-in's fault: one element off */
  st = pk_gpu_cublas_check_timed(ctx, rt, g, p, libs, &shape, 1, NULL, 0, &res, &t);
  unsetenv("MOCK_CUBLAS_WRONG");
  CHECK(st == PK_ERR_MISMATCH && strstr(pk_ctx_error(ctx), "cuBLAS sgemm 3x4x5 on Mock Orin") &&
            strstr(pk_ctx_error(ctx), "element"),
        "a wrong result: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  st = pk_gpu_cublas_check_timed(ctx, rt, g, p, "libcublas-missing.so.99", &shape, 1, NULL, 0,
                                 &res, &t);
  CHECK(st == PK_ERR_RUNTIME && strstr(pk_ctx_error(ctx), "cannot load libcublas (tried "
                                                          "libcublas-missing.so.99)"),
        "no libcublas: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  pk_sgemm_shape bad = shape;
  bad.c = bad.a; /* C must be the program's compute */
  st = pk_gpu_cublas_check_timed(ctx, rt, g, p, libs, &bad, 1, NULL, 0, &res, &t);
  CHECK(st == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), "is not an f32 compute"),
        "a shape not of this program: %s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
  PASS();
}

/* The edit: fc1's x·Wᵀ (kernel k0: x [8, 64], fc1.weight [128, 64], fc1.mm [8, 128]) made a
 * call of extern 0, in library `lib` by symbol `sym`. */
static const char *edit_lib, *edit_sym;
static void cublas_kernel(cJSON *j) {
  cJSON *x = cJSON_CreateObject();
  cJSON_AddStringToObject(x, "library", edit_lib);
  cJSON_AddStringToObject(x, "symbol", edit_sym);
  cJSON_AddStringToObject(x, "signature", PKRT_CUBLAS_SGEMM_SIGNATURE);
  cJSON *xs = cJSON_CreateArray();
  cJSON_AddItemToArray(xs, x);
  cJSON_ReplaceItemInObject(j, "externs", xs);
  cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "kernels"), 0);
  cJSON_AddNumberToObject(k, "extern", 0);
  cJSON *c = cJSON_CreateObject();
  static const char *const keys[11] = {"a", "b", "c", "m", "n", "k", "lda", "ldb", "ldc",
                                       "trans_a", "trans_b"};
  static const int v[11] = {0, 1, 2, 8, 128, 64, 64, 64, 128, 0, 1};
  for (int i = 0; i < 11; i++) cJSON_AddNumberToObject(c, keys[i], v[i]);
  cJSON_AddItemToObject(k, "sgemm", c);
}

/* art ($PK_CUBLAS_MLP): the digits MLP built for cuda -arch=sm_87 by ctest's setup
 * (test_gpu_cublas_mock_build). */
static void test_model(const char *art) {
  char ext[512], err[1024];
  FILE *f = art ? fopen(art, "rb") : NULL;
  if (!f) {
    printf("SKIP test_model: no CUDA artifact at %s (NVRTC missing where it was built?)\n",
           art ? art : "(none given)");
    return;
  }
  fclose(f);
  snprintf(ext, sizeof ext, "%s/mlp_cublas.pock", pk_test_tmpdir());
  pkrt_model *m = NULL;
  edit_lib = MOCK_CUBLAS, edit_sym = PKRT_CUBLAS_SGEMM_SYM;
  CHECK(rewrite(art, ext, cublas_kernel) == 0, "rewrite %s", art);
  int (*created)(void) = (int (*)(void))dlsym(mock, "mock_cublas_created");
  int before = created();
  int rc = pkrt_model_open(ext, NULL, &m, err, sizeof err);
  /* past the manifest and cuBLAS's handle, the stand-in driver refuses the real image */
  CHECK(rc != 0 && strstr(err, "PTX") && !strstr(err, "manifest") && !strstr(err, "libcublas"),
        "open: rc %d: %s", rc, err);
  CHECK(created() == before + 1 && live() == 0,
        "the open made %d cuBLAS handles (want 1) and left %d live (want 0)",
        created() - before, live());
  edit_lib = "libcublas-missing.so.99";
  CHECK(rewrite(art, ext, cublas_kernel) == 0, "rewrite %s", art);
  rc = pkrt_model_open(ext, NULL, &m, err, sizeof err);
  CHECK(rc != 0 && strstr(err, "calls cublasSgemm_v2 in libcublas-missing.so.99") &&
            strstr(err, "cannot load libcublas"),
        "missing libcublas: %s", err);
  edit_lib = MOCK_CUBLAS, edit_sym = PKRT_SGEMM_SYM;
  CHECK(rewrite(art, ext, cublas_kernel) == 0, "rewrite %s", art);
  rc = pkrt_model_open(ext, NULL, &m, err, sizeof err);
  CHECK(rc != 0 && strstr(err, "this runtime calls only cublasSgemm_v2") &&
            strstr(err, "in CUDA artifacts"),
        "cblas_sgemm in a CUDA artifact: %s", err);
  PASS();
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  rt = pkrt_ctx_new(1);
  pkrt_gpu_mem *mem = NULL;
  pkrt_gpu_blas *b = NULL;
  if (pkrt_gpu_open(rt, PKRT_GPU_CUDA, 0, &g) != PKRT_OK ||
      pkrt_gpu_mem_new(g, 4096, &mem) != PKRT_OK ||
      pkrt_gpu_blas_open(g, MOCK_CUBLAS, &b) != PKRT_OK ||
      !(mock = dlopen(MOCK_CUBLAS, RTLD_NOW | RTLD_NOLOAD))) {
    printf("FAIL open the stand-in driver and libcublas (LD_LIBRARY_PATH?): %s\n",
           pkrt_ctx_error(rt));
    return 1;
  }
  test_handle(b, mem);
  for (int t = 0; t < 4; t++) test_sgemm(b, mem, t & 1, t >> 1);
  test_refused();
  test_measure();
  pkrt_gpu_blas_close(b);
  check(live() == 0, "cublas_handle_destroyed_at_close", "%d handles live", live());
  if (pk_test_tmpdir_make("pock_cublas_mock") != 0) {
    printf("FAIL cannot make a scratch directory\n");
    return 1;
  }
  test_model(getenv("PK_CUBLAS_MLP"));
  pk_test_tmpdir_remove();
  dlclose(mock);
  pkrt_gpu_mem_free(mem);
  pkrt_gpu_close(g);
  pkrt_ctx_free(rt);
  return pk_test_summary("test_gpu_cublas_mock");
}
