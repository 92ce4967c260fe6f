/* test_ops_codegen.c — every operator instance of te/ops compiled to C (one source for all)
 * equals the interpreter on random inputs with fixed seeds; f32 matmuls also equal OpenBLAS
 * cblas_sgemm called through the runtime's libffi extern path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"
#include "pk_ops.h"

#define SGEMM_SIGNATURE "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"

static int failures;

static void check(bool ok, const char *label, const char *why) {
  if (ok) printf("PASS %s\n", label);
  else printf("FAIL %s: %s\n", label, why);
  failures += !ok;
}

/* cblas_sgemm on the example's inputs; the result must meet the same bound against the
 * interpreter as a generated kernel, and the kernel's result must too. */
static void check_against_sgemm(pk_ctx *ctx, pkrt_ctx *rt, const pkrt_extern *sgemm,
                                const pk_op_example *ex, const pk_te_program *p,
                                const pkrt_kernel_desc *k) {
  const pk_te_tensor *a = p->tensors[0], *b = p->tensors[1], *c = p->tensors[2];
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  pk_te_ref_fill_random(p, ref, 99);
  pk_host_buffers hb;
  if (pk_host_buffers_new(ctx, p, &hb) != PK_OK) { check(false, ex->label, "alloc"); return; }
  pk_te_ref_to_buffer(a, &ref->tensors[0], hb.data[0]);
  pk_te_ref_to_buffer(b, &ref->tensors[1], hb.data[1]);
  int rc = k->fn(hb.bufs, hb.n, NULL, 0, NULL, pkrt_ctx_exec(rt));
  pk_status s = pk_te_interp_run(ctx, p, ref);
  float *out = calloc((size_t)pk_te_tensor_numel(c), sizeof(float));
  int32_t order = 101, ta = ex->prm.attrs.trans_a ? 112 : 111, tb = ex->prm.attrs.trans_b ? 112 : 111;
  int32_t m = (int32_t)c->shape[0], n = (int32_t)c->shape[1];
  int32_t kk = (int32_t)(ex->prm.attrs.trans_a ? a->shape[0] : a->shape[1]);
  int32_t lda = (int32_t)a->shape[1], ldb = (int32_t)b->shape[1], ldc = n;
  float alpha = 1, beta = 0;
  void *pa = hb.data[0], *pb = hb.data[1], *pc = out;
  void *args[] = {&order, &ta, &tb, &m, &n, &kk, &alpha, &pa, &lda, &pb, &ldb, &beta, &pc, &ldc};
  pkrt_extern_call(sgemm, args, NULL);
  char label[128];
  snprintf(label, sizeof label, "%s_vs_cblas_sgemm", ex->label);
  pk_verify_result vk, vs;
  bool ok = rc == 0 && s == PK_OK &&
            pk_te_verify_output(ctx, c, &ref->tensors[2], out, &vs) == PK_OK &&
            pk_te_verify_output(ctx, c, &ref->tensors[2], hb.data[2], &vk) == PK_OK;
  double maxdiff = 0;
  for (int64_t i = 0; i < pk_te_tensor_numel(c); i++) {
    double d = (double)out[i] - (double)((float *)hb.data[2])[i];
    if (d < 0) d = -d;
    if (d > maxdiff) maxdiff = d;
  }
  if (ok) printf("     %s: max |kernel - sgemm| = %.3g\n", ex->label, maxdiff);
  check(ok, label, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  free(out);
  pk_host_buffers_free(&hb);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_cc_options opts = {NULL, NULL, PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  int count;
  const pk_op_example *ex = pk_op_examples(&count);
  pk_te_program **progs = calloc((size_t)count, sizeof *progs);
  bool covered[PK_OP_COUNT_] = {false};
  for (int i = 0; i < count; i++) {
    if (pk_op_build(ctx, ex[i].op, &ex[i].prm, &progs[i]) != PK_OK) {
      printf("FAIL build %s: %s\n", ex[i].label, pk_ctx_error(ctx));
      return 1;
    }
    covered[ex[i].op] = true;
  }
  for (int op = 0; op < PK_OP_COUNT_; op++)
    check(covered[op], pk_op_name((pk_op_kind)op), "no example instance of this op");

  pkrt_module *m;
  if (pk_build_programs(ctx, cc, rt, progs, count, &m) != PK_OK) {
    printf("FAIL codegen: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  pkrt_extern *sgemm = NULL;
  if (pkrt_extern_open(rt, "libopenblas.so.0", "cblas_sgemm", SGEMM_SIGNATURE, &sgemm) != PKRT_OK)
    printf("SKIP cblas_sgemm comparisons: %s\n", pkrt_ctx_error(rt));

  for (int i = 0; i < count; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    const pkrt_kernel_desc *k = pkrt_module_find(m, name);
    for (uint64_t seed = 1; seed <= 2; seed++) {
      pk_kernel_check_result res;
      pk_status s = pk_kernel_check(ctx, rt, progs[i], k, seed, &res);
      char label[128];
      snprintf(label, sizeof label, "%s_seed%llu", ex[i].label, (unsigned long long)seed);
      check(s == PK_OK, label, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
    }
    const pk_te_program *p = progs[i];
    if (sgemm && ex[i].op == PK_OP_MATMUL && p->tensors[2]->dtype == PKRT_DTYPE_F32)
      check_against_sgemm(ctx, rt, sgemm, &ex[i], p, k);
  }
  if (sgemm) pkrt_extern_free(sgemm);
  pkrt_module_free(m);
  pkrt_ctx_free(rt);
  free(progs);
  pk_ctx_free(ctx);
  printf("%s ops_codegen: %d op instances\n", failures ? "FAIL" : "PASS", count);
  return failures ? 1 : 0;
}
