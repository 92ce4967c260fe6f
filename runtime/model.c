/* model.c — opening a compiled model: verify the artifact, validate the manifest against
 * itself and the kernel object, allocate every region once, copy the initial weights and
 * build each step's pkrt_buffer array, so a step only calls kernels. Also the accessors and
 * weight save/load. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

static void set_err(char *err, size_t cap, const char *path, const char *msg) {
  if (!err || cap == 0) return;
  /* Messages about the file itself already start with its path. */
  size_t n = strlen(path);
  if (strncmp(msg, path, n) == 0 && msg[n] == ':') snprintf(err, cap, "%s", msg);
  else snprintf(err, cap, "%s: %s", path, msg);
}

/* Backend switching: each extern the plans call is opened by library name now, so a device
 * without the library refuses the artifact at load, naming it. */
static pkrt_status open_externs(pkrt_model *m) {
  rt_manifest *mf = &m->mf;
  for (int i = 0; i < mf->nexterns; i++) {
    rt_extern *X = &mf->externs[i];
    if (pkrt_extern_open(m->rt, X->library, X->symbol, X->signature, &X->fn) != PKRT_OK) {
      char why[512];
      snprintf(why, sizeof why, "%s", pkrt_ctx_error(m->rt));
      return pkrt_ctx_fail(m->rt, PKRT_ERR_EXTERN,
                           "this artifact calls %s in %s (an extern kernel won tuning), which "
                           "this device cannot load: %s", X->symbol, X->library, why);
    }
  }
  return PKRT_OK;
}

pkrt_status rt_check_sgemm_step(pkrt_model *m, int p, int s) {
  const rt_manifest *mf = &m->mf;
  const rt_step *st = &mf->plans[p].steps[s];
  const rt_kernel *K = &mf->kernels[st->kernel];
  if (K->ext < 0) return PKRT_OK;
  const rt_sgemm *g = &K->sgemm;
  const int which[3] = {g->a, g->b, g->c};
  const int64_t want[3] = {(int64_t)g->m * g->k, (int64_t)g->k * g->n, (int64_t)g->m * g->n};
  for (int j = 0; j < 3; j++) {
    const rt_tensor *t = &mf->tensors[st->tensors[which[j]]];
    if (t->dtype != PKRT_DTYPE_F32 || t->view || t->elem_offset || t->numel != want[j])
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                           "manifest: plans.%s[%d]: tensor '%s' is not a dense f32 operand of "
                           "%lld elements for kernel '%s''s sgemm call", rt_plan_names[p], s,
                           t->name, (long long)want[j], K->name);
  }
  return PKRT_OK;
}

/* Binds each manifest kernel to the object's descriptor and checks what only the object
 * knows: that the kernel exists, its buffer and scalar counts, its workspace. */
static pkrt_status bind_kernels(pkrt_model *m) {
  rt_manifest *mf = &m->mf;
  pkrt_status est = open_externs(m);
  if (est != PKRT_OK) return est;
  for (int i = 0; i < mf->nkernels; i++) {
    rt_kernel *K = &mf->kernels[i];
    K->desc = pkrt_module_find(m->module, K->name);
    if (!K->desc)
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                           "manifest: kernels[%d]: kernel '%s' is not in the kernel object", i,
                           K->name);
    if (K->desc->nbufs != K->nbufs)
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                           "manifest: kernels[%d].nbufs: %d, but kernel '%s' takes %d buffers",
                           i, K->nbufs, K->name, (int)K->desc->nbufs);
    if (K->desc->workspace_bytes > mf->workspace_bytes)
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                           "manifest: regions.workspace: %lld bytes, kernel '%s' needs %lld",
                           (long long)mf->workspace_bytes, K->name,
                           (long long)K->desc->workspace_bytes);
  }
  for (int p = 0; p < RT_PLAN_COUNT_; p++)
    for (int s = 0; s < mf->plans[p].n; s++) {
      rt_step *st = &mf->plans[p].steps[s];
      pkrt_status e = rt_check_sgemm_step(m, p, s);
      if (e != PKRT_OK) return e;
      const pkrt_kernel_desc *d = mf->kernels[st->kernel].desc;
      if (d->nscalars != st->nscalars)
        return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                             "manifest: plans.%s[%d].scalars: %d scalars, kernel '%s' takes %d",
                             rt_plan_names[p], s, st->nscalars, d->name, (int)d->nscalars);
      st->fn = d->fn;
    }
  return PKRT_OK;
}

/* calloc rather than aligned_alloc + memset: large blocks come zeroed from the kernel and
 * are only touched when used. *raw is what free() takes; the result is 64-byte aligned. */
static unsigned char *alloc_region(size_t bytes, unsigned char **raw) {
  *raw = bytes <= SIZE_MAX - 128 ? calloc(1, bytes + 128) : NULL;
  if (!*raw) return NULL;
  return (unsigned char *)(((uintptr_t)*raw + 63) & ~(uintptr_t)63);
}

static pkrt_status alloc_regions(pkrt_model *m, const pkrt_open_options *o) {
  rt_manifest *mf = &m->mf;
  for (int r = 0; r < RT_REGION_COUNT_; r++) {
    if (r == RT_REGION_ARENA && o && o->arena) {
      if (((uintptr_t)o->arena & 63) != 0)
        return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "the caller's arena is not 64-byte aligned");
      if (o->arena_bytes < (size_t)mf->region_bytes[r])
        return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                             "the caller's arena has %zu bytes, the model needs %lld",
                             o->arena_bytes, (long long)mf->region_bytes[r]);
      m->region[r] = o->arena;
      continue;
    }
    m->region[r] = alloc_region((size_t)mf->region_bytes[r], &m->region_owned[r]);
    if (!m->region[r])
      return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory allocating region '%s' (%lld "
                           "bytes)", rt_region_names[r], (long long)mf->region_bytes[r]);
  }
  m->workspace = alloc_region((size_t)mf->workspace_bytes, &m->workspace_owned);
  if (!m->workspace)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory allocating the workspace");
  return PKRT_OK;
}

/* One pkrt_buffer per step argument, pointing at the tensors' shape and stride arrays:
 * built once, so a step passes them as they are. */
static pkrt_status build_buffers(pkrt_model *m) {
  rt_manifest *mf = &m->mf;
  for (int p = 0; p < RT_PLAN_COUNT_; p++)
    for (int s = 0; s < mf->plans[p].n; s++) {
      rt_step *st = &mf->plans[p].steps[s];
      st->bufs = pkrt_arena_alloc(m->arena, sizeof(pkrt_buffer) * (size_t)(st->nbufs + 1), 0);
      if (!st->bufs) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
      for (int b = 0; b < st->nbufs; b++) {
        const rt_tensor *t = &mf->tensors[st->tensors[b]];
        st->bufs[b] = (pkrt_buffer){.data = rt_tensor_base(m, t),
                                    .offset = t->elem_offset,
                                    .shape = t->shape,
                                    .strides = t->strides,
                                    .ndim = t->ndim,
                                    .dtype = (int32_t)t->dtype};
      }
    }
  return PKRT_OK;
}

static pkrt_status open_model(pkrt_model *m, const char *path, const pkrt_open_options *o) {
  /* Trust is settled right after the container is read: with a trusted key configured,
   * nothing in an unsigned or foreign file is parsed, let alone loaded (docs/signing.md). */
  pkrt_trusted_key tk;
  pkrt_status st = pkrt_trust_resolve(m->rt, o ? o->trusted_key : NULL, &tk);
  if (st != PKRT_OK) return st;
  pkrt_artifact *art;
  st = pkrt_artifact_read(m->rt, path, &art);
  if (st != PKRT_OK) return st;
  if ((st = pkrt_trust_check(m->rt, path, art, &tk)) != PKRT_OK) {
    pkrt_artifact_free(art);
    return st;
  }
  /* Everything before the kernel object is loaded is rt_artifact_check: what the fuzzer runs. */
  const pkrt_section *man, *ker, *wts;
  pkrt_check_options co = {.skip_fingerprint = o && o->skip_fingerprint};
  st = rt_artifact_check(m->rt, m->arena, path, art, &co, &m->mf, &man, &ker, &wts);
  if (st == PKRT_OK) pkrt_sha256(man->data, man->size, m->manifest_sha);
  bool gpu = st == PKRT_OK && m->mf.gpu_api;
  if (st == PKRT_OK && !gpu) st = pkrt_module_load_memory(m->rt, ker->data, ker->size, &m->module);
  if (st == PKRT_OK && !gpu) st = bind_kernels(m);
  if (st == PKRT_OK) st = alloc_regions(m, o);
  if (st == PKRT_OK) {
    size_t pb = (size_t)m->mf.region_bytes[RT_REGION_PARAMS];
    const unsigned char *w = wts->data;
    if (pb) memcpy(m->region[RT_REGION_PARAMS], w, pb);
    size_t sb = (size_t)m->mf.region_bytes[RT_REGION_STATE];
    size_t bb = (size_t)m->mf.region_bytes[RT_REGION_BUFFERS];
    if (sb) memcpy(m->region[RT_REGION_STATE], w + pb, sb);
    if (bb) memcpy(m->region[RT_REGION_BUFFERS], w + pb + sb, bb);
    st = build_buffers(m);
  }
  if (st == PKRT_OK && gpu) st = rt_gpu_model_open(m, art, ker); /* host regions: the mirror */
  pkrt_artifact_free(art);
  if (st != PKRT_OK) return st;
  rt_manifest *mf = &m->mf;
  rt_model_weights_changed(m); /* the load plan runs before the first step */
  m->lr = mf->opt.lr;
  m->valid = mf->batch;
  m->features = mf->tensors[mf->input].numel / mf->batch;
  return PKRT_OK;
}

int pkrt_model_open(const char *path, const pkrt_open_options *opts, pkrt_model **out,
                    char *err, size_t errcap) {
  if (err && errcap) err[0] = 0;
  if (!out) {
    set_err(err, errcap, "pkrt_model_open", "out is NULL");
    return PKRT_ERR_INPUT;
  }
  *out = NULL;
  if (!path || !*path) {
    set_err(err, errcap, "pkrt_model_open", "no artifact path");
    return PKRT_ERR_INPUT;
  }
  pkrt_model *m = calloc(1, sizeof *m);
  if (m) m->rt = pkrt_ctx_new(opts ? opts->nthreads : 1);
  if (m && m->rt) m->arena = pkrt_arena_new(0);
  if (!m || !m->rt || !m->arena) {
    pkrt_model_close(m);
    set_err(err, errcap, path, "out of memory");
    return PKRT_ERR_NOMEM;
  }
  pkrt_status st = open_model(m, path, opts);
  if (st != PKRT_OK) {
    set_err(err, errcap, path, pkrt_ctx_error(m->rt));
    pkrt_model_close(m);
    return st;
  }
  *out = m;
  return PKRT_OK;
}

void pkrt_model_close(pkrt_model *m) {
  if (!m) return;
  rt_gpu_model_close(m);
  for (int i = 0; i < m->mf.nexterns; i++) pkrt_extern_free(m->mf.externs[i].fn);
  pkrt_module_free(m->module);
  for (int r = 0; r < RT_REGION_COUNT_; r++) free(m->region_owned[r]);
  free(m->workspace_owned);
  pkrt_arena_free(m->arena);
  pkrt_ctx_free(m->rt);
  free(m);
}

const char *pkrt_model_error(const pkrt_model *m) { return m ? pkrt_ctx_error(m->rt) : ""; }

int64_t pkrt_model_batch(const pkrt_model *m) { return m ? m->mf.batch : 0; }
int pkrt_model_dtype(const pkrt_model *m) { return m ? (int)m->mf.dtype : 0; }
int pkrt_model_can_train(const pkrt_model *m) { return m && m->mf.train; }
int64_t pkrt_model_classes(const pkrt_model *m) { return m ? m->mf.classes : 0; }
int64_t pkrt_model_features(const pkrt_model *m) { return m ? m->features : 0; }
int64_t pkrt_model_arena_bytes(const pkrt_model *m) {
  return m ? m->mf.region_bytes[RT_REGION_ARENA] : 0;
}
int64_t pkrt_model_steps(const pkrt_model *m) { return m ? m->steps : 0; }

static int shape_of(const rt_tensor *t, int64_t *shape) {
  for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
  return t->ndim;
}
int pkrt_model_input_shape(const pkrt_model *m, int64_t *shape) {
  return m && shape ? shape_of(&m->mf.tensors[m->mf.input], shape) : 0;
}
int pkrt_model_ninputs(const pkrt_model *m) { return m ? m->mf.ninputs : 0; }

static const rt_tensor *input_at(const pkrt_model *m, int i) {
  return m && i >= 0 && i < m->mf.ninputs ? &m->mf.tensors[m->mf.inputs[i]] : NULL;
}
const char *pkrt_model_input_name(const pkrt_model *m, int i) {
  const rt_tensor *t = input_at(m, i);
  return t ? t->name : NULL;
}
int pkrt_model_input_dtype(const pkrt_model *m, int i) {
  const rt_tensor *t = input_at(m, i);
  return t ? (int)t->dtype : 0;
}
int pkrt_model_input_batched(const pkrt_model *m, int i) {
  const rt_tensor *t = input_at(m, i);
  return t ? !t->no_batch : 0;
}

int pkrt_model_output_shape(const pkrt_model *m, int64_t *shape) {
  return m && shape ? shape_of(&m->mf.tensors[m->mf.output], shape) : 0;
}

int pkrt_model_tensor(pkrt_model *m, const char *name, pkrt_tensor_info *out) {
  if (!m || !name || !out) return PKRT_ERR_INPUT;
  for (int i = 0; i < m->mf.ntensors; i++) {
    const rt_tensor *t = &m->mf.tensors[i];
    if (strcmp(t->name, name) != 0) continue;
    /* GPU: the device's bytes of the tensor, into the host mirror */
    pkrt_status st = m->gpu ? rt_gpu_sync_tensor(m, i) : PKRT_OK;
    if (st != PKRT_OK) return st;
    out->data = rt_tensor_base(m, t);
    out->offset = t->elem_offset;
    out->dtype = (int)t->dtype;
    out->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
      out->shape[d] = t->shape[d];
      out->strides[d] = t->strides[d];
    }
    out->role = rt_role_names[t->role];
    /* the caller may write the weights through data: fold again before the next step */
    if (t->role == RT_ROLE_PARAM || t->role == RT_ROLE_BUFFER || t->role == RT_ROLE_CONSTANT)
      rt_model_weights_changed(m);
    return PKRT_OK;
  }
  return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "no tensor named '%s' in the model", name);
}

/* ---- weights ---- */

int pkrt_model_save_weights(pkrt_model *m, const char *path) {
  if (!m) return PKRT_ERR_INPUT;
  const rt_manifest *mf = &m->mf;
  int n = 0;
  for (int i = 0; i < mf->ntensors; i++) n += mf->tensors[i].weight;
  pkrt_status st = m->gpu ? rt_gpu_sync_weights(m, false) : PKRT_OK;
  if (st != PKRT_OK) return st;
  pkrt_wtensor *w = calloc((size_t)n + 1, sizeof *w);
  if (!w) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "%s: out of memory", path);
  int k = 0;
  for (int i = 0; i < mf->ntensors; i++) {
    const rt_tensor *t = &mf->tensors[i];
    if (!t->weight) continue;
    w[k] = (pkrt_wtensor){.name = t->name, .dtype = t->dtype, .ndim = t->ndim,
                          .data = rt_tensor_base(m, t)};
    memcpy(w[k].shape, t->shape, sizeof t->shape);
    k++;
  }
  st = pkrt_weights_write(m->rt, path, w, n);
  free(w);
  return st;
}

static void shape_text(char *buf, size_t cap, const int64_t *shape, int ndim) {
  size_t n = (size_t)snprintf(buf, cap, "(");
  for (int d = 0; d < ndim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
  if (n < cap) snprintf(buf + n, cap - n, ")");
}

int pkrt_model_load_weights(pkrt_model *m, const char *path) {
  if (!m) return PKRT_ERR_INPUT;
  pkrt_arena *a = pkrt_arena_new(0);
  if (!a) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
  pkrt_wtensor *w;
  int n;
  pkrt_status st = pkrt_weights_read(m->rt, a, path, &w, &n);
  /* GPU: the mirror first takes the device's state, so what the file lacks goes back as is */
  if (st == PKRT_OK && m->gpu) st = rt_gpu_sync_weights(m, false);
  const rt_manifest *mf = &m->mf;
  int matched = 0;
  /* Everything is checked before anything is copied: a refused file changes nothing. */
  for (int pass = 0; st == PKRT_OK && pass < 2; pass++) {
    for (int i = 0; st == PKRT_OK && i < n; i++) {
      for (int j = 0; j < mf->ntensors; j++) {
        const rt_tensor *t = &mf->tensors[j];
        if (!t->weight || strcmp(t->name, w[i].name) != 0) continue;
        bool same = t->dtype == w[i].dtype && t->ndim == w[i].ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == w[i].shape[d];
        if (!same) {
          char a1[128], a2[128];
          shape_text(a1, sizeof a1, w[i].shape, w[i].ndim);
          shape_text(a2, sizeof a2, t->shape, t->ndim);
          st = pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                             "%s: tensor '%s' is %s %s, the model's parameter is %s %s", path,
                             t->name, pkrt_dtype_name(w[i].dtype), a1,
                             pkrt_dtype_name(t->dtype), a2);
        } else if (pass == 0) {
          matched++;
        } else {
          memcpy(rt_tensor_base(m, t), w[i].data,
                 (size_t)t->numel * pkrt_dtype_size(t->dtype));
        }
        break;
      }
    }
    /* A file with no tensors would change nothing: surely not the file meant. */
    if (st == PKRT_OK && pass == 0 && matched == 0)
      st = n == 0 ? pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "%s: holds no tensors", path)
                  : pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                                  "%s: none of its %d tensors is a parameter of this model",
                                  path, n);
  }
  pkrt_arena_free(a);
  if (st == PKRT_OK && m->gpu) st = rt_gpu_sync_weights(m, true);
  if (st == PKRT_OK) rt_model_weights_changed(m);
  return st;
}
