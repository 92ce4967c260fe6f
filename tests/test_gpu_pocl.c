/* test_gpu_pocl.c — generated OpenCL kernels on a real OpenCL device (PoCL's CPU device in
 * CI) against the interpreter: every operator's forward and gradient kernel with its
 * preset GPU schedule and >= 20 sampled configs of every op class (200 with
 * POCK_TEST_SCALE=full), through pk_gpu_device_check (gpu_device_test.h). Skipped (77)
 * without an OpenCL device. PoCL runs a work-group's items in order between barriers:
 * test_gpu_barrier is what catches a missing barrier. */
#include <stdio.h>

#include "pk_test.h"
#include "gpu_device_test.h"

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_gpu_info info;
  int n = 0;
  pkrt_status st = pkrt_gpu_list(rt, PKRT_GPU_OPENCL, &info, 1, &n);
  if (st != PKRT_OK || n == 0) {
    printf("SKIP test_gpu_pocl: %s\n",
           st != PKRT_OK ? pkrt_ctx_error(rt)
                         : "no OpenCL device (Debian: pocl-opencl-icd, scripts/install-deps.sh)");
    pkrt_ctx_free(rt);
    return 77;
  }
  pkrt_gpu *g;
  if (pkrt_gpu_open(rt, PKRT_GPU_OPENCL, 0, &g) != PKRT_OK) {
    printf("FAIL open: %s\n", pkrt_ctx_error(rt));
    return 1;
  }
  printf("     opencl device 0: %s (%s, %s)\n", info.name, info.platform, info.version);
  pk_ctx *ctx = pk_ctx_new();
  gpu_device_suite(ctx, rt, g, PK_GPU_OPENCL, "opencl");
  pk_ctx_free(ctx);
  pkrt_gpu_close(g);
  pkrt_ctx_free(rt);
  return pk_test_summary("gpu_pocl");
}
