/* op_examples.c — a fixed list of small instances of every operator, for the tests that
 * compare generated kernels with the interpreter (and for humans reading TE text). */
#include "op_impl.h"

#define F32 PKRT_DTYPE_F32
#define F64 PKRT_DTYPE_F64
#define NO_ATTRS {.groups = 0} /* designated, so -Wextra sees an initialiser */

static const pk_op_example examples[] = {
    {"matmul_7x33x1", PK_OP_MATMUL, {2, {{2, {7, 33}, F32}, {2, {33, 1}, F32}}, NO_ATTRS}},
    {"matmul_ta", PK_OP_MATMUL, {2, {{2, {33, 7}, F32}, {2, {33, 5}, F32}}, {.trans_a = true}}},
    {"matmul_tb", PK_OP_MATMUL, {2, {{2, {1, 7}, F32}, {2, {33, 7}, F32}}, {.trans_b = true}}},
    {"matmul_ta_tb", PK_OP_MATMUL,
     {2, {{2, {5, 7}, F32}, {2, {3, 5}, F32}}, {.trans_a = true, .trans_b = true}}},
    {"matmul_f64", PK_OP_MATMUL, {2, {{2, {4, 6}, F64}, {2, {6, 3}, F64}}, NO_ATTRS}},
    {"batch_matmul", PK_OP_BATCH_MATMUL, {2, {{3, {2, 7, 5}, F32}, {3, {2, 5, 3}, F32}}, NO_ATTRS}},
    {"batch_matmul_bcast", PK_OP_BATCH_MATMUL,
     {2, {{4, {3, 1, 4, 5}, F32}, {3, {2, 5, 6}, F32}}, NO_ATTRS}},
    {"batch_matmul_rank2_b", PK_OP_BATCH_MATMUL,
     {2, {{3, {2, 7, 33}, F32}, {2, {33, 1}, F32}}, NO_ATTRS}},
    {"batch_matmul_ta_tb", PK_OP_BATCH_MATMUL,
     {2, {{3, {2, 5, 4}, F32}, {3, {2, 3, 5}, F32}}, {.trans_a = true, .trans_b = true}}},
    {"add_bcast", PK_OP_ADD, {2, {{3, {7, 1, 33}, F32}, {2, {5, 1}, F32}}, NO_ATTRS}},
    {"sub_scalar_left", PK_OP_SUB, {2, {{1, {1}, F32}, {2, {7, 33}, F32}}, NO_ATTRS}},
    {"mul_same_f64", PK_OP_MUL, {2, {{2, {7, 33}, F64}, {2, {7, 33}, F64}}, NO_ATTRS}},
    {"div_row", PK_OP_DIV, {2, {{1, {33}, F32}, {2, {7, 33}, F32}}, NO_ATTRS}},
    {"relu", PK_OP_RELU, {1, {{2, {7, 33}, F32}}, NO_ATTRS}},
    {"sigmoid_4d", PK_OP_SIGMOID, {1, {{4, {2, 3, 4, 5}, F32}}, NO_ATTRS}},
    {"tanh_1", PK_OP_TANH, {1, {{1, {1}, F32}}, NO_ATTRS}},
    {"gelu_f64", PK_OP_GELU, {1, {{2, {33, 7}, F64}}, NO_ATTRS}},
    {"softmax_rows", PK_OP_SOFTMAX, {1, {{2, {7, 33}, F32}}, {.axis = 1}}},
    {"softmax_1d", PK_OP_SOFTMAX, {1, {{1, {33}, F32}}, {.axis = 0}}},
    {"softmax_mid_f64", PK_OP_SOFTMAX, {1, {{3, {2, 3, 7}, F64}}, {.axis = -2}}},
    {"sum_keepdims", PK_OP_SUM,
     {1, {{3, {7, 33, 5}, F32}}, {.naxes = 1, .axes = {1}, .keepdims = true}}},
    {"sum_all", PK_OP_SUM, {1, {{2, {7, 5}, F32}}, NO_ATTRS}},
    {"mean_outer", PK_OP_MEAN, {1, {{3, {7, 33, 5}, F32}}, {.naxes = 2, .axes = {0, 2}}}},
    {"mean_last_keepdims", PK_OP_MEAN,
     {1, {{2, {1, 7}, F64}}, {.naxes = 1, .axes = {-1}, .keepdims = true}}},
    {"max_last", PK_OP_MAX, {1, {{2, {7, 33}, F32}}, {.naxes = 1, .axes = {-1}}}},
    {"max_all_keepdims", PK_OP_MAX, {1, {{3, {3, 4, 5}, F32}}, {.keepdims = true}}},
    {"conv2d_3x3_pad1", PK_OP_CONV2D,
     {2, {{4, {1, 3, 7, 7}, F32}, {4, {4, 3, 3, 3}, F32}}, {.pad = {1, 1, 1, 1}}}},
    /* (9 + 1 + 2 - 2*2 - 1) mod 2 = 1 and (8 + 0 + 1 - 1 - 1) mod 3 = 1 */
    {"conv2d_grouped_strided_dilated", PK_OP_CONV2D,
     {2, {{4, {2, 4, 9, 8}, F32}, {4, {6, 2, 3, 2}, F32}},
      {.groups = 2, .stride = {2, 3}, .pad = {1, 0, 2, 1}, .dilation = {2, 1}}}},
    {"conv2d_depthwise_asym", PK_OP_CONV2D,
     {2, {{4, {1, 4, 7, 7}, F32}, {4, {4, 1, 3, 3}, F32}},
      {.groups = 4, .stride = {2, 2}, .pad = {0, 1, 1, 0}}}},
    {"conv2d_1x1", PK_OP_CONV2D, {2, {{4, {2, 33, 1, 1}, F32}, {4, {7, 33, 1, 1}, F32}}, NO_ATTRS}},
    {"conv2d_f64", PK_OP_CONV2D,
     {2, {{4, {1, 2, 5, 6}, F64}, {4, {3, 2, 2, 3}, F64}},
      {.stride = {1, 2}, .pad = {2, 0, 0, 1}}}},
    {"max_pool2d_3s2p1", PK_OP_MAX_POOL2D,
     {1, {{4, {1, 3, 7, 7}, F32}}, {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1, 1, 1}}}},
    {"max_pool2d_2x3", PK_OP_MAX_POOL2D,
     {1, {{4, {2, 2, 8, 10}, F32}}, {.kernel = {2, 3}, .stride = {2, 2}}}},
    {"max_pool2d_dilated_f64", PK_OP_MAX_POOL2D,
     {1, {{4, {1, 1, 9, 9}, F64}}, {.kernel = {2, 2}, .dilation = {2, 2}, .pad = {1, 1, 1, 1}}}},
    {"avg_pool2d_3s2p1", PK_OP_AVG_POOL2D,
     {1, {{4, {1, 3, 7, 7}, F32}}, {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1, 1, 1}}}},
    {"avg_pool2d_2x2", PK_OP_AVG_POOL2D,
     {1, {{4, {1, 2, 6, 6}, F32}}, {.kernel = {2, 2}, .stride = {2, 2}}}},
    {"avg_pool2d_asym_dilated", PK_OP_AVG_POOL2D,
     {1, {{4, {1, 2, 7, 8}, F32}},
      {.kernel = {3, 2}, .stride = {2, 3}, .pad = {1, 0, 2, 1}, .dilation = {1, 2}}}},
};

const pk_op_example *pk_op_examples(int *count) {
  *count = (int)(sizeof examples / sizeof examples[0]);
  return examples;
}
