/* weights.c — weights files (.pkw) on the compiler side: a model's weights_file read for
 * params without "init", and pk_weights_apply (pretrained values, minus a re-initialized
 * head). Reading is the runtime's pkrt_weights_read: one reader for both sides. */
#include <fnmatch.h>
#include <string.h>

#include "json_impl.h"

/* Reads path into a fresh runtime arena; the caller frees *rt and *arena either way. */
static pk_status fe_read(pk_ctx *ctx, const char *prefix, const char *path, pkrt_ctx **rt,
                         pkrt_arena **arena, pkrt_wtensor **w, int *n) {
  *rt = pkrt_ctx_new(1);
  *arena = pkrt_arena_new(0);
  if (!*rt || !*arena) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "%s: out of memory", prefix);
  pkrt_status rs = pkrt_weights_read(*rt, *arena, path, w, n);
  if (rs == PKRT_OK) return PK_OK;
  pk_status s = rs == PKRT_ERR_IO ? PK_ERR_IO : rs == PKRT_ERR_NOMEM ? PK_ERR_NOMEM : PK_ERR_CHECK;
  const char *msg = pkrt_ctx_error(*rt);
  /* The runtime's message usually names the file already. */
  if (strstr(msg, path))
    return strcmp(prefix, path) == 0 ? pk_ctx_fail(ctx, s, "%s", msg)
                                     : pk_ctx_fail(ctx, s, "%s: %s", prefix, msg);
  return pk_ctx_fail(ctx, s, "%s: '%s': %s", prefix, path, msg);
}

static void fe_release(pkrt_ctx *rt, pkrt_arena *arena) {
  if (arena) pkrt_arena_free(arena);
  if (rt) pkrt_ctx_free(rt);
}

pk_status pk_fe_weights_find(pk_fe *f, const char *where, const char *name,
                             const pkrt_wtensor **out) {
  *out = NULL;
  if (!f->weights_path) return PK_OK;
  if (!f->weights_loaded) {
    f->weights_loaded = true;
    pk_status s = fe_read(f->ctx, pk_sprintf(f->ctx, "%s: %s: weights_file", f->file, where),
                          f->weights_path, &f->rt, &f->warena, &f->w, &f->nw);
    if (s != PK_OK) {
      f->nw = 0;
      return s;
    }
  }
  for (int i = 0; i < f->nw; i++)
    if (strcmp(f->w[i].name, name) == 0) {
      *out = &f->w[i];
      break;
    }
  return PK_OK;
}

void pk_fe_weights_close(pk_fe *f) {
  fe_release(f->rt, f->warena);
  f->rt = NULL;
  f->warena = NULL;
  f->w = NULL;
  f->nw = 0;
}

static bool fe_same_shape(const pkrt_wtensor *w, const pk_gtensor *t) {
  if (w->dtype != t->dtype || w->ndim != t->ndim) return false;
  for (int d = 0; d < t->ndim; d++)
    if (w->shape[d] != t->shape[d]) return false;
  return true;
}

pk_status pk_weights_apply(pk_ctx *ctx, pk_graph *g, const char *path, const char *keep) {
  if (keep && !keep[0]) keep = NULL;
  if (keep) {
    /* A glob that keeps nothing is almost surely a typo ("fc3.*" on the CNN). */
    bool any = false;
    for (int i = 0; i < g->ntensors && !any; i++)
      any = g->tensors[i]->role == PK_ROLE_PARAM && g->tensors[i]->base < 0 &&
            fnmatch(keep, g->tensors[i]->name, 0) == 0;
    if (!any)
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: the re-init glob '%s' matches no param",
                         path, keep);
  }
  pkrt_ctx *rt;
  pkrt_arena *arena;
  pkrt_wtensor *w = NULL;
  int n = 0;
  pk_status s = fe_read(ctx, path, path, &rt, &arena, &w, &n);
  /* Check everything first so that a bad file leaves the graph as it was. */
  int *target = s == PK_OK ? pk_alloc(ctx, (size_t)(n ? n : 1) * sizeof *target) : NULL;
  int matched = 0;
  for (int i = 0; s == PK_OK && i < n; i++) {
    int id = pk_graph_find(g, w[i].name);
    target[i] = -1;
    /* buffers and constants load like params: a fine-tuned model's running stats */
    pk_tensor_role r = id >= 0 ? g->tensors[id]->role : PK_ROLE_COUNT_;
    if (id < 0 || (r != PK_ROLE_PARAM && r != PK_ROLE_BUFFER && r != PK_ROLE_CONSTANT) ||
        g->tensors[id]->base >= 0)
      continue;
    matched++;
    if (keep && fnmatch(keep, w[i].name, 0) == 0) continue;
    const pk_gtensor *t = g->tensors[id];
    if (!fe_same_shape(&w[i], t)) {
      s = pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: tensor %s is %s %s, the model's param is %s %s",
                      path, pk_fe_cquote(ctx, w[i].name), pkrt_dtype_name(w[i].dtype),
                      pk_fe_cshape(ctx, w[i].ndim, w[i].shape), pkrt_dtype_name(t->dtype),
                      pk_fe_cshape(ctx, t->ndim, t->shape));
      break;
    }
    target[i] = id;
  }
  if (s == PK_OK && matched == 0)
    s = pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: no tensor in it names a param of the model", path);
  for (int i = 0; s == PK_OK && i < n; i++) {
    if (target[i] < 0) continue;
    pk_gtensor *t = g->tensors[target[i]];
    size_t bytes = (size_t)pk_gtensor_bytes(t);
    void *copy = pk_alloc(ctx, bytes ? bytes : 1);
    memcpy(copy, w[i].data, bytes);
    t->init = copy;
  }
  fe_release(rt, arena);
  return s;
}
