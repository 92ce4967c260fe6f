/* frozen_prefix.c — the frozen prefix of a training graph (`--cache-frozen`): the forward
 * nodes whose results cannot change between steps for the same input rows (they read only
 * inputs, frozen weights, constants and each other), moved to the front of the order so
 * the runtime can run them once per sample, keep the tensors the rest of the step reads
 * from them, and skip them in later epochs. Load-phase nodes (the fold pass) stay first:
 * they run once at load, outside every step and so outside the prefix. */
#include <stdio.h>
#include <string.h>

#include "graph_impl.h"

static const char *shape_text(pk_ctx *ctx, const pk_gtensor *t) {
  char buf[160];
  int n = snprintf(buf, sizeof buf, "(");
  for (int d = 0; d < t->ndim && n < (int)sizeof buf - 24; d++)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  snprintf(buf + n, sizeof buf - (size_t)n, ")");
  return pk_strdup(ctx, buf);
}

pk_status pk_graph_frozen_prefix(pk_graph *g, pk_frozen_prefix *out) {
  pk_ctx *ctx = g->ctx;
  memset(out, 0, sizeof *out);
  int nt = g->ntensors, nn = g->nnodes;
  /* var[t]: t may hold other values next step for the same rows; rows[t]: t depends on
   * the input rows (else it is the same every step) */
  bool *var = pk_alloc(ctx, sizeof(bool) * (size_t)(nt + 1));
  bool *rows = pk_alloc(ctx, sizeof(bool) * (size_t)(nt + 1));
  bool *frozen = pk_alloc(ctx, sizeof(bool) * (size_t)(nn + 1));
  for (int t = 0; t < nt; t++) {
    const pk_gtensor *x = g->tensors[t];
    switch (x->role) {
    case PK_ROLE_INPUT: rows[t] = true; break;
    case PK_ROLE_PARAM: var[t] = x->trainable; break;
    case PK_ROLE_CONSTANT: break;
    case PK_ROLE_FOLDED: break; /* made at load from frozen weights and constants */
    case PK_ROLE_BUFFER: break; /* unless written in place: below */
    default: var[t] = true;     /* labels, state, H, results (until their node is seen) */
    }
  }
  for (int k = 0; k < nn; k++) /* storage a node writes in place changes between steps */
    for (int i = 0; i < g->nodes[k]->noutputs; i++) {
      const pk_gtensor *o = g->tensors[g->nodes[k]->outputs[i]];
      if (o->base >= 0) var[o->base] = true;
    }
  int nfrozen = 0;
  bool *load = pk_alloc(ctx, sizeof(bool) * (size_t)(nn + 1));
  for (int k = 0; k < nn; k++) {
    const pk_gnode *n = g->nodes[k];
    if (n->phase == PK_PHASE_LOAD) { /* its results are var = rows = false already */
      load[k] = true;
      for (int i = 0; i < n->noutputs; i++) var[n->outputs[i]] = false;
      continue;
    }
    bool fixed = n->phase == PK_PHASE_FORWARD, dep = false, rng = false, stats = false;
    for (int i = 0; i < n->ninputs; i++) {
      int t = n->inputs[i];
      if (t == g->rng) rng = true;                 /* dropout's mask changes every step */
      else if (t == g->hyper) stats = true;        /* batch norm in training mode */
      else if (var[t] && g->tensors[t]->role == PK_ROLE_BUFFER) stats = true; /* its stats */
      else if (var[t]) fixed = false;
      dep = dep || rows[t];
    }
    if (fixed && (rng || stats)) /* frozen inputs, yet its result changes every step */
      return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "--cache-frozen: the frozen prefix has "
                         "node '%s' (%s), whose result changes every step: %s",
                         n->name, pk_op_name(n->op),
                         rng ? "dropout draws a new mask each step"
                             : "batch norm in training mode normalizes with each batch's "
                               "statistics (with \"bn_mode\": \"auto\" in the model's training "
                               "object, frozen layers use their running stats)");
    frozen[k] = fixed;
    nfrozen += fixed;
    for (int i = 0; i < n->noutputs; i++) {
      var[n->outputs[i]] = !fixed;
      rows[n->outputs[i]] = dep;
    }
  }
  if (nfrozen == 0)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "--cache-frozen: nothing to cache: every "
                       "forward node reads a trained weight (the first layer trains)");
  /* the boundary: results of the prefix that a node after it reads */
  bool *boundary = pk_alloc(ctx, sizeof(bool) * (size_t)(nt + 1));
  for (int k = 0; k < nn; k++) {
    if (frozen[k] || load[k]) continue;
    for (int i = 0; i < g->nodes[k]->ninputs; i++) {
      int t = g->nodes[k]->inputs[i], p = g->tensors[t]->producer;
      if (p >= 0 && frozen[p]) boundary[t] = true;
    }
  }
  out->tensors = pk_alloc(ctx, sizeof(int) * (size_t)(nt + 1));
  out->per_row = pk_alloc(ctx, sizeof(bool) * (size_t)(nt + 1));
  for (int t = 0; t < nt; t++) {
    if (!boundary[t]) continue;
    const pk_gtensor *x = g->tensors[t];
    if (x->base >= 0)
      return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "--cache-frozen: the frozen prefix's result "
                         "'%s' is a view of another tensor: it cannot be cached", x->name);
    if (rows[t] && (x->ndim < 1 || x->shape[0] != g->batch))
      return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "--cache-frozen: the frozen prefix's result "
                         "'%s' %s does not start with the batch dimension (%lld): its rows "
                         "cannot be cached per sample", x->name, shape_text(ctx, x),
                         (long long)g->batch);
    out->per_row[out->ntensors] = rows[t];
    out->tensors[out->ntensors++] = t;
  }
  /* load nodes, then the prefix: legal, since neither reads anything a later node writes */
  int *order = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 1)), n = 0;
  for (int k = 0; k < nn; k++)
    if (load[k]) order[n++] = k;
  for (int k = 0; k < nn; k++)
    if (frozen[k]) order[n++] = k;
  for (int k = 0; k < nn; k++)
    if (!frozen[k] && !load[k]) order[n++] = k;
  pk_graph_reorder(g, order);
  out->nnodes = nfrozen;
  return PK_OK;
}
