/* test_onnx_import.c — the ONNX importer's core on models built here with the generated
 * protobuf-c code (no Python): initializer data (typed fields, raw_data, external files
 * inside the model's directory; escapes by "..", absolute paths and symbolic links refused),
 * the parameter name a Transpose-reached weight keeps, the batch and --input-shape
 * bindings, IR/opset refusals, the unsupported-op list, the nesting-depth guard, and the
 * training JSON beside the model. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx.pb-c.h"
#include "pk_frontend.h"

static int failures;
static char dir[256];
/* The models' protobuf structs live in this arena (zero-filled), freed at the end. */
static pk_ctx *arena;
#define ZALLOC(n, size) pk_alloc(arena, (size_t)(n) * (size_t)(size))

#define CHECK(cond, ...)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                             \
      printf(__VA_ARGS__);                                                                    \
      printf("\n");                                                                           \
      failures++;                                                                             \
    }                                                                                         \
  } while (0)

/* ---- building a model: x (N, 4) [, y (N, S)] -> Gemm(x, W^T) or MatMul(x, Transpose(W)) ---- */

static const float W[12] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f,
                            0.7f, 0.8f, 0.9f, 1.0f, 1.1f, 1.2f};

typedef struct spec {
  int opset, ir;
  enum { W_TYPED, W_RAW, W_EXTERNAL } wdata;
  const char *location;      /* external data */
  long long offset, length;  /* external data: -1 = key absent */
  bool transpose;            /* MatMul(x, Transpose(W)) instead of Gemm(x, W, transB) */
  bool symbolic_dim1;        /* x is (N, "S") */
  bool static_batch;         /* x is (2, 4) */
  int unsupported;           /* add this many Foo nodes and one Bar (never reached) */
  int nest;                  /* wrap a Constant's tensor attribute in this many subgraphs */
} spec;

static Onnx__ValueInfoProto *vinfo(const char *name, int elem, int n, const char **params,
                                   const int64_t *dims) {
  Onnx__ValueInfoProto *v = ZALLOC(1, sizeof *v);
  onnx__value_info_proto__init(v);
  v->name = (char *)name;
  Onnx__TypeProto *t = ZALLOC(1, sizeof *t);
  onnx__type_proto__init(t);
  Onnx__TypeProto__Tensor *tt = ZALLOC(1, sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1, tt->elem_type = elem;
  Onnx__TensorShapeProto *sh = ZALLOC(1, sizeof *sh);
  onnx__tensor_shape_proto__init(sh);
  sh->n_dim = (size_t)n;
  sh->dim = ZALLOC((size_t)n, sizeof *sh->dim);
  for (int d = 0; d < n; d++) {
    Onnx__TensorShapeProto__Dimension *dm = ZALLOC(1, sizeof *dm);
    onnx__tensor_shape_proto__dimension__init(dm);
    if (params[d]) {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      dm->dim_param = (char *)params[d];
    } else {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      dm->dim_value = dims[d];
    }
    sh->dim[d] = dm;
  }
  tt->shape = sh;
  t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  t->tensor_type = tt;
  v->type = t;
  return v;
}

static Onnx__NodeProto *node(const char *type, const char *name, int nin, const char **in,
                             const char *out) {
  Onnx__NodeProto *n = ZALLOC(1, sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = (char *)type;
  n->name = (char *)name;
  n->n_input = (size_t)nin;
  /* copied: callers pass compound literals that die with their block */
  n->input = ZALLOC((size_t)nin + 1, sizeof *n->input);
  for (int k = 0; k < nin; k++) n->input[k] = (char *)in[k];
  n->n_output = 1;
  n->output = ZALLOC(1, sizeof *n->output);
  n->output[0] = (char *)out;
  return n;
}

static Onnx__AttributeProto *attr_int(const char *name, int64_t v) {
  Onnx__AttributeProto *a = ZALLOC(1, sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = (char *)name;
  a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  a->has_i = 1, a->i = v;
  return a;
}

/* Writes the model to dir/name; returns its path (in the arena, as the structs are). */
static const char *build(const char *name, const spec *sp) {
  Onnx__TensorProto *w = ZALLOC(1, sizeof *w);
  onnx__tensor_proto__init(w);
  w->name = "fc.weight";
  w->n_dims = 2;
  static int64_t wdims[2] = {3, 4};
  w->dims = wdims;
  w->has_data_type = 1, w->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  if (sp->wdata == W_TYPED) {
    w->n_float_data = 12, w->float_data = (float *)W;
  } else if (sp->wdata == W_RAW) {
    w->has_raw_data = 1, w->raw_data.len = sizeof W, w->raw_data.data = (uint8_t *)W;
  } else {
    w->has_data_location = 1, w->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    Onnx__StringStringEntryProto **e = ZALLOC(3, sizeof *e);
    const char *keys[3] = {"location", "offset", "length"};
    char *vals[3] = {(char *)sp->location, NULL, NULL};
    if (sp->offset >= 0) vals[1] = pk_sprintf(arena, "%lld", sp->offset);
    if (sp->length >= 0) vals[2] = pk_sprintf(arena, "%lld", sp->length);
    for (int k = 0; k < 3; k++) {
      if (!vals[k]) continue;
      e[w->n_external_data] = ZALLOC(1, sizeof **e);
      onnx__string_string_entry_proto__init(e[w->n_external_data]);
      e[w->n_external_data]->key = (char *)keys[k];
      e[w->n_external_data]->value = vals[k];
      w->n_external_data++;
    }
    w->external_data = e;
  }
  Onnx__GraphProto *g = ZALLOC(1, sizeof *g);
  onnx__graph_proto__init(g);
  g->name = "g";
  g->n_initializer = 1;
  g->initializer = ZALLOC(1, sizeof *g->initializer);
  g->initializer[0] = w;
  const char *p2[2] = {sp->static_batch ? NULL : "N", sp->symbolic_dim1 ? "S" : NULL};
  g->n_input = 1;
  g->input = ZALLOC(1, sizeof *g->input);
  g->input[0] = vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, p2, (int64_t[]){2, 4});
  g->n_output = 1;
  g->output = ZALLOC(1, sizeof *g->output);
  g->output[0] = vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2,
                       (const char *[]){"N", NULL}, (int64_t[]){0, 3});
  Onnx__NodeProto **nodes = ZALLOC(16, sizeof *nodes);
  size_t nn = 0;
  if (sp->transpose) {
    Onnx__NodeProto *t = node("Transpose", "t", 1, (const char *[]){"fc.weight"}, "wt");
    Onnx__AttributeProto *perm = ZALLOC(1, sizeof *perm);
    onnx__attribute_proto__init(perm);
    perm->name = "perm";
    perm->has_type = 1, perm->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    static int64_t perm10[2] = {1, 0};
    perm->n_ints = 2, perm->ints = perm10;
    t->n_attribute = 1, t->attribute = ZALLOC(1, sizeof *t->attribute);
    t->attribute[0] = perm;
    nodes[nn++] = t;
    nodes[nn++] = node("MatMul", "fc", 2, (const char *[]){"x", "wt"}, "y");
  } else {
    Onnx__NodeProto *gm = node("Gemm", "fc", 2, (const char *[]){"x", "fc.weight"}, "y");
    gm->n_attribute = 1, gm->attribute = ZALLOC(1, sizeof *gm->attribute);
    gm->attribute[0] = attr_int("transB", 1);
    nodes[nn++] = gm;
  }
  for (int k = 0; k < sp->unsupported; k++)
    nodes[nn++] = node("Foo", k ? "f2" : "f1", 1, (const char *[]){"x"}, k ? "foo2" : "foo1");
  if (sp->unsupported) nodes[nn++] = node("Bar", "", 1, (const char *[]){"x"}, "bar");
  if (sp->nest) {
    /* If(cond){then: graph{ If{...}}}: each level a node -> attribute -> graph */
    Onnx__GraphProto *inner = NULL;
    for (int k = 0; k < sp->nest; k++) {
      Onnx__NodeProto *c = node("Constant", "deep", 0, NULL, "deep_out");
      if (inner) {
        Onnx__AttributeProto *a = ZALLOC(1, sizeof *a);
        onnx__attribute_proto__init(a);
        a->name = "then_branch";
        a->has_type = 1, a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        a->g = inner;
        c->n_attribute = 1, c->attribute = ZALLOC(1, sizeof *c->attribute);
        c->attribute[0] = a;
      }
      inner = ZALLOC(1, sizeof *inner);
      onnx__graph_proto__init(inner);
      inner->n_node = 1, inner->node = ZALLOC(1, sizeof *inner->node);
      inner->node[0] = c;
    }
    nodes[nn++] = inner->node[0];
  }
  g->n_node = nn, g->node = nodes;
  Onnx__ModelProto m;
  onnx__model_proto__init(&m);
  m.has_ir_version = 1, m.ir_version = sp->ir ? sp->ir : 8;
  Onnx__OperatorSetIdProto op;
  onnx__operator_set_id_proto__init(&op);
  op.domain = "", op.has_version = 1, op.version = sp->opset ? sp->opset : 17;
  Onnx__OperatorSetIdProto *ops[1] = {&op};
  m.n_opset_import = 1, m.opset_import = ops;
  m.graph = g;
  size_t len = onnx__model_proto__get_packed_size(&m);
  uint8_t *buf = malloc(len);
  onnx__model_proto__pack(&m, buf);
  char *path = pk_sprintf(arena, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  fwrite(buf, 1, len, f);
  fclose(f);
  free(buf);
  return path;
}

static void write_file(const char *name, const void *data, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, n, f);
  fclose(f);
}

/* Imports path; returns the status and the message (or "") in msg. */
static pk_status import(pk_ctx *ctx, const char *path, int64_t batch, const pk_input_shape *sh,
                        int nsh, pk_graph **g, pk_model_info *info, const char **msg) {
  pk_frontend_opts o = {.batch = batch, .shapes = sh, .nshapes = nsh};
  pk_status s = pk_frontend_load_opts(ctx, path, &o, g, info);
  *msg = s == PK_OK ? "" : pk_ctx_error(ctx);
  return s;
}

/* The model imports and its param fc.weight holds W. */
static void expect_weights(const char *what, const char *path) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  const char *msg;
  pk_status s = import(ctx, path, 2, NULL, 0, &g, &info, &msg);
  CHECK(s == PK_OK, "%s: %s", what, msg);
  if (s == PK_OK) {
    int id = pk_graph_find(g, "fc.weight");
    CHECK(id >= 0 && g->tensors[id]->role == PK_ROLE_PARAM && g->tensors[id]->init &&
              memcmp(g->tensors[id]->init, W, sizeof W) == 0,
          "%s: fc.weight is not the param with W's values", what);
    if (s == PK_OK && failures == 0) printf("PASS %s\n", what);
  }
  pk_ctx_free(ctx);
}

/* The import fails with a message holding `want`. */
static void expect_error(const char *what, const char *path, int64_t batch,
                         const pk_input_shape *sh, int nsh, const char *want) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  const char *msg;
  pk_status s = import(ctx, path, batch, sh, nsh, &g, &info, &msg);
  CHECK(s != PK_OK && strstr(msg, want), "%s: want an error with \"%s\", got %s", what, want,
        s == PK_OK ? "success" : msg);
  if (s != PK_OK && strstr(msg, want)) printf("PASS %s: %s\n", what, msg);
  pk_ctx_free(ctx);
}

int main(void) {
  arena = pk_ctx_new();
  snprintf(dir, sizeof dir, "/tmp/pock_onnx_import_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  char outside[300];
  snprintf(outside, sizeof outside, "%s_outside", dir);
  mkdir(outside, 0700);

  /* initializer data in each of its forms */
  expect_weights("typed_float_data", build("typed.onnx", &(spec){.wdata = W_TYPED}));
  expect_weights("raw_data", build("raw.onnx", &(spec){.wdata = W_RAW}));
  uint8_t padded[64] = {0};
  memcpy(padded + 16, W, sizeof W);
  write_file("w.bin", padded, sizeof padded);
  expect_weights("external_data", build("ext.onnx", &(spec){.wdata = W_EXTERNAL,
                                        .location = "w.bin", .offset = 16, .length = 48}));
  expect_error("external_dotdot", build("ext_up.onnx", &(spec){.wdata = W_EXTERNAL,
               .location = "../w.bin", .offset = -1, .length = -1}), 2, NULL, 0,
               "leaves the model's directory");
  expect_error("external_absolute", build("ext_abs.onnx", &(spec){.wdata = W_EXTERNAL,
               .location = "/etc/passwd", .offset = -1, .length = -1}), 2, NULL, 0,
               "leaves the model's directory");
  char target[512], link[512];
  snprintf(target, sizeof target, "%s/w.bin", outside);
  FILE *f = fopen(target, "wb");
  fwrite(W, 1, sizeof W, f);
  fclose(f);
  snprintf(link, sizeof link, "%s/link.bin", dir);
  CHECK(symlink(target, link) == 0, "symlink");
  expect_error("external_symlink_out", build("ext_link.onnx", &(spec){.wdata = W_EXTERNAL,
               .location = "link.bin", .offset = -1, .length = -1}), 2, NULL, 0,
               "outside the model's directory");
  expect_error("external_length", build("ext_len.onnx", &(spec){.wdata = W_EXTERNAL,
               .location = "w.bin", .offset = 0, .length = 40}), 2, NULL, 0,
               "external data length 40");
  expect_error("external_short", build("ext_short.onnx", &(spec){.wdata = W_EXTERNAL,
               .location = "w.bin", .offset = 32, .length = -1}), 2, NULL, 0,
               "holds fewer than");
  {
    /* from memory there is no directory: external data is refused */
    pk_ctx *ctx = pk_ctx_new();
    FILE *mf = fopen(build("ext_mem.onnx", &(spec){.wdata = W_EXTERNAL, .location = "w.bin",
                                                   .offset = 16, .length = 48}), "rb");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, mf);
    fclose(mf);
    pk_graph *g;
    pk_frontend_opts o = {.batch = 2};
    pk_status s = pk_frontend_onnx_mem(ctx, buf, n, "mem.onnx", &o, &g, NULL);
    CHECK(s != PK_OK && strstr(pk_ctx_error(ctx), "external data needs the model's file"),
          "external_from_memory: %s", s == PK_OK ? "accepted" : pk_ctx_error(ctx));
    if (s != PK_OK) printf("PASS external_from_memory: %s\n", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
  }

  /* nn.Linear on rank-3 inputs: MatMul(x, Transpose(W)) keeps W's name and layout */
  {
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g;
    const char *msg;
    pk_status s = import(ctx, build("tparam.onnx", &(spec){.transpose = true}), 2, NULL, 0, &g,
                         NULL, &msg);
    CHECK(s == PK_OK, "tparam: %s", msg);
    if (s == PK_OK) {
      int w = pk_graph_find(g, "fc.weight");
      const pk_gnode *mm = g->nodes[g->nnodes - 1];
      CHECK(w >= 0 && g->tensors[w]->shape[0] == 3 && g->tensors[w]->shape[1] == 4 &&
                (mm->op == PK_OP_MATMUL || mm->op == PK_OP_BATCH_MATMUL) &&
                mm->prm.attrs.trans_b && mm->inputs[1] == w,
            "tparam: the matmul does not read fc.weight (3, 4) with trans_b");
      printf("PASS tparam: fc.weight (3, 4) read by %s with trans_b (%d graph nodes)\n",
             pk_op_name(mm->op), g->nnodes);
    }
    pk_ctx_free(ctx);
  }

  /* shapes: the batch, symbolic dims, fixed batches */
  const char *sym = build("sym.onnx", &(spec){.symbolic_dim1 = true});
  expect_error("symbolic_unbound", sym, 2, NULL, 0, "dim 1 is symbolic 'S'");
  {
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g;
    const char *msg;
    pk_input_shape b = {.name = "x", .ndim = 2, .shape = {2, 4}};
    pk_status s = import(ctx, sym, 2, &b, 1, &g, NULL, &msg);
    CHECK(s == PK_OK && g->tensors[pk_graph_find(g, "x")]->shape[1] == 4, "bound: %s", msg);
    if (s == PK_OK) printf("PASS symbolic_bound\n");
    pk_ctx_free(ctx);
  }
  expect_error("binding_rank", sym, 2, &(pk_input_shape){.name = "x", .ndim = 3}, 1,
               "--input-shape gives 3 dims");
  expect_error("binding_unknown", sym, 2,
               &(pk_input_shape){.name = "z", .ndim = 2, .shape = {2, 4}}, 1,
               "--input-shape names 'z'");
  expect_error("binding_batch", sym, 2,
               &(pk_input_shape){.name = "x", .ndim = 2, .shape = {3, 4}}, 1,
               "dim 0 = 3, the batch is 2");
  expect_error("fixed_batch", build("fixed.onnx", &(spec){.static_batch = true}), 8, NULL, 0,
               "the model's batch is fixed at 2");

  /* versions, unsupported ops, malformed files */
  expect_error("opset_12", build("op12.onnx", &(spec){.opset = 12}), 2, NULL, 0,
               "opset 12 is not supported");
  expect_error("ir_11", build("ir11.onnx", &(spec){.ir = 11}), 2, NULL, 0,
               "IR version 11 is not supported");
  expect_error("unsupported_listed", build("unsup.onnx", &(spec){.unsupported = 2}), 2, NULL, 0,
               "2 operator types Pock does not support (docs/onnx.md lists what it does): "
               "'Foo' (2 nodes, first 'f1'); 'Bar' (1 node, first #");
  expect_error("nesting", build("deep.onnx", &(spec){.nest = 40}), 2, NULL, 0,
               "nest deeper than");
  write_file("garbage.onnx", "\x0a\xff\xff\xff\xff\x0f", 6);
  char gpath[512];
  snprintf(gpath, sizeof gpath, "%s/garbage.onnx", dir);
  expect_error("garbage", gpath, 2, NULL, 0, "not a valid ONNX protobuf");
  write_file("empty.onnx", "", 0);
  snprintf(gpath, sizeof gpath, "%s/empty.onnx", dir);
  expect_error("empty", gpath, 2, NULL, 0, "the file is empty");

  /* the training JSON beside the model */
  const char *tr = build("tr.onnx", &(spec){0});
  const char *tj = "{\"loss\": \"mse\", \"optimizer\": {\"kind\": \"adamw\", \"lr\": 0.003}}";
  write_file("tr.training.json", tj, strlen(tj));
  {
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g;
    pk_model_info info;
    const char *msg;
    pk_status s = import(ctx, tr, 2, NULL, 0, &g, &info, &msg);
    CHECK(s == PK_OK && info.has_training && info.train.loss == PK_LOSS_MSE &&
              info.train.optim == PK_OPTIM_ADAMW && info.train.lr == 0.003 &&
              strcmp(info.name, "tr") == 0,
          "training_json: %s", msg);
    if (s == PK_OK) printf("PASS training_json: mse, adamw, lr 0.003, name 'tr'\n");
    pk_ctx_free(ctx);
  }
  write_file("tr.training.json", "{\"loss\": ", 9);
  expect_error("training_json_bad", tr, 2, NULL, 0, "tr.training.json: not a JSON object");

  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, outside);
  if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
  pk_ctx_free(arena);
  printf(failures ? "FAIL: %d failure(s)\n" : "test_onnx_import: all passed\n", failures);
  return failures ? 1 : 0;
}
