/* manifest.c — the artifact's manifest (docs/artifact-format.md, versions 1 to 3): tensors
 * with their regions and offsets from the memory plan (views with strides), the kernels
 * (GPU: with their launches), the
 * optimizer, and the train/eval/infer plans as kernel calls on tensor indices. Names from
 * the model are data here; cJSON escapes them. */
#include <cjson/cJSON.h>
#include <string.h>

#include "driver_impl.h"

static cJSON *int_array(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
  return a;
}

static cJSON *tensor_json(drv_state *S, int i) {
  const pk_gtensor *t = S->g->tensors[i];
  const drv_layout *L = &S->layout[i];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", t->name);
  cJSON_AddStringToObject(o, "role", pk_role_name(t->role));
  cJSON_AddStringToObject(o, "dtype", pkrt_dtype_name(t->dtype));
  cJSON_AddItemToObject(o, "shape", int_array(t->shape, t->ndim));
  cJSON_AddStringToObject(o, "region", pk_region_name(S->mp->region[L->root]));
  cJSON_AddNumberToObject(o, "offset", (double)S->mp->offset[L->root]);
  if (t->role == PK_ROLE_PARAM && t->base < 0) cJSON_AddBoolToObject(o, "trainable", t->trainable);
  /* An input without the batch dim: fed once per step, shared by every row. */
  if (t->role == PK_ROLE_INPUT && t->no_batch) cJSON_AddBoolToObject(o, "batch", false);
  /* In-place outputs and weight views say whose storage they share. */
  if (t->base >= 0) cJSON_AddNumberToObject(o, "base", L->root);
  if (!L->dense) {
    cJSON_AddItemToObject(o, "strides", int_array(L->strides, t->ndim));
    cJSON_AddNumberToObject(o, "elem_offset", (double)L->elem_offset);
  }
  return o;
}

static cJSON *plan_json(drv_state *S, drv_plan p) {
  pk_graph *g = S->g;
  int *nodes = pk_alloc(S->ctx, sizeof(int) * (size_t)(g->nnodes + 1));
  int n = drv_plan_nodes(S, p, nodes);
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) {
    const pk_gnode *nd = g->nodes[nodes[i]];
    cJSON *st = cJSON_CreateObject();
    cJSON_AddNumberToObject(st, "kernel", S->node_kernel[nodes[i]]);
    cJSON *bufs = cJSON_CreateArray();
    for (int j = 0; j < nd->prog->ntensors; j++)
      cJSON_AddItemToArray(bufs, cJSON_CreateNumber(drv_gtensor_of(nd, nd->prog, j)));
    cJSON_AddItemToObject(st, "buffers", bufs);
    cJSON_AddStringToObject(st, "node", nd->name);
    cJSON_AddItemToArray(a, st);
  }
  return a;
}

static const char *optim_name(pk_optim_kind k) {
  return k == PK_OPTIM_ADAM ? "adam" : k == PK_OPTIM_ADAMW ? "adamw" : "sgd";
}

static const char *lr_sched_name(pk_lr_sched_kind k) {
  return k == PK_LR_STEP ? "step" : k == PK_LR_COSINE ? "cosine" : "constant";
}

static cJSON *optimizer_json(const pk_train_spec *sp) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "kind", optim_name(sp->optim));
  cJSON_AddNumberToObject(o, "lr", sp->lr);
  cJSON_AddNumberToObject(o, "beta1", sp->beta1 > 0 ? sp->beta1 : 0.9);
  cJSON_AddNumberToObject(o, "beta2", sp->beta2 > 0 ? sp->beta2 : 0.999);
  cJSON_AddNumberToObject(o, "momentum", sp->momentum);
  cJSON_AddNumberToObject(o, "weight_decay", sp->weight_decay);
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "kind", lr_sched_name(sp->lr_sched));
  cJSON_AddNumberToObject(s, "step_size", (double)sp->lr_step_size);
  cJSON_AddNumberToObject(s, "gamma", sp->lr_sched == PK_LR_STEP ? sp->lr_gamma : 1);
  cJSON_AddNumberToObject(s, "total_steps", (double)sp->lr_total_steps);
  cJSON_AddNumberToObject(s, "min_lr", sp->lr_min);
  if (sp->lr_warmup_steps > 0)
    cJSON_AddNumberToObject(s, "warmup_steps", (double)sp->lr_warmup_steps);
  cJSON_AddItemToObject(o, "schedule", s);
  /* micro-steps per optimizer step: the executor's H[3] and step count follow it */
  if (sp->accum_steps > 1) cJSON_AddNumberToObject(o, "accum_steps", (double)sp->accum_steps);
  return o;
}

/* GPU artifacts (format 3): the API, the alignment every buffer was planned at (a device
 * whose views need more is refused), CUDA's cubin arch, the device OpenCL's binary is for. */
static cJSON *gpu_json(const drv_state *S) {
  cJSON *o = cJSON_CreateObject();
  bool cuda = S->target->kind == PK_TARGET_CUDA;
  cJSON_AddStringToObject(o, "api", cuda ? "cuda" : "opencl");
  cJSON_AddNumberToObject(o, "align", (double)S->mp->align);
  if (cuda) cJSON_AddStringToObject(o, "arch", S->target->arch);
  if (S->clbin) { /* what "kernels.clbin" serves: exactly this device */
    cJSON *b = cJSON_AddObjectToObject(o, "binary");
    cJSON_AddStringToObject(b, "device", S->clbin_for.name);
    cJSON_AddStringToObject(b, "version", S->clbin_for.version);
    cJSON_AddStringToObject(b, "driver", S->clbin_for.driver);
    cJSON_AddStringToObject(b, "platform", S->clbin_for.platform);
  }
  return o;
}

/* A GPU artifact's informative fingerprint: the first device of its API that this machine
 * has (name, version, driver), or nothing. */
static const char *gpu_built_on(drv_state *S) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_gpu_info d;
  int n = 0;
  pkrt_gpu_api api = S->target->kind == PK_TARGET_CUDA ? PKRT_GPU_CUDA : PKRT_GPU_OPENCL;
  bool ok = rt && pkrt_gpu_list(rt, api, &d, 1, &n) == PKRT_OK && n > 0;
  pkrt_ctx_free(rt);
  if (!ok) return "{}";
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "device", d.name);
  cJSON_AddStringToObject(o, "version", d.version);
  cJSON_AddStringToObject(o, "driver", d.driver);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  const char *copy = text ? pk_strdup(S->ctx, text) : "{}";
  cJSON_free(text);
  return copy;
}

/* A GPU kernel's launch: its scalar count, grid and block (pkrt_gpu_kernel_desc). */
static void add_launch(cJSON *k, const drv_kernel *K) {
  const pkrt_gpu_kernel_desc *d = &K->gpu;
  const int64_t grid[3] = {d->grid[0], d->grid[1], d->grid[2]};
  const int64_t block[3] = {d->block[0], d->block[1], d->block[2]};
  cJSON_AddNumberToObject(k, "nscalars", d->nscalars);
  cJSON_AddItemToObject(k, "grid", int_array(grid, 3));
  cJSON_AddItemToObject(k, "block", int_array(block, 3));
  cJSON_AddNumberToObject(k, "shared", d->shared_bytes);
}

static void add_io(cJSON *io, const char *key, int id) {
  if (id >= 0) cJSON_AddNumberToObject(io, key, id);
}

pk_status drv_manifest(drv_state *S) {
  pk_ctx *ctx = S->ctx;
  pk_graph *g = S->g;
  const pk_memplan *mp = S->mp;
  pk_target_fp fp = {.target = S->target->text, .must_match = "{}", .informative = "{}"};
  /* the target's, not this host's; a GPU artifact's host code is libpockrt's own, and the
   * device is checked at load against the "gpu" object */
  pk_status s = drv_on_gpu(S) ? PK_OK : pk_target_fp_of(ctx, S->target, &fp);
  if (drv_on_gpu(S)) fp.informative = gpu_built_on(S);
  if (s != PK_OK) return s;
  int input = -1;
  for (int i = 0; i < g->ntensors && input < 0; i++)
    if (g->tensors[i]->role == PK_ROLE_INPUT) input = i;
  if (input < 0 || g->output < 0)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "compile: %s: the model has no %s", S->o->model,
                       input < 0 ? "input" : "output");
  /* Datasets give the first input row by row: it carries the batch. */
  if (g->tensors[input]->no_batch)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "compile: %s: the first input '%s' has no batch dim "
                       "(list an input with the batch first)", S->o->model,
                       g->tensors[input]->name);

  /* Format 2 marks what a version-1 runtime would misread (it feeds io.input alone):
   * several inputs, an integer input, an input without the batch dim. */
  int format = 1;
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->role == PK_ROLE_INPUT &&
        (i != input || t->no_batch || t->dtype != g->tensors[g->output]->dtype))
      format = 2;
  }
  if (drv_on_gpu(S)) format = 3; /* a runtime without a device executor refuses it by version */
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "format", format);
  cJSON_AddStringToObject(m, "pock_version", POCK_VERSION);
  cJSON_AddStringToObject(m, "target", fp.target);
  cJSON *f = cJSON_CreateObject();
  cJSON *mm = cJSON_Parse(fp.must_match), *inf = cJSON_Parse(fp.informative);
  cJSON_AddItemToObject(f, "must_match", mm ? mm : cJSON_CreateObject());
  cJSON_AddItemToObject(f, "informative", inf ? inf : cJSON_CreateObject());
  cJSON_AddItemToObject(m, "fingerprint", f);
  if (drv_on_gpu(S)) cJSON_AddItemToObject(m, "gpu", gpu_json(S));
  cJSON_AddStringToObject(m, "mode", S->o->inference ? "inference" : "train");
  /* The model's float dtype: the prediction's (the first input may hold integers). */
  cJSON_AddStringToObject(m, "dtype", pkrt_dtype_name(g->tensors[g->output]->dtype));
  cJSON_AddNumberToObject(m, "batch", (double)g->batch);
  cJSON_AddNumberToObject(m, "classes", (double)S->info.classes);
  if (S->spec.loss == PK_LOSS_SOFTMAX_XENT && S->spec.has_ignore_index)
    cJSON_AddNumberToObject(m, "ignore_index", (double)S->spec.ignore_index);

  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "arena", (double)mp->region_bytes[PK_REGION_ARENA]);
  cJSON_AddNumberToObject(r, "params", (double)mp->region_bytes[PK_REGION_PARAMS]);
  cJSON_AddNumberToObject(r, "state", (double)mp->region_bytes[PK_REGION_STATE]);
  cJSON_AddNumberToObject(r, "io", (double)mp->region_bytes[PK_REGION_IO]);
  /* only when there are any: an artifact without buffers reads as before */
  if (mp->region_bytes[PK_REGION_BUFFERS])
    cJSON_AddNumberToObject(r, "buffers", (double)mp->region_bytes[PK_REGION_BUFFERS]);
  cJSON_AddNumberToObject(r, "workspace", (double)S->workspace_bytes);
  cJSON_AddItemToObject(m, "regions", r);

  cJSON *ts = cJSON_CreateArray();
  for (int i = 0; i < g->ntensors; i++) cJSON_AddItemToArray(ts, tensor_json(S, i));
  cJSON_AddItemToObject(m, "tensors", ts);

  cJSON *io = cJSON_CreateObject();
  add_io(io, "input", input);
  /* Every input, in the model file's order (io.input is the first, for one-input readers). */
  cJSON *ins = cJSON_CreateArray();
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->role == PK_ROLE_INPUT) cJSON_AddItemToArray(ins, cJSON_CreateNumber(i));
  cJSON_AddItemToObject(io, "inputs", ins);
  add_io(io, "target", g->target);
  add_io(io, "row_weight", g->row_weight);
  add_io(io, "output", g->output);
  add_io(io, "loss", g->loss);
  add_io(io, "hyper", g->hyper);
  add_io(io, "rng", g->rng);
  cJSON_AddItemToObject(m, "io", io);

  /* Backend switching: each distinct extern once; its kernels say which and the call. */
  cJSON *exs = cJSON_CreateArray();
  int *ext_of = pk_alloc(ctx, sizeof(int) * (size_t)(S->nkernels + 1)), next = 0;
  for (int i = 0; i < S->nkernels; i++) {
    const drv_kernel *K = &S->kernels[i];
    ext_of[i] = -1;
    for (int j = 0; j < i && K->ext_sym && ext_of[i] < 0; j++)
      if (ext_of[j] >= 0 && !strcmp(S->kernels[j].ext_lib, K->ext_lib) &&
          !strcmp(S->kernels[j].ext_sym, K->ext_sym) && !strcmp(S->kernels[j].ext_sig, K->ext_sig))
        ext_of[i] = ext_of[j];
    if (!K->ext_sym || ext_of[i] >= 0) continue;
    ext_of[i] = next++;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "library", K->ext_lib);
    cJSON_AddStringToObject(e, "symbol", K->ext_sym);
    cJSON_AddStringToObject(e, "signature", K->ext_sig);
    cJSON_AddItemToArray(exs, e);
  }
  cJSON *ks = cJSON_CreateArray();
  for (int i = 0; i < S->nkernels; i++) {
    const drv_kernel *K = &S->kernels[i];
    cJSON *k = cJSON_CreateObject();
    cJSON_AddStringToObject(k, "name", K->func->name);
    cJSON_AddStringToObject(k, "workload", K->workload);
    if (K->record_id) cJSON_AddStringToObject(k, "record", K->record_id);
    else cJSON_AddNullToObject(k, "record");
    cJSON_AddNumberToObject(k, "nbufs", K->func->nparams);
    cJSON_AddNumberToObject(k, "workspace", (double)K->func->workspace_bytes);
    if (drv_on_gpu(S)) add_launch(k, K);
    if (ext_of[i] >= 0) {
      const pk_sgemm_shape *g = &K->sgemm;
      cJSON_AddNumberToObject(k, "extern", ext_of[i]);
      cJSON *c = cJSON_CreateObject();
      const int64_t v[11] = {g->a, g->b, g->c, g->m, g->n, g->k, g->lda, g->ldb, g->ldc,
                             g->trans_a, g->trans_b};
      static const char *const keys[11] = {"a", "b", "c", "m", "n", "k", "lda", "ldb", "ldc",
                                           "trans_a", "trans_b"};
      for (int j = 0; j < 11; j++) cJSON_AddNumberToObject(c, keys[j], (double)v[j]);
      cJSON_AddItemToObject(k, "sgemm", c);
    }
    cJSON_AddItemToArray(ks, k);
  }
  cJSON_AddItemToObject(m, "kernels", ks);
  cJSON_AddItemToObject(m, "externs", exs);
  if (!S->o->inference) cJSON_AddItemToObject(m, "optimizer", optimizer_json(&S->spec));

  cJSON *plans = cJSON_CreateObject();
  if (!S->o->inference) {
    cJSON_AddItemToObject(plans, "train", plan_json(S, DRV_PLAN_TRAIN));
    cJSON_AddItemToObject(plans, "eval", plan_json(S, DRV_PLAN_EVAL));
  }
  cJSON_AddItemToObject(plans, "infer", plan_json(S, DRV_PLAN_INFER));
  /* the fold pass's load nodes: run once when the weights are in place (a runtime that
   * does not know the plan refuses the artifact: it does not know role "folded" either) */
  int *load = pk_alloc(ctx, sizeof(int) * (size_t)(g->nnodes + 1));
  if (drv_plan_nodes(S, DRV_PLAN_LOAD, load) > 0)
    cJSON_AddItemToObject(plans, "load", plan_json(S, DRV_PLAN_LOAD));
  cJSON_AddItemToObject(m, "plans", plans);
  if (S->frozen) { /* --cache-frozen: the train plan's first prefix_steps steps are the prefix
                      (the load nodes, first in node order, are not in the train plan) */
    cJSON *c = cJSON_CreateObject(), *ts = cJSON_CreateArray(), *rows = cJSON_CreateArray();
    cJSON_AddNumberToObject(c, "prefix_steps", S->frozen->nnodes);
    for (int i = 0; i < S->frozen->ntensors; i++) {
      cJSON_AddItemToArray(ts, cJSON_CreateNumber(S->frozen->tensors[i]));
      cJSON_AddItemToArray(rows, cJSON_CreateBool(S->frozen->per_row[i]));
    }
    cJSON_AddItemToObject(c, "tensors", ts);
    cJSON_AddItemToObject(c, "per_row", rows);
    cJSON_AddItemToObject(m, "cache", c);
  }

  char *text = cJSON_Print(m);
  cJSON_Delete(m);
  if (!text) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "compile: out of memory writing the manifest");
  S->manifest = pk_strdup(ctx, text);
  cJSON_free(text);
  return PK_OK;
}
