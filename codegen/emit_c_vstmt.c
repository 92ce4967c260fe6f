/* emit_c_vstmt.c — VECTORIZED loops: the plan (emit_c_vplan.c) accepted, the loop becomes
 * one block per chunk of lanes whose statements run on whole vectors. A condition that
 * differs by lane becomes a mask: statements under it run when some lane is active, stores
 * write only active lanes (lane by lane unless all are active: never load-blend-store on
 * memory other threads may write), and loads under it never read outside their buffer. */
#include "emit_c_vector.h"

#include <inttypes.h>
#include <string.h>

static void vstmt(cg *E, const pk_stmt *s, const vmask *m);

static void vstmt_cb(cg *E, const pk_stmt *s, void *m) { vstmt(E, s, m); }

/* Runs `body` under m & cond (cond a mask), skipped when no lane is active. */
static void under_mask(cg *E, const vmask *m, vx cond, bool negate, const pk_stmt *s,
                       void (*body)(cg *, const pk_stmt *, const vmask *)) {
  vmask inner = {vx_mask_and(E, m, cond, negate), true};
  cg_line(E, "if (%s) {", vx_any(E, inner.name));
  E->indent++;
  body(E, s, &inner);
  E->indent--;
  cg_line(E, "}");
}

static const char *scatter_text(cg *E, int p, const pk_stmt *s) {
  return cg_elem(E, s->buf, vx_lane_text(E, p, s->index, true));
}

static void store(cg *E, const pk_stmt *s, const vmask *m) {
  const pk_lbuf *b = s->buf;
  pkrt_dtype t = b->dtype;
  vx v = vx_scalar(E, vexpr(E, s->value, m), t);
  bool masked = m && m->name;
  int parts = E->vl->g.parts;
  cg_buf_kind kind = E->buf_kind[b->id];
  if (kind != CG_BUF_PLAIN) {
    /* thread-private: a blend is safe here */
    const char *at = kind == CG_BUF_PRIVATE ? cg_index(E, s->index) : NULL;
    for (int p = 0; p < parts; p++) {
      const char *dst = kind == CG_BUF_VECTORS ? vx_tile_elem(E, b, s->index, p)
                        : parts == 1           ? pk_sprintf(E->ctx, "%s[%s]", b->name, at)
                                               : pk_sprintf(E->ctx, "%s[%s][%d]", b->name, at, p);
      const char *val = vx_part(E, v, t, p);
      if (masked)
        val = pk_sprintf(E->ctx, "pk_vsel_%sx%d(%s, %s, %s)", cg_tsuffix(t), E->vl->g.part_lanes,
                         cg_part_name(E, m->name, p), val, dst);
      cg_line(E, "%s = %s;", dst, val);
    }
    return;
  }
  cg_affine a;
  int64_t c;
  if (!cg_lane_affine(E, s->index, &a, &c)) { /* scatter, lane by lane in lane order */
    for (int p = 0; p < parts; p++) {
      const char *when =
          masked ? pk_sprintf(E->ctx, "if (%s[pk_l]) ", cg_part_name(E, m->name, p)) : "";
      const char *val = v.vec ? pk_sprintf(E->ctx, "%s[pk_l]", cg_part_name(E, v.s, p)) : v.s;
      cg_line(E, "for (int pk_l = 0; pk_l < %d; ++pk_l) %s%s = %s;", vx_lanes_in(E, p), when,
              scatter_text(E, p, s), val);
    }
    return;
  }
  const char *base = cg_affine_text(E, &a);
  for (int p = 0; p < parts; p++) {
    int64_t off = (int64_t)p * E->vl->g.part_lanes * c;
    const char *ptr = off ? pk_sprintf(E->ctx, "&%s[%s + %" PRId64 "]", b->name, base, off)
                          : pk_sprintf(E->ctx, "&%s[%s]", b->name, base);
    const char *what = c == 1 ? (masked ? "vstm" : "vst") : (masked ? "vstsm" : "vsts");
    const char *fn = pk_sprintf(E->ctx, "pk_%s_%sx%d", what, cg_tsuffix(t), E->vl->g.part_lanes);
    const char *stride = c == 1 ? "" : pk_sprintf(E->ctx, ", %" PRId64, c);
    const char *mp = masked ? pk_sprintf(E->ctx, ", %s", cg_part_name(E, m->name, p)) : "";
    cg_line(E, "%s(%s%s, %s%s, %d);", fn, ptr, stride, vx_part(E, v, t, p), mp, vx_lanes_in(E, p));
  }
}

static void masked_store(cg *E, const pk_stmt *s, const vmask *m) {
  if (!s->mask) { store(E, s, m); return; }
  vx c = vexpr(E, s->mask, m);
  if (c.vec) { under_mask(E, m, c, false, s, store); return; }
  cg_line(E, "if (%s) {", c.s);
  E->indent++;
  store(E, s, m);
  E->indent--;
  cg_line(E, "}");
}

static void then_branch(cg *E, const pk_stmt *s, const vmask *m) { vstmt(E, s->then_, m); }
static void else_branch(cg *E, const pk_stmt *s, const vmask *m) { vstmt(E, s->else_, m); }

static void vif(cg *E, const pk_stmt *s, const vmask *m) {
  vx c = vexpr(E, s->cond, m);
  if (c.vec) {
    c = vx_scalar(E, c, PKRT_DTYPE_BOOL);
    under_mask(E, m, c, false, s, then_branch);
    if (s->else_) under_mask(E, m, c, true, s, else_branch);
    return;
  }
  cg_line(E, "if (%s) {", c.s);
  E->indent++;
  vstmt(E, s->then_, m);
  E->indent--;
  if (s->else_) {
    cg_line(E, "} else {");
    E->indent++;
    vstmt(E, s->else_, m);
    E->indent--;
  }
  cg_line(E, "}");
}

static void vlet(cg *E, const pk_stmt *s, const vmask *m) {
  pkrt_dtype t = s->var->dtype;
  vx v = vexpr(E, s->value, m);
  cg_line(E, "{");
  E->indent++;
  if (v.vec) {
    PK_ASSERT(E->vl->var_vec[s->var->id]);
    for (int p = 0; p < E->vl->g.parts; p++)
      cg_line(E, "const %s %s = %s;", vx_type(E, t), cg_part_name(E, s->var->name, p),
              cg_part_name(E, v.s, p));
  } else {
    cg_line(E, "const %s %s = %s;", cg_ctype(t), s->var->name, v.s);
  }
  cg_scope_open(E);
  cg_define_var(E, s->var);
  vstmt(E, s->body, m);
  cg_scope_close(E);
  E->indent--;
  cg_line(E, "}");
}

/* A LOCAL allocated inside the loop is one per lane: an array of vectors. */
static void valloc(cg *E, const pk_stmt *s, const vmask *m) {
  const pk_lbuf *b = s->buf;
  const cg_vgeom *g = &E->vl->g;
  cg_line(E, "{");
  E->indent++;
  const char *vt = vx_type(E, b->dtype);
  if (g->parts == 1) cg_line(E, "%s %s[%" PRId64 "]; /* one per lane */", vt, b->name, b->numel);
  else cg_line(E, "%s %s[%" PRId64 "][%d]; /* one per lane */", vt, b->name, b->numel, g->parts);
  /* masked stores blend into it: lanes never written must still hold defined values */
  cg_line(E, "__builtin_memset(%s, 0, sizeof %s);", b->name, b->name);
  E->buf_kind[b->id] = CG_BUF_PRIVATE;
  E->buf_lanes[b->id] = g->part_lanes;
  E->buf_parts[b->id] = g->parts;
  vstmt(E, s->body, m);
  E->buf_kind[b->id] = CG_BUF_PLAIN;
  E->indent--;
  cg_line(E, "}");
}

/* A loop inside the vectorized one (its bounds the same in every lane): scalar counter,
 * vector body. */
static void vfor(cg *E, const pk_stmt *s, const vmask *m) {
  if (s->loop == PK_LOOP_UNROLLED && cg_full_unroll(E, s)) {
    cg_unrolled_loop(E, s, vstmt_cb, (void *)m);
    return;
  }
  cg_for_header(E, s);
  E->indent++;
  cg_scope_open(E);
  cg_define_var(E, s->var);
  vstmt(E, s->body, m);
  cg_scope_close(E);
  E->indent--;
  cg_line(E, "}");
}

static void vstmt(cg *E, const pk_stmt *s, const vmask *m) {
  if (!s || E->status != PK_OK) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) vstmt(E, s->stmts[i], m);
    return;
  case PK_ST_FOR: vfor(E, s, m); return;
  case PK_ST_IF: vif(E, s, m); return;
  case PK_ST_STORE: masked_store(E, s, m); return;
  case PK_ST_ALLOC: valloc(E, s, m); return;
  case PK_ST_LET: vlet(E, s, m); return;
  case PK_ST_BARRIER: PK_ASSERT(!"the plan refuses barriers"); return;
  }
}

/* One block of `vl->g.lanes` lanes starting at counter value lane0. */
static void emit_chunk(cg *E, cg_vloop *vl, const char *lane0) {
  cg_line(E, "{");
  E->indent++;
  cg_line(E, "const int64_t %s = %s; /* lane 0 */", vl->loop->var->name, lane0);
  cg_scope_open(E);
  cg_define_var(E, vl->loop->var);
  E->vl = vl;
  vstmt(E, vl->loop->body, NULL);
  E->vl = NULL;
  cg_scope_close(E);
  E->indent--;
  cg_line(E, "}");
}

void cg_vector_loop(cg *E, const pk_stmt *s) {
  int lanes = cg_vlanes(s);
  if (!lanes) { cg_serial_loop(E, s, "its extent is not a constant"); return; }
  if (E->vl) { cg_serial_loop(E, s, "inside another vectorized loop"); return; }
  cg_vloop vl;
  const char *why;
  if (!cg_vplan(E, s, lanes, &vl, &why)) { cg_serial_loop(E, s, why); return; }
  int64_t extent;
  cg_const_extent(s, &extent);
  int64_t full = extent / lanes, tail = extent % lanes;
  const char *min = cg_x(E, s->min);
  cg_line(E, "/* %s vectorized: %d lanes as %d x %d-lane vectors */", s->var->name, lanes,
          vl.g.parts, vl.g.part_lanes);
  if (full == 1 && tail == 0) {
    emit_chunk(E, &vl, min);
    return;
  }
  if (full > 0) {
    const char *c = cg_fresh(E, "pk_c");
    cg_line(E, "for (int64_t %s = 0; %s < %" PRId64 "; %s += %d) {", c, c, full * lanes, c, lanes);
    E->indent++;
    emit_chunk(E, &vl, pk_sprintf(E->ctx, "(%s) + %s", min, c));
    E->indent--;
    cg_line(E, "}");
  }
  if (tail > 0) {
    cg_vloop last = vl;
    last.g = cg_vgeom_for(E, (int)tail, vl.g.elem_bytes);
    emit_chunk(E, &last, pk_sprintf(E->ctx, "(%s) + %" PRId64, min, full * lanes));
  }
}
