/* sched_test_values.h — checks that a schedule's program computes what the user's does.
 * The schedule's program is rebuilt from scratch with the public TE constructors
 * (untyped), run through pk_te_check — which re-derives every dtype (compared with the
 * rewriter's) and proves every read in bounds — and evaluated by the interpreter against
 * the original program on the same random inputs. Include after sched_test_util.h. */
#ifndef SCHED_TEST_VALUES_H
#define SCHED_TEST_VALUES_H

#include <math.h>

#include "pk_verify.h"

/* ---- the schedule's program as a standalone, checkable program ---- */

typedef struct rebuild {
  pk_ctx *ctx;
  pk_te_program *q;
  const pk_te_program *from;
  pk_te_tensor **tensor_of; /* by id in from */
  pk_te_axis **reduce_of;   /* by reduce axis id in from, made on first use */
  pk_te_tensor *cur_from, *cur_to;
} rebuild;

static pk_te_axis *reduce_axis_of(rebuild *R, const pk_te_axis *a) {
  if (!R->reduce_of[a->id])
    R->reduce_of[a->id] = pk_te_reduce_axis(R->ctx, R->q, pk_sprintf(R->ctx, "R%d", a->id), a->lo, a->hi);
  return R->reduce_of[a->id];
}

static pk_expr *rebuild_expr(rebuild *R, const pk_expr *e) {
  pk_ctx *ctx = R->ctx;
  pk_expr *args[8];
  for (int i = 0; i < e->nargs; i++) args[i] = rebuild_expr(R, e->args[i]);
  switch (e->kind) {
  case PK_EXPR_INT: return pk_expr_int(ctx, e->ival);
  case PK_EXPR_FLOAT: return pk_expr_float(ctx, e->fval);
  case PK_EXPR_AXIS:
    if (e->axis->reduce) return pk_expr_axis(ctx, reduce_axis_of(R, e->axis));
    if (e->axis->owner != R->cur_from) printf("FAIL rebuild: axis of another tensor\n"), failures++;
    return pk_expr_axis(ctx, R->cur_to->axes[e->axis->id]);
  case PK_EXPR_READ: return pk_expr_read(ctx, R->tensor_of[e->tensor->id], e->nargs, args);
  case PK_EXPR_UNARY: return pk_expr_unary(ctx, e->op, args[0]);
  case PK_EXPR_BINARY: return pk_expr_binary(ctx, e->op, args[0], args[1]);
  case PK_EXPR_SELECT: return pk_expr_select(ctx, args[0], args[1], args[2]);
  case PK_EXPR_CALL: return pk_expr_call(ctx, e->op, e->nargs, args);
  case PK_EXPR_CAST: return pk_expr_cast(ctx, e->dtype, args[0]);
  case PK_EXPR_REDUCE: {
    pk_te_axis *axes[8];
    for (int i = 0; i < e->naxes; i++) axes[i] = reduce_axis_of(R, e->axes[i]);
    return pk_expr_reduce(ctx, e->op, args[0], e->naxes, axes);
  }
  }
  return NULL;
}

static bool same_dtypes(const pk_expr *a, const pk_expr *b) {
  if (a->dtype != b->dtype || a->nargs != b->nargs) return false;
  for (int i = 0; i < a->nargs; i++)
    if (!same_dtypes(a->args[i], b->args[i])) return false;
  return true;
}

/* Tensor ids of s->prog map to positions in the rebuilt program through tensor_of. */
static pk_te_program *rebuild_program(pk_ctx *ctx, const pk_schedule *s, pk_te_tensor ***tensor_of) {
  rebuild R = {.ctx = ctx, .q = pk_te_program_new(ctx), .from = s->prog};
  R.tensor_of = pk_alloc(ctx, (size_t)s->prog->ntensors * sizeof *R.tensor_of);
  R.reduce_of = pk_alloc(ctx, (size_t)(s->prog->nreduce + 1) * sizeof *R.reduce_of);
  for (int i = 0; i < s->prog->ntensors; i++) {
    pk_te_tensor *t = s->prog->tensors[i];
    const char *name = pk_sprintf(ctx, "T%d", i);
    if (t->kind == PK_TE_PLACEHOLDER) {
      R.tensor_of[t->id] = pk_te_placeholder(ctx, R.q, name, t->ndim, t->shape, t->dtype);
      continue;
    }
    pk_te_tensor *c = pk_te_compute(ctx, R.q, name, t->ndim, t->shape, NULL);
    R.cur_from = t;
    R.cur_to = c;
    c->body = rebuild_expr(&R, t->body);
    R.tensor_of[t->id] = c;
  }
  *tensor_of = R.tensor_of;
  return R.q;
}

/* Every compute of the user's program, evaluated through the schedule's program, equals
 * the original (up to reassociation by rfactor, far below f32 tolerance in f64). */
/* NULL when s's program computes what the user's does; else why not. */
static const char *values_differ(pk_ctx *ctx, const pk_schedule *s) {
  pk_te_tensor **tensor_of;
  pk_te_program *q = rebuild_program(ctx, s, &tensor_of);
  if (pk_te_check(ctx, q) != PK_OK) {
    const char *why = pk_sprintf(ctx, "rebuilt program does not check: %s\n%s", pk_ctx_error(ctx), pk_te_print(ctx, q));
    pk_ctx_clear_error(ctx);
    return why;
  }
  for (int i = 0; i < s->prog->ntensors; i++) {
    const pk_te_tensor *t = s->prog->tensors[i];
    if (t->kind == PK_TE_COMPUTE && (t->dtype != tensor_of[t->id]->dtype || !same_dtypes(t->body, tensor_of[t->id]->body)))
      return pk_sprintf(ctx, "dtypes of t%d differ from the checker's: %s", t->id, pk_te_print_expr(ctx, t->body));
  }
  const pk_te_program *p = s->orig;
  pk_te_ref *ref = pk_te_ref_new(ctx, p), *got = pk_te_ref_new(ctx, q);
  pk_te_ref_fill_random(p, ref, 42);
  for (int i = 0; i < p->ntensors; i++) {
    if (p->tensors[i]->kind != PK_TE_PLACEHOLDER) continue;
    pk_te_ref_tensor *from = &ref->tensors[i], *to = &got->tensors[tensor_of[i]->id];
    size_t bytes = (size_t)from->numel * sizeof(double);
    if (from->val) memcpy(to->val, from->val, bytes), memcpy(to->mag, from->mag, bytes);
    if (from->ival) memcpy(to->ival, from->ival, (size_t)from->numel * sizeof(int64_t));
  }
  if (pk_te_interp_run(ctx, p, ref) != PK_OK || pk_te_interp_run(ctx, q, got) != PK_OK) {
    const char *why = pk_sprintf(ctx, "interpreter: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return why;
  }
  for (int i = 0; i < p->ntensors; i++) {
    if (p->tensors[i]->kind != PK_TE_COMPUTE) continue;
    const pk_te_ref_tensor *a = &ref->tensors[i], *b = &got->tensors[tensor_of[i]->id];
    for (int64_t j = 0; j < a->numel; j++) {
      bool same = a->val ? fabs(a->val[j] - b->val[j]) <= 1e-12 * a->mag[j] + 1e-300 : a->ival[j] == b->ival[j];
      if (!same)
        return pk_sprintf(ctx, "t%d[%lld]: %g vs %g", i, (long long)j, a->val ? a->val[j] : (double)a->ival[j],
                          b->val ? b->val[j] : (double)b->ival[j]);
    }
  }
  return NULL;
}

static __attribute__((unused)) void check_same_values(pk_ctx *ctx, const char *name, const pk_schedule *s) {
  const char *why = values_differ(ctx, s);
  check(!why, name, "%s", why ? why : "");
}

#endif
