/* test_te_fuse.c — pk_te_fuse and pk_te_fuse_tail (te/fuse.c), the TE half of the fuse pass:
 * the fused program computes, in the reference interpreter, exactly what producer then
 * consumer compute; its
 * canonical text is the one written by hand; shared placeholders are read once; and every
 * program it must not fuse is refused with the right status. */
#include <string.h>

#include "pk_te.h"
#include "pk_verify.h"
#include "pk_test.h"

static pk_te_program *parse(pk_ctx *ctx, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "test", &p) != PK_OK) {
    printf("FAIL parse: %s\n", pk_ctx_error(ctx));
    failures++;
  }
  return p;
}

static const char *PRODUCER = "X = placeholder((4, 6), f32)\n"
                              "B = placeholder((6,), f32)\n"
                              "T = compute((4, 6), (i, j) => max(X[i, j] + B[j], 0.0))\n";

/* Transpose of T, times X: reads T once per element and shares X with the producer. */
static const char *CONSUMER = "T = placeholder((4, 6), f32)\n"
                              "X = placeholder((4, 6), f32)\n"
                              "Y = compute((6, 4), (a, b) => T[b, a] * X[b, a] - 1.5)\n";

static const char *EXPECTED = "P = placeholder((4, 6), f32)\n"
                              "Q = placeholder((6,), f32)\n"
                              "Z = compute((6, 4), (u, v) => max(P[v, u] + Q[u], 0.0) * P[v, u] - 1.5)\n";

static void test_fuse_values(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, PRODUCER), *c = parse(ctx, CONSUMER), *e = parse(ctx, EXPECTED);
  CHECK(p && c && e, "parse");
  int share[2] = {-1, 0}; /* consumer's X is the producer's X */
  pk_te_program *f;
  CHECK(pk_te_fuse(ctx, p, c, 0, share, &f) == PK_OK, "fuse: %s", pk_ctx_error(ctx));
  CHECK(f->ntensors == 3, "fused program has %d tensors, want 3 (X, B, Y)", f->ntensors);
  CHECK(!strcmp(pk_te_print(ctx, f), pk_te_print(ctx, e)), "canonical text:\n%s\nwant\n%s",
        pk_te_print(ctx, f), pk_te_print(ctx, e));

  /* producer then consumer vs the fused program, in the interpreter: the same doubles */
  pk_te_ref *rp = pk_te_ref_new(ctx, p), *rc = pk_te_ref_new(ctx, c), *rf = pk_te_ref_new(ctx, f);
  pk_te_ref_fill_random(p, rp, 7);
  CHECK(pk_te_interp_run(ctx, p, rp) == PK_OK, "producer: %s", pk_ctx_error(ctx));
  for (int t = 0; t < 2; t++) { /* consumer's T = producer's T, X = X */
    int from = t == 0 ? 2 : 0;
    memcpy(rc->tensors[t].val, rp->tensors[from].val, sizeof(double) * 24);
    memcpy(rc->tensors[t].mag, rp->tensors[from].mag, sizeof(double) * 24);
  }
  CHECK(pk_te_interp_run(ctx, c, rc) == PK_OK, "consumer: %s", pk_ctx_error(ctx));
  for (int t = 0; t < 2; t++) {
    memcpy(rf->tensors[t].val, rp->tensors[t].val, sizeof(double) * (size_t)rp->tensors[t].numel);
    memcpy(rf->tensors[t].mag, rp->tensors[t].mag, sizeof(double) * (size_t)rp->tensors[t].numel);
  }
  CHECK(pk_te_interp_run(ctx, f, rf) == PK_OK, "fused: %s", pk_ctx_error(ctx));
  CHECK(!memcmp(rf->tensors[2].val, rc->tensors[2].val, sizeof(double) * 24),
        "fused values differ from producer then consumer");
  PASS();
}

/* Without share, the consumer's X becomes a placeholder of its own. */
static void test_fuse_no_share(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, PRODUCER), *c = parse(ctx, CONSUMER), *f;
  CHECK(p && c, "parse");
  CHECK(pk_te_fuse(ctx, p, c, 0, NULL, &f) == PK_OK, "fuse: %s", pk_ctx_error(ctx));
  CHECK(f->ntensors == 4 && f->tensors[2]->kind == PK_TE_PLACEHOLDER,
        "want placeholders X, B, X then Y (%d tensors)", f->ntensors);
  PASS();
}

/* Consumers that must stay a kernel of their own, and calls that are wrong. */
static void refused(pk_ctx *ctx, const char *name, const char *consumer, int slot,
                    pk_status want, const char *msg) {
  pk_te_program *p = parse(ctx, PRODUCER), *c = parse(ctx, consumer), *f = NULL;
  if (!p || !c) return;
  pk_status s = pk_te_fuse(ctx, p, c, slot, NULL, &f);
  check(s == want && !f && strstr(pk_ctx_error(ctx), msg), name, "status %d (want %d): %s", s,
        want, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* A tail: a norm-like producer (a row mean, then its elementwise result) with a relu6 and a
 * bias after it: the fused program keeps the mean as a stage and computes the consumer's
 * tensor with the producer's result inlined; in the interpreter, the same doubles as the two
 * programs one after the other. A producer whose last compute reduces is refused. */
static const char *NORM = "X = placeholder((4, 6), f32)\n"
                          "k = reduce_axis(6)\n"
                          "M = compute((4,), (i) => sum(X[i, k] / 6.0, k))\n"
                          "Y = compute((4, 6), (i, j) => X[i, j] - M[i])\n";
static const char *ACT = "Y = placeholder((4, 6), f32)\n"
                         "B = placeholder((6,), f32)\n"
                         "A = compute((4, 6), (i, j) => min(max(Y[i, j] + B[j], 0.0), 6.0))\n";

static void test_fuse_tail(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, NORM), *c = parse(ctx, ACT), *f = NULL;
  CHECK(p && c, "parse");
  CHECK(pk_te_fuse_tail(ctx, p, c, 0, NULL, &f) == PK_OK, "fuse_tail: %s", pk_ctx_error(ctx));
  /* X, B, M, A */
  CHECK(f->ntensors == 4 && f->tensors[2]->kind == PK_TE_COMPUTE &&
            f->tensors[3]->kind == PK_TE_COMPUTE && f->tensors[3]->ndim == 2,
        "want X, B, the mean, then A: %s", pk_te_print(ctx, f));
  pk_te_ref *rp = pk_te_ref_new(ctx, p), *rc = pk_te_ref_new(ctx, c), *rf = pk_te_ref_new(ctx, f);
  pk_te_ref_fill_random(p, rp, 3);
  pk_te_ref_fill_random(c, rc, 4);
  CHECK(pk_te_interp_run(ctx, p, rp) == PK_OK, "producer: %s", pk_ctx_error(ctx));
  memcpy(rc->tensors[0].val, rp->tensors[2].val, sizeof(double) * 24); /* Y */
  memcpy(rc->tensors[0].mag, rp->tensors[2].mag, sizeof(double) * 24);
  CHECK(pk_te_interp_run(ctx, c, rc) == PK_OK, "consumer: %s", pk_ctx_error(ctx));
  memcpy(rf->tensors[0].val, rp->tensors[0].val, sizeof(double) * 24); /* X */
  memcpy(rf->tensors[0].mag, rp->tensors[0].mag, sizeof(double) * 24);
  memcpy(rf->tensors[1].val, rc->tensors[1].val, sizeof(double) * 6); /* B */
  memcpy(rf->tensors[1].mag, rc->tensors[1].mag, sizeof(double) * 6);
  CHECK(pk_te_interp_run(ctx, f, rf) == PK_OK, "fused: %s", pk_ctx_error(ctx));
  CHECK(!memcmp(rf->tensors[2].val, rp->tensors[1].val, sizeof(double) * 4) &&
            !memcmp(rf->tensors[3].val, rc->tensors[2].val, sizeof(double) * 24),
        "fused values differ from producer then consumer");
  /* the producer's last compute a reduction: nothing to inline */
  pk_te_program *r = parse(ctx, "X = placeholder((4, 6), f32)\nk = reduce_axis(6)\n"
                                "M = compute((4,), (i) => sum(X[i, k], k))\n");
  pk_te_program *rc2 = parse(ctx, "M = placeholder((4,), f32)\nA = compute((4,), (i) => M[i] + 1.0)\n");
  f = NULL;
  CHECK(r && rc2 && pk_te_fuse_tail(ctx, r, rc2, 0, NULL, &f) == PK_ERR_UNSUPPORTED && !f &&
            strstr(pk_ctx_error(ctx), "elementwise"),
        "a reducing last compute must be refused: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  PASS();
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_fuse_values(ctx);
  pk_ctx_clear_error(ctx);
  test_fuse_no_share(ctx);
  pk_ctx_clear_error(ctx);
  test_fuse_tail(ctx);
  pk_ctx_clear_error(ctx);
  refused(ctx, "refuses_reduction",
          "T = placeholder((4, 6), f32)\nk = reduce_axis(6)\n"
          "S = compute((4,), (i) => sum(T[i, k], k))\n",
          0, PK_ERR_UNSUPPORTED, "elementwise");
  refused(ctx, "refuses_double_read",
          "T = placeholder((4, 6), f32)\nY = compute((4, 6), (i, j) => T[i, j] * T[i, j])\n", 0,
          PK_ERR_UNSUPPORTED, "more than once");
  refused(ctx, "refuses_broadcast",
          "T = placeholder((4, 6), f32)\nY = compute((4, 6, 2), (i, j, h) => T[i, j] + 1.0)\n", 0,
          PK_ERR_UNSUPPORTED, "more than once");
  refused(ctx, "refuses_other_shape",
          "T = placeholder((6, 4), f32)\nY = compute((6, 4), (i, j) => T[i, j] + 1.0)\n", 0,
          PK_ERR_CHECK, "not the shape");
  refused(ctx, "refuses_compute_slot",
          "T = placeholder((4, 6), f32)\nY = compute((4, 6), (i, j) => T[i, j] + 1.0)\n", 1,
          PK_ERR_USAGE, "not a placeholder");
  pk_ctx_free(ctx);
  return pk_test_summary("test_te_fuse");
}
