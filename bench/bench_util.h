/* bench_util.h — what the benches share: timing a kernel on host buffers, timing OpenBLAS
 * sgemm through the runtime's extern path, and building + checking + timing a schedule. */
#ifndef PK_BENCH_UTIL_H
#define PK_BENCH_UTIL_H

#include "pk_codegen.h"
#include "pk_measure.h"
#include "pk_schedule.h"

#define PK_BENCH_SGEMM_SIGNATURE "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"

/* One call of a built kernel on host buffers (pk_measure's callback argument). */
typedef struct pk_bench_kernel_run {
  const pkrt_kernel_desc *k;
  pk_host_buffers *hb;
  void *workspace;
  pkrt_exec_ctx *exec;
} pk_bench_kernel_run;
int pk_bench_run_kernel(void *arg);

/* One row-major cblas_sgemm call, C = op(A) op(B) (ta/tb: 111 no, 112 transposed). */
typedef struct pk_bench_sgemm_run {
  const pkrt_extern *fn;
  int32_t ta, tb, m, n, k, lda, ldb;
  const void *a, *b;
  void *c;
} pk_bench_sgemm_run;
int pk_bench_run_sgemm(void *arg);

/* Builds prog with sched (NULL: the default), checks it against the interpreter, times it
 * on hb: the median in ns, or -1 after printing why (build error, wrong result). */
double pk_bench_time_scheduled(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *prog,
                               pk_schedule *sched, int64_t min_ns, pk_host_buffers *hb);

/* Random inputs (seed) for prog, the interpreter's outputs for them (*ref), and host
 * buffers holding the same inputs (hb): what a kernel is checked against and timed on. */
pk_status pk_bench_inputs(pk_ctx *ctx, pk_te_program *prog, uint64_t seed, pk_te_ref **ref,
                          pk_host_buffers *hb);

/* A kernel built from a schedule and checked against the interpreter, ready to time on hb. */
typedef struct pk_bench_built {
  pkrt_module *module;
  pk_bench_kernel_run run;
} pk_bench_built;

/* Builds prog with sched and checks it against ref (inputs filled, interpreter run; NULL:
 * a reference of its own): PK_OK, or the build/check error in ctx. */
pk_status pk_bench_build_checked(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *prog,
                                 pk_schedule *sched, const pk_te_ref *ref, pk_host_buffers *hb,
                                 pk_bench_built *out);
void pk_bench_built_free(pk_bench_built *b);

/* Contestants are re-timed side by side with pk_measure_rounds (codegen/pk_measure.h),
 * the re-timer the tuner's reports share. */

#endif
