/* sparse_apply.c — pk_sparse_apply: resolves a parsed spec's rules against a forward graph
 * and marks each param trainable (whole, or the first S input channels) or frozen. */
#include <fnmatch.h>
#include <math.h>

#include "graph_impl.h"
#include "pk_json_check.h"
#include "sparse_impl.h"

#define FAIL(...) pk_ctx_fail(g->ctx, PK_ERR_CHECK, __VA_ARGS__)

static bool is_param(const pk_gtensor *t) { return t->role == PK_ROLE_PARAM && t->base < 0; }

/* Partial channels slice axis 1 of the weight and of the layer's input activation, which
 * holds only for a conv2d with groups 1 or a matmul X (N, I) x W (O, I)^T. */
static pk_status check_partial(pk_graph *g, const char *file, int ri, const pk_gtensor *t) {
  if (t->ndim < 2)
    return FAIL("%s: train[%d]: partial channels on '%s', which has rank %d (needs >= 2)", file,
                ri, t->name, t->ndim);
  if (t->layer < 0)
    return FAIL("%s: train[%d]: partial channels on '%s', which is not the weight of a "
                "conv2d/matmul layer", file, ri, t->name);
  const pk_gnode *n = g->nodes[g->layer_nodes[t->layer]];
  if (n->inputs[1] != t->id || n->inputs[0] == t->id)
    return FAIL("%s: train[%d]: partial channels on '%s', which is not the weight (second "
                "input) of layer '%s'", file, ri, t->name, n->name);
  if (n->op == PK_OP_CONV2D) {
    if (n->prm.attrs.groups > 1)
      return FAIL("%s: train[%d]: partial channels on '%s': layer '%s' is a grouped conv2d "
                  "(groups %lld; only groups 1 is supported)", file, ri, t->name, n->name,
                  (long long)n->prm.attrs.groups);
  } else if (n->op == PK_OP_MATMUL) {
    if (!n->prm.attrs.trans_b || n->prm.attrs.trans_a)
      return FAIL("%s: train[%d]: partial channels on '%s': layer '%s' must be a matmul with "
                  "trans_b (weight stored (out, in)) and no trans_a", file, ri, t->name, n->name);
  } else {
    return FAIL("%s: train[%d]: partial channels on '%s': layer '%s' is a %s, not conv2d or "
                "matmul", file, ri, t->name, n->name, pk_op_name(n->op));
  }
  return PK_OK;
}

/* The trained channel count S of rule r on weight t (with C = t->shape[1] channels). */
static pk_status channels_of(pk_graph *g, const char *file, const sparse_rule *r,
                             const pk_gtensor *t, int64_t *S) {
  int64_t C = t->shape[1];
  if (r->count > 0) {
    if (r->count > C)
      return FAIL("%s: train[%d]: channel count %lld is out of range for '%s' (1..%lld input "
                  "channels)", file, r->index, (long long)r->count, t->name, (long long)C);
    *S = r->count;
  } else {
    double s = round(r->fraction * (double)C);
    if (s < 1)
      return FAIL("%s: train[%d]: channels fraction %g of '%s' (%lld input channels) rounds to 0",
                  file, r->index, r->fraction, t->name, (long long)C);
    *S = (int64_t)s;
  }
  return PK_OK;
}

pk_status pk_sparse_apply(pk_graph *g, const pk_sparse_spec *spec) {
  int nlayers = pk_graph_layers(g);
  /* whole[i]: some rule trains param i entirely; part[i]: the most channels a partial rule
   * asks for (rules are a union: the larger selection wins). */
  bool *whole = pk_alloc(g->ctx, sizeof(bool) * (size_t)(g->ntensors + 1));
  int64_t *part = pk_alloc(g->ctx, sizeof(int64_t) * (size_t)(g->ntensors + 1));
  if (!spec)
    for (int i = 0; i < g->ntensors; i++) whole[i] = true;
  const char *file = spec ? spec->filename : "";
  for (int ri = 0; spec && ri < spec->nrules; ri++) {
    const sparse_rule *r = &spec->rules[ri];
    bool partial = r->fraction > 0 || r->count > 0;
    if (r->sel == SPARSE_SEL_LAST_LAYERS && r->last_layers > nlayers)
      return FAIL("%s: train[%d]: last_layers %lld but the model has %d layer%s", file, r->index,
                  (long long)r->last_layers, nlayers, nlayers == 1 ? "" : "s");
    for (int gi = 0; gi < (r->sel == SPARSE_SEL_PARAMS ? r->nglobs : 1); gi++) {
      int matched = 0;
      for (int i = 0; i < g->ntensors; i++) {
        const pk_gtensor *t = g->tensors[i];
        if (!is_param(t)) continue;
        bool hit = false;
        switch (r->sel) {
        case SPARSE_SEL_PARAMS: hit = fnmatch(r->globs[gi], t->name, 0) == 0; break;
        case SPARSE_SEL_BIASES: hit = t->is_bias; break;
        case SPARSE_SEL_ALL: hit = true; break;
        case SPARSE_SEL_LAST_LAYERS:
          hit = t->layer >= 0 && t->layer >= nlayers - r->last_layers;
          break;
        }
        if (!hit) continue;
        matched++;
        if (!partial) {
          whole[i] = true;
          continue;
        }
        pk_status s = check_partial(g, file, r->index, t);
        if (s != PK_OK) return s;
        int64_t S = 0;
        if ((s = channels_of(g, file, r, t, &S)) != PK_OK) return s;
        if (S > part[i]) part[i] = S;
      }
      if (matched == 0 && r->sel == SPARSE_SEL_PARAMS)
        return FAIL("%s: train[%d]: \"%s\" matches no param", file, r->index,
                    pk_json_escape(g->ctx, r->globs[gi]));
      if (matched == 0 && r->sel == SPARSE_SEL_BIASES)
        return FAIL("%s: train[%d]: \"biases\" but the model has no param named *bias", file,
                    r->index);
    }
  }
  for (int i = 0; i < g->ntensors; i++) {
    pk_gtensor *t = g->tensors[i];
    if (!is_param(t)) continue;
    int64_t full = t->ndim >= 2 ? t->shape[1] : 0;
    t->trainable = whole[i] || part[i] > 0;
    t->train_channels = whole[i] || part[i] == 0 ? full : part[i];
  }
  return PK_OK;
}
