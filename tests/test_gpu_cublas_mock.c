/* test_gpu_cublas_mock.c — cuBLAS as the CUDA extern kernel (runtime/gpu_cublas.c) against
 * stand-ins for the driver and libcublas (fixtures/mock_libcuda.c, mock_libcublas.c, found
 * through LD_LIBRARY_PATH), so that every machine runs it: the handle made at open with the
 * device's context current and bound to the device's stream, destroyed at close; the
 * row-major call as cuBLAS's column-major one (operands swapped, m and n swapped, each
 * transpose kept) for all four transposes, checked against a host matmul; event timing;
 * no allocation per call; operands too big for their views refused; and a libcublas that
 * is missing or is not cuBLAS refused naming it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_impl.h"
#include "pk_test.h"

static int counting;
static long allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__wrap_malloc(size_t n) { allocs += counting; return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { allocs += counting; return __real_calloc(a, b); }

#define MOCK_CUBLAS "libcublas.so.12" /* the stand-in's name in the test's library path */
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
  /* the stand-in driver counts one "millisecond" per kernel launch: a cuBLAS call is none */
  CHECK(st == PKRT_OK && allocs == 0 && ms == 0, "%ld allocations over 20 calls, %g ms: %s",
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
  pkrt_gpu_blas_close(b);
  check(live() == 0, "cublas_handle_destroyed_at_close", "%d handles live", live());
  dlclose(mock);
  pkrt_gpu_mem_free(mem);
  pkrt_gpu_close(g);
  pkrt_ctx_free(rt);
  return pk_test_summary("test_gpu_cublas_mock");
}
