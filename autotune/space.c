/* space.c — config spaces: knobs and their values, enumeration, sampling, mutation, and
 * building a config into a candidate through its op class's template. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pk_gpu.h"
#include "space_impl.h"

void pk_space_options_default(pk_space_options *o) {
  memset(o, 0, sizeof *o);
}

/* ---- knobs ---- */

int space_add_knob(pk_space *sp, const char *name, const int64_t *values, int n) {
  PK_ASSERT(sp->nknobs < PK_SPACE_MAX_KNOBS && n >= 1);
  pk_knob *k = &sp->knobs[sp->nknobs];
  k->name = name;
  k->nvalues = 0;
  k->added_later = false;
  for (int i = 0; i < n && k->nvalues < PK_SPACE_MAX_VALUES; i++) {
    bool seen = false;
    for (int j = 0; j < k->nvalues; j++) seen |= k->values[j] == values[i];
    if (!seen) k->values[k->nvalues++] = values[i];
  }
  return sp->nknobs++;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int space_tile_values(int64_t extent, const int64_t *preferred, int npreferred, int64_t min_div,
                      int64_t max_div, int64_t *out) {
  int n = 0;
  for (int i = 0; i < npreferred && n < PK_SPACE_MAX_VALUES; i++)
    if (preferred[i] <= extent) out[n++] = preferred[i];
  for (int64_t d = min_div > 1 ? min_div : 1; d <= max_div && d <= extent && n < PK_SPACE_MAX_VALUES; d++)
    if (extent % d == 0) out[n++] = d;
  if (extent <= max_div && n < PK_SPACE_MAX_VALUES) out[n++] = extent;
  qsort(out, (size_t)n, sizeof *out, cmp_i64);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (m == 0 || out[m - 1] != out[i]) out[m++] = out[i];
  return m;
}

int space_vector_values(const pk_space *sp, int64_t max_lanes, int64_t *out) {
  int n = 0;
  out[n++] = 1;
  for (int64_t v = 4; v <= 2 * sp->lanes && v <= 64 && v <= max_lanes; v *= 2) out[n++] = v;
  return n;
}

int64_t space_pick(const pk_space *sp, int k, int64_t want) {
  const pk_knob *kn = &sp->knobs[k];
  int64_t below = INT64_MIN, least = INT64_MAX;
  for (int i = 0; i < kn->nvalues; i++) {
    int64_t x = kn->values[i];
    if (x <= want && x > below) below = x;
    if (x < least) least = x;
  }
  return below != INT64_MIN ? below : least;
}

const char *space_name(pk_schedule *s, const char *base, const char *suffix) {
  return pk_sprintf(s->ctx, "%s%s", base, suffix);
}

bool space_uses_axis(const pk_expr *e, const pk_te_axis *ax) {
  if (e->kind == PK_EXPR_AXIS) return e->axis == ax;
  for (int i = 0; i < e->nargs; i++)
    if (space_uses_axis(e->args[i], ax)) return true;
  return false;
}

int space_bare_dim(const pk_expr *r, const pk_te_axis *ax) {
  if (r->kind != PK_EXPR_READ) return -1;
  for (int d = 0; d < r->nargs; d++)
    if (r->args[d]->kind == PK_EXPR_AXIS && r->args[d]->axis == ax) return d;
  return -1;
}

const pk_te_tensor *space_product_stage(const pk_te_program *p) {
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE || t->body->kind != PK_EXPR_REDUCE) continue;
    const pk_expr *r = t->body;
    if (r->op == PK_EOP_SUM && r->args[0]->kind == PK_EXPR_BINARY && r->args[0]->op == PK_EOP_MUL)
      return t;
  }
  return NULL;
}

/* Counts the reads of t in x; -1 when one is not at e's own point. */
static int reads_at_own_point(const pk_expr *x, const pk_te_tensor *t, const pk_te_tensor *e) {
  int n = 0;
  if (x->kind == PK_EXPR_READ && x->tensor == t) {
    for (int d = 0; d < t->ndim; d++)
      if (x->args[d]->kind != PK_EXPR_AXIS || x->args[d]->axis != e->axes[d]) return -1;
    n = 1;
  }
  for (int i = 0; i < x->nargs; i++) {
    int m = reads_at_own_point(x->args[i], t, e);
    if (m < 0) return -1;
    n += m;
  }
  return n;
}

static int reads_of(const pk_expr *x, const pk_te_tensor *t) {
  int n = x->kind == PK_EXPR_READ && x->tensor == t;
  for (int i = 0; i < x->nargs; i++) n += reads_of(x->args[i], t);
  return n;
}

const pk_te_tensor *space_epilogue_stage(const pk_te_program *p, const pk_te_tensor *t) {
  const pk_te_tensor *e = NULL;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *u = p->tensors[i];
    if (u->kind != PK_TE_COMPUTE || u == t) continue;
    /* every other compute elementwise: a prologue, the epilogue, a stage after it */
    if (u->dom_ndim || !u->body || u->body->kind == PK_EXPR_REDUCE) return NULL;
    if (reads_of(u->body, t) == 0) continue;
    if (e || u->id <= t->id || u->ndim != t->ndim) return NULL;
    for (int d = 0; d < t->ndim; d++)
      if (u->shape[d] != t->shape[d]) return NULL;
    /* pk_te_fuse_epilogue makes one read of t, at e's own point */
    if (reads_at_own_point(u->body, t, u) <= 0) return NULL;
    e = u;
  }
  return e;
}

const pk_te_tensor *space_epilogue_tail(const pk_te_program *p, const pk_te_tensor *e) {
  const pk_te_tensor *last = NULL;
  for (int i = e->id + 1; i < p->ntensors; i++)
    if (p->tensors[i]->kind == PK_TE_COMPUTE) {
      if (last) return NULL;
      last = p->tensors[i];
    }
  if (!last || last->ndim != e->ndim) return NULL;
  for (int d = 0; d < e->ndim; d++)
    if (last->shape[d] != e->shape[d]) return NULL;
  return reads_at_own_point(last->body, e, last) > 0 ? last : NULL;
}

const pk_expr *space_sum_product(const pk_te_tensor *t) {
  if (t->kind != PK_TE_COMPUTE || t->body->kind != PK_EXPR_REDUCE || t->body->op != PK_EOP_SUM)
    return NULL;
  const pk_expr *e = t->body->args[0];
  if (e->kind == PK_EXPR_SELECT && e->args[2]->kind == PK_EXPR_FLOAT && e->args[2]->fval == 0)
    e = e->args[1];
  return e->kind == PK_EXPR_BINARY && e->op == PK_EOP_MUL ? e : NULL;
}

int space_sibling_stages(const pk_te_program *p, const pk_te_tensor *t,
                         const pk_te_tensor **out, int max) {
  int n = 0;
  for (int i = t->id + 1; i < p->ntensors && n < max; i++) {
    const pk_te_tensor *u = p->tensors[i];
    if (space_sum_product(u) && u->ndim == t->ndim && u->body->naxes == t->body->naxes)
      out[n++] = u;
  }
  return n;
}

int64_t space_stage_extent(const pk_space *sp, const char *stage, int d) {
  int id = atoi(stage + 1);
  PK_ASSERT(stage[0] == 't' && id >= 0 && id < sp->task->prog->ntensors);
  const pk_te_tensor *t = sp->task->prog->tensors[id];
  PK_ASSERT(d >= 0 && d < t->ndim);
  return t->shape[d];
}

int64_t space_stage_extent_of(const pk_schedule *s, const char *stage, int d) {
  const pk_stage *st = pk_sched_find_stage(s, stage);
  PK_ASSERT(st && d >= 0 && d < st->tensor->ndim);
  return st->tensor->shape[d];
}

/* ---- reductions split across threads ---- */

int space_thread_values(const pk_space *sp, const pk_te_tensor *t, int64_t *out) {
  int n = 0;
  out[n++] = 0;
  if (!sp->opts.allow_parallel || t->body->kind != PK_EXPR_REDUCE) return n;
  int64_t longest = 0;
  double length = 1;
  for (int a = 0; a < t->body->naxes; a++) {
    int64_t e = t->body->axes[a]->hi - t->body->axes[a]->lo;
    if (e > longest) longest = e;
    length *= (double)e;
  }
  /* only where the output is small relative to the reduction: elsewhere its tiles give
   * every core work (and the space stays as it was) */
  if ((double)pk_te_tensor_numel(t) > length) return n;
  for (int64_t f = 2; f <= 8 && f <= longest; f *= 2) out[n++] = f;
  return n;
}

int64_t space_parallel_preset(const pk_space *sp, int k, double work, double min_work) {
  return sp->knobs[k].nvalues > 1 && work >= min_work ? 1 : 0;
}

int64_t space_thread_preset(const pk_space *sp, int k, int64_t parallel_extent) {
  const pk_knob *kn = &sp->knobs[k];
  if (kn->nvalues < 2) return 0;
  const pk_target *t;
  int cores = 4;
  if (pk_task_target(sp->ctx, sp->task, &t) == PK_OK && t->cores > 0) cores = t->cores;
  else pk_ctx_clear_error(sp->ctx);
  if (parallel_extent >= cores) return 0;
  int64_t best = 0;
  for (int i = 0; i < kn->nvalues; i++)
    if (kn->values[i] <= cores && kn->values[i] > best) best = kn->values[i];
  return best ? best : kn->values[1];
}

int64_t space_cache_order(const pk_space *sp, int64_t reread0, int64_t reread1) {
  int64_t l2 = sp->opts.l2_bytes;
  const pk_target *t;
  if (l2 <= 0 && pk_task_target(sp->ctx, sp->task, &t) == PK_OK) l2 = t->l2_bytes;
  else if (l2 <= 0) pk_ctx_clear_error(sp->ctx);
  return pk_tile_order_by_cache(l2, reread0, reread1);
}

pk_status space_thread_rfactor(pk_schedule *s, const space_names *n, int64_t threads,
                               space_names *out) {
  const pk_stage *st = pk_sched_find_stage(s, n->stage);
  PK_ASSERT(st);
  int nsp = st->tensor->ndim;
  const pk_iter *k = NULL;
  for (int r = nsp; r < st->nroot; r++)
    if (!k || st->root[r]->extent > k->extent) k = st->root[r];
  if (!k || k->extent < threads)
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: rfactor_threads %lld exceeds the "
                       "longest reduction (%lld)", (long long)threads, (long long)(k ? k->extent : 0));
  const char *kname = k->name;
  SPACE_TRY(pk_sched_split(s, n->stage, kname, threads));
  SPACE_TRY(pk_sched_rfactor(s, n->stage, space_name(s, kname, ".i")));
  const char *rf_name = space_name(s, n->stage, ".rf");
  const pk_stage *rf = pk_sched_find_stage(s, rf_name);
  PK_ASSERT(rf && rf->tensor->ndim == nsp + 1);
  memset(out, 0, sizeof *out);
  out->stage = rf_name;
  out->local = space_name(s, rf_name, ".local");
  out->ndim = nsp + 1;
  out->root[0] = rf->root[nsp]->name;
  for (int d = 0; d < nsp; d++) out->root[d + 1] = rf->root[d]->name;
  out->nreduce = rf->nroot - nsp - 1;
  PK_ASSERT(out->nreduce == n->nreduce);
  for (int r = 0; r < out->nreduce; r++) { /* insertion by name, as space_names_of */
    const char *name = rf->root[nsp + 1 + r]->name;
    int j = r;
    for (; j > 0 && strcmp(out->k[j - 1], name) > 0; j--) out->k[j] = out->k[j - 1];
    out->k[j] = name;
  }
  out->norders = n->norders;
  memcpy(out->orders, n->orders, sizeof out->orders);
  return PK_OK;
}

/* ---- the space ---- */

/* Knobs JSON lists keys in byte order (the project's canonical JSON): a few knobs, so an
 * insertion sort of their indices. */
static void sort_knobs_by_name(pk_space *sp) {
  for (int i = 0; i < sp->nknobs; i++) {
    int k = i, j = i;
    for (; j > 0 && strcmp(sp->knobs[sp->by_name[j - 1]].name, sp->knobs[k].name) > 0; j--)
      sp->by_name[j] = sp->by_name[j - 1];
    sp->by_name[j] = k;
  }
}

pk_status pk_space_new(pk_ctx *ctx, const pk_task *task, pk_space **out) {
  return pk_space_new_opts(ctx, task, NULL, out);
}

pk_status pk_space_new_opts(pk_ctx *ctx, const pk_task *task, const pk_space_options *opts,
                            pk_space **out) {
  *out = NULL;
  pk_space *sp = pk_alloc(ctx, sizeof *sp);
  sp->ctx = ctx;
  sp->task = task;
  if (opts) sp->opts = *opts;
  else pk_space_options_default(&sp->opts);
  const pk_te_tensor *last = NULL;
  for (int i = 0; i < task->prog->ntensors; i++)
    if (task->prog->tensors[i]->kind == PK_TE_COMPUTE) last = task->prog->tensors[i];
  if (!last) return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "space: the task has no compute");
  int vector_bytes = sp->opts.vector_bytes;
  /* a width given by the caller: the registers of the x86 ISA that has it */
  sp->vector_regs = vector_bytes >= 64 ? 32 : 16;
  if (vector_bytes <= 0) { /* the target's widest vector and registers, never the host's */
    const pk_target *t;
    pk_status s = pk_task_target(ctx, task, &t);
    if (s != PK_OK) return s;
    sp->gpu = t->kind != PK_TARGET_C;
    vector_bytes = t->vector_bytes > 0 ? t->vector_bytes : 16;
    sp->vector_regs = t->vector_regs > 0 ? t->vector_regs : 16;
  }
  size_t elem = pkrt_dtype_size(last->dtype);
  sp->lanes = elem ? (int)(vector_bytes / (int)elem) : 1;
  if (sp->lanes < 1) sp->lanes = 1;

  /* A class's own template first; the generic ones take any program it cannot shape
   * (a "matmul" whose output is a vector, a conv with one spatial dim, ...). */
  const space_class *tries[4];
  int ntries = 0;
  if (sp->gpu) { /* GPU targets: sums of products tiled over threads, the rest fused */
    if (task->cls != PK_TASK_INJECTIVE) tries[ntries++] = &pk_space_class_gpu_product;
    tries[ntries++] = &pk_space_class_gpu_generic;
  }
  if (!sp->gpu && task->cls == PK_TASK_MATMUL) tries[ntries++] = &pk_space_class_matmul;
  /* convolutions on small images (and their guarded data gradients, classed reductions):
   * channels as lanes; the template refuses long rows, which the conv one serves */
  if (!sp->gpu && (task->cls == PK_TASK_CONV || task->cls == PK_TASK_REDUCTION))
    tries[ntries++] = &pk_space_class_conv_gemm;
  /* (guarded sums of products with >= 3 reduce axes, a conv's data gradient, too: its
   * template refuses other reductions) */
  if (!sp->gpu && (task->cls == PK_TASK_CONV || task->cls == PK_TASK_REDUCTION))
    tries[ntries++] = &pk_space_class_conv;
  if (!sp->gpu && task->cls != PK_TASK_INJECTIVE) tries[ntries++] = &pk_space_class_reduction;
  if (!sp->gpu) tries[ntries++] = &pk_space_class_injective;
  pk_status st = PK_ERR_UNSUPPORTED;
  for (int i = 0; i < ntries && st == PK_ERR_UNSUPPORTED; i++) {
    sp->nknobs = 0;
    sp->plan = NULL;
    sp->cls = tries[i];
    st = sp->cls->init(sp);
  }
  if (st != PK_OK) return st == PK_ERR_UNSUPPORTED && !pk_ctx_error(ctx)[0]
             ? pk_ctx_fail(ctx, st, "space: no template fits task %s", task->name) : st;
  sort_knobs_by_name(sp);
  space_extern_init(sp);
  sp->scratch = pk_ctx_new();
  *out = sp;
  return PK_OK;
}

void pk_space_free(pk_space *sp) {
  if (sp) pk_ctx_free(sp->scratch);
}

const pk_task *pk_space_task(const pk_space *sp) { return sp->task; }
int pk_space_nknobs(const pk_space *sp) { return sp->nknobs; }
const pk_knob *pk_space_knob(const pk_space *sp, int i) {
  return i >= 0 && i < sp->nknobs ? &sp->knobs[i] : NULL;
}
int pk_space_knob_index(const pk_space *sp, const char *name) {
  for (int i = 0; i < sp->nknobs; i++)
    if (!strcmp(sp->knobs[i].name, name)) return i;
  return -1;
}

uint64_t pk_space_size(const pk_space *sp) {
  uint64_t size = 1;
  for (int i = 0; i < sp->nknobs; i++)
    if (__builtin_mul_overflow(size, (uint64_t)sp->knobs[i].nvalues, &size)) return UINT64_MAX;
  return size;
}

void pk_space_config_at(const pk_space *sp, uint64_t index, pk_config *out) {
  memset(out, 0, sizeof *out);
  out->n = sp->nknobs;
  for (int i = 0; i < sp->nknobs; i++) {
    uint64_t nv = (uint64_t)sp->knobs[i].nvalues;
    out->idx[i] = (int)(index % nv);
    index /= nv;
  }
}

uint64_t pk_space_index_of(const pk_space *sp, const pk_config *c) {
  uint64_t index = 0;
  for (int i = sp->nknobs - 1; i >= 0; i--) index = index * (uint64_t)sp->knobs[i].nvalues + (uint64_t)c->idx[i];
  return index;
}

/* A knob added later that this space does not widen (one value) draws no random numbers:
 * seeded samples, crossovers and so tuning runs of such a space stay what they were before
 * the knob existed. */
static bool draws(const pk_knob *k) { return !k->added_later || k->nvalues > 1; }

void pk_space_sample(const pk_space *sp, pk_rng *rng, pk_config *out) {
  memset(out, 0, sizeof *out);
  out->n = sp->nknobs;
  for (int i = 0; i < sp->nknobs; i++)
    if (draws(&sp->knobs[i])) out->idx[i] = (int)pk_rng_below(rng, (uint32_t)sp->knobs[i].nvalues);
}

/* A neighbouring value (tile 8 -> 6 or 12) is usually a small step in run time, so local
 * moves are favoured; far jumps keep the search from getting stuck. */
static void mutate_knob(const pk_space *sp, pk_config *c, int k, pk_rng *rng) {
  int nv = sp->knobs[k].nvalues, cur = c->idx[k], next;
  if (nv < 2) return;
  if (pk_rng_unit(rng) < 0.6) {
    next = cur + (pk_rng_below(rng, 2) ? 1 : -1);
    if (next < 0) next = 1;
    if (next >= nv) next = nv - 2;
  } else {
    next = (int)pk_rng_below(rng, (uint32_t)(nv - 1));
    if (next >= cur) next++;
  }
  c->idx[k] = next;
}

void pk_space_mutate(const pk_space *sp, const pk_config *in, pk_rng *rng, pk_config *out) {
  *out = *in;
  int movable[PK_SPACE_MAX_KNOBS], n = 0;
  for (int i = 0; i < sp->nknobs; i++)
    if (sp->knobs[i].nvalues > 1) movable[n++] = i;
  if (!n) return;
  int first = (int)pk_rng_below(rng, (uint32_t)n);
  mutate_knob(sp, out, movable[first], rng);
  if (n > 1 && pk_rng_unit(rng) < 0.25) { /* another knob: the same one could step back */
    int second = (int)pk_rng_below(rng, (uint32_t)(n - 1));
    mutate_knob(sp, out, movable[second >= first ? second + 1 : second], rng);
  }
}

void pk_space_crossover(const pk_space *sp, const pk_config *a, const pk_config *b, pk_rng *rng,
                        pk_config *out) {
  *out = *a;
  for (int i = 0; i < sp->nknobs; i++)
    if (draws(&sp->knobs[i]) && pk_rng_below(rng, 2)) out->idx[i] = b->idx[i];
}

bool pk_space_preset(const pk_space *sp, pk_config *out) {
  int64_t v[PK_SPACE_MAX_KNOBS];
  if (!sp->cls->preset || !sp->cls->preset(sp, v)) return false;
  memset(out, 0, sizeof *out);
  out->n = sp->nknobs;
  for (int i = 0; i < sp->nknobs; i++) {
    int found = -1;
    for (int j = 0; j < sp->knobs[i].nvalues && found < 0; j++)
      if (sp->knobs[i].values[j] == v[i]) found = j;
    if (found < 0) return false; /* the shape rules the hand value out (a tile > extent) */
    out->idx[i] = found;
  }
  return true;
}

/* GPU spaces: whether sched fails to lower or to run on a GPU (message in ctx). */
bool space_gpu_refuses(const pk_space *sp, pk_ctx *ctx, const pk_schedule *sched) {
  pk_lfunc *f;
  pk_gpu_kernel k;
  return sp->gpu && (pk_sched_lower(ctx, sp->task->prog, sched, "k0", &f) != PK_OK ||
                     pk_gpu_prepare(ctx, f, &k) != PK_OK);
}

/* A default schedule never splits a reduction across threads (rfactor_threads 0, which is
 * its knob's first value): each sum is then added up in one order whatever the thread
 * count and whether the fuse pass fused the kernel (a fused epilogue rules the split
 * out), so an untuned artifact's results do not depend on either. The tuner may split. */
static void default_without_thread_split(const pk_space *sp, pk_config *cfg) {
  int k = pk_space_knob_index(sp, "rfactor_threads");
  if (k >= 0) cfg->idx[k] = 0;
}

pk_schedule *pk_space_default_schedule(pk_ctx *ctx, const pk_task *task, const char **why) {
  pk_space *sp = NULL;
  pk_config cfg;
  pk_schedule *sched = NULL;
  const char *reason = NULL;
  /* parallel loops offered: an artifact runs under any thread count (`pock-rt --threads`),
   * and with one thread the pool runs a parallel loop inline */
  pk_space_options opts;
  pk_space_options_default(&opts);
  opts.allow_parallel = true;
  if (pk_space_new_opts(ctx, task, &opts, &sp) != PK_OK)
    reason = pk_sprintf(ctx, "no space: %s", pk_ctx_error(ctx));
  else if (!pk_space_preset(sp, &cfg))
    reason = pk_sprintf(ctx, "no preset for class %s (template %s)", pk_task_class_name(task->cls), sp->cls->name);
  else {
    default_without_thread_split(sp, &cfg);
    if (pk_space_schedule(sp, ctx, &cfg, &sched) != PK_OK || space_gpu_refuses(sp, ctx, sched)) {
      /* a GPU preset whose shared panels do not fit: the same tiles without them */
      int k = pk_space_knob_index(sp, "shared");
      if (k >= 0 && sp->knobs[k].values[cfg.idx[k]] != 0) {
        pk_ctx_clear_error(ctx);
        cfg.idx[k] = 0;
        if (pk_space_schedule(sp, ctx, &cfg, &sched) != PK_OK || space_gpu_refuses(sp, ctx, sched))
          reason = pk_sprintf(ctx, "preset refused: %s", pk_ctx_error(ctx));
      } else {
        reason = pk_sprintf(ctx, "preset refused: %s", pk_ctx_error(ctx));
      }
    }
  }
  pk_ctx_clear_error(ctx);
  pk_space_free(sp);
  if (why) *why = reason;
  return reason ? NULL : sched;
}

void pk_task_baseline(pk_ctx *ctx, const pk_task *task, pk_candidate *out) {
  pk_space *sp = NULL;
  pk_config cfg;
  bool built = pk_space_new(ctx, task, &sp) == PK_OK && pk_space_preset(sp, &cfg) &&
               pk_space_build(sp, &cfg, out) == PK_OK; /* in ctx: the space's context */
  pk_ctx_clear_error(ctx);
  pk_space_free(sp);
  if (built) return;
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(PK_EMPTY_TRACE, strlen(PK_EMPTY_TRACE), hex);
  *out = (pk_candidate){.kind = PK_CAND_SCHEDULE, .trace = PK_EMPTY_TRACE, .knobs = "{}",
                        .trace_hash = pk_strdup(ctx, hex)};
}

bool pk_config_equal(const pk_config *a, const pk_config *b) {
  if (a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->idx[i] != b->idx[i]) return false;
  return true;
}

uint64_t pk_config_hash(const pk_config *c) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the indices */
  for (int i = 0; i < c->n; i++) {
    h ^= (uint64_t)(uint32_t)c->idx[i] + 1;
    h *= 0x100000001b3ull;
  }
  return h;
}

/* ---- building ---- */

static void config_values(const pk_space *sp, const pk_config *c, int64_t *v) {
  PK_ASSERT(c->n == sp->nknobs);
  for (int i = 0; i < sp->nknobs; i++) {
    PK_ASSERT(c->idx[i] >= 0 && c->idx[i] < sp->knobs[i].nvalues);
    v[i] = sp->knobs[i].values[c->idx[i]];
  }
}

pk_status pk_space_schedule(const pk_space *sp, pk_ctx *ctx, const pk_config *c,
                            pk_schedule **out) {
  int64_t v[PK_SPACE_MAX_KNOBS];
  config_values(sp, c, v);
  pk_schedule *s = pk_sched_new(ctx, sp->task->prog);
  pk_status st = sp->cls->apply(sp, s, v);
  *out = st == PK_OK ? s : NULL;
  return st;
}

pk_ctx *space_scratch(pk_space *sp) {
  if (++sp->scratch_uses > 256) {
    pk_ctx_free(sp->scratch);
    sp->scratch = pk_ctx_new();
    sp->scratch_uses = 1;
  }
  return sp->scratch;
}

void space_knob_features(const pk_space *sp, const pk_config *c, double *out) {
  int64_t v[PK_SPACE_MAX_KNOBS];
  config_values(sp, c, v);
  /* the same numbers pk_features_of_knobs reads from the knobs JSON */
  for (int i = 0; i < PK_SPACE_MAX_KNOBS; i++)
    out[i] = i < sp->nknobs ? log2(1 + (double)llabs(v[sp->by_name[i]])) : 0;
}

pk_status space_build_trace(pk_space *sp, const pk_config *c, const char **trace,
                            char hash[2 * PKRT_SHA256_BYTES + 1], double *features) {
  pk_ctx *scratch = space_scratch(sp);
  pk_ctx_clear_error(scratch);
  pk_schedule *s;
  pk_lfunc *f = NULL;
  pk_status st = pk_space_schedule(sp, scratch, c, &s);
  if (st == PK_OK) st = pk_sched_lower(scratch, sp->task->prog, s, "k0", &f);
  pk_gpu_kernel k;
  if (st == PK_OK && sp->gpu) st = pk_gpu_prepare(scratch, f, &k); /* as the GPU runs it */
  if (st != PK_OK) return st;
  if (features) {
    pk_features_of_lfunc(scratch, sp->task, f, features);
    space_knob_features(sp, c, features + PK_FEATURE_LOOP_COUNT);
  }
  *trace = pk_sched_to_json(s);
  pkrt_sha256_hex(*trace, strlen(*trace), hash);
  return PK_OK;
}

pk_status pk_space_build(pk_space *sp, const pk_config *c, pk_candidate *out) {
  const char *trace;
  char hash[2 * PKRT_SHA256_BYTES + 1];
  memset(out, 0, sizeof *out);
  pk_status st = space_build_trace(sp, c, &trace, hash, NULL);
  if (st != PK_OK) return pk_ctx_fail(sp->ctx, st, "%s", pk_ctx_error(sp->scratch));
  out->kind = PK_CAND_SCHEDULE;
  out->trace = pk_strdup(sp->ctx, trace);
  out->trace_hash = pk_strdup(sp->ctx, hash);
  out->knobs = pk_space_knobs_json(sp->ctx, sp, c);
  return PK_OK;
}

char *pk_space_knobs_json(pk_ctx *ctx, const pk_space *sp, const pk_config *c) {
  int64_t v[PK_SPACE_MAX_KNOBS];
  config_values(sp, c, v);
  pk_strbuf sb;
  pk_strbuf_init(&sb);
  pk_strbuf_append(&sb, "{");
  for (int i = 0; i < sp->nknobs; i++) {
    int k = sp->by_name[i];
    pk_strbuf_printf(&sb, "%s\"%s\":%lld", i ? "," : "", sp->knobs[k].name, (long long)v[k]);
  }
  pk_strbuf_append(&sb, "}");
  return pk_strbuf_finish(ctx, &sb);
}

pk_status pk_space_config_from_knobs(const pk_space *sp, const char *knobs_json, pk_config *out) {
  cJSON *root = knobs_json ? cJSON_Parse(knobs_json) : NULL;
  pk_status st = PK_OK;
  if (!cJSON_IsObject(root) || cJSON_GetArraySize(root) > sp->nknobs) {
    st = pk_ctx_fail(sp->ctx, PK_ERR_CHECK, "knobs: not an object of %d knobs", sp->nknobs);
    goto done;
  }
  memset(out, 0, sizeof *out);
  out->n = sp->nknobs;
  int matched = 0;
  for (int i = 0; i < sp->nknobs && st == PK_OK; i++) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, sp->knobs[i].name);
    /* A knob added after the record was made: its first value is the old behaviour. */
    if (!item && sp->knobs[i].added_later) {
      out->idx[i] = 0;
      continue;
    }
    matched++;
    int found = -1;
    for (int j = 0; cJSON_IsNumber(item) && j < sp->knobs[i].nvalues && found < 0; j++)
      if ((double)sp->knobs[i].values[j] == item->valuedouble) found = j;
    if (found < 0) st = pk_ctx_fail(sp->ctx, PK_ERR_CHECK, "knobs: '%s' missing or not a value of the knob", sp->knobs[i].name);
    out->idx[i] = found;
  }
  if (st == PK_OK && matched != cJSON_GetArraySize(root))
    st = pk_ctx_fail(sp->ctx, PK_ERR_CHECK, "knobs: a name that is not a knob of this space");
done:
  cJSON_Delete(root);
  return st;
}

int pk_space_nexterns(const pk_space *sp) { return sp->nexterns; }
const pk_candidate *pk_space_extern(const pk_space *sp, int i) {
  return i >= 0 && i < sp->nexterns ? &sp->externs[i] : NULL;
}

/* Permutations of 0..n-1 in lexicographic order, the first `max`. */
static int permutations(int n, int max, int out[][PK_TE_MAX_DIMS]) {
  int a[PK_TE_MAX_DIMS], count = 0;
  for (int i = 0; i < n; i++) a[i] = i;
  for (;;) {
    memcpy(out[count++], a, sizeof a);
    if (count == max) return count;
    int i = n - 2;
    while (i >= 0 && a[i] > a[i + 1]) i--;
    if (i < 0) return count;
    int j = n - 1;
    while (a[j] < a[i]) j--;
    int t = a[i]; a[i] = a[j]; a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) { t = a[l]; a[l] = a[r]; a[r] = t; }
  }
}

void space_names_of(pk_space *sp, const pk_te_tensor *t, space_names *out) {
  pk_ctx *ctx = sp->ctx, *tmp = pk_ctx_new();
  pk_schedule *s0 = pk_sched_new(tmp, sp->task->prog);
  memset(out, 0, sizeof *out);
  out->stage = pk_sprintf(ctx, "t%d", t->id);
  out->local = pk_sprintf(ctx, "t%d.local", t->id);
  const pk_stage *st = pk_sched_find_stage(s0, out->stage);
  PK_ASSERT(st && st->nroot == t->ndim + t->body->naxes);
  out->ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) out->root[d] = pk_strdup(ctx, st->root[d]->name);
  out->nreduce = t->body->naxes;
  for (int r = 0; r < out->nreduce; r++) { /* insertion by name */
    const char *name = st->root[t->ndim + r]->name;
    int j = r;
    for (; j > 0 && strcmp(out->k[j - 1], name) > 0; j--) out->k[j] = out->k[j - 1];
    out->k[j] = pk_strdup(ctx, name);
  }
  for (int i = 0; i < s0->nstages && out->nother < 64; i++)
    if (strcmp(s0->stages[i]->name, out->stage) != 0) out->other[out->nother++] = pk_strdup(ctx, s0->stages[i]->name);
  pk_ctx_free(tmp);
  out->norders = permutations(out->nreduce, SPACE_MAX_ORDERS, out->orders);
}

