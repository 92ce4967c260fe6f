/* search.c — what every tuner does, whatever its strategy: externs first, each config built
 * and checked (illegal and already seen ones counted and skipped), proposals remembered
 * until measured, history seeded for --resume, best result and early stop tracked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_impl.h"

/* ---- random numbers ---- */

void pk_rng_seed(pk_rng *r, uint64_t seed) { r->state = seed; }

uint64_t pk_rng_next(pk_rng *r) { /* splitmix64 */
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint32_t pk_rng_below(pk_rng *r, uint32_t n) {
  return n ? (uint32_t)(((pk_rng_next(r) >> 32) * (uint64_t)n) >> 32) : 0;
}

double pk_rng_unit(pk_rng *r) { return (double)(pk_rng_next(r) >> 11) * 0x1.0p-53; }

/* ---- small containers ---- */

uint64_t key_of_hash(const char *hex) {
  uint64_t k = 0;
  for (int i = 0; i < 16 && hex && hex[i]; i++) {
    char c = hex[i];
    k = k << 4 | (uint64_t)(c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
  }
  return k ? k : 1;
}

bool key_set_has(const key_set *s, uint64_t key) {
  if (!s->cap) return false;
  for (size_t i = key & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    if (s->slots[i] == key) return true;
    if (!s->slots[i]) return false;
  }
}

void key_set_add(key_set *s, uint64_t key) {
  if (key_set_has(s, key)) return;
  if (2 * (s->n + 1) > s->cap) { /* grow, keeping the load under one half */
    key_set bigger = {pk_xcalloc(s->cap ? 2 * s->cap : 1024, sizeof(uint64_t)), s->cap ? 2 * s->cap : 1024, 0};
    for (size_t i = 0; i < s->cap; i++)
      if (s->slots[i]) key_set_add(&bigger, s->slots[i]);
    free(s->slots);
    *s = bigger;
  }
  size_t i = key & (s->cap - 1);
  while (s->slots[i]) i = (i + 1) & (s->cap - 1);
  s->slots[i] = key;
  s->n++;
}

void key_set_free(key_set *s) {
  free(s->slots);
  memset(s, 0, sizeof *s);
}

void tuner_rows_add(tuner_rows *r, const double *x, double y, const pk_config *cfg) {
  if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 64;
    r->x = pk_xrealloc(r->x, (size_t)r->cap * PK_FEATURE_COUNT * sizeof *r->x);
    r->y = pk_xrealloc(r->y, (size_t)r->cap * sizeof *r->y);
    r->cfg = pk_xrealloc(r->cfg, (size_t)r->cap * sizeof *r->cfg);
    r->has_cfg = pk_xrealloc(r->has_cfg, (size_t)r->cap * sizeof *r->has_cfg);
  }
  memcpy(r->x + (size_t)r->n * PK_FEATURE_COUNT, x, PK_FEATURE_COUNT * sizeof *x);
  r->y[r->n] = y;
  r->has_cfg[r->n] = cfg != NULL;
  if (cfg) r->cfg[r->n] = *cfg;
  else memset(&r->cfg[r->n], 0, sizeof r->cfg[r->n]);
  r->n++;
}

void tuner_rows_free(tuner_rows *r) {
  free(r->x);
  free(r->y);
  free(r->cfg);
  free(r->has_cfg);
  memset(r, 0, sizeof *r);
}

/* ---- the tuner ---- */

const char *pk_tuner_kind_name(pk_tuner_kind k) {
  static const char *const names[] = {"random", "grid", "evo"};
  return (unsigned)k < 3 ? names[k] : "?";
}

bool pk_tuner_kind_from_name(const char *name, pk_tuner_kind *out) {
  for (int k = 0; k < 3; k++)
    if (name && !strcmp(name, pk_tuner_kind_name((pk_tuner_kind)k))) {
      *out = (pk_tuner_kind)k;
      return true;
    }
  return false;
}

void pk_tuner_options_default(pk_tuner_options *o) {
  memset(o, 0, sizeof *o);
  o->externs = true;
  o->epsilon = 0.1;
  o->population = 128;
  o->generations = 4;
  o->pool = 256;
  o->warmup = 16;
  o->preset = true;
}

pk_tuner *pk_tuner_new(pk_ctx *ctx, pk_tuner_kind kind, const pk_task *task, pk_space *space,
                       uint64_t seed) {
  return pk_tuner_new_opts(ctx, kind, task, space, seed, NULL);
}

pk_tuner *pk_tuner_new_opts(pk_ctx *ctx, pk_tuner_kind kind, const pk_task *task,
                            pk_space *space, uint64_t seed, const pk_tuner_options *opts) {
  static const tuner_strategy *const strategies[] = {
      &pk_tuner_random_strategy, &pk_tuner_grid_strategy, &pk_tuner_evo_strategy};
  PK_ASSERT((unsigned)kind < 3 && task && space);
  pk_tuner *t = pk_xcalloc(1, sizeof *t);
  t->ctx = ctx;
  t->kind = kind;
  t->task = task;
  t->space = space;
  pk_rng_seed(&t->rng, seed);
  if (opts) t->opt = *opts;
  else pk_tuner_options_default(&t->opt);
  t->strategy = strategies[kind];
  return t;
}

void pk_tuner_free(pk_tuner *t) {
  if (!t) return;
  if (t->strategy->free_state) t->strategy->free_state(t);
  key_set_free(&t->seen);
  free(t->pending);
  free(t->seeds);
  tuner_rows_free(&t->rows);
  tuner_rows_free(&t->transfer);
  free(t);
}

bool tuner_config_is_new(pk_tuner *t, const pk_config *c, bool *legal, double *features) {
  const char *trace;
  char hash[2 * PKRT_SHA256_BYTES + 1];
  *legal = space_build_trace(t->space, c, &trace, hash, features) == PK_OK;
  return *legal && !key_set_has(&t->seen, key_of_hash(hash));
}

static void add_pending(pk_tuner *t, uint64_t key, const pk_config *c, const double *x) {
  if (t->npending == t->cap_pending) {
    t->cap_pending = t->cap_pending ? 2 * t->cap_pending : 32;
    t->pending = pk_xrealloc(t->pending, (size_t)t->cap_pending * sizeof *t->pending);
  }
  tuner_pending *p = &t->pending[t->npending++];
  p->key = key;
  p->cfg = *c;
  memcpy(p->x, x, sizeof p->x);
}

void pk_tuner_seed_configs(pk_tuner *t, const pk_config *c, int n) {
  free(t->seeds);
  t->seeds = NULL;
  t->nseeds = t->seed_pos = 0;
  if (n <= 0) return;
  t->seeds = pk_xmalloc((size_t)n * sizeof *t->seeds);
  memcpy(t->seeds, c, (size_t)n * sizeof *t->seeds);
  t->nseeds = n;
}

/* Fills *cand with config c's candidate; false (and counted) when c is illegal or its trace
 * was proposed or seeded before. */
static bool propose(pk_tuner *t, const pk_config *c, pk_candidate *cand) {
  const char *trace;
  char hash[2 * PKRT_SHA256_BYTES + 1];
  double x[PK_FEATURE_COUNT];
  pk_status st = space_build_trace(t->space, c, &trace, hash, x);
  uint64_t key = st == PK_OK ? key_of_hash(hash) : 0;
  if (st != PK_OK || key_set_has(&t->seen, key)) {
    if (st != PK_OK) t->stats.illegal++;
    else t->stats.duplicates++;
    return false;
  }
  key_set_add(&t->seen, key);
  add_pending(t, key, c, x);
  memset(cand, 0, sizeof *cand);
  cand->kind = PK_CAND_SCHEDULE;
  cand->trace = pk_strdup(t->ctx, trace);
  cand->trace_hash = pk_strdup(t->ctx, hash);
  cand->knobs = pk_space_knobs_json(t->ctx, t->space, c);
  return true;
}

pk_status pk_tuner_next_batch(pk_tuner *t, int n, pk_candidate *out, int *got) {
  *got = 0;
  if (t->opt.externs && !t->externs_done) {
    for (int i = 0; i < pk_space_nexterns(t->space) && *got < n; i++) {
      const pk_candidate *e = pk_space_extern(t->space, i);
      uint64_t key = key_of_hash(e->trace_hash);
      if (key_set_has(&t->seen, key)) continue;
      key_set_add(&t->seen, key);
      out[(*got)++] = *e;
    }
    t->externs_done = true;
  }
  while (*got < n && t->seed_pos < t->nseeds)
    *got += propose(t, &t->seeds[t->seed_pos++], &out[*got]);
  if (*got < n && t->strategy->begin_batch) t->strategy->begin_batch(t, n - *got);
  int misses = 0;
  while (*got < n) {
    pk_config c;
    if (!t->strategy->next_config(t, &c)) {
      t->stats.exhausted = true;
      break;
    }
    if (!propose(t, &c, &out[*got])) {
      /* a random strategy on a small or mostly illegal space would loop forever */
      if (t->strategy->max_misses && ++misses >= t->strategy->max_misses) {
        t->stats.exhausted = true;
        break;
      }
      continue;
    }
    misses = 0;
    (*got)++;
  }
  t->stats.proposed += *got;
  return PK_OK;
}

/* A result only counts as an improvement when it beats the best by more than timing noise. */
#define IMPROVEMENT 1.005

static void note_result(pk_tuner *t, const pk_candidate *c, const pk_measurement *m, bool count) {
  bool ok = m->status == PK_MEAS_OK && m->gflops > 0;
  bool better = ok && m->gflops > t->stats.best_gflops * IMPROVEMENT;
  if (ok && m->gflops > t->stats.best_gflops) {
    t->stats.best_gflops = m->gflops;
    t->stats.best_trace_hash = pk_strdup(t->ctx, c->trace_hash);
  }
  if (!count) return;
  t->stats.updates++;
  t->stats.since_improvement = better ? 0 : t->stats.since_improvement + 1;
}

static double y_of(const pk_measurement *m) {
  return m->status == PK_MEAS_OK && m->gflops > 0 ? log(m->gflops) : NAN;
}

void pk_tuner_update(pk_tuner *t, const pk_candidate *c, const pk_measurement *m) {
  note_result(t, c, m, true);
  if (c->kind != PK_CAND_SCHEDULE || !c->trace_hash || m->status == PK_MEAS_ILLEGAL) return;
  uint64_t key = key_of_hash(c->trace_hash);
  for (int i = 0; i < t->npending; i++) {
    if (t->pending[i].key != key) continue;
    tuner_rows_add(&t->rows, t->pending[i].x, y_of(m), &t->pending[i].cfg);
    t->pending[i] = t->pending[--t->npending];
    return;
  }
}

/* Features of a stored record: its own when they have the current length, else recomputed
 * from its trace (an older Pock may have stored fewer). */
static bool record_features(pk_tuner *t, const pk_record *r, double *x) {
  if (r->features && pk_features_from_json(r->features, x, PK_FEATURE_COUNT) == PK_FEATURE_COUNT)
    return true;
  if (!r->cand.trace) return false;
  pk_ctx *scratch = space_scratch(t->space);
  bool ok = pk_features_of(scratch, t->task, &r->cand, x, PK_FEATURE_COUNT) == PK_OK;
  pk_ctx_clear_error(scratch);
  return ok;
}

void pk_tuner_seed_history(pk_tuner *t, const pk_record *records, int n) {
  for (int i = 0; i < n; i++) {
    const pk_record *r = &records[i];
    if (!r->cand.trace_hash || (r->workload && strcmp(r->workload, t->task->workload) != 0)) continue;
    key_set_add(&t->seen, key_of_hash(r->cand.trace_hash));
    note_result(t, &r->cand, &r->meas, false);
    double x[PK_FEATURE_COUNT];
    if (r->cand.kind != PK_CAND_SCHEDULE || r->meas.status == PK_MEAS_ILLEGAL || !record_features(t, r, x))
      continue;
    pk_config c;
    bool has_cfg = r->cand.knobs && pk_space_config_from_knobs(t->space, r->cand.knobs, &c) == PK_OK;
    if (!has_cfg) pk_ctx_clear_error(t->space->ctx);
    tuner_rows_add(&t->rows, x, y_of(&r->meas), has_cfg ? &c : NULL);
  }
}

/* Records of one workload on one target form a group (centred on its own mean). */
static int cmp_group(const pk_record *x, const pk_record *y) {
  int c = strcmp(x->workload, y->workload);
  return c ? c : strcmp(x->target_key ? x->target_key : "", y->target_key ? y->target_key : "");
}

static int cmp_by_workload(const void *a, const void *b, const pk_record *r) {
  return cmp_group(&r[*(const int *)a], &r[*(const int *)b]);
}

/* Sorts record indices by workload (a merge sort: a database may hold many records). */
static void sort_by_workload(int *idx, int *tmp, int n, const pk_record *r) {
  if (n < 2) return;
  int h = n / 2;
  sort_by_workload(idx, tmp, h, r);
  sort_by_workload(idx + h, tmp, n - h, r);
  int i = 0, j = h, k = 0;
  while (i < h || j < n) tmp[k++] = j >= n || (i < h && cmp_by_workload(&idx[i], &idx[j], r) <= 0) ? idx[i++] : idx[j++];
  memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

void pk_tuner_add_transfer(pk_tuner *t, const pk_record *records, int n) {
  /* Each other task's (or this task's on another target) log GFLOP/s is centred on its
   * own mean: the model learns what is faster, not how fast another shape or machine runs.
   * The caller passes no record of this task on this target. */
  int *idx = pk_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *idx), *tmp = pk_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *tmp);
  int m = 0;
  for (int i = 0; i < n; i++) {
    const pk_record *r = &records[i];
    if (r->workload && r->cand.kind == PK_CAND_SCHEDULE && !isnan(y_of(&r->meas))) idx[m++] = i;
  }
  sort_by_workload(idx, tmp, m, records);
  for (int lo = 0, hi; lo < m; lo = hi) {
    double sum = 0;
    for (hi = lo; hi < m && !cmp_group(&records[idx[hi]], &records[idx[lo]]); hi++)
      sum += y_of(&records[idx[hi]].meas);
    double mean = sum / (hi - lo);
    for (int k = lo; k < hi; k++) {
      double x[PK_FEATURE_COUNT];
      const pk_record *r = &records[idx[k]];
      if (pk_features_from_json(r->features, x, PK_FEATURE_COUNT) == PK_FEATURE_COUNT)
        tuner_rows_add(&t->transfer, x, y_of(&r->meas) - mean, NULL);
    }
  }
  free(idx);
  free(tmp);
}

bool pk_tuner_done(const pk_tuner *t) {
  return t->stats.exhausted || (t->opt.patience > 0 && t->stats.since_improvement >= t->opt.patience);
}

void pk_tuner_get_stats(const pk_tuner *t, pk_tuner_stats *out) { *out = t->stats; }
