/* space_matmul.c — the matmul-class template: a register tile of tile_m rows × tile_n
 * columns (vectorized, unrolled), accumulated in a cache_write stage or straight into C
 * (then with optional K blocking), B and A optionally packed into panels; with
 * vector_rows, the vectors run down the tile's rows instead and B's elements are
 * broadcast; or, with rfactor, dot products: k split into vector lanes of partial sums.
 * A fused prologue (an operand computed by an elementwise stage of the program) is always
 * packed, the packing evaluating it. Its preset is bench/hand_schedules.c's GEMM schedule,
 * step for step. */
#include <string.h>

#include "space_impl.h"

enum {
  MM_TILE_M, MM_TILE_N, MM_VECTOR, MM_CACHE_WRITE, MM_PACK_B, MM_PACK_A, MM_ORDER,
  MM_K_UNROLL, MM_K_BLOCK, MM_UNROLL, MM_RFACTOR, MM_PARALLEL, MM_VECTOR_ROWS,
  MM_RFACTOR_THREADS, MM_NKNOBS
};

typedef struct matmul_plan {
  const char *stage, *local; /* "t2", "t2.local" */
  const char *m, *n;         /* the last two spatial roots: rows and columns */
  int nreduce;
  const char *k[PK_TE_MAX_DIMS]; /* reduce roots in root order; k[0] is the one tiled */
  int64_t k_extent;
  const char *a, *b;         /* the operands read at bare m / bare n ("t0"); NULL: none */
  int a_dim, b_dim;          /* their dim indexed by m / n: the packed panel's dim */
  bool b_strided_n;          /* B's n dim is not its innermost ("NT"): columns are strided */
  bool a_strided_k;          /* A's m dim is its innermost ("TN", a weight gradient X^T dY):
                                each k step of the tile's rows is a new cache line */
  bool a_pro, b_pro;         /* A / B is a fused prologue (pk_te_fuse_prologue), a compute
                                of the program: always packed, and inlined into its panel,
                                so it runs once per element and is never stored */
  int nother;
  const char *other[64];     /* the other computes (an epilogue such as a ReLU) */
  const char *epi;           /* a fused epilogue (space_epilogue_stage): "t3", which then
                                writes the tile out, t inlined into it; NULL: none */
  const char *tail;          /* the stage after it that writes the tile out instead
                                (space_epilogue_tail: an SGD update's W'), epi computed at
                                its tile; NULL: none */
  int ndim;                  /* of the product stage */
  const char *lanes;         /* rfactor_threads: T.rf's lane root, the parallel loop */
} matmul_plan;

/* An operand read at the bare axis, and the dim where: what cache_read packs by. */
static void find_operand(const pk_expr *mul, const pk_te_axis *ax, const pk_te_axis *k,
                         const char **name, int *dim, int *ndim, pk_ctx *ctx) {
  *name = NULL;
  for (int i = 0; i < 2; i++) {
    const pk_expr *r = mul->args[i];
    int d = space_bare_dim(r, ax);
    if (d >= 0 && space_uses_axis(r, k)) {
      *name = pk_sprintf(ctx, "t%d", r->tensor->id);
      *dim = d;
      *ndim = r->tensor->ndim;
      return;
    }
  }
}

static pk_status matmul_init(pk_space *sp) {
  const pk_te_program *prog = sp->task->prog;
  const pk_te_tensor *t = space_product_stage(prog);
  if (!t || t->ndim < 2) return PK_ERR_UNSUPPORTED;
  pk_ctx *ctx = sp->ctx;
  matmul_plan *p = pk_alloc(ctx, sizeof *p);
  /* Root names as the schedule spells them (reduce roots carry canonical ids). */
  pk_ctx *tmp = pk_ctx_new();
  pk_schedule *s0 = pk_sched_new(tmp, prog);
  p->stage = pk_sprintf(ctx, "t%d", t->id);
  p->local = pk_sprintf(ctx, "t%d.local", t->id);
  const pk_stage *st = pk_sched_find_stage(s0, p->stage);
  PK_ASSERT(st && st->nroot == t->ndim + t->body->naxes);
  p->m = pk_strdup(ctx, st->root[t->ndim - 2]->name);
  p->n = pk_strdup(ctx, st->root[t->ndim - 1]->name);
  p->nreduce = t->body->naxes;
  for (int r = 0; r < p->nreduce; r++) p->k[r] = pk_strdup(ctx, st->root[t->ndim + r]->name);
  p->k_extent = st->root[t->ndim]->extent;
  p->ndim = t->ndim;
  const pk_te_tensor *e = space_epilogue_stage(prog, t);
  if (e) p->epi = pk_sprintf(ctx, "t%d", e->id);
  const pk_te_tensor *tail = e ? space_epilogue_tail(prog, e) : NULL;
  if (tail) p->tail = pk_sprintf(ctx, "t%d", tail->id);
  for (int i = 0; i < s0->nstages && p->nother < 64; i++) {
    const char *nm = s0->stages[i]->name;
    if (strcmp(nm, p->stage) != 0 && !(p->epi && !strcmp(nm, p->epi)) &&
        !(p->tail && !strcmp(nm, p->tail)))
      p->other[p->nother++] = pk_strdup(ctx, nm);
  }
  pk_ctx_free(tmp);
  const pk_expr *mul = t->body->args[0];
  const pk_te_axis *k0 = t->body->axes[0];
  int a_ndim = 0, b_ndim = 0;
  find_operand(mul, t->axes[t->ndim - 2], k0, &p->a, &p->a_dim, &a_ndim, ctx);
  find_operand(mul, t->axes[t->ndim - 1], k0, &p->b, &p->b_dim, &b_ndim, ctx);
  p->b_strided_n = p->b && p->b_dim != b_ndim - 1;
  if (p->a && p->b && !strcmp(p->a, p->b)) p->a = NULL; /* A·Aᵀ: pack it once, as B */
  p->a_strided_k = p->a && p->a_dim == a_ndim - 1;
  /* a compute before the product is a fused prologue: it must be A or B, which the
   * packing then evaluates (any other would be stored, and the graph gave it no bytes) */
  for (int i = 0; i < t->id; i++) {
    if (prog->tensors[i]->kind != PK_TE_COMPUTE) continue;
    const char *nm = pk_sprintf(ctx, "t%d", i);
    bool a = p->a && !strcmp(p->a, nm), b = p->b && !strcmp(p->b, nm);
    if (!a && !b) return PK_ERR_UNSUPPORTED;
    p->a_pro |= a;
    p->b_pro |= b;
  }
  if (p->a_pro || p->b_pro) { /* the prologues are no other stages: their panels run them */
    int n = 0;
    for (int i = 0; i < p->nother; i++)
      if (!(p->a_pro && !strcmp(p->other[i], p->a)) && !(p->b_pro && !strcmp(p->other[i], p->b)))
        p->other[n++] = p->other[i];
    p->nother = n;
  }
  sp->plan = p;

  int64_t M = t->shape[t->ndim - 2], N = t->shape[t->ndim - 1], K = p->k_extent;
  int64_t v[PK_SPACE_MAX_VALUES];
  /* B stored (N, K) makes column vectors a transposing pack of all of B each call; vectors
   * down the rows need only A packed, which is cheaper where M < N. Those tiles are a few
   * vectors tall and a few broadcast columns wide, hence the extra sizes. */
  bool rows_too = p->b_strided_n;
  static const int64_t rows[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32};
  static const int64_t cols[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  static const int64_t cols_only[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64};
  space_add_knob(sp, "tile_m", v, space_tile_values(M, rows, rows_too ? 12 : 10, 2, 16, v));
  if (rows_too) space_add_knob(sp, "tile_n", v, space_tile_values(N, cols, 12, 8, 64, v));
  else space_add_knob(sp, "tile_n", v, space_tile_values(N, cols_only, 10, 8, 64, v));
  /* columns are vectorized, or rows with vector_rows, or k with rfactor */
  space_add_knob(sp, "vector", v, space_vector_values(sp, N > K ? N : K, v));
  /* a fused epilogue is computed at the register tile (space_epilogue_stage): the
   * accumulators are one (cache_write) and each output one sum (no rfactor, no K blocks) */
  bool epi = p->epi != NULL;
  space_add_knob(sp, "cache_write", epi ? (int64_t[]){1} : (int64_t[]){0, 1}, epi ? 1 : 2);
  if (p->b_pro) space_add_knob(sp, "pack_b", (int64_t[]){1, 2}, 2);
  else space_add_knob(sp, "pack_b", (int64_t[]){0, 1, 2}, p->b ? 3 : 1);
  if (p->a_pro) space_add_knob(sp, "pack_a", (int64_t[]){1}, 1);
  else space_add_knob(sp, "pack_a", (int64_t[]){0, 1}, p->a ? 2 : 1);
  space_add_knob(sp, "order", (int64_t[]){0, 1}, 2);
  int n = 0;
  for (int64_t u = 1; u <= 8 && u <= K; u *= 2) v[n++] = u;
  space_add_knob(sp, "k_unroll", v, n);
  n = 0;
  v[n++] = 0;
  for (int64_t b = 32; !epi && b <= 512 && b < K; b *= 2) v[n++] = b;
  space_add_knob(sp, "k_block", v, n);
  space_add_knob(sp, "unroll", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "rfactor", (int64_t[]){0, 1}, epi ? 1 : 2);
  space_add_knob(sp, "parallel", (int64_t[]){0, 1}, sp->opts.allow_parallel ? 2 : 1);
  space_add_knob(sp, "vector_rows", (int64_t[]){0, 1}, rows_too ? 2 : 1);
  sp->knobs[MM_VECTOR_ROWS].added_later = true;
  /* weight gradients (a linear layer's dW sums over every token): space_thread_values */
  n = space_thread_values(sp, t, v); /* v[0] is 0 */
  space_add_knob(sp, "rfactor_threads", v, epi ? 1 : n);
  sp->knobs[MM_RFACTOR_THREADS].added_later = true;
  PK_ASSERT(sp->nknobs == MM_NKNOBS);
  return PK_OK;
}

#define N_(base, suffix) space_name(s, base, suffix)

/* The program's other computes (a ReLU after the matmul): vectorized, in parallel when C is. */
static pk_status matmul_epilogue(const matmul_plan *p, pk_schedule *s, const int64_t *v) {
  for (int i = 0; i < p->nother; i++) {
    const pk_stage *st = pk_sched_find_stage(s, p->other[i]);
    if (st) SPACE_TRY(space_schedule_injective(s, st, v[MM_VECTOR], 1, v[MM_PARALLEL] != 0, false, false));
  }
  return PK_OK;
}

/* The tile's two roles: `vec` is the root whose tile part is vectorized (columns, or rows
 * with vector_rows), `bcast` the one whose elements are broadcast across the vector. */
typedef struct tile_roles {
  const char *vec, *bcast;
} tile_roles;

static tile_roles matmul_roles(const matmul_plan *p, const int64_t *v) {
  return v[MM_VECTOR_ROWS] ? (tile_roles){p->m, p->n} : (tile_roles){p->n, p->m};
}

/* Orders stage's loops as order[0..n) (the loops outside k), then kc (split by k_unroll),
 * the other reductions, the broadcast part of the tile and the vectors; unrolls those two
 * (unroll 1) and vectorizes the lanes. kc, vec.i and vec.i by `vector` are split. */
static pk_status matmul_tile_body(const matmul_plan *p, pk_schedule *s, const char *stage,
                                  const int64_t *v, const char **order, int n, const char *kc) {
  int64_t V = v[MM_VECTOR], ku = v[MM_K_UNROLL];
  tile_roles r = matmul_roles(p, v);
  const char *vi = N_(r.vec, ".i"), *bi = N_(r.bcast, ".i");
  if (ku > 1) {
    order[n++] = N_(kc, ".o");
    order[n++] = N_(kc, ".i");
  } else {
    order[n++] = kc;
  }
  for (int k = 1; k < p->nreduce; k++) order[n++] = p->k[k];
  order[n++] = bi;
  if (V > 1) {
    order[n++] = N_(vi, ".o");
    order[n++] = N_(vi, ".i");
  } else {
    order[n++] = vi;
  }
  SPACE_TRY(pk_sched_reorder(s, stage, n, order));
  if (ku > 1) SPACE_TRY(pk_sched_unroll(s, stage, N_(kc, ".i"), 0));
  if (v[MM_UNROLL]) {
    SPACE_TRY(pk_sched_unroll(s, stage, bi, 0));
    SPACE_TRY(pk_sched_unroll(s, stage, V > 1 ? N_(vi, ".o") : vi, 0));
  }
  if (V > 1) SPACE_TRY(pk_sched_vectorize(s, stage, N_(vi, ".i")));
  return PK_OK;
}

/* The accumulator tile, computed at C's inner tile loop: k outside, the broadcast part and
 * the vectors inside, so each k step loads one vector row and broadcasts the other operand. */
static pk_status matmul_local_tile(const matmul_plan *p, pk_schedule *s, const int64_t *v) {
  const char *L = p->local;
  int64_t V = v[MM_VECTOR], ku = v[MM_K_UNROLL];
  SPACE_TRY(pk_sched_split(s, L, p->m, v[MM_TILE_M]));
  SPACE_TRY(pk_sched_split(s, L, p->n, v[MM_TILE_N]));
  if (V > 1) SPACE_TRY(pk_sched_split(s, L, N_(matmul_roles(p, v).vec, ".i"), V));
  if (ku > 1) SPACE_TRY(pk_sched_split(s, L, p->k[0], ku));
  const char *order[PK_TE_MAX_DIMS + 8] = {N_(p->m, ".o"), N_(p->n, ".o")};
  return matmul_tile_body(p, s, L, v, order, 2, p->k[0]);
}

/* Without cache_write the tile accumulates in C itself; K blocking (k_block) then keeps a
 * k-slice of the packed panels in cache across every tile. */
static pk_status matmul_direct(const matmul_plan *p, pk_schedule *s, const int64_t *v,
                               const char *const *outer) {
  const char *T = p->stage, *kc = p->k[0];
  int64_t V = v[MM_VECTOR], ku = v[MM_K_UNROLL], kb = v[MM_K_BLOCK];
  bool blocked = kb > 0 && kb < p->k_extent;
  if (blocked) {
    SPACE_TRY(pk_sched_split(s, T, kc, kb));
    kc = N_(p->k[0], ".i");
  }
  if (ku > 1) SPACE_TRY(pk_sched_split(s, T, kc, ku));
  if (V > 1) SPACE_TRY(pk_sched_split(s, T, N_(p->n, ".i"), V));
  const char *order[PK_TE_MAX_DIMS + 8];
  int n = 0;
  if (blocked) order[n++] = N_(p->k[0], ".o");
  order[n++] = outer[0];
  order[n++] = outer[1];
  return matmul_tile_body(p, s, T, v, order, n, kc);
}

/* Dot products (rfactor 1): k split by `vector` and rfactored, so T.rf[.., m, n, r] holds
 * `vector` partial sums per output, computed as one vector (r innermost) over a register
 * tile of rows × columns; T then adds the lanes. Both operands are read along k, so this
 * suits B stored (N, K) with few columns, where column vectors would be mostly tail. */
static pk_status matmul_dot(const matmul_plan *p, pk_schedule *s, const int64_t *v,
                            const char *const *outer, bool local) {
  int64_t V = v[MM_VECTOR], ku = v[MM_K_UNROLL];
  if (V < 2 || v[MM_K_BLOCK])
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: rfactor needs vector > 1 and k_block 0");
  const char *T = p->stage, *RF = N_(T, ".rf");
  SPACE_TRY(pk_sched_split(s, T, p->k[0], V));
  SPACE_TRY(pk_sched_rfactor(s, T, N_(p->k[0], ".i")));
  const pk_stage *rf = pk_sched_find_stage(s, RF);
  const char *lane = rf->root[rf->tensor->ndim - 1]->name, *ko = N_(p->k[0], ".o");
  /* the stage that accumulates: T.rf itself, or its cache_write stage in registers */
  const char *acc = RF;
  if (local) {
    SPACE_TRY(pk_sched_cache_write(s, RF, "local"));
    acc = N_(RF, ".local");
  }
  SPACE_TRY(pk_sched_tile(s, RF, p->m, p->n, v[MM_TILE_M], v[MM_TILE_N]));
  const char *mo = N_(p->m, ".o"), *no = N_(p->n, ".o"), *mi = N_(p->m, ".i"), *ni = N_(p->n, ".i");
  if (v[MM_ORDER] == 0) {
    const char *o[] = {no, mo};
    SPACE_TRY(pk_sched_reorder(s, RF, 2, o));
  }
  if (local) {
    SPACE_TRY(pk_sched_vectorize(s, RF, lane));
    SPACE_TRY(pk_sched_compute_at(s, acc, RF, outer[1]));
    SPACE_TRY(pk_sched_split(s, acc, p->m, v[MM_TILE_M]));
    SPACE_TRY(pk_sched_split(s, acc, p->n, v[MM_TILE_N]));
  }
  if (ku > 1) SPACE_TRY(pk_sched_split(s, acc, ko, ku));
  const char *order[PK_TE_MAX_DIMS + 8];
  int n = 0;
  /* in the register stage the tile loops run once each (bound inference narrows them) */
  order[n++] = local ? mo : outer[0];
  order[n++] = local ? no : outer[1];
  if (ku > 1) {
    order[n++] = N_(ko, ".o");
    order[n++] = N_(ko, ".i");
  } else {
    order[n++] = ko;
  }
  for (int r = 1; r < p->nreduce; r++) order[n++] = p->k[r];
  order[n++] = mi;
  order[n++] = ni;
  order[n++] = lane;
  SPACE_TRY(pk_sched_reorder(s, acc, n, order));
  if (ku > 1) SPACE_TRY(pk_sched_unroll(s, acc, N_(ko, ".i"), 0));
  if (v[MM_UNROLL]) {
    SPACE_TRY(pk_sched_unroll(s, acc, mi, 0));
    SPACE_TRY(pk_sched_unroll(s, acc, ni, 0));
  }
  SPACE_TRY(pk_sched_vectorize(s, acc, lane));
  if (v[MM_PARALLEL]) SPACE_TRY(pk_sched_parallel(s, RF, outer[0]));
  return PK_OK;
}

/* vector_rows: the vectors run down C's columns, so only the register tile (whose layout
 * lowering turns to match) can hold them; C takes each as a strided store. */
static pk_status matmul_rows_check(pk_schedule *s, const int64_t *v) {
  if (!v[MM_CACHE_WRITE] || v[MM_RFACTOR] || v[MM_VECTOR] < 2 || v[MM_TILE_M] % v[MM_VECTOR])
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE,
                       "knobs: vector_rows needs cache_write 1, rfactor 0 and tile_m a multiple of vector > 1");
  return PK_OK;
}

/* Tiles O, a stage that writes the register tile out: rows × columns by tile_m × tile_n,
 * walked with its vectors innermost like the accumulation (and vectorized, when the
 * accumulators are a stage of their own). */
static pk_status matmul_tile_out(const matmul_plan *p, pk_schedule *s, const char *O,
                                 const int64_t *v, const char *const *outer, bool local) {
  int64_t V = v[MM_VECTOR];
  bool rows = v[MM_VECTOR_ROWS] != 0;
  const char *mi = N_(p->m, ".i"), *ni = N_(p->n, ".i");
  SPACE_TRY(pk_sched_tile(s, O, p->m, p->n, v[MM_TILE_M], v[MM_TILE_N]));
  if (v[MM_ORDER] == 0 || rows) {
    const char *o[] = {outer[0], outer[1], rows ? ni : mi, rows ? mi : ni};
    SPACE_TRY(pk_sched_reorder(s, O, 4, o));
  }
  if (local && V > 1) {
    const char *vi = N_(matmul_roles(p, v).vec, ".i");
    SPACE_TRY(pk_sched_split(s, O, vi, V));
    SPACE_TRY(pk_sched_vectorize(s, O, N_(vi, ".i")));
  }
  return PK_OK;
}

/* Whether a tail (an SGD update's W' after its M') writes the tile out, the epilogue
 * computed at its tile: only where the tiles and vectors divide the extents (M x N): a
 * tile's region is clamped into the tensor, so a partial last tile would compute part of
 * the previous one's again, and the update is in place (M' = m M + g twice is wrong). Not
 * in parallel (a result computed inside a parallel loop must be local). */
static bool tail_at_tile(const matmul_plan *p, int64_t M, int64_t N, const int64_t *v) {
  int64_t MR = v[MM_TILE_M], NR = v[MM_TILE_N];
  return p->tail && !v[MM_PARALLEL] && M % MR == 0 && N % NR == 0 &&
         (v[MM_VECTOR] < 2 || (v[MM_VECTOR_ROWS] ? MR : NR) % v[MM_VECTOR] == 0);
}

static pk_status matmul_apply_plan(const matmul_plan *p, pk_schedule *s, const int64_t *v) {
  const char *T = p->stage;
  const char *readers[] = {T};
  int64_t MR = v[MM_TILE_M], NR = v[MM_TILE_N];
  bool local = v[MM_CACHE_WRITE] != 0, rows = v[MM_VECTOR_ROWS] != 0;
  /* K blocking needs the reduction loop in C's own nest; refusing it here (rather than
   * ignoring it) keeps every record's knobs equal to what was applied. */
  if (local && v[MM_K_BLOCK])
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: k_block %lld needs cache_write 0",
                       (long long)v[MM_K_BLOCK]);
  if (rows) SPACE_TRY(matmul_rows_check(s, v));
  /* Packed panels: B as [N/block][K][block], A as [M/tile_m][K][tile_m], so the tile's
   * loads are contiguous whatever the operands' layouts (NT, TN). */
  if (v[MM_PACK_B]) SPACE_TRY(pk_sched_cache_read(s, p->b, "ws", 1, readers, p->b_dim, NR * v[MM_PACK_B]));
  if (v[MM_PACK_A]) SPACE_TRY(pk_sched_cache_read(s, p->a, "ws", 1, readers, p->a_dim, MR));
  /* a prologue's panel computes it: read by the panel alone now, it is inlined there */
  if (p->b_pro) SPACE_TRY(pk_sched_compute_inline(s, p->b));
  if (p->a_pro) SPACE_TRY(pk_sched_compute_inline(s, p->a));
  /* order 0: column tiles outermost, so one packed B panel stays in L2 while every row
   * tile streams past it (the hand schedule's choice); order 1: rows outermost. */
  const char *mo = N_(p->m, ".o"), *no = N_(p->n, ".o");
  const char *outer[2] = {no, mo};
  if (v[MM_ORDER] == 1) {
    outer[0] = mo;
    outer[1] = no;
  }
  if (p->epi && (v[MM_RFACTOR] || !local || v[MM_RFACTOR_THREADS]))
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: a fused epilogue needs cache_write 1, "
                       "rfactor 0 and rfactor_threads 0");
  if (v[MM_RFACTOR]) {
    SPACE_TRY(matmul_dot(p, s, v, outer, local));
    return matmul_epilogue(p, s, v);
  }
  if (local) SPACE_TRY(pk_sched_cache_write(s, T, "local"));
  /* With a fused epilogue, T is now a copy of its accumulators, inlined into the epilogue,
   * which takes T's place below: the tile's loops are its loops and the accumulators are
   * computed at them, so the raw product is never stored. */
  const char *O = T;
  if (p->epi) {
    SPACE_TRY(pk_sched_compute_inline(s, T));
    O = p->epi;
  }
  if (p->lanes) { /* T.rf: the lanes outermost (cache_write has to come first) */
    const char *order[PK_TE_MAX_DIMS + 1] = {p->lanes};
    for (int d = 0; d < p->ndim; d++) order[d + 1] = pk_sprintf(s->ctx, "i%d", d);
    SPACE_TRY(pk_sched_reorder(s, T, p->ndim + 1, order));
  }
  /* With a tail at the tile (tail_at_tile), the tail writes the tile out and the epilogue
   * is computed at its tile, shaped the same (its tile loops then run once): both results
   * leave from the registers of one tile; the accumulators are computed at the epilogue's.
   * Otherwise the tail is a loop nest of its own after the tiles. */
  const char *A = O; /* the stage the accumulators are computed at */
  bool at_tile = tail_at_tile(p, space_stage_extent_of(s, p->stage, p->ndim - 2),
                              space_stage_extent_of(s, p->stage, p->ndim - 1), v);
  if (at_tile) O = p->tail;
  SPACE_TRY(matmul_tile_out(p, s, O, v, outer, local));
  if (at_tile) {
    SPACE_TRY(pk_sched_compute_at(s, A, O, outer[1]));
    SPACE_TRY(matmul_tile_out(p, s, A, v, outer, local));
  }
  if (local) {
    SPACE_TRY(pk_sched_compute_at(s, p->local, A, outer[1]));
    SPACE_TRY(matmul_local_tile(p, s, v));
  } else {
    SPACE_TRY(matmul_direct(p, s, v, outer));
  }
  if (p->lanes) SPACE_TRY(pk_sched_parallel(s, T, p->lanes)); /* one partial sum per thread */
  else if (v[MM_PARALLEL]) SPACE_TRY(pk_sched_parallel(s, O, outer[0]));
  if (p->tail && !at_tile)
    SPACE_TRY(space_schedule_injective(s, pk_sched_find_stage(s, p->tail), v[MM_VECTOR], 1, true,
                                       false, false));
  return matmul_epilogue(p, s, v);
}

/* rfactor_threads T: the longest reduction split T ways first (space_thread_rfactor); the
 * tile is then shaped in T.rf, whose lanes are its outermost loop, run in parallel, and T
 * sums the T partial results. */
static pk_status matmul_apply_threads(const matmul_plan *p, pk_schedule *s, const int64_t *v) {
  if (v[MM_RFACTOR])
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: rfactor_threads needs rfactor 0");
  space_names n, rfn;
  memset(&n, 0, sizeof n);
  n.stage = p->stage;
  n.nreduce = p->nreduce;
  n.norders = 1;
  for (int r = 0; r < p->nreduce; r++) n.orders[0][r] = r;
  SPACE_TRY(space_thread_rfactor(s, &n, v[MM_RFACTOR_THREADS], &rfn));
  matmul_plan q = *p;
  q.stage = rfn.stage;
  q.local = rfn.local;
  q.lanes = rfn.root[0];
  q.nother = 0; /* the epilogue once, below */
  const pk_stage *rf = pk_sched_find_stage(s, rfn.stage);
  for (int r = 0; r < p->nreduce; r++) { /* the split axis is now its outer part */
    const pk_iter *it = pk_sched_find_iter(rf, p->k[r]);
    if (!it || it->reduce == false) q.k[r] = space_name(s, p->k[r], ".o");
    else {
      bool root = false;
      for (int i = 0; i < rf->nroot; i++) root |= rf->root[i] == it;
      if (!root) q.k[r] = space_name(s, p->k[r], ".o");
    }
  }
  const pk_iter *k0 = pk_sched_find_iter(rf, q.k[0]);
  PK_ASSERT(k0);
  q.k_extent = k0->extent;
  int64_t w[MM_NKNOBS];
  memcpy(w, v, sizeof w);
  if (w[MM_K_UNROLL] > q.k_extent) w[MM_K_UNROLL] = 1;
  SPACE_TRY(matmul_apply_plan(&q, s, w));
  return matmul_epilogue(p, s, v);
}

static pk_status matmul_apply(const pk_space *sp, pk_schedule *s, const int64_t *v) {
  const matmul_plan *p = sp->plan;
  return v[MM_RFACTOR_THREADS] ? matmul_apply_threads(p, s, v) : matmul_apply_plan(p, s, v);
}

/* bench/hand_schedules.c: 6 rows × 2 vectors, B packed by the tile width, k outermost in
 * the tile, rows and vectors unrolled. Shapes narrower than that take the nearest values
 * the space offers (fc layers: N = 10 columns, M = 1 row at batch 1). */
static bool matmul_preset(const pk_space *sp, int64_t *v) {
  memset(v, 0, MM_NKNOBS * sizeof *v);
  const matmul_plan *p = sp->plan;
  int64_t M = space_stage_extent(sp, p->stage, p->ndim - 2), N = space_stage_extent(sp, p->stage, p->ndim - 1);
  int64_t mr, nr;
  pk_gemm_register_tile(sp->lanes, sp->vector_regs, M, N, &mr, &nr);
  v[MM_TILE_M] = space_pick(sp, MM_TILE_M, mr);
  v[MM_TILE_N] = space_pick(sp, MM_TILE_N, nr);
  v[MM_VECTOR] = space_pick(sp, MM_VECTOR, v[MM_TILE_N] < sp->lanes ? v[MM_TILE_N] : sp->lanes);
  v[MM_CACHE_WRITE] = 1;
  v[MM_PACK_B] = 1;
  /* A stored (K, M) (dW = X^T dY): its rows packed into [M/tile_m][K][tile_m] panels make
   * the tile's loads contiguous: 2-3x on the weight gradients of transformers' linears */
  v[MM_PACK_A] = p->a_strided_k || p->a_pro ? 1 : 0;
  v[MM_K_UNROLL] = 1;
  v[MM_UNROLL] = 1;
  /* order 0 streams all of A past each packed column panel, order 1 all of packed B past
   * each row tile: rows outermost when A overflows the L2 and B does not (a tall X·W of
   * many tokens: A from memory once per column tile is memory-bound) */
  int64_t elem = (int64_t)pkrt_dtype_size(space_product_stage(sp->task->prog)->dtype);
  v[MM_ORDER] = space_cache_order(sp, M * p->k_extent * elem, p->k_extent * N * elem);
  /* few column tiles to run in parallel (a small weight gradient): split the reduction */
  v[MM_RFACTOR_THREADS] = space_thread_preset(sp, MM_RFACTOR_THREADS, (N + v[MM_TILE_N] - 1) / v[MM_TILE_N]);
  /* in parallel where the kernel has work enough, unless a fused update would then lose
   * its write from the register tile (tail_at_tile: not in parallel) */
  if (!tail_at_tile(p, M, N, v)) v[MM_PARALLEL] = space_parallel_preset(sp, MM_PARALLEL, sp->task->flops, 1 << 20);
  return true;
}

const space_class pk_space_class_matmul = {"matmul", matmul_init, matmul_apply, matmul_preset};
