/* onnx_values.c — the importer's value table (every ONNX name → kind, shape, data, graph
 * tensor), messages, attribute reads, and the helpers converters emit graph nodes with. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "onnx_impl.h"
#include "pk_json_check.h"

/* ---- messages ---- */

pk_status pk_ox_fail_at(pk_ox *im, const char *where, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (where) return pk_ctx_fail(im->ctx, PK_ERR_CHECK, "%s: %s: %s", im->file, where, msg);
  return pk_ctx_fail(im->ctx, PK_ERR_CHECK, "%s: %s", im->file, msg);
}

pk_status pk_ox_fail(pk_ox *im, const pk_ox_node *nd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pk_ctx_fail(im->ctx, PK_ERR_CHECK, "%s: %s: %s", im->file, nd->where, msg);
}

const char *pk_ox_quote(pk_ox *im, const char *s) { return pk_json_quote(im->ctx, s ? s : ""); }

int64_t pk_ox_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

const char *pk_ox_shape_str(pk_ox *im, int ndim, const int64_t *shape) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_append(&b, "(");
  for (int d = 0; d < ndim; d++) pk_strbuf_printf(&b, "%s%lld", d ? ", " : "", (long long)shape[d]);
  pk_strbuf_append(&b, ")");
  return pk_strbuf_finish(im->ctx, &b);
}

const char *pk_ox_dtype_name(const pk_ox_value *v) {
  if (v->is_bool) return "bool";
  switch (v->dtype) {
  case PKRT_DTYPE_F32: return "float";
  case PKRT_DTYPE_F64: return "double";
  case PKRT_DTYPE_I32: return "int32";
  default: return "int64";
  }
}

/* ---- the value table ---- */

static uint32_t ox_hash(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

pk_ox_value *pk_ox_val(pk_ox *im, int id) {
  PK_ASSERT(id >= 0 && id < im->nvalues);
  return &im->values[id];
}

int pk_ox_find(pk_ox *im, const char *name) {
  if (!im->cap_hash) return -1;
  for (uint32_t i = ox_hash(name) & (uint32_t)(im->cap_hash - 1);; i = (i + 1) & (uint32_t)(im->cap_hash - 1)) {
    int e = im->hash[i];
    if (!e) return -1;
    if (strcmp(im->values[e - 1].name, name) == 0) return e - 1;
  }
}

static void ox_hash_insert(pk_ox *im, int id) {
  uint32_t mask = (uint32_t)(im->cap_hash - 1);
  uint32_t i = ox_hash(im->values[id].name) & mask;
  while (im->hash[i]) i = (i + 1) & mask;
  im->hash[i] = id + 1;
}

pk_status pk_ox_new_value(pk_ox *im, const char *name, int *id) {
  if (pk_ox_find(im, name) >= 0)
    return pk_ox_fail_at(im, NULL, "the name %s is defined twice (graph inputs, initializers "
                         "and node outputs share one namespace)", pk_ox_quote(im, name));
  if (im->nvalues == im->cap_values) {
    int cap = im->cap_values ? 2 * im->cap_values : 256;
    pk_ox_value *v = pk_alloc(im->ctx, sizeof *v * (size_t)cap);
    if (im->nvalues) memcpy(v, im->values, sizeof *v * (size_t)im->nvalues);
    im->values = v;
    im->cap_values = cap;
  }
  if (2 * (im->nvalues + 1) > im->cap_hash) {
    im->cap_hash = im->cap_hash ? 2 * im->cap_hash : 1024;
    im->hash = pk_alloc(im->ctx, sizeof *im->hash * (size_t)im->cap_hash);
    memset(im->hash, 0, sizeof *im->hash * (size_t)im->cap_hash);
    for (int i = 0; i < im->nvalues; i++) ox_hash_insert(im, i);
  }
  *id = im->nvalues++;
  pk_ox_value *v = &im->values[*id];
  memset(v, 0, sizeof *v);
  v->name = pk_strdup(im->ctx, name);
  v->tensor = -1;
  v->src = -1;
  ox_hash_insert(im, *id);
  return PK_OK;
}

/* ---- graph names ----
 * ONNX names are free-form; graph names have no control bytes or parentheses (reserved for
 * the names Pock makes) and at most PK_FE_MAX_NAME bytes, and are unique. */
#define OX_MAX_NAME 255

const char *pk_ox_graph_name(pk_ox *im, const char *want) {
  size_t n = strlen(want);
  if (n > OX_MAX_NAME - 8) n = OX_MAX_NAME - 8;
  char *s = pk_strndup(im->ctx, want, n);
  for (char *c = s; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '(' || *c == ')') *c = '_';
  if (!s[0]) s = pk_strdup(im->ctx, "_");
  if (pk_graph_find(im->g, s) < 0) return s;
  for (int k = 2;; k++) {
    const char *t = pk_sprintf(im->ctx, "%s#%d", s, k);
    if (pk_graph_find(im->g, t) < 0) return t;
  }
}

/* Re-issues a failure the graph recorded, framed by the node. */
static pk_status ox_wrap(pk_ox *im, const pk_ox_node *nd) {
  const char *msg = pk_strdup(im->ctx, pk_ctx_error(im->ctx));
  pk_ctx_clear_error(im->ctx);
  if (strncmp(msg, "graph: ", 7) == 0) msg += 7;
  if (nd) return pk_ox_fail(im, nd, "%s", msg);
  return pk_ox_fail_at(im, NULL, "%s", msg);
}

/* Data of value v converted to dtype `to` (floats ↔ floats, ints → floats or ints). */
static const void *ox_convert(pk_ox *im, const pk_ox_value *v, pkrt_dtype to) {
  int64_t n = pk_ox_numel(v->ndim, v->shape);
  if (v->dtype == to) return v->data;
  void *out = pk_alloc(im->ctx, (size_t)(n ? n : 1) * pkrt_dtype_size(to));
  for (int64_t i = 0; i < n; i++) {
    double d = v->dtype == PKRT_DTYPE_F32   ? ((const float *)v->data)[i]
               : v->dtype == PKRT_DTYPE_F64 ? ((const double *)v->data)[i]
               : v->dtype == PKRT_DTYPE_I32 ? ((const int32_t *)v->data)[i]
                                            : (double)((const int64_t *)v->data)[i];
    if (to == PKRT_DTYPE_F32) ((float *)out)[i] = (float)d;
    else if (to == PKRT_DTYPE_F64) ((double *)out)[i] = d;
    else if (to == PKRT_DTYPE_I32) ((int32_t *)out)[i] = (int32_t)((const int64_t *)v->data)[i];
    else ((int64_t *)out)[i] = v->dtype == PKRT_DTYPE_I32 ? ((const int32_t *)v->data)[i]
                                                          : ((const int64_t *)v->data)[i];
  }
  return out;
}

static bool ox_is_float(pkrt_dtype t) { return t == PKRT_DTYPE_F32 || t == PKRT_DTYPE_F64; }

/* A PARAM or CONST value as a persistent graph tensor of role `role`. */
static pk_status ox_persistent(pk_ox *im, const pk_ox_node *nd, int id, pk_tensor_role role) {
  pk_ox_value *v = pk_ox_val(im, id);
  int64_t n = pk_ox_numel(v->ndim, v->shape);
  if (n == 0) {
    const char *msg = pk_sprintf(im->ctx, "the empty tensor %s %s cannot be a graph operand",
                                 pk_ox_quote(im, v->name), pk_ox_shape_str(im, v->ndim, v->shape));
    return nd ? pk_ox_fail(im, nd, "%s", msg) : pk_ox_fail_at(im, NULL, "%s", msg);
  }
  pkrt_dtype dt = ox_is_float(v->dtype) ? im->fdtype : PKRT_DTYPE_I64;
  int ndim = v->ndim ? v->ndim : 1;
  int64_t one = 1;
  const int64_t *shape = v->ndim ? v->shape : &one;
  const char *name = pk_ox_graph_name(im, v->name);
  const void *data = ox_convert(im, v, dt);
  int t = role == PK_ROLE_PARAM ? pk_graph_add_param(im->g, name, dt, ndim, shape, data)
                                : pk_graph_add_buffer(im->g, name, role, dt, ndim, shape, data);
  if (t < 0) return ox_wrap(im, nd);
  v = pk_ox_val(im, id);
  v->tensor = t;
  return PK_OK;
}

pk_status pk_ox_value_tensor(pk_ox *im, const pk_ox_node *nd, int id, int *tensor) {
  pk_ox_value *v = pk_ox_val(im, id);
  if (v->tensor >= 0) {
    *tensor = v->tensor;
    return PK_OK;
  }
  pk_status s;
  switch (v->kind) {
  case PK_OXV_PARAM:
    if (!ox_is_float(v->dtype))
      s = ox_persistent(im, nd, id, PK_ROLE_CONSTANT); /* integer initializers never train */
    else
      s = ox_persistent(im, nd, id, v->as_buffer ? PK_ROLE_BUFFER : PK_ROLE_PARAM);
    break;
  case PK_OXV_CONST:
    s = ox_persistent(im, nd, id, v->as_buffer ? PK_ROLE_BUFFER : PK_ROLE_CONSTANT);
    break;
  case PK_OXV_TPARAM: {
    int src;
    if ((s = pk_ox_value_tensor(im, nd, v->src, &src)) != PK_OK) return s;
    pk_op_attrs a = {.nperm = 2, .perm = {1, 0}};
    int t;
    /* nd is the reader: the transpose is named after it */
    if ((s = pk_ox_op(im, (pk_ox_node *)nd, PK_OP_TRANSPOSE, &a, 1, &src, &t)) != PK_OK) return s;
    pk_ox_val(im, id)->tensor = t;
    break;
  }
  default:
    return nd ? pk_ox_fail(im, nd, "value %s is used before it is produced",
                           pk_ox_quote(im, v->name))
              : pk_ox_fail_at(im, NULL, "value %s is used before it is produced",
                              pk_ox_quote(im, v->name));
  }
  if (s != PK_OK) return s;
  *tensor = pk_ox_val(im, id)->tensor;
  return PK_OK;
}

/* ---- inputs of a node ---- */

pk_ox_value *pk_ox_in(pk_ox *im, const pk_ox_node *nd, int i) {
  if (i < 0 || i >= nd->nin || nd->in[i] < 0) return NULL;
  return pk_ox_val(im, nd->in[i]);
}

pk_status pk_ox_arity(pk_ox *im, const pk_ox_node *nd, int lo, int hi, int max_out) {
  if (nd->nin < lo || nd->nin > hi)
    return lo == hi ? pk_ox_fail(im, nd, "takes %d input%s, not %d", lo, lo == 1 ? "" : "s",
                                 nd->nin)
                    : pk_ox_fail(im, nd, "takes %d to %d inputs, not %d", lo, hi, nd->nin);
  for (int i = 0; i < lo; i++)
    if (nd->in[i] < 0) return pk_ox_fail(im, nd, "input %d is required but empty", i);
  if (nd->nout < 1 || nd->nout > max_out)
    return pk_ox_fail(im, nd, "has %d outputs; Pock supports %d", nd->nout, max_out);
  return PK_OK;
}

pk_status pk_ox_tensor(pk_ox *im, const pk_ox_node *nd, int i, int *tensor) {
  if (i < 0 || i >= nd->nin || nd->in[i] < 0)
    return pk_ox_fail(im, nd, "input %d is required but missing", i);
  return pk_ox_value_tensor(im, nd, nd->in[i], tensor);
}

pk_status pk_ox_buffer(pk_ox *im, const pk_ox_node *nd, int i, int *tensor) {
  pk_ox_value *v = pk_ox_in(im, nd, i);
  if (!v) return pk_ox_fail(im, nd, "input %d is required but missing", i);
  if (v->kind != PK_OXV_PARAM && v->kind != PK_OXV_CONST)
    return pk_ox_fail(im, nd, "input %d (%s) must be an initializer (running statistics are "
                      "model state)", i, pk_ox_quote(im, v->name));
  if (v->tensor >= 0 && !v->as_buffer)
    return pk_ox_fail(im, nd, "input %d (%s) is running statistics here and a weight elsewhere",
                      i, pk_ox_quote(im, v->name));
  if (!ox_is_float(v->dtype))
    return pk_ox_fail(im, nd, "input %d (%s) must be float", i, pk_ox_quote(im, v->name));
  v->as_buffer = true;
  return pk_ox_value_tensor(im, nd, nd->in[i], tensor);
}

/* Input i's known data, or a message saying it must be known. */
static pk_status ox_known(pk_ox *im, const pk_ox_node *nd, int i, const char *what,
                          pk_ox_value **out) {
  pk_ox_value *v = pk_ox_in(im, nd, i);
  if (!v) return pk_ox_fail(im, nd, "input %d (%s) is required but missing", i, what);
  if (!v->data)
    return pk_ox_fail(im, nd, "input %d (%s) must be known at import (a constant or an "
                      "initializer); here it is computed by the graph", i, what);
  *out = v;
  return PK_OK;
}

pk_status pk_ox_const_ints(pk_ox *im, const pk_ox_node *nd, int i, const char *what, int max,
                           int *n, int64_t *out) {
  pk_ox_value *v = NULL;
  pk_status s = ox_known(im, nd, i, what, &v);
  if (s != PK_OK) return s;
  int64_t k = pk_ox_numel(v->ndim, v->shape);
  if (v->ndim > 1) return pk_ox_fail(im, nd, "input %d (%s) must be 1-D", i, what);
  if (k > max)
    return pk_ox_fail(im, nd, "input %d (%s) has %lld values; at most %d", i, what,
                      (long long)k, max);
  for (int64_t j = 0; j < k; j++) {
    if (v->dtype == PKRT_DTYPE_I64) {
      out[j] = ((const int64_t *)v->data)[j];
      continue;
    }
    double d = v->dtype == PKRT_DTYPE_F32 ? ((const float *)v->data)[j]
                                          : ((const double *)v->data)[j];
    if (!isfinite(d) || d != floor(d) || fabs(d) > 9e18)
      return pk_ox_fail(im, nd, "input %d (%s): value %g is not an integer", i, what, d);
    out[j] = (int64_t)d;
  }
  *n = (int)k;
  return PK_OK;
}

pk_status pk_ox_const_f64(pk_ox *im, const pk_ox_node *nd, int i, const char *what,
                          double *out) {
  pk_ox_value *v = NULL;
  pk_status s = ox_known(im, nd, i, what, &v);
  if (s != PK_OK) return s;
  if (pk_ox_numel(v->ndim, v->shape) != 1)
    return pk_ox_fail(im, nd, "input %d (%s) must hold one value, not %s", i, what,
                      pk_ox_shape_str(im, v->ndim, v->shape));
  *out = v->dtype == PKRT_DTYPE_F32   ? ((const float *)v->data)[0]
         : v->dtype == PKRT_DTYPE_F64 ? ((const double *)v->data)[0]
                                      : (double)((const int64_t *)v->data)[0];
  return PK_OK;
}

/* ---- emitting ---- */

static pk_status ox_emit(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *attrs,
                         int nins, const int *ins, const char *out_name, int *out_tensor) {
  const char *node = nd->nemitted ? pk_sprintf(im->ctx, "%s#%d", nd->name, nd->nemitted + 1)
                                  : nd->name;
  nd->nemitted++;
  pk_op_attrs zero;
  memset(&zero, 0, sizeof zero);
  if (pk_graph_add_op(im->g, node, op, attrs ? attrs : &zero, nins, ins,
                      pk_ox_graph_name(im, out_name ? out_name : pk_sprintf(im->ctx, "%s.out", node)),
                      out_tensor) != PK_OK)
    return ox_wrap(im, nd);
  return PK_OK;
}

pk_status pk_ox_op(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *attrs,
                   int nins, const int *ins, int *out_tensor) {
  return ox_emit(im, nd, op, attrs, nins, ins, NULL, out_tensor);
}

pk_status pk_ox_op_result(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *attrs,
                          int nins, const int *ins, int k) {
  PK_ASSERT(k >= 0 && k < nd->nout);
  int t;
  pk_status s = ox_emit(im, nd, op, attrs, nins, ins, pk_ox_val(im, nd->out[k])->name, &t);
  if (s != PK_OK) return s;
  return pk_ox_bind(im, nd, k, t);
}

pk_status pk_ox_bind(pk_ox *im, pk_ox_node *nd, int k, int tensor) {
  PK_ASSERT(k >= 0 && k < nd->nout && tensor >= 0 && tensor < im->g->ntensors);
  if (nd->out[k] < 0) return PK_OK; /* an output the model does not name */
  pk_ox_value *v = pk_ox_val(im, nd->out[k]);
  const pk_gtensor *t = im->g->tensors[tensor];
  v->kind = PK_OXV_TENSOR;
  v->defined = true;
  v->tensor = tensor;
  v->dtype = t->dtype;
  v->ndim = t->ndim;
  memcpy(v->shape, t->shape, sizeof v->shape);
  v->data = NULL;
  return PK_OK;
}

pk_status pk_ox_set_const(pk_ox *im, pk_ox_node *nd, int k, pkrt_dtype dtype, bool is_bool,
                          int ndim, const int64_t *shape, const void *data) {
  PK_ASSERT(k >= 0 && k < nd->nout && ndim >= 0 && ndim <= PK_TE_MAX_DIMS);
  if (nd->out[k] < 0) return PK_OK;
  pk_ox_value *v = pk_ox_val(im, nd->out[k]);
  int64_t n = pk_ox_numel(ndim, shape);
  size_t bytes = (size_t)n * pkrt_dtype_size(dtype);
  void *copy = pk_alloc(im->ctx, bytes ? bytes : 1);
  if (bytes) memcpy(copy, data, bytes);
  v->kind = PK_OXV_CONST;
  v->defined = true;
  v->dtype = dtype;
  v->is_bool = is_bool;
  v->ndim = ndim;
  memset(v->shape, 0, sizeof v->shape);
  if (ndim) memcpy(v->shape, shape, sizeof *shape * (size_t)ndim);
  v->data = copy;
  v->tensor = -1;
  return PK_OK;
}

pk_status pk_ox_alias(pk_ox *im, pk_ox_node *nd, int k, int i) {
  if (nd->out[k] < 0) return PK_OK;
  pk_ox_value *in = pk_ox_in(im, nd, i);
  if (!in) return pk_ox_fail(im, nd, "input %d is required but missing", i);
  pk_ox_value *v = pk_ox_val(im, nd->out[k]);
  const char *name = v->name;
  /* A PARAM stays one tensor however many names reach it: the alias shares its tensor id
   * once made, so alias the source's kind but resolve through it. */
  if (in->kind == PK_OXV_PARAM || in->kind == PK_OXV_TPARAM) {
    int t;
    pk_status s = pk_ox_tensor(im, nd, i, &t);
    if (s != PK_OK) return s;
    in = pk_ox_in(im, nd, i);
    v = pk_ox_val(im, nd->out[k]);
  }
  *v = *in;
  v->name = name;
  return PK_OK;
}

pk_status pk_ox_set_tparam(pk_ox *im, pk_ox_node *nd, int k, int param) {
  if (nd->out[k] < 0) return PK_OK;
  pk_ox_value *p = pk_ox_val(im, param);
  PK_ASSERT(p->kind == PK_OXV_PARAM && p->ndim == 2);
  pk_ox_value *v = pk_ox_val(im, nd->out[k]);
  v->kind = PK_OXV_TPARAM;
  v->defined = true;
  v->dtype = p->dtype;
  v->ndim = 2;
  v->shape[0] = p->shape[1];
  v->shape[1] = p->shape[0];
  v->src = param;
  v->tensor = -1;
  v->data = NULL;
  return PK_OK;
}

/* ---- attributes ---- */

const Onnx__AttributeProto *pk_ox_attr(const pk_ox_node *nd, const char *name) {
  for (size_t i = 0; i < nd->p->n_attribute; i++) {
    const Onnx__AttributeProto *a = nd->p->attribute[i];
    if (a->name && strcmp(a->name, name) == 0) return a;
  }
  return NULL;
}

pk_status pk_ox_attrs_known(pk_ox *im, const pk_ox_node *nd, const char *const *known) {
  for (size_t i = 0; i < nd->p->n_attribute; i++) {
    const char *n = nd->p->attribute[i]->name ? nd->p->attribute[i]->name : "";
    bool ok = false;
    for (int j = 0; known[j] && !ok; j++) ok = strcmp(known[j], n) == 0;
    if (!ok) return pk_ox_fail(im, nd, "attribute %s is not supported", pk_ox_quote(im, n));
    for (size_t j = 0; j < i; j++)
      if (nd->p->attribute[j]->name && strcmp(nd->p->attribute[j]->name, n) == 0)
        return pk_ox_fail(im, nd, "attribute %s appears twice", pk_ox_quote(im, n));
  }
  return PK_OK;
}

static pk_status ox_attr_typed(pk_ox *im, const pk_ox_node *nd, const char *name,
                               Onnx__AttributeProto__AttributeType want, const char *want_s,
                               const Onnx__AttributeProto **out) {
  *out = pk_ox_attr(nd, name);
  if (*out && (*out)->has_type && (*out)->type != want)
    return pk_ox_fail(im, nd, "attribute '%s' must be %s", name, want_s);
  return PK_OK;
}

pk_status pk_ox_attr_int(pk_ox *im, const pk_ox_node *nd, const char *name, int64_t def,
                         int64_t lo, int64_t hi, int64_t *out) {
  const Onnx__AttributeProto *a;
  pk_status s = ox_attr_typed(im, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "an int", &a);
  if (s != PK_OK) return s;
  *out = a ? a->i : def;
  if (*out < lo || *out > hi)
    return pk_ox_fail(im, nd, "attribute '%s' = %lld is outside %lld..%lld", name,
                      (long long)*out, (long long)lo, (long long)hi);
  return PK_OK;
}

pk_status pk_ox_attr_float(pk_ox *im, const pk_ox_node *nd, const char *name, double def,
                           double *out) {
  const Onnx__AttributeProto *a;
  pk_status s = ox_attr_typed(im, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT,
                              "a float", &a);
  if (s != PK_OK) return s;
  *out = a ? a->f : def;
  if (!isfinite(*out))
    return pk_ox_fail(im, nd, "attribute '%s' = %g is not finite", name, *out);
  return PK_OK;
}

pk_status pk_ox_attr_ints(pk_ox *im, const pk_ox_node *nd, const char *name, int max,
                          bool *present, int *n, int64_t *out) {
  const Onnx__AttributeProto *a;
  pk_status s = ox_attr_typed(im, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS,
                              "a list of ints", &a);
  if (s != PK_OK) return s;
  if (present) *present = a != NULL;
  *n = 0;
  if (!a) return PK_OK;
  if (a->n_ints > (size_t)max)
    return pk_ox_fail(im, nd, "attribute '%s' has %zu values; at most %d", name, a->n_ints, max);
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  *n = (int)a->n_ints;
  return PK_OK;
}

pk_status pk_ox_attr_string(pk_ox *im, const pk_ox_node *nd, const char *name,
                            const char *def, const char **out) {
  const Onnx__AttributeProto *a;
  pk_status s = ox_attr_typed(im, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING,
                              "a string", &a);
  if (s != PK_OK) return s;
  if (!a || !a->has_s) {
    *out = def;
    return PK_OK;
  }
  if (memchr(a->s.data, 0, a->s.len))
    return pk_ox_fail(im, nd, "attribute '%s' holds a NUL byte", name);
  *out = pk_strndup(im->ctx, (const char *)a->s.data, a->s.len);
  return PK_OK;
}

pk_status pk_ox_attr_tensor(pk_ox *im, const pk_ox_node *nd, const char *name,
                            const Onnx__TensorProto **out) {
  const Onnx__AttributeProto *a;
  pk_status s = ox_attr_typed(im, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR,
                              "a tensor", &a);
  if (s != PK_OK) return s;
  *out = a ? a->t : NULL;
  return PK_OK;
}
