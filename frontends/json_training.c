/* json_training.c — the graph file's optional "training" object (loss, classes, optimizer,
 * learning-rate schedule) → pk_model_info, with PyTorch's defaults where it is silent. */
#include <string.h>

#include "json_impl.h"

static const char *const TRAINING_KEYS[] = {"loss", "classes", "optimizer", "lr_schedule",
                                            "bn_mode",
                                            /* classification with integer labels */
                                            "ignore_index", "label_smoothing",
                                            NULL};
static const char *const OPTIM_KEYS[] = {"kind", "lr", "momentum", "weight_decay", "betas",
                                         "eps", "clip_norm", "clip_global",
                                         /* gradient accumulation */
                                         "accum_steps", NULL};
static const char *const SCHED_KEYS[] = {"kind", "step_size", "gamma", "total_steps",
                                         "min_lr",
                                         /* linear warmup before the schedule */
                                         "warmup_steps", NULL};

/* Refuses `key` in obj with a message saying what it is for. */
static pk_status fe_not_here(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                             const char *why) {
  if (pk_fe_get(obj, key)) return pk_fe_fail(f, where, "key '%s' %s", key, why);
  return PK_OK;
}

static pk_status fe_optimizer(pk_fe *f, const cJSON *o, pk_train_spec *t) {
  const char *where = "training.optimizer";
  const char *kind = "sgd";
  pk_status s;
  if ((s = pk_fe_keys(f, where, o, OPTIM_KEYS)) != PK_OK ||
      (s = pk_fe_string(f, where, o, "kind", false, &kind)) != PK_OK)
    return s;
  if (strcmp(kind, "sgd") == 0)
    t->optim = PK_OPTIM_SGD;
  else if (strcmp(kind, "adam") == 0)
    t->optim = PK_OPTIM_ADAM;
  else if (strcmp(kind, "adamw") == 0)
    t->optim = PK_OPTIM_ADAMW;
  else
    return pk_fe_fail(f, where, "kind %s is not sgd, adam or adamw", pk_fe_quote(f, kind));
  if (t->optim == PK_OPTIM_ADAMW) t->weight_decay = 0.01; /* torch.optim.AdamW's default */
  if ((s = pk_fe_double(f, where, o, "lr", false, 0, true, 1e6, &t->lr)) != PK_OK ||
      (s = pk_fe_double(f, where, o, "weight_decay", false, 0, false, 1e6,
                        &t->weight_decay)) != PK_OK ||
      (s = pk_fe_double(f, where, o, "clip_norm", false, 0, false, 1e30, &t->clip_norm)) ||
      (s = pk_fe_bool(f, where, o, "clip_global", &t->clip_global)) != PK_OK)
    return s;
  if (t->clip_global && t->clip_norm <= 0)
    return pk_fe_fail(f, where, "clip_global needs clip_norm > 0");
  if ((s = pk_fe_int(f, where, o, "accum_steps", false, 1, INT32_MAX, &t->accum_steps)))
    return s;
  if (t->optim == PK_OPTIM_SGD) {
    if ((s = fe_not_here(f, where, o, "betas", "applies to adam and adamw only")) ||
        (s = fe_not_here(f, where, o, "eps", "applies to adam and adamw only")))
      return s;
    return pk_fe_double(f, where, o, "momentum", false, 0, false, 0.999999, &t->momentum);
  }
  if ((s = fe_not_here(f, where, o, "momentum", "applies to sgd only (adam has betas)")))
    return s;
  if ((s = pk_fe_double(f, where, o, "eps", false, 0, true, 1, &t->eps)) != PK_OK) return s;
  const cJSON *b = pk_fe_get(o, "betas");
  if (b) {
    if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2)
      return pk_fe_fail(f, where, "key 'betas' must be an array of 2 numbers");
    double v[2];
    int i = 0;
    for (const cJSON *e = b->child; e; e = e->next, i++) {
      if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble < 1))
        return pk_fe_fail(f, where, "betas[%d] must be a number in [0, 1)", i);
      v[i] = e->valuedouble;
    }
    t->beta1 = v[0];
    t->beta2 = v[1];
  }
  return PK_OK;
}

static pk_status fe_schedule(pk_fe *f, const cJSON *o, pk_train_spec *t) {
  const char *where = "training.lr_schedule";
  const char *kind = NULL;
  pk_status s;
  if ((s = pk_fe_keys(f, where, o, SCHED_KEYS)) != PK_OK ||
      (s = pk_fe_string(f, where, o, "kind", true, &kind)) != PK_OK)
    return s;
  const char *only_step = "applies to kind 'step' only";
  const char *only_cos = "applies to kind 'cosine' only";
  if (strcmp(kind, "constant") == 0) {
    t->lr_sched = PK_LR_CONSTANT;
    if ((s = fe_not_here(f, where, o, "step_size", only_step)) ||
        (s = fe_not_here(f, where, o, "gamma", only_step)) ||
        (s = fe_not_here(f, where, o, "total_steps", only_cos)) ||
        (s = fe_not_here(f, where, o, "min_lr", only_cos)))
      return s;
  } else if (strcmp(kind, "step") == 0) {
    t->lr_sched = PK_LR_STEP;
    t->lr_gamma = 0.1; /* torch.optim.lr_scheduler.StepLR's default */
    if ((s = fe_not_here(f, where, o, "total_steps", only_cos)) ||
        (s = fe_not_here(f, where, o, "min_lr", only_cos)) ||
        (s = pk_fe_int(f, where, o, "step_size", true, 1, INT32_MAX, &t->lr_step_size)) ||
        (s = pk_fe_double(f, where, o, "gamma", false, 0, true, 1e6, &t->lr_gamma)))
      return s;
  } else if (strcmp(kind, "cosine") == 0) {
    t->lr_sched = PK_LR_COSINE;
    if ((s = fe_not_here(f, where, o, "step_size", only_step)) ||
        (s = fe_not_here(f, where, o, "gamma", only_step)) ||
        (s = pk_fe_int(f, where, o, "total_steps", true, 1, INT32_MAX, &t->lr_total_steps)) ||
        (s = pk_fe_double(f, where, o, "min_lr", false, 0, false, 1e6, &t->lr_min)))
      return s;
    if (t->lr_min > t->lr)
      return pk_fe_fail(f, where, "min_lr %g is above the optimizer's lr %g", t->lr_min, t->lr);
    if ((s = pk_fe_int(f, where, o, "warmup_steps", false, 0, INT32_MAX, &t->lr_warmup_steps)))
      return s;
    if (t->lr_warmup_steps > 0 && t->lr_total_steps <= t->lr_warmup_steps)
      return pk_fe_fail(f, where, "total_steps %lld must exceed warmup_steps %lld (the cosine "
                        "runs over the steps after the warmup)", (long long)t->lr_total_steps,
                        (long long)t->lr_warmup_steps);
    return PK_OK;
  } else {
    return pk_fe_fail(f, where, "kind %s is not constant, step or cosine",
                      pk_fe_quote(f, kind));
  }
  return pk_fe_int(f, where, o, "warmup_steps", false, 0, INT32_MAX, &t->lr_warmup_steps);
}

pk_status pk_fe_training(pk_fe *f, const cJSON *tr, pk_model_info *info) {
  pk_train_spec *t = &info->train;
  memset(t, 0, sizeof *t);
  t->loss = PK_LOSS_SOFTMAX_XENT;
  t->optim = PK_OPTIM_SGD;
  t->lr = 0.01;
  t->beta1 = 0.9;
  t->beta2 = 0.999;
  t->eps = 1e-8;
  t->lr_sched = PK_LR_CONSTANT;
  const pk_gtensor *y = f->g->tensors[f->g->output];
  /* (N, K), or (N, T, K) with a label per token */
  int64_t out_classes = y->ndim == 2 || y->ndim == 3 ? y->shape[y->ndim - 1] : 0;
  info->has_training = tr != NULL;
  if (!tr) {
    /* No training object: classification when the output looks like (batch, classes) or
     * (batch, tokens, classes), else regression (a feature map, an embedding of rank 4) */
    info->classes = out_classes;
    if (!out_classes) t->loss = PK_LOSS_MSE;
    return PK_OK;
  }
  const char *where = "training";
  const char *loss = "softmax_cross_entropy";
  pk_status s;
  if ((s = pk_fe_keys(f, where, tr, TRAINING_KEYS)) != PK_OK ||
      (s = pk_fe_string(f, where, tr, "loss", false, &loss)) != PK_OK)
    return s;
  if (strcmp(loss, "softmax_cross_entropy") == 0) {
    t->loss = PK_LOSS_SOFTMAX_XENT;
    if (y->ndim != 2 && y->ndim != 3)
      return pk_fe_fail(f, where,
                        "loss softmax_cross_entropy needs a (batch, classes) or (batch, tokens, "
                        "classes) output, %s is %s",
                        pk_fe_quote(f, y->name), pk_fe_shape_str(f, y->ndim, y->shape));
    info->classes = out_classes;
    int64_t classes = out_classes;
    if ((s = pk_fe_int(f, where, tr, "classes", false, 1, PK_OP_MAX_EXTENT, &classes)))
      return s;
    if (classes != out_classes)
      return pk_fe_fail(f, where, "classes is %lld, the output %s has %lld",
                        (long long)classes, pk_fe_quote(f, y->name), (long long)out_classes);
    /* PyTorch's cross_entropy options; labels are integers (never one-hot) */
    t->has_ignore_index = pk_fe_get(tr, "ignore_index") != NULL;
    if ((s = pk_fe_int(f, where, tr, "ignore_index", false, -INT32_MAX, INT32_MAX,
                       &t->ignore_index)) ||
        (s = pk_fe_double(f, where, tr, "label_smoothing", false, 0, false, 1,
                          &t->label_smoothing)))
      return s;
  } else if (strcmp(loss, "mse") == 0) {
    t->loss = PK_LOSS_MSE;
    if ((s = fe_not_here(f, where, tr, "classes", "applies to softmax_cross_entropy only")) ||
        (s = fe_not_here(f, where, tr, "ignore_index", "applies to softmax_cross_entropy only")) ||
        (s = fe_not_here(f, where, tr, "label_smoothing",
                         "applies to softmax_cross_entropy only")))
      return s;
  } else {
    return pk_fe_fail(f, where, "loss %s is not softmax_cross_entropy or mse",
                      pk_fe_quote(f, loss));
  }
  const cJSON *o = pk_fe_get(tr, "optimizer");
  if (o && (s = fe_optimizer(f, o, t)) != PK_OK) return s;
  o = pk_fe_get(tr, "lr_schedule");
  if (o && (s = fe_schedule(f, o, t)) != PK_OK) return s;
  /* "auto": batch norm layers whose gamma or beta trains use batch statistics, frozen ones
   * their running stats; "train": all use batch statistics (PyTorch's model.train()) */
  const char *bn = "auto";
  if ((s = pk_fe_string(f, where, tr, "bn_mode", false, &bn)) != PK_OK) return s;
  if (strcmp(bn, "train") != 0 && strcmp(bn, "auto") != 0)
    return pk_fe_fail(f, where, "bn_mode %s is not \"auto\" or \"train\"", pk_fe_quote(f, bn));
  t->bn_train_all = strcmp(bn, "train") == 0;
  return PK_OK;
}
