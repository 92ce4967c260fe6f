/* test_graph_exec.h — the reference executor of the graph tests: runs the nodes of a
 * training graph through the TE reference interpreter, one f64 store per tensor with its
 * own storage, honouring views (partial-channel weights) and in-place outputs (updates).
 * Slow and obviously right: what Pock's generated training step is compared with. */
#ifndef TEST_GRAPH_EXEC_H
#define TEST_GRAPH_EXEC_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pk_graph.h"

typedef struct tg_store {
  const pk_graph *g;
  double **val; /* per tensor with its own storage: numel values, row-major */
} tg_store;

static inline int64_t tg_numel(const pk_gtensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Element j (row-major over t's shape) of t lives at this index of its root's storage. */
static inline int64_t tg_elem(const pk_gtensor *t, int64_t j) {
  if (t->base < 0) return j;
  int64_t off = t->view_offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    off += (j % t->shape[d]) * t->view_strides[d];
    j /= t->shape[d];
  }
  return off;
}

static inline double *tg_root(tg_store *s, const pk_gtensor *t) {
  return s->val[t->base >= 0 ? t->base : t->id];
}

/* A zero-filled store of g; params start from their f32 `init` where one is set. */
static inline tg_store *tg_store_new(pk_ctx *ctx, const pk_graph *g) {
  tg_store *s = pk_alloc(ctx, sizeof *s);
  s->g = g;
  s->val = pk_alloc(ctx, sizeof(double *) * (size_t)g->ntensors);
  for (int t = 0; t < g->ntensors; t++) {
    const pk_gtensor *x = g->tensors[t];
    if (x->base >= 0) continue;
    s->val[t] = pk_alloc(ctx, sizeof(double) * (size_t)tg_numel(x));
    if (x->init && x->dtype == PKRT_DTYPE_F32)
      for (int64_t j = 0; j < tg_numel(x); j++) s->val[t][j] = ((const float *)x->init)[j];
  }
  return s;
}

/* Runs nodes [0, upto) of g over s; prints FAIL and returns false when the interpreter
 * refuses a node. */
static inline bool tg_run(tg_store *s, int upto) {
  const pk_graph *g = s->g;
  for (int k = 0; k < upto; k++) {
    const pk_gnode *n = g->nodes[k];
    pk_ctx *scratch = pk_ctx_new();
    pk_te_ref *ref = pk_te_ref_new(scratch, n->prog);
    for (int i = 0; i < n->ninputs; i++) {
      const pk_gtensor *t = g->tensors[n->inputs[i]];
      pk_te_ref_tensor *rt = &ref->tensors[i];
      double *src = tg_root(s, t);
      for (int64_t j = 0; j < rt->numel; j++) {
        double v = src[tg_elem(t, j)];
        if (rt->val) rt->val[j] = v, rt->mag[j] = fabs(v);
        else rt->ival[j] = (int64_t)v;
      }
    }
    if (pk_te_interp_run(scratch, n->prog, ref) != PK_OK) {
      printf("FAIL interp of %s: %s\n", n->name, pk_ctx_error(scratch));
      pk_ctx_free(scratch);
      return false;
    }
    for (int o = 0; o < n->noutputs; o++) {
      const pk_gtensor *t = g->tensors[n->outputs[o]];
      const pk_te_ref_tensor *rt = &ref->tensors[n->ninputs + o];
      double *dst = tg_root(s, t);
      for (int64_t j = 0; j < rt->numel; j++)
        dst[tg_elem(t, j)] = rt->val ? rt->val[j] : (double)rt->ival[j];
    }
    pk_ctx_free(scratch);
  }
  return true;
}

#endif
