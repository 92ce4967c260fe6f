/* onnx_export.c — `pock export`: the ONNX model a user fine-tuned, with its initializers
 * replaced by the trained values (matched by name: Pock's params are the initializers
 * verbatim, a Transpose-reached weight included) and its training-mode nodes switched to
 * inference, packed back with protobuf-c. Everything else in the file is kept as it was. */
#include <stdio.h>
#include <string.h>

#include "onnx_impl.h"
#include "pk_json_check.h"

typedef struct exporter {
  pk_ctx *ctx;
  const char *file;
  Onnx__GraphProto *g;
} exporter;

/* A user string fit for a message: quoted, control bytes escaped, long ones cut. */
static const char *q(exporter *E, const char *s) { return pk_json_quote(E->ctx, s ? s : ""); }

static const char *node_where(exporter *E, const Onnx__NodeProto *n, size_t index) {
  const char *name = n->name && n->name[0] ? q(E, n->name) : pk_sprintf(E->ctx, "#%zu", index);
  return pk_sprintf(E->ctx, "node %s (%s)", name, n->op_type ? n->op_type : "?");
}

static bool is_default_domain(const Onnx__NodeProto *n) {
  return !n->domain || !n->domain[0] || !strcmp(n->domain, "ai.onnx");
}

static Onnx__TensorProto *find_initializer(exporter *E, const char *name) {
  for (size_t i = 0; i < E->g->n_initializer; i++)
    if (E->g->initializer[i]->name && !strcmp(E->g->initializer[i]->name, name))
      return E->g->initializer[i];
  return NULL;
}

static const char *dims_str(exporter *E, int n, const int64_t *d) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_append(&b, "(");
  for (int i = 0; i < n; i++) pk_strbuf_printf(&b, "%s%lld", i ? ", " : "", (long long)d[i]);
  pk_strbuf_append(&b, ")");
  return pk_strbuf_finish(E->ctx, &b);
}

/* A trained tensor's shape against its initializer's: equal, or the (1,) Pock gives an ONNX
 * scalar (a graph tensor has rank >= 1). */
static bool same_shape(const Onnx__TensorProto *t, const pkrt_wtensor *w) {
  if (t->n_dims == 0) return w->ndim == 1 && w->shape[0] == 1;
  if ((int)t->n_dims != w->ndim) return false;
  for (int d = 0; d < w->ndim; d++)
    if (t->dims[d] != w->shape[d]) return false;
  return true;
}

static const char *onnx_type_name(int32_t t) {
  switch (t) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return "float";
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return "double";
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return "float16";
  case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return "bfloat16";
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return "int64";
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return "int32";
  default: return "a non-float type";
  }
}

/* Replaces initializer t's data by w's (raw little-endian bytes, as ONNX stores raw_data;
 * libpockrt already requires a little-endian host). */
static pk_status replace(exporter *E, const pkrt_wtensor *w) {
  Onnx__TensorProto *t = find_initializer(E, w->name);
  if (!t)
    return pk_ctx_fail(E->ctx, PK_ERR_CHECK,
                       "%s: the trained tensor %s is not an initializer of the model (was the "
                       "artifact compiled from another model?)",
                       E->file, q(E, w->name));
  int32_t want = w->dtype == PKRT_DTYPE_F32   ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
                 : w->dtype == PKRT_DTYPE_F64 ? ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE
                                              : -1;
  int32_t have = t->has_data_type ? t->data_type : 0;
  if (want < 0 || want != have)
    return pk_ctx_fail(E->ctx, PK_ERR_CHECK,
                       "%s: initializer %s is %s, the trained tensor is %s", E->file,
                       q(E, w->name), onnx_type_name(have), pkrt_dtype_name(w->dtype));
  if (!same_shape(t, w))
    return pk_ctx_fail(E->ctx, PK_ERR_CHECK,
                       "%s: initializer %s has shape %s, the trained tensor %s", E->file,
                       q(E, w->name), dims_str(E, (int)t->n_dims, t->dims),
                       dims_str(E, w->ndim, w->shape));
  size_t bytes = pkrt_dtype_size(w->dtype);
  for (int d = 0; d < w->ndim; d++) bytes *= (size_t)w->shape[d];
  uint8_t *data = pk_alloc(E->ctx, bytes ? bytes : 1);
  memcpy(data, w->data, bytes);
  t->has_raw_data = 1;
  t->raw_data.len = bytes;
  t->raw_data.data = data;
  t->n_float_data = t->n_double_data = 0;
  t->n_external_data = 0;
  t->has_data_location = 0;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
  return PK_OK;
}

/* Is `name` read by a node or a graph output? (who: the first reader, for the message) */
static bool is_read(exporter *E, const char *name, const char **who) {
  for (size_t i = 0; i < E->g->n_node; i++)
    for (size_t k = 0; k < E->g->node[i]->n_input; k++)
      if (E->g->node[i]->input[k] && !strcmp(E->g->node[i]->input[k], name)) {
        *who = node_where(E, E->g->node[i], i);
        return true;
      }
  for (size_t i = 0; i < E->g->n_output; i++)
    if (E->g->output[i]->name && !strcmp(E->g->output[i]->name, name)) {
      *who = "the graph's outputs";
      return true;
    }
  return false;
}

/* BatchNormalization in inference: training_mode 0 and Y alone (ONNX forbids the running
 * statistics outputs then). An opset-9 batch norm with extra outputs is in training the
 * same way. */
static pk_status batchnorm_infer(exporter *E, Onnx__NodeProto *n, size_t index, bool *changed) {
  *changed = false;
  for (size_t k = 1; k < n->n_output; k++) {
    const char *who;
    if (n->output[k] && n->output[k][0] && is_read(E, n->output[k], &who))
      return pk_ctx_fail(E->ctx, PK_ERR_CHECK,
                         "%s: %s: its training output %s is read by %s; it cannot be switched "
                         "to inference", E->file, node_where(E, n, index), q(E, n->output[k]), who);
  }
  if (n->n_output > 1) {
    n->n_output = 1;
    *changed = true;
  }
  for (size_t a = 0; a < n->n_attribute; a++) {
    Onnx__AttributeProto *at = n->attribute[a];
    if (at->name && !strcmp(at->name, "training_mode") && at->has_i && at->i != 0) {
      at->i = 0;
      *changed = true;
    }
  }
  return PK_OK;
}

/* A Constant node or an initializer that fed only what export removed (Dropout's
 * training_mode flag) goes too: onnxruntime warns about every unused one. */
static void drop_if_unused(exporter *E, const char *name) {
  const char *who;
  if (is_read(E, name, &who)) return;
  for (size_t i = 0; i < E->g->n_input; i++)
    if (E->g->input[i]->name && !strcmp(E->g->input[i]->name, name)) return;
  size_t keep = 0;
  for (size_t i = 0; i < E->g->n_node; i++) {
    Onnx__NodeProto *n = E->g->node[i];
    bool constant = is_default_domain(n) && n->op_type && !strcmp(n->op_type, "Constant") &&
                    n->n_output == 1 && n->output[0] && !strcmp(n->output[0], name);
    if (!constant) E->g->node[keep++] = n;
  }
  E->g->n_node = keep;
  keep = 0;
  for (size_t i = 0; i < E->g->n_initializer; i++)
    if (!E->g->initializer[i]->name || strcmp(E->g->initializer[i]->name, name))
      E->g->initializer[keep++] = E->g->initializer[i];
  E->g->n_initializer = keep;
}

/* Dropout's third input is training_mode: omitted means false (the identity). Returns the
 * flag's name, or NULL when the node was in inference already. */
static const char *dropout_infer(Onnx__NodeProto *n) {
  if (n->n_input < 3 || !n->input[2] || !n->input[2][0]) return NULL;
  n->n_input = 2;
  return n->input[2];
}

/* value_info of the outputs batch norms no longer produce would describe nothing. */
static void drop_stale_value_info(exporter *E) {
  size_t keep = 0;
  for (size_t i = 0; i < E->g->n_value_info; i++) {
    const char *name = E->g->value_info[i]->name;
    bool produced = false;
    for (size_t j = 0; j < E->g->n_node && !produced; j++)
      for (size_t k = 0; k < E->g->node[j]->n_output && !produced; k++)
        produced = name && E->g->node[j]->output[k] && !strcmp(E->g->node[j]->output[k], name);
    if (produced || !name) E->g->value_info[keep++] = E->g->value_info[i];
  }
  E->g->n_value_info = keep;
}

pk_status pk_onnx_export(pk_ctx *ctx, const char *path, const pk_onnx_export_options *o,
                         pk_onnx_export_result *out) {
  memset(out, 0, sizeof *out);
  Onnx__ModelProto *m;
  pk_status s = pk_ox_model_read(ctx, path, &m);
  if (s != PK_OK) return s;
  exporter E = {.ctx = ctx, .file = path, .g = m->graph};
  /* The artifact's inputs are graph inputs of this model: the first sign of a mix-up. */
  for (int i = 0; i < o->ninputs; i++) {
    bool found = false;
    for (size_t k = 0; k < E.g->n_input && !found; k++)
      found = E.g->input[k]->name && !strcmp(E.g->input[k]->name, o->inputs[i]);
    if (!found)
      return pk_ctx_fail(ctx, PK_ERR_CHECK,
                         "%s: the artifact's input %s is not an input of the model (was the "
                         "artifact compiled from another model?)", path, q(&E, o->inputs[i]));
  }
  bool *replaced = pk_alloc(ctx, sizeof(bool) * (E.g->n_initializer + 1));
  for (int i = 0; i < o->ntensors; i++) {
    if ((s = replace(&E, &o->tensors[i])) != PK_OK) return s;
    for (size_t k = 0; k < E.g->n_initializer; k++)
      if (E.g->initializer[k]->name && !strcmp(E.g->initializer[k]->name, o->tensors[i].name))
        replaced[k] = true;
    out->nreplaced++;
  }
  /* The untouched initializers are written as they are: a reference to an external file
   * would point beside the input model, not the output, so such models are refused. */
  for (size_t k = 0; k < E.g->n_initializer; k++) {
    const Onnx__TensorProto *t = E.g->initializer[k];
    if (!replaced[k] && t->has_data_location &&
        t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
      return pk_ctx_fail(ctx, PK_ERR_CHECK,
                         "%s: initializer %s is kept in an external data file; export of models "
                         "with external data is not supported", path, q(&E, t->name));
  }
  /* batch norms, then dropouts, then what fed only the dropouts' flags (removing nodes
   * last keeps the indices in messages the file's) */
  for (size_t i = 0; i < E.g->n_node; i++) {
    Onnx__NodeProto *n = E.g->node[i];
    if (!is_default_domain(n) || !n->op_type || strcmp(n->op_type, "BatchNormalization")) continue;
    bool changed;
    if ((s = batchnorm_infer(&E, n, i, &changed)) != PK_OK) return s;
    out->nbatchnorm += changed;
  }
  const char **flags = pk_alloc(ctx, sizeof *flags * (E.g->n_node + 1));
  for (size_t i = 0; i < E.g->n_node; i++) {
    Onnx__NodeProto *n = E.g->node[i];
    if (is_default_domain(n) && n->op_type && !strcmp(n->op_type, "Dropout") &&
        (flags[out->ndropout] = dropout_infer(n)) != NULL)
      out->ndropout++;
  }
  for (int i = 0; i < out->ndropout; i++) drop_if_unused(&E, flags[i]);
  drop_stale_value_info(&E);
  return pk_ox_model_pack(ctx, path, m, &out->bytes, &out->len);
}
