/* build_scheduled.c — builds TE programs, each lowered with its own schedule, into one
 * loaded kernel module: what tests of schedules and the tuner's candidates go through. */
#include "pk_codegen.h"

pk_status pk_build_scheduled(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *const *progs,
                             pk_schedule *const *scheds, int n, pkrt_module **out) {
  pk_lfunc **funcs = pk_alloc(ctx, sizeof(pk_lfunc *) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    pk_status s = pk_sched_lower(ctx, progs[i], scheds ? scheds[i] : NULL, pk_sprintf(ctx, "k%d", i),
                                 &funcs[i]);
    if (s != PK_OK) return s;
  }
  char *source;
  pk_status s = pk_cgen_c(ctx, funcs, n, &source);
  if (s != PK_OK) return s;
  pk_cc_result built;
  s = pk_cc_build(cc, source, &built);
  if (s != PK_OK) return s;
  if (pkrt_module_load_file(rt, built.so_path, out) != PKRT_OK)
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "%s", pkrt_ctx_error(rt));
  return PK_OK;
}
