/* emit_c_expr.c — scalar loop-IR expressions as C text. Integer arithmetic that may wrap
 * goes through the prelude's helpers (no UB, bit-exact with the interpreter); the operator
 * formatting is shared with the vector emitter, which applies it lane by lane. */
#include "emit_c_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *cg_int_text(cg *E, int64_t v, pkrt_dtype t) {
  if (t == PKRT_DTYPE_I32) return pk_sprintf(E->ctx, "((int32_t)%" PRId64 ")", v);
  if (v == INT64_MIN) return "INT64_MIN";
  if (v >= INT32_MIN && v <= INT32_MAX)
    return pk_sprintf(E->ctx, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v);
  return pk_sprintf(E->ctx, "INT64_C(%" PRId64 ")", v);
}

static const char *float_text(cg *E, double v, pkrt_dtype t) {
  bool f32 = t == PKRT_DTYPE_F32;
  if (isnan(v)) return f32 ? "((float)NAN)" : "((double)NAN)";
  if (isinf(v))
    return pk_sprintf(E->ctx, "(%s(%s)INFINITY)", v < 0 ? "-" : "", f32 ? "float" : "double");
  char buf[64];
  if (f32) snprintf(buf, sizeof buf, "%.9g", (double)(float)v);
  else snprintf(buf, sizeof buf, "%.17g", v);
  bool has_point = strpbrk(buf, ".e") != NULL;
  return pk_sprintf(E->ctx, "%s%s%s%s%s", v < 0 ? "(" : "", buf, has_point ? "" : ".0",
                    f32 ? "f" : "", v < 0 ? ")" : "");
}

const char *cg_var(cg *E, const pk_lvar *v) {
  if (E->lane && E->vl) {
    /* one lane of a vectorized loop: the counter is lane 0's value plus the lane number */
    if (v == E->vl->loop->var)
      return pk_sprintf(E->ctx, "(%s + %d + pk_l)", v->name, E->lane->part * E->vl->g.part_lanes);
    if (E->vl->var_vec[v->id])
      return pk_sprintf(E->ctx, "%s[pk_l]", cg_part_name(E, v->name, E->lane->part));
  }
  return v->name;
}

const char *cg_elem(cg *E, const pk_lbuf *b, const char *index) {
  switch (E->buf_kind[b->id]) {
  case CG_BUF_PLAIN: return pk_sprintf(E->ctx, "%s[%s]", b->name, index);
  case CG_BUF_VECTORS:
    /* Scalar access to a tile of vectors: GCC gives vector types their element's alias
     * set, so this is defined; it only costs the tile its registers. */
    return pk_sprintf(E->ctx, "((%s *)%s)[%s]", cg_ctype(b->dtype), b->name, index);
  case CG_BUF_PRIVATE:
    PK_ASSERT(E->lane != NULL); /* vector code reads these whole (emit_c_vector.c) */
    if (E->buf_parts[b->id] == 1) return pk_sprintf(E->ctx, "%s[%s][pk_l]", b->name, index);
    return pk_sprintf(E->ctx, "%s[%s][%d][pk_l]", b->name, index, E->lane->part);
  }
  return "0";
}

const char *pk_cgen_c_operator(pk_eop op) {
  switch (op) {
  case PK_EOP_ADD: return "+";
  case PK_EOP_SUB: return "-";
  case PK_EOP_MUL: return "*";
  case PK_EOP_DIV: return "/";
  case PK_EOP_LT: return "<";
  case PK_EOP_LE: return "<=";
  case PK_EOP_GT: return ">";
  case PK_EOP_GE: return ">=";
  case PK_EOP_EQ: return "==";
  case PK_EOP_NE: return "!=";
  case PK_EOP_AND: return "&&";
  case PK_EOP_OR: return "||";
  default: return NULL;
  }
}

const char *pk_cgen_helper_name(pk_eop op) {
  switch (op) {
  case PK_EOP_ADD: return "add";
  case PK_EOP_SUB: return "sub";
  case PK_EOP_MUL: return "mul";
  case PK_EOP_DIV: return "div";
  case PK_EOP_MOD: return "mod";
  case PK_EOP_MIN: return "min";
  case PK_EOP_MAX: return "max";
  default: return NULL;
  }
}

static const char *binary_text(cg *E, const pk_lexpr *e, const char *a, const char *b) {
  pkrt_dtype operand = e->args[0]->dtype;
  bool is_float = pk_dtype_is_float(operand);
  const char *op = pk_cgen_c_operator(e->op);
  /* Plain C where it is exact and defined: float + - * /, comparisons, logic, and integer
   * index arithmetic proven not to overflow. Everything else goes through the prelude. */
  bool plain = op && (e->dtype == PKRT_DTYPE_BOOL || (is_float && e->op != PK_EOP_MOD) ||
                      (e->index_math && e->op != PK_EOP_DIV));
  if (plain) return pk_sprintf(E->ctx, "(%s %s %s)", a, op, b);
  const char *h = pk_cgen_helper_name(e->op);
  if (!h) { cg_unsupported(E, "this binary operator"); return "0"; }
  return pk_sprintf(E->ctx, "pk_%s_%s(%s, %s)", h, cg_tsuffix(operand), a, b);
}

static const char *intrinsic_text(cg *E, const pk_lexpr *e, const char *const *args) {
  pkrt_dtype t = e->dtype;
  bool f32 = t == PKRT_DTYPE_F32;
  const char *fn = NULL;
  switch (e->op) {
  case PK_EOP_EXP: fn = f32 ? "expf" : "exp"; break;
  case PK_EOP_LOG: fn = f32 ? "logf" : "log"; break;
  case PK_EOP_SQRT: fn = f32 ? "sqrtf" : "sqrt"; break;
  case PK_EOP_TANH: fn = f32 ? "tanhf" : "tanh"; break;
  case PK_EOP_ERF: fn = f32 ? "erff" : "erf"; break;
  case PK_EOP_POW: fn = f32 ? "powf" : "pow"; break;
  case PK_EOP_ABS:
    fn = pk_dtype_is_int(t) ? (t == PKRT_DTYPE_I32 ? "pk_abs_i32" : "pk_abs_i64")
                            : (f32 ? "fabsf" : "fabs");
    break;
  case PK_EOP_SIGMOID: fn = f32 ? "pk_sigmoid_f32" : "pk_sigmoid_f64"; break;
  case PK_EOP_HASH:
    return pk_sprintf(E->ctx, "pk_hash3((int64_t)%s, (int64_t)%s, (int64_t)%s)", args[0], args[1],
                      args[2]);
  case PK_EOP_RSQRT:
    return pk_sprintf(E->ctx, f32 ? "(1.0f / sqrtf(%s))" : "(1.0 / sqrt(%s))", args[0]);
  default: cg_unsupported(E, "this intrinsic"); return "0";
  }
  if (e->nargs == 2) return pk_sprintf(E->ctx, "%s(%s, %s)", fn, args[0], args[1]);
  return pk_sprintf(E->ctx, "%s(%s)", fn, args[0]);
}

static const char *cast_text(cg *E, const pk_lexpr *e, const char *a) {
  pkrt_dtype from = e->args[0]->dtype, to = e->dtype;
  if (pk_dtype_is_int(to) && pk_dtype_is_float(from))
    return pk_sprintf(E->ctx, "pk_from_f64_%s((double)%s)", cg_tsuffix(to), a);
  /* int64 -> int32 keeps the low 32 bits (GCC defines the conversion that way). */
  return pk_sprintf(E->ctx, "((%s)%s)", cg_ctype(to), a);
}

const char *cg_op_text(cg *E, const pk_lexpr *e, const char *const *args) {
  switch (e->kind) {
  case PK_LX_UNARY:
    if (e->op == PK_EOP_NOT) return pk_sprintf(E->ctx, "(!%s)", args[0]);
    if (pk_dtype_is_float(e->dtype) || e->index_math) return pk_sprintf(E->ctx, "(-%s)", args[0]);
    return pk_sprintf(E->ctx, "pk_neg_%s(%s)", cg_tsuffix(e->dtype), args[0]);
  case PK_LX_BINARY: return binary_text(E, e, args[0], args[1]);
  case PK_LX_SELECT: return pk_sprintf(E->ctx, "(%s ? %s : %s)", args[0], args[1], args[2]);
  case PK_LX_CALL: return intrinsic_text(E, e, args);
  case PK_LX_CAST: return cast_text(E, e, args[0]);
  default: PK_ASSERT(!"cg_op_text on a leaf");
  }
  return "0";
}

const char *cg_x(cg *E, const pk_lexpr *e) {
  switch (e->kind) {
  case PK_LX_INT: return cg_int_text(E, e->ival, e->dtype);
  case PK_LX_FLOAT: return float_text(E, e->fval, e->dtype);
  case PK_LX_VAR: return cg_var(E, e->var);
  case PK_LX_LOAD: {
    const char *x = cg_elem(E, e->buf, cg_index(E, e->args[0]));
    /* a load that only some lanes reach may be out of bounds when none does */
    if (E->load_guard && !E->lane) return pk_sprintf(E->ctx, "(%s ? %s : 0)", E->load_guard, x);
    return x;
  }
  default: break;
  }
  const char *args[3] = {"0", "0", "0"};
  PK_ASSERT(e->nargs <= 3);
  for (int i = 0; i < e->nargs; i++) args[i] = cg_x(E, e->args[i]);
  return cg_op_text(E, e, args);
}

bool cg_lexpr_equal(const pk_lexpr *a, const pk_lexpr *b) {
  if (a == b) return true;
  if (a->kind != b->kind || a->op != b->op || a->dtype != b->dtype || a->nargs != b->nargs ||
      a->ival != b->ival || a->var != b->var || a->buf != b->buf)
    return false;
  if (a->kind == PK_LX_FLOAT && memcmp(&a->fval, &b->fval, sizeof a->fval) != 0) return false;
  for (int i = 0; i < a->nargs; i++)
    if (!cg_lexpr_equal(a->args[i], b->args[i])) return false;
  return true;
}

bool cg_has_load(const pk_lexpr *e) {
  if (e->kind == PK_LX_LOAD) return true;
  for (int i = 0; i < e->nargs; i++)
    if (cg_has_load(e->args[i])) return true;
  return false;
}
