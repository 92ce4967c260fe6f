/* test_gpu_cuda_mock.c — the runtime's CUDA path against a stand-in driver
 * (fixtures/mock_libcuda.c, found as libcuda.so.1 through LD_LIBRARY_PATH), so that every
 * machine runs it: describing the device (a clock query the driver refuses reads 0),
 * cubin-then-PTX loading, the PTX-version refusals naming both versions, the JIT log and
 * error names in messages, launch argument marshalling (buffers, 64-bit scalars,
 * workspace; the mock runs the kernels of gpu_test_kernels.h as C loops over the grid),
 * event timing, no allocation per launch, and the primary context released at close. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"
#include "pock/pkrt_gpu.h"
#include "pk_test.h"
#include "gpu_test_kernels.h"

#include "alloc_wrap.h"

static pkrt_ctx *rt;
static pkrt_gpu *g;
static const char ptx[] = "// MOCK PTX\n.version 7.8\n.target sm_87\n";

static int has(const char *needle) { return strstr(pkrt_ctx_error(rt), needle) != NULL; }

static void test_describe(void) {
  const pkrt_gpu_info *i = pkrt_gpu_describe(g);
  CHECK(!strcmp(i->name, "Mock Orin") && !strcmp(i->vendor, "NVIDIA") && i->sm == 87 &&
            !strcmp(i->version, "sm_87") && i->driver_version == 12020 &&
            !strcmp(i->driver, "12.2"),
        "%s %s sm %d %s driver %s (%d)", i->name, i->vendor, i->sm, i->version, i->driver,
        i->driver_version);
  CHECK(i->compute_units == 16 && i->clock_mhz == 1300 && i->memory_clock_mhz == 0 &&
            i->memory_bytes == (int64_t)8 << 30 && i->max_block_threads == 1024 &&
            i->base_align == 1,
        "units %d clock %d memclock %d", i->compute_units, i->clock_mhz, i->memory_clock_mhz);
  pkrt_gpu_info l;
  int n = 0;
  CHECK(pkrt_gpu_list(rt, PKRT_GPU_CUDA, &l, 1, &n) == PKRT_OK && n == 1 &&
            !strcmp(l.name, "Mock Orin"), "list: %d, %s", n, pkrt_ctx_error(rt));
  PASS();
}

static void run(const char *what, const pkrt_gpu_image *img) {
  pkrt_gpu_module *mod = NULL;
  gt_buffers bf = {0};
  char name[96];
  snprintf(name, sizeof name, "mock_load_%s", what);
  int ok = pkrt_gpu_module_load(g, img, gt_kernels, GT_NKERNELS, &mod) == PKRT_OK;
  check(ok, name, "%s", pkrt_ctx_error(rt));
  if (!ok) return;
  if (!gt_buffers_make(rt, g, &bf)) {
    failures++;
    goto done;
  }
  double ms = -1;
  pkrt_status st = PKRT_OK;
  for (int k = 0; k < GT_NKERNELS && st == PKRT_OK; k++)
    st = gt_launch(mod, k, &bf, k == GT_MATMUL ? &ms : NULL);
  if (st == PKRT_OK) st = pkrt_gpu_sync(g);
  snprintf(name, sizeof name, "mock_launch_%s", what);
  check(st == PKRT_OK && ms == 1.0, name, "%s; timed %g ms (the mock: 1 per launch)",
        pkrt_ctx_error(rt), ms);
  snprintf(name, sizeof name, "mock_%s", what);
  if (st == PKRT_OK) gt_compare(rt, name, &bf);
done:
  pkrt_gpu_module_free(mod);
  pkrt_gpu_mem_free(bf.arena);
}

static void test_no_allocs(void) {
  pkrt_gpu_module *mod = NULL;
  gt_buffers bf = {0};
  CHECK(pkrt_gpu_module_load(g, &(pkrt_gpu_image){.ptx = ptx}, gt_kernels, GT_NKERNELS, &mod) ==
            PKRT_OK && gt_buffers_make(rt, g, &bf), "%s", pkrt_ctx_error(rt));
  double ms;
  pkrt_status st = PKRT_OK;
  counting = 1;
  for (int r = 0; r < 20 && st == PKRT_OK; r++)
    for (int k = 0; k < GT_NKERNELS && st == PKRT_OK; k++)
      st = gt_launch(mod, k, &bf, r % 2 ? &ms : NULL);
  counting = 0;
  pkrt_gpu_ptr three[] = {bf.x, bf.y, bf.c};
  pkrt_status many = pkrt_gpu_launch(mod, GT_AXPB, three, 3, NULL, 0, NULL, NULL);
  pkrt_gpu_module_free(mod);
  pkrt_gpu_mem_free(bf.arena);
  CHECK(st == PKRT_OK && allocs == 0, "%ld allocations over 60 launches (%s)", allocs,
        pkrt_ctx_error(rt));
  CHECK(many == PKRT_ERR_INPUT && has("k_axpb takes 2 buffers and 0 scalars, given 3 and 0"),
        "too many buffers: %s", pkrt_ctx_error(rt));
  PASS();
}

static void refused(const char *name, const pkrt_gpu_image *img, const pkrt_gpu_kernel_desc *k,
                    const char *msg, const char *msg2) {
  pkrt_gpu_module *mod = NULL;
  pkrt_status st = pkrt_gpu_module_load(g, img, k, 1, &mod);
  check(st == PKRT_ERR_LOAD && has(msg) && (!msg2 || has(msg2)) && !mod, name, "status %s: %s",
        pkrt_status_name(st), pkrt_ctx_error(rt));
  pkrt_gpu_module_free(mod);
}

static void test_errors(void) {
  const pkrt_gpu_kernel_desc *k0 = &gt_kernels[0];
  static const char junk[16] = "not a cubin";
  refused("mock_bad_cubin", &(pkrt_gpu_image){.cubin = junk, .cubin_size = 16}, k0,
          "cuModuleLoadData(cubin for sm_87): CUDA_ERROR_INVALID_IMAGE", NULL);
  refused("mock_ptx_isa_needs_newer_driver", &(pkrt_gpu_image){.ptx = "// MOCK\n.version 9.0\n"},
          k0, "the PTX is ISA version 9.0, which needs a CUDA 13.0 driver; this driver is "
          "CUDA 12.2", NULL);
  refused("mock_ptx_unknown_isa", &(pkrt_gpu_image){.ptx = "// MOCK\n.version 99.1\n"}, k0,
          "cuModuleLoadData(PTX ISA 99.1, this driver CUDA 12.2, too old for it): "
          "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: mock: PTX ISA too new", NULL);
  refused("mock_cubin_and_ptx_fail",
          &(pkrt_gpu_image){.cubin = junk, .cubin_size = 16, .ptx = ".version 7.8\n"}, k0,
          "cuModuleLoadData(PTX ISA 7.8, this driver CUDA 12.2): CUDA_ERROR_INVALID_IMAGE "
          "(the cubin for sm_87: CUDA_ERROR_INVALID_IMAGE): mock: not a module image", NULL);
  pkrt_gpu_kernel_desc k = gt_kernels[GT_AXPB];
  k.name = "k_missing";
  refused("mock_wrong_kernel_name", &(pkrt_gpu_image){.ptx = ptx}, &k,
          "cuModuleGetFunction(k_missing): CUDA_ERROR_NOT_FOUND", NULL);
  pkrt_gpu *none = NULL;
  pkrt_status st = pkrt_gpu_open(rt, PKRT_GPU_CUDA, 1, &none);
  check(st == PKRT_ERR_INPUT && has("no CUDA device 1 (1 found)") && !none, "mock_no_device_1",
        "%s", pkrt_ctx_error(rt));
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  rt = pkrt_ctx_new(1);
  if (pkrt_gpu_open(rt, PKRT_GPU_CUDA, 0, &g) != PKRT_OK) {
    printf("FAIL open the mock driver (LD_LIBRARY_PATH?): %s\n", pkrt_ctx_error(rt));
    return 1;
  }
  test_describe();
  run("ptx", &(pkrt_gpu_image){.ptx = ptx});
  run("cubin", &(pkrt_gpu_image){.cubin = "MOCKCUBIN", .cubin_size = 10});
  run("ptx_fallback", &(pkrt_gpu_image){.cubin = "garbage", .cubin_size = 8, .ptx = ptx});
  test_no_allocs();
  test_errors();
  pkrt_gpu_close(g);
  /* The driver stays loaded (RTLD_NODELETE): its primary context must have been released. */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  int (*refs)(void) = lib ? (int (*)(void))dlsym(lib, "mock_cuda_ctx_refs") : NULL;
  check(refs && refs() == 0, "mock_primary_context_released", "%d references left",
        refs ? refs() : -1);
  pkrt_ctx_free(rt);
  return pk_test_summary("test_gpu_cuda_mock");
}
