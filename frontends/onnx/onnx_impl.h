/* onnx_impl.h — internals of the ONNX importer (frontends/onnx): the importer state, the
 * value table every ONNX name resolves through, and the helpers each operator converter is
 * written with. Not a public header; docs/onnx.md is the user's side.
 *
 * How an import runs (onnx_import.c):
 *   1. onnx_load.c unpacks the ModelProto (protobuf-c, code generated from proto/onnx.proto)
 *      and checks the IR version and opset imports;
 *   2. every op type is looked up in onnx_ops.def; unknown ones are listed all at once;
 *   3. graph inputs become graph tensors (dim 0 is the batch; other symbolic dims are bound
 *      by --input-shape), initializers become values with known data;
 *   4. chains an exporter writes for one module (LayerNorm, RMSNorm, GELU, GroupNorm) are
 *      found (onnx_patterns.c) and imported as one op at their last node;
 *   5. the other nodes are converted in file order (ONNX requires topological order). A
 *      node whose inputs are all PK_OXV_CONST and whose table row has a fold function is
 *      evaluated at import (shape arithmetic: Shape -> Gather -> Unsqueeze -> Concat ->
 *      Reshape); else its convert function emits graph nodes;
 *   6. the first graph output becomes g->output; the graph is validated; a training JSON
 *      beside the model gives pk_model_info.
 *
 * Values. Each ONNX name (graph input, initializer, node output) is one pk_ox_value:
 *   PK_OXV_INPUT   a graph input: bound to a graph tensor from the start;
 *   PK_OXV_PARAM   a float initializer: a trainable parameter with the initializer's own
 *                  name and layout, made a graph param (or, for batch norm's running
 *                  stats, a buffer) when first used; its data is known but it never folds;
 *   PK_OXV_TPARAM  a Transpose of a rank-2 PARAM (nn.Linear on rank-3 inputs exports
 *                  MatMul(x, Transpose(W))): MatMul/Gemm read it as trans_b of the PARAM
 *                  itself, so the param keeps its PyTorch name; any other reader gets a
 *                  transpose node;
 *   PK_OXV_CONST   data known at import: integer initializers, Constant nodes, folded
 *                  results. Becomes a PK_ROLE_CONSTANT buffer if a graph node reads it;
 *   PK_OXV_TENSOR  computed by a graph node: `tensor` is its graph tensor.
 * Shapes in the table are ONNX's (ndim 0 for a scalar); a graph tensor has rank >= 1, so a
 * scalar's tensor is (1,).
 *
 * Writing a converter (see onnx_ops_*.c): read attributes with pk_ox_attr_*, constant
 * inputs with pk_ox_const_ints / pk_ox_const_f64, get graph tensors with pk_ox_tensor,
 * emit Pock ops with pk_ox_op (intermediates) and pk_ox_op_result (the node's output k),
 * or bind an output to an existing tensor (pk_ox_bind) or constant (pk_ox_set_const).
 * Every failure goes through pk_ox_fail, which names the file, the node and its op type.
 * User names never reach generated code (graph names are data).
 */
#ifndef PK_ONNX_IMPL_H
#define PK_ONNX_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "pk_frontend.h"
#include "pkrt.h"

/* Most inputs or outputs a node may have (Concat's inputs): more is refused. */
#define PK_OX_MAX_IO 64
/* Largest constant folded at import (elements): shape arithmetic is tiny; a bigger
 * all-constant subgraph is left to the graph. */
#define PK_OX_MAX_FOLD (1 << 22)

typedef enum pk_oxv_kind {
  PK_OXV_INPUT,
  PK_OXV_PARAM,
  PK_OXV_TPARAM,
  PK_OXV_CONST,
  PK_OXV_TENSOR
} pk_oxv_kind;

typedef struct pk_ox_value {
  const char *name;         /* the ONNX name ("" never: empty names mean an omitted input) */
  pk_oxv_kind kind;
  bool defined;             /* produced (by an input, initializer or an earlier node) */
  pkrt_dtype dtype;         /* F32/F64 (the model's float), I64, I32; ONNX bool is I64 with
                               is_bool set */
  bool is_bool;
  int ndim;                 /* ONNX rank: 0 for a scalar */
  int64_t shape[PK_TE_MAX_DIMS];
  const void *data;         /* PARAM/CONST: numel elements of dtype, row-major; else NULL */
  int tensor;               /* graph tensor id, -1 until materialized */
  int src;                  /* TPARAM: the PARAM value it transposes; -1 otherwise */
  bool as_buffer;           /* PARAM: made a buffer (batch norm running stats), not a param */
} pk_ox_value;

/* A node being converted: its inputs and outputs resolved to value ids. */
typedef struct pk_ox_node {
  const Onnx__NodeProto *p;
  const char *name;         /* the node's name, or "OpType_<index>" when it has none */
  const char *where;        /* "node 'name' (OpType)" for messages */
  int index;                /* position in the graph's node list */
  int nin, nout;
  int in[PK_OX_MAX_IO];     /* value ids; -1 for an omitted optional input ("") */
  int out[PK_OX_MAX_IO];    /* value ids (fresh, undefined until the converter binds them) */
  int nemitted;             /* graph nodes emitted so far (names the intermediates) */
} pk_ox_node;

typedef struct pk_ox pk_ox;
/* A converter: emits graph nodes for nd, or binds its outputs to constants. */
typedef pk_status (*pk_ox_convert_fn)(pk_ox *im, pk_ox_node *nd);
/* A fold: every input is PK_OXV_CONST (or omitted): compute the outputs at import. */
typedef pk_status (*pk_ox_fold_fn)(pk_ox *im, pk_ox_node *nd);

/* One binding of --input-shape NAME=d0,d1,... */
typedef struct pk_ox_shape_binding {
  const char *name;
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
} pk_ox_shape_binding;

struct pk_ox {
  pk_ctx *ctx;
  const char *file;         /* for messages */
  const char *dir;          /* the model's directory: external data must stay inside it
                               (NULL: read from memory, external data refused) */
  Onnx__ModelProto *model;
  int64_t opset;            /* the default domain's opset version (>= 13) */
  int64_t batch;
  pkrt_dtype fdtype;        /* the model's float dtype: F32 unless it holds doubles */
  pk_graph *g;
  /* the value table, with an open-addressing index by name */
  pk_ox_value *values;
  int nvalues, cap_values;
  int *hash;                /* cap_hash slots of value id + 1 (0 = empty) */
  int cap_hash;
  /* --input-shape bindings */
  const pk_ox_shape_binding *bindings;
  int nbindings;
  /* recognized chains (onnx_patterns.c): chain_of[node] = chain index or -1 */
  int *chain_of;
  struct pk_ox_chain *chains;
  int nchains;
  /* what the import learned for pk_model_info */
  bool bn_training;         /* a BatchNormalization node has training_mode = 1 */
};

/* ---- patterns (onnx_patterns.c) ----
 * Chains of nodes an exporter writes for one module (LayerNorm before opset 17, RMSNorm,
 * exact GELU, torch's GroupNorm), imported as one Pock op. Found before conversion (structure only); the
 * chain's nodes are skipped and pk_ox_chain_emit runs at its last node: it checks the
 * constants and shapes and, when they hold, emits the op (*done = true); else nothing is
 * changed and the importer converts the nodes one by one. */
typedef enum pk_ox_chain_kind {
  PK_OX_CHAIN_LAYER_NORM,
  PK_OX_CHAIN_RMS_NORM,
  PK_OX_CHAIN_GELU,
  PK_OX_CHAIN_GROUP_NORM /* torch's nn.GroupNorm: Reshape/InstanceNormalization/Reshape/Mul/Add */
} pk_ox_chain_kind;
typedef struct pk_ox_chain {
  pk_ox_chain_kind kind;
  int n;
  int nodes[12];            /* node indices, in chain order */
  int last;                 /* the one of them last in file order */
  const char *x, *w, *b;    /* the normalized input, the affine weight and bias names */
  const char *eps;          /* the name of the constant added to the variance */
  const char *c1, *c2, *c3; /* other constants the chain needs: the exponent 2, 1, 0.5, ... */
  const char *c4, *c5, *c6; /* group norm: the second Reshape's shape, the Unsqueezes' axes */
  int reduce, reduce2;      /* the ReduceMean nodes (their axes are checked at emit); group
                               norm: the InstanceNormalization node (its epsilon) */
} pk_ox_chain;
pk_status pk_ox_patterns_find(pk_ox *im);
pk_status pk_ox_chain_emit(pk_ox *im, const pk_ox_chain *c, const char *name, bool *done);

/* ---- loading (onnx_load.c) ---- */
/* Reads and unpacks a model file / buffer (nesting depth checked first: protobuf-c recurses
 * without a limit). pk_ox_read_model's message is malloc'd: free it with
 * onnx__model_proto__free_unpacked(m, NULL); pk_ox_unpack_model allocates through
 * `allocator` (NULL: malloc, freed the same way). */
pk_status pk_ox_read_model(pk_ox *im, const char *path, Onnx__ModelProto **out);
pk_status pk_ox_unpack_model(pk_ox *im, const uint8_t *buf, size_t len,
                             ProtobufCAllocator *allocator, Onnx__ModelProto **out);
/* IR version 3..10, a default-domain opset 13..21 (sets im->opset). */
pk_status pk_ox_check_model(pk_ox *im);

/* ---- messages ---- */
/* "FILE: WHERE: message" as PK_ERR_CHECK (where may be NULL); returns PK_ERR_CHECK. */
pk_status pk_ox_fail_at(pk_ox *im, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "FILE: node 'n' (OpType): message" */
pk_status pk_ox_fail(pk_ox *im, const pk_ox_node *nd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A user string fit for a message (quoted, control bytes escaped, long ones cut). */
const char *pk_ox_quote(pk_ox *im, const char *s);

/* ---- the value table ---- */
pk_ox_value *pk_ox_val(pk_ox *im, int id);
int pk_ox_find(pk_ox *im, const char *name);          /* value id or -1 */
/* A new undefined value named `name` (names are unique: PK_ERR_CHECK when taken). */
pk_status pk_ox_new_value(pk_ox *im, const char *name, int *id);
int64_t pk_ox_numel(int ndim, const int64_t *shape);  /* 1 for rank 0 */
/* A graph tensor name made from `want` (an ONNX name): control bytes and parentheses (kept
 * for the names Pock makes) become '_', at most 247 bytes, "#k" added until unique. */
const char *pk_ox_graph_name(pk_ox *im, const char *want);
const char *pk_ox_shape_str(pk_ox *im, int ndim, const int64_t *shape); /* "(2, 3)", "()" */
const char *pk_ox_dtype_name(const pk_ox_value *v);   /* "float", "int64", "bool", ... */

/* ---- inputs of a node ---- */
/* Input i's value, or NULL when it is omitted or i >= nin. */
pk_ox_value *pk_ox_in(pk_ox *im, const pk_ox_node *nd, int i);
/* Requires nin in [lo, hi] and nout in [1, max_out]; else a message naming the counts. */
pk_status pk_ox_arity(pk_ox *im, const pk_ox_node *nd, int lo, int hi, int max_out);
/* Input i must be known at import (a CONST or a PARAM's data): its elements as int64
 * (integer or float data; floats must be whole), at most max of them. `what` names it in
 * the message ("shape", "axes"). */
pk_status pk_ox_const_ints(pk_ox *im, const pk_ox_node *nd, int i, const char *what, int max,
                           int *n, int64_t *out);
/* The same for one float value (a scalar or a 1-element tensor). */
pk_status pk_ox_const_f64(pk_ox *im, const pk_ox_node *nd, int i, const char *what,
                          double *out);
/* The graph tensor of input i, materializing PARAM (a param, named by the initializer),
 * TPARAM (a transpose node over its param), CONST (a constant buffer) as needed. */
pk_status pk_ox_tensor(pk_ox *im, const pk_ox_node *nd, int i, int *tensor);
/* The graph tensor of value v (same rules; for converters that walk values directly). */
pk_status pk_ox_value_tensor(pk_ox *im, const pk_ox_node *nd, int v, int *tensor);
/* Batch norm's running statistics: input i (a PARAM) becomes a BUFFER (role buffer: saved
 * with the weights, updated in place by the training step). */
pk_status pk_ox_buffer(pk_ox *im, const pk_ox_node *nd, int i, int *tensor);

/* ---- emitting ---- */
/* Adds a Pock op reading graph tensors `ins`; its result is an intermediate tensor named
 * "<node>.<k>" (k counts the node's emitted ops). */
pk_status pk_ox_op(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *attrs,
                   int nins, const int *ins, int *out_tensor);
/* The same, but the result is the node's output k: the tensor takes the ONNX output's name
 * and the value is bound to it. */
pk_status pk_ox_op_result(pk_ox *im, pk_ox_node *nd, pk_op_kind op, const pk_op_attrs *attrs,
                          int nins, const int *ins, int k);
/* Binds output k to an existing graph tensor (Identity, a no-op Reshape): the value's shape
 * and dtype are the tensor's. */
pk_status pk_ox_bind(pk_ox *im, pk_ox_node *nd, int k, int tensor);
/* Binds output k to constant data (copied): dtype, ONNX shape (ndim may be 0). */
pk_status pk_ox_set_const(pk_ox *im, pk_ox_node *nd, int k, pkrt_dtype dtype, bool is_bool,
                          int ndim, const int64_t *shape, const void *data);
/* Output k is the same value as input i (Identity, Dropout in inference): shares its kind,
 * data and tensor. */
pk_status pk_ox_alias(pk_ox *im, pk_ox_node *nd, int k, int i);
/* Output k is a TPARAM over PARAM value `param` (Transpose of a rank-2 initializer). */
pk_status pk_ox_set_tparam(pk_ox *im, pk_ox_node *nd, int k, int param);

/* ---- attributes ---- */
const Onnx__AttributeProto *pk_ox_attr(const pk_ox_node *nd, const char *name);
/* Refuses attributes not in `known` (NULL-terminated): an attribute Pock ignores could
 * change the meaning. */
pk_status pk_ox_attrs_known(pk_ox *im, const pk_ox_node *nd, const char *const *known);
/* Typed reads; a missing attribute gives the default (and *present = false where asked). */
pk_status pk_ox_attr_int(pk_ox *im, const pk_ox_node *nd, const char *name, int64_t def,
                         int64_t lo, int64_t hi, int64_t *out);
pk_status pk_ox_attr_float(pk_ox *im, const pk_ox_node *nd, const char *name, double def,
                           double *out);
pk_status pk_ox_attr_ints(pk_ox *im, const pk_ox_node *nd, const char *name, int max,
                          bool *present, int *n, int64_t *out);
pk_status pk_ox_attr_string(pk_ox *im, const pk_ox_node *nd, const char *name,
                            const char *def, const char **out);
/* A TENSOR attribute (Constant's value) as host data in Pock's dtypes. */
pk_status pk_ox_attr_tensor(pk_ox *im, const pk_ox_node *nd, const char *name,
                            const Onnx__TensorProto **out);

/* ---- tensors (initializers, Constant values, test data) ---- */
/* A TensorProto's data (raw_data, the typed fields, or external data inside im->dir) as
 * numel elements of *dtype (float -> F32, double -> F64, int64/int32/bool/int8/uint8/int16 ->
 * I64 (bool sets *is_bool)); PK_ERR_CHECK naming `where` for an unsupported type (float16,
 * strings), a size that disagrees with the dims, or external data that escapes the model's
 * directory. */
pk_status pk_ox_tensor_data(pk_ox *im, const char *where, const Onnx__TensorProto *t,
                            pkrt_dtype *dtype, bool *is_bool, int *ndim, int64_t *shape,
                            const void **data);

/* ---- the operator table (onnx_ops.def) ----
 * Rows PK_OX_OP("OpType", convert, fold): fold is pk_ox_nofold for ops never evaluated at
 * import. The rows declare the functions, so a row is all a new converter needs here. */
typedef struct pk_ox_op_info {
  const char *type;         /* ONNX op_type, default domain */
  pk_ox_convert_fn convert;
  pk_ox_fold_fn fold;       /* pk_ox_nofold: never folded */
} pk_ox_op_info;
const pk_ox_op_info *pk_ox_op_find(const char *type); /* NULL: unsupported */
pk_status pk_ox_nofold(pk_ox *im, pk_ox_node *nd);

#define PK_OX_OP(type, convert, fold)                                                        \
  pk_status convert(pk_ox *im, pk_ox_node *nd);                                            \
  pk_status fold(pk_ox *im, pk_ox_node *nd);
#include "onnx_ops.def"
#undef PK_OX_OP

/* ---- issue 17, cli helper: the ModelProto as a whole (onnx_file.c), for the tools that
 * read or rewrite the protobuf itself (`pock inspect`, `pock export`) ---- */
/* Reads and unpacks path into ctx's arena (nothing to free): PK_ERR_IO for an unreadable
 * file, PK_ERR_CHECK when it is not a ModelProto with a graph. */
pk_status pk_ox_model_read(pk_ctx *ctx, const char *path, Onnx__ModelProto **out);
/* Packs m into ctx's arena; PK_ERR_CHECK (naming `what`) when it reaches 2 GiB. */
pk_status pk_ox_model_pack(pk_ctx *ctx, const char *what, const Onnx__ModelProto *m,
                           void **bytes, size_t *len);

#endif
