/* artifact.c — the artifact file: the manifest, the kernel object (GPU: the device image,
 * CUDA's PTX in "kernels.ptx", OpenCL's device binary in "kernels.clbin") and the weights
 * section (the PARAMS region's initial contents from the graph's params, then the STATE region,
 * zeros, then the BUFFERS region from the buffers and constants), written through the runtime's container writer so both sides share one format. */
#include <string.h>
#include <sys/stat.h>

#include "driver_impl.h"

static pk_status weights_bytes(drv_state *S, void **out, size_t *len) {
  const pk_memplan *mp = S->mp;
  pk_graph *g = S->g;
  int64_t pb = mp->region_bytes[PK_REGION_PARAMS], sb = mp->region_bytes[PK_REGION_STATE];
  int64_t bb = mp->region_bytes[PK_REGION_BUFFERS];
  unsigned char *w = pk_alloc(S->ctx, (size_t)(pb + sb + bb) + 1); /* zero-filled */
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    bool buf = mp->region[i] == PK_REGION_BUFFERS;
    if (t->base >= 0 || (mp->region[i] != PK_REGION_PARAMS && !buf) || !t->init) continue;
    int64_t bytes = pk_gtensor_bytes(t), start = buf ? pb + sb : 0, end = buf ? bb : pb;
    if (mp->offset[i] < 0 || mp->offset[i] + bytes > end)
      return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: '%s' lies outside the %s region",
                         t->name, buf ? "buffers" : "params");
    memcpy(w + start + mp->offset[i], t->init, (size_t)bytes);
  }
  *out = w;
  *len = (size_t)(pb + sb + bb);
  return PK_OK;
}

pk_status drv_artifact(drv_state *S) {
  void *w = NULL;
  size_t wlen = 0;
  pk_status s = weights_bytes(S, &w, &wlen);
  if (s != PK_OK) return s;
  /* CUDA's PTX or OpenCL's device binary follows the weights: version 1's sections keep
   * their order */
  pkrt_section sec[4] = {{"manifest", S->manifest, strlen(S->manifest)},
                         {"kernels", S->so, S->so_len},
                         {"weights", w, wlen},
                         {"kernels.ptx", S->ptx, S->ptx_len}};
  if (S->clbin) sec[3] = (pkrt_section){"kernels.clbin", S->clbin, S->clbin_len};
  int nsec = S->ptx || S->clbin ? 4 : 3;
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pk_ctx_fail(S->ctx, PK_ERR_NOMEM, "compile: out of memory");
  if (pkrt_artifact_write(rt, S->o->out, sec, nsec) != PKRT_OK)
    s = pk_ctx_fail(S->ctx, PK_ERR_IO, "%s", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  struct stat st;
  if (s == PK_OK) S->artifact_bytes = stat(S->o->out, &st) == 0 ? (int64_t)st.st_size : 0;
  return s;
}
