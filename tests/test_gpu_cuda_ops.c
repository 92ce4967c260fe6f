/* test_gpu_cuda_ops.c — generated CUDA kernels, NVRTC-compiled for the device's sm_NN and
 * launched on a CUDA GPU, against the interpreter: every operator's forward and gradient
 * kernel with its preset GPU schedule and >= 20 sampled configs of every op class (200
 * with POCK_TEST_SCALE=full), the OpenCL test_gpu_pocl's suite (gpu_device_test.h). Without
 * a GPU it prints "skipped: no GPU" and exits 77; with one but no libnvrtc it skips too,
 * saying which names were tried. */
#include <stdio.h>

#include "pk_test.h"
#include "gpu_device_test.h"

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_gpu_info info;
  int n = 0;
  pkrt_status st = pkrt_gpu_list(rt, PKRT_GPU_CUDA, &info, 1, &n);
  if (st != PKRT_OK || n == 0) {
    printf("skipped: no GPU (%s)\n", st != PKRT_OK ? pkrt_ctx_error(rt) : "the driver sees no device");
    pkrt_ctx_free(rt);
    return 77;
  }
  pk_ctx *ctx = pk_ctx_new();
  pk_nvrtc *nv;
  if (pk_nvrtc_open(ctx, &nv) != PK_OK) {
    printf("SKIP test_gpu_cuda_ops: a GPU but no NVRTC: %s\n", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    pkrt_ctx_free(rt);
    return 77;
  }
  printf("     cuda device 0: %s (sm_%d, CUDA %s driver, %s)\n", info.name, info.sm, info.driver,
         pk_nvrtc_version(nv));
  pk_nvrtc_close(nv);
  pkrt_gpu *g;
  if (pkrt_gpu_open(rt, PKRT_GPU_CUDA, 0, &g) != PKRT_OK) {
    printf("FAIL open: %s\n", pkrt_ctx_error(rt));
    return 1;
  }
  gpu_device_suite(ctx, rt, g, PK_GPU_CUDA, pk_sprintf(ctx, "cuda -arch=sm_%d", info.sm));
  pk_ctx_free(ctx);
  pkrt_gpu_close(g);
  pkrt_ctx_free(rt);
  return pk_test_summary("gpu_cuda_ops");
}
