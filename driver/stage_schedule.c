/* stage_schedule.c — a schedule for every kernel: the best tuning record for (workload,
 * the target) from --db when there is one, else the task space's hand-schedule preset,
 * else the default. Each choice is lowered (with the kernel's strides) and emitted here,
 * into the source the codegen stage builds (each kernel emitted once), so a schedule that
 * cannot serve this kernel falls back instead of failing late. */
#include <stdlib.h>
#include <string.h>

#include "driver_impl.h"
#include "pk_search.h"
#include "pk_tunedb.h"

#define DEFAULT_TRACE "{\"version\":1,\"steps\":[]}"
#define MAX_RECORD_TRIES 8 /* schedule records tried per kernel before the preset */

pk_status drv_lower(drv_state *S, int i, const pk_schedule *sched, pk_lfunc **out) {
  drv_kernel *K = &S->kernels[i];
  pk_lower_options lo = {.nstrides = K->prog->ntensors, .strides = K->strides};
  pk_status s = pk_sched_lower_opts(S->ctx, K->prog, sched, pk_sprintf(S->ctx, "k%d", i), &lo, out);
  if (s != PK_OK) return s;
  /* An output written over one of the node's inputs (an in-place optimizer update) makes
   * this an in-place variant: its buffers may alias, so codegen drops `restrict`. */
  const pk_gnode *n = S->g->nodes[K->first_node];
  for (int o = 0; o < n->noutputs; o++)
    for (int in = 0; in < n->ninputs; in++)
      if (S->layout[n->outputs[o]].root == S->layout[n->inputs[in]].root)
        (*out)->params_may_alias = true;
  return PK_OK;
}

/* The schedule serves kernel i when it lowers with the strides, writes every output other
 * kernels read (an inlined stage leaves its buffer unwritten), stores no output the graph
 * fused away (a fused epilogue's product has no bytes: only a schedule that inlines it,
 * autotune/space_matmul.c's, serves) and emits as C. On failure the ctx error is cleared
 * and *why says what went wrong. */
static bool usable(drv_state *S, int i, pk_schedule *sched, const char **why) {
  drv_kernel *K = &S->kernels[i];
  pk_ctx *ctx = S->ctx;
  for (int nd = 0; nd < S->g->nnodes; nd++) { /* every node the kernel serves */
    const pk_gnode *n = S->g->nodes[nd];
    if (S->node_kernel[nd] != i) continue;
    int k = 0;
    for (int t = 0; t < K->prog->ntensors; t++) {
      if (K->prog->tensors[t]->kind != PK_TE_COMPUTE) continue;
      const pk_gtensor *gt = S->g->tensors[n->outputs[k++]];
      bool stored = !sched || pk_sched_is_materialized(sched, t);
      if (gt->fused_away && stored) {
        *why = pk_sprintf(ctx, "it stores t%d, which was fused away (no storage)", t);
        return false;
      }
      if (!gt->fused_away && gt->role != PK_ROLE_TEMP && !stored) {
        *why = pk_sprintf(ctx, "it inlines output t%d", t);
        return false;
      }
    }
  }
  pk_lfunc *f;
  pk_status s = drv_lower(S, i, sched, &f);
  if (s == PK_OK) s = pk_cgen_unit_add(S->unit, f, K->name); /* unchanged when refused */
  if (s != PK_OK) {
    *why = pk_strdup(ctx, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return false;
  }
  K->sched = sched;
  K->func = f;
  return true;
}

static int by_median(const void *a, const void *b) {
  const pk_record *x = *(const pk_record *const *)a, *y = *(const pk_record *const *)b;
  if (x->meas.timing.median_ns != y->meas.timing.median_ns)
    return x->meas.timing.median_ns < y->meas.timing.median_ns ? -1 : 1;
  return strcmp(x->id, y->id);
}

static bool try_record(drv_state *S, int i, const pk_record *r, drv_sched_source src) {
  drv_kernel *K = &S->kernels[i];
  pk_schedule *sched;
  const char *why;
  if (pk_sched_from_json(S->ctx, K->prog, r->cand.trace, &sched) != PK_OK) {
    K->note = pk_sprintf(S->ctx, "record %.12s does not replay: %s", r->id, pk_ctx_error(S->ctx));
    pk_ctx_clear_error(S->ctx);
    return false;
  }
  if (!usable(S, i, sched, &why)) {
    K->note = pk_sprintf(S->ctx, "record %.12s is unusable here: %s", r->id, why);
    return false;
  }
  K->source = src;
  K->record_id = r->id;
  K->record_ns = r->meas.timing.median_ns;
  return true;
}

/* An extern kernel won tuning: the artifact has no extern calls yet, so the fastest
 * generated schedule measured for this workload stands in (this device's first). */
static pk_status best_schedule_record(drv_state *S, int i, pk_tunedb *db, const pk_target_fp *fp,
                                      bool *found) {
  drv_kernel *K = &S->kernels[i];
  pk_record *recs;
  int64_t n;
  pk_status s = pk_db_history(db, K->workload, NULL, &recs, &n);
  if (s != PK_OK) return s;
  const pk_record **ok = pk_alloc(S->ctx, sizeof(pk_record *) * (size_t)(n + 1));
  int nok = 0;
  for (int64_t j = 0; j < n; j++)
    if (recs[j].meas.status == PK_MEAS_OK && recs[j].cand.kind == PK_CAND_SCHEDULE) ok[nok++] = &recs[j];
  qsort(ok, (size_t)nok, sizeof *ok, by_median);
  int tries = 0;
  /* this device's records of this build first, then this build's elsewhere, then the rest */
  for (int pass = 0; pass < 4 && !*found; pass++)
    for (int j = 0; j < nok && !*found && tries < MAX_RECORD_TRIES; j++) {
      bool here = !strcmp(ok[j]->target_key, fp->key);
      if (here != (pass % 2 == 0) || pk_db_record_is_preferred(db, ok[j]) != (pass < 2)) continue;
      if (!here && drv_on_gpu(S)) continue; /* a GPU's records are that device's only */
      tries++;
      *found = try_record(S, i, ok[j], here ? DRV_SCHED_TUNED : DRV_SCHED_GENERIC);
    }
  return PK_OK;
}

static bool same_sgemm(const pk_sgemm_shape *x, const pk_sgemm_shape *y) {
  return x->a == y->a && x->b == y->b && x->c == y->c && x->trans_a == y->trans_a &&
         x->trans_b == y->trans_b && x->m == y->m && x->n == y->n && x->k == y->k &&
         x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc;
}

/* Backend switching: an extern record serves kernel i when it is the sgemm call the
 * runtime knows, its shape is still this kernel's, and A, B and C are dense (sgemm's
 * leading dimensions are row-major ones). NULL when it serves, else why not. */
static const char *extern_misfit(drv_state *S, int i, const pk_record *r, pk_sgemm_shape *g) {
  const drv_kernel *K = &S->kernels[i];
  const pk_candidate *c = &r->cand;
  /* C artifacts call cblas_sgemm, CUDA artifacts cuBLAS (runtime/manifest.c) */
  bool cuda = drv_on_gpu(S) && S->target->kind == PK_TARGET_CUDA;
  if (drv_on_gpu(S) && !cuda) return "OpenCL artifacts call no extern";
  if (!c->extern_lib || !c->extern_sym || !c->extern_sig ||
      strcmp(c->extern_sym, cuda ? PK_CUBLAS_SYM : PK_SGEMM_SYM) ||
      strcmp(c->extern_sig, cuda ? PK_CUBLAS_SIGNATURE : PK_SGEMM_SIGNATURE))
    return cuda ? "the runtime calls no extern on CUDA but " PK_CUBLAS_SYM
                : "the runtime calls no extern but " PK_SGEMM_SYM;
  if (pk_sgemm_shape_from_knobs(S->ctx, c->knobs, g) != PK_OK) {
    pk_ctx_clear_error(S->ctx);
    return "its knobs are not an sgemm call";
  }
  pk_sgemm_shape now;
  if (!pk_match_sgemm(K->prog, &now) || !same_sgemm(&now, g)) return "its call is not this kernel's";
  const int bufs[3] = {g->a, g->b, g->c};
  for (int j = 0; j < 3; j++)
    if (bufs[j] >= K->prog->ntensors || (K->strides && K->strides[bufs[j]]))
      return "a buffer of this kernel is strided";
  return NULL;
}

static pk_status from_db(drv_state *S, int i, pk_tunedb *db, const pk_target_fp *fp, bool *found) {
  drv_kernel *K = &S->kernels[i];
  pk_record best;
  pk_db_match match;
  *found = false;
  /* GPU targets: no fallback to records of another fingerprint with the same target
   * string ("opencl" spans every OpenCL device): a GPU's timings rank its own kernels */
  pk_status s = pk_db_best(db, K->workload, fp->key, drv_on_gpu(S) ? NULL : fp->target, &best, &match);
  if (s != PK_OK || match == PK_DB_MATCH_NONE) return s;
  if (best.cand.kind == PK_CAND_EXTERN) {
    pk_sgemm_shape g;
    const char *misfit = extern_misfit(S, i, &best, &g);
    if (!misfit) { /* *found stays false: the preset fills the kernel object's slot */
      K->ext_lib = best.cand.extern_lib;
      K->ext_sym = best.cand.extern_sym;
      K->ext_sig = best.cand.extern_sig;
      K->sgemm = g;
      K->record_id = best.id;
      K->record_ns = best.meas.timing.median_ns;
      return PK_OK;
    }
    s = best_schedule_record(S, i, db, fp, found);
    const char *what = pk_sprintf(S->ctx, "the best record is extern %s, unusable: %s; ",
                                  best.cand.extern_sym ? best.cand.extern_sym : "?", misfit);
    K->note = pk_sprintf(S->ctx, "%s%s", what,
                         *found ? "using the best generated schedule instead"
                                : "no generated schedule record usable");
    return s;
  }
  *found = try_record(S, i, &best, match == PK_DB_MATCH_EXACT ? DRV_SCHED_TUNED : DRV_SCHED_GENERIC);
  return PK_OK;
}

/* The plain loop nest, except that a fused epilogue's product (an output the graph fused
 * away, with no storage) is accumulated in a stage of its own (cache_write: on the stack,
 * or in the workspace when large) and inlined into the epilogue, and a fused prologue (an
 * elementwise output fused away) is inlined into the product. NULL, the plain nest
 * itself, when the kernel has no such output, or when that does not schedule. */
static pk_schedule *plain_schedule(drv_state *S, int i) {
  drv_kernel *K = &S->kernels[i];
  const pk_gnode *n = S->g->nodes[K->first_node];
  pk_schedule *s = NULL;
  int k = 0;
  for (int t = 0; t < K->prog->ntensors; t++) {
    if (K->prog->tensors[t]->kind != PK_TE_COMPUTE) continue;
    if (!S->g->tensors[n->outputs[k++]]->fused_away) continue;
    if (!s) s = pk_sched_new(S->ctx, K->prog);
    const char *stage = pk_sprintf(S->ctx, "t%d", t);
    bool product = K->prog->tensors[t]->body->kind == PK_EXPR_REDUCE;
    if ((product && pk_sched_cache_write(s, stage, "local") != PK_OK) ||
        pk_sched_compute_inline(s, stage) != PK_OK) {
      pk_ctx_clear_error(S->ctx);
      return NULL;
    }
  }
  return s;
}

/* Without a usable record: the task space's default schedule (autotune/space*.c presets,
 * shaped to the kernel), else the plain loop nest (plain_schedule). */
static void preset_or_default(drv_state *S, int i) {
  drv_kernel *K = &S->kernels[i];
  pk_ctx *ctx = S->ctx;
  const char *why = NULL;
  pk_schedule *sched = pk_space_default_schedule(ctx, &K->task, &why);
  if (sched && usable(S, i, sched, &why)) {
    K->source = DRV_SCHED_PRESET;
    return;
  }
  if (sched) why = pk_sprintf(ctx, "preset unusable: %s", why);
  K->source = DRV_SCHED_DEFAULT;
  K->why_default = why;
  if (!usable(S, i, plain_schedule(S, i), &why)) {
    K->func = NULL; /* drv_schedule reports it */
    K->note = why;
  }
}

pk_status drv_schedule(drv_state *S) {
  const pk_compile_options *o = S->o;
  pk_tunedb *db = NULL;
  pk_target_fp fp;
  pk_status s = pk_backend_unit_new(S->backend, &S->unit);
  if (s != PK_OK) return s;
  if (o->db) {
    s = pk_target_fp_of(S->ctx, S->target, &fp);
    if (s == PK_OK) s = pk_db_open(S->ctx, o->db, PK_DB_OPEN_EXISTING, &db);
    if (s != PK_OK) return s;
    /* records timed with the compiler and flags that will build the artifact rank first
     * (GPU targets: one build per device, NVRTC or the OpenCL driver; no preference) */
    if (pk_backend_cc(S->backend)) pk_db_prefer_cc(db, pk_backend_cc(S->backend));
  }
  for (int i = 0; i < S->nkernels && s == PK_OK; i++) {
    drv_kernel *K = &S->kernels[i];
    bool found = false;
    if (db) s = from_db(S, i, db, &fp, &found);
    if (s != PK_OK) break;
    if (!found) preset_or_default(S, i);
    if (K->ext_sym) K->source = DRV_SCHED_EXTERN;
    if (!K->func)
      s = pk_ctx_fail(S->ctx, PK_ERR_BUILD, "compile: kernel k%d %s does not lower: %s", i, K->name,
                      K->note ? K->note : "?");
    if (K->note && s == PK_OK) fprintf(S->log, "pock: note: k%d %s: %s\n", i, K->name, K->note);
  }
  if (db) pk_db_close(db);
  if (s != PK_OK) return s;
  S->workspace_bytes = 0;
  for (int i = 0; i < S->nkernels; i++)
    if (S->kernels[i].func->workspace_bytes > S->workspace_bytes)
      S->workspace_bytes = S->kernels[i].func->workspace_bytes;
  drv_memplan_workspace(S);
  return PK_OK;
}

static const char *source_name(drv_sched_source s) {
  switch (s) {
  case DRV_SCHED_DEFAULT: return "default";
  case DRV_SCHED_PRESET: return "preset";
  case DRV_SCHED_TUNED: return "tuned";
  case DRV_SCHED_GENERIC: return "tuned-generic";
  case DRV_SCHED_EXTERN: return "extern";
  }
  return "?";
}

char *drv_schedule_print(drv_state *S) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int i = 0; i < S->nkernels; i++) {
    const drv_kernel *K = &S->kernels[i];
    pk_strbuf_printf(&b, "k%d %s %s", i, K->name, source_name(K->source));
    if (K->record_id) pk_strbuf_printf(&b, " record %s", K->record_id);
    if (K->ext_sym) pk_strbuf_printf(&b, " calls %s in %s", K->ext_sym, K->ext_lib);
    pk_strbuf_printf(&b, " workspace %lld", (long long)K->func->workspace_bytes);
    if (K->why_default) pk_strbuf_printf(&b, " (%s)", K->why_default);
    pk_strbuf_printf(&b, "\n  %s\n", K->sched ? pk_sched_to_json(K->sched) : DEFAULT_TRACE);
  }
  return pk_strbuf_finish(S->ctx, &b);
}
