/* onnx_import.c — an ONNX ModelProto → forward graph IR: unsupported ops listed at once,
 * graph inputs bound to static shapes, initializers as values, nodes converted in order
 * (folded at import where every input is a constant), the output, and pk_model_info (a
 * training JSON beside the model). The pipeline is described in onnx_impl.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_impl.h"
#include "onnx_impl.h"

/* ---- the op table ---- */

static const pk_ox_op_info OX_OPS[] = {
#define PK_OX_OP(type, convert, fold) {type, convert, fold},
#include "onnx_ops.def"
#undef PK_OX_OP
};

const pk_ox_op_info *pk_ox_op_find(const char *type) {
  for (size_t i = 0; i < sizeof OX_OPS / sizeof OX_OPS[0]; i++)
    if (strcmp(OX_OPS[i].type, type) == 0) return &OX_OPS[i];
  return NULL;
}

pk_status pk_ox_nofold(pk_ox *im, pk_ox_node *nd) {
  return pk_ox_fail(im, nd, "internal: no fold function"); /* never called: see ox_node */
}

static bool ox_default_domain(const char *d) { return !d || !d[0] || strcmp(d, "ai.onnx") == 0; }

/* Every op type Pock cannot convert, with its count and first node, in one message. */
static pk_status ox_unsupported(pk_ox *im) {
  const Onnx__GraphProto *gp = im->model->graph;
  pk_strbuf b;
  pk_strbuf_init(&b);
  int kinds = 0;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *n = gp->node[i];
    const char *type = n->op_type ? n->op_type : "";
    bool ok = ox_default_domain(n->domain) && pk_ox_op_find(type);
    if (ok) continue;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; j++) {
      const Onnx__NodeProto *m = gp->node[j];
      seen = strcmp(m->op_type ? m->op_type : "", type) == 0 &&
             strcmp(m->domain ? m->domain : "", n->domain ? n->domain : "") == 0;
    }
    if (seen) continue;
    int count = 0;
    for (size_t j = i; j < gp->n_node; j++) {
      const Onnx__NodeProto *m = gp->node[j];
      count += strcmp(m->op_type ? m->op_type : "", type) == 0 &&
               strcmp(m->domain ? m->domain : "", n->domain ? n->domain : "") == 0;
    }
    const char *full = ox_default_domain(n->domain)
                           ? pk_ox_quote(im, type)
                           : pk_ox_quote(im, pk_sprintf(im->ctx, "%s::%s", n->domain, type));
    const char *first = n->name && n->name[0] ? pk_ox_quote(im, n->name)
                                              : pk_sprintf(im->ctx, "#%zu", i);
    pk_strbuf_printf(&b, "%s%s (%d node%s, first %s)", kinds ? "; " : "", full, count,
                     count == 1 ? "" : "s", first);
    kinds++;
  }
  const char *list = pk_strbuf_finish(im->ctx, &b);
  if (!kinds) return PK_OK;
  return pk_ctx_fail(im->ctx, PK_ERR_UNSUPPORTED,
                     "%s: %d operator type%s Pock does not support (docs/onnx.md lists what it "
                     "does): %s", im->file, kinds, kinds == 1 ? "" : "s", list);
}

/* ---- initializers and inputs ---- */

static pk_status ox_initializers(pk_ox *im) {
  const Onnx__GraphProto *gp = im->model->graph;
  if (gp->n_sparse_initializer)
    return pk_ox_fail_at(im, NULL, "sparse initializers are not supported");
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    if (!t->name || !t->name[0])
      return pk_ox_fail_at(im, NULL, "initializer #%zu has no name", i);
    const char *where = pk_sprintf(im->ctx, "initializer %s", pk_ox_quote(im, t->name));
    int id;
    pk_status s = pk_ox_new_value(im, t->name, &id);
    if (s != PK_OK) return s;
    pk_ox_value *v = pk_ox_val(im, id);
    pkrt_dtype dt;
    bool is_bool;
    int ndim;
    int64_t shape[PK_TE_MAX_DIMS];
    const void *data;
    if ((s = pk_ox_tensor_data(im, where, t, &dt, &is_bool, &ndim, shape, &data)) != PK_OK)
      return s;
    v = pk_ox_val(im, id);
    v->kind = dt == PKRT_DTYPE_I64 ? PK_OXV_CONST : PK_OXV_PARAM;
    v->defined = true;
    v->dtype = dt;
    v->is_bool = is_bool;
    v->ndim = ndim;
    memcpy(v->shape, shape, sizeof shape[0] * (size_t)ndim);
    v->data = data;
  }
  return PK_OK;
}

/* The model's float dtype: f32 unless the graph's float inputs and initializers are all
 * double (a float model may carry a double constant; it is converted). */
static void ox_float_dtype(pk_ox *im) {
  const Onnx__GraphProto *gp = im->model->graph;
  bool f32 = false, f64 = false;
  for (size_t i = 0; i < gp->n_initializer; i++) {
    int dt = gp->initializer[i]->data_type;
    f32 |= dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    f64 |= dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
  }
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__TypeProto *tp = gp->input[i]->type;
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type) {
      int dt = tp->tensor_type->elem_type;
      f32 |= dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
      f64 |= dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    }
  }
  im->fdtype = f64 && !f32 ? PKRT_DTYPE_F64 : PKRT_DTYPE_F32;
}

static const pk_ox_shape_binding *ox_binding(pk_ox *im, const char *name) {
  for (int i = 0; i < im->nbindings; i++)
    if (strcmp(im->bindings[i].name, name) == 0) return &im->bindings[i];
  return NULL;
}

/* Is dim 0 of graph input i symbolic? */
static bool ox_dim0_symbolic(const Onnx__ValueInfoProto *vi) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
      !tp->tensor_type->shape || tp->tensor_type->shape->n_dim == 0)
    return false;
  const Onnx__TensorShapeProto__Dimension *d = tp->tensor_type->shape->dim[0];
  return d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
}

/* first: the model's first fed input, whose static dim 0 is the batch when no input has a
 * symbolic one (the batch must then agree); later inputs with another dim 0 are unbatched. */
static pk_status ox_input(pk_ox *im, const Onnx__ValueInfoProto *vi, bool any_symbolic,
                          bool first) {
  const char *where = pk_sprintf(im->ctx, "input %s", pk_ox_quote(im, vi->name));
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return pk_ox_fail_at(im, where, "is not a tensor (sequences, maps and optionals are not "
                         "supported)");
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  pkrt_dtype dt;
  bool is_bool = false;
  switch (tt->elem_type) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    dt = im->fdtype;
    break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: dt = PKRT_DTYPE_I64; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: dt = PKRT_DTYPE_I32; break;
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: dt = PKRT_DTYPE_I64, is_bool = true; break;
  default:
    return pk_ox_fail_at(im, where, "element type %d is not float, double, int64, int32 or "
                         "bool", (int)tt->elem_type);
  }
  if (!tt->shape)
    return pk_ox_fail_at(im, where, "has no shape (give it with --input-shape %s=...)",
                         vi->name);
  size_t nd = tt->shape->n_dim;
  if (nd > PK_TE_MAX_DIMS)
    return pk_ox_fail_at(im, where, "rank %zu is above Pock's %d", nd, PK_TE_MAX_DIMS);
  const pk_ox_shape_binding *bind = ox_binding(im, vi->name);
  if (bind && bind->ndim != (int)nd)
    return pk_ox_fail_at(im, where, "--input-shape gives %d dims, the model has %zu",
                         bind->ndim, nd);
  int64_t shape[PK_TE_MAX_DIMS];
  bool batched = nd > 0;
  for (size_t d = 0; d < nd; d++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
    bool known = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    if (known && (dim->dim_value < 1 || dim->dim_value > PK_OP_MAX_EXTENT))
      return pk_ox_fail_at(im, where, "dim %zu is %lld", d, (long long)dim->dim_value);
    if (d == 0) {
      /* dim 0 is the batch when symbolic; a static dim 0 is the batch when it equals it
       * (a model exported without dynamic axes), else the input has no batch dim */
      if (known && dim->dim_value != im->batch) {
        if (!any_symbolic && first)
          return pk_ox_fail_at(im, where, "the model's batch is fixed at %lld (dim 0 is not "
                               "symbolic): compile with --batch %lld, or export with "
                               "dynamic_axes={'%s': {0: 'N'}}", (long long)dim->dim_value,
                               (long long)dim->dim_value, vi->name);
        batched = false;
      }
      shape[0] = known ? dim->dim_value : im->batch;
      if (bind && bind->shape[0] != im->batch && !known)
        return pk_ox_fail_at(im, where, "--input-shape gives dim 0 = %lld, the batch is %lld",
                             (long long)bind->shape[0], (long long)im->batch);
      continue;
    }
    if (known) {
      if (bind && bind->shape[d] != dim->dim_value)
        return pk_ox_fail_at(im, where, "--input-shape gives dim %zu = %lld, the model says "
                             "%lld", d, (long long)bind->shape[d], (long long)dim->dim_value);
      shape[d] = dim->dim_value;
    } else if (bind) {
      shape[d] = bind->shape[d];
    } else {
      const char *sym = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                                dim->dim_param
                            ? pk_ox_quote(im, dim->dim_param)
                            : "(unnamed)";
      return pk_ox_fail_at(im, where, "dim %zu is symbolic %s: bind it with --input-shape "
                           "%s=d0,d1,... (dim 0 is the batch)", d, sym, vi->name);
    }
  }
  int id;
  pk_status s = pk_ox_new_value(im, vi->name, &id);
  if (s != PK_OK) return s;
  int ndim = nd ? (int)nd : 1;
  int64_t one = 1;
  int t = pk_graph_add_tensor(im->g, vi->name, PK_ROLE_INPUT, dt, ndim, nd ? shape : &one);
  if (t < 0) {
    const char *msg = pk_strdup(im->ctx, pk_ctx_error(im->ctx));
    pk_ctx_clear_error(im->ctx);
    return pk_ox_fail_at(im, where, "%s", msg);
  }
  im->g->tensors[t]->no_batch = !batched;
  pk_ox_value *v = pk_ox_val(im, id);
  v->kind = PK_OXV_INPUT;
  v->defined = true;
  v->dtype = dt;
  v->is_bool = is_bool;
  v->ndim = (int)nd;
  if (nd) memcpy(v->shape, shape, sizeof shape[0] * nd);
  v->tensor = t;
  return PK_OK;
}

static pk_status ox_inputs(pk_ox *im) {
  const Onnx__GraphProto *gp = im->model->graph;
  /* every binding names a fed input (checked first: a typo explains any symbolic dim) */
  for (int i = 0; i < im->nbindings; i++) {
    bool found = false;
    for (size_t k = 0; k < gp->n_input && !found; k++)
      found = gp->input[k]->name && strcmp(gp->input[k]->name, im->bindings[i].name) == 0 &&
              pk_ox_find(im, im->bindings[i].name) < 0;
    if (!found)
      return pk_ox_fail_at(im, NULL, "--input-shape names %s, which is not a graph input",
                           pk_ox_quote(im, im->bindings[i].name));
  }
  bool any_symbolic = false;
  for (size_t i = 0; i < gp->n_input; i++)
    if (gp->input[i]->name && pk_ox_find(im, gp->input[i]->name) < 0)
      any_symbolic |= ox_dim0_symbolic(gp->input[i]);
  int n = 0;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (!vi->name || !vi->name[0])
      return pk_ox_fail_at(im, NULL, "graph input #%zu has no name", i);
    /* IR < 4 lists initializers among the inputs too: they are not fed */
    if (pk_ox_find(im, vi->name) >= 0) continue;
    /* input names are fed by name and appear in messages as given: plain text only */
    bool plain = strlen(vi->name) <= 255;
    for (const char *c = vi->name; plain && *c; c++)
      plain = (unsigned char)*c >= 0x20 && *c != 0x7f && *c != '(' && *c != ')';
    if (!plain)
      return pk_ox_fail_at(im, NULL, "input name %s is not plain text (control bytes and "
                           "parentheses are refused; at most 255 bytes)",
                           pk_ox_quote(im, vi->name));
    pk_status s = ox_input(im, vi, any_symbolic, n == 0);
    if (s != PK_OK) return s;
    n++;
  }
  if (!n) return pk_ox_fail_at(im, NULL, "the graph has no inputs to feed");
  return PK_OK;
}

/* ---- nodes ---- */

/* A unique name for node i: its own, or "<OpType>_<i>" when empty or taken. Node names
 * share the graph's tensor namespace check loosely: graph node names only need to be
 * unique among nodes, which "#i" guarantees. */
static const char *ox_node_name(pk_ox *im, const Onnx__NodeProto *n, size_t i,
                                const char **seen, size_t nseen) {
  const char *want = n->name && n->name[0] ? n->name : NULL;
  if (want && (strchr(want, '(') || strchr(want, ')') || strlen(want) > 200)) want = NULL;
  for (const char *c = want; c && *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) want = NULL;
  if (want) {
    for (size_t j = 0; j < nseen; j++)
      if (strcmp(seen[j], want) == 0) return pk_sprintf(im->ctx, "%s#%zu", want, i);
    return pk_strdup(im->ctx, want);
  }
  return pk_sprintf(im->ctx, "%s_%zu", n->op_type && strlen(n->op_type) < 64 ? n->op_type : "node", i);
}

static pk_status ox_node(pk_ox *im, size_t i, const char *name) {
  const Onnx__NodeProto *n = im->model->graph->node[i];
  const pk_ox_op_info *op = pk_ox_op_find(n->op_type);
  pk_ox_node nd;
  memset(&nd, 0, sizeof nd);
  nd.p = n;
  nd.index = (int)i;
  nd.name = name;
  nd.where = pk_sprintf(im->ctx, "node %s (%s)", pk_ox_quote(im, name), n->op_type);
  if (n->n_input > PK_OX_MAX_IO || n->n_output > PK_OX_MAX_IO)
    return pk_ox_fail(im, &nd, "has more than %d inputs or outputs", PK_OX_MAX_IO);
  nd.nin = (int)n->n_input;
  nd.nout = (int)n->n_output;
  bool all_const = true;
  for (int k = 0; k < nd.nin; k++) {
    const char *in = n->input[k];
    if (!in || !in[0]) {
      nd.in[k] = -1;
      continue;
    }
    nd.in[k] = pk_ox_find(im, in);
    if (nd.in[k] < 0 || !pk_ox_val(im, nd.in[k])->defined)
      return pk_ox_fail(im, &nd, "input %s is not produced by an earlier node, an initializer "
                        "or a graph input (nodes must be in topological order)",
                        pk_ox_quote(im, in));
    all_const &= pk_ox_val(im, nd.in[k])->kind == PK_OXV_CONST;
  }
  for (int k = 0; k < nd.nout; k++) {
    const char *out = n->output[k];
    if (!out || !out[0]) {
      nd.out[k] = -1;
      continue;
    }
    pk_status s = pk_ox_new_value(im, out, &nd.out[k]);
    if (s != PK_OK) return pk_ox_fail(im, &nd, "output %s is already defined", pk_ox_quote(im, out));
  }
  bool folding = all_const && nd.nin > 0 && op->fold != pk_ox_nofold;
  /* Folding is for shape arithmetic: a large constant subgraph stays in the graph. */
  for (int k = 0; folding && k < nd.nin; k++) {
    pk_ox_value *v = pk_ox_in(im, &nd, k);
    folding = !v || pk_ox_numel(v->ndim, v->shape) <= PK_OX_MAX_FOLD;
  }
  pk_status s = folding ? op->fold(im, &nd) : op->convert(im, &nd);
  if (s != PK_OK) return s;
  for (int k = 0; k < nd.nout; k++)
    if (nd.out[k] >= 0 && !pk_ox_val(im, nd.out[k])->defined)
      return pk_ox_fail(im, &nd, "output %d is not supported by Pock's converter", k);
  return PK_OK;
}

static pk_status ox_nodes(pk_ox *im) {
  const Onnx__GraphProto *gp = im->model->graph;
  const char **seen = pk_alloc(im->ctx, sizeof *seen * (gp->n_node ? gp->n_node : 1));
  pk_status s = pk_ox_patterns_find(im);
  if (s != PK_OK) return s;
  for (size_t i = 0; i < gp->n_node; i++) {
    seen[i] = ox_node_name(im, gp->node[i], i, seen, i);
    int ch = im->chain_of[i];
    if (ch < 0) {
      if ((s = ox_node(im, i, seen[i])) != PK_OK) return s;
      continue;
    }
    const pk_ox_chain *c = &im->chains[ch];
    if (c->last != (int)i) continue; /* deferred to the chain's last node */
    bool done;
    if ((s = pk_ox_chain_emit(im, c, seen[i], &done)) != PK_OK) return s;
    /* not the module after all: its nodes one by one, in file order */
    for (size_t j = 0; !done && j <= i; j++)
      if (im->chain_of[j] == ch && (s = ox_node(im, j, seen[j])) != PK_OK) return s;
  }
  return PK_OK;
}

static pk_status ox_output(pk_ox *im) {
  const Onnx__GraphProto *gp = im->model->graph;
  if (gp->n_output < 1) return pk_ox_fail_at(im, NULL, "the graph has no outputs");
  const char *name = gp->output[0]->name ? gp->output[0]->name : "";
  int id = pk_ox_find(im, name);
  if (id < 0) return pk_ox_fail_at(im, NULL, "output %s is never produced", pk_ox_quote(im, name));
  pk_ox_value *v = pk_ox_val(im, id);
  if (v->kind != PK_OXV_TENSOR || v->tensor < 0 || im->g->tensors[v->tensor]->producer < 0)
    return pk_ox_fail_at(im, NULL, "output %s is not computed from the inputs (a constant, a "
                         "weight or an input passed through)", pk_ox_quote(im, name));
  im->g->output = v->tensor;
  return PK_OK;
}

/* ---- training info ---- */

/* "model.onnx" → "model.training.json" beside it, read when present. */
static pk_status ox_training(pk_ox *im, const char *path, pk_model_info *info) {
  size_t n = strlen(path);
  const char *stem = n > 5 && strcmp(path + n - 5, ".onnx") == 0 ? pk_strndup(im->ctx, path, n - 5)
                                                                  : path;
  const char *tpath = pk_sprintf(im->ctx, "%s.training.json", stem);
  pk_fe f = {.ctx = im->ctx, .file = tpath, .dir = im->dir, .batch = im->batch,
             .dtype = im->fdtype, .version = 2, .g = im->g};
  cJSON *root = NULL;
  if (access(tpath, F_OK) == 0) {
    char *text;
    size_t len;
    pk_status s = pk_read_file(im->ctx, tpath, &text, &len);
    if (s != PK_OK) return s;
    root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root)) {
      cJSON_Delete(root);
      return pk_ctx_fail(im->ctx, PK_ERR_SYNTAX, "%s: not a JSON object (the \"training\" "
                         "object of docs/graph-format.md)", tpath);
    }
  }
  pk_status s = pk_fe_training(&f, root, info);
  /* exported in training mode, batch norms train with batch statistics (model.train())
   * unless the training file says otherwise */
  if (s == PK_OK && (!root || !pk_fe_get(root, "bn_mode"))) info->train.bn_train_all = im->bn_training;
  cJSON_Delete(root);
  return s;
}

static const char *ox_default_name(pk_ctx *ctx, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  return n ? pk_strndup(ctx, base, n) : "model";
}

/* The import proper, from the unpacked model in im. */
static pk_status ox_import(pk_ox *im, const char *path, pk_model_info *info) {
  im->g = pk_graph_new(im->ctx, im->batch);
  pk_status s;
  if ((s = pk_ox_check_model(im)) != PK_OK || (s = ox_unsupported(im)) != PK_OK) return s;
  ox_float_dtype(im);
  if ((s = ox_initializers(im)) != PK_OK || (s = ox_inputs(im)) != PK_OK ||
      (s = ox_nodes(im)) != PK_OK || (s = ox_output(im)) != PK_OK)
    return s;
  if (pk_graph_validate(im->g) != PK_OK) {
    const char *msg = pk_strdup(im->ctx, pk_ctx_error(im->ctx));
    pk_ctx_clear_error(im->ctx);
    return pk_ox_fail_at(im, NULL, "%s", msg);
  }
  /* exporters name every graph alike ("main_graph", "torch_jit"): the file names it */
  info->name = ox_default_name(im->ctx, im->file);
  if (!path) return pk_fe_training(&(pk_fe){.ctx = im->ctx, .file = im->file, .g = im->g},
                                   NULL, info);
  return ox_training(im, path, info);
}

/* Shared set-up of the two entry points; returns PK_OK or the failure for a bad batch. */
static pk_status ox_begin(pk_ox *im, pk_ctx *ctx, const char *file,
                          const pk_frontend_opts *opts, pk_graph **out, pk_model_info *info) {
  memset(info, 0, sizeof *info);
  *out = NULL;
  *im = (pk_ox){.ctx = ctx, .file = file, .dir = NULL, .batch = opts->batch,
                .bindings = (const pk_ox_shape_binding *)opts->shapes,
                .nbindings = opts->nshapes};
  _Static_assert(sizeof(pk_ox_shape_binding) == sizeof(pk_input_shape),
                 "the public and internal bindings are one layout");
  if (opts->batch < 1 || opts->batch > PK_OP_MAX_EXTENT)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: batch %lld is outside 1..%d", file,
                       (long long)opts->batch, PK_OP_MAX_EXTENT);
  if (opts->nshapes < 0 || (opts->nshapes && !opts->shapes))
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: bad --input-shape list", file);
  return PK_OK;
}

pk_status pk_frontend_onnx(pk_ctx *ctx, const char *path, const pk_frontend_opts *opts,
                           pk_graph **out, pk_model_info *info) {
  pk_model_info scratch;
  if (!info) info = &scratch;
  pk_ox im;
  pk_status s = ox_begin(&im, ctx, path, opts, out, info);
  if (s != PK_OK) return s;
  const char *slash = strrchr(path, '/');
  im.dir = !slash ? "" : slash == path ? "/" : pk_strndup(ctx, path, (size_t)(slash - path));
  if ((s = pk_ox_read_model(&im, path, &im.model)) != PK_OK) return s;
  s = ox_import(&im, path, info);
  onnx__model_proto__free_unpacked(im.model, NULL);
  if (s == PK_OK) *out = im.g;
  return s;
}

pk_status pk_frontend_onnx_mem(pk_ctx *ctx, const void *buf, size_t len, const char *name,
                               const pk_frontend_opts *opts, pk_graph **out,
                               pk_model_info *info) {
  pk_model_info scratch;
  if (!info) info = &scratch;
  pk_ox im;
  pk_status s = ox_begin(&im, ctx, name && name[0] ? name : "<onnx>", opts, out, info);
  if (s != PK_OK) return s;
  if ((s = pk_ox_unpack_model(&im, buf, len, NULL, &im.model)) != PK_OK) return s;
  s = ox_import(&im, NULL, info);
  onnx__model_proto__free_unpacked(im.model, NULL);
  if (s == PK_OK) *out = im.g;
  return s;
}
