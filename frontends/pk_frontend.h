/* pk_frontend.h — model files → forward graph IR: Pock's JSON graph (docs/graph-format.md)
 * now, ONNX later. Also the weights file format (.pkw) shared with the runtime's saver.
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

/* Loads a JSON graph (by extension; ".onnx" → PK_ERR_UNSUPPORTED for now). The batch dim
 * of inputs is `batch` (the file's batch dim is symbolic or ignored). PK_ERR_CHECK or
 * PK_ERR_SYNTAX with the file name and the node or key at fault; PK_ERR_IO when the file
 * or its weights_file cannot be read. The graph is validated and its output set. info may
 * be NULL; on failure *out is NULL and info is unspecified.
 * pk_frontend_json: `filename` names the text in messages and is the base of a relative
 * weights_file (NULL: "<graph>", relative to the current directory). */
pk_status pk_frontend_load(pk_ctx *ctx, const char *path, int64_t batch, pk_graph **out,
                           pk_model_info *info);
pk_status pk_frontend_json(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                           int64_t batch, pk_graph **out, pk_model_info *info);

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
  const char *type;         /* op_type; "domain:Type" outside the default domain */
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
