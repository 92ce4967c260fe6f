/* op_table.c — the operator table's columns, all generated from op_table.def. */
#include <string.h>

#include "op_impl.h"

typedef struct op_row {
  const char *name;
  pk_op_class cls;
  int arity;
  unsigned diff, flags, attrs;
  pk_op_text_fn text;
  pk_op_grad_fn grad;
} op_row;

static const op_row op_rows[] = {
#define PK_OP(id, name, cls, arity, diff, flags, attrs, builder, grad)                       \
  {name, PK_OP_CLASS_##cls, arity, diff, flags, attrs, builder, grad},
#include "op_table.def"
#undef PK_OP
};

_Static_assert(sizeof op_rows / sizeof op_rows[0] == PK_OP_COUNT_,
               "op_rows must have one row per operator of op_table.def");

/* Each row's arity fits the params struct, its diff column and integer inputs name only real
 * inputs, an integer input is not differentiable, and attrs names only known keys. */
#define PK_OP(id, name, cls, arity, diff, flags, attrs, builder, grad)                       \
  _Static_assert((arity) >= 1 && (arity) <= PK_OP_MAX_INPUTS, name ": arity out of range"); \
  _Static_assert(((diff) >> (arity)) == 0, name ": diff names an input beyond the arity");  \
  _Static_assert((((flags) >> 8) >> (arity)) == 0, name ": an integer input beyond arity"); \
  _Static_assert((((flags) >> 8) & (diff)) == 0, name ": an integer input is differentiable"); \
  _Static_assert(((attrs) >> PK_ATTR_KEY_COUNT_) == 0, name ": attrs names an unknown key");
#include "op_table.def"
#undef PK_OP

static const char *const class_names[] = {
    [PK_OP_CLASS_INJECTIVE] = "injective", [PK_OP_CLASS_REDUCTION] = "reduction",
    [PK_OP_CLASS_MATMUL] = "matmul",       [PK_OP_CLASS_CONV] = "conv",
    [PK_OP_CLASS_POOL] = "pool",
};
_Static_assert(sizeof class_names / sizeof class_names[0] == PK_OP_CLASS_COUNT_,
               "one name per op class");

static bool op_valid(pk_op_kind op) { return (unsigned)op < PK_OP_COUNT_; }

const char *pk_op_name(pk_op_kind op) { return op_valid(op) ? op_rows[op].name : "?"; }

pk_op_kind pk_op_from_name(const char *name) {
  for (int i = 0; i < PK_OP_COUNT_; i++)
    if (name && strcmp(op_rows[i].name, name) == 0) return (pk_op_kind)i;
  return PK_OP_COUNT_;
}

pk_op_class pk_op_class_of(pk_op_kind op) {
  PK_ASSERT(op_valid(op));
  return op_rows[op].cls;
}

const char *pk_op_class_name(pk_op_class c) {
  return (unsigned)c < PK_OP_CLASS_COUNT_ ? class_names[c] : "?";
}

int pk_op_arity(pk_op_kind op) { return op_valid(op) ? op_rows[op].arity : 0; }

unsigned pk_op_diff_inputs(pk_op_kind op) { return op_valid(op) ? op_rows[op].diff : 0; }

unsigned pk_op_flags(pk_op_kind op) { return op_valid(op) ? op_rows[op].flags : 0; }

void pk_op_input_range(pk_op_kind op, int *min, int *max) {
  unsigned f = pk_op_flags(op);
  *max = pk_op_arity(op);
  *min = f & PK_OPF_VARIADIC ? 1 : f & PK_OPF_STEP_HYPER ? *max - 1 : *max;
}

void pk_op_model_input_range(pk_op_kind op, int *min, int *max) {
  unsigned f = pk_op_flags(op);
  pk_op_input_range(op, min, max);
  if (f & (PK_OPF_STEP_RNG | PK_OPF_STEP_HYPER)) *min = *max = pk_op_arity(op) - 1;
}

unsigned pk_op_attrs_read(pk_op_kind op) { return op_valid(op) ? op_rows[op].attrs : 0; }

static const char *const attr_key_names[] = {
#define PK_ATTR_X(id, key) key,
    PK_ATTR_KEYS(PK_ATTR_X)
#undef PK_ATTR_X
};

const char *pk_attr_key_name(pk_attr_key k) {
  return (unsigned)k < PK_ATTR_KEY_COUNT_ ? attr_key_names[k] : NULL;
}

pk_attr_key pk_attr_key_from_name(const char *s) {
  for (int k = 0; k < PK_ATTR_KEY_COUNT_; k++)
    if (s && strcmp(attr_key_names[k], s) == 0) return (pk_attr_key)k;
  return PK_ATTR_KEY_COUNT_;
}

pk_op_text_fn pk_op_text_builder(pk_op_kind op) {
  PK_ASSERT(op_valid(op));
  return op_rows[op].text;
}

pk_op_grad_fn pk_op_grad_builder(pk_op_kind op) {
  PK_ASSERT(op_valid(op));
  return op_rows[op].grad;
}
