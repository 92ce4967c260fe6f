/* onnx_patterns.c — chains of ONNX nodes that exporters write for one PyTorch module,
 * recognized and imported as the one Pock op they are: LayerNorm (opsets before 17:
 * ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add), RMSNorm (Pow/ReduceMean/Add/Sqrt/
 * Div or Reciprocal/Mul/Mul: torch has no ONNX op for it), exact GELU (Div by sqrt 2/Erf/
 * Add 1/Mul x/Mul 0.5) and GroupNorm (torch 1.13: Reshape to (N, G, -1)/
 * InstanceNormalization with ones and zeros/Reshape back/Mul by Unsqueeze(gamma)/Add
 * Unsqueeze(beta)). One op instead of nine is one kernel instead of nine,
 * and a recognized norm is a normalization to sparse specs ("norms": true).
 *
 * A chain is found on the node list before conversion (structure only: op types, and that
 * every intermediate value is read inside the chain alone); its nodes are skipped, and at
 * its last node the constants and shapes are checked and the op is emitted. When that check
 * fails the chain's nodes are converted one by one, as if no pattern had matched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

/* Uses of each value name by node inputs (and graph outputs), with up to 4 consumers. */
typedef struct ox_use {
  const char *name;
  int count;
  int node[4];
} ox_use;

typedef struct ox_uses {
  ox_use *slot;
  int cap;
} ox_uses;

static uint32_t ox_h(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static ox_use *ox_use_of(ox_uses *u, const char *name, bool add) {
  for (uint32_t i = ox_h(name) & (uint32_t)(u->cap - 1);; i = (i + 1) & (uint32_t)(u->cap - 1)) {
    if (!u->slot[i].name) {
      if (!add) return NULL;
      u->slot[i].name = name;
      return &u->slot[i];
    }
    if (strcmp(u->slot[i].name, name) == 0) return &u->slot[i];
  }
}

typedef struct ox_match {
  pk_ox *im;
  const Onnx__GraphProto *gp;
  ox_uses uses;
} ox_match;

static const Onnx__NodeProto *ox_n(ox_match *m, int j) { return m->gp->node[j]; }

static bool ox_is(ox_match *m, int j, const char *type, size_t nin) {
  const Onnx__NodeProto *n = ox_n(m, j);
  return n->op_type && strcmp(n->op_type, type) == 0 && n->n_input == nin && n->n_output == 1 &&
         (!n->domain || !n->domain[0]);
}

static const char *ox_out(ox_match *m, int j) { return ox_n(m, j)->output[0]; }

/* The single node reading value `name` (and nothing else reads it), or -1. */
static int ox_only_consumer(ox_match *m, const char *name) {
  ox_use *u = ox_use_of(&m->uses, name, false);
  return u && u->count == 1 && u->node[0] >= 0 ? u->node[0] : -1;
}

/* For a binary node j reading `name`: the other input, or NULL when j does not read it. */
static const char *ox_other(ox_match *m, int j, const char *name) {
  const Onnx__NodeProto *n = ox_n(m, j);
  if (n->n_input != 2) return NULL;
  if (strcmp(n->input[0], name) == 0) return n->input[1];
  if (strcmp(n->input[1], name) == 0) return n->input[0];
  return NULL;
}

/* Follows `name` to its only consumer of op `type` (binary when other != NULL: the other
 * operand is returned there). -1 when the chain breaks. */
static int ox_next(ox_match *m, const char *name, const char *type, const char **other) {
  int j = ox_only_consumer(m, name);
  if (j < 0 || !ox_is(m, j, type, other ? 2 : 1)) return -1;
  if (other && !(*other = ox_other(m, j, name))) return -1;
  return j;
}

/* ---- the three chains ---- */

static bool ox_rms(ox_match *m, int i, pk_ox_chain *c) {
  if (!ox_is(m, i, "Pow", 2)) return false;
  const char *x = ox_n(m, i)->input[0], *two = ox_n(m, i)->input[1], *eps, *w, *one = NULL,
             *x2 = NULL;
  int r = ox_only_consumer(m, ox_out(m, i));
  if (r < 0 || !(ox_is(m, r, "ReduceMean", 1) || ox_is(m, r, "ReduceMean", 2)) ||
      strcmp(ox_n(m, r)->input[0], ox_out(m, i)) != 0)
    return false;
  int a = ox_next(m, ox_out(m, r), "Add", &eps);
  int s = a < 0 ? -1 : ox_next(m, ox_out(m, a), "Sqrt", NULL);
  if (s < 0) return false;
  int d = ox_only_consumer(m, ox_out(m, s));
  if (d < 0) return false;
  if (ox_is(m, d, "Div", 2) && strcmp(ox_n(m, d)->input[1], ox_out(m, s)) == 0)
    one = ox_n(m, d)->input[0];
  else if (!ox_is(m, d, "Reciprocal", 1))
    return false;
  int mx = ox_next(m, ox_out(m, d), "Mul", &x2);
  if (mx < 0 || strcmp(x2, x) != 0) return false;
  int mw = ox_next(m, ox_out(m, mx), "Mul", &w);
  if (mw < 0) return false;
  *c = (pk_ox_chain){.kind = PK_OX_CHAIN_RMS_NORM, .n = 7, .nodes = {i, r, a, s, d, mx, mw},
                     .x = x, .w = w, .eps = eps, .c1 = two, .c2 = one, .reduce = r};
  return true;
}

static bool ox_layer_norm(ox_match *m, int i, pk_ox_chain *c) {
  if (!(ox_is(m, i, "ReduceMean", 1) || ox_is(m, i, "ReduceMean", 2))) return false;
  const char *x = ox_n(m, i)->input[0], *mu = ox_out(m, i), *two, *eps, *w, *b;
  int sub = ox_only_consumer(m, mu);
  if (sub < 0 || !ox_is(m, sub, "Sub", 2) || strcmp(ox_n(m, sub)->input[0], x) != 0 ||
      strcmp(ox_n(m, sub)->input[1], mu) != 0)
    return false;
  const char *dev = ox_out(m, sub);
  ox_use *u = ox_use_of(&m->uses, dev, false);
  if (!u || u->count != 2) return false;
  int p = -1, div = -1;
  for (int k = 0; k < 2; k++) {
    int j = u->node[k];
    if (j >= 0 && ox_is(m, j, "Pow", 2) && strcmp(ox_n(m, j)->input[0], dev) == 0) p = j;
    if (j >= 0 && ox_is(m, j, "Div", 2) && strcmp(ox_n(m, j)->input[0], dev) == 0) div = j;
  }
  if (p < 0 || div < 0) return false;
  two = ox_n(m, p)->input[1];
  int r = ox_only_consumer(m, ox_out(m, p));
  if (r < 0 || !(ox_is(m, r, "ReduceMean", 1) || ox_is(m, r, "ReduceMean", 2)) ||
      strcmp(ox_n(m, r)->input[0], ox_out(m, p)) != 0)
    return false;
  int a = ox_next(m, ox_out(m, r), "Add", &eps);
  int s = a < 0 ? -1 : ox_next(m, ox_out(m, a), "Sqrt", NULL);
  if (s < 0 || ox_only_consumer(m, ox_out(m, s)) != div ||
      strcmp(ox_n(m, div)->input[1], ox_out(m, s)) != 0)
    return false;
  int mw = ox_next(m, ox_out(m, div), "Mul", &w);
  int ab = mw < 0 ? -1 : ox_next(m, ox_out(m, mw), "Add", &b);
  if (ab < 0) return false;
  *c = (pk_ox_chain){.kind = PK_OX_CHAIN_LAYER_NORM, .n = 9,
                     .nodes = {i, sub, p, r, a, s, div, mw, ab}, .x = x, .w = w, .b = b,
                     .eps = eps, .c1 = two, .reduce = i, .reduce2 = r};
  return true;
}

static bool ox_gelu(ox_match *m, int i, pk_ox_chain *c) {
  if (!ox_is(m, i, "Div", 2)) return false;
  const char *x = ox_n(m, i)->input[0], *sqrt2 = ox_n(m, i)->input[1], *one, *x2, *half;
  int e = ox_next(m, ox_out(m, i), "Erf", NULL);
  int a = e < 0 ? -1 : ox_next(m, ox_out(m, e), "Add", &one);
  int mx = a < 0 ? -1 : ox_next(m, ox_out(m, a), "Mul", &x2);
  if (mx < 0 || strcmp(x2, x) != 0) return false;
  int mh = ox_next(m, ox_out(m, mx), "Mul", &half);
  if (mh < 0) return false;
  *c = (pk_ox_chain){.kind = PK_OX_CHAIN_GELU, .n = 5, .nodes = {i, e, a, mx, mh}, .x = x,
                     .c1 = sqrt2, .c2 = one, .c3 = half};
  return true;
}

/* The node producing value `name`, or -1 (a graph input, an initializer). */
static int ox_producer(ox_match *m, const char *name) {
  for (size_t j = 0; j < m->gp->n_node; j++)
    for (size_t k = 0; k < m->gp->node[j]->n_output; k++)
      if (strcmp(m->gp->node[j]->output[k], name) == 0) return (int)j;
  return -1;
}

/* `name` is Unsqueeze(param, axes) read only by the chain: the Unsqueeze node, else -1. */
static int ox_unsqueezed(ox_match *m, const char *name, const char **param, const char **axes) {
  int u = ox_producer(m, name);
  if (u < 0 || !ox_is(m, u, "Unsqueeze", 2) || ox_only_consumer(m, name) < 0) return -1;
  *param = ox_n(m, u)->input[0];
  *axes = ox_n(m, u)->input[1];
  return u;
}

static bool ox_group_norm(ox_match *m, int i, pk_ox_chain *c) {
  if (!ox_is(m, i, "Reshape", 2)) return false;
  const char *x = ox_n(m, i)->input[0], *gshape = ox_n(m, i)->input[1], *gs, *bs, *g, *b,
             *ga, *ba;
  int in = ox_only_consumer(m, ox_out(m, i));
  if (in < 0 || !ox_is(m, in, "InstanceNormalization", 3) ||
      strcmp(ox_n(m, in)->input[0], ox_out(m, i)) != 0)
    return false;
  const char *ones = ox_n(m, in)->input[1], *zeros = ox_n(m, in)->input[2];
  int r2 = ox_only_consumer(m, ox_out(m, in));
  if (r2 < 0 || !ox_is(m, r2, "Reshape", 2) || strcmp(ox_n(m, r2)->input[0], ox_out(m, in)))
    return false;
  const char *shape2 = ox_n(m, r2)->input[1];
  int mul = ox_next(m, ox_out(m, r2), "Mul", &gs);
  int add = mul < 0 ? -1 : ox_next(m, ox_out(m, mul), "Add", &bs);
  int ug = add < 0 ? -1 : ox_unsqueezed(m, gs, &g, &ga);
  int ub = ug < 0 ? -1 : ox_unsqueezed(m, bs, &b, &ba);
  if (ub < 0) return false;
  *c = (pk_ox_chain){.kind = PK_OX_CHAIN_GROUP_NORM, .n = 7,
                     .nodes = {i, in, r2, ug, mul, ub, add}, .x = x, .w = g, .b = b,
                     .c1 = gshape, .c2 = ones, .c3 = zeros, .c4 = shape2, .c5 = ga, .c6 = ba,
                     .reduce = in};
  return true;
}

pk_status pk_ox_patterns_find(pk_ox *im) {
  const Onnx__GraphProto *gp = im->model->graph;
  size_t nn = gp->n_node;
  im->chain_of = pk_alloc(im->ctx, sizeof *im->chain_of * (nn ? nn : 1));
  for (size_t i = 0; i < nn; i++) im->chain_of[i] = -1;
  im->nchains = 0;
  size_t nin = gp->n_output;
  for (size_t i = 0; i < nn; i++) nin += gp->node[i]->n_input;
  ox_match m = {.im = im, .gp = gp};
  for (m.uses.cap = 64; (size_t)m.uses.cap < 2 * nin + 2; m.uses.cap *= 2) {}
  m.uses.slot = pk_alloc(im->ctx, sizeof *m.uses.slot * (size_t)m.uses.cap);
  memset(m.uses.slot, 0, sizeof *m.uses.slot * (size_t)m.uses.cap);
  for (size_t i = 0; i < nn; i++)
    for (size_t k = 0; k < gp->node[i]->n_input; k++) {
      const char *in = gp->node[i]->input[k];
      if (!in || !in[0]) continue;
      ox_use *u = ox_use_of(&m.uses, in, true);
      /* a node reading a value twice (Mul(x, x)) is two uses by one node */
      if (u->count < 4) u->node[u->count] = (int)i;
      u->count++;
    }
  for (size_t k = 0; k < gp->n_output; k++) {
    ox_use *u = ox_use_of(&m.uses, gp->output[k]->name ? gp->output[k]->name : "", true);
    if (u->count < 4) u->node[u->count] = -1; /* read by the caller */
    u->count++;
  }
  im->chains = pk_alloc(im->ctx, sizeof *im->chains * (nn ? nn : 1));
  for (size_t i = 0; i < nn; i++) {
    if (im->chain_of[i] >= 0) continue;
    pk_ox_chain c;
    if (!ox_rms(&m, (int)i, &c) && !ox_layer_norm(&m, (int)i, &c) && !ox_gelu(&m, (int)i, &c) &&
        !ox_group_norm(&m, (int)i, &c))
      continue;
    bool free_nodes = true;
    for (int k = 0; k < c.n; k++) free_nodes &= im->chain_of[c.nodes[k]] < 0;
    if (!free_nodes) continue;
    /* the last node in file order is where the chain is emitted */
    c.last = c.nodes[0];
    for (int k = 1; k < c.n; k++)
      if (c.nodes[k] > c.last) c.last = c.nodes[k];
    for (int k = 0; k < c.n; k++) im->chain_of[c.nodes[k]] = im->nchains;
    im->chains[im->nchains++] = c;
  }
  return PK_OK;
}

/* ---- emitting a chain at its last node ---- */

/* The value of a scalar CONST; false for anything else. */
static bool ox_scalar(pk_ox *im, const char *name, double *out) {
  if (!name) return false;
  int id = pk_ox_find(im, name);
  if (id < 0) return false;
  const pk_ox_value *v = pk_ox_val(im, id);
  if (v->kind != PK_OXV_CONST || pk_ox_numel(v->ndim, v->shape) != 1) return false;
  *out = v->dtype == PKRT_DTYPE_F32   ? ((const float *)v->data)[0]
         : v->dtype == PKRT_DTYPE_F64 ? ((const double *)v->data)[0]
                                      : (double)((const int64_t *)v->data)[0];
  return true;
}

/* ReduceMean node j reduces exactly the last axis of a rank-`rank` input, keeping it. */
static bool ox_reduces_last(pk_ox *im, int j, int rank) {
  const Onnx__NodeProto *n = im->model->graph->node[j];
  int64_t keep = 1, axes[2] = {0, 0};
  int naxes = 0;
  for (size_t k = 0; k < n->n_attribute; k++) {
    const Onnx__AttributeProto *a = n->attribute[k];
    if (!a || !a->name) return false; /* a nameless attribute (found by fuzz_onnx): the converter's */
    if (strcmp(a->name, "keepdims") == 0) keep = a->i;
    else if (strcmp(a->name, "axes") == 0 && a->n_ints == 1 && naxes == 0) axes[naxes++] = a->ints[0];
    else return false; /* noop_with_empty_axes, a repeated axes or anything else: leave it to
                          the converter */
  }
  if (n->n_input == 2) {
    int id = pk_ox_find(im, n->input[1]);
    const pk_ox_value *v = id >= 0 ? pk_ox_val(im, id) : NULL;
    if (!v || v->kind != PK_OXV_CONST || v->dtype != PKRT_DTYPE_I64 ||
        pk_ox_numel(v->ndim, v->shape) != 1 || naxes)
      return false;
    axes[naxes++] = ((const int64_t *)v->data)[0];
  }
  return keep == 1 && naxes == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

/* A PARAM of shape (d,). */
static bool ox_vector_param(pk_ox *im, const char *name, int64_t d, int *id) {
  *id = name ? pk_ox_find(im, name) : -1;
  if (*id < 0) return false;
  const pk_ox_value *v = pk_ox_val(im, *id);
  return v->kind == PK_OXV_PARAM && v->ndim == 1 && v->shape[0] == d;
}

/* A CONST of n values all equal to v (InstanceNormalization's ones and zeros). */
static bool ox_all(pk_ox *im, const char *name, int64_t n, double v) {
  int id = pk_ox_find(im, name);
  if (id < 0) return false;
  const pk_ox_value *cv = pk_ox_val(im, id);
  if (cv->kind != PK_OXV_CONST || cv->dtype == PKRT_DTYPE_I64 ||
      pk_ox_numel(cv->ndim, cv->shape) != n)
    return false;
  for (int64_t k = 0; k < n; k++) {
    double e = cv->dtype == PKRT_DTYPE_F32 ? ((const float *)cv->data)[k]
                                           : ((const double *)cv->data)[k];
    if (e != v) return false;
  }
  return true;
}

/* A 1-D int64 CONST of n values; false otherwise. */
static bool ox_ints(pk_ox *im, const char *name, int n, int64_t *out) {
  int id = pk_ox_find(im, name);
  if (id < 0) return false;
  const pk_ox_value *cv = pk_ox_val(im, id);
  if (cv->kind != PK_OXV_CONST || cv->dtype != PKRT_DTYPE_I64 || cv->ndim != 1 ||
      cv->shape[0] != n)
    return false;
  memcpy(out, cv->data, sizeof *out * (size_t)n);
  return true;
}

/* torch's GroupNorm chain computes group_norm(x, gamma, beta) with G groups: x (N, C, ...)
 * reshaped to (N, G, -1), normalized with unit scale and zero shift, reshaped back to x's
 * shape, then gamma and beta (C,) unsqueezed over the spatial dims. */
static bool ox_group_norm_ok(pk_ox *im, const pk_ox_chain *c, const pk_ox_value *x,
                             int64_t *groups, double *eps, int *wid, int *bid) {
  int r = x->ndim;
  if (r < 3 || r > PK_TE_MAX_DIMS) return false;
  int64_t s1[3], s2[PK_TE_MAX_DIMS], a[PK_TE_MAX_DIMS];
  if (!ox_ints(im, c->c1, 3, s1) || (s1[0] != 0 && s1[0] != x->shape[0]) || s1[2] != -1 ||
      s1[1] < 1 || x->shape[1] % s1[1] != 0)
    return false;
  *groups = s1[1];
  if (!ox_all(im, c->c2, *groups, 1) || !ox_all(im, c->c3, *groups, 0) ||
      !ox_ints(im, c->c4, r, s2))
    return false;
  for (int d = 0; d < r; d++)
    if (s2[d] != x->shape[d]) return false;
  /* unsqueezed to (C, 1, ...): axes 1 .. r-2 of the rank r-1 result, in any sign */
  for (int k = 0; k < 2; k++) {
    if (!ox_ints(im, k ? c->c6 : c->c5, r - 2, a)) return false;
    for (int j = 0; j < r - 2; j++)
      if ((a[j] < 0 ? a[j] + r - 1 : a[j]) != j + 1) return false;
  }
  if (!ox_vector_param(im, c->w, x->shape[1], wid) || !ox_vector_param(im, c->b, x->shape[1], bid))
    return false;
  *eps = 1e-5;
  const Onnx__NodeProto *n = im->model->graph->node[c->reduce];
  for (size_t k = 0; k < n->n_attribute; k++) {
    if (n->attribute[k] && n->attribute[k]->name && strcmp(n->attribute[k]->name, "epsilon") == 0) *eps = n->attribute[k]->f;
    else return false;
  }
  /* the float attribute's shortest decimal (1e-5, not 9.99999974e-06), as PyTorch has it */
  char buf[32];
  snprintf(buf, sizeof buf, "%.7g", *eps);
  *eps = strtod(buf, NULL);
  return *eps > 0;
}

pk_status pk_ox_chain_emit(pk_ox *im, const pk_ox_chain *c, const char *name, bool *done) {
  *done = false;
  int xid = pk_ox_find(im, c->x);
  if (xid < 0) return PK_OK;
  const pk_ox_value *x = pk_ox_val(im, xid);
  if (x->kind != PK_OXV_TENSOR && x->kind != PK_OXV_INPUT) return PK_OK;
  if (x->dtype != im->fdtype || x->ndim < 1) return PK_OK;
  int64_t d = x->shape[x->ndim - 1];
  double v1, v2, v3, eps = 0;
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  int ins[3], nins = 1, wid, bid;
  pk_op_kind op;
  switch (c->kind) {
  case PK_OX_CHAIN_RMS_NORM:
    if (!ox_scalar(im, c->c1, &v1) || v1 != 2 || !ox_scalar(im, c->eps, &eps) || !(eps > 0) ||
        (c->c2 && (!ox_scalar(im, c->c2, &v2) || v2 != 1)) ||
        !ox_reduces_last(im, c->reduce, x->ndim) || !ox_vector_param(im, c->w, d, &wid))
      return PK_OK;
    op = PK_OP_RMS_NORM;
    nins = 2;
    break;
  case PK_OX_CHAIN_LAYER_NORM:
    if (!ox_scalar(im, c->c1, &v1) || v1 != 2 || !ox_scalar(im, c->eps, &eps) || !(eps > 0) ||
        !ox_reduces_last(im, c->reduce, x->ndim) || !ox_reduces_last(im, c->reduce2, x->ndim) ||
        !ox_vector_param(im, c->w, d, &wid) || !ox_vector_param(im, c->b, d, &bid))
      return PK_OK;
    op = PK_OP_LAYER_NORM;
    nins = 3;
    break;
  case PK_OX_CHAIN_GROUP_NORM:
    if (!ox_group_norm_ok(im, c, x, &a.groups, &eps, &wid, &bid)) return PK_OK;
    op = PK_OP_GROUP_NORM;
    nins = 3;
    break;
  default: /* GELU */
    if (!ox_scalar(im, c->c1, &v1) || fabs(v1 - sqrt(2.0)) > 1e-6 ||
        !ox_scalar(im, c->c2, &v2) || v2 != 1 || !ox_scalar(im, c->c3, &v3) || v3 != 0.5)
      return PK_OK;
    op = PK_OP_GELU;
    break;
  }
  /* Checked: from here on the chain is one op at its last node, which names it. */
  const Onnx__NodeProto *n = im->model->graph->node[c->last];
  pk_ox_node nd = {.p = n, .name = name, .index = c->last, .nout = 1};
  nd.where = pk_sprintf(im->ctx, "node %s (%s, with the %d nodes before it: %s)",
                        pk_ox_quote(im, name), n->op_type, c->n - 1, pk_op_name(op));
  pk_status s = pk_ox_new_value(im, n->output[0], &nd.out[0]);
  if (s != PK_OK) return s;
  a.eps = eps; /* > 0 checked: Pock's eps 0 would mean its default */
  a.normalized_ndim = 1;
  s = pk_ox_value_tensor(im, &nd, xid, &ins[0]);
  if (s == PK_OK && nins > 1) s = pk_ox_value_tensor(im, &nd, wid, &ins[1]);
  if (s == PK_OK && nins > 2) s = pk_ox_value_tensor(im, &nd, bid, &ins[2]);
  if (s == PK_OK) s = pk_ox_op_result(im, &nd, op, &a, nins, ins, 0);
  if (s == PK_OK) *done = true;
  return s;
}
