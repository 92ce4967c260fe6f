/* te_bench.c — `pock te run --bench`: GFLOP/s of the generated kernel and, for a
 * matmul-shaped program, of OpenBLAS sgemm on the same data through the runtime's libffi
 * extern path, measured in the same run (median of repeats totalling >= 50 ms). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pk_measure.h"

typedef struct kernel_run {
  const pkrt_kernel_desc *k;
  pk_host_buffers *hb;
  void *workspace;
  pkrt_exec_ctx *exec;
} kernel_run;

static int run_kernel(void *arg) {
  kernel_run *r = arg;
  return r->k->fn(r->hb->bufs, r->hb->n, NULL, 0, r->workspace, r->exec);
}

/* C[M,N] = sum_k A[.,.] * B[.,.] with bare-axis indices: the shape sgemm computes. */
typedef struct matmul_shape {
  int a, b, c;            /* tensor ids */
  bool trans_a, trans_b;
  int32_t m, n, k, lda, ldb;
} matmul_shape;

static bool is_axis(const pk_expr *e, const pk_te_axis *ax) {
  return e->kind == PK_EXPR_AXIS && e->axis == ax;
}

static bool match_matmul_compute(const pk_te_tensor *c, matmul_shape *mm) {
  if (c->kind != PK_TE_COMPUTE || c->ndim != 2 || c->dtype != PKRT_DTYPE_F32) return false;
  const pk_expr *r = c->body;
  if (r->kind != PK_EXPR_REDUCE || r->op != PK_EOP_SUM || r->naxes != 1) return false;
  const pk_expr *mul = r->args[0];
  if (mul->kind != PK_EXPR_BINARY || mul->op != PK_EOP_MUL) return false;
  const pk_expr *ra = mul->args[0], *rb = mul->args[1];
  if (ra->kind != PK_EXPR_READ || rb->kind != PK_EXPR_READ) return false;
  if (ra->tensor->kind != PK_TE_PLACEHOLDER || rb->tensor->kind != PK_TE_PLACEHOLDER ||
      ra->tensor == rb->tensor || ra->nargs != 2 || rb->nargs != 2)
    return false;
  const pk_te_axis *i = c->axes[0], *j = c->axes[1], *k = r->axes[0];
  if (k->lo != 0) return false;
  if (is_axis(ra->args[0], i) && is_axis(ra->args[1], k)) mm->trans_a = false;
  else if (is_axis(ra->args[0], k) && is_axis(ra->args[1], i)) mm->trans_a = true;
  else return false;
  if (is_axis(rb->args[0], k) && is_axis(rb->args[1], j)) mm->trans_b = false;
  else if (is_axis(rb->args[0], j) && is_axis(rb->args[1], k)) mm->trans_b = true;
  else return false;
  if (ra->tensor->shape[1] > INT32_MAX || rb->tensor->shape[1] > INT32_MAX ||
      c->shape[0] > INT32_MAX || c->shape[1] > INT32_MAX || k->hi > INT32_MAX)
    return false;
  /* The reduction must cover the whole contracted dimension for lda/ldb to describe it. */
  if (ra->tensor->shape[mm->trans_a ? 0 : 1] != k->hi || rb->tensor->shape[mm->trans_b ? 1 : 0] != k->hi)
    return false;
  mm->a = ra->tensor->id;
  mm->b = rb->tensor->id;
  mm->c = c->id;
  mm->m = (int32_t)c->shape[0];
  mm->n = (int32_t)c->shape[1];
  mm->k = (int32_t)k->hi;
  mm->lda = (int32_t)ra->tensor->shape[1];
  mm->ldb = (int32_t)rb->tensor->shape[1];
  return true;
}

/* The first compute of the program that sgemm can compute (others, such as a fused relu,
 * count in the kernel's time but have no OpenBLAS counterpart). */
static bool match_matmul(const pk_te_program *p, matmul_shape *mm) {
  for (int i = 0; i < p->ntensors; i++)
    if (match_matmul_compute(p->tensors[i], mm)) return true;
  return false;
}

typedef struct sgemm_run {
  const pkrt_extern *fn;
  const matmul_shape *mm;
  const float *a, *b;
  float *c;
} sgemm_run;

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

static int run_sgemm(void *arg) {
  sgemm_run *r = arg;
  int32_t order = CBLAS_ROW_MAJOR;
  int32_t ta = r->mm->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS;
  int32_t tb = r->mm->trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  int32_t m = r->mm->m, n = r->mm->n, k = r->mm->k, lda = r->mm->lda, ldb = r->mm->ldb, ldc = n;
  float alpha = 1.0f, beta = 0.0f;
  const void *a = r->a, *b = r->b;
  void *c = r->c;
  void *args[] = {&order, &ta, &tb, &m, &n, &k, &alpha, &a, &lda, &b, &ldb, &beta, &c, &ldc};
  pkrt_extern_call(r->fn, args, NULL);
  return 0;
}

#define SGEMM_SIGNATURE "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"

pk_status pk_cli_te_bench(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                          const pkrt_kernel_desc *k, uint64_t seed) {
  pk_host_buffers hb;
  pk_status s = pk_host_buffers_new(ctx, prog, &hb);
  if (s != PK_OK) return s;
  pk_te_ref *ref = pk_te_ref_new(ctx, prog);
  if (!ref) {
    pk_host_buffers_free(&hb);
    return pk_ctx_status(ctx);
  }
  pk_te_ref_fill_random(prog, ref, seed);
  for (int i = 0; i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_PLACEHOLDER)
      pk_te_ref_to_buffer(prog->tensors[i], &ref->tensors[i], hb.data[i]);

  double flops = pk_te_flops(prog);
  void *ws = k->workspace_bytes > 0 ? aligned_alloc(64, ((size_t)k->workspace_bytes + 63) / 64 * 64) : NULL;
  if (k->workspace_bytes > 0 && !ws) {
    pk_host_buffers_free(&hb);
    return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory for the kernel's workspace");
  }
  kernel_run kr = {k, &hb, ws, pkrt_ctx_exec(rt)};
  /* Pinning the caller would squeeze a thread pool onto one CPU: pin only when serial. */
  int cpu = pkrt_ctx_threads(rt) == 1 ? pk_measure_pin_thread() : -1;
  pk_timing kt;
  if (pk_measure(run_kernel, &kr, PK_MEASURE_MIN_NS, &kt) != 0) {
    free(ws);
    pk_host_buffers_free(&hb);
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "kernel %s failed while benchmarking", k->name);
  }
  double kns = kt.median_ns;
  printf("bench: %.0f FLOP per call, %d thread%s%s, median of %d repeats (>= 50 ms)\n", flops,
         pkrt_ctx_threads(rt), pkrt_ctx_threads(rt) == 1 ? "" : "s",
         cpu >= 0 && pkrt_ctx_threads(rt) == 1 ? " pinned" : "", kt.repeats);
  printf("  pock kernel                     %10.1f us  %8.2f GFLOP/s\n", kns * 1e-3, flops / kns);

  matmul_shape mm;
  if (match_matmul(prog, &mm)) {
    /* One thread for a fair comparison; OpenBLAS reads this when it is loaded. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    pkrt_extern *sgemm;
    if (pkrt_extern_open(rt, "libopenblas.so.0", "cblas_sgemm", SGEMM_SIGNATURE, &sgemm) != PKRT_OK) {
      printf("  openblas sgemm: unavailable (%s)\n", pkrt_ctx_error(rt));
    } else {
      float *c = aligned_alloc(64, ((size_t)mm.m * (size_t)mm.n * sizeof(float) + 63) / 64 * 64);
      sgemm_run sr = {sgemm, &mm, hb.data[mm.a], hb.data[mm.b], c};
      pk_timing bt;
      if (c && pk_measure(run_sgemm, &sr, PK_MEASURE_MIN_NS, &bt) == 0) {
        double bns = bt.median_ns;
        double gemm_flops = 2.0 * mm.m * mm.n * mm.k;
        printf("  openblas cblas_sgemm (%s%s)     %10.1f us  %8.2f GFLOP/s\n", mm.trans_a ? "T" : "N",
               mm.trans_b ? "T" : "N", bns * 1e-3, gemm_flops / bns);
        printf("  ratio pock / openblas: %.3f\n", bns / kns);
      }
      free(c);
      pkrt_extern_free(sgemm);
    }
  }
  free(ws);
  pk_host_buffers_free(&hb);
  return PK_OK;
}
