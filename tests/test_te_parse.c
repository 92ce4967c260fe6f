/* test_te_parse.c — the TE text form: canonical printing is a fixed point of print∘parse,
 * insensitive to names, spacing, comments and parentheses; and every kind of bad program
 * is refused with the right status, message and position. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pk_te.h"

static int failures;

static void pass(const char *name) { printf("PASS %s\n", name); }

static void fail(const char *name, const char *why, const char *detail) {
  printf("FAIL %s: %s%s%s\n", name, why, detail ? "\n" : "", detail ? detail : "");
  failures++;
}

/* Parses text, prints it, parses and prints again; returns the canonical text or NULL. */
static char *canon(pk_ctx *ctx, const char *name, const char *text) {
  pk_te_program *p, *q;
  if (pk_te_parse(ctx, text, strlen(text), name, &p) != PK_OK) {
    fail(name, "does not parse: ", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  char *once = pk_te_print(ctx, p);
  if (pk_te_parse(ctx, once, strlen(once), "canonical", &q) != PK_OK) {
    fail(name, "canonical text does not parse: ", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  char *twice = pk_te_print(ctx, q);
  if (strcmp(once, twice) != 0) {
    fail(name, "print(parse(print(x))) != print(x):\n", pk_sprintf(ctx, "%s---\n%s", once, twice));
    return NULL;
  }
  return once;
}

/* ---- fixed points ---- */

static const struct {
  const char *name;
  const char *text;
} programs[] = {
    {"matmul_relu",
     "# comment\n"
     "A = placeholder((512, 256), f32)          # shape tuple; (40,) for one dim\n"
     "B = placeholder((256, 128), f32)\n"
     "k = reduce_axis(256)                      # or reduce_axis(lo, hi)\n"
     "C = compute((512, 128), (i, j) => sum(A[i, k] * B[k, j], k))\n"
     "D = compute((512, 128), (i, j) => max(C[i, j], 0.0))\n"},
    {"conv2d_two_reduce_axes_padding",
     "X = placeholder((1, 4, 16, 16), f32)\n"
     "W = placeholder((8, 4, 3, 3), f32)\n"
     "rc = reduce_axis(4)\nrh = reduce_axis(3)\nrw = reduce_axis(3)\n"
     "Y = compute((1, 8, 16, 16), (n, f, h, w) => sum(\n"
     "      select(h + rh - 1 >= 0 && h + rh - 1 < 16 && w + rw - 1 >= 0 && w + rw - 1 < 16,\n"
     "             X[n, rc, h + rh - 1, w + rw - 1], 0.0) * W[f, rc, rh, rw], rc, rh, rw))\n"},
    {"select_guards_or_not",
     "A = placeholder((10,), f32)\n"
     "B = compute((10,), (i) => select(i < 1 || !(i <= 9), 0.0, A[i - 1] + A[i + 0]))\n"
     "C = compute((10,), (i) => select(i > 0 && A[i - 1] > 0.0, A[i - 1], -A[i]))\n"
     "D = compute((10,), (i) => select(i >= 1, A[i * 1 - 1], A[i]) + select(i != 9, 0.0, A[i]))\n"},
    {"casts_and_gather",
     "E = placeholder((16, 4), f32)\n"
     "idx = placeholder((8,), i32)\n"
     "G = compute((8, 4), (i, j) => select(idx[i] >= 0 && idx[i] < 16, E[idx[i], j], 0.0))\n"
     "H = compute((8,), (i) => cast(f64, idx[i]) * 0.5 + cast(f64, i < 4))\n"
     "I = compute((8,), (i) => cast(i32, H[i]) + idx[i] % 3)\n"},
    {"integer_floor_div_mod_indices",
     "A = placeholder((8, 4), f32)\n"
     "B = compute((16, 8), (i, j) => A[i / 2, (j + 1) % 4] + A[(15 - i) / 2, (i - 5) % 4])\n"
     "C = compute((16,), (i) => A[(i - 15) / -2, (-3 - i) % 4])\n"},
    {"one_dim_shapes",
     "x = placeholder((40,), f64)\n"
     "y = compute((40,), (i) => x[i] * 2 + 1)\n"
     "z = compute((20,), (i) => y[2 * i] - y[2 * i + 1])\n"},
    {"nested_intrinsics",
     "x = placeholder((3, 5), f32)\n"
     "y = compute((3, 5), (a, b) => sigmoid(tanh(exp(log(sqrt(rsqrt(abs(erf(x[a, b]))))))))"
     " + pow(x[a, b], 2.0) + pow(2, x[a, b]))\n"},
    {"softmax_min_max_reductions",
     "x = placeholder((4, 32), f32)\n"
     "k = reduce_axis(32)\n"
     "m = compute((4,), (i) => max(x[i, k], k))\n"
     "e = compute((4, 32), (i, j) => exp(x[i, j] - m[i]))\n"
     "s = compute((4,), (i) => sum(e[i, k], k))\n"
     "lo = compute((4,), (i) => min(x[i, k] / s[i], k))\n"
     "y = compute((4, 32), (i, j) => e[i, j] / s[i])\n"},
    {"integer_program",
     "a = placeholder((6, 7), i64)\n"
     "b = compute((6, 7), (i, j) => a[i, j] / 3 + a[i, j] % -4 - min(a[i, j], 5) * max(i, j))\n"
     "c = compute((6,), (i) => cast(f64, b[i, 0] > 2 && b[i, 1] != 0 || !(b[i, 2] == 1)))\n"},
    {"parentheses_and_precedence",
     "a = placeholder((2,), f32)\n"
     "b = compute((2,), (i) => (a[i] + 1.0) * (a[i] - (a[i] - 2.0)) - (a[i] + a[i]) / -(a[i] * 3.0)"
     " - -a[i] - (-1.0) % 7.0)\n"
     "c = compute((2,), (i) => select(!(a[i] < 1.0 || a[i] > 2.0) && (i == 0 || i == 1), 1.0, 0.0))\n"},
    {"float_literal_forms",
     "a = placeholder((1,), f64)\n"
     "b = compute((1,), (i) => a[i] * 1e-05 + 2.5e+20 + 0.1 + 100000.0 + 3.0 + 1.5E3 + 7. + 123456.0)\n"},
    {"reduce_axis_with_lo_and_shared",
     "A = placeholder((5, 5), f32)\n"
     "k = reduce_axis(2, 5)\n"
     "B = compute((5,), (i) => sum(A[i, k - 2] * A[k, i], k))\n"
     "C = compute((5,), (i) => min(A[k, i], k))\n"},
    {"binary_max_of_reduce_axis_inside_sum",
     "A = placeholder((8,), i64)\n"
     "k = reduce_axis(8)\n"
     "B = compute((1,), (i) => sum(max(A[k], (k)), k))\n"},
    {"dead_branch_and_contradictory_guards",
     "A = placeholder((10,), f32)\n"
     "B = compute((10,), (i) => select(0 > 1, A[i + 100], A[i]) + select(i > 3 && i < 2, A[i - 50], 0.0))\n"},
    {"literal_adoption_f64",
     "A = placeholder((4,), f64)\n"
     "B = compute((4,), (i) => select(A[i] > 0, A[i], 0) + max(1, A[i]) + min(A[i], 2.5))\n"},
};

static void test_fixed_points(pk_ctx *ctx) {
  size_t n = sizeof programs / sizeof programs[0];
  int ok = 0;
  for (size_t i = 0; i < n; i++)
    if (canon(ctx, programs[i].name, programs[i].text)) ok++;
  if (ok == (int)n) pass("canonical_fixed_point");
}

static void expect_canon(pk_ctx *ctx, const char *name, const char *text, const char *want) {
  char *got = canon(ctx, name, text);
  if (!got) return;
  if (strcmp(got, want) != 0) {
    fail(name, "unexpected canonical text:\n", pk_sprintf(ctx, "%s--- want\n%s", got, want));
    return;
  }
  pass(name);
}

static void test_canonical_text(pk_ctx *ctx) {
  expect_canon(ctx, "canonical_matmul", programs[0].text,
               "# pock-te canonical v1\n"
               "t0 = placeholder((512, 256), f32)\n"
               "t1 = placeholder((256, 128), f32)\n"
               "k0 = reduce_axis(0, 256)\n"
               "t2 = compute((512, 128), (i0, i1) => sum(t0[i0, k0] * t1[k0, i1], k0))\n"
               "t3 = compute((512, 128), (i0, i1) => max(t2[i0, i1], 0.0))\n");
  /* Reduce axes are numbered by first use in print order and declared just before. */
  expect_canon(ctx, "canonical_reduce_numbering",
               "A = placeholder((4, 6), f32)\n"
               "q = reduce_axis(4)\np = reduce_axis(6)\nunusedname = placeholder((3,), i32)\n"
               "B = compute((1,), (i) => sum(A[q, p], p, q))\n",
               "# pock-te canonical v1\n"
               "t0 = placeholder((4, 6), f32)\n"
               "t1 = placeholder((3,), i32)\n"
               "k0 = reduce_axis(0, 4)\n"
               "k1 = reduce_axis(0, 6)\n"
               "t2 = compute((1,), (i0) => sum(t0[k0, k1], k1, k0))\n");
  expect_canon(ctx, "canonical_float_literals",
               "a = placeholder((1,), f32)\n"
               "b = compute((1,), (i) => a[i] + 1 + 1.0 + 0.5 + 1e-5 + 1e20 + 100000.0 + 0.1 - 2)\n",
               "# pock-te canonical v1\n"
               "t0 = placeholder((1,), f32)\n"
               "t1 = compute((1,), (i0) => t0[i0] + 1 + 1.0 + 0.5 + 1e-05 + 1e+20 + 1e+05 + 0.1 - 2)\n");
}

/* ---- invariance ---- */

static void test_invariance(pk_ctx *ctx) {
  const char *a =
      "A = placeholder((512, 256), f32)\nB = placeholder((256, 128), f32)\n"
      "k = reduce_axis(256)\n"
      "C = compute((512, 128), (i, j) => sum(A[i, k] * B[k, j], k))\n"
      "D = compute((512, 128), (i, j) => max(C[i, j], 0.0) + select(i > 0, C[i - 1, j], 1.0))\n";
  const char *b =
      "# the same program, renamed, respaced, commented and over-parenthesised\n"
      "\n"
      "lhs=placeholder( ( 512 ,256 ),f32 )   # left\n"
      "rhs = placeholder((256, 128,), f32)\n"
      "red = reduce_axis(0, 256)\n\n\n"
      "prod = compute((512, 128), (row, col) =>\n"
      "    sum(((lhs[row, red]) * (rhs[red, col])), red))\n"
      "out = compute(\n"
      "  (512, 128),\n"
      "  (y, x) => (max((prod[y, x]), 0.0)) + (select((y > 0), prod[(y - 1), x], (1.0))))";
  char *ca = canon(ctx, "invariance_a", a);
  char *cb = canon(ctx, "invariance_b", b);
  if (!ca || !cb) return;
  if (strcmp(ca, cb) != 0) {
    fail("name_whitespace_invariance", "canonical texts differ:\n", pk_sprintf(ctx, "%s---\n%s", ca, cb));
    return;
  }
  pass("name_whitespace_invariance");
}

/* ---- errors ---- */

static const struct {
  const char *name;
  const char *text;
  pk_status status;
  const char *where; /* "f.te:LINE:COL:" prefix */
  const char *what;  /* substring of the message */
} bad_programs[] = {
    {"syntax_error", "A = placeholder((10,), f32)\nB = compute((10,), (i) => A[i)\n", PK_ERR_SYNTAX,
     "f.te:2:30:", "expected ']' after index list"},
    {"syntax_missing_paren", "A = placeholder((10,), f32\n", PK_ERR_SYNTAX, "f.te:2:1:",
     "expected ')' after dtype"},
    {"syntax_bad_char", "A = placeholder((10,), f32) @\n", PK_ERR_SYNTAX, "f.te:1:29:",
     "unexpected character '@'"},
    {"syntax_two_statements_on_a_line", "A = placeholder((10,), f32) B = placeholder((1,), f32)\n",
     PK_ERR_SYNTAX, "f.te:1:29:", "expected end of line after the statement"},
    {"syntax_unknown_function", "A = placeholder((2,), f32)\nB = compute((2,), (i) => foo(A[i]))\n",
     PK_ERR_SYNTAX, "f.te:2:26:", "unknown function 'foo'"},
    {"syntax_intrinsic_arity", "A = placeholder((2,), f32)\nB = compute((2,), (i) => exp(A[i], 1.0))\n",
     PK_ERR_SYNTAX, "f.te:2:26:", "exp takes 1 argument, got 2"},
    {"syntax_int_literal_overflow", "A = placeholder((99999999999999999999,), f32)\n", PK_ERR_SYNTAX,
     "f.te:1:18:", "integer literal out of range"},
    {"unknown_tensor", "A = placeholder((4,), f32)\nB = compute((4,), (i) => Q[i])\n", PK_ERR_CHECK,
     "f.te:2:26:", "unknown tensor 'Q'"},
    {"read_later_tensor",
     "A = placeholder((4,), f32)\nB = compute((4,), (i) => C[i])\nC = compute((4,), (i) => A[i])\n",
     PK_ERR_CHECK, "f.te:2:26:", "unknown tensor 'C'"},
    {"read_itself", "A = placeholder((4,), f32)\nB = compute((4,), (i) => B[i] + A[i])\n", PK_ERR_CHECK,
     "f.te:2:26:", "compute 'B' reads itself"},
    {"unknown_axis", "A = placeholder((4,), f32)\nB = compute((4,), (i) => A[j])\n", PK_ERR_CHECK,
     "f.te:2:28:", "unknown axis 'j'"},
    {"redefinition", "A = placeholder((4,), f32)\nA = placeholder((4,), f32)\n", PK_ERR_CHECK, "f.te:2:1:",
     "redefinition of 'A' (first defined at 1:1)"},
    {"axis_shadows_reduce_axis",
     "A = placeholder((4,), f32)\nk = reduce_axis(4)\nB = compute((4,), (k) => sum(A[k], k))\n",
     PK_ERR_CHECK, "f.te:3:20:", "axis 'k' shadows the reduce axis"},
    {"wrong_index_arity", "A = placeholder((10,), f32)\nB = compute((10,), (i) => A[i, 1])\n", PK_ERR_CHECK,
     "f.te:2:27:", "wrong index arity: 'A' has 1 dim but is read with 2 indices"},
    {"shape_axes_mismatch", "A = placeholder((4,), f32)\nB = compute((4, 4), (i) => A[i])\n", PK_ERR_CHECK,
     "f.te:2:21:", "compute shape has 2 dims but 1 axis name"},
    {"extent_mismatch_unguarded_read", "A = placeholder((10,), f32)\nB = compute((10,), (i) => A[i + 1])\n",
     PK_ERR_CHECK, "f.te:2:27:",
     "read of A can leave its tensor: index 0 ranges over [1, 10], extent 10"},
    {"unguarded_read_bigger_output", "A = placeholder((8, 8), f32)\nB = compute((8, 9), (i, j) => A[i, j])\n",
     PK_ERR_CHECK, "f.te:2:31:", "index 1 ranges over [0, 8], extent 8"},
    {"guard_on_wrong_branch",
     "A = placeholder((10,), f32)\nB = compute((10,), (i) => select(i >= 1, 0.0, A[i - 1]))\n",
     PK_ERR_CHECK, "f.te:2:47:", "index 0 ranges over [-1, -1], extent 10"},
    {"unbounded_gather", "E = placeholder((16,), f32)\nidx = placeholder((8,), i64)\n"
                         "G = compute((8,), (i) => E[idx[i]])\n",
     PK_ERR_CHECK, "f.te:3:26:", "index 0 ranges over [-inf, +inf], extent 16"},
    {"dtype_mismatch", "A = placeholder((4,), f32)\nB = placeholder((4,), f64)\n"
                       "C = compute((4,), (i) => A[i] + B[i])\n",
     PK_ERR_CHECK, "f.te:3:31:", "dtype mismatch: f32 vs f64 in '+'; use cast(...)"},
    {"dtype_unknown", "A = placeholder((4,), f31)\n", PK_ERR_CHECK, "f.te:1:23:", "unknown dtype 'f31'"},
    {"dtype_f16_reserved", "A = placeholder((4,), bf16)\n", PK_ERR_CHECK, "f.te:1:1:",
     "dtype bf16 of 'A' is not supported yet"},
    {"compute_yields_bool", "A = placeholder((4,), f32)\nB = compute((4,), (i) => A[i] < 1.0)\n",
     PK_ERR_CHECK, "f.te:2:31:", "yields bool; use select or cast"},
    {"intrinsic_on_int", "A = placeholder((4,), i32)\nB = compute((4,), (i) => exp(A[i]))\n",
     PK_ERR_CHECK, "f.te:2:26:", "exp needs a float operand, got i32"},
    {"cast_to_bool", "A = placeholder((4,), i32)\nB = compute((4,), (i) => cast(bool, A[i]))\n",
     PK_ERR_CHECK, "f.te:2:26:", "cannot cast to bool"},
    {"logic_needs_bool", "A = placeholder((4,), f32)\nB = compute((4,), (i) => select(i && 1, A[i], 0.0))\n",
     PK_ERR_CHECK, "f.te:2:33:", "'&&' needs a bool"},
    {"unused_reduce_axis", "A = placeholder((4,), f32)\n  k = reduce_axis(4)\nB = compute((4,), (i) => A[i])\n",
     PK_ERR_CHECK, "f.te:2:3:", "reduce axis 'k' is declared but unused"},
    {"reduce_axis_outside_reduction",
     "A = placeholder((4,), f32)\nk = reduce_axis(4)\nB = compute((4,), (i) => A[k])\n"
     "C = compute((4,), (i) => sum(A[k], k))\n",
     PK_ERR_CHECK, "f.te:3:28:", "reduce axis 'k' is used outside a reduction over it"},
    {"reduce_axis_twice", "A = placeholder((4,), f32)\nk = reduce_axis(4)\nB = compute((4,), (i) => sum(A[k], k, k))\n",
     PK_ERR_CHECK, "f.te:3:26:", "reduce axis 'k' appears twice in one reduction"},
    {"sum_over_spatial_axis", "A = placeholder((4,), f32)\nB = compute((4,), (i) => sum(A[i], i))\n",
     PK_ERR_CHECK, "f.te:2:26:", "'i' is not a reduce axis"},
    {"reduction_not_at_top", "A = placeholder((4,), f32)\nk = reduce_axis(4)\n"
                             "B = compute((4,), (i) => A[i] + sum(A[k], k))\n",
     PK_ERR_CHECK, "f.te:3:33:", "reduction must be the whole body of a compute"},
    {"nested_reduction", "A = placeholder((4, 4), f32)\nk = reduce_axis(4)\nr = reduce_axis(4)\n"
                         "B = compute((4,), (i) => sum(sum(A[k, r], r), k))\n",
     PK_ERR_CHECK, "f.te:4:30:", "reduction must be the whole body of a compute"},
    {"negative_shape", "A = placeholder((3, -3), f32)\n", PK_ERR_CHECK, "f.te:1:1:",
     "dim 1 of 'A' is -3; every dim must be >= 1"},
    {"zero_shape", "A = placeholder((4,), f32)\nB = compute((0,), (i) => A[i])\n", PK_ERR_CHECK, "f.te:2:1:",
     "dim 0 of 'B' is 0"},
    {"overflowing_shape", "A = placeholder((4294967296, 4294967296, 4), f32)\n", PK_ERR_CHECK, "f.te:1:1:",
     "element count of 'A' overflows int64"},
    {"too_many_dims", "A = placeholder((1, 1, 1, 1, 1, 1, 1, 1, 1), f32)\n", PK_ERR_CHECK, "f.te:1:42:",
     "shape has more than 8 dims"},
    {"empty_reduce_axis", "A = placeholder((4,), f32)\nk = reduce_axis(3, 3)\n", PK_ERR_CHECK, "f.te:2:1:",
     "reduce_axis(3, 3) needs lo < hi"},
    {"float_literal_in_integer_context", "A = placeholder((4,), f32)\nB = compute((4,), (i) => A[i + 0.5])\n",
     PK_ERR_CHECK, "f.te:2:32:", "float literal in integer context"},
    {"float_literal_into_int_tensor", "A = placeholder((4,), i32)\nB = compute((4,), (i) => A[i] * 2.0)\n",
     PK_ERR_CHECK, "f.te:2:33:", "float literal in integer context: 2 used as i32"},
    {"integer_division_by_literal_zero", "A = placeholder((4,), f32)\nB = compute((4,), (i) => A[i / 0])\n",
     PK_ERR_CHECK, "f.te:2:30:", "integer division by literal zero"},
    {"integer_modulo_by_literal_zero", "A = placeholder((4,), i64)\nB = compute((4,), (i) => A[i] % -0)\n",
     PK_ERR_CHECK, "f.te:2:31:", "integer modulo by literal zero"},
};

static void test_errors(pk_ctx *unused) {
  (void)unused;
  for (size_t i = 0; i < sizeof bad_programs / sizeof bad_programs[0]; i++) {
    pk_ctx *ctx = pk_ctx_new();
    pk_te_program *p = (pk_te_program *)&p;
    pk_status s = pk_te_parse(ctx, bad_programs[i].text, strlen(bad_programs[i].text), "f.te", &p);
    const char *msg = pk_ctx_error(ctx);
    if (s != bad_programs[i].status || pk_ctx_status(ctx) != s)
      fail(bad_programs[i].name, pk_sprintf(ctx, "status %s, want %s: ", pk_status_name(s), pk_status_name(bad_programs[i].status)), msg);
    else if (strncmp(msg, bad_programs[i].where, strlen(bad_programs[i].where)) != 0 || !strstr(msg, bad_programs[i].what))
      fail(bad_programs[i].name, pk_sprintf(ctx, "want '%s ... %s', got: ", bad_programs[i].where, bad_programs[i].what), msg);
    else if (p != NULL)
      fail(bad_programs[i].name, "failed parse left *out set", NULL);
    else
      pass(bad_programs[i].name);
    pk_ctx_free(ctx);
  }
}

static void test_deep_nesting(pk_ctx *ctx) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_append(&b, "A = placeholder((4,), f32)\nB = compute((4,), (i) => ");
  for (int i = 0; i < 100000; i++) pk_strbuf_append(&b, "(");
  pk_strbuf_append(&b, "A[i]");
  for (int i = 0; i < 100000; i++) pk_strbuf_append(&b, ")");
  pk_strbuf_append(&b, ")\n");
  pk_te_program *p;
  pk_status s = pk_te_parse(ctx, b.data, b.len, "deep.te", &p);
  if (s != PK_ERR_SYNTAX || !strstr(pk_ctx_error(ctx), "deep.te:2:") ||
      !strstr(pk_ctx_error(ctx), "nested too deeply"))
    fail("deep_nesting_parens", "want a syntax error, got: ", pk_ctx_error(ctx));
  else
    pass("deep_nesting_parens");
  pk_ctx_clear_error(ctx);

  /* A long left-associative chain is deep without recursion in the parser: the checker caps it. */
  pk_strbuf_free(&b);
  pk_strbuf_append(&b, "A = placeholder((4,), f32)\nB = compute((4,), (i) => A[i]");
  for (int i = 0; i < 100000; i++) pk_strbuf_append(&b, " + 1.0");
  pk_strbuf_append(&b, ")\n");
  s = pk_te_parse(ctx, b.data, b.len, "chain.te", &p);
  if (s != PK_ERR_CHECK || !strstr(pk_ctx_error(ctx), "chain.te:2:") ||
      !strstr(pk_ctx_error(ctx), "nested too deeply"))
    fail("deep_nesting_chain", "want a check error, got: ", pk_ctx_error(ctx));
  else
    pass("deep_nesting_chain");
  pk_ctx_clear_error(ctx);

  pk_strbuf_free(&b);
  pk_strbuf_append(&b, "A = placeholder((4,), f32)\nB = compute((4,), (i) => ");
  for (int i = 0; i < 120; i++) pk_strbuf_append(&b, "-("); /* two levels each */
  pk_strbuf_append(&b, "A[i]");
  for (int i = 0; i < 120; i++) pk_strbuf_append(&b, ")");
  pk_strbuf_append(&b, ")\n");
  if (canon(ctx, "nesting_within_limit", b.data)) pass("nesting_within_limit");
  pk_strbuf_free(&b);

  /* Selects nested in select conditions: the guard analysis must stay linear and precise. */
  pk_strbuf cond;
  pk_strbuf_init(&cond);
  pk_strbuf_append(&cond, "i");
  for (int i = 0; i < 60; i++) {
    pk_strbuf next;
    pk_strbuf_init(&next);
    pk_strbuf_printf(&next, "select(%s < 5, i, i + 1)", cond.data);
    pk_strbuf_free(&cond);
    cond = next;
  }
  pk_strbuf_printf(&b, "A = placeholder((10,), f32)\nB = compute((10,), (i) => A[min(max(%s, 0), 9)])\n",
                   cond.data);
  if (canon(ctx, "guards_nested_in_conditions", b.data)) pass("guards_nested_in_conditions");
  pk_strbuf_free(&cond);
  pk_strbuf_free(&b);
}

/* ---- programs built in C ---- */

static void test_built_in_c(pk_ctx *ctx) {
  pk_te_program *p = pk_te_program_new(ctx);
  int64_t shape[2] = {4, 3};
  pk_te_tensor *a = pk_te_placeholder(ctx, p, "A", 2, shape, PKRT_DTYPE_F32);
  pk_te_axis *k = pk_te_reduce_axis(ctx, p, "k", 0, 3);
  const char *names[1] = {"i"};
  pk_te_tensor *c = pk_te_compute(ctx, p, "C", 1, shape, names);
  pk_expr *idx[2] = {pk_expr_axis(ctx, c->axes[0]), pk_expr_axis(ctx, k)};
  pk_expr *prod = pk_expr_binary(ctx, PK_EOP_MUL, pk_expr_read(ctx, a, 2, idx), pk_expr_int(ctx, -2));
  c->body = pk_expr_reduce(ctx, PK_EOP_SUM, prod, 1, &k);
  if (pk_te_check(ctx, p) != PK_OK) {
    fail("built_in_c", "check failed: ", pk_ctx_error(ctx));
    return;
  }
  const char *want = "# pock-te canonical v1\n"
                     "t0 = placeholder((4, 3), f32)\n"
                     "k0 = reduce_axis(0, 3)\n"
                     "t1 = compute((4,), (i0) => sum(t0[i0, k0] * -2, k0))\n";
  char *got = pk_te_print(ctx, p);
  if (strcmp(got, want) != 0) fail("built_in_c", "canonical text:\n", got);
  else if (c->dtype != PKRT_DTYPE_F32 || prod->args[1]->dtype != PKRT_DTYPE_F32)
    fail("built_in_c", "literal did not adopt f32", NULL);
  else if (pk_te_flops(p) != 4 * 3 * 2)
    fail("built_in_c", pk_sprintf(ctx, "flops %g, want 24", pk_te_flops(p)), NULL);
  else if (pk_te_check(ctx, p) != PK_OK)
    fail("built_in_c", "second check failed: ", pk_ctx_error(ctx));
  else if (strcmp(pk_te_print_expr(ctx, c->body), "sum(t0[i0, k0] * -2, k0)") != 0)
    fail("built_in_c", "print_expr: ", pk_te_print_expr(ctx, c->body));
  else
    pass("built_in_c");

  /* Out of bounds from C: no position, but the same message. */
  pk_te_tensor *d = pk_te_compute(ctx, p, "D", 1, shape, names);
  pk_expr *bad_idx[2] = {pk_expr_axis(ctx, d->axes[0]), pk_expr_int(ctx, 3)};
  d->body = pk_expr_read(ctx, a, 2, bad_idx);
  pk_status s = pk_te_check(ctx, p);
  if (s != PK_ERR_CHECK || strcmp(pk_ctx_error(ctx), "read of A can leave its tensor: index 1 ranges "
                                                     "over [3, 3], extent 3; guard it with select(...) "
                                                     "or clamp it with min/max") != 0)
    fail("built_in_c_bounds", "got: ", pk_ctx_error(ctx));
  else
    pass("built_in_c_bounds");
  pk_ctx_clear_error(ctx);
}

static void test_literals_round_trip(pk_ctx *ctx) {
  const double values[] = {0.1, 1.0 / 3.0, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.125, 0.0,
                           -0.0, -2.5, 1e22, 4.35, 100.0};
  int bad = 0;
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    pk_te_program *p = pk_te_program_new(ctx);
    int64_t one = 1;
    pk_te_tensor *c = pk_te_compute(ctx, p, "c", 1, &one, NULL);
    c->body = pk_expr_float(ctx, values[i]);
    char *text = pk_te_print(ctx, p);
    pk_te_program *q;
    if (pk_te_parse(ctx, text, strlen(text), "lit", &q) != PK_OK) {
      fail("float_literal_round_trip", pk_ctx_error(ctx), text);
      pk_ctx_clear_error(ctx);
      bad++;
      continue;
    }
    const pk_expr *e = q->tensors[0]->body;
    double v = e->kind == PK_EXPR_UNARY ? -e->args[0]->fval : e->fval;
    if (memcmp(&v, &values[i], sizeof v) != 0 || strcmp(pk_te_print(ctx, q), text) != 0) {
      fail("float_literal_round_trip", "value changed: ", text);
      bad++;
    }
  }
  if (!bad) pass("float_literal_round_trip");
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_fixed_points(ctx);
  test_canonical_text(ctx);
  test_invariance(ctx);
  test_errors(ctx);
  test_deep_nesting(ctx);
  test_built_in_c(ctx);
  test_literals_round_trip(ctx);
  pk_ctx_free(ctx);
  if (failures) printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
