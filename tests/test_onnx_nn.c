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
  const char *ops;   /* the forward graph's op names in node order, comma-separated; NULL:
                        one group_norm among others */
  const char *roles; /* "tensor:role,..." that must hold; "" for none */
  int run;
  const char *more;  /* graph tensors holding output_1.pb, output_2.pb, ... ("a,b") */
} nn_case;

static const nn_case CASES[] = {
    {"conv_basic", "conv2d", "W:param", RUN_EVAL, NULL},
    {"conv_bias_pads_strides", "conv2d,reshape,add", "W:param,B:param", RUN_EVAL, NULL},
    {"conv_group_dilations", "conv2d,reshape,add", "W:param,B:param", RUN_EVAL, NULL},
    {"conv_depthwise", "conv2d", "W:param", RUN_EVAL, NULL},
    {"conv_same_upper", "conv2d,reshape,add", "", RUN_EVAL, NULL},
    {"conv_same_lower", "conv2d,reshape,add", "", RUN_EVAL, NULL},
    {"conv_valid", "conv2d,reshape,add", "", RUN_EVAL, NULL},
    {"maxpool_basic", "max_pool2d", "", RUN_EVAL, NULL},
    {"maxpool_pads_dilations", "max_pool2d", "", RUN_EVAL, NULL},
    {"maxpool_ceil", "max_pool2d", "", RUN_EVAL, NULL},
    {"maxpool_same_upper", "max_pool2d", "", RUN_EVAL, NULL},
    {"maxpool_indices_unread", "max_pool2d", "", RUN_EVAL, NULL},
    {"avgpool_basic", "avg_pool2d", "", RUN_EVAL, NULL},
    {"avgpool_pads_exclude", "avg_pool2d", "", RUN_EVAL, NULL},
    {"avgpool_pads_include", "pad,avg_pool2d", "", RUN_EVAL, NULL},
    {"avgpool_ceil", "avg_pool2d", "", RUN_EVAL, NULL},
    {"avgpool_same_lower", "avg_pool2d", "", RUN_EVAL, NULL},
    {"avgpool_dilations_19", "avg_pool2d", "", RUN_EVAL, NULL},
    {"global_avgpool", "global_avg_pool2d", "", RUN_EVAL, NULL},
    {"bn_infer", "batch_norm", "s:param,b:param,m:buffer,v:buffer", RUN_EVAL, NULL},
    {"bn_infer_13", "batch_norm", "s:param,b:param,m:buffer,v:buffer", RUN_EVAL, NULL},
    {"bn_infer_rank2", "batch_norm", "m:buffer,v:buffer", RUN_EVAL, NULL},
    {"bn_train", "batch_norm", "s:param,b:param,m:buffer,v:buffer", RUN_TRAIN, NULL},
    {"ln_axis_last", "layer_norm", "s:param,b:param", RUN_EVAL, NULL},
    {"ln_axis_m2", "layer_norm", "s:param,b:param", RUN_EVAL, NULL},
    {"ln_no_bias", "layer_norm", "s:param", RUN_EVAL, NULL},
    {"ln_stats_read", "layer_norm", "Mean:activation,InvStdDev:activation", RUN_EVAL,
     "Mean,InvStdDev"},
    {"gn_18_per_group", "reshape,expand,reshape,reshape,expand,reshape,group_norm",
     "s:param,b:param", RUN_EVAL, NULL},
    {"gn_21_per_channel", "group_norm", "s:param,b:param", RUN_EVAL, NULL},
    {"in_4d", "group_norm", "s:param,b:param", RUN_EVAL, NULL},
    {"in_3d", "group_norm", "s:param,b:param", RUN_EVAL, NULL},
    {"torch_cnn_13", "conv2d,batch_norm,max_pool2d,conv2d,reshape,add,avg_pool2d,global_avg_pool2d",
     "conv1.weight:param,bn.weight:param,bn.running_mean:buffer,bn.running_var:buffer,"
     "conv2.bias:param", RUN_TRAIN, NULL},
    {"torch_cnn_17",
     "conv2d,layer_norm,batch_norm,max_pool2d,conv2d,reshape,add,avg_pool2d,global_avg_pool2d",
     "conv1.weight:param,ln.weight:param,bn.running_var:buffer,conv2.weight:param", RUN_TRAIN,
     NULL},
    /* nn.GroupNorm as torch exports it: the shape and math ops around group_norm are other
     * converters', so only the normalization is named here */
    {"torch_groupnorm_13", NULL, "0.weight:param,1.weight:param,1.bias:param", RUN_EVAL, NULL},
    {"torch_groupnorm_17", NULL, "0.weight:param,1.weight:param,1.bias:param", RUN_EVAL, NULL},
    {"dropout_default", "global_avg_pool2d", "", RUN_EVAL, NULL},
    {"dropout_infer", "global_avg_pool2d", "", RUN_EVAL, NULL},
    {"dropout_train_ratio0", "global_avg_pool2d", "", RUN_EVAL, NULL},
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
    {"ln_opset_13", "LayerNormalization", "needs opset 17", 2},
    {"ln_scale_shape", "LayerNormalization", "input Scale is float (4)", 2},
    {"gn_groups", "GroupNormalization", "num_groups = 2 does not divide the 3 channels", 2},
    {"dropout_mask_read", "Dropout", "output 1 (mask", 2},
};

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

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

/* Tensor t of the store equals `want` (n values) within 1e-4 relative; else a FAIL naming
 * the worst element. */
static bool outputs_match(tg_store *st, int t, const double *want, int64_t n, const char *who) {
  const double *got = st->val[t];
  int64_t bad = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double err = fabs(got[i] - want[i]) / (1e-4 * (1 + fabs(want[i])));
    if (!(err <= worst)) {
      worst = err, bad = i;
      if (isnan(err)) break; /* NaN stays the verdict */
    }
  }
  if (bad < 0 || worst <= 1) return true;
  PK_TEST_FAIL(who, "%s[%lld] is %.9g, the test says %.9g", st->g->tensors[t]->name,
               (long long)bad, got[bad], want[bad]);
  return false;
}

/* Runs one node-test directory (model.onnx, test_data_set_0/input_K.pb, output_0.pb): the
 * inputs feed the graph's inputs in order, batch norm runs as the model says (training_mode
 * 1: batch statistics; else pk_eval_build's running statistics), and output 0 must equal
 * the file's within 1e-4 relative. c (NULL for a directory named on the command line) adds
 * its op and role checks. */
static void run_dir(const char *dir, const char *who, const nn_case *c) {
  pk_ctx *ctx = pk_ctx_new();
  int yn, xn[8];
  int64_t ys[PK_TE_MAX_DIMS], xs[8][PK_TE_MAX_DIMS];
  double *x[8];
  int nx = 0;
  for (; nx < 8; nx++) {
    const char *p = pk_sprintf(ctx, "%s/test_data_set_0/input_%d.pb", dir, nx);
    FILE *fp = fopen(p, "rb");
    if (!fp) break;
    fclose(fp);
    if (!(x[nx] = read_pb(ctx, p, &xn[nx], xs[nx], who))) goto done;
  }
  double *y = read_pb(ctx, pk_sprintf(ctx, "%s/test_data_set_0/output_0.pb", dir), &yn, ys, who);
  if (!y) goto done;
  if (!nx) {
    PK_TEST_FAIL(who, "no test_data_set_0/input_0.pb");
    goto done;
  }
  pk_frontend_opts opts = {.batch = xn[0] ? xs[0][0] : 1};
  pk_graph *g = NULL, *run = NULL;
  pk_model_info info;
  if (pk_frontend_load_opts(ctx, pk_sprintf(ctx, "%s/model.onnx", dir), &opts, &g, &info) !=
      PK_OK) {
    PK_TEST_FAIL(who, "import: %s", pk_ctx_error(ctx));
    goto done;
  }
  const char *ops = op_list(ctx, g);
  if (c && (c->ops ? strcmp(ops, c->ops) != 0 : !strstr(ops, "group_norm"))) {
    PK_TEST_FAIL(who, "ops are '%s', expected '%s'", ops, c->ops ? c->ops : "a group_norm");
    goto done;
  }
  if (c && !roles_hold(ctx, g, c->roles, who)) goto done;
  if (c && info.train.bn_train_all != (c->run == RUN_TRAIN)) {
    PK_TEST_FAIL(who, "bn_train_all is %d", info.train.bn_train_all);
    goto done;
  }
  if (info.train.bn_train_all) run = g;
  else if (pk_eval_build(g, &info.train, false, &run) != PK_OK) {
    PK_TEST_FAIL(who, "pk_eval_build: %s", pk_ctx_error(ctx));
    goto done;
  }
  const pk_gtensor *out = run->tensors[run->output];
  bool same = out->ndim == (yn ? yn : 1);
  for (int d = 0; same && d < yn; d++) same = out->shape[d] == ys[d];
  if (!same) {
    PK_TEST_FAIL(who, "output has shape %s, the test's is %s",
                 pk_sprintf(ctx, "rank %d, dim 0 %lld", out->ndim, (long long)out->shape[0]),
                 pk_sprintf(ctx, "rank %d, dim 0 %lld", yn, (long long)(yn ? ys[0] : 1)));
    goto done;
  }
  tg_store *st = tg_store_new(ctx, run);
  for (int t = 0, k = 0; t < run->ntensors; t++) {
    if (run->tensors[t]->role != PK_ROLE_INPUT) continue;
    if (k >= nx || tg_numel(run->tensors[t]) != numel_of(xn[k], xs[k])) {
      PK_TEST_FAIL(who, "graph input %d ('%s') has no input_%d.pb of its size", k,
                   run->tensors[t]->name, k);
      goto done;
    }
    memcpy(st->val[t], x[k], sizeof(double) * (size_t)tg_numel(run->tensors[t]));
    k++;
  }
  if (!tg_run(st, run->nnodes)) {
    failures++;
    goto done;
  }
  if (!outputs_match(st, run->output, y, tg_numel(out), who)) goto done;
  /* every case also builds a training step (all params trained, MSE): the converters'
   * helper ops (bias reshape, per-group expand) have gradients, buffers update in place */
  if (c) {
    pk_train_spec ts = info.train;
    ts.loss = PK_LOSS_MSE;
    ts.optim = PK_OPTIM_SGD;
    ts.lr = 0.1;
    pk_graph *train = NULL;
    if (pk_sparse_apply(g, NULL) != PK_OK || pk_train_build(g, &ts, &train) != PK_OK) {
      PK_TEST_FAIL(who, "training step: %s", pk_ctx_error(ctx));
      goto done;
    }
  }
  /* the further outputs, by the graph tensor each is bound to */
  char *more = pk_strdup(ctx, c && c->more ? c->more : "");
  int k = 1;
  for (char *name = strtok(more, ","); name; name = strtok(NULL, ","), k++) {
    int t = pk_graph_find(run, name);
    int ndim;
    int64_t shape[PK_TE_MAX_DIMS];
    double *want = read_pb(ctx, pk_sprintf(ctx, "%s/test_data_set_0/output_%d.pb", dir, k),
                           &ndim, shape, who);
    if (!want) goto done;
    if (t < 0 || tg_numel(run->tensors[t]) != numel_of(ndim, shape)) {
      PK_TEST_FAIL(who, "no tensor '%s' of output_%d.pb's size", name, k);
      goto done;
    }
    if (!outputs_match(st, t, want, numel_of(ndim, shape), who)) goto done;
  }
  printf("PASS %s (%s)\n", who, ops);
done:
  pk_ctx_free(ctx);
}

static void run_case(const nn_case *c) {
  char dir[512], who[128];
  snprintf(dir, sizeof dir, "%s/onnx-ops/nn_%s", FIXTURES, c->name);
  snprintf(who, sizeof who, "nn_%s", c->name);
  run_dir(dir, who, c);
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

/* No arguments: the fixtures. Arguments: node-test directories to run (onnx's backend tests
 * of these ops, say), without the fixtures' op checks. */
int main(int argc, char **argv) {
  if (argc > 1) {
    for (int i = 1; i < argc; i++) run_dir(argv[i], argv[i], NULL);
    return pk_test_summary("test_onnx_nn");
  }
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run_case(&CASES[i]);
  test_attrs();
  test_refused();
  return pk_test_summary("test_onnx_nn");
}
