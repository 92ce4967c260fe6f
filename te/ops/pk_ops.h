/* pk_ops.h — the operator library: each operator, given input shapes, a dtype and
 * attributes, becomes a checked TE program (built as TE text and parsed, so every op has a
 * readable definition: pk_op_text).
 *
 * Usage:
 *   pk_op_params prm = {.ninputs = 2,
 *                       .in = {{2, {64, 128}, PKRT_DTYPE_F32}, {2, {64, 32}, PKRT_DTYPE_F32}},
 *                       .attrs = {.trans_a = true}};           // (128, 64) x (64, 32)
 *   pk_te_program *p;
 *   if (pk_op_build(ctx, PK_OP_MATMUL, &prm, &p) != PK_OK)
 *     fprintf(stderr, "%s\n", pk_ctx_error(ctx));             // e.g. "matmul: inner ..."
 *   const pk_te_tensor *y = p->tensors[p->ntensors - 1];      // the op's result
 *
 * Program layout: tensors 0 .. ninputs-1 are the inputs, in order; the last tensor is the
 * result. Multi-stage ops have earlier computes too (softmax: row max, row sum of exp),
 * which are outputs of the kernel like every compute.
 *
 * Semantics worth knowing:
 *   - all float inputs share one dtype, f32 or f64, and the result has it too; inputs the
 *     table flags PK_OPF_INT_INPUT (indices, integer labels) are i32 or i64;
 *   - elementwise binary ops broadcast like numpy (ranks align at the right; a dim of 1
 *     stretches); batch_matmul broadcasts its leading batch dims the same way;
 *   - max (reduction) and relu propagate NaN (the interpreter's rule);
 *   - activations are PyTorch's: leaky_relu = max(x, 0) + alpha * min(x, 0);
 *     elu = max(x, 0) + alpha * (exp(min(x, 0)) - 1); silu = x * sigmoid(x);
 *     hardsigmoid = min(max(x + 3, 0), 6) / 6; hardswish = x * hardsigmoid(x);
 *     relu6 = min(max(x, 0), 6); clip = min(max(x, clip_min), clip_max);
 *   - exp, log, sqrt, rsqrt (1 / sqrt x), abs, neg, reciprocal (1 / x) are C's functions:
 *     outside the domain (log, sqrt, rsqrt of x <= 0; 1 / 0) the result is IEEE's
 *     (-inf, NaN, inf), not an error;
 *   - a reduction over every axis without keepdims has shape (1,) (a TE has rank >= 1);
 *   - mean is one stage: sum(x / n) over the reduced axes;
 *   - softmax is three stages: m = max over the axis, s = sum exp(x - m), y = exp(x - m) / s;
 *   - conv2d: input (N, C, H, W), weight (O, C / groups, KH, KW), no bias (add one with
 *     PK_OP_ADD); padding is a select guard reading 0.0; output
 *     OH = floor((H + pad_top + pad_bottom - dilation * (KH - 1) - 1) / stride) + 1;
 *   - pools: input (N, C, H, W), window attrs.kernel; every window must hold at least one
 *     element of the input. max_pool2d treats padding as the lowest finite value of the
 *     dtype (so a window whose real elements are all -inf yields -FLT_MAX/-DBL_MAX);
 *     avg_pool2d divides by the number of in-bounds elements of each window (PyTorch's
 *     count_include_pad=False).
 *   - indexing and dropout:
 *     gather(X, I) with attrs.axis: Y = X with dim `axis` replaced by all of I's dims
 *       (ONNX Gather; torch.index_select when I is 1-D): Y[a.., j.., b..] = X[a.., I[j..], b..];
 *     embedding(W (V, D), I (N...)) -> (N..., D): gather along axis 0 (nn.Embedding);
 *     I is i32 or i64. An index outside [0, extent) — negative included, which ONNX would
 *     wrap — reads 0 and receives no gradient (PyTorch raises; see docs/te.md). The
 *     gradient wrt X/W is a scatter_add of dY (docs/te.md): O(elements of dY) updates plus
 *     the zero fill, repeated indices accumulating in order; I is not differentiable.
 *     dropout(X, S) with attrs.drop_p = p in [0, 1): S is an integer (2,) tensor holding
 *       (seed, step). Y = X * 1/(1-p) where hash(seed, step, flat index) >= floor(p * 2^53),
 *       else 0 (the hash of docs/te.md; flat index row-major over X). Nothing is stored:
 *       the gradient dX = dY * 1/(1-p) on the same elements regenerates the mask from S.
 *       p = 0 is the identity, and so is a negative step (evaluation: the executor writes
 *       step -1 outside training steps). The mask differs from PyTorch's RNG (same
 *       distribution); the training executor writes S each step (docs/te.md).
 */
#ifndef PK_OPS_H
#define PK_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "pk_te.h"

/* Attribute keys: the name graph JSON gives each (the ONNX mapping translates to them), and
 * a bit per key for op_table.def's attrs column (what the op reads; a frontend refuses the
 * rest). X(ID, "key") makes PK_ATTR_KEY_<ID> (an index) and PK_ATTR_<ID> (its bit). */
#define PK_ATTR_KEYS(X)                                                                      \
  X(TRANS_A, "trans_a") X(TRANS_B, "trans_b") X(AXIS, "axis") X(AXES, "axes")                \
  X(KEEPDIMS, "keepdims") X(KERNEL, "kernel") X(STRIDE, "stride") X(DILATION, "dilation")    \
  X(PAD, "pad") X(GROUPS, "groups") X(SLICE_AXIS, "slice_axis")                              \
  X(SLICE_START, "slice_start") X(SLICE_LEN, "slice_len") X(SHAPE, "shape")                  \
  X(ALPHA, "alpha") X(MIN, "min") X(MAX, "max")                                             \
  /* indexing and dropout */ X(P, "p")

typedef enum pk_attr_key {
#define PK_ATTR_X(id, key) PK_ATTR_KEY_##id,
  PK_ATTR_KEYS(PK_ATTR_X)
#undef PK_ATTR_X
  PK_ATTR_KEY_COUNT_
} pk_attr_key;
_Static_assert(PK_ATTR_KEY_COUNT_ <= 32, "attrs column is an unsigned bit mask");

enum {
#define PK_ATTR_X(id, key) PK_ATTR_##id = 1u << PK_ATTR_KEY_##id,
  PK_ATTR_KEYS(PK_ATTR_X)
#undef PK_ATTR_X
};

/* Flags column of op_table.def. */
enum {
  PK_OPF_TRAINING = 1u << 0,       /* added by Pock for training (losses, optimizer updates);
                                      a model graph may not name it */
  PK_OPF_VARIADIC = 1u << 1,       /* takes 1..arity inputs (concat) */
  PK_OPF_NORM = 1u << 2,           /* a normalization: its params are the "norms" of sparse
                                      specs */
  PK_OPF_ATTRS_REQUIRED = 1u << 3, /* every attr of its attrs column must be given (clip: no
                                      range is a sensible default) */
};
/* Input i holds integers (i32 or i64: indices, labels), never differentiable; the other
 * inputs share one float dtype. */
#define PK_OPF_INT_INPUT(i) (1u << (8 + (i)))

typedef enum pk_op_kind {
#define PK_OP(id, name, cls, arity, diff, flags, attrs, builder, grad) PK_OP_##id,
#include "op_table.def"
#undef PK_OP
  PK_OP_COUNT_
} pk_op_kind;

/* What schedule templates key off (te never knows schedules). */
typedef enum pk_op_class {
  PK_OP_CLASS_INJECTIVE, /* each output element from O(1) input elements (elementwise, broadcast) */
  PK_OP_CLASS_REDUCTION, /* reduces along axes; may have several stages (softmax) */
  PK_OP_CLASS_MATMUL,    /* sum over a shared inner dim of two operands (matmul, batch_matmul) */
  PK_OP_CLASS_CONV,      /* sliding-window sum of products with a weight (conv2d) */
  PK_OP_CLASS_POOL,      /* sliding-window reduction of one input (max/avg pool) */
  PK_OP_CLASS_COUNT_
} pk_op_class;

#define PK_OP_MAX_INPUTS 8 /* concat of 8; adamw_update takes 5: W, G, M, V, H */
/* Every extent and attribute must be at most this, so builders' arithmetic cannot overflow. */
#define PK_OP_MAX_EXTENT INT32_MAX

typedef struct pk_op_input {
  int ndim;                       /* 1..PK_TE_MAX_DIMS */
  int64_t shape[PK_TE_MAX_DIMS];  /* each 1..PK_OP_MAX_EXTENT */
  pkrt_dtype dtype;               /* F32 or F64, the same for all float inputs; I32 or I64
                                     for the op's integer inputs (PK_OPF_INT_INPUT) */
} pk_op_input;

/* Attributes; each op reads only its own, and zero means the default everywhere, so
 * designated initialisers name just what differs. Spatial pairs are (H, W). */
typedef struct pk_op_attrs {
  bool trans_a;            /* matmul, batch_matmul: A is stored (K, M): use A^T */
  bool trans_b;            /* matmul, batch_matmul: B is stored (N, K): use B^T */
  int axis;                /* softmax: the normalised axis; negative counts from the end */
  int naxes;               /* sum, mean, max: how many of axes[] are reduced; 0 = every axis */
  int axes[PK_TE_MAX_DIMS];/* sum, mean, max: reduced axes (negative from the end; no repeats) */
  bool keepdims;           /* sum, mean, max: reduced dims stay, with extent 1 */
  int64_t kernel[2];       /* pools: window size (required, >= 1) */
  int64_t stride[2];       /* conv2d, pools: 0 means 1 */
  int64_t dilation[2];     /* conv2d, pools: 0 means 1 */
  int64_t pad[4];          /* conv2d, pools: top, left, bottom, right (>= 0) */
  int64_t groups;          /* conv2d: 0 means 1; must divide C and O */
  /* slice: a contiguous range of one axis (partial-channel training saves only this). */
  int slice_axis;          /* negative counts from the end */
  int64_t slice_start, slice_len;  /* len >= 1; start + len <= extent */
  /* reshape: the new shape (same element count, row-major order kept). */
  int new_ndim;
  int64_t new_shape[PK_TE_MAX_DIMS];
  /* sgd_update, adamw_update: hyper-parameters baked into the kernel (the learning rate and
   * Adam's bias corrections are not: they arrive each step in the H input, see below). */
  double momentum;         /* sgd: 0 = plain SGD */
  double weight_decay;     /* sgd: L2 added to the gradient; adamw: see decoupled */
  double beta1, beta2, eps;/* adamw: 0 means the defaults 0.9, 0.999, 1e-8 */
  bool decoupled;          /* adamw: true = AdamW (w -= lr*wd*w), false = Adam with L2 */
  double clip_norm;        /* both: > 0 clips this tensor's gradient to that L2 norm */
  /* activations (zero-means-default as above, so alpha 0 cannot be asked for: that is relu) */
  double alpha;            /* >= 0; leaky_relu: negative slope, 0 means 0.01; elu: 0 means 1 */
  double clip_min, clip_max; /* clip: the range, finite with min <= max (graph JSON requires
                              * both; zero-initialised params clip to [0, 0]) */
  /* indexing and dropout */
  double drop_p;           /* dropout: probability of zeroing an element, in [0, 1); 0 = identity */
} pk_op_attrs;

typedef struct pk_op_params {
  int ninputs;                      /* pk_op_arity(op); 1..arity for PK_OPF_VARIADIC ops */
  pk_op_input in[PK_OP_MAX_INPUTS];
  pk_op_attrs attrs;
} pk_op_params;

/* ---- the table ---- */
const char *pk_op_name(pk_op_kind op);            /* "conv2d"; "?" when out of range */
pk_op_kind pk_op_from_name(const char *name);     /* PK_OP_COUNT_ when unknown */
pk_op_class pk_op_class_of(pk_op_kind op);
const char *pk_op_class_name(pk_op_class c);      /* "injective", "reduction", ... */
int pk_op_arity(pk_op_kind op);                   /* with PK_OPF_VARIADIC: the most inputs */
unsigned pk_op_diff_inputs(pk_op_kind op);        /* bit i: input i is differentiable */
unsigned pk_op_flags(pk_op_kind op);              /* PK_OPF_* bits */
unsigned pk_op_attrs_read(pk_op_kind op);         /* PK_ATTR_* bits of the keys it reads */
const char *pk_attr_key_name(pk_attr_key k);      /* "trans_a"; NULL when out of range */
pk_attr_key pk_attr_key_from_name(const char *s); /* PK_ATTR_KEY_COUNT_ when unknown */

/* ---- building ---- */
/* The op's TE text (readable names: X, W, Y, ...); PK_ERR_CHECK naming the op and the
 * problem for bad parameters (shape mismatch, groups not dividing channels, output
 * size < 1, ...). *text lives in ctx's arena. */
pk_status pk_op_text(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, char **text);
/* pk_op_text, parsed and checked. */
pk_status pk_op_build(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                      pk_te_program **out);

/* ---- gradients ----
 * One gradient TE per differentiable input (op_table.def's diff column), written beside
 * the op's forward builder. A gradient program reads only what it needs, so that the graph
 * saves only those activations: its placeholders are exactly args[0..nargs) in order, each
 * a forward input, the forward result, or dY (the gradient of the loss with respect to the
 * forward result, shaped like it). Its last tensor is dX, shaped like forward input
 * `input`; earlier computes are intermediate stages (kernel outputs like any compute).
 *
 * Loss ops (softmax_cross_entropy, mse_loss) are roots: their gradient is that of the loss
 * itself (dY = 1 implied), so it has no DY argument.
 *
 * Rules worth knowing (PyTorch's, so that training matches it):
 *   - relu'(0) = 0; at the other kinks: leaky_relu'(0) = alpha, elu'(0) = alpha,
 *     hardsigmoid' = 0 at -3 and 3, hardswish'(-3) = -0.5 and hardswish'(3) = 1.5,
 *     relu6' = 0 at 0 and 6 (hardtanh's rule) but clip' = 1 at min and max (clamp's rule);
 *     abs'(0) = 0;
 *   - max_pool2d and max send the gradient to the FIRST maximum of a window
 *     in row-major scan order (ties happen after relu);
 *   - broadcast inputs of add/sub/mul/div get dY summed over the broadcast dims;
 *   - conv2d dX handles stride, dilation, groups, asymmetric padding and rows/cols of the
 *     input that no window reads (gradient 0).
 *
 * Usage:
 *   pk_op_grad g;
 *   if (pk_op_grad_build(ctx, PK_OP_CONV2D, &prm, 1, &g) != PK_OK) ...   // dW
 *   // g.args = {INPUT 0, DY}: dW reads X and dY only
 */
typedef enum pk_op_grad_arg_kind {
  PK_GRAD_ARG_INPUT,  /* forward input `index` */
  PK_GRAD_ARG_OUTPUT, /* the forward result (the last tensor of the forward program) */
  PK_GRAD_ARG_DY,     /* the gradient flowing into the forward result */
  PK_GRAD_ARG_STAGE   /* compute `index` (0-based, in order) of the forward program: a saved
                         intermediate such as batch norm's mean and rstd; the graph keeps it
                         (it becomes an activation: no schedule may inline it) */
} pk_op_grad_arg_kind;

typedef struct pk_op_grad_arg {
  pk_op_grad_arg_kind kind;
  int index; /* INPUT: the input; STAGE: the compute */
} pk_op_grad_arg;

#define PK_OP_GRAD_MAX_ARGS (PK_OP_MAX_INPUTS + 2)
typedef struct pk_op_grad {
  int nargs;
  pk_op_grad_arg args[PK_OP_GRAD_MAX_ARGS];
  pk_te_program *prog; /* checked; placeholders = args in order; last tensor = dX */
} pk_op_grad;

/* PK_ERR_CHECK when `input` is not differentiable (or prm is bad, as pk_op_build). */
pk_status pk_op_grad_build(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int input,
                           pk_op_grad *out);
/* The gradient's TE text (what pk_op_grad_build parses), and its args. */
pk_status pk_op_grad_text(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int input,
                          pk_op_grad *args_out, char **text);

/* ---- training ops (rows of op_table.def like any op) ----
 *   softmax_cross_entropy(Z (N, K), T (N, K), R (N,)) -> (1,)
 *       loss = sum_n R[n] * (logsumexp(Z[n, :]) - sum_k T[n, k] * Z[n, k]).
 *       T is one-hot (or soft) targets; R weights rows: 1/valid for the valid rows of the
 *       batch, 0 for padding rows, so a partial last batch averages over real rows only.
 *   mse_loss(P (N, ...), T (N, ...), R (N,)) -> (1,)
 *       loss = sum_n R[n] * mean over the other dims of (P - T)^2   (PyTorch's mean MSE).
 *   slice(X) -> X with axis slice_axis restricted to [slice_start, slice_start + slice_len)
 *   reshape(X) -> X with shape new_shape (a copy, row-major order kept)
 *   sgd_update(W, G, M, H (4,)) -> M', W'      (PyTorch SGD, dampening 0, no nesterov)
 *       g = clip(G) + weight_decay * W;  M' = momentum * M + g;  W' = W - H[0] * M'
 *       (momentum 0: M' = g, still written, so the op has one shape of outputs)
 *   adamw_update(W, G, M, V, H (4,)) -> M', V', W'
 *       decoupled: W1 = W * (1 - H[0] * wd), g = clip(G);  else W1 = W, g = clip(G) + wd * W
 *       M' = b1 M + (1 - b1) g;  V' = b2 V + (1 - b2) g^2
 *       W' = W1 - H[0] * (M' / H[1]) / (sqrt(V' / H[2]) + eps)
 *   H = (lr, 1 - beta1^t, 1 - beta2^t, 0) for step t = 1, 2, ..., written by the executor
 *   each step (learning-rate schedules live there). clip(G) = G * min(1, c / (|G|_2 + 1e-6))
 *   when clip_norm = c > 0 (torch.nn.utils.clip_grad_norm_ on this tensor alone).
 *   Update ops are element-wise in W, M, V: the executor runs them in place (M' over M,
 *   V' over V, W' over W), which is safe because every output element depends only on the
 *   same element of its inputs (plus the whole of G for clipping, read first). */

/* ---- test instances ----
 * A fixed list covering every op with small shapes that exercise the edge cases (extents
 * 1, 7 and 33, transposes, broadcasting, strided/padded/dilated/grouped convolutions whose
 * output size formula has a remainder). Every op of the table appears at least once. */
typedef struct pk_op_example {
  const char *label; /* unique, stable: "conv2d_grouped_strided" */
  pk_op_kind op;
  pk_op_params prm;
} pk_op_example;
const pk_op_example *pk_op_examples(int *count);

#endif
