/* bench_matmul.c — GFLOP/s of generated matmul kernels (the plain loop nest, and the hand
 * schedule of bench/hand_schedules.c, which is the untuned preset step for step) beside
 * OpenBLAS cblas_sgemm, one pinned thread, in one run, each also as a fraction of the
 * core's measured fp32 FMA peak (bench/fma_peak.c); and conv2d 3x3 (hand vs loop nest). Every kernel is first checked against the
 * interpreter (outputs compared element by element), so a fast wrong kernel cannot pass.
 * Prints a markdown table. Never fails on a timing: exit 1 only on a wrong result.
 *
 * Usage: bench_matmul [--quick] [--target T]
 *   --quick: 10 ms repeats, for smoke runs in CI
 *   --target T: kernels and presets for target T (docs/targets.md), e.g. 'c -march=haswell'
 *     for 32-byte vectors on an AVX-512 core; set OPENBLAS_CORETYPE (Haswell, Nehalem) to
 *     give OpenBLAS the same ISA. The peak stays this core's widest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "fma_peak.h"
#include "hand_schedules.h"
#include "pk_measure.h"
#include "pk_ops.h"

typedef struct gemm_case {
  int64_t m, n, k;
  bool trans_a, trans_b;
} gemm_case;

static const gemm_case cases[] = {
    {1024, 1024, 1024, false, false},
    {128, 3072, 768, false, false},
    {32, 256, 784, false, true},  /* MLP forward: X · W^T */
    {256, 784, 32, true, false},  /* its weight gradient: dY^T · X */
    {3072, 768, 128, true, false},
};

static pk_te_program *matmul_program(pk_ctx *ctx, const gemm_case *c) {
  pk_op_params prm = {.ninputs = 2};
  prm.in[0] = (pk_op_input){2, {c->trans_a ? c->k : c->m, c->trans_a ? c->m : c->k}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){2, {c->trans_b ? c->n : c->k, c->trans_b ? c->k : c->n}, PKRT_DTYPE_F32};
  prm.attrs.trans_a = c->trans_a;
  prm.attrs.trans_b = c->trans_b;
  pk_te_program *p = NULL;
  if (pk_op_build(ctx, PK_OP_MATMUL, &prm, &p) != PK_OK) fprintf(stderr, "%s\n", pk_ctx_error(ctx));
  return p;
}

static int bench_gemm(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, const pkrt_extern *sgemm,
                      const gemm_case *c, int64_t min_ns, double peak) {
  const pk_target *t = pk_cc_target(cc);
  pk_te_program *p = matmul_program(ctx, c);
  if (!p) return 1;
  pk_host_buffers hb;
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  pk_te_ref_fill_random(p, ref, 3);
  if (pk_host_buffers_new(ctx, p, &hb) != PK_OK) return 1;
  for (int i = 0; i < 2; i++) pk_te_ref_to_buffer(p->tensors[i], &ref->tensors[i], hb.data[i]);

  double flops = 2.0 * (double)c->m * (double)c->n * (double)c->k;
  double naive_ns = 0, hand_ns = 0, blas_ns = 0;
  int bad = 0;
  /* The naive kernel takes seconds at 1024^3: time it with the minimum repeats only. */
  naive_ns = pk_bench_time_scheduled(ctx, cc, rt, p, pk_sched_new(ctx, p), min_ns / 10, &hb);
  bad |= naive_ns < 0;
  pk_schedule *hand = pk_sched_new(ctx, p);
  if (pk_hand_schedule_matmul(hand, t) != PK_OK) {
    fprintf(stderr, "hand schedule: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  hand_ns = pk_bench_time_scheduled(ctx, cc, rt, p, hand, min_ns, &hb);
  bad |= hand_ns < 0;
  if (sgemm) {
    pk_bench_sgemm_run sa = {sgemm, c->trans_a ? 112 : 111, c->trans_b ? 112 : 111, (int32_t)c->m,
                    (int32_t)c->n, (int32_t)c->k, (int32_t)p->tensors[0]->shape[1],
                    (int32_t)p->tensors[1]->shape[1], hb.data[0], hb.data[1], hb.data[2]};
    pk_timing t;
    pk_measure(pk_bench_run_sgemm, &sa, min_ns, &t);
    blas_ns = t.median_ns;
  }
  printf("| %lld×%lld×%lld %s%s | %.2f | %.1f | %.1f | %.0f%% | %.0f%% | %.0f%% |\n", (long long)c->m,
         (long long)c->n, (long long)c->k, c->trans_a ? "T" : "N", c->trans_b ? "T" : "N",
         flops / naive_ns, flops / hand_ns, blas_ns > 0 ? flops / blas_ns : 0.0,
         blas_ns > 0 ? 100.0 * blas_ns / hand_ns : 0.0, 100.0 * flops / hand_ns / peak,
         blas_ns > 0 ? 100.0 * flops / blas_ns / peak : 0.0);
  fflush(stdout);
  pk_host_buffers_free(&hb);
  return bad;
}

static int bench_conv(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, int64_t min_ns, double peak) {
  const pk_target *t = pk_cc_target(cc);
  pk_op_params prm = {.ninputs = 2};
  prm.in[0] = (pk_op_input){4, {8, 64, 32, 32}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){4, {64, 64, 3, 3}, PKRT_DTYPE_F32};
  prm.attrs.pad[0] = prm.attrs.pad[1] = prm.attrs.pad[2] = prm.attrs.pad[3] = 1;
  pk_te_program *p;
  if (pk_op_build(ctx, PK_OP_CONV2D, &prm, &p) != PK_OK) return 1;
  pk_host_buffers hb;
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  pk_te_ref_fill_random(p, ref, 3);
  if (pk_host_buffers_new(ctx, p, &hb) != PK_OK) return 1;
  for (int i = 0; i < 2; i++) pk_te_ref_to_buffer(p->tensors[i], &ref->tensors[i], hb.data[i]);
  double flops = 2.0 * 8 * 64 * 32 * 32 * 64 * 9;
  double naive_ns = 0, hand_ns = 0;
  naive_ns = pk_bench_time_scheduled(ctx, cc, rt, p, pk_sched_new(ctx, p), min_ns / 10, &hb);
  int bad = naive_ns < 0;
  pk_schedule *hand = pk_sched_new(ctx, p);
  if (pk_hand_schedule_conv2d(hand, t) != PK_OK) {
    fprintf(stderr, "hand schedule: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  hand_ns = pk_bench_time_scheduled(ctx, cc, rt, p, hand, min_ns, &hb);
  bad |= hand_ns < 0;
  printf("\n| conv2d 3×3, N=8, C=O=64, 32×32, pad 1 | loop nest GFLOP/s | hand GFLOP/s | hand / loop nest | hand / peak |\n"
         "|---|---|---|---|---|\n| | %.2f | %.1f | %.1f× | %.0f%% |\n",
         flops / naive_ns, flops / hand_ns, naive_ns / hand_ns, 100.0 * flops / hand_ns / peak);
  pk_host_buffers_free(&hb);
  return bad;
}

int main(int argc, char **argv) {
  int64_t min_ns = PK_MEASURE_MIN_NS;
  const char *target = "c";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) min_ns = PK_MEASURE_MIN_NS / 5;
    else if (!strcmp(argv[i], "--target") && i + 1 < argc) target = argv[++i];
    else {
      fprintf(stderr, "usage: bench_matmul [--quick] [--target T]\n");
      return 2;
    }
  }
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  int cpu = pk_measure_pin_thread();
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_cc *cc;
  pk_target *t;
  if (pk_target_parse(ctx, target, NULL, &t) != PK_OK || pk_cc_new_target(ctx, NULL, t, 600, &cc) != PK_OK) {
    fprintf(stderr, "%s\n", pk_ctx_error(ctx));
    return 1;
  }
  pkrt_extern *sgemm = NULL;
  if (pkrt_extern_open(rt, "libopenblas.so.0", "cblas_sgemm", PK_BENCH_SGEMM_SIGNATURE, &sgemm) != PKRT_OK)
    printf("OpenBLAS unavailable: %s\n", pkrt_ctx_error(rt));
  printf("pock bench_matmul: 1 thread pinned to CPU %d, fp32, median of repeats >= %lld ms, %s; "
         "target '%s' (%d-byte vectors, %d registers)%s%s\n\n",
         cpu, (long long)(min_ns / 1000000), pk_cc_version(cc), target, t->vector_bytes,
         t->vector_regs, getenv("OPENBLAS_CORETYPE") ? ", OPENBLAS_CORETYPE=" : "",
         getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
  int lanes;
  double peak = pk_bench_fma_peak(&lanes);
  printf("measured fp32 FMA peak of this core: %.1f GFLOP/s (%d-lane vectors, bench/fma_peak.c)\n\n",
         peak, lanes);
  printf("| M×N×K layout | loop nest GFLOP/s | preset (hand) GFLOP/s | OpenBLAS GFLOP/s | "
         "preset / OpenBLAS | preset / peak | OpenBLAS / peak |\n"
         "|---|---|---|---|---|---|---|\n");
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    bad |= bench_gemm(ctx, cc, rt, sgemm, &cases[i], min_ns, peak);
  bad |= bench_conv(ctx, cc, rt, min_ns, peak);
  if (sgemm) pkrt_extern_free(sgemm);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return bad;
}
