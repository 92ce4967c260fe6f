/* stage_passes.c — the graph passes (graph/passes/) as stages of `pock compile`, between
 * the training graph and the memory plan: each runs when --passes selects it, is checked
 * by the graph validator, and leaves one report line (nodes and planned arena bytes
 * before and after, and what it changed) for --print-memory and --verbose. */
#include "driver_impl.h"

static pk_status drv_pass(drv_state *S, pk_pass_kind kind) {
  const pk_pass_info *p = &pk_passes_table()[kind];
  bool on[PK_PASS_COUNT_];
  pk_status s = pk_passes_select(S->ctx, S->o->passes, S->o->disable_passes, on);
  if (s != PK_OK) return s;
  const char *line;
  if (!on[kind]) {
    line = pk_sprintf(S->ctx, "pass %-10s off\n", p->name);
  } else {
    int nodes0 = S->g->nnodes;
    int64_t arena0, arena1;
    const char *note = "";
    if ((s = pk_pass_arena_bytes(S->g, &arena0)) != PK_OK) return s;
    /* GPU templates store a matmul's or conv's product: epilogues stay kernels of their own
     * there; with --cache-frozen the forward ones too (pk_fuse_options) */
    pk_fuse_options fo = {.epilogues = !drv_on_gpu(S), .forward_epilogues = !S->o->cache_frozen};
    s = kind == PK_PASS_FUSE ? pk_pass_fuse_with(S->g, &fo, &note) : p->run(S->g, &note);
    if (s != PK_OK) return s;
    if ((s = pk_graph_validate(S->g)) != PK_OK) { /* a broken pass: say which */
      const char *why = pk_strdup(S->ctx, pk_ctx_error(S->ctx));
      pk_ctx_clear_error(S->ctx);
      return pk_ctx_fail(S->ctx, s, "compile: after pass %s: %s", p->name, why);
    }
    if ((s = pk_pass_arena_bytes(S->g, &arena1)) != PK_OK) return s;
    line = pk_sprintf(S->ctx, "pass %-10s nodes %d -> %d, arena %lld -> %lld bytes: %s\n",
                      p->name, nodes0, S->g->nnodes, (long long)arena0, (long long)arena1, note);
  }
  S->pass_report = pk_sprintf(S->ctx, "%s%s", S->pass_report ? S->pass_report : "", line);
  if (S->o->verbose) fputs(line, S->log);
  /* aliases change where tensors live */
  return drv_layouts(S);
}

pk_status drv_pass_fold(drv_state *S) { return drv_pass(S, PK_PASS_FOLD); }
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

pk_status drv_pass_fuse(drv_state *S) { return drv_pass(S, PK_PASS_FUSE); }
pk_status drv_pass_reorder(drv_state *S) { return drv_pass(S, PK_PASS_REORDER); }
