/* test_graph.c — the graph IR: building the demo models, lookups, layers, printing, and
 * every class of error that pk_graph_add_* and pk_graph_validate report. */
#include "test_graph_models.h"

#define N 8

static bool has(const char *hay, const char *needle) { return hay && strstr(hay, needle); }

static void expect_error(pk_ctx *ctx, const char *what, const char *needle) {
  TG_CHECK(pk_ctx_status(ctx) != PK_OK, "%s: expected an error", what);
  TG_CHECK(has(pk_ctx_error(ctx), needle), "%s: message '%s' lacks '%s'", what,
           pk_ctx_error(ctx), needle);
  pk_ctx_clear_error(ctx);
}

static void test_models(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *m = tg_mlp(ctx, N);
  TG_OK(ctx, pk_graph_validate(m));
  /* x + 6 params + 8 node results */
  TG_CHECK(m->nnodes == 8 && m->ntensors == 15, "mlp %d nodes %d tensors", m->nnodes,
           m->ntensors);
  TG_CHECK(pk_graph_layers(m) == 3, "mlp layers");
  pk_graph *c = tg_cnn(ctx, N);
  TG_OK(ctx, pk_graph_validate(c));
  TG_CHECK(c->nnodes == 13 && c->ntensors == 22, "cnn %d nodes %d tensors", c->nnodes,
           c->ntensors);
  const struct { const char *name; int ndim; int64_t shape[4]; } want[] = {
      {"conv1.out", 4, {N, 16, 6, 6}}, {"conv2.out", 4, {N, 32, 4, 4}},
      {"pool", 4, {N, 32, 2, 2}},      {"conv3.out", 4, {N, 64, 2, 2}},
      {"gap", 2, {N, 64}},             {"fc.out", 2, {N, 10}},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int t = pk_graph_find(c, want[i].name);
    TG_CHECK(t >= 0, "find %s", want[i].name);
    if (t < 0) continue;
    bool same = c->tensors[t]->ndim == want[i].ndim;
    for (int d = 0; same && d < want[i].ndim; d++)
      same = c->tensors[t]->shape[d] == want[i].shape[d];
    TG_CHECK(same,
             "shape of %s", want[i].name);
    TG_CHECK(c->tensors[t]->role == PK_ROLE_ACTIVATION, "role of %s", want[i].name);
  }
  TG_CHECK(c->output == pk_graph_find(c, "fc.out"), "output");
  TG_CHECK(pk_graph_find(c, "nope") == -1, "find missing");
  /* 32*16*3*3 floats */
  TG_CHECK(pk_gtensor_bytes(c->tensors[pk_graph_find(c, "conv2.weight")]) == 32 * 16 * 9 * 4,
           "bytes");
  /* Layers: conv1, conv2, conv3, fc; biases join the layer they are added to. */
  TG_CHECK(pk_graph_layers(c) == 4 && c->nlayers == 4, "cnn layers");
  const struct { const char *name; int layer; bool bias; } lw[] = {
      {"conv1.weight", 0, false}, {"conv1.bias", 0, true}, {"conv2.weight", 1, false},
      {"conv2.bias", 1, true},    {"conv3.weight", 2, false}, {"conv3.bias", 2, true},
      {"fc.weight", 3, false},    {"fc.bias", 3, true},
  };
  for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) {
    const pk_gtensor *t = c->tensors[pk_graph_find(c, lw[i].name)];
    TG_CHECK(t->layer == lw[i].layer && t->is_bias == lw[i].bias && t->trainable &&
                 t->train_channels == (t->ndim >= 2 ? t->shape[1] : 0),
             "%s: layer %d bias %d", lw[i].name, t->layer, t->is_bias);
  }
  TG_CHECK(strcmp(c->nodes[c->layer_nodes[2]]->name, "conv3") == 0, "layer node");
  /* One line per tensor and per node, plus three header lines. */
  char *txt = pk_graph_print(ctx, c);
  int lines = 0;
  for (const char *p = txt; *p; p++) lines += *p == '\n';
  TG_CHECK(lines == 3 + c->ntensors + c->nnodes, "print lines %d", lines);
  TG_CHECK(has(txt, "conv2d(%0, %1)  # conv1") && has(txt, "[output]") && has(txt, "layer=3"),
           "print text:\n%s", txt);
  pk_ctx_free(ctx);
}

/* A conv bias added through a reshape (ONNX's Conv: B (C,) reshaped to (C, 1, 1)) joins the
 * conv's layer, so "last_layers" and friends select it with its weight. */
static void test_layers_reshaped_bias(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = pk_graph_new(ctx, 2);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
  int w = pk_graph_add_param(g, "conv.weight", PKRT_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3}, NULL);
  int b = pk_graph_add_param(g, "conv.bias", PKRT_DTYPE_F32, 1, (int64_t[]){4}, NULL);
  int y, br, z;
  pk_op_attrs r = {.new_ndim = 3, .new_shape = {4, 1, 1}};
  TG_CHECK(pk_graph_add_op(g, "conv", PK_OP_CONV2D, &(pk_op_attrs){0}, 2, (int[]){x, w},
                           "conv.out", &y) == PK_OK &&
               pk_graph_add_op(g, "conv#2", PK_OP_RESHAPE, &r, 1, &b, "conv#2.out", &br) == PK_OK &&
               pk_graph_add_op(g, "conv#3", PK_OP_ADD, &(pk_op_attrs){0}, 2, (int[]){y, br},
                               "y", &z) == PK_OK,
           "reshaped bias graph: %s", pk_ctx_error(ctx));
  TG_CHECK(pk_graph_layers(g) == 1 && g->tensors[b]->layer == 0 && g->tensors[w]->layer == 0,
           "reshaped bias: layer %d", g->tensors[b]->layer);
  pk_ctx_free(ctx);
}

static void test_add_errors(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = pk_graph_new(ctx, 4);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 2, (int64_t[]){4, 8});
  TG_CHECK(x == 0, "first id");
  TG_CHECK(pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 1, (int64_t[]){4}) == -1,
           "dup");
  expect_error(ctx, "duplicate", "duplicate tensor name 'x'");
  TG_CHECK(pk_graph_add_tensor(g, "z", PK_ROLE_INPUT, PKRT_DTYPE_F32, 0, (int64_t[]){4}) == -1,
           "rank 0");
  expect_error(ctx, "rank", "'z' has rank 0");
  TG_CHECK(pk_graph_add_tensor(g, "z", PK_ROLE_INPUT, PKRT_DTYPE_F32, 2, (int64_t[]){4, 0}) == -1,
           "extent 0");
  expect_error(ctx, "extent", "'z' dim 1 has extent 0");
  TG_CHECK(pk_graph_add_tensor(g, "", PK_ROLE_INPUT, PKRT_DTYPE_F32, 1, (int64_t[]){4}) == -1,
           "empty name");
  expect_error(ctx, "empty", "non-empty name");
  TG_CHECK(pk_graph_add_param(g, "huge", PKRT_DTYPE_F32, 4,
                              (int64_t[]){1 << 30, 1 << 30, 1 << 30, 1 << 30}, NULL) == -1,
           "huge");
  expect_error(ctx, "huge", "'huge' is too large");
  float init[3] = {1, 2, 3};
  int w = pk_graph_add_param(g, "w", PKRT_DTYPE_F32, 2, (int64_t[]){3, 8}, NULL);
  int b = pk_graph_add_param(g, "b", PKRT_DTYPE_F32, 1, (int64_t[]){3}, init);
  init[0] = 9; /* the graph keeps its own copy */
  TG_CHECK(((const float *)g->tensors[b]->init)[0] == 1, "init copied");
  int y;
  TG_CHECK(pk_graph_add_op(g, "mm", PK_OP_MATMUL, NULL, 2, (int[]){x, w}, "y", &y) != PK_OK,
           "inner mismatch");
  expect_error(ctx, "mismatch", "node 'mm'");
  TG_CHECK(pk_graph_add_op(g, "mm", PK_OP_MATMUL, NULL, 1, (int[]){x}, "y", &y) != PK_OK, "arity");
  expect_error(ctx, "arity", "matmul takes 2 inputs, got 1");
  TG_CHECK(pk_graph_add_op(g, "mm", PK_OP_MATMUL, NULL, 2, (int[]){x, 77}, "y", &y) != PK_OK,
           "bad id");
  expect_error(ctx, "bad id", "input 1 is not a tensor (id 77)");
  TG_CHECK(pk_graph_add_op(g, "mm", (pk_op_kind)999, NULL, 2, (int[]){x, w}, "y", &y) != PK_OK,
           "bad op");
  expect_error(ctx, "bad op", "unknown operator 999");
  TG_OK(ctx, pk_graph_add_op(g, "mm", PK_OP_MATMUL, &(pk_op_attrs){.trans_b = true}, 2,
                             (int[]){x, w}, "y", &y));
  TG_CHECK(g->tensors[y]->shape[0] == 4 && g->tensors[y]->shape[1] == 3, "mm shape");
  int z;
  TG_CHECK(pk_graph_add_op(g, "mm", PK_OP_RELU, NULL, 1, &y, "z", &z) != PK_OK, "dup node");
  expect_error(ctx, "dup node", "duplicate node name 'mm'");
  TG_CHECK(pk_graph_add_op(g, "r", PK_OP_RELU, NULL, 1, &y, "x", &z) != PK_OK, "dup out");
  expect_error(ctx, "dup out", "output name 'x' is already a tensor");
  TG_OK(ctx, pk_graph_add_op(g, "add", PK_OP_ADD, NULL, 2, (int[]){y, b}, "out", &z));
  /* No output yet. */
  TG_CHECK(pk_graph_validate(g) != PK_OK, "no output");
  expect_error(ctx, "no output", "no output set");
  g->output = z;
  TG_OK(ctx, pk_graph_validate(g));
  pk_ctx_free(ctx);
}

/* Corrupts a valid graph in one way at a time and checks validate names the problem. */
static void test_validate_errors(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_mlp(ctx, 4);
  TG_OK(ctx, pk_graph_validate(g));

  int saved = g->nodes[2]->inputs[0];
  g->nodes[2]->inputs[0] = 1000;
  TG_CHECK(pk_graph_validate(g) != PK_OK, "dangling");
  expect_error(ctx, "dangling", "node 'relu1' input 0 is a dangling tensor id 1000");
  g->nodes[2]->inputs[0] = saved;

  /* swap fc1 and fc1.add: the add reads fc1.mm before it is produced */
  pk_gnode *a = g->nodes[0], *b = g->nodes[1];
  g->nodes[0] = b, g->nodes[1] = a;
  a->id = 1, b->id = 0;
  for (int i = 0; i < a->noutputs; i++) g->tensors[a->outputs[i]]->producer = 1;
  for (int i = 0; i < b->noutputs; i++) g->tensors[b->outputs[i]]->producer = 0;
  TG_CHECK(pk_graph_validate(g) != PK_OK, "order");
  expect_error(ctx, "order", "not topological");
  g->nodes[0] = a, g->nodes[1] = b;
  a->id = 0, b->id = 1;
  for (int i = 0; i < a->noutputs; i++) g->tensors[a->outputs[i]]->producer = 0;
  for (int i = 0; i < b->noutputs; i++) g->tensors[b->outputs[i]]->producer = 1;
  TG_OK(ctx, pk_graph_validate(g));

  /* a cycle: fc1 reads relu2's result (produced later) */
  int fc1_x = g->nodes[0]->inputs[0];
  pk_gtensor *r2 = g->tensors[pk_graph_find(g, "relu2")];
  g->nodes[0]->inputs[0] = r2->id;
  TG_CHECK(pk_graph_validate(g) != PK_OK, "cycle");
  expect_error(ctx, "cycle", "reads 'relu2' before it is produced");
  g->nodes[0]->inputs[0] = fc1_x;

  pk_gtensor *h = g->tensors[pk_graph_find(g, "relu1")];
  h->shape[1] = 99;
  TG_CHECK(pk_graph_validate(g) != PK_OK, "shape");
  expect_error(ctx, "shape", "shape mismatch");
  h->shape[1] = 128;
  h->dtype = PKRT_DTYPE_F64;
  TG_CHECK(pk_graph_validate(g) != PK_OK, "dtype");
  expect_error(ctx, "dtype", "has dtype f64 but its program expects f32");
  h->dtype = PKRT_DTYPE_F32;

  int orphan = pk_graph_add_tensor(g, "orphan", PK_ROLE_ACTIVATION, PKRT_DTYPE_F32, 1,
                                   (int64_t[]){3});
  TG_CHECK(orphan >= 0 && pk_graph_validate(g) != PK_OK, "orphan");
  expect_error(ctx, "orphan", "activation 'orphan' is never produced");
  g->tensors[orphan]->role = PK_ROLE_INPUT;
  TG_OK(ctx, pk_graph_validate(g));

  /* produced twice: relu2 claims fc1's output */
  int fc1_out = g->nodes[1]->outputs[0];
  g->nodes[3]->outputs[0] = fc1_out;
  TG_CHECK(pk_graph_validate(g) != PK_OK, "twice");
  expect_error(ctx, "twice", "produced by another node");
  pk_ctx_free(ctx);
}

/* graph I/O: pk_graph_name_outputs names every compute of a node (softmax: max, sum,
 * result), turns named stages into activations, and refuses counts and names that clash. */
static void test_name_outputs(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = pk_graph_new(ctx, 2);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 2, (int64_t[]){2, 5});
  int p, r;
  TG_OK(ctx, pk_graph_add_op(g, "sm", PK_OP_SOFTMAX, &(pk_op_attrs){.axis = 1}, 1, &x, "p", &p));
  TG_OK(ctx, pk_graph_add_op(g, "r", PK_OP_RELU, NULL, 1, &x, "r", &r));
  const pk_gnode *sm = g->nodes[0];
  TG_CHECK(sm->noutputs == 3 && g->tensors[sm->outputs[0]]->role == PK_ROLE_TEMP, "stages");
  pk_graph_name_outputs(g, 0, 2, (const char *[]){"a", "b"});
  expect_error(ctx, "count", "node 'sm': 2 output names given, but softmax computes 3");
  pk_graph_name_outputs(g, 0, 3, (const char *[]){"a", "r", "c"});
  expect_error(ctx, "taken", "node 'sm': output name 'r' is already a tensor");
  pk_graph_name_outputs(g, 0, 3, (const char *[]){"a", "a", "c"});
  expect_error(ctx, "twice", "node 'sm': output name 'a' is already a tensor");
  /* the made-up stage names may be reused among the node's own outputs */
  const char *s0 = g->tensors[sm->outputs[0]]->name, *s1 = g->tensors[sm->outputs[1]]->name;
  TG_OK(ctx, pk_graph_name_outputs(g, 0, 3, (const char *[]){s1, s0, "p"}));
  TG_OK(ctx, pk_graph_name_outputs(g, 0, 3, (const char *[]){"sm.max", "sm.sum", "sm.out"}));
  TG_CHECK(pk_graph_find(g, "sm.max") == sm->outputs[0] && pk_graph_find(g, "sm.out") == p &&
               g->tensors[sm->outputs[1]]->role == PK_ROLE_ACTIVATION &&
               g->tensors[p]->role == PK_ROLE_ACTIVATION && pk_graph_find(g, "p") < 0,
           "named in order, stages are activations");
  int y;
  TG_OK(ctx, pk_graph_add_op(g, "use", PK_OP_ADD, NULL, 2, (int[]){p, sm->outputs[0]}, "y", &y));
  g->output = y;
  TG_OK(ctx, pk_graph_validate(g));
  pk_ctx_free(ctx);
}

int main(void) {
  test_models();
  test_add_errors();
  test_layers_reshaped_bias();
  test_validate_errors();
  test_name_outputs();
  return tg_report("test_graph");
}
