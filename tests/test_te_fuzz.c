/* test_te_fuzz.c — "nothing crashes Pock": mutated and truncated TE texts go through
 * pk_te_parse, each in a fresh context. Every failure must be a syntax or check error with a
 * message; every success must print to a canonical fixed point. Deterministic (fixed seed),
 * so a failure reproduces; the iteration prints the text that broke. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_te.h"

#define ITERATIONS 16000 /* a quarter generated, the rest mutated */
#define MAX_TEXT 8192

static const char *const seeds[] = {
    "A = placeholder((512, 256), f32)\nB = placeholder((256, 128), f32)\nk = reduce_axis(256)\n"
    "C = compute((512, 128), (i, j) => sum(A[i, k] * B[k, j], k))\n"
    "D = compute((512, 128), (i, j) => max(C[i, j], 0.0))\n",

    "X = placeholder((1, 3, 8, 8), f32)\nW = placeholder((4, 3, 3, 3), f32)\n"
    "rc = reduce_axis(3)\nrh = reduce_axis(3)\nrw = reduce_axis(0, 3)\n"
    "Y = compute((1, 4, 8, 8), (n, f, h, w) => sum(select(h + rh - 1 >= 0 && h + rh - 1 < 8 &&\n"
    "  w + rw - 1 >= 0 && w + rw - 1 < 8, X[n, rc, h + rh - 1, w + rw - 1], 0.0) * W[f, rc, rh, rw],\n"
    "  rc, rh, rw))\n",

    "x = placeholder((4, 32), f32)\nk = reduce_axis(32)\nm = compute((4,), (i) => max(x[i, k], k))\n"
    "e = compute((4, 32), (i, j) => exp(x[i, j] - m[i]))\ns = compute((4,), (i) => sum(e[i, k], k))\n"
    "y = compute((4, 32), (i, j) => e[i, j] / s[i])\n",

    "A = placeholder((10,), f32)\nB = compute((10,), (i) => A[min(max(i - 1, 0), 9)] + A[(i * 7 + 3) % 10])\n"
    "C = compute((10,), (i) => select(i > 0 && A[i - 1] > 0.0, A[i - 1], -A[i]))\n"
    "D = compute((5,), (i) => B[i / 2] * C[9 - i] + cast(f32, i % 3 == 0))\n",

    "E = placeholder((16, 4), f64)\nidx = placeholder((8,), i32)\n"
    "G = compute((8, 4), (i, j) => select(idx[i] >= 0 && idx[i] < 16, E[idx[i], j], 0.0))\n"
    "H = compute((8,), (i) => cast(i64, idx[i]) / -3 + cast(i64, G[i, 0]) % 5)\n",

    "a = placeholder((6, 7), i64)\n"
    "b = compute((6, 7), (i, j) => a[i, j] / 3 + a[i, j] % -4 - min(a[i, j], 5) * max(i, j))\n"
    "c = compute((6,), (i) => cast(f64, b[i, 0] > 2 && b[i, 1] != 0 || !(b[i, 2] == 1)))\n",

    "x = placeholder((3, 5), f32)\n"
    "y = compute((3, 5), (a, b) => sigmoid(tanh(exp(log(sqrt(rsqrt(abs(erf(x[a, b])))))))) +\n"
    "  pow(x[a, b], 2.0) * 1e-05 - 2.5e+20 / (1.0 + x[a, b] * x[a, b]))\n",

    "A = placeholder((5, 5), f32)\nk = reduce_axis(2, 5)\n"
    "B = compute((5,), (i) => sum(A[i, k - 2] * A[k, i], k))\n"
    "C = compute((5,), (i) => min(A[k, i], k))\n",

    /* indexing and dropout: scatter_add and hash */
    "I = placeholder((4, 3), i64)\nV = placeholder((4, 3, 2), f32)\n"
    "D = scatter_add((6, 2), (4, 3, 2), (n, t, d) => [I[n, t] - 1, d], V[n, t, d] * 0.5)\n"
    "Y = compute((4, 3), (a, b) => select(hash(I[a, b], 7, a * 3 + b) >= 4503599627370496, 1.0, 0.0))\n",
};

static const char *const tokens[] = {
    "(", ")", "[", "]", ",", "=", "=>", "+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=",
    "&&", "||", "!", "\n", "#", " ", "0", "1", "-1", "2.5", "1e308", "1e999", "9223372036854775807",
    "99999999999999999999", "i", "j", "k", "A", "x", "sum(", "max(", "min(", "select(", "cast(f32, ",
    "cast(i32, ", "cast(bool, ", "exp(", "pow(", "abs(", "reduce_axis(", "placeholder(", "compute(",
    "f16", "i64", "f64", "bool", "(1,)", "(0,)", "(-1, 2)", "/ 0", "% 0", ", k", "A[i]", "\t", "\r",
    "\0", "\xff", "@", "scatter_add(", "hash(", "[I[t], d]", "(4, 3)",
};

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next_u64(rng *r) { /* xorshift64* */
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 2685821657736338717ull;
}

static size_t below(rng *r, size_t n) { return n ? (size_t)(next_u64(r) % n) : 0; }

typedef struct text {
  char data[MAX_TEXT];
  size_t len;
} text;

static void insert_bytes(text *t, size_t at, const char *s, size_t n) {
  if (t->len + n > MAX_TEXT) return;
  memmove(t->data + at + n, t->data + at, t->len - at);
  memcpy(t->data + at, s, n);
  t->len += n;
}

static void mutate(rng *r, text *t) {
  size_t at = below(r, t->len + 1);
  switch (below(r, 7)) {
  case 0: /* flip a byte */
    if (t->len) t->data[below(r, t->len)] = (char)below(r, 256);
    break;
  case 1: { /* insert a grammar token */
    const char *tok = tokens[below(r, sizeof tokens / sizeof tokens[0])];
    insert_bytes(t, at, tok, tok[0] ? strlen(tok) : 1);
    break;
  }
  case 2: { /* delete a span */
    size_t n = below(r, 16) + 1;
    if (at + n > t->len) n = t->len - at;
    memmove(t->data + at, t->data + at + n, t->len - at - n);
    t->len -= n;
    break;
  }
  case 3: /* truncate */
    t->len = at;
    break;
  case 4: { /* duplicate a span somewhere else */
    if (!t->len) break;
    size_t from = below(r, t->len), n = below(r, 64) + 1;
    if (from + n > t->len) n = t->len - from;
    char span[64];
    memcpy(span, t->data + from, n);
    insert_bytes(t, at, span, n);
    break;
  }
  case 5: { /* repeat one token many times: deep nesting, long chains */
    const char *reps[] = {"(", "-", "!", "[", "A[", "exp(", "+ 1"};
    const char *tok = reps[below(r, sizeof reps / sizeof reps[0])];
    size_t times = below(r, 400) + 1;
    for (size_t i = 0; i < times; i++) insert_bytes(t, at, tok, strlen(tok));
    break;
  }
  default: { /* change a digit: shapes and bounds */
    for (size_t tries = 0; tries < 32 && t->len; tries++) {
      size_t i = below(r, t->len);
      if (t->data[i] >= '0' && t->data[i] <= '9') {
        t->data[i] = (char)('0' + below(r, 10));
        break;
      }
    }
  }
  }
}

/* Returns 0 if the text was handled properly; prints why not otherwise. */
static int run_one(const text *t, int iter, bool must_accept, int *accepted) {
  pk_ctx *ctx = pk_ctx_new();
  pk_te_program *p;
  int bad = 0;
  pk_status s = pk_te_parse(ctx, t->data, t->len, "fuzz.te", &p);
  if (s != PK_OK && must_accept) {
    printf("FAIL te_fuzz: iteration %d: generated program refused: %s\n", iter, pk_ctx_error(ctx));
    bad = 1;
  } else if (s != PK_OK) {
    const char *msg = pk_ctx_error(ctx);
    if ((s != PK_ERR_SYNTAX && s != PK_ERR_CHECK) || pk_ctx_status(ctx) != s || !msg[0] || p) {
      printf("FAIL te_fuzz: iteration %d: status %s, message '%s'\n", iter, pk_status_name(s), msg);
      bad = 1;
    }
  } else {
    (*accepted)++;
    char *once = pk_te_print(ctx, p);
    pk_te_program *q;
    if (pk_te_parse(ctx, once, strlen(once), "canonical", &q) != PK_OK) {
      printf("FAIL te_fuzz: iteration %d: canonical text does not parse: %s\n%s", iter,
             pk_ctx_error(ctx), once);
      bad = 1;
    } else if (strcmp(once, pk_te_print(ctx, q)) != 0) {
      printf("FAIL te_fuzz: iteration %d: not a fixed point:\n%s---\n%s", iter, once, pk_te_print(ctx, q));
      bad = 1;
    }
    (void)pk_te_flops(p);
  }
  if (bad) printf("input (%zu bytes):\n%.*s\n", t->len, (int)t->len, t->data);
  pk_ctx_free(ctx);
  return bad;
}

/* ---- random valid programs: fully parenthesised, always in bounds, always well typed ----
 * They must all be accepted, and the printer must strip their parentheses to a fixed point. */

typedef struct gen {
  rng *r;
  pk_strbuf *b;
  bool in_reduction; /* k may be used */
} gen;

static void gen_float(gen *g, int depth);

static void gen_int(gen *g, int depth) {
  static const char *const binops[] = {"+", "-", "*", "/", "%"};
  size_t pick = depth <= 0 ? below(g->r, 3) : below(g->r, 9);
  switch (pick) {
  /* (k), not k: max(e, k) would be a reduction over k */
  case 0: pk_strbuf_append(g->b, below(g->r, 2) ? "i" : g->in_reduction ? "(k)" : "j"); break;
  case 1: pk_strbuf_printf(g->b, "%d", (int)below(g->r, 20)); break;
  case 2: pk_strbuf_append(g->b, "j"); break;
  case 3: case 4: {
    size_t op = below(g->r, 5);
    pk_strbuf_append(g->b, "(");
    gen_int(g, depth - 1);
    pk_strbuf_printf(g->b, " %s ", binops[op]);
    if (op >= 3) pk_strbuf_printf(g->b, "%s%d", below(g->r, 2) ? "-" : "", (int)below(g->r, 9) + 1);
    else gen_int(g, depth - 1);
    pk_strbuf_append(g->b, ")");
    break;
  }
  case 5:
    pk_strbuf_append(g->b, below(g->r, 2) ? "min(" : "max(");
    gen_int(g, depth - 1);
    pk_strbuf_append(g->b, ", ");
    gen_int(g, depth - 1);
    pk_strbuf_append(g->b, ")");
    break;
  case 6: pk_strbuf_append(g->b, "(-"); gen_int(g, depth - 1); pk_strbuf_append(g->b, ")"); break;
  case 7: pk_strbuf_printf(g->b, "cast(i64, I[((i + j) %% 5)])"); break;
  default: pk_strbuf_append(g->b, "abs("); gen_int(g, depth - 1); pk_strbuf_append(g->b, ")");
  }
}

/* An index into a dim of the given extent that the checker can prove in bounds. */
static void gen_index(gen *g, int depth, int extent) {
  if (below(g->r, 2)) {
    pk_strbuf_append(g->b, "min(max(");
    gen_int(g, depth);
    pk_strbuf_printf(g->b, ", 0), %d)", extent - 1);
  } else {
    pk_strbuf_append(g->b, "(");
    gen_int(g, depth);
    pk_strbuf_printf(g->b, " %% %d)", extent);
  }
}

static void gen_bool(gen *g, int depth) {
  static const char *const cmps[] = {"<", "<=", ">", ">=", "==", "!="};
  size_t pick = depth <= 0 ? 0 : below(g->r, 4);
  pk_strbuf_append(g->b, "(");
  if (pick == 0 || pick == 1) {
    void (*side)(gen *, int) = pick ? gen_float : gen_int;
    side(g, depth - 1);
    pk_strbuf_printf(g->b, " %s ", cmps[below(g->r, 6)]);
    side(g, depth - 1);
  } else if (pick == 2) {
    gen_bool(g, depth - 1);
    pk_strbuf_append(g->b, below(g->r, 2) ? " && " : " || ");
    gen_bool(g, depth - 1);
  } else {
    pk_strbuf_append(g->b, "!");
    gen_bool(g, depth - 1);
  }
  pk_strbuf_append(g->b, ")");
}

static void gen_float_literal(gen *g) {
  static const char *const fixed[] = {"0.0", "1.0", "0.5", "1e-05", "2.5e+20", "100000.0", "0.1", "3", "7."};
  if (below(g->r, 2)) {
    pk_strbuf_append(g->b, fixed[below(g->r, sizeof fixed / sizeof fixed[0])]);
    return;
  }
  /* Any finite double: mantissa bits and a modest exponent. */
  double v = (double)(next_u64(g->r) >> 11) * 0x1p-53;
  int e = (int)below(g->r, 80) - 40;
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", v * pow(10.0, e));
  pk_strbuf_append(g->b, buf);
  if (!strpbrk(buf, ".e")) pk_strbuf_append(g->b, ".0");
}

static void gen_float(gen *g, int depth) {
  static const char *const binops[] = {"+", "-", "*", "/", "%"};
  static const char *const fns[] = {"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "abs", "sigmoid"};
  size_t pick = depth <= 0 ? below(g->r, 3) : below(g->r, 11);
  switch (pick) {
  case 0: gen_float_literal(g); break;
  case 1: case 2:
    pk_strbuf_append(g->b, "A[");
    gen_index(g, depth - 1, 8);
    pk_strbuf_append(g->b, ", ");
    gen_index(g, depth - 1, 6);
    pk_strbuf_append(g->b, "]");
    break;
  case 3: case 4:
    pk_strbuf_append(g->b, "(");
    gen_float(g, depth - 1);
    pk_strbuf_printf(g->b, " %s ", binops[below(g->r, 5)]);
    gen_float(g, depth - 1);
    pk_strbuf_append(g->b, ")");
    break;
  case 5: pk_strbuf_append(g->b, "(-"); gen_float(g, depth - 1); pk_strbuf_append(g->b, ")"); break;
  case 6:
    pk_strbuf_append(g->b, "select(");
    gen_bool(g, depth - 1);
    pk_strbuf_append(g->b, ", ");
    gen_float(g, depth - 1);
    pk_strbuf_append(g->b, ", ");
    gen_float(g, depth - 1);
    pk_strbuf_append(g->b, ")");
    break;
  case 7: { /* the padding idiom: the guard names the read's own index expression */
    pk_strbuf e;
    pk_strbuf_init(&e);
    gen g2 = {g->r, &e, g->in_reduction};
    gen_int(&g2, depth - 1);
    pk_strbuf_printf(g->b, "select((%s >= 0) && (%s < 6), V[%s], 0.0)", e.data, e.data, e.data);
    pk_strbuf_free(&e);
    break;
  }
  case 8: pk_strbuf_append(g->b, "cast(f32, "); gen_int(g, depth - 1); pk_strbuf_append(g->b, ")"); break;
  case 9:
    pk_strbuf_printf(g->b, "%s(", below(g->r, 2) ? "pow" : below(g->r, 2) ? "min" : "max");
    gen_float(g, depth - 1);
    pk_strbuf_append(g->b, ", ");
    gen_float(g, depth - 1);
    pk_strbuf_append(g->b, ")");
    break;
  default:
    pk_strbuf_printf(g->b, "%s(", fns[below(g->r, sizeof fns / sizeof fns[0])]);
    gen_float(g, depth - 1);
    pk_strbuf_append(g->b, ")");
  }
}

static void gen_program(rng *r, text *t) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  gen g = {r, &b, below(r, 2) == 0};
  pk_strbuf_append(&b, "A = placeholder((8, 6), f32)\nV = placeholder((6,), f32)\nI = placeholder((5,), i32)\n");
  if (g.in_reduction) pk_strbuf_printf(&b, "k = reduce_axis(%d, %d)\n", -(int)below(r, 3), 1 + (int)below(r, 4));
  pk_strbuf_append(&b, "C = compute((4, 3), (i, j) => ");
  if (g.in_reduction) pk_strbuf_printf(&b, "%s(", below(r, 2) ? "sum" : below(r, 2) ? "max" : "min");
  gen_float(&g, 1 + (int)below(r, 5));
  pk_strbuf_append(&b, g.in_reduction ? ", k))\n" : ")\n");
  t->len = b.len < MAX_TEXT ? b.len : MAX_TEXT;
  memcpy(t->data, b.data, t->len);
  pk_strbuf_free(&b);
}

/* Optional arguments for longer hunts: test_te_fuzz [ITERATIONS [SEED]]. */
int main(int argc, char **argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : ITERATIONS;
  rng r = {argc > 2 ? strtoull(argv[2], NULL, 0) | 1 : 0x9e3779b97f4a7c15ull};
  size_t nseeds = sizeof seeds / sizeof seeds[0];
  int failures = 0, accepted = 0;
  static text t;
  for (int iter = 0; iter < iterations && failures < 5; iter++) {
    /* Every fourth text is generated: as it is (must be accepted) or mutated like a seed. */
    bool generated = iter >= (int)nseeds && iter % 4 == 0;
    if (generated) {
      gen_program(&r, &t);
    } else {
      const char *seed = seeds[iter % nseeds];
      t.len = strlen(seed);
      memcpy(t.data, seed, t.len);
    }
    bool pristine = iter < (int)nseeds || (generated && below(&r, 2));
    size_t nmut = pristine ? 0 : below(&r, 4) + 1;
    for (size_t m = 0; m < nmut; m++) mutate(&r, &t);
    failures += run_one(&t, iter, pristine, &accepted);
  }
  if (accepted < (int)nseeds) {
    printf("FAIL te_fuzz: only %d texts were accepted; the seeds should be\n", accepted);
    failures++;
  }
  if (failures) return 1;
  printf("PASS te_fuzz (%d texts, %d accepted)\n", iterations, accepted);
  return 0;
}
