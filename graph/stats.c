/* stats.c — pk_train_stats_of: what pruning kept, counted from a finished training graph. */
#include <string.h>

#include "graph_impl.h"

void pk_train_stats_of(const pk_graph *t, pk_train_stats *out) {
  memset(out, 0, sizeof *out);
  bool *saved = pk_alloc(t->ctx, sizeof(bool) * (size_t)(t->ntensors + 1));
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *n = t->nodes[k];
    switch (n->phase) {
    case PK_PHASE_FORWARD: out->forward_nodes++; break;
    case PK_PHASE_LOSS: out->loss_nodes++; break;
    case PK_PHASE_BACKWARD: out->backward_nodes++; break;
    case PK_PHASE_UPDATE: out->update_nodes++; break;
    case PK_PHASE_LOAD: out->load_nodes++; break;
    }
    if (n->phase != PK_PHASE_BACKWARD) continue;
    for (int i = 0; i < n->ninputs; i++) {
      const pk_gtensor *x = t->tensors[n->inputs[i]];
      /* saved = produced by a forward or loss node (graph inputs are fed, not saved) */
      if (x->producer >= 0 && x->base < 0 &&
          (t->nodes[x->producer]->phase == PK_PHASE_FORWARD ||
           t->nodes[x->producer]->phase == PK_PHASE_LOSS))
        saved[x->id] = true;
    }
  }
  for (int i = 0; i < t->ntensors; i++) {
    const pk_gtensor *x = t->tensors[i];
    if (saved[i]) out->saved_activation_bytes += pk_gtensor_bytes(x);
    if (x->base >= 0) continue;
    if (x->role == PK_ROLE_PARAM) {
      int64_t b = pk_gtensor_bytes(x);
      out->param_bytes += b;
      if (x->trainable) {
        if (x->ndim >= 2 && x->train_channels > 0 && x->train_channels < x->shape[1])
          b = b / x->shape[1] * x->train_channels;
        out->trainable_param_bytes += b;
      }
    } else if (x->role == PK_ROLE_OPT_STATE) {
      out->opt_state_bytes += pk_gtensor_bytes(x);
    } else if (x->role == PK_ROLE_GRADIENT) {
      out->gradient_bytes += pk_gtensor_bytes(x);
    }
  }
}
