/* test_op_grad_cases.h — the operator instances whose gradients test_op_grad checks by
 * finite differences and test_op_grad_codegen compiles: every differentiable op, with the
 * edge cases of the gradient rules (broadcasting, conv strides/dilation/groups/asymmetric
 * padding/unread rows, padded and strided pools, reductions with and without keepdims). */
#ifndef TEST_OP_GRAD_CASES_H
#define TEST_OP_GRAD_CASES_H

#include "pk_ops.h"

#define F32 PKRT_DTYPE_F32
#define F64 PKRT_DTYPE_F64
#define NONE {.groups = 0}

typedef struct grad_case {
  const char *label;
  pk_op_kind op;
  pk_op_params prm;
  const char *args[PK_OP_MAX_INPUTS]; /* per differentiable input: the args it must read */
} grad_case;

/* args are written "I0 O S1 DY": forward input 0, the forward result, compute 1 of the
 * forward program (a saved stage), dY */
static const grad_case grad_cases[] = {
    {"matmul", PK_OP_MATMUL, {2, {{2, {4, 6}, F64}, {2, {6, 3}, F64}}, NONE}, {"I1 DY", "I0 DY"}},
    {"matmul_ta", PK_OP_MATMUL, {2, {{2, {6, 4}, F32}, {2, {6, 3}, F32}}, {.trans_a = true}},
     {"I1 DY", "I0 DY"}},
    {"matmul_tb", PK_OP_MATMUL, {2, {{2, {4, 6}, F32}, {2, {3, 6}, F32}}, {.trans_b = true}},
     {"I1 DY", "I0 DY"}},
    {"matmul_ta_tb", PK_OP_MATMUL,
     {2, {{2, {5, 1}, F32}, {2, {3, 5}, F32}}, {.trans_a = true, .trans_b = true}},
     {"I1 DY", "I0 DY"}},
    {"batch_matmul_bcast", PK_OP_BATCH_MATMUL,
     {2, {{4, {3, 1, 4, 5}, F32}, {3, {2, 5, 3}, F32}}, NONE}, {"I1 DY", "I0 DY"}},
    {"batch_matmul_rank2_b", PK_OP_BATCH_MATMUL,
     {2, {{3, {2, 3, 4}, F64}, {2, {4, 2}, F64}}, NONE}, {"I1 DY", "I0 DY"}},
    {"batch_matmul_ta_tb", PK_OP_BATCH_MATMUL,
     {2, {{3, {2, 5, 4}, F32}, {3, {1, 3, 5}, F32}}, {.trans_a = true, .trans_b = true}},
     {"I1 DY", "I0 DY"}},
    {"add_bcast", PK_OP_ADD, {2, {{3, {3, 1, 4}, F32}, {2, {5, 1}, F32}}, NONE}, {"DY", "DY"}},
    {"add_same", PK_OP_ADD, {2, {{2, {3, 4}, F64}, {2, {3, 4}, F64}}, NONE}, {"DY", "DY"}},
    {"sub_scalar_left", PK_OP_SUB, {2, {{1, {1}, F32}, {2, {3, 4}, F32}}, NONE}, {"DY", "DY"}},
    {"mul_bcast", PK_OP_MUL, {2, {{2, {3, 4}, F32}, {3, {2, 1, 4}, F32}}, NONE},
     {"I1 DY", "I0 DY"}},
    {"div_row", PK_OP_DIV, {2, {{1, {4}, F32}, {2, {3, 4}, F32}}, NONE}, {"I1 DY", "I0 I1 DY"}},
    {"div_col_f64", PK_OP_DIV, {2, {{2, {3, 4}, F64}, {2, {3, 1}, F64}}, NONE},
     {"I1 DY", "I0 I1 DY"}},
    {"relu", PK_OP_RELU, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"sigmoid", PK_OP_SIGMOID, {1, {{3, {2, 3, 4}, F32}}, NONE}, {"O DY"}},
    {"tanh_f64", PK_OP_TANH, {1, {{2, {4, 5}, F64}}, NONE}, {"O DY"}},
    {"gelu", PK_OP_GELU, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"gelu_1", PK_OP_GELU, {1, {{1, {1}, F64}}, NONE}, {"I0 DY"}},
    {"leaky_relu", PK_OP_LEAKY_RELU, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"leaky_relu_alpha_f64", PK_OP_LEAKY_RELU, {1, {{1, {9}, F64}}, {.alpha = 0.3}}, {"I0 DY"}},
    {"elu", PK_OP_ELU, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"elu_alpha_f64", PK_OP_ELU, {1, {{3, {2, 3, 4}, F64}}, {.alpha = 0.5}}, {"I0 DY"}},
    {"silu", PK_OP_SILU, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"hardsigmoid", PK_OP_HARDSIGMOID, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"hardswish_f64", PK_OP_HARDSWISH, {1, {{2, {4, 9}, F64}}, NONE}, {"I0 DY"}},
    {"relu6", PK_OP_RELU6, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"clip", PK_OP_CLIP, {1, {{2, {5, 7}, F32}}, {.clip_min = -0.5, .clip_max = 0.25}},
     {"I0 DY"}},
    {"exp", PK_OP_EXP, {1, {{2, {5, 7}, F32}}, NONE}, {"O DY"}},
    {"log_f64", PK_OP_LOG, {1, {{2, {4, 5}, F64}}, NONE}, {"I0 DY"}},
    {"sqrt", PK_OP_SQRT, {1, {{2, {5, 7}, F32}}, NONE}, {"O DY"}},
    {"rsqrt", PK_OP_RSQRT, {1, {{1, {9}, F32}}, NONE}, {"O DY"}},
    {"abs", PK_OP_ABS, {1, {{2, {5, 7}, F32}}, NONE}, {"I0 DY"}},
    {"neg", PK_OP_NEG, {1, {{3, {2, 3, 4}, F32}}, NONE}, {"DY"}},
    {"reciprocal_f64", PK_OP_RECIPROCAL, {1, {{2, {4, 5}, F64}}, NONE}, {"O DY"}},
    {"softmax_rows", PK_OP_SOFTMAX, {1, {{2, {4, 7}, F32}}, {.axis = 1}}, {"O DY"}},
    {"softmax_mid_f64", PK_OP_SOFTMAX, {1, {{3, {2, 5, 3}, F64}}, {.axis = -2}}, {"O DY"}},
    {"sum_keepdims", PK_OP_SUM, {1, {{3, {3, 4, 5}, F32}}, {.naxes = 1, .axes = {1}, .keepdims = true}},
     {"DY"}},
    {"sum_all", PK_OP_SUM, {1, {{2, {3, 5}, F32}}, NONE}, {"DY"}},
    {"mean_outer", PK_OP_MEAN, {1, {{3, {3, 4, 5}, F64}}, {.naxes = 2, .axes = {0, 2}}}, {"DY"}},
    {"max_last", PK_OP_MAX, {1, {{2, {4, 9}, F32}}, {.naxes = 1, .axes = {-1}}}, {"I0 O DY"}},
    {"max_outer_keepdims", PK_OP_MAX,
     {1, {{3, {3, 4, 5}, F64}}, {.naxes = 2, .axes = {0, 2}, .keepdims = true}}, {"I0 O DY"}},
    {"max_all", PK_OP_MAX, {1, {{2, {3, 4}, F32}}, NONE}, {"I0 O DY"}},
    {"conv2d_3x3_pad1", PK_OP_CONV2D,
     {2, {{4, {2, 3, 5, 5}, F64}, {4, {4, 3, 3, 3}, F64}}, {.pad = {1, 1, 1, 1}}},
     {"I1 DY", "I0 DY"}},
    /* stride (2, 3), dilation (2, 1), groups 2, padding (1, 0, 2, 1):
     * (9 + 1 + 2 - 2*2 - 1) mod 2 = 1 and (8 + 0 + 1 - 1 - 1) mod 3 = 1 */
    {"conv2d_grouped_strided_dilated", PK_OP_CONV2D,
     {2, {{4, {2, 4, 9, 8}, F32}, {4, {6, 2, 3, 2}, F32}},
      {.groups = 2, .stride = {2, 3}, .pad = {1, 0, 2, 1}, .dilation = {2, 1}}},
     {"I1 DY", "I0 DY"}},
    {"conv2d_depthwise_asym", PK_OP_CONV2D,
     {2, {{4, {1, 4, 7, 7}, F32}, {4, {4, 1, 3, 3}, F32}},
      {.groups = 4, .stride = {2, 2}, .pad = {0, 1, 1, 0}}},
     {"I1 DY", "I0 DY"}},
    /* depth multiplier 2: each input channel feeds two output channels */
    {"conv2d_depthwise_x2_dilated", PK_OP_CONV2D,
     {2, {{4, {1, 2, 6, 6}, F64}, {4, {4, 1, 2, 2}, F64}},
      {.groups = 2, .dilation = {2, 2}, .pad = {2, 0, 0, 2}}},
     {"I1 DY", "I0 DY"}},
    /* H 8, kernel 3, stride 3: rows 6 and 7 are read by no window; W: stride 2 pad 0 */
    {"conv2d_unread_rows", PK_OP_CONV2D,
     {2, {{4, {1, 2, 8, 7}, F32}, {4, {3, 2, 3, 2}, F32}}, {.stride = {3, 2}}},
     {"I1 DY", "I0 DY"}},
    {"conv2d_1x1", PK_OP_CONV2D, {2, {{4, {2, 5, 1, 1}, F32}, {4, {3, 5, 1, 1}, F32}}, NONE},
     {"I1 DY", "I0 DY"}},
    {"max_pool2d_3s2p1", PK_OP_MAX_POOL2D,
     {1, {{4, {1, 2, 7, 7}, F32}}, {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1, 1, 1}}},
     {"I0 O DY"}},
    /* every source row/col is read by some window: no guard at all in the gradient */
    {"max_pool2d_2s1p1_unguarded", PK_OP_MAX_POOL2D,
     {1, {{4, {1, 2, 3, 3}, F32}}, {.kernel = {2, 2}, .stride = {1, 1}, .pad = {1, 1, 1, 1}}},
     {"I0 O DY"}},
    {"max_pool2d_2x3", PK_OP_MAX_POOL2D,
     {1, {{4, {2, 1, 6, 7}, F64}}, {.kernel = {2, 3}, .stride = {2, 2}}}, {"I0 O DY"}},
    {"max_pool2d_dilated_asym", PK_OP_MAX_POOL2D,
     {1, {{4, {1, 1, 8, 9}, F32}},
      {.kernel = {2, 3}, .stride = {3, 2}, .dilation = {2, 1}, .pad = {1, 0, 0, 1}}},
     {"I0 O DY"}},
    {"avg_pool2d_3s2p1", PK_OP_AVG_POOL2D,
     {1, {{4, {1, 2, 7, 7}, F32}}, {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1, 1, 1}}},
     {"DY"}},
    {"avg_pool2d_2x2", PK_OP_AVG_POOL2D,
     {1, {{4, {1, 2, 6, 6}, F64}}, {.kernel = {2, 2}, .stride = {2, 2}}}, {"DY"}},
    {"avg_pool2d_asym_dilated", PK_OP_AVG_POOL2D,
     {1, {{4, {1, 1, 7, 8}, F32}},
      {.kernel = {3, 2}, .stride = {2, 3}, .pad = {1, 0, 2, 1}, .dilation = {1, 2}}},
     {"DY"}},
    {"softmax_cross_entropy", PK_OP_SOFTMAX_CROSS_ENTROPY,
     {3, {{2, {5, 7}, F32}, {2, {5, 7}, F32}, {1, {5}, F32}}, NONE}, {"I0 I1 I2"}},
    {"softmax_cross_entropy_1row_f64", PK_OP_SOFTMAX_CROSS_ENTROPY,
     {3, {{2, {1, 4}, F64}, {2, {1, 4}, F64}, {1, {1}, F64}}, NONE}, {"I0 I1 I2"}},
    {"mse_loss_3d", PK_OP_MSE_LOSS,
     {3, {{3, {3, 2, 5}, F32}, {3, {3, 2, 5}, F32}, {1, {3}, F32}}, NONE}, {"I0 I1 I2"}},
    {"mse_loss_1d_f64", PK_OP_MSE_LOSS,
     {3, {{1, {6}, F64}, {1, {6}, F64}, {1, {6}, F64}}, NONE}, {"I0 I1 I2"}},
    {"slice_mid", PK_OP_SLICE,
     {1, {{3, {2, 7, 3}, F32}}, {.slice_axis = 1, .slice_start = 2, .slice_len = 4}}, {"DY"}},
    {"slice_prefix", PK_OP_SLICE,
     {1, {{2, {3, 5}, F64}}, {.slice_axis = -1, .slice_start = 0, .slice_len = 2}}, {"DY"}},
    {"slice_whole", PK_OP_SLICE, {1, {{1, {4}, F32}}, {.slice_len = 4}}, {"DY"}},
    {"reshape_flatten", PK_OP_RESHAPE,
     {1, {{4, {2, 3, 1, 5}, F32}}, {.new_ndim = 2, .new_shape = {2, 15}}}, {"DY"}},
    {"reshape_regroup", PK_OP_RESHAPE,
     {1, {{2, {6, 5}, F64}}, {.new_ndim = 3, .new_shape = {5, 3, 2}}}, {"DY"}},
    /* indexing and dropout: ids repeat (more ids than rows), so the scatter-add must
     * accumulate; fill_input draws ids inside [0, extent) */
    {"gather_mid_axis", PK_OP_GATHER,
     {2, {{3, {3, 5, 2}, F64}, {2, {2, 4}, PKRT_DTYPE_I64}}, {.axis = 1}}, {"I1 DY"}},
    {"gather_last_axis_i32", PK_OP_GATHER,
     {2, {{2, {4, 3}, F32}, {1, {7}, PKRT_DTYPE_I32}}, {.axis = -1}}, {"I1 DY"}},
    {"embedding_2d_ids", PK_OP_EMBEDDING,
     {2, {{2, {5, 3}, F64}, {2, {4, 3}, PKRT_DTYPE_I64}}, NONE}, {"I1 DY"}},
    {"embedding_1row_i32", PK_OP_EMBEDDING,
     {2, {{2, {1, 7}, F32}, {1, {3}, PKRT_DTYPE_I32}}, NONE}, {"I1 DY"}},
    {"dropout", PK_OP_DROPOUT,
     {2, {{2, {7, 5}, F64}, {1, {2}, PKRT_DTYPE_I64}}, {.drop_p = 0.3}}, {"I1 DY"}},
    {"dropout_p0", PK_OP_DROPOUT, {2, {{1, {4}, F32}, {1, {2}, PKRT_DTYPE_I64}}, NONE}, {"I1 DY"}},
};

#define GRAD_CASES ((int)(sizeof grad_cases / sizeof grad_cases[0]))

#undef F32
#undef F64
#undef NONE

#endif
