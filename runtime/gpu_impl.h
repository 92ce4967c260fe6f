/* gpu_impl.h — the layouts behind pock/pkrt_gpu.h and the table each GPU API fills
 * (gpu_cuda.c, gpu_opencl.c); gpu.c checks arguments once and dispatches through it. */
#ifndef PKRT_GPU_IMPL_H
#define PKRT_GPU_IMPL_H

#include "pkrt.h"
#include "pock/pkrt_gpu.h"

/* One API's implementation. Arguments reach it already checked by gpu.c. */
typedef struct pkrt_gpu_ops {
  pkrt_status (*list)(pkrt_ctx *rt, pkrt_gpu_info *out, int cap, int *n);
  pkrt_status (*open)(pkrt_gpu *g, int index); /* fills g->info and g->impl */
  void (*close)(pkrt_gpu *g);
  pkrt_status (*sync)(pkrt_gpu *g);
  pkrt_status (*mem_new)(pkrt_gpu_mem *m); /* m->bytes set; fills addr / handle */
  void (*mem_free)(pkrt_gpu_mem *m);
  pkrt_status (*copy)(pkrt_gpu_mem *m, size_t offset, void *host, size_t bytes, int to_device);
  pkrt_status (*view)(pkrt_gpu_mem *m, pkrt_gpu_ptr *p); /* p->offset, p->bytes set */
  pkrt_status (*module_load)(pkrt_gpu_module *mod, const pkrt_gpu_image *img);
  void (*module_free)(pkrt_gpu_module *mod);
  /* the program binary (OpenCL); NULL: the API has none to give */
  pkrt_status (*binary)(const pkrt_gpu_module *mod, void **out, size_t *size);
  pkrt_status (*launch)(pkrt_gpu_module *mod, int k, const pkrt_gpu_ptr *bufs,
                        const int64_t *scalars, const pkrt_gpu_ptr *workspace, double *ms);
} pkrt_gpu_ops;

extern const pkrt_gpu_ops pkrt_gpu_cuda_ops, pkrt_gpu_opencl_ops;

struct pkrt_gpu {
  pkrt_ctx *rt; /* where errors go */
  pkrt_gpu_api api;
  const pkrt_gpu_ops *ops;
  pkrt_gpu_info info;
  void *impl;   /* the API's loaded library, context and queue */
};

struct pkrt_gpu_mem {
  pkrt_gpu *g;
  size_t bytes;
  uint64_t addr; /* CUDA: device address */
  void *handle;  /* OpenCL: the cl_mem */
  /* OpenCL sub-buffers made by pkrt_gpu_mem_view, released with the arena; a view asked
   * for twice is made once. */
  struct pkrt_gpu_subbuf {
    size_t offset, bytes;
    void *handle;
  } *views;
  int nviews, capviews;
};

struct pkrt_gpu_module {
  pkrt_gpu *g;
  const pkrt_gpu_kernel_desc *kernels;
  int n;
  int from_binary; /* OpenCL: built from the image's binary, not its source */
  void *impl; /* the API's module or program, kernels and argument storage */
};

/* The CUDA driver, loaded from `library` (NULL: libcuda.so.1) with every symbol the
 * runtime uses resolved, then cuInit and cuDeviceGetCount: what tests run where a libcuda
 * exists but no GPU does (the toolkit's stub library answers CUDA_ERROR_STUB_LIBRARY). */
pkrt_status pkrt_gpu_cuda_probe(pkrt_ctx *rt, const char *library, int *ndevices);

/* Refuses PTX whose ".version" ISA needs a newer CUDA than driver_version (as
 * cuDriverGetVersion gives it, 12040 = 12.4), naming both; unknown ISA versions pass (the
 * driver's own CUDA_ERROR_UNSUPPORTED_PTX_VERSION then says it). */
pkrt_status pkrt_gpu_ptx_check(pkrt_ctx *rt, const char *ptx, int driver_version);

/* For a library that queues work on a CUDA device's stream (cuBLAS, gpu_cublas.c): makes
 * the device's context current on this thread and gives its stream (a CUstream). */
pkrt_status pkrt_gpu_cuda_stream(pkrt_gpu *g, void **stream);
/* Device-event timing of work another library queues: stop 0 records the start event;
 * stop 1 records the end, waits for it and stores the milliseconds between in *ms. */
pkrt_status pkrt_gpu_cuda_timer(pkrt_gpu *g, int stop, double *ms);

/* Copies src into a fixed-size field, cut to fit and NUL-terminated. */
void pkrt_gpu_setstr(char *dst, size_t cap, const char *src);

#endif
