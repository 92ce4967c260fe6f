/* op_impl.h — shared by the operator builders (internal to te/ops): the text-builder
 * signature named in op_table.def, and helpers that validate parameters and write TE text. */
#ifndef PK_OP_IMPL_H
#define PK_OP_IMPL_H

#include "pk_ops.h"

/* Writes the op's forward TE text into out. Called after pk_op_build checked what is
 * common to all ops (arity, ranks 1..8, extents 1..PK_OP_MAX_EXTENT, one float dtype,
 * attributes in range), so a builder checks only its own rules. */
typedef pk_status (*pk_op_text_fn)(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   pk_strbuf *out);

#define PK_OP(id, name, cls, arity, diff, builder)                                           \
  pk_status builder(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, pk_strbuf *out);
#include "op_table.def"
#undef PK_OP

pk_op_text_fn pk_op_text_builder(pk_op_kind op);

/* ---- messages ---- */
/* PK_ERR_CHECK with "<op name>: " before the message. */
pk_status pk_op_fail(pk_ctx *ctx, pk_op_kind op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "(7, 33)" into buf (at least PK_OP_SHAPE_CHARS bytes). */
#define PK_OP_SHAPE_CHARS (PK_TE_MAX_DIMS * 22 + 4)
const char *pk_op_shape_str(char *buf, int ndim, const int64_t *shape);

/* ---- shapes ---- */
/* numpy broadcasting of two shapes (right-aligned; equal or 1). */
pk_status pk_op_broadcast(pk_ctx *ctx, pk_op_kind op, int na, const int64_t *a, int nb,
                          const int64_t *b, int *nout, int64_t *out);
/* A possibly negative axis of a rank-ndim tensor, as 0..ndim-1. */
pk_status pk_op_axis(pk_ctx *ctx, pk_op_kind op, int axis, int ndim, int *out);

/* ---- TE text ---- */
/* "X = placeholder((7, 33), f32)\n" */
void pk_op_emit_placeholder(pk_strbuf *b, const char *name, int ndim, const int64_t *shape,
                            pkrt_dtype dtype);
/* "(7, 33)", "(7,)" */
void pk_op_emit_shape(pk_strbuf *b, int ndim, const int64_t *shape);
/* "(i0, i1, i2)": spatial axes are always named i<d>, reduce axes k<n>. */
void pk_op_emit_axes(pk_strbuf *b, int ndim);
/* "k0 = reduce_axis(33)\n" */
void pk_op_emit_reduce_axis(pk_strbuf *b, int k, int64_t extent);
/* "Y = compute((7, 33), (i0, i1) => " — the caller writes the body and ")\n". */
void pk_op_emit_compute_head(pk_strbuf *b, const char *name, int ndim, const int64_t *shape);
/* Indices of an input of rank in_ndim broadcast into an output of rank out_ndim, first
 * output axis i<first>: "i1, 0, i3" (a dim of extent 1 reads index 0). */
void pk_op_emit_bcast_index(pk_strbuf *b, int in_ndim, const int64_t *in_shape, int out_ndim,
                            int first);
/* A float literal that reads back as exactly v: "0.5", "2.0", "-3.4028234663852886e+38". */
void pk_op_emit_float(pk_strbuf *b, double v);

/* ---- sliding windows (conv2d, pools), one spatial dim ---- */
typedef struct pk_op_window {
  int64_t in;              /* input extent */
  int64_t k, s, d;         /* window size, stride, dilation (defaults applied) */
  int64_t pad_lo, pad_hi;  /* padding before / after */
  int64_t out;             /* output extent */
  int axis, kaxis;         /* output axis i<axis> and reduce axis k<kaxis> */
} pk_op_window;

/* Fills w (w->axis and w->kaxis are the caller's) and checks that the output has at least
 * one element; `what` names the dim in messages ("H"). */
pk_status pk_op_window_init(pk_ctx *ctx, pk_op_kind op, const char *what, pk_op_window *w,
                            int64_t in, int64_t k, int64_t s, int64_t d, int64_t pad_lo,
                            int64_t pad_hi);
/* Checks that every window holds at least one input element (pools need it). */
pk_status pk_op_window_nonempty(pk_ctx *ctx, pk_op_kind op, const char *what,
                                const pk_op_window *w);
/* The input index a window element reads: "i2 * 2 + k1 - 1". */
void pk_op_emit_window_index(pk_strbuf *b, const pk_op_window *w);
/* Whether some window element falls in the padding (before / after the input). */
bool pk_op_window_pads_lo(const pk_op_window *w);
bool pk_op_window_pads_hi(const pk_op_window *w);
/* Opens "select(<guards>, " keeping a window element of the 2-D window (wh, ww) inside the
 * input, when some element can fall in the padding; returns whether it did, so that the
 * caller closes it with ", <padding value>)" after the read. */
bool pk_op_emit_window_select(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww);
/* Number of in-bounds elements of the window at output index i<axis>, an I64 expression,
 * or its constant value k when the dim never pads. */
void pk_op_emit_window_count(pk_strbuf *b, const pk_op_window *w);

#endif
