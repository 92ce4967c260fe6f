/* onnx_ops_shape.c — ONNX converters of the shape, indexing and constant ops: Shape,
 * ConstantOfShape, Cast, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split,
 * Slice, Gather, Expand, Pad, Where, Trilu (Equal and Range fold only). A node on computed
 * tensors becomes Pock reshape / transpose / concat / slice / gather / embedding / expand /
 * pad / where nodes; the view ops on constants only change metadata. The host evaluation
 * of these ops on constants is onnx_fold_shape.c; the attribute and shape rules both use
 * are the pk_oxs_*_shape / _plan functions here. */
#include <math.h>
#include <string.h>

#include "onnx_shape.h"

/* ---- shared by the converters and the folds ---- */

pk_status pk_oxs_input(pk_ox *im, const pk_ox_node *nd, int i, const char *what,
                       const pk_ox_value **out) {
  *out = pk_ox_in(im, nd, i);
  if (*out) return PK_OK;
  return pk_ox_fail(im, nd, "input %d (%s) is missing", i, what);
}

pk_status pk_oxs_need_float(pk_ox *im, const pk_ox_node *nd, int i, const char *what) {
  const pk_ox_value *v = pk_ox_in(im, nd, i);
  if (v && pk_oxs_is_float(v->dtype)) return PK_OK;
  if (v && (v->kind == PK_OXV_CONST || v->kind == PK_OXV_PARAM))
    return pk_ox_fail(im, nd, "input %d holds %s constants and another input is computed at "
                      "run time: Pock's %s moves float data only", i, pk_ox_dtype_name(v), what);
  return pk_ox_fail(im, nd, "input %d holds %s data computed at run time: Pock's %s moves "
                    "float data only", i, v ? pk_ox_dtype_name(v) : "no", what);
}

void pk_oxs_onnx_shape(pk_ox *im, pk_ox_node *nd, int k, int ndim, const int64_t *shape,
                       bool is_bool) {
  if (nd->out[k] < 0) return;
  pk_ox_value *v = pk_ox_val(im, nd->out[k]);
  v->ndim = ndim;
  if (ndim) memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
  v->is_bool = is_bool;
}

/* A graph tensor has rank >= 1: an ONNX scalar's tensor is (1,). */
static int graph_shape(int ndim, const int64_t *shape, int64_t *out) {
  if (ndim == 0) {
    out[0] = 1;
    return 1;
  }
  memcpy(out, shape, (size_t)ndim * sizeof *shape);
  return ndim;
}

/* A constant tensor this node adds to the graph, named "<node>.<what>" (unique). */
static pk_status own_constant(pk_ox *im, const pk_ox_node *nd, const char *what,
                              pkrt_dtype dt, int ndim, const int64_t *shape, const void *data,
                              int *t) {
  const char *name = pk_sprintf(im->ctx, "%s.%s", nd->name, what);
  for (int k = 2; pk_graph_find(im->g, name) >= 0; k++)
    name = pk_sprintf(im->ctx, "%s.%s#%d", nd->name, what, k);
  *t = pk_graph_add_buffer(im->g, name, PK_ROLE_CONSTANT, dt, ndim, shape, data);
  if (*t >= 0) return PK_OK;
  const char *msg = pk_strdup(im->ctx, pk_ctx_error(im->ctx)); /* re-framed by the node */
  pk_ctx_clear_error(im->ctx);
  return pk_ox_fail(im, nd, "%s", msg);
}

/* The next single-input op of a chain over *t: the node's output 0 when it is the last. */
static pk_status chain_op(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *a,
                          int *t, bool last) {
  int in = *t;
  if (last) return pk_ox_op_result(im, nd, op, a, 1, &in, 0);
  return pk_ox_op(im, nd, op, a, 1, &in, t);
}

pk_status pk_oxs_reshape_to(pk_ox *im, pk_ox_node *nd, int i, int ndim, const int64_t *shape) {
  if (nd->out[0] < 0) return PK_OK; /* an output the model does not name: nothing reads it */
  const pk_ox_value *v = pk_ox_in(im, nd, i);
  if (pk_oxs_same_shape(v->ndim, v->shape, ndim, shape)) return pk_ox_alias(im, nd, 0, i);
  bool is_bool = v->is_bool;
  if (v->kind == PK_OXV_CONST)
    return pk_ox_set_const(im, nd, 0, v->dtype, is_bool, ndim, shape, v->data);
  int64_t from[PK_TE_MAX_DIMS], to[PK_TE_MAX_DIMS];
  int nfrom = graph_shape(v->ndim, v->shape, from), nto = graph_shape(ndim, shape, to);
  bool same = pk_oxs_same_shape(nfrom, from, nto, to); /* () <-> (1,): no copy needed */
  pk_status s = same ? PK_OK : pk_oxs_need_float(im, nd, i, "reshape");
  int t;
  if (s == PK_OK) s = pk_ox_tensor(im, nd, i, &t);
  if (s == PK_OK && same) s = pk_ox_bind(im, nd, 0, t);
  if (s == PK_OK && !same) {
    pk_op_attrs a = {.new_ndim = nto};
    memcpy(a.new_shape, to, (size_t)nto * sizeof *to);
    s = pk_ox_op_result(im, nd, PK_OP_RESHAPE, &a, 1, &t, 0);
  }
  if (s == PK_OK) pk_oxs_onnx_shape(im, nd, 0, ndim, shape, is_bool);
  return s;
}

/* ---- output shapes of the view ops ---- */

/* Reshape(data, shape), allowzero (opset 14): 0 copies the input's dim, -1 is inferred. */
pk_status pk_oxs_reshape_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape) {
  static const char *const known[] = {"allowzero", NULL};
  const pk_ox_value *x;
  int64_t allowzero, req[PK_TE_MAX_DIMS];
  int n;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "allowzero", 0, 0, 1, &allowzero)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK ||
      (s = pk_ox_const_ints(im, nd, 1, "shape", PK_TE_MAX_DIMS, &n, req)) != PK_OK)
    return s;
  int infer = -1;
  int64_t prod = 1, xn = pk_ox_numel(x->ndim, x->shape);
  for (int d = 0; d < n; d++) {
    int64_t r = req[d];
    if (r == -1) {
      if (infer >= 0)
        return pk_ox_fail(im, nd, "shape %s has more than one -1", pk_ox_shape_str(im, n, req));
      infer = d;
      shape[d] = 1;
      continue;
    }
    if (r == 0 && !allowzero) {
      if (d >= x->ndim)
        return pk_ox_fail(im, nd, "shape[%d] = 0 copies input dim %d, but the input %s has "
                          "rank %d", d, d, pk_ox_shape_str(im, x->ndim, x->shape), x->ndim);
      r = x->shape[d];
    }
    if (r < 0)
      return pk_ox_fail(im, nd, "shape[%d] = %lld (a dim is >= 0, or -1 to infer it)", d,
                        (long long)r);
    shape[d] = r;
    if (pk_i64_mul(prod, r, &prod))
      return pk_ox_fail(im, nd, "shape %s has more elements than int64 holds",
                        pk_ox_shape_str(im, n, req));
  }
  if (infer >= 0) {
    if (prod == 0 || xn % prod != 0)
      return pk_ox_fail(im, nd, "cannot reshape %s (%lld elements) to %s: the -1 has no "
                        "whole extent", pk_ox_shape_str(im, x->ndim, x->shape), (long long)xn,
                        pk_ox_shape_str(im, n, req));
    shape[infer] = xn / prod;
  } else if (prod != xn) {
    return pk_ox_fail(im, nd, "cannot reshape %s (%lld elements) to %s (%lld elements)",
                      pk_ox_shape_str(im, x->ndim, x->shape), (long long)xn,
                      pk_ox_shape_str(im, n, shape), (long long)prod);
  }
  *ndim = n;
  return PK_OK;
}

/* Flatten(input), axis in [-r, r] (default 1): (prod of dims before axis, the rest). */
pk_status pk_oxs_flatten_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape) {
  static const char *const known[] = {"axis", NULL};
  const pk_ox_value *x;
  int64_t axis;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "input", &x)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "axis", 1, -x->ndim, x->ndim, &axis)) != PK_OK)
    return s;
  if (axis < 0) axis += x->ndim;
  shape[0] = pk_ox_numel((int)axis, x->shape);
  shape[1] = pk_ox_numel(x->ndim - (int)axis, x->shape + axis);
  *ndim = 2;
  return PK_OK;
}

/* Marks the axes listed in constant input 1 (normalized against `rank`, no repeats). */
static pk_status listed_axes(pk_ox *im, pk_ox_node *nd, int rank, bool *mark, int *count) {
  int64_t ax[PK_TE_MAX_DIMS];
  int n;
  pk_status s = pk_ox_const_ints(im, nd, 1, "axes", PK_TE_MAX_DIMS, &n, ax);
  if (s != PK_OK) return s;
  memset(mark, 0, (size_t)PK_TE_MAX_DIMS * sizeof *mark);
  for (int j = 0; j < n; j++) {
    int a;
    if ((s = pk_oxs_axis(im, nd, "axes", ax[j], rank, &a)) != PK_OK) return s;
    if (mark[a]) return pk_ox_fail(im, nd, "axes lists axis %d twice", a);
    mark[a] = true;
  }
  *count = n;
  return PK_OK;
}

/* Squeeze(data, axes?) (opset 13: axes an input): drops the listed dims of extent 1, or
 * every dim of extent 1. */
pk_status pk_oxs_squeeze_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape) {
  static const char *const known[] = {NULL};
  const pk_ox_value *x;
  bool mark[PK_TE_MAX_DIMS];
  int n = 0;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK)
    return s;
  if (pk_ox_in(im, nd, 1)) {
    if ((s = listed_axes(im, nd, x->ndim, mark, &n)) != PK_OK) return s;
    for (int d = 0; d < x->ndim; d++)
      if (mark[d] && x->shape[d] != 1)
        return pk_ox_fail(im, nd, "axis %d of %s has extent %lld, not 1", d,
                          pk_ox_shape_str(im, x->ndim, x->shape), (long long)x->shape[d]);
  } else {
    for (int d = 0; d < x->ndim; d++) mark[d] = x->shape[d] == 1;
  }
  n = 0;
  for (int d = 0; d < x->ndim; d++)
    if (!mark[d]) shape[n++] = x->shape[d];
  *ndim = n;
  return PK_OK;
}

/* Unsqueeze(data, axes) (opset 13: axes an input): inserts dims of extent 1 at the listed
 * positions of the result. */
pk_status pk_oxs_unsqueeze_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape) {
  static const char *const known[] = {NULL};
  const pk_ox_value *x;
  int64_t ax[PK_TE_MAX_DIMS];
  int n;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK ||
      (s = pk_ox_const_ints(im, nd, 1, "axes", PK_TE_MAX_DIMS, &n, ax)) != PK_OK)
    return s;
  int rank = x->ndim + n;
  if (rank > PK_TE_MAX_DIMS)
    return pk_ox_fail(im, nd, "the result would have rank %d (Pock's limit is %d)", rank,
                      PK_TE_MAX_DIMS);
  bool mark[PK_TE_MAX_DIMS];
  if ((s = listed_axes(im, nd, rank, mark, &n)) != PK_OK) return s;
  for (int d = 0, j = 0; d < rank; d++) shape[d] = mark[d] ? 1 : x->shape[j++];
  *ndim = rank;
  return PK_OK;
}

/* Transpose's perm (default: reverse): a permutation of the input's axes. */
pk_status pk_oxs_perm(pk_ox *im, pk_ox_node *nd, int *perm) {
  static const char *const known[] = {"perm", NULL};
  const pk_ox_value *x;
  int64_t p[PK_TE_MAX_DIMS];
  bool present;
  int n;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK ||
      (s = pk_ox_attr_ints(im, nd, "perm", PK_TE_MAX_DIMS, &present, &n, p)) != PK_OK)
    return s;
  if (!present) {
    for (int d = 0; d < x->ndim; d++) perm[d] = x->ndim - 1 - d;
    return PK_OK;
  }
  if (n != x->ndim)
    return pk_ox_fail(im, nd, "perm has %d entries but the input %s has rank %d", n,
                      pk_ox_shape_str(im, x->ndim, x->shape), x->ndim);
  bool seen[PK_TE_MAX_DIMS] = {false};
  for (int d = 0; d < n; d++) {
    if (p[d] < 0 || p[d] >= n || seen[p[d]])
      return pk_ox_fail(im, nd, "perm %s is not a permutation of 0..%d",
                        pk_ox_shape_str(im, n, p), n - 1);
    seen[p[d]] = true;
    perm[d] = (int)p[d];
  }
  return PK_OK;
}

/* Concat(inputs...), axis required: inputs of one rank whose other dims agree. */
pk_status pk_oxs_concat_shape(pk_ox *im, pk_ox_node *nd, int *axis, int *ndim,
                              int64_t *shape) {
  static const char *const known[] = {"axis", NULL};
  const pk_ox_value *x0;
  int64_t ax;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, PK_OX_MAX_IO, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "inputs[0]", &x0)) != PK_OK)
    return s;
  if (!pk_ox_attr(nd, "axis")) return pk_ox_fail(im, nd, "attribute 'axis' is required");
  if ((s = pk_ox_attr_int(im, nd, "axis", 0, INT64_MIN, INT64_MAX, &ax)) != PK_OK ||
      (s = pk_oxs_axis(im, nd, "axis", ax, x0->ndim, axis)) != PK_OK)
    return s;
  *ndim = x0->ndim;
  memcpy(shape, x0->shape, (size_t)x0->ndim * sizeof *shape);
  for (int i = 1; i < nd->nin; i++) {
    const pk_ox_value *x;
    if ((s = pk_oxs_input(im, nd, i, "inputs[i]", &x)) != PK_OK) return s;
    bool ok = x->ndim == x0->ndim;
    for (int d = 0; ok && d < x->ndim; d++) ok = d == *axis || x->shape[d] == x0->shape[d];
    if (!ok)
      return pk_ox_fail(im, nd, "input %d has shape %s but input 0 has %s (only axis %d may "
                        "differ)", i, pk_ox_shape_str(im, x->ndim, x->shape),
                        pk_ox_shape_str(im, x0->ndim, x0->shape), *axis);
    if (pk_i64_add(shape[*axis], x->shape[*axis], &shape[*axis]))
      return pk_ox_fail(im, nd, "the result's axis %d overflows", *axis);
  }
  return PK_OK;
}

/* Split(input, split?), axis, num_outputs (opset 18): the pieces' extents along axis. */
pk_status pk_oxs_split_sizes(pk_ox *im, pk_ox_node *nd, int *axis, int64_t *sizes) {
  static const char *const known[] = {"axis", "num_outputs", NULL};
  const pk_ox_value *x;
  int64_t ax, nouts;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 2, PK_OX_MAX_IO)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "input", &x)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "axis", 0, INT64_MIN, INT64_MAX, &ax)) != PK_OK ||
      (s = pk_oxs_axis(im, nd, "axis", ax, x->ndim, axis)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "num_outputs", nd->nout, 1, PK_OX_MAX_IO, &nouts)) != PK_OK)
    return s;
  int64_t dim = x->shape[*axis];
  if (pk_ox_in(im, nd, 1)) {
    if (pk_ox_attr(nd, "num_outputs"))
      return pk_ox_fail(im, nd, "gives both the 'split' input and 'num_outputs'");
    int n;
    if ((s = pk_ox_const_ints(im, nd, 1, "split", PK_OX_MAX_IO, &n, sizes)) != PK_OK) return s;
    if (n != nd->nout)
      return pk_ox_fail(im, nd, "split has %d entries but the node has %d outputs", n,
                        nd->nout);
    int64_t sum = 0;
    for (int k = 0; k < n; k++) {
      if (sizes[k] < 0 || pk_i64_add(sum, sizes[k], &sum))
        return pk_ox_fail(im, nd, "split[%d] = %lld is negative", k, (long long)sizes[k]);
    }
    if (sum != dim)
      return pk_ox_fail(im, nd, "split %s adds up to %lld, but axis %d has extent %lld",
                        pk_ox_shape_str(im, n, sizes), (long long)sum, *axis, (long long)dim);
    return PK_OK;
  }
  if (nouts != nd->nout)
    return pk_ox_fail(im, nd, "num_outputs is %lld but the node has %d outputs",
                      (long long)nouts, nd->nout);
  /* Opset 18's num_outputs: pieces of ceil(dim / n), the last smaller; without it, equal. */
  if (!pk_ox_attr(nd, "num_outputs") && dim % nouts != 0)
    return pk_ox_fail(im, nd, "axis %d of extent %lld does not split into %d equal pieces",
                      *axis, (long long)dim, nd->nout);
  int64_t chunk = (dim + nouts - 1) / nouts;
  for (int k = 0; k < nd->nout; k++) {
    int64_t left = dim - k * chunk;
    sizes[k] = left < 0 ? 0 : left < chunk ? left : chunk;
  }
  return PK_OK;
}

/* Slice(data, starts, ends, axes?, steps?) per ONNX: negative indices count from the end,
 * then starts and ends clamp to [0, dim] ([0, dim - 1] and [-1, dim - 1] for a negative
 * step), so INT64_MAX / INT64_MIN mean "to the end". */
pk_status pk_oxs_slice_plan(pk_ox *im, pk_ox_node *nd, int64_t *start, int64_t *step,
                            int64_t *count) {
  static const char *const known[] = {NULL};
  const pk_ox_value *x;
  int64_t st[PK_TE_MAX_DIMS], en[PK_TE_MAX_DIMS], ax[PK_TE_MAX_DIMS], sp[PK_TE_MAX_DIMS];
  int n, ne, na, ns;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 3, 5, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK ||
      (s = pk_ox_const_ints(im, nd, 1, "starts", PK_TE_MAX_DIMS, &n, st)) != PK_OK ||
      (s = pk_ox_const_ints(im, nd, 2, "ends", PK_TE_MAX_DIMS, &ne, en)) != PK_OK)
    return s;
  na = ns = n;
  for (int j = 0; j < n; j++) ax[j] = j, sp[j] = 1;
  if (pk_ox_in(im, nd, 3) &&
      (s = pk_ox_const_ints(im, nd, 3, "axes", PK_TE_MAX_DIMS, &na, ax)) != PK_OK)
    return s;
  if (pk_ox_in(im, nd, 4) &&
      (s = pk_ox_const_ints(im, nd, 4, "steps", PK_TE_MAX_DIMS, &ns, sp)) != PK_OK)
    return s;
  if (ne != n || na != n || ns != n)
    return pk_ox_fail(im, nd, "starts, ends, axes and steps have %d, %d, %d and %d entries "
                      "(they must agree)", n, ne, na, ns);
  bool seen[PK_TE_MAX_DIMS] = {false};
  for (int d = 0; d < x->ndim; d++) start[d] = 0, step[d] = 1, count[d] = x->shape[d];
  for (int j = 0; j < n; j++) {
    int a;
    if ((s = pk_oxs_axis(im, nd, "axes", ax[j], x->ndim, &a)) != PK_OK) return s;
    if (seen[a]) return pk_ox_fail(im, nd, "axes lists axis %d twice", a);
    seen[a] = true;
    if (sp[j] == 0) return pk_ox_fail(im, nd, "steps[%d] is 0", j);
    int64_t dim = x->shape[a], b = st[j], e = en[j];
    if (b < 0) b += dim; /* no overflow: dim >= 0 */
    if (e < 0) e += dim;
    int64_t hi = sp[j] > 0 ? dim : dim - 1, elo = sp[j] > 0 ? 0 : -1;
    b = b < 0 ? 0 : b > hi ? hi : b;
    e = e < elo ? elo : e > hi ? hi : e;
    /* elements b, b + step, ... before e: ceil(|e - b| / |step|) when e lies ahead */
    int64_t span = sp[j] > 0 ? e - b : b - e;
    int64_t mag = sp[j] > 0 ? sp[j] : sp[j] == INT64_MIN ? INT64_MAX : -sp[j];
    start[a] = b;
    step[a] = sp[j];
    count[a] = span <= 0 ? 0 : 1 + (span - 1) / mag;
  }
  return PK_OK;
}

/* Gather(data, indices), axis: data's dims with `axis` replaced by the indices' dims. */
pk_status pk_oxs_gather_shape(pk_ox *im, pk_ox_node *nd, int *axis, int *ndim,
                              int64_t *shape) {
  static const char *const known[] = {"axis", NULL};
  const pk_ox_value *x, *ix;
  int64_t ax;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 1, "indices", &ix)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "axis", 0, INT64_MIN, INT64_MAX, &ax)) != PK_OK ||
      (s = pk_oxs_axis(im, nd, "axis", ax, x->ndim, axis)) != PK_OK)
    return s;
  if (pk_oxs_is_float(ix->dtype))
    return pk_ox_fail(im, nd, "the indices are %s (they must be int32 or int64)",
                      pk_ox_dtype_name(ix));
  int n = x->ndim - 1 + ix->ndim;
  if (n > PK_TE_MAX_DIMS)
    return pk_ox_fail(im, nd, "the result would have rank %d (Pock's limit is %d)", n,
                      PK_TE_MAX_DIMS);
  int r = 0;
  for (int d = 0; d < *axis; d++) shape[r++] = x->shape[d];
  for (int d = 0; d < ix->ndim; d++) shape[r++] = ix->shape[d];
  for (int d = *axis + 1; d < x->ndim; d++) shape[r++] = x->shape[d];
  *ndim = n;
  return PK_OK;
}

/* Expand(input, shape): numpy broadcast of the input's shape and the constant shape. */
pk_status pk_oxs_expand_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape) {
  static const char *const known[] = {NULL};
  const pk_ox_value *x;
  int64_t want[PK_TE_MAX_DIMS];
  int n;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "input", &x)) != PK_OK ||
      (s = pk_ox_const_ints(im, nd, 1, "shape", PK_TE_MAX_DIMS, &n, want)) != PK_OK)
    return s;
  for (int d = 0; d < n; d++)
    if (want[d] < 0)
      return pk_ox_fail(im, nd, "shape %s has a negative dim", pk_ox_shape_str(im, n, want));
  return pk_oxs_broadcast(im, nd, x->ndim, x->shape, n, want, ndim, shape);
}

/* Pad(data, pads, constant_value?, axes?) with mode "constant": pads lists the begins of
 * every padded axis, then the ends (ONNX's order). */
pk_status pk_oxs_pad_plan(pk_ox *im, pk_ox_node *nd, int64_t *before, int64_t *after,
                          double *value) {
  static const char *const known[] = {"mode", NULL};
  const pk_ox_value *x;
  const char *mode;
  int64_t pads[2 * PK_TE_MAX_DIMS], ax[PK_TE_MAX_DIMS];
  int np, na;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 2, 4, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_attr_string(im, nd, "mode", "constant", &mode)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK ||
      (s = pk_ox_const_ints(im, nd, 1, "pads", 2 * PK_TE_MAX_DIMS, &np, pads)) != PK_OK)
    return s;
  if (strcmp(mode, "constant") != 0)
    return pk_ox_fail(im, nd, "mode %s is not supported (Pock pads with a constant only)",
                      pk_ox_quote(im, mode));
  *value = 0;
  if (pk_ox_in(im, nd, 2) &&
      (s = pk_ox_const_f64(im, nd, 2, "constant_value", value)) != PK_OK)
    return s;
  na = x->ndim;
  for (int d = 0; d < na; d++) ax[d] = d;
  if (pk_ox_in(im, nd, 3) &&
      (s = pk_ox_const_ints(im, nd, 3, "axes", PK_TE_MAX_DIMS, &na, ax)) != PK_OK)
    return s;
  if (np != 2 * na)
    return pk_ox_fail(im, nd, "pads has %d entries, %d axes need %d", np, na, 2 * na);
  bool seen[PK_TE_MAX_DIMS] = {false};
  for (int d = 0; d < x->ndim; d++) before[d] = after[d] = 0;
  for (int j = 0; j < na; j++) {
    int a;
    if ((s = pk_oxs_axis(im, nd, "axes", ax[j], x->ndim, &a)) != PK_OK) return s;
    if (seen[a]) return pk_ox_fail(im, nd, "axes lists axis %d twice", a);
    seen[a] = true;
    before[a] = pads[j];
    after[a] = pads[na + j];
    if (before[a] < -PK_OP_MAX_EXTENT || before[a] > PK_OP_MAX_EXTENT ||
        after[a] < -PK_OP_MAX_EXTENT || after[a] > PK_OP_MAX_EXTENT)
      return pk_ox_fail(im, nd, "pads %s has an entry beyond %lld", pk_ox_shape_str(im, np, pads),
                        (long long)PK_OP_MAX_EXTENT);
    int64_t out;
    if (pk_i64_add(x->shape[a], before[a], &out) || pk_i64_add(out, after[a], &out) || out < 0)
      return pk_ox_fail(im, nd, "pads %s leave axis %d of extent %lld with a negative extent",
                        pk_ox_shape_str(im, np, pads), a, (long long)x->shape[a]);
  }
  return PK_OK;
}

/* Where(condition, X, Y): the three shapes broadcast. */
pk_status pk_oxs_where_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape) {
  static const char *const known[] = {NULL};
  const pk_ox_value *c, *x, *y;
  int n;
  int64_t t[PK_TE_MAX_DIMS];
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 3, 3, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "condition", &c)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 1, "X", &x)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 2, "Y", &y)) != PK_OK ||
      (s = pk_oxs_broadcast(im, nd, c->ndim, c->shape, x->ndim, x->shape, &n, t)) != PK_OK)
    return s;
  if (pk_oxs_is_float(x->dtype) != pk_oxs_is_float(y->dtype))
    return pk_ox_fail(im, nd, "X is %s but Y is %s", pk_ox_dtype_name(x), pk_ox_dtype_name(y));
  return pk_oxs_broadcast(im, nd, n, t, y->ndim, y->shape, ndim, shape);
}

/* ---- converters ---- */

/* Shape(data), start/end (opset 15): the dims, known at import for every value. */
pk_status pk_ox_shape(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"start", "end", NULL};
  const pk_ox_value *x;
  int64_t b, e;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "data", &x)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "start", 0, INT64_MIN, INT64_MAX, &b)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "end", x->ndim, INT64_MIN, INT64_MAX, &e)) != PK_OK)
    return s;
  int64_t r = x->ndim;
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = b < 0 ? 0 : b > r ? r : b;
  e = e < 0 ? 0 : e > r ? r : e;
  int64_t n = e > b ? e - b : 0;
  int64_t dims[PK_TE_MAX_DIMS + 1];
  for (int64_t d = 0; d < n; d++) dims[d] = x->shape[b + d];
  return pk_ox_set_const(im, nd, 0, PKRT_DTYPE_I64, false, 1, &n, dims);
}

/* ConstantOfShape(shape), value (a one-element tensor, default float 0): a constant; one
 * too big to hold at import is a Pock expand of its single value. */
pk_status pk_ox_constant_of_shape(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"value", NULL};
  int64_t shape[PK_TE_MAX_DIMS], numel;
  int ndim;
  pkrt_dtype dt = im->fdtype;
  bool is_bool = false;
  const void *one = NULL;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_const_ints(im, nd, 0, "shape", PK_TE_MAX_DIMS, &ndim, shape)) != PK_OK ||
      (s = pk_oxs_numel(im, nd, ndim, shape, false, INT64_MAX, &numel)) != PK_OK)
    return s;
  if (pk_ox_attr(nd, "value")) {
    const Onnx__TensorProto *t;
    int vn;
    int64_t vshape[PK_TE_MAX_DIMS];
    if ((s = pk_ox_attr_tensor(im, nd, "value", &t)) != PK_OK) return s;
    if (!t) return pk_ox_fail(im, nd, "attribute 'value' holds no tensor");
    if ((s = pk_ox_tensor_data(im, nd->where, t, &dt, &is_bool, &vn, vshape, &one)) != PK_OK)
      return s;
    if (pk_ox_numel(vn, vshape) != 1)
      return pk_ox_fail(im, nd, "value has shape %s (it must hold one element)",
                        pk_ox_shape_str(im, vn, vshape));
  }
  /* floats in the model's float dtype */
  pkrt_dtype odt = pk_oxs_is_float(dt) ? im->fdtype : dt;
  double fv = 0;
  int64_t iv = 0;
  if (one) {
    pk_ox_value tmp = {.dtype = dt, .data = one};
    fv = pk_oxs_f64(&tmp, 0);
    iv = pk_oxs_is_float(dt) ? 0 : pk_oxs_i64(&tmp, 0);
  }
  if (numel <= PK_OX_MAX_FOLD) {
    void *data = pk_oxs_alloc(im, odt, numel);
    for (int64_t i = 0; i < numel; i++) {
      if (pk_oxs_is_float(odt)) pk_oxs_put_f64(data, odt, i, fv);
      else pk_oxs_put_i64(data, odt, i, iv);
    }
    return pk_ox_set_const(im, nd, 0, odt, is_bool, ndim, shape, data);
  }
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  if (!pk_oxs_is_float(odt))
    return pk_ox_fail(im, nd, "an integer constant of %lld elements is over the import limit "
                      "(%d)", (long long)numel, PK_OX_MAX_FOLD);
  if ((s = pk_oxs_numel(im, nd, ndim, shape, true, INT64_MAX, &numel)) != PK_OK) return s;
  void *data = pk_oxs_alloc(im, odt, 1);
  pk_oxs_put_f64(data, odt, 0, fv);
  int t;
  if ((s = own_constant(im, nd, "value", odt, 1, (const int64_t[]){1}, data, &t)) != PK_OK)
    return s;
  pk_op_attrs a = {.new_ndim = ndim};
  memcpy(a.new_shape, shape, (size_t)ndim * sizeof *shape);
  return pk_ox_op_result(im, nd, PK_OP_EXPAND, &a, 1, &t, 0);
}

/* ONNX's TensorProto.DataType names, for messages. */
static const char *onnx_type_name(int64_t t) {
  static const char *const names[] = {
      "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
      "bool", "float16", "double", "uint32", "uint64", "complex64", "complex128", "bfloat16",
      "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4"};
  return t >= 0 && t < (int64_t)(sizeof names / sizeof *names) ? names[t] : "unknown";
}

/* Cast(input), to (saturate only matters for float8): a computed tensor only passes
 * through unchanged (Pock has no cast op): a float to the model's float, an integer to
 * int64 / int32, a bool to bool or an integer type. Constants fold (onnx_fold_shape.c). */
pk_status pk_ox_cast(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"to", "saturate", NULL};
  const pk_ox_value *x;
  int64_t to;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "input", &x)) != PK_OK)
    return s;
  if (!pk_ox_attr(nd, "to")) return pk_ox_fail(im, nd, "attribute 'to' is required");
  if ((s = pk_ox_attr_int(im, nd, "to", 0, INT64_MIN, INT64_MAX, &to)) != PK_OK) return s;
  if (x->kind == PK_OXV_CONST) return pk_ox_fold_cast(im, nd);
  int64_t model_float = im->fdtype == PKRT_DTYPE_F64 ? ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE
                                                     : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  bool to_int = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
  bool keep = false, is_bool = x->is_bool;
  if (pk_oxs_is_float(x->dtype)) {
    keep = to == model_float;
  } else if (x->is_bool) {
    keep = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL || to_int;
    is_bool = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
  } else {
    keep = to_int;
  }
  if (!keep)
    return pk_ox_fail(im, nd, "cannot cast %s to %s at run time (Pock has no cast op: a "
                      "computed tensor may only be cast to its own kind of type; constants "
                      "are cast at import)", pk_ox_dtype_name(x), onnx_type_name(to));
  if ((s = pk_ox_alias(im, nd, 0, 0)) != PK_OK) return s;
  if (nd->out[0] >= 0) pk_ox_val(im, nd->out[0])->is_bool = is_bool;
  return PK_OK;
}

pk_status pk_ox_reshape(pk_ox *im, pk_ox_node *nd) {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_reshape_shape(im, nd, &ndim, shape);
  return s != PK_OK ? s : pk_oxs_reshape_to(im, nd, 0, ndim, shape);
}

pk_status pk_ox_flatten(pk_ox *im, pk_ox_node *nd) {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_flatten_shape(im, nd, &ndim, shape);
  return s != PK_OK ? s : pk_oxs_reshape_to(im, nd, 0, ndim, shape);
}

pk_status pk_ox_squeeze(pk_ox *im, pk_ox_node *nd) {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_squeeze_shape(im, nd, &ndim, shape);
  return s != PK_OK ? s : pk_oxs_reshape_to(im, nd, 0, ndim, shape);
}

pk_status pk_ox_unsqueeze(pk_ox *im, pk_ox_node *nd) {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_unsqueeze_shape(im, nd, &ndim, shape);
  return s != PK_OK ? s : pk_oxs_reshape_to(im, nd, 0, ndim, shape);
}

/* Transpose: a rank-2 initializer's [1, 0] stays a view of the param (TPARAM) so MatMul
 * and Gemm read it with trans_b and the param keeps its PyTorch name. */
pk_status pk_ox_transpose(pk_ox *im, pk_ox_node *nd) {
  int perm[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_perm(im, nd, perm);
  if (s != PK_OK) return s;
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  int r = x->ndim;
  bool identity = true;
  for (int d = 0; d < r; d++) identity = identity && perm[d] == d;
  if (identity) return pk_ox_alias(im, nd, 0, 0);
  if (x->kind == PK_OXV_PARAM && r == 2) return pk_ox_set_tparam(im, nd, 0, nd->in[0]);
  int64_t shape[PK_TE_MAX_DIMS];
  for (int d = 0; d < r; d++) shape[d] = x->shape[perm[d]];
  pk_op_attrs a = {.nperm = r};
  memcpy(a.perm, perm, sizeof a.perm);
  int t;
  if ((s = pk_oxs_need_float(im, nd, 0, "transpose")) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 0, &t)) != PK_OK ||
      (s = pk_ox_op_result(im, nd, PK_OP_TRANSPOSE, &a, 1, &t, 0)) != PK_OK)
    return s;
  pk_oxs_onnx_shape(im, nd, 0, r, shape, false);
  return PK_OK;
}

/* Concat: empty inputs are dropped; Pock's concat takes 8 inputs, so more chain (concat is
 * associative along one axis). */
pk_status pk_ox_concat(pk_ox *im, pk_ox_node *nd) {
  int axis, ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_concat_shape(im, nd, &axis, &ndim, shape);
  if (s != PK_OK) return s;
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  int keep[PK_OX_MAX_IO], n = 0;
  for (int i = 0; i < nd->nin; i++) {
    const pk_ox_value *x = pk_ox_in(im, nd, i);
    if (pk_ox_numel(x->ndim, x->shape) > 0) keep[n++] = i;
  }
  if (n == 0) return pk_ox_fail(im, nd, "every input is empty and nothing folded it");
  if (n == 1) return pk_ox_alias(im, nd, 0, keep[0]);
  int t[PK_OX_MAX_IO];
  for (int j = 0; j < n; j++)
    if ((s = pk_oxs_need_float(im, nd, keep[j], "concat")) != PK_OK ||
        (s = pk_ox_tensor(im, nd, keep[j], &t[j])) != PK_OK)
      return s;
  pk_op_attrs a = {.axis = axis};
  int cur = -1, j = 0;
  while (j < n) {
    int ins[PK_OP_MAX_INPUTS], m = 0;
    if (cur >= 0) ins[m++] = cur;
    while (m < PK_OP_MAX_INPUTS && j < n) ins[m++] = t[j++];
    s = j == n ? pk_ox_op_result(im, nd, PK_OP_CONCAT, &a, m, ins, 0)
               : pk_ox_op(im, nd, PK_OP_CONCAT, &a, m, ins, &cur);
    if (s != PK_OK) return s;
  }
  const pk_ox_value *x0 = pk_ox_in(im, nd, keep[0]);
  pk_oxs_onnx_shape(im, nd, 0, ndim, shape, x0->is_bool);
  return PK_OK;
}

/* Split: one Pock slice per piece (a piece that is the whole input is the input). */
pk_status pk_ox_split(pk_ox *im, pk_ox_node *nd) {
  int axis;
  int64_t sizes[PK_OX_MAX_IO];
  pk_status s = pk_oxs_split_sizes(im, nd, &axis, sizes);
  if (s != PK_OK) return s;
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  int r = x->ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  memcpy(shape, x->shape, (size_t)r * sizeof *shape);
  int64_t dim = shape[axis], off = 0;
  int t = -1;
  for (int k = 0; k < nd->nout; off += sizes[k], k++) {
    if (nd->out[k] < 0) continue; /* an omitted output */
    if (sizes[k] == dim) {
      if ((s = pk_ox_alias(im, nd, k, 0)) != PK_OK) return s;
      continue;
    }
    if (sizes[k] == 0)
      return pk_ox_fail(im, nd, "output %d would be empty (Pock has no empty tensors)", k);
    if (t < 0 && ((s = pk_oxs_need_float(im, nd, 0, "slice")) != PK_OK ||
                  (s = pk_ox_tensor(im, nd, 0, &t)) != PK_OK))
      return s;
    pk_op_attrs a = {.slice_axis = axis, .slice_start = off, .slice_len = sizes[k]};
    if ((s = pk_ox_op_result(im, nd, PK_OP_SLICE, &a, 1, &t, k)) != PK_OK) return s;
    shape[axis] = sizes[k];
    pk_oxs_onnx_shape(im, nd, k, r, shape, false);
  }
  return PK_OK;
}

/* Slice: one Pock slice per sliced axis; negative steps are refused (Pock has no reverse). */
pk_status pk_ox_slice(pk_ox *im, pk_ox_node *nd) {
  int64_t start[PK_TE_MAX_DIMS], step[PK_TE_MAX_DIMS], count[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_slice_plan(im, nd, start, step, count);
  if (s != PK_OK) return s;
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  int r = x->ndim, nsliced = 0;
  for (int d = 0; d < r; d++) {
    if (count[d] == x->shape[d] && step[d] == 1) continue;
    if (count[d] == 0)
      return pk_ox_fail(im, nd, "the result would be empty on axis %d (Pock has no empty "
                        "tensors)", d);
    if (step[d] < 0 && count[d] > 1)
      return pk_ox_fail(im, nd, "a negative step (%lld on axis %d) is not supported on a "
                        "computed tensor (Pock has no reverse)", (long long)step[d], d);
    if (step[d] < 0) step[d] = 1; /* one element: a plain range */
    nsliced++;
  }
  if (nsliced == 0) return pk_ox_alias(im, nd, 0, 0);
  int t;
  if ((s = pk_oxs_need_float(im, nd, 0, "slice")) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 0, &t)) != PK_OK)
    return s;
  for (int d = 0; d < r; d++) {
    if (count[d] == x->shape[d] && step[d] == 1) continue;
    pk_op_attrs a = {.slice_axis = d, .slice_start = start[d],
                     .slice_len = (count[d] - 1) * step[d] + 1, .slice_step = step[d]};
    if ((s = chain_op(im, nd, PK_OP_SLICE, &a, &t, --nsliced == 0)) != PK_OK) return s;
  }
  pk_oxs_onnx_shape(im, nd, 0, r, count, false);
  return PK_OK;
}

/* Gather: an initializer's rows (axis 0 of a rank-2 param) are Pock's embedding, the rest
 * Pock's gather. Constant indices are checked and made non-negative here (Pock reads 0 for
 * an index outside the axis); a scalar index is gathered as (1,) and its axis dropped. */
pk_status pk_ox_gather(pk_ox *im, pk_ox_node *nd) {
  int axis, ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_gather_shape(im, nd, &axis, &ndim, shape);
  if (s != PK_OK) return s;
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  const pk_ox_value *x = pk_ox_in(im, nd, 0), *ix = pk_ox_in(im, nd, 1);
  bool embed = x->kind == PK_OXV_PARAM && axis == 0 && x->ndim == 2;
  int q = ix->ndim, tin[2];
  if ((s = pk_oxs_need_float(im, nd, 0, embed ? "embedding" : "gather")) != PK_OK) return s;
  if (ix->kind == PK_OXV_CONST || ix->kind == PK_OXV_PARAM) {
    int64_t n = pk_ox_numel(ix->ndim, ix->shape), dim = x->shape[axis];
    bool changed = false;
    int64_t *idx = pk_oxs_alloc(im, PKRT_DTYPE_I64, n);
    for (int64_t i = 0; i < n; i++) {
      int64_t v = pk_oxs_i64(ix, i);
      if (v < -dim || v >= dim)
        return pk_ox_fail(im, nd, "index %lld is outside axis %d of extent %lld",
                          (long long)v, axis, (long long)dim);
      changed = changed || v < 0;
      idx[i] = v < 0 ? v + dim : v;
    }
    if (changed) {
      int64_t gs[PK_TE_MAX_DIMS];
      int gn = graph_shape(ix->ndim, ix->shape, gs);
      if ((s = own_constant(im, nd, "indices", PKRT_DTYPE_I64, gn, gs, idx, &tin[1])) != PK_OK)
        return s;
    } else if ((s = pk_ox_tensor(im, nd, 1, &tin[1])) != PK_OK) {
      return s;
    }
  } else if ((s = pk_ox_tensor(im, nd, 1, &tin[1])) != PK_OK) {
    return s;
  }
  if ((s = pk_ox_tensor(im, nd, 0, &tin[0])) != PK_OK) return s;
  pk_op_attrs a = {.axis = axis};
  pk_op_kind op = embed ? PK_OP_EMBEDDING : PK_OP_GATHER;
  if (q == 0 && ndim > 0) { /* (.., 1, ..) from the (1,) index, then the axis dropped */
    int mid;
    pk_op_attrs ra = {.new_ndim = ndim};
    memcpy(ra.new_shape, shape, (size_t)ndim * sizeof *shape);
    if ((s = pk_ox_op(im, nd, op, &a, 2, tin, &mid)) != PK_OK ||
        (s = pk_ox_op_result(im, nd, PK_OP_RESHAPE, &ra, 1, &mid, 0)) != PK_OK)
      return s;
  } else if ((s = pk_ox_op_result(im, nd, op, &a, 2, tin, 0)) != PK_OK) {
    return s;
  }
  pk_oxs_onnx_shape(im, nd, 0, ndim, shape, false);
  return PK_OK;
}

/* Expand: Pock's expand to the broadcast shape (the same shape: the input itself). */
pk_status pk_ox_expand(pk_ox *im, pk_ox_node *nd) {
  int ndim, t;
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_expand_shape(im, nd, &ndim, shape);
  if (s != PK_OK) return s;
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  if (pk_oxs_same_shape(x->ndim, x->shape, ndim, shape)) return pk_ox_alias(im, nd, 0, 0);
  pk_op_attrs a = {.new_ndim = ndim};
  memcpy(a.new_shape, shape, (size_t)ndim * sizeof *shape);
  if ((s = pk_oxs_numel(im, nd, ndim, shape, true, INT64_MAX, &(int64_t){0})) != PK_OK ||
      (s = pk_oxs_need_float(im, nd, 0, "expand")) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 0, &t)) != PK_OK ||
      (s = pk_ox_op_result(im, nd, PK_OP_EXPAND, &a, 1, &t, 0)) != PK_OK)
    return s;
  pk_oxs_onnx_shape(im, nd, 0, ndim, shape, false);
  return PK_OK;
}

/* Pad: negative pads crop (Pock slices), positive ones pad (Pock pad with the value). */
pk_status pk_ox_pad(pk_ox *im, pk_ox_node *nd) {
  int64_t before[PK_TE_MAX_DIMS], after[PK_TE_MAX_DIMS], shape[PK_TE_MAX_DIMS];
  double value;
  pk_status s = pk_oxs_pad_plan(im, nd, before, after, &value);
  if (s != PK_OK) return s;
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  int r = x->ndim, nops = 0;
  bool grow = false;
  for (int d = 0; d < r; d++) {
    shape[d] = x->shape[d] + before[d] + after[d];
    if (shape[d] == 0)
      return pk_ox_fail(im, nd, "axis %d would be empty (Pock has no empty tensors)", d);
    nops += before[d] < 0 || after[d] < 0;
    grow = grow || before[d] > 0 || after[d] > 0;
  }
  nops += grow;
  if (nops == 0) return pk_ox_alias(im, nd, 0, 0);
  if (grow && !isfinite(value))
    return pk_ox_fail(im, nd, "constant_value %g is not finite", value);
  int t;
  if ((s = pk_oxs_need_float(im, nd, 0, "pad")) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 0, &t)) != PK_OK)
    return s;
  for (int d = 0; d < r; d++) {
    if (before[d] >= 0 && after[d] >= 0) continue;
    int64_t b = before[d] < 0 ? -before[d] : 0, e = after[d] < 0 ? -after[d] : 0;
    pk_op_attrs a = {.slice_axis = d, .slice_start = b, .slice_len = x->shape[d] - b - e};
    if ((s = chain_op(im, nd, PK_OP_SLICE, &a, &t, --nops == 0)) != PK_OK) return s;
  }
  if (grow) {
    pk_op_attrs a = {.value = value};
    for (int d = 0; d < r; d++) {
      a.pads[2 * d] = before[d] > 0 ? before[d] : 0;
      a.pads[2 * d + 1] = after[d] > 0 ? after[d] : 0;
    }
    if ((s = chain_op(im, nd, PK_OP_PAD, &a, &t, true)) != PK_OK) return s;
  }
  pk_oxs_onnx_shape(im, nd, 0, r, shape, false);
  return PK_OK;
}

/* Where(C, X, Y): Pock's where, C an integer (bool) mask, X and Y floats. */
pk_status pk_ox_where(pk_ox *im, pk_ox_node *nd) {
  int ndim, t[3];
  int64_t shape[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_where_shape(im, nd, &ndim, shape);
  if (s != PK_OK) return s;
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  const pk_ox_value *c = pk_ox_in(im, nd, 0);
  if (pk_oxs_is_float(c->dtype))
    return pk_ox_fail(im, nd, "the condition is %s (Pock's where takes a bool or integer "
                      "mask)", pk_ox_dtype_name(c));
  if ((s = pk_oxs_need_float(im, nd, 1, "where")) != PK_OK ||
      (s = pk_oxs_need_float(im, nd, 2, "where")) != PK_OK)
    return s;
  for (int i = 0; i < 3; i++)
    if ((s = pk_ox_tensor(im, nd, i, &t[i])) != PK_OK) return s;
  if ((s = pk_ox_op_result(im, nd, PK_OP_WHERE, &(pk_op_attrs){0}, 3, t, 0)) != PK_OK) return s;
  pk_oxs_onnx_shape(im, nd, 0, ndim, shape, false);
  return PK_OK;
}

/* Equal and Range are evaluated at import only (onnx_fold_shape.c): the core calls these
 * when an input is computed at run time. */
pk_status pk_ox_equal(pk_ox *im, pk_ox_node *nd) {
  return pk_ox_fail(im, nd, "Equal of a tensor computed at run time is not supported (Pock "
                    "has no comparison op; Equal folds only when both inputs are known at "
                    "import)");
}

pk_status pk_ox_range(pk_ox *im, pk_ox_node *nd) {
  return pk_ox_fail(im, nd, "Range needs start, limit and delta known at import");
}

/* Trilu of a computed tensor: Pock's where over a constant (rows, cols) mask of the kept
 * triangle, reading 0 elsewhere (k must be known at import). */
pk_status pk_ox_trilu(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"upper", NULL};
  const pk_ox_value *x;
  int64_t upper, k = 0;
  int nk = 1;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "upper", 1, 0, 1, &upper)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "input", &x)) != PK_OK ||
      (pk_ox_in(im, nd, 1) && (s = pk_ox_const_ints(im, nd, 1, "k", 1, &nk, &k)) != PK_OK))
    return s;
  if (nk != 1) return pk_ox_fail(im, nd, "k has %d elements (it must be a scalar)", nk);
  if (x->ndim < 2)
    return pk_ox_fail(im, nd, "the input %s has rank %d (at least 2)",
                      pk_ox_shape_str(im, x->ndim, x->shape), x->ndim);
  if (nd->out[0] < 0) return PK_OK; /* unnamed: nothing reads it */
  int r = x->ndim;
  int64_t mshape[2] = {x->shape[r - 2], x->shape[r - 1]}, n;
  bool is_bool = x->is_bool;
  int64_t shape[PK_TE_MAX_DIMS];
  memcpy(shape, x->shape, (size_t)r * sizeof *shape);
  if ((s = pk_oxs_numel(im, nd, 2, mshape, true, PK_OX_MAX_FOLD, &n)) != PK_OK ||
      (s = pk_oxs_need_float(im, nd, 0, "where")) != PK_OK)
    return s;
  int64_t *mask = pk_oxs_alloc(im, PKRT_DTYPE_I64, n);
  for (int64_t e = 0; e < n; e++) {
    __int128 diff = (__int128)(e % mshape[1]) - e / mshape[1]; /* j - i */
    mask[e] = upper ? diff >= k : diff <= k;
  }
  void *zero = pk_oxs_alloc(im, im->fdtype, 1);
  int t[3];
  if ((s = own_constant(im, nd, "mask", PKRT_DTYPE_I64, 2, mshape, mask, &t[0])) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 0, &t[1])) != PK_OK ||
      (s = own_constant(im, nd, "zero", im->fdtype, 1, (const int64_t[]){1}, zero, &t[2])) !=
          PK_OK ||
      (s = pk_ox_op_result(im, nd, PK_OP_WHERE, &(pk_op_attrs){0}, 3, t, 0)) != PK_OK)
    return s;
  pk_oxs_onnx_shape(im, nd, 0, r, shape, is_bool);
  return PK_OK;
}
