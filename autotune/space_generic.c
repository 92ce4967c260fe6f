/* space_generic.c — the templates for reductions (rfactor into vector lanes, or the
 * reduction moved outside a vectorized spatial loop) and for injective programs (fused,
 * vectorized, unrolled loops), and the shaping of injective stages every template uses. */
#include <string.h>

#include "space_impl.h"

#define N_(base, suffix) space_name(s, base, suffix)

pk_status space_schedule_injective(pk_schedule *s, const pk_stage *st, int64_t vector,
                                   int64_t unroll, bool parallel, bool fuse, bool strict) {
  if (st->attach != PK_ATTACH_ROOT || st->tensor->body->kind == PK_EXPR_REDUCE) return PK_OK;
  if (st->tensor->dom_ndim) return PK_OK; /* a scatter_add keeps its fixed serial schedule */
  const char *name = st->name;
  if (fuse)
    while (st->nleaf > 1) /* st is re-read after each step: the leaves change */
      SPACE_TRY(pk_sched_fuse(s, name, st->leaf[0]->name, st->leaf[1]->name));
  const pk_iter *inner = st->leaf[st->nleaf - 1];
  const char *in = inner->name, *outside = in;
  if (vector > 1 && (strict || inner->extent >= vector)) {
    SPACE_TRY(pk_sched_split(s, name, in, vector));
    SPACE_TRY(pk_sched_vectorize(s, name, N_(in, ".i")));
    outside = N_(in, ".o");
  }
  if (unroll > 1) {
    const pk_iter *it = pk_sched_find_iter(st, outside);
    if (strict || (it && it->extent >= unroll)) SPACE_TRY(pk_sched_unroll(s, name, outside, unroll));
  }
  if (parallel && (strict || st->leaf[0]->kind == PK_LOOP_SERIAL))
    SPACE_TRY(pk_sched_parallel(s, name, st->leaf[0]->name));
  return PK_OK;
}

/* The interleave of a strided conv's dX phases reads phase x mod s at row x / s: each dim
 * f times the phase's (f the stride) is split by f and the inner part fully unrolled, so
 * the phase tests and x / s fold to constants and plain indices. Vectorizing the row
 * instead computes x mod s and x / s per lane and gathers (22x slower on MobileNetV2's
 * first strided depthwise dX). */
pk_status space_schedule_interleave(pk_schedule *s, const pk_stage *st, const pk_te_tensor *phase,
                                    bool parallel, bool *done) {
  const pk_te_tensor *t = st->tensor;
  *done = false;
  if (st->attach != PK_ATTACH_ROOT || t->body->kind == PK_EXPR_REDUCE || t->dom_ndim ||
      t->ndim != phase->ndim || st->nleaf != t->ndim)
    return PK_OK;
  int64_t f[PK_TE_MAX_DIMS];
  bool any = false;
  for (int d = 0; d < t->ndim; d++) {
    f[d] = (t->shape[d] + phase->shape[d] - 1) / phase->shape[d];
    any |= f[d] > 1;
  }
  if (!any) return PK_OK;
  const char *name = st->name, *root[PK_TE_MAX_DIMS], *order[2 * PK_TE_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) root[d] = st->leaf[d]->name;
  for (int d = 0; d < t->ndim; d++) {
    if (f[d] == 1) {
      order[n++] = root[d];
      continue;
    }
    SPACE_TRY(pk_sched_split(s, name, root[d], f[d]));
    order[n++] = N_(root[d], ".o");
    order[n++] = N_(root[d], ".i");
  }
  SPACE_TRY(pk_sched_reorder(s, name, n, order));
  for (int d = 0; d < t->ndim; d++)
    if (f[d] > 1) SPACE_TRY(pk_sched_unroll(s, name, N_(root[d], ".i"), 0));
  if (parallel) SPACE_TRY(pk_sched_parallel(s, name, order[0]));
  *done = true;
  return PK_OK;
}

/* Names of a schedule's stages at the start (one per compute), kept in the plan. */
typedef struct generic_plan {
  int nstages;
  const char *stage[64];
} generic_plan;

static generic_plan *plan_stages(pk_space *sp) {
  generic_plan *p = pk_alloc(sp->ctx, sizeof *p);
  pk_ctx *tmp = pk_ctx_new();
  pk_schedule *s0 = pk_sched_new(tmp, sp->task->prog);
  for (int i = 0; i < s0->nstages && p->nstages < 64; i++)
    p->stage[p->nstages++] = pk_strdup(sp->ctx, s0->stages[i]->name);
  pk_ctx_free(tmp);
  sp->plan = p;
  return p;
}

static int64_t last_extent(const pk_te_tensor *t) { return t->shape[t->ndim - 1]; }

/* ---- reductions ---- */

enum { RD_VECTOR, RD_RFACTOR, RD_REDUCE_POS, RD_UNROLL, RD_PARALLEL, RD_PHASES, RD_NKNOBS };

/* The constant c of a `x % c` in e whose x uses axis ax (the phase of a strided window's
 * gradient, x = i * s + ...); 0: none. */
static int64_t axis_modulus(const pk_expr *e, const pk_te_axis *ax) {
  if (e->kind == PK_EXPR_BINARY && e->op == PK_EOP_MOD && e->args[1]->kind == PK_EXPR_INT &&
      e->args[1]->ival > 1 && space_uses_axis(e->args[0], ax))
    return e->args[1]->ival;
  for (int i = 0; i < e->nargs; i++) {
    int64_t c = axis_modulus(e->args[i], ax);
    if (c) return c;
  }
  return 0;
}

/* Does some dim of t (a compute) take a phase, dividing its extent? */
static bool has_phases(const pk_te_tensor *t) {
  for (int d = 0; d < t->ndim; d++) {
    int64_t c = axis_modulus(t->body, t->axes[d]);
    if (c && t->shape[d] % c == 0) return true;
  }
  return false;
}

static pk_status reduction_init(pk_space *sp) {
  const pk_te_program *prog = sp->task->prog;
  int64_t max_rf = 0, max_lanes = 1;
  bool any = false;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    if (last_extent(t) > max_lanes) max_lanes = last_extent(t);
    if (t->body->kind != PK_EXPR_REDUCE) continue;
    any = true;
    const pk_te_axis *k = t->body->axes[t->body->naxes - 1];
    max_rf = k->hi - k->lo; /* the last reduction is the main one */
  }
  if (!any) return PK_ERR_UNSUPPORTED;
  plan_stages(sp);
  int64_t lanes[PK_SPACE_MAX_VALUES], rf[PK_SPACE_MAX_VALUES];
  int n = 0;
  rf[n++] = 0;
  for (int64_t f = 4; f <= 64 && f <= max_rf; f *= 2) rf[n++] = f;
  /* lanes run along the innermost spatial axis, or along the rfactor partial sums */
  if (max_rf > max_lanes) max_lanes = max_rf;
  space_add_knob(sp, "vector", lanes, space_vector_values(sp, max_lanes, lanes));
  space_add_knob(sp, "rfactor", rf, n);
  space_add_knob(sp, "reduce_pos", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "unroll", (int64_t[]){1, 2, 4, 8}, 4);
  space_add_knob(sp, "parallel", (int64_t[]){0, 1}, sp->opts.allow_parallel ? 2 : 1);
  bool phases = false;
  for (int i = 0; i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_COMPUTE) phases |= has_phases(prog->tensors[i]);
  space_add_knob(sp, "phases", (int64_t[]){0, 1}, phases ? 2 : 1);
  sp->knobs[RD_PHASES].added_later = true;
  PK_ASSERT(sp->nknobs == RD_NKNOBS);
  return PK_OK;
}

/* rfactor: the last reduce axis split by f, its inner part made a spatial dim of a partial
 * result (S.rf) that runs innermost as f vector lanes; S then sums the f lanes. */
static pk_status reduction_rfactor(pk_schedule *s, const char *S, const int64_t *v) {
  const pk_stage *st = pk_sched_find_stage(s, S);
  int nsp = st->tensor->ndim, nred = st->nroot - nsp;
  const char *k = st->root[nsp + nred - 1]->name;
  SPACE_TRY(pk_sched_split(s, S, k, v[RD_RFACTOR]));
  SPACE_TRY(pk_sched_rfactor(s, S, N_(k, ".i")));
  const char *RF = N_(S, ".rf");
  const pk_stage *rf = pk_sched_find_stage(s, RF);
  const char *lane = rf->root[nsp]->name; /* i<nsp>: the partial index */
  const char *order[PK_TE_MAX_DIMS + 2];
  int n = 0;
  for (int r = 0; r < nred; r++) order[n++] = rf->root[nsp + 1 + r]->name;
  /* reduce_pos 1: the reduction also goes outside the innermost original spatial loop */
  if (v[RD_REDUCE_POS] && nsp >= 1) order[n++] = rf->root[nsp - 1]->name;
  order[n++] = lane;
  SPACE_TRY(pk_sched_reorder(s, RF, n, order));
  if (v[RD_VECTOR] > 1) {
    SPACE_TRY(pk_sched_split(s, RF, lane, v[RD_VECTOR]));
    SPACE_TRY(pk_sched_vectorize(s, RF, N_(lane, ".i")));
  }
  if (v[RD_UNROLL] > 1) SPACE_TRY(pk_sched_unroll(s, RF, rf->root[nsp + nred]->name, v[RD_UNROLL]));
  if (v[RD_PARALLEL]) {
    SPACE_TRY(pk_sched_parallel(s, RF, rf->leaf[0]->name));
    SPACE_TRY(pk_sched_parallel(s, S, st->leaf[0]->name));
  }
  return PK_OK;
}

/* Without rfactor: the reduction innermost (reduce_pos 0: nothing to vectorize there, so a
 * vector width > 1 is refused), or outside the innermost spatial loop, which then runs as
 * vector lanes (reduce_pos 1: sums along a non-innermost axis, pools). */
static pk_status reduction_plain(pk_schedule *s, const char *S, const int64_t *v) {
  const pk_stage *st = pk_sched_find_stage(s, S);
  int nsp = st->tensor->ndim, nred = st->nroot - nsp;
  const char *red[PK_TE_MAX_DIMS];
  for (int r = 0; r < nred; r++) red[r] = st->root[nsp + r]->name;
  const char *in = st->root[nsp - 1]->name;
  if (v[RD_REDUCE_POS]) {
    const char *order[PK_TE_MAX_DIMS + 2];
    int n = 0;
    if (v[RD_VECTOR] > 1) {
      SPACE_TRY(pk_sched_split(s, S, in, v[RD_VECTOR]));
      order[n++] = N_(in, ".o");
      in = N_(in, ".i");
    }
    for (int r = 0; r < nred; r++) order[n++] = red[r];
    order[n++] = in;
    SPACE_TRY(pk_sched_reorder(s, S, n, order));
  }
  if (v[RD_UNROLL] > 1) SPACE_TRY(pk_sched_unroll(s, S, red[nred - 1], v[RD_UNROLL]));
  if (v[RD_VECTOR] > 1) SPACE_TRY(pk_sched_vectorize(s, S, st->leaf[st->nleaf - 1]->name));
  if (v[RD_PARALLEL]) SPACE_TRY(pk_sched_parallel(s, S, st->leaf[0]->name));
  return PK_OK;
}

/* phases 1: a stage whose dims take phases x % c (a strided max-pool's or window's
 * gradient: each output element tests which window taps reach it) has each such dim split
 * by c and its inner part unrolled, and its taps (reductions up to 4 long) unrolled too,
 * so the phase tests fold to constants; serial, where lanes would compute x % c and x / c
 * one by one and gather (ResNet-18's max-pool gradient: 12x faster). */
static pk_status reduction_phases(pk_schedule *s, const pk_stage *st, const int64_t *v) {
  const pk_te_tensor *t = st->tensor;
  const char *name = st->name, *order[3 * PK_TE_MAX_DIMS], *unroll[3 * PK_TE_MAX_DIMS];
  const char *root[2 * PK_TE_MAX_DIMS];
  int n = 0, nu = 0, nroot = st->nroot;
  for (int r = 0; r < nroot; r++) root[r] = st->root[r]->name;
  int64_t ext[2 * PK_TE_MAX_DIMS];
  for (int r = 0; r < nroot; r++) ext[r] = st->root[r]->extent;
  for (int d = 0; d < t->ndim; d++) {
    int64_t c = axis_modulus(t->body, t->axes[d]);
    if (!c || t->shape[d] % c != 0) {
      order[n++] = root[d];
      continue;
    }
    SPACE_TRY(pk_sched_split(s, name, root[d], c));
    order[n++] = N_(root[d], ".o");
    order[n++] = unroll[nu++] = N_(root[d], ".i");
  }
  for (int r = t->ndim; r < nroot; r++) {
    order[n++] = root[r];
    if (ext[r] <= 4) unroll[nu++] = root[r];
  }
  SPACE_TRY(pk_sched_reorder(s, name, n, order));
  for (int i = 0; i < nu; i++) SPACE_TRY(pk_sched_unroll(s, name, unroll[i], 0));
  if (v[RD_PARALLEL]) SPACE_TRY(pk_sched_parallel(s, name, order[0]));
  return PK_OK;
}

/* An elementwise stage of a reduction's program (a norm's result over small images, 8 x C
 * x 4 x 4): its innermost loops fused until they are at least a vector long, so that it is
 * vectorized rather than left to the host compiler, which does not vectorize min/max (a
 * fused ReLU6) at all. */
static pk_status fuse_short_inner(pk_schedule *s, const char *name, int64_t vector) {
  for (;;) {
    const pk_stage *st = pk_sched_find_stage(s, name);
    if (vector < 2 || st->attach != PK_ATTACH_ROOT || st->tensor->dom_ndim || st->nleaf < 2 ||
        st->leaf[st->nleaf - 1]->extent >= vector)
      return PK_OK;
    SPACE_TRY(pk_sched_fuse(s, name, st->leaf[st->nleaf - 2]->name, st->leaf[st->nleaf - 1]->name));
  }
}

static pk_status reduction_apply(const pk_space *sp, pk_schedule *s, const int64_t *v) {
  const generic_plan *p = sp->plan;
  for (int i = 0; i < p->nstages; i++) {
    const pk_stage *st = pk_sched_find_stage(s, p->stage[i]);
    if (v[RD_PHASES] && st->attach == PK_ATTACH_ROOT && !st->tensor->dom_ndim && has_phases(st->tensor))
      SPACE_TRY(reduction_phases(s, st, v));
    else if (st->tensor->body->kind != PK_EXPR_REDUCE) {
      SPACE_TRY(fuse_short_inner(s, p->stage[i], v[RD_VECTOR]));
      st = pk_sched_find_stage(s, p->stage[i]);
      SPACE_TRY(space_schedule_injective(s, st, v[RD_VECTOR], v[RD_UNROLL], v[RD_PARALLEL] != 0, false, false));
    }
    else if (v[RD_RFACTOR])
      SPACE_TRY(reduction_rfactor(s, p->stage[i], v));
    else
      SPACE_TRY(reduction_plain(s, p->stage[i], v));
  }
  return PK_OK;
}

/* The read of e with the most elements (best: the one so far). */
static const pk_expr *largest_read(const pk_expr *e, const pk_expr *best) {
  if (e->kind == PK_EXPR_READ &&
      (!best || pk_te_tensor_numel(e->tensor) > pk_te_tensor_numel(best->tensor)))
    best = e;
  for (int i = 0; i < e->nargs; i++) best = largest_read(e->args[i], best);
  return best;
}

/* Without a preset the host compiler vectorizes a reduction's loops by itself, but not
 * where the body calls exp (softmax, the loss): rows reduced along the innermost axis
 * (softmax, layer norm, the loss) become one vector of partial sums (rfactor), columns
 * reduced along an outer axis (a bias gradient) a vectorized innermost spatial loop with
 * the reduction outside it. The last reduction decides (reduction_init's main one). */
static bool reduction_preset(const pk_space *sp, int64_t *v) {
  const pk_te_program *prog = sp->task->prog;
  const pk_te_tensor *r = NULL;
  for (int i = 0; i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_COMPUTE && prog->tensors[i]->body->kind == PK_EXPR_REDUCE)
      r = prog->tensors[i];
  if (!r || sp->lanes < 2) return false;
  const pk_te_axis *k = r->body->axes[r->body->naxes - 1];
  int64_t L = sp->lanes, ext = k->hi - k->lo, inner = last_extent(r);
  memset(v, 0, RD_NKNOBS * sizeof *v);
  v[RD_UNROLL] = 1;
  v[RD_VECTOR] = space_pick(sp, RD_VECTOR, L);
  v[RD_PARALLEL] = space_parallel_preset(sp, RD_PARALLEL, (double)pk_te_tensor_numel(r) * (double)ext, 1 << 17);
  v[RD_PHASES] = space_pick(sp, RD_PHASES, 1);
  /* the largest operand read along the reduction's rows (a batch norm's sums over N, H, W
   * per channel): lanes across the channels would gather from H*W apart (5-13 GFLOP/s) */
  const pk_expr *big = largest_read(r->body, NULL);
  bool rows = big && big->nargs > 0 && space_uses_axis(big->args[big->nargs - 1], k) &&
              !space_uses_axis(big->args[big->nargs - 1], r->axes[r->ndim - 1]);
  if ((inner == 1 || rows) && ext >= 2 * L) {
    v[RD_RFACTOR] = space_pick(sp, RD_RFACTOR, L);
    return v[RD_RFACTOR] > 1;
  }
  if (inner >= L) {
    v[RD_REDUCE_POS] = 1;
    return true;
  }
  return false;
}

const space_class pk_space_class_reduction = {"reduction", reduction_init, reduction_apply,
                                              reduction_preset};

/* ---- injective programs ---- */

enum { IJ_VECTOR, IJ_FUSE, IJ_UNROLL, IJ_PARALLEL, IJ_NKNOBS };

static pk_status injective_init(pk_space *sp) {
  const pk_te_program *prog = sp->task->prog;
  int64_t max_lanes = 1, numel = 1;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    if (t->body->kind == PK_EXPR_REDUCE) return PK_ERR_UNSUPPORTED;
    if (last_extent(t) > max_lanes) max_lanes = last_extent(t);
    if (pk_te_tensor_numel(t) > numel) numel = pk_te_tensor_numel(t);
  }
  plan_stages(sp);
  int64_t v[PK_SPACE_MAX_VALUES];
  /* fused, the whole tensor is one loop: lanes up to its size */
  space_add_knob(sp, "vector", v, space_vector_values(sp, numel > max_lanes ? numel : max_lanes, v));
  space_add_knob(sp, "fuse", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "unroll", (int64_t[]){1, 2, 4, 8}, 4);
  space_add_knob(sp, "parallel", (int64_t[]){0, 1}, sp->opts.allow_parallel ? 2 : 1);
  PK_ASSERT(sp->nknobs == IJ_NKNOBS);
  return PK_OK;
}

static pk_status injective_apply(const pk_space *sp, pk_schedule *s, const int64_t *v) {
  const generic_plan *p = sp->plan;
  for (int i = 0; i < p->nstages; i++) {
    const pk_stage *st = pk_sched_find_stage(s, p->stage[i]);
    SPACE_TRY(space_schedule_injective(s, st, v[IJ_VECTOR], v[IJ_UNROLL], v[IJ_PARALLEL] != 0,
                                       v[IJ_FUSE] != 0, true));
  }
  return PK_OK;
}

/* Does every read of e either use no axis (a scalar such as the learning rate) or read the
 * point itself, t[i0, ..., iN] of a tensor shaped like t? Then the fused loop reads each
 * operand as contiguous vectors; any other index (a bias broadcast t[i1, 0, 0]) would be a
 * gather with a division per lane. */
static bool reads_pointwise(const pk_expr *e, const pk_te_tensor *t) {
  if (e->kind == PK_EXPR_READ) {
    bool uses = false, same = e->tensor->ndim == t->ndim;
    for (int d = 0; d < e->nargs; d++) {
      const pk_expr *a = e->args[d];
      for (int j = 0; j < t->ndim; j++) uses |= space_uses_axis(a, t->axes[j]);
      same = same && a->kind == PK_EXPR_AXIS && a->axis == t->axes[d] && e->tensor->shape[d] == t->shape[d];
    }
    if (uses && !same) return false;
  }
  for (int i = 0; i < e->nargs; i++)
    if (!reads_pointwise(e->args[i], t)) return false;
  return true;
}

/* Pointwise programs (relu, optimizer updates): one fused loop in vectors of two hardware
 * vectors (or the widest that fits), as they are bound by loads and stores. Others keep
 * the default loop nest, which the host compiler vectorizes along the innermost dim. */
static bool injective_preset(const pk_space *sp, int64_t *v) {
  const pk_te_program *prog = sp->task->prog;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    if (t->kind == PK_TE_COMPUTE && !reads_pointwise(t->body, t)) return false;
  }
  memset(v, 0, IJ_NKNOBS * sizeof *v);
  v[IJ_VECTOR] = space_pick(sp, IJ_VECTOR, 2 * (int64_t)sp->lanes);
  v[IJ_FUSE] = 1;
  v[IJ_UNROLL] = 1;
  double numel = 0;
  for (int i = 0; i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_COMPUTE && pk_te_tensor_numel(prog->tensors[i]) > numel)
      numel = (double)pk_te_tensor_numel(prog->tensors[i]);
  v[IJ_PARALLEL] = space_parallel_preset(sp, IJ_PARALLEL, numel, 1 << 17);
  return true;
}

const space_class pk_space_class_injective = {"injective", injective_init, injective_apply, injective_preset};
