/* no_read.c — linked into the graph target with -Wl,--wrap: a fuzzed model's weights_file
 * is refused instead of read, so an input never opens a path of the fuzzing machine. */
#include "pkrt.h"

pkrt_status __wrap_pkrt_weights_read(pkrt_ctx *rt, pkrt_arena *a, const char *path,
                                     pkrt_wtensor **out, int *count);

pkrt_status __wrap_pkrt_weights_read(pkrt_ctx *rt, pkrt_arena *a, const char *path,
                                     pkrt_wtensor **out, int *count) {
  (void)a;
  *out = NULL;
  *count = 0;
  return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: not read by the fuzz target", path);
}
