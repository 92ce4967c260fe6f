/* test_schedule.c — the loop and attach primitives (schedule/): each one's effect on
 * stages, iters and extents, and every illegal use refused with PK_ERR_SCHEDULE and a
 * message, leaving the schedule (trace, structure, program) exactly as it was. */
#include "sched_test_util.h"

static const char *MATMUL =
    "A = placeholder((30, 20), f32)\n"
    "B = placeholder((20, 40), f32)\n"
    "k = reduce_axis(20)\n"
    "C = compute((30, 40), (i, j) => sum(A[i, k] * B[k, j], k))\n"
    "D = compute((30, 40), (i, j) => max(C[i, j], 0.0))\n";

/* t1 is read by t2 and t3; t2 only by t3; t3 only by t4. */
static const char *CHAIN =
    "A = placeholder((16, 24), f32)\n"
    "B = compute((16, 24), (i, j) => A[i, j] * 2.0)\n"
    "C = compute((16, 24), (i, j) => B[i, j] + 1.0)\n"
    "D = compute((16, 24), (i, j) => C[i, j] * B[i, j])\n"
    "E = compute((16, 24), (i, j) => D[i, j] - 1.0)\n";

static const char *WIDE =
    "A = placeholder((4, 100), f32)\n"
    "B = compute((4, 100), (i, j) => A[i, j] * 2.0)\n";

/* t2 reads only every other element of t1. */
static const char *STRIDED =
    "A = placeholder((16,), f32)\n"
    "B = compute((16,), (i) => A[i] * 2.0)\n"
    "C = compute((8,), (i) => B[i * 2])\n";

static void expect_describe(pk_ctx *ctx, const pk_schedule *s, const char *name, const char *want) {
  char *got = describe(ctx, s);
  check(strcmp(got, want) == 0, name, "\n got:\n%s want:\n%s", got, want);
}

static void test_new(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  pk_schedule *s = pk_sched_new(ctx, p);
  expect_describe(ctx, s, "new: one stage per compute, roots spatial then reduce",
                  "t2 global root param=2 tensor=2 roots: i0=30 i1=40 k0=20r leaves: i0=30 i1=40 k0=20 niters=3\n"
                  "t3 global root param=3 tensor=3 roots: i0=30 i1=40 leaves: i0=30 i1=40 niters=2\n");
  check(s->prog != p && s->prog->ntensors == 4 && s->prog->tensors[2] == p->tensors[2], "new: program shared",
        "tensors not shared");
  check(pk_sched_to_json(s) && strcmp(pk_sched_to_json(s), "{\"version\":1,\"steps\":[]}") == 0,
        "new: empty trace", "%s", pk_sched_to_json(s));
  check(pk_sched_find_stage(s, "t2") == s->stages[0] && !pk_sched_find_stage(s, "t0") &&
            pk_sched_find_iter(s->stages[0], "k0") == s->stages[0]->root[2] &&
            !pk_sched_find_iter(s->stages[0], "k1"),
        "new: lookups", "find_stage / find_iter");
  check(pk_sched_is_materialized(s, 0) && pk_sched_is_materialized(s, 2) && !pk_sched_is_materialized(s, 7),
        "new: materialized", "is_materialized");
  for (int k = 0; k < PK_STEP_COUNT_; k++)
    check(strcmp(pk_step_kind_name((pk_step_kind)k), "?") != 0, pk_sprintf(ctx, "step kind name %d", k), "unnamed");

  /* Reduce iters are named by canonical ids, not by declaration order or user names. */
  pk_te_program *q = parse_te(ctx,
                              "X = placeholder((6, 7, 8), f32)\n"
                              "first = reduce_axis(8)\n"
                              "second = reduce_axis(7)\n"
                              "Y = compute((6,), (n) => sum(X[n, second, first], second, first))\n");
  expect_describe(ctx, pk_sched_new(ctx, q), "new: canonical reduce names",
                  "t1 global root param=1 tensor=1 roots: i0=6 k0=7r k1=8r leaves: i0=6 k0=7 k1=8 niters=3\n");
}

/* pk_te_reduce_axis_canon_ids numbers reduce axes as the printer does: in the canonical
 * text parsed back, the axis named "k<n>" must get id n. */
static void test_canon_ids(pk_ctx *ctx) {
  static const char *const programs[] = {
      "X = placeholder((2, 4, 9, 9), f32)\n"
      "W = placeholder((8, 4, 3, 3), f32)\n"
      "c = reduce_axis(4)\n"
      "r = reduce_axis(3)\n"
      "s = reduce_axis(3)\n"
      "Y = compute((2, 8, 9, 9), (n, f, h, w) => sum(select(h + r - 1 >= 0 && h + r - 1 < 9 && w + s - 1 >= 0 &&\n"
      "    w + s - 1 < 9, X[n, c, h + r - 1, w + s - 1], 0.0) * W[f, c, r, s], s, c, r))\n",
      "X = placeholder((16, 33), f32)\n"
      "z = reduce_axis(33)\n"
      "y = reduce_axis(16)\n"
      "M = compute((16,), (i) => max(X[i, z], z))\n"
      "T = compute((33,), (j) => sum(X[y, j] * M[y], y))\n"
      "S = compute((16,), (i) => sum(exp(X[i, z] - M[i]), z))\n",
      "A = placeholder((5, 6), f32)\n"
      "b = reduce_axis(6)\n"
      "a = reduce_axis(5)\n"
      "B = compute((1,), (i) => sum(A[a, b] + cast(f32, max(A[a, 0], cast(f32, (b))) > 0.0), a, b))\n",
  };
  for (size_t n = 0; n < sizeof programs / sizeof *programs; n++) {
    pk_te_program *p = parse_te(ctx, programs[n]);
    char *canon = p ? pk_te_print(ctx, p) : NULL;
    pk_te_program *q = canon ? parse_te(ctx, canon) : NULL;
    if (!q) continue;
    int ids[8];
    pk_te_reduce_axis_canon_ids(q, ids);
    bool ok = q->nreduce == p->nreduce;
    for (int i = 0; ok && i < q->nreduce; i++) ok = strcmp(q->reduce_axes[i]->name, pk_sprintf(ctx, "k%d", ids[i])) == 0;
    check(ok, pk_sprintf(ctx, "canonical reduce ids agree with the printer (%zu)", n), "\n%s", canon);
  }
}

static void test_loop_primitives(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  pk_schedule *s = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "split", pk_sched_split(s, "t2", "i0", 8));
  pk_iter *o = pk_sched_find_iter(pk_sched_find_stage(s, "t2"), "i0.o");
  pk_iter *i = pk_sched_find_iter(pk_sched_find_stage(s, "t2"), "i0.i");
  check(o && i && o->extent == 4 && i->extent == 8 && o->rel == PK_ITER_SPLIT_OUTER &&
            i->rel == PK_ITER_SPLIT_INNER && o->parent == i->parent && o->factor == 8 &&
            o->parent->split_outer == o && o->parent->split_inner == i && !o->reduce,
        "split: iters (tail: ceil(30/8) = 4)", "wrong split iters");
  check(strcmp(leaves(ctx, s, "t2"), "i0.o i0.i i1 k0") == 0, "split: leaves", "%s", leaves(ctx, s, "t2"));
  EXPECT_OK(ctx, "split reduce", pk_sched_split(s, "t2", "k0", 20));
  check(pk_sched_find_iter(pk_sched_find_stage(s, "t2"), "k0.o")->extent == 1 &&
            pk_sched_find_iter(pk_sched_find_stage(s, "t2"), "k0.i")->reduce,
        "split: factor == extent, reduce inherited", "k0 split");

  EXPECT_OK(ctx, "tile", pk_sched_tile(s, "t3", "i0", "i1", 8, 16));
  check(strcmp(leaves(ctx, s, "t3"), "i0.o i1.o i0.i i1.i") == 0, "tile: leaves", "%s", leaves(ctx, s, "t3"));
  check(pk_sched_find_iter(pk_sched_find_stage(s, "t3"), "i1.o")->extent == 3, "tile: tail extent ceil(40/16)",
        "wrong");

  const char *order[2] = {"k0.o", "i0.i"};
  EXPECT_OK(ctx, "reorder", pk_sched_reorder(s, "t2", 2, order));
  check(strcmp(leaves(ctx, s, "t2"), "i0.o k0.o i1 i0.i k0.i") == 0, "reorder: named leaves swap their positions",
        "%s", leaves(ctx, s, "t2"));

  EXPECT_OK(ctx, "fuse", pk_sched_fuse(s, "t3", "i0.o", "i1.o"));
  pk_iter *f = pk_sched_find_iter(pk_sched_find_stage(s, "t3"), "i0.o.i1.o.f");
  check(f && f->extent == 12 && f->rel == PK_ITER_FUSED && f->fused_outer->fused_into == f &&
            strcmp(leaves(ctx, s, "t3"), "i0.o.i1.o.f i0.i i1.i") == 0,
        "fuse: one leaf of the product extent", "%s", leaves(ctx, s, "t3"));

  EXPECT_OK(ctx, "vectorize", pk_sched_vectorize(s, "t3", "i1.i"));
  EXPECT_OK(ctx, "unroll full", pk_sched_unroll(s, "t3", "i0.i", 0));
  EXPECT_OK(ctx, "parallel", pk_sched_parallel(s, "t3", "i0.o.i1.o.f"));
  EXPECT_OK(ctx, "unroll partial", pk_sched_unroll(s, "t2", "k0.i", 4));
  const pk_stage *t3 = pk_sched_find_stage(s, "t3");
  check(t3->leaf[2]->kind == PK_LOOP_VECTORIZED && t3->leaf[2]->annotation == 16 &&
            t3->leaf[1]->kind == PK_LOOP_UNROLLED && t3->leaf[1]->annotation == 8 &&
            t3->leaf[0]->kind == PK_LOOP_PARALLEL &&
            pk_sched_find_iter(pk_sched_find_stage(s, "t2"), "k0.i")->annotation == 4,
        "annotations: kinds, lanes, effective unroll depth", "\n%s", describe(ctx, s));
  check(s->nsteps == 9 && s->steps[0].kind == PK_STEP_SPLIT && s->steps[0].factors[0] == 8 &&
            strcmp(s->steps[3].axes[1], "i0.i") == 0,
        "steps recorded with their arguments", "nsteps %d", s->nsteps);
  check(strcmp(pk_sched_to_json(s),
               "{\"version\":1,\"steps\":["
               "{\"step\":\"split\",\"stage\":\"t2\",\"axis\":\"i0\",\"factor\":8},"
               "{\"step\":\"split\",\"stage\":\"t2\",\"axis\":\"k0\",\"factor\":20},"
               "{\"step\":\"tile\",\"stage\":\"t3\",\"x\":\"i0\",\"y\":\"i1\",\"fx\":8,\"fy\":16},"
               "{\"step\":\"reorder\",\"stage\":\"t2\",\"axes\":[\"k0.o\",\"i0.i\"]},"
               "{\"step\":\"fuse\",\"stage\":\"t3\",\"outer\":\"i0.o\",\"inner\":\"i1.o\"},"
               "{\"step\":\"vectorize\",\"stage\":\"t3\",\"axis\":\"i1.i\"},"
               "{\"step\":\"unroll\",\"stage\":\"t3\",\"axis\":\"i0.i\",\"depth\":0},"
               "{\"step\":\"parallel\",\"stage\":\"t3\",\"axis\":\"i0.o.i1.o.f\"},"
               "{\"step\":\"unroll\",\"stage\":\"t2\",\"axis\":\"k0.i\",\"depth\":4}]}") == 0,
        "trace of the loop primitives", "%s", pk_sched_to_json(s));

  pk_schedule *g = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "bind block", pk_sched_bind(g, "t3", "i0", "blockIdx.x"));
  EXPECT_OK(ctx, "bind thread", pk_sched_bind(g, "t3", "i1", "threadIdx.x"));
  check(pk_sched_find_stage(g, "t3")->leaf[0]->kind == PK_LOOP_GPU_BLOCK_X &&
            pk_sched_find_stage(g, "t3")->leaf[1]->kind == PK_LOOP_GPU_THREAD_X,
        "bind: loop kinds", "wrong kinds");
}

static void test_loop_illegal(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  pk_schedule *s = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "setup split", pk_sched_split(s, "t3", "i1", 8));
  EXPECT_ILLEGAL(ctx, s, "split: unknown stage", "unknown stage 't9'", pk_sched_split(s, "t9", "i0", 2));
  EXPECT_ILLEGAL(ctx, s, "split: placeholder is no stage", "t0 is a placeholder", pk_sched_split(s, "t0", "i0", 2));
  EXPECT_ILLEGAL(ctx, s, "split: unknown axis", "unknown axis 'i7'", pk_sched_split(s, "t2", "i7", 2));
  EXPECT_ILLEGAL(ctx, s, "split: null axis", "unknown axis", pk_sched_split(s, "t2", NULL, 2));
  EXPECT_ILLEGAL(ctx, s, "split: not a leaf", "not a leaf", pk_sched_split(s, "t3", "i1", 2));
  EXPECT_ILLEGAL(ctx, s, "split: factor 0", ">= 1", pk_sched_split(s, "t2", "i0", 0));
  EXPECT_ILLEGAL(ctx, s, "split: negative factor", ">= 1", pk_sched_split(s, "t2", "i0", -4));
  EXPECT_ILLEGAL(ctx, s, "split: factor exceeds extent", "exceeds extent 30", pk_sched_split(s, "t2", "i0", 31));
  EXPECT_ILLEGAL(ctx, s, "split: huge factor", "exceeds extent", pk_sched_split(s, "t2", "i0", INT64_MAX));
  EXPECT_ILLEGAL(ctx, s, "tile: same axis twice", "twice", pk_sched_tile(s, "t2", "i0", "i0", 2, 2));
  EXPECT_ILLEGAL(ctx, s, "tile: second split bad (first undone)", "exceeds extent",
                 pk_sched_tile(s, "t2", "i0", "i1", 2, 400));

  const char *dup[2] = {"i0", "i0"};
  const char *nonleaf[2] = {"i0", "i1"};
  const char *unknown[1] = {"zz"};
  EXPECT_ILLEGAL(ctx, s, "reorder: duplicate", "named twice", pk_sched_reorder(s, "t2", 2, dup));
  EXPECT_ILLEGAL(ctx, s, "reorder: non-leaf", "not a leaf", pk_sched_reorder(s, "t3", 2, nonleaf));
  EXPECT_ILLEGAL(ctx, s, "reorder: unknown", "unknown axis 'zz'", pk_sched_reorder(s, "t2", 1, unknown));
  EXPECT_ILLEGAL(ctx, s, "reorder: no axes", "at least one", pk_sched_reorder(s, "t2", 0, NULL));

  EXPECT_ILLEGAL(ctx, s, "fuse: not adjacent", "not directly inside", pk_sched_fuse(s, "t2", "i0", "k0"));
  EXPECT_ILLEGAL(ctx, s, "fuse: inner first", "not directly inside", pk_sched_fuse(s, "t2", "i1", "i0"));
  EXPECT_ILLEGAL(ctx, s, "fuse: spatial with reduce", "spatial and reduce", pk_sched_fuse(s, "t2", "i1", "k0"));
  EXPECT_ILLEGAL(ctx, s, "fuse: with itself", "not directly inside", pk_sched_fuse(s, "t2", "i1", "i1"));

  EXPECT_ILLEGAL(ctx, s, "vectorize: reduce iter", "carries a dependence", pk_sched_vectorize(s, "t2", "k0"));
  EXPECT_ILLEGAL(ctx, s, "vectorize: not innermost", "not the innermost", pk_sched_vectorize(s, "t2", "i1"));
  EXPECT_ILLEGAL(ctx, s, "parallel: reduce iter", "carries a dependence", pk_sched_parallel(s, "t2", "k0"));
  EXPECT_ILLEGAL(ctx, s, "unroll: negative depth", "unroll depth -1", pk_sched_unroll(s, "t2", "k0", -1));
  EXPECT_ILLEGAL(ctx, s, "unroll: depth 1", "unroll depth 1", pk_sched_unroll(s, "t2", "k0", 1));
  EXPECT_ILLEGAL(ctx, s, "unroll: depth exceeds extent", "exceeds extent", pk_sched_unroll(s, "t3", "i1.i", 9));
  EXPECT_ILLEGAL(ctx, s, "bind: unknown tag", "unknown thread tag 'warp.x'", pk_sched_bind(s, "t2", "i0", "warp.x"));
  EXPECT_ILLEGAL(ctx, s, "bind: reduce iter", "carries a dependence", pk_sched_bind(s, "t2", "k0", "threadIdx.x"));

  /* Annotations constrain later steps. */
  EXPECT_OK(ctx, "vectorize innermost", pk_sched_vectorize(s, "t3", "i1.i"));
  EXPECT_ILLEGAL(ctx, s, "split: annotated", "already vectorized", pk_sched_split(s, "t3", "i1.i", 2));
  EXPECT_ILLEGAL(ctx, s, "unroll: annotated", "already vectorized", pk_sched_unroll(s, "t3", "i1.i", 0));
  EXPECT_ILLEGAL(ctx, s, "fuse: annotated", "already vectorized", pk_sched_fuse(s, "t3", "i1.o", "i1.i"));
  const char *vec_out[2] = {"i1.i", "i0"};
  EXPECT_ILLEGAL(ctx, s, "reorder: vectorized leaf must stay innermost", "must stay innermost",
                 pk_sched_reorder(s, "t3", 2, vec_out));
  EXPECT_OK(ctx, "parallel outer", pk_sched_parallel(s, "t3", "i0"));
  EXPECT_ILLEGAL(ctx, s, "parallel: nested in another", "do not nest", pk_sched_parallel(s, "t3", "i1.o"));
  EXPECT_ILLEGAL(ctx, s, "bind: with parallel", "parallel loop", pk_sched_bind(s, "t3", "i1.o", "threadIdx.x"));
  const char *k_out[2] = {"k0", "i0"};
  EXPECT_OK(ctx, "reorder reduce outside", pk_sched_reorder(s, "t2", 2, k_out));
  EXPECT_ILLEGAL(ctx, s, "parallel: inside a reduce loop", "inside reduce loop 'k0'", pk_sched_parallel(s, "t2", "i0"));
  const char *k_back[2] = {"i1", "k0"};
  EXPECT_OK(ctx, "reorder spatial outside", pk_sched_reorder(s, "t2", 2, k_back));
  EXPECT_OK(ctx, "parallel i1 outside k0", pk_sched_parallel(s, "t2", "i1"));
  const char *par_in[2] = {"k0", "i1"};
  EXPECT_ILLEGAL(ctx, s, "reorder: parallel leaf into a reduce loop", "would be inside reduce loop",
                 pk_sched_reorder(s, "t2", 2, par_in));

  pk_schedule *g = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "bind x", pk_sched_bind(g, "t3", "i0", "threadIdx.x"));
  EXPECT_ILLEGAL(ctx, g, "bind: tag twice", "already bound", pk_sched_bind(g, "t3", "i1", "threadIdx.x"));
  EXPECT_ILLEGAL(ctx, g, "parallel: with GPU loops", "GPU-bound", pk_sched_parallel(g, "t3", "i1"));

  pk_schedule *w = pk_sched_new(ctx, parse_te(ctx, WIDE));
  EXPECT_ILLEGAL(ctx, w, "vectorize: extent > 64", "not a vector width", pk_sched_vectorize(w, "t1", "i1"));
  EXPECT_ILLEGAL(ctx, w, "unroll: full unroll of extent > 64", "exceeds 64", pk_sched_unroll(w, "t1", "i1", 0));
  EXPECT_ILLEGAL(ctx, w, "unroll: depth > 64", "exceeds 64", pk_sched_unroll(w, "t1", "i1", 65));
  EXPECT_OK(ctx, "split whole", pk_sched_split(w, "t1", "i1", 100));
  const char *flip[2] = {"i1.i", "i1.o"};
  EXPECT_OK(ctx, "reorder extent-1 loop inside", pk_sched_reorder(w, "t1", 2, flip));
  EXPECT_ILLEGAL(ctx, w, "vectorize: extent < 2", "not a vector width", pk_sched_vectorize(w, "t1", "i1.o"));
}

static void test_attach(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, CHAIN);
  pk_schedule *s = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "split target", pk_sched_split(s, "t3", "i0", 4));
  EXPECT_OK(ctx, "compute_at", pk_sched_compute_at(s, "t2", "t3", "i0.i"));
  const pk_stage *t2 = pk_sched_find_stage(s, "t2"), *t3 = pk_sched_find_stage(s, "t3");
  check(t2->attach == PK_ATTACH_AT && t2->attach_stage == t3 && t2->attach_iter == t3->leaf[1],
        "compute_at: attach fields", "\n%s", describe(ctx, s));
  EXPECT_ILLEGAL(ctx, s, "split: loop with an attached stage", "computed at 'i0.i'", pk_sched_split(s, "t3", "i0.i", 2));
  EXPECT_ILLEGAL(ctx, s, "fuse: loop with an attached stage", "computed at", pk_sched_fuse(s, "t3", "i0.i", "i1"));
  EXPECT_ILLEGAL(ctx, s, "compute_inline: stage with an attached stage", "t2 is computed at t3",
                 pk_sched_compute_inline(s, "t3"));
  EXPECT_ILLEGAL(ctx, s, "parallel: over a kernel output computed inside", "only local stages",
                 pk_sched_parallel(s, "t3", "i0.o"));
  EXPECT_OK(ctx, "compute_root", pk_sched_compute_root(s, "t2"));
  check(t2->attach == PK_ATTACH_ROOT && !t2->attach_stage, "compute_root: detached", "still attached");
  EXPECT_OK(ctx, "compute_at outer", pk_sched_compute_at(s, "t2", "t3", "i0.o"));
  EXPECT_OK(ctx, "compute_at again moves it", pk_sched_compute_at(s, "t2", "t3", "i1"));
  EXPECT_ILLEGAL(ctx, s, "parallel: around a loop with a kernel output attached", "only local stages",
                 pk_sched_parallel(s, "t3", "i0.o"));

  EXPECT_ILLEGAL(ctx, s, "compute_at: to itself", "at itself", pk_sched_compute_at(s, "t2", "t2", "i0"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: unknown target", "unknown target stage 't9'",
                 pk_sched_compute_at(s, "t2", "t9", "i0"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: unknown axis", "unknown axis 'i9'", pk_sched_compute_at(s, "t2", "t3", "i9"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: non-leaf", "not a leaf", pk_sched_compute_at(s, "t2", "t3", "i0"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: other readers", "also read by t3", pk_sched_compute_at(s, "t1", "t2", "i0"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: target does not read it", "does not read t3",
                 pk_sched_compute_at(s, "t3", "t1", "i0"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: not a direct reader", "does not read t1",
                 pk_sched_compute_at(s, "t1", "t4", "i0"));
  EXPECT_OK(ctx, "vectorize target", pk_sched_vectorize(s, "t4", "i1"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: vectorized leaf", "vectorized", pk_sched_compute_at(s, "t3", "t4", "i1"));
  EXPECT_ILLEGAL(ctx, s, "vectorize: loop with an attached stage", "cannot hold",
                 pk_sched_vectorize(s, "t3", "i1"));

  EXPECT_ILLEGAL(ctx, s, "compute_inline: no readers", "no readers", pk_sched_compute_inline(s, "t4"));
  EXPECT_OK(ctx, "compute_inline", pk_sched_compute_inline(s, "t1"));
  check(!pk_sched_is_materialized(s, 1) && pk_sched_is_materialized(s, 2), "compute_inline: not materialized",
        "is_materialized");
  EXPECT_OK(ctx, "compute_root after inline", pk_sched_compute_root(s, "t1"));
  check(pk_sched_is_materialized(s, 1), "compute_root: materialized again", "is_materialized");
  EXPECT_OK(ctx, "compute_root detaches t2", pk_sched_compute_root(s, "t2"));
  EXPECT_OK(ctx, "inline t3", pk_sched_compute_inline(s, "t3"));
  EXPECT_ILLEGAL(ctx, s, "compute_at: inlined target", "inlined", pk_sched_compute_at(s, "t2", "t3", "i1"));

  pk_schedule *r = pk_sched_new(ctx, parse_te(ctx, MATMUL));
  EXPECT_ILLEGAL(ctx, r, "compute_inline: reduction", "is a reduction", pk_sched_compute_inline(r, "t2"));
  EXPECT_OK(ctx, "compute_at reduction at reader", pk_sched_compute_at(r, "t2", "t3", "i1"));
  EXPECT_ILLEGAL(ctx, r, "compute_root: unknown", "unknown stage", pk_sched_compute_root(r, "nope"));

  pk_schedule *q = pk_sched_new(ctx, parse_te(ctx, STRIDED));
  EXPECT_ILLEGAL(ctx, q, "compute_at: kernel output read only in part", "computed in full",
                 pk_sched_compute_at(q, "t1", "t2", "i0"));
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_canon_ids(ctx);
  test_new(ctx);
  test_loop_primitives(ctx);
  test_loop_illegal(ctx);
  test_attach(ctx);
  pk_ctx_free(ctx);
  if (failures) printf("%d FAILED\n", failures);
  return failures ? 1 : 0;
}
