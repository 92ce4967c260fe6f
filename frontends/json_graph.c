/* json_graph.c — Pock's JSON graph (docs/graph-format.md) → forward graph IR: the file's
 * header, inputs, params (inline or from the weights file), nodes and output. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_impl.h"
#include "pk_json_check.h"

/* Keys a tool may add for people (ignored); every other unknown key is a typo to report. */
static const char *const ROOT_KEYS[] = {"format", "version", "name", "dtype", "weights_file",
                                        "inputs", "params", "nodes", "output", "training",
                                        "comment", "metadata", NULL};
static const char *const INPUT_KEYS[] = {"name", "shape", "dtype", "batch", NULL};
static const char *const PARAM_KEYS[] = {"name", "shape", "init", "role", NULL};
static const char *const NODE_KEYS[] = {"name", "op", "inputs", "output", "outputs", "attrs",
                                        NULL};
/* The newest format version this reader knows; keys of a later version than the file's are
 * refused (fe_v2_key), so a v1 file never half-means something. */
#define PK_FE_VERSION 2

/* Lists far beyond any real model are refused before any work is spent on them. */
#define PK_FE_MAX_ITEMS (1 << 20)

/* Re-issues the failure a graph call recorded, prefixed with the file and `where`, unless
 * the graph's message already names it. */
static pk_status fe_wrap(pk_fe *f, const char *where) {
  pk_status st = pk_ctx_status(f->ctx);
  if (st == PK_OK) st = PK_ERR_CHECK;
  const char *msg = pk_strdup(f->ctx, pk_ctx_error(f->ctx));
  pk_ctx_clear_error(f->ctx);
  if (strncmp(msg, "graph: ", 7) == 0) msg += 7; /* the file is the user's frame of reference */
  if (!where || strncmp(msg, where, strlen(where)) == 0)
    return pk_ctx_fail(f->ctx, st, "%s: %s", f->file, msg);
  return pk_ctx_fail(f->ctx, st, "%s: %s: %s", f->file, where, msg);
}

/* A tensor name that is new: checked for form and uniqueness. */
static pk_status fe_new_tensor_name(pk_fe *f, const char *where, const char *name) {
  pk_status s = pk_fe_check_name(f, where, name);
  if (s != PK_OK) return s;
  if (pk_graph_find(f->g, name) >= 0)
    return pk_fe_fail(f, where, "duplicate tensor name %s", pk_fe_quote(f, name));
  return PK_OK;
}

/* A version-2 key in a version-1 file is refused by name: it would otherwise be read with
 * the meaning of a format the file does not declare. */
static pk_status fe_v2_key(pk_fe *f, const char *where, const cJSON *obj, const char *key) {
  if (f->version >= 2 || !pk_fe_get(obj, key)) return PK_OK;
  return pk_fe_fail(f, where, "key '%s' needs \"version\": 2 (this file says version %lld)", key,
                    (long long)f->version);
}

/* inputs[i].dtype: the model's float dtype (default) or an integer one (token ids, masks);
 * inputs[i].batch: false for an input without the batch dim (fed once, shared by every row). */
static pk_status fe_input_kind(pk_fe *f, const char *where, const cJSON *it, pkrt_dtype *dtype,
                               bool *batch) {
  const char *dt = NULL;
  pk_status s;
  if ((s = fe_v2_key(f, where, it, "dtype")) != PK_OK ||
      (s = fe_v2_key(f, where, it, "batch")) != PK_OK ||
      (s = pk_fe_string(f, where, it, "dtype", false, &dt)) != PK_OK ||
      (s = pk_fe_bool(f, where, it, "batch", batch)) != PK_OK)
    return s;
  *dtype = f->dtype;
  if (!dt || strcmp(dt, pkrt_dtype_name(f->dtype)) == 0) return PK_OK;
  if (strcmp(dt, "i32") == 0) *dtype = PKRT_DTYPE_I32;
  else if (strcmp(dt, "i64") == 0) *dtype = PKRT_DTYPE_I64;
  else if (strcmp(dt, "f32") == 0 || strcmp(dt, "f64") == 0)
    return pk_fe_fail(f, where, "dtype %s differs from the model's %s (float inputs have the "
                      "model's dtype)", pk_fe_quote(f, dt), pkrt_dtype_name(f->dtype));
  else
    return pk_fe_fail(f, where, "dtype %s is not %s, i32 or i64", pk_fe_quote(f, dt),
                      pkrt_dtype_name(f->dtype));
  return PK_OK;
}

/* inputs: [{"name", "shape": ["N", ...], "dtype"?, "batch"?}] */
static pk_status fe_inputs(pk_fe *f, const cJSON *root) {
  const cJSON *arr;
  int n;
  pk_status s = pk_fe_array(f, NULL, root, "inputs", PK_FE_MAX_ITEMS, &arr, &n);
  int i = 0;
  for (const cJSON *it = s == PK_OK ? arr->child : NULL; it; it = it->next, i++) {
    const char *where = pk_sprintf(f->ctx, "inputs[%d]", i);
    const char *name = NULL;
    if ((s = pk_fe_keys(f, where, it, INPUT_KEYS)) != PK_OK ||
        (s = pk_fe_string(f, where, it, "name", true, &name)) != PK_OK ||
        (s = fe_new_tensor_name(f, where, name)) != PK_OK)
      return s;
    where = pk_sprintf(f->ctx, "input %s", pk_fe_quote(f, name));
    const cJSON *shp = pk_fe_get(it, "shape");
    if (!shp) return pk_fe_fail(f, where, "missing key 'shape'");
    int ndim;
    int64_t shape[PK_TE_MAX_DIMS];
    pkrt_dtype dtype;
    bool batch = true;
    if ((s = fe_input_kind(f, where, it, &dtype, &batch)) != PK_OK ||
        (s = pk_fe_shape(f, where, shp, batch, &ndim, shape)) != PK_OK)
      return s;
    int id = pk_graph_add_tensor(f->g, name, PK_ROLE_INPUT, dtype, ndim, shape);
    if (id < 0) return fe_wrap(f, where);
    f->g->tensors[id]->no_batch = !batch;
  }
  return s;
}

/* "init": a flat row-major array of numel numbers, converted to the model's dtype. */
static pk_status fe_init(pk_fe *f, const char *where, const cJSON *init, int64_t numel,
                         void **out) {
  if (!cJSON_IsArray(init)) return pk_fe_fail(f, where, "key 'init' must be an array");
  /* Count before allocating: the shape alone may claim far more than the file holds. */
  int64_t n = cJSON_GetArraySize(init);
  if (n != numel)
    return pk_fe_fail(f, where, "init has %lld values, the shape needs %lld", (long long)n,
                      (long long)numel);
  void *data = pk_alloc(f->ctx, (size_t)numel * pkrt_dtype_size(f->dtype));
  int64_t i = 0;
  for (const cJSON *v = init->child; v; v = v->next, i++) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
      return pk_fe_fail(f, where, "init[%lld] is not a finite number", (long long)i);
    double d = v->valuedouble;
    if (f->dtype == PKRT_DTYPE_F32) {
      if (fabs(d) > FLT_MAX)
        return pk_fe_fail(f, where, "init[%lld] = %g is outside the range of f32",
                          (long long)i, d);
      ((float *)data)[i] = (float)d;
    } else {
      ((double *)data)[i] = d;
    }
  }
  *out = data;
  return PK_OK;
}

/* params: [{"name", "shape", "init"?, "role"?}] — no "init": the weights file has the
 * values. role "param" (default: trained per the sparse spec), "buffer" (state the step
 * updates: batch norm's running stats) or "constant" (read-only: masks, tables). */
static pk_status fe_params(pk_fe *f, const cJSON *root) {
  const cJSON *arr = pk_fe_get(root, "params");
  if (!arr) return pk_fe_fail(f, NULL, "missing key 'params'");
  if (!cJSON_IsArray(arr)) return pk_fe_fail(f, NULL, "key 'params' must be an array");
  int i = 0;
  for (const cJSON *it = arr->child; it; it = it->next, i++) {
    if (i >= PK_FE_MAX_ITEMS) return pk_fe_fail(f, NULL, "too many params");
    const char *where = pk_sprintf(f->ctx, "params[%d]", i);
    const char *name = NULL;
    pk_status s;
    if ((s = pk_fe_keys(f, where, it, PARAM_KEYS)) != PK_OK ||
        (s = pk_fe_string(f, where, it, "name", true, &name)) != PK_OK ||
        (s = fe_new_tensor_name(f, where, name)) != PK_OK)
      return s;
    where = pk_sprintf(f->ctx, "param %s", pk_fe_quote(f, name));
    const cJSON *shp = pk_fe_get(it, "shape");
    if (!shp) return pk_fe_fail(f, where, "missing key 'shape'");
    int ndim;
    int64_t shape[PK_TE_MAX_DIMS], numel = 1;
    if ((s = pk_fe_shape(f, where, shp, false, &ndim, shape)) != PK_OK) return s;
    for (int d = 0; d < ndim; d++) numel *= shape[d]; /* pk_fe_shape bounded it */
    const void *data = NULL;
    const cJSON *init = pk_fe_get(it, "init");
    if (init) {
      void *buf = NULL;
      if ((s = fe_init(f, where, init, numel, &buf)) != PK_OK) return s;
      data = buf;
    } else {
      const pkrt_wtensor *w = NULL;
      if ((s = pk_fe_weights_find(f, where, name, &w)) != PK_OK) return s;
      if (!w) {
        if (!f->weights_path)
          return pk_fe_fail(f, where, "missing initializer (no \"init\" and no weights_file)");
        return pk_fe_fail(f, where, "missing initializer (no \"init\" and not in '%s')",
                          f->weights_path);
      }
      bool same = w->dtype == f->dtype && w->ndim == ndim;
      for (int d = 0; same && d < ndim; d++) same = w->shape[d] == shape[d];
      if (!same)
        return pk_fe_fail(f, where, "'%s' holds it as %s %s, the model says %s %s",
                          f->weights_path, pkrt_dtype_name(w->dtype),
                          pk_fe_shape_str(f, w->ndim, w->shape), pkrt_dtype_name(f->dtype),
                          pk_fe_shape_str(f, ndim, shape));
      data = w->data;
    }
    const char *role = "param";
    if ((s = pk_fe_string(f, where, it, "role", false, &role)) != PK_OK) return s;
    int id;
    if (strcmp(role, "param") == 0)
      id = pk_graph_add_param(f->g, name, f->dtype, ndim, shape, data);
    else if (strcmp(role, "buffer") == 0 || strcmp(role, "constant") == 0)
      id = pk_graph_add_buffer(f->g, name, role[0] == 'b' ? PK_ROLE_BUFFER : PK_ROLE_CONSTANT,
                               f->dtype, ndim, shape, data);
    else
      return pk_fe_fail(f, where, "role %s is not \"param\", \"buffer\" or \"constant\"",
                        pk_fe_quote(f, role));
    if (id < 0) return fe_wrap(f, where);
  }
  return PK_OK;
}

static bool fe_node_name_seen(pk_fe *f, const char *name) {
  for (int i = 0; i < f->nnode_names; i++)
    if (strcmp(f->node_names[i], name) == 0) return true;
  return false;
}

/* "output": name (the result), or, in version 2, "outputs": [names] naming every compute of
 * the op's program in order (stages first, the result last). Each name is new. */
static pk_status fe_node_outputs(pk_fe *f, const char *where, const cJSON *it, int *n,
                                 const char ***names) {
  pk_status s = fe_v2_key(f, where, it, "outputs");
  if (s != PK_OK) return s;
  const cJSON *arr = pk_fe_get(it, "outputs");
  if (arr && pk_fe_get(it, "output"))
    return pk_fe_fail(f, where, "give 'output' or 'outputs', not both");
  if (!arr) {
    const char **one = pk_alloc(f->ctx, sizeof *one);
    if ((s = pk_fe_string(f, where, it, "output", true, &one[0])) != PK_OK ||
        (s = pk_fe_check_name(f, where, one[0])) != PK_OK)
      return s;
    if (pk_graph_find(f->g, one[0]) >= 0)
      return pk_fe_fail(f, where, "output %s: duplicate tensor name", pk_fe_quote(f, one[0]));
    *n = 1, *names = one;
    return PK_OK;
  }
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1)
    return pk_fe_fail(f, where, "key 'outputs' must be a non-empty array of names");
  int k = cJSON_GetArraySize(arr);
  if (k > PK_FE_MAX_ITEMS) return pk_fe_fail(f, where, "too many outputs");
  const char **v = pk_alloc(f->ctx, sizeof *v * (size_t)k);
  int i = 0;
  for (const cJSON *e = arr->child; e; e = e->next, i++) {
    if (!cJSON_IsString(e)) return pk_fe_fail(f, where, "outputs[%d] must be a string", i);
    v[i] = pk_strdup(f->ctx, e->valuestring);
    if ((s = pk_fe_check_name(f, where, v[i])) != PK_OK) return s;
    if (pk_graph_find(f->g, v[i]) >= 0)
      return pk_fe_fail(f, where, "outputs[%d] %s: duplicate tensor name", i, pk_fe_quote(f, v[i]));
    for (int j = 0; j < i; j++)
      if (strcmp(v[j], v[i]) == 0)
        return pk_fe_fail(f, where, "outputs[%d] %s: named twice", i, pk_fe_quote(f, v[i]));
  }
  *n = k, *names = v;
  return PK_OK;
}

/* One node: {"name", "op", "inputs": [...], "output" | "outputs", "attrs"?}. */
static pk_status fe_node(pk_fe *f, int index, const cJSON *it) {
  const char *where = pk_sprintf(f->ctx, "nodes[%d]", index);
  const char *name = NULL, *opname = NULL, *out = NULL;
  pk_status s;
  if ((s = pk_fe_keys(f, where, it, NODE_KEYS)) != PK_OK ||
      (s = pk_fe_string(f, where, it, "name", true, &name)) != PK_OK ||
      (s = pk_fe_check_name(f, where, name)) != PK_OK)
    return s;
  where = pk_sprintf(f->ctx, "node %s", pk_fe_quote(f, name));
  if (fe_node_name_seen(f, name))
    return pk_fe_fail(f, where, "duplicate node name");
  f->node_names[f->nnode_names++] = name;
  if ((s = pk_fe_string(f, where, it, "op", true, &opname)) != PK_OK) return s;
  pk_op_kind op = pk_op_from_name(opname);
  if (op == PK_OP_COUNT_)
    return pk_fe_fail(f, where, "unknown op %s (te/ops/op_table.def lists them)",
                      pk_fe_quote(f, opname));
  /* Losses and optimizer updates come from the "training" object, never from the model:
   * pk_train_build adds them where the sparse spec says. */
  if (pk_op_flags(op) & PK_OPF_TRAINING)
      return pk_fe_fail(f, where, "op '%s' is added by Pock for training; a model graph "
                        "names its loss in \"training\" instead", opname);
  const cJSON *ins = pk_fe_get(it, "inputs");
  if (!ins) return pk_fe_fail(f, where, "missing key 'inputs'");
  if (!cJSON_IsArray(ins)) return pk_fe_fail(f, where, "key 'inputs' must be an array");
  /* the inputs the graph supplies (dropout's (seed, step), batch norm's H) are not named */
  int n = cJSON_GetArraySize(ins), lo, hi;
  pk_op_model_input_range(op, &lo, &hi);
  if (n < lo || n > hi)
    return lo == hi ? pk_fe_fail(f, where, "op '%s' takes %d input%s, not %d", pk_op_name(op),
                                 hi, hi == 1 ? "" : "s", n)
                    : pk_fe_fail(f, where, "op '%s' takes %d to %d inputs, not %d",
                                 pk_op_name(op), lo, hi, n);
  int ids[PK_OP_MAX_INPUTS];
  int k = 0;
  for (const cJSON *v = ins->child; v; v = v->next, k++) {
    if (!cJSON_IsString(v)) return pk_fe_fail(f, where, "inputs[%d] must be a string", k);
    ids[k] = pk_graph_find(f->g, v->valuestring);
    if (ids[k] < 0)
      return pk_fe_fail(f, where,
                        "unknown input %s (not an input, a param or an earlier node's output)",
                        pk_fe_quote(f, v->valuestring));
  }
  int nout = 0;
  const char **outs = NULL;
  if ((s = fe_node_outputs(f, where, it, &nout, &outs)) != PK_OK) return s;
  out = outs[nout - 1];
  pk_op_attrs attrs;
  memset(&attrs, 0, sizeof attrs);
  if ((s = pk_fe_attrs(f, where, op, pk_fe_get(it, "attrs"), ids, n, &attrs)) != PK_OK)
    return s;
  int y;
  if (pk_graph_add_op(f->g, name, op, &attrs, n, ids, out, &y) != PK_OK)
    return fe_wrap(f, where);
  if (nout > 1 || pk_fe_get(it, "outputs")) {
    if (pk_graph_name_outputs(f->g, f->g->nnodes - 1, nout, outs) != PK_OK)
      return fe_wrap(f, where);
  }
  return PK_OK;
}

static pk_status fe_nodes(pk_fe *f, const cJSON *root) {
  const cJSON *arr;
  int n;
  pk_status s = pk_fe_array(f, NULL, root, "nodes", PK_FE_MAX_ITEMS, &arr, &n);
  if (s != PK_OK) return s;
  f->node_names = pk_alloc(f->ctx, (size_t)n * sizeof *f->node_names);
  int i = 0;
  for (const cJSON *it = arr->child; it; it = it->next, i++)
    if ((s = fe_node(f, i, it)) != PK_OK) return s;
  return PK_OK;
}

static pk_status fe_output(pk_fe *f, const cJSON *root) {
  const char *out = NULL;
  pk_status s = pk_fe_string(f, NULL, root, "output", true, &out);
  if (s != PK_OK) return s;
  int id = pk_graph_find(f->g, out);
  if (id < 0) return pk_fe_fail(f, NULL, "output %s names no tensor", pk_fe_quote(f, out));
  if (f->g->tensors[id]->producer < 0)
    return pk_fe_fail(f, NULL, "output %s is not produced by a node", pk_fe_quote(f, out));
  f->g->output = id;
  return PK_OK;
}

/* format, version, name, dtype, weights_file: what the rest is read with. */
static pk_status fe_header(pk_fe *f, const cJSON *root, pk_model_info *info) {
  pk_status s;
  const char *format = NULL, *dtype = "f32", *wf = NULL;
  int64_t version = 0;
  if ((s = pk_fe_keys(f, NULL, root, ROOT_KEYS)) != PK_OK ||
      (s = pk_fe_string(f, NULL, root, "format", true, &format)) != PK_OK)
    return s;
  if (strcmp(format, "pock-graph") != 0)
    return pk_fe_fail(f, NULL, "format is %s, expected 'pock-graph'", pk_fe_quote(f, format));
  if ((s = pk_fe_int(f, NULL, root, "version", true, INT32_MIN, INT32_MAX, &version)) != PK_OK)
    return s;
  if (version < 1 || version > PK_FE_VERSION)
    return pk_fe_fail(f, NULL, "version %lld is not supported (this Pock reads versions 1 to %d)",
                      (long long)version, PK_FE_VERSION);
  f->version = version;
  const char *name = NULL;
  if ((s = pk_fe_string(f, NULL, root, "name", false, &name)) != PK_OK ||
      (s = pk_fe_string(f, NULL, root, "dtype", false, &dtype)) != PK_OK ||
      (s = pk_fe_string(f, NULL, root, "weights_file", false, &wf)) != PK_OK)
    return s;
  info->name = pk_strdup(f->ctx, name); /* the cJSON tree dies before info does */
  if (strcmp(dtype, "f32") == 0)
    f->dtype = PKRT_DTYPE_F32;
  else if (strcmp(dtype, "f64") == 0)
    f->dtype = PKRT_DTYPE_F64;
  else
    return pk_fe_fail(f, NULL, "dtype %s is not f32 or f64", pk_fe_quote(f, dtype));
  if (wf) {
    if (!wf[0]) return pk_fe_fail(f, NULL, "weights_file is empty");
    /* The path goes into messages, which reach terminals: no control characters. */
    for (const char *c = wf; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f)
        return pk_fe_fail(f, NULL, "weights_file %s has a control character",
                          pk_fe_quote(f, wf));
    f->weights_path = wf[0] == '/' || !f->dir[0] ? pk_strdup(f->ctx, wf)
                                                 : pk_sprintf(f->ctx, "%s/%s", f->dir, wf);
  }
  return PK_OK;
}

/* The model's name when the file gives none: its base name without the extension. */
static const char *fe_default_name(pk_fe *f) {
  const char *base = strrchr(f->file, '/');
  base = base ? base + 1 : f->file;
  const char *dot = strrchr(base, '.');
  size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  return n ? pk_strndup(f->ctx, base, n) : "model";
}

static pk_status fe_root(pk_fe *f, const cJSON *root, pk_model_info *info) {
  if (!cJSON_IsObject(root)) return pk_fe_fail(f, NULL, "the top level must be an object");
  pk_status s;
  if ((s = fe_header(f, root, info)) != PK_OK) return s;
  if (!info->name) info->name = fe_default_name(f);
  f->g = pk_graph_new(f->ctx, f->batch);
  if ((s = fe_inputs(f, root)) != PK_OK || (s = fe_params(f, root)) != PK_OK ||
      (s = fe_nodes(f, root)) != PK_OK || (s = fe_output(f, root)) != PK_OK)
    return s;
  if (pk_graph_validate(f->g) != PK_OK) return fe_wrap(f, NULL);
  return pk_fe_training(f, pk_fe_get(root, "training"), info);
}

pk_status pk_frontend_json(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                           int64_t batch, pk_graph **out, pk_model_info *info) {
  pk_model_info scratch;
  if (!info) info = &scratch;
  memset(info, 0, sizeof *info);
  *out = NULL;
  pk_fe f = {.ctx = ctx, .file = filename && filename[0] ? filename : "<graph>", .dir = ""};
  const char *slash = strrchr(f.file, '/');
  if (slash) f.dir = slash == f.file ? "/" : pk_strndup(ctx, f.file, (size_t)(slash - f.file));
  if (batch < 1 || batch > PK_OP_MAX_EXTENT)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: batch %lld is outside 1..%d", f.file,
                       (long long)batch, PK_OP_MAX_EXTENT);
  f.batch = batch;
  if (!text) return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: no text", f.file);
  /* cJSON would hand "a\u0000b" back as the name "a": a NUL never reaches a name. */
  long nul = pk_json_nul_escape(text, len);
  if (nul >= 0) {
    int line = 1, col = 1;
    for (long i = 0; i < nul; i++) {
      if (text[i] == '\n') line++, col = 1;
      else col++;
    }
    return pk_ctx_fail(ctx, PK_ERR_CHECK,
                       "%s:%d:%d: a NUL character (\\u0000 or a zero byte): names cannot hold one",
                       f.file, line, col);
  }

  const char *end = text;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
  if (root) {
    /* cJSON stops after the first value; anything but blanks after it is an error. */
    while (end < text + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
      end++;
    if (end < text + len) {
      cJSON_Delete(root);
      root = NULL;
    }
  }
  if (!root) {
    if (!end || end < text || end > text + len) end = text;
    int line = 1, col = 1;
    for (const char *p = text; p < end; p++) {
      if (*p == '\n') line++, col = 1;
      else col++;
    }
    /* cJSON points at the last byte when the text ends early: say so. */
    const char *rest = end;
    while (rest < text + len && (*rest == ' ' || *rest == '\t' || *rest == '\n' || *rest == '\r'))
      rest++;
    return pk_ctx_fail(ctx, PK_ERR_SYNTAX, "%s:%d:%d: not valid JSON%s", f.file, line, col,
                       rest == text + len ? " (the text ends too early)" : "");
  }
  pk_status s = fe_root(&f, root, info);
  cJSON_Delete(root);
  pk_fe_weights_close(&f);
  if (s == PK_OK) *out = f.g;
  return s;
}

pk_status pk_frontend_load_opts(pk_ctx *ctx, const char *path, const pk_frontend_opts *opts,
                                pk_graph **out, pk_model_info *info) {
  *out = NULL;
  if (info) memset(info, 0, sizeof *info);
  size_t n = strlen(path);
  if (n >= 5 && strcmp(path + n - 5, ".onnx") == 0)
    return pk_frontend_onnx(ctx, path, opts, out, info);
  if (opts->nshapes)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: --input-shape applies to ONNX models (a JSON "
                       "graph's shapes are static but the batch)", path);
  char *text;
  size_t len;
  pk_status s = pk_read_file(ctx, path, &text, &len);
  if (s != PK_OK) return s;
  return pk_frontend_json(ctx, text, len, path, opts->batch, out, info);
}

pk_status pk_frontend_load(pk_ctx *ctx, const char *path, int64_t batch, pk_graph **out,
                           pk_model_info *info) {
  pk_frontend_opts o = {.batch = batch};
  return pk_frontend_load_opts(ctx, path, &o, out, info);
}
