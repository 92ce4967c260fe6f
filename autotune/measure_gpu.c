/* measure_gpu.c — one GPU candidate's measuring process: opens device 0 of the target's
 * API itself (a CUDA context made before a fork is unusable in the child, and an OpenCL
 * runtime's threads do not survive one), loads the image the build phase made, checks the
 * kernel against the interpreter, then times it with device events; a cuBLAS candidate is
 * the library's call checked and timed the same way. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "measure_impl.h"
#include "pk_gpu.h"
#include "pkrt.h"

static noreturn void finish(int fd, meas_reply *r, pk_meas_status st, const char *error) {
  r->status = st;
  meas_set_error(r->error, error);
  _exit(meas_write_full(fd, r, sizeof *r) == 0 ? 0 : 1);
}

pk_status meas_gpu_compiler(pk_ctx *ctx, const pk_target *t, const char **out) {
  if (t->kind != PK_TARGET_CUDA) {
    *out = "OpenCL C, built by the device's driver";
    return PK_OK;
  }
  pk_nvrtc *nv;
  pk_status s = pk_nvrtc_open(ctx, &nv);
  if (s != PK_OK) return s;
  *out = pk_strdup(ctx, pk_nvrtc_version(nv));
  pk_nvrtc_close(nv);
  return PK_OK;
}

/* The built image: OpenCL source, or CUDA's cubin and the PTX beside it (<hash>.ptx). */
static bool read_image(pk_ctx *ctx, bool cuda, const char *path, pkrt_gpu_image *img) {
  char *text;
  size_t len;
  *img = (pkrt_gpu_image){0};
  if (pk_read_file(ctx, path, &text, &len) != PK_OK) return false;
  if (!cuda) {
    img->source = text;
    return true;
  }
  img->cubin = text;
  img->cubin_size = len;
  size_t stem = strlen(path) - strlen(".cubin");
  if (strlen(path) > 6 && !strcmp(path + stem, ".cubin")) {
    char *ptx;
    if (pk_read_file(ctx, pk_sprintf(ctx, "%.*s.ptx", (int)stem, path), &ptx, &len) == PK_OK)
      img->ptx = ptx;
    else pk_ctx_clear_error(ctx); /* the cubin alone will do on its own arch */
  }
  return true;
}

/* Device 0 of the API, opened here in the child with a runtime context of its own (*rt);
 * the process finishes if it cannot be. */
static pkrt_gpu *open_device(pk_ctx *ctx, bool cuda, pkrt_ctx **rt_out, int fd, meas_reply *r) {
  pkrt_ctx *rt = *rt_out = pkrt_ctx_new(1);
  pkrt_gpu *g;
  if (!rt) finish(fd, r, PK_MEAS_RUNTIME_ERROR, "out of memory");
  if (pkrt_gpu_open(rt, cuda ? PKRT_GPU_CUDA : PKRT_GPU_OPENCL, 0, &g) != PKRT_OK)
    finish(fd, r, PK_MEAS_RUNTIME_ERROR, pk_sprintf(ctx, "cannot open %s device 0: %s",
                                                    cuda ? "cuda" : "opencl", pkrt_ctx_error(rt)));
  return g;
}

/* A cuBLAS candidate: the library's call on the task's tensors, checked then timed. */
static noreturn void measure_cublas(pk_ctx *ctx, const pk_te_program *prog, const pk_te_ref *ref,
                                    const meas_request *rq, char *const *str, int fd,
                                    meas_reply *r) {
  if (strcmp(str[4], "cuda") != 0 || strcmp(str[2], PK_CUBLAS_SYM) != 0)
    finish(fd, r, PK_MEAS_RUNTIME_ERROR, "a malformed cuBLAS request");
  pkrt_ctx *rt;
  pkrt_gpu *g = open_device(ctx, true, &rt, fd, r);
  pk_kernel_check_result res;
  pk_status s = pk_gpu_cublas_check_timed(ctx, rt, g, prog, str[1], &rq->sgemm,
                                          rq->seed, ref, rq->min_ns, &res, &r->timing);
  if (s != PK_OK)
    finish(fd, r, s == PK_ERR_MISMATCH ? PK_MEAS_WRONG : PK_MEAS_RUNTIME_ERROR, pk_ctx_error(ctx));
  finish(fd, r, PK_MEAS_OK, NULL); /* the library and the driver go with the process */
}

noreturn void meas_gpu_child_main(pk_ctx *ctx, const pk_te_program *prog, const pk_te_ref *ref,
                                  const meas_request *rq, char *const *str, int result_fd) {
  meas_reply r = {.status = PK_MEAS_OK};
  pk_ctx_clear_error(ctx);
  if (rq->kind == MEAS_REQ_GPU_BLAS) measure_cublas(ctx, prog, ref, rq, str, result_fd, &r);
  bool cuda = !strcmp(str[4], "cuda");
  /* the builder's kernel, made again the same way: its launch geometry and the outputs a
   * schedule inlined (never written, so never compared) */
  pk_schedule *sched = NULL;
  pk_lfunc *f;
  pk_gpu_kernel k;
  if ((*str[2] && pk_sched_from_json(ctx, prog, str[2], &sched) != PK_OK) ||
      pk_sched_lower(ctx, prog, sched, "k0", &f) != PK_OK || pk_gpu_prepare(ctx, f, &k) != PK_OK)
    finish(result_fd, &r, PK_MEAS_RUNTIME_ERROR,
           pk_sprintf(ctx, "the built candidate does not lower again: %s", pk_ctx_error(ctx)));
  pkrt_gpu_image img;
  if (!read_image(ctx, cuda, str[1], &img)) finish(result_fd, &r, PK_MEAS_RUNTIME_ERROR, pk_ctx_error(ctx));
  pkrt_ctx *rt;
  pkrt_gpu *g = open_device(ctx, cuda, &rt, result_fd, &r);
  pkrt_gpu_module *mod;
  if (pkrt_gpu_module_load(g, &img, &k.desc, 1, &mod) != PKRT_OK) /* OpenCL: its build log */
    finish(result_fd, &r, cuda ? PK_MEAS_RUNTIME_ERROR : PK_MEAS_COMPILE_ERROR,
           pk_sprintf(ctx, "loading on %s: %s", pkrt_gpu_describe(g)->name, pkrt_ctx_error(rt)));
  memcpy(r.grid, k.desc.grid, sizeof r.grid);
  memcpy(r.block, k.desc.block, sizeof r.block);
  pk_kernel_check_result res;
  pk_status s = pk_gpu_device_check_timed(ctx, rt, g, mod, prog, sched, &k, rq->seed, ref,
                                          rq->min_ns, &res, &r.timing);
  if (s != PK_OK)
    finish(result_fd, &r, s == PK_ERR_MISMATCH ? PK_MEAS_WRONG : PK_MEAS_RUNTIME_ERROR, pk_ctx_error(ctx));
  /* the process ends here: the driver's objects go with it */
  finish(result_fd, &r, PK_MEAS_OK, NULL);
}
