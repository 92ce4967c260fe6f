/* model_gpu.c — the executor of GPU artifacts: one device arena holding every region at the
 * plan's offsets, the image loaded once, every step's buffers made device views at open; a
 * step moves only the io region, hyper and rng up and the loss and output back. Kernels
 * whose tuning chose cuBLAS are cublasSgemm calls on a handle made at open (gpu_cublas.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

struct rt_gpu_model {
  pkrt_gpu *g;
  pkrt_gpu_mem *mem;                /* the device arena */
  pkrt_gpu_module *mod;
  pkrt_gpu_kernel_desc *descs;      /* the module's kernels: the manifest's, less externs */
  int *kidx;                        /* per manifest kernel: its index in descs, or -1 */
  pkrt_gpu_blas **blas;             /* per extern (CUDA: cuBLAS), opened at load */
  size_t off[RT_REGION_COUNT_];     /* each region's start in mem */
  pkrt_gpu_ptr ws;                  /* the workspace view (bytes 0: none) */
  char image[200];                  /* OpenCL: how the program was built (pkrt_model_gpu_image) */
};

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* Host bytes [lo, lo + n) of region r to or from the device. */
static pkrt_status copy_region(pkrt_model *m, int r, size_t lo, size_t n, bool up) {
  rt_gpu_model *G = m->gpu;
  if (n == 0) return PKRT_OK;
  return up ? pkrt_gpu_copy_to(G->mem, G->off[r] + lo, m->region[r] + lo, n)
            : pkrt_gpu_copy_from(G->mem, G->off[r] + lo, m->region[r] + lo, n);
}

static pkrt_status copy_tensor(pkrt_model *m, int t, bool up) {
  const rt_tensor *x = &m->mf.tensors[t];
  return copy_region(m, x->region, (size_t)x->lo, (size_t)(x->hi - x->lo), up);
}

pkrt_status rt_gpu_sync_tensor(pkrt_model *m, int t) { return copy_tensor(m, t, false); }

pkrt_status rt_gpu_sync_weights(pkrt_model *m, bool up) {
  static const int rs[3] = {RT_REGION_PARAMS, RT_REGION_STATE, RT_REGION_BUFFERS};
  pkrt_status st = PKRT_OK;
  for (int i = 0; i < 3 && st == PKRT_OK; i++)
    st = copy_region(m, rs[i], 0, (size_t)m->mf.region_bytes[rs[i]], up);
  return st;
}

/* Step buffers as views: element 0 of each tensor must sit at the device's alignment. */
static pkrt_status build_views(pkrt_model *m) {
  rt_manifest *mf = &m->mf;
  rt_gpu_model *G = m->gpu;
  for (int p = 0; p < RT_PLAN_COUNT_; p++)
    for (int s = 0; s < mf->plans[p].n; s++) {
      rt_step *st = &mf->plans[p].steps[s];
      const pkrt_gpu_kernel_desc *d = &mf->kernels[st->kernel].gdesc;
      pkrt_status e = rt_check_sgemm_step(m, p, s);
      if (e != PKRT_OK) return e;
      if (mf->kernels[st->kernel].ext < 0 && st->nscalars != d->nscalars)
        return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                             "manifest: plans.%s[%d].scalars: %d scalars, kernel '%s' takes %d",
                             rt_plan_names[p], s, st->nscalars, d->name, (int)d->nscalars);
      st->views = pkrt_arena_alloc(m->arena, sizeof(pkrt_gpu_ptr) * (size_t)(st->nbufs + 1), 0);
      if (!st->views) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
      for (int b = 0; b < st->nbufs; b++) {
        const rt_tensor *t = &mf->tensors[st->tensors[b]];
        int64_t first = t->offset + t->elem_offset * (int64_t)pkrt_dtype_size(t->dtype);
        e = pkrt_gpu_mem_view(G->mem, G->off[t->region] + (size_t)first,
                              (size_t)(t->hi - first), &st->views[b]);
        if (e != PKRT_OK) {
          char why[400];
          snprintf(why, sizeof why, "%s", pkrt_ctx_error(m->rt));
          return pkrt_ctx_fail(m->rt, e, "plan '%s' step %d (node '%s'): tensor '%s': %s",
                               rt_plan_names[p], s, st->node, t->name, why);
        }
      }
    }
  return PKRT_OK;
}

static pkrt_status load_module(pkrt_model *m, const pkrt_artifact *art, const pkrt_section *ker) {
  rt_manifest *mf = &m->mf;
  rt_gpu_model *G = m->gpu;
  G->descs = pkrt_arena_alloc(m->arena, sizeof *G->descs * (size_t)(mf->nkernels + 1), 0);
  G->kidx = pkrt_arena_alloc(m->arena, sizeof *G->kidx * (size_t)(mf->nkernels + 1), 0);
  if (!G->descs || !G->kidx) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
  int nk = 0;
  for (int i = 0; i < mf->nkernels; i++) {
    G->kidx[i] = mf->kernels[i].ext < 0 ? nk : -1;
    if (mf->kernels[i].ext < 0) G->descs[nk++] = mf->kernels[i].gdesc;
  }
  if (nk == 0) return PKRT_OK; /* every kernel is a cuBLAS call */
  pkrt_gpu_image img = {0};
  char *text = NULL; /* OpenCL C and PTX are text: NUL-terminated copies */
  const pkrt_section *ptx = pkrt_artifact_find(art, "kernels.ptx");
  const pkrt_section *src = mf->gpu_api == PKRT_GPU_OPENCL ? ker : ptx;
  if (src && src->size) {
    if (!(text = pkrt_arena_alloc(m->arena, src->size + 1, 0)))
      return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
    memcpy(text, src->data, src->size);
    text[src->size] = 0;
  }
  const pkrt_section *bin = pkrt_artifact_find(art, "kernels.clbin");
  const pkrt_gpu_binary_for *bf = &mf->gpu_binary;
  int fits = bin && bf->device && pkrt_gpu_binary_fits(pkrt_gpu_describe(G->g), bf);
  if (mf->gpu_api == PKRT_GPU_OPENCL) {
    img.source = text;
    if (fits) img.binary = bin->data, img.binary_size = bin->size;
  } else {
    img.ptx = text;
    /* the cubin was built for gpu.arch: another device gets the PTX alone */
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d", pkrt_gpu_describe(G->g)->sm);
    if (!strcmp(arch, mf->gpu_arch) && ker->size) img.cubin = ker->data, img.cubin_size = ker->size;
  }
  if (!img.source && !img.ptx && !img.cubin)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                         "the artifact has no image this %s device can load (cubin for %s, "
                         "no PTX)", pkrt_gpu_api_name(mf->gpu_api), mf->gpu_arch);
  pkrt_status st = pkrt_gpu_module_load(G->g, &img, G->descs, nk, &G->mod);
  if (st != PKRT_OK || mf->gpu_api != PKRT_GPU_OPENCL) return st;
  if (!bin || !bf->device)
    snprintf(G->image, sizeof G->image, "OpenCL source (the artifact has no device binary)");
  else
    snprintf(G->image, sizeof G->image, "OpenCL binary for %s (%s)", bf->device,
             pkrt_gpu_module_from_binary(G->mod) ? "used"
             : fits ? "refused: built from source" : "device differs: built from source");
  return st;
}

const char *pkrt_model_gpu_image(const pkrt_model *m) {
  return m && m->gpu && m->gpu->image[0] ? m->gpu->image : NULL;
}

/* Backend switching on the GPU: each extern (cuBLAS) is loaded and its handle bound to the
 * model's stream now, so a device without the library refuses the artifact at load. */
static pkrt_status open_blas(pkrt_model *m) {
  rt_manifest *mf = &m->mf;
  rt_gpu_model *G = m->gpu;
  if (!mf->nexterns) return PKRT_OK;
  G->blas = pkrt_arena_alloc(m->arena, sizeof *G->blas * (size_t)mf->nexterns, 0);
  if (!G->blas) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
  memset(G->blas, 0, sizeof *G->blas * (size_t)mf->nexterns);
  for (int i = 0; i < mf->nexterns; i++) {
    const rt_extern *X = &mf->externs[i];
    if (pkrt_gpu_blas_open(G->g, X->library, &G->blas[i]) != PKRT_OK) {
      char why[512];
      snprintf(why, sizeof why, "%s", pkrt_ctx_error(m->rt));
      return pkrt_ctx_fail(m->rt, PKRT_ERR_EXTERN,
                           "this artifact calls %s in %s (an extern kernel won tuning), which "
                           "this device cannot load: %s", X->symbol, X->library, why);
    }
  }
  return PKRT_OK;
}

pkrt_status rt_gpu_model_open(pkrt_model *m, const pkrt_artifact *art, const pkrt_section *ker) {
  rt_manifest *mf = &m->mf;
  rt_gpu_model *G = m->gpu = calloc(1, sizeof *G);
  if (!G) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
  pkrt_status st = pkrt_gpu_open(m->rt, mf->gpu_api, 0, &G->g);
  if (st != PKRT_OK) return st;
  const pkrt_gpu_info *info = pkrt_gpu_describe(G->g);
  if (info->base_align > mf->gpu_align)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                         "%s device %s needs buffers at multiples of %lld bytes; this artifact "
                         "placed them at %lld (gpu.align)", pkrt_gpu_api_name(mf->gpu_api),
                         info->name, (long long)info->base_align, (long long)mf->gpu_align);
  size_t a = (size_t)mf->gpu_align, top = 0;
  for (int r = 0; r < RT_REGION_COUNT_; r++) {
    G->off[r] = top;
    top = align_up(top + (size_t)mf->region_bytes[r], a);
  }
  size_t ws = (size_t)mf->workspace_bytes;
  if ((st = pkrt_gpu_mem_new(G->g, top + ws + (top + ws == 0), &G->mem)) != PKRT_OK) return st;
  if (ws && (st = pkrt_gpu_mem_view(G->mem, top, ws, &G->ws)) != PKRT_OK) return st;
  if ((st = rt_gpu_sync_weights(m, true)) != PKRT_OK) return st;
  if ((st = open_blas(m)) != PKRT_OK) return st;
  if ((st = load_module(m, art, ker)) != PKRT_OK) return st;
  return build_views(m);
}

void rt_gpu_model_close(pkrt_model *m) {
  rt_gpu_model *G = m->gpu;
  if (!G) return;
  for (int i = 0; G->blas && i < m->mf.nexterns; i++) pkrt_gpu_blas_close(G->blas[i]);
  pkrt_gpu_module_free(G->mod);
  pkrt_gpu_mem_free(G->mem);
  if (G->g) pkrt_gpu_close(G->g);
  free(G);
  m->gpu = NULL;
}

pkrt_status rt_gpu_run_steps(pkrt_model *m, rt_plan_kind p, int from, int to) {
  const rt_manifest *mf = &m->mf;
  rt_gpu_model *G = m->gpu;
  const rt_plan *plan = &mf->plans[p];
  pkrt_status st = PKRT_OK;
  if (from == 0) { /* what the host wrote since the last step: inputs, labels, hyper, rng */
    st = copy_region(m, RT_REGION_IO, 0, (size_t)mf->region_bytes[RT_REGION_IO], true);
    if (st == PKRT_OK && mf->hyper >= 0) st = copy_tensor(m, mf->hyper, true);
    if (st == PKRT_OK && mf->rng >= 0) st = copy_tensor(m, mf->rng, true);
  }
  for (int s = from; s < to && st == PKRT_OK; s++) {
    const rt_step *x = &plan->steps[s];
    const rt_kernel *K = &mf->kernels[x->kernel];
    if (K->ext >= 0) { /* the cuBLAS call tuning chose, queued on the same stream */
      const rt_sgemm *c = &K->sgemm;
      st = pkrt_gpu_blas_sgemm(G->blas[K->ext], c->trans_a, c->trans_b, c->m, c->n, c->k,
                               &x->views[c->a], c->lda, &x->views[c->b], c->ldb,
                               &x->views[c->c], c->ldc, NULL);
    } else
      st = pkrt_gpu_launch(G->mod, G->kidx[x->kernel], x->views, x->nbufs, x->scalars, x->nscalars,
                         K->gdesc.workspace_bytes ? &G->ws : NULL, NULL);
    if (st != PKRT_OK) {
      char why[400];
      snprintf(why, sizeof why, "%s", pkrt_ctx_error(m->rt));
      return pkrt_ctx_fail(m->rt, st, "plan '%s' step %d (node '%s', kernel '%s'): %s",
                           rt_plan_names[p], s, x->node, K->name, why);
    }
  }
  if (st == PKRT_OK && to == plan->n) { /* the copies wait for the queue */
    if (mf->loss >= 0) st = copy_tensor(m, mf->loss, false);
    if (st == PKRT_OK) st = copy_tensor(m, mf->output, false);
  }
  return st;
}
