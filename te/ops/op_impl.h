/* op_impl.h — shared by the operator builders (internal to te/ops): the text- and
 * gradient-builder signatures named in op_table.def, and helpers that write TE text. */
#ifndef PK_OP_IMPL_H
#define PK_OP_IMPL_H

#include "pk_ops.h"

/* Writes the op's forward TE text into out. Called after pk_op_build checked what is
 * common to all ops (arity, ranks 1..8, extents 1..PK_OP_MAX_EXTENT, one float dtype,
 * attributes in range), so a builder checks only its own rules. */
typedef pk_status (*pk_op_text_fn)(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   pk_strbuf *out);

#define PK_OP(id, name, cls, arity, diff, flags, attrs, builder, grad)                       \
  pk_status builder(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, pk_strbuf *out);
#include "op_table.def"
#undef PK_OP

pk_op_text_fn pk_op_text_builder(pk_op_kind op);

/* Writes the gradient TE text of input `input` (a differentiable one) into out, and records
 * in g (nargs = 0 on entry) which tensors its placeholders are, in order
 * (pk_op_grad_add_arg does both). Called after pk_op_build accepted prm; y is that forward
 * program's result. The last compute is the gradient, shaped like the input. */
typedef pk_status (*pk_op_grad_fn)(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   const pk_te_tensor *y, int input, pk_op_grad *g,
                                   pk_strbuf *out);

/* The grad_builder column (a NULL column entry cannot be declared through the X-macro). */
pk_status pk_op_grad_matmul(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_binary(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_unary(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                           int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_softmax(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                             int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_reduce(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_conv2d(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_pool2d(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_softmax_ce(pk_ctx *, pk_op_kind, const pk_op_params *,
                                const pk_te_tensor *, int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_mse(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *, int,
                         pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_slice(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                           int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_reshape(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                             int, pk_op_grad *, pk_strbuf *);
/* shape and data movement (op_shape.c) */
pk_status pk_op_grad_transpose(pk_ctx *, pk_op_kind, const pk_op_params *,
                               const pk_te_tensor *, int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_concat(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_pad(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *, int,
                         pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_expand(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_where(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                           int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_masked_fill(pk_ctx *, pk_op_kind, const pk_op_params *,
                                 const pk_te_tensor *, int, pk_op_grad *, pk_strbuf *);

/* attention, softmax family, pooling, activations */
pk_status pk_op_grad_sdpa(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *, int,
                          pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_rope(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *, int,
                          pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_adaptive_pool(pk_ctx *, pk_op_kind, const pk_op_params *,
                                   const pk_te_tensor *, int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_pow(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *, int,
                         pk_op_grad *, pk_strbuf *);
/* normalization */
pk_status pk_op_grad_norm(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *, int,
                          pk_op_grad *, pk_strbuf *);
/* losses with integer labels */
pk_status pk_op_grad_cross_entropy(pk_ctx *, pk_op_kind, const pk_op_params *,
                                   const pk_te_tensor *, int, pk_op_grad *, pk_strbuf *);

/* indexing and dropout */
pk_status pk_op_grad_gather(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                            int, pk_op_grad *, pk_strbuf *);
pk_status pk_op_grad_dropout(pk_ctx *, pk_op_kind, const pk_op_params *, const pk_te_tensor *,
                             int, pk_op_grad *, pk_strbuf *);

pk_op_grad_fn pk_op_grad_builder(pk_op_kind op); /* NULL for ops with no differentiable input */

/* Appends an argument to g and its placeholder "<name> = placeholder(...)" to out: forward
 * input `index` (PK_GRAD_ARG_INPUT), or y's shape (OUTPUT, DY). */
void pk_op_grad_add_arg(pk_op_grad *g, pk_strbuf *out, pk_op_grad_arg_kind kind, int index,
                        const char *name, const pk_op_params *prm, const pk_te_tensor *y);
/* The same for PK_GRAD_ARG_STAGE: compute `index` of the forward program, whose shape and
 * dtype the builder knows (it wrote that stage). */
void pk_op_grad_add_stage(pk_op_grad *g, pk_strbuf *out, int index, const char *name,
                          int ndim, const int64_t *shape, pkrt_dtype dtype);

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

/* ---- TE text (the helpers a graph pass uses too are in pk_ops.h) ---- */
/* "(7, 33)", "(7,)" */
void pk_op_emit_shape(pk_strbuf *b, int ndim, const int64_t *shape);
/* "(i0, i1, i2)": spatial axes are always named i<d>, reduce axes k<n>. */
void pk_op_emit_axes(pk_strbuf *b, int ndim);
/* "k0 = reduce_axis(33)\n" */
void pk_op_emit_reduce_axis(pk_strbuf *b, int k, int64_t extent);
/* Indices of an input of rank in_ndim broadcast into an output of rank out_ndim, first
 * output axis i<first>: "i1, 0, i3" (a dim of extent 1 reads index 0). */
void pk_op_emit_bcast_index(pk_strbuf *b, int in_ndim, const int64_t *in_shape, int out_ndim,
                            int first);

/* ---- undoing a broadcast (gradients of broadcast inputs) ----
 * A gradient shaped like an input of rank in_ndim reads the broadcast result (rank
 * out_ndim) at: the gradient's own axis where the input has the dim, index 0 where both
 * extents are 1, and a reduce axis (summing) where the input was stretched or is absent. */
typedef struct pk_op_unbcast {
  int nk;                              /* reduce axes k<first_k> .. k<first_k + nk - 1> */
  int first_k;
  int64_t kext[PK_TE_MAX_DIMS];        /* their extents */
  char idx[PK_TE_MAX_DIMS][16];        /* per result dim: "i2", "0" or "k1" */
} pk_op_unbcast;
void pk_op_unbcast_init(pk_op_unbcast *u, int in_ndim, const int64_t *in_shape, int out_ndim,
                        const int64_t *out_shape, int first_k);
/* "k1 = reduce_axis(5)\n" for each of u's reduce axes. */
void pk_op_unbcast_emit_axes(pk_strbuf *b, const pk_op_unbcast *u);
/* ", k1, k2" — u's reduce axes for the reduction's axis list. */
void pk_op_unbcast_emit_axis_list(pk_strbuf *b, const pk_op_unbcast *u);
/* Indices of another operand of rank nd (broadcast into the result like the input was)
 * at the point u describes: "0" for its dims of extent 1, else u->idx of the result dim. */
void pk_op_unbcast_emit_index(pk_strbuf *b, const pk_op_unbcast *u, int nd,
                              const int64_t *shape, int out_ndim);

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
/* The same with the output index o and window element r given as expressions (the
 * gradients run over other axes): "(o) * 2 + r - 1". */
void pk_op_emit_window_index_at(pk_strbuf *b, const pk_op_window *w, const char *o,
                                const char *r);
/* Whether some window element falls in the padding (before / after the input). */
bool pk_op_window_pads_lo(const pk_op_window *w);
bool pk_op_window_pads_hi(const pk_op_window *w);
/* Opens "select(<guards>, " keeping a window element of the 2-D window (wh, ww) inside the
 * input, when some element can fall in the padding; returns whether it did, so that the
 * caller closes it with ", <padding value>)" after the read. */
bool pk_op_emit_window_select(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww);
bool pk_op_emit_window_select_at(pk_strbuf *b, const pk_op_window *wh, const char *oh,
                                 const char *rh, const pk_op_window *ww, const char *ow,
                                 const char *rw);
/* Number of in-bounds elements of the window at output index i<axis>, an I64 expression,
 * or its constant value k when the dim never pads. */
void pk_op_emit_window_count(pk_strbuf *b, const pk_op_window *w);
void pk_op_emit_window_count_at(pk_strbuf *b, const pk_op_window *w, const char *o);

/* Transposed windows (gradients): window element r (an expression) of output
 * o = (x + pad - r * d) / s reads input index x. The source expression, and its guards
 * (o is whole, o >= 0, o < out — each only where it can fail), appended after " && "
 * unless *first; a read at the source must sit inside these guards. */
void pk_op_emit_window_source(pk_strbuf *b, const pk_op_window *w, const char *x,
                              const char *r);
void pk_op_emit_window_source_guard(pk_strbuf *b, const pk_op_window *w, const char *x,
                                    const char *r, bool *first);

/* ---- convolution (op_conv.c) ---- */
/* conv2d's gradients as pk_op_grad_conv2d writes them, except that dX is always the
 * transposed-window form (every window element visited, the ones whose output is not whole
 * skipped behind a guard): the oracle that tests compare the strided phase form with. */
pk_status pk_op_grad_conv2d_gather(pk_ctx *, pk_op_kind, const pk_op_params *,
                                   const pk_te_tensor *, int, pk_op_grad *, pk_strbuf *);

#endif
