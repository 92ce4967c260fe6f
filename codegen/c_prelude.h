/* c_prelude.h — helpers every generated C source carries: integer arithmetic with defined
 * wrap-around, floor division, saturating casts and NaN-propagating min/max, so that
 * kernels match the reference interpreter bit for bit on integers and never hit UB; and the
 * templates of explicit vector code (GCC vector extensions, instantiated per width).
 * Included verbatim into generated code (see emit_c.c); keep it self-contained GNU C11. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define PK_INT_OPS(T, U, S, TMIN, TMAX)                                                    \
  static inline T pk_add_##S(T a, T b) { return (T)((U)a + (U)b); }                        \
  static inline T pk_sub_##S(T a, T b) { return (T)((U)a - (U)b); }                        \
  static inline T pk_mul_##S(T a, T b) { return (T)((U)a * (U)b); }                        \
  static inline T pk_neg_##S(T a) { return (T)((U)0 - (U)a); }                             \
  static inline T pk_abs_##S(T a) { return a < 0 ? pk_neg_##S(a) : a; }                    \
  static inline T pk_min_##S(T a, T b) { return a < b ? a : b; }                           \
  static inline T pk_max_##S(T a, T b) { return a > b ? a : b; }                           \
  /* floor division; x / 0 = 0 and TMIN / -1 wraps, as the interpreter defines them */    \
  static inline T pk_div_##S(T a, T b) {                                                   \
    if (b == 0) return 0;                                                                  \
    if (b == -1) return pk_neg_##S(a);                                                     \
    T q = a / b;                                                                           \
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;                               \
  }                                                                                        \
  /* floor modulo: the result has the divisor's sign; x % 0 = x */                         \
  static inline T pk_mod_##S(T a, T b) {                                                   \
    if (b == 0) return a;                                                                  \
    if (b == -1) return 0;                                                                 \
    T r = a % b;                                                                           \
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;                                   \
  }                                                                                        \
  /* float to integer: truncate, saturate, NaN -> 0 */                                     \
  static inline T pk_from_f64_##S(double x) {                                              \
    if (x != x) return 0;                                                                  \
    if (x <= (double)TMIN) return TMIN;                                                    \
    if (x >= (double)TMAX) return TMAX;                                                    \
    return (T)x;                                                                           \
  }

PK_INT_OPS(int32_t, uint32_t, i32, INT32_MIN, INT32_MAX)
PK_INT_OPS(int64_t, uint64_t, i64, INT64_MIN, INT64_MAX)

/* min/max propagate NaN (fmin/fmax would drop it), matching the interpreter. */
static inline float pk_min_f32(float a, float b) { return a != a ? a : b != b ? b : a < b ? a : b; }
static inline float pk_max_f32(float a, float b) { return a != a ? a : b != b ? b : a > b ? a : b; }
static inline double pk_min_f64(double a, double b) { return a != a ? a : b != b ? b : a < b ? a : b; }
static inline double pk_max_f64(double a, double b) { return a != a ? a : b != b ? b : a > b ? a : b; }
/* float % is floor modulo, like the integer one */
static inline float pk_mod_f32(float a, float b) { return a - floorf(a / b) * b; }
static inline double pk_mod_f64(double a, double b) { return a - floor(a / b) * b; }
static inline float pk_sigmoid_f32(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline double pk_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }
/* hash(a, b, c) of docs/te.md (te/expr.c's pk_te_hash3 is the same): splitmix64's
 * finaliser chained over the operands, the top 53 bits kept. */
static inline uint64_t pk_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline int64_t pk_hash3(int64_t a, int64_t b, int64_t c) {
  return (int64_t)(pk_mix64(pk_mix64(pk_mix64((uint64_t)a) ^ (uint64_t)b) ^ (uint64_t)c) >> 11);
}

/* A kernel is compiled for fixed shapes and strides: anything else is refused. */
static inline int pk_buffer_ok(const pkrt_buffer *b, int32_t dtype, int32_t ndim,
                               const int64_t *shape, const int64_t *strides) {
  if (!b->data || b->dtype != dtype || b->ndim != ndim || b->offset < 0) return 0;
  for (int32_t d = 0; d < ndim; d++)
    if (b->shape[d] != shape[d] || (shape[d] > 1 && b->strides[d] != strides[d])) return 0;
  return 1;
}

/* ---- explicit vectors ----
 * A vectorized loop works on "parts": GCC vector-extension values as wide as one hardware
 * vector. The emitter instantiates what a source uses, once each:
 *   PK_VEC_TYPE(S, T, N)       pk_SxN, N lanes of T
 *   PK_VEC_MASK(N)             masks pk_i32xN (lanes -1 or 0) and pk_any_N / pk_all_N
 *   PK_VEC_FAMILY(S, T, N, I)  loads, stores, select, min/max of pk_SxN (pk_IxN: the signed
 *                              integer vector of T's width)
 *   PK_VEC_EXP_F32(N)          exp and sigmoid of pk_f32xN (after the f32 and i32 families)
 * A part may have padding lanes [n, N) where a loop's lanes do not fill it: they are never
 * read from or written to memory, and pk_any/pk_all ignore them. */

static const int32_t pk_iota32[64] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
    44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};

/* A lane guard `c * lane < d` compares in int32: clamping d this far out keeps the answer. */
static inline int32_t pk_clamp32(int64_t x) {
  return x < -(INT64_C(1) << 30) ? -(1 << 30) : x > (INT64_C(1) << 30) ? (1 << 30) : (int32_t)x;
}

/* Two-vector permutes with a mask vector: GCC's __builtin_shuffle. Clang has no such form;
 * there stride-2 loads stay lane by lane. */
#if defined(__clang__)
#define PK_HAVE_SHUFFLE 0
#define PK_SHUFFLE2(a, b, m) (a)
#else
#define PK_HAVE_SHUFFLE 1
#define PK_SHUFFLE2(a, b, m) __builtin_shuffle(a, b, m)
#endif

/* pk_SxNu: the same vector at any element-aligned address, aliasing T (for loads/stores) */
#define PK_VEC_TYPE(S, T, N)                                                               \
  typedef T pk_##S##x##N __attribute__((vector_size(sizeof(T) * (N))));                   \
  typedef T pk_##S##x##N##u                                                                \
      __attribute__((vector_size(sizeof(T) * (N)), aligned(sizeof(T)), may_alias));

#define PK_VEC_MASK(N)                                                                     \
  static inline pk_i32x##N pk_vlanes_##N(int32_t first) { /* first, first + 1, ... */      \
    pk_i32x##N v;                                                                          \
    __builtin_memcpy(&v, pk_iota32, sizeof v);                                             \
    return v + first;                                                                      \
  }                                                                                        \
  static inline pk_i32x##N pk_vbcm_##N(int s) { return (pk_i32x##N){0} - (int32_t)(s != 0); } \
  static inline int pk_any_##N(pk_i32x##N m, int n) {                                      \
    if (n < (N)) m &= (pk_i32x##N)(pk_vlanes_##N(0) < (pk_i32x##N){0} + n);                \
    uint32_t w[N], acc = 0;                                                                \
    __builtin_memcpy(w, &m, sizeof m);                                                     \
    for (int l = 0; l < (N); l++) acc |= w[l];                                             \
    return acc != 0;                                                                       \
  }                                                                                        \
  static inline int pk_all_##N(pk_i32x##N m, int n) {                                      \
    if (n < (N)) m |= (pk_i32x##N)(pk_vlanes_##N(0) >= (pk_i32x##N){0} + n);               \
    uint32_t w[N], acc = ~0u;                                                              \
    __builtin_memcpy(w, &m, sizeof m);                                                     \
    for (int l = 0; l < (N); l++) acc &= w[l];                                             \
    return acc == ~0u;                                                                     \
  }

#define PK_VEC_FAMILY(S, T, N, I)                                                          \
  /* s - 0 is s for every s (even -0 and NaN), and GCC folds it to one broadcast */        \
  static inline pk_##S##x##N pk_vbc_##S##x##N(T s) { return s - (pk_##S##x##N){0}; }      \
  /* the first n lanes: one unaligned vector load when n == N (GCC folds it into the      \
   * instruction using it), else a memcpy of n elements */                                 \
  static inline pk_##S##x##N pk_vld_##S##x##N(const T *p, int n) {                         \
    if (n == (N)) return *(const pk_##S##x##N##u *)p;                                      \
    pk_##S##x##N v = {0};                                                                  \
    __builtin_memcpy(&v, p, sizeof(T) * (size_t)n);                                        \
    return v;                                                                              \
  }                                                                                        \
  /* A part with padding lanes (n < N) at b[i]: the padding's values do not matter, so a   \
   * whole vector is read when it lies inside the buffer (GCC builds partial vectors        \
   * through the stack). */                                                                \
  static inline pk_##S##x##N pk_vldp_##S##x##N(const T *b, int64_t i, int64_t numel,      \
                                               int n) {                                    \
    if (i >= 0 && i + (N) <= numel) return pk_vld_##S##x##N(b + i, N);                     \
    return pk_vld_##S##x##N(b + i, n);                                                     \
  }                                                                                        \
  static inline pk_##S##x##N pk_vlds_##S##x##N(const T *p, int64_t stride, int n) {        \
    pk_##S##x##N v = {0};                                                                  \
    for (int l = 0; l < n; l++) v[l] = p[l * stride];                                      \
    return v;                                                                              \
  }                                                                                        \
  /* Stride 2 over a whole vector whose span b[i, i + 2N) lies inside the buffer: two      \
   * contiguous loads and their even lanes, one permute (a strided conv's input row; lane \
   * by lane it was the slowest part of a stem conv); else lane by lane. */                \
  static inline pk_##S##x##N pk_vldsb_##S##x##N(const T *b, int64_t i, int64_t stride,     \
                                                int64_t numel, int n) {                    \
    if (PK_HAVE_SHUFFLE && stride == 2 && n == (N) && i >= 0 && i + 2 * (N) <= numel) {    \
      pk_##S##x##N lo = pk_vld_##S##x##N(b + i, N), hi = pk_vld_##S##x##N(b + i + (N), N); \
      return PK_SHUFFLE2(lo, hi, __builtin_convertvector(pk_vlanes_##N(0) * 2, pk_##I##x##N)); \
    }                                                                                      \
    return pk_vlds_##S##x##N(b + i, stride, n);                                            \
  }                                                                                        \
  /* Under a mask, b[i + k * stride] for lanes k < n: inactive lanes' elements may lie     \
   * outside the buffer (b[0, numel)), so the whole vector is read only when all of them   \
   * lie inside; else active lanes one by one. (Inactive lanes' values are discarded.) */  \
  static inline pk_##S##x##N pk_vldsm_##S##x##N(const T *b, int64_t i, int64_t stride,     \
                                                int64_t numel, pk_i32x##N m, int n) {      \
    int64_t last = i + stride * (n - 1);                                                   \
    if (i >= 0 && i < numel && last >= 0 && last < numel)                                  \
      return stride == 1 ? pk_vldp_##S##x##N(b, i, numel, n)                               \
                         : pk_vldsb_##S##x##N(b, i, stride, numel, n);                     \
    pk_##S##x##N v = {0};                                                                  \
    for (int l = 0; l < n; l++)                                                            \
      if (m[l]) v[l] = b[i + l * stride];                                                  \
    return v;                                                                              \
  }                                                                                        \
  static inline void pk_vst_##S##x##N(T *p, pk_##S##x##N v, int n) {                       \
    if (n == (N)) *(pk_##S##x##N##u *)p = v;                                               \
    else __builtin_memcpy(p, &v, sizeof(T) * (size_t)n);                                   \
  }                                                                                        \
  static inline void pk_vsts_##S##x##N(T *p, int64_t stride, pk_##S##x##N v, int n) {      \
    for (int l = 0; l < n; l++) p[l * stride] = v[l];                                      \
  }                                                                                        \
  /* lane by lane where the mask is partial: a blend would write elements that other      \
   * threads may own */                                                                    \
  static inline void pk_vstsm_##S##x##N(T *p, int64_t stride, pk_##S##x##N v,              \
                                        pk_i32x##N m, int n) {                             \
    for (int l = 0; l < n; l++)                                                            \
      if (m[l]) p[l * stride] = v[l];                                                      \
  }                                                                                        \
  static inline void pk_vstm_##S##x##N(T *p, pk_##S##x##N v, pk_i32x##N m, int n) {        \
    if (pk_all_##N(m, n)) pk_vst_##S##x##N(p, v, n);                                       \
    else pk_vstsm_##S##x##N(p, 1, v, m, n);                                                \
  }                                                                                        \
  static inline pk_##S##x##N pk_vblend_##S##x##N(pk_##I##x##N k, pk_##S##x##N a,           \
                                                 pk_##S##x##N b) {                         \
    return (pk_##S##x##N)(((pk_##I##x##N)a & k) | ((pk_##I##x##N)b & ~k));                 \
  }                                                                                        \
  static inline pk_##S##x##N pk_vsel_##S##x##N(pk_i32x##N m, pk_##S##x##N a,               \
                                               pk_##S##x##N b) {                           \
    return pk_vblend_##S##x##N(__builtin_convertvector(m, pk_##I##x##N), a, b);            \
  }                                                                                        \
  /* NaN-propagating like pk_min_f32 (on integers the NaN tests fold away) */              \
  static inline pk_##S##x##N pk_vmin_##S##x##N(pk_##S##x##N a, pk_##S##x##N b) {           \
    pk_##S##x##N r = pk_vblend_##S##x##N((pk_##I##x##N)(a < b), a, b);                     \
    r = pk_vblend_##S##x##N((pk_##I##x##N)(b != b), b, r);                                 \
    return pk_vblend_##S##x##N((pk_##I##x##N)(a != a), a, r);                              \
  }                                                                                        \
  static inline pk_##S##x##N pk_vmax_##S##x##N(pk_##S##x##N a, pk_##S##x##N b) {           \
    pk_##S##x##N r = pk_vblend_##S##x##N((pk_##I##x##N)(a > b), a, b);                     \
    r = pk_vblend_##S##x##N((pk_##I##x##N)(b != b), b, r);                                 \
    return pk_vblend_##S##x##N((pk_##I##x##N)(a != a), a, r);                              \
  }

/* exp of f32 lanes: libm has no vector form GCC calls without -ffast-math, and a call per
 * lane made softmax, SiLU and GELU's gradient the slowest kernels of a transformer step.
 * x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so r is exact); exp(r) by Cephes
 * expf's degree-6 polynomial (about 1 ulp); times 2^n built in the exponent field, in two
 * factors so that results down to the subnormals come out right. x is clamped first:
 * above 88.8 the product overflows to inf, below -104 it rounds to 0; NaN stays NaN. */
#define PK_VEC_EXP_F32(N)                                                                  \
  static inline pk_f32x##N pk_vexp_f32x##N(pk_f32x##N x) {                                 \
    const pk_f32x##N one = pk_vbc_f32x##N(1.0f);                                           \
    pk_f32x##N c = pk_vblend_f32x##N((pk_i32x##N)(x > 88.8f), pk_vbc_f32x##N(88.8f), x);   \
    c = pk_vblend_f32x##N((pk_i32x##N)(c < -104.0f), pk_vbc_f32x##N(-104.0f), c);          \
    /* round to nearest: 1.5 * 2^23 added and taken away */                                \
    pk_f32x##N n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;                 \
    pk_f32x##N r = c - n * 0.693359375f;                                                   \
    r = r - n * -2.12194440e-4f;                                                           \
    pk_f32x##N p = 1.9875691500e-4f * r + 1.3981999507e-3f;                                \
    p = p * r + 8.3334519073e-3f;                                                          \
    p = p * r + 4.1665795894e-2f;                                                          \
    p = p * r + 1.6666665459e-1f;                                                          \
    p = p * r + 5.0000001201e-1f;                                                          \
    p = p * (r * r) + r + one;                                                             \
    pk_i32x##N ni = __builtin_convertvector(n, pk_i32x##N), n1 = ni >> 1, n2 = ni - n1;    \
    pk_f32x##N s1 = (pk_f32x##N)((n1 + 127) << 23), s2 = (pk_f32x##N)((n2 + 127) << 23);   \
    return pk_vblend_f32x##N((pk_i32x##N)(x != x), x, p * s1 * s2);                        \
  }                                                                                        \
  /* 1 / (1 + exp(-x)): exp(-x) = inf gives 0, exp(-x) = 0 gives 1 */                      \
  static inline pk_f32x##N pk_vsigmoid_f32x##N(pk_f32x##N x) {                             \
    return pk_vbc_f32x##N(1.0f) / (pk_vbc_f32x##N(1.0f) + pk_vexp_f32x##N(-x));            \
  }
