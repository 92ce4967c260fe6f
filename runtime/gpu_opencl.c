/* gpu_opencl.c — GPU devices through OpenCL: the ICD loader libOpenCL.so.1 is opened with
 * dlopen when a device is first listed or opened (libpockrt never links it), and only
 * OpenCL 1.2 calls are made, so phone GPUs (Mali, Adreno) and PoCL all serve. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The 3.0 headers name every error code; only 1.2 calls are made (clCreateCommandQueue
 * is the 1.2 way to ask for a profiling queue). */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "gpu_impl.h"

#define CL_LIBRARY "libOpenCL.so.1"
#define CL_MAX_PLATFORMS 16
#define CL_MAX_DEVICES 64 /* per platform */

#define CL_FUNCS(X)                                                                       \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo)           \
  X(clCreateContext) X(clReleaseContext) X(clCreateCommandQueue)                          \
  X(clReleaseCommandQueue) X(clFinish) X(clCreateBuffer) X(clCreateSubBuffer)             \
  X(clReleaseMemObject) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer)                    \
  X(clCreateProgramWithSource) X(clBuildProgram) X(clGetProgramBuildInfo)                 \
  X(clReleaseProgram) X(clCreateKernel) X(clGetKernelInfo) X(clGetKernelWorkGroupInfo)    \
  X(clReleaseKernel) X(clSetKernelArg) X(clEnqueueNDRangeKernel) X(clWaitForEvents)       \
  X(clGetEventProfilingInfo) X(clReleaseEvent) X(clCreateProgramWithBinary)               \
  X(clGetProgramInfo)

/* The entry points, typed by the headers' own prototypes; `fn` is the same storage as an
 * array, which cl_load fills from the names in order. */
typedef struct cl_api {
  void *lib;
  union {
    struct {
#define CL_FIELD(f) __typeof__(&f) f;
      CL_FUNCS(CL_FIELD)
#undef CL_FIELD
    };
#define CL_ONE(f) +1
    void *fn[0 CL_FUNCS(CL_ONE)];
#undef CL_ONE
  };
} cl_api;
_Static_assert(sizeof(void (*)(void)) == sizeof(void *), "entry points fill a void * array");

typedef struct cl_dev {
  cl_api cl;
  cl_platform_id platform;
  cl_device_id device;
  cl_context context;
  cl_command_queue queue; /* in order, with profiling: launches can be timed */
} cl_dev;

typedef struct cl_mod {
  cl_program program;
  cl_kernel kernels[];
} cl_mod;

static const char *cl_err_name(cl_int e) {
#define E(x) [-(x)] = #x
  static const char *const names[] = {
    E(CL_DEVICE_NOT_FOUND), E(CL_DEVICE_NOT_AVAILABLE), E(CL_COMPILER_NOT_AVAILABLE),
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE), E(CL_OUT_OF_RESOURCES), E(CL_OUT_OF_HOST_MEMORY),
    E(CL_PROFILING_INFO_NOT_AVAILABLE), E(CL_MEM_COPY_OVERLAP), E(CL_IMAGE_FORMAT_MISMATCH),
    E(CL_IMAGE_FORMAT_NOT_SUPPORTED), E(CL_BUILD_PROGRAM_FAILURE), E(CL_MAP_FAILURE),
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET), E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
    E(CL_COMPILE_PROGRAM_FAILURE), E(CL_LINKER_NOT_AVAILABLE), E(CL_LINK_PROGRAM_FAILURE),
    E(CL_DEVICE_PARTITION_FAILED), E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE), E(CL_INVALID_VALUE),
    E(CL_INVALID_DEVICE_TYPE), E(CL_INVALID_PLATFORM), E(CL_INVALID_DEVICE),
    E(CL_INVALID_CONTEXT), E(CL_INVALID_QUEUE_PROPERTIES), E(CL_INVALID_COMMAND_QUEUE),
    E(CL_INVALID_HOST_PTR), E(CL_INVALID_MEM_OBJECT), E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR),
    E(CL_INVALID_IMAGE_SIZE), E(CL_INVALID_SAMPLER), E(CL_INVALID_BINARY),
    E(CL_INVALID_BUILD_OPTIONS), E(CL_INVALID_PROGRAM), E(CL_INVALID_PROGRAM_EXECUTABLE),
    E(CL_INVALID_KERNEL_NAME), E(CL_INVALID_KERNEL_DEFINITION), E(CL_INVALID_KERNEL),
    E(CL_INVALID_ARG_INDEX), E(CL_INVALID_ARG_VALUE), E(CL_INVALID_ARG_SIZE),
    E(CL_INVALID_KERNEL_ARGS), E(CL_INVALID_WORK_DIMENSION), E(CL_INVALID_WORK_GROUP_SIZE),
    E(CL_INVALID_WORK_ITEM_SIZE), E(CL_INVALID_GLOBAL_OFFSET), E(CL_INVALID_EVENT_WAIT_LIST),
    E(CL_INVALID_EVENT), E(CL_INVALID_OPERATION), E(CL_INVALID_GL_OBJECT),
    E(CL_INVALID_BUFFER_SIZE), E(CL_INVALID_MIP_LEVEL), E(CL_INVALID_GLOBAL_WORK_SIZE),
    E(CL_INVALID_PROPERTY), E(CL_INVALID_IMAGE_DESCRIPTOR), E(CL_INVALID_COMPILER_OPTIONS),
    E(CL_INVALID_LINKER_OPTIONS), E(CL_INVALID_DEVICE_PARTITION_COUNT),
    E(CL_INVALID_PIPE_SIZE), E(CL_INVALID_DEVICE_QUEUE), E(CL_INVALID_SPEC_ID),
    E(CL_MAX_SIZE_RESTRICTION_EXCEEDED),
  };
#undef E
  if (e == -1001) return "CL_PLATFORM_NOT_FOUND_KHR"; /* the ICD loader: no driver installed */
  if (e < 0 && -(long)e < (long)(sizeof names / sizeof names[0]) && names[-e]) return names[-e];
  return NULL;
}

/* "WHAT: CL_ERROR_NAME", WHAT formatted by the caller ("clCreateKernel(k3)"). */
__attribute__((format(printf, 3, 4)))
static pkrt_status cl_fail(pkrt_ctx *rt, cl_int err, const char *fmt, ...) {
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *name = cl_err_name(err);
  if (name) return pkrt_ctx_fail(rt, PKRT_ERR_GPU, "%s: %s", what, name);
  return pkrt_ctx_fail(rt, PKRT_ERR_GPU, "%s: OpenCL error %d", what, (int)err);
}

/* RTLD_NODELETE: an OpenCL driver keeps threads and handlers that must outlive our use. */
static pkrt_status cl_load(pkrt_ctx *rt, cl_api *a) {
  memset(a, 0, sizeof *a);
  a->lib = dlopen(CL_LIBRARY, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!a->lib) {
    const char *why = dlerror();
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD,
                         "cannot load the OpenCL ICD loader %s: %s (Debian: ocl-icd-libopencl1 "
                         "and a driver, e.g. pocl-opencl-icd)", CL_LIBRARY, why ? why : "?");
  }
#define CL_NAME(f) #f "\0"
  const char *name = CL_FUNCS(CL_NAME);
#undef CL_NAME
  for (size_t i = 0; i < sizeof a->fn / sizeof a->fn[0]; name += strlen(name) + 1, i++)
    if (!(a->fn[i] = dlsym(a->lib, name))) {
      dlclose(a->lib);
      a->lib = NULL;
      return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "%s has no %s", CL_LIBRARY, name);
    }
  return PKRT_OK;
}

/* Every device of every platform, in platform order: device index i of the API. Finds
 * the device `index` (when index >= 0) and counts them all in *n. No platform is no device. */
static pkrt_status cl_find(pkrt_ctx *rt, const cl_api *cl, int index, cl_platform_id *platform,
                           cl_device_id *device, int *n) {
  cl_platform_id plats[CL_MAX_PLATFORMS];
  cl_uint np = 0;
  *n = 0;
  cl_int err = cl->clGetPlatformIDs(CL_MAX_PLATFORMS, plats, &np);
  if (err == -1001 || (err == CL_SUCCESS && np == 0)) return PKRT_OK;
  if (err != CL_SUCCESS) return cl_fail(rt, err, "clGetPlatformIDs");
  if (np > CL_MAX_PLATFORMS) np = CL_MAX_PLATFORMS;
  for (cl_uint p = 0; p < np; p++) {
    cl_device_id devs[CL_MAX_DEVICES];
    cl_uint nd = 0;
    err = cl->clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, CL_MAX_DEVICES, devs, &nd);
    if (err == CL_DEVICE_NOT_FOUND) continue;
    if (err != CL_SUCCESS) return cl_fail(rt, err, "clGetDeviceIDs");
    if (nd > CL_MAX_DEVICES) nd = CL_MAX_DEVICES;
    for (cl_uint d = 0; d < nd; d++, (*n)++)
      if (*n == index) {
        *platform = plats[p];
        *device = devs[d];
      }
  }
  return PKRT_OK;
}

/* A string property into a fixed field (cut to fit). */
static pkrt_status cl_str(pkrt_ctx *rt, const cl_api *cl, cl_platform_id plat, cl_device_id dev,
                          cl_uint param, char *dst, size_t cap, const char *what) {
  char buf[1024];
  size_t size = 0;
  cl_int err = dev ? cl->clGetDeviceInfo(dev, param, 0, NULL, &size)
                   : cl->clGetPlatformInfo(plat, param, 0, NULL, &size);
  if (err == CL_SUCCESS && size > sizeof buf) size = 0; /* longer than any name: leave it out */
  if (err == CL_SUCCESS && size > 0)
    err = dev ? cl->clGetDeviceInfo(dev, param, size, buf, NULL)
              : cl->clGetPlatformInfo(plat, param, size, buf, NULL);
  if (err != CL_SUCCESS)
    return cl_fail(rt, err, "%s(%s)", dev ? "clGetDeviceInfo" : "clGetPlatformInfo", what);
  buf[size ? size - 1 : 0] = '\0';
  pkrt_gpu_setstr(dst, cap, buf);
  return PKRT_OK;
}

/* A fixed-size property (cl_uint, cl_ulong, size_t). */
static pkrt_status cl_num(pkrt_ctx *rt, const cl_api *cl, cl_device_id dev, cl_uint param,
                          void *out, size_t size, const char *what) {
  cl_int err = cl->clGetDeviceInfo(dev, param, size, out, NULL);
  return err == CL_SUCCESS ? PKRT_OK : cl_fail(rt, err, "clGetDeviceInfo(%s)", what);
}

static pkrt_status cl_describe(pkrt_ctx *rt, const cl_api *cl, cl_platform_id plat,
                               cl_device_id dev, int index, pkrt_gpu_info *info) {
  memset(info, 0, sizeof *info);
  info->api = PKRT_GPU_OPENCL;
  info->index = index;
  cl_uint units = 0, clock = 0, align_bits = 0;
  cl_ulong mem = 0;
  size_t wg = 0;
  pkrt_status st;
  if ((st = cl_str(rt, cl, plat, NULL, CL_PLATFORM_NAME, info->platform, sizeof info->platform,
                   "CL_PLATFORM_NAME")) != PKRT_OK ||
      (st = cl_str(rt, cl, plat, dev, CL_DEVICE_NAME, info->name, sizeof info->name,
                   "CL_DEVICE_NAME")) != PKRT_OK ||
      (st = cl_str(rt, cl, plat, dev, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor,
                   "CL_DEVICE_VENDOR")) != PKRT_OK ||
      (st = cl_str(rt, cl, plat, dev, CL_DEVICE_VERSION, info->version, sizeof info->version,
                   "CL_DEVICE_VERSION")) != PKRT_OK ||
      (st = cl_str(rt, cl, plat, dev, CL_DRIVER_VERSION, info->driver, sizeof info->driver,
                   "CL_DRIVER_VERSION")) != PKRT_OK ||
      (st = cl_num(rt, cl, dev, CL_DEVICE_MAX_COMPUTE_UNITS, &units, sizeof units,
                   "CL_DEVICE_MAX_COMPUTE_UNITS")) != PKRT_OK ||
      (st = cl_num(rt, cl, dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, &clock, sizeof clock,
                   "CL_DEVICE_MAX_CLOCK_FREQUENCY")) != PKRT_OK ||
      (st = cl_num(rt, cl, dev, CL_DEVICE_GLOBAL_MEM_SIZE, &mem, sizeof mem,
                   "CL_DEVICE_GLOBAL_MEM_SIZE")) != PKRT_OK ||
      (st = cl_num(rt, cl, dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, &wg, sizeof wg,
                   "CL_DEVICE_MAX_WORK_GROUP_SIZE")) != PKRT_OK ||
      (st = cl_num(rt, cl, dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, &align_bits, sizeof align_bits,
                   "CL_DEVICE_MEM_BASE_ADDR_ALIGN")) != PKRT_OK)
    return st;
  info->compute_units = (int)units;
  info->clock_mhz = (int)clock;
  info->memory_bytes = (int64_t)mem;
  info->max_block_threads = (int64_t)wg;
  info->base_align = align_bits >= 8 ? (int64_t)(align_bits / 8) : 1;
  return PKRT_OK;
}

static pkrt_status ocl_list(pkrt_ctx *rt, pkrt_gpu_info *out, int cap, int *n) {
  cl_api cl;
  pkrt_status st = cl_load(rt, &cl);
  if (st != PKRT_OK) return st;
  int total = 0;
  st = cl_find(rt, &cl, -1, NULL, NULL, &total);
  for (int i = 0; st == PKRT_OK && i < total && i < cap; i++) {
    cl_platform_id plat = NULL;
    cl_device_id dev = NULL;
    int count;
    if ((st = cl_find(rt, &cl, i, &plat, &dev, &count)) == PKRT_OK)
      st = cl_describe(rt, &cl, plat, dev, i, &out[i]);
  }
  if (st == PKRT_OK) *n = total;
  dlclose(cl.lib);
  return st;
}

static void ocl_close(pkrt_gpu *g) {
  cl_dev *d = g->impl;
  if (!d) return;
  /* Release failures at teardown have no one to report to; the queue is drained first. */
  if (d->queue) {
    d->cl.clFinish(d->queue);
    d->cl.clReleaseCommandQueue(d->queue);
  }
  if (d->context) d->cl.clReleaseContext(d->context);
  dlclose(d->cl.lib);
  free(d);
  g->impl = NULL;
}

static pkrt_status ocl_open(pkrt_gpu *g, int index) {
  cl_dev *d = calloc(1, sizeof *d);
  if (!d) return pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory opening an OpenCL device");
  pkrt_status st = cl_load(g->rt, &d->cl);
  if (st != PKRT_OK) {
    free(d);
    return st;
  }
  g->impl = d;
  int n = 0;
  if ((st = cl_find(g->rt, &d->cl, index, &d->platform, &d->device, &n)) != PKRT_OK) goto fail;
  if (index >= n) {
    st = pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "no OpenCL device %d (%d found)", index, n);
    goto fail;
  }
  if ((st = cl_describe(g->rt, &d->cl, d->platform, d->device, index, &g->info)) != PKRT_OK)
    goto fail;
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
  d->context = d->cl.clCreateContext(props, 1, &d->device, NULL, NULL, &err);
  if (!d->context) {
    st = cl_fail(g->rt, err, "clCreateContext(%s)", g->info.name);
    goto fail;
  }
  d->queue = d->cl.clCreateCommandQueue(d->context, d->device, CL_QUEUE_PROFILING_ENABLE, &err);
  if (!d->queue) {
    st = cl_fail(g->rt, err, "clCreateCommandQueue(%s)", g->info.name);
    goto fail;
  }
  return PKRT_OK;
fail:
  ocl_close(g);
  return st;
}

static pkrt_status ocl_sync(pkrt_gpu *g) {
  cl_dev *d = g->impl;
  cl_int err = d->cl.clFinish(d->queue);
  return err == CL_SUCCESS ? PKRT_OK : cl_fail(g->rt, err, "clFinish");
}

static pkrt_status ocl_mem_new(pkrt_gpu_mem *m) {
  cl_dev *d = m->g->impl;
  cl_int err;
  cl_mem mem = d->cl.clCreateBuffer(d->context, CL_MEM_READ_WRITE, m->bytes, NULL, &err);
  if (!mem) return cl_fail(m->g->rt, err, "clCreateBuffer(%zu bytes)", m->bytes);
  m->handle = mem;
  return PKRT_OK;
}

static void ocl_mem_free(pkrt_gpu_mem *m) {
  cl_dev *d = m->g->impl;
  for (int i = 0; i < m->nviews; i++) d->cl.clReleaseMemObject(m->views[i].handle);
  d->cl.clReleaseMemObject(m->handle);
}

static pkrt_status ocl_copy(pkrt_gpu_mem *m, size_t offset, void *host, size_t bytes,
                            int to_device) {
  cl_dev *d = m->g->impl;
  cl_int err = to_device
                   ? d->cl.clEnqueueWriteBuffer(d->queue, m->handle, CL_TRUE, offset, bytes,
                                                host, 0, NULL, NULL)
                   : d->cl.clEnqueueReadBuffer(d->queue, m->handle, CL_TRUE, offset, bytes,
                                               host, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    return cl_fail(m->g->rt, err, "%s(%zu bytes at %zu)",
                   to_device ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer", bytes, offset);
  return PKRT_OK;
}

/* Offset 0 is the arena itself; any other offset a sub-buffer, made once. */
static pkrt_status ocl_view(pkrt_gpu_mem *m, pkrt_gpu_ptr *p) {
  cl_dev *d = m->g->impl;
  if (p->offset == 0) {
    p->handle = m->handle;
    return PKRT_OK;
  }
  for (int i = 0; i < m->nviews; i++)
    if (m->views[i].offset == p->offset && m->views[i].bytes == p->bytes) {
      p->handle = m->views[i].handle;
      return PKRT_OK;
    }
  if (m->nviews == m->capviews) {
    int cap = m->capviews ? 2 * m->capviews : 16;
    void *v = realloc(m->views, (size_t)cap * sizeof *m->views);
    if (!v) return pkrt_ctx_fail(m->g->rt, PKRT_ERR_NOMEM, "out of memory");
    m->views = v;
    m->capviews = cap;
  }
  cl_buffer_region region = {p->offset, p->bytes};
  cl_int err;
  cl_mem sub = d->cl.clCreateSubBuffer(m->handle, CL_MEM_READ_WRITE,
                                       CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  if (!sub)
    return cl_fail(m->g->rt, err, "clCreateSubBuffer(%zu bytes at %zu)", p->bytes, p->offset);
  m->views[m->nviews++] = (struct pkrt_gpu_subbuf){p->offset, p->bytes, sub};
  p->handle = sub;
  return PKRT_OK;
}

/* The program and its kernels released (the module's storage kept for another build). */
static void cl_release(pkrt_gpu_module *mod) {
  cl_dev *d = mod->g->impl;
  cl_mod *cm = mod->impl;
  for (int i = 0; i < mod->n; i++)
    if (cm->kernels[i]) d->cl.clReleaseKernel(cm->kernels[i]), cm->kernels[i] = NULL;
  if (cm->program) d->cl.clReleaseProgram(cm->program), cm->program = NULL;
}

static void ocl_module_free(pkrt_gpu_module *mod) {
  if (!mod->impl) return;
  cl_release(mod);
  free(mod->impl);
  mod->impl = NULL;
}

/* The build log, trimmed, into the message after WHAT's error name. */
static pkrt_status cl_build_failed(pkrt_gpu_module *mod, cl_int err) {
  cl_dev *d = mod->g->impl;
  size_t size = 0;
  char *log = NULL;
  if (d->cl.clGetProgramBuildInfo(((cl_mod *)mod->impl)->program, d->device,
                                  CL_PROGRAM_BUILD_LOG, 0, NULL, &size) == CL_SUCCESS &&
      size > 0 && (log = calloc(1, size + 1)) != NULL &&
      d->cl.clGetProgramBuildInfo(((cl_mod *)mod->impl)->program, d->device,
                                  CL_PROGRAM_BUILD_LOG, size, log, NULL) != CL_SUCCESS)
    log[0] = '\0';
  const char *name = cl_err_name(err);
  char *s = log ? log : "";
  while (*s == '\n' || *s == ' ') s++;
  size_t len = strlen(s);
  while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == ' ')) s[--len] = '\0';
  pkrt_status st = pkrt_ctx_fail(mod->g->rt, PKRT_ERR_LOAD, "clBuildProgram: %s%s%s",
                                 name ? name : "OpenCL error", *s ? ": " : " (no build log)", s);
  free(log);
  return st;
}

/* The program from the image's binary (binary 1) or its source, built, and every kernel
 * looked up and checked against its descriptor. */
static pkrt_status cl_build(pkrt_gpu_module *mod, const pkrt_gpu_image *img, int binary) {
  pkrt_gpu *g = mod->g;
  cl_dev *d = g->impl;
  cl_mod *cm = mod->impl;
  cl_int err;
  if (binary) {
    const unsigned char *bin = img->binary;
    cm->program = d->cl.clCreateProgramWithBinary(d->context, 1, &d->device, &img->binary_size,
                                                  &bin, NULL, &err);
  } else {
    const char *src = img->source;
    cm->program = d->cl.clCreateProgramWithSource(d->context, 1, &src, NULL, &err);
  }
  if (!cm->program)
    return cl_fail(g->rt, err, binary ? "clCreateProgramWithBinary" : "clCreateProgramWithSource");
  err = d->cl.clBuildProgram(cm->program, 1, &d->device, img->options, NULL, NULL);
  if (err != CL_SUCCESS) return cl_build_failed(mod, err);
  for (int i = 0; i < mod->n; i++) {
    const pkrt_gpu_kernel_desc *k = &mod->kernels[i];
    if (k->shared_bytes)
      return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT,
                           "GPU kernel %s asks for %u bytes of dynamic shared memory; OpenCL "
                           "kernels declare their __local memory", k->name, k->shared_bytes);
    cm->kernels[i] = d->cl.clCreateKernel(cm->program, k->name, &err);
    if (!cm->kernels[i]) return cl_fail(g->rt, err, "clCreateKernel(%s)", k->name);
    cl_uint nargs = 0;
    size_t wg = 0;
    err = d->cl.clGetKernelInfo(cm->kernels[i], CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, NULL);
    if (err != CL_SUCCESS)
      return cl_fail(g->rt, err, "clGetKernelInfo(%s, CL_KERNEL_NUM_ARGS)", k->name);
    cl_uint want = (cl_uint)(k->nbufs + k->nscalars + (k->workspace_bytes > 0));
    if (nargs != want)
      return pkrt_ctx_fail(g->rt, PKRT_ERR_LOAD,
                           "GPU kernel %s has %u parameters, its descriptor %u (%d buffers, %d "
                           "scalars%s)", k->name, nargs, want, k->nbufs, k->nscalars,
                           k->workspace_bytes > 0 ? ", a workspace" : "");
    err = d->cl.clGetKernelWorkGroupInfo(cm->kernels[i], d->device, CL_KERNEL_WORK_GROUP_SIZE,
                                         sizeof wg, &wg, NULL);
    if (err != CL_SUCCESS) return cl_fail(g->rt, err, "clGetKernelWorkGroupInfo(%s)", k->name);
    uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2];
    if (threads > wg)
      return pkrt_ctx_fail(g->rt, PKRT_ERR_LOAD,
                           "GPU kernel %s: a work-group of %llu work-items, the kernel may use "
                           "%zu on %s", k->name, (unsigned long long)threads, wg, g->info.name);
  }
  return PKRT_OK;
}

/* The binary first when there is one; whatever goes wrong with it, the source. */
static pkrt_status ocl_module_load(pkrt_gpu_module *mod, const pkrt_gpu_image *img) {
  pkrt_gpu *g = mod->g;
  if (!img->source)
    return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "an OpenCL module needs its OpenCL C source");
  cl_mod *cm = calloc(1, sizeof *cm + (size_t)mod->n * sizeof cm->kernels[0]);
  if (!cm) return pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory loading a GPU module");
  mod->impl = cm;
  mod->from_binary = img->binary && img->binary_size && cl_build(mod, img, 1) == PKRT_OK;
  if (mod->from_binary) return PKRT_OK;
  cl_release(mod);
  pkrt_status st = cl_build(mod, img, 0);
  if (st != PKRT_OK) ocl_module_free(mod);
  return st;
}

static pkrt_status ocl_module_binary(const pkrt_gpu_module *mod, void **out, size_t *size) {
  cl_dev *d = mod->g->impl;
  cl_program p = ((cl_mod *)mod->impl)->program;
  size_t n = 0;
  unsigned char *bin = NULL;
  cl_int err = d->cl.clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL);
  if (err == CL_SUCCESS && n == 0)
    return pkrt_ctx_fail(mod->g->rt, PKRT_ERR_GPU, "the OpenCL driver gives no program binary");
  if (err == CL_SUCCESS && !(bin = malloc(n)))
    return pkrt_ctx_fail(mod->g->rt, PKRT_ERR_NOMEM, "out of memory");
  if (err == CL_SUCCESS)
    err = d->cl.clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
  if (err != CL_SUCCESS) {
    free(bin);
    return cl_fail(mod->g->rt, err, "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  }
  *out = bin;
  *size = n;
  return PKRT_OK;
}

static pkrt_status ocl_launch(pkrt_gpu_module *mod, int ki, const pkrt_gpu_ptr *bufs,
                              const int64_t *scalars, const pkrt_gpu_ptr *workspace,
                              double *ms) {
  pkrt_gpu *g = mod->g;
  cl_dev *d = g->impl;
  const pkrt_gpu_kernel_desc *k = &mod->kernels[ki];
  cl_kernel kern = ((cl_mod *)mod->impl)->kernels[ki];
  cl_uint arg = 0;
  cl_int err = CL_SUCCESS;
  for (int i = 0; i < k->nbufs && err == CL_SUCCESS; i++, arg++)
    err = d->cl.clSetKernelArg(kern, arg, sizeof(cl_mem), &bufs[i].handle);
  for (int i = 0; i < k->nscalars && err == CL_SUCCESS; i++, arg++) {
    cl_long s = scalars[i];
    err = d->cl.clSetKernelArg(kern, arg, sizeof s, &s);
  }
  if (err == CL_SUCCESS && k->workspace_bytes > 0)
    err = d->cl.clSetKernelArg(kern, arg++, sizeof(cl_mem), &workspace->handle);
  if (err != CL_SUCCESS) return cl_fail(g->rt, err, "clSetKernelArg(%s, %u)", k->name, arg);
  size_t global[3], local[3];
  for (int i = 0; i < 3; i++) {
    global[i] = (size_t)k->grid[i] * k->block[i]; /* OpenCL counts work-items */
    local[i] = k->block[i];
  }
  cl_event ev = NULL;
  err = d->cl.clEnqueueNDRangeKernel(d->queue, kern, 3, NULL, global, local, 0, NULL,
                                     ms ? &ev : NULL);
  if (err != CL_SUCCESS) return cl_fail(g->rt, err, "clEnqueueNDRangeKernel(%s)", k->name);
  if (!ms) return PKRT_OK;
  cl_ulong t0 = 0, t1 = 0;
  const char *call = "clWaitForEvents";
  err = d->cl.clWaitForEvents(1, &ev);
  if (err == CL_SUCCESS) {
    call = "clGetEventProfilingInfo";
    err = d->cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (err == CL_SUCCESS)
      err = d->cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
  }
  d->cl.clReleaseEvent(ev);
  if (err != CL_SUCCESS) return cl_fail(g->rt, err, "%s(%s)", call, k->name);
  *ms = (double)(t1 - t0) * 1e-6;
  return PKRT_OK;
}

const pkrt_gpu_ops pkrt_gpu_opencl_ops = {
    .list = ocl_list,
    .open = ocl_open,
    .close = ocl_close,
    .sync = ocl_sync,
    .mem_new = ocl_mem_new,
    .mem_free = ocl_mem_free,
    .copy = ocl_copy,
    .view = ocl_view,
    .module_load = ocl_module_load,
    .module_free = ocl_module_free,
    .binary = ocl_module_binary,
    .launch = ocl_launch,
};
