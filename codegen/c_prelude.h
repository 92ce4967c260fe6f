/* c_prelude.h — helpers every generated C source carries: integer arithmetic with defined
 * wrap-around, floor division, saturating casts and NaN-propagating min/max, so that
 * kernels match the reference interpreter bit for bit on integers and never hit UB.
 * Included verbatim into generated code (see emit_c.c); keep it self-contained C11. */
#include <math.h>
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

/* A kernel is compiled for fixed shapes and strides: anything else is refused. */
static inline int pk_buffer_ok(const pkrt_buffer *b, int32_t dtype, int32_t ndim,
                               const int64_t *shape, const int64_t *strides) {
  if (!b->data || b->dtype != dtype || b->ndim != ndim || b->offset < 0) return 0;
  for (int32_t d = 0; d < ndim; d++)
    if (b->shape[d] != shape[d] || (shape[d] > 1 && b->strides[d] != strides[d])) return 0;
  return 1;
}
