/* json_attrs.c — a node's "attrs" object → pk_op_attrs, refusing keys the op does not read
 * (a misplaced "stride" on a matmul is a mistake, not a no-op) and wrong types. */
#include <math.h>
#include <string.h>

#include "json_impl.h"

static pk_status fe_flag(pk_fe *f, const char *where, const cJSON *attrs, const char *key,
                         bool *out) {
  const cJSON *v = pk_fe_get(attrs, key);
  if (v && !cJSON_IsBool(v)) return pk_fe_fail(f, where, "attr '%s' must be true or false", key);
  if (v) *out = cJSON_IsTrue(v);
  return PK_OK;
}

/* An int, or an array of `n` ints ("kernel": 3 or [3, 3]); pad also takes 4. */
static pk_status fe_pair(pk_fe *f, const char *where, const cJSON *attrs, const char *key,
                         int64_t lo, int nmax, int64_t *out) {
  const cJSON *v = pk_fe_get(attrs, key);
  if (!v) return PK_OK;
  const char *what = pk_sprintf(f->ctx, "attr '%s'", key);
  if (cJSON_IsNumber(v)) {
    int64_t x;
    pk_status s = pk_fe_int_value(f, where, what, v, lo, PK_OP_MAX_EXTENT, &x);
    for (int i = 0; i < nmax; i++) out[i] = x;
    return s;
  }
  int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
  if (n != 2 && n != nmax)
    return pk_fe_fail(f, where, "attr '%s' must be an integer or an array of %s integers",
                      key, nmax == 4 ? "2 or 4" : "2");
  int64_t x[4];
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    pk_status s = pk_fe_int_value(f, where, pk_sprintf(f->ctx, "attr '%s'[%d]", key, i), e,
                                  lo, PK_OP_MAX_EXTENT, &x[i]);
    if (s != PK_OK) return s;
  }
  if (n == 4) {
    memcpy(out, x, sizeof x);
  } else if (nmax == 4) { /* pad [h, w]: the same on both sides, as PyTorch's padding */
    out[0] = out[2] = x[0];
    out[1] = out[3] = x[1];
  } else {
    out[0] = x[0];
    out[1] = x[1];
  }
  return PK_OK;
}

static pk_status fe_axis(pk_fe *f, const char *where, const char *what, const cJSON *v,
                         int *out) {
  int64_t x;
  pk_status s = pk_fe_int_value(f, where, what, v, -PK_TE_MAX_DIMS, PK_TE_MAX_DIMS - 1, &x);
  if (s == PK_OK) *out = (int)x;
  return s;
}

/* "axes": 1 or [0, 2] ([] means every axis, like leaving it out). */
static pk_status fe_axes(pk_fe *f, const char *where, const cJSON *v, pk_op_attrs *a) {
  if (cJSON_IsNumber(v)) {
    a->naxes = 1;
    return fe_axis(f, where, "attr 'axes'", v, &a->axes[0]);
  }
  if (!cJSON_IsArray(v)) return pk_fe_fail(f, where, "attr 'axes' must be an integer or an array");
  int n = cJSON_GetArraySize(v);
  if (n > PK_TE_MAX_DIMS)
    return pk_fe_fail(f, where, "attr 'axes' has %d entries, at most %d", n, PK_TE_MAX_DIMS);
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    pk_status s = fe_axis(f, where, pk_sprintf(f->ctx, "attr 'axes'[%d]", i), e, &a->axes[i]);
    if (s != PK_OK) return s;
  }
  a->naxes = n;
  return PK_OK;
}

/* reshape "shape": dims >= 1; a string first dim is the batch; one -1 is inferred from
 * the input's element count (PyTorch's view(-1, ...)). expand "shape" (`keep`): each -1 keeps
 * the input's dim aligned with it at the right (PyTorch's expand(-1, ...)). */
static pk_status fe_new_shape(pk_fe *f, const char *where, const cJSON *v, const int *inputs,
                              int ninputs, bool keep, pk_op_attrs *a) {
  if (!cJSON_IsArray(v)) return pk_fe_fail(f, where, "attr 'shape' must be an array");
  int n = cJSON_GetArraySize(v);
  if (n < 1 || n > PK_TE_MAX_DIMS)
    return pk_fe_fail(f, where, "attr 'shape' must have 1..%d dims, not %d", PK_TE_MAX_DIMS, n);
  int infer = -1, i = 0;
  int64_t known = 1;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    if (i == 0 && cJSON_IsString(e)) {
      a->new_shape[0] = f->batch;
    } else if (cJSON_IsNumber(e) && e->valuedouble == -1 && keep) {
      const pk_gtensor *x = ninputs >= 1 ? f->g->tensors[inputs[0]] : NULL;
      int j = x ? i - (n - x->ndim) : -1; /* the input dim aligned with dim i */
      if (j < 0)
        return pk_fe_fail(f, where, "attr 'shape'[%d] is -1 but no input dim lines up with it",
                          i);
      a->new_shape[i] = x->shape[j];
    } else if (cJSON_IsNumber(e) && e->valuedouble == -1) {
      if (infer >= 0) return pk_fe_fail(f, where, "attr 'shape' has more than one -1");
      infer = i;
      a->new_shape[i] = 1;
    } else {
      pk_status s = pk_fe_int_value(f, where, pk_sprintf(f->ctx, "attr 'shape'[%d]", i), e,
                                    1, PK_OP_MAX_EXTENT, &a->new_shape[i]);
      if (s != PK_OK) return s;
    }
    if (pk_i64_mul(known, a->new_shape[i], &known))
      return pk_fe_fail(f, where, "attr 'shape' has too many elements");
  }
  a->new_ndim = n;
  if (infer >= 0) {
    if (ninputs < 1) return pk_fe_fail(f, where, "attr 'shape': -1 needs an input");
    const pk_gtensor *x = f->g->tensors[inputs[0]];
    int64_t numel = 1;
    for (int d = 0; d < x->ndim; d++) numel *= x->shape[d]; /* bounded when it was added */
    if (numel % known != 0 || numel / known > PK_OP_MAX_EXTENT)
      return pk_fe_fail(f, where, "attr 'shape': cannot infer -1 for an input of shape %s",
                        pk_fe_shape_str(f, x->ndim, x->shape));
    a->new_shape[infer] = numel / known;
  }
  return PK_OK;
}

/* A finite number; `positive`: > 0 as well (alpha: zero in pk_op_attrs means the default,
 * so an explicit 0 would silently become 0.01 or 1.0; a slope of 0 is relu). */
static pk_status fe_real(pk_fe *f, const char *where, const cJSON *attrs, const char *key,
                         bool positive, double *out) {
  const cJSON *v = pk_fe_get(attrs, key);
  if (!v) return PK_OK;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || (positive && !(v->valuedouble > 0)))
    return pk_fe_fail(f, where, "attr '%s' must be a finite number%s", key,
                      positive ? " > 0" : "");
  *out = v->valuedouble;
  return PK_OK;
}

/* transpose "perm": an array of axes, one per input dim (the builder checks that it is a
 * permutation of the input's rank). */
static pk_status fe_perm(pk_fe *f, const char *where, const cJSON *v, pk_op_attrs *a) {
  int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
  if (n < 1 || n > PK_TE_MAX_DIMS)
    return pk_fe_fail(f, where, "attr 'perm' must be an array of 1..%d axes", PK_TE_MAX_DIMS);
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    pk_status s = fe_axis(f, where, pk_sprintf(f->ctx, "attr 'perm'[%d]", i), e, &a->perm[i]);
    if (s != PK_OK) return s;
  }
  a->nperm = n;
  return PK_OK;
}

/* pad "pads": [before0, after0, before1, after1, ...], two entries per input dim, >= 0. */
static pk_status fe_pads(pk_fe *f, const char *where, const cJSON *v, const int *inputs,
                         int ninputs, pk_op_attrs *a) {
  int rank = ninputs >= 1 ? f->g->tensors[inputs[0]]->ndim : 0;
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 * rank)
    return pk_fe_fail(f, where, "attr 'pads' must be an array of %d integers (before and "
                      "after each of the input's %d dims)", 2 * rank, rank);
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    pk_status s = pk_fe_int_value(f, where, pk_sprintf(f->ctx, "attr 'pads'[%d]", i), e, 0,
                                  PK_OP_MAX_EXTENT, &a->pads[i]);
    if (s != PK_OK) return s;
  }
  return PK_OK;
}

pk_status pk_fe_attrs(pk_fe *f, const char *where, pk_op_kind op, const cJSON *attrs,
                      const int *inputs, int ninputs, pk_op_attrs *a) {
  memset(a, 0, sizeof *a);
  if (attrs && !cJSON_IsObject(attrs))
    return pk_fe_fail(f, where, "key 'attrs' must be an object");
  /* which keys the op reads, and whether it needs them all, is op metadata (op_table.def) */
  unsigned reads = pk_op_attrs_read(op);
  if (pk_op_flags(op) & PK_OPF_ATTRS_REQUIRED)
    for (int k = 0; k < PK_ATTR_KEY_COUNT_; k++)
      if ((reads & (1u << k)) && (!attrs || !pk_fe_get(attrs, pk_attr_key_name(k))))
        return pk_fe_fail(f, where, "op '%s' needs attr '%s'", pk_op_name(op),
                          pk_attr_key_name(k));
  if (!attrs) return PK_OK;
  for (const cJSON *it = attrs->child; it; it = it->next) {
    pk_attr_key k = pk_attr_key_from_name(it->string);
    if (k == PK_ATTR_KEY_COUNT_)
      return pk_fe_fail(f, where, "unknown attr %s", pk_fe_quote(f, it->string));
    if (!(reads & (1u << k)))
      return pk_fe_fail(f, where, "attr '%s' does not apply to op '%s'", it->string,
                        pk_op_name(op));
  }
  pk_status s;
  if ((s = pk_fe_no_duplicate_keys(f, where, attrs)) != PK_OK) return s;
  const cJSON *v;
  if ((s = fe_flag(f, where, attrs, "trans_a", &a->trans_a)) != PK_OK ||
      (s = fe_flag(f, where, attrs, "trans_b", &a->trans_b)) != PK_OK ||
      (s = fe_flag(f, where, attrs, "keepdims", &a->keepdims)) != PK_OK)
    return s;
  if ((v = pk_fe_get(attrs, "axis")) && (s = fe_axis(f, where, "attr 'axis'", v, &a->axis)))
    return s;
  if ((v = pk_fe_get(attrs, "axes")) && (s = fe_axes(f, where, v, a))) return s;
  if ((s = fe_pair(f, where, attrs, "kernel", 1, 2, a->kernel)) != PK_OK ||
      (s = fe_pair(f, where, attrs, "stride", 1, 2, a->stride)) != PK_OK ||
      (s = fe_pair(f, where, attrs, "dilation", 1, 2, a->dilation)) != PK_OK ||
      (s = fe_pair(f, where, attrs, "pad", 0, 4, a->pad)) != PK_OK)
    return s;
  if ((v = pk_fe_get(attrs, "groups")) &&
      (s = pk_fe_int_value(f, where, "attr 'groups'", v, 1, PK_OP_MAX_EXTENT, &a->groups)))
    return s;
  if ((v = pk_fe_get(attrs, "slice_axis")) &&
      (s = fe_axis(f, where, "attr 'slice_axis'", v, &a->slice_axis)))
    return s;
  if ((v = pk_fe_get(attrs, "slice_start")) &&
      (s = pk_fe_int_value(f, where, "attr 'slice_start'", v, 0, PK_OP_MAX_EXTENT,
                           &a->slice_start)))
    return s;
  if ((v = pk_fe_get(attrs, "slice_len")) &&
      (s = pk_fe_int_value(f, where, "attr 'slice_len'", v, 1, PK_OP_MAX_EXTENT,
                           &a->slice_len)))
    return s;
  if ((v = pk_fe_get(attrs, "shape")) &&
      (s = fe_new_shape(f, where, v, inputs, ninputs, op == PK_OP_EXPAND, a)))
    return s;
  /* clip's min <= max is the operator library's check, reported with the node's name */
  if ((s = fe_real(f, where, attrs, "alpha", true, &a->alpha)) != PK_OK ||
      (s = fe_real(f, where, attrs, "min", false, &a->clip_min)) != PK_OK ||
      (s = fe_real(f, where, attrs, "max", false, &a->clip_max)) != PK_OK)
    return s;
  /* attention, softmax family, pooling, activations */
  if ((s = fe_flag(f, where, attrs, "causal", &a->causal)) != PK_OK ||
      (s = fe_real(f, where, attrs, "scale", true, &a->scale)) != PK_OK ||
      (s = fe_pair(f, where, attrs, "output_size", 1, 2, a->output_size)) != PK_OK ||
      (s = fe_real(f, where, attrs, "exponent", false, &a->exponent)) != PK_OK)
    return s;
  if ((v = pk_fe_get(attrs, "approximate"))) { /* PyTorch's and ONNX's spelling */
    if (cJSON_IsString(v) && strcmp(v->valuestring, "tanh") == 0) a->approximate = PK_GELU_TANH;
    else if (!cJSON_IsString(v) || strcmp(v->valuestring, "none") != 0)
      return pk_fe_fail(f, where, "attr 'approximate' must be \"none\" or \"tanh\"");
  }
  /* normalization: eps and momentum > 0 (0 in pk_op_attrs means the default); the op
   * checks momentum <= 1 and normalized_ndim against the input's rank */
  if ((s = fe_real(f, where, attrs, "eps", true, &a->eps)) != PK_OK ||
      (s = fe_real(f, where, attrs, "momentum", true, &a->momentum)) != PK_OK)
    return s;
  int64_t nd;
  if ((v = pk_fe_get(attrs, "normalized_ndim"))) {
    if ((s = pk_fe_int_value(f, where, "attr 'normalized_ndim'", v, 1, PK_TE_MAX_DIMS, &nd)))
      return s;
    a->normalized_ndim = (int)nd;
  }
  /* shape and data movement */
  if ((v = pk_fe_get(attrs, "perm")) && (s = fe_perm(f, where, v, a))) return s;
  if ((v = pk_fe_get(attrs, "slice_step")) &&
      (s = pk_fe_int_value(f, where, "attr 'slice_step'", v, 1, PK_OP_MAX_EXTENT,
                           &a->slice_step)))
    return s;
  if ((v = pk_fe_get(attrs, "pads")) && (s = fe_pads(f, where, v, inputs, ninputs, a)))
    return s;
  if ((s = fe_real(f, where, attrs, "value", false, &a->value)) != PK_OK) return s;
  return PK_OK;
}
