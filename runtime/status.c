/* status.c — names for status codes and element types. Names are stable: they appear in
 * artifacts, tuning records and error messages. */
#include <string.h>

#include "pkrt.h"

const char *pkrt_status_name(pkrt_status s) {
  switch (s) {
  case PKRT_OK: return "ok";
  case PKRT_ERR_INPUT: return "input";
  case PKRT_ERR_IO: return "io";
  case PKRT_ERR_NOMEM: return "nomem";
  case PKRT_ERR_LOAD: return "load";
  case PKRT_ERR_KERNEL: return "kernel";
  case PKRT_ERR_EXTERN: return "extern";
  case PKRT_ERR_GPU: return "gpu";
  }
  return "unknown"; /* a value cast from an integer read off disk */
}

/* One table for both directions, indexed by the stored enum value. */
static const struct {
  const char *name;
  size_t size;
} dtype_info[] = {
    [PKRT_DTYPE_INVALID] = {"invalid", 0}, [PKRT_DTYPE_F32] = {"f32", 4},
    [PKRT_DTYPE_F64] = {"f64", 8},         [PKRT_DTYPE_I32] = {"i32", 4},
    [PKRT_DTYPE_I64] = {"i64", 8},         [PKRT_DTYPE_F16] = {"f16", 2},
    [PKRT_DTYPE_BF16] = {"bf16", 2},       [PKRT_DTYPE_BOOL] = {"bool", 0},
};
#define NDTYPES (sizeof dtype_info / sizeof dtype_info[0])
_Static_assert(NDTYPES == PKRT_DTYPE_BOOL + 1, "dtype table out of step with pkrt_dtype");

const char *pkrt_dtype_name(pkrt_dtype t) {
  return (unsigned)t < NDTYPES ? dtype_info[t].name : "invalid";
}

pkrt_dtype pkrt_dtype_from_name(const char *name) {
  if (!name) return PKRT_DTYPE_INVALID;
  for (unsigned i = 1; i < NDTYPES; i++)
    if (strcmp(name, dtype_info[i].name) == 0) return (pkrt_dtype)i;
  return PKRT_DTYPE_INVALID;
}

/* BOOL has no storage size: comparisons produce it, buffers never hold it. */
size_t pkrt_dtype_size(pkrt_dtype t) {
  return (unsigned)t < NDTYPES ? dtype_info[t].size : 0;
}
