/* test_onnx_nn.c — the ONNX importer's nn family (frontends/onnx/onnx_ops_nn.c: Conv, pools,
 * normalizations, Dropout) on the models scripts/onnx_make_nn_cases.py writes: each
 * tests/fixtures/onnx-ops/nn_* case imports into the expected Pock ops, params and buffers
 * and, run by the TE reference interpreter, gives onnxruntime's output; training-mode
 * Dropout's graph; and every tests/fixtures/onnx-nn-refused model is refused with a message
 * naming its node and the problem. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_frontend.h"
#include "pkrt.h"

#define PK_TEST_OWN_CHECK
#include "pk_test.h"
#include "test_graph_exec.h"

#define FIXTURES PK_SOURCE_DIR "/tests/fixtures"

/* How the case's forward graph runs: as imported (batch norm on batch statistics) or
 * through pk_eval_build (batch norm on its running statistics: ONNX's inference mode). */
enum { RUN_EVAL, RUN_TRAIN };

typedef struct nn_case {
  const char *name;  /* tests/fixtures/onnx-ops/nn_<name> */
  const char *ops;   /* the forward graph's op names in node order, comma-separated */
  const char *roles; /* "tensor:role,..." that must hold; "" for none */
  int run;
} nn_case;

static const nn_case CASES[] = {
    {"conv_basic", "conv2d", "W:param", RUN_EVAL},
    {"conv_bias_pads_strides", "conv2d,reshape,add", "W:param,B:param", RUN_EVAL},
    {"conv_group_dilations", "conv2d,reshape,add", "W:param,B:param", RUN_EVAL},
    {"conv_depthwise", "conv2d", "W:param", RUN_EVAL},
    {"conv_same_upper", "conv2d,reshape,add", "", RUN_EVAL},
    {"conv_same_lower", "conv2d,reshape,add", "", RUN_EVAL},
    {"conv_valid", "conv2d,reshape,add", "", RUN_EVAL},
    {"maxpool_basic", "max_pool2d", "", RUN_EVAL},
    {"maxpool_pads_dilations", "max_pool2d", "", RUN_EVAL},
    {"maxpool_ceil", "max_pool2d", "", RUN_EVAL},
    {"maxpool_same_upper", "max_pool2d", "", RUN_EVAL},
    {"maxpool_indices_unread", "max_pool2d", "", RUN_EVAL},
    {"avgpool_basic", "avg_pool2d", "", RUN_EVAL},
    {"avgpool_pads_exclude", "avg_pool2d", "", RUN_EVAL},
    {"avgpool_pads_include", "pad,avg_pool2d", "", RUN_EVAL},
    {"avgpool_ceil", "avg_pool2d", "", RUN_EVAL},
    {"avgpool_same_lower", "avg_pool2d", "", RUN_EVAL},
    {"avgpool_dilations_19", "avg_pool2d", "", RUN_EVAL},
    {"global_avgpool", "global_avg_pool2d", "", RUN_EVAL},
    {"bn_infer", "batch_norm", "s:param,b:param,m:buffer,v:buffer", RUN_EVAL},
    {"bn_infer_13", "batch_norm", "s:param,b:param,m:buffer,v:buffer", RUN_EVAL},
    {"bn_infer_rank2", "batch_norm", "m:buffer,v:buffer", RUN_EVAL},
    {"bn_train", "batch_norm", "s:param,b:param,m:buffer,v:buffer", RUN_TRAIN},
    {"ln_axis_last", "layer_norm", "s:param,b:param", RUN_EVAL},
    {"ln_axis_m2", "layer_norm", "s:param,b:param", RUN_EVAL},
    {"ln_no_bias", "layer_norm", "s:param", RUN_EVAL},
    {"gn_18_per_group", "reshape,expand,reshape,reshape,expand,reshape,group_norm",
     "s:param,b:param", RUN_EVAL},
    {"gn_21_per_channel", "group_norm", "s:param,b:param", RUN_EVAL},
    {"in_4d", "group_norm", "s:param,b:param", RUN_EVAL},
    {"in_3d", "group_norm", "s:param,b:param", RUN_EVAL},
    {"dropout_default", "global_avg_pool2d", "", RUN_EVAL},
    {"dropout_infer", "global_avg_pool2d", "", RUN_EVAL},
    {"dropout_train_ratio0", "global_avg_pool2d", "", RUN_EVAL},
};

/* Refused models and a piece of the message each must give (besides the node's op type). */
static const struct {
  const char *name, *op_type, *says;
  int64_t batch;
} REFUSED[] = {
    {"conv_1d", "Conv", "1-D and 3-D Conv are not supported", 1},
    {"conv_kernel_shape", "Conv", "kernel_shape = (2, 2) disagrees with the weight's kernel (3, 3)", 1},
    {"conv_pads_and_auto_pad", "Conv", "pads is given with auto_pad = SAME_UPPER", 1},
    {"conv_group", "Conv", "group = 2 does not fit", 1},
    {"conv_unknown_attr", "Conv", "'frobnicate' is not supported", 1},
    {"maxpool_indices_read", "MaxPool", "output 1 (Indices", 1},
    {"maxpool_no_kernel", "MaxPool", "kernel_shape is missing", 1},
    {"avgpool_window_too_big", "AveragePool", "window along H (kernel 7", 1},
    {"bn_momentum_1", "BatchNormalization", "momentum = 1", 1},
    {"bn_running_mean_read", "BatchNormalization", "output 1 (running_mean", 1},
    {"bn_scale_shape", "BatchNormalization", "input scale has shape (3)", 1},
    {"ln_mean_read", "LayerNormalization", "output 1 (Mean", 2},
    {"ln_opset_13", "LayerNormalization", "needs opset 17", 2},
    {"ln_scale_shape", "LayerNormalization", "input Scale is float (4)", 2},
    {"gn_groups", "GroupNormalization", "num_groups = 2 does not divide the 3 channels", 2},
    {"dropout_mask_read", "Dropout", "output 1 (mask", 2},
};

/* The ops of g's nodes as "a,b,c". */
static const char *op_list(pk_ctx *ctx, const pk_graph *g) {
  char *s = pk_strdup(ctx, "");
  for (int k = 0; k < g->nnodes; k++)
    s = pk_sprintf(ctx, "%s%s%s", s, k ? "," : "", pk_op_name(g->nodes[k]->op));
  return s;
}

/* Each "name:role" of `roles` holds in g. */
static bool roles_hold(pk_ctx *ctx, const pk_graph *g, const char *roles, const char *who) {
  char *list = pk_strdup(ctx, roles);
  bool ok = true;
  for (char *item = strtok(list, ","); item; item = strtok(NULL, ",")) {
    char *colon = strchr(item, ':');
    *colon = '\0';
    int t = pk_graph_find(g, item);
    if (t < 0 || strcmp(pk_role_name(g->tensors[t]->role), colon + 1) != 0) {
      PK_TEST_FAIL(who, "tensor '%s' is %s, not %s", item,
                   t < 0 ? "missing" : pk_role_name(g->tensors[t]->role), colon + 1);
      ok = false;
    }
  }
  return ok;
}

/* A test_data_set_0 tensor as f64 values; NULL (and a FAIL) when unreadable. */
static double *read_pb(pk_ctx *ctx, const char *path, int *ndim, int64_t *shape,
                       const char *who) {
  pkrt_dtype dt;
  const void *data;
  if (pk_onnx_read_tensor(ctx, path, &dt, ndim, shape, &data) != PK_OK || dt != PKRT_DTYPE_F32) {
    PK_TEST_FAIL(who, "cannot read %s: %s", path, pk_ctx_error(ctx));
    return NULL;
  }
  int64_t n = 1;
  for (int d = 0; d < *ndim; d++) n *= shape[d];
  double *v = pk_alloc(ctx, sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = ((const float *)data)[i];
  return v;
}

static void run_case(const nn_case *c) {
  pk_ctx *ctx = pk_ctx_new();
  const char *who = pk_sprintf(ctx, "nn_%s", c->name);
  const char *dir = pk_sprintf(ctx, "%s/onnx-ops/nn_%s", FIXTURES, c->name);
  int xn, yn;
  int64_t xs[PK_TE_MAX_DIMS], ys[PK_TE_MAX_DIMS];
  double *x = read_pb(ctx, pk_sprintf(ctx, "%s/test_data_set_0/input_0.pb", dir), &xn, xs, who);
  double *y = read_pb(ctx, pk_sprintf(ctx, "%s/test_data_set_0/output_0.pb", dir), &yn, ys, who);
  if (!x || !y) goto done;
  pk_frontend_opts opts = {.batch = xs[0]};
  pk_graph *g = NULL, *run = NULL;
  pk_model_info info;
  if (pk_frontend_load_opts(ctx, pk_sprintf(ctx, "%s/model.onnx", dir), &opts, &g, &info) !=
      PK_OK) {
    PK_TEST_FAIL(who, "import: %s", pk_ctx_error(ctx));
    goto done;
  }
  const char *ops = op_list(ctx, g);
  if (strcmp(ops, c->ops) != 0) {
    PK_TEST_FAIL(who, "ops are '%s', expected '%s'", ops, c->ops);
    goto done;
  }
  if (!roles_hold(ctx, g, c->roles, who)) goto done;
  if (info.train.bn_train_all != (c->run == RUN_TRAIN)) {
    PK_TEST_FAIL(who, "bn_train_all is %d", info.train.bn_train_all);
    goto done;
  }
  if (c->run == RUN_TRAIN) run = g;
  else if (pk_eval_build(g, &info.train, false, &run) != PK_OK) {
    PK_TEST_FAIL(who, "pk_eval_build: %s", pk_ctx_error(ctx));
    goto done;
  }
  const pk_gtensor *out = run->tensors[run->output];
  bool same = out->ndim == yn;
  for (int d = 0; same && d < yn; d++) same = out->shape[d] == ys[d];
  if (!same) {
    PK_TEST_FAIL(who, "output has rank %d, dim 0 %lld; onnxruntime's has rank %d, dim 0 %lld",
                 out->ndim, (long long)out->shape[0], yn, (long long)ys[0]);
    goto done;
  }
  tg_store *st = tg_store_new(ctx, run);
  int xt = pk_graph_find(run, "X");
  if (xt < 0) {
    PK_TEST_FAIL(who, "no graph tensor 'X'");
    goto done;
  }
  memcpy(st->val[xt], x, sizeof(double) * (size_t)tg_numel(run->tensors[xt]));
  if (!tg_run(st, run->nnodes)) {
    failures++;
    goto done;
  }
  const double *got = st->val[run->output];
  int64_t n = tg_numel(out), bad = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double err = fabs(got[i] - y[i]) / (1e-4 * (1 + fabs(y[i])));
    if (!(err <= worst)) {
      worst = err, bad = i;
      if (isnan(err)) break; /* NaN stays the verdict */
    }
  }
  if (bad >= 0 && !(worst <= 1))
    PK_TEST_FAIL(who, "element %lld is %.9g, onnxruntime says %.9g", (long long)bad, got[bad],
                 y[bad]);
  else
    printf("PASS %s (%s)\n", who, c->ops[0] ? c->ops : "identity");
done:
  pk_ctx_free(ctx);
}

/* Attributes the converters translate: ONNX's momentum weighs the old running value
 * (Pock's = 1 - it, read as the decimal the f32 attribute holds), dropout's ratio. */
static void test_attrs(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_frontend_opts opts = {.batch = 0};
  pk_graph *g;
  static const struct {
    const char *path;
    int64_t batch;
    double momentum, eps;
  } bn[] = {{"onnx-ops/nn_bn_infer", 2, 0.1, 1e-3},
            {"onnx-ops/nn_bn_infer_rank2", 4, 0.2, 1e-5}};
  for (size_t i = 0; i < sizeof bn / sizeof bn[0]; i++) {
    opts.batch = bn[i].batch;
    const char *p = pk_sprintf(ctx, "%s/%s/model.onnx", FIXTURES, bn[i].path);
    if (pk_frontend_load_opts(ctx, p, &opts, &g, NULL) != PK_OK) {
      PK_TEST_FAIL("attrs", "%s: %s", p, pk_ctx_error(ctx));
      continue;
    }
    const pk_op_attrs *a = &g->nodes[0]->prm.attrs;
    check(fabs(a->momentum - bn[i].momentum) < 1e-12 && fabs(a->eps - bn[i].eps) < 1e-15,
          pk_sprintf(ctx, "attrs %s", bn[i].path), "momentum %.17g eps %.17g, expected %g %g",
          a->momentum, a->eps, bn[i].momentum, bn[i].eps);
  }
  /* training-mode Dropout: Pock's dropout op with the step's rng input */
  opts.batch = 2;
  const char *p = FIXTURES "/onnx-nn-graph/dropout_train/model.onnx";
  if (pk_frontend_load_opts(ctx, p, &opts, &g, NULL) != PK_OK) {
    PK_TEST_FAIL("dropout_train", "%s", pk_ctx_error(ctx));
  } else {
    const pk_gnode *n = g->nnodes == 1 ? g->nodes[0] : NULL;
    check(n && n->op == PK_OP_DROPOUT && n->prm.attrs.drop_p == 0.3 && g->rng >= 0 &&
              n->ninputs == 2 && n->inputs[1] == g->rng,
          "dropout_train", "expected one dropout node, p = 0.3, reading the graph's rng");
  }
  pk_ctx_free(ctx);
}

static void test_refused(void) {
  for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
    pk_ctx *ctx = pk_ctx_new();
    /* the batch: dim 0 of X, which these models fix (1, or 2 for rank-3 inputs) */
    pk_frontend_opts opts = {.batch = REFUSED[i].batch};
    const char *p = pk_sprintf(ctx, "%s/onnx-nn-refused/%s/model.onnx", FIXTURES, REFUSED[i].name);
    pk_graph *g = NULL;
    pk_status s = pk_frontend_load_opts(ctx, p, &opts, &g, NULL);
    const char *msg = pk_ctx_error(ctx);
    const char *who = pk_sprintf(ctx, "refused %s", REFUSED[i].name);
    const char *node = pk_sprintf(ctx, "(%s)", REFUSED[i].op_type);
    check(s == PK_ERR_CHECK && strstr(msg, REFUSED[i].says) && strstr(msg, node) && !g, who,
          "status %s, message '%s' (wanted '%s' and '%s')", pk_status_name(s), msg,
          REFUSED[i].says, node);
    pk_ctx_free(ctx);
  }
}

int main(void) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
  test_attrs();
  test_refused();
  return pk_test_summary("test_onnx_nn");
}
