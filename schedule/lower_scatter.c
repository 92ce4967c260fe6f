/* lower_scatter.c — a scatter_add's fixed loop nest: a nest writing zeros over the whole
 * output, then serial loops over the domain, each point adding its value at its
 * destination, under a bounds test wherever the destination is not provably inside (an
 * index read from data: out-of-range updates are dropped, docs/te.md). The loops stay
 * serial because two points may name the same element. */
#include "lower_impl.h"

static pk_lexpr *zero_of(pk_ctx *ctx, pkrt_dtype t) {
  return pk_dtype_is_float(t) ? pk_lx_float(ctx, 0.0, t) : pk_lx_cast(ctx, t, pk_lx_int(ctx, 0));
}

static pk_lvar *loop_var(lowering *L, int64_t extent) {
  pk_lvar *v = pk_lvar_new(L->ctx, L->f, PKRT_DTYPE_I64);
  pk_lranges_set(L->ranges, v, 0, extent - 1);
  return v;
}

static pk_stmt *zero_nest(lowering *L, stage_lowering *sl) {
  pk_ctx *ctx = L->ctx;
  const pk_te_tensor *t = sl->st->tensor;
  pk_lvar *v[PK_TE_MAX_DIMS];
  pk_lexpr *at[PK_TE_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) {
    v[d] = loop_var(L, t->shape[d]);
    at[d] = pk_lx_var(ctx, v[d]);
  }
  pk_stmt *s = pk_st_store(ctx, sl->buf, lower_buffer_index(L, sl, at), zero_of(ctx, t->dtype));
  for (int d = t->ndim - 1; d >= 0; d--)
    s = pk_st_for(ctx, v[d], pk_lx_int(ctx, 0), pk_lx_int(ctx, t->shape[d]), PK_LOOP_SERIAL, s);
  return s;
}

static pk_lexpr *cmp(pk_ctx *ctx, pk_eop op, pk_lexpr *a, int64_t c) {
  return pk_lx_binary(ctx, op, a, pk_lx_int(ctx, c), PKRT_DTYPE_BOOL);
}

pk_stmt *lower_scatter_nest(lowering *L, stage_lowering *sl) {
  pk_ctx *ctx = L->ctx;
  const pk_te_tensor *t = sl->st->tensor;
  pk_stmt *zero = zero_nest(L, sl);
  pk_lvar *v[PK_TE_MAX_DIMS], *let_var[PK_TE_MAX_DIMS];
  pk_lexpr *let_value[PK_TE_MAX_DIMS], *dst[PK_TE_MAX_DIMS], *inside = NULL;
  for (int d = 0; d < t->dom_ndim; d++) {
    v[d] = loop_var(L, t->dom_shape[d]);
    lower_bind(L, t->dom_axes[d], pk_lx_var(ctx, v[d]));
  }
  int nlet = 0;
  for (int d = 0; d < t->ndim; d++) {
    pk_lexpr *e = lower_value(L, t->dest[d]);
    if (e->dtype != PKRT_DTYPE_I64) e = pk_lx_cast(ctx, PKRT_DTYPE_I64, e);
    int64_t lo, hi;
    if (pk_lx_bounds(L->ranges, e, &lo, &hi) && lo >= 0 && hi < t->shape[d]) {
      dst[d] = e;
      continue;
    }
    /* computed once (it may load an index), then tested and used */
    let_var[nlet] = pk_lvar_new(ctx, L->f, PKRT_DTYPE_I64);
    let_value[nlet] = e;
    dst[d] = pk_lx_var(ctx, let_var[nlet++]);
    pk_lexpr *ok = pk_lx_binary(ctx, PK_EOP_AND, cmp(ctx, PK_EOP_GE, dst[d], 0),
                                cmp(ctx, PK_EOP_LT, dst[d], t->shape[d]), PKRT_DTYPE_BOOL);
    inside = inside ? pk_lx_binary(ctx, PK_EOP_AND, inside, ok, PKRT_DTYPE_BOOL) : ok;
  }
  pk_lexpr *index = lower_buffer_index(L, sl, dst);
  pk_lexpr *sum = pk_lx_binary(ctx, PK_EOP_ADD, pk_lx_load(ctx, sl->buf, index),
                               lower_value(L, t->body), t->dtype);
  pk_stmt *s = pk_st_store(ctx, sl->buf, index, sum);
  if (inside) s = pk_st_if(ctx, inside, s, NULL);
  for (int i = nlet - 1; i >= 0; i--) s = pk_st_let(ctx, let_var[i], let_value[i], s);
  for (int d = t->dom_ndim - 1; d >= 0; d--)
    s = pk_st_for(ctx, v[d], pk_lx_int(ctx, 0), pk_lx_int(ctx, t->dom_shape[d]), PK_LOOP_SERIAL, s);
  lower_unbind(L, t->dom_ndim);
  pk_stmt *both[2] = {zero, s};
  return pk_st_seq(ctx, 2, both);
}
