/* onnx_fold_shape.c — import-time evaluation of the shape, indexing and constant ops when
 * every input is a constant: the shape arithmetic exporters emit (Shape -> Gather ->
 * Unsqueeze -> Concat -> Reshape) and causal masks (Range / Trilu / Equal / Where) become
 * constants, so the graph the compiler sees is static. Also the element and broadcast
 * helpers of onnx_shape.h. A result over PK_OX_MAX_FOLD elements is left to the converter
 * (onnx_ops_shape.c), which emits graph nodes over constant buffers. */
#include <math.h>
#include <string.h>

#include "onnx_shape.h"

/* ---- helpers (onnx_shape.h) ---- */

bool pk_oxs_is_float(pkrt_dtype t) { return t == PKRT_DTYPE_F32 || t == PKRT_DTYPE_F64; }

double pk_oxs_f64(const pk_ox_value *v, int64_t i) {
  switch (v->dtype) {
  case PKRT_DTYPE_F32: return ((const float *)v->data)[i];
  case PKRT_DTYPE_F64: return ((const double *)v->data)[i];
  case PKRT_DTYPE_I32: return ((const int32_t *)v->data)[i];
  default: return (double)((const int64_t *)v->data)[i];
  }
}

int64_t pk_oxs_i64(const pk_ox_value *v, int64_t i) {
  switch (v->dtype) {
  case PKRT_DTYPE_F32:
  case PKRT_DTYPE_F64: {
    double x = pk_oxs_f64(v, i); /* whole floats only reach here (callers check) */
    return isfinite(x) && fabs(x) < 9.2e18 ? (int64_t)x : 0;
  }
  case PKRT_DTYPE_I32: return ((const int32_t *)v->data)[i];
  default: return ((const int64_t *)v->data)[i];
  }
}

void pk_oxs_put_f64(void *data, pkrt_dtype dt, int64_t i, double x) {
  switch (dt) {
  case PKRT_DTYPE_F32: ((float *)data)[i] = (float)x; break;
  case PKRT_DTYPE_F64: ((double *)data)[i] = x; break;
  case PKRT_DTYPE_I32: ((int32_t *)data)[i] = (int32_t)x; break;
  default: ((int64_t *)data)[i] = (int64_t)x; break;
  }
}

void pk_oxs_put_i64(void *data, pkrt_dtype dt, int64_t i, int64_t x) {
  switch (dt) {
  case PKRT_DTYPE_F32: ((float *)data)[i] = (float)x; break;
  case PKRT_DTYPE_F64: ((double *)data)[i] = (double)x; break;
  case PKRT_DTYPE_I32: ((int32_t *)data)[i] = (int32_t)x; break;
  default: ((int64_t *)data)[i] = x; break;
  }
}

void *pk_oxs_alloc(pk_ox *im, pkrt_dtype dt, int64_t n) {
  return pk_alloc(im->ctx, (size_t)(n > 0 ? n : 1) * pkrt_dtype_size(dt));
}

pk_status pk_oxs_axis(pk_ox *im, const pk_ox_node *nd, const char *what, int64_t axis,
                      int rank, int *out) {
  if (axis < -rank || axis >= rank)
    return pk_ox_fail(im, nd, "%s %lld is outside [%d, %d) for rank %d", what,
                      (long long)axis, -rank, rank, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return PK_OK;
}

pk_status pk_oxs_numel(pk_ox *im, const pk_ox_node *nd, int ndim, const int64_t *shape,
                       bool nonempty, int64_t limit, int64_t *n) {
  int64_t m = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < (nonempty ? 1 : 0))
      return pk_ox_fail(im, nd, "shape %s has a dim below %d", pk_ox_shape_str(im, ndim, shape),
                        nonempty ? 1 : 0);
    if (pk_i64_mul(m, shape[d], &m))
      return pk_ox_fail(im, nd, "shape %s has more elements than int64 holds",
                        pk_ox_shape_str(im, ndim, shape));
  }
  if (m > limit)
    return pk_ox_fail(im, nd, "shape %s has %lld elements (at most %lld here)",
                      pk_ox_shape_str(im, ndim, shape), (long long)m, (long long)limit);
  *n = m;
  return PK_OK;
}

pk_status pk_oxs_broadcast(pk_ox *im, const pk_ox_node *nd, int na, const int64_t *a, int nb,
                           const int64_t *b, int *n, int64_t *out) {
  int r = na > nb ? na : nb;
  int64_t res[PK_TE_MAX_DIMS];
  for (int d = 0; d < r; d++) {
    int64_t x = d < r - na ? 1 : a[d - (r - na)], y = d < r - nb ? 1 : b[d - (r - nb)];
    if (x != y && x != 1 && y != 1)
      return pk_ox_fail(im, nd, "shapes %s and %s do not broadcast", pk_ox_shape_str(im, na, a),
                        pk_ox_shape_str(im, nb, b));
    res[d] = x == 1 ? y : x;
  }
  memcpy(out, res, (size_t)r * sizeof *res);
  *n = r;
  return PK_OK;
}

void pk_oxs_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d];
  }
}

void pk_oxs_bstrides(int ndim, const int64_t *shape, int ondim, const int64_t *oshape,
                     int64_t *strides) {
  int64_t own[PK_TE_MAX_DIMS];
  pk_oxs_strides(ndim, shape, own);
  for (int d = 0; d < ondim; d++) {
    int j = d - (ondim - ndim);
    strides[d] = j < 0 || (shape[j] == 1 && oshape[d] != 1) ? 0 : own[j];
  }
}

bool pk_oxs_same_shape(int na, const int64_t *a, int nb, const int64_t *b) {
  if (na != nb) return false;
  for (int d = 0; d < na; d++)
    if (a[d] != b[d]) return false;
  return true;
}

/* Row-major walk over a result's elements, keeping up to three inputs' element offsets
 * (each with its own strides, 0 on broadcast dims) and the coordinates. */
typedef struct walk {
  int ndim, nin;
  const int64_t *shape;
  int64_t coord[PK_TE_MAX_DIMS];
  int64_t off[3];
  int64_t stride[3][PK_TE_MAX_DIMS];
} walk;

static void walk_init(walk *w, int ndim, const int64_t *shape, int nin) {
  memset(w, 0, sizeof *w);
  w->ndim = ndim;
  w->shape = shape;
  w->nin = nin;
}

static void walk_next(walk *w) {
  for (int d = w->ndim - 1; d >= 0; d--) {
    w->coord[d]++;
    for (int k = 0; k < w->nin; k++) w->off[k] += w->stride[k][d];
    if (w->coord[d] < w->shape[d]) return;
    for (int k = 0; k < w->nin; k++) w->off[k] -= w->stride[k][d] * w->shape[d];
    w->coord[d] = 0;
  }
}

/* Copies n result elements from src, read at base + coord . strides. */
static void copy_strided(void *dst, const void *src, size_t esize, int ndim,
                         const int64_t *shape, int64_t base, const int64_t *strides,
                         int64_t n) {
  walk w;
  walk_init(&w, ndim, shape, 1);
  memcpy(w.stride[0], strides, (size_t)ndim * sizeof *strides);
  w.off[0] = base;
  for (int64_t i = 0; i < n; i++, walk_next(&w))
    memcpy((char *)dst + (size_t)i * esize, (const char *)src + (size_t)w.off[0] * esize, esize);
}

/* The result's element count when it may be folded; *fold false when it is too big (the
 * converter then emits graph nodes instead). */
static pk_status fold_size(pk_ox *im, const pk_ox_node *nd, int ndim, const int64_t *shape,
                           int64_t *n, bool *fold) {
  pk_status s = pk_oxs_numel(im, nd, ndim, shape, false, INT64_MAX, n);
  *fold = s == PK_OK && *n <= PK_OX_MAX_FOLD;
  return s;
}

/* ---- the view ops: new metadata over the same data (the converters handle constants) */

pk_status pk_ox_fold_shape(pk_ox *im, pk_ox_node *nd) { return pk_ox_shape(im, nd); }
pk_status pk_ox_fold_constant_of_shape(pk_ox *im, pk_ox_node *nd) {
  return pk_ox_constant_of_shape(im, nd);
}
pk_status pk_ox_fold_reshape(pk_ox *im, pk_ox_node *nd) { return pk_ox_reshape(im, nd); }
pk_status pk_ox_fold_flatten(pk_ox *im, pk_ox_node *nd) { return pk_ox_flatten(im, nd); }
pk_status pk_ox_fold_squeeze(pk_ox *im, pk_ox_node *nd) { return pk_ox_squeeze(im, nd); }
pk_status pk_ox_fold_unsqueeze(pk_ox *im, pk_ox_node *nd) { return pk_ox_unsqueeze(im, nd); }

/* ---- Cast ---- */

/* An integer as ONNX's integer type `to` holds it (two's complement wrap, as C casts). */
static int64_t wrap_int(int64_t v, int64_t to) {
  switch (to) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return (int8_t)v;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return (uint8_t)v;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return (int16_t)v;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return (uint16_t)v;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return (int32_t)v;
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return (uint32_t)v;
  default: return v;
  }
}

pk_status pk_ox_fold_cast(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"to", "saturate", NULL};
  const pk_ox_value *x;
  int64_t to, n;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "input", &x)) != PK_OK)
    return s;
  if (!pk_ox_attr(nd, "to")) return pk_ox_fail(im, nd, "attribute 'to' is required");
  if ((s = pk_ox_attr_int(im, nd, "to", 0, INT64_MIN, INT64_MAX, &to)) != PK_OK) return s;
  bool to_float = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                  to == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  bool to_bool = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
  bool to_int = to == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
                to == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64;
  if (!to_float && !to_bool && !to_int)
    return pk_ox_fail(im, nd, "cast to ONNX type %lld is not supported (float, double, bool "
                      "and the integer types are)", (long long)to);
  n = pk_ox_numel(x->ndim, x->shape);
  pkrt_dtype odt = to_float ? im->fdtype : PKRT_DTYPE_I64;
  void *data = pk_oxs_alloc(im, odt, n);
  bool from_float = pk_oxs_is_float(x->dtype);
  for (int64_t i = 0; i < n; i++) {
    if (to_float) {
      pk_oxs_put_f64(data, odt, i, pk_oxs_f64(x, i));
    } else if (to_bool) {
      ((int64_t *)data)[i] = from_float ? pk_oxs_f64(x, i) != 0 : pk_oxs_i64(x, i) != 0;
    } else if (from_float) {
      double v = trunc(pk_oxs_f64(x, i)); /* C's conversion: toward zero */
      if (!(fabs(v) < 9.2e18))
        return pk_ox_fail(im, nd, "element %lld (%g) has no integer value", (long long)i,
                          pk_oxs_f64(x, i));
      ((int64_t *)data)[i] = wrap_int((int64_t)v, to);
    } else {
      ((int64_t *)data)[i] = wrap_int(pk_oxs_i64(x, i), to);
    }
  }
  return pk_ox_set_const(im, nd, 0, odt, to_bool, x->ndim, x->shape, data);
}

/* ---- data movement ---- */

pk_status pk_ox_fold_transpose(pk_ox *im, pk_ox_node *nd) {
  int perm[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_perm(im, nd, perm);
  if (s != PK_OK) return s;
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  int64_t shape[PK_TE_MAX_DIMS], xs[PK_TE_MAX_DIMS], strides[PK_TE_MAX_DIMS], n;
  pk_oxs_strides(x->ndim, x->shape, xs);
  for (int d = 0; d < x->ndim; d++) {
    shape[d] = x->shape[perm[d]];
    strides[d] = xs[perm[d]];
  }
  bool fold;
  if ((s = fold_size(im, nd, x->ndim, shape, &n, &fold)) != PK_OK) return s;
  if (!fold) return pk_ox_transpose(im, nd);
  size_t es = pkrt_dtype_size(x->dtype);
  void *data = pk_oxs_alloc(im, x->dtype, n);
  copy_strided(data, x->data, es, x->ndim, shape, 0, strides, n);
  return pk_ox_set_const(im, nd, 0, x->dtype, x->is_bool, x->ndim, shape, data);
}

pk_status pk_ox_fold_concat(pk_ox *im, pk_ox_node *nd) {
  int axis, ndim;
  int64_t shape[PK_TE_MAX_DIMS], n;
  bool fold;
  pk_status s = pk_oxs_concat_shape(im, nd, &axis, &ndim, shape);
  if (s == PK_OK) s = fold_size(im, nd, ndim, shape, &n, &fold);
  if (s != PK_OK) return s;
  if (!fold) return pk_ox_concat(im, nd);
  const pk_ox_value *x0 = pk_ox_in(im, nd, 0);
  bool is_bool = true;
  for (int i = 0; i < nd->nin; i++) {
    const pk_ox_value *x = pk_ox_in(im, nd, i);
    if (x->dtype != x0->dtype)
      return pk_ox_fail(im, nd, "input %d is %s but input 0 is %s", i, pk_ox_dtype_name(x),
                        pk_ox_dtype_name(x0));
    is_bool = is_bool && x->is_bool;
  }
  size_t es = pkrt_dtype_size(x0->dtype);
  int64_t outer = pk_ox_numel(axis, shape), inner = pk_ox_numel(ndim - axis - 1, shape + axis + 1);
  char *data = pk_oxs_alloc(im, x0->dtype, n), *p = data;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < nd->nin; i++) {
      const pk_ox_value *x = pk_ox_in(im, nd, i);
      size_t len = (size_t)(x->shape[axis] * inner) * es;
      memcpy(p, (const char *)x->data + (size_t)o * len, len);
      p += len;
    }
  return pk_ox_set_const(im, nd, 0, x0->dtype, is_bool, ndim, shape, data);
}

pk_status pk_ox_fold_split(pk_ox *im, pk_ox_node *nd) {
  int axis;
  int64_t sizes[PK_OX_MAX_IO];
  pk_status s = pk_oxs_split_sizes(im, nd, &axis, sizes);
  if (s != PK_OK) return s;
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  if (pk_ox_numel(x->ndim, x->shape) > PK_OX_MAX_FOLD) return pk_ox_split(im, nd);
  int64_t shape[PK_TE_MAX_DIMS], xs[PK_TE_MAX_DIMS], off = 0;
  memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
  pk_oxs_strides(x->ndim, x->shape, xs);
  size_t es = pkrt_dtype_size(x->dtype);
  for (int k = 0; k < nd->nout; off += sizes[k], k++) {
    if (nd->out[k] < 0) continue;
    shape[axis] = sizes[k];
    int64_t n = pk_ox_numel(x->ndim, shape);
    void *data = pk_oxs_alloc(im, x->dtype, n);
    copy_strided(data, x->data, es, x->ndim, shape, off * xs[axis], xs, n);
    if ((s = pk_ox_set_const(im, nd, k, x->dtype, x->is_bool, x->ndim, shape, data)) != PK_OK)
      return s;
  }
  return PK_OK;
}

pk_status pk_ox_fold_slice(pk_ox *im, pk_ox_node *nd) {
  int64_t start[PK_TE_MAX_DIMS], step[PK_TE_MAX_DIMS], count[PK_TE_MAX_DIMS];
  pk_status s = pk_oxs_slice_plan(im, nd, start, step, count);
  if (s != PK_OK) return s;
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  int64_t xs[PK_TE_MAX_DIMS], strides[PK_TE_MAX_DIMS], base = 0, n;
  bool fold;
  if ((s = fold_size(im, nd, x->ndim, count, &n, &fold)) != PK_OK) return s;
  if (!fold) return pk_ox_slice(im, nd);
  pk_oxs_strides(x->ndim, x->shape, xs);
  for (int d = 0; d < x->ndim; d++) {
    base += start[d] * xs[d];
    /* a single element never moves (its step may be anything, INT64_MAX included) */
    strides[d] = count[d] > 1 ? step[d] * xs[d] : 0;
  }
  void *data = pk_oxs_alloc(im, x->dtype, n);
  if (n > 0) copy_strided(data, x->data, pkrt_dtype_size(x->dtype), x->ndim, count, base,
                          strides, n);
  return pk_ox_set_const(im, nd, 0, x->dtype, x->is_bool, x->ndim, count, data);
}

pk_status pk_ox_fold_gather(pk_ox *im, pk_ox_node *nd) {
  int axis, ndim;
  int64_t shape[PK_TE_MAX_DIMS], n;
  bool fold;
  pk_status s = pk_oxs_gather_shape(im, nd, &axis, &ndim, shape);
  if (s == PK_OK) s = fold_size(im, nd, ndim, shape, &n, &fold);
  if (s != PK_OK) return s;
  if (!fold) return pk_ox_gather(im, nd);
  const pk_ox_value *x = pk_ox_in(im, nd, 0), *ix = pk_ox_in(im, nd, 1);
  int64_t dim = x->shape[axis], nidx = pk_ox_numel(ix->ndim, ix->shape);
  int64_t outer = pk_ox_numel(axis, x->shape);
  int64_t inner = pk_ox_numel(x->ndim - axis - 1, x->shape + axis + 1);
  size_t es = pkrt_dtype_size(x->dtype), row = (size_t)inner * es;
  char *data = pk_oxs_alloc(im, x->dtype, n), *p = data;
  for (int64_t j = 0; j < nidx; j++) {
    int64_t v = pk_oxs_i64(ix, j);
    if (v < -dim || v >= dim)
      return pk_ox_fail(im, nd, "index %lld is outside axis %d of extent %lld", (long long)v,
                        axis, (long long)dim);
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < nidx; j++, p += row) {
      int64_t v = pk_oxs_i64(ix, j);
      if (v < 0) v += dim;
      memcpy(p, (const char *)x->data + (size_t)(o * dim + v) * row, row);
    }
  return pk_ox_set_const(im, nd, 0, x->dtype, x->is_bool, ndim, shape, data);
}

pk_status pk_ox_fold_expand(pk_ox *im, pk_ox_node *nd) {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS], strides[PK_TE_MAX_DIMS], n;
  bool fold;
  pk_status s = pk_oxs_expand_shape(im, nd, &ndim, shape);
  if (s == PK_OK) s = fold_size(im, nd, ndim, shape, &n, &fold);
  if (s != PK_OK) return s;
  if (!fold) return pk_ox_expand(im, nd);
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  pk_oxs_bstrides(x->ndim, x->shape, ndim, shape, strides);
  void *data = pk_oxs_alloc(im, x->dtype, n);
  if (n > 0) copy_strided(data, x->data, pkrt_dtype_size(x->dtype), ndim, shape, 0, strides, n);
  return pk_ox_set_const(im, nd, 0, x->dtype, x->is_bool, ndim, shape, data);
}

pk_status pk_ox_fold_pad(pk_ox *im, pk_ox_node *nd) {
  int64_t before[PK_TE_MAX_DIMS], after[PK_TE_MAX_DIMS], shape[PK_TE_MAX_DIMS], n;
  double value;
  bool fold;
  pk_status s = pk_oxs_pad_plan(im, nd, before, after, &value);
  if (s != PK_OK) return s;
  const pk_ox_value *x = pk_ox_in(im, nd, 0);
  int r = x->ndim;
  for (int d = 0; d < r; d++) shape[d] = x->shape[d] + before[d] + after[d];
  if ((s = fold_size(im, nd, r, shape, &n, &fold)) != PK_OK) return s;
  if (!fold) return pk_ox_pad(im, nd);
  int64_t xs[PK_TE_MAX_DIMS];
  pk_oxs_strides(r, x->shape, xs);
  bool fl = pk_oxs_is_float(x->dtype);
  if (!fl && !(fabs(value) < 9.2e18))
    return pk_ox_fail(im, nd, "constant_value %g does not fit the integer data", value);
  size_t es = pkrt_dtype_size(x->dtype);
  char *data = pk_oxs_alloc(im, x->dtype, n);
  walk w;
  walk_init(&w, r, shape, 0);
  for (int64_t i = 0; i < n; i++, walk_next(&w)) {
    int64_t off = 0;
    bool inside = true;
    for (int d = 0; d < r && inside; d++) {
      int64_t c = w.coord[d] - before[d];
      inside = c >= 0 && c < x->shape[d];
      off += c * xs[d];
    }
    if (inside) memcpy(data + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
    else if (fl) pk_oxs_put_f64(data, x->dtype, i, value);
    else pk_oxs_put_i64(data, x->dtype, i, x->is_bool ? value != 0 : (int64_t)value);
  }
  return pk_ox_set_const(im, nd, 0, x->dtype, x->is_bool, r, shape, data);
}

/* ---- masks: Where, Equal, Range, Trilu ---- */

pk_status pk_ox_fold_where(pk_ox *im, pk_ox_node *nd) {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS], n;
  bool fold;
  pk_status s = pk_oxs_where_shape(im, nd, &ndim, shape);
  if (s == PK_OK) s = fold_size(im, nd, ndim, shape, &n, &fold);
  if (s != PK_OK) return s;
  if (!fold) return pk_ox_where(im, nd);
  const pk_ox_value *v[3] = {pk_ox_in(im, nd, 0), pk_ox_in(im, nd, 1), pk_ox_in(im, nd, 2)};
  if (v[1]->dtype != v[2]->dtype)
    return pk_ox_fail(im, nd, "X is %s but Y is %s", pk_ox_dtype_name(v[1]),
                      pk_ox_dtype_name(v[2]));
  walk w;
  walk_init(&w, ndim, shape, 3);
  for (int k = 0; k < 3; k++) pk_oxs_bstrides(v[k]->ndim, v[k]->shape, ndim, shape, w.stride[k]);
  size_t es = pkrt_dtype_size(v[1]->dtype);
  char *data = pk_oxs_alloc(im, v[1]->dtype, n);
  for (int64_t i = 0; i < n; i++, walk_next(&w)) {
    bool c = pk_oxs_is_float(v[0]->dtype) ? pk_oxs_f64(v[0], w.off[0]) != 0
                                          : pk_oxs_i64(v[0], w.off[0]) != 0;
    int k = c ? 1 : 2;
    memcpy(data + (size_t)i * es, (const char *)v[k]->data + (size_t)w.off[k] * es, es);
  }
  return pk_ox_set_const(im, nd, 0, v[1]->dtype, v[1]->is_bool && v[2]->is_bool, ndim, shape,
                         data);
}

pk_status pk_ox_fold_equal(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {NULL};
  const pk_ox_value *a, *b;
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS], n;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "A", &a)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 1, "B", &b)) != PK_OK ||
      (s = pk_oxs_broadcast(im, nd, a->ndim, a->shape, b->ndim, b->shape, &ndim, shape)) != PK_OK ||
      (s = pk_oxs_numel(im, nd, ndim, shape, false, PK_OX_MAX_FOLD, &n)) != PK_OK)
    return s;
  bool fl = pk_oxs_is_float(a->dtype) || pk_oxs_is_float(b->dtype);
  walk w;
  walk_init(&w, ndim, shape, 2);
  pk_oxs_bstrides(a->ndim, a->shape, ndim, shape, w.stride[0]);
  pk_oxs_bstrides(b->ndim, b->shape, ndim, shape, w.stride[1]);
  int64_t *data = pk_oxs_alloc(im, PKRT_DTYPE_I64, n);
  for (int64_t i = 0; i < n; i++, walk_next(&w))
    data[i] = fl ? pk_oxs_f64(a, w.off[0]) == pk_oxs_f64(b, w.off[1])
                 : pk_oxs_i64(a, w.off[0]) == pk_oxs_i64(b, w.off[1]);
  return pk_ox_set_const(im, nd, 0, PKRT_DTYPE_I64, true, ndim, shape, data);
}

/* Range(start, limit, delta): max(ceil((limit - start) / delta), 0) elements
 * start + i * delta; integers stay int64, floats the start's float dtype. */
pk_status pk_ox_fold_range(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {NULL};
  static const char *const what[] = {"start", "limit", "delta"};
  const pk_ox_value *v[3];
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 3, 3, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK)
    return s;
  bool fl = false;
  for (int i = 0; i < 3; i++) {
    if ((s = pk_oxs_input(im, nd, i, what[i], &v[i])) != PK_OK) return s;
    if (pk_ox_numel(v[i]->ndim, v[i]->shape) != 1)
      return pk_ox_fail(im, nd, "%s has shape %s (it must be a scalar)", what[i],
                        pk_ox_shape_str(im, v[i]->ndim, v[i]->shape));
    fl = fl || pk_oxs_is_float(v[i]->dtype);
  }
  int64_t n;
  pkrt_dtype odt = fl ? (pk_oxs_is_float(v[0]->dtype) ? v[0]->dtype : im->fdtype)
                      : PKRT_DTYPE_I64;
  void *data;
  if (fl) {
    double b = pk_oxs_f64(v[0], 0), e = pk_oxs_f64(v[1], 0), dl = pk_oxs_f64(v[2], 0);
    double c = ceil((e - b) / dl);
    if (dl == 0 || !isfinite(c))
      return pk_ox_fail(im, nd, "start %g, limit %g and delta %g give no finite count", b, e,
                        dl);
    if (c > PK_OX_MAX_FOLD)
      return pk_ox_fail(im, nd, "%.0f elements are over the import limit (%d)", c,
                        PK_OX_MAX_FOLD);
    n = c > 0 ? (int64_t)c : 0;
    data = pk_oxs_alloc(im, odt, n);
    for (int64_t i = 0; i < n; i++) pk_oxs_put_f64(data, odt, i, b + (double)i * dl);
  } else {
    int64_t b = pk_oxs_i64(v[0], 0), e = pk_oxs_i64(v[1], 0), dl = pk_oxs_i64(v[2], 0);
    if (dl == 0) return pk_ox_fail(im, nd, "delta is 0");
    /* in 128 bits: limit - start and the rounding cannot overflow */
    __int128 span = (__int128)e - b, mag = dl > 0 ? (__int128)dl : -(__int128)dl;
    if (dl < 0) span = -span;
    __int128 c = span > 0 ? (span + mag - 1) / mag : 0;
    if (c > PK_OX_MAX_FOLD)
      return pk_ox_fail(im, nd, "%lld elements are over the import limit (%d)",
                        (long long)c, PK_OX_MAX_FOLD);
    n = (int64_t)c;
    data = pk_oxs_alloc(im, odt, n);
    for (int64_t i = 0; i < n; i++) ((int64_t *)data)[i] = (int64_t)(b + (__int128)i * dl);
  }
  return pk_ox_set_const(im, nd, 0, odt, false, 1, &n, data);
}

/* Trilu(input, k?), upper (default 1): keeps j - i >= k (upper) or j - i <= k (lower) of
 * the last two dims, zeros elsewhere. */
pk_status pk_ox_fold_trilu(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"upper", NULL};
  const pk_ox_value *x;
  int64_t upper, k = 0;
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 1, 2, 1)) != PK_OK ||
      (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "upper", 1, 0, 1, &upper)) != PK_OK ||
      (s = pk_oxs_input(im, nd, 0, "input", &x)) != PK_OK)
    return s;
  if (pk_ox_in(im, nd, 1)) {
    int nk;
    if ((s = pk_ox_const_ints(im, nd, 1, "k", 1, &nk, &k)) != PK_OK) return s;
    if (nk != 1) return pk_ox_fail(im, nd, "k has %d elements (it must be a scalar)", nk);
  }
  if (x->ndim < 2)
    return pk_ox_fail(im, nd, "the input %s has rank %d (at least 2)",
                      pk_ox_shape_str(im, x->ndim, x->shape), x->ndim);
  int64_t n = pk_ox_numel(x->ndim, x->shape);
  if (n > PK_OX_MAX_FOLD)
    return pk_ox_fail(im, nd, "%lld elements are over the import limit (%d)", (long long)n,
                      PK_OX_MAX_FOLD);
  int64_t rows = x->shape[x->ndim - 2], cols = x->shape[x->ndim - 1];
  size_t es = pkrt_dtype_size(x->dtype);
  char *data = pk_oxs_alloc(im, x->dtype, n); /* zero-filled */
  for (int64_t e = 0; e < n; e++) {
    __int128 i = (e / cols) % rows, j = e % cols, diff = j - i;
    if (upper ? diff >= k : diff <= k)
      memcpy(data + (size_t)e * es, (const char *)x->data + (size_t)e * es, es);
  }
  return pk_ox_set_const(im, nd, 0, x->dtype, x->is_bool, x->ndim, x->shape, data);
}
