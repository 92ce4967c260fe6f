/* emit_c_vector.c — expressions of a vectorized loop as explicit vector code. A value that
 * differs by lane becomes a named vector per part (`const pk_f32x16 x7 = ...;`); a value
 * the same in every lane stays a scalar C expression and is broadcast where it meets a
 * vector. Loads are contiguous (one unaligned vector load), strided, or gathered lane by
 * lane; arithmetic, comparisons, select and min/max are vector operations; what has no
 * vector form here (intrinsics, integer division, float-to-int casts) runs lane by lane. */
#include "emit_c_vector.h"

#include <inttypes.h>
#include <string.h>

/* ---- types and helpers, instantiated once per source ---- */

static bool need(cg *E, const char *key) {
  for (int i = 0; i < E->nhelpers; i++)
    if (!strcmp(E->helper_keys[i], key)) return false;
  if (E->nhelpers == E->cap_helpers) {
    int cap = E->cap_helpers ? 2 * E->cap_helpers : 16;
    const char **k = pk_alloc(E->ctx, sizeof *k * (size_t)cap);
    if (E->nhelpers) memcpy(k, E->helper_keys, sizeof *k * (size_t)E->nhelpers);
    E->helper_keys = k;
    E->cap_helpers = cap;
  }
  E->helper_keys[E->nhelpers++] = pk_strdup(E->ctx, key);
  return true;
}

static void need_type(cg *E, const char *s, const char *t, int n) {
  if (need(E, pk_sprintf(E->ctx, "type %s %d", s, n)))
    pk_strbuf_printf(&E->helpers, "PK_VEC_TYPE(%s, %s, %d)\n", s, t, n);
}

static void need_mask(cg *E, int n) {
  need_type(E, "i32", "int32_t", n);
  if (need(E, pk_sprintf(E->ctx, "mask %d", n))) pk_strbuf_printf(&E->helpers, "PK_VEC_MASK(%d)\n", n);
}

const char *cg_vec_type(cg *E, pkrt_dtype t, int n) {
  need_mask(E, n);
  if (t == PKRT_DTYPE_BOOL) return pk_sprintf(E->ctx, "pk_i32x%d", n);
  const char *s = cg_tsuffix(t);
  bool wide = pkrt_dtype_size(t) == 8;
  if (wide) need_type(E, "i64", "int64_t", n);
  need_type(E, s, cg_ctype(t), n);
  if (pk_dtype_is_int(t)) need_type(E, wide ? "u64" : "u32", wide ? "uint64_t" : "uint32_t", n);
  if (need(E, pk_sprintf(E->ctx, "family %s %d", s, n)))
    pk_strbuf_printf(&E->helpers, "PK_VEC_FAMILY(%s, %s, %d, %s)\n", s, cg_ctype(t), n,
                     wide ? "i64" : "i32");
  return pk_sprintf(E->ctx, "pk_%sx%d", s, n);
}

/* ---- parts ---- */

const char *cg_part_name(cg *E, const char *base, int part) {
  return E->vl->g.parts == 1 ? base : pk_sprintf(E->ctx, "%s_%d", base, part);
}

int vx_lanes_in(cg *E, int part) {
  const cg_vgeom *g = &E->vl->g;
  return part < g->parts - 1 ? g->part_lanes : g->lanes - (g->parts - 1) * g->part_lanes;
}

const char *vx_type(cg *E, pkrt_dtype t) { return cg_vec_type(E, t, E->vl->g.part_lanes); }

static const char *vx_helper(cg *E, const char *what, pkrt_dtype t) {
  vx_type(E, t);
  return pk_sprintf(E->ctx, "pk_%s_%sx%d", what, cg_tsuffix(t), E->vl->g.part_lanes);
}

/* Declares a vector value from its parts' texts. */
static vx define(cg *E, pkrt_dtype t, const char **parts) {
  const char *name = cg_fresh(E, "x"), *vt = vx_type(E, t);
  for (int p = 0; p < E->vl->g.parts; p++)
    cg_line(E, "const %s %s = %s;", vt, cg_part_name(E, name, p), parts[p]);
  return (vx){true, name};
}

static bool simple_text(const char *s) {
  return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") == strlen(s);
}

/* A scalar used by several parts or lanes is computed once. */
vx vx_scalar(cg *E, vx x, pkrt_dtype t) {
  if (x.vec || simple_text(x.s)) return x;
  const char *name = cg_fresh(E, "s");
  cg_line(E, "const %s %s = %s;", cg_ctype(t), name, x.s);
  return (vx){false, name};
}

const char *vx_part(cg *E, vx x, pkrt_dtype t, int p) {
  if (x.vec) return cg_part_name(E, x.s, p);
  int n = E->vl->g.part_lanes;
  if (t == PKRT_DTYPE_BOOL) return pk_sprintf(E->ctx, "pk_vbcm_%d(%s)", n, x.s);
  return pk_sprintf(E->ctx, "%s(%s)", vx_helper(E, "vbc", t), x.s);
}

/* Lane pk_l of a value, as a scalar of its type (a mask lane as 0 or 1). */
static const char *lane_of(cg *E, vx x, pkrt_dtype t, int p) {
  if (!x.vec) return x.s;
  const char *v = cg_part_name(E, x.s, p);
  return pk_sprintf(E->ctx, t == PKRT_DTYPE_BOOL ? "(%s[pk_l] != 0)" : "%s[pk_l]", v);
}

/* ---- masks ---- */

const char *vx_any(cg *E, const char *mask) {
  pk_strbuf sb;
  pk_strbuf_init(&sb);
  for (int p = 0; p < E->vl->g.parts; p++)
    pk_strbuf_printf(&sb, "%spk_any_%d(%s, %d)", p ? " || " : "", E->vl->g.part_lanes,
                     cg_part_name(E, mask, p), vx_lanes_in(E, p));
  return pk_strbuf_finish(E->ctx, &sb);
}

/* m & c, or m & ~c: the lanes of m where c holds (or not). */
const char *vx_mask_and(cg *E, const vmask *m, vx c, bool negate) {
  if (!negate && c.vec && (!m || !m->name)) return c.s;
  const char *parts[CG_MAX_LANES];
  for (int p = 0; p < E->vl->g.parts; p++) {
    const char *cp = vx_part(E, c, PKRT_DTYPE_BOOL, p);
    const char *cn = negate ? pk_sprintf(E->ctx, "~%s", cp) : cp;
    parts[p] = m && m->name ? pk_sprintf(E->ctx, "%s & %s", cg_part_name(E, m->name, p), cn) : cn;
  }
  return define(E, PKRT_DTYPE_BOOL, parts).s;
}

/* ---- loads ---- */

/* A scalar expression that only the lanes of m evaluate: its loads are guarded unless m is
 * known to have an active lane (an IF emitted `if (pk_any(m))` around it). */
static vx uniform(cg *E, const pk_lexpr *e, const vmask *m) {
  const char *saved = E->load_guard;
  if (m && m->name && !m->any_known) E->load_guard = pk_sprintf(E->ctx, "(%s)", vx_any(E, m->name));
  vx x = {false, cg_x(E, e)};
  E->load_guard = saved;
  return x;
}

/* Part `part` of a register tile access: (lane 0's element) / part_lanes + part. */
const char *vx_tile_elem(cg *E, const pk_lbuf *b, const pk_lexpr *index, int part) {
  cg_affine a;
  PK_ASSERT(cg_affine_of(E, index, &a)); /* cg_vector_tile_lanes checked it */
  const pk_stmt *loop = E->vl->loop;
  int pl = E->vl->g.part_lanes;
  cg_affine q = {0};
  q.c0 = (a.c0 + loop->min->ival) / pl + part;
  for (int i = 0; i < a.n; i++)
    if (a.t[i].var != loop->var) q.t[q.n++] = (cg_term){a.t[i].coef / pl, a.t[i].var, NULL};
  return pk_sprintf(E->ctx, "%s[%s]", b->name, cg_affine_text(E, &q));
}

/* Whole-vector reads of per-lane buffers and tiles, guarded like a scalar load. */
static vx load_vectors(cg *E, const pk_lexpr *e, const vmask *m) {
  const pk_lbuf *b = e->buf;
  const char *parts[CG_MAX_LANES];
  const char *guard = m && m->name && !m->any_known ? vx_any(E, m->name) : NULL;
  bool private = E->buf_kind[b->id] == CG_BUF_PRIVATE;
  const char *at = private ? cg_index(E, e->args[0]) : NULL;
  for (int p = 0; p < E->vl->g.parts; p++) {
    const char *x = !private ? vx_tile_elem(E, b, e->args[0], p)
                    : E->vl->g.parts == 1 ? pk_sprintf(E->ctx, "%s[%s]", b->name, at)
                                          : pk_sprintf(E->ctx, "%s[%s][%d]", b->name, at, p);
    parts[p] = guard ? pk_sprintf(E->ctx, "(%s ? %s : %s(0))", guard, x, vx_helper(E, "vbc", b->dtype))
                     : x;
  }
  return define(E, b->dtype, parts);
}

/* Lane by lane: value[pk_l] = text(pk_l) for the lanes of m. */
static vx per_lane(cg *E, pkrt_dtype t, const vmask *m, const char *(*text)(cg *, int, void *),
                   void *arg) {
  const char *name = cg_fresh(E, "x"), *vt = vx_type(E, t);
  for (int p = 0; p < E->vl->g.parts; p++) {
    const char *v = cg_part_name(E, name, p);
    cg_line(E, "%s %s = {0};", vt, v);
    const char *when =
        m && m->name ? pk_sprintf(E->ctx, "if (%s[pk_l]) ", cg_part_name(E, m->name, p)) : "";
    cg_line(E, "for (int pk_l = 0; pk_l < %d; ++pk_l) %s%s[pk_l] = %s;", vx_lanes_in(E, p), when, v,
            text(E, p, arg));
  }
  return (vx){true, name};
}

/* A scalar expression rendered for lane pk_l of part p (the counter becomes lane 0's value
 * plus the lane number): gathers, scatters. */
const char *vx_lane_text(cg *E, int p, const pk_lexpr *e, bool as_index) {
  cg_lane lane = {p};
  const cg_lane *saved = E->lane;
  const char *saved_guard = E->load_guard;
  E->lane = &lane;
  E->load_guard = NULL;
  const char *x = as_index ? cg_index(E, e) : cg_x(E, e);
  E->lane = saved;
  E->load_guard = saved_guard;
  return x;
}

static const char *gather_text(cg *E, int p, void *arg) { return vx_lane_text(E, p, arg, false); }

static vx load(cg *E, const pk_lexpr *e, const vmask *m) {
  const pk_lbuf *b = e->buf;
  if (E->buf_kind[b->id] != CG_BUF_PLAIN) return load_vectors(E, e, m);
  cg_affine a;
  int64_t c;
  if (!cg_lane_affine(E, e->args[0], &a, &c)) return per_lane(E, b->dtype, m, gather_text, (void *)e);
  const char *base = cg_affine_text(E, &a), *parts[CG_MAX_LANES];
  for (int p = 0; p < E->vl->g.parts; p++) {
    int64_t off = (int64_t)p * E->vl->g.part_lanes * c;
    const char *at = off ? pk_sprintf(E->ctx, "%s + %" PRId64, base, off) : base;
    int n = vx_lanes_in(E, p);
    if (m && m->name) /* masked: the bounds of the buffer decide if a whole vector is safe */
      parts[p] = pk_sprintf(E->ctx, "%s(%s, %s, %" PRId64 ", %" PRId64 ", %s, %d)",
                            vx_helper(E, "vldsm", b->dtype), b->name, at, c, b->numel,
                            cg_part_name(E, m->name, p), n);
    else if (c == 1 && n == E->vl->g.part_lanes)
      parts[p] = pk_sprintf(E->ctx, "%s(&%s[%s], %d)", vx_helper(E, "vld", b->dtype), b->name, at, n);
    else if (c == 1)
      parts[p] = pk_sprintf(E->ctx, "%s(%s, %s, %" PRId64 ", %d)", vx_helper(E, "vldp", b->dtype),
                            b->name, at, b->numel, n);
    else if (c == 2) /* two loads and a permute where the span is inside the buffer */
      parts[p] = pk_sprintf(E->ctx, "%s(%s, %s, 2, %" PRId64 ", %d)", vx_helper(E, "vldsb", b->dtype),
                            b->name, at, b->numel, n);
    else
      parts[p] = pk_sprintf(E->ctx, "%s(&%s[%s], %" PRId64 ", %d)", vx_helper(E, "vlds", b->dtype),
                            b->name, at, c, n);
  }
  return define(E, b->dtype, parts);
}

/* ---- operators ---- */

/* The unsigned vector of an integer type's width (instantiated with the signed one). */
static const char *unsigned_type(cg *E, pkrt_dtype t) {
  vx_type(E, t);
  return pk_sprintf(E->ctx, "pk_u%sx%d", pkrt_dtype_size(t) == 8 ? "64" : "32", E->vl->g.part_lanes);
}

typedef struct lane_op {
  const pk_lexpr *e;
  vx args[3];
} lane_op;

static const char *lane_op_text(cg *E, int p, void *arg) {
  lane_op *op = arg;
  const char *args[3] = {"0", "0", "0"};
  for (int i = 0; i < op->e->nargs; i++) args[i] = lane_of(E, op->args[i], op->e->args[i]->dtype, p);
  return cg_op_text(E, op->e, args);
}

/* An operator with no vector form: its operands as vectors, the operator lane by lane. */
static vx op_per_lane(cg *E, const pk_lexpr *e, const vx *args) {
  lane_op op = {e, {{0}}};
  for (int i = 0; i < e->nargs; i++) op.args[i] = vx_scalar(E, args[i], e->args[i]->dtype);
  return per_lane(E, e->dtype, NULL, lane_op_text, &op);
}

static const char *cmp_text(cg *E, pkrt_dtype operand, const char *a, const char *op, const char *b) {
  int n = E->vl->g.part_lanes;
  if (operand != PKRT_DTYPE_BOOL && pkrt_dtype_size(operand) == 8)
    return pk_sprintf(E->ctx, "__builtin_convertvector((pk_i64x%d)(%s %s %s), pk_i32x%d)", n, a, op,
                      b, n);
  return pk_sprintf(E->ctx, "(pk_i32x%d)(%s %s %s)", n, a, op, b);
}

static const char *c_compare(pk_eop op) {
  static const char *const ops[] = {"<", "<=", ">", ">=", "==", "!="};
  return ops[op - PK_EOP_LT];
}

/* c * lane + A0 op other, lane 0's value A0 and other the same in every lane, becomes
 * c * (0, 1, ...) op clamp(other - A0) in int32: one compare however wide the index. */
static vx lane_compare(cg *E, const pk_lexpr *e, int side, int64_t c, const vmask *m) {
  const char *a0 = cg_index(E, e->args[side]);
  vx other = uniform(E, e->args[1 - side], m);
  const char *d = cg_fresh(E, "s");
  int n = E->vl->g.part_lanes;
  cg_line(E, "const int32_t %s = pk_clamp32((%s) - (%s));", d, other.s, a0);
  const char *parts[CG_MAX_LANES], *op = c_compare(e->op);
  const char *bd = pk_sprintf(E->ctx, "%s(%s)", vx_helper(E, "vbc", PKRT_DTYPE_I32), d);
  for (int p = 0; p < E->vl->g.parts; p++) {
    const char *lanes = pk_sprintf(E->ctx, "pk_vlanes_%d(%d)", n, p * n);
    if (c != 1) lanes = pk_sprintf(E->ctx, "(%s * %" PRId64 ")", lanes, c);
    parts[p] = side == 0 ? pk_sprintf(E->ctx, "(pk_i32x%d)(%s %s %s)", n, lanes, op, bd)
                         : pk_sprintf(E->ctx, "(pk_i32x%d)(%s %s %s)", n, bd, op, lanes);
  }
  return define(E, PKRT_DTYPE_BOOL, parts);
}

static vx logic(cg *E, const pk_lexpr *e, const vmask *m) {
  vx a = vexpr(E, e->args[0], m);
  bool and = e->op == PK_EOP_AND;
  /* the right side runs only where the left did not decide: its loads are masked */
  vmask right = {m ? m->name : NULL, m ? m->any_known : true};
  if (cg_has_load(e->args[1])) right = (vmask){vx_mask_and(E, m, a, !and), false};
  vx b = vexpr(E, e->args[1], &right);
  const char *parts[CG_MAX_LANES];
  for (int p = 0; p < E->vl->g.parts; p++)
    parts[p] = pk_sprintf(E->ctx, "(%s %s %s)", vx_part(E, a, PKRT_DTYPE_BOOL, p), and ? "&" : "|",
                          vx_part(E, b, PKRT_DTYPE_BOOL, p));
  return define(E, PKRT_DTYPE_BOOL, parts);
}

static vx binary(cg *E, const pk_lexpr *e, const vmask *m) {
  int side;
  int64_t c;
  if (e->op == PK_EOP_AND || e->op == PK_EOP_OR) return logic(E, e, m);
  if (cg_lane_compare(E, e, &side, &c)) return lane_compare(E, e, side, c, m);
  pkrt_dtype t = e->dtype, operand = e->args[0]->dtype;
  vx args[2] = {vx_scalar(E, vexpr(E, e->args[0], m), operand),
                vx_scalar(E, vexpr(E, e->args[1], m), operand)};
  bool is_float = pk_dtype_is_float(operand);
  const char *op = NULL, *helper = NULL;
  bool wrap = false;
  switch (e->op) {
  case PK_EOP_ADD: op = "+"; wrap = !is_float && !e->index_math; break;
  case PK_EOP_SUB: op = "-"; wrap = !is_float && !e->index_math; break;
  case PK_EOP_MUL: op = "*"; wrap = !is_float && !e->index_math; break;
  case PK_EOP_DIV: if (is_float) op = "/"; break; /* integer floor division: per lane */
  case PK_EOP_MIN: helper = "vmin"; break;
  case PK_EOP_MAX: helper = "vmax"; break;
  case PK_EOP_LT: case PK_EOP_LE: case PK_EOP_GT: case PK_EOP_GE: case PK_EOP_EQ: case PK_EOP_NE: {
    const char *parts[CG_MAX_LANES];
    for (int p = 0; p < E->vl->g.parts; p++)
      parts[p] = cmp_text(E, operand, vx_part(E, args[0], operand, p), c_compare(e->op),
                          vx_part(E, args[1], operand, p));
    return define(E, PKRT_DTYPE_BOOL, parts);
  }
  default: break;
  }
  if (!op && !helper) return op_per_lane(E, e, args);
  const char *parts[CG_MAX_LANES];
  const char *ut = wrap ? unsigned_type(E, t) : NULL;
  for (int p = 0; p < E->vl->g.parts; p++) {
    const char *a = vx_part(E, args[0], t, p), *b = vx_part(E, args[1], t, p);
    if (helper) parts[p] = pk_sprintf(E->ctx, "%s(%s, %s)", vx_helper(E, helper, t), a, b);
    /* wrapping integer arithmetic: unsigned vectors wrap, signed ones would be UB */
    else if (wrap)
      parts[p] = pk_sprintf(E->ctx, "(%s)((%s)%s %s (%s)%s)", vx_type(E, t), ut, a, op, ut, b);
    else parts[p] = pk_sprintf(E->ctx, "(%s %s %s)", a, op, b);
  }
  return define(E, t, parts);
}

static vx unary(cg *E, const pk_lexpr *e, const vmask *m) {
  pkrt_dtype t = e->dtype;
  vx a = vexpr(E, e->args[0], m);
  const char *parts[CG_MAX_LANES];
  bool wrap = e->op == PK_EOP_NEG && pk_dtype_is_int(t) && !e->index_math;
  const char *ut = wrap ? unsigned_type(E, t) : NULL;
  for (int p = 0; p < E->vl->g.parts; p++) {
    const char *x = vx_part(E, a, e->args[0]->dtype, p);
    if (e->op == PK_EOP_NOT) parts[p] = pk_sprintf(E->ctx, "~%s", x);
    else if (wrap) parts[p] = pk_sprintf(E->ctx, "(%s)(-(%s)%s)", vx_type(E, t), ut, x);
    else parts[p] = pk_sprintf(E->ctx, "(-%s)", x);
  }
  return define(E, t, parts);
}

/* Both sides are computed and blended: side effects are only loads, and those run masked
 * by their side's lanes, as a lazy select would run them. */
static vx select_(cg *E, const pk_lexpr *e, const vmask *m) {
  pkrt_dtype t = e->dtype;
  vx c = vx_scalar(E, vexpr(E, e->args[0], m), PKRT_DTYPE_BOOL);
  vmask mt = {m ? m->name : NULL, m ? m->any_known : true}, mf = mt;
  if (cg_has_load(e->args[1])) mt = (vmask){vx_mask_and(E, m, c, false), false};
  if (cg_has_load(e->args[2])) mf = (vmask){vx_mask_and(E, m, c, true), false};
  vx a = vx_scalar(E, vexpr(E, e->args[1], &mt), t), b = vx_scalar(E, vexpr(E, e->args[2], &mf), t);
  const char *parts[CG_MAX_LANES];
  for (int p = 0; p < E->vl->g.parts; p++) {
    const char *cp = vx_part(E, c, PKRT_DTYPE_BOOL, p), *ap = vx_part(E, a, t, p);
    const char *bp = vx_part(E, b, t, p);
    if (t == PKRT_DTYPE_BOOL) parts[p] = pk_sprintf(E->ctx, "((%s & %s) | (~%s & %s))", cp, ap, cp, bp);
    else parts[p] = pk_sprintf(E->ctx, "%s(%s, %s, %s)", vx_helper(E, "vsel", t), cp, ap, bp);
  }
  return define(E, t, parts);
}

static vx cast(cg *E, const pk_lexpr *e, const vmask *m) {
  pkrt_dtype from = e->args[0]->dtype, to = e->dtype;
  vx a = vexpr(E, e->args[0], m);
  const char *parts[CG_MAX_LANES];
  if (from == PKRT_DTYPE_BOOL && pk_dtype_is_float(to)) { /* a ReLU's gradient: mask ? 1 : 0 */
    for (int p = 0; p < E->vl->g.parts; p++)
      parts[p] = pk_sprintf(E->ctx, "%s(%s, %s(1), %s(0))", vx_helper(E, "vsel", to),
                            vx_part(E, a, from, p), vx_helper(E, "vbc", to), vx_helper(E, "vbc", to));
    return define(E, to, parts);
  }
  if (from == PKRT_DTYPE_BOOL || (pk_dtype_is_int(to) && pk_dtype_is_float(from)))
    return op_per_lane(E, e, &a); /* 0/1 from masks; saturating float-to-int */
  for (int p = 0; p < E->vl->g.parts; p++)
    parts[p] = pk_sprintf(E->ctx, "__builtin_convertvector(%s, %s)", vx_part(E, a, from, p),
                          vx_type(E, to));
  return define(E, to, parts);
}

static vx lane_counter(cg *E, const pk_lvar *v) {
  const char *parts[CG_MAX_LANES];
  int n = E->vl->g.part_lanes;
  const char *vt = vx_type(E, PKRT_DTYPE_I64);
  for (int p = 0; p < E->vl->g.parts; p++)
    parts[p] = pk_sprintf(E->ctx, "(%s(%s + %d) + __builtin_convertvector(pk_vlanes_%d(0), %s))",
                          vx_helper(E, "vbc", PKRT_DTYPE_I64), v->name, p * n, n, vt);
  return define(E, PKRT_DTYPE_I64, parts);
}

/* exp and sigmoid of f32 lanes: the prelude's polynomial (PK_VEC_EXP_F32), not libm per lane. */
static vx vector_exp(cg *E, const pk_lexpr *e, vx a) {
  vx_type(E, PKRT_DTYPE_F32);
  int n = E->vl->g.part_lanes;
  if (need(E, pk_sprintf(E->ctx, "exp f32 %d", n))) pk_strbuf_printf(&E->helpers, "PK_VEC_EXP_F32(%d)\n", n);
  const char *fn = e->op == PK_EOP_EXP ? "vexp" : "vsigmoid", *parts[CG_MAX_LANES];
  for (int p = 0; p < E->vl->g.parts; p++)
    parts[p] = pk_sprintf(E->ctx, "%s(%s)", vx_helper(E, fn, PKRT_DTYPE_F32), vx_part(E, a, PKRT_DTYPE_F32, p));
  return define(E, PKRT_DTYPE_F32, parts);
}

vx vexpr(cg *E, const pk_lexpr *e, const vmask *m) {
  if (E->status != PK_OK) return (vx){false, "0"};
  if (!cg_vec_of(E, e)) return uniform(E, e, m);
  switch (e->kind) {
  case PK_LX_VAR:
    if (e->var == E->vl->loop->var) return lane_counter(E, e->var);
    return (vx){true, e->var->name};
  case PK_LX_LOAD: return load(E, e, m);
  case PK_LX_UNARY: return unary(E, e, m);
  case PK_LX_BINARY: return binary(E, e, m);
  case PK_LX_SELECT: return select_(E, e, m);
  case PK_LX_CAST: return cast(E, e, m);
  case PK_LX_CALL: {
    vx args[3] = {{0}};
    for (int i = 0; i < e->nargs && i < 3; i++) args[i] = vexpr(E, e->args[i], m);
    if (e->dtype == PKRT_DTYPE_F32 && (e->op == PK_EOP_EXP || e->op == PK_EOP_SIGMOID))
      return vector_exp(E, e, args[0]);
    return op_per_lane(E, e, args); /* libm has no vector form GCC can call without -ffast-math */
  }
  default: break;
  }
  PK_ASSERT(!"a literal that differs by lane");
  return (vx){false, "0"};
}
