/* gpu.c — the API-neutral half of GPU devices (pock/pkrt_gpu.h): argument checks, the
 * objects' lifetimes and dispatch to the CUDA or OpenCL implementation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_impl.h"

const char *pkrt_gpu_api_name(pkrt_gpu_api api) {
  switch (api) {
  case PKRT_GPU_CUDA: return "cuda";
  case PKRT_GPU_OPENCL: return "opencl";
  }
  return "unknown";
}

static const pkrt_gpu_ops *ops_of(pkrt_gpu_api api) {
  switch (api) {
  case PKRT_GPU_CUDA: return &pkrt_gpu_cuda_ops;
  case PKRT_GPU_OPENCL: return &pkrt_gpu_opencl_ops;
  }
  return NULL;
}

void pkrt_gpu_setstr(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

pkrt_status pkrt_gpu_list(pkrt_ctx *rt, pkrt_gpu_api api, pkrt_gpu_info *out, int cap, int *n) {
  const pkrt_gpu_ops *ops = ops_of(api);
  if (!n || cap < 0 || (cap > 0 && !out))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_gpu_list: bad arguments");
  *n = 0;
  if (!ops) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "unknown GPU API %d", (int)api);
  return ops->list(rt, out, cap, n);
}

pkrt_status pkrt_gpu_open(pkrt_ctx *rt, pkrt_gpu_api api, int index, pkrt_gpu **out) {
  if (!out) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_gpu_open: out is NULL");
  *out = NULL;
  const pkrt_gpu_ops *ops = ops_of(api);
  if (!ops) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "unknown GPU API %d", (int)api);
  if (index < 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s device index %d is negative",
                         pkrt_gpu_api_name(api), index);
  pkrt_gpu *g = calloc(1, sizeof *g);
  if (!g) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "out of memory opening a GPU device");
  g->rt = rt;
  g->api = api;
  g->ops = ops;
  pkrt_status st = ops->open(g, index);
  if (st != PKRT_OK) {
    free(g);
    return st;
  }
  *out = g;
  return PKRT_OK;
}

const pkrt_gpu_info *pkrt_gpu_describe(const pkrt_gpu *g) { return g ? &g->info : NULL; }

pkrt_status pkrt_gpu_sync(pkrt_gpu *g) { return g->ops->sync(g); }

void pkrt_gpu_close(pkrt_gpu *g) {
  if (!g) return;
  g->ops->close(g);
  free(g);
}

pkrt_status pkrt_gpu_mem_new(pkrt_gpu *g, size_t bytes, pkrt_gpu_mem **out) {
  if (!out) return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "pkrt_gpu_mem_new: out is NULL");
  *out = NULL;
  if (bytes == 0)
    return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "device memory of 0 bytes asked for");
  pkrt_gpu_mem *m = calloc(1, sizeof *m);
  if (!m) return pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory");
  m->g = g;
  m->bytes = bytes;
  pkrt_status st = g->ops->mem_new(m);
  if (st != PKRT_OK) {
    free(m);
    return st;
  }
  *out = m;
  return PKRT_OK;
}

void pkrt_gpu_mem_free(pkrt_gpu_mem *m) {
  if (!m) return;
  m->g->ops->mem_free(m);
  free(m->views);
  free(m);
}

size_t pkrt_gpu_mem_size(const pkrt_gpu_mem *m) { return m ? m->bytes : 0; }

/* [offset, offset + bytes) inside m, without overflow. */
static pkrt_status check_range(const pkrt_gpu_mem *m, size_t offset, size_t bytes,
                               const char *what) {
  if (offset > m->bytes || bytes > m->bytes - offset)
    return pkrt_ctx_fail(m->g->rt, PKRT_ERR_INPUT,
                         "%s: bytes [%zu, %zu + %zu) outside the device arena of %zu bytes",
                         what, offset, offset, bytes, m->bytes);
  return PKRT_OK;
}

pkrt_status pkrt_gpu_copy_to(pkrt_gpu_mem *m, size_t offset, const void *src, size_t bytes) {
  pkrt_status st = check_range(m, offset, bytes, "copy to the device");
  if (st != PKRT_OK || bytes == 0) return st;
  /* The API takes a non-const pointer for both directions; a copy to the device only reads. */
  return m->g->ops->copy(m, offset, (void *)src, bytes, 1);
}

pkrt_status pkrt_gpu_copy_from(pkrt_gpu_mem *m, size_t offset, void *dst, size_t bytes) {
  pkrt_status st = check_range(m, offset, bytes, "copy from the device");
  if (st != PKRT_OK || bytes == 0) return st;
  return m->g->ops->copy(m, offset, dst, bytes, 0);
}

pkrt_status pkrt_gpu_mem_view(pkrt_gpu_mem *m, size_t offset, size_t bytes, pkrt_gpu_ptr *out) {
  if (!out) return pkrt_ctx_fail(m->g->rt, PKRT_ERR_INPUT, "pkrt_gpu_mem_view: out is NULL");
  memset(out, 0, sizeof *out);
  pkrt_status st = check_range(m, offset, bytes, "device buffer");
  if (st != PKRT_OK) return st;
  if (bytes == 0)
    return pkrt_ctx_fail(m->g->rt, PKRT_ERR_INPUT, "device buffer at %zu has 0 bytes", offset);
  int64_t align = m->g->info.base_align > 0 ? m->g->info.base_align : 1;
  if (offset % (size_t)align)
    return pkrt_ctx_fail(m->g->rt, PKRT_ERR_INPUT,
                         "device buffer at byte %zu: %s device %s needs offsets that are "
                         "multiples of %lld bytes",
                         offset, pkrt_gpu_api_name(m->g->api), m->g->info.name, (long long)align);
  out->mem = m;
  out->offset = offset;
  out->bytes = bytes;
  return m->g->ops->view(m, out);
}

pkrt_status pkrt_gpu_module_load(pkrt_gpu *g, const pkrt_gpu_image *img,
                                 const pkrt_gpu_kernel_desc *kernels, int n,
                                 pkrt_gpu_module **out) {
  if (!out) return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "pkrt_gpu_module_load: out is NULL");
  *out = NULL;
  if (!img || n < 0 || (n > 0 && !kernels))
    return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "pkrt_gpu_module_load: bad arguments");
  for (int i = 0; i < n; i++) {
    const pkrt_gpu_kernel_desc *k = &kernels[i];
    const char *name = k->name ? k->name : "(null)";
    if (!k->name || !*k->name)
      return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "GPU kernel %d has no name", i);
    if (k->nbufs < 0 || k->nscalars < 0 || k->workspace_bytes < 0)
      return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT, "GPU kernel %s: negative parameter counts",
                           name);
    uint64_t threads = 1;
    for (int d = 0; d < 3; d++) {
      if (k->grid[d] == 0 || k->block[d] == 0)
        return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT,
                             "GPU kernel %s: grid (%u, %u, %u) and block (%u, %u, %u) must "
                             "be at least 1 in every dimension",
                             name, k->grid[0], k->grid[1], k->grid[2], k->block[0],
                             k->block[1], k->block[2]);
      threads *= k->block[d];
    }
    if (g->info.max_block_threads > 0 && threads > (uint64_t)g->info.max_block_threads)
      return pkrt_ctx_fail(g->rt, PKRT_ERR_INPUT,
                           "GPU kernel %s: a block of %llu threads, the device allows %lld",
                           name, (unsigned long long)threads,
                           (long long)g->info.max_block_threads);
  }
  pkrt_gpu_module *m = calloc(1, sizeof *m);
  if (!m) return pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory loading a GPU module");
  m->g = g;
  m->kernels = kernels;
  m->n = n;
  pkrt_status st = g->ops->module_load(m, img);
  if (st != PKRT_OK) {
    free(m);
    return st;
  }
  *out = m;
  return PKRT_OK;
}

int pkrt_gpu_module_find(const pkrt_gpu_module *m, const char *name) {
  for (int i = 0; m && name && i < m->n; i++)
    if (strcmp(m->kernels[i].name, name) == 0) return i;
  return -1;
}

void pkrt_gpu_module_free(pkrt_gpu_module *m) {
  if (!m) return;
  m->g->ops->module_free(m);
  free(m);
}

int pkrt_gpu_module_from_binary(const pkrt_gpu_module *m) { return m && m->from_binary; }

pkrt_status pkrt_gpu_module_binary(const pkrt_gpu_module *m, void **out, size_t *size) {
  *out = NULL;
  *size = 0;
  if (!m->g->ops->binary)
    return pkrt_ctx_fail(m->g->rt, PKRT_ERR_INPUT, "a %s module has no program binary",
                         pkrt_gpu_api_name(m->g->api));
  return m->g->ops->binary(m, out, size);
}

static int same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

int pkrt_gpu_binary_fits(const pkrt_gpu_info *d, const pkrt_gpu_binary_for *b) {
  return same(d->name, b->device) && same(d->version, b->version) &&
         same(d->driver, b->driver) && same(d->platform, b->platform);
}

/* A buffer argument: a view of memory on this module's device. */
static pkrt_status check_ptr(const pkrt_gpu_module *m, const pkrt_gpu_kernel_desc *k,
                             const pkrt_gpu_ptr *p, const char *what, int i) {
  if (!p || !p->mem || p->mem->g != m->g || (!p->handle && !p->addr))
    return pkrt_ctx_fail(m->g->rt, PKRT_ERR_INPUT,
                         "GPU kernel %s: %s %d is not a view of this device's memory "
                         "(pkrt_gpu_mem_view)", k->name, what, i);
  return PKRT_OK;
}

pkrt_status pkrt_gpu_launch(pkrt_gpu_module *m, int ki, const pkrt_gpu_ptr *bufs, int32_t nbufs,
                            const int64_t *scalars, int32_t nscalars,
                            const pkrt_gpu_ptr *workspace, double *elapsed_ms) {
  pkrt_ctx *rt = m->g->rt;
  if (ki < 0 || ki >= m->n)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "GPU kernel index %d: the module has %d kernels",
                         ki, m->n);
  const pkrt_gpu_kernel_desc *k = &m->kernels[ki];
  if (nbufs != k->nbufs || nscalars != k->nscalars)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "GPU kernel %s takes %d buffers and %d scalars, given %d and %d",
                         k->name, k->nbufs, k->nscalars, nbufs, nscalars);
  if ((nbufs > 0 && !bufs) || (nscalars > 0 && !scalars))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "GPU kernel %s: buffers or scalars are NULL",
                         k->name);
  for (int i = 0; i < nbufs; i++) {
    pkrt_status st = check_ptr(m, k, &bufs[i], "buffer", i);
    if (st != PKRT_OK) return st;
  }
  if (k->workspace_bytes > 0) {
    pkrt_status st = check_ptr(m, k, workspace, "workspace", 0);
    if (st != PKRT_OK) return st;
    if (workspace->bytes < (size_t)k->workspace_bytes)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                           "GPU kernel %s needs a workspace of %lld bytes, given %zu", k->name,
                           (long long)k->workspace_bytes, workspace->bytes);
  } else if (workspace) {
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "GPU kernel %s has no workspace, given one",
                         k->name);
  }
  return m->g->ops->launch(m, ki, bufs, scalars, workspace, elapsed_ms);
}
