/* search_train.c — one fine-tuning run of `pock sparse-search`: the scheme compiled into an
 * artifact in the work directory, opened with libpockrt and trained on the data, its
 * validation accuracy kept in the cache (an interrupted run is not kept). */
#include <math.h>
#include <string.h>
#include <time.h>

#include "pock/pockrt.h"
#include "search_impl.h"

const char *srch_work_file(srch_run_env *E, const char *ext) {
  return pk_sprintf(E->ctx, "%s/s%d.%s", E->workdir, E->nfiles++, ext);
}

pk_status srch_write_spec(srch_run_env *E, const srch_scheme *s, const char **path) {
  const char *spec = srch_work_file(E, "spec.json");
  char *text = srch_scheme_spec(E->ctx, E->sp, s, NULL);
  FILE *f = fopen(spec, "w");
  bool ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = false;
  *path = spec;
  return ok ? PK_OK : pk_ctx_fail(E->ctx, PK_ERR_IO, "%s: cannot write a temporary spec", spec);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

const char *srch_run_key(pk_ctx *ctx, const srch_scheme *s, int epochs, double lr) {
  return lr > 0 ? pk_sprintf(ctx, "%d@lr%.17g@%s", epochs, lr, s->key)
                : pk_sprintf(ctx, "%d@%s", epochs, s->key);
}

static pk_status train_artifact(srch_run_env *E, const char *path, int epochs, double lr,
                                double *val_acc, double *ms) {
  const pk_search_options *o = E->o;
  pk_ctx *ctx = E->ctx;
  char err[512];
  pkrt_model *m;
  if (pkrt_model_open(path, &(pkrt_open_options){.nthreads = 1}, &m, err, sizeof err) != 0)
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "sparse-search: %s", err);
  pkrt_data_options dopt = {.scale = o->scale, .label_column = o->label_column, .model = m};
  pkrt_dataset *data = NULL, *val = NULL;
  pk_status s = PK_OK;
  if (pkrt_dataset_load(o->data, &dopt, &data, err, sizeof err) != 0 ||
      pkrt_dataset_load(o->val, &dopt, &val, err, sizeof err) != 0) {
    s = pk_ctx_fail(ctx, PK_ERR_IO, "sparse-search: %s", err);
  } else {
    pkrt_train_options t = {.epochs = epochs, .seed = o->seed, .val = val, .quiet = 1,
                            .progress = -1, .stop = o->stop, .lr = lr};
    pkrt_train_result r;
    if (pkrt_train_run(m, data, &t, &r) != 0)
      s = pk_ctx_fail(ctx, PK_ERR_RUNTIME, "sparse-search: %s", pkrt_model_error(m));
    else if (r.interrupted)
      s = pk_ctx_fail(ctx, PK_ERR_RUNTIME, "sparse-search: interrupted");
    *val_acc = r.val_acc;
    *ms = r.ms_median;
  }
  pkrt_dataset_free(val);
  pkrt_dataset_free(data);
  pkrt_model_close(m);
  return s;
}

pk_status srch_finetune(srch_run_env *E, const srch_scheme *s, int epochs, double lr,
                        double *val_acc, double *ms, bool *cached) {
  pk_ctx *ctx = E->ctx;
  const char *run_key = srch_run_key(ctx, s, epochs, lr);
  *cached = srch_cache_run(E->cache, run_key, val_acc, ms);
  if (*cached) return PK_OK;
  if (E->o->stop && *E->o->stop) return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "sparse-search: interrupted");
  double t0 = now_s();
  const char *spec, *art = srch_work_file(E, "pock");
  pk_status ws = srch_write_spec(E, s, &spec);
  if (ws != PK_OK) return ws;
  pk_compile_options o = E->o->compile;
  o.sparse = spec;
  o.out = art;
  o.dump_after = NULL;
  o.print_memory = false;
  FILE *devnull = fopen("/dev/null", "w"); /* the compile's "wrote ..." line */
  o.log = devnull ? devnull : E->o->log;
  /* its own arena: a compile holds the model's weights and every IR (hundreds of MB for a
   * transformer), which the search's arena would keep until the end, run after run */
  pk_ctx *cc = pk_ctx_new();
  pk_status st = pk_compile(cc, &o, NULL);
  if (st != PK_OK) pk_ctx_fail(ctx, st, "%s", pk_ctx_error(cc));
  pk_ctx_free(cc);
  if (devnull) fclose(devnull);
  if (st == PK_OK) st = train_artifact(E, art, epochs, lr, val_acc, ms);
  remove(spec);
  remove(art);
  if (st != PK_OK) return st;
  if (!isfinite(*val_acc))
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "sparse-search: scheme '%s': no validation accuracy",
                       s->key);
  srch_cache_put_run(E->cache, run_key, *val_acc, *ms, now_s() - t0);
  return srch_cache_save(ctx, E->cache);
}
