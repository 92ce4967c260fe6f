/* op_slice.c — slice (a range of one axis, every step-th element of it: partial-channel
 * training saves only that part of an activation) and reshape (a row-major copy to a new
 * shape), with their gradients: dY placed back into zeros, and dY reshaped back. */
#include <stdio.h>
#include <string.h>

#include "op_impl.h"

/* The slice's axis (0..ndim-1), checking the range against the input. */
static pk_status slice_axis(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int *axis) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  pk_status s = pk_op_axis(ctx, op, a->slice_axis, x->ndim, axis);
  if (s != PK_OK) return s;
  int64_t extent = x->shape[*axis];
  if (a->slice_len < 1 || a->slice_start < 0 || a->slice_start >= extent ||
      a->slice_len > extent - a->slice_start)
    return pk_op_fail(ctx, op, "range [%lld, %lld + %lld) does not fit axis %d of extent %lld "
                      "(need start >= 0, len >= 1, start + len <= extent)",
                      (long long)a->slice_start, (long long)a->slice_start,
                      (long long)a->slice_len, *axis, (long long)extent);
  return PK_OK;
}

/* The step (0 means 1) and the number of elements taken: ceil(len / step). */
static int64_t slice_step(const pk_op_attrs *a) { return a->slice_step ? a->slice_step : 1; }
static int64_t slice_count(const pk_op_attrs *a) {
  return (a->slice_len + slice_step(a) - 1) / slice_step(a);
}

pk_status pk_op_text_slice(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  int axis;
  pk_status s = slice_axis(ctx, op, prm, &axis);
  if (s != PK_OK) return s;
  int64_t yshape[PK_TE_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++)
    yshape[d] = d == axis ? slice_count(&prm->attrs) : x->shape[d];
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, yshape);
  pk_strbuf_append(out, "X[");
  for (int d = 0; d < x->ndim; d++) {
    pk_strbuf_printf(out, "%si%d", d ? ", " : "", d);
    if (d == axis && slice_step(&prm->attrs) > 1)
      pk_strbuf_printf(out, " * %lld", (long long)slice_step(&prm->attrs));
    if (d == axis && prm->attrs.slice_start)
      pk_strbuf_printf(out, " + %lld", (long long)prm->attrs.slice_start);
  }
  pk_strbuf_append(out, "])\n");
  return PK_OK;
}

/* dX = dY inside the range, 0 outside (and between the taken elements of a step > 1); the
 * range guards are the facts that keep the read of dY in bounds, each left out where the
 * range reaches that end of the axis. */
pk_status pk_op_grad_slice(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  int axis;
  pk_status s = slice_axis(ctx, op, prm, &axis);
  if (s != PK_OK) return s;
  int64_t start = prm->attrs.slice_start, end = start + prm->attrs.slice_len;
  int64_t step = slice_step(&prm->attrs);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  bool lo = start > 0, hi = end < x->shape[axis], skip = step > 1;
  if (lo || hi || skip) {
    pk_strbuf_append(out, "select(");
    if (lo) pk_strbuf_printf(out, "i%d >= %lld", axis, (long long)start);
    if (hi) pk_strbuf_printf(out, "%si%d < %lld", lo ? " && " : "", axis, (long long)end);
    if (skip) {
      pk_strbuf_printf(out, "%s(i%d", lo || hi ? " && " : "", axis);
      if (start) pk_strbuf_printf(out, " - %lld", (long long)start);
      pk_strbuf_printf(out, ") %% %lld == 0", (long long)step);
    }
    pk_strbuf_append(out, ", ");
  }
  pk_strbuf_append(out, "DY[");
  for (int d = 0; d < x->ndim; d++) {
    pk_strbuf_printf(out, "%s", d ? ", " : "");
    pk_strbuf_printf(out, "%si%d", d == axis && skip ? "(" : "", d);
    if (d == axis && start) pk_strbuf_printf(out, " - %lld", (long long)start);
    if (d == axis && skip) pk_strbuf_printf(out, ") / %lld", (long long)step);
  }
  pk_strbuf_append(out, lo || hi || skip ? "], 0.0))\n" : "])\n");
  (void)input;
  return PK_OK;
}

/* Checks new_shape: rank, extents, and the same element count as the input. */
static pk_status check_reshape(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  char sx[PK_OP_SHAPE_CHARS], sy[PK_OP_SHAPE_CHARS];
  if (a->new_ndim < 1 || a->new_ndim > PK_TE_MAX_DIMS)
    return pk_op_fail(ctx, op, "new_ndim %d out of range (1..%d)", a->new_ndim,
                      PK_TE_MAX_DIMS);
  int64_t nx = 1, ny = 1;
  for (int d = 0; d < x->ndim; d++) nx *= x->shape[d]; /* the TE checker bounds it later */
  for (int d = 0; d < a->new_ndim; d++) {
    if (a->new_shape[d] < 1 || a->new_shape[d] > PK_OP_MAX_EXTENT)
      return pk_op_fail(ctx, op, "new_shape dim %d has extent %lld (must be 1..%lld)", d,
                        (long long)a->new_shape[d], (long long)PK_OP_MAX_EXTENT);
    if (pk_i64_mul(ny, a->new_shape[d], &ny))
      return pk_op_fail(ctx, op, "new_shape %s has more elements than int64 holds",
                        pk_op_shape_str(sy, a->new_ndim, a->new_shape));
  }
  if (nx != ny)
    return pk_op_fail(ctx, op, "new_shape %s has %lld elements but the input %s has %lld",
                      pk_op_shape_str(sy, a->new_ndim, a->new_shape), (long long)ny,
                      pk_op_shape_str(sx, x->ndim, x->shape), (long long)nx);
  return PK_OK;
}

/* Reads `src` (shape sshape) at the point of a compute shaped dshape with the same
 * row-major order: flat = sum i<d> * stride_d, then src index e = flat / sstride_e %
 * sshape_e (the first dim needs no modulo; dims of extent 1 read 0). */
static void emit_row_major_read(pk_strbuf *b, const char *src, int sndim,
                                const int64_t *sshape, int dndim, const int64_t *dshape) {
  pk_strbuf flat;
  pk_strbuf_init(&flat);
  int64_t stride = 1;
  for (int d = dndim - 1; d >= 0; d--) {
    if (dshape[d] != 1) {
      pk_strbuf tmp;
      pk_strbuf_init(&tmp);
      if (stride == 1) pk_strbuf_printf(&tmp, "i%d", d);
      else pk_strbuf_printf(&tmp, "i%d * %lld", d, (long long)stride);
      if (flat.len) pk_strbuf_printf(&tmp, " + %s", flat.data);
      pk_strbuf_free(&flat);
      flat = tmp;
    }
    stride *= dshape[d];
  }
  if (!flat.len) pk_strbuf_append(&flat, "0");
  bool compound = flat.len > 0 && strchr(flat.data, ' ') != NULL;
  pk_strbuf_printf(b, "%s[", src);
  int64_t sstride = stride; /* the total element count; divided down per dim */
  for (int e = 0; e < sndim; e++) {
    sstride /= sshape[e];
    if (e) pk_strbuf_append(b, ", ");
    if (sshape[e] == 1) {
      pk_strbuf_append(b, "0");
      continue;
    }
    bool mod = e > 0 && sstride * sshape[e] < stride; /* dims before it exist */
    if (compound && (sstride != 1 || mod)) pk_strbuf_printf(b, "(%s)", flat.data);
    else pk_strbuf_append(b, flat.data);
    if (sstride != 1) pk_strbuf_printf(b, " / %lld", (long long)sstride);
    if (mod) pk_strbuf_printf(b, " %% %lld", (long long)sshape[e]);
  }
  pk_strbuf_append(b, "]");
  pk_strbuf_free(&flat);
}

pk_status pk_op_text_reshape(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                             pk_strbuf *out) {
  pk_status s = check_reshape(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", a->new_ndim, a->new_shape);
  emit_row_major_read(out, "X", x->ndim, x->shape, a->new_ndim, a->new_shape);
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

pk_status pk_op_grad_reshape(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                             const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  emit_row_major_read(out, "DY", y->ndim, y->shape, x->ndim, x->shape);
  pk_strbuf_append(out, ")\n");
  (void)ctx, (void)op, (void)input;
  return PK_OK;
}
