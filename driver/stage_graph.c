/* stage_graph.c — the graph stages of `pock compile`: load the model (and weights over it),
 * apply the sparse-update spec, build the training (or inference) graph, and resolve
 * where every tensor's elements live (views share their base's storage). */
#include <math.h>
#include <string.h>

#include "driver_impl.h"

/* --loss and --classes (issue 17): the loss decides the labels (integer classes over the
 * output's last dim, or float targets), so classes follow it, as the graph JSON's training
 * object has them (frontends/json_training.c). */
static pk_status drv_loss_override(drv_state *S) {
  const pk_compile_options *o = S->o;
  const pk_gtensor *y = S->fwd->tensors[S->fwd->output];
  int64_t out_classes = y->ndim == 2 || y->ndim == 3 ? y->shape[y->ndim - 1] : 0;
  if (o->loss && !strcmp(o->loss, "mse")) {
    S->spec.loss = PK_LOSS_MSE;
    S->spec.has_ignore_index = false;
    S->spec.label_smoothing = 0;
    S->info.classes = 0;
  } else if (o->loss && !strcmp(o->loss, "softmax_cross_entropy")) {
    if (y->ndim != 2 && y->ndim != 3)
      return pk_ctx_fail(S->ctx, PK_ERR_CHECK,
                         "%s: --loss softmax_cross_entropy needs a (batch, classes) or (batch, "
                         "tokens, classes) output; the output has rank %d",
                         o->model, y->ndim);
    if (S->spec.loss != PK_LOSS_SOFTMAX_XENT) S->spec.has_ignore_index = false;
    S->spec.loss = PK_LOSS_SOFTMAX_XENT;
    S->info.classes = out_classes;
  } else if (o->loss) {
    return pk_ctx_fail(S->ctx, PK_ERR_USAGE,
                       "compile: unknown loss '%s' (softmax_cross_entropy, mse)", o->loss);
  }
  if (o->classes > 0 && !o->inference) {
    if (S->spec.loss != PK_LOSS_SOFTMAX_XENT)
      return pk_ctx_fail(S->ctx, PK_ERR_CHECK,
                         "%s: --classes applies to loss softmax_cross_entropy only (the loss "
                         "is mse)", o->model);
    if (o->classes != out_classes)
      return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "%s: --classes is %lld, the output has %lld",
                         o->model, (long long)o->classes, (long long)out_classes);
  }
  return PK_OK;
}

pk_status drv_load(drv_state *S) {
  const pk_compile_options *o = S->o;
  pk_status s = PK_OK;
  if (o->graph) {
    S->fwd = o->graph;
    if (o->info) S->info = *o->info;
  } else {
    pk_frontend_opts fo = {.batch = o->batch, .shapes = o->input_shapes,
                           .nshapes = o->ninput_shapes};
    if ((s = pk_frontend_load_opts(S->ctx, o->model, &fo, &S->fwd, &S->info)) != PK_OK) return s;
  }
  if (o->weights && (s = pk_weights_apply(S->ctx, S->fwd, o->weights, o->reinit)) != PK_OK) return s;

  /* The model file's training object, then the command line's overrides. */
  S->spec = S->info.train;
  if (o->optimizer) {
    if (!strcmp(o->optimizer, "sgd")) S->spec.optim = PK_OPTIM_SGD;
    else if (!strcmp(o->optimizer, "adam")) S->spec.optim = PK_OPTIM_ADAM;
    else if (!strcmp(o->optimizer, "adamw")) S->spec.optim = PK_OPTIM_ADAMW;
    else
      return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: unknown optimizer '%s' (sgd, adam, adamw)",
                         o->optimizer);
  }
  if (isfinite(o->lr) && o->lr >= 0) S->spec.lr = o->lr;
  if (isfinite(o->momentum) && o->momentum >= 0) S->spec.momentum = o->momentum;
  if (isfinite(o->weight_decay) && o->weight_decay >= 0) S->spec.weight_decay = o->weight_decay;
  if (o->warmup_steps >= 0) S->spec.lr_warmup_steps = o->warmup_steps;
  if (o->accum_steps >= 1) S->spec.accum_steps = o->accum_steps;
  if (isfinite(o->clip_global) && o->clip_global >= 0) {
    S->spec.clip_global = o->clip_global > 0;
    if (o->clip_global > 0) S->spec.clip_norm = o->clip_global;
  }
  if ((s = drv_loss_override(S)) != PK_OK) return s;
  if (!o->inference && !(S->spec.lr > 0))
    return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "%s: the learning rate must be > 0 (give --lr)", o->model);
  return PK_OK;
}

pk_status drv_sparse(drv_state *S) {
  const pk_compile_options *o = S->o;
  pk_sparse_spec *sp = NULL;
  if (o->sparse) {
    char *text;
    size_t len;
    pk_status s = pk_read_file(S->ctx, o->sparse, &text, &len);
    if (s == PK_OK) s = pk_sparse_parse(S->ctx, text, len, o->sparse, &sp);
    if (s != PK_OK) return s;
  }
  return pk_sparse_apply(S->fwd, sp);
}

pk_status drv_train(drv_state *S) {
  pk_status s = S->o->inference ? pk_eval_build(S->fwd, &S->spec, false, &S->g)
                                : pk_train_build(S->fwd, &S->spec, &S->g);
  if (s != PK_OK) return s;
  return drv_layouts(S);
}

static void dense_strides(const pk_gtensor *t, int64_t *st) {
  int64_t acc = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= t->shape[d];
  }
}

static bool same_strides(const pk_gtensor *t, const int64_t *a, const int64_t *b) {
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > 1 && a[d] != b[d]) return false;
  return true;
}

static int64_t numel_of(const pk_gtensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Resolves tensor id (and its bases first); depth guards a cycle of bases. */
static pk_status resolve(drv_state *S, int id, bool *done, int depth) {
  pk_graph *g = S->g;
  const pk_gtensor *t = g->tensors[id];
  drv_layout *L = &S->layout[id];
  if (done[id]) return PK_OK;
  if (t->base < 0) {
    *L = (drv_layout){.root = id, .dense = true};
    dense_strides(t, L->strides);
    done[id] = true;
    return PK_OK;
  }
  if (t->base >= g->ntensors || depth > g->ntensors)
    return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: tensor '%s' has a bad base", t->name);
  pk_status s = resolve(S, t->base, done, depth + 1);
  if (s != PK_OK) return s;
  const drv_layout *B = &S->layout[t->base];
  const pk_gtensor *b = g->tensors[t->base];
  int64_t own[PK_TE_MAX_DIMS], bdense[PK_TE_MAX_DIMS];
  dense_strides(t, own);
  dense_strides(b, bdense);
  bool unset = true; /* all-zero view strides: a same-shaped in-place output */
  for (int d = 0; d < t->ndim; d++) unset = unset && t->view_strides[d] == 0;
  const int64_t *vs = unset && numel_of(t) > 1 ? own : t->view_strides;
  /* A view of a view composes only when the inner one is its base laid out row-major. */
  if (!same_strides(b, B->strides, bdense))
    return pk_ctx_fail(S->ctx, PK_ERR_UNSUPPORTED, "compile: tensor '%s' is a view of strided view '%s'",
                       t->name, b->name);
  L->root = B->root;
  L->elem_offset = B->elem_offset + t->view_offset;
  int64_t reach = L->elem_offset;
  for (int d = 0; d < t->ndim; d++) {
    L->strides[d] = t->shape[d] > 1 ? vs[d] : own[d];
    if (t->shape[d] > 1) {
      if (L->strides[d] < 0)
        return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: view '%s' has a negative stride", t->name);
      reach += (t->shape[d] - 1) * L->strides[d];
    }
  }
  if (L->elem_offset < 0 || reach >= numel_of(g->tensors[L->root]) ||
      g->tensors[L->root]->dtype != t->dtype)
    return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: view '%s' does not fit in '%s'", t->name,
                       g->tensors[L->root]->name);
  L->dense = L->elem_offset == 0 && same_strides(t, L->strides, own);
  done[id] = true;
  return PK_OK;
}

pk_status drv_layouts(drv_state *S) {
  pk_graph *g = S->g;
  S->layout = pk_alloc(S->ctx, sizeof(drv_layout) * (size_t)(g->ntensors + 1));
  bool *done = pk_alloc(S->ctx, sizeof(bool) * (size_t)(g->ntensors + 1));
  for (int i = 0; i < g->ntensors; i++) {
    pk_status s = resolve(S, i, done, 0);
    if (s != PK_OK) return s;
  }
  return PK_OK;
}
