/* tuner_evo.c — the evo tuner: model-guided evolutionary search. Each batch refits the cost
 * model on every measurement so far, evolves a population (best measured configs plus
 * random ones) by mutation and crossover with the model as fitness, ranks everything new it
 * met together with a random pool, and proposes the best predicted — and, with
 * probability epsilon, a random config instead (exploration). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_impl.h"

typedef struct member {
  pk_config cfg;
  double score; /* measured (centred log GFLOP/s) or predicted */
} member;

typedef struct member_list {
  int n, cap;
  member *m;
} member_list;

typedef struct evo_state {
  pk_cost_model *model;
  member_list ranked; /* new configs, best predicted first */
  int pos;
  bool preset_done;
  double own_mean;
} evo_state;

static void list_add(member_list *l, const pk_config *c, double score) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->m = pk_xrealloc(l->m, (size_t)l->cap * sizeof *l->m);
  }
  l->m[l->n++] = (member){*c, score};
}

static int cmp_member(const void *a, const void *b) {
  double x = ((const member *)a)->score, y = ((const member *)b)->score;
  return x > y ? -1 : x < y ? 1 : 0;
}

static evo_state *state_of(pk_tuner *t) {
  if (!t->state) {
    evo_state *s = pk_xcalloc(1, sizeof *s);
    s->model = pk_cost_model_new(PK_FEATURE_COUNT, NULL);
    t->state = s;
  }
  return t->state;
}

/* Fits the model on this task's rows (log GFLOP/s centred on their mean; a failed
 * candidate counts as a bit worse than the worst success, so the model steers away from
 * it) and the transfer rows. Returns false when there is too little to learn from. */
static bool train(pk_tuner *t, evo_state *s) {
  const tuner_rows *own = &t->rows, *other = &t->transfer;
  int ok = 0;
  double sum = 0, worst = INFINITY;
  for (int i = 0; i < own->n; i++)
    if (!isnan(own->y[i])) {
      ok++;
      sum += own->y[i];
      if (own->y[i] < worst) worst = own->y[i];
    }
  if (ok < t->opt.warmup || ok == 0) return false;
  s->own_mean = sum / ok;
  int n = own->n + other->n;
  double *x = pk_xmalloc((size_t)n * PK_FEATURE_COUNT * sizeof *x), *y = pk_xmalloc((size_t)n * sizeof *y);
  memcpy(x, own->x, (size_t)own->n * PK_FEATURE_COUNT * sizeof *x);
  if (other->n) memcpy(x + (size_t)own->n * PK_FEATURE_COUNT, other->x, (size_t)other->n * PK_FEATURE_COUNT * sizeof *x);
  for (int i = 0; i < own->n; i++) y[i] = (isnan(own->y[i]) ? worst - 1 : own->y[i]) - s->own_mean;
  for (int i = 0; i < other->n; i++) y[own->n + i] = other->y[i];
  pk_cost_model_fit(s->model, x, y, n);
  free(x);
  free(y);
  return true;
}

/* Scores a config once per batch: predicted when legal, and kept for ranking when new. */
static bool evaluate(pk_tuner *t, evo_state *s, key_set *visited, const pk_config *c,
                     double *score) {
  uint64_t h = pk_config_hash(c);
  if (key_set_has(visited, h)) return false;
  key_set_add(visited, h);
  double x[PK_FEATURE_COUNT];
  bool legal, fresh = tuner_config_is_new(t, c, &legal, x);
  if (!legal) return false;
  *score = pk_cost_model_predict(s->model, x);
  if (fresh) list_add(&s->ranked, c, *score);
  return true;
}

static const member *tournament(pk_tuner *t, const member_list *pop) {
  const member *a = &pop->m[pk_rng_below(&t->rng, (uint32_t)pop->n)];
  const member *b = &pop->m[pk_rng_below(&t->rng, (uint32_t)pop->n)];
  return a->score >= b->score ? a : b;
}

static void evolve(pk_tuner *t, evo_state *s) {
  int P = t->opt.population > 2 ? t->opt.population : 2;
  key_set visited = {0};
  member_list pop = {0}, kids = {0};
  /* parents: the best measured configs, with their measured scores */
  member_list measured = {0};
  for (int i = 0; i < t->rows.n; i++)
    if (t->rows.has_cfg[i] && !isnan(t->rows.y[i])) list_add(&measured, &t->rows.cfg[i], t->rows.y[i] - s->own_mean);
  qsort(measured.m, (size_t)measured.n, sizeof *measured.m, cmp_member);
  for (int i = 0; i < measured.n && pop.n < P / 2; i++) {
    key_set_add(&visited, pk_config_hash(&measured.m[i].cfg));
    list_add(&pop, &measured.m[i].cfg, measured.m[i].score);
  }
  free(measured.m);
  double score;
  for (int tries = 0; pop.n < P && tries < 4 * P; tries++) {
    pk_config c;
    pk_space_sample(t->space, &t->rng, &c);
    if (evaluate(t, s, &visited, &c, &score)) list_add(&pop, &c, score);
  }
  for (int g = 0; g < t->opt.generations && pop.n > 0; g++) {
    kids.n = 0;
    for (int i = 0; i < P; i++) {
      const member *a = tournament(t, &pop);
      pk_config c = a->cfg;
      if (pk_rng_unit(&t->rng) < 0.3) pk_space_crossover(t->space, &a->cfg, &tournament(t, &pop)->cfg, &t->rng, &c);
      if (pk_config_equal(&c, &a->cfg) || pk_rng_unit(&t->rng) < 0.8) {
        pk_config m;
        pk_space_mutate(t->space, &c, &t->rng, &m);
        c = m;
      }
      if (evaluate(t, s, &visited, &c, &score)) list_add(&kids, &c, score);
    }
    for (int i = 0; i < kids.n; i++) list_add(&pop, &kids.m[i].cfg, kids.m[i].score);
    qsort(pop.m, (size_t)pop.n, sizeof *pop.m, cmp_member);
    if (pop.n > P) pop.n = P;
  }
  /* a random pool as well: the population may have converged on one region */
  for (int i = 0; i < t->opt.pool; i++) {
    pk_config c;
    pk_space_sample(t->space, &t->rng, &c);
    evaluate(t, s, &visited, &c, &score);
  }
  qsort(s->ranked.m, (size_t)s->ranked.n, sizeof *s->ranked.m, cmp_member);
  free(pop.m);
  free(kids.m);
  key_set_free(&visited);
}

static void evo_begin_batch(pk_tuner *t, int n) {
  evo_state *s = state_of(t);
  s->ranked.n = 0;
  s->pos = 0;
  if (t->opt.preset && !s->preset_done) {
    /* the hand schedule is a known good start; nothing is lost if it was measured */
    pk_config c;
    s->preset_done = true;
    if (pk_space_preset(t->space, &c)) list_add(&s->ranked, &c, INFINITY);
  }
  if (train(t, s)) evolve(t, s);
}

static bool evo_next(pk_tuner *t, pk_config *out) {
  evo_state *s = state_of(t);
  bool explore = s->pos > 0 && pk_rng_unit(&t->rng) < t->opt.epsilon;
  if (explore || s->pos >= s->ranked.n) {
    pk_space_sample(t->space, &t->rng, out);
    return true;
  }
  *out = s->ranked.m[s->pos++].cfg;
  return true;
}

static void evo_free(pk_tuner *t) {
  evo_state *s = t->state;
  if (!s) return;
  pk_cost_model_free(s->model);
  free(s->ranked.m);
  free(s);
}

const tuner_strategy pk_tuner_evo_strategy = {"evo", 2000, evo_begin_batch, evo_next, evo_free};
