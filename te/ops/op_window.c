/* op_window.c — sliding windows along one spatial dim, shared by conv2d and the pools and
 * their gradients: output size, the index a window element reads, its padding guard and
 * in-bounds count, and the transposed view (which output reads a given input index). */
#include <stdio.h>
#include <string.h>

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

/* Writes s, parenthesised unless it is one token, so that it can be an operand. */
static void emit_operand(pk_strbuf *b, const char *s) {
  if (strchr(s, ' ')) pk_strbuf_printf(b, "(%s)", s);
  else pk_strbuf_append(b, s);
}

/* "o * 2" or "o": the window start without padding. */
static void emit_scaled(pk_strbuf *b, const pk_op_window *w, const char *o) {
  emit_operand(b, o);
  if (w->s != 1) pk_strbuf_printf(b, " * %lld", (long long)w->s);
}

void pk_op_emit_window_index_at(pk_strbuf *b, const pk_op_window *w, const char *o,
                                const char *r) {
  emit_scaled(b, w, o);
  pk_strbuf_append(b, " + ");
  emit_operand(b, r);
  if (w->d != 1) pk_strbuf_printf(b, " * %lld", (long long)w->d);
  if (w->pad_lo) pk_strbuf_printf(b, " - %lld", (long long)w->pad_lo);
}

/* The names of w's own output axis and reduce axis: "i2", "k1". */
static void axis_names(const pk_op_window *w, char *o, char *r) {
  snprintf(o, 16, "i%d", w->axis);
  snprintf(r, 16, "k%d", w->kaxis);
}

void pk_op_emit_window_index(pk_strbuf *b, const pk_op_window *w) {
  char o[16], r[16];
  axis_names(w, o, r);
  pk_op_emit_window_index_at(b, w, o, r);
}

/* Appends w's guards ("idx >= 0", "idx < in"), each after " && " unless *first. */
static void emit_window_guard(pk_strbuf *b, const pk_op_window *w, const char *o,
                              const char *r, bool *first) {
  if (pk_op_window_pads_lo(w)) {
    pk_strbuf_append(b, *first ? "" : " && ");
    pk_op_emit_window_index_at(b, w, o, r);
    pk_strbuf_append(b, " >= 0");
    *first = false;
  }
  if (pk_op_window_pads_hi(w)) {
    pk_strbuf_append(b, *first ? "" : " && ");
    pk_op_emit_window_index_at(b, w, o, r);
    pk_strbuf_printf(b, " < %lld", (long long)w->in);
    *first = false;
  }
}

bool pk_op_emit_window_select_at(pk_strbuf *b, const pk_op_window *wh, const char *oh,
                                 const char *rh, const pk_op_window *ww, const char *ow,
                                 const char *rw) {
  pk_strbuf guard;
  pk_strbuf_init(&guard);
  bool first = true;
  emit_window_guard(&guard, wh, oh, rh, &first);
  emit_window_guard(&guard, ww, ow, rw, &first);
  if (!first) pk_strbuf_printf(b, "select(%s, ", guard.data);
  pk_strbuf_free(&guard);
  return !first;
}

bool pk_op_emit_window_select(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww) {
  char oh[16], rh[16], ow[16], rw[16];
  axis_names(wh, oh, rh);
  axis_names(ww, ow, rw);
  return pk_op_emit_window_select_at(b, wh, oh, rh, ww, ow, rw);
}

/* "(C - o * s) / d", dropping "/ 1". */
static void emit_offset_over_d(pk_strbuf *b, const pk_op_window *w, const char *o, int64_t c) {
  if (w->d != 1) pk_strbuf_append(b, "(");
  pk_strbuf_printf(b, "%lld - ", (long long)c);
  emit_scaled(b, w, o);
  if (w->d != 1) pk_strbuf_printf(b, ") / %lld", (long long)w->d);
}

void pk_op_emit_window_count_at(pk_strbuf *b, const pk_op_window *w, const char *o) {
  bool lo = pk_op_window_pads_lo(w), hi = pk_op_window_pads_hi(w);
  if (!lo && !hi) {
    pk_strbuf_printf(b, "%lld", (long long)w->k);
    return;
  }
  /* Elements r of the window are in bounds for r_lo <= r <= r_hi, with start = o*s - pad:
   *   r_lo = max(0, ceil(-start / d)) = max(0, (pad + d - 1 - o*s) / d)   (floor division)
   *   r_hi = min(k - 1, floor((in - 1 - start) / d)) = min(k - 1, (in - 1 + pad - o*s) / d) */
  pk_strbuf_append(b, "(");
  if (hi) {
    pk_strbuf_printf(b, "min(%lld, ", (long long)(w->k - 1));
    emit_offset_over_d(b, w, o, w->in - 1 + w->pad_lo);
    pk_strbuf_append(b, ")");
  } else {
    pk_strbuf_printf(b, "%lld", (long long)(w->k - 1));
  }
  if (lo) {
    pk_strbuf_append(b, " - max(0, ");
    emit_offset_over_d(b, w, o, w->pad_lo + w->d - 1);
    pk_strbuf_append(b, ")");
  }
  pk_strbuf_append(b, " + 1)");
}

void pk_op_emit_window_count(pk_strbuf *b, const pk_op_window *w) {
  char o[16], r[16];
  axis_names(w, o, r);
  pk_op_emit_window_count_at(b, w, o);
}

/* ---- the transposed view, for gradients: which output reads input index x ---- */

/* "x + pad - r * d": the output index times the stride (x = o * s + r * d - pad). */
static void emit_source_numerator(pk_strbuf *b, const pk_op_window *w, const char *x,
                                  const char *r) {
  pk_strbuf_append(b, x);
  if (w->pad_lo) pk_strbuf_printf(b, " + %lld", (long long)w->pad_lo);
  pk_strbuf_append(b, " - ");
  pk_strbuf_append(b, r);
  if (w->d != 1) pk_strbuf_printf(b, " * %lld", (long long)w->d);
}

void pk_op_emit_window_source(pk_strbuf *b, const pk_op_window *w, const char *x,
                              const char *r) {
  pk_strbuf_append(b, "(");
  emit_source_numerator(b, w, x, r);
  pk_strbuf_append(b, ")");
  if (w->s != 1) pk_strbuf_printf(b, " / %lld", (long long)w->s);
}

void pk_op_emit_window_source_guard(pk_strbuf *b, const pk_op_window *w, const char *x,
                                    const char *r, bool *first) {
  /* The numerator spans [pad - (k-1)*d, in - 1 + pad]: guards that always hold are left
   * out, so the common unpadded stride-1 case has none. */
  int64_t lo = w->pad_lo - (w->k - 1) * w->d, hi = w->in - 1 + w->pad_lo;
  if (w->s != 1) {
    pk_strbuf_append(b, *first ? "(" : " && (");
    emit_source_numerator(b, w, x, r);
    pk_strbuf_printf(b, ") %% %lld == 0", (long long)w->s);
    *first = false;
  }
  if (lo < 0) {
    pk_strbuf_append(b, *first ? "" : " && ");
    pk_op_emit_window_source(b, w, x, r);
    pk_strbuf_append(b, " >= 0");
    *first = false;
  }
  if (hi / w->s > w->out - 1) {
    pk_strbuf_append(b, *first ? "" : " && ");
    pk_op_emit_window_source(b, w, x, r);
    pk_strbuf_printf(b, " < %lld", (long long)w->out);
    *first = false;
  }
}
