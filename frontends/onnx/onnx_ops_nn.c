/* onnx_ops_nn.c — ONNX converters of the convolution, pooling, normalization and dropout
 * family: Conv, MaxPool, AveragePool, GlobalAveragePool, BatchNormalization,
 * LayerNormalization, GroupNormalization, InstanceNormalization, Dropout (docs/onnx.md
 * lists what each accepts). Pock's ops are 2-D and NCHW, as ONNX's are. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_impl.h"

/* Largest kernel, stride, dilation or pad taken from a model: far beyond any real window,
 * and small enough that the SAME-padding arithmetic below cannot overflow int64. */
#define NN_MAX_ATTR (1 << 30)

/* ---- helpers ---- */

/* Whether output k is named and read: by a later node or as a graph output. ONNX lets an
 * exporter name an optional output nobody reads (torch names Dropout's mask and the
 * running stats of a training BatchNormalization), so a name alone refuses nothing. */
static bool nn_out_used(const pk_ox *im, const pk_ox_node *nd, int k) {
  if (k >= nd->nout || (size_t)k >= nd->p->n_output) return false;
  const char *name = nd->p->output[k];
  if (!name || !name[0]) return false;
  const Onnx__GraphProto *gp = im->model->graph;
  for (size_t j = (size_t)nd->index + 1; j < gp->n_node; j++)
    for (size_t i = 0; i < gp->node[j]->n_input; i++)
      if (gp->node[j]->input[i] && strcmp(gp->node[j]->input[i], name) == 0) return true;
  for (size_t i = 0; i < gp->n_output; i++)
    if (gp->output[i]->name && strcmp(gp->output[i]->name, name) == 0) return true;
  return false;
}

/* Outputs from..nout-1 must not be read; `why` says what Pock does instead. The named ones
 * are then marked defined with no tensor, so the node loop takes them as produced: no
 * reader exists to resolve them. */
static pk_status nn_unread_outputs(pk_ox *im, const pk_ox_node *nd, int from,
                                   const char *const *names, const char *why) {
  for (int k = from; k < nd->nout; k++)
    if (nn_out_used(im, nd, k))
      return pk_ox_fail(im, nd, "output %d (%s, %s) is read by the model: %s", k, names[k - from],
                        pk_ox_quote(im, nd->p->output[k]), why);
  for (int k = from; k < nd->nout; k++) {
    if (nd->out[k] < 0) continue;
    pk_ox_value *v = pk_ox_val(im, nd->out[k]);
    v->kind = PK_OXV_TENSOR;
    v->defined = true;
    v->tensor = -1;
  }
  return PK_OK;
}

/* pk_ox_arity, and output 0 named: it is required in every op here, and the converters
 * bind their result to it. */
static pk_status nn_arity(pk_ox *im, const pk_ox_node *nd, int lo, int hi, int max_out) {
  pk_status s = pk_ox_arity(im, nd, lo, hi, max_out);
  if (s == PK_OK && nd->out[0] < 0)
    return pk_ox_fail(im, nd, "output 0 has no name (it is required)");
  return s;
}

/* ONNX stores float attributes as f32: 0.9 arrives as 0.899999976. The value the exporter
 * meant is the shortest decimal that rounds to the same f32 (torch's momentum 0.1 becomes
 * ONNX's 1 - 0.1 = 0.9f, and 1 - 0.899999976 would train with 0.100000024). Values that
 * are not f32 (a double constant) stay as they are. */
static double nn_decimal(double v) {
  float f = (float)v;
  if (!isfinite(f) || (double)f != v) return v;
  char buf[32];
  for (int p = 1; p <= 9; p++) {
    snprintf(buf, sizeof buf, "%.*g", p, v);
    if (strtof(buf, NULL) == f) return strtod(buf, NULL);
  }
  return v;
}

/* Input i (`what`: "X") must be present, of the model's float dtype, with a rank in
 * [lo, hi]; `shape_doc` describes the expected layout for the message. */
static pk_status nn_float_input(pk_ox *im, const pk_ox_node *nd, int i, const char *what,
                                int lo, int hi, const char *shape_doc, pk_ox_value **out) {
  pk_ox_value *v = pk_ox_in(im, nd, i);
  if (!v) return pk_ox_fail(im, nd, "input %d (%s) is missing", i, what);
  if (v->dtype != PKRT_DTYPE_F32 && v->dtype != PKRT_DTYPE_F64)
    return pk_ox_fail(im, nd, "input %s is %s; Pock takes float or double here", what,
                      pk_ox_dtype_name(v));
  if (v->ndim < lo || v->ndim > hi)
    return pk_ox_fail(im, nd, "input %s has shape %s (rank %d); Pock imports %s", what,
                      pk_ox_shape_str(im, v->ndim, v->shape), v->ndim, shape_doc);
  /* bounded extents keep the window and group arithmetic below far from overflow */
  for (int d = 0; d < v->ndim; d++)
    if (v->shape[d] < 1 || v->shape[d] > PK_OP_MAX_EXTENT)
      return pk_ox_fail(im, nd, "input %s has shape %s: every dim must be 1..%d", what,
                        pk_ox_shape_str(im, v->ndim, v->shape), PK_OP_MAX_EXTENT);
  *out = v;
  return PK_OK;
}

/* Input i must be a vector of n elements (a normalization's per-channel params). */
static pk_status nn_vector_input(pk_ox *im, const pk_ox_node *nd, int i, const char *what,
                                 int64_t n, const char *of) {
  pk_ox_value *v;
  pk_status s = nn_float_input(im, nd, i, what, 0, PK_TE_MAX_DIMS, "a vector", &v);
  if (s != PK_OK) return s;
  if (v->ndim != 1 || v->shape[0] != n)
    return pk_ox_fail(im, nd, "input %s has shape %s; it must be (%lld,): one value per %s",
                      what, pk_ox_shape_str(im, v->ndim, v->shape), (long long)n, of);
  return PK_OK;
}

/* epsilon: positive and finite. Pock reads eps 0 as its default 1e-5, so ONNX's 0 cannot
 * be carried over and is refused rather than changed. */
static pk_status nn_epsilon(pk_ox *im, const pk_ox_node *nd, double *eps) {
  double e;
  pk_status s = pk_ox_attr_float(im, nd, "epsilon", 1e-5, &e);
  if (s != PK_OK) return s;
  if (!(e > 0) || !isfinite(e))
    return pk_ox_fail(im, nd, "attribute epsilon = %g: Pock needs a positive finite epsilon", e);
  *eps = nn_decimal(e);
  return PK_OK;
}

/* A node that exists only from opset `since` on: an older model naming it is malformed. */
static pk_status nn_since(pk_ox *im, const pk_ox_node *nd, int64_t since) {
  if (im->opset >= since) return PK_OK;
  return pk_ox_fail(im, nd, "%s needs opset %lld or newer; the model imports opset %lld",
                    nd->p->op_type, (long long)since, (long long)im->opset);
}

/* ---- windows: kernel_shape, strides, dilations, pads, auto_pad ---- */

typedef struct nn_window {
  int64_t kernel[2], stride[2], dilation[2];
  int64_t pad[4]; /* Pock's order: top, left, bottom, right = ONNX's (H begin, W begin,
                     H end, W end) */
} nn_window;

/* An attribute of `want` integers, each in [lo, hi]; absent: *present = false. */
static pk_status nn_attr_pair(pk_ox *im, const pk_ox_node *nd, const char *name, int want,
                              int64_t lo, int64_t hi, bool *present, int64_t *out) {
  int64_t v[2 * PK_TE_MAX_DIMS];
  int n = 0;
  pk_status s = pk_ox_attr_ints(im, nd, name, 2 * PK_TE_MAX_DIMS, present, &n, v);
  if (s != PK_OK || !*present) return s;
  if (n != want)
    return pk_ox_fail(im, nd, "attribute %s has %d values; a 2-D %s takes %d", name, n,
                      nd->p->op_type, want);
  for (int i = 0; i < n; i++) {
    if (v[i] < lo || v[i] > hi)
      return pk_ox_fail(im, nd, "attribute %s[%d] = %lld is outside %lld..%lld", name, i,
                        (long long)v[i], (long long)lo, (long long)hi);
    out[i] = v[i];
  }
  return PK_OK;
}

/* Reads the window of a Conv (w_kernel: the weight's (kH, kW), which kernel_shape must
 * match) or a pool (w_kernel NULL: kernel_shape is required) over input (H, W) = hw, and
 * resolves auto_pad into explicit pads from the static shapes. */
static pk_status nn_window_read(pk_ox *im, const pk_ox_node *nd, const int64_t *hw,
                                const int64_t *w_kernel, nn_window *w) {
  bool present;
  pk_status s;
  int64_t ks[2] = {0, 0};
  if ((s = nn_attr_pair(im, nd, "kernel_shape", 2, 1, NN_MAX_ATTR, &present, ks)) != PK_OK)
    return s;
  if (w_kernel) {
    if (present && (ks[0] != w_kernel[0] || ks[1] != w_kernel[1]))
      return pk_ox_fail(im, nd, "attribute kernel_shape = (%lld, %lld) disagrees with the "
                        "weight's kernel (%lld, %lld)", (long long)ks[0], (long long)ks[1],
                        (long long)w_kernel[0], (long long)w_kernel[1]);
    ks[0] = w_kernel[0], ks[1] = w_kernel[1];
  } else if (!present) {
    return pk_ox_fail(im, nd, "attribute kernel_shape is missing (it is required)");
  }
  w->kernel[0] = ks[0], w->kernel[1] = ks[1];
  w->stride[0] = w->stride[1] = 1;
  w->dilation[0] = w->dilation[1] = 1;
  memset(w->pad, 0, sizeof w->pad);
  bool has_pads;
  if ((s = nn_attr_pair(im, nd, "strides", 2, 1, NN_MAX_ATTR, &present, w->stride)) != PK_OK ||
      (s = nn_attr_pair(im, nd, "dilations", 2, 1, NN_MAX_ATTR, &present, w->dilation)) !=
          PK_OK ||
      (s = nn_attr_pair(im, nd, "pads", 4, 0, NN_MAX_ATTR, &has_pads, w->pad)) != PK_OK)
    return s;
  const char *ap = "NOTSET";
  if ((s = pk_ox_attr_string(im, nd, "auto_pad", "NOTSET", &ap)) != PK_OK) return s;
  bool upper = strcmp(ap, "SAME_UPPER") == 0, lower = strcmp(ap, "SAME_LOWER") == 0;
  if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0 && !upper && !lower)
    return pk_ox_fail(im, nd, "attribute auto_pad = %s is not NOTSET, VALID, SAME_UPPER or "
                      "SAME_LOWER", pk_ox_quote(im, ap));
  if (strcmp(ap, "NOTSET") != 0) {
    /* ONNX forbids explicit pads beside auto_pad; zeros say nothing and are let through */
    for (int i = 0; has_pads && i < 4; i++)
      if (w->pad[i])
        return pk_ox_fail(im, nd, "attribute pads is given with auto_pad = %s (ONNX allows "
                          "one or the other)", ap);
  }
  for (int d = 0; d < 2 && (upper || lower); d++) {
    /* SAME: output ceil(in / stride); the total padding that takes, the odd one at the
     * end (UPPER) or the beginning (LOWER) */
    int64_t out = (hw[d] + w->stride[d] - 1) / w->stride[d];
    int64_t extent = (w->kernel[d] - 1) * w->dilation[d] + 1;
    int64_t total = (out - 1) * w->stride[d] + extent - hw[d];
    if (total < 0) total = 0;
    w->pad[d] = upper ? total / 2 : total - total / 2;
    w->pad[d + 2] = total - w->pad[d];
  }
  for (int d = 0; d < 2; d++) {
    int64_t extent = (w->kernel[d] - 1) * w->dilation[d] + 1;
    if (extent > hw[d] + w->pad[d] + w->pad[d + 2])
      return pk_ox_fail(im, nd, "the window along %s (kernel %lld, dilation %lld) is larger "
                        "than the padded input (%lld + pads %lld, %lld): no output",
                        d ? "W" : "H", (long long)w->kernel[d], (long long)w->dilation[d],
                        (long long)hw[d], (long long)w->pad[d], (long long)w->pad[d + 2]);
  }
  return PK_OK;
}

static void nn_window_attrs(const nn_window *w, pk_op_attrs *a) {
  for (int d = 0; d < 2; d++) {
    a->stride[d] = w->stride[d];
    a->dilation[d] = w->dilation[d];
  }
  memcpy(a->pad, w->pad, sizeof a->pad);
}

/* ---- Conv ---- */

pk_status pk_ox_conv(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape",
                                      "pads", "strides", NULL};
  pk_status s;
  pk_ox_value *x, *w;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = nn_arity(im, nd, 2, 3, 1)) != PK_OK ||
      (s = nn_float_input(im, nd, 0, "X", 4, 4,
                          "2-D convolutions only: X is (N, C, H, W); 1-D and 3-D Conv are "
                          "not supported", &x)) != PK_OK ||
      (s = nn_float_input(im, nd, 1, "W", 4, 4, "2-D convolutions only: W is (M, C / group, "
                          "kH, kW)", &w)) != PK_OK)
    return s;
  int64_t group, c = x->shape[1], m = w->shape[0];
  if ((s = pk_ox_attr_int(im, nd, "group", 1, 1, NN_MAX_ATTR, &group)) != PK_OK) return s;
  if (c % group || m % group || w->shape[1] != c / group)
    return pk_ox_fail(im, nd, "attribute group = %lld does not fit X %s and W %s (W must be "
                      "(M, C / group, kH, kW) with group dividing C and M)", (long long)group,
                      pk_ox_shape_str(im, x->ndim, x->shape),
                      pk_ox_shape_str(im, w->ndim, w->shape));
  nn_window win;
  if ((s = nn_window_read(im, nd, x->shape + 2, w->shape + 2, &win)) != PK_OK) return s;
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  nn_window_attrs(&win, &a);
  a.groups = group;
  int ins[2];
  if ((s = pk_ox_tensor(im, nd, 0, &ins[0])) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 1, &ins[1])) != PK_OK)
    return s;
  if (!pk_ox_in(im, nd, 2)) return pk_ox_op_result(im, nd, PK_OP_CONV2D, &a, 2, ins, 0);
  /* Pock's conv2d has no bias: B (M,) is reshaped to (M, 1, 1) and added, so the param
   * keeps its initializer's name and shape */
  if ((s = nn_vector_input(im, nd, 2, "B", m, "output channel")) != PK_OK) return s;
  int y, b, add[2];
  pk_op_attrs r;
  memset(&r, 0, sizeof r);
  r.new_ndim = 3;
  r.new_shape[0] = m, r.new_shape[1] = 1, r.new_shape[2] = 1;
  if ((s = pk_ox_op(im, nd, PK_OP_CONV2D, &a, 2, ins, &y)) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 2, &b)) != PK_OK ||
      (s = pk_ox_op(im, nd, PK_OP_RESHAPE, &r, 1, &b, &add[1])) != PK_OK)
    return s;
  add[0] = y;
  pk_op_attrs none;
  memset(&none, 0, sizeof none);
  return pk_ox_op_result(im, nd, PK_OP_ADD, &none, 2, add, 0);
}

/* ---- pools ---- */

/* ceil_mode 1: the output size rounds up, and a last window must still start inside the
 * input or its leading padding (PyTorch's and ORT's rule). Pock's pools round down, so
 * the extra windows come from extra padding at the end: max pooling reads padding as the
 * lowest value and avg_pool2d counts in-bounds elements only, so neither changes a
 * result. */
static void nn_ceil_pads(const int64_t *hw, nn_window *w) {
  for (int d = 0; d < 2; d++) {
    int64_t extent = (w->kernel[d] - 1) * w->dilation[d] + 1;
    int64_t room = hw[d] + w->pad[d] + w->pad[d + 2] - extent;
    int64_t out = (room + w->stride[d] - 1) / w->stride[d] + 1;
    if ((out - 1) * w->stride[d] >= hw[d] + w->pad[d]) out--;
    int64_t need = (out - 1) * w->stride[d] + extent - (hw[d] + w->pad[d] + w->pad[d + 2]);
    if (need > 0) w->pad[d + 2] += need;
  }
}

static pk_status nn_pool(pk_ox *im, pk_ox_node *nd, pk_op_kind op) {
  /* storage_order only orders MaxPool's Indices output, which is refused below */
  static const char *const max_known[] = {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                          "pads", "storage_order", "strides", NULL};
  static const char *const avg_known[] = {"auto_pad", "ceil_mode", "count_include_pad",
                                          "dilations", "kernel_shape", "pads", "strides",
                                          NULL};
  static const char *const indices[] = {"Indices"};
  bool is_max = op == PK_OP_MAX_POOL2D;
  pk_status s;
  pk_ox_value *x;
  if ((s = pk_ox_attrs_known(im, nd, is_max ? max_known : avg_known)) != PK_OK ||
      (s = nn_arity(im, nd, 1, 1, is_max ? 2 : 1)) != PK_OK ||
      (is_max && (s = nn_unread_outputs(im, nd, 1, indices,
                                             "Pock's max_pool2d has no indices output")) !=
                     PK_OK) ||
      (s = nn_float_input(im, nd, 0, "X", 4, 4,
                          "2-D pools only: X is (N, C, H, W); 1-D and 3-D pools are not "
                          "supported", &x)) != PK_OK)
    return s;
  nn_window win;
  int64_t ceil_mode = 0, include_pad = 0, storage = 0;
  if ((s = nn_window_read(im, nd, x->shape + 2, NULL, &win)) != PK_OK ||
      (s = pk_ox_attr_int(im, nd, "ceil_mode", 0, 0, 1, &ceil_mode)) != PK_OK ||
      (!is_max &&
       (s = pk_ox_attr_int(im, nd, "count_include_pad", 0, 0, 1, &include_pad)) != PK_OK) ||
      (is_max && (s = pk_ox_attr_int(im, nd, "storage_order", 0, 0, 1, &storage)) != PK_OK))
    return s;
  bool padded = false;
  for (int i = 0; i < 4; i++) padded |= win.pad[i] != 0;
  nn_window given = win;
  if (ceil_mode) nn_ceil_pads(x->shape + 2, &win);
  bool ceil_adds = memcmp(given.pad, win.pad, sizeof win.pad) != 0;
  int in;
  if ((s = pk_ox_tensor(im, nd, 0, &in)) != PK_OK) return s;
  if (include_pad && padded) {
    /* count_include_pad: the pads count in the divisor. avg_pool2d never counts padding,
     * so the zeros are made real first (a pad op) and the pool runs without padding. */
    if (ceil_adds)
      return pk_ox_fail(im, nd, "count_include_pad = 1 with ceil_mode = 1 adding a window is "
                        "not supported (the divisor of the extra windows differs among "
                        "frameworks)");
    pk_op_attrs p;
    memset(&p, 0, sizeof p);
    p.pads[4] = win.pad[0], p.pads[5] = win.pad[2]; /* H: dim 2 */
    p.pads[6] = win.pad[1], p.pads[7] = win.pad[3]; /* W: dim 3 */
    int padded_in;
    if ((s = pk_ox_op(im, nd, PK_OP_PAD, &p, 1, &in, &padded_in)) != PK_OK) return s;
    in = padded_in;
    memset(win.pad, 0, sizeof win.pad);
  }
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  nn_window_attrs(&win, &a);
  a.kernel[0] = win.kernel[0], a.kernel[1] = win.kernel[1];
  return pk_ox_op_result(im, nd, op, &a, 1, &in, 0);
}

pk_status pk_ox_max_pool(pk_ox *im, pk_ox_node *nd) {
  return nn_pool(im, nd, PK_OP_MAX_POOL2D);
}

pk_status pk_ox_average_pool(pk_ox *im, pk_ox_node *nd) {
  return nn_pool(im, nd, PK_OP_AVG_POOL2D);
}

pk_status pk_ox_global_average_pool(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {NULL};
  pk_status s;
  pk_ox_value *x;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = nn_arity(im, nd, 1, 1, 1)) != PK_OK ||
      (s = nn_float_input(im, nd, 0, "X", 4, 4, "2-D pools only: X is (N, C, H, W)", &x)) !=
          PK_OK)
    return s;
  int in;
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  if ((s = pk_ox_tensor(im, nd, 0, &in)) != PK_OK) return s;
  return pk_ox_op_result(im, nd, PK_OP_GLOBAL_AVG_POOL2D, &a, 1, &in, 0);
}

/* ---- normalizations ---- */

pk_status pk_ox_batch_norm(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"epsilon", "momentum", "training_mode", NULL};
  static const char *const stats[] = {"running_mean", "running_var", "saved_mean",
                                      "saved_var"};
  /* opset 13 is BatchNormalization-9: training mode is asked for by naming the optional
   * outputs (mean, var, saved_mean, saved_var); 14 on say training_mode and have 3 */
  bool v9 = im->opset < 14;
  pk_status s;
  pk_ox_value *x;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = nn_arity(im, nd, 5, 5, v9 ? 5 : 3)) != PK_OK ||
      (s = nn_float_input(im, nd, 0, "X", 2, PK_TE_MAX_DIMS, "(N, C, ...)", &x)) != PK_OK)
    return s;
  int64_t c = x->shape[1];
  static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; i++)
    if ((s = nn_vector_input(im, nd, i, names[i - 1], c, "channel")) != PK_OK) return s;
  double eps, mom;
  int64_t training = 0;
  if ((s = nn_epsilon(im, nd, &eps)) != PK_OK ||
      (s = pk_ox_attr_float(im, nd, "momentum", 0.9, &mom)) != PK_OK)
    return s;
  if (v9) {
    if (pk_ox_attr(nd, "training_mode"))
      return pk_ox_fail(im, nd, "attribute training_mode is BatchNormalization-14's; the "
                        "model imports opset %lld", (long long)im->opset);
    for (int k = 1; k < nd->nout && k < (int)nd->p->n_output; k++)
      if (nd->p->output[k] && nd->p->output[k][0]) training = 1;
  } else if ((s = pk_ox_attr_int(im, nd, "training_mode", 0, 0, 1, &training)) != PK_OK) {
    return s;
  }
  /* ONNX's momentum weighs the OLD running value; Pock's (PyTorch's) the new batch value.
   * Pock's momentum 0 means its default 0.1, so ONNX's 1 (never update) cannot be said. */
  if (!(mom >= 0 && mom < 1))
    return pk_ox_fail(im, nd, "attribute momentum = %g: Pock takes momentum in [0, 1) (ONNX's "
                      "momentum weighs the old running value; 1 would never update it)", mom);
  if ((s = nn_unread_outputs(im, nd, 1, stats,
                                  "Pock updates the running statistics in place (buffers "
                                  "saved with the weights); nothing can read them as a "
                                  "value")) != PK_OK)
    return s;
  /* training_mode 1 (PyTorch's model.train()): every batch norm trains on batch
   * statistics (pk_train_spec.bn_train_all, set from this) */
  if (training) im->bn_training = true;
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  a.eps = eps;
  a.momentum = 1.0 - nn_decimal(mom);
  int ins[5];
  if ((s = pk_ox_tensor(im, nd, 0, &ins[0])) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 1, &ins[1])) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 2, &ins[2])) != PK_OK ||
      (s = pk_ox_buffer(im, nd, 3, &ins[3])) != PK_OK ||
      (s = pk_ox_buffer(im, nd, 4, &ins[4])) != PK_OK)
    return s;
  return pk_ox_op_result(im, nd, PK_OP_BATCH_NORM, &a, 5, ins, 0);
}

/* stash_type: the precision of the statistics; Pock computes them in the input's dtype,
 * which is ONNX's 1 (float) for float models. */
static pk_status nn_stash_type(pk_ox *im, const pk_ox_node *nd) {
  int64_t st;
  pk_status s = pk_ox_attr_int(im, nd, "stash_type", 1, INT64_MIN, INT64_MAX, &st);
  if (s == PK_OK && st != 1)
    return pk_ox_fail(im, nd, "attribute stash_type = %lld is not supported (only 1: the "
                      "statistics in float)", (long long)st);
  return s;
}

/* A constant of zeros shaped like `shape` (LayerNormalization without B): a value of the
 * table, so that its name is checked unique like every other. */
static pk_status nn_zeros(pk_ox *im, pk_ox_node *nd, pkrt_dtype dtype, int ndim,
                          const int64_t *shape, int *tensor) {
  int id;
  pk_status s = pk_ox_new_value(im, pk_sprintf(im->ctx, "%s.zero_bias", nd->name), &id);
  if (s != PK_OK) return s;
  pk_ox_value *v = pk_ox_val(im, id);
  v->kind = PK_OXV_CONST;
  v->defined = true;
  v->dtype = dtype;
  v->is_bool = false;
  v->ndim = ndim;
  memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
  v->data = pk_alloc(im->ctx, (size_t)pk_ox_numel(ndim, shape) * pkrt_dtype_size(dtype));
  v->tensor = -1;
  v->src = -1;
  return pk_ox_value_tensor(im, nd, id, tensor);
}

/* LayerNormalization's optional outputs Mean and InvStdDev are layer_norm's MEAN and RSTD
 * stages (the same shape, X's with the normalized dims 1, and dtype: stash_type 1). One a
 * later node or the graph reads is named (pk_graph_name_outputs: kept in memory, never
 * inlined) and bound; a named one nobody reads is only marked produced, so the stages stay
 * temporaries. The node just emitted is the layer_norm. */
static pk_status nn_ln_stages(pk_ox *im, pk_ox_node *nd) {
  static const int stage_of[3] = {-1, 0, 2}; /* output k -> compute: MEAN, VAR, RSTD, Y */
  int node = im->g->nnodes - 1;
  const pk_gnode *gn = im->g->nodes[node];
  PK_ASSERT(gn->op == PK_OP_LAYER_NORM && gn->noutputs == 4);
  const char *names[4];
  for (int o = 0; o < 4; o++) names[o] = im->g->tensors[gn->outputs[o]]->name;
  bool rename = false;
  for (int k = 1; k < nd->nout && k < 3; k++) {
    if (nd->out[k] < 0) continue;
    if (!nn_out_used(im, nd, k)) {
      pk_ox_value *v = pk_ox_val(im, nd->out[k]);
      v->kind = PK_OXV_TENSOR, v->defined = true, v->tensor = -1;
      continue;
    }
    names[stage_of[k]] = pk_ox_graph_name(im, pk_ox_val(im, nd->out[k])->name);
    rename = true;
  }
  if (!rename) return PK_OK;
  if (pk_graph_name_outputs(im->g, node, 4, names) != PK_OK) {
    const char *msg = pk_strdup(im->ctx, pk_ctx_error(im->ctx));
    pk_ctx_clear_error(im->ctx);
    return pk_ox_fail(im, nd, "%s", msg);
  }
  pk_status s = PK_OK;
  for (int k = 1; s == PK_OK && k < nd->nout && k < 3; k++)
    if (nd->out[k] >= 0 && !pk_ox_val(im, nd->out[k])->defined)
      s = pk_ox_bind(im, nd, k, gn->outputs[stage_of[k]]);
  return s;
}

pk_status pk_ox_layer_norm(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"axis", "epsilon", "stash_type", NULL};
  pk_status s;
  pk_ox_value *x;
  if ((s = nn_since(im, nd, 17)) != PK_OK || (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = nn_arity(im, nd, 2, 3, 3)) != PK_OK ||
      (s = nn_float_input(im, nd, 0, "X", 1, PK_TE_MAX_DIMS, "rank 1 or more", &x)) != PK_OK ||
      (s = nn_stash_type(im, nd)) != PK_OK)
    return s;
  int64_t axis;
  double eps;
  if ((s = pk_ox_attr_int(im, nd, "axis", -1, -x->ndim, x->ndim - 1, &axis)) != PK_OK ||
      (s = nn_epsilon(im, nd, &eps)) != PK_OK)
    return s;
  if (axis < 0) axis += x->ndim;
  int k = x->ndim - (int)axis; /* normalized over X.shape[axis:] */
  /* copied: a new value (nn_zeros) may move the value table under x */
  pkrt_dtype dtype = x->dtype;
  int64_t norm_shape[PK_TE_MAX_DIMS];
  memcpy(norm_shape, x->shape + axis, sizeof(int64_t) * (size_t)k);
  const char *want = pk_ox_shape_str(im, k, x->shape + axis);
  for (int i = 1; i < 3; i++) {
    pk_ox_value *p = pk_ox_in(im, nd, i);
    if (!p) continue;
    bool same = p->ndim == k && (p->dtype == PKRT_DTYPE_F32 || p->dtype == PKRT_DTYPE_F64);
    for (int d = 0; same && d < k; d++) same = p->shape[d] == x->shape[axis + d];
    if (!same)
      return pk_ox_fail(im, nd, "input %s is %s %s; Pock needs float %s, X's shape from axis "
                        "%lld on (broadcast Scale and B are not supported)", i == 1 ? "Scale" : "B",
                        pk_ox_dtype_name(p), pk_ox_shape_str(im, p->ndim, p->shape), want,
                        (long long)axis);
  }
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  a.eps = eps;
  a.normalized_ndim = k;
  int ins[3];
  if ((s = pk_ox_tensor(im, nd, 0, &ins[0])) != PK_OK ||
      (s = pk_ox_tensor(im, nd, 1, &ins[1])) != PK_OK)
    return s;
  /* no B: a constant zero (it never trains: ONNX's LayerNorm without bias has none) */
  s = pk_ox_in(im, nd, 2) ? pk_ox_tensor(im, nd, 2, &ins[2])
                          : nn_zeros(im, nd, dtype, k, norm_shape, &ins[2]);
  if (s != PK_OK) return s;
  if ((s = pk_ox_op_result(im, nd, PK_OP_LAYER_NORM, &a, 3, ins, 0)) != PK_OK) return s;
  return nn_ln_stages(im, nd);
}

/* GroupNormalization-18's scale and bias are per group: each becomes per channel (C,) by
 * repeating every value C / G times (reshape (G, 1), expand (G, C / G), reshape (C,)), so
 * the param keeps its own name and shape and its gradient sums over its channels. */
static pk_status nn_per_channel(pk_ox *im, pk_ox_node *nd, int i, int64_t g, int64_t c,
                                int *tensor) {
  int t;
  pk_status s = pk_ox_tensor(im, nd, i, &t);
  if (s != PK_OK || g == c) {
    *tensor = t;
    return s;
  }
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  int col, wide; /* (G, 1), (G, C / G); the graph writes an output id before reading inputs */
  a.new_ndim = 2, a.new_shape[0] = g, a.new_shape[1] = 1;
  if ((s = pk_ox_op(im, nd, PK_OP_RESHAPE, &a, 1, &t, &col)) != PK_OK) return s;
  a.new_shape[1] = c / g;
  if ((s = pk_ox_op(im, nd, PK_OP_EXPAND, &a, 1, &col, &wide)) != PK_OK) return s;
  a.new_ndim = 1, a.new_shape[0] = c, a.new_shape[1] = 0;
  return pk_ox_op(im, nd, PK_OP_RESHAPE, &a, 1, &wide, tensor);
}

pk_status pk_ox_group_norm(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"epsilon", "num_groups", "stash_type", NULL};
  pk_status s;
  pk_ox_value *x;
  if ((s = nn_since(im, nd, 18)) != PK_OK || (s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = nn_arity(im, nd, 3, 3, 1)) != PK_OK ||
      (s = nn_float_input(im, nd, 0, "X", 2, PK_TE_MAX_DIMS, "(N, C, ...)", &x)) != PK_OK ||
      (s = nn_stash_type(im, nd)) != PK_OK)
    return s;
  int64_t c = x->shape[1], g;
  double eps;
  if (!pk_ox_attr(nd, "num_groups"))
    return pk_ox_fail(im, nd, "attribute num_groups is missing (it is required)");
  if ((s = pk_ox_attr_int(im, nd, "num_groups", 1, 1, c, &g)) != PK_OK ||
      (s = nn_epsilon(im, nd, &eps)) != PK_OK)
    return s;
  if (c % g)
    return pk_ox_fail(im, nd, "attribute num_groups = %lld does not divide the %lld channels",
                      (long long)g, (long long)c);
  /* opset 18..20: scale and bias per group; 21 on: per channel */
  bool per_group = im->opset < 21;
  if ((s = nn_vector_input(im, nd, 1, "scale", per_group ? g : c,
                           per_group ? "group (GroupNormalization-18)" : "channel")) != PK_OK ||
      (s = nn_vector_input(im, nd, 2, "bias", per_group ? g : c,
                           per_group ? "group (GroupNormalization-18)" : "channel")) != PK_OK)
    return s;
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  a.eps = eps;
  a.groups = g;
  int ins[3];
  if ((s = pk_ox_tensor(im, nd, 0, &ins[0])) != PK_OK ||
      (s = nn_per_channel(im, nd, 1, per_group ? g : c, c, &ins[1])) != PK_OK ||
      (s = nn_per_channel(im, nd, 2, per_group ? g : c, c, &ins[2])) != PK_OK)
    return s;
  return pk_ox_op_result(im, nd, PK_OP_GROUP_NORM, &a, 3, ins, 0);
}

/* InstanceNormalization is group_norm with one channel per group; torch 1.13 exports
 * nn.GroupNorm as one, over X reshaped to (N, G, -1) with constant ones and zeros. */
pk_status pk_ox_instance_norm(pk_ox *im, pk_ox_node *nd) {
  static const char *const known[] = {"epsilon", NULL};
  pk_status s;
  pk_ox_value *x;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = nn_arity(im, nd, 3, 3, 1)) != PK_OK ||
      (s = nn_float_input(im, nd, 0, "input", 3, PK_TE_MAX_DIMS, "(N, C, D1, ...)", &x)) !=
          PK_OK)
    return s;
  int64_t c = x->shape[1];
  double eps;
  if ((s = nn_vector_input(im, nd, 1, "scale", c, "channel")) != PK_OK ||
      (s = nn_vector_input(im, nd, 2, "B", c, "channel")) != PK_OK ||
      (s = nn_epsilon(im, nd, &eps)) != PK_OK)
    return s;
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  a.eps = eps;
  a.groups = c;
  int ins[3];
  for (int i = 0; i < 3; i++)
    if ((s = pk_ox_tensor(im, nd, i, &ins[i])) != PK_OK) return s;
  return pk_ox_op_result(im, nd, PK_OP_GROUP_NORM, &a, 3, ins, 0);
}

/* ---- Dropout ---- */

pk_status pk_ox_dropout(pk_ox *im, pk_ox_node *nd) {
  /* seed: Pock's mask comes from its own (seed, step) hash (pk_ops.h), never ONNX's RNG,
   * so the attribute is read and has no effect */
  static const char *const known[] = {"seed", NULL};
  static const char *const mask[] = {"mask"};
  pk_status s;
  pk_ox_value *x;
  if ((s = pk_ox_attrs_known(im, nd, known)) != PK_OK ||
      (s = nn_arity(im, nd, 1, 3, 2)) != PK_OK ||
      (s = nn_float_input(im, nd, 0, "data", 1, PK_TE_MAX_DIMS, "rank 1 or more", &x)) !=
          PK_OK ||
      (s = nn_unread_outputs(im, nd, 1, mask,
                                  "Pock's dropout keeps no mask (backward regenerates it)")) !=
          PK_OK)
    return s;
  double ratio = 0.5;
  int64_t training = 0;
  int n = 0;
  if (pk_ox_in(im, nd, 1) &&
      (s = pk_ox_const_f64(im, nd, 1, "ratio", &ratio)) != PK_OK)
    return s;
  if (pk_ox_in(im, nd, 2) &&
      (s = pk_ox_const_ints(im, nd, 2, "training_mode", 1, &n, &training)) != PK_OK)
    return s;
  if (!(ratio >= 0 && ratio < 1))
    return pk_ox_fail(im, nd, "ratio = %g is outside [0, 1)", ratio);
  if (!training || ratio == 0) return pk_ox_alias(im, nd, 0, 0);
  /* the graph adds the step's (seed, step) input itself (PK_OPF_STEP_RNG) */
  pk_op_attrs a;
  memset(&a, 0, sizeof a);
  a.drop_p = nn_decimal(ratio);
  int in;
  if ((s = pk_ox_tensor(im, nd, 0, &in)) != PK_OK) return s;
  return pk_ox_op_result(im, nd, PK_OP_DROPOUT, &a, 1, &in, 0);
}
