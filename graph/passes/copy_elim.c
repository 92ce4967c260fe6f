/* copy_elim.c — copy elimination: a gradient node that only copies a contiguous range of
 * its one input (the gradient of an add or a subtraction's first input without broadcast,
 * of a reshape, of a concat input that is a contiguous slice of dY) is removed, and its
 * result becomes a view of that input's storage: no kernel, no buffer. The memory planner
 * already extends a base's lifetime to its views' last reader. */
#include <string.h>

#include "graph_impl.h"
#include "pk_passes.h"

static int64_t numel_range(const int64_t *shape, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= shape[d];
  return n;
}

/* If node n's one output is elements [*off, *off + numel) of its one input in row-major
 * order, returns true. Decided from the op's gradient rule (te/ops), which is a plain read
 * of dY in exactly these cases. */
static bool copy_of_input(const pk_graph *g, const pk_gnode *n, int64_t *off) {
  if (n->kind != PK_GNODE_GRAD || n->fused || n->ninputs != 1 || n->noutputs != 1) return false;
  const pk_gtensor *x = g->tensors[n->outputs[0]], *dy = g->tensors[n->inputs[0]];
  if (x->dtype != dy->dtype) return false;
  int64_t nx = pk_gtensor_numel(x), ny = pk_gtensor_numel(dy);
  *off = 0;
  switch (n->op) {
  case PK_OP_ADD: return nx == ny;                         /* dA = dB = dY */
  case PK_OP_SUB: return n->grad_input == 0 && nx == ny;   /* dA = dY (dB = -dY) */
  case PK_OP_RESHAPE: return nx == ny;                     /* dX = dY, row-major */
  case PK_OP_CONCAT: {
    int axis = n->prm.attrs.axis < 0 ? n->prm.attrs.axis + dy->ndim : n->prm.attrs.axis;
    if (axis < 0 || axis >= dy->ndim || numel_range(dy->shape, 0, axis) != 1) return false;
    int64_t before = 0;
    for (int j = 0; j < n->grad_input; j++) before += n->prm.in[j].shape[axis];
    *off = before * numel_range(dy->shape, axis + 1, dy->ndim);
    return *off + nx <= ny;
  }
  default: return false;
  }
}

static bool arena_role(pk_tensor_role r) {
  return r == PK_ROLE_ACTIVATION || r == PK_ROLE_GRADIENT;
}

/* A view whose elements are its base's [view_offset, view_offset + numel) in row-major
 * order: one this pass made, or any row-major view. */
static bool contiguous_view(const pk_gtensor *t) {
  int64_t st[PK_TE_MAX_DIMS];
  pk_graph_dense_strides(t->ndim, t->shape, st);
  bool zero = true, same = true;
  for (int d = 0; d < t->ndim; d++) {
    zero = zero && t->view_strides[d] == 0;
    same = same && (t->shape[d] == 1 || t->view_strides[d] == st[d]);
  }
  return zero || same;
}

/* Aliases node k's output to its input's storage and removes node k, when k is a copy
 * and nothing writes either storage in place (an alias would see the write, or be written
 * through) and nothing else views the output. Adds the bytes saved to *saved. */
static bool alias_node(pk_graph *g, int k, int64_t *saved) {
  const pk_gnode *n = g->nodes[k];
  int64_t off;
  if (!copy_of_input(g, n, &off)) return false;
  int o = n->outputs[0], src = n->inputs[0];
  pk_gtensor *x = g->tensors[o];
  const pk_gtensor *s = g->tensors[src];
  if (x->base >= 0 || o == g->output || o == g->loss) return false;
  if (s->base >= 0) { /* a copy of an alias: alias the same storage */
    if (!contiguous_view(s)) return false;
    off += s->view_offset;
  }
  int root = pk_pass_root(g, src);
  const pk_gtensor *r = g->tensors[root];
  if (!arena_role(r->role) || r->dtype != x->dtype) return false;
  if (off + pk_gtensor_numel(x) > pk_gtensor_numel(r)) return false;
  for (int t = 0; t < g->ntensors; t++) {
    const pk_gtensor *u = g->tensors[t];
    if (u->base == o || (u->base == root && u->producer >= 0)) return false;
  }
  x->base = root;
  x->view_offset = off;
  pk_graph_dense_strides(x->ndim, x->shape, x->view_strides);
  *saved += pk_gtensor_bytes(x);
  bool *drop = pk_alloc(g->ctx, sizeof(bool) * (size_t)(g->nnodes + 1));
  drop[k] = true;
  pk_graph_remove_nodes(g, drop);
  return true;
}

/* Every copy aliased, in node order (a removed node's successor takes its id). */
static int alias_all(pk_graph *g, int64_t *saved) {
  int n = 0;
  for (int k = 0; k < g->nnodes;) {
    if (alias_node(g, k, saved)) n++;
    else k++;
  }
  return n;
}

/* Each copy aliased only if the planned arena does not grow (an alias keeps its source
 * alive until the alias's last reader, which can pack worse). */
static pk_status alias_each(pk_graph *g, int64_t arena, int *n, int64_t *saved) {
  *n = 0;
  for (int k = 0; k < g->nnodes;) {
    pk_graph *trial = pk_graph_clone(g);
    int64_t bytes = 0, cur;
    if (!alias_node(trial, k, &bytes)) {
      k++;
      continue;
    }
    pk_status s = pk_pass_arena_bytes(trial, &cur);
    if (s != PK_OK) return s;
    if (cur > arena) {
      k++;
      continue;
    }
    *g = *trial;
    arena = cur;
    *saved += bytes;
    ++*n;
  }
  return PK_OK;
}

pk_status pk_pass_copy_elim(pk_graph *g, const char **note) {
  int64_t before, after, saved = 0;
  pk_status s = pk_pass_arena_bytes(g, &before);
  if (s != PK_OK) return s;
  pk_graph *orig = pk_graph_clone(g);
  int n = alias_all(g, &saved), skipped = 0;
  if ((s = pk_pass_arena_bytes(g, &after)) != PK_OK) return s;
  if (after > before) {
    int all = n;
    *g = *orig;
    saved = 0;
    if ((s = alias_each(g, before, &n, &saved)) != PK_OK) return s;
    skipped = all - n;
  }
  *note = pk_sprintf(g->ctx, "%d copies aliased (%lld bytes of buffers, %d kernel calls "
                     "fewer)%s", n, (long long)saved, n,
                     skipped ? pk_sprintf(g->ctx, "; %d left as copies: aliased, the arena "
                                          "would grow", skipped) : "");
  return PK_OK;
}
