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

#endif
