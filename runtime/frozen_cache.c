/* frozen_cache.c — `--cache-frozen`: the training loop's cache of the frozen prefix. The
 * first time a row is trained on, the prefix runs and the results the rest of the step
 * reads are copied out per row; a step whose rows are all cached copies them back in and
 * runs only the rest of the train plan. Exact: the cached bytes are the ones the prefix
 * wrote, and the prefix is row by row (the compiler refuses batch-mixing prefixes). */
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

struct rt_frozen_cache {
  pkrt_model *m;
  int64_t rows;          /* dataset rows; slot `rows` holds a padding row's results */
  int n;                 /* cached tensors (the manifest's cache.tensors) */
  unsigned char **data;  /* per tensor: (rows + 1) * row_bytes, or the whole tensor */
  size_t *row_bytes;     /* per tensor: bytes of one row (per-row ones), else all of it */
  bool *filled;          /* per slot: its results are in the cache */
  bool whole_filled;     /* the tensors that do not depend on the rows */
  int64_t bytes, hits;
};

pkrt_status rt_frozen_cache_new(pkrt_model *m, int64_t rows, int64_t budget,
                                rt_frozen_cache **out) {
  const rt_manifest *mf = &m->mf;
  *out = NULL;
  if (mf->cache_prefix <= 0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "--cache-frozen: this artifact has no frozen "
                         "prefix to cache (compile it with `pock compile --cache-frozen`)");
  if (m->gpu) /* the compiler refuses it too: the cache copies host regions */
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "--cache-frozen: not for GPU artifacts");
  if (budget <= 0) budget = PKRT_CACHE_DEFAULT_BUDGET;
  int64_t bytes = 0;
  for (int i = 0; i < mf->ncache; i++) {
    const rt_tensor *t = &mf->tensors[mf->cache_tensors[i]];
    int64_t all = t->numel * (int64_t)pkrt_dtype_size(t->dtype);
    bytes += mf->cache_per_row[i] ? all / mf->batch * (rows + 1) : all;
  }
  if (bytes > budget)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "--cache-frozen: the cache needs %lld bytes for "
                         "%lld rows, over its budget of %lld bytes (raise --cache-budget)",
                         (long long)bytes, (long long)rows, (long long)budget);
  rt_frozen_cache *c = calloc(1, sizeof *c);
  if (c) {
    c->data = calloc((size_t)mf->ncache, sizeof *c->data);
    c->row_bytes = calloc((size_t)mf->ncache, sizeof *c->row_bytes);
    c->filled = calloc((size_t)rows + 1, sizeof *c->filled);
  }
  if (!c || !c->data || !c->row_bytes || !c->filled) {
    rt_frozen_cache_free(c);
    return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "--cache-frozen: out of memory");
  }
  c->m = m;
  c->rows = rows;
  c->n = mf->ncache;
  c->bytes = bytes;
  for (int i = 0; i < c->n; i++) {
    const rt_tensor *t = &mf->tensors[mf->cache_tensors[i]];
    size_t all = (size_t)t->numel * pkrt_dtype_size(t->dtype);
    c->row_bytes[i] = mf->cache_per_row[i] ? all / (size_t)mf->batch : all;
    c->data[i] = malloc(mf->cache_per_row[i] ? c->row_bytes[i] * (size_t)(rows + 1) : all);
    if (!c->data[i]) {
      rt_frozen_cache_free(c);
      return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "--cache-frozen: out of memory (%lld bytes)",
                           (long long)bytes);
    }
  }
  *out = c;
  return PKRT_OK;
}

/* The cache slot of batch row i: its dataset row, or the padding slot. */
static int64_t slot_of(const rt_frozen_cache *c, const int64_t *idx, int64_t first, int64_t valid,
                       int64_t i) {
  return i >= valid ? c->rows : idx ? idx[first + i] : first + i;
}

/* Copies between the model's tensors and the cache: batch rows [0, batch) in (to_model) or
 * out, the row-independent tensors too. */
static void copy_rows(rt_frozen_cache *c, const int64_t *idx, int64_t first, int64_t valid,
                      bool to_model) {
  const rt_manifest *mf = &c->m->mf;
  for (int k = 0; k < c->n; k++) {
    unsigned char *t = rt_tensor_base(c->m, &mf->tensors[mf->cache_tensors[k]]);
    size_t rb = c->row_bytes[k];
    if (!mf->cache_per_row[k]) {
      if (to_model) memcpy(t, c->data[k], rb);
      else if (!c->whole_filled) memcpy(c->data[k], t, rb);
      continue;
    }
    for (int64_t i = 0; i < mf->batch; i++) {
      unsigned char *slot = c->data[k] + rb * (size_t)slot_of(c, idx, first, valid, i);
      if (to_model) memcpy(t + rb * (size_t)i, slot, rb);
      else memcpy(slot, t + rb * (size_t)i, rb);
    }
  }
}

pkrt_status rt_frozen_cache_step(rt_frozen_cache *c, const int64_t *idx, int64_t first,
                                 int64_t valid, double *loss) {
  pkrt_model *m = c->m;
  const rt_manifest *mf = &m->mf;
  bool hit = c->whole_filled;
  for (int64_t i = 0; hit && i < mf->batch; i++) hit = c->filled[slot_of(c, idx, first, valid, i)];
  pkrt_status st = rt_model_fold(m); /* before the cached rows go into the arena */
  if (st != PKRT_OK) return st;
  rt_train_begin(m);
  int k = mf->cache_prefix, n = mf->plans[RT_PLAN_TRAIN].n;
  if (hit) {
    copy_rows(c, idx, first, valid, true);
    c->hits++;
  } else {
    if ((st = rt_plan_run_steps(m, RT_PLAN_TRAIN, 0, k)) != PKRT_OK) return st;
    copy_rows(c, idx, first, valid, false);
    for (int64_t i = 0; i < mf->batch; i++) c->filled[slot_of(c, idx, first, valid, i)] = true;
    c->whole_filled = true;
  }
  if ((st = rt_plan_run_steps(m, RT_PLAN_TRAIN, k, n)) != PKRT_OK) return st;
  rt_train_end(m, loss);
  return PKRT_OK;
}

int64_t rt_frozen_cache_bytes(const rt_frozen_cache *c) { return c ? c->bytes : 0; }
int64_t rt_frozen_cache_hits(const rt_frozen_cache *c) { return c ? c->hits : 0; }

void rt_frozen_cache_free(rt_frozen_cache *c) {
  if (!c) return;
  for (int i = 0; c->data && i < c->n; i++) free(c->data[i]);
  free(c->data);
  free(c->row_bytes);
  free(c->filled);
  free(c);
}
