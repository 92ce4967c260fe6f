/* sparse_apply.c — pk_sparse_apply: resolves a parsed spec's rules against a forward graph
 * and marks each param trainable (whole, or the first S input channels) or frozen. */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph_impl.h"
#include "pk_json_check.h"
#include "sparse_impl.h"

#define FAIL(...) pk_ctx_fail(g->ctx, PK_ERR_CHECK, __VA_ARGS__)

static bool is_param(const pk_gtensor *t) { return t->role == PK_ROLE_PARAM && t->base < 0; }

/* Partial channels slice the weight's axis 1 (its input channels) and the matching axis of
 * the layer's input activation, which holds for a conv2d with groups 1 (axis 1 of (N, C, H,
 * W)) and a linear layer: a matmul X (N, I) x W (O, I)^T or a batch_matmul X (..., T, I) x
 * W (O, I)^T with a rank-2 weight (the last axis of X). */
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
  } else if (n->op == PK_OP_MATMUL || n->op == PK_OP_BATCH_MATMUL) {
    if (!n->prm.attrs.trans_b || n->prm.attrs.trans_a)
      return FAIL("%s: train[%d]: partial channels on '%s': layer '%s' must be a matmul with "
                  "trans_b (weight stored (out, in)) and no trans_a", file, ri, t->name, n->name);
    if (t->ndim != 2)
      return FAIL("%s: train[%d]: partial channels on '%s': layer '%s' is a batch_matmul with a "
                  "rank-%d weight (only a rank-2 (out, in) weight is supported)", file, ri,
                  t->name, n->name, t->ndim);
  } else {
    return FAIL("%s: train[%d]: partial channels on '%s': layer '%s' is a %s, not conv2d or "
                "matmul", file, ri, t->name, n->name, pk_op_name(n->op));
  }
  return PK_OK;
}

/* A layer's weight: the second input of its conv2d/matmul/batch_matmul node, rank >= 2 (what
 * "channels" on a last_layers, blocks or all rule narrows; the rule's other params train
 * whole). */
static bool is_layer_weight(const pk_graph *g, const pk_gtensor *t) {
  return t->layer >= 0 && t->ndim >= 2 && g->nodes[g->layer_nodes[t->layer]]->inputs[1] == t->id;
}

/* Params read by a normalization (an op flagged PK_OPF_NORM): its weights and biases. */
static bool *norm_params(pk_graph *g, int *count) {
  bool *is = pk_alloc(g->ctx, sizeof(bool) * (size_t)(g->ntensors + 1));
  *count = 0;
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    if (n->kind != PK_GNODE_OP || !(pk_op_flags(n->op) & PK_OPF_NORM)) continue;
    for (int i = 0; i < n->ninputs; i++) {
      const pk_gtensor *t = g->tensors[n->inputs[i]];
      if (is_param(t) && !is[t->id]) is[t->id] = true, (*count)++;
    }
  }
  return is;
}

/* Blocks: a param named P.<i>.rest (P one or more dotted components, <i> decimal digits)
 * is in block i of prefix P; the first all-digit component after the first decides.
 * Returns the block index, or -1 with *plen untouched when the name has none. */
static int64_t block_of(const char *name, size_t *plen) {
  for (const char *c = strchr(name, '.'); c; c = strchr(c + 1, '.')) {
    const char *d = c + 1, *e = d;
    while (*e >= '0' && *e <= '9') e++;
    if (e == d || *e != '.' || e - d > 9) continue;
    *plen = (size_t)(c - name);
    return strtoll(d, NULL, 10);
  }
  return -1;
}

/* The index i of a name "prefix.<i>.rest", or -1. */
static int64_t block_under(const char *name, const char *prefix, size_t plen) {
  if (strncmp(name, prefix, plen) != 0 || name[plen] != '.') return -1;
  const char *d = name + plen + 1, *e = d;
  while (*e >= '0' && *e <= '9') e++;
  return e == d || *e != '.' || e - d > 9 ? -1 : strtoll(d, NULL, 10);
}

/* What rule r's "blocks" selects: sel[i] set for each. "auto" takes the prefix most params
 * have (by block_of; a tie is ambiguous: the spec must name one). */
static pk_status select_blocks(pk_graph *g, const char *file, const sparse_rule *r, bool *sel) {
  int nt = g->ntensors;
  const char *prefix = r->block_prefix;
  size_t plen = prefix ? strlen(prefix) : 0;
  if (!prefix) {
    int best = 0, best_n = 0, tie = -1;
    for (int i = 0; i < nt; i++) {
      size_t li = 0;
      if (!is_param(g->tensors[i]) || block_of(g->tensors[i]->name, &li) < 0) continue;
      int n = 0;
      for (int j = 0; j < nt; j++) {
        size_t lj = 0;
        if (is_param(g->tensors[j]) && block_of(g->tensors[j]->name, &lj) >= 0 && lj == li &&
            strncmp(g->tensors[i]->name, g->tensors[j]->name, li) == 0)
          n++;
      }
      if (n > best_n) {
        best = i, best_n = n, plen = li, tie = -1;
      } else if (n == best_n && (li != plen || strncmp(g->tensors[i]->name,
                                                       g->tensors[best]->name, li) != 0)) {
        tie = i;
      }
    }
    if (!best_n)
      return FAIL("%s: train[%d]: blocks: no param is named PREFIX.<index>.* (such as "
                  "'layer.3.fc.weight' or 'blocks.3.attn.weight')", file, r->index);
    prefix = pk_strndup(g->ctx, g->tensors[best]->name, plen);
    if (tie >= 0) {
      size_t lt = 0;
      block_of(g->tensors[tie]->name, &lt);
      return FAIL("%s: train[%d]: blocks: \"prefix\": \"auto\" is ambiguous: '%s' and '%s' "
                  "both number %d params; name one in \"prefix\"", file, r->index,
                  pk_json_escape(g->ctx, prefix),
                  pk_json_escape(g->ctx, pk_strndup(g->ctx, g->tensors[tie]->name, lt)), best_n);
    }
  }
  /* Distinct indices under the prefix; the last n are the n highest. */
  int64_t *idx = pk_alloc(g->ctx, sizeof(int64_t) * (size_t)(nt + 1));
  int64_t *of = pk_alloc(g->ctx, sizeof(int64_t) * (size_t)(nt + 1));
  int nidx = 0;
  for (int i = 0; i < nt; i++) {
    of[i] = is_param(g->tensors[i]) ? block_under(g->tensors[i]->name, prefix, plen) : -1;
    if (of[i] < 0) continue;
    bool seen = false;
    for (int j = 0; j < nidx && !seen; j++) seen = idx[j] == of[i];
    if (!seen) idx[nidx++] = of[i];
  }
  if (!nidx)
    return FAIL("%s: train[%d]: blocks: no param is named '%s.<index>.*'", file, r->index,
                pk_json_escape(g->ctx, prefix));
  if (r->last_blocks > nidx)
    return FAIL("%s: train[%d]: blocks.last %lld but '%s' has %d block%s", file, r->index,
                (long long)r->last_blocks, pk_json_escape(g->ctx, prefix), nidx,
                nidx == 1 ? "" : "s");
  /* The threshold: the last_blocks-th highest index. */
  int64_t cut = -1;
  for (int64_t k = 0; k < r->last_blocks; k++) {
    int64_t hi = -1;
    for (int j = 0; j < nidx; j++)
      if ((cut < 0 || idx[j] < cut) && idx[j] > hi) hi = idx[j];
    cut = hi;
  }
  for (int i = 0; i < nt; i++) sel[i] = of[i] >= cut;
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
  int nnorm = 0;
  bool *norm = norm_params(g, &nnorm);
  bool *block = pk_alloc(g->ctx, sizeof(bool) * (size_t)(g->ntensors + 1));
  for (int ri = 0; spec && ri < spec->nrules; ri++) {
    const sparse_rule *r = &spec->rules[ri];
    bool partial = r->fraction > 0 || r->count > 0;
    if (r->sel == SPARSE_SEL_LAST_LAYERS && r->last_layers > nlayers)
      return FAIL("%s: train[%d]: last_layers %lld but the model has %d layer%s", file, r->index,
                  (long long)r->last_layers, nlayers, nlayers == 1 ? "" : "s");
    if (r->sel == SPARSE_SEL_NORMS && nnorm == 0)
      return FAIL("%s: train[%d]: \"norms\" but the model has no normalization with params (an "
                  "op flagged PK_OPF_NORM reading a param)", file, r->index);
    if (r->sel == SPARSE_SEL_BLOCKS) {
      pk_status s = select_blocks(g, file, r, block);
      if (s != PK_OK) return s;
    }
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
        case SPARSE_SEL_NORMS: hit = norm[i]; break;
        case SPARSE_SEL_BLOCKS: hit = block[i]; break;
        case SPARSE_SEL_LAST_LAYERS:
          hit = t->layer >= 0 && t->layer >= nlayers - r->last_layers;
          break;
        }
        if (!hit) continue;
        matched++;
        /* Outside a params rule, "channels" narrows the layer weights only. */
        if (!partial || (r->sel != SPARSE_SEL_PARAMS && !is_layer_weight(g, t))) {
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
