/* onnx_ops_math.c — ONNX converters for elementwise math (Add ... Pow, Sqrt ... Erf),
 * activations (Relu ... Gelu), MatMul and Gemm, Softmax and LogSoftmax, and the reductions
 * ReduceMean/ReduceSum/ReduceMax (opsets 13 and newer). Each maps to Pock ops of the same
 * meaning or refuses, naming the node, the attribute and its value. Host evaluation of the
 * elementwise ops on constants is onnx_fold_math.c's. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "onnx_impl.h"

static const char *const NO_ATTRS[] = {NULL};

/* ---- helpers ---- */

static bool is_float(const pk_ox_value *v) {
  return v->dtype == PKRT_DTYPE_F32 || v->dtype == PKRT_DTYPE_F64;
}

/* Input i must be a float tensor: Pock's math ops compute on floats only (integer
 * arithmetic on shapes is folded at import when every input is a constant). */
static pk_status float_input(pk_ox *im, pk_ox_node *nd, int i, int *tensor) {
  pk_ox_value *v = pk_ox_in(im, nd, i);
  if (!v) return pk_ox_fail(im, nd, "input %d is missing", i);
  if (!is_float(v))
    return pk_ox_fail(im, nd,
                      "input %d (%s) is %s: Pock computes this op on float tensors only "
                      "(integer and bool arithmetic is evaluated at import when every input "
                      "is a constant)",
                      i, pk_ox_quote(im, v->name), pk_ox_dtype_name(v));
  return pk_ox_tensor(im, nd, i, tensor);
}

/* Output k's ONNX rank is 0 (a scalar) though its graph tensor is (1,). */
static void set_scalar(pk_ox *im, pk_ox_node *nd, int k) {
  pk_ox_value *v = pk_ox_val(im, nd->out[k]);
  v->ndim = 0;
}

/* numpy broadcasting of two ONNX shapes; false when they do not broadcast. */
static bool bcast(int na, const int64_t *a, int nb, const int64_t *b, int *n, int64_t *out) {
  *n = na > nb ? na : nb;
  for (int d = 0; d < *n; d++) {
    int64_t x = d < *n - na ? 1 : a[d - (*n - na)], y = d < *n - nb ? 1 : b[d - (*n - nb)];
    if (x != y && x != 1 && y != 1) return false;
    out[d] = x == 1 ? y : x;
  }
  return true;
}

/* A constant of the model's float dtype holding n values (Gemm's alpha and beta,
 * HardSigmoid's slope, Pow's integer exponents): a graph constant named after the node. */
static pk_status float_const(pk_ox *im, pk_ox_node *nd, const char *what, int ndim,
                             const int64_t *shape, const double *vals, int *t) {
  int64_t n = pk_ox_numel(ndim, shape);
  bool f64 = im->fdtype == PKRT_DTYPE_F64;
  void *data = pk_alloc(im->ctx, (size_t)n * (f64 ? sizeof(double) : sizeof(float)));
  for (int64_t i = 0; i < n; i++) {
    if (f64) ((double *)data)[i] = vals[i];
    else ((float *)data)[i] = (float)vals[i];
  }
  const char *name = pk_ox_graph_name(im, pk_sprintf(im->ctx, "%s.%s", nd->name, what));
  *t = pk_graph_add_buffer(im->g, name, PK_ROLE_CONSTANT, im->fdtype, ndim ? ndim : 1,
                           ndim ? shape : (int64_t[]){1}, data);
  if (*t < 0) {
    const char *msg = pk_strdup(im->ctx, pk_ctx_error(im->ctx));
    pk_ctx_clear_error(im->ctx);
    return pk_ox_fail(im, nd, "cannot make its constant %s: %s", pk_ox_quote(im, name), msg);
  }
  return PK_OK;
}

static pk_status scalar_const(pk_ox *im, pk_ox_node *nd, const char *what, double v, int *t) {
  return float_const(im, nd, what, 0, NULL, &v, t);
}

/* A float attribute that must be finite and >= lo. */
static pk_status attr_real(pk_ox *im, pk_ox_node *nd, const char *name, double def, double lo,
                           double *out) {
  pk_status s = pk_ox_attr_float(im, nd, name, def, out);
  if (s != PK_OK) return s;
  if (!isfinite(*out) || *out < lo)
    return pk_ox_fail(im, nd, "attribute '%s' = %g is not supported (Pock needs a finite value "
                      ">= %g)", name, *out, lo);
  return PK_OK;
}

/* ---- elementwise binary: Add, Sub, Mul, Div, Pow ---- */

static pk_status binary(pk_ox *im, pk_ox_node *nd, pk_op_kind op) {
  pk_status s;
  int t[2];
  if ((s = pk_ox_attrs_known(im, nd, NO_ATTRS)) != PK_OK ||
      (s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK ||
      (s = float_input(im, nd, 0, &t[0])) != PK_OK || (s = float_input(im, nd, 1, &t[1])) != PK_OK)
    return s;
  pk_ox_value *a = pk_ox_in(im, nd, 0), *b = pk_ox_in(im, nd, 1);
  int n;
  int64_t shape[PK_TE_MAX_DIMS];
  if (!bcast(a->ndim, a->shape, b->ndim, b->shape, &n, shape))
    return pk_ox_fail(im, nd, "shapes %s and %s do not broadcast",
                      pk_ox_shape_str(im, a->ndim, a->shape), pk_ox_shape_str(im, b->ndim, b->shape));
  if ((s = pk_ox_op_result(im, nd, op, &(pk_op_attrs){0}, 2, t, 0)) != PK_OK) return s;
  if (n == 0) set_scalar(im, nd, 0);
  return PK_OK;
}

pk_status pk_ox_add(pk_ox *im, pk_ox_node *nd) { return binary(im, nd, PK_OP_ADD); }
pk_status pk_ox_sub(pk_ox *im, pk_ox_node *nd) { return binary(im, nd, PK_OP_SUB); }
pk_status pk_ox_mul(pk_ox *im, pk_ox_node *nd) { return binary(im, nd, PK_OP_MUL); }
pk_status pk_ox_div(pk_ox *im, pk_ox_node *nd) { return binary(im, nd, PK_OP_DIV); }

/* Pow(X, Y): a constant one-element Y that does not widen X's shape is pow_scalar (x ** 2
 * and x ** 0.5 of the LayerNorm and RMSNorm decompositions; Pock writes those without pow);
 * else pow of two float tensors. */
pk_status pk_ox_pow(pk_ox *im, pk_ox_node *nd) {
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, NO_ATTRS)) != PK_OK ||
      (s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK)
    return s;
  pk_ox_value *x = pk_ox_in(im, nd, 0), *y = pk_ox_in(im, nd, 1);
  if (!x || !y) return pk_ox_fail(im, nd, "input %d is missing", x ? 1 : 0);
  if (y->kind == PK_OXV_CONST && pk_ox_numel(y->ndim, y->shape) == 1 && y->ndim <= x->ndim) {
    double e;
    int tx;
    if ((s = pk_ox_const_f64(im, nd, 1, "exponent", &e)) != PK_OK) return s;
    if (!isfinite(e))
      return pk_ox_fail(im, nd, "exponent %g is not finite (Pock's pow_scalar needs a finite "
                        "exponent)", e);
    if ((s = float_input(im, nd, 0, &tx)) != PK_OK) return s;
    if ((s = pk_ox_op_result(im, nd, PK_OP_POW_SCALAR, &(pk_op_attrs){.exponent = e}, 1, &tx,
                             0)) != PK_OK)
      return s;
    if (x->ndim == 0) set_scalar(im, nd, 0);
    return PK_OK;
  }
  if (y->kind == PK_OXV_CONST && !is_float(y) && !y->is_bool && x->dtype != y->dtype) {
    /* ONNX lets the exponent be an integer tensor; Pock's pow takes floats: a float copy */
    int64_t n = pk_ox_numel(y->ndim, y->shape);
    if (n == 0) return pk_ox_fail(im, nd, "the exponent is empty");
    double *vals = pk_alloc(im->ctx, sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
      vals[i] = y->dtype == PKRT_DTYPE_I32 ? ((const int32_t *)y->data)[i]
                                           : (double)((const int64_t *)y->data)[i];
    int t[2], nb;
    int64_t shape[PK_TE_MAX_DIMS];
    if (!bcast(x->ndim, x->shape, y->ndim, y->shape, &nb, shape))
      return pk_ox_fail(im, nd, "shapes %s and %s do not broadcast",
                        pk_ox_shape_str(im, x->ndim, x->shape),
                        pk_ox_shape_str(im, y->ndim, y->shape));
    if ((s = float_input(im, nd, 0, &t[0])) != PK_OK ||
        (s = float_const(im, nd, "exponent", y->ndim, y->shape, vals, &t[1])) != PK_OK ||
        (s = pk_ox_op_result(im, nd, PK_OP_POW, &(pk_op_attrs){0}, 2, t, 0)) != PK_OK)
      return s;
    if (nb == 0) set_scalar(im, nd, 0);
    return PK_OK;
  }
  return binary(im, nd, PK_OP_POW);
}

/* ---- unary math and activations ---- */

/* Op `op` of input 0 (the caller checked the arity). */
static pk_status emit_unary(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *attrs) {
  int t;
  pk_status s;
  if ((s = float_input(im, nd, 0, &t)) != PK_OK ||
      (s = pk_ox_op_result(im, nd, op, attrs, 1, &t, 0)) != PK_OK)
    return s;
  if (pk_ox_in(im, nd, 0)->ndim == 0) set_scalar(im, nd, 0);
  return PK_OK;
}

static pk_status unary(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *attrs) {
  pk_status s = pk_ox_arity(im, nd, 1, 1, 1);
  return s != PK_OK ? s : emit_unary(im, nd, op, attrs);
}

/* The ops with no attributes. */
static pk_status plain(pk_ox *im, pk_ox_node *nd, pk_op_kind op) {
  pk_status s = pk_ox_attrs_known(im, nd, NO_ATTRS);
  return s != PK_OK ? s : unary(im, nd, op, &(pk_op_attrs){0});
}

pk_status pk_ox_sqrt(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_SQRT); }
pk_status pk_ox_reciprocal(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_RECIPROCAL); }
pk_status pk_ox_neg(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_NEG); }
pk_status pk_ox_abs(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_ABS); }
pk_status pk_ox_exp(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_EXP); }
pk_status pk_ox_log(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_LOG); }
pk_status pk_ox_erf(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_ERF); }
pk_status pk_ox_relu(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_RELU); }
pk_status pk_ox_sigmoid(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_SIGMOID); }
pk_status pk_ox_tanh(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_TANH); }
pk_status pk_ox_hardswish(pk_ox *im, pk_ox_node *nd) { return plain(im, nd, PK_OP_HARDSWISH); }

/* LeakyRelu(alpha) and Elu(alpha): Pock's alpha 0 means the default, so ONNX's alpha 0 (the
 * same function as relu for both) becomes relu; a negative alpha is refused. */
static pk_status alpha_act(pk_ox *im, pk_ox_node *nd, pk_op_kind op, double def) {
  static const char *const known[] = {"alpha", NULL};
  double alpha;
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = attr_real(im, nd, "alpha", def, 0, &alpha)) != PK_OK)
    return s;
  if (alpha == 0) return unary(im, nd, PK_OP_RELU, &(pk_op_attrs){0});
  return unary(im, nd, op, &(pk_op_attrs){.alpha = alpha});
}

/* ONNX's defaults are float attributes: 0.01f, 1.0f */
pk_status pk_ox_leaky_relu(pk_ox *im, pk_ox_node *nd) {
  return alpha_act(im, nd, PK_OP_LEAKY_RELU, (double)0.01f);
}
pk_status pk_ox_elu(pk_ox *im, pk_ox_node *nd) { return alpha_act(im, nd, PK_OP_ELU, 1.0); }

/* Gelu (opset 20): approximate "none" (erf form) or "tanh". */
pk_status pk_ox_gelu(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"approximate", NULL};
  const char *ap;
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_attr_string(im, nd, "approximate", "none", &ap)) != PK_OK)
    return s;
  int mode;
  if (strcmp(ap, "none") == 0) mode = PK_GELU_ERF;
  else if (strcmp(ap, "tanh") == 0) mode = PK_GELU_TANH;
  else
    return pk_ox_fail(im, nd, "attribute 'approximate' = %s is neither \"none\" nor \"tanh\"",
                      pk_ox_quote(im, ap));
  return unary(im, nd, PK_OP_GELU, &(pk_op_attrs){.approximate = mode});
}

/* Clip (opset 13): min and max are optional constant inputs. Clip(0, 6) is what torch
 * exports nn.ReLU6 as: it becomes relu6, whose gradient is PyTorch's hardtanh rule (0 at
 * the bounds), so training matches; other bounds become clip (clamp's rule: 1 at the
 * bounds). A missing or infinite bound is the dtype's largest finite value, as Pock's clip
 * needs finite bounds; no bound at all is the identity. */
pk_status pk_ox_clip(pk_ox *im, pk_ox_node *nd) {
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, NO_ATTRS)) != PK_OK ||
      (s = pk_ox_arity(im, nd, 1, 3, 1)) != PK_OK)
    return s;
  double big = im->fdtype == PKRT_DTYPE_F64 ? DBL_MAX : FLT_MAX;
  double lo = -big, hi = big;
  bool has_lo = pk_ox_in(im, nd, 1) != NULL, has_hi = pk_ox_in(im, nd, 2) != NULL;
  if (has_lo && (s = pk_ox_const_f64(im, nd, 1, "min", &lo)) != PK_OK) return s;
  if (has_hi && (s = pk_ox_const_f64(im, nd, 2, "max", &hi)) != PK_OK) return s;
  if (isnan(lo) || isnan(hi)) return pk_ox_fail(im, nd, "a bound is NaN");
  if (lo < -big) lo = -big, has_lo = false; /* -inf: no lower bound */
  if (hi > big) hi = big, has_hi = false;
  if (lo > big || hi < -big)
    return pk_ox_fail(im, nd, "bounds [%g, %g] leave the float range", lo, hi);
  if (lo > hi)
    return pk_ox_fail(im, nd, "min %g > max %g (ONNX then outputs max everywhere; Pock's clip "
                      "refuses it)", lo, hi);
  pk_ox_value *x = pk_ox_in(im, nd, 0);
  if (!x) return pk_ox_fail(im, nd, "input 0 is missing");
  if (!has_lo && !has_hi) {
    if (!is_float(x)) return float_input(im, nd, 0, &(int){0}); /* the dtype message */
    return pk_ox_alias(im, nd, 0, 0);
  }
  if (has_lo && has_hi && lo == 0 && hi == 6)
    return emit_unary(im, nd, PK_OP_RELU6, &(pk_op_attrs){0});
  return emit_unary(im, nd, PK_OP_CLIP, &(pk_op_attrs){.clip_min = lo, .clip_max = hi});
}

/* HardSigmoid(alpha, beta) = max(0, min(1, alpha x + beta)). alpha = 1/6 (as a float
 * attribute: what torch exports F.hardsigmoid as) with beta 0.5 is Pock's hardsigmoid;
 * others are mul, add and clip(0, 1). */
pk_status pk_ox_hard_sigmoid(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"alpha", "beta", NULL};
  double alpha, beta;
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_attr_float(im, nd, "alpha", (double)0.2f, &alpha)) != PK_OK ||
      (s = pk_ox_attr_float(im, nd, "beta", 0.5, &beta)) != PK_OK)
    return s;
  if (!isfinite(alpha) || !isfinite(beta))
    return pk_ox_fail(im, nd, "attributes alpha = %g, beta = %g must be finite", alpha, beta);
  if (alpha == (double)(float)(1.0 / 6.0) && beta == 0.5)
    return unary(im, nd, PK_OP_HARDSIGMOID, &(pk_op_attrs){0});
  int t, ta, tb, u, v;
  if ((s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK || (s = float_input(im, nd, 0, &t)) != PK_OK ||
      (s = scalar_const(im, nd, "alpha", alpha, &ta)) != PK_OK ||
      (s = scalar_const(im, nd, "beta", beta, &tb)) != PK_OK ||
      (s = pk_ox_op(im, nd, PK_OP_MUL, &(pk_op_attrs){0}, 2, (int[]){t, ta}, &u)) != PK_OK ||
      (s = pk_ox_op(im, nd, PK_OP_ADD, &(pk_op_attrs){0}, 2, (int[]){u, tb}, &v)) != PK_OK ||
      (s = pk_ox_op_result(im, nd, PK_OP_CLIP, &(pk_op_attrs){.clip_min = 0, .clip_max = 1}, 1,
                           &v, 0)) != PK_OK)
    return s;
  if (pk_ox_in(im, nd, 0)->ndim == 0) set_scalar(im, nd, 0);
  return PK_OK;
}

/* ---- MatMul and Gemm ---- */

/* The B operand of a matmul: a TPARAM (Transpose of a rank-2 initializer W) is read as W
 * itself with the transpose flag flipped, so the graph's param is W in PyTorch's layout
 * (partial-channel training needs a trans_b matmul of a rank-2 param). *trans is the flag
 * to use when B is read as stored; it is flipped for a TPARAM. */
static pk_status matmul_b(pk_ox *im, pk_ox_node *nd, int i, bool *trans, int *tensor) {
  pk_ox_value *b = pk_ox_in(im, nd, i);
  if (b && b->kind == PK_OXV_TPARAM) {
    *trans = !*trans;
    return pk_ox_value_tensor(im, nd, b->src, tensor);
  }
  return float_input(im, nd, i, tensor);
}

/* Reshapes graph tensor t to the given shape (an intermediate of the node). */
static pk_status reshape(pk_ox *im, pk_ox_node *nd, int t, int ndim, const int64_t *shape,
                         int *out) {
  pk_op_attrs a = {.new_ndim = ndim};
  memcpy(a.new_shape, shape, sizeof(int64_t) * (size_t)ndim);
  return pk_ox_op(im, nd, PK_OP_RESHAPE, &a, 1, &t, out);
}

/* MatMul: numpy's matmul. Rank 2 by rank 2 is matmul; higher ranks are batch_matmul (its
 * batch dims broadcast; a rank-2 B is the usual nn.Linear weight); a rank-1 operand is made
 * a matrix ((1, K) for A, (K, 1) for B) and its dim dropped from the result again. */
pk_status pk_ox_matmul(pk_ox *im, pk_ox_node *nd) {
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, NO_ATTRS)) != PK_OK ||
      (s = pk_ox_arity(im, nd, 2, 2, 1)) != PK_OK)
    return s;
  pk_ox_value *a = pk_ox_in(im, nd, 0), *b = pk_ox_in(im, nd, 1);
  if (!a || !b) return pk_ox_fail(im, nd, "input %d is missing", a ? 1 : 0);
  bool tb = false;
  int ta_t, tb_t;
  if ((s = float_input(im, nd, 0, &ta_t)) != PK_OK || (s = matmul_b(im, nd, 1, &tb, &tb_t)) != PK_OK)
    return s;
  /* B's logical (K, N) shape as ONNX sees it: a TPARAM's value shape is already W^T's */
  int na = a->ndim, nb = b->ndim;
  if (na < 1 || nb < 1)
    return pk_ox_fail(im, nd, "operands %s and %s: MatMul needs rank >= 1",
                      pk_ox_shape_str(im, na, a->shape), pk_ox_shape_str(im, nb, b->shape));
  int64_t ka = a->shape[na - 1], kb = b->shape[nb >= 2 ? nb - 2 : 0];
  if (ka != kb)
    return pk_ox_fail(im, nd, "inner dims differ: A %s, B %s", pk_ox_shape_str(im, na, a->shape),
                      pk_ox_shape_str(im, nb, b->shape));
  /* the result's ONNX shape: broadcast batch dims, then M (unless A is a vector) and N
   * (unless B is a vector) */
  int nbatch = 0;
  int64_t yshape[PK_TE_MAX_DIMS + 2];
  if (na > 2 || nb > 2) {
    if (!bcast(na > 2 ? na - 2 : 0, a->shape, nb > 2 ? nb - 2 : 0, b->shape, &nbatch, yshape))
      return pk_ox_fail(im, nd, "batch dims of %s and %s do not broadcast",
                        pk_ox_shape_str(im, na, a->shape), pk_ox_shape_str(im, nb, b->shape));
  }
  int ny = nbatch;
  if (na >= 2) yshape[ny++] = a->shape[na - 2];
  if (nb >= 2) yshape[ny++] = b->shape[nb - 1];
  if (ny > PK_TE_MAX_DIMS)
    return pk_ox_fail(im, nd, "result rank %d exceeds Pock's %d", ny, PK_TE_MAX_DIMS);
  if (na == 1 && (s = reshape(im, nd, ta_t, 2, (int64_t[]){1, ka}, &ta_t)) != PK_OK) return s;
  if (nb == 1 && (s = reshape(im, nd, tb_t, 2, (int64_t[]){kb, 1}, &tb_t)) != PK_OK) return s;
  int ra = na == 1 ? 2 : na, rb = nb == 1 ? 2 : nb;
  pk_op_kind op = ra == 2 && rb == 2 ? PK_OP_MATMUL : PK_OP_BATCH_MATMUL;
  pk_op_attrs at = {.trans_b = tb};
  if (na >= 2 && nb >= 2) return pk_ox_op_result(im, nd, op, &at, 2, (int[]){ta_t, tb_t}, 0);
  int r;
  if ((s = pk_ox_op(im, nd, op, &at, 2, (int[]){ta_t, tb_t}, &r)) != PK_OK) return s;
  pk_op_attrs ra_attrs = {.new_ndim = ny ? ny : 1};
  if (ny) memcpy(ra_attrs.new_shape, yshape, sizeof(int64_t) * (size_t)ny);
  else ra_attrs.new_shape[0] = 1;
  if ((s = pk_ox_op_result(im, nd, PK_OP_RESHAPE, &ra_attrs, 1, &r, 0)) != PK_OK) return s;
  if (ny == 0) set_scalar(im, nd, 0);
  return PK_OK;
}

/* Gemm: Y = alpha A' B' + beta C with A' = transA ? A^T : A (rank 2), the same for B; C
 * (optional) broadcasts to Y. nn.Linear on rank-2 input exports Gemm(x, W, b, transB=1):
 * that is matmul(x, W, trans_b) + b with W and b the initializers. alpha or beta other than
 * 1 multiply by a constant. */
pk_status pk_ox_gemm(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"alpha", "beta", "transA", "transB", NULL};
  pk_status s;
  int64_t trans_a, trans_b;
  double alpha, beta;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_arity(im, nd, 2, 3, 1)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "transA", 0, 0, 1, &trans_a)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "transB", 0, 0, 1, &trans_b)) != PK_OK ||
      (s = pk_ox_attr_float(im, nd, "alpha", 1.0, &alpha)) != PK_OK ||
      (s = pk_ox_attr_float(im, nd, "beta", 1.0, &beta)) != PK_OK)
    return s;
  if (!isfinite(alpha) || !isfinite(beta))
    return pk_ox_fail(im, nd, "attributes alpha = %g, beta = %g must be finite", alpha, beta);
  pk_ox_value *a = pk_ox_in(im, nd, 0), *b = pk_ox_in(im, nd, 1), *c = pk_ox_in(im, nd, 2);
  if (!a || !b) return pk_ox_fail(im, nd, "input %d is missing", a ? 1 : 0);
  if (a->ndim != 2 || b->ndim != 2)
    return pk_ox_fail(im, nd, "A %s and B %s must have rank 2", pk_ox_shape_str(im, a->ndim, a->shape),
                      pk_ox_shape_str(im, b->ndim, b->shape));
  int64_t m = a->shape[trans_a ? 1 : 0], ka = a->shape[trans_a ? 0 : 1];
  int64_t kb = b->shape[trans_b ? 1 : 0], n = b->shape[trans_b ? 0 : 1];
  if (ka != kb)
    return pk_ox_fail(im, nd, "inner dims differ: A %s%s, B %s%s",
                      pk_ox_shape_str(im, 2, a->shape), trans_a ? "^T" : "",
                      pk_ox_shape_str(im, 2, b->shape), trans_b ? "^T" : "");
  if (c) {
    int nc;
    int64_t yc[PK_TE_MAX_DIMS];
    if (!bcast(c->ndim, c->shape, 2, (int64_t[]){m, n}, &nc, yc) || nc != 2 || yc[0] != m ||
        yc[1] != n)
      return pk_ox_fail(im, nd, "C %s does not broadcast to the result (%lld, %lld)",
                        pk_ox_shape_str(im, c->ndim, c->shape), (long long)m, (long long)n);
  }
  bool tb = trans_b;
  int ta_t, tb_t, y, k;
  if ((s = float_input(im, nd, 0, &ta_t)) != PK_OK || (s = matmul_b(im, nd, 1, &tb, &tb_t)) != PK_OK)
    return s;
  pk_op_attrs at = {.trans_a = trans_a, .trans_b = tb};
  bool scale = alpha != 1, add_c = c && beta != 0, scale_c = add_c && beta != 1;
  if (!scale && !add_c) return pk_ox_op_result(im, nd, PK_OP_MATMUL, &at, 2, (int[]){ta_t, tb_t}, 0);
  if ((s = pk_ox_op(im, nd, PK_OP_MATMUL, &at, 2, (int[]){ta_t, tb_t}, &y)) != PK_OK) return s;
  if (scale) {
    if ((s = scalar_const(im, nd, "alpha", alpha, &k)) != PK_OK) return s;
    if (!add_c) return pk_ox_op_result(im, nd, PK_OP_MUL, &(pk_op_attrs){0}, 2, (int[]){y, k}, 0);
    if ((s = pk_ox_op(im, nd, PK_OP_MUL, &(pk_op_attrs){0}, 2, (int[]){y, k}, &y)) != PK_OK)
      return s;
  }
  int tc;
  if ((s = float_input(im, nd, 2, &tc)) != PK_OK) return s;
  if (scale_c) {
    if ((s = scalar_const(im, nd, "beta", beta, &k)) != PK_OK ||
        (s = pk_ox_op(im, nd, PK_OP_MUL, &(pk_op_attrs){0}, 2, (int[]){tc, k}, &tc)) != PK_OK)
      return s;
  }
  return pk_ox_op_result(im, nd, PK_OP_ADD, &(pk_op_attrs){0}, 2, (int[]){y, tc}, 0);
}

/* ---- Softmax, LogSoftmax (opset 13: one axis, default -1) ---- */

static pk_status softmax(pk_ox *im, pk_ox_node *nd, pk_op_kind op) {
  static const char *const known[] = {"axis", NULL};
  pk_status s;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = pk_ox_arity(im, nd, 1, 1, 1)) != PK_OK)
    return s;
  pk_ox_value *x = pk_ox_in(im, nd, 0);
  if (!x) return pk_ox_fail(im, nd, "input 0 is missing");
  int r = x->ndim;
  if (r < 1) return pk_ox_fail(im, nd, "input is a scalar: Softmax needs rank >= 1");
  int64_t axis;
  if ((s = pk_ox_attr_int(im, nd, "axis", -1, -r, r - 1, &axis)) != PK_OK) return s;
  return unary(im, nd, op, &(pk_op_attrs){.axis = (int)axis});
}

pk_status pk_ox_softmax(pk_ox *im, pk_ox_node *nd) { return softmax(im, nd, PK_OP_SOFTMAX); }
pk_status pk_ox_log_softmax(pk_ox *im, pk_ox_node *nd) {
  return softmax(im, nd, PK_OP_LOG_SOFTMAX);
}

/* ---- ReduceMean, ReduceSum, ReduceMax ----
 * The axes are an attribute of ReduceMean and ReduceMax before opset 18 and an optional
 * constant input of ReduceSum (13) and of all three from 18. No axes reduces every axis,
 * unless noop_with_empty_axes (input form only) makes the node the identity. */
static pk_status reduce(pk_ox *im, pk_ox_node *nd, pk_op_kind op, bool axes_input) {
  static const char *const known_attr[] = {"axes", "keepdims", NULL};
  static const char *const known_input[] = {"keepdims", "noop_with_empty_axes", NULL};
  pk_status s;
  int64_t keepdims, noop = 0;
  if (axes_input && pk_ox_attr(nd, "axes"))
    return pk_ox_fail(im, nd, "attribute 'axes' is not part of %s at opset %lld: the axes are "
                      "its second input (a constant)", nd->p->op_type, (long long)im->opset);
  if ((s = pk_ox_attrs_known(im, nd, axes_input ? known_input : known_attr)) != PK_OK ||
      (s = pk_ox_arity(im, nd, 1, axes_input ? 2 : 1, 1)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "keepdims", 1, 0, 1, &keepdims)) != PK_OK ||
      (axes_input &&
       (s = pk_ox_attr_int(im, nd, "noop_with_empty_axes", 0, 0, 1, &noop)) != PK_OK))
    return s;
  pk_ox_value *x = pk_ox_in(im, nd, 0);
  if (!x) return pk_ox_fail(im, nd, "input 0 is missing");
  int r = x->ndim, n = 0;
  int64_t axes[PK_TE_MAX_DIMS + 1];
  if (axes_input) {
    if (pk_ox_in(im, nd, 1) &&
        (s = pk_ox_const_ints(im, nd, 1, "axes", PK_TE_MAX_DIMS + 1, &n, axes)) != PK_OK)
      return s;
  } else {
    bool present;
    if ((s = pk_ox_attr_ints(im, nd, "axes", PK_TE_MAX_DIMS + 1, &present, &n, axes)) != PK_OK)
      return s;
  }
  if (n == 0 && noop) return pk_ox_alias(im, nd, 0, 0);
  bool seen[PK_TE_MAX_DIMS] = {false};
  pk_op_attrs a = {.naxes = n, .keepdims = keepdims != 0};
  for (int i = 0; i < n; i++) {
    if (axes[i] < -r || axes[i] >= (r ? r : 1))
      return pk_ox_fail(im, nd, "axis %lld is out of range for rank %d", (long long)axes[i], r);
    int d = (int)(axes[i] < 0 ? axes[i] + r : axes[i]);
    if (r == 0) continue; /* a scalar: axis 0 of its (1,) tensor */
    if (seen[d]) return pk_ox_fail(im, nd, "axis %lld is listed twice", (long long)axes[i]);
    seen[d] = true;
    a.axes[i] = d;
  }
  if (r == 0) a.naxes = 0;
  int left = n == 0 ? 0 : r - n; /* the result's ONNX rank without keepdims */
  int t;
  if ((s = float_input(im, nd, 0, &t)) != PK_OK ||
      (s = pk_ox_op_result(im, nd, op, &a, 1, &t, 0)) != PK_OK)
    return s;
  if (r == 0 || (!keepdims && left == 0)) set_scalar(im, nd, 0);
  return PK_OK;
}

pk_status pk_ox_reduce_mean(pk_ox *im, pk_ox_node *nd) {
  return reduce(im, nd, PK_OP_MEAN, im->opset >= 18);
}
pk_status pk_ox_reduce_sum(pk_ox *im, pk_ox_node *nd) { return reduce(im, nd, PK_OP_SUM, true); }
pk_status pk_ox_reduce_max(pk_ox *im, pk_ox_node *nd) {
  return reduce(im, nd, PK_OP_MAX, im->opset >= 18);
}
