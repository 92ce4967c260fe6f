/* onnx_inspect.c — what an ONNX file holds before any import: IR version, opset, producer,
 * and the op histogram with each type supported or not (the importer's op table), for
 * `pock inspect`. An unsupported model still gets its whole histogram. */
#include <string.h>

#include "onnx_impl.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

/* The histogram's key: the default domain ("" or "ai.onnx") is implied. */
static const char *type_key(pk_ctx *ctx, const Onnx__NodeProto *n, bool *default_domain) {
  const char *dom = or_empty(n->domain);
  *default_domain = !dom[0] || !strcmp(dom, "ai.onnx");
  if (*default_domain) return or_empty(n->op_type);
  return pk_sprintf(ctx, "%s::%s", dom, or_empty(n->op_type)); /* as the importer names it */
}

pk_status pk_onnx_summarize(pk_ctx *ctx, const char *path, pk_onnx_summary *out) {
  memset(out, 0, sizeof *out);
  Onnx__ModelProto *m;
  pk_status s = pk_ox_model_read(ctx, path, &m);
  if (s != PK_OK) return s;
  const Onnx__GraphProto *g = m->graph;
  out->ir_version = m->has_ir_version ? m->ir_version : 0;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *op = m->opset_import[i];
    const char *dom = or_empty(op->domain);
    if ((!dom[0] || !strcmp(dom, "ai.onnx")) && op->has_version) out->opset = op->version;
  }
  const char *pn = or_empty(m->producer_name), *pv = or_empty(m->producer_version);
  out->producer = pk_sprintf(ctx, "%s%s%s", pn, pn[0] && pv[0] ? " " : "", pv);
  out->nnodes = (int)g->n_node;
  out->ninitializers = (int)g->n_initializer;
  out->ops = pk_alloc(ctx, sizeof *out->ops * (g->n_node + 1));
  /* Linear search per node: models have a few dozen distinct types. */
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *n = g->node[i];
    bool dflt;
    const char *key = type_key(ctx, n, &dflt);
    int k = 0;
    while (k < out->nops && strcmp(out->ops[k].type, key) != 0) k++;
    if (k == out->nops) {
      out->ops[k] = (pk_onnx_op_count){.type = key,
                                       .supported = dflt && pk_ox_op_find(key) != NULL,
                                       .first_node = or_empty(n->name)};
      out->nops++;
    }
    out->ops[k].count++;
  }
  return PK_OK;
}
