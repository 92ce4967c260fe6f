/* test_vexp.c — the prelude's vector exp and sigmoid (codegen/c_prelude.h, PK_VEC_EXP_F32)
 * against libm in double: at most 2 ulp over the whole f32 range where exp is a normal
 * number, within 2 subnormal steps below it, and exact on the special values (0, inf,
 * NaN, overflow, underflow), at the widths the emitter uses (4, 8 and 16 lanes). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pock/pkrt_kernel.h"
#include "c_prelude.h"

PK_VEC_TYPE(i32, int32_t, 4)
PK_VEC_MASK(4)
PK_VEC_TYPE(f32, float, 4)
PK_VEC_FAMILY(f32, float, 4, i32)
PK_VEC_EXP_F32(4)
PK_VEC_TYPE(i32, int32_t, 8)
PK_VEC_MASK(8)
PK_VEC_TYPE(f32, float, 8)
PK_VEC_FAMILY(f32, float, 8, i32)
PK_VEC_EXP_F32(8)
PK_VEC_TYPE(i32, int32_t, 16)
PK_VEC_MASK(16)
PK_VEC_TYPE(f32, float, 16)
PK_VEC_FAMILY(f32, float, 16, i32)
PK_VEC_EXP_F32(16)

static int failures;

/* Distance in units of the last place of the exact value's binade (subnormals: 2^-149). */
static double ulps(float got, double want) {
  if (isnan(want)) return isnan(got) ? 0 : INFINITY;
  if (isinf(want) || isinf(got)) return (double)got == want ? 0 : INFINITY;
  int e;
  frexp(want, &e);
  double ulp = ldexp(1.0, (e - 24 > -149 ? e - 24 : -149));
  return fabs((double)got - want) / ulp;
}

/* Each width's exp and sigmoid of xs[0, n) into e and s (lanes from several calls). */
static void eval(int width, const float *xs, int n, float *e, float *s) {
  for (int i = 0; i < n; i += 16) {
    float in[16] = {0}, oe[16], os[16];
    int m = n - i < 16 ? n - i : 16;
    memcpy(in, xs + i, sizeof(float) * (size_t)m);
    for (int j = 0; j < 16; j += width) {
      if (width == 4) {
        pk_f32x4 x = pk_vld_f32x4(in + j, 4), a = pk_vexp_f32x4(x), b = pk_vsigmoid_f32x4(x);
        memcpy(oe + j, &a, sizeof a), memcpy(os + j, &b, sizeof b);
      } else if (width == 8) {
        pk_f32x8 x = pk_vld_f32x8(in + j, 8), a = pk_vexp_f32x8(x), b = pk_vsigmoid_f32x8(x);
        memcpy(oe + j, &a, sizeof a), memcpy(os + j, &b, sizeof b);
      } else {
        pk_f32x16 x = pk_vld_f32x16(in, 16), a = pk_vexp_f32x16(x), b = pk_vsigmoid_f32x16(x);
        memcpy(oe, &a, sizeof a), memcpy(os, &b, sizeof b);
      }
    }
    memcpy(e + i, oe, sizeof(float) * (size_t)m);
    memcpy(s + i, os, sizeof(float) * (size_t)m);
  }
}

enum { N = 1 << 20 };
static float xs[N], ge[N], gs[N];

int main(void) {
  static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 88.72f, 88.7228f, 88.73f, 89.0f,
                                  1000.0f, -87.33f, -87.34f, -100.0f, -103.27f, -103.28f,
                                  -104.0f, -105.0f, -1000.0f, 1e-8f, -1e-8f, 0.34657f,
                                  -0.34657f, 0.6931472f, INFINITY, -INFINITY, NAN};
  int ns = (int)(sizeof special / sizeof *special);
  memcpy(xs, special, sizeof special);
  uint64_t seed = 7;
  for (int i = ns; i < N; i++) { /* uniform over [-106, 90] plus a dense band near 0 */
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(seed >> 11) / 9007199254740992.0;
    xs[i] = (float)(i % 4 == 0 ? (u - 0.5) * 2.0 : -106.0 + 196.0 * u);
  }
  for (int w = 4; w <= 16; w *= 2) {
    eval(w, xs, N, ge, gs);
    double worst = 0, worst_s = 0;
    float at = 0, at_s = 0;
    for (int i = 0; i < N; i++) {
      double x = xs[i], want = exp(x), u = ulps(ge[i], want);
      if (!isnan(x) && want > 0x1p+128) want = INFINITY; /* f32 overflow */
      u = ulps(ge[i], want);
      if (u > worst) worst = u, at = xs[i];
      /* sigmoid below -88.7: exp(-x) overflows to inf, as in the scalar pk_sigmoid_f32, and
       * the result is 0 instead of a value under 3e-39 */
      double sw = isnan(x) ? NAN : 1.0 / (1.0 + exp(-x)), su = ulps(gs[i], sw);
      if (x < -88.7 && gs[i] == 0.0f && sw < 3e-39) su = 0;
      if (su > worst_s) worst_s = su, at_s = xs[i];
    }
    if (worst > 2.0) printf("FAIL width %d: exp off by %.2f ulp at x = %.9g\n", w, worst, at), failures++;
    if (worst_s > 4.0) printf("FAIL width %d: sigmoid off by %.2f ulp at x = %.9g\n", w, worst_s, at_s), failures++;
    printf("width %d: exp within %.2f ulp, sigmoid within %.2f ulp over %d values\n", w, worst, worst_s, N);
  }
  /* the special values exactly */
  float e[32], s[32];
  eval(8, special, ns, e, s);
  if (e[0] != 1.0f || e[1] != 1.0f) printf("FAIL exp(+-0) = %g %g\n", e[0], e[1]), failures++;
  if (!isinf(e[8]) || !isinf(e[22])) printf("FAIL exp(1000), exp(inf) = %g %g, not inf\n", e[8], e[22]), failures++;
  if (e[16] != 0.0f || e[23] != 0.0f) printf("FAIL exp(-1000), exp(-inf) = %g %g, not 0\n", e[16], e[23]), failures++;
  if (!isnan(e[24]) || !isnan(s[24])) printf("FAIL exp(NaN), sigmoid(NaN) = %g %g\n", e[24], s[24]), failures++;
  if (s[22] != 1.0f || s[23] != 0.0f) printf("FAIL sigmoid(+-inf) = %g %g\n", s[22], s[23]), failures++;
  printf(failures ? "%d failure(s)\n" : "PASS: 0 failure(s)\n", failures);
  return failures != 0;
}
