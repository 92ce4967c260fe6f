/* space_gpu.c — the config spaces and presets of GPU targets (cuda, opencl). Sums of
 * products (matmul, conv and their gradients): a block tile of threads_y x threads_x
 * threads, each computing a tile_y x tile_x register tile (cache_write to local, unrolled),
 * the reduction in k-steps whose operand panels the block's threads stage in shared memory
 * (cache_read to shared, fetched `vector` consecutive elements per thread). Everything
 * else (elementwise, broadcast, reductions, several stages): each stage's spatial loops
 * fused, `items` per thread, `threads` per block, over several blocks where the stages
 * need no block to wait for another. Every config is checked as the GPU will run it
 * (pk_gpu_prepare, in space_build_trace). */
#include <string.h>

#include "pk_gpu.h"
#include "space_impl.h"

#define N_(base, suffix) space_name(s, base, suffix)


/* ---- sums of products ---- */

enum { GP_THREADS_X, GP_THREADS_Y, GP_TILE_X, GP_TILE_Y, GP_KSTEP, GP_SHARED, GP_UNROLL,
       GP_VECTOR, GP_NKNOBS };

typedef struct gpu_product_plan {
  space_names n;
  const char *z;             /* the outer spatial roots fused ("i0.i1.f"), or NULL */
  int64_t x_extent, y_extent, k_extent;
  int nstaged;
  const char *staged[2];     /* placeholders the product reads: staged in shared memory */
} gpu_product_plan;

static pk_status product_init(pk_space *sp) {
  const pk_te_program *prog = sp->task->prog;
  const pk_te_tensor *t = space_product_stage(prog);
  int ncomputes = 0;
  for (int i = 0; i < prog->ntensors; i++) ncomputes += prog->tensors[i]->kind == PK_TE_COMPUTE;
  /* one stage only: its block loops need no other stage's results */
  if (!t || t->ndim < 1 || ncomputes != 1) return PK_ERR_UNSUPPORTED;
  double length = 1;
  for (int a = 0; a < t->body->naxes; a++) length *= (double)(t->body->axes[a]->hi - t->body->axes[a]->lo);
  /* few outputs, each a long sum (a dot product, a loss): the generic template's
   * reduction across a block's threads has the parallelism tiles lack */
  if (pk_te_tensor_numel(t) < 1024 && length >= 256) return PK_ERR_UNSUPPORTED;
  pk_ctx *ctx = sp->ctx;
  gpu_product_plan *p = pk_alloc(ctx, sizeof *p);
  memset(p, 0, sizeof *p);
  space_names_of(sp, t, &p->n);
  p->x_extent = t->shape[t->ndim - 1];
  p->y_extent = t->ndim >= 2 ? t->shape[t->ndim - 2] : 1;
  pk_ctx *tmp = pk_ctx_new(); /* the extent of the reduce root the k-steps split */
  const pk_stage *st0 = pk_sched_find_stage(pk_sched_new(tmp, prog), p->n.stage);
  const pk_iter *k0 = st0 ? pk_sched_find_iter(st0, p->n.k[0]) : NULL;
  p->k_extent = k0 ? k0->extent : 1;
  pk_ctx_free(tmp);
  const pk_expr *mul = space_sum_product(t);
  for (int i = 0; mul && i < 2; i++) {
    const pk_expr *r = mul->args[i];
    if (r->kind == PK_EXPR_READ && r->tensor->kind == PK_TE_PLACEHOLDER)
      p->staged[p->nstaged++] = pk_sprintf(ctx, "t%d", r->tensor->id);
  }
  if (p->nstaged == 2 && !strcmp(p->staged[0], p->staged[1])) p->nstaged = 1;
  sp->plan = p;
  int64_t v[PK_SPACE_MAX_VALUES];
  space_add_knob(sp, "threads_x", (int64_t[]){1, 2, 4, 8, 16, 32}, 6);
  space_add_knob(sp, "threads_y", (int64_t[]){1, 2, 4, 8, 16}, p->y_extent > 1 ? 5 : 1);
  space_add_knob(sp, "tile_x", (int64_t[]){1, 2, 4}, 3);
  space_add_knob(sp, "tile_y", (int64_t[]){1, 2, 4}, p->y_extent > 1 ? 3 : 1);
  int nk = 0; /* 0: no k-steps; a step as long as k stages the whole panel once */
  v[nk++] = 0;
  for (int64_t f = 2; f <= 32 && f < p->k_extent; f *= 2) v[nk++] = f;
  if (p->k_extent <= 32) v[nk++] = p->k_extent;
  space_add_knob(sp, "kstep", v, nk);
  space_add_knob(sp, "shared", (int64_t[]){0, 1}, p->nstaged ? 2 : 1);
  space_add_knob(sp, "unroll", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "vector", (int64_t[]){1, 2, 4}, 3);
  PK_ASSERT(sp->nknobs == GP_NKNOBS);
  return PK_OK;
}

/* Splits a spatial root into block, thread and per-thread parts: r.o.o, r.o.i, r.i. */
static pk_status tile_root(pk_schedule *s, const char *S, const char *r, int64_t tile, int64_t threads) {
  SPACE_TRY(pk_sched_split(s, S, r, tile));
  return pk_sched_split(s, S, N_(r, ".o"), threads);
}

/* The staged panel fetched by all threads: its loops fused, `vector` consecutive elements
 * per thread, the rest over threadIdx.y and threadIdx.x. */
static pk_status fetch(pk_schedule *s, const char *st, int64_t tx, int64_t ty, int64_t vector) {
  const pk_stage *stage = pk_sched_find_stage(s, st);
  while (stage->nleaf > 1) SPACE_TRY(pk_sched_fuse(s, st, stage->leaf[0]->name, stage->leaf[1]->name));
  const char *f = stage->leaf[0]->name;
  int64_t n = stage->leaf[0]->extent; /* a panel smaller than the block: fewer threads */
  if (vector > 1) {
    SPACE_TRY(pk_sched_split(s, st, f, vector));
    SPACE_TRY(pk_sched_vectorize(s, st, N_(f, ".i")));
    f = N_(f, ".o");
    n = (n + vector - 1) / vector;
  }
  SPACE_TRY(pk_sched_split(s, st, f, tx * ty < n ? tx * ty : n));
  if (ty == 1) return pk_sched_bind(s, st, N_(f, ".i"), "threadIdx.x");
  SPACE_TRY(pk_sched_split(s, st, N_(f, ".i"), tx < n ? tx : n));
  SPACE_TRY(pk_sched_bind(s, st, N_(f, ".i.o"), "threadIdx.y"));
  return pk_sched_bind(s, st, N_(f, ".i.i"), "threadIdx.x");
}

static pk_status product_apply(const pk_space *sp, pk_schedule *s, const int64_t *v) {
  const gpu_product_plan *p = sp->plan;
  const space_names *n = &p->n;
  const char *S = n->stage, *L = n->local;
  int nd = n->ndim;
  SPACE_TRY(pk_sched_cache_write(s, S, "local"));
  const char *z = NULL;
  if (nd > 2) { /* batch, channels...: one block index */
    z = n->root[0];
    for (int d = 1; d < nd - 2; d++) {
      SPACE_TRY(pk_sched_fuse(s, S, z, n->root[d]));
      z = pk_sprintf(s->ctx, "%s.%s.f", z, n->root[d]);
    }
  }
  const char *x = n->root[nd - 1], *y = nd >= 2 ? n->root[nd - 2] : NULL;
  SPACE_TRY(tile_root(s, S, x, v[GP_TILE_X], v[GP_THREADS_X]));
  if (y) SPACE_TRY(tile_root(s, S, y, v[GP_TILE_Y], v[GP_THREADS_Y]));
  const char *order[8];
  int k = 0;
  if (z) order[k++] = z;
  if (y) order[k++] = N_(y, ".o.o");
  order[k++] = N_(x, ".o.o");
  if (y) order[k++] = N_(y, ".o.i");
  order[k++] = N_(x, ".o.i");
  if (y) order[k++] = N_(y, ".i");
  order[k++] = N_(x, ".i");
  SPACE_TRY(pk_sched_reorder(s, S, k, order));
  if (z) SPACE_TRY(pk_sched_bind(s, S, z, "blockIdx.z"));
  if (y) SPACE_TRY(pk_sched_bind(s, S, N_(y, ".o.o"), "blockIdx.y"));
  SPACE_TRY(pk_sched_bind(s, S, N_(x, ".o.o"), "blockIdx.x"));
  if (y) SPACE_TRY(pk_sched_bind(s, S, N_(y, ".o.i"), "threadIdx.y"));
  SPACE_TRY(pk_sched_bind(s, S, N_(x, ".o.i"), "threadIdx.x"));
  SPACE_TRY(pk_sched_compute_at(s, L, S, N_(x, ".o.i")));

  /* the register tile: reduce loops outside, the tile's spatial loops innermost */
  const char *lorder[2 * PK_TE_MAX_DIMS + 1];
  int nl = 0;
  const char *kouter = NULL;
  if (v[GP_KSTEP] > 0) {
    SPACE_TRY(pk_sched_split(s, L, n->k[0], v[GP_KSTEP]));
    kouter = N_(n->k[0], ".o");
    lorder[nl++] = kouter;
  }
  for (int r = 0; r < n->nreduce; r++)
    if (r || !kouter) lorder[nl++] = n->k[r];
  if (kouter) lorder[nl++] = N_(n->k[0], ".i");
  for (int d = 0; d < nd; d++) lorder[nl++] = n->root[d];
  SPACE_TRY(pk_sched_reorder(s, L, nl, lorder));
  if (v[GP_UNROLL])
    for (int d = 0; d < nd; d++) {
      const pk_iter *it = pk_sched_find_iter(pk_sched_find_stage(s, L), n->root[d]);
      if (it && it->extent > 1 && it->extent <= 64) SPACE_TRY(pk_sched_unroll(s, L, n->root[d], 0));
    }
  if (!v[GP_SHARED]) return PK_OK;
  if (!kouter) return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "shared panels need a kstep");
  const char *readers[] = {L};
  for (int i = 0; i < p->nstaged; i++) {
    const char *st = N_(p->staged[i], ".shared");
    SPACE_TRY(pk_sched_cache_read(s, p->staged[i], "shared", 1, readers, -1, 0));
    SPACE_TRY(pk_sched_compute_at(s, st, L, kouter));
    SPACE_TRY(fetch(s, st, v[GP_THREADS_X], y ? v[GP_THREADS_Y] : 1, v[GP_VECTOR]));
  }
  return PK_OK;
}

/* The largest power of two <= want and <= extent (no thread loop of the tile narrower
 * than the block, where the shared panels' barriers must be reached by all). */
static int64_t threads_for(int64_t extent, int64_t want) {
  int64_t t = 1;
  while (t * 2 <= want && t * 2 <= extent) t *= 2;
  return t;
}

/* 16 x 16 threads of 4 x 4 outputs (a 64 x 64 block tile), k in steps of 8 staged in
 * shared memory, unrolled register tiles; smaller where the output is. */
static bool product_preset(const pk_space *sp, int64_t *v) {
  const gpu_product_plan *p = sp->plan;
  v[GP_TILE_X] = p->x_extent >= 64 ? 4 : 1;
  v[GP_TILE_Y] = p->y_extent >= 64 ? 4 : 1;
  int64_t cx = (p->x_extent + v[GP_TILE_X] - 1) / v[GP_TILE_X];
  int64_t cy = (p->y_extent + v[GP_TILE_Y] - 1) / v[GP_TILE_Y];
  v[GP_THREADS_X] = threads_for(cx, 16);
  v[GP_THREADS_Y] = p->y_extent > 1 ? threads_for(cy, 16) : 1;
  v[GP_KSTEP] = space_pick(sp, GP_KSTEP, 8);
  v[GP_SHARED] = p->nstaged && v[GP_KSTEP] > 0;
  v[GP_UNROLL] = 1;
  v[GP_VECTOR] = 1;
  return true;
}

const space_class pk_space_class_gpu_product = {"gpu_product", product_init, product_apply,
                                                product_preset};

/* ---- everything else ---- */

enum { GG_THREADS, GG_BLOCKS, GG_ITEMS, GG_UNROLL, GG_RFACTOR, GG_NKNOBS };

typedef struct gpu_generic_plan {
  int nstages;
  const char *stage[64];
  bool independent;  /* no compute reads another: the stages may run over several blocks */
  int64_t longest;   /* the longest last reduce axis of a reduction stage */
  int64_t outputs;   /* elements of the last reduction's output */
} gpu_generic_plan;

static bool reads_compute(const pk_expr *e) {
  if (e->kind == PK_EXPR_READ && e->tensor->kind == PK_TE_COMPUTE) return true;
  for (int i = 0; i < e->nargs; i++)
    if (reads_compute(e->args[i])) return true;
  return false;
}

static pk_status generic_init(pk_space *sp) {
  const pk_te_program *prog = sp->task->prog;
  gpu_generic_plan *p = pk_alloc(sp->ctx, sizeof *p);
  memset(p, 0, sizeof *p);
  p->independent = true;
  pk_ctx *tmp = pk_ctx_new();
  pk_schedule *s0 = pk_sched_new(tmp, prog);
  for (int i = 0; i < s0->nstages && p->nstages < 64; i++) {
    const pk_te_tensor *t = s0->stages[i]->tensor;
    p->stage[p->nstages++] = pk_strdup(sp->ctx, s0->stages[i]->name);
    p->independent = p->independent && !reads_compute(t->body);
    if (t->body->kind == PK_EXPR_REDUCE && !t->dom_ndim) {
      const pk_te_axis *k = t->body->axes[t->body->naxes - 1];
      if (k->hi - k->lo > p->longest) p->longest = k->hi - k->lo;
      p->outputs = pk_te_tensor_numel(t);
    }
  }
  pk_ctx_free(tmp);
  sp->plan = p;
  space_add_knob(sp, "threads", (int64_t[]){32, 64, 128, 256}, 4);
  space_add_knob(sp, "blocks", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "items", (int64_t[]){1, 2, 4}, 3);
  space_add_knob(sp, "unroll", (int64_t[]){1, 4}, 2);
  int64_t rf[PK_SPACE_MAX_VALUES];
  int nrf = 0;
  rf[nrf++] = 0;
  for (int64_t f = 32; f <= 256 && f <= p->longest; f *= 2) rf[nrf++] = f;
  space_add_knob(sp, "rfactor", rf, nrf);
  PK_ASSERT(sp->nknobs == GG_NKNOBS);
  return PK_OK;
}

/* A cross-thread reduction: the last reduce axis split into `threads` lanes, whose partial
 * results (S.rf) the block's threads write to shared memory; then one thread per output
 * sums them (each output its own block with `blocks`, else a serial loop). */
static pk_status generic_rfactor(pk_schedule *s, const char *S, int64_t threads, const int64_t *v) {
  const pk_stage *st = pk_sched_find_stage(s, S);
  int nsp = st->tensor->ndim, nred = st->nroot - nsp;
  const char *k = st->root[nsp + nred - 1]->name, *RF = N_(S, ".rf");
  SPACE_TRY(pk_sched_split(s, S, k, threads));
  SPACE_TRY(pk_sched_rfactor(s, S, N_(k, ".i")));
  const pk_stage *rf = pk_sched_find_stage(s, RF);
  SPACE_TRY(pk_sched_set_scope(s, RF, "shared"));
  SPACE_TRY(pk_sched_bind(s, RF, rf->root[nsp]->name, "threadIdx.x"));
  if (v[GG_UNROLL] > 1) SPACE_TRY(pk_sched_unroll(s, RF, rf->leaf[rf->nleaf - 1]->name, v[GG_UNROLL]));
  if (nsp == 0) return PK_OK; /* one output: S.rf at the root, S on thread 0 */
  for (; nsp > 1; nsp--) SPACE_TRY(pk_sched_fuse(s, S, st->leaf[0]->name, st->leaf[1]->name));
  const char *f = st->leaf[0]->name;
  SPACE_TRY(pk_sched_split(s, S, f, 1));
  SPACE_TRY(pk_sched_bind(s, S, N_(f, ".i"), "threadIdx.x"));
  if (v[GG_BLOCKS]) SPACE_TRY(pk_sched_bind(s, S, N_(f, ".o"), "blockIdx.x"));
  return pk_sched_compute_at(s, RF, S, N_(f, ".o"));
}

static pk_status generic_stage(pk_schedule *s, const char *S, const int64_t *v) {
  const pk_stage *st = pk_sched_find_stage(s, S);
  if (st->attach != PK_ATTACH_ROOT || st->tensor->dom_ndim) return PK_OK; /* scatter: fixed */
  const pk_expr *red = st->tensor->body->kind == PK_EXPR_REDUCE ? st->tensor->body : NULL;
  const pk_te_axis *klast = red ? red->axes[red->naxes - 1] : NULL;
  if (klast && v[GG_RFACTOR] > 0 && klast->hi - klast->lo >= v[GG_RFACTOR])
    return generic_rfactor(s, S, v[GG_RFACTOR], v);
  int nsp = 0;
  while (nsp < st->nleaf && !st->leaf[nsp]->reduce) nsp++;
  bool reduce = nsp < st->nleaf;
  if (reduce && v[GG_UNROLL] > 1)
    SPACE_TRY(pk_sched_unroll(s, S, st->leaf[st->nleaf - 1]->name, v[GG_UNROLL]));
  if (nsp == 0) return PK_OK; /* a scalar: one thread */
  for (; nsp > 1; nsp--) SPACE_TRY(pk_sched_fuse(s, S, st->leaf[0]->name, st->leaf[1]->name));
  const char *f = st->leaf[0]->name;
  int64_t extent = st->leaf[0]->extent;
  if (v[GG_ITEMS] > 1 && extent >= 2) { /* a short stage: fewer items, fewer threads */
    int64_t items = v[GG_ITEMS] < extent ? v[GG_ITEMS] : extent;
    SPACE_TRY(pk_sched_split(s, S, f, items));
    if (!reduce) SPACE_TRY(pk_sched_vectorize(s, S, N_(f, ".i")));
    f = N_(f, ".o");
    extent = (extent + items - 1) / items;
  }
  SPACE_TRY(pk_sched_split(s, S, f, v[GG_THREADS] < extent ? v[GG_THREADS] : extent));
  SPACE_TRY(pk_sched_bind(s, S, N_(f, ".i"), "threadIdx.x"));
  if (v[GG_BLOCKS]) SPACE_TRY(pk_sched_bind(s, S, N_(f, ".o"), "blockIdx.x"));
  return PK_OK;
}

static pk_status generic_apply(const pk_space *sp, pk_schedule *s, const int64_t *v) {
  const gpu_generic_plan *p = sp->plan;
  for (int i = 0; i < p->nstages; i++) SPACE_TRY(generic_stage(s, p->stage[i], v));
  return PK_OK;
}

/* 256 threads, one element each; several blocks when the stages are independent, one
 * block (whose barriers order the stages) otherwise; a reduction of few outputs over a
 * long axis (a loss, a bias gradient's column sums, a row softmax over few rows) split
 * across up to 256 threads. */
static bool generic_preset(const pk_space *sp, int64_t *v) {
  const gpu_generic_plan *p = sp->plan;
  v[GG_THREADS] = 256;
  v[GG_BLOCKS] = p->independent;
  v[GG_ITEMS] = 1;
  v[GG_UNROLL] = 1;
  v[GG_RFACTOR] = p->longest >= 64 && p->outputs <= 4096 ? space_pick(sp, GG_RFACTOR, 256) : 0;
  return true;
}

const space_class pk_space_class_gpu_generic = {"gpu_generic", generic_init, generic_apply,
                                                generic_preset};
