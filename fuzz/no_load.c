/* no_load.c — linked into the fuzz target with -Wl,--wrap: any path from the checks to
 * code loading traps at once, so a fuzzed artifact can never run its kernel object. */
#include <stddef.h>

#include "pkrt.h"

void *__wrap_dlopen(const char *file, int flags);
pkrt_status __wrap_pkrt_module_load_memory(pkrt_ctx *rt, const void *bytes, size_t len,
                                           pkrt_module **out);

void *__wrap_dlopen(const char *file, int flags) {
  (void)file;
  (void)flags;
  __builtin_trap();
}

pkrt_status __wrap_pkrt_module_load_memory(pkrt_ctx *rt, const void *bytes, size_t len,
                                           pkrt_module **out) {
  (void)rt;
  (void)bytes;
  (void)len;
  (void)out;
  __builtin_trap();
}
