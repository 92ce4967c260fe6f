/* search.c — `pock sparse-search` (pk_sparse_search): the budget check, the contribution
 * analysis, the search over schemes (exhaustive when the space is small, else a seeded
 * evolutionary search), the verification by real fine-tuning, and the chosen spec. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "search_impl.h"

#define EVO_POP 32
#define EVO_GENERATIONS 40

pk_search_options pk_search_defaults(void) {
  return (pk_search_options){.compile = pk_compile_defaults(), .scale = 1, .label_column = -1,
                             .epochs = 10, .verify = 3, .seed = 0};
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct search {
  srch_run_env E;
  srch_space sp;
  FILE *log;
  double t0;
  double head_acc;
  srch_scheme **tried;        /* every scheme costed, in order */
  int ntried, cap;
  int trained, cached;        /* fine-tunes */
  double train_s;             /* seconds spent in fine-tunes that ran */
  uint64_t rng;
} search;

static uint64_t next_rand(search *Q) { /* xorshift64*: the evolutionary search's only source */
  Q->rng ^= Q->rng >> 12;
  Q->rng ^= Q->rng << 25;
  Q->rng ^= Q->rng >> 27;
  return Q->rng * 0x2545F4914F6CDD1DULL;
}

static bool fits(const search *Q, const srch_scheme *s) {
  const pk_search_options *o = Q->E.o;
  if (s->cost.bp_bytes > o->budget_bytes) return false;
  return !(o->budget_step_ms > 0) || s->cost.step_ms <= o->budget_step_ms;
}

/* The scheme costed before, or s costed now and remembered. */
static pk_status costed(search *Q, srch_scheme *s, srch_scheme **out) {
  srch_scheme_finish(Q->E.ctx, &Q->sp, s, Q->head_acc);
  for (int i = 0; i < Q->ntried; i++)
    if (!strcmp(Q->tried[i]->key, s->key)) return *out = Q->tried[i], PK_OK;
  pk_status st = srch_cost_of(&Q->E, s);
  if (st != PK_OK) return st;
  s->fits = fits(Q, s);
  if (Q->ntried == Q->cap) {
    Q->cap = Q->cap ? 2 * Q->cap : 64;
    srch_scheme **t = pk_alloc(Q->E.ctx, sizeof *t * (size_t)Q->cap);
    if (Q->ntried) memcpy(t, Q->tried, sizeof *t * (size_t)Q->ntried);
    Q->tried = t;
  }
  Q->tried[Q->ntried++] = s;
  *out = s;
  return PK_OK;
}

/* Fine-tunes s (or finds it in the cache), with a progress line and the time left. */
static pk_status finetune(search *Q, srch_scheme *s, int epochs, double lr, const char *what,
                          int k, int n, int left_to_train, double *acc, double *ms) {
  double t = now_s();
  bool cached;
  pk_status st = srch_finetune(&Q->E, s, epochs, lr, acc, ms, &cached);
  if (st != PK_OK) return st;
  if (cached) {
    Q->cached++;
  } else {
    Q->trained++;
    Q->train_s += now_s() - t;
  }
  double per = Q->trained ? Q->train_s / Q->trained : 0;
  const char *name = lr > 0 ? pk_sprintf(Q->E.ctx, "%s (lr %g)", s->key, lr) : s->key;
  fprintf(Q->log, "[%s %d/%d] %-34s val_acc %.4f  %s", what, k, n, name, *acc,
          cached ? "(cached)" : "");
  if (!cached) fprintf(Q->log, "%.1f s", now_s() - t);
  if (left_to_train > 0 && per > 0) fprintf(Q->log, ", ETA %.0f s", per * left_to_train);
  fprintf(Q->log, "\n");
  fflush(Q->log);
  return PK_OK;
}

/* Runs of s[0..n) at each of lrs[0..nlr) not in the cache yet (for the ETA). */
static int runs_missing(search *Q, srch_scheme **s, int n, int epochs, const double *lrs, int nlr) {
  int m = 0;
  double a, b;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < nlr; j++)
      m += !srch_cache_run(Q->E.cache, srch_run_key(Q->E.ctx, s[i], epochs, lrs[j]), &a, &b);
  return m;
}

static const double default_lr[1] = {0};

/* 1. Head alone, then head + each candidate alone, from the same start. */
static pk_status contributions(search *Q) {
  pk_ctx *ctx = Q->E.ctx;
  int n = Q->sp.nitems + 1, epochs = Q->E.o->epochs;
  srch_scheme **s = pk_alloc(ctx, sizeof *s * (size_t)n);
  for (int i = 0; i < n; i++) s[i] = srch_scheme_of_item(ctx, &Q->sp, i - 1);
  int left = runs_missing(Q, s, n, epochs, default_lr, 1);
  fprintf(Q->log, "sparse-search: contribution analysis, %d runs of %d epochs (%d cached)\n", n,
          epochs, n - left);
  for (int i = 0; i < n; i++) {
    double acc, ms;
    pk_status st = finetune(Q, s[i], epochs, 0, "contribution", i + 1, n,
                            runs_missing(Q, s + i + 1, n - i - 1, epochs, default_lr, 1), &acc,
                            &ms);
    if (st != PK_OK) return st;
    if (i == 0) {
      Q->head_acc = acc;
    } else {
      Q->sp.items[i - 1].val_acc = acc;
      Q->sp.items[i - 1].gain = acc - Q->head_acc;
    }
  }
  return PK_OK;
}

/* The number of schemes: per layer, weight options x bias on/off. */
static double space_size(const srch_space *sp) {
  double n = 1;
  for (int l = 0; l < sp->nlayers; l++)
    n *= sp->layers[l].nw * (sp->layers[l].bias_item >= 0 ? 2 : 1);
  return n;
}

static void progress(search *Q, int done, int total, double t0) {
  if (done % 50 != 0 && done != total) return;
  double el = now_s() - t0;
  fprintf(Q->log, "[cost %d/%d] %.1f s", done, total, el);
  if (done < total && done > 0) fprintf(Q->log, ", ETA %.0f s", el / done * (total - done));
  fprintf(Q->log, "\n");
  fflush(Q->log);
}

/* 2 + 3a. Every scheme, costed. */
static pk_status exhaustive(search *Q, int total) {
  const srch_space *sp = &Q->sp;
  double t0 = now_s();
  for (int idx = 0; idx < total; idx++) {
    srch_scheme *s = srch_scheme_new(Q->E.ctx, sp), *got;
    int r = idx;
    for (int l = 0; l < sp->nlayers; l++) {
      const srch_layer *L = &sp->layers[l];
      s->w[l] = (unsigned char)(r % L->nw);
      r /= L->nw;
      if (L->bias_item >= 0) {
        s->b[l] = (unsigned char)(r % 2);
        r /= 2;
      }
    }
    pk_status st = costed(Q, s, &got);
    if (st != PK_OK) return st;
    progress(Q, idx + 1, total, t0);
    if (Q->E.o->stop && *Q->E.o->stop)
      return pk_ctx_fail(Q->E.ctx, PK_ERR_RUNTIME, "sparse-search: interrupted");
  }
  return PK_OK;
}

/* Better: fits, then higher predicted accuracy, then less memory. */
static bool better(const srch_scheme *a, const srch_scheme *b) {
  if (a->fits != b->fits) return a->fits;
  if (a->predicted != b->predicted) return a->predicted > b->predicted;
  return a->cost.bp_bytes < b->cost.bp_bytes;
}

/* A sparse random scheme: each weight and each bias (or norm) on with probability
 * RANDOM_ON / nlayers (at most 1/2), a weight at a uniform channel option. Sparse because
 * budgets are small fractions of the full update: a scheme training half of a 49-entry
 * space (uniform genes) almost never fits, and a population of those (MiniLM: 8 of 1,256
 * costed schemes within the budget) searches the infeasible region. */
#define RANDOM_ON 3.0
static bool coin(search *Q, double p) { return (double)(next_rand(Q) >> 11) * 0x1p-53 < p; }
static srch_scheme *random_scheme(search *Q) {
  const srch_space *sp = &Q->sp;
  srch_scheme *s = srch_scheme_new(Q->E.ctx, sp);
  double p = RANDOM_ON / sp->nlayers > 0.5 ? 0.5 : RANDOM_ON / sp->nlayers;
  for (int l = 0; l < sp->nlayers; l++) {
    const srch_layer *L = &sp->layers[l];
    if (L->nw > 1 && coin(Q, p)) s->w[l] = (unsigned char)(1 + next_rand(Q) % (uint64_t)(L->nw - 1));
    s->b[l] = L->bias_item >= 0 && coin(Q, p);
  }
  return s;
}

/* 3b. Seeded evolutionary search: tournament selection, uniform crossover by layer, one
 * mutated gene per child; the head-only scheme seeds the population so a feasible one is
 * always in it. */
static pk_status evolutionary(search *Q) {
  pk_ctx *ctx = Q->E.ctx;
  const srch_space *sp = &Q->sp;
  srch_scheme *pop[EVO_POP], *next[EVO_POP];
  double t0 = now_s();
  int total = EVO_POP * (EVO_GENERATIONS + 1);
  for (int i = 0; i < EVO_POP; i++) {
    pk_status st = costed(Q, i == 0 ? srch_scheme_new(ctx, sp) : random_scheme(Q), &pop[i]);
    if (st != PK_OK) return st;
  }
  for (int g = 0; g < EVO_GENERATIONS; g++) {
    int best = 0;
    for (int i = 1; i < EVO_POP; i++)
      if (better(pop[i], pop[best])) best = i;
    next[0] = pop[best]; /* elitism */
    for (int i = 1; i < EVO_POP; i++) {
      srch_scheme *pa = pop[next_rand(Q) % EVO_POP], *pb = pop[next_rand(Q) % EVO_POP];
      srch_scheme *p1 = better(pa, pb) ? pa : pb;
      pa = pop[next_rand(Q) % EVO_POP], pb = pop[next_rand(Q) % EVO_POP];
      srch_scheme *p2 = better(pa, pb) ? pa : pb;
      srch_scheme *c = srch_scheme_new(ctx, sp);
      for (int l = 0; l < sp->nlayers; l++) {
        const srch_scheme *from = next_rand(Q) % 2 ? p1 : p2;
        c->w[l] = from->w[l];
        c->b[l] = from->b[l];
      }
      int l = (int)(next_rand(Q) % (uint64_t)sp->nlayers);
      if (next_rand(Q) % 2 || sp->layers[l].bias_item < 0)
        c->w[l] = (unsigned char)(next_rand(Q) % (uint64_t)sp->layers[l].nw);
      else
        c->b[l] ^= 1;
      pk_status st = costed(Q, c, &next[i]);
      if (st != PK_OK) return st;
    }
    memcpy(pop, next, sizeof pop);
    progress(Q, EVO_POP * (g + 2), total, t0);
    if (Q->E.o->stop && *Q->E.o->stop)
      return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "sparse-search: interrupted");
  }
  return PK_OK;
}

static int by_rank(const void *a, const void *b) {
  const srch_scheme *x = *(srch_scheme *const *)a, *y = *(srch_scheme *const *)b;
  if (better(x, y)) return -1;
  if (better(y, x)) return 1;
  return strcmp(x->key, y->key);
}

static const char *step_source(const search *Q) {
  int tuned = 0, timed = 0;
  bool unknown = false;
  for (int i = 0; i < Q->ntried; i++) {
    tuned += Q->tried[i]->cost.ntuned;
    timed += Q->tried[i]->cost.ntimed;
    unknown |= isnan(Q->tried[i]->cost.step_ms);
  }
  if (unknown) return "unknown for some schemes (kernels without a tuning record, none timed)";
  if (!timed) return "from tuning-database records";
  if (!tuned) return "from one timing of each distinct kernel's schedule (no tuning records)";
  return "from tuning-database records where present, else one timing of the kernel's schedule";
}

static pk_status check_options(pk_ctx *ctx, const pk_search_options *o) {
  if (!o->compile.model) return pk_ctx_fail(ctx, PK_ERR_USAGE, "sparse-search: no model");
  if (!o->data || !o->val)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "sparse-search: --data and --val are required");
  if (o->budget_bytes <= 0)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "sparse-search: --budget-memory must be > 0 bytes");
  if (o->epochs < 1 || o->verify < 1 || o->verify_epochs < 0)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "sparse-search: epochs and --verify must be >= 1");
  if (o->budget_step_ms > 0 && !o->measurer && !o->compile.db)
    return pk_ctx_fail(ctx, PK_ERR_USAGE,
                       "sparse-search: --budget-step-ms needs step times: a tuning database "
                       "(--db) or kernel timing");
  return PK_OK;
}

/* The smallest scheme is the head alone: when it does not fit, nothing does. */
static pk_status check_budget(search *Q, srch_scheme **head) {
  const pk_search_options *o = Q->E.o;
  pk_status st = costed(Q, srch_scheme_new(Q->E.ctx, &Q->sp), head);
  if (st != PK_OK) return st;
  const srch_cost *c = &(*head)->cost;
  if (c->bp_bytes > o->budget_bytes)
    return pk_ctx_fail(Q->E.ctx, PK_ERR_CHECK,
                       "sparse-search: no scheme fits --budget-memory %lld bytes: the smallest "
                       "possible is %lld bytes of BP memory (the head alone: %d params)",
                       (long long)o->budget_bytes, (long long)c->bp_bytes, Q->sp.nhead);
  if (o->budget_step_ms > 0 && !(c->step_ms <= o->budget_step_ms))
    return pk_ctx_fail(Q->E.ctx, PK_ERR_CHECK,
                       "sparse-search: no scheme fits --budget-step-ms %g: the smallest "
                       "possible is %.3f ms per step (the head alone)",
                       o->budget_step_ms, c->step_ms);
  return PK_OK;
}

static pk_status run_search(search *Q, pk_search_result *out) {
  pk_ctx *ctx = Q->E.ctx;
  const pk_search_options *o = Q->E.o;
  srch_scheme *head;
  pk_status st = check_budget(Q, &head);
  if (st != PK_OK) return st;
  out->head_bp_bytes = head->cost.bp_bytes;
  double size = space_size(&Q->sp);
  int nnorms = 0;
  for (int i = 0; i < Q->sp.nitems; i++) nnorms += Q->sp.items[i].norm;
  fprintf(Q->log, "sparse-search: %d layers and %d norms below the head, %d candidates, %.*g "
          "schemes; head alone: %lld bytes BP memory, budget %lld\n", Q->sp.nlayers - nnorms,
          nnorms, Q->sp.nitems,
          size < 1e15 ? 15 : 3, size, /* exact while a double holds it exactly; then 1e+36 */
          (long long)head->cost.bp_bytes, (long long)o->budget_bytes);
  if ((st = contributions(Q)) != PK_OK) return st;
  for (int i = 0; i < Q->ntried; i++) /* costed before the gains were known */
    srch_scheme_finish(ctx, &Q->sp, Q->tried[i], Q->head_acc);
  bool exact = size <= (o->exact_max > 0 ? (double)o->exact_max : SRCH_EXACT_MAX);
  fprintf(Q->log, "sparse-search: %s search over %.*g schemes\n",
          exact ? "exhaustive" : "evolutionary", size < 1e15 ? 15 : 3, size);
  st = exact ? exhaustive(Q, (int)size) : evolutionary(Q);
  if (st != PK_OK) return st;
  srch_scheme *full = srch_scheme_new(ctx, &Q->sp);
  for (int l = 0; l < Q->sp.nlayers; l++) {
    full->w[l] = (unsigned char)(Q->sp.layers[l].nw - 1);
    full->b[l] = Q->sp.layers[l].bias_item >= 0;
  }
  if ((st = costed(Q, full, &full)) != PK_OK) return st;
  out->full_bp_bytes = full->cost.bp_bytes;

  /* 3c. The best predicted fitting schemes, fine-tuned for real. */
  srch_scheme **rank = pk_alloc(ctx, sizeof *rank * (size_t)Q->ntried);
  memcpy(rank, Q->tried, sizeof *rank * (size_t)Q->ntried);
  qsort(rank, (size_t)Q->ntried, sizeof *rank, by_rank);
  int nv = 0;
  while (nv < o->verify && nv < Q->ntried && rank[nv]->fits) nv++;
  int epochs = o->verify_epochs ? o->verify_epochs : o->epochs;
  const double *lrs = o->nverify_lrs ? o->verify_lrs : default_lr;
  int nlr = o->nverify_lrs ? o->nverify_lrs : 1;
  fprintf(Q->log, "sparse-search: verifying the best %d by fine-tuning (%d epochs, %d learning "
          "rate%s)\n", nv, epochs, nlr, nlr > 1 ? "s" : "");
  srch_scheme *chosen = NULL;
  for (int i = 0; i < nv; i++) {
    srch_scheme *s = rank[i];
    for (int j = 0; j < nlr; j++) {
      double acc, ms;
      int left = runs_missing(Q, rank + i, 1, epochs, lrs + j + 1, nlr - j - 1) +
                 runs_missing(Q, rank + i + 1, nv - i - 1, epochs, lrs, nlr);
      if ((st = finetune(Q, s, epochs, lrs[j], "verify", i * nlr + j + 1, nv * nlr, left, &acc,
                         &ms)) != PK_OK)
        return st;
      if (isnan(s->measured) || acc > s->measured)
        s->measured = acc, s->measured_ms = ms, s->measured_lr = lrs[j];
    }
    if (!chosen || s->measured > chosen->measured ||
        (s->measured == chosen->measured && s->cost.bp_bytes < chosen->cost.bp_bytes))
      chosen = s;
  }
  PK_ASSERT(chosen); /* the head alone fits (check_budget) */
  srch_report R = {.o = o, .sp = &Q->sp, .head_acc = Q->head_acc, .tried = Q->tried,
                   .ntried = Q->ntried, .verified = rank, .nverified = nv, .chosen = chosen,
                   .full_bp_bytes = full->cost.bp_bytes, .seconds = now_s() - Q->t0, .step_source = step_source(Q)};
  out->runs_trained = Q->trained;
  out->runs_cached = Q->cached;
  out->schemes = Q->ntried;
  out->chosen = chosen->key;
  out->chosen_val_acc = chosen->measured;
  out->chosen_lr = chosen->measured_lr;
  out->chosen_bp_bytes = chosen->cost.bp_bytes;
  out->spec = srch_scheme_spec(
      ctx, &Q->sp, chosen,
      pk_sprintf(ctx, "pock sparse-search: %s; BP memory %lld bytes (budget %lld); validation "
                 "accuracy %.4f measured%s, %.4f predicted", chosen->key,
                 (long long)chosen->cost.bp_bytes, (long long)o->budget_bytes, chosen->measured,
                 chosen->measured_lr > 0 ? pk_sprintf(ctx, " at lr %g", chosen->measured_lr) : "",
                 chosen->predicted));
  out->report = srch_report_text(ctx, &R);
  out->html = o->html ? srch_report_html(ctx, &R) : NULL;
  fputs(out->report, Q->log);
  return PK_OK;
}

pk_status pk_sparse_search(pk_ctx *ctx, const pk_search_options *o, pk_search_result *out) {
  memset(out, 0, sizeof *out);
  pk_status st = check_options(ctx, o);
  if (st != PK_OK) return st;
  search Q = {.E = {.ctx = ctx, .o = o}, .log = o->log ? o->log : stderr, .t0 = now_s(),
              .rng = o->seed * 0x9E3779B97F4A7C15ULL + 1};
  Q.E.sp = &Q.sp;
  if ((st = srch_space_build(ctx, &o->compile, &Q.sp)) != PK_OK) return st;
  srch_cache cache;
  if ((st = srch_cache_open(ctx, o, &Q.sp.train, &cache)) != PK_OK) return st;
  Q.E.cache = &cache;
  const char *tmp = getenv("TMPDIR");
  char *dir = pk_sprintf(ctx, "%s/pock-search-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    srch_cache_close(&cache);
    return pk_ctx_fail(ctx, PK_ERR_IO, "sparse-search: cannot make a work directory in %s",
                       tmp && *tmp ? tmp : "/tmp");
  }
  Q.E.workdir = dir;
  st = run_search(&Q, out);
  /* kernel timings are worth keeping even when the search stopped early */
  pk_status cs = srch_cache_save(ctx, &cache);
  if (st == PK_OK) st = cs;
  srch_cache_close(&cache);
  rmdir(dir); /* each run removed its own files */
  return st;
}
