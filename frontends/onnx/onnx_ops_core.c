/* onnx_ops_core.c — the converters every model needs whatever its family: Identity and
 * Constant (scalar and list attributes, or a tensor). */
#include <string.h>

#include "onnx_impl.h"

pk_status pk_ox_identity(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {NULL};
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK || (s = pk_ox_arity(im, nd, 1, 1, 1)))
    return s;
  return pk_ox_alias(im, nd, 0, 0);
}

/* Constant: exactly one of value (a tensor), value_float(s), value_int(s). */
pk_status pk_ox_constant(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"value", "value_float", "value_floats", "value_int",
                                      "value_ints", NULL};
  pk_status s;
  if ((s = pk_ox_arity(im, nd, 0, 0, 1)) != PK_OK) return s;
  if (nd->p->n_attribute != 1)
    return pk_ox_fail(im, nd, "needs exactly one value attribute, has %zu", nd->p->n_attribute);
  const char *key = nd->p->attribute[0]->name ? nd->p->attribute[0]->name : "";
  for (int i = 0; known[i]; i++)
    if (strcmp(key, known[i]) == 0) goto known_key;
  return pk_ox_fail(im, nd, "attribute %s is not supported (strings and sparse tensors are "
                    "not)", pk_ox_quote(im, key));
known_key:;
  const Onnx__AttributeProto *a = nd->p->attribute[0];
  if (strcmp(key, "value") == 0) {
    const Onnx__TensorProto *t;
    if ((s = pk_ox_attr_tensor(im, nd, "value", &t)) != PK_OK) return s;
    if (!t) return pk_ox_fail(im, nd, "attribute 'value' holds no tensor");
    pkrt_dtype dt;
    bool is_bool;
    int ndim;
    int64_t shape[PK_TE_MAX_DIMS];
    const void *data;
    if ((s = pk_ox_tensor_data(im, nd->where, t, &dt, &is_bool, &ndim, shape, &data)) != PK_OK)
      return s;
    return pk_ox_set_const(im, nd, 0, dt, is_bool, ndim, shape, data);
  }
  if (strcmp(key, "value_float") == 0) {
    double d;
    if ((s = pk_ox_attr_float(im, nd, key, 0, &d)) != PK_OK) return s;
    float f = (float)d;
    return pk_ox_set_const(im, nd, 0, PKRT_DTYPE_F32, false, 0, NULL, &f);
  }
  if (strcmp(key, "value_int") == 0) {
    int64_t v;
    if ((s = pk_ox_attr_int(im, nd, key, 0, INT64_MIN, INT64_MAX, &v)) != PK_OK) return s;
    return pk_ox_set_const(im, nd, 0, PKRT_DTYPE_I64, false, 0, NULL, &v);
  }
  if (a->has_type && a->type != (strcmp(key, "value_ints") == 0
                                     ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS
                                     : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))
    return pk_ox_fail(im, nd, "attribute '%s' has the wrong type", key);
  size_t n = strcmp(key, "value_ints") == 0 ? a->n_ints : a->n_floats;
  if (n > PK_OP_MAX_EXTENT) return pk_ox_fail(im, nd, "attribute '%s' is too long", key);
  int64_t shape[1] = {(int64_t)n};
  if (strcmp(key, "value_ints") == 0)
    return pk_ox_set_const(im, nd, 0, PKRT_DTYPE_I64, false, 1, shape, a->ints);
  return pk_ox_set_const(im, nd, 0, PKRT_DTYPE_F32, false, 1, shape, a->floats);
}
