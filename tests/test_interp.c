/* test_interp.c — the reference interpreter and the verifier against hand-computed values:
 * arithmetic rules (floor division, wrapping, casts), laziness, NaN in max/min, the error
 * magnitudes S, random-input domains and the kernel-output comparison. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pk_te.h"
#include "pk_verify.h"
#include "pk_test.h"

/* Parses text, fills the float placeholders from vals[] and the integer ones from ivals[],
 * each in definition order, and runs the interpreter. NULL after printing a FAIL line. */
typedef struct fixture {
  const double *vals[4];
  const int64_t *ivals[4];
} fixture;

static pk_te_ref *run(pk_ctx *ctx, const char *name, const char *text, const fixture *fx,
                      pk_te_program **prog) {
  pk_te_program *p;
  if (pk_te_parse(ctx, text, strlen(text), name, &p) != PK_OK) {
    check(false, name, "parse: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  for (int i = 0, nf = 0, ni = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_PLACEHOLDER) continue;
    pk_te_ref_tensor *rt = &ref->tensors[i];
    bool is_float = pk_dtype_is_float(t->dtype);
    for (int64_t j = 0; j < rt->numel; j++) {
      if (is_float) {
        rt->val[j] = fx->vals[nf][j];
        rt->mag[j] = fabs(rt->val[j]);
      } else {
        rt->ival[j] = fx->ivals[ni][j];
      }
    }
    nf += is_float;
    ni += !is_float;
  }
  if (pk_te_interp_run(ctx, p, ref) != PK_OK) {
    check(false, name, "run: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  *prog = p;
  return ref;
}

/* Tensor `name` of p, for reading results. */
static const pk_te_ref_tensor *result(const pk_te_program *p, const pk_te_ref *ref,
                                      const char *name) {
  for (int i = 0; i < p->ntensors; i++)
    if (strcmp(p->tensors[i]->name, name) == 0) return &ref->tensors[i];
  return NULL;
}

static bool same_double(double a, double b) {
  return (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= 1e-14 * fabs(b);
}

static bool expect_vals(const char *name, const pk_te_ref_tensor *t, const double *want,
                        int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!same_double(t->val[i], want[i])) {
      check(false, name, "element %lld: got %.17g, want %.17g", (long long)i, t->val[i], want[i]);
      return false;
    }
  return true;
}

static bool expect_ivals(const char *name, const pk_te_ref_tensor *t, const int64_t *want,
                         int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (t->ival[i] != want[i]) {
      check(false, name, "element %lld: got %lld, want %lld", (long long)i,
            (long long)t->ival[i], (long long)want[i]);
      return false;
    }
  return true;
}

static void test_matmul(pk_ctx *ctx) {
  const char *text = "A = placeholder((2, 3), f64)\n"
                     "B = placeholder((3, 2), f64)\n"
                     "k = reduce_axis(3)\n"
                     "C = compute((2, 2), (i, j) => sum(A[i, k] * B[k, j], k))\n";
  const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, -11, 12};
  fixture fx = {{a, b}, {0}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "interp_matmul_2x3x2", text, &fx, &p);
  if (!ref) return;
  const pk_te_ref_tensor *c = result(p, ref, "C");
  /* row 0: 7 + 18 - 33, 8 + 20 + 36; row 1: 28 + 45 - 66, 32 + 50 + 72 */
  const double want[] = {-8, 64, 7, 154};
  const double mag[] = {58, 64, 139, 154}; /* the same sums over |a| |b| */
  if (expect_vals("interp_matmul_2x3x2", c, want, 4) &&
      expect_vals("interp_matmul_2x3x2_mag", &(pk_te_ref_tensor){4, c->mag, NULL, NULL}, mag, 4))
    check(true, "interp_matmul_2x3x2", "ok");
}

static void test_floor_div_mod(pk_ctx *ctx) {
  const char *text = "A = placeholder((8,), i64)\n"
                     "B = placeholder((8,), i64)\n"
                     "Q = compute((8,), (i) => A[i] / B[i])\n"
                     "R = compute((8,), (i) => A[i] % B[i])\n";
  const int64_t a[] = {-7, 7, -7, 7, 5, -5, INT64_MIN, -1};
  const int64_t b[] = {2, -2, -2, 2, 0, 0, -1, 3};
  const int64_t q[] = {-4, -4, 3, 3, 0, 0, INT64_MIN, -1};
  const int64_t r[] = {1, -1, -1, 1, 5, -5, 0, 2};
  fixture fx = {{0}, {a, b}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "interp_floor_div_mod", text, &fx, &p);
  if (ref && expect_ivals("interp_floor_div_mod", result(p, ref, "Q"), q, 8) &&
      expect_ivals("interp_floor_div_mod", result(p, ref, "R"), r, 8))
    check(true, "interp_floor_div_mod", "ok");
}

static void test_i32_wrap(pk_ctx *ctx) {
  const char *text = "A = placeholder((3,), i32)\n"
                     "B = placeholder((3,), i32)\n"
                     "S = compute((3,), (i) => A[i] + 1)\n"
                     "P = compute((3,), (i) => A[i] * 65536)\n"
                     "N = compute((3,), (i) => -A[i])\n"
                     "Q = compute((3,), (i) => A[i] / B[i])\n";
  const int64_t a[] = {INT32_MAX, INT32_MIN, 65536}, b[] = {1, -1, 3};
  const int64_t s[] = {INT32_MIN, INT32_MIN + 1, 65537};
  const int64_t pr[] = {-65536, 0, 0};
  const int64_t n[] = {-INT32_MAX, INT32_MIN, -65536};
  const int64_t q[] = {INT32_MAX, INT32_MIN, 21845};
  fixture fx = {{0}, {a, b}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "interp_i32_wrap", text, &fx, &p);
  if (ref && expect_ivals("interp_i32_wrap", result(p, ref, "S"), s, 3) &&
      expect_ivals("interp_i32_wrap", result(p, ref, "P"), pr, 3) &&
      expect_ivals("interp_i32_wrap", result(p, ref, "N"), n, 3) &&
      expect_ivals("interp_i32_wrap", result(p, ref, "Q"), q, 3))
    check(true, "interp_i32_wrap", "ok");
}

/* The interpreter reports an out-of-bounds read instead of performing it, so a run that
 * succeeds shows that the untaken branches were never evaluated. */
static void test_lazy(pk_ctx *ctx) {
  const char *text = "X = placeholder((4,), f32)\n"
                     "S = compute((6,), (i) => select(i < 4, X[i], -1.0))\n"
                     "A = compute((6,), (i) => select(i < 4 && X[i] > 0.0, X[i], 0.0))\n"
                     "O = compute((6,), (i) => select(i >= 4 || X[i] < 0.0, 0.0, X[i]))\n";
  const double x[] = {1, -2, 3, -4};
  fixture fx = {{x}, {0}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "interp_select_lazy", text, &fx, &p);
  const double s[] = {1, -2, 3, -4, -1, -1}, an[] = {1, 0, 3, 0, 0, 0}, o[] = {1, 0, 3, 0, 0, 0};
  if (ref && expect_vals("interp_select_lazy", result(p, ref, "S"), s, 6) &&
      expect_vals("interp_and_lazy", result(p, ref, "A"), an, 6) &&
      expect_vals("interp_or_lazy", result(p, ref, "O"), o, 6))
    check(true, "interp_select_and_or_lazy", "ok");
}

static void test_nan_reductions(pk_ctx *ctx) {
  const char *text = "X = placeholder((3, 3), f32)\n"
                     "k = reduce_axis(3)\n"
                     "r = reduce_axis(3)\n"
                     "M = compute((3,), (i) => max(X[i, k], k))\n"
                     "N = compute((3,), (i) => min(X[i, r], r))\n"
                     "R = compute((3, 3), (i, j) => max(X[i, j], 0.0))\n";
  const double x[] = {NAN, 1, 2, 1, 2, NAN, -1, -5, 2};
  fixture fx = {{x}, {0}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "interp_nan_max_min", text, &fx, &p);
  const double m[] = {NAN, NAN, 2}, n[] = {NAN, NAN, -5};
  const double r[] = {NAN, 1, 2, 1, 2, NAN, 0, 0, 2};
  if (ref && expect_vals("interp_nan_max", result(p, ref, "M"), m, 3) &&
      expect_vals("interp_nan_min", result(p, ref, "N"), n, 3) &&
      expect_vals("interp_nan_binary_max", result(p, ref, "R"), r, 9))
    check(true, "interp_nan_max_min", "ok");
}

static void test_magnitudes(pk_ctx *ctx) {
  const char *text = "X = placeholder((3,), f64)\n"
                     "k = reduce_axis(3)\n"
                     "S = compute((1,), (i) => sum(X[k], k))\n"
                     "P = compute((3,), (i) => X[i] * X[i] - 1.0)\n"
                     "D = compute((3,), (i) => 1.0 / X[i])\n"
                     "E = compute((3,), (i) => exp(X[i] * 0.0 + 2.0))\n"
                     "M = compute((1,), (i) => max(X[k] * 2.0, k))\n";
  const double x[] = {1e8, 1, -1e8};
  fixture fx = {{x}, {0}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "interp_magnitudes", text, &fx, &p);
  if (!ref) return;
  const pk_te_ref_tensor *s = result(p, ref, "S");
  bool ok = true;
  ok &= s->val[0] == 1 && s->mag[0] == 2e8 + 1; /* cancellation cannot hide in S */
  const pk_te_ref_tensor *pr = result(p, ref, "P");
  ok &= pr->mag[0] == 1e16 + 1 && pr->mag[1] == 2 && pr->val[1] == 0;
  const pk_te_ref_tensor *d = result(p, ref, "D");
  ok &= same_double(d->mag[1], 2.0) && same_double(d->mag[0], 2e-8); /* 1/|x| + |1| |x| / x^2 */
  const pk_te_ref_tensor *e = result(p, ref, "E");
  /* argument magnitude: 1e8 * 0 + 2 = 2, so S = e^2 + e^2 * 2 */
  ok &= same_double(e->val[0], exp(2.0)) && same_double(e->mag[0], 3 * exp(2.0));
  const pk_te_ref_tensor *m = result(p, ref, "M");
  ok &= m->val[0] == 2e8 && m->mag[0] == 2e8; /* S of the chosen term */
  check(ok, "interp_magnitudes", "S = %.17g, P.S = %.17g, D.S = %.17g, E.S = %.17g, M.S = %.17g",
        s->mag[0], pr->mag[0], d->mag[1], e->mag[0], m->mag[0]);
}

static void test_casts_and_float_mod(pk_ctx *ctx) {
  const char *text = "X = placeholder((6,), f64)\n"
                     "Y = placeholder((6,), f64)\n"
                     "I = placeholder((6,), i64)\n"
                     "C = compute((6,), (i) => cast(i32, X[i]))\n"
                     "L = compute((6,), (i) => cast(i64, X[i]))\n"
                     "B = compute((6,), (i) => cast(i32, X[i] > 0.0))\n"
                     "F = compute((6,), (i) => cast(f64, I[i]))\n"
                     "M = compute((6,), (i) => X[i] % Y[i])\n";
  const double x[] = {NAN, 1e20, -1e20, -2.7, 2.7, 3e9};
  const double y[] = {1, 1, 1, 2, -2, 7};
  const int64_t iv[] = {-3, 0, 5, INT64_MAX, 1, 2};
  fixture fx = {{x, y}, {iv}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "interp_casts", text, &fx, &p);
  if (!ref) return;
  const int64_t c[] = {0, INT32_MAX, INT32_MIN, -2, 2, INT32_MAX};
  const int64_t l[] = {0, INT64_MAX, INT64_MIN, -2, 2, 3000000000};
  const int64_t b[] = {0, 1, 0, 0, 1, 1};
  const double f[] = {-3, 0, 5, 9223372036854775807.0, 1, 2};
  /* -2.7 - floor(-1.35) * 2 = 1.3; 2.7 - floor(-1.35) * -2 = -1.3; 3e9 mod 7 = 3e9 - 428571428*7 */
  const double m[] = {NAN, 0, 0, -2.7 + 4.0, 2.7 - 4.0, 3e9 - 428571428.0 * 7};
  if (expect_ivals("interp_cast_f2i32", result(p, ref, "C"), c, 6) &&
      expect_ivals("interp_cast_f2i64", result(p, ref, "L"), l, 6) &&
      expect_ivals("interp_cast_bool", result(p, ref, "B"), b, 6) &&
      expect_vals("interp_cast_i2f", result(p, ref, "F"), f, 6) &&
      expect_vals("interp_float_mod", result(p, ref, "M"), m, 6))
    check(result(p, ref, "F")->mag[3] == 9223372036854775807.0, "interp_casts_and_float_mod",
          "int -> float magnitude");
}

/* ---- verifier ---- */

static void test_verify(pk_ctx *ctx) {
  const char *text = "X = placeholder((2, 3), f32)\n"
                     "Y = compute((2, 3), (i, j) => X[i, j] * 2.0)\n"
                     "I = compute((2, 3), (i, j) => cast(i32, X[i, j] * 10.0))\n";
  const double x[] = {0.5, -1, 3e38, NAN, 0.25, 3};
  fixture fx = {{x}, {0}};
  pk_te_program *p;
  pk_te_ref *ref = run(ctx, "verify", text, &fx, &p);
  if (!ref) return;
  const pk_te_tensor *ty = p->tensors[1], *ti = p->tensors[2];
  float y[6];
  for (int i = 0; i < 6; i++) y[i] = (float)(x[i] * 2);
  y[2] = INFINITY; /* what an f32 kernel computes for 6e38 */
  pk_verify_result r;
  pk_status s = pk_te_verify_output(ctx, ty, &ref->tensors[1], y, &r);
  check(s == PK_OK && r.checked == 6 && r.nbad == 0, "verify_ok_with_nan_and_overflow", "%s",
        pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);

  y[4] = 0.5f + 2e-5f; /* bound there: 1e-5 * 0.5 */
  s = pk_te_verify_output(ctx, ty, &ref->tensors[1], y, &r);
  const char *msg = pk_ctx_error(ctx);
  check(s == PK_ERR_MISMATCH && r.nbad == 1 && r.worst_index == 4 && strstr(msg, "'Y'") &&
            strstr(msg, "[1, 1]"),
        "verify_mismatch_message", "status %d, nbad %lld, message '%s'", s, (long long)r.nbad, msg);
  pk_ctx_clear_error(ctx);

  y[4] = 0.5f;
  y[3] = 1.0f; /* a number where the reference is NaN */
  s = pk_te_verify_output(ctx, ty, &ref->tensors[1], y, &r);
  check(s == PK_ERR_MISMATCH && isinf(r.worst_ratio), "verify_nan_placement", "status %d", s);
  pk_ctx_clear_error(ctx);

  int32_t iv[6];
  pk_te_ref_to_buffer(ti, &ref->tensors[2], iv);
  s = pk_te_verify_output(ctx, ti, &ref->tensors[2], iv, &r);
  bool ok = s == PK_OK && iv[0] == 5 && iv[2] == INT32_MAX && iv[3] == 0;
  iv[5] = 31;
  s = pk_te_verify_output(ctx, ti, &ref->tensors[2], iv, &r);
  ok &= s == PK_ERR_MISMATCH && strstr(pk_ctx_error(ctx), "kernel 31, reference 30") != NULL;
  check(ok, "verify_integers_exact", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

static void test_fill_random(pk_ctx *ctx) {
  const char *text = "A = placeholder((64,), f32)\n"
                     "B = placeholder((64,), f32)\n"
                     "C = placeholder((64,), f32)\n"
                     "I = placeholder((64,), i64)\n"
                     "J = placeholder((64,), i32)\n"
                     "T = compute((64,), (i) => abs(A[i]) * 2.0 + B[i])\n"
                     "U = compute((64,), (i) => log(T[i]) + pow(C[i], 2.0))\n"
                     "V = compute((64,), (i) => U[min(max(I[i], 0), 63)] + cast(f32, J[i]))\n";
  pk_te_program *p;
  if (pk_te_parse(ctx, text, strlen(text), "fill", &p) != PK_OK) {
    check(false, "fill_random_domains", "parse: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  pk_te_ref *r1 = pk_te_ref_new(ctx, p), *r2 = pk_te_ref_new(ctx, p);
  pk_te_ref_fill_random(p, r1, 7);
  pk_te_ref_fill_random(p, r2, 7);
  bool ok = true, jneg = false;
  for (int j = 0; j < 64; j++) {
    double a = r1->tensors[0].val[j], b = r1->tensors[1].val[j], c = r1->tensors[2].val[j];
    int64_t iv = r1->tensors[3].ival[j], jv = r1->tensors[4].ival[j];
    ok &= a >= 0.25 && a <= 2 && c >= 0.25 && c <= 2 && b >= 0.25 && b <= 2;
    ok &= iv >= 0 && iv < 8 && jv >= -8 && jv <= 8;
    ok &= (double)(float)a == a && r1->tensors[0].mag[j] == fabs(a);
    ok &= a == r2->tensors[0].val[j] && iv == r2->tensors[3].ival[j];
    jneg |= jv < 0;
  }
  check(ok && jneg, "fill_random_domains", "a value outside its domain or not reproducible");

  /* masks: M only compared with 0 gets 0 and 1; N is also a value, so it keeps [-8, 8] */
  const char *masks = "M = placeholder((64,), i32)\n"
                      "N = placeholder((64,), i64)\n"
                      "X = placeholder((64,), f32)\n"
                      "Y = compute((64,), (i) => select(M[i] != 0 && 0 == N[i], X[i], "
                      "cast(f32, N[i])))\n";
  pk_te_program *pm;
  if (pk_te_parse(ctx, masks, strlen(masks), "masks", &pm) != PK_OK) {
    check(false, "fill_random_masks", "parse: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  pk_te_ref *rm = pk_te_ref_new(ctx, pm);
  pk_te_ref_fill_random(pm, rm, 3);
  int ones = 0, zeros = 0, wide = 0;
  for (int j = 0; j < 64; j++) {
    int64_t m = rm->tensors[0].ival[j], n = rm->tensors[1].ival[j];
    ones += m == 1, zeros += m == 0;
    wide += n < 0 || n > 1;
  }
  check(ones > 0 && zeros > 0 && ones + zeros == 64 && wide > 0, "fill_random_masks",
        "%d ones, %d zeros; %d of N outside {0, 1}", ones, zeros, wide);

  const char *plain = "X = placeholder((256,), f64)\nY = compute((256,), (i) => X[i])\n";
  pk_te_program *q;
  if (pk_te_parse(ctx, plain, strlen(plain), "plain", &q) != PK_OK) return;
  pk_te_ref *r3 = pk_te_ref_new(ctx, q), *r4 = pk_te_ref_new(ctx, q);
  pk_te_ref_fill_random(q, r3, 1);
  pk_te_ref_fill_random(q, r4, 2);
  double lo = 1, hi = -1;
  bool differ = false;
  for (int j = 0; j < 256; j++) {
    double v = r3->tensors[0].val[j];
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    differ |= v != r4->tensors[0].val[j];
  }
  check(lo >= -1 && lo < -0.9 && hi <= 1 && hi > 0.9 && differ, "fill_random_default_range",
        "range [%g, %g], seeds differ %d", lo, hi, differ);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_matmul(ctx);
  test_floor_div_mod(ctx);
  test_i32_wrap(ctx);
  test_lazy(ctx);
  test_nan_reductions(ctx);
  test_magnitudes(ctx);
  test_casts_and_float_mod(ctx);
  test_verify(ctx);
  test_fill_random(ctx);
  pk_ctx_free(ctx);
  printf("%s interp\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
