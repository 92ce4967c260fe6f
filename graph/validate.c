/* validate.c — pk_graph_validate: a graph is well formed when every id resolves, node order
 * is a topological order, each node's tensors agree with its TE program, and in-place
 * writes never clobber a value that a later node still reads. */
#include <string.h>

#include "graph_impl.h"

#define FAIL(...) pk_ctx_fail(g->ctx, PK_ERR_CHECK, "graph: " __VA_ARGS__)

static bool produced_role(pk_tensor_role r) {
  return r == PK_ROLE_ACTIVATION || r == PK_ROLE_TEMP || r == PK_ROLE_GRADIENT ||
         r == PK_ROLE_FOLDED;
}

static pk_status check_tensor(pk_graph *g, int i) {
  const pk_gtensor *t = g->tensors[i];
  if (!t) return FAIL("tensor %d is missing", i);
  if (t->id != i) return FAIL("tensor %d has id %d", i, t->id);
  if (!t->name || !*t->name) return FAIL("tensor %d has no name", i);
  if ((unsigned)t->role >= PK_ROLE_COUNT_) return FAIL("tensor '%s' has an invalid role", t->name);
  if (pkrt_dtype_size(t->dtype) == 0)
    return FAIL("tensor '%s' has unsupported dtype %s", t->name, pkrt_dtype_name(t->dtype));
  if (t->ndim < 1 || t->ndim > PK_TE_MAX_DIMS)
    return FAIL("tensor '%s' has rank %d", t->name, t->ndim);
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] < 1 || t->shape[d] > PK_OP_MAX_EXTENT)
      return FAIL("tensor '%s' dim %d has extent %lld", t->name, d, (long long)t->shape[d]);
  if (t->producer < -1 || t->producer >= g->nnodes)
    return FAIL("tensor '%s' names a producer node %d that does not exist", t->name, t->producer);
  /* an alias (graph/passes/copy_elim.c) is produced by its base's producer */
  if (t->producer < 0 && produced_role(t->role) && t->base < 0 && !t->fused_away)
    return FAIL("%s '%s' is never produced by a node", pk_role_name(t->role), t->name);
  if (t->producer >= 0 && !produced_role(t->role) && t->base < 0)
    return FAIL("%s '%s' is produced by node '%s' but has no storage base to write into",
                pk_role_name(t->role), t->name, g->nodes[t->producer]->name);
  if (t->base >= 0) {
    if (t->base >= g->ntensors || t->base == i)
      return FAIL("tensor '%s' has an invalid base id %d", t->name, t->base);
    const pk_gtensor *b = g->tensors[t->base];
    if (b->base >= 0) return FAIL("tensor '%s' is a view of a view ('%s')", t->name, b->name);
    if (b->dtype != t->dtype)
      return FAIL("view '%s' has dtype %s but its base '%s' has %s", t->name,
                  pkrt_dtype_name(t->dtype), b->name, pkrt_dtype_name(b->dtype));
    int64_t last = t->view_offset;
    if (last < 0) return FAIL("view '%s' has a negative offset", t->name);
    for (int d = 0; d < t->ndim; d++) {
      if (t->view_strides[d] < 0) return FAIL("view '%s' has a negative stride", t->name);
      last += (t->shape[d] - 1) * t->view_strides[d];
    }
    if (last >= pk_gtensor_numel(b))
      return FAIL("view '%s' reaches element %lld of its base '%s' (%lld elements)", t->name,
                  (long long)last, b->name, (long long)pk_gtensor_numel(b));
  }
  return PK_OK;
}

static pk_status check_slot(pk_graph *g, const pk_gnode *n, const char *what, int k, int tid,
                            const pk_te_tensor *pt) {
  const pk_gtensor *t = g->tensors[tid];
  if (pt->dtype != t->dtype)
    return FAIL("node '%s' %s %d ('%s') has dtype %s but its program expects %s", n->name, what,
                k, t->name, pkrt_dtype_name(t->dtype), pkrt_dtype_name(pt->dtype));
  bool same = pt->ndim == t->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = pt->shape[d] == t->shape[d];
  if (!same) {
    pk_strbuf b;
    pk_strbuf_init(&b);
    for (int d = 0; d < pt->ndim; d++)
      pk_strbuf_printf(&b, "%s%lld", d ? ", " : "", (long long)pt->shape[d]);
    pk_strbuf_append(&b, ") vs (");
    for (int d = 0; d < t->ndim; d++)
      pk_strbuf_printf(&b, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    char *s = pk_strbuf_finish(g->ctx, &b);
    return FAIL("node '%s' %s %d ('%s'): shape mismatch, program (%s)", n->name, what, k, t->name,
                s);
  }
  return PK_OK;
}

/* The storage a tensor stands for (itself, or its base) and the node whose write it sees
 * (-1: the value at step start). */
static int root_of(const pk_graph *g, int t) {
  return g->tensors[t]->base >= 0 ? g->tensors[t]->base : t;
}

pk_status pk_graph_validate(pk_graph *g) {
  pk_status s;
  if (g->batch < 1) return FAIL("batch %lld must be >= 1", (long long)g->batch);
  for (int i = 0; i < g->ntensors; i++)
    if ((s = check_tensor(g, i)) != PK_OK) return s;
  /* written_at[root] = the node that last wrote that storage in place (-1 none) */
  int *written_at = pk_alloc(g->ctx, sizeof(int) * (size_t)(g->ntensors + 1));
  for (int i = 0; i < g->ntensors; i++) written_at[i] = -1;
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    if (!n || n->id != k) return FAIL("node %d has a wrong id", k);
    if (!n->name) return FAIL("node %d has no name", k);
    if (!n->prog) return FAIL("node '%s' has no program", n->name);
    if ((unsigned)n->op >= PK_OP_COUNT_) return FAIL("node '%s' has an unknown op", n->name);
    int nph = 0, ncomp = 0;
    for (int i = 0; i < n->prog->ntensors; i++) {
      if (n->prog->tensors[i]->kind == PK_TE_PLACEHOLDER) {
        if (ncomp) return FAIL("node '%s': program has a placeholder after a compute", n->name);
        nph++;
      } else
        ncomp++;
    }
    if (nph != n->ninputs)
      return FAIL("node '%s' has %d inputs but its program %d placeholders", n->name, n->ninputs,
                  nph);
    if (ncomp != n->noutputs)
      return FAIL("node '%s' has %d outputs but its program %d computes", n->name, n->noutputs,
                  ncomp);
    for (int i = 0; i < n->ninputs; i++) {
      int t = n->inputs[i];
      if (t < 0 || t >= g->ntensors)
        return FAIL("node '%s' input %d is a dangling tensor id %d", n->name, i, t);
      const pk_gtensor *gt = g->tensors[t];
      if (gt->fused_away)
        return FAIL("node '%s' reads '%s', which was fused into another node", n->name, gt->name);
      int made_by = gt->producer >= 0 ? gt->producer : g->tensors[root_of(g, t)]->producer;
      if (made_by >= k)
        return FAIL("node '%s' reads '%s' before it is produced (node order is not "
                    "topological, or a cycle)", n->name, gt->name);
      if ((s = check_slot(g, n, "input", i, t, n->prog->tensors[i])) != PK_OK) return s;
      int r = root_of(g, t);
      if (written_at[r] >= 0 && gt->producer < written_at[r])
        return FAIL("node '%s' reads the old value of '%s' after node '%s' overwrote it in place",
                    n->name, g->tensors[r]->name, g->nodes[written_at[r]]->name);
    }
    for (int i = 0; i < n->noutputs; i++) {
      int t = n->outputs[i];
      if (t < 0 || t >= g->ntensors)
        return FAIL("node '%s' output %d is a dangling tensor id %d", n->name, i, t);
      const pk_gtensor *gt = g->tensors[t];
      if (gt->producer != k)
        return FAIL("tensor '%s' is an output of node '%s' but produced by another node",
                    gt->name, n->name);
      for (int j = 0; j < i; j++)
        if (n->outputs[j] == t) return FAIL("node '%s' lists output '%s' twice", n->name, gt->name);
      if ((s = check_slot(g, n, "output", i, t, n->prog->tensors[nph + i])) != PK_OK) return s;
      if (gt->base >= 0) {
        bool reads = false;
        for (int j = 0; j < n->ninputs; j++) reads |= root_of(g, n->inputs[j]) == gt->base;
        if (!reads)
          return FAIL("node '%s' writes '%s' in place of '%s', which it does not read", n->name,
                      gt->name, g->tensors[gt->base]->name);
      }
    }
    for (int i = 0; i < n->noutputs; i++)
      if (g->tensors[n->outputs[i]]->base >= 0) written_at[g->tensors[n->outputs[i]]->base] = k;
  }
  if (g->output < 0) return FAIL("the graph has no output set");
  if (g->output >= g->ntensors) return FAIL("the output id %d is not a tensor", g->output);
  const int special[] = {g->loss, g->target, g->row_weight, g->hyper};
  for (int i = 0; i < 4; i++)
    if (special[i] < -1 || special[i] >= g->ntensors)
      return FAIL("a training tensor id (%d) is not a tensor", special[i]);
  return PK_OK;
}
