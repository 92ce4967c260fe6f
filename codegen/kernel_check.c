/* kernel_check.c — builds TE programs into one loaded kernel module, and checks a kernel
 * against the reference interpreter on seeded random inputs. Tests, `pock te run` and (later)
 * the tuner's measurer all go through here, and through the runtime's one loader. */
#include "pk_codegen.h"
#include "pk_schedule.h"

#include <stdlib.h>
#include <string.h>

pk_status pk_build_programs(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *const *progs,
                            int n, pkrt_module **out) {
  return pk_build_scheduled(ctx, cc, rt, progs, NULL, n, out);
}

pk_status pk_host_buffers_new(pk_ctx *ctx, const pk_te_program *prog, pk_host_buffers *out) {
  memset(out, 0, sizeof *out);
  out->n = prog->ntensors;
  out->bufs = calloc((size_t)prog->ntensors + 1, sizeof *out->bufs);
  out->data = calloc((size_t)prog->ntensors + 1, sizeof *out->data);
  if (!out->bufs || !out->data) goto oom;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    int64_t *strides = pk_alloc(ctx, sizeof(int64_t) * PK_TE_MAX_DIMS);
    int64_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
      strides[d] = stride;
      stride *= t->shape[d];
    }
    size_t bytes = (size_t)stride * pkrt_dtype_size(t->dtype);
    out->data[i] = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!out->data[i]) goto oom;
    memset(out->data[i], 0, bytes);
    out->bufs[i] = (pkrt_buffer){out->data[i], 0, t->shape, strides, t->ndim, (int32_t)t->dtype};
  }
  return PK_OK;
oom:
  pk_host_buffers_free(out);
  return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory for kernel buffers");
}

void pk_host_buffers_free(pk_host_buffers *hb) {
  if (hb->data)
    for (int i = 0; i < hb->n; i++) free(hb->data[i]);
  free(hb->data);
  free(hb->bufs);
  memset(hb, 0, sizeof *hb);
}

pk_status pk_kernel_check(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                          const pkrt_kernel_desc *k, uint64_t seed, pk_kernel_check_result *res) {
  return pk_kernel_check_scheduled(ctx, rt, prog, NULL, k, seed, res);
}

/* A kernel descriptor the checks can run: refused before any (slow) interpreter run. */
static pk_status kernel_desc_ok(pk_ctx *ctx, const pkrt_kernel_desc *k) {
  if (!k) return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "kernel not found in the module");
  if (k->workspace_bytes < 0 || k->workspace_bytes % 64)
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "kernel %s asks for a workspace of %lld bytes", k->name,
                       (long long)k->workspace_bytes);
  return PK_OK;
}

pk_status pk_check_outputs(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                           const pk_te_ref *ref, const pk_host_buffers *hb,
                           pk_kernel_check_result *res) {
  pk_status s = PK_OK;
  for (int i = 0; i < prog->ntensors && s == PK_OK; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    /* an inlined compute's parameter is left unwritten */
    if (t->kind != PK_TE_COMPUTE || (sched && !pk_sched_is_materialized(sched, i))) continue;
    pk_verify_result vr;
    s = pk_te_verify_output(ctx, t, &ref->tensors[i], hb->data[i], &vr);
    res->noutputs++;
    if (vr.worst_ratio >= res->worst_ratio) {
      res->worst_ratio = vr.worst_ratio;
      res->worst_err = vr.worst_err;
      res->worst_tensor = t->name;
    }
  }
  return s;
}

pk_status pk_kernel_check_scheduled(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                                    const pk_schedule *sched, const pkrt_kernel_desc *k,
                                    uint64_t seed, pk_kernel_check_result *res) {
  memset(res, 0, sizeof *res);
  pk_status s = kernel_desc_ok(ctx, k);
  if (s != PK_OK) return s;
  pk_te_ref *ref = pk_te_ref_new(ctx, prog);
  pk_te_ref_fill_random(prog, ref, seed);
  s = pk_te_interp_run(ctx, prog, ref);
  return s == PK_OK ? pk_kernel_check_ref(ctx, rt, prog, sched, k, ref, res) : s;
}

pk_status pk_kernel_check_ref(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                              const pk_schedule *sched, const pkrt_kernel_desc *k,
                              const pk_te_ref *ref, pk_kernel_check_result *res) {
  memset(res, 0, sizeof *res);
  pk_status s = kernel_desc_ok(ctx, k);
  if (s != PK_OK) return s;
  pk_host_buffers hb;
  s = pk_host_buffers_new(ctx, prog, &hb);
  if (s != PK_OK) return s;
  for (int i = 0; i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_PLACEHOLDER)
      pk_te_ref_to_buffer(prog->tensors[i], &ref->tensors[i], hb.data[i]);

  void *workspace = k->workspace_bytes ? aligned_alloc(64, (size_t)k->workspace_bytes) : NULL;
  if (k->workspace_bytes && !workspace) {
    pk_host_buffers_free(&hb);
    return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory for a %lld-byte workspace",
                       (long long)k->workspace_bytes);
  }
  if (workspace) memset(workspace, 0xff, (size_t)k->workspace_bytes); /* NaNs: no reliance on zeros */
  int rc = k->fn(hb.bufs, hb.n, NULL, 0, workspace, pkrt_ctx_exec(rt));
  free(workspace);
  if (rc != PKRT_KERNEL_OK) {
    pk_host_buffers_free(&hb);
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "kernel %s returned status %d", k->name, rc);
  }
  s = pk_check_outputs(ctx, prog, sched, ref, &hb, res);
  pk_host_buffers_free(&hb);
  return s;
}
