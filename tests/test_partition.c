/* test_partition.c — loop partitioning (pk_sched_partition, schedule/partition.c): the cut
 * points and the guard-free middle in the lowered IR, kernels that compute exactly what the
 * interpreter computes (padded windows, ragged tails, a padded conv2d as the conv space
 * schedules it), and the rules: partitioned loops stay serial, traces replay. */
#include "sched_test_util.h"

#include "pk_codegen.h"

/* A padded stencil: the guard holds on [1, 39). */
static const char *STENCIL =
    "X = placeholder((40,), f32)\n"
    "Y = compute((40,), (i) => select(i - 1 >= 0 && i + 1 < 40, X[i - 1] + X[i + 1], 0.0))\n";

/* conv2d 2x8x10x10 * 8x8x3x3, padding 1: the hand schedule's shape with its window loops. */
static const char *CONV =
    "X = placeholder((2, 8, 10, 10), f32)\n"
    "W = placeholder((8, 8, 3, 3), f32)\n"
    "c = reduce_axis(8)\n"
    "kh = reduce_axis(3)\n"
    "kw = reduce_axis(3)\n"
    "Y = compute((2, 8, 10, 10), (n, o, h, w) => sum(select(h + kh - 1 >= 0 && h + kh - 1 < 10 && "
    "w + kw - 1 >= 0 && w + kw - 1 < 10, X[n, c, h + kh - 1, w + kw - 1], 0.0) * W[o, c, kh, kw], c, kh, kw))\n";

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* The fewest guard conjuncts on any line that reads the input b0: 0 when some read has
 * no select left. */
static int fewest_guards(const char *ir) {
  int best = 1 << 30;
  for (const char *line = ir; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    const char *b0 = strstr(line, "b0[");
    if (b0 && b0 < end) {
      int n = 0;
      const char *sel = strstr(line, "select(");
      if (sel && sel < end) {
        n = 1;
        for (const char *p = line; (p = strstr(p, "&&")) && p < end; p += 2) n++;
      }
      if (n < best) best = n;
    }
    line = *end ? end + 1 : end;
  }
  return best;
}

static char *lowered(pk_ctx *ctx, const pk_te_program *p, const pk_schedule *s) {
  pk_lfunc *f;
  if (pk_sched_lower(ctx, p, s, "k0", &f) != PK_OK) return pk_sprintf(ctx, "lowering failed: %s", pk_ctx_error(ctx));
  return pk_lfunc_print(ctx, f);
}

/* Builds and runs the scheduled kernel on random inputs against the interpreter. */
static void check_kernel(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *p, pk_schedule *s,
                         const char *name) {
  pkrt_module *m;
  pk_kernel_check_result res;
  if (pk_build_scheduled(ctx, cc, rt, &p, &s, 1, &m) != PK_OK) {
    check(false, name, "build: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  pk_status st = pk_kernel_check_scheduled(ctx, rt, p, s, pkrt_module_find(m, "k0"), 7, &res);
  check(st == PK_OK, name, "%s (trace %s)", pk_ctx_error(ctx), pk_sched_to_json(s));
  pk_ctx_clear_error(ctx);
  pkrt_module_free(m);
}

static void test_stencil(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt) {
  pk_te_program *p = parse_te(ctx, STENCIL);
  pk_schedule *s = pk_sched_new(ctx, p);
  check(pk_sched_partition(s, "t1", "i0") == PK_OK, "stencil: partition", "%s", pk_ctx_error(ctx));
  char *ir = lowered(ctx, p, s);
  /* constant cut points: [0, 1) [1, 39) [39, 40), the middle without its select */
  check(strstr(ir, "for v0 in [0, +1) serial:") && strstr(ir, "for v0 in [1, +38) serial:") &&
            strstr(ir, "for v0 in [39, +1) serial:") && count(ir, "select(") == 2 &&
            strstr(ir, "    b1[v0] = (b0[(v0 - 1)] + b0[(v0 + 1)])\n"),
        "stencil: edges keep the guard, the middle has none", "\n%s", ir);
  check_kernel(ctx, cc, rt, p, s, "stencil: kernel");

  /* split 40 by 16 (a ragged tail) and partition the outer loop: the whole tiles lose the
   * tail test and the stencil guard as far as every inner value satisfies them */
  s = pk_sched_new(ctx, p);
  check(pk_sched_split(s, "t1", "i0", 16) == PK_OK && pk_sched_partition(s, "t1", "i0.o") == PK_OK,
        "ragged: split + partition", "%s", pk_ctx_error(ctx));
  ir = lowered(ctx, p, s);
  check(count(ir, "for v0 in") == 3 && count(ir, "select(") == 2 && count(ir, "if (") == 2,
        "ragged: three outer loops, the middle without tail test or guard", "\n%s", ir);
  check_kernel(ctx, cc, rt, p, s, "ragged: kernel");
}

static void test_conv(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt) {
  pk_te_program *p = parse_te(ctx, CONV);
  /* the conv space's shape: a register tile of 4 channels x 8 columns accumulated locally,
   * window loops outside, the channel loop unrolled; partition the column window loop */
  static const char *json[] = {
      "{\"version\":1,\"steps\":[{\"step\":\"cache_write\",\"stage\":\"t2\",\"scope\":\"local\"},"
      "{\"step\":\"split\",\"stage\":\"t2\",\"axis\":\"i1\",\"factor\":4},"
      "{\"step\":\"split\",\"stage\":\"t2\",\"axis\":\"i3\",\"factor\":8},"
      "{\"step\":\"reorder\",\"stage\":\"t2\",\"axes\":[\"i0\",\"i1.o\",\"i2\",\"i3.o\",\"i1.i\",\"i3.i\"]},"
      "{\"step\":\"vectorize\",\"stage\":\"t2\",\"axis\":\"i3.i\"},"
      "{\"step\":\"compute_at\",\"stage\":\"t2.local\",\"target\":\"t2\",\"axis\":\"i3.o\"},"
      "{\"step\":\"split\",\"stage\":\"t2.local\",\"axis\":\"i1\",\"factor\":4},"
      "{\"step\":\"split\",\"stage\":\"t2.local\",\"axis\":\"i3\",\"factor\":8},"
      "{\"step\":\"reorder\",\"stage\":\"t2.local\",\"axes\":[\"i0\",\"i1.o\",\"i2\",\"i3.o\",\"k0\",\"k1\",\"k2\",\"i1.i\",\"i3.i\"]},"
      "{\"step\":\"unroll\",\"stage\":\"t2.local\",\"axis\":\"i1.i\",\"depth\":0},"
      "{\"step\":\"unroll\",\"stage\":\"t2.local\",\"axis\":\"k2\",\"depth\":0},"
      "{\"step\":\"vectorize\",\"stage\":\"t2.local\",\"axis\":\"i3.i\"},"
      "{\"step\":\"partition\",\"stage\":\"t2.local\",\"axis\":\"k1\"}]}",
      /* no tile: the innermost column loop itself, whose row guard is unswitched */
      "{\"version\":1,\"steps\":[{\"step\":\"partition\",\"stage\":\"t2\",\"axis\":\"i3\"}]}",
      /* every window loop and the rows: partitions nest */
      "{\"version\":1,\"steps\":[{\"step\":\"reorder\",\"stage\":\"t2\",\"axes\":[\"i0\",\"i1\",\"k0\",\"k1\",\"i2\",\"k2\",\"i3\"]},"
      "{\"step\":\"partition\",\"stage\":\"t2\",\"axis\":\"k0\"},{\"step\":\"partition\",\"stage\":\"t2\",\"axis\":\"k1\"},"
      "{\"step\":\"partition\",\"stage\":\"t2\",\"axis\":\"i2\"},{\"step\":\"partition\",\"stage\":\"t2\",\"axis\":\"i3\"}]}",
  };
  for (int i = 0; i < 3; i++) {
    pk_schedule *s;
    char name[64];
    snprintf(name, sizeof name, "conv %d: replays", i);
    check(pk_sched_from_json(ctx, p, json[i], &s) == PK_OK, name, "%s", pk_ctx_error(ctx));
    if (!s) { pk_ctx_clear_error(ctx); continue; }
    snprintf(name, sizeof name, "conv %d: trace round trip", i);
    check(strcmp(pk_sched_to_json(s), json[i]) == 0, name, "\n%s", pk_sched_to_json(s));
    char *ir = lowered(ctx, p, s);
    /* the edges keep all four window tests; the middle has none (the row tests unswitched)
     * or, where an inner loop varies them, only the row tests */
    snprintf(name, sizeof name, "conv %d: the middle loses the window tests", i);
    int want = i == 1 ? 2 : 0;
    check(strstr(ir, "select(") && fewest_guards(ir) == want, name, "%d guards left, want %d\n%s",
          fewest_guards(ir), want, ir);
    snprintf(name, sizeof name, "conv %d: kernel", i);
    check_kernel(ctx, cc, rt, p, s, name);
  }
}

static void test_rules(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, STENCIL);
  pk_schedule *s = pk_sched_new(ctx, p);
  check(pk_sched_partition(s, "t1", "i0") == PK_OK, "rules: partition", "%s", pk_ctx_error(ctx));
  pk_status st = pk_sched_vectorize(s, "t1", "i0");
  check(st == PK_ERR_SCHEDULE && strstr(pk_ctx_error(ctx), "'i0' is partitioned"), "rules: a partitioned loop stays serial",
        "%d %s", st, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  st = pk_sched_split(s, "t1", "i0", 8);
  check(st == PK_ERR_SCHEDULE, "rules: split after partition refused", "%d", st);
  pk_ctx_clear_error(ctx);
  s = pk_sched_new(ctx, p);
  check(pk_sched_unroll(s, "t1", "i0", 4) == PK_OK && pk_sched_partition(s, "t1", "i0") == PK_ERR_SCHEDULE &&
            strstr(pk_ctx_error(ctx), "already unrolled"),
        "rules: an annotated loop is not partitioned", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  check(pk_sched_partition(s, "t1", "nope") == PK_ERR_SCHEDULE, "rules: unknown axis", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

int main(void) {
  (void)state_of; /* sched_test_util.h's, for the tests of illegal steps */
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_cc_options opts = {NULL, NULL, PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  test_stencil(ctx, cc, rt);
  test_conv(ctx, cc, rt);
  test_rules(ctx);
  printf("%s test_partition: %d failures\n", failures ? "FAIL" : "PASS", failures);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return failures ? 1 : 0;
}
