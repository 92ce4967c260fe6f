/* op_adaptive_pool.c — adaptive_avg_pool2d and global_avg_pool2d (adaptive to (1, 1)) with
 * their gradients. Output cell o of an input dim of extent n pooled to m averages input
 * [floor(o n / m), ceil((o + 1) n / m)) (PyTorch's formula); the windows may overlap and
 * differ in size by one. */
#include "op_impl.h"

/* One dim of the windows: output cell o of a dim of extent `in` pooled to `out` reads
 * [start(o), end(o)) with start(o) = floor(o in / out), end(o) = ceil((o + 1) in / out). */
typedef struct adapt {
  int64_t in, out;
  int64_t kmax;   /* the largest window (the reduce axis' extent) */
  bool guard;     /* windows differ in size: reads past end(o) must be guarded */
} adapt;

/* Windows of more than this many outputs get kmax's bound instead of a scan. */
#define ADAPT_SCAN_MAX 65536

static void adapt_init(adapt *a, int64_t in, int64_t out) {
  a->in = in;
  a->out = out;
  if (in % out == 0) { /* every window is in / out long, back to back */
    a->kmax = in / out;
    a->guard = false;
    return;
  }
  if (out > ADAPT_SCAN_MAX) { /* end - start < in / out + 2 */
    a->kmax = in / out + 2 < in ? in / out + 2 : in;
    a->guard = true;
    return;
  }
  int64_t lo = in, hi = 0;
  for (int64_t o = 0; o < out; o++) {
    int64_t n = ((o + 1) * in + out - 1) / out - o * in / out;
    lo = n < lo ? n : lo;
    hi = n > hi ? n : hi;
  }
  a->kmax = hi;
  a->guard = lo != hi;
}

/* The index window element k (a reduce axis) of output cell o (an axis) reads:
 * "k" when out is 1, "o * 3 + k" when windows are back to back, else "o * in / out + k".
 * Equal-size windows need no guard: the largest index is end(out - 1) - 1 = in - 1, which
 * interval arithmetic on this expression finds. */
static void emit_index(pk_strbuf *b, const adapt *a, const char *o, const char *k) {
  if (a->out == 1) pk_strbuf_append(b, k);
  else if (a->in % a->out == 0)
    pk_strbuf_printf(b, "%s * %lld + %s", o, (long long)(a->in / a->out), k);
  else
    pk_strbuf_printf(b, "%s * %lld / %lld + %s", o, (long long)a->in, (long long)a->out, k);
}

/* "idx < in && idx < end(o)" where windows differ (nothing otherwise); appended after " && "
 * unless *first. The first bound is implied by the second but is the one the bounds
 * checker can use (a comparison with a constant). */
static void emit_guard(pk_strbuf *b, const adapt *a, const char *o, const char *k, bool *first) {
  if (!a->guard) return;
  pk_strbuf_append(b, *first ? "" : " && ");
  *first = false;
  emit_index(b, a, o, k);
  pk_strbuf_printf(b, " < %lld && ", (long long)a->in);
  emit_index(b, a, o, k);
  pk_strbuf_printf(b, " < (((%s) + 1) * %lld + %lld) / %lld", o, (long long)a->in,
                   (long long)(a->out - 1), (long long)a->out);
}

/* The size of output cell o's window, end(o) - start(o), an i64 expression. */
static void emit_size(pk_strbuf *b, const adapt *a, const char *o) {
  if (a->in % a->out == 0) {
    pk_strbuf_printf(b, "%lld", (long long)(a->in / a->out));
    return;
  }
  pk_strbuf_printf(b, "((((%s) + 1) * %lld + %lld) / %lld - (%s) * %lld / %lld)", o,
                   (long long)a->in, (long long)(a->out - 1), (long long)a->out, o,
                   (long long)a->in, (long long)a->out);
}

static pk_status adaptive_check(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                int64_t out[2]) {
  const pk_op_input *x = &prm->in[0];
  char buf[PK_OP_SHAPE_CHARS];
  if (x->ndim != 4)
    return pk_op_fail(ctx, op, "input %s must have rank 4 (N, C, H, W)",
                      pk_op_shape_str(buf, x->ndim, x->shape));
  out[0] = out[1] = 1;
  if (op == PK_OP_GLOBAL_AVG_POOL2D) return PK_OK;
  for (int i = 0; i < 2; i++) {
    if (prm->attrs.output_size[i] < 1)
      return pk_op_fail(ctx, op, "output_size (%lld, %lld) must be >= 1 in both dims",
                        (long long)prm->attrs.output_size[0],
                        (long long)prm->attrs.output_size[1]);
    out[i] = prm->attrs.output_size[i];
  }
  return PK_OK;
}

/* Y[n, c, oh, ow] = sum over the window of X / its size (a select guard where windows
 * differ in size). */
pk_status pk_op_text_adaptive_pool(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   pk_strbuf *out) {
  int64_t o[2];
  pk_status s = adaptive_check(ctx, op, prm, o);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  adapt ah, aw;
  adapt_init(&ah, x->shape[2], o[0]);
  adapt_init(&aw, x->shape[3], o[1]);
  int64_t yshape[4] = {x->shape[0], x->shape[1], o[0], o[1]};
  pk_op_emit_placeholder(out, "X", 4, x->shape, x->dtype);
  pk_op_emit_reduce_axis(out, 0, ah.kmax);
  pk_op_emit_reduce_axis(out, 1, aw.kmax);
  pk_op_emit_compute_head(out, "Y", 4, yshape);
  pk_strbuf_append(out, "sum(");
  bool first = true;
  if (ah.guard || aw.guard) pk_strbuf_append(out, "select(");
  emit_guard(out, &ah, "i2", "k0", &first);
  emit_guard(out, &aw, "i3", "k1", &first);
  pk_strbuf_append(out, first ? "X[i0, i1, " : ", X[i0, i1, ");
  emit_index(out, &ah, "i2", "k0");
  pk_strbuf_append(out, ", ");
  emit_index(out, &aw, "i3", "k1");
  pk_strbuf_append(out, first ? "]" : "], 0.0)");
  pk_strbuf_printf(out, " / cast(%s, ", pkrt_dtype_name(x->dtype));
  emit_size(out, &ah, "i2");
  pk_strbuf_append(out, " * ");
  emit_size(out, &aw, "i3");
  pk_strbuf_append(out, "), k0, k1))\n");
  return PK_OK;
}

/* dX[n, c, h, w] = sum of dY / size over the output cells whose windows hold (h, w). Those
 * cells are themselves an adaptive window with the roles swapped: cell o holds h exactly
 * when floor(h m / n) <= o < ceil((h + 1) m / n). Reads dY only. */
pk_status pk_op_grad_adaptive_pool(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   const pk_te_tensor *y, int input, pk_op_grad *g,
                                   pk_strbuf *out) {
  int64_t o[2];
  pk_status s = adaptive_check(ctx, op, prm, o);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  adapt fh, fw, th, tw; /* forward windows; transposed (input cell -> output cells) */
  adapt_init(&fh, x->shape[2], o[0]);
  adapt_init(&fw, x->shape[3], o[1]);
  adapt_init(&th, o[0], x->shape[2]);
  adapt_init(&tw, o[1], x->shape[3]);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_reduce_axis(out, 0, th.kmax);
  pk_op_emit_reduce_axis(out, 1, tw.kmax);
  pk_strbuf oh, ow; /* the output cell each reduce step reads */
  pk_strbuf_init(&oh);
  pk_strbuf_init(&ow);
  emit_index(&oh, &th, "i2", "k0");
  emit_index(&ow, &tw, "i3", "k1");
  pk_op_emit_compute_head(out, "DX", 4, x->shape);
  pk_strbuf_append(out, "sum(");
  bool first = true;
  if (th.guard || tw.guard) pk_strbuf_append(out, "select(");
  emit_guard(out, &th, "i2", "k0", &first);
  emit_guard(out, &tw, "i3", "k1", &first);
  pk_strbuf_printf(out, "%sDY[i0, i1, %s, %s] / cast(%s, ", first ? "" : ", ", oh.data,
                   ow.data, pkrt_dtype_name(x->dtype));
  emit_size(out, &fh, oh.data);
  pk_strbuf_append(out, " * ");
  emit_size(out, &fw, ow.data);
  pk_strbuf_append(out, first ? ")" : "), 0.0)");
  pk_strbuf_append(out, ", k0, k1))\n");
  pk_strbuf_free(&oh);
  pk_strbuf_free(&ow);
  (void)input;
  return PK_OK;
}
