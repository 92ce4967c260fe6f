/* test_gpu_opencl.c — GPU devices through OpenCL on whatever OpenCL device is installed
 * (PoCL's CPU device in CI): listing and describing, hand-written kernels that follow the
 * kernel contract (elementwise, a tiled matmul staged in __local memory between barriers,
 * scalars and a workspace) against C loops, event timing, no allocation by libpockrt per
 * launch, program binaries (read back, loaded, a refused one replaced by the source), and
 * the errors: a bad source (build log in the message), a wrong kernel name, parameter
 * counts, too many buffers, alignment, sizes. Exit 77 without an OpenCL device. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"
#include "pock/pkrt_gpu.h"
#include "pk_test.h"
#include "gpu_test_kernels.h"

/* --wrap counts the allocations libpockrt's own code makes (the OpenCL driver's are its
 * business); launches must make none. */
#include "alloc_wrap.h"

static pkrt_ctx *rt;
static pkrt_gpu *g;

static int has(const char *needle) { return strstr(pkrt_ctx_error(rt), needle) != NULL; }

static void test_describe(const pkrt_gpu_info *listed) {
  const pkrt_gpu_info *i = pkrt_gpu_describe(g);
  printf("device: %s | %s | %s | %s | driver %s | %d CUs | %d MHz | %lld MiB | align %lld\n",
         i->platform, i->name, i->vendor, i->version, i->driver, i->compute_units, i->clock_mhz,
         (long long)(i->memory_bytes >> 20), (long long)i->base_align);
  CHECK(i->api == PKRT_GPU_OPENCL && i->index == 0, "api %d index %d", i->api, i->index);
  CHECK(i->name[0] && i->platform[0] && strncmp(i->version, "OpenCL ", 7) == 0 && i->driver[0],
        "name '%s' platform '%s' version '%s' driver '%s'", i->name, i->platform, i->version,
        i->driver);
  CHECK(i->memory_bytes > 0 && i->max_block_threads > 0 && i->base_align >= 1 &&
            i->compute_units > 0 && i->sm == 0,
        "memory %lld, block %lld, align %lld, units %d", (long long)i->memory_bytes,
        (long long)i->max_block_threads, (long long)i->base_align, i->compute_units);
  CHECK(!strcmp(listed->name, i->name) && listed->memory_bytes == i->memory_bytes,
        "pkrt_gpu_list says '%s', the open device '%s'", listed->name, i->name);
  PASS();
}

static void test_kernels(void) {
  pkrt_gpu_image img = {.source = gt_opencl_source};
  pkrt_gpu_module *mod = NULL;
  gt_buffers bf = {0};
  int ok = pkrt_gpu_module_load(g, &img, gt_kernels, GT_NKERNELS, &mod) == PKRT_OK;
  check(ok, "opencl_module_load", "%s", pkrt_ctx_error(rt));
  if (!ok) goto done;
  if (!gt_buffers_make(rt, g, &bf)) { /* it printed the FAIL line */
    failures++;
    goto done;
  }
  check(pkrt_gpu_module_find(mod, "k_matmul") == GT_MATMUL &&
            pkrt_gpu_module_find(mod, "k_nope") == -1,
        "opencl_module_find", "k_matmul at %d", pkrt_gpu_module_find(mod, "k_matmul"));
  double ms = -1;
  pkrt_status st = PKRT_OK;
  for (int k = 0; k < GT_NKERNELS && st == PKRT_OK; k++)
    st = gt_launch(mod, k, &bf, k == GT_MATMUL ? &ms : NULL);
  if (st == PKRT_OK) st = pkrt_gpu_sync(g);
  check(st == PKRT_OK, "opencl_launch", "%s", pkrt_ctx_error(rt));
  check(st == PKRT_OK && ms >= 0 && ms < 10000, "opencl_event_timing", "%g ms", ms);
  if (st == PKRT_OK) gt_compare(rt, "opencl", &bf);

  /* Launches allocate nothing in libpockrt, timed or not. */
  counting = 1;
  for (int r = 0; r < 20 && st == PKRT_OK; r++)
    for (int k = 0; k < GT_NKERNELS && st == PKRT_OK; k++)
      st = gt_launch(mod, k, &bf, r % 2 ? &ms : NULL);
  counting = 0;
  if (st == PKRT_OK) st = pkrt_gpu_sync(g);
  check(st == PKRT_OK && allocs == 0, "opencl_launch_allocates_nothing",
        "%ld allocations over 60 launches (%s)", allocs, pkrt_ctx_error(rt));

  /* Launch-time refusals: nothing is queued. */
  pkrt_gpu_ptr three[] = {bf.x, bf.y, bf.c};
  st = pkrt_gpu_launch(mod, GT_AXPB, three, 3, NULL, 0, NULL, NULL);
  check(st == PKRT_ERR_INPUT && has("k_axpb takes 2 buffers and 0 scalars, given 3 and 0"),
        "opencl_too_many_buffers", "%s", pkrt_ctx_error(rt));
  const int64_t sc[2] = {1, 2};
  pkrt_gpu_ptr two[] = {bf.x2, bf.y2};
  st = pkrt_gpu_launch(mod, GT_SCALED, two, 2, sc, 2, NULL, NULL);
  check(st == PKRT_ERR_INPUT && has("k_scaled: workspace 0 is not a view"),
        "opencl_workspace_missing", "%s", pkrt_ctx_error(rt));
  pkrt_gpu_ptr small;
  if (pkrt_gpu_mem_view(bf.arena, bf.ws.offset, 16, &small) == PKRT_OK) {
    st = pkrt_gpu_launch(mod, GT_SCALED, two, 2, sc, 2, &small, NULL);
    check(st == PKRT_ERR_INPUT && has("needs a workspace of 1024 bytes, given 16"),
          "opencl_workspace_small", "%s", pkrt_ctx_error(rt));
  } else {
    check(0, "opencl_workspace_small", "view: %s", pkrt_ctx_error(rt));
  }
  st = pkrt_gpu_launch(mod, GT_AXPB, two, 2, NULL, 0, &bf.ws, NULL);
  check(st == PKRT_ERR_INPUT && has("has no workspace"), "opencl_workspace_unwanted", "%s",
        pkrt_ctx_error(rt));
  st = pkrt_gpu_launch(mod, 7, two, 2, NULL, 0, NULL, NULL);
  check(st == PKRT_ERR_INPUT && has("index 7"), "opencl_kernel_index", "%s", pkrt_ctx_error(rt));
done:
  pkrt_gpu_module_free(mod);
  pkrt_gpu_mem_free(bf.arena);
}

/* The program binary: read back from a source build, it loads as the binary and its
 * kernels give the C loops' results; one the driver refuses falls back to the source; a
 * binary fits only a device equal in all four strings. */
static void test_binary(void) {
  pkrt_gpu_image img = {.source = gt_opencl_source};
  pkrt_gpu_module *mod = NULL, *again = NULL, *junked = NULL;
  void *bin = NULL;
  size_t size = 0;
  gt_buffers bf = {0};
  pkrt_status st = pkrt_gpu_module_load(g, &img, gt_kernels, GT_NKERNELS, &mod);
  if (st == PKRT_OK) st = pkrt_gpu_module_binary(mod, &bin, &size);
  check(st == PKRT_OK && size > 0 && !pkrt_gpu_module_from_binary(mod), "opencl_binary_read",
        "%s (%zu bytes)", pkrt_ctx_error(rt), size);
  img.binary = bin;
  img.binary_size = size;
  if (st == PKRT_OK) st = pkrt_gpu_module_load(g, &img, gt_kernels, GT_NKERNELS, &again);
  check(st == PKRT_OK && pkrt_gpu_module_from_binary(again), "opencl_binary_load", "%s",
        pkrt_ctx_error(rt));
  if (st == PKRT_OK && gt_buffers_make(rt, g, &bf)) {
    for (int k = 0; k < GT_NKERNELS && st == PKRT_OK; k++) st = gt_launch(again, k, &bf, NULL);
    if (st == PKRT_OK) st = pkrt_gpu_sync(g);
    check(st == PKRT_OK, "opencl_binary_launch", "%s", pkrt_ctx_error(rt));
    if (st == PKRT_OK) gt_compare(rt, "opencl_binary", &bf);
  }
  static const unsigned char junk[64] = "not an OpenCL program binary";
  img.binary = junk;
  img.binary_size = sizeof junk;
  st = pkrt_gpu_module_load(g, &img, gt_kernels, GT_NKERNELS, &junked);
  check(st == PKRT_OK && !pkrt_gpu_module_from_binary(junked), "opencl_binary_refused_source",
        "%s", pkrt_ctx_error(rt));
  const pkrt_gpu_info *i = pkrt_gpu_describe(g);
  pkrt_gpu_binary_for same = {i->name, i->version, i->driver, i->platform}, other = same;
  other.driver = "another driver";
  check(pkrt_gpu_binary_fits(i, &same) && !pkrt_gpu_binary_fits(i, &other), "opencl_binary_fits",
        "the open device's four strings should fit, another driver not");
  free(bin);
  pkrt_gpu_module_free(mod);
  pkrt_gpu_module_free(again);
  pkrt_gpu_module_free(junked);
  pkrt_gpu_mem_free(bf.arena);
}

/* A module that must not load: its status and a part of its message. */
static void refused(const char *name, const char *src, const pkrt_gpu_kernel_desc *k,
                    pkrt_status want, const char *msg, const char *msg2) {
  pkrt_gpu_image img = {.source = src};
  pkrt_gpu_module *mod = NULL;
  pkrt_status st = pkrt_gpu_module_load(g, &img, k, 1, &mod);
  check(st == want && has(msg) && (!msg2 || has(msg2)) && !mod, name, "status %s: %s",
        pkrt_status_name(st), pkrt_ctx_error(rt));
  pkrt_gpu_module_free(mod);
}

static void test_errors(void) {
  refused("opencl_bad_source_build_log",
          "__kernel void k_axpb(__global float *x) { x[0] = undeclared_thing; }", &gt_kernels[0],
          PKRT_ERR_LOAD, "clBuildProgram: CL_BUILD_PROGRAM_FAILURE: ", "undeclared_thing");
  pkrt_gpu_kernel_desc k = gt_kernels[GT_AXPB];
  k.name = "k_missing";
  refused("opencl_wrong_kernel_name", gt_opencl_source, &k, PKRT_ERR_GPU,
          "clCreateKernel(k_missing): CL_INVALID_KERNEL_NAME", NULL);
  k = gt_kernels[GT_AXPB];
  k.nbufs = 3;
  refused("opencl_descriptor_counts", gt_opencl_source, &k, PKRT_ERR_LOAD,
          "k_axpb has 2 parameters, its descriptor 3 (3 buffers, 0 scalars)", NULL);
  k = gt_kernels[GT_AXPB];
  k.block[0] = 1u << 20;
  refused("opencl_block_too_big", gt_opencl_source, &k, PKRT_ERR_INPUT,
          "k_axpb: a block of 1048576 threads, the device allows", NULL);
  k = gt_kernels[GT_AXPB];
  k.grid[1] = 0;
  refused("opencl_zero_grid", gt_opencl_source, &k, PKRT_ERR_INPUT, "at least 1", NULL);
  k = gt_kernels[GT_AXPB];
  k.shared_bytes = 1024;
  refused("opencl_dynamic_shared", gt_opencl_source, &k, PKRT_ERR_INPUT,
          "declare their __local memory", NULL);
  refused("opencl_no_source", NULL, &gt_kernels[0], PKRT_ERR_INPUT, "OpenCL C source", NULL);

  pkrt_gpu_mem *m = NULL;
  pkrt_gpu_ptr p;
  if (pkrt_gpu_mem_new(g, 4096, &m) != PKRT_OK) {
    check(0, "opencl_views", "%s", pkrt_ctx_error(rt));
    return;
  }
  int64_t align = pkrt_gpu_describe(g)->base_align;
  pkrt_status st = pkrt_gpu_mem_view(m, 4000, 200, &p);
  check(st == PKRT_ERR_INPUT && has("outside the device arena of 4096 bytes"),
        "opencl_view_outside", "%s", pkrt_ctx_error(rt));
  if (align > 1) {
    st = pkrt_gpu_mem_view(m, 4, 64, &p);
    check(st == PKRT_ERR_INPUT && has("multiples of"), "opencl_view_misaligned", "%s",
          pkrt_ctx_error(rt));
  }
  float f[4] = {0};
  st = pkrt_gpu_copy_to(m, 4090, f, sizeof f);
  check(st == PKRT_ERR_INPUT && has("copy to the device"), "opencl_copy_outside", "%s",
        pkrt_ctx_error(rt));
  /* The same view twice is one sub-buffer. */
  pkrt_gpu_ptr q;
  int same = pkrt_gpu_mem_view(m, (size_t)align * 2, 64, &p) == PKRT_OK &&
             pkrt_gpu_mem_view(m, (size_t)align * 2, 64, &q) == PKRT_OK && p.handle == q.handle;
  check(same || (size_t)align * 2 + 64 > 4096, "opencl_view_reused", "%s", pkrt_ctx_error(rt));
  pkrt_gpu_mem_free(m);

  pkrt_gpu *none = NULL;
  st = pkrt_gpu_open(rt, PKRT_GPU_OPENCL, 99, &none);
  check(st == PKRT_ERR_INPUT && has("no OpenCL device 99") && !none, "opencl_no_such_device",
        "%s", pkrt_ctx_error(rt));
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  rt = pkrt_ctx_new(1);
  pkrt_gpu_info list[8];
  int n = 0;
  pkrt_status st = pkrt_gpu_list(rt, PKRT_GPU_OPENCL, list, 8, &n);
  if (st != PKRT_OK || n == 0) {
    printf("SKIP test_gpu_opencl: %s\n",
           st != PKRT_OK ? pkrt_ctx_error(rt)
                         : "no OpenCL device (Debian: pocl-opencl-icd, scripts/install-deps.sh)");
    pkrt_ctx_free(rt);
    return 77;
  }
  for (int i = 0; i < n && i < 8; i++)
    printf("opencl device %d: %s (%s)\n", i, list[i].name, list[i].platform);
  if (pkrt_gpu_open(rt, PKRT_GPU_OPENCL, 0, &g) != PKRT_OK) {
    printf("FAIL open: %s\n", pkrt_ctx_error(rt));
    return 1;
  }
  test_describe(&list[0]);
  test_kernels();
  test_binary();
  test_errors();
  pkrt_gpu_close(g);
  pkrt_ctx_free(rt);
  return pk_test_summary("test_gpu_opencl");
}
