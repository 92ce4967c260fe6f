/* stage_codegen.c — every kernel's loop IR into ONE C source (compiling one file is much
 * cheaper than many), built once by the host compiler; the kernel object's bytes go into
 * the artifact. If the chosen schedules do not build, the default ones are tried once. */
#include <string.h>

#include "driver_impl.h"

static pk_status build(drv_state *S, pk_cc *cc) {
  pk_lfunc **funcs = pk_alloc(S->ctx, sizeof(pk_lfunc *) * (size_t)(S->nkernels + 1));
  for (int i = 0; i < S->nkernels; i++) funcs[i] = S->kernels[i].func;
  pk_status s = pk_cgen_c(S->ctx, funcs, S->nkernels, &S->source);
  pk_cc_result r;
  if (s == PK_OK) s = pk_cc_build(cc, S->source, &r);
  if (s != PK_OK) return s;
  S->so_path = r.so_path;
  char *bytes;
  size_t len;
  if ((s = pk_read_file(S->ctx, r.so_path, &bytes, &len)) != PK_OK) return s;
  S->so = bytes;
  S->so_len = len;
  return PK_OK;
}

pk_status drv_codegen(drv_state *S) {
  pk_cc *cc;
  /* The default flags: the same the tuner measured with (and the GCC 12 workaround). */
  pk_status s = pk_cc_new(S->ctx, NULL, &cc);
  if (s != PK_OK) return s;
  if ((s = build(S, cc)) != PK_OK && s == PK_ERR_BUILD) {
    bool any = false;
    for (int i = 0; i < S->nkernels; i++) any = any || S->kernels[i].sched;
    if (!any) return s;
    fprintf(S->log, "pock: warning: the chosen schedules do not build (%s); using default schedules\n",
            pk_ctx_error(S->ctx));
    pk_ctx_clear_error(S->ctx);
    for (int i = 0; i < S->nkernels; i++) {
      drv_kernel *K = &S->kernels[i];
      K->sched = NULL;
      K->source = DRV_SCHED_DEFAULT;
      K->record_id = NULL;
    }
    S->workspace_bytes = 0;
    for (int i = 0; i < S->nkernels; i++) {
      drv_kernel *K = &S->kernels[i];
      if ((s = drv_lower(S, i, NULL, &K->func)) != PK_OK) return s;
      if (K->func->workspace_bytes > S->workspace_bytes) S->workspace_bytes = K->func->workspace_bytes;
    }
    s = build(S, cc);
  }
  return s;
}
