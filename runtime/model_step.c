/* model_step.c — what runs per step: feeding labels and row weights, the learning-rate
 * schedule and the H tensor, and running a plan's kernels. Nothing here allocates: every
 * buffer was built at open. */
#include <math.h>
#include <string.h>

#include "model_impl.h"

double rt_lr_at(const rt_optimizer *o, double base, int64_t t) {
  /* s = optimizer steps already taken, as PyTorch's schedulers count after each
   * optimizer.step(); the warmup's ramp, then the schedule over the steps after it. */
  int64_t s = t > 0 ? t - 1 : 0, w = o->warmup_steps > 0 ? o->warmup_steps : 0;
  if (s < w) return base * (double)s / (double)w;
  s -= w;
  double lr = base;
  switch (o->sched) {
  case RT_SCHED_CONSTANT: break;
  case RT_SCHED_STEP: lr = base * pow(o->gamma, (double)(s / o->step_size)); break;
  case RT_SCHED_COSINE: {
    int64_t T = o->total_steps - w; /* >= 1: the manifest checks total_steps > warmup */
    double p = (double)(s < T ? s : T) / (double)T;
    lr = o->min_lr + (base - o->min_lr) * (1 + cos(M_PI * p)) / 2;
    break;
  }
  }
  return lr;
}

/* Optimizer steps are every accum_steps training steps: step t_opt (1, 2, ...) of the
 * training step that follows `steps` taken ones, and the micro-step within its group. */
static int64_t opt_step(const rt_optimizer *o, int64_t steps) {
  return steps / (o->accum_steps > 1 ? o->accum_steps : 1) + 1;
}

static void store(void *base, pkrt_dtype dt, int64_t i, double v) {
  if (dt == PKRT_DTYPE_F64) ((double *)base)[i] = v;
  else ((float *)base)[i] = (float)v;
}

static double load(const void *base, pkrt_dtype dt, int64_t i) {
  return dt == PKRT_DTYPE_F64 ? ((const double *)base)[i] : ((const float *)base)[i];
}

/* Integer labels: rows [valid, batch) of the label buffer get -1, which the loss ignores
 * (they weigh nothing and do not count in the mean). */
static void pad_int_labels(pkrt_model *m, int64_t valid) {
  const rt_manifest *mf = &m->mf;
  int64_t *tg = (int64_t *)rt_tensor_base(m, &mf->tensors[mf->target_t]);
  for (int64_t i = valid * mf->label_width; i < mf->batch * mf->label_width; i++) tg[i] = -1;
}

static pkrt_status write_row_weights(pkrt_model *m, int64_t valid) {
  const rt_manifest *mf = &m->mf;
  if (mf->int_labels) {
    if (valid < 1 || valid > mf->batch)
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "valid rows %lld out of range [1, %lld]",
                           (long long)valid, (long long)mf->batch);
    pad_int_labels(m, valid);
    m->valid = valid;
    return PKRT_OK;
  }
  if (mf->row_weight < 0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "this model has no loss inputs (inference "
                                                "artifact)");
  if (valid < 1 || valid > mf->batch)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "valid rows %lld out of range [1, %lld]",
                         (long long)valid, (long long)mf->batch);
  const rt_tensor *t = &mf->tensors[mf->row_weight];
  unsigned char *rw = rt_tensor_base(m, t);
  for (int64_t r = 0; r < mf->batch; r++) store(rw, t->dtype, r, r < valid ? 1.0 / valid : 0);
  m->valid = valid;
  return PKRT_OK;
}

int pkrt_model_set_labels(pkrt_model *m, const int32_t *labels, int64_t valid) {
  if (!m) return PKRT_ERR_INPUT;
  const rt_manifest *mf = &m->mf;
  if (mf->classes <= 0 || mf->target_t < 0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                         mf->target_t < 0 ? "this model has no targets (inference artifact)"
                                          : "regression model: write the targets through "
                                            "pkrt_model_targets() instead of labels");
  if (valid < 1 || valid > mf->batch)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "valid rows %lld out of range [1, %lld]",
                         (long long)valid, (long long)mf->batch);
  if (!labels) return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "labels is NULL");
  /* All labels are checked first: a refused batch leaves the previous one intact. */
  for (int64_t r = 0; r < valid * mf->label_width; r++)
    if ((labels[r] < 0 || labels[r] >= mf->classes) &&
        !(mf->has_ignore_index && labels[r] == mf->ignore_index))
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                           "label %d in row %lld is out of range for %lld classes",
                           (int)labels[r], (long long)r, (long long)mf->classes);
  const rt_tensor *t = &mf->tensors[mf->target_t];
  unsigned char *tg = rt_tensor_base(m, t);
  if (mf->int_labels) { /* the labels themselves, label_width per row: no one-hot */
    for (int64_t i = 0; i < valid * mf->label_width; i++) ((int64_t *)tg)[i] = labels[i];
    return write_row_weights(m, valid);
  }
  memset(tg, 0, (size_t)t->numel * pkrt_dtype_size(t->dtype));
  for (int64_t r = 0; r < valid; r++) store(tg, t->dtype, r * mf->classes + labels[r], 1.0);
  return write_row_weights(m, valid);
}

int pkrt_model_set_valid_rows(pkrt_model *m, int64_t valid) {
  return m ? write_row_weights(m, valid) : PKRT_ERR_INPUT;
}

void *pkrt_model_input(pkrt_model *m, const char *name) {
  if (!m) return NULL;
  const rt_manifest *mf = &m->mf;
  if (!name) return rt_tensor_base(m, &mf->tensors[mf->input]);
  for (int i = 0; i < mf->ntensors; i++)
    if (mf->tensors[i].role == RT_ROLE_INPUT && strcmp(mf->tensors[i].name, name) == 0 &&
        !mf->tensors[i].view)
      return rt_tensor_base(m, &mf->tensors[i]);
  pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "no input named '%s'", name);
  return NULL;
}

void *pkrt_model_targets(pkrt_model *m) {
  if (!m || m->mf.target_t < 0) return NULL;
  return rt_tensor_base(m, &m->mf.tensors[m->mf.target_t]);
}

const void *pkrt_model_output(const pkrt_model *m) {
  return m ? rt_tensor_base(m, &m->mf.tensors[m->mf.output]) : NULL;
}

int pkrt_model_set_lr(pkrt_model *m, double lr) {
  if (!m) return PKRT_ERR_INPUT;
  if (!isfinite(lr) || lr < 0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "learning rate %g is not a finite number >= 0",
                         lr);
  m->lr = lr;
  return PKRT_OK;
}

double pkrt_model_lr(const pkrt_model *m) { return m ? m->lr : 0; }

pkrt_status rt_plan_run(pkrt_model *m, rt_plan_kind p) {
  const rt_plan *plan = &m->mf.plans[p];
  if (!plan->present)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "this model has no '%s' plan%s",
                         rt_plan_names[p], m->mf.train ? "" : " (inference artifact)");
  return rt_plan_run_steps(m, p, 0, plan->n);
}

void rt_model_weights_changed(pkrt_model *m) { m->fold_stale = m->mf.plans[RT_PLAN_LOAD].present; }

pkrt_status rt_model_fold(pkrt_model *m) {
  if (!m->fold_stale) return PKRT_OK;
  pkrt_status st = rt_plan_run_steps(m, RT_PLAN_LOAD, 0, m->mf.plans[RT_PLAN_LOAD].n);
  if (st == PKRT_OK) m->fold_stale = false;
  return st;
}

pkrt_status rt_plan_run_steps(pkrt_model *m, rt_plan_kind p, int from, int to) {
  const rt_plan *plan = &m->mf.plans[p];
  pkrt_status fst = p == RT_PLAN_LOAD ? PKRT_OK : rt_model_fold(m);
  if (fst != PKRT_OK) return fst;
  if (m->gpu) return rt_gpu_run_steps(m, p, from, to);
  pkrt_exec_ctx *exec = pkrt_ctx_exec(m->rt);
  for (int s = from; s < to; s++) {
    const rt_step *st = &plan->steps[s];
    const rt_kernel *K = &m->mf.kernels[st->kernel];
    if (K->ext >= 0) { /* backend switching: the extern that won tuning (checked at open) */
      const rt_sgemm *g = &K->sgemm;
      pkrt_extern_sgemm(m->mf.externs[K->ext].fn, g->trans_a, g->trans_b, g->m, g->n, g->k,
                        st->bufs[g->a].data, g->lda, st->bufs[g->b].data, g->ldb,
                        st->bufs[g->c].data, g->ldc);
      continue;
    }
    int rc = st->fn(st->bufs, st->nbufs, st->scalars, st->nscalars, m->workspace, exec);
    if (rc != PKRT_KERNEL_OK)
      return pkrt_ctx_fail(
          m->rt, PKRT_ERR_KERNEL, "plan '%s' step %d (node '%s', kernel '%s'): %s",
          rt_plan_names[p], s, st->node, m->mf.kernels[st->kernel].name,
          rc == PKRT_KERNEL_BAD_ARGS
              ? "bad arguments: a buffer's dtype, shape or strides differ from what the "
                "kernel was compiled for"
              : "the kernel failed");
  }
  return PKRT_OK;
}

static double read_loss(const pkrt_model *m) {
  const rt_tensor *t = &m->mf.tensors[m->mf.loss];
  return load(rt_tensor_base(m, t), t->dtype, t->elem_offset);
}

/* io.rng = (seed, step): step t of training, -1 for evaluation and inference (dropout
 * passes everything through then; te/ops/pk_ops.h). */
static void write_rng(pkrt_model *m, int64_t step) {
  if (m->mf.rng < 0) return;
  int64_t s[2] = {m->seed, step};
  memcpy(rt_tensor_base(m, &m->mf.tensors[m->mf.rng]), s, sizeof s);
}

int pkrt_model_set_seed(pkrt_model *m, uint64_t seed) {
  if (!m) return PKRT_ERR_INPUT;
  m->seed = (int64_t)seed;
  return PKRT_OK;
}

void rt_train_begin(pkrt_model *m) {
  const rt_manifest *mf = &m->mf;
  /* H = (lr, Adam's bias corrections, micro-step): with accumulation the kernels add each
   * step's gradient and update only on the group's last micro-step */
  int64_t t = opt_step(&mf->opt, m->steps), k = mf->opt.accum_steps > 1 ? mf->opt.accum_steps : 1;
  const rt_tensor *h = &mf->tensors[mf->hyper];
  unsigned char *hb = rt_tensor_base(m, h);
  store(hb, h->dtype, 0, rt_lr_at(&mf->opt, m->lr, t));
  store(hb, h->dtype, 1, 1 - pow(mf->opt.beta1, (double)t));
  store(hb, h->dtype, 2, 1 - pow(mf->opt.beta2, (double)t));
  store(hb, h->dtype, 3, (double)(m->steps % k));
  write_rng(m, t);
}

void rt_train_end(pkrt_model *m, double *loss) {
  m->steps++;
  if (loss) *loss = read_loss(m);
}

int pkrt_model_train_step(pkrt_model *m, double *loss) {
  if (!m) return PKRT_ERR_INPUT;
  if (!m->mf.train)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "this is an inference artifact: it cannot train");
  rt_train_begin(m);
  pkrt_status st = rt_plan_run(m, RT_PLAN_TRAIN);
  if (st != PKRT_OK) return st;
  rt_train_end(m, loss);
  return PKRT_OK;
}

/* H[3] = -1: the kernels evaluate (batch norm in training mode then normalizes with its
 * running stats); a training step writes its accumulation micro-step (>= 0) there. */
static void set_evaluating(pkrt_model *m) {
  const rt_manifest *mf = &m->mf;
  if (mf->hyper < 0) return;
  const rt_tensor *h = &mf->tensors[mf->hyper];
  store(rt_tensor_base(m, h), h->dtype, 3, -1);
}

int pkrt_model_eval_step(pkrt_model *m, double *loss) {
  if (!m) return PKRT_ERR_INPUT;
  if (m->mf.loss < 0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "this model has no loss (inference artifact)");
  set_evaluating(m);
  write_rng(m, -1);
  pkrt_status st = rt_plan_run(m, RT_PLAN_EVAL);
  if (st == PKRT_OK && loss) *loss = read_loss(m);
  return st;
}

int pkrt_model_infer(pkrt_model *m) {
  if (!m) return PKRT_ERR_INPUT;
  set_evaluating(m);
  write_rng(m, -1);
  return rt_plan_run(m, RT_PLAN_INFER);
}
