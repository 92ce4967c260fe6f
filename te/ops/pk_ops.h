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
 *   - erf is C's erf (the Gauss error function; ONNX Erf, torch.erf); its gradient is
 *     2/sqrt(pi) exp(-x^2) dY;
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
 *   attention, softmax family, pooling, activations:
 *   - softmax and log_softmax work over any axis (attrs.axis, negative from the end);
 *     log_softmax = x - M - log(sum exp(x - M)), never log of an underflowed 0;
 *   - sdpa(Q, K, V), sdpa_masked(Q, K, V, Mask): Y = softmax(Q K^T * scale + Mask) V over
 *     the keys. Q (B, H, Lq, D), K (B, H, Lk, D), V (B, H, Lk, Dv), or rank 3 without H;
 *     batch dims equal (no broadcasting, no grouped K/V heads). scale 0 means 1/sqrt(D).
 *     causal: key j is excluded for query i when j > i (PyTorch's is_causal: top-left
 *     aligned when Lq != Lk). Mask is additive float: (B, Lk) (a padding mask; extents
 *     may be 1) or the scores' rank with each extent equal or 1 ((B, 1, 1, Lk),
 *     (1, 1, Lq, Lk), ...): 0 keeps a key, -inf removes it. A rank-2 mask is always
 *     (B, Lk), even for rank-3 Q: a (Lq, Lk) mask there is given as (1, Lq, Lk). A row
 *     with no key left (every key -inf) yields Y = 0 and zero gradients, not NaN. A finite
 *     large negative (-1e9) only shifts the score, as in PyTorch: a row masked that way
 *     everywhere averages V by its unmasked scores. Two ops rather than an optional
 *     input, so that the table's arity and differentiable-input mask stay exact (the mask
 *     is not differentiable). Stages: S = Q K^T, M = row max, L = row sum of exp,
 *     P = probabilities, Y; the gradients save M and L (compute 1 and 2), not P;
 *   - rope(X, Cos, Sin): X (..., S, Dh), Dh even (layout (B, H, S, Dh) as HF applies it);
 *     Cos, Sin (S, Dh / 2), the angle tables (not repeated). LLaMA's rotate-half form (HF
 *     rotate_half): Y = X * [Cos, Cos] + [-X2, X1] * [Sin, Sin] with X1, X2 the halves
 *     of the last dim, i.e. pair (d, d + Dh/2) is rotated by angle (s, d). Only X is
 *     differentiable;
 *   - global_avg_pool2d: (N, C, H, W) -> (N, C, 1, 1); adaptive_avg_pool2d: to
 *     (N, C, OH, OW) = attrs.output_size, cell i averaging input
 *     [floor(i H / OH), ceil((i + 1) H / OH)) (PyTorch; windows may overlap, OH > H works);
 *   - gelu: attrs.approximate PK_GELU_TANH is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *     (PyTorch's approximate='tanh'); the default is the exact erf form;
 *   - pow(A, B): C's pow, broadcast like add (a negative base with a non-integer exponent
 *     gives NaN); pow_scalar(X): X ** attrs.exponent, written without pow for 2, 3,
 *     0.5, -0.5, -1 and -2 (x * x, sqrt, ...: PyTorch's special cases, bit for bit).
 *   - normalizations (PyTorch's definitions; eps 0 means 1e-5; biased variance, two passes:
 *     mean, then mean of (x - mean)^2):
 *       batch_norm(X (N, C, ...), gamma, beta, running_mean, running_var (C,)): per channel
 *         over N and the spatial dims, y = (x - mean) * rstd * gamma + beta with
 *         rstd = rsqrt(var + eps); stages MEAN (0), VAR (1), RSTD (2), Y. The running stats
 *         are read only with attrs.use_running_stats (frozen layers, evaluation): then
 *         MEAN and VAR are copies of them (the same stages in both modes); or, in training
 *         mode with the training step's H (4,) as a 6th input (the graph adds it; graph
 *         JSON gives 5 inputs), by RSTD and Y while H[3] < 0. Batch statistics need
 *         N * spatial >= 2 (PyTorch refuses 1 too);
 *       layer_norm(X, gamma, beta): over the last normalized_ndim dims (gamma, beta shaped
 *         like them); stages MEAN, VAR, RSTD (X's shape with those dims 1), Y;
 *       rms_norm(X, gamma): y = x * rsqrt(mean(x^2) + eps) * gamma over the last
 *         normalized_ndim dims (LLaMA's RMSNorm); stages MS, RR, Y;
 *       group_norm(X (N, C, ...), gamma, beta (C,)): over each group of C / groups
 *         consecutive channels and the spatial dims; stages MEAN, VAR, RSTD (N, groups), Y.
 *     Their gradients read the saved MEAN and RSTD (RR) stages instead of recomputing;
 *   - batch_norm_stats(X, running_mean, running_var) -> RM', RV' (a training op, run in place
 *     like the optimizer updates): RM' = (1 - m) RM + m mean, RV' = (1 - m) RV + m var with
 *     the UNBIASED variance (PyTorch's running_var rule); m = attrs.momentum (0: 0.1).
 *   - shape and data movement (PyTorch's semantics; all are copies, class injective):
 *     transpose(X): Y.shape[d] = X.shape[perm[d]] (permute; no perm reverses the axes);
 *     concat(X0, ..., Xn-1) along axis: 1..8 inputs of one rank whose other dims agree
 *     (torch.cat); the gradient of input i is the slice of dY it came from;
 *     slice with slice_step s: elements start, start + s, ... of [start, start + len), so
 *     ceil(len / s) of them (x[a:b:s]); its gradient puts dY back, zeros between;
 *     there is no split op: a split is one slice per piece, and autodiff sums the pieces'
 *     gradients into dX;
 *     pad(X): pads[2d] elements of `value` before dim d and pads[2d + 1] after it (constant
 *     padding, F.pad's mode='constant' with the pairs in dim order);
 *     expand(X) to new_shape: dims of 1 stretch and new leading dims appear (expand, numpy
 *     broadcasting of X to that shape); the gradient sums over the stretched dims;
 *     where(C, A, B) = C != 0 ? A : B elementwise, C an i32/i64 mask, all three broadcast
 *     like numpy (torch.where with a bool mask); masked_fill(X, M) = M != 0 ? value : X,
 *     M an i32/i64 mask broadcast to X's shape (Tensor.masked_fill, for attention masks);
 *     no gradient flows to the masks;
 *     flatten, squeeze and unsqueeze are reshape (a row-major copy to new_shape).
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
  /* attention, softmax family, pooling, activations */                                     \
  X(CAUSAL, "causal") X(SCALE, "scale") X(OUTPUT_SIZE, "output_size")                       \
  X(APPROXIMATE, "approximate") X(EXPONENT, "exponent")                                     \
  /* normalization */                                                                        \
  X(EPS, "eps") X(MOMENTUM, "momentum") X(NORMALIZED_NDIM, "normalized_ndim")               \
  /* shape and data movement */                                                              \
  X(PERM, "perm") X(SLICE_STEP, "slice_step") X(PADS, "pads") X(VALUE, "value")             \
  /* indexing and dropout */                                                                 \
  X(P, "p")

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
  PK_OPF_STEP_RNG = 1u << 4,       /* its last input is the training step's (seed, step), an
                                      i64 (2,) tensor the graph supplies (dropout): a model
                                      names the other inputs only */
  PK_OPF_STEP_HYPER = 1u << 5,     /* an optional last input is the training step's H (4,),
                                      which the training graph adds where the op needs it
                                      (batch norm in training mode); a model never names it */
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
  /* attention, softmax family, pooling, activations */
  bool causal;             /* sdpa, sdpa_masked: key j > query i is excluded (is_causal) */
  double scale;            /* sdpa, sdpa_masked: score scale, finite >= 0; 0 means
                            * 1 / sqrt(head_dim) */
  int64_t output_size[2];  /* adaptive_avg_pool2d: (OH, OW), each >= 1 (required) */
  int approximate;         /* gelu: PK_GELU_ERF (0, exact) or PK_GELU_TANH */
  double exponent;         /* pow_scalar: the constant exponent, finite (graph JSON requires
                            * it; zero-initialised params give x ** 0 = 1) */
  /* normalization: eps (above) is added to the variance, 0 means 1e-5; momentum (above) is
   * batch_norm's running-stats factor in [0, 1], 0 means 0.1 (PyTorch's meaning); groups
   * (above) is group_norm's, 0 means 1, and must divide C. */
  int normalized_ndim;     /* layer_norm, rms_norm: normalize over the last n dims, 0 means 1 */
  bool use_running_stats;  /* batch_norm: normalize with the running stats (frozen layers,
                              evaluation); set by the graph compiler, not a JSON key */
  /* shape and data movement (expand reads new_ndim/new_shape above as its target shape;
   * concat reads axis) */
  int nperm;               /* transpose: entries of perm; 0 = reverse every axis (numpy's
                              default, .T of a matrix) */
  int perm[PK_TE_MAX_DIMS];/* transpose: result dim d is input dim perm[d] (negative from the
                              end): PyTorch's permute */
  int64_t slice_step;      /* slice: every step-th element of the range, from its start;
                              0 means 1 */
  int64_t pads[2 * PK_TE_MAX_DIMS]; /* pad: elements added before and after dim d are
                              pads[2d] and pads[2d + 1] (>= 0; entries past the rank are 0) */
  double value;            /* pad: the fill value; masked_fill: the value where the mask is
                              set (finite: write -1e9 rather than -inf for attention masks) */
  /* losses with integer labels (cross_entropy; training-only: set from the graph's
   * "training" object, never from node attrs) */
  bool has_ignore_index;   /* labels equal to ignore_index are ignored (besides those
                              outside [0, K), always ignored) */
  int64_t ignore_index;
  double label_smoothing;  /* in [0, 1]: PyTorch's label_smoothing */
  /* gradient accumulation (training-only ops): micro-steps per optimizer step; 0 or 1 =
   * none. grad_accumulate adds G / accum_steps; sgd_update and adamw_update then change
   * W, M, V only on the last micro-step of each group (H[3] = accum_steps - 1) */
  int64_t accum_steps;
  /* indexing and dropout */
  double drop_p;           /* dropout: probability of zeroing an element, in [0, 1); 0 = identity */
} pk_op_attrs;

/* pk_op_attrs.approximate (graph JSON "approximate": "none" or "tanh", as PyTorch's). */
enum { PK_GELU_ERF = 0, PK_GELU_TANH = 1 };

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
/* How many inputs the op takes, [*min, *max] (arity; 1..arity with PK_OPF_VARIADIC;
 * arity-1..arity with PK_OPF_STEP_HYPER), and how many of them a model names (less the
 * inputs the graph supplies: PK_OPF_STEP_RNG, PK_OPF_STEP_HYPER). */
void pk_op_input_range(pk_op_kind op, int *min, int *max);
void pk_op_model_input_range(pk_op_kind op, int *min, int *max);
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
/* TE text helpers, shared with the graph passes that write programs of their own
 * (graph/passes/fold.c): spatial axes are always named i<d>. */
/* "X = placeholder((7, 33), f32)\n" */
void pk_op_emit_placeholder(pk_strbuf *b, const char *name, int ndim, const int64_t *shape,
                            pkrt_dtype dtype);
/* "Y = compute((7, 33), (i0, i1) => " — the caller writes the body and ")\n". */
void pk_op_emit_compute_head(pk_strbuf *b, const char *name, int ndim, const int64_t *shape);
/* A float literal that reads back as exactly v: "0.5", "2.0", "-3.4028234663852886e+38". */
void pk_op_emit_float(pk_strbuf *b, double v);
/* "X[i0, i1, i2]": a read of a whole tensor of rank ndim at the compute's own axes. */
void pk_op_emit_read_all(pk_strbuf *b, const char *name, int ndim);

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
 *     input that no window reads (gradient 0). With stride s > 1 it is s² dense phase
 *     convolutions (computes P0, P1, ...: rows x = t + s q of phase t get dY correlated
 *     with the window elements that reach them, no skipped terms), then dX interleaves
 *     them; a dim with dilation 1 and kernel = stride (patches) needs no phases (x reads
 *     dY at (x + pad) / s, window element (x + pad) mod s). Over 16 phases, dims with
 *     dilation 1 and kernel < stride take that form too (guarded), and if still over 16
 *     the transposed-window form stays, which visits every window element per row.
 *   - pow: dA = B A^(B-1) but 0 where B == 0; dB = A^B log A but 0 where A == 0 and
 *     B >= 0 (torch.pow's rules); pow_scalar: e X^(e-1), 0 for e == 0;
 *   - sdpa: dQ, dK, dV read Q, K (V for dQ and dK; Mask) and the saved row max and row sum,
 *     and recompute the probabilities (memory over recompute: see op_attention.c).
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
 *       (every slice_step-th element of it, see the semantics above)
 *   reshape(X) -> X with shape new_shape (a copy, row-major order kept)
 *   sgd_update(W, G, M, H (4,)) -> M', W'      (PyTorch SGD, dampening 0, no nesterov)
 *       g = clip(G) + weight_decay * W;  M' = momentum * M + g;  W' = W - H[0] * M'
 *       (momentum 0: M' = g, still written, so the op has one shape of outputs)
 *   adamw_update(W, G, M, V, H (4,)) -> M', V', W'
 *       decoupled: W1 = W * (1 - H[0] * wd), g = clip(G);  else W1 = W, g = clip(G) + wd * W
 *       M' = b1 M + (1 - b1) g;  V' = b2 V + (1 - b2) g^2
 *       W' = W1 - H[0] * (M' / H[1]) / (sqrt(V' / H[2]) + eps)
 *   cross_entropy(Z (N, K) or (N, T, K), L (N) or (N, T) integers) -> (1,)
 *       PyTorch's F.cross_entropy with class indices, mean reduction: a row (each label of
 *       L) counts when 0 <= L < K and L != ignore_index (has_ignore_index); with
 *       c = label_smoothing, row loss = lse(Z) - (1 - c) Z[L] - (c / K) sum_k Z[k];
 *       loss = sum over counted rows / max(count, 1). So ignored rows (and padding rows of
 *       a partial batch, fed with label -1) weigh nothing and do not count in the mean;
 *       a batch with no counted row has loss 0 and gradient 0 (PyTorch: NaN). Labels are
 *       read as integers, never expanded to one-hot. Stages: M = row max, S = row sum of
 *       exp(Z - M), [SZ = row sum of Z when c > 0], C = count, P = row losses, Y.
 *   grad_accumulate(A, G, H (4,)) -> A'   (A' in place over A: a persistent buffer)
 *       A' = (H[3] > 0 ? A : 0) + G / accum_steps: H[3] is the micro-step within the
 *       accumulation group (0 .. accum_steps - 1), so the first one restarts the sum; the
 *       result is the mean of the group's gradients (PyTorch users divide the loss by k).
 *   clip_grad_norm(G, N (1,)) -> G * min(1, clip_norm / (sqrt(N[0]) + 1e-6))
 *       N is the squared L2 norm of all trained gradients together: global-norm clipping
 *       (torch.nn.utils.clip_grad_norm_ over every trained param).
 *   With accum_steps > 1, sgd_update and adamw_update write M', V', W' equal to M, V, W
 *   unless H[3] = accum_steps - 1 (the group's last micro-step): the optimizer steps once
 *   per group.
 *   H = (lr, 1 - beta1^t, 1 - beta2^t, micro-step) for optimizer step t = 1, 2, ..., written
 *   by the executor each step (learning-rate schedules live there); H[3] = -1 while it
 *   evaluates or infers (a training-mode batch_norm given H as its 6th input then uses its
 *   running stats; no update op runs then). clip(G) = G * min(1, c / (|G|_2 + 1e-6))
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
