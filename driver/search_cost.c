/* search_cost.c — what a scheme costs, from the compiler itself: the stages up to the
 * schedule give the backward-pass memory (as --print-memory prints it), the planned peak
 * (every region plus the largest workspace) and each kernel's schedule; the step time sums
 * calls x time per kernel, the time from the tuning record the schedule came from, else
 * from one timing of that schedule by the measurer (kept in the cache file by kernel). */
#include <math.h>
#include <string.h>

#include "pk_measurer.h"
#include "rt_file.h"
#include "search_impl.h"

#define DEFAULT_TRACE "{\"version\":1,\"steps\":[]}"

double drv_time_schedule(pk_ctx *ctx, pk_measurer *measurer, const pk_task *task,
                         const pk_schedule *sched) {
  if (!measurer) return NAN;
  pk_candidate cand = {.kind = PK_CAND_SCHEDULE, .knobs = "{}",
                       .trace = sched ? pk_sched_to_json(sched) : DEFAULT_TRACE};
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(cand.trace, strlen(cand.trace), hex);
  cand.trace_hash = pk_strdup(ctx, hex);
  pk_measurement m;
  if (pk_measurer_run(measurer, task, &cand, 1, &m) != PK_OK) {
    pk_ctx_clear_error(ctx);
    return NAN;
  }
  return m.status == PK_MEAS_OK ? m.timing.median_ns * 1e-6 : NAN;
}

/* Times kernel K's schedule once (cached by target and kernel key); NAN when there is no
 * measurer or the measurement failed (then the step time is unknown). */
static double kernel_ms(srch_run_env *E, const drv_state *S, const drv_kernel *K) {
  const char *key = pk_sprintf(E->ctx, "%s %s", S->o->target ? S->o->target : "c", K->key);
  double ms;
  if (srch_cache_kernel(E->cache, key, &ms)) return ms;
  ms = drv_time_schedule(E->ctx, E->o->measurer, &K->task, K->sched);
  if (!isnan(ms)) srch_cache_put_kernel(E->cache, key, ms);
  return ms;
}

pk_status srch_cost_of(srch_run_env *E, srch_scheme *s) {
  pk_ctx *ctx = E->ctx;
  const char *spec;
  pk_status ws = srch_write_spec(E, s, &spec);
  if (ws != PK_OK) return ws;
  pk_compile_options o = E->o->compile;
  o.sparse = spec;
  o.out = NULL;
  o.dump_after = "schedule";
  o.print_memory = false;
  o.log = E->o->log;
  drv_state S;
  /* its own arena, freed below: a search costs thousands of schemes, each a whole compile
   * up to the schedules (the model's weights included) */
  pk_ctx *cc = pk_ctx_new();
  pk_status st = drv_compile_to(cc, &o, "schedule", &S);
  remove(spec);
  if (st != PK_OK) {
    pk_ctx_fail(ctx, st, "sparse-search: scheme '%s': %s", s->key, pk_ctx_error(cc));
    pk_ctx_free(cc);
    return st;
  }
  pk_train_stats ts;
  pk_train_stats_of(S.g, &ts);
  srch_cost *c = &s->cost;
  *c = (srch_cost){.bp_bytes = ts.saved_activation_bytes + ts.gradient_bytes + ts.opt_state_bytes,
                   .nkernels = S.nkernels};
  c->peak_bytes = S.workspace_bytes;
  for (int r = 0; r < PK_REGION_COUNT_; r++) c->peak_bytes += S.mp->region_bytes[r];
  double ms = 0;
  for (int i = 0; i < S.nkernels; i++) {
    const drv_kernel *K = &S.kernels[i];
    double k;
    if (K->record_id && K->record_ns > 0) {
      k = K->record_ns * 1e-6;
      c->ntuned++;
    } else {
      k = kernel_ms(E, &S, K);
      c->ntimed++;
    }
    ms += K->calls * k;
  }
  c->step_ms = ms; /* NAN when a kernel has neither a record nor a timing */
  pk_ctx_free(cc);
  return PK_OK;
}
