/* train_loop.c — the training loop `pock train` and `pock-rt train` share, and dataset
 * evaluation: shuffled epochs from a seeded PRNG, padded last batch, per-epoch metrics
 * (terminal progress bar or plain lines, JSONL log), a stop flag for Ctrl-C, checkpoints
 * and bit-identical resume. All buffers are allocated before the first step. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint_impl.h"
#include "data_impl.h"
#include "model_impl.h"

/* xoshiro256** seeded through splitmix64 (Vigna): small, fast, and its state lives in
 * the loop, so runs with one seed repeat exactly. */
typedef struct prng {
  uint64_t s[4];
} prng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void prng_seed(prng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t prng_next(prng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

/* Uniform in [0, n) by rejection, so no index is favoured. */
static uint64_t prng_below(prng *r, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = prng_next(r);
  while (x >= limit);
  return x % n;
}

static void shuffle(prng *r, int64_t *perm, int64_t n) {
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)prng_below(r, (uint64_t)i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

/* Inputs 2.. of a dataset against the model's (graph I/O: several inputs). */
static pkrt_status check_inputs(pkrt_model *m, const pkrt_dataset *d, const char *what) {
  const rt_manifest *mf = &m->mf;
  if (d->nextra + 1 != mf->ninputs)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "%s: %d input array%s, but the model has %d "
                         "inputs (load the dataset with .model set)", what, d->nextra + 1,
                         d->nextra ? "s" : "", mf->ninputs);
  for (int k = 1; k < mf->ninputs; k++) {
    const rt_tensor *t = &mf->tensors[mf->inputs[k]];
    const rt_dinput *in = &d->extra[k - 1];
    if (in->batch != !t->no_batch || in->dtype != t->dtype ||
        in->per_row != (t->no_batch ? t->numel : t->numel / mf->batch))
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "%s: input %d does not fit the model's "
                           "input '%s' (load the dataset with .model set)", what, k + 1, t->name);
  }
  return PKRT_OK;
}

static pkrt_status check_fits(pkrt_model *m, const pkrt_dataset *d, const char *what) {
  const rt_manifest *mf = &m->mf;
  if (mf->classes <= 0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                         "%s: the training loop needs a classification model (classes > 0)",
                         what);
  if (!d || d->rows < 1) return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "%s: no rows", what);
  if (d->features != m->features)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                         "%s: %lld features per row, but the model's input takes %lld", what,
                         (long long)d->features, (long long)m->features);
  pkrt_dtype in0 = mf->tensors[mf->input].dtype;
  if (d->dtype != in0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                         "%s: features are stored as %s but the model %s %s (load the dataset "
                         "with .model set)", what, pkrt_dtype_name(d->dtype),
                         in0 == mf->dtype ? "computes in" : "input takes", pkrt_dtype_name(in0));
  pkrt_status st = check_inputs(m, d, what);
  if (st != PKRT_OK) return st;
  int64_t lw = d->label_width > 1 ? d->label_width : 1;
  if (lw != mf->label_width)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                         "%s: %lld labels per row, but the model takes %lld (load the dataset "
                         "with .model set)", what, (long long)lw, (long long)mf->label_width);
  for (int64_t i = 0; i < d->rows * lw; i++)
    if ((d->labels[i] < 0 || d->labels[i] >= mf->classes) &&
        !(mf->has_ignore_index && d->labels[i] == mf->ignore_index))
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                           "%s: row %lld: label %d is out of range for a model with %lld classes",
                           what, (long long)(i / lw) + 1, (int)d->labels[i],
                           (long long)mf->classes);
  return PKRT_OK;
}

/* The model's inputs 2..: rows as for the first input (padding rows zero), a batch-less
 * input whole, every step (nothing the step runs writes an input, but a caller may have). */
static void feed_extra(pkrt_model *m, const pkrt_dataset *d, const int64_t *idx, int64_t first,
                       int64_t valid) {
  const rt_manifest *mf = &m->mf;
  for (int k = 1; k < mf->ninputs && k <= d->nextra; k++) {
    const rt_dinput *x = &d->extra[k - 1];
    unsigned char *in = rt_tensor_base(m, &mf->tensors[mf->inputs[k]]);
    size_t row = (size_t)x->per_row * pkrt_dtype_size(x->dtype);
    if (!x->batch) {
      memcpy(in, x->data, row);
      continue;
    }
    for (int64_t i = 0; i < valid; i++) {
      int64_t r = idx ? idx[first + i] : first + i;
      memcpy(in + (size_t)i * row, (const unsigned char *)x->data + (size_t)r * row, row);
    }
    if (valid < mf->batch) memset(in + (size_t)valid * row, 0, (size_t)(mf->batch - valid) * row);
  }
}

int pkrt_model_feed(pkrt_model *m, const pkrt_dataset *d, int64_t first, int64_t valid) {
  if (!m || !d) return PKRT_ERR_INPUT;
  const rt_manifest *mf = &m->mf;
  if (first < 0 || valid < 0 || valid > mf->batch || first > d->rows - valid)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "feed: rows [%lld, %lld) are not within the "
                         "dataset's %lld and the batch of %lld", (long long)first,
                         (long long)(first + valid), (long long)d->rows, (long long)mf->batch);
  if (d->features != m->features || d->dtype != mf->tensors[mf->input].dtype)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "feed: the dataset's first input does not fit "
                         "the model's (load the dataset with .model set)");
  pkrt_status st = check_inputs(m, d, "feed");
  if (st != PKRT_OK) return st;
  size_t row = (size_t)d->features * pkrt_dtype_size(d->dtype);
  unsigned char *in = rt_tensor_base(m, &mf->tensors[mf->input]);
  memcpy(in, (const unsigned char *)d->x + (size_t)first * row, row * (size_t)valid);
  memset(in + (size_t)valid * row, 0, row * (size_t)(mf->batch - valid));
  feed_extra(m, d, NULL, first, valid);
  return PKRT_OK;
}

/* Whether the loss counts a label (cross_entropy's rule: a class id, not ignore_index). */
static bool counted(const rt_manifest *mf, int32_t l) {
  return l >= 0 && l < mf->classes && !(mf->has_ignore_index && l == mf->ignore_index);
}

/* Copies rows idx[0..valid) (idx NULL: rows first..first+valid) into the input, zeros the
 * padding rows, and sets the labels. */
static pkrt_status feed(pkrt_model *m, const pkrt_dataset *d, const int64_t *idx, int64_t first,
                        int64_t valid, int32_t *labels) {
  const rt_manifest *mf = &m->mf;
  size_t row = (size_t)d->features * pkrt_dtype_size(d->dtype);
  unsigned char *in = rt_tensor_base(m, &mf->tensors[mf->input]);
  const unsigned char *x = d->x;
  int64_t lw = mf->label_width;
  for (int64_t i = 0; i < valid; i++) {
    int64_t r = idx ? idx[first + i] : first + i;
    memcpy(in + (size_t)i * row, x + (size_t)r * row, row);
    memcpy(labels + i * lw, d->labels + r * lw, sizeof(int32_t) * (size_t)lw);
  }
  if (valid < mf->batch) memset(in + (size_t)valid * row, 0, (size_t)(mf->batch - valid) * row);
  feed_extra(m, d, idx, first, valid);
  return (pkrt_status)pkrt_model_set_labels(m, labels, valid);
}

/* Labels among the first `valid` rows' (label_width each) that the loss counts (*nlabels)
 * and whose output argmax (first maximum) equals the label (returned). */
static int64_t count_correct(const pkrt_model *m, const int32_t *labels, int64_t valid,
                             int64_t *nlabels) {
  const rt_manifest *mf = &m->mf;
  const void *out = pkrt_model_output(m);
  int64_t k = mf->classes, correct = 0;
  *nlabels = 0;
  for (int64_t i = 0; i < valid * mf->label_width; i++) {
    if (!counted(mf, labels[i])) continue;
    ++*nlabels;
    int64_t best = 0;
    double bv = -INFINITY;
    for (int64_t c = 0; c < k; c++) {
      double v = mf->dtype == PKRT_DTYPE_F64 ? ((const double *)out)[i * k + c]
                                             : ((const float *)out)[i * k + c];
      if (v > bv) bv = v, best = c;
    }
    correct += best == labels[i];
  }
  return correct;
}

int pkrt_eval_run(pkrt_model *m, const pkrt_dataset *d, double *loss, double *acc) {
  if (!m) return PKRT_ERR_INPUT;
  pkrt_status st = check_fits(m, d, "evaluation data");
  if (st != PKRT_OK) return st;
  const rt_manifest *mf = &m->mf;
  /* Inference artifacts have no loss: accuracy from the infer plan, loss NAN. */
  bool with_loss = mf->plans[RT_PLAN_EVAL].present && mf->loss >= 0 && mf->target_t >= 0;
  int32_t *labels = malloc(sizeof(int32_t) * (size_t)(mf->batch * mf->label_width));
  if (!labels) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
  double sum = 0;
  int64_t correct = 0, nlabels = 0;
  for (int64_t first = 0; first < d->rows && st == PKRT_OK; first += mf->batch) {
    int64_t valid = d->rows - first < mf->batch ? d->rows - first : mf->batch;
    double l = 0;
    if (with_loss) {
      st = feed(m, d, NULL, first, valid, labels);
      if (st == PKRT_OK) st = (pkrt_status)pkrt_model_eval_step(m, &l);
    } else {
      size_t row = (size_t)d->features * pkrt_dtype_size(d->dtype);
      unsigned char *in = rt_tensor_base(m, &mf->tensors[mf->input]);
      memset(in, 0, row * (size_t)mf->batch);
      memcpy(in, (const unsigned char *)d->x + (size_t)first * row, row * (size_t)valid);
      feed_extra(m, d, NULL, first, valid);
      memcpy(labels, d->labels + first * mf->label_width,
             sizeof(int32_t) * (size_t)(valid * mf->label_width));
      st = (pkrt_status)pkrt_model_infer(m);
    }
    if (st != PKRT_OK) break;
    /* the batch loss is the mean over its counted labels: weigh it by their count */
    int64_t n;
    correct += count_correct(m, labels, valid, &n);
    sum += l * (double)n;
    nlabels += n;
  }
  free(labels);
  if (st != PKRT_OK) return st;
  if (loss) *loss = with_loss && nlabels ? sum / (double)nlabels : NAN;
  if (acc) *acc = nlabels ? (double)correct / (double)nlabels : NAN;
  return PKRT_OK;
}

static void progress(FILE *out, int epoch, int epochs, int64_t done, int64_t total,
                     double loss) {
  char bar[31];
  int fill = total ? (int)(30 * done / total) : 30;
  for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
  bar[30] = 0;
  fprintf(out, "\r\033[Kepoch %d/%d [%s] %lld/%lld loss %.4f", epoch, epochs, bar,
          (long long)done, (long long)total, loss);
  fflush(out);
}

/* Step times kept for the median: 4 MiB of floats (twice, with the working copy) covers
 * a million steps; a longer run's median is over its latest million. */
#define MAX_TIMED ((int64_t)1 << 20)

typedef struct loop {
  pkrt_model *m;
  const pkrt_dataset *d;
  const pkrt_train_options *o;
  FILE *out, *metrics;
  int metrics_errno;            /* the first failed metrics write; the log is closed then */
  bool bar;
  int64_t *perm;
  int32_t *labels;
  int64_t step_ns;
  /* Every step's time of this run, for the median: sized in setup for the most steps the
   * run can take (at most MAX_TIMED: a longer run keeps its latest, as a ring), so a step
   * allocates nothing; scratch is the median's working copy. nt counts every step. */
  float *step_ms, *scratch;
  int64_t cap, nt;
  int64_t start_steps;          /* the model's step count when this run began */
  prng rng;
  rt_loop_state ls;             /* the position a checkpoint records; ls.perm is perm */
  rt_frozen_cache *cache;       /* --cache-frozen, or NULL */
  int64_t epoch_ns;             /* step time of the current epoch */
} loop;

static bool should_stop(const loop *L) {
  const pkrt_train_options *o = L->o;
  return (o->stop && *o->stop) || (o->max_steps > 0 && L->m->steps - L->start_steps >= o->max_steps);
}

static pkrt_status save_checkpoint(loop *L) {
  if (!L->o->checkpoint_path) return PKRT_OK;
  memcpy(L->ls.rng, L->rng.s, sizeof L->rng.s);
  return rt_checkpoint_write(L->m, L->o->checkpoint_path, &L->ls);
}

/* Runs the current epoch from step ls.pos on; returns with *stopped set when asked to stop.
 * The epoch's sums live in ls, so a checkpoint taken mid-epoch resumes them exactly. */
static pkrt_status run_epoch(loop *L, int epoch, double *loss, double *acc, bool *stopped) {
  pkrt_model *m = L->m;
  const pkrt_dataset *d = L->d;
  rt_loop_state *ls = &L->ls;
  int64_t b = m->mf.batch, nsteps = (d->rows + b - 1) / b, every = L->o->checkpoint_every;
  int64_t last_bar = 0;
  for (int64_t s = ls->pos; s < nsteps; s++) {
    if (should_stop(L)) {
      *stopped = true;
      break;
    }
    int64_t first = s * b, valid = d->rows - first < b ? d->rows - first : b;
    int64_t t0 = pkrt_now_ns();
    double l;
    pkrt_status st = feed(m, d, L->perm, first, valid, L->labels);
    if (st == PKRT_OK)
      st = L->cache ? rt_frozen_cache_step(L->cache, L->perm, first, valid, &l)
                    : (pkrt_status)pkrt_model_train_step(m, &l);
    if (st != PKRT_OK) return st;
    /* The step's update ran in place, so the weights may already hold inf or NaN: stop
     * with an error, and the caller saves neither weights nor checkpoint (the files of
     * earlier epochs or checkpoints stay the last good state). */
    if (!isfinite(l))
      return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT,
                           "step %lld (epoch %d): the loss is %g: training stopped, weights not "
                           "saved (lower the learning rate, or check the data's scale)",
                           (long long)m->steps, epoch, l);
    int64_t dt = pkrt_now_ns() - t0;
    L->step_ns += dt;
    L->epoch_ns += dt;
    if (L->cap) L->step_ms[L->nt++ % L->cap] = (float)((double)dt / 1e6);
    /* sums over the labels the loss counts (rows; tokens for per-token labels) */
    int64_t n, c = count_correct(m, L->labels, valid, &n);
    ls->loss_sum += l * (double)n;
    ls->seen += n;
    ls->correct += c;
    ls->pos = s + 1;
    /* Counted in total steps, so resumed runs checkpoint at the same points; the epoch's
     * last step is left to the end-of-epoch checkpoint. */
    if (every > 0 && m->steps % every == 0 && s + 1 < nsteps &&
        (st = save_checkpoint(L)) != PKRT_OK)
      return st;
    /* A bar redrawn at most ~10 times a second costs nothing next to the steps. */
    if (L->bar && (pkrt_now_ns() - last_bar > 100000000 || s + 1 == nsteps)) {
      progress(L->out, epoch, L->o->epochs, s + 1, nsteps, ls->loss_sum / (double)ls->seen);
      last_bar = pkrt_now_ns();
    }
  }
  *loss = ls->seen ? ls->loss_sum / (double)ls->seen : NAN;
  *acc = ls->seen ? (double)ls->correct / (double)ls->seen : NAN;
  return PKRT_OK;
}

static pkrt_status setup(loop *L, pkrt_train_result *r) {
  pkrt_model *m = L->m;
  const pkrt_train_options *o = L->o;
  if (!m->mf.train)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "this is an inference artifact: it cannot train");
  if (o->epochs < 1)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "epochs must be >= 1 (got %d)", o->epochs);
  if (o->checkpoint_every < 0 || o->max_steps < 0)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "checkpoint_every and max_steps must be >= 0");
  pkrt_status st = check_fits(m, L->d, "training data");
  if (st == PKRT_OK && o->val) st = check_fits(m, o->val, "validation data");
  if (st == PKRT_OK && o->lr > 0) st = (pkrt_status)pkrt_model_set_lr(m, o->lr);
  if (st != PKRT_OK) return st;
  if (o->warmup_steps < 0 || o->warmup_steps > INT32_MAX ||
      (o->warmup_steps > 0 && m->mf.opt.sched == RT_SCHED_COSINE &&
       m->mf.opt.total_steps <= o->warmup_steps))
    return pkrt_ctx_fail(m->rt, PKRT_ERR_INPUT, "warmup_steps %lld: must be in 0..%d and below "
                         "the cosine schedule's total_steps (%lld)", (long long)o->warmup_steps,
                         INT32_MAX, (long long)m->mf.opt.total_steps);
  if (o->warmup_steps > 0) m->mf.opt.warmup_steps = o->warmup_steps;
  L->perm = malloc(sizeof(int64_t) * (size_t)L->d->rows);
  L->labels = malloc(sizeof(int32_t) * (size_t)(m->mf.batch * m->mf.label_width));
  if (!L->perm || !L->labels) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < L->d->rows; i++) L->perm[i] = i;
  prng_seed(&L->rng, o->seed);
  pkrt_model_set_seed(m, o->seed); /* dropout masks follow the run's seed too */
  L->ls = (rt_loop_state){.rows = L->d->rows, .perm = L->perm};
  if (o->checkpoint_path || o->resume_path) rt_dataset_digest(L->d, L->ls.data_sha);
  if (o->resume_path) {
    if ((st = rt_checkpoint_read(m, o->resume_path, &L->ls)) != PKRT_OK) return st;
    memcpy(L->rng.s, L->ls.rng, sizeof L->rng.s);
    /* An explicit lr still wins over the one the checkpoint restored. */
    if (o->lr > 0 && (st = (pkrt_status)pkrt_model_set_lr(m, o->lr)) != PKRT_OK) return st;
  }
  /* The most steps this run can take: the epochs left (less the steps of the resumed
   * epoch already taken), or max_steps when that is fewer. */
  int64_t b = m->mf.batch, per = (L->d->rows + b - 1) / b;
  int64_t left = ((int64_t)o->epochs - L->ls.epochs_done) * per - L->ls.pos;
  L->cap = left < 0 ? 0 : left;
  if (o->max_steps > 0 && o->max_steps < L->cap) L->cap = o->max_steps;
  if (L->cap > MAX_TIMED) L->cap = MAX_TIMED;
  if (o->cache_frozen) {
    if ((st = rt_frozen_cache_new(m, L->d->rows, o->cache_budget, &L->cache)) != PKRT_OK)
      return st;
    if (!o->quiet)
      fprintf(L->out, "cache-frozen: the first %d of %d steps' kernels are the frozen prefix; "
              "%d tensors cached for %lld rows (%lld bytes)\n", m->mf.cache_prefix,
              m->mf.plans[RT_PLAN_TRAIN].n, m->mf.ncache, (long long)L->d->rows,
              (long long)rt_frozen_cache_bytes(L->cache));
  }
  L->step_ms = malloc(sizeof(float) * (size_t)(L->cap + 1));
  L->scratch = malloc(sizeof(float) * (size_t)(L->cap + 1));
  if (!L->step_ms || !L->scratch) return pkrt_ctx_fail(m->rt, PKRT_ERR_NOMEM, "out of memory");
  /* Outputs are checked before the first step (rt_file.h), so a bad path costs no
   * training; the checkpoint may be the file resumed from (in-place update). A resumed
   * run appends to the log of the run it continues; the log may be a pipe. */
  const char *const outs[] = {o->resume_path, o->save_path, o->checkpoint_path};
  if ((o->save_path && (st = rt_file_check_output(m->rt, o->save_path, 0, outs, 1)) != PKRT_OK) ||
      (o->checkpoint_path &&
       (st = rt_file_check_output(m->rt, o->checkpoint_path, 0, outs + 1, 1)) != PKRT_OK) ||
      (o->metrics_path && (st = rt_file_open_stream(m->rt, o->metrics_path, o->resume_path != NULL,
                                                    outs, 3, &L->metrics)) != PKRT_OK))
    return st;
  r->val_loss = r->val_acc = NAN;
  r->loss = r->acc = NAN;
  return PKRT_OK;
}

/* A metrics write that fails (a full disk) is remembered, not fatal: training goes on,
 * weights and checkpoints are saved, and the run then reports the error. */
static void metrics_check(loop *L, int rc) {
  if (rc >= 0 && fflush(L->metrics) == 0 && !ferror(L->metrics)) return;
  L->metrics_errno = errno ? errno : EIO;
  fclose(L->metrics);
  L->metrics = NULL;
}

/* The optimizer step the last training step belonged to (accumulation groups k steps). */
static int64_t last_opt_step(const pkrt_model *m) {
  int64_t k = m->mf.opt.accum_steps > 1 ? m->mf.opt.accum_steps : 1;
  return (m->steps + k - 1) / k;
}

/* The median of the run's step times so far (0 before any step): a quickselect on a copy,
 * O(steps) once an epoch; the mean alone hides a few slow steps' noise (issue 23). */
static double median_ms(loop *L) {
  int64_t n = L->nt < L->cap ? L->nt : L->cap;
  if (n == 0) return 0;
  float *a = L->scratch;
  memcpy(a, L->step_ms, sizeof(float) * (size_t)n);
  int64_t k = (n - 1) / 2, lo = 0, hi = n - 1;
  while (lo < hi) { /* Hoare partition around the middle element until a[k] is in place */
    float pivot = a[lo + (hi - lo) / 2];
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) {
        float t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else break;
  }
  if (n % 2) return a[k];
  float up = a[k + 1]; /* even count: the mean of a[k] and the smallest above it */
  for (int64_t i = k + 2; i < n; i++)
    if (a[i] < up) up = a[i];
  return ((double)a[k] + (double)up) / 2;
}

/* The process's peak resident set in KiB (VmHWM of /proc/self/status), -1 where the
 * system has none. read(2) into a stack buffer: no allocation, once an epoch. */
static int64_t peak_rss_kb(void) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char *p = strstr(buf, "VmHWM:");
  long long kb;
  return p && sscanf(p, "VmHWM: %lld kB", &kb) == 1 ? (int64_t)kb : -1;
}

static void print_epoch(loop *L, int epoch, const pkrt_train_result *r, double ms) {
  const pkrt_train_options *o = L->o;
  double median = median_ms(L);
  if (!o->quiet) {
    if (L->bar) fputs("\r\033[K", L->out);
    fprintf(L->out, "epoch %d/%d loss %.4f acc %.4f", epoch, o->epochs, r->loss, r->acc);
    if (o->val) fprintf(L->out, " val_loss %.4f val_acc %.4f", r->val_loss, r->val_acc);
    fprintf(L->out, " ms/step %.3f median %.3f", ms, median);
    if (L->cache) fprintf(L->out, " epoch %.3f ms", (double)L->epoch_ns / 1e6);
    fputc('\n', L->out);
    fflush(L->out);
  }
  if (L->metrics) {
    errno = 0;
    int rc = fprintf(L->metrics,
            "{\"epoch\": %d, \"epochs\": %d, \"steps\": %lld, \"loss\": %.17g, \"acc\": %.17g",
            epoch, o->epochs, (long long)L->m->steps, r->loss, r->acc);
    if (o->val && rc >= 0)
      rc = fprintf(L->metrics, ", \"val_loss\": %.17g, \"val_acc\": %.17g", r->val_loss, r->val_acc);
    if (rc >= 0)
      rc = fprintf(L->metrics, ", \"ms_per_step\": %.6f, \"lr\": %.17g, \"ms_median\": %.6f",
                   ms, rt_lr_at(&L->m->mf.opt, L->m->lr, last_opt_step(L->m)), median);
    if (rc >= 0 && L->cache) /* --cache-frozen: what the cache saves shows per epoch */
      rc = fprintf(L->metrics, ", \"epoch_ms\": %.6f, \"cache_hits\": %lld",
                   (double)L->epoch_ns / 1e6, (long long)rt_frozen_cache_hits(L->cache));
    int64_t rss = peak_rss_kb();
    if (rc >= 0 && rss >= 0) rc = fprintf(L->metrics, ", \"peak_rss_kb\": %lld", (long long)rss);
    if (rc >= 0) rc = fputs("}\n", L->metrics);
    metrics_check(L, rc);
  }
}

static void print_end(loop *L, const pkrt_train_result *r, pkrt_status wst, pkrt_status cst) {
  const pkrt_train_options *o = L->o;
  if (o->quiet) return;
  if (!r->interrupted) {
    fprintf(L->out, "trained %lld steps, ms/step %.3f median %.3f", (long long)r->steps,
            r->ms_per_step, r->ms_median);
    if (L->cache)
      fprintf(L->out, ", %lld from the frozen cache", (long long)rt_frozen_cache_hits(L->cache));
    if (r->peak_rss_kb >= 0) fprintf(L->out, ", peak RSS %lld kB", (long long)r->peak_rss_kb);
    fputc('\n', L->out);
  } else {
    fprintf(L->out, "%s after %lld steps", o->stop && *o->stop ? "interrupted" : "stopped",
            (long long)r->steps);
    if (o->save_path && wst == PKRT_OK) fprintf(L->out, "; weights saved to %s", o->save_path);
    if (o->checkpoint_path && cst == PKRT_OK)
      fprintf(L->out, "; checkpoint saved to %s", o->checkpoint_path);
    fputc('\n', L->out);
  }
  fflush(L->out);
}

int pkrt_train_run(pkrt_model *m, const pkrt_dataset *train, const pkrt_train_options *opts,
                   pkrt_train_result *result) {
  if (!m || !opts) return PKRT_ERR_INPUT;
  pkrt_train_result dummy, *r = result ? result : &dummy;
  memset(r, 0, sizeof *r);
  loop L = {.m = m, .d = train, .o = opts, .out = opts->out ? opts->out : stdout};
  L.bar = !opts->quiet && (opts->progress > 0 || (opts->progress == 0 && isatty(fileno(L.out))));
  pkrt_status st = setup(&L, r);
  rt_loop_state *ls = &L.ls;
  L.start_steps = m->steps;
  r->epochs = (int)ls->epochs_done;
  if (st == PKRT_OK && opts->resume_path && !opts->quiet) {
    fprintf(L.out, "resumed from %s: epoch %lld, step %lld of the epoch, %lld steps taken\n",
            opts->resume_path, (long long)ls->epochs_done + 1, (long long)ls->pos,
            (long long)m->steps);
    fflush(L.out);
  }
  for (int e = (int)ls->epochs_done + 1; st == PKRT_OK && e <= opts->epochs; e++) {
    if (!ls->in_epoch) {
      if (!opts->no_shuffle) shuffle(&L.rng, L.perm, train->rows);
      ls->in_epoch = 1;
    }
    double loss = NAN, acc = NAN;
    bool stopped = false;
    st = run_epoch(&L, e, &loss, &acc, &stopped);
    if (st != PKRT_OK) break;
    if (stopped) {
      r->interrupted = 1;
      break;
    }
    r->loss = loss;
    r->acc = acc;
    if (opts->val) st = (pkrt_status)pkrt_eval_run(m, opts->val, &r->val_loss, &r->val_acc);
    if (st != PKRT_OK) break;
    ls->epochs_done = e;
    ls->in_epoch = ls->pos = ls->seen = ls->correct = 0;
    ls->loss_sum = 0;
    if ((st = save_checkpoint(&L)) != PKRT_OK) break;
    r->epochs = e;
    int64_t steps = m->steps - L.start_steps;
    print_epoch(&L, e, r, steps ? (double)L.step_ns / 1e6 / (double)steps : 0);
    L.epoch_ns = 0;
  }
  r->steps = m->steps - L.start_steps;
  r->ms_per_step = r->steps ? (double)L.step_ns / 1e6 / (double)r->steps : 0;
  r->ms_median = median_ms(&L);
  r->peak_rss_kb = peak_rss_kb();
  if (L.bar && r->interrupted) fputs("\r\033[K", L.out);
  /* Weights and the checkpoint are saved after an interrupt too: the steps taken are not
   * lost. */
  pkrt_status wst = PKRT_OK, cst = PKRT_OK;
  if (st == PKRT_OK && r->interrupted) cst = save_checkpoint(&L);
  if (st == PKRT_OK && opts->save_path)
    wst = (pkrt_status)pkrt_model_save_weights(m, opts->save_path);
  if (st == PKRT_OK) print_end(&L, r, wst, cst);
  if (L.metrics && fclose(L.metrics) != 0 && !L.metrics_errno) L.metrics_errno = errno;
  free(L.perm);
  free(L.labels);
  free(L.step_ms);
  free(L.scratch);
  rt_frozen_cache_free(L.cache);
  if (st == PKRT_OK && cst == PKRT_OK && wst == PKRT_OK && L.metrics_errno)
    return pkrt_ctx_fail(m->rt, PKRT_ERR_IO, "%s: write: %s", opts->metrics_path,
                         strerror(L.metrics_errno));
  return st != PKRT_OK ? st : cst != PKRT_OK ? cst : wst;
}
