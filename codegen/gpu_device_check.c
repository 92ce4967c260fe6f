/* gpu_device_check.c — the GPU twin of pk_kernel_check: prepared GPU kernels loaded as one
 * module on a real OpenCL or CUDA device (through libpockrt's pkrt_gpu), run on the
 * interpreter's seeded random inputs in one device arena, compared with it, and timed with
 * device events; any other operation on the tensors (cuBLAS) goes through the same steps. */
#include "pk_gpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Views start on multiples of this even where the device asks for less (CUDA: 1), so
 * vectorized loads of any width find their buffers aligned. */
#define DEVICE_CHECK_ALIGN 256

/* "k0" or "k0 ... k63": the kernels a message is about. */
static const char *kernel_names(pk_ctx *ctx, const pk_gpu_kernel *kernels, int n) {
  return n == 1 ? kernels[0].desc.name
                : pk_sprintf(ctx, "%s ... %s", kernels[0].desc.name, kernels[n - 1].desc.name);
}

/* The runtime's message as a compiler error, naming what was being done. */
static pk_status rt_fail(pk_ctx *ctx, pkrt_ctx *rt, const char *what) {
  return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "%s: %s", what, pkrt_ctx_error(rt));
}

pk_status pk_gpu_device_load(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_gpu_kernel *kernels,
                             int n, const char *source, pkrt_gpu_module **out) {
  *out = NULL;
  if (n <= 0 || !source) return pk_ctx_fail(ctx, PK_ERR_USAGE, "no GPU kernels to load");
  const pkrt_gpu_info *info = pkrt_gpu_describe(g);
  /* the module keeps the descriptors: they live in ctx's arena */
  pkrt_gpu_kernel_desc *descs = pk_alloc(ctx, sizeof *descs * (size_t)n);
  for (int i = 0; i < n; i++) descs[i] = kernels[i].desc;
  pkrt_gpu_image img = {0};
  pk_nvrtc *nv = NULL;
  if (info->api == PKRT_GPU_CUDA) {
    pk_nvrtc_image im;
    const char *arch = pk_sprintf(ctx, "sm_%d", info->sm);
    pk_status s = pk_nvrtc_open(ctx, &nv);
    if (s == PK_OK) s = pk_nvrtc_compile(nv, source, arch, &im);
    pk_nvrtc_close(nv);
    if (s != PK_OK) { /* NVRTC's message (its log) with the kernels it was compiling */
      const char *why = pk_strdup(ctx, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      return pk_ctx_fail(ctx, s, "compiling %d GPU kernel%s (%s) for %s: %s", n, n == 1 ? "" : "s",
                         kernel_names(ctx, kernels, n), arch, why);
    }
    img.cubin = im.cubin;
    img.cubin_size = im.cubin_size;
    img.ptx = im.ptx;
  } else {
    img.source = source;
  }
  if (pkrt_gpu_module_load(g, &img, descs, n, out) != PKRT_OK)
    return rt_fail(ctx, rt, pk_sprintf(ctx, "loading %d GPU kernel%s (%s) on %s", n, n == 1 ? "" : "s",
                                       kernel_names(ctx, kernels, n), info->name));
  return PK_OK;
}

/* The device's offset alignment for views, at least DEVICE_CHECK_ALIGN. */
static size_t view_align(const pkrt_gpu_info *info) {
  return info->base_align > DEVICE_CHECK_ALIGN ? (size_t)info->base_align : DEVICE_CHECK_ALIGN;
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* An operation's run on the device: the arena (the device allocation to free) and the
 * views it takes. */
typedef struct device_run {
  pkrt_gpu_mem *arena;
  pkrt_gpu_ptr *views;
  pkrt_gpu_ptr ws;
  bool has_ws;
} device_run;

/* Arena layout, host staging, upload, one run of op and download; the comparison is the
 * caller's, and so is freeing run->arena. */
static pk_status run_on_device(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_te_program *prog,
                               const pk_gpu_device_op *op, const pk_te_ref *ref,
                               pk_host_buffers *hb, device_run *run) {
  const char *name = op->label;
  pkrt_gpu_mem **arena = &run->arena;
  int nb = prog->ntensors;
  size_t align = view_align(pkrt_gpu_describe(g));
  size_t *off = pk_alloc(ctx, sizeof *off * (size_t)(nb + 1));
  size_t *bytes = pk_alloc(ctx, sizeof *bytes * (size_t)(nb + 1));
  size_t total = 0;
  for (int i = 0; i < nb; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    bytes[i] = (size_t)pk_te_tensor_numel(t) * pkrt_dtype_size(t->dtype);
    if (!bytes[i]) bytes[i] = 1; /* a view is never empty */
    off[i] = total;
    total = round_up(total + bytes[i], align);
  }
  size_t ws_off = total, ws_bytes = (size_t)op->workspace_bytes;
  if (ws_bytes) total = round_up(total + ws_bytes, align);

  if (pkrt_gpu_mem_new(g, total, arena) != PKRT_OK)
    return rt_fail(ctx, rt, pk_sprintf(ctx, "%s: a %zu-byte device arena", name, total));
  pkrt_gpu_ptr *views = pk_alloc(ctx, sizeof *views * (size_t)(nb + 1));
  pkrt_gpu_ptr ws = {0};
  run->views = views;
  for (int i = 0; i < nb; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    if (t->kind == PK_TE_PLACEHOLDER) pk_te_ref_to_buffer(t, &ref->tensors[i], hb->data[i]);
    else memset(hb->data[i], 0xff, bytes[i]); /* NaN (floats), -1 (integers): unwritten shows */
    if (pkrt_gpu_mem_view(*arena, off[i], bytes[i], &views[i]) != PKRT_OK ||
        pkrt_gpu_copy_to(*arena, off[i], hb->data[i], bytes[i]) != PKRT_OK)
      return rt_fail(ctx, rt, pk_sprintf(ctx, "%s: buffer %s", name, t->name));
  }
  if (ws_bytes) {
    void *fill = malloc(ws_bytes);
    if (!fill) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory for a %zu-byte workspace", ws_bytes);
    memset(fill, 0xff, ws_bytes); /* NaNs: no reliance on zeros */
    pkrt_status st = pkrt_gpu_mem_view(*arena, ws_off, ws_bytes, &ws);
    if (st == PKRT_OK) st = pkrt_gpu_copy_to(*arena, ws_off, fill, ws_bytes);
    free(fill);
    if (st != PKRT_OK) return rt_fail(ctx, rt, pk_sprintf(ctx, "%s: workspace", name));
  }
  run->ws = ws;
  run->has_ws = ws_bytes > 0;
  if (op->call(op->arg, views, ws_bytes ? &ws : NULL, NULL) != PKRT_OK ||
      pkrt_gpu_sync(g) != PKRT_OK)
    return rt_fail(ctx, rt, name);
  for (int i = 0; i < nb; i++)
    if (prog->tensors[i]->kind == PK_TE_COMPUTE &&
        pkrt_gpu_copy_from(*arena, off[i], hb->data[i], bytes[i]) != PKRT_OK)
      return rt_fail(ctx, rt, pk_sprintf(ctx, "%s: reading %s back", name, prog->tensors[i]->name));
  return PK_OK;
}

/* The timed runs of a checked operation (the check's run was the warm-up): each one timed
 * with device events, until they add up to min_ns and number at least
 * DEVICE_TIME_MIN_REPEATS (at most DEVICE_TIME_MAX_REPEATS). */
#define DEVICE_TIME_MIN_REPEATS 5
#define DEVICE_TIME_MAX_REPEATS 100000
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static pk_status time_on_device(pk_ctx *ctx, pkrt_ctx *rt, const pk_gpu_device_op *op,
                                const device_run *run, int64_t min_ns, pk_timing *out) {
  size_t cap = 1024;
  double *ns = malloc(cap * sizeof *ns), total = 0;
  if (!ns) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory for timings");
  int n = 0;
  pk_status s = PK_OK;
  while ((n < DEVICE_TIME_MIN_REPEATS || total < (double)min_ns) && n < DEVICE_TIME_MAX_REPEATS) {
    if ((size_t)n == cap) {
      double *more = realloc(ns, 2 * cap * sizeof *ns);
      if (!more) {
        s = pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory for timings");
        break;
      }
      ns = more;
      cap *= 2;
    }
    double ms = 0;
    if (op->call(op->arg, run->views, run->has_ws ? &run->ws : NULL, &ms) != PKRT_OK) {
      s = rt_fail(ctx, rt, pk_sprintf(ctx, "%s while being timed", op->label));
      break;
    }
    ns[n++] = ms * 1e6;
    total += ms * 1e6;
  }
  if (s == PK_OK) {
    double mean = total / n, var = 0;
    for (int i = 0; i < n; i++) var += (ns[i] - mean) * (ns[i] - mean);
    qsort(ns, (size_t)n, sizeof *ns, cmp_double);
    *out = (pk_timing){.median_ns = n % 2 ? ns[n / 2] : 0.5 * (ns[n / 2 - 1] + ns[n / 2]),
                       .min_ns = ns[0], .stddev_ns = n > 1 ? sqrt(var / (n - 1)) : 0,
                       .repeats = n};
  }
  free(ns);
  return s;
}

pk_status pk_gpu_device_check_op(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_te_program *prog,
                                 const pk_schedule *sched, const pk_gpu_device_op *op,
                                 uint64_t seed, const pk_te_ref *ref, int64_t min_ns,
                                 pk_kernel_check_result *res, pk_timing *timing) {
  memset(res, 0, sizeof *res);
  if (op->workspace_bytes < 0)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s asks for a workspace of %lld bytes", op->label,
                       (long long)op->workspace_bytes);
  if (!ref) {
    pk_te_ref *own = pk_te_ref_new(ctx, prog);
    pk_te_ref_fill_random(prog, own, seed);
    pk_status s = pk_te_interp_run(ctx, prog, own);
    if (s != PK_OK) return s;
    ref = own;
  }
  pk_host_buffers hb;
  pk_status s = pk_host_buffers_new(ctx, prog, &hb);
  if (s != PK_OK) return s;
  device_run run = {0};
  s = run_on_device(ctx, rt, g, prog, op, ref, &hb, &run);
  if (s == PK_OK && (s = pk_check_outputs(ctx, prog, sched, ref, &hb, res)) != PK_OK) {
    /* the verifier's message names the tensor and the element */
    const char *why = pk_strdup(ctx, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx); /* the first failure stays otherwise: restate it */
    s = pk_ctx_fail(ctx, s, "%s on %s: %s", op->label, pkrt_gpu_describe(g)->name, why);
  }
  if (s == PK_OK && timing) s = time_on_device(ctx, rt, op, &run, min_ns, timing);
  pkrt_gpu_mem_free(run.arena);
  pk_host_buffers_free(&hb);
  return s;
}

/* A generated kernel as the operation: kernel idx of mod with its buffers and workspace. */
typedef struct kernel_launch {
  pkrt_gpu_module *mod;
  int idx, nbufs;
} kernel_launch;

static pkrt_status launch_kernel(void *arg, const pkrt_gpu_ptr *views,
                                 const pkrt_gpu_ptr *workspace, double *elapsed_ms) {
  const kernel_launch *l = arg;
  return pkrt_gpu_launch(l->mod, l->idx, views, l->nbufs, NULL, 0, workspace, elapsed_ms);
}

pk_status pk_gpu_device_check_loaded(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, pkrt_gpu_module *mod,
                                     const pk_te_program *prog, const pk_schedule *sched,
                                     const pk_gpu_kernel *k, uint64_t seed, const pk_te_ref *ref,
                                     pk_kernel_check_result *res) {
  return pk_gpu_device_check_timed(ctx, rt, g, mod, prog, sched, k, seed, ref, -1, res, NULL);
}

pk_status pk_gpu_device_check_timed(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, pkrt_gpu_module *mod,
                                    const pk_te_program *prog, const pk_schedule *sched,
                                    const pk_gpu_kernel *k, uint64_t seed, const pk_te_ref *ref,
                                    int64_t min_ns, pk_kernel_check_result *res, pk_timing *timing) {
  memset(res, 0, sizeof *res);
  const char *name = k->desc.name ? k->desc.name : "(unnamed)";
  if (!k->f) return pk_ctx_fail(ctx, PK_ERR_CHECK, "GPU kernel %s was not prepared (pk_gpu_prepare)", name);
  if (k->desc.nbufs != prog->ntensors)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "GPU kernel %s has %d buffers for %d tensors", name,
                       k->desc.nbufs, prog->ntensors);
  if (k->desc.nscalars)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "GPU kernel %s takes %d scalars; the check passes none",
                       name, k->desc.nscalars);
  int idx = pkrt_gpu_module_find(mod, name);
  if (idx < 0)
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "kernel %s is not in the loaded module", name);
  kernel_launch l = {mod, idx, prog->ntensors};
  pk_gpu_device_op op = {.label = pk_sprintf(ctx, "GPU kernel %s", name),
                         .workspace_bytes = k->desc.workspace_bytes, .call = launch_kernel,
                         .arg = &l};
  return pk_gpu_device_check_op(ctx, rt, g, prog, sched, &op, seed, ref, min_ns, res, timing);
}

pk_status pk_gpu_device_check(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_te_program *prog,
                              const pk_schedule *sched, const pk_gpu_kernel *k, const char *source,
                              uint64_t seed, pk_kernel_check_result *res) {
  memset(res, 0, sizeof *res);
  pkrt_gpu_module *mod;
  pk_status s = pk_gpu_device_load(ctx, rt, g, k, 1, source, &mod);
  if (s != PK_OK) return s;
  s = pk_gpu_device_check_loaded(ctx, rt, g, mod, prog, sched, k, seed, NULL, res);
  pkrt_gpu_module_free(mod);
  return s;
}
