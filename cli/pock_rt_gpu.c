/* pock_rt_gpu.c — `pock-rt gpu`: the GPU devices this device's runtime sees, through OpenCL
 * and the CUDA driver (each loaded with dlopen), or why it sees none. */
#include <stdio.h>
#include <string.h>

#include "pkrt.h"
#include "pock/pkrt_gpu.h"
#include "pock_rt.h"

static const char gpu_help[] =
    "usage: pock-rt gpu\n"
    "\n"
    "Lists the GPU devices the runtime can use: for OpenCL (the ICD loader libOpenCL.so.1)\n"
    "each platform's devices, for CUDA (the driver libcuda.so.1) each device, with what a\n"
    "GPU fingerprint holds: name, SM or OpenCL version, driver version, clocks, memory.\n"
    "An API with no device, or whose library is missing, says so in its line.\n"
    "\n"
    "Exit status: 0 (also when no GPU is seen), 2 usage.\n";

#define GPU_LIST_MAX 32

static void list_api(pkrt_ctx *rt, pkrt_gpu_api api) {
  pkrt_gpu_info info[GPU_LIST_MAX];
  int n = 0;
  const char *name = pkrt_gpu_api_name(api);
  if (pkrt_gpu_list(rt, api, info, GPU_LIST_MAX, &n) != PKRT_OK) {
    printf("%s: none (%s)\n", name, pkrt_ctx_error(rt));
    return;
  }
  if (n == 0) {
    printf("%s: none (no device)\n", name);
    return;
  }
  printf("%s: %d device%s\n", name, n, n == 1 ? "" : "s");
  for (int i = 0; i < n && i < GPU_LIST_MAX; i++) {
    const pkrt_gpu_info *d = &info[i];
    printf("  %d  %s | %s | %s | driver %s%s | %d %s, %d MHz", d->index, d->name,
           api == PKRT_GPU_CUDA ? d->vendor : d->platform, d->version,
           api == PKRT_GPU_CUDA ? "CUDA " : "", d->driver, d->compute_units,
           api == PKRT_GPU_CUDA ? "SMs" : "compute units", d->clock_mhz);
    if (d->memory_clock_mhz) printf(", memory %d MHz", d->memory_clock_mhz);
    printf(", %lld MiB\n", (long long)(d->memory_bytes >> 20));
  }
  if (n > GPU_LIST_MAX) printf("  (%d more not shown)\n", n - GPU_LIST_MAX);
}

int pkrt_cmd_gpu(int argc, char **argv) {
  if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
    fputs(gpu_help, stdout);
    return PKRT_EXIT_OK;
  }
  if (argc > 0) return pkrt_cli_usage("gpu takes no arguments, given '%s'", argv[0]);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pkrt_cli_fail("out of memory");
  list_api(rt, PKRT_GPU_OPENCL);
  list_api(rt, PKRT_GPU_CUDA);
  pkrt_ctx_free(rt);
  return PKRT_EXIT_OK;
}
