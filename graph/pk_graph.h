/* pk_graph.h — the training-graph IR: tensors with roles, operator nodes, validation,
 * compile-time autodiff with a loss and an optimizer, sparse-update pruning, the in-place
 * update order, and the static memory plan. Everything lives in one pk_ctx arena.
 *
 * Usage (what `pock compile` does; frontends/ builds the forward graph):
 *   pk_graph *g = pk_graph_new(ctx, 32);                          // batch 32
 *   int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 2, (int64_t[]){32, 64});
 *   int w = pk_graph_add_param(g, "fc.weight", PKRT_DTYPE_F32, 2, (int64_t[]){10, 64}, data);
 *   int y;
 *   pk_graph_add_op(g, "fc", PK_OP_MATMUL, &(pk_op_attrs){.trans_b = true}, 2,
 *                   (int[]){x, w}, "fc.out", &y);
 *   g->output = y;
 *   pk_graph_validate(g);
 *   pk_sparse_spec *sp;  pk_sparse_parse(ctx, text, len, "spec.json", &sp);
 *   pk_sparse_apply(g, sp);                                       // marks params
 *   pk_graph *t;  pk_train_build(g, &train_spec, &t);             // fwd + bwd + updates
 *   pk_memplan *mp;  pk_memplan_build(t, NULL, &mp);
 *
 * Conventions:
 *   - Tensors and nodes are numbered in creation order; a node's inputs are tensor ids in
 *     the order of its TE program's placeholders, its outputs the program's computes in
 *     order (the last is the op's result; earlier ones are PK_ROLE_TEMP stages).
 *   - Node order IS the execution order; every pass keeps it topological.
 *   - Names come from the user and are only data: never put into generated code.
 */
#ifndef PK_GRAPH_H
#define PK_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "pk_ops.h"

typedef enum pk_tensor_role {
  PK_ROLE_INPUT,      /* fed each step: the batch's features */
  PK_ROLE_LABEL,      /* fed each step: targets (one-hot for classification) and row weights */
  PK_ROLE_PARAM,      /* weights and biases: persistent, initial values from the model */
  PK_ROLE_ACTIVATION, /* a forward result (including the loss) */
  PK_ROLE_TEMP,       /* an intermediate stage of one kernel (softmax's row max) */
  PK_ROLE_GRADIENT,   /* a backward result */
  PK_ROLE_OPT_STATE,  /* persistent optimizer state: momentum, Adam's m and v */
  PK_ROLE_HYPER,      /* (4,) written by the executor each step: lr, 1-b1^t, 1-b2^t, 0 */
  /* model state that is neither fed nor trained (graph JSON: a param's "role") */
  PK_ROLE_BUFFER,     /* persistent, updated by the training step in place (batch norm's
                         running mean and var): saved with the weights and in checkpoints */
  PK_ROLE_CONSTANT,   /* persistent, read-only (causal masks, RoPE tables) */
  PK_ROLE_FOLDED,     /* made by a load-phase node (graph/passes/fold.c) from frozen weights
                         and constants, read by the step: kept from load to close (never
                         saved: the runtime computes it again whenever the weights change) */
  PK_ROLE_COUNT_
} pk_tensor_role;

const char *pk_role_name(pk_tensor_role r); /* "input", "param", "opt_state", ... */

/* LOAD: a node whose inputs cannot change between steps (frozen weights, constants), run
 * once when the weights are in place instead of every step (the fold pass); load nodes
 * come first in node order and are in none of the step plans. */
typedef enum pk_phase { PK_PHASE_FORWARD, PK_PHASE_LOSS, PK_PHASE_BACKWARD, PK_PHASE_UPDATE,
                        PK_PHASE_LOAD } pk_phase;
const char *pk_phase_name(pk_phase p);

typedef struct pk_gtensor {
  int id;
  const char *name;         /* unique in the graph; made-up names look like "grad(fc.weight)" */
  pk_tensor_role role;
  pkrt_dtype dtype;
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  int producer;             /* node id, -1 for inputs, labels, params, state, hyper */
  bool fused_away;          /* inlined into its one reader by the fuse pass: no node makes or
                               reads it, and it has no storage */
  /* INPUT: */
  bool no_batch;            /* no batch dim: one value per step shared by every row (a mask,
                               a position table); else dim 0 is the batch */
  /* PARAM: */
  const void *init;         /* numel * dtype-size bytes of initial values; NULL = zeros */
  bool trainable;           /* set by pk_sparse_apply (default: every param trains) */
  int64_t train_channels;   /* trained input channels [0, train_channels) of axis 1 when
                               partial; == shape[1] (or 0 for rank 1) when whole */
  int layer;                /* index of its layer (see pk_graph_layers), -1 if none */
  bool is_bias;             /* name ends in "bias" (documented in docs/sparse-update.md) */
  /* Storage sharing: when base >= 0 this tensor has no storage of its own: it is
   * elements [view_offset + sum(i_d * view_strides[d])] of tensor `base` (an in-place
   * optimizer output, or the trained slice of a partially trained weight). */
  int base;
  int64_t view_offset;
  int64_t view_strides[PK_TE_MAX_DIMS];
} pk_gtensor;

typedef enum pk_gnode_kind {
  PK_GNODE_OP,  /* forward op (also loss and update ops): pk_op_build */
  PK_GNODE_GRAD /* gradient of op wrt input grad_input: pk_op_grad_build */
} pk_gnode_kind;

typedef struct pk_gnode {
  int id;
  const char *name;         /* "conv1", "grad(conv1).1", "update(fc.weight)" */
  pk_gnode_kind kind;
  pk_op_kind op;
  pk_op_params prm;         /* shapes/dtypes of the forward op's inputs, and attributes */
  int grad_input;           /* GRAD only */
  int grad_wrt;             /* GRAD only: the tensor it differentiates (the forward input
                               grad_input, or the param a partial weight gradient is of);
                               -1 otherwise */
  pk_phase phase;
  int ninputs;
  int *inputs;              /* tensor ids = the TE program's placeholders, in order */
  int noutputs;
  int *outputs;             /* tensor ids = the program's computes, in order */
  pk_te_program *prog;      /* built when the node is added */
  const char *fused;        /* NULL; after the fuse pass, the chain it computes ("add+relu"):
                               prog is then that chain's one program, op the last one's;
                               after the fold pass, what a program of its own computes
                               ("batch_norm_shift"): set exactly when prog is not op's */
} pk_gnode;

typedef struct pk_graph {
  pk_ctx *ctx;
  int64_t batch;            /* fixed at compile time: dim 0 of inputs and labels */
  int ntensors, nnodes;
  pk_gtensor **tensors;
  pk_gnode **nodes;
  int output;               /* the model's prediction (logits), -1 until set */
  /* training graphs only (-1 otherwise): */
  int loss, target, row_weight, hyper;
  /* dropout's (seed, step), i64 (2,), role HYPER, made by the first op that reads it
   * (PK_OPF_STEP_RNG; pk_graph_add_op), written by the executor each step; -1 if none */
  int rng;
  int cap_tensors, cap_nodes; /* growth bookkeeping */
  /* filled by pk_graph_layers: layer_nodes[l] = the node id of layer l */
  int nlayers;
  int *layer_nodes;
} pk_graph;

pk_graph *pk_graph_new(pk_ctx *ctx, int64_t batch);
/* Returns the id, or -1 with PK_ERR_CHECK in ctx (duplicate name, bad shape). */
int pk_graph_add_tensor(pk_graph *g, const char *name, pk_tensor_role role, pkrt_dtype dtype,
                        int ndim, const int64_t *shape);
/* A parameter; init (may be NULL) is copied into the arena. */
int pk_graph_add_param(pk_graph *g, const char *name, pkrt_dtype dtype, int ndim,
                       const int64_t *shape, const void *init);
/* A buffer or constant (role PK_ROLE_BUFFER / PK_ROLE_CONSTANT), like a param that never
 * trains; init (may be NULL: zeros) is copied. */
int pk_graph_add_buffer(pk_graph *g, const char *name, pk_tensor_role role, pkrt_dtype dtype,
                        int ndim, const int64_t *shape, const void *init);
/* Builds the op's TE (pk_op_build) from the inputs' shapes, adds the node and its output
 * tensors (result named out_name, role ACTIVATION; earlier stages TEMP). PK_ERR_CHECK
 * naming the node for shape/dtype mismatches. */
pk_status pk_graph_add_op(pk_graph *g, const char *name, pk_op_kind op,
                          const pk_op_attrs *attrs, int ninputs, const int *inputs,
                          const char *out_name, int *out_tensor);
/* Names every output of node `node` (its program's computes, in order; n must equal the
 * node's output count, the last being the result): a normalization's saved mean and rstd
 * become tensors later nodes and the user can refer to. Stages named this way turn from
 * TEMP into ACTIVATION (kept in memory, never inlined by a schedule). Only the result
 * carries a gradient: pk_train_build refuses a trained path that reads an earlier stage.
 * PK_ERR_CHECK naming the node for a count mismatch or a name already taken. */
pk_status pk_graph_name_outputs(pk_graph *g, int node, int n, const char *const *names);
int pk_graph_find(const pk_graph *g, const char *name); /* tensor id or -1 */
/* Shapes and dtypes agree with every node's program, no cycles (node order topological),
 * no dangling tensor ids, every activation produced once, output set. */
pk_status pk_graph_validate(pk_graph *g);
/* Text dump for --dump-after: one line per tensor and per node. */
char *pk_graph_print(pk_ctx *ctx, const pk_graph *g);
int64_t pk_gtensor_bytes(const pk_gtensor *t);

/* Layers: each forward conv2d/matmul/batch_matmul node with a parameter input is a layer,
 * numbered in forward order (g->layer_nodes); a param belongs to the layer of the first
 * such node that reads it, or, for a bias, of the layer whose result it is added to (else
 * layer -1). Returns the count. */
int pk_graph_layers(pk_graph *g);

/* ---- sparse-update spec (docs/sparse-update.md) ---- */
typedef struct pk_sparse_spec pk_sparse_spec;
/* Parses the JSON spec; PK_ERR_CHECK naming the file, the rule and the problem (unknown
 * key, fraction outside (0, 1], count < 1, ...); PK_ERR_SYNTAX when it is not JSON. The spec
 * lives in ctx's arena. */
pk_status pk_sparse_parse(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                          pk_sparse_spec **out);
/* Marks each param trainable or frozen and sets train_channels (calls pk_graph_layers).
 * Selectors: params (globs), biases, last_layers, all, norms (params of PK_OPF_NORM ops),
 * blocks (params named PREFIX.<i>.*, the last n indices). PK_ERR_CHECK for names or globs
 * that match nothing, partial channels on a param of rank < 2 or that is not the weight of
 * a conv2d (groups 1) / matmul or batch_matmul (trans_b, rank-2 weight) layer, a count
 * above the channel count, a fraction that rounds to 0, "norms" without a normalization,
 * blocks that match nothing or are ambiguous. spec NULL: everything trains. */
pk_status pk_sparse_apply(pk_graph *g, const pk_sparse_spec *spec);

/* ---- training graph ---- */
typedef enum pk_loss_kind { PK_LOSS_SOFTMAX_XENT, PK_LOSS_MSE } pk_loss_kind;
typedef enum pk_optim_kind { PK_OPTIM_SGD, PK_OPTIM_ADAM, PK_OPTIM_ADAMW } pk_optim_kind;
typedef enum pk_lr_sched_kind { PK_LR_CONSTANT, PK_LR_STEP, PK_LR_COSINE } pk_lr_sched_kind;

typedef struct pk_train_spec {
  pk_loss_kind loss;
  pk_optim_kind optim;
  double lr;                /* default learning rate (the runtime may override) */
  double momentum, weight_decay;
  double beta1, beta2, eps; /* 0: 0.9, 0.999, 1e-8 */
  double clip_norm;         /* > 0: per-tensor clipping */
  bool clip_global;         /* global-norm clipping with clip_norm (clip_grad_norm_ over
                               every trained param): every gradient first, then one norm,
                               then the updates (each still in place) */
  pk_lr_sched_kind lr_sched;
  int64_t lr_step_size;     /* STEP: multiply by lr_gamma every lr_step_size steps */
  double lr_gamma;
  int64_t lr_total_steps;   /* COSINE: lr * (1 + cos(pi * t / T)) / 2, floor lr_min */
  double lr_min;
  /* batch_norm: false (default) = a layer whose gamma or beta trains normalizes with batch
   * statistics and updates its running stats, a frozen one uses its running stats; true
   * (graph JSON "bn_mode": "train", PyTorch's model.train()) = every layer uses batch
   * statistics and updates its running stats */
  bool bn_train_all;
  /* classification (PK_LOSS_SOFTMAX_XENT) trains with the integer-label cross_entropy op:
   * labels are i64, one per row (prediction (N, K)) or per token ((N, T, K)) */
  bool has_ignore_index;    /* labels equal to ignore_index weigh nothing (PyTorch's rule) */
  int64_t ignore_index;
  double label_smoothing;   /* [0, 1] */
  /* optimizer features transformers' training uses */
  int64_t lr_warmup_steps;  /* linear warmup 0 -> lr over this many optimizer steps, then
                               the schedule (transformers' get_*_schedule_with_warmup) */
  int64_t accum_steps;      /* 0 or 1: none; k: the optimizer steps every k-th step on the
                               mean of the k micro-batches' gradients */
} pk_train_spec;

/* From a validated forward graph (its output = prediction) whose params were marked by
 * pk_sparse_apply: adds the label inputs, the loss, the gradient nodes a trainable param
 * needs (pruned: no weight gradient for frozen weights, no activation gradient below the
 * earliest trained layer, partial-channel weights get a slice of their layer's input
 * saved in forward and a weight gradient over that slice only, written through a view),
 * the optimizer updates and their state, and orders each update right after the last node
 * that needs the old weight or the gradient (in-place update: the gradient dies at once).
 * *out is a new graph; fwd is unchanged; forward tensors keep their ids. Node order:
 * forward (each slice just before its layer), the loss, then backward with the updates
 * interleaved, so forward + loss is a prefix (evaluation may run just that prefix).
 * Classification: the loss is cross_entropy over integer labels "target" (i64, the
 * prediction's shape without its class dim; padding rows of a partial batch are fed -1,
 * which the op ignores) and there is no "row_weight"; mse keeps float targets and row
 * weights. Made-up names: labels "target", "row_weight", the "loss", "hyper"; "grad(T)" (a second
 * contribution "grad(T)#2", summed by node "accumulate(grad(T))"); slices "X[:, :S]" (of a
 * rank-3 batch_matmul input, sliced on its last axis: "X[..., :S]") and
 * weight views "W[:, :S]"; state "opt.m(W)", "opt.v(W)"; in-place outputs "opt.m(W)'",
 * "W'"; nodes "loss", "grad(NODE).INPUT", "slice(X)", "update(W)". Accumulation
 * (accum_steps > 1) adds state "opt.acc(W)" and nodes "accumulate(W)" (in place), which the
 * update then reads; clip_global adds "sumsq(W)" (mul "square(W)" + sum), their sum
 * "grad_norm_sq" (chain "grad_norm_sq#k"), and "clip(W)" before each update.
 * batch_norm layers get their mode (spec->bn_train_all); each in training mode gets a
 * batch_norm_stats node "update(NODE.stats)" (phase UPDATE) writing its running stats in
 * place ("RM'", "RV'"); its running stats must then be buffers. */
pk_status pk_train_build(const pk_graph *fwd, const pk_train_spec *spec, pk_graph **out);
/* Forward + loss only (evaluation) or forward only (inference), as a graph of its own;
 * every batch_norm uses its running stats. */
pk_status pk_eval_build(const pk_graph *fwd, const pk_train_spec *spec, bool with_loss,
                        pk_graph **out);

/* What pruning kept (for tests and --print-memory). */
typedef struct pk_train_stats {
  int forward_nodes, loss_nodes, backward_nodes, update_nodes;
  int load_nodes;                 /* run once at load, not per step (the fold pass) */
  int64_t saved_activation_bytes; /* results of forward/loss nodes (incl. slices) read by a
                                     backward node; graph inputs and labels are fed, not saved */
  int64_t param_bytes, trainable_param_bytes, opt_state_bytes; /* trainable: partial weights
                                     count their trained slice only */
  int64_t gradient_bytes;         /* every gradient tensor's own storage, no reuse (the arena
                                     shares bytes among them: see pk_memplan.arena_by_role) */
} pk_train_stats;
void pk_train_stats_of(const pk_graph *t, pk_train_stats *out);

/* ---- memory plan ----
 * Regions: ARENA (activations, temps, gradients: reused by lifetime), PARAMS (weights,
 * persistent), STATE (optimizer state + hyper, persistent), IO (inputs and labels),
 * BUFFERS (buffers and constants: persistent, initial values from the model). A
 * tensor's lifetime runs from its producer (or step start) to its last reader in node
 * order; an in-place output shares its base's storage. FOLDED tensors live in the ARENA
 * for the whole step (bytes of their own: the load plan wrote them before any step);
 * the load plan's other results are ARENA scratch like any intermediate. */
typedef enum pk_region { PK_REGION_ARENA, PK_REGION_PARAMS, PK_REGION_STATE, PK_REGION_IO,
                         PK_REGION_BUFFERS, PK_REGION_COUNT_ } pk_region;
const char *pk_region_name(pk_region r);

typedef struct pk_memplan {
  int ntensors;
  pk_region *region;        /* per tensor id (views: their base's region) */
  int64_t *offset;          /* bytes from the region start, `align`-byte aligned (views:
                               base's offset; add view_offset elements) */
  int64_t align;            /* 64 (host); a GPU target's device base alignment */
  int64_t region_bytes[PK_REGION_COUNT_];
  int64_t naive_bytes[PK_REGION_COUNT_]; /* sum of sizes without reuse */
  int64_t workspace_bytes;  /* max over nodes (one workspace, reused) */
  /* ARENA peak by role at the peak point, for --print-memory */
  int64_t arena_by_role[PK_ROLE_COUNT_];
  /* Lifetimes in node order, per tensor id: first = producer (-1: before step start),
   * last = last node that reads it or writes its storage in place (the graph's output and
   * loss: nnodes, they are read after the step). Persistent regions: -1 .. nnodes. */
  int *first, *last;
  int64_t *size;            /* bytes each tensor's own storage takes (64-byte rounded; 0 for
                               views and in-place outputs) */
  int64_t arena_live_peak;  /* max over nodes of the sum of live ARENA sizes (<= region size) */
  int peak_node;            /* where that peak is */
} pk_memplan;

/* workspace: bytes per node id (NULL: 0 each). Best-fit over lifetimes; never aliases a
 * node's output with one of its inputs except declared in-place outputs. */
pk_status pk_memplan_build(const pk_graph *g, const int64_t *workspace, pk_memplan **out);
/* The same with every offset and size a multiple of align (a power of two >= 64): GPU
 * targets, whose kernels take buffers that must start at the device's base alignment. */
pk_status pk_memplan_build_aligned(const pk_graph *g, const int64_t *workspace, int64_t align,
                                   pk_memplan **out);
/* Sets workspace_bytes from per-node workspace sizes (bytes per node id of g): the driver
 * knows them only once the kernels are scheduled, after the plan was built. */
void pk_memplan_set_workspace(pk_memplan *mp, const pk_graph *g, const int64_t *workspace);
/* The table `pock compile --print-memory` prints: planned vs naive per category, then, for
 * a training graph, the backward-pass memory (pk_train_stats_of): saved activations,
 * gradients and optimizer state, each as its naive sum, and their total. */
char *pk_memplan_print(pk_ctx *ctx, const pk_graph *g, const pk_memplan *mp);

/* ---- the frozen prefix (frozen_prefix.c: `--cache-frozen`, docs/runtime.md) ----
 * The forward nodes that read only inputs, frozen weights, constants and each other's
 * results give the same results every epoch for the same rows: the runtime computes them
 * once per sample and reuses what the rest of the step reads from them. */
typedef struct pk_frozen_prefix {
  int nnodes;     /* the prefix: the first nnodes nodes of the order once this returns,
                     after the load-phase nodes (which come first and run at load: the
                     step plans, and so the prefix, leave them out) */
  int ntensors;   /* its boundary: results of the prefix the nodes after it read */
  int *tensors;   /* their tensor ids */
  bool *per_row;  /* [i]: depends on the input rows (dim 0 is the batch: one row per
                     sample); else the same every step (made from weights and constants) */
} pk_frozen_prefix;
/* Finds the prefix and reorders g to run it first (a legal order: nothing in the prefix
 * reads what a later node writes). PK_ERR_UNSUPPORTED with the reason when there is none
 * (the first layer trains), when a node with frozen inputs still changes every step
 * (dropout, batch norm in training mode), or a boundary tensor that depends on the rows
 * does not start with the batch dimension. */
pk_status pk_graph_frozen_prefix(pk_graph *g, pk_frozen_prefix *out);

#endif
