/* lower.c — lowers a TE program with its schedule to one loop-IR kernel: the parameters,
 * the stages' buffers and workspace layout, the checks only lowering can make, the two
 * passes over the stages (lower_stage.c), and names numbered in the order they appear. */
#include "lower_impl.h"

#include <string.h>

#define WORKSPACE_ALIGN 64

stage_lowering *lower_stage_of(lowering *L, const pk_te_tensor *t) {
  if (t->kind != PK_TE_COMPUTE) return NULL;
  const pk_schedule *s = L->s;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i]->tensor == t) return &L->sl[i];
  /* A user's compute whose stage now evaluates a private copy (a step rewrote its body). */
  const pk_te_program *orig = s->orig;
  if (t->id >= 0 && t->id < orig->ntensors && orig->tensors[t->id] == t)
    for (int i = 0; i < s->nstages; i++)
      if (s->stages[i]->scope == PK_SCOPE_GLOBAL && s->stages[i]->param == t->id) return &L->sl[i];
  return NULL;
}

int lower_iter_index(const pk_stage *st, const pk_iter *it) {
  for (int i = 0; i < st->niters; i++)
    if (st->iters[i] == it) return i;
  pk_assert_fail(__FILE__, __LINE__, "iter of another stage");
}

/* ---- attachments ---- */

/* Whether e reads sl's tensor, directly or through a stage inlined into it. */
static bool reads_stage(lowering *L, const pk_expr *e, const stage_lowering *sl, int depth) {
  if (e->kind == PK_EXPR_READ) {
    const stage_lowering *r = lower_stage_of(L, e->tensor);
    if (r == sl) return true;
    if (r && r->st->attach == PK_ATTACH_INLINE && depth < L->s->nstages &&
        reads_stage(L, r->st->tensor->body, sl, depth + 1))
      return true;
  }
  for (int i = 0; i < e->nargs; i++)
    if (reads_stage(L, e->args[i], sl, depth)) return true;
  return false;
}

/* Resolves sl's target and loop. Bound inference sees only the target's reads, so any other
 * reader would find the stage's region missing what it needs. */
static pk_status resolve_attachment(lowering *L, stage_lowering *sl) {
  const pk_schedule *s = L->s;
  const pk_stage *st = sl->st;
  int t = -1;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i] == st->attach_stage) t = i;
  if (t <= sl->order)
    return pk_ctx_fail(L->ctx, PK_ERR_SCHEDULE, "lowering: %s is computed at %s, which is not a later stage",
                       st->name, st->attach_stage ? st->attach_stage->name : "(none)");
  stage_lowering *target = &L->sl[t];
  if (target->st->attach == PK_ATTACH_INLINE)
    return pk_ctx_fail(L->ctx, PK_ERR_SCHEDULE, "lowering: %s is computed at inlined %s", st->name,
                       target->st->name);
  sl->target = target;
  sl->attach_pos = -1;
  for (int p = 0; p < target->st->nleaf; p++)
    if (target->st->leaf[p] == st->attach_iter) sl->attach_pos = p;
  if (sl->attach_pos < 0)
    return pk_ctx_fail(L->ctx, PK_ERR_SCHEDULE, "lowering: %s is computed at '%s', not a loop of %s",
                       st->name, st->attach_iter ? st->attach_iter->name : "(none)", target->st->name);
  /* an inlined stage's reads are its readers' (bound inference walks through it too) */
  for (int i = sl->order + 1; i < s->nstages; i++)
    if (i != t && s->stages[i]->attach != PK_ATTACH_INLINE &&
        reads_stage(L, s->stages[i]->tensor->body, sl, 0))
      return pk_ctx_fail(L->ctx, PK_ERR_SCHEDULE, "lowering: %s is computed at %s but %s reads it too",
                         st->name, target->st->name, s->stages[i]->name);
  return PK_OK;
}

/* First pass, from the last stage back: regions, variables and axis values. */
static pk_status setup_stage(lowering *L, stage_lowering *sl) {
  const pk_stage *st = sl->st;
  const pk_te_tensor *t = st->tensor;
  if (st->attach == PK_ATTACH_INLINE) return PK_OK;
  if (st->attach == PK_ATTACH_ROOT) {
    for (int d = 0; d < t->ndim; d++) {
      sl->region_min[d] = pk_lx_int(L->ctx, 0);
      sl->region_ext[d] = t->shape[d];
    }
  } else {
    pk_status s = resolve_attachment(L, sl);
    if (s != PK_OK) return s;
    const stage_lowering *tg = sl->target;
    sl->in_parallel = tg->in_parallel;
    for (int p = 0; p <= sl->attach_pos; p++)
      sl->in_parallel = sl->in_parallel || tg->st->leaf[p]->kind == PK_LOOP_PARALLEL;
    /* Every thread would compute into the same workspace bytes. */
    if (sl->in_parallel && st->scope == PK_SCOPE_WORKSPACE)
      return pk_ctx_fail(L->ctx, PK_ERR_SCHEDULE,
                         "lowering: workspace stage %s is computed inside a parallel loop", st->name);
    if ((s = bound_infer_region(L, sl)) != PK_OK) return s;
  }
  stage_setup(L, sl);
  return PK_OK;
}

/* A local stage at the root lives for the whole call; past this size its stack array would
 * risk the stack, so it goes to the workspace (which no two threads share at the root). */
#define ROOT_LOCAL_MAX_BYTES (64 * 1024)

/* The spatial dim a stage's innermost vectorized loop walks: -1 when none, or when that
 * loop comes from a fuse or a reduce axis. */
static int vectorized_dim(const pk_stage *st) {
  for (int l = st->nleaf - 1; l >= 0; l--) {
    const pk_iter *it = st->leaf[l];
    if (it->kind != PK_LOOP_VECTORIZED) continue;
    while (it->rel == PK_ITER_SPLIT_OUTER || it->rel == PK_ITER_SPLIT_INNER) it = it->parent;
    if (it->rel != PK_ITER_ROOT) return -1;
    for (int d = 0; d < st->tensor->ndim; d++)
      if (st->root[d] == it) return d;
    return -1;
  }
  return -1;
}

/* A LOCAL buffer is private to the kernel, so its layout is ours to choose: the dim its
 * vector lanes walk goes innermost, so that each vector is one contiguous run and the tile
 * can live in registers (a row-vectorized matmul tile, lanes down C's columns). Row-major
 * otherwise. */
static void local_layout(pk_lbuf *b, int vdim) {
  if (vdim < 0 || vdim == b->ndim - 1) return;
  int64_t stride = b->shape[vdim];
  b->strides[vdim] = 1;
  for (int d = b->ndim - 1; d >= 0; d--) {
    if (d == vdim) continue;
    b->strides[d] = stride;
    stride *= b->shape[d];
  }
}

/* GLOBAL stages write their kernel parameter; the others get a buffer of their region,
 * workspace ones at fixed, aligned offsets (no reuse: every slice lives for the call). */
static pk_status make_buffer(lowering *L, stage_lowering *sl) {
  const pk_stage *st = sl->st;
  if (st->attach == PK_ATTACH_INLINE) return PK_OK;
  if (st->scope == PK_SCOPE_GLOBAL) {
    if (st->param < 0 || st->param >= L->f->nparams || L->s->orig->tensors[st->param]->kind != PK_TE_COMPUTE)
      return pk_ctx_fail(L->ctx, PK_ERR_SCHEDULE, "lowering: %s writes no output parameter", st->name);
    sl->buf = L->f->params[st->param];
    return PK_OK;
  }
  const pk_te_tensor *t = st->tensor;
  pk_mem_scope scope = st->scope;
  sl->buf = pk_lbuf_new(L->ctx, L->f, t->dtype, scope, t->ndim, sl->region_ext);
  if (scope == PK_SCOPE_LOCAL) local_layout(sl->buf, vectorized_dim(st));
  if (scope == PK_SCOPE_LOCAL && st->attach == PK_ATTACH_ROOT &&
      sl->buf->numel > ROOT_LOCAL_MAX_BYTES / (int64_t)pkrt_dtype_size(t->dtype))
    sl->buf->scope = scope = PK_SCOPE_WORKSPACE;
  sl->buf->tensor = t;
  sl->relative = true;
  if (scope == PK_SCOPE_WORKSPACE) {
    int64_t at = (L->ws_bytes + WORKSPACE_ALIGN - 1) / WORKSPACE_ALIGN * WORKSPACE_ALIGN;
    sl->buf->ws_offset = at;
    L->ws_bytes = at + sl->buf->numel * (int64_t)pkrt_dtype_size(t->dtype);
  }
  return PK_OK;
}

/* Root nests in stage order; a root stage with its own buffer holds it for the rest. */
static pk_stmt *kernel_body(lowering *L) {
  int n = L->s->nstages, nrest = 0;
  pk_stmt **rest = pk_alloc(L->ctx, sizeof(pk_stmt *) * (size_t)(2 * n + 1) /* + barriers */);
  for (int i = n - 1; i >= 0; i--) {
    stage_lowering *sl = &L->sl[i];
    if (sl->st->attach != PK_ATTACH_ROOT) continue;
    memmove(rest + 1, rest, sizeof(pk_stmt *) * (size_t)nrest++);
    rest[0] = stage_nest(L, sl);
    if (sl->st->scope == PK_SCOPE_SHARED) { /* written by the block's threads, then read */
      memmove(rest + 2, rest + 1, sizeof(pk_stmt *) * (size_t)(nrest - 1));
      rest[1] = pk_st_barrier(L->ctx);
      nrest++;
    }
    if (sl->st->scope != PK_SCOPE_GLOBAL) {
      rest[0] = pk_st_alloc(L->ctx, sl->buf, pk_st_seq(L->ctx, nrest, rest));
      nrest = 1;
    }
  }
  return pk_st_seq(L->ctx, nrest, rest);
}

/* ---- names in order of appearance ---- */

typedef struct renamer {
  pk_ctx *ctx;
  bool *var_seen, *buf_seen; /* by the ids given at creation */
  pk_lvar **vars;
  pk_lbuf **bufs;
  int nvars, nbufs;
} renamer;

static void see_var(renamer *R, pk_lvar *v) {
  if (R->var_seen[v->id]) return;
  R->var_seen[v->id] = true;
  R->vars[R->nvars++] = v;
}

static void see_buf(renamer *R, pk_lbuf *b) {
  if (R->buf_seen[b->id]) return;
  R->buf_seen[b->id] = true;
  R->bufs[R->nbufs++] = b;
}

static void see_expr(renamer *R, const pk_lexpr *e) {
  if (!e) return;
  if (e->kind == PK_LX_VAR) see_var(R, e->var);
  if (e->kind == PK_LX_LOAD) see_buf(R, e->buf);
  for (int i = 0; i < e->nargs; i++) see_expr(R, e->args[i]);
}

static void see_stmt(renamer *R, const pk_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) see_stmt(R, s->stmts[i]);
    return;
  case PK_ST_FOR:
    see_var(R, s->var);
    see_expr(R, s->min);
    see_expr(R, s->extent);
    see_stmt(R, s->body);
    return;
  case PK_ST_IF:
    see_expr(R, s->cond);
    see_stmt(R, s->then_);
    see_stmt(R, s->else_);
    return;
  case PK_ST_STORE:
    see_buf(R, s->buf);
    see_expr(R, s->mask);
    see_expr(R, s->index);
    see_expr(R, s->value);
    return;
  case PK_ST_ALLOC:
    see_buf(R, s->buf);
    see_stmt(R, s->body);
    return;
  case PK_ST_LET:
    see_var(R, s->var);
    see_expr(R, s->value);
    see_stmt(R, s->body);
    return;
  case PK_ST_BARRIER: return;
  }
}

/* Creation order follows the passes (the first one runs backwards); readers of the IR
 * and of the C expect v0 outermost, so variables and buffers are renumbered as they
 * appear, parameters first. */
static void number_in_order(pk_ctx *ctx, pk_lfunc *f) {
  renamer R = {ctx, NULL, NULL, NULL, NULL, 0, 0};
  R.var_seen = pk_alloc(ctx, sizeof(bool) * (size_t)(f->nvars + 1));
  R.buf_seen = pk_alloc(ctx, sizeof(bool) * (size_t)(f->nbufs + 1));
  R.vars = pk_alloc(ctx, sizeof(pk_lvar *) * (size_t)(f->nvars + 1));
  R.bufs = pk_alloc(ctx, sizeof(pk_lbuf *) * (size_t)(f->nbufs + 1));
  for (int i = 0; i < f->nparams; i++) see_buf(&R, f->params[i]);
  see_stmt(&R, f->body);
  for (int i = 0; i < R.nvars; i++) {
    R.vars[i]->id = i;
    R.vars[i]->name = pk_sprintf(ctx, "v%d", i);
  }
  for (int i = 0; i < R.nbufs; i++) {
    R.bufs[i]->id = i;
    R.bufs[i]->name = pk_sprintf(ctx, "b%d", i);
  }
  f->nvars = R.nvars;
  f->nbufs = R.nbufs;
}

/* ---- caller-given strides (views) ---- */

/* Injective layout: sorted by stride, each stride reaches past everything the smaller
 * strides span, so two distinct indices never meet (an output written through a view
 * must not race with itself). Extent-1 dims take any stride. */
static pk_status check_strides(pk_ctx *ctx, const pk_te_tensor *t, const int64_t *st, int64_t *span) {
  int order[PK_TE_MAX_DIMS], n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 1) continue;
    if (st[d] < 1)
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "lowering: tensor t%d: stride %lld of dim %d must be >= 1",
                         t->id, (long long)st[d], d);
    int k = n++;
    while (k > 0 && st[order[k - 1]] > st[d]) { order[k] = order[k - 1]; k--; }
    order[k] = d;
  }
  int64_t reach = 0; /* largest offset the dims so far reach */
  for (int i = 0; i < n; i++) {
    int d = order[i];
    int64_t step;
    if (st[d] <= reach)
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "lowering: tensor t%d: strides overlap (dim %d stride %lld)",
                         t->id, d, (long long)st[d]);
    if (pk_i64_mul(t->shape[d] - 1, st[d], &step) || pk_i64_add(reach, step, &reach))
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "lowering: tensor t%d: strides overflow", t->id);
  }
  *span = reach + 1;
  return PK_OK;
}

static pk_status apply_strides(pk_ctx *ctx, pk_lfunc *f, const pk_te_program *prog,
                               const pk_lower_options *o) {
  if (!o || !o->strides) return PK_OK;
  if (o->nstrides != prog->ntensors)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "lowering: %d strides entries for %d tensors", o->nstrides,
                       prog->ntensors);
  for (int i = 0; i < prog->ntensors; i++) {
    if (!o->strides[i]) continue;
    int64_t span = 0;
    pk_status s = check_strides(ctx, prog->tensors[i], o->strides[i], &span);
    if (s != PK_OK) return s;
    pk_lbuf *b = f->params[i];
    for (int d = 0; d < b->ndim; d++)
      if (b->shape[d] != 1) b->strides[d] = o->strides[i][d]; /* an extent-1 dim's is unchecked */
    b->numel = span; /* what masked vector loads may touch: the view's reach */
  }
  return PK_OK;
}

pk_status pk_sched_lower(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                         const char *name, pk_lfunc **out) {
  return pk_sched_lower_opts(ctx, prog, sched, name, NULL, out);
}

pk_status pk_sched_lower_opts(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                              const char *name, const pk_lower_options *o, pk_lfunc **out) {
  if (!sched) sched = pk_sched_new(ctx, prog); /* the default: a schedule with no steps */
  else if (sched->orig != prog)
    return pk_ctx_fail(ctx, PK_ERR_SCHEDULE, "lowering: the schedule was made for another program");
  pk_lfunc *f = pk_lfunc_new(ctx, name);
  lowering L = {.ctx = ctx, .f = f, .s = sched, .ranges = pk_lranges_new(ctx)};
  L.sl = pk_alloc(ctx, sizeof(stage_lowering) * (size_t)(sched->nstages + 1));

  f->nparams = prog->ntensors;
  f->params = pk_alloc(ctx, sizeof(pk_lbuf *) * (size_t)(prog->ntensors + 1));
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    pk_lbuf *b = pk_lbuf_new(ctx, f, t->dtype, PK_SCOPE_GLOBAL, t->ndim, t->shape);
    b->param = i;
    b->tensor = t;
    f->params[i] = b;
  }
  pk_status st = apply_strides(ctx, f, prog, o);
  if (st != PK_OK) return st;
  for (int i = 0; i < sched->nstages; i++) {
    L.sl[i].st = sched->stages[i];
    L.sl[i].order = i;
  }
  pk_status s = PK_OK;
  for (int i = sched->nstages - 1; i >= 0 && s == PK_OK; i--) s = setup_stage(&L, &L.sl[i]);
  for (int i = 0; i < sched->nstages && s == PK_OK; i++) s = make_buffer(&L, &L.sl[i]);
  if (s != PK_OK) return s;
  f->body = kernel_body(&L);
  lower_partition_loops(ctx, f);
  f->workspace_bytes = (L.ws_bytes + WORKSPACE_ALIGN - 1) / WORKSPACE_ALIGN * WORKSPACE_ALIGN;
  number_in_order(ctx, f);

  f->te_text = pk_te_print(ctx, prog);
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(f->te_text, strlen(f->te_text), hex);
  f->workload = pk_strdup(ctx, hex);
  *out = f;
  return PK_OK;
}
