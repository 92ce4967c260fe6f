/* stage_codegen.c — the source the schedule stage emitted (every kernel in ONE source:
 * compiling one file is much cheaper than many), built once through the target's backend;
 * the kernel object's bytes (GPU: the OpenCL C source, or the cubin and its PTX, with each
 * kernel's launch) go into the artifact. If the chosen schedules do not build,
 * the default ones are tried once; a build past the time limit is an error naming the
 * kernel with the most code. */
#include <stdlib.h>
#include <string.h>

#include "driver_impl.h"

static pk_status build(drv_state *S, pk_build_result *r) {
  pk_status s = pk_backend_build(S->backend, S->unit, r);
  if (s != PK_OK) return s;
  S->source = (char *)r->source;
  S->so_path = r->path;
  char *bytes;
  size_t len;
  if ((s = pk_read_file(S->ctx, r->path, &bytes, &len)) != PK_OK) return s;
  S->so = bytes;
  S->so_len = len;
  return PK_OK;
}

/* Every kernel again with the default schedule, into a fresh source. */
static pk_status use_defaults(drv_state *S) {
  pk_cgen_unit_free(S->unit);
  pk_status s = pk_backend_unit_new(S->backend, &S->unit);
  S->workspace_bytes = 0;
  for (int i = 0; i < S->nkernels && s == PK_OK; i++) {
    drv_kernel *K = &S->kernels[i];
    K->sched = NULL;
    K->source = K->ext_sym ? DRV_SCHED_EXTERN : DRV_SCHED_DEFAULT; /* the extern still serves */
    if (!K->ext_sym) K->record_id = NULL;
    if ((s = drv_lower(S, i, NULL, &K->func)) != PK_OK) return s;
    if (K->func->workspace_bytes > S->workspace_bytes) S->workspace_bytes = K->func->workspace_bytes;
    s = pk_cgen_unit_add(S->unit, K->func, K->name);
  }
  if (s == PK_OK) drv_memplan_workspace(S);
  return s;
}

/* OpenCL: the program built on this machine's device 0 (the one the runtime opens), its
 * binary kept for the artifact beside the source with the device it is for. No device, or
 * a build that fails, leaves the source alone: one line says so, and the compile goes on
 * (an artifact with the binary says so in its "wrote" line). */
static void opencl_binary(drv_state *S) {
  pk_gpu_kernel *ks = pk_alloc(S->ctx, sizeof *ks * (size_t)(S->nkernels + 1));
  for (int i = 0; i < S->nkernels; i++) ks[i] = *pk_cgen_unit_gpu_kernel(S->unit, i);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_gpu *g = NULL;
  pkrt_gpu_module *mod = NULL;
  void *bin = NULL;
  size_t n = 0;
  const char *why = NULL;
  if (!rt) {
    why = "out of memory";
  } else if (pkrt_gpu_open(rt, PKRT_GPU_OPENCL, 0, &g) != PKRT_OK) {
    why = pk_strdup(S->ctx, pkrt_ctx_error(rt));
  } else if (pk_gpu_device_load(S->ctx, rt, g, ks, S->nkernels, S->source, &mod) != PK_OK) {
    why = pk_strdup(S->ctx, pk_ctx_error(S->ctx));
    pk_ctx_clear_error(S->ctx);
  } else if (pkrt_gpu_module_binary(mod, &bin, &n) != PKRT_OK) {
    why = pk_strdup(S->ctx, pkrt_ctx_error(rt));
  } else {
    S->clbin = pk_alloc(S->ctx, n);
    memcpy(S->clbin, bin, n);
    S->clbin_len = n;
    S->clbin_for = *pkrt_gpu_describe(g); /* the "wrote" line names it */
  }
  if (why) /* one line: a build log's first */
    fprintf(S->log, "pock: the artifact holds the OpenCL source only (no device binary: %.*s)\n",
            (int)strcspn(why, "\n"), why);
  free(bin);
  pkrt_gpu_module_free(mod);
  if (g) pkrt_gpu_close(g);
  pkrt_ctx_free(rt);
}

/* A GPU target: each kernel's launch for the manifest (the unit holds kernel i as "k<i>"),
 * for CUDA the PTX the build wrote beside the cubin (the runtime's fallback for an arch
 * newer than the cubin's), for OpenCL the device binary. */
static pk_status gpu_image(drv_state *S) {
  for (int i = 0; i < S->nkernels; i++) {
    const pk_gpu_kernel *k = pk_cgen_unit_gpu_kernel(S->unit, i);
    if (!k || strcmp(k->desc.name, S->kernels[i].func->name))
      return pk_ctx_fail(S->ctx, PK_ERR_BUILD, "compile: kernel k%d %s has no GPU launch", i,
                         S->kernels[i].name);
    S->kernels[i].gpu = k->desc;
  }
  if (S->target->kind != PK_TARGET_CUDA) {
    if (!S->o->no_device_binary) opencl_binary(S);
    return PK_OK;
  }
  size_t n = strlen(S->so_path);
  const char *ptx = pk_sprintf(S->ctx, "%.*s.ptx", (int)(n > 6 ? n - 6 : n), S->so_path);
  char *bytes;
  pk_status s = pk_read_file(S->ctx, ptx, &bytes, &S->ptx_len);
  S->ptx = bytes;
  return s;
}

pk_status drv_codegen(drv_state *S) {
  pk_build_result r;
  pk_status s = build(S, &r);
  if (s == PK_ERR_BUILD && r.timed_out) {
    const char *why = pk_strdup(S->ctx, pk_ctx_error(S->ctx));
    pk_ctx_clear_error(S->ctx); /* the first failure wins: restate it */
    return pk_ctx_fail(S->ctx, s, "compile: %s (raise it with --build-timeout)", why);
  }
  if (s == PK_ERR_BUILD) {
    bool any = false;
    for (int i = 0; i < S->nkernels; i++) any = any || S->kernels[i].sched;
    if (!any) return s;
    fprintf(S->log, "pock: warning: the chosen schedules do not build (%s); using default schedules\n",
            pk_ctx_error(S->ctx));
    pk_ctx_clear_error(S->ctx);
    if ((s = use_defaults(S)) == PK_OK) s = build(S, &r);
  }
  if (s == PK_OK && drv_on_gpu(S)) s = gpu_image(S);
  pk_cgen_unit_free(S->unit);
  S->unit = NULL;
  return s;
}
