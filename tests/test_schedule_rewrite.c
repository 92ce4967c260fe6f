/* test_schedule_rewrite.c — the derived-stage primitives (cache_write, cache_read,
 * rfactor): the stages, iters and program they make, their illegal uses, and that the
 * rewritten program still computes what the user's does (sched_test_values.h). */
#include "sched_test_util.h"
#include "sched_test_values.h"

/* ---- programs ---- */

static const char *MATMUL =
    "A = placeholder((30, 20), f32)\n"
    "B = placeholder((20, 40), f32)\n"
    "k = reduce_axis(20)\n"
    "C = compute((30, 40), (i, j) => sum(A[i, k] * B[k, j], k))\n"
    "D = compute((30, 40), (i, j) => max(C[i, j], 0.0))\n";

/* t2 (a scaled copy of A) is read by the reduction t3 only. */
static const char *PRODUCER =
    "A = placeholder((12, 10), f32)\n"
    "B = placeholder((10, 9), f32)\n"
    "S = compute((12, 10), (i, j) => A[i, j] * 2.0)\n"
    "k = reduce_axis(10)\n"
    "C = compute((12, 9), (i, j) => sum(S[i, k] * B[k, j], k))\n";

static const char *REDUCTIONS =
    "X = placeholder((5, 7, 13), f64)\n"
    "N = placeholder((6, 17), i32)\n"
    "a = reduce_axis(13)\n"
    "b = reduce_axis(7)\n"
    "c = reduce_axis(3, 17)\n"
    "M = compute((5,), (i) => max(X[i, b, a], a, b))\n"
    "L = compute((5,), (i) => min(X[i, 2, a] - X[i, 1, a], a))\n"
    "Z = compute((6,), (i) => sum(N[i, c] * 3, c))\n"
    "G = compute((5, 7), (i, j) => sum(select(a < 11, X[i, j, a + 2], 0.5), a))\n";

static const char *EIGHT_DIMS =
    "A = placeholder((2, 1, 1, 1, 1, 1, 1, 3), f32)\n"
    "k = reduce_axis(3)\n"
    "B = compute((2, 1, 1, 1, 1, 1, 1, 3), (a, b, c, d, e, f, g, h) => sum(A[a, b, c, d, e, f, g, k], k))\n";

static void expect_describe(pk_ctx *ctx, const pk_schedule *s, const char *name, const char *want) {
  char *got = describe(ctx, s);
  check(strcmp(got, want) == 0, name, "\n got:\n%s want:\n%s", got, want);
}

static void expect_body(pk_ctx *ctx, const pk_schedule *s, const char *stage, const char *name, const char *want) {
  const pk_stage *st = pk_sched_find_stage(s, stage);
  const char *got = st ? pk_te_print_expr(ctx, st->tensor->body) : "(no stage)";
  check(strcmp(got, want) == 0, name, "\n got: %s\nwant: %s", got, want);
}

/* ---- cache_write ---- */

static void test_cache_write(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  char *user_text = pk_te_print(ctx, p);
  pk_schedule *s = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "cache_write", pk_sched_cache_write(s, "t2", "local"));
  expect_describe(ctx, s, "cache_write: stages and iters",
                  "t2.local local root param=-1 tensor=4 roots: i0=30 i1=40 k0=20r leaves: i0=30 i1=40 k0=20 niters=3\n"
                  "t2 global root param=2 tensor=2 roots: i0=30 i1=40 leaves: i0=30 i1=40 niters=2\n"
                  "t3 global root param=3 tensor=3 roots: i0=30 i1=40 leaves: i0=30 i1=40 niters=2\n");
  expect_body(ctx, s, "t2.local", "cache_write: .local has the reduction", "sum(t0[i0, k0] * t1[k0, i1], k0)");
  expect_body(ctx, s, "t2", "cache_write: stage copies .local", "t4[i0, i1]");
  const pk_stage *t2 = pk_sched_find_stage(s, "t2"), *t3 = pk_sched_find_stage(s, "t3");
  check(s->prog->ntensors == 5 && s->prog->tensors[2]->id == 4 && s->prog->tensors[3] == t2->tensor &&
            t2->tensor != p->tensors[2] && t3->tensor != p->tensors[3] &&
            t3->tensor->body->args[0]->tensor == t2->tensor && t2->root[0]->axis == t2->tensor->axes[0],
        "cache_write: program order, private copies, readers relinked", "\n%s", program_text(ctx, s->prog));
  check(strcmp(pk_te_print(ctx, p), user_text) == 0, "cache_write: user's program untouched", "changed");
  check_same_values(ctx, "cache_write: same values", s);

  /* The typical use: accumulate a tile in registers. */
  EXPECT_OK(ctx, "tile stage", pk_sched_tile(s, "t2", "i0", "i1", 8, 8));
  EXPECT_OK(ctx, "compute_at .local", pk_sched_compute_at(s, "t2.local", "t2", "i1.o"));
  EXPECT_OK(ctx, "parallel around local", pk_sched_parallel(s, "t2", "i0.o"));
  EXPECT_OK(ctx, "vectorize copy", pk_sched_vectorize(s, "t2", "i1.i"));
  check_same_values(ctx, "cache_write + compute_at: same values", s);

  pk_schedule *r = pk_sched_new(ctx, p);
  EXPECT_ILLEGAL(ctx, r, "cache_write: unknown stage", "unknown stage 't7'", pk_sched_cache_write(r, "t7", "local"));
  EXPECT_ILLEGAL(ctx, r, "cache_write: scope", "must be \"local\"", pk_sched_cache_write(r, "t2", "shared"));
  EXPECT_ILLEGAL(ctx, r, "cache_write: null scope", "must be \"local\"", pk_sched_cache_write(r, "t2", NULL));
  EXPECT_ILLEGAL(ctx, r, "cache_write: no reduction", "has no reduction", pk_sched_cache_write(r, "t3", "local"));
  EXPECT_OK(ctx, "split first", pk_sched_split(r, "t2", "k0", 4));
  EXPECT_ILLEGAL(ctx, r, "cache_write: after other steps", "already scheduled", pk_sched_cache_write(r, "t2", "local"));
  pk_schedule *a = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "annotate", pk_sched_unroll(a, "t2", "k0", 4));
  EXPECT_ILLEGAL(ctx, a, "cache_write: after an annotation", "already scheduled", pk_sched_cache_write(a, "t2", "local"));
  pk_schedule *twice = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "cache_write once", pk_sched_cache_write(twice, "t2", "local"));
  EXPECT_ILLEGAL(ctx, twice, "cache_write: twice", "has no reduction", pk_sched_cache_write(twice, "t2", "local"));
  EXPECT_OK(ctx, "cache_write of the .local", pk_sched_cache_write(twice, "t2.local", "local"));
  check_same_values(ctx, "cache_write of a cache: same values", twice);

  pk_schedule *at = pk_sched_new(ctx, parse_te(ctx, PRODUCER));
  EXPECT_OK(ctx, "attach producer", pk_sched_compute_at(at, "t2", "t3", "i0"));
  EXPECT_ILLEGAL(ctx, at, "cache_write: stage with an attached stage", "t2 is computed at t3",
                 pk_sched_cache_write(at, "t3", "local"));
}

/* ---- cache_read ---- */

static void test_cache_read(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  const char *t2[1] = {"t2"};
  pk_schedule *s = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "cache_read blocked", pk_sched_cache_read(s, "t1", "ws", 1, t2, 1, 16));
  expect_describe(ctx, s, "cache_read: panel stage first",
                  "t1.ws workspace root param=-1 tensor=4 roots: i0=3 i1=20 i2=16 leaves: i0=3 i1=20 i2=16 niters=3\n"
                  "t2 global root param=2 tensor=2 roots: i0=30 i1=40 k0=20r leaves: i0=30 i1=40 k0=20 niters=3\n"
                  "t3 global root param=3 tensor=3 roots: i0=30 i1=40 leaves: i0=30 i1=40 niters=2\n");
  expect_body(ctx, s, "t1.ws", "cache_read: packing body, zero beyond 40",
              "select(i0 * 16 + i2 < 40, t1[i1, i0 * 16 + i2], 0.0)");
  expect_body(ctx, s, "t2", "cache_read: reader reads the panel",
              "sum(t0[i0, k0] * t4[i1 / 16, k0, i1 % 16], k0)");
  check(s->prog->tensors[2]->id == 4 && s->prog->ntensors == 5, "cache_read: right after the tensor", "\n%s",
        program_text(ctx, s->prog));
  check_same_values(ctx, "cache_read blocked: same values", s);

  EXPECT_OK(ctx, "cache_read same layout", pk_sched_cache_read(s, "t0", "local", 1, t2, -1, 0));
  expect_body(ctx, s, "t0.local", "cache_read: plain copy", "t0[i0, i1]");
  expect_body(ctx, s, "t2", "cache_read: second redirect", "sum(t5[i0, k0] * t4[i1 / 16, k0, i1 % 16], k0)");
  check(strcmp(s->stages[0]->name, "t0.local") == 0 && strcmp(s->stages[1]->name, "t1.ws") == 0,
        "cache_read: stage order follows the program", "\n%s", describe(ctx, s));
  EXPECT_OK(ctx, "cache_read divides", pk_sched_cache_read(s, "t2", "ws", 1, (const char *[]){"t3"}, 0, 5));
  expect_body(ctx, s, "t2.ws", "cache_read of a compute, no guard when block divides",
              "t2[i0 * 5 + i2, i1]");
  check_same_values(ctx, "cache_read chain: same values", s);

  /* Packing per tile: the panel is computed inside the reduction's outer loop. */
  pk_schedule *g = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "pack", pk_sched_cache_read(g, "t1", "ws", 1, t2, 1, 8));
  EXPECT_OK(ctx, "split j", pk_sched_split(g, "t2", "i1", 8));
  EXPECT_OK(ctx, "compute_at panel", pk_sched_compute_at(g, "t1.ws", "t2", "i1.o"));
  EXPECT_ILLEGAL(ctx, g, "parallel: around a workspace stage", "only local stages", pk_sched_parallel(g, "t2", "i0"));
  EXPECT_OK(ctx, "local copy", pk_sched_cache_read(g, "t0", "local", 1, t2, -1, 0));
  EXPECT_OK(ctx, "compute_at local copy", pk_sched_compute_at(g, "t0.local", "t2", "k0"));
  check_same_values(ctx, "cache_read + compute_at: same values", g);

  pk_schedule *r = pk_sched_new(ctx, p);
  EXPECT_ILLEGAL(ctx, r, "cache_read: unknown tensor", "unknown tensor 't9'", pk_sched_cache_read(r, "t9", "ws", 1, t2, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: scope", "\"local\", \"shared\" or \"ws\"", pk_sched_cache_read(r, "t1", "global", 1, t2, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: no readers", "at least one reader", pk_sched_cache_read(r, "t1", "ws", 0, t2, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: unknown reader", "unknown reader stage 't8'",
                 pk_sched_cache_read(r, "t1", "ws", 1, (const char *[]){"t8"}, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: reader twice", "named twice",
                 pk_sched_cache_read(r, "t1", "ws", 2, (const char *[]){"t2", "t2"}, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: reader does not read it", "t3 does not read t1",
                 pk_sched_cache_read(r, "t1", "ws", 1, (const char *[]){"t3"}, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: block_dim out of range", "block_dim 2 out of range",
                 pk_sched_cache_read(r, "t1", "ws", 1, t2, 2, 4));
  EXPECT_ILLEGAL(ctx, r, "cache_read: block_dim below -1", "out of range", pk_sched_cache_read(r, "t1", "ws", 1, t2, -2, 4));
  EXPECT_ILLEGAL(ctx, r, "cache_read: block 0", "block 0 must be >= 1", pk_sched_cache_read(r, "t1", "ws", 1, t2, 0, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: block exceeds extent", "exceeds extent 20",
                 pk_sched_cache_read(r, "t1", "ws", 1, t2, 0, 21));
  EXPECT_ILLEGAL(ctx, r, "cache_read: block without layout change", "block must be 0",
                 pk_sched_cache_read(r, "t1", "ws", 1, t2, -1, 4));
  EXPECT_OK(ctx, "cache_read once", pk_sched_cache_read(r, "t1", "ws", 1, t2, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: name taken", "t1.ws already exists", pk_sched_cache_read(r, "t1", "ws", 1, t2, -1, 0));
  EXPECT_ILLEGAL(ctx, r, "cache_read: reader no longer reads it", "t2 does not read t1",
                 pk_sched_cache_read(r, "t1", "local", 1, t2, -1, 0));

  pk_schedule *at = pk_sched_new(ctx, parse_te(ctx, PRODUCER));
  EXPECT_OK(ctx, "attach producer", pk_sched_compute_at(at, "t2", "t3", "i0"));
  EXPECT_ILLEGAL(ctx, at, "cache_read: of an attached stage", "cache_read it before compute_at",
                 pk_sched_cache_read(at, "t2", "local", 1, (const char *[]){"t3"}, -1, 0));
  EXPECT_OK(ctx, "cache_read into a reader with an attached producer",
            pk_sched_cache_read(at, "t1", "local", 1, (const char *[]){"t3"}, 0, 4));
  check_same_values(ctx, "cache_read beside an attachment: same values", at);

  pk_schedule *e = pk_sched_new(ctx, parse_te(ctx, EIGHT_DIMS));
  EXPECT_ILLEGAL(ctx, e, "cache_read: too many dims", "at most 8", pk_sched_cache_read(e, "t0", "ws", 1, (const char *[]){"t1"}, 7, 2));
}

/* ---- rfactor ---- */

static void test_rfactor(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  pk_schedule *s = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "split k", pk_sched_split(s, "t2", "k0", 8));
  EXPECT_OK(ctx, "rfactor", pk_sched_rfactor(s, "t2", "k0.i"));
  expect_describe(ctx, s, "rfactor: stages and iters",
                  "t2.rf workspace root param=-1 tensor=4 roots: i0=30 i1=40 i2=8 k0.o=3r leaves: i0=30 i1=40 i2=8 k0.o=3 niters=4\n"
                  "t2 global root param=2 tensor=2 roots: i0=30 i1=40 k0.i=8r leaves: i0=30 i1=40 k0.i=8 niters=3\n"
                  "t3 global root param=3 tensor=3 roots: i0=30 i1=40 leaves: i0=30 i1=40 niters=2\n");
  /* Canonical printing numbers the new reduce axes k0, k1 by first use in each body. */
  expect_body(ctx, s, "t2.rf", "rfactor: partial sums over k0.o, guarded tail (20 % 8)",
              "sum(select(k0 * 8 + i2 < 20, t0[i0, k0 * 8 + i2] * t1[k0 * 8 + i2, i1], 0.0), k0)");
  expect_body(ctx, s, "t2", "rfactor: stage sums the partials", "sum(t4[i0, i1, k0], k0)");
  check(s->prog->nreduce == 3 && s->prog->reduce_axes[1]->hi == 3 && s->prog->reduce_axes[2]->hi == 8 &&
            s->prog->reduce_axes[1]->reduce && s->prog->reduce_axes[1]->id == 1,
        "rfactor: new reduce axes appended", "nreduce %d", s->prog->nreduce);
  check_same_values(ctx, "rfactor: same values", s);
  EXPECT_OK(ctx, "parallel over partials", pk_sched_parallel(s, "t2.rf", "i2"));
  EXPECT_OK(ctx, "cache_write of .rf", pk_sched_cache_write(s, "t2", "local"));
  check_same_values(ctx, "rfactor + cache_write: same values", s);

  pk_schedule *m = pk_sched_new(ctx, parse_te(ctx, REDUCTIONS));
  /* Canonical ids: b is k0 (first used in t2's body), a is k1, c is k2. */
  EXPECT_OK(ctx, "split a (max, two axes)", pk_sched_split(m, "t2", "k1", 4));
  EXPECT_OK(ctx, "rfactor max", pk_sched_rfactor(m, "t2", "k1.i"));
  expect_body(ctx, m, "t2.rf", "rfactor: max re-reads the last point past the end",
              "max(t0[i0, k0, min(k1 * 4 + i1, 12)], k1, k0)");
  EXPECT_OK(ctx, "split a in a difference", pk_sched_split(m, "t3", "k1", 5));
  EXPECT_OK(ctx, "rfactor min", pk_sched_rfactor(m, "t3", "k1.i"));
  EXPECT_OK(ctx, "split c (lo 3)", pk_sched_split(m, "t4", "k2", 7));
  EXPECT_OK(ctx, "rfactor integer sum", pk_sched_rfactor(m, "t4", "k2.i"));
  expect_body(ctx, m, "t4.rf", "rfactor: lo offset, divisible (14 % 7)", "sum(t1[i0, k0 * 7 + i1 + 3] * 3, k0)");
  EXPECT_OK(ctx, "split guarded", pk_sched_split(m, "t5", "k1", 3));
  EXPECT_OK(ctx, "rfactor guarded body", pk_sched_rfactor(m, "t5", "k1.i"));
  check_same_values(ctx, "rfactor max/min/int/lo/guards: same values", m);
  const pk_stage *t2rf = pk_sched_find_stage(m, "t2.rf");
  check(t2rf && t2rf->nroot == 4 && strcmp(t2rf->root[2]->name, "k1.o") == 0 && strcmp(t2rf->root[3]->name, "k0") == 0,
        "rfactor: other reduce axes stay in .rf with their names", "\n%s", describe(ctx, m));

  pk_schedule *r = pk_sched_new(ctx, p);
  EXPECT_ILLEGAL(ctx, r, "rfactor: unknown axis", "unknown axis 'k0.i'", pk_sched_rfactor(r, "t2", "k0.i"));
  EXPECT_ILLEGAL(ctx, r, "rfactor: unsplit axis", "inner iter of a split", pk_sched_rfactor(r, "t2", "k0"));
  EXPECT_OK(ctx, "split k", pk_sched_split(r, "t2", "k0", 4));
  EXPECT_ILLEGAL(ctx, r, "rfactor: outer iter", "inner iter of a split", pk_sched_rfactor(r, "t2", "k0.o"));
  EXPECT_OK(ctx, "split i", pk_sched_split(r, "t3", "i0", 4));
  EXPECT_ILLEGAL(ctx, r, "rfactor: spatial split", "inner iter of a split", pk_sched_rfactor(r, "t3", "i0.i"));
  EXPECT_OK(ctx, "another step", pk_sched_split(r, "t2", "i0", 4));
  EXPECT_ILLEGAL(ctx, r, "rfactor: other steps", "steps besides the split", pk_sched_rfactor(r, "t2", "k0.i"));
  pk_schedule *twice = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "split", pk_sched_split(twice, "t2", "k0", 4));
  EXPECT_OK(ctx, "rfactor once", pk_sched_rfactor(twice, "t2", "k0.i"));
  EXPECT_ILLEGAL(ctx, twice, "rfactor: the new axis is no split", "inner iter of a split", pk_sched_rfactor(twice, "t2", "k0.i"));
  EXPECT_OK(ctx, "split the outer part", pk_sched_split(twice, "t2.rf", "k0.o", 2));
  EXPECT_OK(ctx, "rfactor of the .rf", pk_sched_rfactor(twice, "t2.rf", "k0.o.i"));
  check_same_values(ctx, "rfactor twice: same values", twice);

  pk_schedule *at = pk_sched_new(ctx, parse_te(ctx, PRODUCER));
  EXPECT_OK(ctx, "split", pk_sched_split(at, "t3", "k0", 5));
  EXPECT_OK(ctx, "attach producer", pk_sched_compute_at(at, "t2", "t3", "i0"));
  EXPECT_ILLEGAL(ctx, at, "rfactor: stage with an attached stage", "t2 is computed at t3", pk_sched_rfactor(at, "t3", "k0.i"));
  pk_schedule *e = pk_sched_new(ctx, parse_te(ctx, EIGHT_DIMS));
  EXPECT_OK(ctx, "split", pk_sched_split(e, "t1", "k0", 2));
  EXPECT_ILLEGAL(ctx, e, "rfactor: too many dims", "at most 8", pk_sched_rfactor(e, "t1", "k0.i"));
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_cache_write(ctx);
  test_cache_read(ctx);
  test_rfactor(ctx);
  pk_ctx_free(ctx);
  if (failures) printf("%d FAILED\n", failures);
  return failures ? 1 : 0;
}
