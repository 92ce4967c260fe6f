/* search_cache.c — `pock sparse-search`'s cache file (docs/sparse-search.md): fine-tuning
 * results keyed by everything that decides them (model, weights, data, settings), and
 * kernel timings, so that a rerun or a search with another budget trains nothing. The file
 * is rewritten atomically after every run, so Ctrl-C or a crash loses at most one run. */
#include <math.h>
#include <string.h>

#include "rt_file.h"
#include "search_impl.h"

#define CACHE_VERSION 1

/* Hashes a file's bytes into b; a data argument naming several files (X.npy:Y.npy,
 * X1.npy,X2.npy:Y.npy) hashes each part. */
static pk_status hash_into(pk_ctx *ctx, pk_strbuf *b, const char *what, const char *path) {
  if (!path) {
    pk_strbuf_printf(b, "%s=-\n", what);
    return PK_OK;
  }
  char *text;
  size_t len;
  if (pk_read_file(ctx, path, &text, &len) == PK_OK) {
    char hex[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(text, len, hex);
    pk_strbuf_printf(b, "%s=%s\n", what, hex);
    return PK_OK;
  }
  if (!strchr(path, ':')) return pk_ctx_status(ctx);
  pk_ctx_clear_error(ctx);
  char *copy = pk_strdup(ctx, path);
  for (char *part = strtok(copy, ":,"); part; part = strtok(NULL, ":,")) {
    pk_status s = hash_into(ctx, b, what, part);
    if (s != PK_OK) return s;
  }
  return PK_OK;
}

static pk_status entry_key(pk_ctx *ctx, const pk_search_options *o, const pk_train_spec *t,
                           const char **key) {
  const pk_compile_options *c = &o->compile;
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "pock sparse-search cache %d\n", CACHE_VERSION);
  pk_status s = hash_into(ctx, &b, "model", c->model);
  if (s == PK_OK) s = hash_into(ctx, &b, "weights", c->weights);
  if (s == PK_OK) s = hash_into(ctx, &b, "data", o->data);
  if (s == PK_OK) s = hash_into(ctx, &b, "val", o->val);
  pk_strbuf_printf(&b, "reinit=%s batch=%lld lr=%.17g optimizer=%d momentum=%.17g wd=%.17g\n",
                   c->reinit ? c->reinit : "-", (long long)c->batch, t->lr, (int)t->optim,
                   t->momentum, t->weight_decay);
  pk_strbuf_printf(&b, "scale=%.17g label_column=%d seed=%llu target=%s cc=%s\n", o->scale,
                   o->label_column, (unsigned long long)o->seed, c->target ? c->target : "c",
                   c->cc ? c->cc : "-");
  if (s == PK_OK) {
    char hex[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(b.data, b.len, hex);
    *key = pk_strdup(ctx, hex);
  }
  pk_strbuf_free(&b);
  return s;
}

static cJSON *object_in(cJSON *parent, const char *name) {
  cJSON *o = cJSON_GetObjectItemCaseSensitive(parent, name);
  if (!cJSON_IsObject(o)) {
    if (o) cJSON_DeleteItemFromObjectCaseSensitive(parent, name);
    o = cJSON_AddObjectToObject(parent, name);
  }
  return o;
}

pk_status srch_cache_open(pk_ctx *ctx, const pk_search_options *o, const pk_train_spec *train,
                          srch_cache *c) {
  memset(c, 0, sizeof *c);
  c->path = o->cache;
  pk_status s = entry_key(ctx, o, train, &c->key);
  if (s != PK_OK) return s;
  char *text = NULL;
  size_t len = 0;
  FILE *f = c->path ? fopen(c->path, "rb") : NULL;
  if (f) {
    fclose(f);
    if ((s = pk_read_file(ctx, c->path, &text, &len)) != PK_OK) return s;
    c->root = cJSON_ParseWithLength(text, len);
    cJSON *v = c->root ? cJSON_GetObjectItemCaseSensitive(c->root, "version") : NULL;
    if (!cJSON_IsObject(c->root) || !cJSON_IsNumber(v) || v->valuedouble != CACHE_VERSION) {
      cJSON_Delete(c->root);
      c->root = NULL;
      return pk_ctx_fail(ctx, PK_ERR_CHECK,
                         "%s: not a sparse-search cache (version %d JSON); give another "
                         "--cache or remove it",
                         c->path, CACHE_VERSION);
    }
  } else {
    c->root = cJSON_CreateObject();
    cJSON_AddNumberToObject(c->root, "version", CACHE_VERSION);
  }
  cJSON *entry = object_in(object_in(c->root, "entries"), c->key);
  if (!cJSON_GetObjectItemCaseSensitive(entry, "model"))
    cJSON_AddStringToObject(entry, "model", o->compile.model ? o->compile.model : "?");
  c->runs = object_in(entry, "runs");
  c->kernels = object_in(c->root, "kernels");
  return PK_OK;
}

bool srch_cache_run(const srch_cache *c, const char *run_key, double *val_acc, double *ms) {
  cJSON *r = cJSON_GetObjectItemCaseSensitive(c->runs, run_key);
  cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "val_acc");
  cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "ms_per_step");
  if (!cJSON_IsNumber(a)) return false;
  *val_acc = a->valuedouble;
  *ms = cJSON_IsNumber(m) ? m->valuedouble : NAN;
  return true;
}

void srch_cache_put_run(srch_cache *c, const char *run_key, double val_acc, double ms,
                        double seconds) {
  cJSON_DeleteItemFromObjectCaseSensitive(c->runs, run_key);
  cJSON *r = cJSON_AddObjectToObject(c->runs, run_key);
  cJSON_AddNumberToObject(r, "val_acc", val_acc);
  if (isfinite(ms)) cJSON_AddNumberToObject(r, "ms_per_step", ms);
  cJSON_AddNumberToObject(r, "seconds", seconds);
}

bool srch_cache_kernel(const srch_cache *c, const char *key, double *ms) {
  cJSON *v = cJSON_GetObjectItemCaseSensitive(c->kernels, key);
  if (!cJSON_IsNumber(v)) return false;
  *ms = v->valuedouble;
  return true;
}

void srch_cache_put_kernel(srch_cache *c, const char *key, double ms) {
  cJSON_DeleteItemFromObjectCaseSensitive(c->kernels, key);
  cJSON_AddNumberToObject(c->kernels, key, ms);
}

pk_status srch_cache_save(pk_ctx *ctx, srch_cache *c) {
  if (!c->path) return PK_OK;
  char *text = cJSON_Print(c->root);
  if (!text) pk_out_of_memory(0);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) pk_out_of_memory(0);
  rt_wfile w;
  pkrt_status st = rt_wfile_open(rt, &w, c->path);
  if (st == PKRT_OK) {
    st = rt_wfile_write(rt, &w, text, strlen(text));
    if (st == PKRT_OK) st = rt_wfile_write(rt, &w, "\n", 1);
    if (st == PKRT_OK) st = rt_wfile_commit(rt, &w);
    else rt_wfile_abort(&w);
  }
  pk_status s = st == PKRT_OK ? PK_OK : pk_ctx_fail(ctx, PK_ERR_IO, "%s", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  cJSON_free(text);
  return s;
}

void srch_cache_close(srch_cache *c) {
  cJSON_Delete(c->root);
  c->root = NULL;
}
