/* op_elementwise.c — injective ops: add/sub/mul/div with numpy broadcasting, and the
 * activations relu, sigmoid, tanh, gelu (erf or tanh form), leaky_relu, elu, silu,
 * hardsigmoid, hardswish, relu6 and clip (PyTorch's definitions), the math functions exp,
 * log, sqrt, rsqrt, abs, neg, reciprocal, erf, and pow (tensor exponent, broadcast) and
 * pow_scalar (constant exponent); each followed by its gradients. */
#include <math.h>

#include "op_impl.h"

pk_status pk_op_text_binary(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *a = &prm->in[0], *b = &prm->in[1];
  int64_t yshape[PK_TE_MAX_DIMS];
  int ndim;
  pk_status s = pk_op_broadcast(ctx, op, a->ndim, a->shape, b->ndim, b->shape, &ndim, yshape);
  if (s != PK_OK) return s;
  const char *sym = op == PK_OP_ADD ? "+" : op == PK_OP_SUB ? "-" : op == PK_OP_MUL ? "*" : "/";
  pk_op_emit_placeholder(out, "A", a->ndim, a->shape, a->dtype);
  pk_op_emit_placeholder(out, "B", b->ndim, b->shape, b->dtype);
  pk_op_emit_compute_head(out, "Y", ndim, yshape);
  pk_strbuf_append(out, "A[");
  pk_op_emit_bcast_index(out, a->ndim, a->shape, ndim, 0);
  pk_strbuf_printf(out, "] %s B[", sym);
  pk_op_emit_bcast_index(out, b->ndim, b->shape, ndim, 0);
  pk_strbuf_append(out, "])\n");
  return PK_OK;
}

/* "A[i0, 0, i2]": a read of tensor `name` at the gradient's point of the result (u), the
 * tensor broadcast into the result with the given shape. */
static void emit_bcast_read(pk_strbuf *b, const char *name, const pk_op_unbcast *u, int nd,
                            const int64_t *shape, int out_ndim) {
  pk_strbuf_printf(b, "%s[", name);
  pk_op_unbcast_emit_index(b, u, nd, shape, out_ndim);
  pk_strbuf_append(b, "]");
}

/* dA and dB: the derivative at each point of the result, summed over the dims the input
 * was broadcast along. add/sub read only dY; mul the other operand; div what it needs. */
pk_status pk_op_grad_binary(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *a = &prm->in[0], *b = &prm->in[1], *x = &prm->in[input];
  bool need_a = op == PK_OP_MUL ? input == 1 : op == PK_OP_DIV && input == 1;
  bool need_b = op == PK_OP_MUL ? input == 0 : op == PK_OP_DIV;
  if (need_a) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "A", prm, y);
  if (need_b) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "B", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);

  pk_op_unbcast u;
  pk_op_unbcast_init(&u, x->ndim, x->shape, y->ndim, y->shape, 0);
  pk_op_unbcast_emit_axes(out, &u);
  pk_op_emit_compute_head(out, input ? "DB" : "DA", x->ndim, x->shape);
  if (u.nk) pk_strbuf_append(out, "sum(");
  if (op == PK_OP_SUB && input == 1) pk_strbuf_append(out, "-");
  emit_bcast_read(out, "DY", &u, y->ndim, y->shape, y->ndim);
  if (op == PK_OP_MUL) {
    pk_strbuf_append(out, " * ");
    if (input == 0) emit_bcast_read(out, "B", &u, b->ndim, b->shape, y->ndim);
    else emit_bcast_read(out, "A", &u, a->ndim, a->shape, y->ndim);
  } else if (op == PK_OP_DIV && input == 0) { /* d(a/b)/da = 1/b */
    pk_strbuf_append(out, " / ");
    emit_bcast_read(out, "B", &u, b->ndim, b->shape, y->ndim);
  } else if (op == PK_OP_DIV) { /* d(a/b)/db = -a/b^2 */
    pk_strbuf_append(out, " * -");
    emit_bcast_read(out, "A", &u, a->ndim, a->shape, y->ndim);
    pk_strbuf_append(out, " / (");
    emit_bcast_read(out, "B", &u, b->ndim, b->shape, y->ndim);
    pk_strbuf_append(out, " * ");
    emit_bcast_read(out, "B", &u, b->ndim, b->shape, y->ndim);
    pk_strbuf_append(out, ")");
  }
  if (u.nk) pk_op_unbcast_emit_axis_list(out, &u);
  pk_strbuf_append(out, u.nk ? "))\n" : ")\n");
  (void)ctx;
  return PK_OK;
}

/* The attributes as the TE uses them: zero means PyTorch's default (pk_ops.h). */
static double leaky_alpha(const pk_op_attrs *a) { return a->alpha != 0 ? a->alpha : 0.01; }
static double elu_alpha(const pk_op_attrs *a) { return a->alpha != 0 ? a->alpha : 1.0; }

/* gelu's tanh form (PyTorch's approximate='tanh'): its constants and
 * "tanh(k * (x + c * x * x * x))" for the read x. */
#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715
static void emit_gelu_tanh(pk_strbuf *b, const char *x) {
  pk_strbuf_append(b, "tanh(");
  pk_op_emit_float(b, GELU_K);
  pk_strbuf_printf(b, " * (%s + ", x);
  pk_op_emit_float(b, GELU_C);
  pk_strbuf_printf(b, " * %s * %s * %s))", x, x, x);
}

pk_status pk_op_text_unary(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           pk_strbuf *out) {
  const pk_op_attrs *a = &prm->attrs;
  const pk_op_input *x = &prm->in[0];
  if (op == PK_OP_GELU && a->approximate != PK_GELU_ERF && a->approximate != PK_GELU_TANH)
    return pk_op_fail(ctx, op, "approximate %d is neither PK_GELU_ERF (0) nor PK_GELU_TANH (1)",
                      a->approximate);
  pk_strbuf xr; /* "X[i0, i1]" */
  pk_strbuf_init(&xr);
  pk_strbuf_append(&xr, "X[");
  pk_op_emit_bcast_index(&xr, x->ndim, x->shape, x->ndim, 0);
  pk_strbuf_append(&xr, "]");
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  switch (op) {
  case PK_OP_RELU: pk_strbuf_printf(out, "max(%s, 0.0)", xr.data); break;
  case PK_OP_SIGMOID: pk_strbuf_printf(out, "sigmoid(%s)", xr.data); break;
  case PK_OP_TANH: pk_strbuf_printf(out, "tanh(%s)", xr.data); break;
  /* The piecewise ops are min/max compositions rather than selects, so that NaN propagates
   * as in relu (the interpreter's rule for min/max). */
  case PK_OP_LEAKY_RELU: /* x > 0 ? x : alpha x */
    pk_strbuf_printf(out, "max(%s, 0.0) + ", xr.data);
    pk_op_emit_float(out, leaky_alpha(a));
    pk_strbuf_printf(out, " * min(%s, 0.0)", xr.data);
    break;
  case PK_OP_ELU: /* x > 0 ? x : alpha (e^x - 1); min keeps exp from overflowing */
    pk_strbuf_printf(out, "max(%s, 0.0) + ", xr.data);
    pk_op_emit_float(out, elu_alpha(a));
    pk_strbuf_printf(out, " * (exp(min(%s, 0.0)) - 1.0)", xr.data);
    break;
  case PK_OP_SILU: pk_strbuf_printf(out, "%s * sigmoid(%s)", xr.data, xr.data); break;
  case PK_OP_HARDSIGMOID: /* PyTorch's form: relu6(x + 3) / 6 */
    pk_strbuf_printf(out, "min(max(%s + 3.0, 0.0), 6.0) / 6.0", xr.data);
    break;
  case PK_OP_HARDSWISH: /* x relu6(x + 3) / 6 */
    pk_strbuf_printf(out, "%s * min(max(%s + 3.0, 0.0), 6.0) / 6.0", xr.data, xr.data);
    break;
  case PK_OP_RELU6: pk_strbuf_printf(out, "min(max(%s, 0.0), 6.0)", xr.data); break;
  case PK_OP_CLIP:
    pk_strbuf_printf(out, "min(max(%s, ", xr.data);
    pk_op_emit_float(out, a->clip_min);
    pk_strbuf_append(out, "), ");
    pk_op_emit_float(out, a->clip_max);
    pk_strbuf_append(out, ")");
    break;
  /* outside their domains these give C's IEEE results (log(0) = -inf, sqrt(-1) = NaN) */
  case PK_OP_EXP: pk_strbuf_printf(out, "exp(%s)", xr.data); break;
  case PK_OP_LOG: pk_strbuf_printf(out, "log(%s)", xr.data); break;
  case PK_OP_SQRT: pk_strbuf_printf(out, "sqrt(%s)", xr.data); break;
  case PK_OP_RSQRT: pk_strbuf_printf(out, "rsqrt(%s)", xr.data); break;
  case PK_OP_ABS: pk_strbuf_printf(out, "abs(%s)", xr.data); break;
  case PK_OP_NEG: pk_strbuf_printf(out, "-%s", xr.data); break;
  case PK_OP_RECIPROCAL: pk_strbuf_printf(out, "1.0 / %s", xr.data); break;
  case PK_OP_ERF: pk_strbuf_printf(out, "erf(%s)", xr.data); break;
  default:
    if (a->approximate == PK_GELU_TANH) { /* 0.5 x (1 + tanh(sqrt(2/pi) (x + c x^3))) */
      pk_strbuf_printf(out, "0.5 * %s * (1.0 + ", xr.data);
      emit_gelu_tanh(out, xr.data);
      pk_strbuf_append(out, ")");
      break;
    }
    /* PK_OP_GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) */
    pk_strbuf_printf(out, "0.5 * %s * (1.0 + erf(%s * ", xr.data, xr.data);
    pk_op_emit_float(out, 1.0 / sqrt(2.0));
    pk_strbuf_append(out, "))");
    break;
  }
  pk_strbuf_append(out, ")\n");
  pk_strbuf_free(&xr);
  (void)ctx;
  return PK_OK;
}

/* dX = dY * f'(x), from whichever of X and Y gives f' most cheaply: sigmoid, tanh, exp,
 * sqrt, rsqrt and reciprocal read Y (as PyTorch's backward formulas do), and so do relu
 * (y > 0 exactly where x > 0) and relu6 (0 < y < 6 exactly where 0 < x < 6), so that a
 * norm's or a conv's result before them need not be kept for the backward pass (and the
 * fuse pass can make the activation part of that kernel); neg reads only dY, the rest X
 * (the other piecewise ones need the side of each kink x is on, which Y loses where it
 * saturates). At the kinks f' is PyTorch's (its *_backward kernels), so that training
 * matches it where activations land exactly on a kink (x = 0 after relu is common):
 *   relu'(0) = 0;  leaky_relu'(0) = alpha and elu'(0) = alpha (the x <= 0 side);
 *   hardsigmoid' = 1/6 on (-3, 3) only: 0 at -3 and at 3;
 *   hardswish' = x/3 + 1/2 on [-3, 3]: -1/2 at -3, 3/2 at 3;
 *   relu6' = 1 on (0, 6) only (hardtanh's rule): 0 at 0 and at 6;
 *   clip' = 1 on [min, max] (clamp's rule): 1 at min and at max.
 * Indicators are cast(dtype, cond) products, never select (see relu below). */
pk_status pk_op_grad_unary(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  const char *dt = pkrt_dtype_name(x->dtype);
  bool reads_y = op == PK_OP_SIGMOID || op == PK_OP_TANH || op == PK_OP_EXP ||
                 op == PK_OP_SQRT || op == PK_OP_RSQRT || op == PK_OP_RECIPROCAL ||
                 op == PK_OP_RELU || op == PK_OP_RELU6;
  if (op != PK_OP_NEG)
    pk_op_grad_add_arg(g, out, reads_y ? PK_GRAD_ARG_OUTPUT : PK_GRAD_ARG_INPUT, 0,
                       reads_y ? "Y" : "X", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_strbuf v, dy; /* "X[i0, i1]" or "Y[i0, i1]"; "DY[i0, i1]" */
  pk_strbuf_init(&v);
  pk_strbuf_init(&dy);
  pk_strbuf_append(&v, reads_y ? "Y[" : "X[");
  pk_op_emit_bcast_index(&v, x->ndim, x->shape, x->ndim, 0);
  pk_strbuf_append(&v, "]");
  pk_strbuf_append(&dy, "DY[");
  pk_op_emit_bcast_index(&dy, x->ndim, x->shape, x->ndim, 0);
  pk_strbuf_append(&dy, "]");
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  switch (op) {
  case PK_OP_RELU:
    /* dY * [x > 0] rather than select(x > 0, dY, 0.0): equal for finite dY, and GCC 12.2
     * at -O3 -march=native miscompiles a select between a load and a constant under a
     * float condition in short inner loops (if-converted masked loads) */
    pk_strbuf_printf(out, "%s * cast(%s, %s > 0.0)", dy.data, dt, v.data);
    break;
  case PK_OP_SIGMOID: pk_strbuf_printf(out, "%s * %s * (1.0 - %s)", dy.data, v.data, v.data); break;
  case PK_OP_TANH: pk_strbuf_printf(out, "%s * (1.0 - %s * %s)", dy.data, v.data, v.data); break;
  case PK_OP_LEAKY_RELU:
    pk_strbuf_printf(out, "%s * (cast(%s, %s > 0.0) + ", dy.data, dt, v.data);
    pk_op_emit_float(out, leaky_alpha(a));
    pk_strbuf_printf(out, " * cast(%s, %s <= 0.0))", dt, v.data);
    break;
  case PK_OP_ELU: /* alpha e^x on x <= 0 (min keeps exp from overflowing elsewhere) */
    pk_strbuf_printf(out, "%s * (cast(%s, %s > 0.0) + ", dy.data, dt, v.data);
    pk_op_emit_float(out, elu_alpha(a));
    pk_strbuf_printf(out, " * exp(min(%s, 0.0)) * cast(%s, %s <= 0.0))", v.data, dt, v.data);
    break;
  case PK_OP_SILU: /* s (1 + x (1 - s)), s = sigmoid(x) */
    pk_strbuf_printf(out, "%s * sigmoid(%s) * (1.0 + %s * (1.0 - sigmoid(%s)))", dy.data,
                     v.data, v.data, v.data);
    break;
  case PK_OP_HARDSIGMOID:
    pk_strbuf_printf(out, "%s * cast(%s, %s > -3.0 && %s < 3.0) / 6.0", dy.data, dt, v.data,
                     v.data);
    break;
  case PK_OP_HARDSWISH:
    pk_strbuf_printf(out, "%s * (cast(%s, %s >= -3.0 && %s <= 3.0) * (%s / 3.0 + 0.5) + "
                     "cast(%s, %s > 3.0))", dy.data, dt, v.data, v.data, v.data, dt, v.data);
    break;
  case PK_OP_RELU6:
    pk_strbuf_printf(out, "%s * cast(%s, %s > 0.0 && %s < 6.0)", dy.data, dt, v.data, v.data);
    break;
  case PK_OP_CLIP:
    pk_strbuf_printf(out, "%s * cast(%s, %s >= ", dy.data, dt, v.data);
    pk_op_emit_float(out, a->clip_min);
    pk_strbuf_printf(out, " && %s <= ", v.data);
    pk_op_emit_float(out, a->clip_max);
    pk_strbuf_append(out, ")");
    break;
  case PK_OP_EXP: pk_strbuf_printf(out, "%s * %s", dy.data, v.data); break;
  case PK_OP_LOG: pk_strbuf_printf(out, "%s / %s", dy.data, v.data); break;
  case PK_OP_SQRT: pk_strbuf_printf(out, "%s / (2.0 * %s)", dy.data, v.data); break;
  case PK_OP_RSQRT: /* -y^3 / 2 */
    pk_strbuf_printf(out, "-0.5 * %s * %s * %s * %s", dy.data, v.data, v.data, v.data);
    break;
  case PK_OP_ABS: /* sign(x), with sign(0) = 0 as PyTorch's sgn */
    pk_strbuf_printf(out, "%s * (cast(%s, %s > 0.0) - cast(%s, %s < 0.0))", dy.data, dt, v.data,
                     dt, v.data);
    break;
  case PK_OP_NEG: pk_strbuf_printf(out, "-%s", dy.data); break;
  case PK_OP_RECIPROCAL: /* -1/x^2 = -y^2 */
    pk_strbuf_printf(out, "-%s * %s * %s", dy.data, v.data, v.data);
    break;
  case PK_OP_ERF: /* 2/sqrt(pi) exp(-x^2) */
    pk_strbuf_printf(out, "%s * ", dy.data);
    pk_op_emit_float(out, 1.1283791670955126);
    pk_strbuf_printf(out, " * exp(-%s * %s)", v.data, v.data);
    break;
  default:
    if (a->approximate == PK_GELU_TANH) {
      /* PyTorch's GeluBackward (tanh): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) with
       * t = tanh(k (x + c x^3)), k = sqrt(2/pi), c = 0.044715 */
      pk_strbuf_printf(out, "%s * (0.5 * (1.0 + ", dy.data);
      emit_gelu_tanh(out, v.data);
      pk_strbuf_printf(out, ") + 0.5 * %s * (1.0 - ", v.data);
      emit_gelu_tanh(out, v.data);
      pk_strbuf_append(out, " * ");
      emit_gelu_tanh(out, v.data);
      pk_strbuf_append(out, ") * ");
      pk_op_emit_float(out, GELU_K);
      pk_strbuf_printf(out, " * (1.0 + %s * %s * ", v.data, v.data);
      pk_op_emit_float(out, 3 * GELU_C);
      pk_strbuf_append(out, "))");
      break;
    }
    /* PK_OP_GELU: d/dx x Phi(x) = Phi(x) + x phi(x) */
    pk_strbuf_printf(out, "%s * (0.5 * (1.0 + erf(%s * ", dy.data, v.data);
    pk_op_emit_float(out, 1.0 / sqrt(2.0));
    pk_strbuf_printf(out, ")) + %s * exp(-0.5 * %s * %s) * ", v.data, v.data, v.data);
    pk_op_emit_float(out, 1.0 / sqrt(2.0 * 3.14159265358979323846));
    pk_strbuf_append(out, ")");
    break;
  }
  pk_strbuf_append(out, ")\n");
  pk_strbuf_free(&v);
  pk_strbuf_free(&dy);
  (void)ctx;
  (void)input;
  return PK_OK;
}

/* pow(A, B): A to the power B, broadcast like add; pow_scalar(X): X to attrs.exponent.
 * C's pow, so a negative base with a non-integer exponent gives NaN (as PyTorch). The
 * exponents PyTorch computes without pow (its pow_tensor_scalar kernel: 2, 3, 0.5, -0.5,
 * -1, -2; x**2 and x**0.5 are what exporters emit) are written the same way here, so that
 * results match it to the bit and cost a multiply or a square root. */
pk_status pk_op_text_pow(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, pk_strbuf *out) {
  if (op == PK_OP_POW) {
    const pk_op_input *a = &prm->in[0], *b = &prm->in[1];
    int64_t yshape[PK_TE_MAX_DIMS];
    int ndim;
    pk_status s = pk_op_broadcast(ctx, op, a->ndim, a->shape, b->ndim, b->shape, &ndim, yshape);
    if (s != PK_OK) return s;
    pk_op_emit_placeholder(out, "A", a->ndim, a->shape, a->dtype);
    pk_op_emit_placeholder(out, "B", b->ndim, b->shape, b->dtype);
    pk_op_emit_compute_head(out, "Y", ndim, yshape);
    pk_strbuf_append(out, "pow(A[");
    pk_op_emit_bcast_index(out, a->ndim, a->shape, ndim, 0);
    pk_strbuf_append(out, "], B[");
    pk_op_emit_bcast_index(out, b->ndim, b->shape, ndim, 0);
    pk_strbuf_append(out, "]))\n");
    return PK_OK;
  }
  const pk_op_input *x = &prm->in[0];
  double e = prm->attrs.exponent;
  if (!isfinite(e)) return pk_op_fail(ctx, op, "exponent %g must be finite", e);
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  pk_strbuf xr;
  pk_strbuf_init(&xr);
  pk_op_emit_read_all(&xr, "X", x->ndim);
  const char *v = xr.data;
  if (e == 2) pk_strbuf_printf(out, "%s * %s", v, v);
  else if (e == 3) pk_strbuf_printf(out, "%s * %s * %s", v, v, v);
  else if (e == 0.5) pk_strbuf_printf(out, "sqrt(%s)", v);
  else if (e == -0.5) pk_strbuf_printf(out, "rsqrt(%s)", v);
  else if (e == -1) pk_strbuf_printf(out, "1.0 / %s", v);
  else if (e == -2) pk_strbuf_printf(out, "1.0 / (%s * %s)", v, v);
  else {
    pk_strbuf_append(out, "pow(");
    pk_op_emit_read_all(out, "X", x->ndim);
    pk_strbuf_append(out, ", ");
    pk_op_emit_float(out, e);
    pk_strbuf_append(out, ")");
  }
  pk_strbuf_append(out, ")\n");
  pk_strbuf_free(&xr);
  return PK_OK;
}

/* PyTorch's pow_backward rules, so that training matches it at 0:
 *   d/dA = B A^(B-1), but 0 where B == 0 (not 0 * 0^-1 = NaN): written B * A^(B - [B != 0]),
 *     which is B A^(B-1) for B != 0 and 0 * A^0 = 0 for B == 0, with no select;
 *   d/dB = A^B log A, but 0 where A == 0 and B >= 0: written A^B log(A + [A == 0 && B >= 0]);
 *   pow_scalar: e X^(e-1) (2 X for e = 2), and 0 for e == 0.
 * Both recompute A^B rather than reading Y, so the graph saves only the inputs. */
pk_status pk_op_grad_pow(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                         const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *a = &prm->in[0];
  const char *dt = pkrt_dtype_name(a->dtype);
  if (op == PK_OP_POW_SCALAR) {
    double e = prm->attrs.exponent;
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "X", prm, y);
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
    pk_op_emit_compute_head(out, "DX", a->ndim, a->shape);
    pk_op_emit_read_all(out, "DY", a->ndim);
    if (e == 0) {
      pk_strbuf_append(out, " * 0.0");
    } else if (e == 2) {
      pk_strbuf_append(out, " * 2.0 * ");
      pk_op_emit_read_all(out, "X", a->ndim);
    } else {
      pk_strbuf_append(out, " * ");
      pk_op_emit_float(out, e);
      pk_strbuf_append(out, " * pow(");
      pk_op_emit_read_all(out, "X", a->ndim);
      pk_strbuf_append(out, ", ");
      pk_op_emit_float(out, e - 1);
      pk_strbuf_append(out, ")");
    }
    pk_strbuf_append(out, ")\n");
    (void)ctx;
    return PK_OK;
  }
  const pk_op_input *b = &prm->in[1], *x = &prm->in[input];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "A", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "B", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_unbcast u;
  pk_op_unbcast_init(&u, x->ndim, x->shape, y->ndim, y->shape, 0);
  pk_op_unbcast_emit_axes(out, &u);
  pk_strbuf ar, br; /* A and B at the gradient's point of the result */
  pk_strbuf_init(&ar);
  pk_strbuf_init(&br);
  emit_bcast_read(&ar, "A", &u, a->ndim, a->shape, y->ndim);
  emit_bcast_read(&br, "B", &u, b->ndim, b->shape, y->ndim);
  pk_op_emit_compute_head(out, input ? "DB" : "DA", x->ndim, x->shape);
  if (u.nk) pk_strbuf_append(out, "sum(");
  emit_bcast_read(out, "DY", &u, y->ndim, y->shape, y->ndim);
  if (input == 0)
    pk_strbuf_printf(out, " * %s * pow(%s, %s - cast(%s, %s != 0.0))", br.data, ar.data, br.data,
                     dt, br.data);
  else
    pk_strbuf_printf(out, " * pow(%s, %s) * log(%s + cast(%s, %s == 0.0 && %s >= 0.0))",
                     ar.data, br.data, ar.data, dt, ar.data, br.data);
  if (u.nk) pk_op_unbcast_emit_axis_list(out, &u);
  pk_strbuf_append(out, u.nk ? "))\n" : ")\n");
  pk_strbuf_free(&ar);
  pk_strbuf_free(&br);
  return PK_OK;
}
