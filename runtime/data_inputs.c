/* data_inputs.c — datasets for models with several inputs (docs/runtime.md, "Several
 * inputs"): "X1.npy,X2.npy,...:Y.npy" gives one .npy file per model input, in the order of
 * the manifest's io.inputs (the model file's), and the labels. */
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "model_impl.h"

#define MAX_NPY_FILE ((size_t)1 << 36)

/* The paths of "A.npy,B.npy": split after each ".npy" that a ',' follows (a path may hold
 * commas elsewhere). Returns the count, or -1 when there are more than max. */
static int split_paths(char *s, char **out, int max) {
  int n = 0;
  out[n++] = s;
  for (char *p = strstr(s, ".npy,"); p; p = strstr(p, ".npy,")) {
    if (n == max) return -1;
    p[4] = '\0';
    p += 5;
    out[n++] = p;
  }
  return n;
}

pkrt_status rt_inputs_load(pkrt_ctx *rt, const char *xpaths, const char *ypath,
                           const rt_data_opts *o, pkrt_dataset **out) {
  *out = NULL;
  if (!o->model)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: several feature files need the model they "
                         "feed (pkrt_data_options.model)", xpaths);
  const rt_manifest *mf = &o->model->mf;
  char *buf = strdup(xpaths);
  char *paths[RT_MAX_INPUTS];
  if (!buf) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "out of memory");
  int n = split_paths(buf, paths, RT_MAX_INPUTS);
  pkrt_status st = PKRT_OK;
  if (n != mf->ninputs) {
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: %d feature files for a model with %d input%s "
                       "(give one .npy per input, in the model's order, then ':' and the labels)",
                       xpaths, n < 0 ? RT_MAX_INPUTS + 1 : n, mf->ninputs,
                       mf->ninputs == 1 ? "" : "s");
    free(buf);
    return st;
  }
  pkrt_dataset *d = NULL;
  st = rt_npy_load(rt, paths[0], ypath, o, &d);
  for (int k = 1; st == PKRT_OK && k < n; k++) {
    const rt_tensor *t = &mf->tensors[mf->inputs[k]];
    rt_dinput *in = &d->extra[k - 1];
    in->batch = !t->no_batch;
    in->per_row = t->no_batch ? t->numel : t->numel / mf->batch;
    in->dtype = t->dtype;
    void *bytes = NULL;
    size_t len;
    st = rt_file_read(rt, paths[k], MAX_NPY_FILE, &bytes, &len);
    if (st == PKRT_OK) st = rt_npy_input(rt, paths[k], bytes, len, t->name, d->rows, o->scale, in);
    free(bytes);
    if (st == PKRT_OK) d->nextra = k;
  }
  free(buf);
  if (st != PKRT_OK) {
    pkrt_dataset_free(d);
    return st;
  }
  *out = d;
  return PKRT_OK;
}
