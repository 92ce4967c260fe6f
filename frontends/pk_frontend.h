/* pk_frontend.h — model files → forward graph IR: Pock's JSON graph (docs/graph-format.md)
 * and ONNX (docs/onnx.md). Also the weights file format (.pkw) shared with the runtime's
 * saver.
 *
 * Usage:
 *   pk_graph *g;
 *   pk_model_info info;
 *   if (pk_frontend_load(ctx, "model.json", 32, &g, &info) != PK_OK)      // batch 32
 *     fprintf(stderr, "%s\n", pk_ctx_error(ctx));   // "model.json: node 'fc': ..."
 *   pk_weights_apply(ctx, g, "pretrained.pkw", "fc.*");   // load all but the head
 */
#ifndef PK_FRONTEND_H
#define PK_FRONTEND_H

#include "pk_graph.h"

/* What the model file says about training, besides the graph. */
typedef struct pk_model_info {
  const char *name;
  bool has_training;        /* the file has a "training" object */
  pk_train_spec train;      /* its loss and optimizer (defaults when absent) */
  int64_t classes;          /* classification: number of classes; 0 otherwise */
} pk_model_info;

/* Loads a JSON graph or, by the extension ".onnx", an ONNX model (pk_frontend_onnx). The
 * batch dim of inputs is `batch` (the file's batch dim is symbolic or ignored). PK_ERR_CHECK or
 * PK_ERR_SYNTAX with the file name and the node or key at fault; PK_ERR_IO when the file
 * or its weights_file cannot be read. The graph is validated and its output set. info may
 * be NULL; on failure *out is NULL and info is unspecified.
 * pk_frontend_json: `filename` names the text in messages and is the base of a relative
 * weights_file (NULL: "<graph>", relative to the current directory). */
pk_status pk_frontend_load(pk_ctx *ctx, const char *path, int64_t batch, pk_graph **out,
                           pk_model_info *info);
pk_status pk_frontend_json(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                           int64_t batch, pk_graph **out, pk_model_info *info);

/* ---- options (ONNX models carry symbolic dims the JSON graph does not) ---- */
/* --input-shape NAME=d0,d1,...: the whole shape of graph input NAME, dim 0 the batch. */
typedef struct pk_input_shape {
  const char *name;
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
} pk_input_shape;

typedef struct pk_frontend_opts {
  int64_t batch;                /* dim 0 of every batched input (1..PK_OP_MAX_EXTENT) */
  const pk_input_shape *shapes; /* bindings of symbolic dims; NULL when nshapes is 0 */
  int nshapes;
} pk_frontend_opts;

/* pk_frontend_load with options: the bindings apply to ONNX models (a JSON graph has no
 * symbolic dims but the batch, and refuses bindings). */
pk_status pk_frontend_load_opts(pk_ctx *ctx, const char *path, const pk_frontend_opts *opts,
                                pk_graph **out, pk_model_info *info);

/* ONNX (frontends/onnx, docs/onnx.md): opsets 13 and newer, default domain. Inputs: dim 0
 * is the batch when symbolic; other symbolic dims must be bound in opts->shapes, else
 * PK_ERR_CHECK naming the input and the dim. Float initializers become params named by the
 * initializer (a Transpose-reached weight keeps its own name and layout), batch norm's
 * running stats buffers, Constant nodes and integer initializers constants; shape
 * arithmetic is folded at import. One PK_ERR_UNSUPPORTED lists every unsupported op type
 * with its count and first node. A training JSON beside the model ("m.onnx" →
 * "m.training.json": the graph JSON's "training" object) gives info->train. */
pk_status pk_frontend_onnx(pk_ctx *ctx, const char *path, const pk_frontend_opts *opts,
                           pk_graph **out, pk_model_info *info);

/* The same from a serialized model in memory (`name` in messages): no external data and no
 * training JSON (there is no directory to read them from). */
pk_status pk_frontend_onnx_mem(pk_ctx *ctx, const void *buf, size_t len, const char *name,
                               const pk_frontend_opts *opts, pk_graph **out,
                               pk_model_info *info);

/* One serialized ONNX TensorProto file (the backend tests' input_0.pb) as host data:
 * floats as F32/F64, integers and bools as I64 (numel elements, arena memory).
 * PK_ERR_IO / PK_ERR_CHECK naming the file. */
pk_status pk_onnx_read_tensor(pk_ctx *ctx, const char *path, pkrt_dtype *dtype, int *ndim,
                              int64_t *shape, const void **data);

/* ---- weights files (.pkw) ----
 * Replaces the initial values of every param whose name is in the file, except those
 * matching the glob `keep` (fnmatch; NULL or "": none), which keep the model's own initial
 * values (a head re-initialized for a new task). File tensors that name no param are
 * ignored. PK_ERR_CHECK, with nothing applied, for a shape or dtype disagreement, a keep
 * glob matching no param, or a file naming no param; PK_ERR_IO for an unreadable file. */
pk_status pk_weights_apply(pk_ctx *ctx, pk_graph *g, const char *path, const char *keep);

/* ---- issue 17, cli helper: ONNX files as they are, for `pock inspect` and `pock export`
 * (frontends/onnx/onnx_inspect.c, onnx_export.c) ----
 * Usage:
 *   pk_onnx_summary sum;
 *   pk_onnx_summarize(ctx, "model.onnx", &sum);     // op histogram, supported or not
 *   pk_onnx_export_options eo = {.tensors = w, .ntensors = nw};   // from ft.pkw
 *   pk_onnx_export_result er;
 *   pk_onnx_export(ctx, "model.onnx", &eo, &er);    // er.bytes: the fine-tuned model
 */
typedef struct pk_onnx_op_count {
  const char *type;         /* op_type; "domain::Type" outside the default domain */
  int count;                /* nodes of this type */
  bool supported;           /* the importer's op table has it (default domain only) */
  const char *first_node;   /* the first such node's name, "" when it has none */
} pk_onnx_op_count;
typedef struct pk_onnx_summary {
  int64_t ir_version;       /* 0 when the file has none */
  int64_t opset;            /* the default domain's opset; 0 when not imported */
  const char *producer;     /* "pytorch 1.13.1"; "" when the file names none */
  int nnodes, ninitializers;
  int nops;                 /* distinct op types, in order of first appearance */
  pk_onnx_op_count *ops;
} pk_onnx_summary;
/* Reads the ModelProto without importing it (so an unsupported model still gets its
 * histogram). PK_ERR_IO for an unreadable file, PK_ERR_CHECK when it is not ONNX. */
pk_status pk_onnx_summarize(pk_ctx *ctx, const char *path, pk_onnx_summary *out);

typedef struct pk_onnx_export_options {
  /* trained values (a .pkw's params and buffers): each replaces the initializer of its
   * name, whose dtype and shape must be the same */
  const pkrt_wtensor *tensors;
  int ntensors;
  /* names that must be graph inputs of the model (the artifact's inputs): a check that
   * the model is the one the artifact was compiled from */
  const char *const *inputs;
  int ninputs;
} pk_onnx_export_options;
typedef struct pk_onnx_export_result {
  void *bytes;              /* the packed ModelProto, in ctx's arena */
  size_t len;
  int nreplaced;            /* initializers replaced */
  int nbatchnorm, ndropout; /* nodes switched to inference */
} pk_onnx_export_result;
/* The ONNX model at path with the initializers replaced, every BatchNormalization in
 * inference (training_mode 0, only output Y: refused when a node or a graph output reads
 * the others) and every Dropout's training_mode input removed (false). PK_ERR_CHECK naming
 * the tensor or node for: a tensor that is not an initializer, a dtype or shape that
 * differs, an input that is not a graph input, an initializer kept in an external file
 * (not supported). Nothing is written: the caller writes out->bytes. */
pk_status pk_onnx_export(pk_ctx *ctx, const char *path, const pk_onnx_export_options *o,
                         pk_onnx_export_result *out);

#endif
