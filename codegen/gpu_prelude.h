/* gpu_prelude.h — helpers every generated GPU source carries, in the subset CUDA C and
 * OpenCL C share: integer arithmetic with defined wrap-around, floor division, saturating
 * casts, NaN-propagating min/max and the hash of docs/te.md, so that GPU kernels match the
 * reference interpreter bit for bit on integers, like the C prelude (c_prelude.h) does.
 * The dialect's header (emit_gpu.c) defines before it: pk_i64, pk_u64, pk_u32, PK_FN,
 * PK_I64_MIN/MAX, PK_U64C, PK_FLOORF/PK_FLOOR, PK_EXPF/PK_EXP, and PK_HAS_F64 when doubles exist. */
#define PK_I32_MIN (-2147483647 - 1)
#define PK_I32_MAX 2147483647

#define PK_INT_OPS(T, U, S, TMIN, TMAX)                                                    \
  PK_FN T pk_add_##S(T a, T b) { return (T)((U)a + (U)b); }                                \
  PK_FN T pk_sub_##S(T a, T b) { return (T)((U)a - (U)b); }                                \
  PK_FN T pk_mul_##S(T a, T b) { return (T)((U)a * (U)b); }                                \
  PK_FN T pk_neg_##S(T a) { return (T)((U)0 - (U)a); }                                     \
  PK_FN T pk_abs_##S(T a) { return a < 0 ? pk_neg_##S(a) : a; }                            \
  PK_FN T pk_min_##S(T a, T b) { return a < b ? a : b; }                                   \
  PK_FN T pk_max_##S(T a, T b) { return a > b ? a : b; }                                   \
  PK_FN T pk_div_##S(T a, T b) {                                                           \
    if (b == 0) return 0;                                                                  \
    if (b == -1) return pk_neg_##S(a);                                                     \
    T q = a / b;                                                                           \
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;                               \
  }                                                                                        \
  PK_FN T pk_mod_##S(T a, T b) {                                                           \
    if (b == 0) return a;                                                                  \
    if (b == -1) return 0;                                                                 \
    T r = a % b;                                                                           \
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;                                   \
  }                                                                                        \
  PK_FN T pk_from_f32_##S(float x) {                                                       \
    if (x != x) return 0;                                                                  \
    if (x <= (float)TMIN) return TMIN;                                                     \
    if (x >= (float)TMAX) return TMAX;                                                     \
    return (T)x;                                                                           \
  }

PK_INT_OPS(int, pk_u32, i32, PK_I32_MIN, PK_I32_MAX)
PK_INT_OPS(pk_i64, pk_u64, i64, PK_I64_MIN, PK_I64_MAX)

PK_FN float pk_min_f32(float a, float b) { return a != a ? a : b != b ? b : a < b ? a : b; }
PK_FN float pk_max_f32(float a, float b) { return a != a ? a : b != b ? b : a > b ? a : b; }
PK_FN float pk_mod_f32(float a, float b) { return a - PK_FLOORF(a / b) * b; }
PK_FN float pk_sigmoid_f32(float x) { return 1.0f / (1.0f + PK_EXPF(-x)); }

#ifdef PK_HAS_F64
PK_FN double pk_min_f64(double a, double b) { return a != a ? a : b != b ? b : a < b ? a : b; }
PK_FN double pk_max_f64(double a, double b) { return a != a ? a : b != b ? b : a > b ? a : b; }
PK_FN double pk_mod_f64(double a, double b) { return a - PK_FLOOR(a / b) * b; }
PK_FN double pk_sigmoid_f64(double x) { return 1.0 / (1.0 + PK_EXP(-x)); }
PK_FN int pk_from_f64_i32(double x) {
  if (x != x) return 0;
  if (x <= (double)PK_I32_MIN) return PK_I32_MIN;
  if (x >= (double)PK_I32_MAX) return PK_I32_MAX;
  return (int)x;
}
PK_FN pk_i64 pk_from_f64_i64(double x) {
  if (x != x) return 0;
  if (x <= (double)PK_I64_MIN) return PK_I64_MIN;
  if (x >= (double)PK_I64_MAX) return PK_I64_MAX;
  return (pk_i64)x;
}
#endif

/* hash(a, b, c): splitmix64's finaliser chained over the operands, the top 53 bits kept */
PK_FN pk_u64 pk_mix64(pk_u64 z) {
  z += PK_U64C(0x9E3779B97F4A7C15);
  z = (z ^ (z >> 30)) * PK_U64C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * PK_U64C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}
PK_FN pk_i64 pk_hash3(pk_i64 a, pk_i64 b, pk_i64 c) {
  return (pk_i64)(pk_mix64(pk_mix64(pk_mix64((pk_u64)a) ^ (pk_u64)b) ^ (pk_u64)c) >> 11);
}
