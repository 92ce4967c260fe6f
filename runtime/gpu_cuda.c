/* gpu_cuda.c — GPU devices through the CUDA driver API: libcuda.so.1 is opened with dlopen
 * when a device is first listed or opened (libpockrt never links it, and builds without
 * the toolkit: gpu_cuda_api.h). Modules load as cubin, else PTX JIT-compiled by the
 * driver, refused by name when the driver is older than the PTX. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_cuda_api.h"
#include "gpu_impl.h"

#define CU_LIBRARY "libcuda.so.1"
#define CU_LOG_BYTES 2048 /* the JIT's error log, kept for the message */

/* The entry points; `fn` is the same storage as an array, which cu_load fills from the
 * names in order. */
typedef struct cu_api {
  void *lib;
  union {
    struct {
#define CU_FIELD(f, params) pk_##f##_fn f;
      PK_CU_FUNCS(CU_FIELD)
#undef CU_FIELD
    };
#define CU_ONE(f, params) +1
    void *fn[0 PK_CU_FUNCS(CU_ONE)];
#undef CU_ONE
  };
} cu_api;
_Static_assert(sizeof(void (*)(void)) == sizeof(void *), "entry points fill a void * array");

typedef struct cu_dev {
  cu_api cu;
  pk_cu_device device;
  pk_cu_context ctx; /* the device's primary context, retained */
  pk_cu_stream stream;
  pk_cu_event t0, t1; /* made once: timing a launch allocates nothing */
} cu_dev;

/* Kernel i's launch parameters are params[first[i] ..], each pointing at its value in
 * values[], wired once at load. */
typedef struct cu_mod {
  pk_cu_module module;
  pk_cu_function *fns;
  int *first;
  void **params;
  uint64_t *values;
} cu_mod;

/* Names of the codes a driver too broken to name its own errors may still return. */
static const char *cu_err_fallback(pk_cu_result e) {
  switch (e) {
  case 1: return "CUDA_ERROR_INVALID_VALUE";
  case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
  case 3: return "CUDA_ERROR_NOT_INITIALIZED";
  case 34: return "CUDA_ERROR_STUB_LIBRARY";
  case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
  case 100: return "CUDA_ERROR_NO_DEVICE";
  case 999: return "CUDA_ERROR_UNKNOWN";
  }
  return NULL;
}

/* The error's name: the driver's, else ours, else its number in buf. */
static const char *cu_err_name(const cu_api *cu, pk_cu_result err, char buf[32]) {
  const char *name = NULL;
  if (cu->cuGetErrorName(err, &name) == PK_CUDA_SUCCESS && name) return name;
  if ((name = cu_err_fallback(err))) return name;
  snprintf(buf, 32, "CUDA error %u", err);
  return buf;
}

/* "WHAT: CUDA_ERROR_NAME", WHAT formatted by the caller ("cuModuleGetFunction(k3)"). */
__attribute__((format(printf, 5, 6)))
static pkrt_status cu_fail(pkrt_ctx *rt, const cu_api *cu, pkrt_status s, pk_cu_result err,
                           const char *fmt, ...) {
  char what[160], buf[32];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return pkrt_ctx_fail(rt, s, "%s: %s", what, cu_err_name(cu, err, buf));
}

/* Loads the driver and resolves every entry point, then cuInit. RTLD_NODELETE: a CUDA
 * driver keeps threads and handlers that must outlive our use. */
static pkrt_status cu_load(pkrt_ctx *rt, const char *library, cu_api *a) {
  memset(a, 0, sizeof *a);
  a->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!a->lib) {
    const char *why = dlerror();
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                         "cannot load the CUDA driver %s: %s (the NVIDIA driver provides it)",
                         library, why ? why : "?");
  }
#define CU_NAME(f, params) #f "\0"
  const char *name = PK_CU_FUNCS(CU_NAME);
#undef CU_NAME
  for (size_t i = 0; i < sizeof a->fn / sizeof a->fn[0]; name += strlen(name) + 1, i++)
    if (!(a->fn[i] = dlsym(a->lib, name))) {
      dlclose(a->lib);
      a->lib = NULL;
      return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "%s has no %s", library, name);
    }
  return PKRT_OK;
}

/* cuInit, then the device count; a driver with no device counts 0. */
static pkrt_status cu_init(pkrt_ctx *rt, const cu_api *cu, int *n) {
  *n = 0;
  pk_cu_result err = cu->cuInit(0);
  if (err == PK_CUDA_ERROR_NO_DEVICE) return PKRT_OK;
  if (err != PK_CUDA_SUCCESS) return cu_fail(rt, cu, PKRT_ERR_GPU, err, "cuInit");
  err = cu->cuDeviceGetCount(n);
  return err == PK_CUDA_SUCCESS ? PKRT_OK : cu_fail(rt, cu, PKRT_ERR_GPU, err, "cuDeviceGetCount");
}

pkrt_status pkrt_gpu_cuda_probe(pkrt_ctx *rt, const char *library, int *ndevices) {
  cu_api cu;
  *ndevices = 0;
  pkrt_status st = cu_load(rt, library ? library : CU_LIBRARY, &cu);
  if (st != PKRT_OK) return st;
  st = cu_init(rt, &cu, ndevices);
  dlclose(cu.lib);
  return st;
}

static pkrt_status cu_attr(pkrt_ctx *rt, const cu_api *cu, pk_cu_device dev, pk_cu_enum attr,
                           int *out, const char *what) {
  pk_cu_result err = cu->cuDeviceGetAttribute(out, attr, dev);
  return err == PK_CUDA_SUCCESS
             ? PKRT_OK
             : cu_fail(rt, cu, PKRT_ERR_GPU, err, "cuDeviceGetAttribute(%s)", what);
}

static pkrt_status cu_describe(pkrt_ctx *rt, const cu_api *cu, int index, pk_cu_device *devp,
                               pkrt_gpu_info *info) {
  memset(info, 0, sizeof *info);
  info->api = PKRT_GPU_CUDA;
  info->index = index;
  info->base_align = 1;
  pkrt_gpu_setstr(info->vendor, sizeof info->vendor, "NVIDIA");
  pkrt_gpu_setstr(info->platform, sizeof info->platform, "CUDA");
  pk_cu_device dev;
  pk_cu_result err = cu->cuDeviceGet(&dev, index);
  if (err != PK_CUDA_SUCCESS) return cu_fail(rt, cu, PKRT_ERR_GPU, err, "cuDeviceGet(%d)", index);
  if ((err = cu->cuDeviceGetName(info->name, (int)sizeof info->name, dev)) != PK_CUDA_SUCCESS)
    return cu_fail(rt, cu, PKRT_ERR_GPU, err, "cuDeviceGetName");
  int major = 0, minor = 0, sms = 0, clock = 0, threads = 0, memclock = 0;
  pkrt_status st;
  if ((st = cu_attr(rt, cu, dev, PK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major,
                    "COMPUTE_CAPABILITY_MAJOR")) != PKRT_OK ||
      (st = cu_attr(rt, cu, dev, PK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor,
                    "COMPUTE_CAPABILITY_MINOR")) != PKRT_OK ||
      (st = cu_attr(rt, cu, dev, PK_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms,
                    "MULTIPROCESSOR_COUNT")) != PKRT_OK ||
      (st = cu_attr(rt, cu, dev, PK_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &threads,
                    "MAX_THREADS_PER_BLOCK")) != PKRT_OK)
    return st;
  /* Clocks are informative (the fingerprint's), and newer drivers may drop the queries:
   * a refused query reads as "unknown" (0), not as a device that cannot be used. */
  if (cu->cuDeviceGetAttribute(&clock, PK_CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) != PK_CUDA_SUCCESS)
    clock = 0;
  if (cu->cuDeviceGetAttribute(&memclock, PK_CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) !=
      PK_CUDA_SUCCESS)
    memclock = 0;
  size_t mem = 0;
  if ((err = cu->cuDeviceTotalMem_v2(&mem, dev)) != PK_CUDA_SUCCESS)
    return cu_fail(rt, cu, PKRT_ERR_GPU, err, "cuDeviceTotalMem");
  int drv = 0;
  if ((err = cu->cuDriverGetVersion(&drv)) != PK_CUDA_SUCCESS)
    return cu_fail(rt, cu, PKRT_ERR_GPU, err, "cuDriverGetVersion");
  info->sm = major * 10 + minor;
  snprintf(info->version, sizeof info->version, "sm_%d%d", major, minor);
  info->driver_version = drv;
  snprintf(info->driver, sizeof info->driver, "%d.%d", drv / 1000, drv % 1000 / 10);
  info->compute_units = sms;
  info->clock_mhz = clock / 1000;
  info->memory_clock_mhz = memclock / 1000;
  info->memory_bytes = (int64_t)mem;
  info->max_block_threads = threads;
  if (devp) *devp = dev;
  return PKRT_OK;
}

static pkrt_status cuda_list(pkrt_ctx *rt, pkrt_gpu_info *out, int cap, int *n) {
  cu_api cu;
  pkrt_status st = cu_load(rt, CU_LIBRARY, &cu);
  if (st != PKRT_OK) return st;
  int total = 0;
  st = cu_init(rt, &cu, &total);
  for (int i = 0; st == PKRT_OK && i < total && i < cap; i++)
    st = cu_describe(rt, &cu, i, NULL, &out[i]);
  if (st == PKRT_OK) *n = total;
  dlclose(cu.lib);
  return st;
}

/* Makes the device's context current on the calling thread (a model may move between
 * threads, one at a time). */
static pkrt_status cu_enter(pkrt_gpu *g) {
  cu_dev *d = g->impl;
  pk_cu_result err = d->cu.cuCtxSetCurrent(d->ctx);
  return err == PK_CUDA_SUCCESS ? PKRT_OK
                                : cu_fail(g->rt, &d->cu, PKRT_ERR_GPU, err, "cuCtxSetCurrent");
}

static void cuda_close(pkrt_gpu *g) {
  cu_dev *d = g->impl;
  if (!d) return;
  /* Teardown failures have no one to report to; the stream is drained first. */
  if (d->ctx && d->cu.cuCtxSetCurrent(d->ctx) == PK_CUDA_SUCCESS) {
    if (d->stream) d->cu.cuStreamSynchronize(d->stream);
    if (d->t0) d->cu.cuEventDestroy_v2(d->t0);
    if (d->t1) d->cu.cuEventDestroy_v2(d->t1);
    if (d->stream) d->cu.cuStreamDestroy_v2(d->stream);
    d->cu.cuCtxSetCurrent(NULL);
  }
  if (d->ctx) d->cu.cuDevicePrimaryCtxRelease_v2(d->device);
  dlclose(d->cu.lib);
  free(d);
  g->impl = NULL;
}

static pkrt_status cuda_open(pkrt_gpu *g, int index) {
  cu_dev *d = calloc(1, sizeof *d);
  if (!d) return pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory opening a CUDA device");
  pkrt_status st = cu_load(g->rt, CU_LIBRARY, &d->cu);
  if (st != PKRT_OK) {
    free(d);
    return st;
  }
  g->impl = d;
  const cu_api *cu = &d->cu;
  int n = 0;
  if ((st = cu_init(g->rt, cu, &n)) != PKRT_OK) goto fail;
  if (index >= n) {
    st = pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "no CUDA device %d (%d found)", index, n);
    goto fail;
  }
  if ((st = cu_describe(g->rt, cu, index, &d->device, &g->info)) != PKRT_OK) goto fail;
  pk_cu_result err;
  const char *call = NULL;
  if ((err = cu->cuDevicePrimaryCtxRetain(&d->ctx, d->device)) != PK_CUDA_SUCCESS)
    call = "cuDevicePrimaryCtxRetain";
  else if ((err = cu->cuCtxSetCurrent(d->ctx)) != PK_CUDA_SUCCESS)
    call = "cuCtxSetCurrent";
  else if ((err = cu->cuStreamCreate(&d->stream, PK_CU_STREAM_NON_BLOCKING)) != PK_CUDA_SUCCESS)
    call = "cuStreamCreate";
  else if ((err = cu->cuEventCreate(&d->t0, PK_CU_EVENT_DEFAULT)) != PK_CUDA_SUCCESS ||
           (err = cu->cuEventCreate(&d->t1, PK_CU_EVENT_DEFAULT)) != PK_CUDA_SUCCESS)
    call = "cuEventCreate";
  if (err != PK_CUDA_SUCCESS) {
    st = cu_fail(g->rt, cu, PKRT_ERR_GPU, err, "%s(%s)", call, g->info.name);
    goto fail;
  }
  return PKRT_OK;
fail:
  cuda_close(g);
  return st;
}

static pkrt_status cuda_sync(pkrt_gpu *g) {
  cu_dev *d = g->impl;
  pkrt_status st = cu_enter(g);
  if (st != PKRT_OK) return st;
  pk_cu_result err = d->cu.cuStreamSynchronize(d->stream);
  return err == PK_CUDA_SUCCESS ? PKRT_OK
                                : cu_fail(g->rt, &d->cu, PKRT_ERR_GPU, err, "cuStreamSynchronize");
}

static pkrt_status cuda_mem_new(pkrt_gpu_mem *m) {
  cu_dev *d = m->g->impl;
  pkrt_status st = cu_enter(m->g);
  if (st != PKRT_OK) return st;
  pk_cu_deviceptr p = 0;
  pk_cu_result err = d->cu.cuMemAlloc_v2(&p, m->bytes);
  if (err != PK_CUDA_SUCCESS)
    return cu_fail(m->g->rt, &d->cu, PKRT_ERR_GPU, err, "cuMemAlloc(%zu bytes)", m->bytes);
  m->addr = p;
  return PKRT_OK;
}

static void cuda_mem_free(pkrt_gpu_mem *m) {
  cu_dev *d = m->g->impl;
  if (cu_enter(m->g) == PKRT_OK) d->cu.cuMemFree_v2(m->addr);
}

/* Blocking copies on the legacy stream do not wait for a non-blocking stream: the
 * device's stream is drained first, so a copy sees every launch queued before it. */
static pkrt_status cuda_copy(pkrt_gpu_mem *m, size_t offset, void *host, size_t bytes,
                             int to_device) {
  cu_dev *d = m->g->impl;
  pkrt_status st = cuda_sync(m->g);
  if (st != PKRT_OK) return st;
  pk_cu_result err = to_device ? d->cu.cuMemcpyHtoD_v2(m->addr + offset, host, bytes)
                               : d->cu.cuMemcpyDtoH_v2(host, m->addr + offset, bytes);
  if (err != PK_CUDA_SUCCESS)
    return cu_fail(m->g->rt, &d->cu, PKRT_ERR_GPU, err, "%s(%zu bytes at %zu)",
                   to_device ? "cuMemcpyHtoD" : "cuMemcpyDtoH", bytes, offset);
  return PKRT_OK;
}

static pkrt_status cuda_view(pkrt_gpu_mem *m, pkrt_gpu_ptr *p) {
  p->addr = m->addr + p->offset;
  return PKRT_OK;
}

/* PTX ISA version -> the first CUDA release whose driver JIT-compiles it (the PTX ISA
 * manual's release notes), as cuDriverGetVersion counts (12040 = 12.4). */
static const struct {
  int isa;  /* 10 * major + minor */
  int cuda;
} ptx_isa_cuda[] = {
    {60, 9000},  {61, 9010},  {62, 9020},  {63, 10000}, {64, 10010}, {65, 10020},
    {70, 11000}, {71, 11010}, {72, 11020}, {73, 11030}, {74, 11040}, {75, 11050},
    {76, 11060}, {77, 11070}, {78, 11080}, {80, 12000}, {81, 12010}, {82, 12020},
    {83, 12030}, {84, 12040}, {85, 12050}, {86, 12070}, {87, 12080}, {88, 12090},
    {90, 13000},
};

/* The ".version X.Y" directive of a PTX text; 0 when there is none. */
static int ptx_isa(const char *ptx, int *major, int *minor) {
  for (const char *p = ptx; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    while (*p == ' ' || *p == '\t') p++;
    if (strncmp(p, ".version", 8) == 0 && sscanf(p + 8, " %d.%d", major, minor) == 2) return 1;
  }
  return 0;
}

pkrt_status pkrt_gpu_ptx_check(pkrt_ctx *rt, const char *ptx, int driver_version) {
  int major = 0, minor = 0;
  if (!ptx_isa(ptx, &major, &minor))
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "the PTX has no .version directive");
  int isa = major * 10 + minor;
  for (size_t i = 0; i < sizeof ptx_isa_cuda / sizeof ptx_isa_cuda[0]; i++) {
    int need = ptx_isa_cuda[i].cuda;
    if (ptx_isa_cuda[i].isa == isa && need > driver_version)
      return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                           "the PTX is ISA version %d.%d, which needs a CUDA %d.%d driver; "
                           "this driver is CUDA %d.%d",
                           major, minor, need / 1000, need % 1000 / 10, driver_version / 1000,
                           driver_version % 1000 / 10);
  }
  return PKRT_OK;
}

/* cuModuleLoadDataEx with the JIT's error log captured into log. */
static pk_cu_result cu_load_image(const cu_api *cu, pk_cu_module *mod, const void *image,
                                  char *log) {
  pk_cu_enum opts[] = {PK_CU_JIT_ERROR_LOG_BUFFER, PK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {log, (void *)(uintptr_t)CU_LOG_BYTES};
  log[0] = '\0';
  return cu->cuModuleLoadDataEx(mod, image, 2, opts, vals);
}

static void cuda_module_free(pkrt_gpu_module *mod) {
  cu_dev *d = mod->g->impl;
  cu_mod *cm = mod->impl;
  if (!cm) return;
  if (cm->module && cu_enter(mod->g) == PKRT_OK) d->cu.cuModuleUnload(cm->module);
  free(cm->fns);
  free(cm->first);
  free(cm->params);
  free(cm->values);
  free(cm);
  mod->impl = NULL;
}

/* cubin, else PTX; the message names each failure. */
static pkrt_status cu_load_module(pkrt_gpu_module *mod, const pkrt_gpu_image *img, cu_mod *cm) {
  pkrt_gpu *g = mod->g;
  cu_dev *d = g->impl;
  char log[CU_LOG_BYTES];
  char cubin_part[96] = "", buf[32];
  if (img->cubin) {
    pk_cu_result err = cu_load_image(&d->cu, &cm->module, img->cubin, log);
    if (err == PK_CUDA_SUCCESS) return PKRT_OK;
    if (!img->ptx)
      return cu_fail(g->rt, &d->cu, PKRT_ERR_LOAD, err, "cuModuleLoadData(cubin for %s)",
                     g->info.version);
    snprintf(cubin_part, sizeof cubin_part, " (the cubin for %s: %s)", g->info.version,
             cu_err_name(&d->cu, err, buf));
  }
  pkrt_status st = pkrt_gpu_ptx_check(g->rt, img->ptx, g->info.driver_version);
  if (st != PKRT_OK) return st;
  pk_cu_result err = cu_load_image(&d->cu, &cm->module, img->ptx, log);
  if (err == PK_CUDA_SUCCESS) return PKRT_OK;
  int major = 0, minor = 0, drv = g->info.driver_version;
  ptx_isa(img->ptx, &major, &minor);
  return pkrt_ctx_fail(g->rt, PKRT_ERR_LOAD,
                       "cuModuleLoadData(PTX ISA %d.%d, this driver CUDA %d.%d%s): %s%s%s%.200s",
                       major, minor, drv / 1000, drv % 1000 / 10,
                       err == PK_CUDA_ERROR_UNSUPPORTED_PTX_VERSION ? ", too old for it" : "",
                       cu_err_name(&d->cu, err, buf), cubin_part, log[0] ? ": " : "", log);
}

static pkrt_status cuda_module_load(pkrt_gpu_module *mod, const pkrt_gpu_image *img) {
  pkrt_gpu *g = mod->g;
  cu_dev *d = g->impl;
  if (!img->cubin && !img->ptx)
    return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "a CUDA module needs a cubin or PTX");
  pkrt_status st = cu_enter(g);
  if (st != PKRT_OK) return st;
  cu_mod *cm = calloc(1, sizeof *cm);
  if (!cm) return pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory loading a GPU module");
  mod->impl = cm;
  int nargs = 0;
  for (int i = 0; i < mod->n; i++)
    nargs += mod->kernels[i].nbufs + mod->kernels[i].nscalars +
             (mod->kernels[i].workspace_bytes > 0);
  size_t n = mod->n > 0 ? (size_t)mod->n : 1, na = nargs > 0 ? (size_t)nargs : 1;
  cm->fns = calloc(n, sizeof *cm->fns);
  cm->first = calloc(n, sizeof *cm->first);
  cm->params = calloc(na, sizeof *cm->params);
  cm->values = calloc(na, sizeof *cm->values);
  if (!cm->fns || !cm->first || !cm->params || !cm->values) {
    st = pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory loading a GPU module");
    goto fail;
  }
  for (size_t j = 0; j < na; j++) cm->params[j] = &cm->values[j];
  if ((st = cu_load_module(mod, img, cm)) != PKRT_OK) goto fail;
  for (int i = 0, at = 0; i < mod->n; i++) {
    const pkrt_gpu_kernel_desc *k = &mod->kernels[i];
    cm->first[i] = at;
    at += k->nbufs + k->nscalars + (k->workspace_bytes > 0);
    pk_cu_result err = d->cu.cuModuleGetFunction(&cm->fns[i], cm->module, k->name);
    if (err != PK_CUDA_SUCCESS) {
      st = cu_fail(g->rt, &d->cu, PKRT_ERR_LOAD, err, "cuModuleGetFunction(%s)", k->name);
      goto fail;
    }
    int most = 0;
    err = d->cu.cuFuncGetAttribute(&most, PK_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, cm->fns[i]);
    if (err != PK_CUDA_SUCCESS) {
      st = cu_fail(g->rt, &d->cu, PKRT_ERR_GPU, err, "cuFuncGetAttribute(%s)", k->name);
      goto fail;
    }
    uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2];
    if (threads > (uint64_t)most) {
      st = pkrt_ctx_fail(g->rt, PKRT_ERR_LOAD,
                         "GPU kernel %s: a block of %llu threads, the kernel may use %d on %s",
                         k->name, (unsigned long long)threads, most, g->info.name);
      goto fail;
    }
    /* Above 48 KiB, dynamic shared memory must be asked for per function. */
    if (k->shared_bytes > 48 * 1024 &&
        (err = d->cu.cuFuncSetAttribute(cm->fns[i],
                                        PK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        (int)k->shared_bytes)) != PK_CUDA_SUCCESS) {
      st = cu_fail(g->rt, &d->cu, PKRT_ERR_LOAD, err,
                   "cuFuncSetAttribute(%s, %u bytes of dynamic shared memory)", k->name,
                   k->shared_bytes);
      goto fail;
    }
  }
  return PKRT_OK;
fail:
  cuda_module_free(mod);
  return st;
}

static pkrt_status cuda_launch(pkrt_gpu_module *mod, int ki, const pkrt_gpu_ptr *bufs,
                               const int64_t *scalars, const pkrt_gpu_ptr *workspace,
                               double *ms) {
  pkrt_gpu *g = mod->g;
  cu_dev *d = g->impl;
  cu_mod *cm = mod->impl;
  const pkrt_gpu_kernel_desc *k = &mod->kernels[ki];
  pkrt_status st = cu_enter(g);
  if (st != PKRT_OK) return st;
  uint64_t *v = cm->values + cm->first[ki];
  for (int i = 0; i < k->nbufs; i++) *v++ = bufs[i].addr;
  for (int i = 0; i < k->nscalars; i++) memcpy(v++, &scalars[i], sizeof scalars[i]);
  if (k->workspace_bytes > 0) *v++ = workspace->addr;
  pk_cu_result err;
  if (ms && (err = d->cu.cuEventRecord(d->t0, d->stream)) != PK_CUDA_SUCCESS)
    return cu_fail(g->rt, &d->cu, PKRT_ERR_GPU, err, "cuEventRecord(%s)", k->name);
  err = d->cu.cuLaunchKernel(cm->fns[ki], k->grid[0], k->grid[1], k->grid[2], k->block[0],
                             k->block[1], k->block[2], k->shared_bytes, d->stream,
                             cm->params + cm->first[ki], NULL);
  if (err != PK_CUDA_SUCCESS)
    return cu_fail(g->rt, &d->cu, PKRT_ERR_KERNEL, err, "cuLaunchKernel(%s)", k->name);
  if (!ms) return PKRT_OK;
  float t = 0;
  const char *call = NULL;
  if ((err = d->cu.cuEventRecord(d->t1, d->stream)) != PK_CUDA_SUCCESS)
    call = "cuEventRecord";
  else if ((err = d->cu.cuEventSynchronize(d->t1)) != PK_CUDA_SUCCESS)
    call = "cuEventSynchronize";
  else if ((err = d->cu.cuEventElapsedTime(&t, d->t0, d->t1)) != PK_CUDA_SUCCESS)
    call = "cuEventElapsedTime";
  if (call) return cu_fail(g->rt, &d->cu, PKRT_ERR_GPU, err, "%s(%s)", call, k->name);
  *ms = t;
  return PKRT_OK;
}

const pkrt_gpu_ops pkrt_gpu_cuda_ops = {
    .list = cuda_list,
    .open = cuda_open,
    .close = cuda_close,
    .sync = cuda_sync,
    .mem_new = cuda_mem_new,
    .mem_free = cuda_mem_free,
    .copy = cuda_copy,
    .view = cuda_view,
    .module_load = cuda_module_load,
    .module_free = cuda_module_free,
    .launch = cuda_launch,
};

pkrt_status pkrt_gpu_cuda_stream(pkrt_gpu *g, void **stream) {
  if (g->api != PKRT_GPU_CUDA)
    return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "%s device %s has no CUDA stream",
                         pkrt_gpu_api_name(g->api), g->info.name);
  pkrt_status st = cu_enter(g);
  if (st == PKRT_OK) *stream = ((cu_dev *)g->impl)->stream;
  return st;
}

pkrt_status pkrt_gpu_cuda_timer(pkrt_gpu *g, int stop, double *ms) {
  cu_dev *d = g->impl;
  pk_cu_result err = d->cu.cuEventRecord(stop ? d->t1 : d->t0, d->stream);
  const char *call = err != PK_CUDA_SUCCESS ? "cuEventRecord" : NULL;
  float t = 0;
  if (!call && stop) {
    if ((err = d->cu.cuEventSynchronize(d->t1)) != PK_CUDA_SUCCESS)
      call = "cuEventSynchronize";
    else if ((err = d->cu.cuEventElapsedTime(&t, d->t0, d->t1)) != PK_CUDA_SUCCESS)
      call = "cuEventElapsedTime";
  }
  if (call) return cu_fail(g->rt, &d->cu, PKRT_ERR_GPU, err, "%s", call);
  if (stop) *ms = t;
  return PKRT_OK;
}
