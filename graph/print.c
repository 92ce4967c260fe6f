/* print.c — pk_graph_print: the text dump behind `--dump-after`, one line per tensor and
 * per node, stable so that tests and humans can diff it. */
#include "graph_impl.h"

static void put_shape(pk_strbuf *b, const pk_gtensor *t) {
  pk_strbuf_append(b, "(");
  for (int d = 0; d < t->ndim; d++)
    pk_strbuf_printf(b, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  pk_strbuf_append(b, t->ndim == 1 ? ",)" : ")");
}

static void put_tensor(pk_strbuf *b, const pk_graph *g, const pk_gtensor *t) {
  pk_strbuf_printf(b, "  %%%d %s : %s %s ", t->id, t->name, pk_role_name(t->role),
                   pkrt_dtype_name(t->dtype));
  put_shape(b, t);
  if (t->role == PK_ROLE_PARAM && t->base < 0) {
    pk_strbuf_append(b, t->trainable ? " train" : " frozen");
    if (t->trainable && t->ndim >= 2 && t->train_channels < t->shape[1])
      pk_strbuf_printf(b, " channels=[0,%lld)", (long long)t->train_channels);
    if (t->layer >= 0) pk_strbuf_printf(b, " layer=%d", t->layer);
    if (t->is_bias) pk_strbuf_append(b, " bias");
  }
  if (t->base >= 0) {
    pk_strbuf_printf(b, " view of %%%d offset %lld strides (", t->base, (long long)t->view_offset);
    for (int d = 0; d < t->ndim; d++)
      pk_strbuf_printf(b, "%s%lld", d ? ", " : "", (long long)t->view_strides[d]);
    pk_strbuf_append(b, ")");
  }
  if (t->role == PK_ROLE_INPUT && t->no_batch) pk_strbuf_append(b, " no-batch");
  if (t->id == g->output) pk_strbuf_append(b, " [output]");
  if (t->id == g->loss) pk_strbuf_append(b, " [loss]");
  pk_strbuf_append(b, "\n");
}

static void put_ids(pk_strbuf *b, int n, const int *ids) {
  for (int i = 0; i < n; i++) pk_strbuf_printf(b, "%s%%%d", i ? ", " : "", ids[i]);
}

char *pk_graph_print(pk_ctx *ctx, const pk_graph *g) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "graph batch=%lld tensors=%d nodes=%d\n", (long long)g->batch,
                   g->ntensors, g->nnodes);
  pk_strbuf_append(&b, "tensors:\n");
  for (int i = 0; i < g->ntensors; i++) put_tensor(&b, g, g->tensors[i]);
  pk_strbuf_append(&b, "nodes:\n");
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    pk_strbuf_printf(&b, "  #%d %-8s ", k, pk_phase_name(n->phase));
    put_ids(&b, n->noutputs, n->outputs);
    if (n->fused) pk_strbuf_printf(&b, " = fused(%s)", n->fused);
    else pk_strbuf_printf(&b, " = %s", pk_op_name(n->op));
    if (n->kind == PK_GNODE_GRAD && !n->fused) pk_strbuf_printf(&b, ".grad%d", n->grad_input);
    pk_strbuf_append(&b, "(");
    put_ids(&b, n->ninputs, n->inputs);
    pk_strbuf_printf(&b, ")  # %s\n", n->name);
  }
  return pk_strbuf_finish(ctx, &b);
}
