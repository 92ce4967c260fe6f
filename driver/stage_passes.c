/* stage_passes.c — the graph passes (graph/passes/) as stages of `pock compile`, between
 * the training graph and the memory plan: each runs when --passes selects it, is checked
 * by the graph validator, and leaves one report line (nodes and planned arena bytes
 * before and after, and what it changed) for --print-memory and --verbose. */
#include <math.h>
#include <string.h>

#include "driver_impl.h"
#include "pk_tunedb.h"

/* The layout pass's timer: what the tuning database says a kernel takes on this target
 * (its best record), else one timing of the schedule the artifact would run without one
 * (the task space's preset, else the plain loop nest); each workload once. */
typedef struct layout_timer {
  drv_state *S;
  pk_tunedb *db;
  pk_target_fp fp;
  int n, cap;
  const char **workload;
  double *ms;
} layout_timer;

static double layout_kernel_ms(void *user, const pk_te_program *prog) {
  layout_timer *T = user;
  pk_ctx *ctx = T->S->ctx;
  pk_task task;
  if (pk_task_for_target(ctx, prog, T->S->target, &task) != PK_OK) {
    pk_ctx_clear_error(ctx);
    return NAN;
  }
  for (int i = 0; i < T->n; i++)
    if (!strcmp(T->workload[i], task.workload)) return T->ms[i];
  double ms = NAN;
  pk_record best;
  pk_db_match match = PK_DB_MATCH_NONE;
  if (T->db && pk_db_best(T->db, task.workload, T->fp.key, drv_on_gpu(T->S) ? NULL : T->fp.target,
                          &best, &match) != PK_OK)
    pk_ctx_clear_error(ctx);
  else if (T->db && match != PK_DB_MATCH_NONE)
    ms = best.meas.timing.median_ns * 1e-6;
  if (isnan(ms) && T->S->o->measurer) { /* what the artifact runs without a record: the preset */
    const char *why;
    ms = drv_time_schedule(ctx, T->S->o->measurer, &task, pk_space_default_schedule(ctx, &task, &why));
  }
  if (T->n == T->cap) {
    T->cap = T->cap ? 2 * T->cap : 32;
    const char **w = pk_alloc(ctx, sizeof *w * (size_t)T->cap);
    double *m = pk_alloc(ctx, sizeof *m * (size_t)T->cap);
    if (T->n) {
      memcpy(w, T->workload, sizeof *w * (size_t)T->n);
      memcpy(m, T->ms, sizeof *m * (size_t)T->n);
    }
    T->workload = w;
    T->ms = m;
  }
  T->workload[T->n] = task.workload;
  T->ms[T->n++] = ms;
  return ms;
}

/* Runs the layout pass with the mode of --layout and, for auto, the timer; fuse: the fuse
 * pass's options when it runs (the step's kernels are costed as fused), else NULL. */
static pk_status run_layout(drv_state *S, const pk_fuse_options *fuse, const char **note) {
  pk_layout_options lo = {.fuse = fuse};
  pk_status s = pk_layout_mode_parse(S->ctx, S->o->layout, &lo.mode);
  if (s != PK_OK) return s;
  layout_timer T = {.S = S};
  if (lo.mode == PK_LAYOUT_AUTO && (S->o->db || S->o->measurer)) {
    if (S->o->db) {
      s = pk_target_fp_of(S->ctx, S->target, &T.fp);
      if (s == PK_OK) s = pk_db_open(S->ctx, S->o->db, PK_DB_OPEN_EXISTING, &T.db);
      if (s != PK_OK) return s;
    }
    lo.kernel_ms = layout_kernel_ms;
    lo.user = &T;
  }
  s = pk_pass_layout_with(S->g, &lo, note);
  if (T.db) pk_db_close(T.db);
  return s;
}

static pk_status drv_pass(drv_state *S, pk_pass_kind kind) {
  const pk_pass_info *p = &pk_passes_table()[kind];
  bool on[PK_PASS_COUNT_];
  pk_status s = pk_passes_select(S->ctx, S->o->passes, S->o->disable_passes, on);
  if (s != PK_OK) return s;
  const char *line;
  if (!on[kind]) {
    line = pk_sprintf(S->ctx, "pass %-11s off\n", p->name);
  } else {
    int nodes0 = S->g->nnodes;
    int64_t arena0, arena1;
    const char *note = "";
    if ((s = pk_pass_arena_bytes(S->g, &arena0)) != PK_OK) return s;
    /* GPU templates store a matmul's or conv's product: epilogues stay kernels of their own
     * there; with --cache-frozen the forward ones too (pk_fuse_options) */
    pk_fuse_options fo = {.epilogues = !drv_on_gpu(S), .forward_epilogues = !S->o->cache_frozen};
    s = kind == PK_PASS_FUSE     ? pk_pass_fuse_with(S->g, &fo, &note)
        : kind == PK_PASS_LAYOUT ? run_layout(S, on[PK_PASS_FUSE] ? &fo : NULL, &note)
                                 : p->run(S->g, &note);
    if (s != PK_OK) return s;
    if ((s = pk_graph_validate(S->g)) != PK_OK) { /* a broken pass: say which */
      const char *why = pk_strdup(S->ctx, pk_ctx_error(S->ctx));
      pk_ctx_clear_error(S->ctx);
      return pk_ctx_fail(S->ctx, s, "compile: after pass %s: %s", p->name, why);
    }
    if ((s = pk_pass_arena_bytes(S->g, &arena1)) != PK_OK) return s;
    line = pk_sprintf(S->ctx, "pass %-11s nodes %d -> %d, arena %lld -> %lld bytes: %s\n",
                      p->name, nodes0, S->g->nnodes, (long long)arena0, (long long)arena1, note);
  }
  S->pass_report = pk_sprintf(S->ctx, "%s%s", S->pass_report ? S->pass_report : "", line);
  if (S->o->verbose) fputs(line, S->log);
  /* aliases change where tensors live */
  return drv_layouts(S);
}

pk_status drv_pass_fold(drv_state *S) { return drv_pass(S, PK_PASS_FOLD); }
pk_status drv_pass_share_stats(drv_state *S) { return drv_pass(S, PK_PASS_SHARE_STATS); }
pk_status drv_pass_copy_elim(drv_state *S) { return drv_pass(S, PK_PASS_COPY_ELIM); }
pk_status drv_frozen(drv_state *S) {
  if (!S->o->cache_frozen) return PK_OK;
  if (S->o->inference)
    return pk_ctx_fail(S->ctx, PK_ERR_USAGE, "compile: --cache-frozen is for training artifacts");
  S->frozen = pk_alloc(S->ctx, sizeof *S->frozen);
  pk_status s = pk_graph_frozen_prefix(S->g, S->frozen);
  if (s == PK_OK && S->o->verbose)
    fprintf(S->log, "frozen prefix: %d of %d nodes, %d tensors cached\n", S->frozen->nnodes,
            S->g->nnodes, S->frozen->ntensors);
  return s;
}

pk_status drv_pass_layout(drv_state *S) { return drv_pass(S, PK_PASS_LAYOUT); }
pk_status drv_pass_fuse(drv_state *S) { return drv_pass(S, PK_PASS_FUSE); }
pk_status drv_pass_reorder(drv_state *S) { return drv_pass(S, PK_PASS_REORDER); }
