/* onnx_fold_math.c — host evaluation at import of the elementwise math ops (Add ... Pow,
 * Sqrt ... Erf, the activations, Clip) when every input is a constant: the shape arithmetic
 * exporters emit (Add/Mul/Div of int64 shape values, Sqrt(Constant) of an attention scale).
 * numpy broadcasting; ONNX's semantics: integer arithmetic wraps in two's complement and
 * integer Div truncates toward zero; float results are computed in double and rounded to
 * the inputs' dtype. */
#include <math.h>
#include <string.h>

#include "onnx_impl.h"

typedef enum fold_op {
  F_ADD, F_SUB, F_MUL, F_DIV, F_POW,
  F_SQRT, F_RECIPROCAL, F_NEG, F_ABS, F_EXP, F_LOG, F_ERF, F_RELU, F_SIGMOID, F_TANH,
  F_LEAKY_RELU, F_ELU, F_HARD_SIGMOID, F_HARD_SWISH, F_GELU, F_CLIP
} fold_op;

static const struct { const char *type; fold_op op; } FOLD_OPS[] = {
    {"Add", F_ADD}, {"Sub", F_SUB}, {"Mul", F_MUL}, {"Div", F_DIV}, {"Pow", F_POW},
    {"Sqrt", F_SQRT}, {"Reciprocal", F_RECIPROCAL}, {"Neg", F_NEG}, {"Abs", F_ABS},
    {"Exp", F_EXP}, {"Log", F_LOG}, {"Erf", F_ERF}, {"Relu", F_RELU}, {"Sigmoid", F_SIGMOID},
    {"Tanh", F_TANH}, {"LeakyRelu", F_LEAKY_RELU}, {"Elu", F_ELU},
    {"HardSigmoid", F_HARD_SIGMOID}, {"HardSwish", F_HARD_SWISH}, {"Gelu", F_GELU},
    {"Clip", F_CLIP}};

/* What the op's attributes and constant bounds say. */
typedef struct fold_prm {
  double alpha, beta;
  bool gelu_tanh;
  double lo, hi;           /* Clip (float) */
  int64_t ilo, ihi;        /* Clip (integer) */
} fold_prm;

static bool is_float(pkrt_dtype t) { return t == PKRT_DTYPE_F32 || t == PKRT_DTYPE_F64; }

/* Element i of a constant, as a double or as an int64. */
static double get_f(const pk_ox_value *v, int64_t i) {
  switch (v->dtype) {
  case PKRT_DTYPE_F32: return ((const float *)v->data)[i];
  case PKRT_DTYPE_F64: return ((const double *)v->data)[i];
  case PKRT_DTYPE_I32: return ((const int32_t *)v->data)[i];
  default: return (double)((const int64_t *)v->data)[i];
  }
}
static int64_t get_i(const pk_ox_value *v, int64_t i) {
  return v->dtype == PKRT_DTYPE_I32 ? ((const int32_t *)v->data)[i]
                                    : ((const int64_t *)v->data)[i];
}

/* Two's complement arithmetic without undefined behaviour. */
static int64_t wrap(uint64_t u) {
  int64_t r;
  memcpy(&r, &u, sizeof r);
  return r;
}

static double unary_f(fold_op op, const fold_prm *p, double x) {
  switch (op) {
  case F_SQRT: return sqrt(x);
  case F_RECIPROCAL: return 1 / x;
  case F_NEG: return -x;
  case F_ABS: return fabs(x);
  case F_EXP: return exp(x);
  case F_LOG: return log(x);
  case F_ERF: return erf(x);
  case F_RELU: return x > 0 ? x : isnan(x) ? x : 0;
  case F_SIGMOID: return 1 / (1 + exp(-x));
  case F_TANH: return tanh(x);
  case F_LEAKY_RELU: return x >= 0 ? x : p->alpha * x;
  case F_ELU: return x > 0 ? x : p->alpha * expm1(x);
  case F_HARD_SIGMOID: return fmax(0, fmin(1, p->alpha * x + p->beta));
  case F_HARD_SWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
  case F_GELU:
    if (p->gelu_tanh)
      return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  default: return fmin(fmax(x, p->lo), p->hi); /* F_CLIP: min > max gives max, as ONNX */
  }
}

/* An integer unary op (Neg, Abs, Relu, Clip take integers in ONNX); false for the others. */
static bool unary_i(fold_op op, const fold_prm *p, int64_t x, int64_t *y) {
  switch (op) {
  case F_NEG: *y = wrap(0 - (uint64_t)x); return true;
  case F_ABS: *y = x < 0 ? wrap(0 - (uint64_t)x) : x; return true;
  case F_RELU: *y = x > 0 ? x : 0; return true;
  case F_CLIP: *y = x < p->ilo ? p->ilo : x; *y = *y > p->ihi ? p->ihi : *y; return true;
  default: return false;
  }
}

static double binary_f(fold_op op, double a, double b) {
  switch (op) {
  case F_ADD: return a + b;
  case F_SUB: return a - b;
  case F_MUL: return a * b;
  case F_DIV: return a / b;
  default: return pow(a, b);
  }
}

/* Integer a ** e for e >= 0, wrapping like a C loop of multiplies would in two's complement. */
static int64_t ipow(int64_t a, int64_t e) {
  uint64_t r = 1, b = (uint64_t)a;
  while (e > 0) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return wrap(r);
}

/* The attributes and Clip's bounds; refuses what the converter would. */
static pk_status fold_params(pk_ox *im, pk_ox_node *nd, fold_op op, const pk_ox_value *x,
                             fold_prm *p) {
  static const char *const none[] = {NULL}, *const alpha[] = {"alpha", NULL},
                           *const hs[] = {"alpha", "beta", NULL},
                           *const gelu[] = {"approximate", NULL};
  pk_status s = pk_ox_attrs_known(im, nd, op == F_LEAKY_RELU || op == F_ELU ? alpha
                                          : op == F_HARD_SIGMOID             ? hs
                                          : op == F_GELU                     ? gelu
                                                                             : none);
  if (s != PK_OK) return s;
  switch (op) {
  case F_LEAKY_RELU: return pk_ox_attr_float(im, nd, "alpha", (double)0.01f, &p->alpha);
  case F_ELU: return pk_ox_attr_float(im, nd, "alpha", 1.0, &p->alpha);
  case F_HARD_SIGMOID:
    if ((s = pk_ox_attr_float(im, nd, "alpha", (double)0.2f, &p->alpha)) != PK_OK) return s;
    return pk_ox_attr_float(im, nd, "beta", 0.5, &p->beta);
  case F_GELU: {
    const char *ap;
    if ((s = pk_ox_attr_string(im, nd, "approximate", "none", &ap)) != PK_OK) return s;
    if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
      return pk_ox_fail(im, nd, "attribute 'approximate' = %s is neither \"none\" nor \"tanh\"",
                        pk_ox_quote(im, ap));
    p->gelu_tanh = ap[0] == 't';
    return PK_OK;
  }
  case F_CLIP:
    p->lo = -INFINITY, p->hi = INFINITY, p->ilo = INT64_MIN, p->ihi = INT64_MAX;
    for (int i = 1; i <= 2; i++) {
      const pk_ox_value *b = pk_ox_in(im, nd, i);
      if (!b) continue;
      if (pk_ox_numel(b->ndim, b->shape) != 1)
        return pk_ox_fail(im, nd, "%s has %lld elements; it must be a scalar", i == 1 ? "min" : "max",
                          (long long)pk_ox_numel(b->ndim, b->shape));
      if (is_float(b->dtype) != is_float(x->dtype))
        return pk_ox_fail(im, nd, "%s is %s but the input is %s", i == 1 ? "min" : "max",
                          pk_ox_dtype_name(b), pk_ox_dtype_name(x));
      if (i == 1) p->lo = get_f(b, 0), p->ilo = is_float(b->dtype) ? 0 : get_i(b, 0);
      else p->hi = get_f(b, 0), p->ihi = is_float(b->dtype) ? 0 : get_i(b, 0);
    }
    return PK_OK;
  default: return PK_OK;
  }
}

/* Row-major strides of an input broadcast to the result's rank (0 along stretched dims). */
static void bcast_strides(const pk_ox_value *v, int n, const int64_t *yshape, int64_t *st) {
  int64_t s = 1;
  for (int d = n - 1; d >= 0; d--) {
    int dv = d - (n - v->ndim);
    if (dv < 0 || v->shape[dv] != yshape[d]) {
      st[d] = 0;
    } else {
      st[d] = s;
      s *= v->shape[dv];
    }
  }
}

/* The fold of every row of the math family: dispatch on the node's op type. */
pk_status pk_ox_fold_math(pk_ox *im, pk_ox_node *nd) {
  const char *type = nd->p->op_type;
  int k = 0, nk = (int)(sizeof FOLD_OPS / sizeof FOLD_OPS[0]);
  while (k < nk && strcmp(FOLD_OPS[k].type, type) != 0) k++;
  const pk_ox_op_info *info = pk_ox_op_find(type);
  if (k == nk) return info ? info->convert(im, nd) : pk_ox_fail(im, nd, "no fold for this op");
  fold_op op = FOLD_OPS[k].op;
  bool bin = op <= F_POW;
  pk_status s = pk_ox_arity(im, nd, bin ? 2 : 1, bin ? 2 : op == F_CLIP ? 3 : 1, 1);
  if (s != PK_OK) return s;
  const pk_ox_value *a = pk_ox_in(im, nd, 0), *b = bin ? pk_ox_in(im, nd, 1) : NULL;
  if (!a || (bin && !b)) return pk_ox_fail(im, nd, "input %d is missing", a ? 1 : 0);

  /* the result's shape; a result too large to fold is left to the graph */
  int n = a->ndim;
  int64_t yshape[PK_TE_MAX_DIMS];
  memcpy(yshape, a->shape, sizeof(int64_t) * (size_t)n);
  if (bin) {
    n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < n; d++) {
      int da = d - (n - a->ndim), db = d - (n - b->ndim);
      int64_t x = da < 0 ? 1 : a->shape[da], y = db < 0 ? 1 : b->shape[db];
      if (x != y && x != 1 && y != 1)
        return pk_ox_fail(im, nd, "shapes %s and %s do not broadcast",
                          pk_ox_shape_str(im, a->ndim, a->shape),
                          pk_ox_shape_str(im, b->ndim, b->shape));
      yshape[d] = x == 1 ? y : x;
    }
  }
  int64_t numel = pk_ox_numel(n, yshape);
  if (numel > PK_OX_MAX_FOLD) return info->convert(im, nd);

  /* dtypes: bool has no arithmetic; the operands of Add..Div share one type; Pow's exponent
   * may be any number type; the float-only functions refuse integers */
  if (a->is_bool || (b && b->is_bool))
    return pk_ox_fail(im, nd, "bool inputs: ONNX defines no arithmetic on bool");
  bool fl = is_float(a->dtype);
  if (bin && op != F_POW && a->dtype != b->dtype)
    return pk_ox_fail(im, nd, "input types differ: %s and %s", pk_ox_dtype_name(a),
                      pk_ox_dtype_name(b));
  fold_prm p = {0};
  if ((s = fold_params(im, nd, op, a, &p)) != PK_OK) return s;
  int64_t dummy;
  if (!fl && !bin && !unary_i(op, &p, 0, &dummy))
    return pk_ox_fail(im, nd, "input is %s: this op takes float tensors", pk_ox_dtype_name(a));

  int64_t sa[PK_TE_MAX_DIMS], sb[PK_TE_MAX_DIMS], idx[PK_TE_MAX_DIMS] = {0};
  bcast_strides(a, n, yshape, sa);
  if (b) bcast_strides(b, n, yshape, sb);
  size_t esize = a->dtype == PKRT_DTYPE_F32 || a->dtype == PKRT_DTYPE_I32 ? 4 : 8;
  void *out = pk_alloc(im->ctx, esize * (size_t)(numel ? numel : 1));
  int64_t ia = 0, ib = 0;
  for (int64_t f = 0; f < numel; f++) {
    if (fl) {
      double x = get_f(a, ia), y;
      y = bin ? binary_f(op, x, get_f(b, ib)) : unary_f(op, &p, x);
      if (a->dtype == PKRT_DTYPE_F32) ((float *)out)[f] = (float)y;
      else ((double *)out)[f] = y;
    } else {
      int64_t x = get_i(a, ia), y = 0;
      if (!bin) {
        unary_i(op, &p, x, &y);
      } else if (op == F_POW) {
        double e = get_f(b, ib);
        if (e != floor(e) || e < 0)
          return pk_ox_fail(im, nd, "integer base with exponent %g: only whole exponents >= 0 "
                            "are folded", e);
        y = ipow(x, (int64_t)e);
      } else {
        int64_t z = get_i(b, ib);
        switch (op) {
        case F_ADD: y = wrap((uint64_t)x + (uint64_t)z); break;
        case F_SUB: y = wrap((uint64_t)x - (uint64_t)z); break;
        case F_MUL: y = wrap((uint64_t)x * (uint64_t)z); break;
        default: /* F_DIV: C's division truncates toward zero, as ONNX's integer Div */
          if (z == 0) return pk_ox_fail(im, nd, "integer division by zero");
          y = z == -1 ? wrap(0 - (uint64_t)x) : x / z;
          break;
        }
      }
      if (a->dtype == PKRT_DTYPE_I32) ((int32_t *)out)[f] = (int32_t)y;
      else ((int64_t *)out)[f] = y;
    }
    /* next index, row-major, carrying the inputs' offsets along */
    for (int d = n - 1; d >= 0; d--) {
      ia += sa[d];
      if (b) ib += sb[d];
      if (++idx[d] < yshape[d]) break;
      ia -= sa[d] * yshape[d];
      if (b) ib -= sb[d] * yshape[d];
      idx[d] = 0;
    }
  }
  return pk_ox_set_const(im, nd, 0, a->dtype, false, n, yshape, out);
}
