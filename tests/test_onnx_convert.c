/* test_onnx_convert.c — what each converter family makes of its ONNX ops, beyond the values
 * test_onnx_node checks: every tests/fixtures/onnx-ops case of the math, nn and shape
 * families (scripts/onnx_make_cases.py, onnx_make_nn_cases.py, onnx_make_shape_cases.py)
 * imports into exactly the Pock ops expected (so shape arithmetic, masks and constant
 * patterns were folded away), with its initializers as params or buffers under their own
 * names, matmuls reading a Transpose-reached weight with trans_b (and partial-channel
 * training accepting it), batch norms in the mode the model says, and a training step that
 * builds; batch norm's momentum and epsilon as Pock reads them; training-mode Dropout's
 * graph. Values and refusals: test_onnx_node (one runner for all fixtures).
 *
 *   test_onnx_convert [CASE...]     CASE: run only the table's cases whose name contains it
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_frontend.h"
#include "pkrt.h"

#define PK_TEST_OWN_CHECK
#include "pk_test.h"

#define FIXTURES PK_SOURCE_DIR "/tests/fixtures"

/* The extra checks of a case (bits). */
enum {
  X_TRANS_B = 1 << 0,    /* every matmul / batch_matmul node reads B transposed */
  X_NO_TRANS_B = 1 << 1, /* none does */
  X_BN_TRAIN = 1 << 2,   /* the model trains its batch norms (bn_train_all) */
  X_BN_EVAL = 1 << 3,    /* it does not */
  X_TRAIN_STEP = 1 << 4, /* a training step (every param, MSE, SGD) builds: the helper ops
                            a converter adds (bias reshape, per-group expand) have gradients */
};

typedef struct conv_case {
  const char *name;     /* tests/fixtures/onnx-ops/<name> */
  const char *ops;      /* the graph's op names in node order, space separated */
  const char *roles;    /* "tensor:role ..." that must hold; "" for none */
  unsigned extra;       /* X_* */
  const char *channels; /* a param partial-channel training (0.5) must accept, or NULL */
} conv_case;

static const conv_case CASES[] = {
    /* math */
    {"math_add_bcast_param", "add", "b:param", X_NO_TRANS_B, NULL},
    {"math_sub_const_scalar", "sub", "", X_NO_TRANS_B, NULL},
    {"math_mul_inputs", "mul", "", X_NO_TRANS_B, NULL},
    {"math_div_bcast_inputs", "div", "", X_NO_TRANS_B, NULL},
    {"math_pow_scalar_2", "pow_scalar", "", X_NO_TRANS_B, NULL},
    {"math_pow_scalar_half", "pow_scalar", "", X_NO_TRANS_B, NULL},
    {"math_pow_scalar_int_exp", "pow_scalar", "", X_NO_TRANS_B, NULL},
    {"math_pow_tensor", "pow", "", X_NO_TRANS_B, NULL},
    {"math_sqrt", "sqrt", "", X_NO_TRANS_B, NULL},
    {"math_reciprocal", "reciprocal", "", X_NO_TRANS_B, NULL},
    {"math_neg", "neg", "", X_NO_TRANS_B, NULL},
    {"math_abs", "abs", "", X_NO_TRANS_B, NULL},
    {"math_exp", "exp", "", X_NO_TRANS_B, NULL},
    {"math_log", "log", "", X_NO_TRANS_B, NULL},
    {"math_erf", "erf", "", X_NO_TRANS_B, NULL},
    {"math_relu", "relu", "", X_NO_TRANS_B, NULL},
    {"math_sigmoid", "sigmoid", "", X_NO_TRANS_B, NULL},
    {"math_tanh", "tanh", "", X_NO_TRANS_B, NULL},
    {"math_hardswish", "hardswish", "", X_NO_TRANS_B, NULL},
    {"math_leaky_relu_default", "leaky_relu", "", X_NO_TRANS_B, NULL},
    {"math_leaky_relu_alpha", "leaky_relu", "", X_NO_TRANS_B, NULL},
    {"math_leaky_relu_zero", "relu", "", X_NO_TRANS_B, NULL},
    {"math_elu_alpha", "elu", "", X_NO_TRANS_B, NULL},
    {"math_clip_both", "clip", "", X_NO_TRANS_B, NULL},
    {"math_clip_relu6", "relu6", "", X_NO_TRANS_B, NULL},
    {"math_clip_min_only", "clip", "", X_NO_TRANS_B, NULL},
    {"math_clip_max_only", "clip", "", X_NO_TRANS_B, NULL},
    {"math_clip_none", "relu", "", X_NO_TRANS_B, NULL},
    {"math_hard_sigmoid_default", "mul add clip", "", X_NO_TRANS_B, NULL},
    {"math_hard_sigmoid_torch", "hardsigmoid", "", X_NO_TRANS_B, NULL},
    {"math_gelu_none", "gelu", "", X_NO_TRANS_B, NULL},
    {"math_gelu_tanh", "gelu", "", X_NO_TRANS_B, NULL},
    {"math_matmul_2d_param", "matmul", "w:param", X_NO_TRANS_B, NULL},
    {"math_matmul_tparam_linear", "batch_matmul", "w:param", X_TRANS_B, "w"},
    {"math_matmul_tparam_2d", "matmul", "w:param", X_TRANS_B, "w"},
    {"math_matmul_batch_inputs", "batch_matmul", "", X_NO_TRANS_B, NULL},
    {"math_matmul_batch_bcast", "batch_matmul", "w:param", X_NO_TRANS_B, NULL},
    {"math_matmul_vec_b", "reshape batch_matmul reshape", "v:param", X_NO_TRANS_B, NULL},
    {"math_matmul_vec_vec", "reshape reshape matmul reshape", "v:param", X_NO_TRANS_B, NULL},
    {"math_matmul_vec_a", "reshape batch_matmul reshape", "v:param", X_NO_TRANS_B, NULL},
    {"math_gemm_linear", "matmul add", "w:param", X_TRANS_B, "w"},
    {"math_gemm_alpha_beta", "matmul mul mul add", "c:param", X_NO_TRANS_B, NULL},
    {"math_gemm_trans_a_no_c", "matmul", "w:param", X_NO_TRANS_B, NULL},
    {"math_gemm_tparam", "matmul add", "w:param", X_TRANS_B, "w"},
    {"math_softmax_last", "softmax", "", X_NO_TRANS_B, NULL},
    {"math_softmax_axis1", "softmax", "", X_NO_TRANS_B, NULL},
    {"math_log_softmax_last", "log_softmax", "", X_NO_TRANS_B, NULL},
    {"math_reduce_mean_attr_keep", "mean", "", X_NO_TRANS_B, NULL},
    {"math_reduce_max_attr", "max", "", X_NO_TRANS_B, NULL},
    {"math_reduce_sum_input", "sum", "", X_NO_TRANS_B, NULL},
    {"math_reduce_sum_all", "sum", "", X_NO_TRANS_B, NULL},
    {"math_reduce_sum_noop", "relu", "", X_NO_TRANS_B, NULL},
    {"math_reduce_mean_op18", "mean", "", X_NO_TRANS_B, NULL},
    {"math_reduce_max_op18_all", "max", "", X_NO_TRANS_B, NULL},
    {"math_gelu_torch_pattern", "gelu", "", X_NO_TRANS_B, NULL},
    {"math_gelu_pattern_late_consts", "gelu", "", X_NO_TRANS_B, NULL},
    {"math_gelu_pattern_shared", "div erf add mul mul add", "", X_NO_TRANS_B, NULL},
    {"math_torch_linear_gelu_op13", "batch_matmul add gelu",
     "fc.weight:param", X_TRANS_B, "fc.weight"},
    {"math_torch_linear_gelu_op17", "batch_matmul add gelu",
     "fc.weight:param", X_TRANS_B, "fc.weight"},
    {"math_layer_norm_decomposed", "layer_norm", "gamma:param", X_NO_TRANS_B, NULL},
    {"math_layer_norm_shared", "mean sub pow_scalar mean add sqrt div mul add add",
     "gamma:param", X_NO_TRANS_B, NULL},
    {"math_fold_sqrt_scale", "div", "", X_NO_TRANS_B, NULL},
    {"math_fold_int_arith", "pow add", "", X_NO_TRANS_B, NULL},
    {"math_fold_float_all", "add", "", X_NO_TRANS_B, NULL},
    {"math_fold_int_exponent", "pow_scalar", "", X_NO_TRANS_B, NULL},
    /* nn */
    {"nn_conv_basic", "conv2d", "W:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_conv_bias_pads_strides", "conv2d reshape add",
     "W:param B:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_conv_group_dilations", "conv2d reshape add",
     "W:param B:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_conv_depthwise", "conv2d", "W:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_conv_same_upper", "conv2d reshape add", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_conv_same_lower", "conv2d reshape add", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_conv_valid", "conv2d reshape add", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_maxpool_basic", "max_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_maxpool_pads_dilations", "max_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_maxpool_ceil", "max_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_maxpool_same_upper", "max_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_maxpool_indices_unread", "max_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_avgpool_basic", "avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_avgpool_pads_exclude", "avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_avgpool_pads_include", "pad avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_avgpool_ceil", "avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_avgpool_same_lower", "avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_avgpool_dilations_19", "avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_global_avgpool", "global_avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_bn_infer", "batch_norm",
     "s:param b:param m:buffer v:buffer", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_bn_infer_13", "batch_norm",
     "s:param b:param m:buffer v:buffer", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_bn_infer_rank2", "batch_norm", "m:buffer v:buffer", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_bn_train", "batch_norm",
     "s:param b:param m:buffer v:buffer", X_TRAIN_STEP | X_BN_TRAIN, NULL},
    {"nn_ln_axis_last", "layer_norm", "s:param b:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_ln_axis_m2", "layer_norm", "s:param b:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_ln_no_bias", "layer_norm", "s:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_ln_stats_read", "layer_norm",
     "Mean:activation InvStdDev:activation", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_gn_18_per_group", "reshape expand reshape reshape expand reshape group_norm",
     "s:param b:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_gn_21_per_channel", "group_norm", "s:param b:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_in_4d", "group_norm", "s:param b:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_in_3d", "group_norm", "s:param b:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_torch_cnn_13",
     "conv2d batch_norm max_pool2d conv2d reshape add avg_pool2d global_avg_pool2d",
     "conv1.weight:param bn.weight:param bn.running_mean:buffer bn.running_var:buffer "
     "conv2.bias:param",
     X_TRAIN_STEP | X_BN_TRAIN, NULL},
    {"nn_torch_cnn_17",
     "conv2d layer_norm batch_norm max_pool2d conv2d reshape add avg_pool2d global_avg_pool2d",
     "conv1.weight:param ln.weight:param bn.running_var:buffer conv2.weight:param",
     X_TRAIN_STEP | X_BN_TRAIN, NULL},
    {"nn_torch_groupnorm_13", "conv2d reshape add group_norm",
     "0.weight:param 1.weight:param 1.bias:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_torch_groupnorm_17", "conv2d reshape add group_norm",
     "0.weight:param 1.weight:param 1.bias:param", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_dropout_default", "global_avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_dropout_infer", "global_avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    {"nn_dropout_train_ratio0", "global_avg_pool2d", "", X_TRAIN_STEP | X_BN_EVAL, NULL},
    /* shape */
    {"reshape_infer", "reshape", "", 0, NULL},
    {"reshape_copy_zero", "reshape", "", 0, NULL},
    {"flatten_axis2", "reshape", "", 0, NULL},
    {"flatten_axis_neg", "reshape", "", 0, NULL},
    {"squeeze_axes", "reshape", "", 0, NULL},
    {"squeeze_all", "reshape", "", 0, NULL},
    {"unsqueeze_two", "reshape", "", 0, NULL},
    {"transpose_perm", "transpose", "", 0, NULL},
    {"transpose_default", "transpose", "", 0, NULL},
    {"concat_two_inputs", "concat", "", 0, NULL},
    {"concat_with_constant", "concat", "", 0, NULL},
    {"concat_ten", "concat concat", "", 0, NULL},
    {"split_sizes", "slice slice slice", "", 0, NULL},
    {"split_equal", "slice slice", "", 0, NULL},
    {"split_num_outputs", "slice slice slice", "", 0, NULL},
    {"slice_steps", "slice slice", "", 0, NULL},
    {"slice_negative_steps", "gather gather", "", 0, NULL},
    {"slice_default_axes", "slice slice", "", 0, NULL},
    {"gather_axis1_negative", "gather", "", 0, NULL},
    {"gather_scalar_index", "gather reshape", "", 0, NULL},
    {"gather_embedding", "embedding", "emb.weight:param", 0, NULL},
    {"gather_computed_indices", "gather", "", 0, NULL},
    {"expand_broadcast", "expand", "", 0, NULL},
    {"pad_constant_value", "pad", "", 0, NULL},
    {"pad_negative_crops", "slice slice pad", "", 0, NULL},
    {"pad_axes", "pad", "", 0, NULL},
    {"pad_edge", "gather gather", "", 0, NULL},
    {"pad_reflect", "gather gather", "", 0, NULL},
    {"pad_wrap", "gather gather", "", 0, NULL},
    {"where_mask_input", "where", "", 0, NULL},
    {"trilu_computed", "where", "", 0, NULL},
    {"cast_same_type", "transpose", "", 0, NULL},
    {"cast_constant_shape", "reshape", "", 0, NULL},
    {"constant_of_shape_concat", "concat", "", 0, NULL},
    {"chain_reshape_heads", "reshape transpose", "", 0, NULL},
    {"chain_causal_mask_where", "where", "", 0, NULL},
    {"chain_causal_mask_add", "add", "", 0, NULL},
    {"chain_position_embedding", "embedding embedding reshape expand concat",
     "pos.weight:param", 0, NULL},
    {"chain_linear_transpose", "batch_matmul", "fc.weight:param", X_TRANS_B, "fc.weight"},
    {"transpose_param_concat", "transpose concat", "w:param", 0, NULL},
};

/* The graph's op names in node order, space separated. */
static const char *op_list(pk_ctx *ctx, const pk_graph *g) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_append(&b, "");
  for (int k = 0; k < g->nnodes; k++)
    pk_strbuf_printf(&b, "%s%s", k ? " " : "", pk_op_name(g->nodes[k]->op));
  return pk_strbuf_finish(ctx, &b);
}


/* NULL when each "name:role" of c->roles holds in g, else why not. */
static const char *roles_differ(pk_ctx *ctx, const conv_case *c, const pk_graph *g) {
  char *list = pk_strdup(ctx, c->roles), *save = NULL;
  for (char *item = strtok_r(list, " ", &save); item; item = strtok_r(NULL, " ", &save)) {
    char *colon = strchr(item, ':');
    *colon = '\0';
    int t = pk_graph_find(g, item);
    if (t < 0 || strcmp(pk_role_name(g->tensors[t]->role), colon + 1) != 0)
      return pk_sprintf(ctx, "tensor '%s' is %s, not %s", item,
                        t < 0 ? "missing" : pk_role_name(g->tensors[t]->role), colon + 1);
  }
  return NULL;
}

/* NULL when the weight keeps PyTorch's layout under its own name, read by a trans_b matmul
 * that partial-channel training accepts (half its rows train), else why not. */
static const char *channels_refused(pk_ctx *ctx, const conv_case *c, pk_graph *g) {
  const char *spec = pk_sprintf(ctx, "{\"version\": 1, \"train\": [{\"params\": \"%s\", "
                                "\"channels\": 0.5}]}", c->channels);
  pk_sparse_spec *sp;
  int p = pk_graph_find(g, c->channels);
  if (p < 0) return pk_sprintf(ctx, "no tensor '%s'", c->channels);
  if (pk_sparse_parse(ctx, spec, strlen(spec), "spec.json", &sp) != PK_OK ||
      pk_sparse_apply(g, sp) != PK_OK)
    return pk_sprintf(ctx, "partial channels of %s refused: %s", c->channels, pk_ctx_error(ctx));
  if (g->tensors[p]->train_channels != g->tensors[p]->shape[1] / 2)
    return pk_sprintf(ctx, "%s trains %lld channels", c->channels,
                      (long long)g->tensors[p]->train_channels);
  return NULL;
}

/* Imports the case at the batch test_onnx_node runs it at (dim 0 of input_0) and checks it;
 * NULL when all holds, else why not. */
static const char *check_case(pk_ctx *ctx, const conv_case *c, const char **ops) {
  const char *dir = pk_sprintf(ctx, FIXTURES "/onnx-ops/%s", c->name);
  pkrt_dtype dt;
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  const void *data;
  if (pk_onnx_read_tensor(ctx, pk_sprintf(ctx, "%s/test_data_set_0/input_0.pb", dir), &dt,
                          &ndim, shape, &data) != PK_OK)
    return pk_sprintf(ctx, "input_0.pb: %s", pk_ctx_error(ctx));
  pk_frontend_opts opts = {.batch = ndim > 0 && shape[0] > 0 ? shape[0] : 1};
  pk_graph *g = NULL;
  pk_model_info info;
  if (pk_frontend_load_opts(ctx, pk_sprintf(ctx, "%s/model.onnx", dir), &opts, &g, &info) !=
      PK_OK)
    return pk_sprintf(ctx, "import: %s", pk_ctx_error(ctx));
  const char *why;
  *ops = op_list(ctx, g);
  if (strcmp(*ops, c->ops) != 0) return pk_sprintf(ctx, "ops '%s', expected '%s'", *ops, c->ops);
  if ((why = roles_differ(ctx, c, g))) return why;
  for (int k = 0; k < g->nnodes && (c->extra & (X_TRANS_B | X_NO_TRANS_B)); k++) {
    const pk_gnode *n = g->nodes[k];
    if ((n->op == PK_OP_MATMUL || n->op == PK_OP_BATCH_MATMUL) &&
        n->prm.attrs.trans_b != !!(c->extra & X_TRANS_B))
      return pk_sprintf(ctx, "node %s has trans_b %d", n->name, n->prm.attrs.trans_b);
  }
  if ((c->extra & (X_BN_TRAIN | X_BN_EVAL)) &&
      info.train.bn_train_all != !!(c->extra & X_BN_TRAIN))
    return pk_sprintf(ctx, "bn_train_all is %d", info.train.bn_train_all);
  if (c->channels && (why = channels_refused(ctx, c, g))) return why;
  if (c->extra & X_TRAIN_STEP) {
    pk_train_spec ts = info.train;
    ts.loss = PK_LOSS_MSE;
    ts.optim = PK_OPTIM_SGD;
    ts.lr = 0.1;
    pk_graph *train = NULL;
    if (pk_sparse_apply(g, NULL) != PK_OK || pk_train_build(g, &ts, &train) != PK_OK)
      return pk_sprintf(ctx, "training step: %s", pk_ctx_error(ctx));
  }
  return NULL;
}

static void run_case(const conv_case *c) {
  pk_ctx *ctx = pk_ctx_new();
  const char *ops = "";
  const char *why = check_case(ctx, c, &ops);
  if (why) PK_TEST_FAIL(c->name, "%s", why);
  else printf("PASS %s (%s)\n", c->name, ops[0] ? ops : "no node");
  pk_ctx_free(ctx);
}

/* Attributes the nn converters translate: ONNX's momentum weighs the old running value
 * (Pock's = 1 - it, read as the decimal the f32 attribute holds), epsilon as given; and
 * training-mode Dropout: Pock's dropout op reading the step's rng input. */
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

int main(int argc, char **argv) {
  int nrun = 0;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    bool pick = argc == 1;
    for (int k = 1; k < argc; k++) pick |= strstr(CASES[i].name, argv[k]) != NULL;
    if (pick) run_case(&CASES[i]), nrun++;
  }
  if (argc == 1) test_attrs();
  else if (!nrun) PK_TEST_FAIL("arguments", "no case of the table matches");
  return pk_test_summary("test_onnx_convert");
}
