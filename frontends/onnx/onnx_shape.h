/* onnx_shape.h — what the shape family's converters (onnx_ops_shape.c) and folds
 * (onnx_fold_shape.c) share: element access to constant data, axis and broadcast
 * arithmetic, checked element counts, and the reshape every view-like op ends in. Internal
 * to frontends/onnx: the element and arithmetic helpers live in onnx_fold_shape.c, the
 * node-reading ones (input checks, output shapes from attributes) in onnx_ops_shape.c.
 *
 * Conventions: shapes are ONNX's (ndim 0 for a scalar); every helper that can fail reports
 * through pk_ox_fail naming the node. Broadcasting is numpy's (ranks align at the right, a
 * dim of 1 stretches). */
#ifndef PK_ONNX_SHAPE_H
#define PK_ONNX_SHAPE_H

#include "onnx_impl.h"

bool pk_oxs_is_float(pkrt_dtype t);
/* Input i, which the op requires: a message naming it when it is omitted. */
pk_status pk_oxs_input(pk_ox *im, const pk_ox_node *nd, int i, const char *what,
                       const pk_ox_value **out);
/* Element i of a value with data (CONST or PARAM), converted. */
double pk_oxs_f64(const pk_ox_value *v, int64_t i);
int64_t pk_oxs_i64(const pk_ox_value *v, int64_t i);
/* Stores x as element i of `data` (dtype dt: floats round, integers must be whole). */
void pk_oxs_put_f64(void *data, pkrt_dtype dt, int64_t i, double x);
void pk_oxs_put_i64(void *data, pkrt_dtype dt, int64_t i, int64_t x);
/* n elements of dtype dt in the arena (at least one byte, so an empty tensor has a
 * pointer too). */
void *pk_oxs_alloc(pk_ox *im, pkrt_dtype dt, int64_t n);

/* Axis `axis` of a rank-`rank` tensor, negative from the end: [-rank, rank) -> [0, rank).
 * `what` names it in the message ("axis", "axes[1]"). */
pk_status pk_oxs_axis(pk_ox *im, const pk_ox_node *nd, const char *what, int64_t axis,
                      int rank, int *out);
/* Element count of a shape whose dims must be >= 0 (>= 1 with `nonempty`), at most `limit`
 * elements: else a message naming the shape. */
pk_status pk_oxs_numel(pk_ox *im, const pk_ox_node *nd, int ndim, const int64_t *shape,
                       bool nonempty, int64_t limit, int64_t *n);
/* The numpy broadcast of two shapes; a message naming both when they do not broadcast. */
pk_status pk_oxs_broadcast(pk_ox *im, const pk_ox_node *nd, int na, const int64_t *a, int nb,
                           const int64_t *b, int *n, int64_t *out);
/* Row-major strides of a shape, in elements. */
void pk_oxs_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Strides to read a (ndim, shape) tensor broadcast to (ondim, oshape), aligned to the
 * output's dims: 0 where the input's dim is 1 or missing. */
void pk_oxs_bstrides(int ndim, const int64_t *shape, int ondim, const int64_t *oshape,
                     int64_t *strides);
bool pk_oxs_same_shape(int na, const int64_t *a, int nb, const int64_t *b);

/* Input i must be float data (computed at run time): Pock's data-movement ops copy floats
 * only. `what` names the op ("reshape") in the message. */
pk_status pk_oxs_need_float(pk_ox *im, const pk_ox_node *nd, int i, const char *what);
/* After pk_ox_op_result / pk_ox_bind of output k: restores its ONNX shape (a scalar's graph
 * tensor is (1,)) and the bool flag. */
void pk_oxs_onnx_shape(pk_ox *im, pk_ox_node *nd, int k, int ndim, const int64_t *shape,
                       bool is_bool);
/* Output 0 = input i with ONNX shape (ndim, shape) (same element count, checked by the
 * caller): the same value when the shape is unchanged, new metadata over the same data for
 * a constant, else a Pock reshape. */
pk_status pk_oxs_reshape_to(pk_ox *im, pk_ox_node *nd, int i, int ndim, const int64_t *shape);

/* Output shapes of the view ops, shared by converter and fold (each checks its node's
 * attributes and constant inputs). */
pk_status pk_oxs_reshape_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape);
pk_status pk_oxs_flatten_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape);
pk_status pk_oxs_squeeze_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape);
pk_status pk_oxs_unsqueeze_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape);

/* Transpose's permutation (attr perm, default reverse) of input 0. */
pk_status pk_oxs_perm(pk_ox *im, pk_ox_node *nd, int *perm);
/* Concat: the normalized axis and output shape (inputs of one rank, other dims equal). */
pk_status pk_oxs_concat_shape(pk_ox *im, pk_ox_node *nd, int *axis, int *ndim,
                              int64_t *shape);
/* Split: the normalized axis and each output's extent along it (nd->nout of them). */
pk_status pk_oxs_split_sizes(pk_ox *im, pk_ox_node *nd, int *axis, int64_t *sizes);
/* Slice: per axis of input 0, the first element, the step and the count kept (ONNX's
 * clamping rules; axes not sliced keep start 0, step 1, count = extent). */
pk_status pk_oxs_slice_plan(pk_ox *im, pk_ox_node *nd, int64_t *start, int64_t *step,
                            int64_t *count);
/* Gather: the normalized axis and output shape. */
pk_status pk_oxs_gather_shape(pk_ox *im, pk_ox_node *nd, int *axis, int *ndim,
                              int64_t *shape);
/* Expand: the output shape (input 0 broadcast with the constant shape input). */
pk_status pk_oxs_expand_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape);
/* Pad: elements added before / after each dim of input 0 (negative: removed), and the
 * fill value. */
pk_status pk_oxs_pad_plan(pk_ox *im, pk_ox_node *nd, int64_t *before, int64_t *after,
                          double *value);
/* Where: the output shape (the three inputs broadcast). */
pk_status pk_oxs_where_shape(pk_ox *im, pk_ox_node *nd, int *ndim, int64_t *shape);

#endif
