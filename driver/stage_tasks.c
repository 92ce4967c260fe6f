/* stage_tasks.c — the memory plan, and the kernel tasks of a graph: one kernel per distinct
 * (canonical TE, buffer strides), with its calls per step; the node lists of the train,
 * eval and infer plans, which all run on the training graph's one memory plan. */
#include <string.h>

#include "driver_impl.h"

bool drv_on_gpu(const drv_state *S) { return S->target && S->target->kind != PK_TARGET_C; }

/* Kernel workspaces are known only once the kernels are scheduled (drv_memplan_workspace
 * fills them in then), so the plan starts with none. A GPU target's buffers are views of
 * one device allocation, each placed at the target's alignment, which the manifest
 * records and the runtime checks against the device. */
pk_status drv_memplan(drv_state *S) {
  if (!drv_on_gpu(S)) return pk_memplan_build(S->g, NULL, &S->mp);
  int64_t align = S->target->kind == PK_TARGET_CUDA ? DRV_CUDA_ALIGN : DRV_OPENCL_ALIGN;
  return pk_memplan_build_aligned(S->g, NULL, align, &S->mp);
}

void drv_memplan_workspace(drv_state *S) {
  int64_t *ws = pk_alloc(S->ctx, sizeof(int64_t) * (size_t)(S->g->nnodes + 1));
  for (int k = 0; k < S->g->nnodes; k++) {
    int ki = S->node_kernel ? S->node_kernel[k] : -1;
    ws[k] = ki >= 0 && ki < S->nkernels && S->kernels[ki].func
                ? S->kernels[ki].func->workspace_bytes : 0;
  }
  pk_memplan_set_workspace(S->mp, S->g, ws);
}

int drv_gtensor_of(const pk_gnode *n, const pk_te_program *p, int i) {
  int k = 0;
  for (int j = 0; j < i; j++) k += p->tensors[j]->kind == p->tensors[i]->kind;
  if (p->tensors[i]->kind == PK_TE_PLACEHOLDER) return k < n->ninputs ? n->inputs[k] : -1;
  return k < n->noutputs ? n->outputs[k] : -1;
}

static pk_status check_node(drv_state *S, const pk_gnode *n) {
  const pk_te_program *p = n->prog;
  int nin = 0, nout = 0;
  if (!p) return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: node '%s' has no program", n->name);
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    nin += t->kind == PK_TE_PLACEHOLDER;
    nout += t->kind == PK_TE_COMPUTE;
    int id = drv_gtensor_of(n, p, i);
    if (id < 0 || id >= S->g->ntensors) continue;
    const pk_gtensor *gt = S->g->tensors[id];
    bool same = gt->ndim == t->ndim && gt->dtype == t->dtype;
    for (int d = 0; same && d < t->ndim; d++) same = gt->shape[d] == t->shape[d];
    if (!same)
      return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: node '%s': tensor '%s' disagrees with its program",
                         n->name, gt->name);
  }
  if (nin != n->ninputs || nout != n->noutputs)
    return pk_ctx_fail(S->ctx, PK_ERR_CHECK,
                       "compile: node '%s' has %d inputs and %d outputs, its program %d and %d",
                       n->name, n->ninputs, n->noutputs, nin, nout);
  return PK_OK;
}

static const char *node_label(pk_ctx *ctx, const pk_gnode *n) {
  if (n->fused) return pk_sprintf(ctx, "fused(%s)(%s)", n->fused, n->name);
  if (n->kind == PK_GNODE_GRAD)
    return pk_sprintf(ctx, "%s_grad%d(%s)", pk_op_name(n->op), n->grad_input, n->name);
  return pk_sprintf(ctx, "%s(%s)", pk_op_name(n->op), n->name);
}

int drv_plan_nodes(const drv_state *S, drv_plan p, int *nodes) {
  int n = 0;
  for (int i = 0; i < S->g->nnodes; i++) {
    pk_phase ph = S->g->nodes[i]->phase;
    bool in = p == DRV_PLAN_LOAD    ? ph == PK_PHASE_LOAD
              : p == DRV_PLAN_TRAIN ? ph != PK_PHASE_LOAD
              : p == DRV_PLAN_EVAL  ? ph == PK_PHASE_FORWARD || ph == PK_PHASE_LOSS
                                    : ph == PK_PHASE_FORWARD;
    if (in) nodes[n++] = i;
  }
  return n;
}

/* A plan that is a subset of the training graph's node order runs on its memory plan when
 * everything its nodes read is made by one of them (or fed, or persistent, or made by the
 * load plan, which runs first): lifetimes in the subset are sub-intervals of the full
 * ones, so no two live tensors share bytes. */
static pk_status check_plan(drv_state *S, drv_plan p, const char *name, int want) {
  pk_graph *g = S->g;
  int *nodes = pk_alloc(S->ctx, sizeof(int) * (size_t)(g->nnodes + 1));
  bool *in = pk_alloc(S->ctx, sizeof(bool) * (size_t)(g->nnodes + 1));
  int n = drv_plan_nodes(S, p, nodes);
  for (int i = 0; i < n; i++) in[nodes[i]] = true;
  for (int i = 0; i < n; i++) {
    const pk_gnode *nd = g->nodes[nodes[i]];
    for (int j = 0; j < nd->ninputs; j++) {
      const pk_gtensor *t = g->tensors[nd->inputs[j]];
      bool made_at_load = t->producer >= 0 && g->nodes[t->producer]->phase == PK_PHASE_LOAD;
      if (t->producer >= 0 && !in[t->producer] && !made_at_load)
        return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: the %s plan's node '%s' reads '%s', made outside it",
                           name, nd->name, t->name);
    }
  }
  if (want >= 0 && (g->tensors[want]->producer < 0 || !in[g->tensors[want]->producer]))
    return pk_ctx_fail(S->ctx, PK_ERR_CHECK, "compile: the %s plan does not compute '%s'", name,
                       g->tensors[want]->name);
  return PK_OK;
}

pk_status drv_plans_check(drv_state *S) {
  pk_status s = check_plan(S, DRV_PLAN_LOAD, "load", -1);
  if (s == PK_OK) s = check_plan(S, DRV_PLAN_INFER, "infer", S->g->output);
  if (s == PK_OK && !S->o->inference) s = check_plan(S, DRV_PLAN_EVAL, "eval", S->g->loss);
  return s;
}

pk_status drv_tasks(drv_state *S) {
  pk_ctx *ctx = S->ctx;
  pk_graph *g = S->g;
  pk_status s = drv_plans_check(S);
  if (s != PK_OK) return s;
  S->kernels = pk_alloc(ctx, sizeof(drv_kernel) * (size_t)(g->nnodes + 1));
  S->node_kernel = pk_alloc(ctx, sizeof(int) * (size_t)(g->nnodes + 1));
  S->nkernels = 0;
  for (int ni = 0; ni < g->nnodes; ni++) {
    pk_gnode *n = g->nodes[ni];
    if ((s = check_node(S, n)) != PK_OK) return s;
    pk_task task;
    if ((s = pk_task_for_target(ctx, n->prog, S->target, &task)) != PK_OK) return s;
    const int64_t **strides = pk_alloc(ctx, sizeof(int64_t *) * (size_t)(n->prog->ntensors + 1));
    pk_strbuf key;
    pk_strbuf_init(&key);
    pk_strbuf_append(&key, task.workload);
    for (int i = 0; i < n->prog->ntensors; i++) {
      const drv_layout *L = &S->layout[drv_gtensor_of(n, n->prog, i)];
      if (L->dense) continue;
      strides[i] = L->strides;
      pk_strbuf_printf(&key, " t%d:", i);
      for (int d = 0; d < n->prog->tensors[i]->ndim; d++)
        pk_strbuf_printf(&key, "%s%lld", d ? "," : "", (long long)L->strides[d]);
    }
    char *k = pk_strbuf_finish(ctx, &key);
    int found = -1;
    for (int j = 0; j < S->nkernels && found < 0; j++)
      if (!strcmp(S->kernels[j].key, k)) found = j;
    if (found < 0) {
      found = S->nkernels++;
      drv_kernel *K = &S->kernels[found];
      memset(K, 0, sizeof *K);
      K->prog = n->prog;
      K->strides = strides;
      K->workload = task.workload;
      K->key = k;
      K->name = node_label(ctx, n);
      K->first_node = ni;
      K->task = task;
      K->task.prog = n->prog;
    }
    S->node_kernel[ni] = found;
    S->kernels[found].calls += n->phase != PK_PHASE_LOAD;
  }
  for (int j = 0; j < S->nkernels; j++) S->kernels[j].task.weight = S->kernels[j].calls;
  return PK_OK;
}

char *drv_tasks_print(drv_state *S) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "%d kernels for %d nodes\n", S->nkernels, S->g->nnodes);
  for (int j = 0; j < S->nkernels; j++) {
    const drv_kernel *K = &S->kernels[j];
    pk_strbuf_printf(&b, "k%d  %-36s calls %-3g class %-9s flops %-10.0f workload %.16s", j, K->name,
                     K->calls, pk_task_class_name(K->task.cls), K->task.flops, K->workload);
    const char *sp = strchr(K->key, ' ');
    if (sp) pk_strbuf_printf(&b, "  strides%s", sp);
    pk_strbuf_append(&b, "\n");
  }
  for (int i = 0; i < S->g->nnodes; i++)
    pk_strbuf_printf(&b, "node %-3d %-9s k%-3d %s\n", i, pk_phase_name(S->g->nodes[i]->phase),
                     S->node_kernel[i], S->g->nodes[i]->name);
  return pk_strbuf_finish(S->ctx, &b);
}

/* pk_model_tasks_of: the stages up to tasks, then one entry per workload (strides do not
 * change what tuning measures: a schedule is for the computation, not the layout) that a
 * step runs. */
pk_status pk_model_tasks_of(pk_ctx *ctx, const pk_compile_options *o, pk_model_tasks *out) {
  drv_state S = {.ctx = ctx, .o = o, .log = o->log ? o->log : stderr};
  pk_status s = pk_target_parse(ctx, o->target, o->cc, &S.target);
  if (s == PK_OK) s = drv_load(&S);
  if (s == PK_OK && !o->inference) s = drv_sparse(&S);
  if (s == PK_OK) s = drv_train(&S);
  /* the kernels the artifact will have: folding rewrites frozen norms, copy elimination
   * removes some, the layout pass makes conv chains NHWC, fusion makes chains one kernel (the order the reorder pass picks
   * changes none) */
  if (s == PK_OK) s = drv_pass_fold(&S);
  if (s == PK_OK) s = drv_pass_share_stats(&S);
  if (s == PK_OK) s = drv_pass_copy_elim(&S);
  if (s == PK_OK) s = drv_pass_layout(&S);
  if (s == PK_OK) s = drv_pass_fuse(&S);
  if (s == PK_OK) s = drv_tasks(&S);
  if (s != PK_OK) return s;
  memset(out, 0, sizeof *out);
  out->progs = pk_alloc(ctx, sizeof(pk_te_program *) * (size_t)(S.nkernels + 1));
  out->calls = pk_alloc(ctx, sizeof(double) * (size_t)(S.nkernels + 1));
  out->names = pk_alloc(ctx, sizeof(char *) * (size_t)(S.nkernels + 1));
  for (int j = 0; j < S.nkernels; j++) {
    const drv_kernel *K = &S.kernels[j];
    if (K->calls == 0) continue; /* the load plan's alone: runs once, not worth tuning */
    int found = -1;
    for (int i = 0; i < out->n && found < 0; i++)
      if (!strcmp(pk_te_print(ctx, out->progs[i]), pk_te_print(ctx, K->prog))) found = i;
    if (found >= 0) {
      out->calls[found] += K->calls;
      continue;
    }
    out->progs[out->n] = K->prog;
    out->calls[out->n] = K->calls;
    out->names[out->n++] = K->name;
  }
  return PK_OK;
}
