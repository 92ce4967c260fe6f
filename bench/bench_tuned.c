/* bench_tuned.c — the autotuner's acceptance bench: the best TUNED generated kernel of each
 * acceptance shape (from a tuning database) beside OpenBLAS sgemm and the hand schedule,
 * one pinned thread, fp32, timed side by side in interleaved rounds (medians). Every kernel
 * is checked against the interpreter first. Never fails on a timing.
 *
 * Usage: bench_tuned --emit-te DIR        write each case's TE file (for `pock tune`)
 *        bench_tuned --db DB [--quick]    time the best generated record of each case */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "fma_peak.h"
#include "hand_schedules.h"
#include "pk_measure.h"
#include "pk_ops.h"
#include "pk_tunedb.h"

typedef struct bench_case {
  const char *file;  /* TE file name for --emit-te */
  pk_op_kind op;
  int64_t m, n, k;   /* matmul */
  bool trans_a, trans_b;
  double goal;       /* matmul: tuned / OpenBLAS; conv: tuned / hand */
} bench_case;

static const bench_case cases[] = {
    {"mm_1024_1024_1024_nn.te", PK_OP_MATMUL, 1024, 1024, 1024, false, false, 0.90},
    {"mm_32_256_784_nt.te", PK_OP_MATMUL, 32, 256, 784, false, true, 1.00},
    {"mm_256_784_32_tn.te", PK_OP_MATMUL, 256, 784, 32, true, false, 1.00},
    {"mm_32_10_256_nt.te", PK_OP_MATMUL, 32, 10, 256, false, true, 1.00},
    {"mm_8_64_64_nn.te", PK_OP_MATMUL, 8, 64, 64, false, false, 1.00},
    {"conv2d_8x64x32x32_3x3_pad1.te", PK_OP_CONV2D, 0, 0, 0, false, false, 1.10},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

enum { ROUNDS = 7 }; /* interleaved timing rounds per kernel (pk_measure_rounds) */

static pk_status case_params(const bench_case *c, pk_op_params *prm) {
  *prm = (pk_op_params){.ninputs = 2};
  if (c->op == PK_OP_CONV2D) {
    prm->in[0] = (pk_op_input){4, {8, 64, 32, 32}, PKRT_DTYPE_F32};
    prm->in[1] = (pk_op_input){4, {64, 64, 3, 3}, PKRT_DTYPE_F32};
    for (int i = 0; i < 4; i++) prm->attrs.pad[i] = 1;
    return PK_OK;
  }
  prm->in[0] = (pk_op_input){2, {c->trans_a ? c->k : c->m, c->trans_a ? c->m : c->k}, PKRT_DTYPE_F32};
  prm->in[1] = (pk_op_input){2, {c->trans_b ? c->n : c->k, c->trans_b ? c->k : c->n}, PKRT_DTYPE_F32};
  prm->attrs.trans_a = c->trans_a;
  prm->attrs.trans_b = c->trans_b;
  return PK_OK;
}

/* The fastest OK schedule record (not an extern) of the task on this device's target,
 * among those measured with this build's compiler, flags and code generator when there are
 * any (a record timed under another build says less about its code now; pk_db_prefer_build). */
static const pk_record *best_generated(pk_tunedb *db, const pk_task *task, const pk_target_fp *fp) {
  pk_record *recs;
  int64_t n;
  if (pk_db_history(db, task->workload, fp->key, &recs, &n) != PK_OK) return NULL;
  const pk_record *best = NULL;
  for (int pass = 0; pass < 2 && !best; pass++)
    for (int64_t i = 0; i < n; i++)
      if (recs[i].meas.status == PK_MEAS_OK && recs[i].cand.kind == PK_CAND_SCHEDULE &&
          (pass == 1 || pk_db_record_is_preferred(db, &recs[i])) &&
          (!best || recs[i].meas.timing.median_ns < best->meas.timing.median_ns))
        best = &recs[i];
  if (best && !pk_db_record_is_preferred(db, best))
    printf("note: %s: no record measured with this build (compiler, flags, codegen v%d); using one "
           "measured with '%s', codegen v%d (its trace is rebuilt and re-timed here)\n",
           task->name, PK_CGEN_C_VERSION, best->flags ? best->flags : "?", best->codegen_version);
  return best;
}

static int bench_case_run(double peak, pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_tunedb *db,
                          const pk_target_fp *fp, const pkrt_extern *sgemm, const bench_case *c,
                          int64_t min_ns) {
  pk_op_params prm;
  case_params(c, &prm);
  pk_te_program *p;
  pk_task task;
  if (pk_op_build(ctx, c->op, &prm, &p) != PK_OK || pk_task_from_program(ctx, p, "c", &task) != PK_OK) {
    fprintf(stderr, "%s\n", pk_ctx_error(ctx));
    return 1;
  }
  const pk_record *best = best_generated(db, &task, fp);
  if (!best) {
    printf("| %s | (no tuned record in the database) | | | | | |\n", task.name);
    return 0;
  }
  pk_schedule *tuned;
  if (pk_sched_from_json(ctx, p, best->cand.trace, &tuned) != PK_OK) {
    fprintf(stderr, "%s: %s\n", task.name, pk_ctx_error(ctx));
    return 1;
  }
  /* The hand schedules need room for their register tiles; where they do not fit (N = 10)
   * the column says so instead. */
  pk_schedule *hand = pk_sched_new(ctx, p);
  pk_status hs = c->op == PK_OP_CONV2D ? pk_hand_schedule_conv2d(hand, NULL) : pk_hand_schedule_matmul(hand, NULL);
  if (hs != PK_OK) {
    pk_ctx_clear_error(ctx);
    hand = NULL;
  }

  pk_host_buffers hb;
  pk_te_ref *ref;
  /* one interpreter run checks both kernels (a conv's takes minutes) */
  if (pk_bench_inputs(ctx, p, 3, &ref, &hb) != PK_OK) {
    fprintf(stderr, "%s: %s\n", task.name, pk_ctx_error(ctx));
    return 1;
  }

  /* Tuned, hand and OpenBLAS are timed round-robin (pk_measure_rounds), so that a ratio
   * compares timings taken moments apart, not minutes apart on a noisy machine. */
  pk_bench_built tb, hbuilt = {0};
  if (pk_bench_build_checked(ctx, cc, rt, p, tuned, ref, &hb, &tb) != PK_OK ||
      (hand && pk_bench_build_checked(ctx, cc, rt, p, hand, ref, &hb, &hbuilt) != PK_OK)) {
    fprintf(stderr, "%s: build or check failed: %s\n", task.name, pk_ctx_error(ctx));
    pk_bench_built_free(&tb);
    pk_host_buffers_free(&hb);
    return 1;
  }
  pk_bench_sgemm_run sa = {sgemm, c->trans_a ? 112 : 111, c->trans_b ? 112 : 111, (int32_t)c->m,
                           (int32_t)c->n, (int32_t)c->k, (int32_t)p->tensors[0]->shape[1],
                           (int32_t)p->tensors[1]->shape[1], hb.data[0], hb.data[1], hb.data[2]};
  double round_ns[3][ROUNDS];
  pk_measure_contestant con[3];
  int ncon = 0, hand_i = -1, blas_i = -1;
  con[ncon++] = (pk_measure_contestant){pk_bench_run_kernel, &tb.run, .round_ns = round_ns[0]};
  if (hand) {
    hand_i = ncon;
    con[ncon++] = (pk_measure_contestant){pk_bench_run_kernel, &hbuilt.run, .round_ns = round_ns[hand_i]};
  }
  if (sgemm && c->op == PK_OP_MATMUL) {
    blas_i = ncon;
    con[ncon++] = (pk_measure_contestant){pk_bench_run_sgemm, &sa, .round_ns = round_ns[blas_i]};
  }
  pk_measure_rounds(con, ncon, ROUNDS, min_ns);
  double tuned_ns = con[0].median_ns;
  double hand_ns = hand_i >= 0 ? con[hand_i].median_ns : 0;
  double blas_ns = blas_i >= 0 ? con[blas_i].median_ns : 0;
  /* The spread of the same-round ratios says how far the noise moves the verdict. */
  int ref_i = c->op == PK_OP_CONV2D ? hand_i : blas_i;
  double rlo = 0, rhi = 0;
  for (int r = 0; ref_i >= 0 && r < ROUNDS; r++) {
    double q = round_ns[0][r] > 0 ? round_ns[ref_i][r] / round_ns[0][r] : 0;
    if (r == 0 || q < rlo) rlo = q;
    if (r == 0 || q > rhi) rhi = q;
  }
  pk_bench_built_free(&tb);
  pk_bench_built_free(&hbuilt);
  pk_host_buffers_free(&hb);
  if (tuned_ns <= 0 || (c->op == PK_OP_CONV2D && hand_ns <= 0)) return 1;
  double f = task.flops;
  double ratio = c->op == PK_OP_CONV2D ? hand_ns / tuned_ns : (blas_ns > 0 ? blas_ns / tuned_ns : 0);
  printf("| %s | %.1f | %s | %s | %.0f%% vs %s | %.0f–%.0f%% | %.0f%% | %s | %.0f%% |\n", task.name,
         f / tuned_ns, hand_ns > 0 ? pk_sprintf(ctx, "%.1f", f / hand_ns) : "(does not fit)",
         blas_ns > 0 ? pk_sprintf(ctx, "%.1f", f / blas_ns) : "—", 100 * ratio,
         c->op == PK_OP_CONV2D ? "hand" : "OpenBLAS", 100 * rlo, 100 * rhi, 100 * c->goal,
         ratio >= c->goal ? "met" : "NOT met", 100 * f / tuned_ns / peak);
  fflush(stdout);
  return 0;
}

static int emit_te(const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  for (int i = 0; i < NCASES; i++) {
    pk_op_params prm;
    case_params(&cases[i], &prm);
    char *text;
    if (pk_op_text(ctx, cases[i].op, &prm, &text) != PK_OK) {
      fprintf(stderr, "%s\n", pk_ctx_error(ctx));
      return 1;
    }
    char *path = pk_sprintf(ctx, "%s/%s", dir, cases[i].file);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
      perror(path);
      return 1;
    }
    printf("%s\n", path);
  }
  pk_ctx_free(ctx);
  return 0;
}

int main(int argc, char **argv) {
  const char *db_path = NULL;
  int64_t min_ns = PK_MEASURE_MIN_NS;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--emit-te") && i + 1 < argc) return emit_te(argv[i + 1]);
    if (!strcmp(argv[i], "--db") && i + 1 < argc) db_path = argv[++i];
    else if (!strcmp(argv[i], "--quick")) min_ns = PK_MEASURE_MIN_NS / 5;
    else {
      fprintf(stderr, "usage: bench_tuned --emit-te DIR | --db DB [--quick]\n");
      return 2;
    }
  }
  if (!db_path) {
    fprintf(stderr, "usage: bench_tuned --emit-te DIR | --db DB [--quick]\n");
    return 2;
  }
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  int cpu = pk_measure_pin_thread();
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_cc *cc;
  pk_tunedb *db;
  pk_target_fp fp;
  if (pk_cc_new(ctx, NULL, &cc) != PK_OK || pk_db_open(ctx, db_path, PK_DB_OPEN_EXISTING, &db) != PK_OK ||
      pk_target_fp_detect(ctx, "c", &fp) != PK_OK) {
    fprintf(stderr, "%s\n", pk_ctx_error(ctx));
    return 1;
  }
  pk_db_prefer_cc(db, cc);
  pkrt_extern *sgemm = NULL;
  if (pkrt_extern_open(rt, "libopenblas.so.0", "cblas_sgemm", PK_BENCH_SGEMM_SIGNATURE, &sgemm) != PKRT_OK)
    printf("OpenBLAS unavailable: %s\n", pkrt_ctx_error(rt));
  printf("pock bench_tuned: 1 thread pinned to CPU %d, fp32, each kernel timed in %d interleaved rounds "
         "(median of repeats >= %lld ms per round; the median round shown), %s\n\n",
         cpu, ROUNDS, (long long)(min_ns / 1000000), pk_cc_version(cc));
  int lanes;
  double peak = pk_bench_fma_peak(&lanes);
  printf("measured fp32 FMA peak of this core: %.1f GFLOP/s (%d-lane vectors, bench/fma_peak.c)\n\n",
         peak, lanes);
  printf("| task | tuned GFLOP/s | hand GFLOP/s | OpenBLAS GFLOP/s | tuned ratio | same-round ratios | goal | | tuned / peak |\n"
         "|---|---|---|---|---|---|---|---|---|\n");
  int bad = 0;
  for (int i = 0; i < NCASES; i++) bad |= bench_case_run(peak, ctx, cc, rt, db, &fp, sgemm, &cases[i], min_ns);
  if (sgemm) pkrt_extern_free(sgemm);
  pk_db_close(db);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return bad;
}
