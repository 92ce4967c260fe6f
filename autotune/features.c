/* features.c — what the cost model knows about a candidate: numbers read off its lowered
 * loop nest (loops, lanes, unrolling, accesses by stride, footprints, guards) and its
 * knob values. Stored with every record, so other tasks' records can train a model too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "space_impl.h"

enum {
  F_EXTERN, F_FLOPS, F_LOOPS, F_MAX_DEPTH, F_LANES, F_VECTOR_LOOPS, F_UNROLLED_LOOPS,
  F_HOT_UNROLL, F_PARALLEL, F_PARALLEL_EXTENT, F_GUARDS, F_MASKED_STORES, F_DYN_GUARDS,
  F_WORKSPACE, F_LOCAL_BYTES, F_ALLOCS, F_DYN_STORES, F_DYN_LOADS, F_MEM_OPS, F_INTENSITY,
  F_HOT_DEPTH, F_HOT_INNER_EXTENT, F_HOT_LANES, F_HOT_LOADS, F_INVARIANT, F_UNIT, F_STRIDED,
  F_UNKNOWN, F_GATHER, F_FP_GLOBAL, F_FP_WORKSPACE, F_FP_LOCAL, F_FP_STORES, F_INNER_TRIPS,
  F_OUTER_TRIPS, F_REGISTER_TILE, F_COUNT_
};
_Static_assert(F_COUNT_ == PK_FEATURE_LOOP_COUNT, "feature count");

static const char *const loop_feature_names[PK_FEATURE_LOOP_COUNT] = {
    "extern", "log2_flops", "loops", "max_depth", "log2_lanes", "vector_loops",
    "unrolled_loops", "log2_hot_unroll", "parallel", "log2_parallel_extent", "guards",
    "masked_stores", "log2_dyn_guards", "log2_workspace_bytes", "log2_local_bytes", "allocs",
    "log2_dyn_stores", "log2_dyn_loads", "log2_mem_ops", "log2_intensity", "hot_depth",
    "log2_hot_inner_extent", "log2_hot_lanes", "hot_loads", "frac_invariant", "frac_unit",
    "frac_strided", "frac_unknown", "frac_gather", "log2_fp_global_loads",
    "log2_fp_workspace_loads", "log2_fp_local", "log2_fp_stores", "log2_inner_trips",
    "log2_outer_trips", "log2_register_tile"};

const char *pk_feature_name(int i) {
  static const char *const knob_names[PK_SPACE_MAX_KNOBS] = {
      "knob0", "knob1", "knob2", "knob3", "knob4", "knob5", "knob6", "knob7",
      "knob8", "knob9", "knob10", "knob11", "knob12", "knob13", "knob14", "knob15"};
  if (i >= 0 && i < PK_FEATURE_LOOP_COUNT) return loop_feature_names[i];
  if (i >= PK_FEATURE_LOOP_COUNT && i < PK_FEATURE_COUNT) return knob_names[i - PK_FEATURE_LOOP_COUNT];
  return "?";
}

#define MAX_NEST 64
#define FOOTPRINT_LOOPS 3 /* footprints are over the innermost loops: what a tile touches */

typedef struct frame {
  const pk_lvar *var;
  int64_t extent;
  pk_loop_kind kind;
} frame;

typedef struct walk {
  pk_ctx *ctx;
  pk_lranges *ranges;
  frame stack[MAX_NEST];
  int depth;
  double f[PK_FEATURE_LOOP_COUNT];
  double access[4]; /* dynamic accesses by stride in the innermost loop */
  double vec_accesses, gathers, hot_trips;
} walk;

enum { STRIDE_INVARIANT, STRIDE_UNIT, STRIDE_STRIDED, STRIDE_UNKNOWN };

static double trips_of(const walk *w, int from) {
  double t = 1;
  for (int i = from; i < w->depth; i++) t *= (double)w->stack[i].extent;
  return t;
}

static bool expr_uses_var(const pk_lexpr *e, const pk_lvar *v) {
  if (e->kind == PK_LX_VAR) return e->var == v;
  for (int i = 0; i < e->nargs; i++)
    if (expr_uses_var(e->args[i], v)) return true;
  return false;
}

/* Coefficient of v in the affine form; *known false when v hides in a non-affine atom. */
static int64_t coef_of(const pk_affine *a, bool ok, const pk_lvar *v, bool *known) {
  *known = ok;
  if (!ok) return 0;
  int64_t c = 0;
  for (int i = 0; i < a->n; i++) {
    if (a->atom[i]->kind == PK_LX_VAR && a->atom[i]->var == v) c = a->coef[i];
    else if (expr_uses_var(a->atom[i], v)) *known = false;
  }
  return c;
}

/* One access of buf at index, executed `count` times. */
static void visit_access(walk *w, const pk_lbuf *buf, pk_lexpr *index, double count, bool store) {
  pk_affine a;
  bool ok = pk_lx_affine(w->ctx, w->ranges, index, &a), known;
  int cls = STRIDE_INVARIANT;
  if (w->depth > 0) {
    int64_t c = coef_of(&a, ok, w->stack[w->depth - 1].var, &known);
    cls = !known ? STRIDE_UNKNOWN : c == 0 ? STRIDE_INVARIANT : llabs(c) == 1 ? STRIDE_UNIT : STRIDE_STRIDED;
  }
  w->access[cls] += count;
  /* a vector access is one instruction when contiguous or broadcast, one per lane else */
  double ops = count;
  for (int i = w->depth - 1; i >= 0; i--) {
    if (w->stack[i].kind != PK_LOOP_VECTORIZED) continue;
    int64_t c = coef_of(&a, ok, w->stack[i].var, &known);
    w->vec_accesses += count;
    if (known && llabs(c) <= 1) ops = count / (double)w->stack[i].extent;
    else w->gathers += count;
    break;
  }
  w->f[F_MEM_OPS] += ops;
  double fp = (double)pkrt_dtype_size(buf->dtype);
  for (int i = w->depth - 1; i >= 0 && i >= w->depth - FOOTPRINT_LOOPS; i--) {
    int64_t c = coef_of(&a, ok, w->stack[i].var, &known);
    if (!known || c != 0) fp *= (double)w->stack[i].extent;
  }
  int slot = store ? (buf->scope == PK_SCOPE_LOCAL ? F_FP_LOCAL : F_FP_STORES)
             : buf->scope == PK_SCOPE_GLOBAL    ? F_FP_GLOBAL
             : buf->scope == PK_SCOPE_WORKSPACE ? F_FP_WORKSPACE
                                                : F_FP_LOCAL;
  w->f[slot] += fp;
}

static int visit_loads(walk *w, pk_lexpr *e, double count) {
  int n = 0;
  if (e->kind == PK_LX_LOAD) {
    visit_access(w, e->buf, e->args[0], count, false);
    w->f[F_DYN_LOADS] += count;
    n++;
  }
  for (int i = 0; i < e->nargs; i++) n += visit_loads(w, e->args[i], count);
  return n;
}

static void visit_store(walk *w, const pk_stmt *st) {
  double trips = trips_of(w, 0);
  w->f[F_DYN_STORES] += trips;
  if (st->mask) w->f[F_MASKED_STORES] += 1;
  visit_access(w, st->buf, st->index, trips, true);
  int loads = visit_loads(w, st->value, trips);
  if (trips <= w->hot_trips) return;
  /* the store executed most often: its nest is the kernel's inner loop */
  w->hot_trips = trips;
  double unroll = 1, lanes = 1, tile = 1;
  for (int i = 0; i < w->depth; i++) {
    if (w->stack[i].kind == PK_LOOP_UNROLLED) unroll *= (double)w->stack[i].extent;
    if (w->stack[i].kind == PK_LOOP_VECTORIZED) lanes = (double)w->stack[i].extent;
    if (w->stack[i].kind == PK_LOOP_UNROLLED || w->stack[i].kind == PK_LOOP_VECTORIZED)
      tile *= (double)w->stack[i].extent;
  }
  int from = w->depth > FOOTPRINT_LOOPS ? w->depth - FOOTPRINT_LOOPS : 0;
  w->f[F_HOT_DEPTH] = w->depth;
  w->f[F_HOT_UNROLL] = log2(unroll);
  w->f[F_HOT_LANES] = log2(lanes);
  w->f[F_HOT_LOADS] = loads;
  w->f[F_HOT_INNER_EXTENT] = w->depth ? log2((double)w->stack[w->depth - 1].extent) : 0;
  w->f[F_INNER_TRIPS] = log2(trips_of(w, from));
  w->f[F_OUTER_TRIPS] = log2(trips / trips_of(w, from));
  w->f[F_REGISTER_TILE] = log2(tile);
}

static void visit(walk *w, const pk_stmt *st) {
  if (!st) return;
  switch (st->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < st->n; i++) visit(w, st->stmts[i]);
    break;
  case PK_ST_FOR: {
    /* a partitioned loop's copies (pk_sched_partition) have expressions for bounds: count
     * them as one iteration; an empty one runs nothing */
    int64_t extent = st->extent->kind == PK_LX_INT ? st->extent->ival : 1;
    if (extent <= 0) break;
    w->f[F_LOOPS] += 1;
    if (st->loop == PK_LOOP_VECTORIZED) {
      w->f[F_VECTOR_LOOPS] += 1;
      if (log2((double)extent) > w->f[F_LANES]) w->f[F_LANES] = log2((double)extent);
    }
    if (st->loop == PK_LOOP_UNROLLED) w->f[F_UNROLLED_LOOPS] += 1;
    if (st->loop == PK_LOOP_PARALLEL) {
      w->f[F_PARALLEL] = 1;
      w->f[F_PARALLEL_EXTENT] = log2((double)extent);
    }
    if (w->depth == MAX_NEST) break; /* deeper than any real nest: ignore the rest */
    w->stack[w->depth++] = (frame){st->var, extent, st->loop};
    int64_t min = st->min->kind == PK_LX_INT ? st->min->ival : 0;
    pk_lranges_set(w->ranges, st->var, min, min + extent - 1);
    if (w->depth > w->f[F_MAX_DEPTH]) w->f[F_MAX_DEPTH] = w->depth;
    visit(w, st->body);
    w->depth--;
    break;
  }
  case PK_ST_IF:
    w->f[F_GUARDS] += 1;
    w->f[F_DYN_GUARDS] += trips_of(w, 0);
    visit(w, st->then_);
    visit(w, st->else_);
    break;
  case PK_ST_STORE:
    visit_store(w, st);
    break;
  case PK_ST_ALLOC:
    w->f[F_ALLOCS] += 1;
    if (st->buf->scope == PK_SCOPE_LOCAL)
      w->f[F_LOCAL_BYTES] += (double)st->buf->numel * (double)pkrt_dtype_size(st->buf->dtype);
    visit(w, st->body);
    break;
  case PK_ST_LET:
    visit(w, st->body);
    break;
  case PK_ST_BARRIER:
    break;
  }
}

static double log2p(double x) { return log2(1 + (x > 0 ? x : 0)); }

void pk_features_of_lfunc(pk_ctx *ctx, const pk_task *task, const pk_lfunc *f, double *out) {
  walk walker = {0}, *w = &walker;
  w->ctx = ctx;
  w->ranges = pk_lranges_new(ctx);
  visit(w, f->body);
  double accesses = w->access[0] + w->access[1] + w->access[2] + w->access[3];
  for (int c = 0; c < 4; c++) w->f[F_INVARIANT + c] = accesses > 0 ? w->access[c] / accesses : 0;
  w->f[F_GATHER] = w->vec_accesses > 0 ? w->gathers / w->vec_accesses : 0;
  w->f[F_FLOPS] = log2p(task->flops);
  w->f[F_INTENSITY] = log2p(task->flops / (w->f[F_MEM_OPS] > 0 ? w->f[F_MEM_OPS] : 1));
  w->f[F_WORKSPACE] = log2p((double)f->workspace_bytes);
  static const int logged[] = {F_DYN_GUARDS, F_LOCAL_BYTES, F_DYN_STORES, F_DYN_LOADS,
                               F_MEM_OPS, F_FP_GLOBAL, F_FP_WORKSPACE, F_FP_LOCAL, F_FP_STORES};
  for (size_t i = 0; i < sizeof logged / sizeof logged[0]; i++) w->f[logged[i]] = log2p(w->f[logged[i]]);
  memcpy(out, w->f, sizeof w->f);
}

void pk_features_of_knobs(const char *knobs_json, double *out) {
  memset(out, 0, PK_SPACE_MAX_KNOBS * sizeof *out);
  cJSON *root = knobs_json ? cJSON_Parse(knobs_json) : NULL;
  int i = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, root) {
    if (i == PK_SPACE_MAX_KNOBS) break;
    out[i++] = cJSON_IsNumber(it) ? log2p(fabs(it->valuedouble)) : 0;
  }
  cJSON_Delete(root);
}

pk_status pk_features_of(pk_ctx *ctx, const pk_task *task, const pk_candidate *cand,
                         double *out, int max) {
  double f[PK_FEATURE_COUNT] = {0};
  if (cand->kind == PK_CAND_EXTERN) {
    f[F_EXTERN] = 1;
  } else {
    pk_schedule *s = NULL;
    pk_lfunc *fn;
    if (cand->trace) SPACE_TRY(pk_sched_from_json(ctx, task->prog, cand->trace, &s));
    SPACE_TRY(pk_sched_lower(ctx, task->prog, s, "k0", &fn));
    pk_features_of_lfunc(ctx, task, fn, f);
    pk_features_of_knobs(cand->knobs, f + PK_FEATURE_LOOP_COUNT);
  }
  int n = max < PK_FEATURE_COUNT ? max : PK_FEATURE_COUNT;
  if (n > 0) memcpy(out, f, (size_t)n * sizeof *out);
  return PK_OK;
}

char *pk_features_json(pk_ctx *ctx, const double *f, int n) {
  pk_strbuf sb;
  pk_strbuf_init(&sb);
  pk_strbuf_append(&sb, "[");
  for (int i = 0; i < n; i++) {
    char num[32];
    /* 9 significant digits are plenty for a model input, and keep records short */
    snprintf(num, sizeof num, "%.9g", isfinite(f[i]) ? f[i] : 0.0);
    pk_strbuf_printf(&sb, "%s%s", i ? "," : "", num);
  }
  pk_strbuf_append(&sb, "]");
  return pk_strbuf_finish(ctx, &sb);
}

int pk_features_from_json(const char *json, double *out, int max) {
  cJSON *root = json ? cJSON_Parse(json) : NULL;
  int n = -1;
  if (cJSON_IsArray(root)) {
    n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
      if (!cJSON_IsNumber(it)) {
        n = -1;
        break;
      }
      if (n < max) out[n] = it->valuedouble;
      n++;
    }
  }
  cJSON_Delete(root);
  return n < 0 ? -1 : (n < max ? n : max);
}
