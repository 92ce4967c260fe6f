/* train_impl.h — state shared by the training-graph builder (train_build.c) and the
 * autodiff walk (autodiff.c) while one training graph is made. */
#ifndef PK_TRAIN_IMPL_H
#define PK_TRAIN_IMPL_H

#include "graph_impl.h"

typedef struct train_build {
  pk_graph *g;
  const pk_train_spec *spec;
  int nfwd;        /* forward nodes are ids [0, nfwd); slice nodes [nfwd, nfwd + nslices) */
  int nslices;
  int n0;          /* tensors of the forward graph are ids [0, n0) */
  int loss_node;
  /* per forward tensor id (< n0): */
  bool *needs;     /* a trainable param is upstream (or it is one) */
  int *grad;       /* the gradient of the loss wrt it, -1 none yet */
  int *slice;      /* partial-channel weight: its layer input's saved slice, else -1 */
  int *view;       /* partial-channel weight: the view of its trained slice, else -1 */
  /* per slice node (id - nfwd, < nslices): the forward node it must run just before */
  int *slice_before;
} train_build;

/* Adds the backward nodes (gradient of the loss wrt every tensor that needs one), pruned
 * to what trainable params need; sets tb->grad. */
pk_status pk_train_autodiff(train_build *tb);
/* True for a param (own storage) that trains only its first train_channels input channels. */
bool pk_train_is_partial(const pk_gtensor *t);
/* The axis of layer node n's input activation (input 0) that matches its weight's input
 * channels: 1 for conv2d (N, C, H, W), the last for matmul / batch_matmul with trans_b. */
int pk_train_channel_axis(const pk_graph *g, const pk_gnode *n);

#endif
