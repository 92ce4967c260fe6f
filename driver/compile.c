/* compile.c — `pock compile` as a flat list of named stages, each handing one structure to
 * the next (drv_state): load → sparse → train → the graph passes (fold, share_stats, copy_elim, layout,
 * fuse, reorder) → frozen (with
 * --cache-frozen) →
 * memplan → tasks → schedule → codegen → artifact. --dump-after STAGE prints that stage's structure to stdout and stops there. */
#include <math.h>
#include <string.h>

#include "driver_impl.h"
#include "rt_file.h"

pk_compile_options pk_compile_defaults(void) {
  return (pk_compile_options){.batch = 32, .target = "c", .lr = NAN, .momentum = NAN,
                              .weight_decay = NAN, .warmup_steps = -1, .clip_global = NAN};
}

static char *dump_fwd(drv_state *S) { return pk_graph_print(S->ctx, S->fwd); }
static char *dump_graph(drv_state *S) { return pk_graph_print(S->ctx, S->g); }
static char *dump_memplan(drv_state *S) { return pk_memplan_print(S->ctx, S->g, S->mp); }
static char *dump_source(drv_state *S) { return S->source; }
static char *dump_manifest(drv_state *S) { return S->manifest; }

static pk_status artifact_stage(drv_state *S) {
  pk_status s = drv_manifest(S);
  if (s == PK_OK && S->o->out) s = drv_artifact(S);
  return s;
}

typedef struct stage {
  const char *name;
  pk_status (*run)(drv_state *S);
  char *(*dump)(drv_state *S);
} stage;

static const stage stages[] = {
    {"load", drv_load, dump_fwd},          {"sparse", drv_sparse, dump_fwd},
    {"train", drv_train, dump_graph}, {"fold", drv_pass_fold, dump_graph},
    {"share_stats", drv_pass_share_stats, dump_graph},
    {"copy_elim", drv_pass_copy_elim, dump_graph},
    {"layout", drv_pass_layout, dump_graph}, {"fuse", drv_pass_fuse, dump_graph},
    {"reorder", drv_pass_reorder, dump_graph}, {"frozen", drv_frozen, dump_graph},
    {"memplan", drv_memplan, dump_memplan},
    {"tasks", drv_tasks, drv_tasks_print}, {"schedule", drv_schedule, drv_schedule_print},
    {"codegen", drv_codegen, dump_source}, {"artifact", artifact_stage, dump_manifest},
};
#define NSTAGES ((int)(sizeof stages / sizeof stages[0]))

static int stage_index(const char *name) {
  for (int i = 0; i < NSTAGES; i++)
    if (!strcmp(stages[i].name, name)) return i;
  PK_ASSERT(0 && "no such stage");
  return 0;
}

static pk_status check_options(pk_ctx *ctx, const pk_compile_options *o, int *last) {
  *last = NSTAGES - 1;
  if (o->dump_after) {
    *last = -1;
    for (int i = 0; i < NSTAGES; i++)
      if (!strcmp(o->dump_after, stages[i].name)) *last = i;
    if (*last < 0)
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: unknown stage '%s' (%s)", o->dump_after,
                         PK_DRIVER_STAGES);
  }
  if (!o->model && !o->graph) return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: no model file");
  if (!o->out && !o->dump_after) return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: no output file (-o)");
  if (!o->graph && (o->batch < 1 || o->batch > INT32_MAX))
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: batch %lld is not in 1..%d", (long long)o->batch,
                       INT32_MAX);
  bool on[PK_PASS_COUNT_];
  pk_status s = pk_passes_select(ctx, o->passes, o->disable_passes, on);
  pk_layout_mode layout;
  if (s == PK_OK) s = pk_layout_mode_parse(ctx, o->layout, &layout);
  if (s != PK_OK) return s;
  if (o->reinit && !o->weights)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: --reinit needs --weights");
  if (o->build_timeout_s < 0 || o->build_timeout_s > 1e6)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: the build timeout %g s is not in 0..1e6",
                       o->build_timeout_s);
  return PK_OK;
}

/* The target, parsed once, and its backend: a kind without one is refused before any work. */
static pk_status open_target(drv_state *S) {
  const pk_compile_options *o = S->o;
  pk_status s = pk_target_parse(S->ctx, o->target, o->cc, &S->target);
  /* kernel by kernel: a model's kernels recur across models, schemes and optimizers */
  pk_backend_options bo = {.cc = o->cc, .build_timeout_s = o->build_timeout_s,
                           .kernel_objects = true, .build_jobs = o->build_jobs};
  /* GPU artifacts: the runtime's device executor has no frozen-prefix cache (--db takes
   * the records measured on this machine's GPU: the fingerprint is the device's) */
  if (s == PK_OK && S->target->kind != PK_TARGET_C && o->cache_frozen)
    s = pk_ctx_fail(S->ctx, PK_ERR_UNSUPPORTED, "target '%s': --cache-frozen is for C targets only",
                    S->target->text);
  if (s == PK_OK && S->target->kind != PK_TARGET_OPENCL && o->no_device_binary)
    s = pk_ctx_fail(S->ctx, PK_ERR_USAGE,
                    "target '%s': --no-device-binary is for OpenCL targets only",
                    S->target->text);
  if (s == PK_OK) s = pk_backend_new(S->ctx, S->target, &bo, &S->backend);
  if (s != PK_OK) {
    const char *why = pk_strdup(S->ctx, pk_ctx_error(S->ctx));
    pk_ctx_clear_error(S->ctx); /* the first failure wins: restate it */
    return pk_ctx_fail(S->ctx, s, "compile: %s", why);
  }
  return PK_OK;
}

/* The artifact path follows libpockrt's output rules (runtime/rt_file.h), checked before
 * any stage runs: a device, FIFO, directory or dangling link is refused, and so is any of
 * the files the compile reads. */
static pk_status check_output(pk_ctx *ctx, const pk_compile_options *o) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "compile: out of memory");
  const char *const inputs[] = {o->model, o->sparse, o->weights, o->db};
  pk_status s = PK_OK;
  if (rt_file_check_output(rt, o->out, 0, inputs, 4) != PKRT_OK)
    s = pk_ctx_fail(ctx, PK_ERR_IO, "%s", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  return s;
}

pk_status drv_compile_to(pk_ctx *ctx, const pk_compile_options *o, const char *last,
                         drv_state *S) {
  int end = stage_index(last), unused;
  pk_status s = check_options(ctx, o, &unused);
  if (s != PK_OK) return s;
  *S = (drv_state){.ctx = ctx, .o = o, .log = o->log ? o->log : stderr};
  if ((s = open_target(S)) != PK_OK) return s;
  for (int i = 0; i <= end && s == PK_OK; i++) s = stages[i].run(S);
  pk_cgen_unit_free(S->unit);
  S->unit = NULL;
  return s;
}

pk_status pk_compile(pk_ctx *ctx, const pk_compile_options *opts, pk_compile_result *out) {
  pk_compile_options o = *opts;
  if (!o.target) o.target = "c";
  if (!o.model) o.model = "(graph)";
  int last;
  pk_status s = check_options(ctx, &o, &last);
  if (s == PK_OK && o.out && last == NSTAGES - 1) s = check_output(ctx, &o);
  if (s != PK_OK) return s;
  drv_state S = {.ctx = ctx, .o = &o, .log = o.log ? o.log : stderr};
  if (out) memset(out, 0, sizeof *out);
  if ((s = open_target(&S)) != PK_OK) return s;
  for (int i = 0; i <= last; i++) {
    if ((s = stages[i].run(&S)) != PK_OK) {
      pk_cgen_unit_free(S.unit); /* a stage that failed between schedule and codegen */
      return s;
    }
    if (!strcmp(stages[i].name, "train") && out) pk_train_stats_of(S.g, &out->stats);
    /* The table waits for codegen, when every kernel's final schedule (a build that timed out
     * falls back to the defaults) and so its workspace is known, unless the run stops
     * earlier. */
    int mem_at = stage_index("codegen") < last ? stage_index("codegen") : last;
    if (o.print_memory && i == mem_at && S.mp) {
      fputs(pk_memplan_print(ctx, S.g, S.mp), S.log);
      if (i < stage_index("schedule"))
        fputs("(workspace: the kernels are not scheduled yet at this stage)\n", S.log);
    }
    /* what each graph pass changed, below the table (or alone, before the plan exists) */
    if (o.print_memory && i == mem_at && S.pass_report) fputs(S.pass_report, S.log);
  }
  pk_cgen_unit_free(S.unit); /* stopped after the schedule stage: never built */
  S.unit = NULL;
  if (o.dump_after) {
    const char *text = stages[last].dump(&S);
    fputs(text ? text : "", stdout);
    if (text && *text && text[strlen(text) - 1] != '\n') fputc('\n', stdout);
  }
  int ntuned = 0;
  for (int i = 0; i < S.nkernels; i++)
    ntuned += S.kernels[i].source == DRV_SCHED_TUNED || S.kernels[i].source == DRV_SCHED_GENERIC ||
              S.kernels[i].source == DRV_SCHED_EXTERN;
  if (out) {
    out->memplan = S.mp;
    out->graph = S.g;
    out->nkernels = S.nkernels;
    out->ntuned = ntuned;
    out->workspace_bytes = S.workspace_bytes;
    out->artifact_bytes = S.artifact_bytes;
  }
  if (last == NSTAGES - 1 && o.out)
    fprintf(S.log, "wrote %s: %d kernels (%d tuned), arena %lld bytes, file %lld bytes%s%s\n",
            o.out, S.nkernels, ntuned, (long long)S.mp->region_bytes[PK_REGION_ARENA],
            (long long)S.artifact_bytes, S.clbin ? ", OpenCL binary for " : "",
            S.clbin ? S.clbin_for.name : "");
  return PK_OK;
}
