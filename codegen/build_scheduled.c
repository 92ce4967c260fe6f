/* build_scheduled.c — builds TE programs, each lowered with its own schedule, into one
 * loaded kernel module through the backend of the compiler's target: what tests of
 * schedules and `pock te run` go through. */
#include "pk_backend.h"

pk_status pk_build_scheduled(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *const *progs,
                             pk_schedule *const *scheds, int n, pkrt_module **out) {
  pk_lfunc **funcs = pk_alloc(ctx, sizeof(pk_lfunc *) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    pk_status s = pk_sched_lower(ctx, progs[i], scheds ? scheds[i] : NULL, pk_sprintf(ctx, "k%d", i),
                                 &funcs[i]);
    if (s != PK_OK) return s;
  }
  pk_backend *be;
  pk_build_result built;
  pk_status s = pk_backend_of_cc(cc, &be);
  if (s == PK_OK) s = pk_backend_build_funcs(be, funcs, n, &built);
  if (s == PK_OK) s = pk_backend_load(be, rt, &built, out);
  /* the backend reports where the compiler does; callers read ctx */
  if (s != PK_OK && pk_cc_ctx(cc) != ctx) return pk_ctx_fail(ctx, s, "%s", pk_ctx_error(pk_cc_ctx(cc)));
  return s;
}
