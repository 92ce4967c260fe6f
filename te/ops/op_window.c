/* op_window.c — sliding windows along one spatial dim, shared by conv2d and the pools:
 * output size, the index a window element reads, its padding guard and in-bounds count. */
#include "op_impl.h"

pk_status pk_op_window_init(pk_ctx *ctx, pk_op_kind op, const char *what, pk_op_window *w,
                            int64_t in, int64_t k, int64_t s, int64_t d, int64_t pad_lo,
                            int64_t pad_hi) {
  if (k < 1) return pk_op_fail(ctx, op, "kernel %s is %lld (must be >= 1)", what, (long long)k);
  w->in = in;
  w->k = k;
  w->s = s ? s : 1;
  w->d = d ? d : 1;
  w->pad_lo = pad_lo;
  w->pad_hi = pad_hi;
  /* Every operand is at most PK_OP_MAX_EXTENT (2^31), so nothing here overflows int64. */
  int64_t extent = w->d * (k - 1) + 1;
  int64_t room = in + pad_lo + pad_hi - extent;
  if (room < 0)
    return pk_op_fail(ctx, op, "%s: window extent %lld (kernel %lld, dilation %lld) exceeds "
                      "the padded input %lld, so the output size would be < 1", what,
                      (long long)extent, (long long)k, (long long)w->d,
                      (long long)(in + pad_lo + pad_hi));
  w->out = room / w->s + 1;
  return PK_OK;
}

/* Whether the window starting at input index `start` holds an input element. */
static bool window_hits_input(const pk_op_window *w, int64_t start) {
  int64_t r0 = start >= 0 ? 0 : (-start + w->d - 1) / w->d; /* first element at >= 0 */
  return r0 < w->k && start + r0 * w->d < w->in;
}

pk_status pk_op_window_nonempty(pk_ctx *ctx, pk_op_kind op, const char *what,
                                const pk_op_window *w) {
  /* Windows starting inside the input hold their first element; only those starting in
   * the leading padding, and the last window, can miss the input. */
  for (int64_t o = 0; o < w->out && o * w->s < w->pad_lo; o++)
    if (!window_hits_input(w, o * w->s - w->pad_lo))
      return pk_op_fail(ctx, op, "%s: window %lld covers only padding", what, (long long)o);
  int64_t last = w->out - 1;
  if (!window_hits_input(w, last * w->s - w->pad_lo))
    return pk_op_fail(ctx, op, "%s: window %lld covers only padding", what, (long long)last);
  return PK_OK;
}

bool pk_op_window_pads_lo(const pk_op_window *w) { return w->pad_lo > 0; }

bool pk_op_window_pads_hi(const pk_op_window *w) {
  return (w->out - 1) * w->s + (w->k - 1) * w->d - w->pad_lo >= w->in;
}

/* "i2 * 2" or "i2": the window start without padding. */
static void emit_scaled_axis(pk_strbuf *b, const pk_op_window *w) {
  pk_strbuf_printf(b, "i%d", w->axis);
  if (w->s != 1) pk_strbuf_printf(b, " * %lld", (long long)w->s);
}

void pk_op_emit_window_index(pk_strbuf *b, const pk_op_window *w) {
  emit_scaled_axis(b, w);
  pk_strbuf_printf(b, " + k%d", w->kaxis);
  if (w->d != 1) pk_strbuf_printf(b, " * %lld", (long long)w->d);
  if (w->pad_lo) pk_strbuf_printf(b, " - %lld", (long long)w->pad_lo);
}

/* Appends w's guards ("idx >= 0", "idx < in"), each after " && " unless *first. */
static void emit_window_guard(pk_strbuf *b, const pk_op_window *w, bool *first) {
  if (pk_op_window_pads_lo(w)) {
    pk_strbuf_append(b, *first ? "" : " && ");
    pk_op_emit_window_index(b, w);
    pk_strbuf_append(b, " >= 0");
    *first = false;
  }
  if (pk_op_window_pads_hi(w)) {
    pk_strbuf_append(b, *first ? "" : " && ");
    pk_op_emit_window_index(b, w);
    pk_strbuf_printf(b, " < %lld", (long long)w->in);
    *first = false;
  }
}

bool pk_op_emit_window_select(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww) {
  pk_strbuf guard;
  pk_strbuf_init(&guard);
  bool first = true;
  emit_window_guard(&guard, wh, &first);
  emit_window_guard(&guard, ww, &first);
  if (!first) pk_strbuf_printf(b, "select(%s, ", guard.data);
  pk_strbuf_free(&guard);
  return !first;
}

/* "(C - i2 * s) / d", dropping "/ 1". */
static void emit_offset_over_d(pk_strbuf *b, const pk_op_window *w, int64_t c) {
  if (w->d != 1) pk_strbuf_append(b, "(");
  pk_strbuf_printf(b, "%lld - ", (long long)c);
  emit_scaled_axis(b, w);
  if (w->d != 1) pk_strbuf_printf(b, ") / %lld", (long long)w->d);
}

void pk_op_emit_window_count(pk_strbuf *b, const pk_op_window *w) {
  bool lo = pk_op_window_pads_lo(w), hi = pk_op_window_pads_hi(w);
  if (!lo && !hi) {
    pk_strbuf_printf(b, "%lld", (long long)w->k);
    return;
  }
  /* Elements r of the window are in bounds for r_lo <= r <= r_hi, with start = i*s - pad:
   *   r_lo = max(0, ceil(-start / d)) = max(0, (pad + d - 1 - i*s) / d)   (floor division)
   *   r_hi = min(k - 1, floor((in - 1 - start) / d)) = min(k - 1, (in - 1 + pad - i*s) / d) */
  pk_strbuf_append(b, "(");
  if (hi) {
    pk_strbuf_printf(b, "min(%lld, ", (long long)(w->k - 1));
    emit_offset_over_d(b, w, w->in - 1 + w->pad_lo);
    pk_strbuf_append(b, ")");
  } else {
    pk_strbuf_printf(b, "%lld", (long long)(w->k - 1));
  }
  if (lo) {
    pk_strbuf_append(b, " - max(0, ");
    emit_offset_over_d(b, w, w->pad_lo + w->d - 1);
    pk_strbuf_append(b, ")");
  }
  pk_strbuf_append(b, " + 1)");
}
