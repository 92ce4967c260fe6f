/* test_ops.c — the operator library: every example instance builds, has the right result
 * shape, and its interpreted result equals a naive loop written here independently of the
 * TE text; softmax rows sum to 1, mean is sum / n; bad parameters give clear errors; the
 * attention family's results equal PyTorch's on fixed inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ops.h"
#include "pk_verify.h"
#include "pk_test.h"

/* ---- dense tensors of doubles ---- */

typedef struct dense {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  double *v;
} dense;

static int64_t numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static void unravel(int64_t flat, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
}

static int64_t ravel(const int64_t *idx, int ndim, const int64_t *shape) {
  int64_t f = 0;
  for (int d = 0; d < ndim; d++) f = f * shape[d] + idx[d];
  return f;
}

/* Flat index into `in` of output index idx under numpy broadcasting (right-aligned). */
static int64_t bcast_flat(const pk_op_input *in, const int64_t *idx, int out_ndim) {
  int64_t f = 0;
  for (int j = 0; j < in->ndim; j++) {
    int64_t i = idx[out_ndim - in->ndim + j];
    f = f * in->shape[j] + (in->shape[j] == 1 ? 0 : i);
  }
  return f;
}

static void alloc_out(dense *y, int ndim, const int64_t *shape) {
  y->ndim = ndim;
  memcpy(y->shape, shape, sizeof(int64_t) * (size_t)ndim);
  y->v = calloc((size_t)numel(ndim, shape), sizeof(double));
}

static int broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int d = 0; d < n; d++) {
    int da = d - (n - na), db = d - (n - nb);
    int64_t ea = da >= 0 ? a[da] : 1, eb = db >= 0 ? b[db] : 1;
    out[d] = ea == 1 ? eb : ea;
  }
  return n;
}

/* ---- naive references ---- */

static void naive_matmul(const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *a = &prm->in[0], *b = &prm->in[1];
  bool ta = prm->attrs.trans_a, tb = prm->attrs.trans_b;
  int64_t shape[PK_TE_MAX_DIMS];
  int nb = broadcast_shape(a->ndim - 2, a->shape, b->ndim - 2, b->shape, shape);
  int64_t m = a->shape[a->ndim - (ta ? 1 : 2)], k = a->shape[a->ndim - (ta ? 2 : 1)];
  int64_t n = b->shape[b->ndim - (tb ? 2 : 1)];
  shape[nb] = m;
  shape[nb + 1] = n;
  alloc_out(y, nb + 2, shape);
  int64_t bsize = numel(nb, shape), idx[PK_TE_MAX_DIMS];
  for (int64_t bi = 0; bi < bsize; bi++) {
    unravel(bi, nb, shape, idx);
    /* batch offset of each operand: broadcast over its own batch dims */
    pk_op_input ab = *a, bb = *b;
    ab.ndim -= 2;
    bb.ndim -= 2;
    int64_t oa = bcast_flat(&ab, idx, nb) * m * k, ob = bcast_flat(&bb, idx, nb) * k * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++)
          s += x[0][oa + (ta ? p * m + i : i * k + p)] * x[1][ob + (tb ? j * k + p : p * n + j)];
        y->v[(bi * m + i) * n + j] = s;
      }
  }
}

static void naive_binary(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  int64_t shape[PK_TE_MAX_DIMS], idx[PK_TE_MAX_DIMS];
  const pk_op_input *ia = &prm->in[0], *ib = &prm->in[1];
  int n = broadcast_shape(ia->ndim, ia->shape, ib->ndim, ib->shape, shape);
  alloc_out(y, n, shape);
  for (int64_t f = 0; f < numel(n, shape); f++) {
    unravel(f, n, shape, idx);
    double a = x[0][bcast_flat(&prm->in[0], idx, n)], b = x[1][bcast_flat(&prm->in[1], idx, n)];
    y->v[f] = op == PK_OP_ADD ? a + b : op == PK_OP_SUB ? a - b : op == PK_OP_MUL ? a * b : a / b;
  }
}

static void naive_unary(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  alloc_out(y, prm->in[0].ndim, prm->in[0].shape);
  for (int64_t f = 0; f < numel(y->ndim, y->shape); f++) {
    double v = x[0][f], alpha = prm->attrs.alpha;
    double hsig = v <= -3 ? 0 : v >= 3 ? 1 : v / 6 + 0.5; /* PyTorch's hardsigmoid */
    y->v[f] = op == PK_OP_RELU         ? (v > 0 ? v : 0)
              : op == PK_OP_SIGMOID    ? 1 / (1 + exp(-v))
              : op == PK_OP_TANH       ? tanh(v)
              : op == PK_OP_LEAKY_RELU ? (v > 0 ? v : (alpha ? alpha : 0.01) * v)
              : op == PK_OP_ELU        ? (v > 0 ? v : (alpha ? alpha : 1.0) * expm1(v))
              : op == PK_OP_SILU       ? v / (1 + exp(-v))
              : op == PK_OP_HARDSIGMOID ? hsig
              : op == PK_OP_HARDSWISH  ? v * hsig
              : op == PK_OP_RELU6      ? (v < 0 ? 0 : v > 6 ? 6 : v)
              : op == PK_OP_CLIP       ? fmin(fmax(v, prm->attrs.clip_min), prm->attrs.clip_max)
              : op == PK_OP_EXP        ? exp(v)
              : op == PK_OP_LOG        ? log(v)
              : op == PK_OP_SQRT       ? sqrt(v)
              : op == PK_OP_RSQRT      ? 1 / sqrt(v)
              : op == PK_OP_ABS        ? fabs(v)
              : op == PK_OP_NEG        ? -v
              : op == PK_OP_RECIPROCAL ? 1 / v
              : op == PK_OP_ERF        ? erf(v)
                                       : v * 0.5 * (1 + erf(v / sqrt(2.0)));
  }
}

static void naive_softmax(const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *in = &prm->in[0];
  int axis = prm->attrs.axis < 0 ? prm->attrs.axis + in->ndim : prm->attrs.axis;
  alloc_out(y, in->ndim, in->shape);
  int64_t len = in->shape[axis], inner = 1, idx[PK_TE_MAX_DIMS];
  for (int d = axis + 1; d < in->ndim; d++) inner *= in->shape[d];
  for (int64_t f = 0; f < numel(in->ndim, in->shape); f++) {
    unravel(f, in->ndim, in->shape, idx);
    int64_t first = f - idx[axis] * inner; /* the same row's element 0 */
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < len; j++) m = fmax(m, x[0][first + j * inner]);
    for (int64_t j = 0; j < len; j++) s += exp(x[0][first + j * inner] - m);
    y->v[f] = exp(x[0][f] - m) / s;
  }
}

static void naive_reduce(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *in = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  bool red[PK_TE_MAX_DIMS] = {false};
  for (int i = 0; i < a->naxes; i++)
    red[a->axes[i] < 0 ? a->axes[i] + in->ndim : a->axes[i]] = true;
  if (a->naxes == 0)
    for (int d = 0; d < in->ndim; d++) red[d] = true;
  int64_t kshape[PK_TE_MAX_DIMS], shape[PK_TE_MAX_DIMS], count = 1; /* keepdims shape */
  int n = 0;
  for (int d = 0; d < in->ndim; d++) {
    kshape[d] = red[d] ? 1 : in->shape[d];
    count *= red[d] ? in->shape[d] : 1;
    if (!red[d] || a->keepdims) shape[n++] = kshape[d];
  }
  if (n == 0) shape[n++] = 1;
  alloc_out(y, n, shape);
  int64_t total = numel(in->ndim, kshape), idx[PK_TE_MAX_DIMS];
  for (int64_t f = 0; f < total; f++) y->v[f] = op == PK_OP_MAX ? -INFINITY : 0;
  for (int64_t f = 0; f < numel(in->ndim, in->shape); f++) {
    unravel(f, in->ndim, in->shape, idx);
    for (int d = 0; d < in->ndim; d++) idx[d] = red[d] ? 0 : idx[d];
    double *acc = &y->v[ravel(idx, in->ndim, kshape)];
    *acc = op == PK_OP_MAX ? fmax(*acc, x[0][f]) : *acc + x[0][f];
  }
  if (op == PK_OP_MEAN)
    for (int64_t f = 0; f < total; f++) y->v[f] /= (double)count;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

static int64_t or1(int64_t v) { return v ? v : 1; }

static void naive_conv2d(const pk_op_params *prm, double *const *x, dense *y) {
  const int64_t *xs = prm->in[0].shape, *ws = prm->in[1].shape;
  const pk_op_attrs *a = &prm->attrs;
  int64_t g = or1(a->groups), sh = or1(a->stride[0]), sw = or1(a->stride[1]);
  int64_t dh = or1(a->dilation[0]), dw = or1(a->dilation[1]);
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], KH = ws[2], KW = ws[3];
  int64_t OH = out_size(H, KH, sh, dh, a->pad[0], a->pad[2]);
  int64_t OW = out_size(W, KW, sw, dw, a->pad[1], a->pad[3]);
  alloc_out(y, 4, (int64_t[]){N, O, OH, OW});
  int64_t cg = C / g, og = O / g;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double s = 0;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t r = 0; r < KH; r++)
              for (int64_t q = 0; q < KW; q++) {
                int64_t h = oh * sh + r * dh - a->pad[0], w = ow * sw + q * dw - a->pad[1];
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                int64_t ci = (o / og) * cg + c;
                s += x[0][((n * C + ci) * H + h) * W + w] * x[1][((o * cg + c) * KH + r) * KW + q];
              }
          y->v[((n * O + o) * OH + oh) * OW + ow] = s;
        }
}

static void naive_pool(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  const int64_t *xs = prm->in[0].shape;
  const pk_op_attrs *a = &prm->attrs;
  int64_t sh = or1(a->stride[0]), sw = or1(a->stride[1]);
  int64_t dh = or1(a->dilation[0]), dw = or1(a->dilation[1]);
  int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], KH = a->kernel[0], KW = a->kernel[1];
  int64_t OH = out_size(H, KH, sh, dh, a->pad[0], a->pad[2]);
  int64_t OW = out_size(W, KW, sw, dw, a->pad[1], a->pad[3]);
  alloc_out(y, 4, (int64_t[]){N, C, OH, OW});
  for (int64_t nc = 0; nc < N * C; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        double m = -INFINITY, s = 0;
        int64_t cnt = 0;
        for (int64_t r = 0; r < KH; r++)
          for (int64_t q = 0; q < KW; q++) {
            int64_t h = oh * sh + r * dh - a->pad[0], w = ow * sw + q * dw - a->pad[1];
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            double v = x[0][(nc * H + h) * W + w];
            m = fmax(m, v);
            s += v;
            cnt++;
          }
        y->v[(nc * OH + oh) * OW + ow] = op == PK_OP_MAX_POOL2D ? m : s / (double)cnt;
      }
}

/* Training ops (pk_ops.h): losses weighted by row, slice, reshape, optimizer updates
 * (the result is the last output, W'). */
static void naive_training(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *in = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  int64_t n = numel(in->ndim, in->shape), rows = in->shape[0], inner = n / rows;
  if (op == PK_OP_CROSS_ENTROPY) { /* integer labels: PyTorch's cross_entropy, mean */
    int64_t k = in->shape[in->ndim - 1], nrows = n / k, count = 0;
    double c = a->label_smoothing, sum = 0;
    alloc_out(y, 1, (int64_t[]){1});
    for (int64_t r = 0; r < nrows; r++) {
      int64_t l = (int64_t)x[1][r];
      if (l < 0 || l >= k || (a->has_ignore_index && l == a->ignore_index)) continue;
      const double *z = x[0] + r * k;
      double m = -INFINITY, s = 0, sz = 0;
      for (int64_t j = 0; j < k; j++) m = fmax(m, z[j]);
      for (int64_t j = 0; j < k; j++) s += exp(z[j] - m), sz += z[j];
      sum += m + log(s) - (1 - c) * z[l] - c / (double)k * sz;
      count++;
    }
    y->v[0] = sum / (double)(count > 0 ? count : 1);
  } else if (op == PK_OP_SOFTMAX_CROSS_ENTROPY || op == PK_OP_MSE_LOSS) {
    alloc_out(y, 1, (int64_t[]){1});
    for (int64_t r = 0; r < rows; r++) {
      const double *z = x[0] + r * inner, *t = x[1] + r * inner;
      double m = -INFINITY, s = 0, tz = 0, se = 0;
      for (int64_t k = 0; k < inner; k++) m = fmax(m, z[k]);
      for (int64_t k = 0; k < inner; k++) {
        s += exp(z[k] - m);
        tz += t[k] * z[k];
        se += (z[k] - t[k]) * (z[k] - t[k]);
      }
      y->v[0] += x[2][r] * (op == PK_OP_MSE_LOSS ? se / (double)inner : m + log(s) - tz);
    }
  } else if (op == PK_OP_GRAD_ACCUMULATE) { /* A' = (H[3] > 0 ? A : 0) + G / k */
    double k = a->accum_steps > 1 ? (double)a->accum_steps : 1;
    alloc_out(y, in->ndim, in->shape);
    for (int64_t i = 0; i < n; i++) y->v[i] = (x[2][3] > 0.5 ? x[0][i] : 0) + x[1][i] / k;
  } else if (op == PK_OP_CLIP_GRAD_NORM) {
    alloc_out(y, in->ndim, in->shape);
    for (int64_t i = 0; i < n; i++)
      y->v[i] = x[0][i] * fmin(1.0, a->clip_norm / (sqrt(x[1][0]) + 1e-6));
  } else if (op == PK_OP_SLICE) {
    int ax = a->slice_axis < 0 ? a->slice_axis + in->ndim : a->slice_axis;
    int64_t shape[PK_TE_MAX_DIMS], idx[PK_TE_MAX_DIMS];
    memcpy(shape, in->shape, sizeof shape);
    int64_t step = a->slice_step ? a->slice_step : 1;
    shape[ax] = (a->slice_len + step - 1) / step;
    alloc_out(y, in->ndim, shape);
    for (int64_t f = 0; f < numel(in->ndim, shape); f++) {
      unravel(f, in->ndim, shape, idx);
      idx[ax] = a->slice_start + idx[ax] * step;
      y->v[f] = x[0][ravel(idx, in->ndim, in->shape)];
    }
  } else if (op == PK_OP_RESHAPE) {
    alloc_out(y, a->new_ndim, a->new_shape);
    memcpy(y->v, x[0], sizeof(double) * (size_t)n);
  } else { /* sgd_update, adamw_update */
    bool adam = op == PK_OP_ADAMW_UPDATE;
    const double *w = x[0], *g = x[1], *m = x[2], *v = x[3], *h = x[adam ? 4 : 3];
    double norm = 0, scale = 1;
    for (int64_t i = 0; i < n; i++) norm += g[i] * g[i];
    if (a->clip_norm > 0) scale = fmin(1.0, a->clip_norm / (sqrt(norm) + 1e-6));
    double b1 = a->beta1 ? a->beta1 : 0.9, b2 = a->beta2 ? a->beta2 : 0.999;
    double eps = a->eps ? a->eps : 1e-8;
    alloc_out(y, in->ndim, in->shape);
    /* accumulation: only the group's last micro-step (H[3] = k - 1) changes W */
    bool apply = a->accum_steps <= 1 || h[3] > (double)a->accum_steps - 1.5;
    for (int64_t i = 0; i < n; i++) {
      if (!apply) {
        y->v[i] = w[i];
        continue;
      }
      bool l2 = !adam || !a->decoupled;
      double gi = g[i] * scale + (l2 ? a->weight_decay * w[i] : 0);
      if (!adam) {
        y->v[i] = w[i] - h[0] * (a->momentum * m[i] + gi);
        continue;
      }
      double w1 = l2 ? w[i] : w[i] * (1 - h[0] * a->weight_decay);
      double mn = b1 * m[i] + (1 - b1) * gi, vn = b2 * v[i] + (1 - b2) * gi * gi;
      y->v[i] = w1 - h[0] * (mn / h[1]) / (sqrt(vn / h[2]) + eps);
    }
  }
}

/* ---- attention, softmax family, pooling, activations ---- */

/* Attention (pk_ops.h): softmax over keys of Q K^T scale + mask (causal: key j <= query i),
 * a row with no key left (every mask -inf) gives 0, then times V. */
static void naive_sdpa(const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *q = &prm->in[0], *m = prm->ninputs == 4 ? &prm->in[3] : NULL;
  int nd = q->ndim, nb = nd - 2;
  int64_t batch = 1, lq = q->shape[nb], d = q->shape[nb + 1], lk = prm->in[1].shape[nb];
  int64_t dv = prm->in[2].shape[nb + 1], shape[4], idx[4];
  for (int i = 0; i < nb; i++) batch *= q->shape[i];
  memcpy(shape, q->shape, sizeof shape);
  shape[nb + 1] = dv;
  alloc_out(y, nd, shape);
  double scale = prm->attrs.scale ? prm->attrs.scale : 1 / sqrt((double)d);
  double *z = malloc((size_t)lk * sizeof *z);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < lq; i++) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < lk; j++) {
        double dot = 0;
        for (int64_t c = 0; c < d; c++) dot += x[0][(b * lq + i) * d + c] * x[1][(b * lk + j) * d + c];
        z[j] = dot * scale;
        if (m && m->ndim == 2) {
          z[j] += x[3][(m->shape[0] == 1 ? 0 : b / (batch / q->shape[0])) * m->shape[1] +
                       (m->shape[1] == 1 ? 0 : j)];
        } else if (m) { /* the scores' index, broadcast into the mask */
          unravel(b, nb, q->shape, idx);
          idx[nb] = i;
          idx[nb + 1] = j;
          z[j] += x[3][bcast_flat(m, idx, nd)];
        }
        if (prm->attrs.causal && j > i) z[j] = -INFINITY;
        mx = fmax(mx, z[j]);
      }
      for (int64_t j = 0; j < lk; j++) sum += mx == -INFINITY ? 0 : exp(z[j] - mx);
      for (int64_t e = 0; e < dv; e++) {
        double acc = 0;
        for (int64_t j = 0; j < lk && sum > 0; j++)
          acc += exp(z[j] - mx) / sum * x[2][(b * lk + j) * dv + e];
        y->v[(b * lq + i) * dv + e] = acc;
      }
    }
  free(z);
}

static void naive_adaptive_pool(const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *in = &prm->in[0];
  int64_t N = in->shape[0], C = in->shape[1], H = in->shape[2], W = in->shape[3];
  int64_t OH = prm->attrs.output_size[0] ? prm->attrs.output_size[0] : 1;
  int64_t OW = prm->attrs.output_size[1] ? prm->attrs.output_size[1] : 1;
  alloc_out(y, 4, (int64_t[]){N, C, OH, OW});
  for (int64_t nc = 0; nc < N * C; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
        int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        double s = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) s += x[0][(nc * H + h) * W + w];
        y->v[(nc * OH + oh) * OW + ow] = s / (double)((h1 - h0) * (w1 - w0));
      }
}

/* The ops of this family; false for the others. */
static bool naive_attn_family(pk_op_kind op, const pk_op_params *prm, double *const *x,
                              dense *y) {
  const pk_op_input *in = &prm->in[0];
  int64_t n = numel(in->ndim, in->shape);
  if (op == PK_OP_LOG_SOFTMAX) {
    naive_softmax(prm, x, y);
    for (int64_t f = 0; f < n; f++) y->v[f] = log(y->v[f]);
  } else if (op == PK_OP_SDPA || op == PK_OP_SDPA_MASKED) {
    naive_sdpa(prm, x, y);
  } else if (op == PK_OP_ROPE) { /* HF: x * cos + rotate_half(x) * sin, tables repeated */
    int64_t dh = in->shape[in->ndim - 1], seq = in->shape[in->ndim - 2], h = dh / 2;
    alloc_out(y, in->ndim, in->shape);
    for (int64_t f = 0; f < n; f++) {
      int64_t dd = f % dh, s = f / dh % seq, j = dd % h;
      double rot = dd < h ? -x[0][f + h] : x[0][f - h];
      y->v[f] = x[0][f] * x[1][s * h + j] + rot * x[2][s * h + j];
    }
  } else if (op == PK_OP_GLOBAL_AVG_POOL2D || op == PK_OP_ADAPTIVE_AVG_POOL2D) {
    naive_adaptive_pool(prm, x, y);
  } else if (op == PK_OP_POW) {
    int64_t shape[PK_TE_MAX_DIMS], idx[PK_TE_MAX_DIMS];
    int nd = broadcast_shape(in->ndim, in->shape, prm->in[1].ndim, prm->in[1].shape, shape);
    alloc_out(y, nd, shape);
    for (int64_t f = 0; f < numel(nd, shape); f++) {
      unravel(f, nd, shape, idx);
      y->v[f] = pow(x[0][bcast_flat(in, idx, nd)], x[1][bcast_flat(&prm->in[1], idx, nd)]);
    }
  } else if (op == PK_OP_POW_SCALAR) {
    alloc_out(y, in->ndim, in->shape);
    for (int64_t f = 0; f < n; f++) y->v[f] = pow(x[0][f], prm->attrs.exponent);
  } else if (op == PK_OP_GELU && prm->attrs.approximate == PK_GELU_TANH) {
    alloc_out(y, in->ndim, in->shape);
    for (int64_t f = 0; f < n; f++) {
      double v = x[0][f];
      y->v[f] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    }
  } else {
    return false;
  }
  return true;
}

/* normalization: each element of X belongs to one statistic (its row, channel or (sample,
 * group)) and reads one element of the params. */
static void norm_ids(pk_op_kind op, const pk_op_params *prm, const int64_t *idx, int64_t *stat,
                     int64_t *param) {
  const pk_op_input *in = &prm->in[0];
  int k = prm->attrs.normalized_ndim ? prm->attrs.normalized_ndim : 1;
  int64_t g = prm->attrs.groups ? prm->attrs.groups : 1;
  *stat = *param = 0;
  if (op == PK_OP_LAYER_NORM || op == PK_OP_RMS_NORM) {
    for (int d = 0; d < in->ndim - k; d++) *stat = *stat * in->shape[d] + idx[d];
    for (int d = in->ndim - k; d < in->ndim; d++) *param = *param * in->shape[d] + idx[d];
  } else if (op == PK_OP_GROUP_NORM) {
    *stat = idx[0] * g + idx[1] / (in->shape[1] / g);
    *param = idx[1];
  } else { /* batch_norm, batch_norm_stats: per channel */
    *stat = *param = idx[1];
  }
}

static void naive_norm(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *in = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  int64_t n = numel(in->ndim, in->shape), idx[PK_TE_MAX_DIMS], st, pa;
  double eps = a->eps ? a->eps : 1e-5, mom = a->momentum ? a->momentum : 0.1;
  double *sum = calloc((size_t)n, sizeof(double)), *sq = calloc((size_t)n, sizeof(double));
  double *cnt = calloc((size_t)n, sizeof(double));
  for (int64_t f = 0; f < n; f++) {
    unravel(f, in->ndim, in->shape, idx);
    norm_ids(op, prm, idx, &st, &pa);
    sum[st] += x[0][f];
    cnt[st] += 1;
  }
  for (int64_t f = 0; f < n; f++) { /* second pass: squares about the mean (or about 0) */
    unravel(f, in->ndim, in->shape, idx);
    norm_ids(op, prm, idx, &st, &pa);
    double c = op == PK_OP_RMS_NORM ? 0 : sum[st] / cnt[st];
    sq[st] += (x[0][f] - c) * (x[0][f] - c);
  }
  if (op == PK_OP_BATCH_NORM_STATS) {
    int64_t C = in->shape[1];
    alloc_out(y, 1, &C);
    for (int64_t c = 0; c < C; c++)
      y->v[c] = (1 - mom) * x[2][c] + mom * sq[c] / (cnt[c] - 1);
  } else {
    alloc_out(y, in->ndim, in->shape);
    for (int64_t f = 0; f < n; f++) {
      unravel(f, in->ndim, in->shape, idx);
      norm_ids(op, prm, idx, &st, &pa);
      double mean = sum[st] / cnt[st], var = sq[st] / cnt[st];
      bool eval = prm->ninputs == 6 && x[5][3] < 0; /* H[3] < 0: the executor evaluates */
      if (op == PK_OP_BATCH_NORM && (a->use_running_stats || eval))
        mean = x[3][pa], var = x[4][pa];
      if (op == PK_OP_RMS_NORM) y->v[f] = x[0][f] / sqrt(var + eps) * x[1][pa];
      else y->v[f] = (x[0][f] - mean) / sqrt(var + eps) * x[1][pa] + x[2][pa];
    }
  }
  free(sum);
  free(sq);
  free(cnt);
}

/* Shape and data movement: each result element's source, found by walking indices (the
 * opposite direction from the TE's reads where that is natural). False for other ops. */
static bool naive_shape(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *in = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  int64_t shape[PK_TE_MAX_DIMS], idx[PK_TE_MAX_DIMS], src[PK_TE_MAX_DIMS];
  int n = in->ndim;
  switch (op) {
  case PK_OP_TRANSPOSE: {
    int perm[PK_TE_MAX_DIMS];
    for (int d = 0; d < n; d++)
      perm[d] = a->nperm ? (a->perm[d] < 0 ? a->perm[d] + n : a->perm[d]) : n - 1 - d;
    for (int d = 0; d < n; d++) shape[d] = in->shape[perm[d]];
    alloc_out(y, n, shape);
    for (int64_t f = 0; f < numel(n, in->shape); f++) { /* scatter each input element */
      unravel(f, n, in->shape, src);
      for (int d = 0; d < n; d++) idx[d] = src[perm[d]];
      y->v[ravel(idx, n, shape)] = x[0][f];
    }
    return true;
  }
  case PK_OP_CONCAT: {
    int ax = a->axis < 0 ? a->axis + n : a->axis;
    memcpy(shape, in->shape, sizeof shape);
    shape[ax] = 0;
    for (int i = 0; i < prm->ninputs; i++) shape[ax] += prm->in[i].shape[ax];
    alloc_out(y, n, shape);
    int64_t base = 0;
    for (int i = 0; i < prm->ninputs; i++) {
      for (int64_t f = 0; f < numel(n, prm->in[i].shape); f++) {
        unravel(f, n, prm->in[i].shape, idx);
        idx[ax] += base;
        y->v[ravel(idx, n, shape)] = x[i][f];
      }
      base += prm->in[i].shape[ax];
    }
    return true;
  }
  case PK_OP_PAD:
    for (int d = 0; d < n; d++) shape[d] = in->shape[d] + a->pads[2 * d] + a->pads[2 * d + 1];
    alloc_out(y, n, shape);
    for (int64_t f = 0; f < numel(n, shape); f++) y->v[f] = a->value;
    for (int64_t f = 0; f < numel(n, in->shape); f++) {
      unravel(f, n, in->shape, idx);
      for (int d = 0; d < n; d++) idx[d] += a->pads[2 * d];
      y->v[ravel(idx, n, shape)] = x[0][f];
    }
    return true;
  case PK_OP_EXPAND:
    alloc_out(y, a->new_ndim, a->new_shape);
    for (int64_t f = 0; f < numel(a->new_ndim, a->new_shape); f++) {
      unravel(f, a->new_ndim, a->new_shape, idx);
      y->v[f] = x[0][bcast_flat(in, idx, a->new_ndim)];
    }
    return true;
  case PK_OP_WHERE: {
    int64_t s1[PK_TE_MAX_DIMS];
    int n1 = broadcast_shape(in->ndim, in->shape, prm->in[1].ndim, prm->in[1].shape, s1);
    int ny = broadcast_shape(n1, s1, prm->in[2].ndim, prm->in[2].shape, shape);
    alloc_out(y, ny, shape);
    for (int64_t f = 0; f < numel(ny, shape); f++) {
      unravel(f, ny, shape, idx);
      bool c = x[0][bcast_flat(&prm->in[0], idx, ny)] != 0;
      y->v[f] = x[c ? 1 : 2][bcast_flat(&prm->in[c ? 1 : 2], idx, ny)];
    }
    return true;
  }
  case PK_OP_MASKED_FILL:
    alloc_out(y, n, in->shape);
    for (int64_t f = 0; f < numel(n, in->shape); f++) {
      unravel(f, n, in->shape, idx);
      y->v[f] = x[1][bcast_flat(&prm->in[1], idx, n)] != 0 ? a->value : x[0][f];
    }
    return true;
  default: return false;
  }
}

/* indexing and dropout */
static uint64_t mix64(uint64_t z) { /* splitmix64's finaliser, as docs/te.md defines hash */
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void naive_index(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  const pk_op_input *in = &prm->in[0], *ix = &prm->in[1];
  if (op == PK_OP_DROPOUT) {
    double p = prm->attrs.drop_p;
    uint64_t t = (uint64_t)floor(ldexp(p, 53));
    alloc_out(y, in->ndim, in->shape);
    for (int64_t i = 0; i < numel(in->ndim, in->shape); i++) {
      uint64_t h = mix64(mix64(mix64((uint64_t)(int64_t)x[1][0]) ^ (uint64_t)(int64_t)x[1][1]) ^
                         (uint64_t)i) >> 11;
      y->v[i] = x[1][1] < 0 ? x[0][i] : h >= t ? x[0][i] * (1.0 / (1.0 - p)) : 0.0;
    }
    return;
  }
  int axis = op == PK_OP_GATHER ? prm->attrs.axis : 0;
  if (axis < 0) axis += in->ndim;
  int64_t shape[PK_TE_MAX_DIMS], idx[PK_TE_MAX_DIMS], src[PK_TE_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < axis; d++) shape[nd++] = in->shape[d];
  for (int d = 0; d < ix->ndim; d++) shape[nd++] = ix->shape[d];
  for (int d = axis + 1; d < in->ndim; d++) shape[nd++] = in->shape[d];
  alloc_out(y, nd, shape);
  for (int64_t f = 0; f < numel(nd, shape); f++) {
    unravel(f, nd, shape, idx);
    int64_t id = (int64_t)x[1][ravel(idx + axis, ix->ndim, ix->shape)];
    for (int d = 0; d < in->ndim; d++)
      src[d] = d < axis ? idx[d] : d == axis ? id : idx[d - 1 + ix->ndim];
    y->v[f] = id >= 0 && id < in->shape[axis] ? x[0][ravel(src, in->ndim, in->shape)] : 0.0;
  }
}

static void naive(pk_op_kind op, const pk_op_params *prm, double *const *x, dense *y) {
  if (naive_attn_family(op, prm, x, y) || naive_shape(op, prm, x, y)) return;
  if (op == PK_OP_GATHER || op == PK_OP_EMBEDDING || op == PK_OP_DROPOUT) {
    naive_index(op, prm, x, y);
    return;
  }
  if (pk_op_flags(op) & PK_OPF_NORM || op == PK_OP_BATCH_NORM_STATS) {
    naive_norm(op, prm, x, y);
    return;
  }
  if (op >= PK_OP_SOFTMAX_CROSS_ENTROPY && op != PK_OP_ERF) { /* erf: appended, elementwise */
    naive_training(op, prm, x, y);
    return;
  }
  switch (pk_op_class_of(op)) {
  case PK_OP_CLASS_MATMUL: naive_matmul(prm, x, y); return;
  case PK_OP_CLASS_INJECTIVE:
    if (pk_op_arity(op) == 2) naive_binary(op, prm, x, y);
    else naive_unary(op, prm, x, y);
    return;
  case PK_OP_CLASS_REDUCTION:
    if (op == PK_OP_SOFTMAX) naive_softmax(prm, x, y);
    else naive_reduce(op, prm, x, y);
    return;
  case PK_OP_CLASS_CONV: naive_conv2d(prm, x, y); return;
  case PK_OP_CLASS_POOL: naive_pool(op, prm, x, y); return;
  default: return; /* no reference: the shape check fails */
  }
}

/* ---- the examples ---- */

/* Builds ex, runs the interpreter on random inputs; the result tensor's reference. */
static const pk_te_ref_tensor *build_and_run(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                            uint64_t seed, pk_te_program **prog, pk_te_ref **refp) {
  if (pk_op_build(ctx, op, prm, prog) != PK_OK) return NULL;
  pk_te_ref *ref = pk_te_ref_new(ctx, *prog);
  pk_te_ref_fill_random(*prog, ref, seed);
  if (pk_te_interp_run(ctx, *prog, ref) != PK_OK) return NULL;
  *refp = ref;
  return &ref->tensors[(*prog)->ntensors - 1];
}

static void test_example(pk_ctx *ctx, const pk_op_example *ex) {
  pk_te_program *p;
  pk_te_ref *ref;
  const pk_te_ref_tensor *res = build_and_run(ctx, ex->op, &ex->prm, 11, &p, &ref);
  if (!res) {
    check(false, ex->label, "%s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  const pk_te_tensor *t = p->tensors[p->ntensors - 1];
  /* integer inputs (masks, indices) as doubles, so the naive loops read every input alike */
  double *x[PK_OP_MAX_INPUTS], *ints[PK_OP_MAX_INPUTS] = {NULL};
  int masks_set = 0, masks_clear = 0;
  for (int i = 0; i < ex->prm.ninputs; i++) {
    const pk_te_ref_tensor *rt = &ref->tensors[i];
    x[i] = rt->val;
    if (rt->ival) {
      x[i] = ints[i] = malloc((size_t)rt->numel * sizeof(double));
      for (int64_t j = 0; j < rt->numel; j++) {
        ints[i][j] = (double)rt->ival[j];
        masks_set += rt->ival[j] == 1, masks_clear += rt->ival[j] == 0;
      }
    }
  }
  bool mask_op = ex->op == PK_OP_WHERE || ex->op == PK_OP_MASKED_FILL;
  dense want = {0, {0}, NULL};
  naive(ex->op, &ex->prm, x, &want);
  int fl = 0; /* the first float input: the result has its dtype */
  while (pk_op_flags(ex->op) & PK_OPF_INT_INPUT(fl)) fl++;
  bool shape_ok = t->ndim == want.ndim && t->dtype == ex->prm.in[fl].dtype &&
                  memcmp(t->shape, want.shape, sizeof(int64_t) * (size_t)want.ndim) == 0;
  int64_t bad = -1;
  for (int64_t i = 0; shape_ok && i < res->numel && bad < 0; i++)
    if (!(fabs(res->val[i] - want.v[i]) <= 1e-12 * res->mag[i] + 1e-300)) bad = i;
  check(shape_ok && bad < 0, ex->label,
        "rank %d vs %d, element %lld: interpreter %.17g, naive %.17g", t->ndim, want.ndim,
        (long long)bad, bad >= 0 ? res->val[bad] : 0.0, bad >= 0 ? want.v[bad] : 0.0);
  /* pk_te_ref_fill_random gives masks 0s and 1s only, so both branches are exercised */
  if (mask_op)
    check(masks_set > 0 && masks_clear > 0 &&
              masks_set + masks_clear == (int)ref->tensors[ex->op == PK_OP_WHERE ? 0 : 1].numel,
          pk_sprintf(ctx, "%s_mask_is_0_or_1", ex->label), "%d ones, %d zeros", masks_set,
          masks_clear);
  for (int i = 0; i < ex->prm.ninputs; i++) free(ints[i]);
  free(want.v);
}

static void test_table(void) {
  bool ok = true;
  for (int op = 0; op < PK_OP_COUNT_; op++) {
    ok &= pk_op_from_name(pk_op_name((pk_op_kind)op)) == (pk_op_kind)op;
    /* every op but the optimizer updates has a differentiable input */
    bool update = op == PK_OP_SGD_UPDATE || op == PK_OP_ADAMW_UPDATE ||
                  op == PK_OP_BATCH_NORM_STATS || op == PK_OP_GRAD_ACCUMULATE ||
                  op == PK_OP_CLIP_GRAD_NORM;
    ok &= pk_op_arity((pk_op_kind)op) >= 1 && (pk_op_diff_inputs((pk_op_kind)op) != 0) != update;
    ok &= strcmp(pk_op_class_name(pk_op_class_of((pk_op_kind)op)), "?") != 0;
  }
  ok &= pk_op_from_name("no_such_op") == PK_OP_COUNT_ && strcmp(pk_op_name(PK_OP_COUNT_), "?") == 0;
  ok &= pk_op_class_of(PK_OP_CONV2D) == PK_OP_CLASS_CONV && pk_op_arity(PK_OP_CONV2D) == 2;
  check(ok, "op_table", "a name, arity, class or diff column is off");

  int count;
  const pk_op_example *ex = pk_op_examples(&count);
  bool covered[PK_OP_COUNT_] = {false}, arity_ok = true;
  for (int i = 0; i < count; i++) {
    covered[ex[i].op] = true;
    /* a variadic op's examples may use fewer inputs (batch_norm: 5 without H) */
    int lo, hi;
    pk_op_input_range(ex[i].op, &lo, &hi);
    arity_ok &= ex[i].prm.ninputs >= lo && ex[i].prm.ninputs <= hi;
  }
  int missing = -1;
  for (int op = 0; op < PK_OP_COUNT_; op++)
    if (!covered[op]) missing = op;
  check(missing < 0 && arity_ok, "op_examples_cover_table", "no example of %s",
        missing >= 0 ? pk_op_name((pk_op_kind)missing) : "-");
}

static void test_softmax_and_mean(pk_ctx *ctx) {
  pk_op_params sm = {1, {{3, {4, 9, 5}, PKRT_DTYPE_F32}}, {.axis = 1}};
  pk_te_program *p;
  pk_te_ref *ref;
  const pk_te_ref_tensor *y = build_and_run(ctx, PK_OP_SOFTMAX, &sm, 3, &p, &ref);
  double worst = y ? 0 : 1;
  for (int64_t a = 0; y && a < 4; a++)
    for (int64_t c = 0; c < 5; c++) {
      double s = 0;
      for (int64_t j = 0; j < 9; j++) s += y->val[(a * 9 + j) * 5 + c];
      worst = fmax(worst, fabs(s - 1));
    }
  check(worst < 1e-12 && p->ntensors == 4, "softmax_rows_sum_to_1", "worst |sum - 1| = %g", worst);

  pk_op_params red = {1, {{3, {6, 7, 3}, PKRT_DTYPE_F64}}, {.naxes = 2, .axes = {0, -1}}};
  pk_te_program *ps, *pm;
  pk_te_ref *rs, *rm;
  const pk_te_ref_tensor *sum = build_and_run(ctx, PK_OP_SUM, &red, 5, &ps, &rs);
  const pk_te_ref_tensor *mean = build_and_run(ctx, PK_OP_MEAN, &red, 5, &pm, &rm);
  bool ok = sum && mean && pm->tensors[1]->ndim == 1 && pm->tensors[1]->shape[0] == 7;
  for (int64_t i = 0; ok && i < 7; i++) ok &= fabs(mean->val[i] - sum->val[i] / 18) <= 1e-15;
  check(ok, "mean_is_sum_over_n", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

static void test_text(pk_ctx *ctx) {
  pk_op_params prm = {2, {{4, {1, 2, 5, 5}, PKRT_DTYPE_F32}, {4, {2, 2, 3, 3}, PKRT_DTYPE_F32}},
                      {.pad = {1, 1, 1, 1}}};
  char *text;
  pk_status s = pk_op_text(ctx, PK_OP_CONV2D, &prm, &text);
  check(s == PK_OK && strstr(text, "select(") && strstr(text, "compute((1, 2, 5, 5)"),
        "op_text_conv2d", "%s", s == PK_OK ? text : pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* ---- bad parameters ---- */

static void expect_error(pk_ctx *ctx, const char *name, pk_op_kind op, const pk_op_params *prm,
                         const char *needle) {
  pk_te_program *p;
  pk_status s = pk_op_build(ctx, op, prm, &p);
  check(s == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), needle) && p == NULL, name,
        "status %s, message '%s' (want '%s')", pk_status_name(s), pk_ctx_error(ctx), needle);
  pk_ctx_clear_error(ctx);
}

static void test_bad_params(pk_ctx *ctx) {
  const pkrt_dtype F = PKRT_DTYPE_F32;
  pk_op_params mm = {2, {{2, {4, 5}, F}, {2, {6, 3}, F}}, {.trans_b = false}};
  expect_error(ctx, "bad_matmul_inner", PK_OP_MATMUL, &mm, "inner dims differ");
  pk_op_params mm3 = {2, {{3, {2, 4, 5}, F}, {2, {5, 3}, F}}, {.trans_b = false}};
  expect_error(ctx, "bad_matmul_rank", PK_OP_MATMUL, &mm3, "rank 2");
  pk_op_params bmm = {2, {{3, {2, 4, 5}, F}, {3, {3, 5, 3}, F}}, {.trans_b = false}};
  expect_error(ctx, "bad_batch_matmul_batch", PK_OP_BATCH_MATMUL, &bmm, "do not broadcast");
  pk_op_params add = {2, {{2, {7, 3}, F}, {1, {5}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_add_broadcast", PK_OP_ADD, &add, "do not broadcast");
  pk_op_params arity = {1, {{2, {7, 3}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_arity", PK_OP_ADD, &arity, "takes 2 inputs");
  pk_op_params mixed = {2, {{1, {3}, F}, {1, {3}, PKRT_DTYPE_F64}}, {.groups = 0}};
  expect_error(ctx, "bad_mixed_dtypes", PK_OP_MUL, &mixed, "dtype");
  pk_op_params ints = {1, {{1, {3}, PKRT_DTYPE_I32}}, {.groups = 0}};
  expect_error(ctx, "bad_int_dtype", PK_OP_RELU, &ints, "f32 or f64");
  pk_op_params rank0 = {1, {{0, {0}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_rank0", PK_OP_TANH, &rank0, "rank 0");
  pk_op_params zero = {1, {{2, {3, 0}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_zero_extent", PK_OP_TANH, &zero, "extent 0");
  pk_op_params sm = {1, {{2, {3, 4}, F}}, {.axis = 2}};
  expect_error(ctx, "bad_softmax_axis", PK_OP_SOFTMAX, &sm, "axis 2 out of range");
  pk_op_params dup = {1, {{2, {3, 4}, F}}, {.naxes = 2, .axes = {1, -1}}};
  expect_error(ctx, "bad_reduce_duplicate_axis", PK_OP_SUM, &dup, "listed twice");
  pk_op_params conv = {2, {{4, {1, 6, 5, 5}, F}, {4, {4, 2, 3, 3}, F}}, {.groups = 4}};
  expect_error(ctx, "bad_conv_groups", PK_OP_CONV2D, &conv, "groups 4 does not divide the 6 input");
  pk_op_params convw = {2, {{4, {1, 6, 5, 5}, F}, {4, {4, 3, 3, 3}, F}}, {.groups = 1}};
  expect_error(ctx, "bad_conv_weight_channels", PK_OP_CONV2D, &convw, "needs 6");
  pk_op_params small = {2, {{4, {1, 1, 2, 5}, F}, {4, {1, 1, 3, 3}, F}}, {.groups = 1}};
  expect_error(ctx, "bad_conv_output_size", PK_OP_CONV2D, &small, "output size would be < 1");
  pk_op_params neg = {2, {{4, {1, 1, 5, 5}, F}, {4, {1, 1, 3, 3}, F}}, {.stride = {-1, 1}}};
  expect_error(ctx, "bad_negative_stride", PK_OP_CONV2D, &neg, "stride -1");
  pk_op_params pool = {1, {{4, {1, 1, 5, 5}, F}}, {.kernel = {2, 2}, .pad = {3, 0, 3, 0}}};
  expect_error(ctx, "bad_pool_padding_window", PK_OP_MAX_POOL2D, &pool, "covers only padding");
  pk_op_params nok = {1, {{4, {1, 1, 5, 5}, F}}, {.stride = {1, 1}}};
  expect_error(ctx, "bad_pool_no_kernel", PK_OP_AVG_POOL2D, &nok, "kernel H is 0");
  pk_op_params p3 = {1, {{3, {1, 5, 5}, F}}, {.kernel = {2, 2}}};
  expect_error(ctx, "bad_pool_rank", PK_OP_MAX_POOL2D, &p3, "rank 4");
  pk_op_params clip = {1, {{1, {3}, F}}, {.clip_min = 1, .clip_max = -1}};
  expect_error(ctx, "bad_clip_range", PK_OP_CLIP, &clip, "min <= max");
  pk_op_params clipinf = {1, {{1, {3}, F}}, {.clip_min = -INFINITY, .clip_max = 1}};
  expect_error(ctx, "bad_clip_infinite", PK_OP_CLIP, &clipinf, "must be finite");
  pk_op_params alpha = {1, {{1, {3}, F}}, {.alpha = NAN}};
  expect_error(ctx, "bad_alpha_nan", PK_OP_LEAKY_RELU, &alpha, "alpha nan out of range");
  pk_op_params nalpha = {1, {{1, {3}, F}}, {.alpha = -1}};
  expect_error(ctx, "bad_elu_negative_alpha", PK_OP_ELU, &nalpha, "alpha -1 out of range");
  /* normalization */
  pk_op_params bn1 = {5, {{2, {1, 3}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F}},
                      {.groups = 0}};
  expect_error(ctx, "bad_batch_norm_one_value", PK_OP_BATCH_NORM, &bn1, "more than 1 value");
  pk_op_params bnp = {5, {{2, {4, 3}, F}, {1, {3}, F}, {1, {4}, F}, {1, {3}, F}, {1, {3}, F}},
                      {.groups = 0}};
  expect_error(ctx, "bad_batch_norm_param_shape", PK_OP_BATCH_NORM, &bnp,
               "beta (input 2) has shape (4,); it must be (3,)");
  pk_op_params bnm = {5, {{2, {4, 3}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F}},
                      {.momentum = 1.5}};
  expect_error(ctx, "bad_batch_norm_momentum", PK_OP_BATCH_NORM, &bnm, "momentum 1.5");
  pk_op_params bnr = {5, {{1, {4}, F}, {1, {4}, F}, {1, {4}, F}, {1, {4}, F}, {1, {4}, F}},
                      {.groups = 0}};
  expect_error(ctx, "bad_batch_norm_rank", PK_OP_BATCH_NORM, &bnr, "rank >= 2");
  pk_op_params bn4 = {4, {{2, {4, 3}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_batch_norm_4_inputs", PK_OP_BATCH_NORM, &bn4, "takes 5 to 6 inputs");
  pk_op_params bnh = {6, {{2, {4, 3}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F},
                          {1, {3}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_batch_norm_h_shape", PK_OP_BATCH_NORM, &bnh, "input 5 (H)");
  pk_op_params ln = {3, {{2, {4, 3}, F}, {1, {3}, F}, {1, {3}, F}}, {.normalized_ndim = 3}};
  expect_error(ctx, "bad_layer_norm_ndim", PK_OP_LAYER_NORM, &ln, "normalized_ndim 3 out of range");
  pk_op_params lng = {3, {{2, {4, 3}, F}, {2, {4, 3}, F}, {1, {3}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_layer_norm_gamma", PK_OP_LAYER_NORM, &lng, "gamma (input 1)");
  pk_op_params gn = {3, {{3, {2, 6, 5}, F}, {1, {6}, F}, {1, {6}, F}}, {.groups = 4}};
  expect_error(ctx, "bad_group_norm_groups", PK_OP_GROUP_NORM, &gn, "groups 4 does not divide");
  pk_op_params eps = {2, {{2, {4, 3}, F}, {1, {3}, F}}, {.eps = -1}};
  expect_error(ctx, "bad_rms_norm_eps", PK_OP_RMS_NORM, &eps, "eps -1 out of range");
}

/* attention, softmax family, pooling, activations: each new error */
static void test_bad_params_attn(pk_ctx *ctx) {
  const pkrt_dtype F = PKRT_DTYPE_F32;
  pk_op_params r2 = {3, {{2, {7, 4}, F}, {2, {7, 4}, F}, {2, {7, 4}, F}}, {.causal = false}};
  expect_error(ctx, "bad_sdpa_rank", PK_OP_SDPA, &r2, "must all have rank 4");
  pk_op_params bd = {3, {{3, {2, 7, 4}, F}, {3, {3, 7, 4}, F}, {3, {2, 7, 4}, F}}, {.causal = false}};
  expect_error(ctx, "bad_sdpa_batch", PK_OP_SDPA, &bd, "share the batch dims");
  pk_op_params hd = {3, {{3, {2, 7, 4}, F}, {3, {2, 7, 5}, F}, {3, {2, 7, 4}, F}}, {.causal = false}};
  expect_error(ctx, "bad_sdpa_head_dim", PK_OP_SDPA, &hd, "K's head_dim 5 differs");
  pk_op_params nk = {3, {{3, {2, 7, 4}, F}, {3, {2, 7, 4}, F}, {3, {2, 6, 4}, F}}, {.causal = false}};
  expect_error(ctx, "bad_sdpa_keys", PK_OP_SDPA, &nk, "V has 6 keys but K has 7");
  pk_op_params mk = {4, {{3, {2, 7, 4}, F}, {3, {2, 5, 4}, F}, {3, {2, 5, 4}, F}, {2, {3, 5}, F}},
                     {.causal = false}};
  expect_error(ctx, "bad_sdpa_mask_batch", PK_OP_SDPA_MASKED, &mk, "mask (3, 5) must be");
  pk_op_params mr = {4, {{3, {2, 7, 4}, F}, {3, {2, 5, 4}, F}, {3, {2, 5, 4}, F}, {1, {5}, F}},
                     {.causal = false}};
  expect_error(ctx, "bad_sdpa_mask_rank", PK_OP_SDPA_MASKED, &mr, "broadcast to the scores");
  pk_op_params sc = {3, {{3, {2, 7, 4}, F}, {3, {2, 7, 4}, F}, {3, {2, 7, 4}, F}}, {.scale = -1}};
  expect_error(ctx, "bad_sdpa_scale", PK_OP_SDPA, &sc, "scale -1 out of range");
  pk_op_params odd = {3, {{4, {1, 2, 7, 5}, F}, {2, {7, 2}, F}, {2, {7, 2}, F}}, {.causal = false}};
  expect_error(ctx, "bad_rope_odd_head_dim", PK_OP_ROPE, &odd, "head_dim 5 must be even");
  pk_op_params tab = {3, {{4, {1, 2, 7, 8}, F}, {2, {7, 4}, F}, {2, {7, 8}, F}}, {.causal = false}};
  expect_error(ctx, "bad_rope_table", PK_OP_ROPE, &tab, "sin table (7, 8) must be (seq, head_dim / 2) = (7, 4)");
  pk_op_params r1 = {3, {{1, {8}, F}, {2, {1, 4}, F}, {2, {1, 4}, F}}, {.causal = false}};
  expect_error(ctx, "bad_rope_rank", PK_OP_ROPE, &r1, "rank >= 2");
  pk_op_params os = {1, {{4, {1, 2, 7, 7}, F}}, {.output_size = {0, 3}}};
  expect_error(ctx, "bad_adaptive_output_size", PK_OP_ADAPTIVE_AVG_POOL2D, &os, "output_size (0, 3) must be >= 1");
  pk_op_params g3 = {1, {{3, {2, 7, 7}, F}}, {.causal = false}};
  expect_error(ctx, "bad_global_pool_rank", PK_OP_GLOBAL_AVG_POOL2D, &g3, "rank 4 (N, C, H, W)");
  pk_op_params ga = {1, {{1, {3}, F}}, {.approximate = 2}};
  expect_error(ctx, "bad_gelu_approximate", PK_OP_GELU, &ga, "approximate 2 is neither");
  pk_op_params pb = {2, {{2, {7, 3}, F}, {1, {5}, F}}, {.causal = false}};
  expect_error(ctx, "bad_pow_broadcast", PK_OP_POW, &pb, "do not broadcast");
  pk_op_params pe = {1, {{1, {3}, F}}, {.exponent = INFINITY}};
  expect_error(ctx, "bad_pow_scalar_exponent", PK_OP_POW_SCALAR, &pe, "exponent inf must be finite");
}

/* Interprets op at inputs ins and compares the result with want (PyTorch 1.13's values,
 * f64, printed by repr), element by element to 1e-12 relative. */
static void expect_values(pk_ctx *ctx, const char *label, pk_op_kind op, const pk_op_params *prm,
                          const double *const *ins, const double *want, int64_t n) {
  pk_te_program *p;
  bool ok = pk_op_build(ctx, op, prm, &p) == PK_OK;
  pk_te_ref *ref = ok ? pk_te_ref_new(ctx, p) : NULL;
  for (int i = 0; ok && i < prm->ninputs; i++)
    for (int64_t j = 0; j < ref->tensors[i].numel; j++) {
      ref->tensors[i].val[j] = ins[i][j];
      ref->tensors[i].mag[j] = fabs(ins[i][j]);
    }
  ok = ok && pk_te_interp_run(ctx, p, ref) == PK_OK;
  const pk_te_ref_tensor *y = ok ? &ref->tensors[p->ntensors - 1] : NULL;
  int64_t bad = ok && y->numel == n ? -1 : 0;
  for (int64_t i = 0; ok && bad < 0 && i < n; i++)
    if (!(fabs(y->val[i] - want[i]) <= 1e-12 * fmax(1, fabs(want[i])))) bad = i;
  check(ok && bad < 0, label, "%s element %lld: got %.17g, torch %.17g",
        ok ? "" : pk_ctx_error(ctx), (long long)bad, y && bad >= 0 ? y->val[bad] : 0.0,
        bad >= 0 ? want[bad] : 0.0);
  pk_ctx_clear_error(ctx);
}

/* The new ops against PyTorch itself (torch.softmax of masked scores, HF's rotate_half,
 * F.adaptive_avg_pool2d, F.gelu(approximate='tanh'), torch.log_softmax) on inputs that are
 * simple formulas of the element index, so the numbers below can be regenerated. */
/* shape and data movement: each new error */
static void test_bad_params_shape(pk_ctx *ctx) {
  const pkrt_dtype F = PKRT_DTYPE_F32;
  pk_op_params tp = {1, {{3, {2, 3, 4}, F}}, {.nperm = 2, .perm = {1, 0}}};
  expect_error(ctx, "bad_transpose_perm_length", PK_OP_TRANSPOSE, &tp, "perm has 2 entries");
  pk_op_params tdup = {1, {{3, {2, 3, 4}, F}}, {.nperm = 3, .perm = {0, 2, -1}}};
  expect_error(ctx, "bad_transpose_perm_repeat", PK_OP_TRANSPOSE, &tdup, "lists axis 2 twice");
  pk_op_params cat = {2, {{2, {2, 3}, F}, {2, {4, 5}, F}}, {.axis = 1}};
  expect_error(ctx, "bad_concat_shapes", PK_OP_CONCAT, &cat, "only axis 1 may differ");
  pk_op_params cat9 = {9, {{1, {1}, F}}, {.axis = 0}};
  expect_error(ctx, "bad_concat_count", PK_OP_CONCAT, &cat9, "takes 1 to 8 inputs, got 9");
  pk_op_params catr = {2, {{2, {2, 3}, F}, {1, {3}, F}}, {.axis = 0}};
  expect_error(ctx, "bad_concat_rank", PK_OP_CONCAT, &catr, "input 1 has shape (3,)");
  pk_op_params step = {1, {{1, {5}, F}}, {.slice_len = 2, .slice_step = -2}};
  expect_error(ctx, "bad_slice_step", PK_OP_SLICE, &step, "slice_step -2 out of range");
  pk_op_params pads = {1, {{2, {2, 3}, F}}, {.pads = {0, 0, 1, 1, 2, 0}}};
  expect_error(ctx, "bad_pad_rank", PK_OP_PAD, &pads, "pads has entries for dim 2");
  pk_op_params padn = {1, {{1, {3}, F}}, {.pads = {-1, 0}}};
  expect_error(ctx, "bad_pad_negative", PK_OP_PAD, &padn, "pads -1 out of range");
  pk_op_params padv = {1, {{1, {3}, F}}, {.pads = {1, 0}, .value = INFINITY}};
  expect_error(ctx, "bad_pad_value", PK_OP_PAD, &padv, "value inf must be finite");
  pk_op_params ex = {1, {{2, {3, 2}, F}}, {.new_ndim = 2, .new_shape = {3, 4}}};
  expect_error(ctx, "bad_expand_dim", PK_OP_EXPAND, &ex, "cannot expand (3, 2) to (3, 4)");
  pk_op_params exr = {1, {{2, {1, 2}, F}}, {.new_ndim = 1, .new_shape = {2}}};
  expect_error(ctx, "bad_expand_rank", PK_OP_EXPAND, &exr, "cannot expand");
  pk_op_params ex0 = {1, {{2, {1, 2}, F}}, {.new_ndim = 0}};
  expect_error(ctx, "bad_expand_no_shape", PK_OP_EXPAND, &ex0, "needs the target shape");
  pk_op_params wf = {3, {{1, {3}, F}, {1, {3}, F}, {1, {3}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_where_float_cond", PK_OP_WHERE, &wf, "must be i32 or i64");
  pk_op_params wb = {3, {{1, {3}, PKRT_DTYPE_I32}, {1, {4}, F}, {1, {3}, F}}, {.groups = 0}};
  expect_error(ctx, "bad_where_broadcast", PK_OP_WHERE, &wb, "do not broadcast");
  pk_op_params wd = {3, {{1, {3}, PKRT_DTYPE_I32}, {1, {3}, F}, {1, {3}, PKRT_DTYPE_F64}},
                     {.groups = 0}};
  expect_error(ctx, "bad_where_mixed_dtypes", PK_OP_WHERE, &wd, "but the first float input");
  pk_op_params mf = {2, {{2, {2, 3}, F}, {2, {4, 3}, PKRT_DTYPE_I64}}, {.groups = 0}};
  expect_error(ctx, "bad_masked_fill_mask", PK_OP_MASKED_FILL, &mf,
               "mask (4, 3) does not broadcast to the input's shape (2, 3)");
}

static void test_attn_torch_values(pk_ctx *ctx) {
  const pkrt_dtype D = PKRT_DTYPE_F64;
  double q[12], k[16], v[16], x[12], c[6], sn[6], xp[15], xg[11], xl[12];
  for (int i = 0; i < 16; i++) k[i] = cos(0.3 * i), v[i] = 0.1 * i - 0.5;
  for (int i = 0; i < 12; i++) q[i] = sin(0.7 * i + 0.1), x[i] = sin(0.37 * i), xl[i] = 3 * cos(1.3 * i);
  for (int i = 0; i < 6; i++) c[i] = cos(0.5 * i), sn[i] = sin(0.25 * i + 0.1);
  for (int i = 0; i < 15; i++) xp[i] = i * i * 0.1;
  for (int i = 0; i < 11; i++) xg[i] = -2.5 + 0.5 * i;
  const double mask[8] = {0, -INFINITY, 0, 0, 0, 0, 0, -INFINITY};
  pk_op_params sd = {4, {{3, {2, 3, 2}, D}, {3, {2, 4, 2}, D}, {3, {2, 4, 2}, D}, {2, {2, 4}, D}},
                     {.causal = true}};
  expect_values(ctx, "sdpa_masked_causal_vs_torch", PK_OP_SDPA_MASKED, &sd,
                (const double *[]){q, k, v, mask},
                (double[]){-0.5, -0.4, -0.5, -0.4, -0.28314743178539, -0.18314743178539003,
                           0.30000000000000004, 0.4, 0.4045711355735946, 0.5045711355735947,
                           0.5031055468594896, 0.6031055468594895}, 12);
  pk_op_params rp = {3, {{4, {1, 1, 3, 4}, D}, {2, {3, 2}, D}, {2, {3, 2}, D}}, {.causal = false}};
  expect_values(ctx, "rope_vs_hf_rotate_half", PK_OP_ROPE, &rp, (const double *[]){x, c, sn},
                (double[]){-0.06731646602149224, 0.010214281742487286, 0.674287911628145,
                           0.9100466860237773, 0.08830201820912897, -0.32570632744326894,
                           0.9927027846905712, 0.7592566542233519, 0.3970393028277919,
                           0.9312792051282629, 0.3814383570743826, 0.4587013027055679}, 12);
  pk_op_params ap = {1, {{4, {1, 1, 5, 3}, D}}, {.output_size = {3, 2}}};
  expect_values(ctx, "adaptive_avg_pool2d_vs_torch", PK_OP_ADAPTIVE_AVG_POOL2D, &ap,
                (const double *[]){xp},
                (double[]){0.65, 1.15, 4.8500000000000005, 6.25, 12.350000000000001, 14.65}, 6);
  pk_op_params gp = {1, {{1, {11}, D}}, {.approximate = PK_GELU_TANH}};
  expect_values(ctx, "gelu_tanh_vs_torch", PK_OP_GELU, &gp, (const double *[]){xg},
                (double[]){-0.015084266089998577, -0.04540230591222494, -0.10042842301976707,
                           -0.1588080093917233, -0.15428599017485606, 0.0, 0.34571400982514394,
                           0.8411919906082768, 1.3995715769802328, 1.954597694087775,
                           2.484915733910001}, 11);
  pk_op_params lp = {1, {{3, {2, 3, 2}, D}}, {.axis = 1}};
  expect_values(ctx, "log_softmax_mid_vs_torch", PK_OP_LOG_SOFTMAX, &lp, (const double *[]){xl},
                (double[]){-0.1879955162467316, -2.2452391184407148, -5.7586617763535735,
                           -5.225532516914897, -1.7824455023456003, -0.1179727271304066,
                           -2.646175175885636, -4.878040094810802, -4.49099420985527,
                           -0.0920862724558346, -0.08570109322299467, -2.5212185979166213}, 12);
}

/* indexing and dropout: each new error */
static void test_bad_params_index(pk_ctx *ctx) {
  const pkrt_dtype F = PKRT_DTYPE_F32;
  const pkrt_dtype L = PKRT_DTYPE_I64;
  pk_op_params gax = {2, {{2, {3, 4}, F}, {1, {5}, L}}, {.axis = -3}};
  expect_error(ctx, "bad_gather_axis", PK_OP_GATHER, &gax, "axis -3 out of range");
  pk_op_params gfl = {2, {{2, {3, 4}, F}, {1, {5}, F}}, {.axis = 0}};
  expect_error(ctx, "bad_gather_float_indices", PK_OP_GATHER, &gfl, "must be i32 or i64");
  pk_op_params grk = {2, {{5, {2, 2, 2, 2, 2}, F}, {5, {2, 2, 2, 2, 2}, L}}, {.axis = 0}};
  expect_error(ctx, "bad_gather_result_rank", PK_OP_GATHER, &grk, "result rank 9");
  pk_op_params erk = {2, {{3, {3, 4, 5}, F}, {1, {5}, L}}, {.groups = 0}};
  expect_error(ctx, "bad_embedding_weight_rank", PK_OP_EMBEDDING, &erk, "rank 2 (V, D)");
  pk_op_params dp = {2, {{1, {4}, F}, {1, {2}, L}}, {.drop_p = 1.0}};
  expect_error(ctx, "bad_dropout_p", PK_OP_DROPOUT, &dp, "p 1 out of range");
  pk_op_params ds = {2, {{1, {4}, F}, {1, {3}, L}}, {.drop_p = 0.5}};
  expect_error(ctx, "bad_dropout_seed_shape", PK_OP_DROPOUT, &ds, "shape (2,) holding (seed, step)");
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_bad_params_attn(ctx);
  test_bad_params_shape(ctx);
  test_bad_params_index(ctx);
  test_attn_torch_values(ctx);
  test_table();
  int count;
  const pk_op_example *ex = pk_op_examples(&count);
  for (int i = 0; i < count; i++) test_example(ctx, &ex[i]);
  test_softmax_and_mean(ctx);
  test_text(ctx);
  test_bad_params(ctx);
  pk_ctx_free(ctx);
  printf("%s ops: %d examples\n", failures ? "FAIL" : "PASS", count);
  return failures ? 1 : 0;
}
