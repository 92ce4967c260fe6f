/* test_frontend.c — the JSON graph frontend: the graphs it builds (tensors, shapes, nodes,
 * attrs, training info), every error with its message, .pkw side files and
 * pk_weights_apply, and a fuzz loop over mutated graph texts (no crash, every failure
 * has a message naming the file). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_frontend.h"
#include "pkrt.h"

#define PK_TEST_OWN_CHECK
#include "pk_test.h"

/* CHECK here goes on after a failure (no return) and names file and line. */
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      failures++;                                          \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
    }                                                      \
  } while (0)

static char *read_text(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    printf("FAIL cannot open %s\n", path);
    exit(1);
  }
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (!s || fread(s, 1, (size_t)n, fp) != (size_t)n) exit(1);
  s[n] = '\0';
  fclose(fp);
  if (len) *len = (size_t)n;
  return s;
}

static void write_text(const char *path, const char *text) {
  FILE *fp = fopen(path, "wb");
  if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0) {
    printf("FAIL cannot write %s\n", path);
    exit(1);
  }
}

/* Writes a .pkw with up to three tensors given as (name, dtype, ndim, shape, data). */
static void write_pkw(const char *path, int n, const pkrt_wtensor *t) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (pkrt_weights_write(rt, path, t, n) != PKRT_OK) {
    printf("FAIL pkrt_weights_write %s: %s\n", path, pkrt_ctx_error(rt));
    exit(1);
  }
  pkrt_ctx_free(rt);
}

static const pk_gtensor *tensor(const pk_graph *g, const char *name) {
  int id = pk_graph_find(g, name);
  return id >= 0 ? g->tensors[id] : NULL;
}

static bool shape_is(const pk_gtensor *t, int ndim, const int64_t *shape) {
  if (!t || t->ndim != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (t->shape[i] != shape[i]) return false;
  return true;
}

static const pk_gnode *node(const pk_graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
  return NULL;
}

/* ---- a good MLP with inline values and a full training object ---- */
static void test_mlp(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  int before = failures;
  pk_status s = pk_frontend_load(ctx, PK_SOURCE_DIR "/tests/data/graphs/mlp_small.json", 7,
                                 &g, &info);
  CHECK(s == PK_OK, "mlp_small: %s", pk_ctx_error(ctx));
  if (s != PK_OK) {
    pk_ctx_free(ctx);
    return;
  }
  CHECK(g->batch == 7, "batch %lld", (long long)g->batch);
  const pk_gtensor *x = tensor(g, "x");
  CHECK(x && x->role == PK_ROLE_INPUT && x->dtype == PKRT_DTYPE_F32, "x is an f32 input");
  CHECK(shape_is(x, 2, (int64_t[]){7, 4}), "x is (7, 4): batch replaces \"N\"");
  const pk_gtensor *w1 = tensor(g, "fc1.weight");
  CHECK(w1 && w1->role == PK_ROLE_PARAM && shape_is(w1, 2, (int64_t[]){3, 4}), "fc1.weight (3, 4)");
  CHECK(w1 && w1->init && ((const float *)w1->init)[0] == 0.1f &&
            ((const float *)w1->init)[11] == -1.2f, "fc1.weight init values");
  const pk_gtensor *b2 = tensor(g, "fc2.bias");
  CHECK(b2 && b2->init && ((const float *)b2->init)[1] == 0.5f, "fc2.bias init");
  CHECK(g->nnodes == 5, "5 nodes, got %d", g->nnodes);
  const pk_gnode *fc1 = node(g, "fc1"), *act = node(g, "act1");
  CHECK(fc1 && fc1->op == PK_OP_MATMUL && fc1->prm.attrs.trans_b && !fc1->prm.attrs.trans_a,
        "fc1 is matmul with trans_b");
  CHECK(fc1 && fc1->ninputs == 2 && fc1->inputs[0] == x->id && fc1->inputs[1] == w1->id,
        "fc1 reads x and fc1.weight");
  CHECK(act && act->op == PK_OP_RELU, "act1 is relu");
  CHECK(g->output >= 0 && strcmp(g->tensors[g->output]->name, "fc2.out") == 0 &&
            shape_is(g->tensors[g->output], 2, (int64_t[]){7, 2}), "output fc2.out (7, 2)");
  CHECK(strcmp(info.name, "mlp_small") == 0 && info.has_training && info.classes == 2,
        "info name/training/classes");
  const pk_train_spec *t = &info.train;
  CHECK(t->loss == PK_LOSS_SOFTMAX_XENT && t->optim == PK_OPTIM_ADAMW, "loss, optimizer");
  CHECK(t->lr == 0.002 && t->beta1 == 0.8 && t->beta2 == 0.99 && t->eps == 1e-7 &&
            t->weight_decay == 0.05 && t->clip_norm == 5 && !t->clip_global,
        "adamw hyper-parameters");
  CHECK(t->lr_sched == PK_LR_COSINE && t->lr_total_steps == 1000 && t->lr_min == 0.0001,
        "cosine schedule");
  printf("%s mlp_small: tensors, shapes, nodes, attrs, training\n",
         failures == before ? "PASS" : "FAIL");
  pk_ctx_free(ctx);
}

/* ---- an f64 CNN whose weights come from a .pkw side file ---- */
static double conv_w[18], conv_b[2], fc_w[54];

static void write_cnn_files(void) {
  for (int i = 0; i < 18; i++) conv_w[i] = 0.1 * (i - 9);
  conv_b[0] = 0.5, conv_b[1] = -0.5;
  for (int i = 0; i < 54; i++) fc_w[i] = 0.01 * i;
  pkrt_wtensor t[3] = {
      {"conv.weight", PKRT_DTYPE_F64, 4, {2, 1, 3, 3}, conv_w},
      {"conv.bias", PKRT_DTYPE_F64, 3, {2, 1, 1}, conv_b},
      {"fc.weight", PKRT_DTYPE_F64, 2, {3, 18}, fc_w},
  };
  write_pkw(pk_test_path("cnn_small.pkw"), 3, t);
  char *text = read_text(PK_SOURCE_DIR "/tests/data/graphs/cnn_small.json", NULL);
  write_text(pk_test_path("cnn_small.json"), text);
  free(text);
}

static void test_cnn(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  int before = failures;
  pk_status s = pk_frontend_load(ctx, pk_test_path("cnn_small.json"), 4, &g, &info);
  CHECK(s == PK_OK, "cnn_small: %s", pk_ctx_error(ctx));
  if (s != PK_OK) {
    pk_ctx_free(ctx);
    return;
  }
  const pk_gtensor *cw = tensor(g, "conv.weight"), *cb = tensor(g, "conv.bias"),
                   *fw = tensor(g, "fc.weight"), *fb = tensor(g, "fc.bias");
  CHECK(cw && cw->dtype == PKRT_DTYPE_F64 && shape_is(cw, 4, (int64_t[]){2, 1, 3, 3}),
        "conv.weight f64 (2, 1, 3, 3)");
  CHECK(cw && cw->init && memcmp(cw->init, conv_w, sizeof conv_w) == 0,
        "conv.weight values from the .pkw");
  CHECK(cb && cb->init && memcmp(cb->init, conv_b, sizeof conv_b) == 0, "conv.bias values");
  CHECK(fw && fw->init && memcmp(fw->init, fc_w, sizeof fc_w) == 0, "fc.weight values");
  CHECK(fb && fb->init && ((const double *)fb->init)[2] == 0.5, "fc.bias inline init (f64)");
  const pk_gnode *conv = node(g, "conv"), *pool = node(g, "pool"), *flat = node(g, "flatten");
  CHECK(conv && conv->op == PK_OP_CONV2D && conv->prm.attrs.stride[0] == 1 &&
            conv->prm.attrs.stride[1] == 1 && conv->prm.attrs.pad[0] == 1 &&
            conv->prm.attrs.pad[1] == 1 && conv->prm.attrs.pad[2] == 1 &&
            conv->prm.attrs.pad[3] == 1 && conv->prm.attrs.groups == 1,
        "conv attrs: stride 1 → (1, 1), pad [1, 1] → four sides");
  CHECK(pool && pool->op == PK_OP_MAX_POOL2D && pool->prm.attrs.kernel[0] == 2 &&
            pool->prm.attrs.kernel[1] == 2, "pool kernel 2 → (2, 2)");
  CHECK(flat && flat->op == PK_OP_RESHAPE && flat->prm.attrs.new_ndim == 2 &&
            flat->prm.attrs.new_shape[0] == 4 && flat->prm.attrs.new_shape[1] == 18,
        "reshape [\"N\", -1] → (4, 18)");
  CHECK(shape_is(tensor(g, "conv.out"), 4, (int64_t[]){4, 2, 6, 6}), "conv.out (4, 2, 6, 6)");
  CHECK(shape_is(g->tensors[g->output], 2, (int64_t[]){4, 3}), "output (4, 3)");
  CHECK(info.classes == 3 && info.train.optim == PK_OPTIM_SGD &&
            info.train.momentum == 0.9 && info.train.weight_decay == 0.001 &&
            info.train.lr == 0.05, "classes from the output, sgd hyper-parameters");
  CHECK(info.train.lr_sched == PK_LR_STEP && info.train.lr_step_size == 100 &&
            info.train.lr_gamma == 0.5, "step schedule");
  printf("%s cnn_small: f64, weights_file relative to the JSON, conv/pool/reshape attrs\n",
         failures == before ? "PASS" : "FAIL");
  pk_ctx_free(ctx);
}

/* ---- .pkw round trip and pk_weights_apply ---- */
static const float *finit(const pk_graph *g, const char *name) {
  const pk_gtensor *t = tensor(g, name);
  return t ? t->init : NULL;
}

static void test_weights(void) {
  int before = failures;
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_status s = pk_frontend_load(ctx, PK_SOURCE_DIR "/tests/data/graphs/mlp_small.json", 2,
                                 &g, NULL);
  CHECK(s == PK_OK, "load: %s", pk_ctx_error(ctx));
  if (s != PK_OK) return;
  /* Round trip: the graph's params → .pkw → a model that names that file. */
  pkrt_wtensor all[4];
  const char *names[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  for (int i = 0; i < 4; i++) {
    const pk_gtensor *t = tensor(g, names[i]);
    all[i] = (pkrt_wtensor){t->name, t->dtype, t->ndim, {0}, t->init};
    memcpy(all[i].shape, t->shape, sizeof all[i].shape);
  }
  write_pkw(pk_test_path("mlp.pkw"), 4, all);
  const char *noinit =
      "{\"format\": \"pock-graph\", \"version\": 1, \"weights_file\": \"mlp.pkw\",\n"
      " \"inputs\": [{\"name\": \"x\", \"shape\": [\"N\", 4]}],\n"
      " \"params\": [{\"name\": \"fc1.weight\", \"shape\": [3, 4]},\n"
      "   {\"name\": \"fc1.bias\", \"shape\": [3]}, {\"name\": \"fc2.weight\", \"shape\": [2, 3]},\n"
      "   {\"name\": \"fc2.bias\", \"shape\": [2]}],\n"
      " \"nodes\": [\n"
      "  {\"name\": \"fc1\", \"op\": \"matmul\", \"inputs\": [\"x\", \"fc1.weight\"],\n"
      "   \"output\": \"fc1.mm\", \"attrs\": {\"trans_b\": true}},\n"
      "  {\"name\": \"fc1.add\", \"op\": \"add\", \"inputs\": [\"fc1.mm\", \"fc1.bias\"], \"output\": \"h\"},\n"
      "  {\"name\": \"fc2\", \"op\": \"matmul\", \"inputs\": [\"h\", \"fc2.weight\"],\n"
      "   \"output\": \"fc2.mm\", \"attrs\": {\"trans_b\": true}},\n"
      "  {\"name\": \"fc2.add\", \"op\": \"add\", \"inputs\": [\"fc2.mm\", \"fc2.bias\"], \"output\": \"y\"}],\n"
      " \"output\": \"y\"}\n";
  write_text(pk_test_path("mlp_noinit.json"), noinit);
  pk_graph *g2;
  pk_model_info info2;
  s = pk_frontend_load(ctx, pk_test_path("mlp_noinit.json"), 2, &g2, &info2);
  CHECK(s == PK_OK, "noinit: %s", pk_ctx_error(ctx));
  for (int i = 0; s == PK_OK && i < 4; i++) {
    const pk_gtensor *a = tensor(g, names[i]), *b = tensor(g2, names[i]);
    CHECK(b && b->init && memcmp(a->init, b->init, (size_t)pk_gtensor_bytes(a)) == 0,
          "%s round trip through .pkw", names[i]);
  }
  CHECK(s != PK_OK || (!info2.has_training && info2.classes == 2 &&
                       strcmp(info2.name, "mlp_noinit") == 0 &&
                       info2.train.optim == PK_OPTIM_SGD && info2.train.lr > 0),
        "defaults without a training object");

  /* pk_weights_apply: pretrained values except the re-initialized head. */
  float w1[12], w2[6];
  for (int i = 0; i < 12; i++) w1[i] = 7;
  for (int i = 0; i < 6; i++) w2[i] = 9;
  float other[2] = {1, 2};
  pkrt_wtensor pre[3] = {{"fc1.weight", PKRT_DTYPE_F32, 2, {3, 4}, w1},
                         {"fc2.weight", PKRT_DTYPE_F32, 2, {2, 3}, w2},
                         {"unrelated", PKRT_DTYPE_F32, 1, {2}, other}};
  write_pkw(pk_test_path("pre.pkw"), 3, pre);
  s = pk_weights_apply(ctx, g, pk_test_path("pre.pkw"), "fc2.*");
  CHECK(s == PK_OK, "apply keep fc2.*: %s", pk_ctx_error(ctx));
  CHECK(finit(g, "fc1.weight")[5] == 7, "fc1.weight replaced");
  CHECK(finit(g, "fc2.weight")[5] == 6, "fc2.weight kept (matches the keep glob)");
  CHECK(finit(g, "fc1.bias")[0] == 0.01f, "fc1.bias (not in the file) kept");
  s = pk_weights_apply(ctx, g, pk_test_path("pre.pkw"), NULL);
  CHECK(s == PK_OK && finit(g, "fc2.weight")[5] == 9, "apply without keep replaces fc2.weight");

  struct {
    const char *label, *file, *keep;
    pk_status want;
    const char *needle;
  } bad[] = {
      {"keep matches nothing", "pre.pkw", "fc9.*", PK_ERR_CHECK, "matches no param"},
      {"shape mismatch", "wrong_shape.pkw", NULL, PK_ERR_CHECK,
       "tensor 'fc1.weight' is f32 (4, 3), the model's param is f32 (3, 4)"},
      {"dtype mismatch", "wrong_dtype.pkw", NULL, PK_ERR_CHECK, "is f64 (3, 4)"},
      {"no param named", "unrelated.pkw", NULL, PK_ERR_CHECK, "names a param"},
      {"missing file", "nope.pkw", NULL, PK_ERR_IO, "nope.pkw"},
      {"not a weights file", "garbage.pkw", NULL, PK_ERR_CHECK, "garbage.pkw"},
  };
  double d12[12] = {0};
  pkrt_wtensor ws[2] = {{"fc2.weight", PKRT_DTYPE_F32, 2, {2, 3}, w1},
                        {"fc1.weight", PKRT_DTYPE_F32, 2, {4, 3}, w1}};
  write_pkw(pk_test_path("wrong_shape.pkw"), 2, ws);
  write_pkw(pk_test_path("wrong_dtype.pkw"), 1,
            (pkrt_wtensor[]){{"fc1.weight", PKRT_DTYPE_F64, 2, {3, 4}, d12}});
  write_pkw(pk_test_path("unrelated.pkw"), 1, &pre[2]);
  write_text(pk_test_path("garbage.pkw"), "this is not a weights file");
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pk_ctx_clear_error(ctx);
    s = pk_weights_apply(ctx, g, pk_test_path(bad[i].file), bad[i].keep);
    bool ok = s == bad[i].want && strstr(pk_ctx_error(ctx), bad[i].needle) &&
              strstr(pk_ctx_error(ctx), bad[i].file);
    CHECK(ok, "weights %s: got %s '%s'", bad[i].label, pk_status_name(s), pk_ctx_error(ctx));
    printf("%s weights error: %s -> %s\n", ok ? "PASS" : "FAIL", bad[i].label,
           pk_ctx_error(ctx));
  }
  /* A refused file changes nothing, not even the tensors listed before the bad one. */
  CHECK(finit(g, "fc2.weight")[5] == 9, "failed apply left fc2.weight alone");
  printf("%s weights: .pkw round trip, pk_weights_apply with a keep glob\n",
         failures == before ? "PASS" : "FAIL");
  pk_ctx_free(ctx);
}

/* ---- every error, with its message ---- */
#define HDR "{\"format\":\"pock-graph\",\"version\":1,"
#define HDR2 "{\"format\":\"pock-graph\",\"version\":2,"
#define X "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",4]}],"
#define W "\"params\":[{\"name\":\"w\",\"shape\":[2,4],\"init\":[1,2,3,4,5,6,7,8]}],"
#define NODE(op, ins, out, attrs) \
  "{\"name\":\"fc\",\"op\":\"" op "\",\"inputs\":[" ins "],\"output\":\"" out "\"" attrs "}"
#define FC "\"nodes\":[" NODE("matmul", "\"x\",\"w\"", "y", ",\"attrs\":{\"trans_b\":true}") "],"
#define FCA(attrs) "\"nodes\":[" NODE("matmul", "\"x\",\"w\"", "y", ",\"attrs\":" attrs) "],"
#define OUT "\"output\":\"y\"}"
#define TR(t) ",\"training\":" t "}"
#define GOOD HDR X W FC "\"output\":\"y\""

typedef struct bad_case {
  const char *label, *text;
  pk_status want;
  const char *needle;
} bad_case;

static const bad_case BAD[] = {
    {"not JSON", "{\"format\": \"pock-graph\",\n  \"version\": ", PK_ERR_SYNTAX,
     "bad.json:2:13: not valid JSON (the text ends too early)"},
    {"trailing text", GOOD "} x", PK_ERR_SYNTAX, "not valid JSON"},
    {"empty text", "", PK_ERR_SYNTAX, "bad.json:1:1: not valid JSON (the text ends too early)"},
    {"bad token", "{\"format\": pock}", PK_ERR_SYNTAX, "bad.json:1:12: not valid JSON"},
    {"top level array", "[1, 2]", PK_ERR_CHECK, "the top level must be an object"},
    {"wrong format", "{\"format\":\"onnx\",\"version\":1}", PK_ERR_CHECK,
     "format is 'onnx', expected 'pock-graph'"},
    {"missing format", "{\"version\":1}", PK_ERR_CHECK, "missing key 'format'"},
    {"version 3", "{\"format\":\"pock-graph\",\"version\":3}", PK_ERR_CHECK,
     "version 3 is not supported (this Pock reads versions 1 to 2)"},
    {"version out of range", "{\"format\":\"pock-graph\",\"version\":1e300}", PK_ERR_CHECK,
     "key 'version' is 1e+300, outside"},
    {"version a string", "{\"format\":\"pock-graph\",\"version\":\"1\"}", PK_ERR_CHECK,
     "key 'version' must be an integer"},
    {"dtype", HDR "\"dtype\":\"f16\"," X W FC OUT, PK_ERR_CHECK, "dtype 'f16' is not f32 or f64"},
    {"unknown top key", HDR "\"trainig\":{}," X W FC OUT, PK_ERR_CHECK,
     "unknown key 'trainig' (expected one of: format, version"},
    {"duplicate key", HDR "\"version\":1," X W FC OUT, PK_ERR_CHECK, "key 'version' appears twice"},
    /* Finding 11: cJSON returned "x\u0000y" as the name "x", so this graph loaded. */
    {"NUL in a name", HDR "\"inputs\":[{\"name\":\"x\\u0000y\",\"shape\":[\"N\",4]}]," W FC OUT,
     PK_ERR_CHECK, "1:56: a NUL character"},
    {"no inputs", HDR "\"inputs\":[]," W FC OUT, PK_ERR_CHECK, "key 'inputs' must have 1.."},
    {"input dim 0", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",0]}]," W FC OUT,
     PK_ERR_CHECK, "input 'x': shape[1] is 0, outside 1..2147483647"},
    {"input dim 2^31", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",2147483648]}]," W FC OUT,
     PK_ERR_CHECK, "input 'x': shape[1] is 2147483648, outside 1..2147483647"},
    {"input dim fraction", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",2.5]}]," W FC OUT,
     PK_ERR_CHECK, "shape[1] must be an integer, not 2.5"},
    {"input dim negative", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[-4,4]}]," W FC OUT,
     PK_ERR_CHECK, "input 'x': shape[0] is -4, outside"},
    {"input rank 9",
     HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",1,1,1,1,1,1,1,4]}]," W FC OUT,
     PK_ERR_CHECK, "shape must have 1..8 dims, not 9"},
    {"string dim not first", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[4,\"N\"]}]," W FC OUT,
     PK_ERR_CHECK, "shape[1] must be an integer"},
    {"input without shape", HDR "\"inputs\":[{\"name\":\"x\"}]," W FC OUT, PK_ERR_CHECK,
     "input 'x': missing key 'shape'"},
    {"param too many elements",
     HDR X "\"params\":[{\"name\":\"w\",\"shape\":[2147483647,2147483647,2147483647]}]," FC OUT,
     PK_ERR_CHECK, "param 'w': shape has too many elements"},
    {"unknown op", HDR X W "\"nodes\":[" NODE("matmull", "\"x\",\"w\"", "y", "") "]," OUT,
     PK_ERR_CHECK, "bad.json: node 'fc': unknown op 'matmull'"},
    {"training op in the model",
     HDR X W "\"nodes\":[" NODE("mse_loss", "\"x\",\"w\"", "y", "") "]," OUT, PK_ERR_CHECK,
     "node 'fc': op 'mse_loss' is added by Pock for training"},
    {"unknown input", HDR X W "\"nodes\":[" NODE("matmul", "\"x\",\"v\"", "y", "") "]," OUT,
     PK_ERR_CHECK, "node 'fc': unknown input 'v'"},
    {"input not a string", HDR X W "\"nodes\":[" NODE("matmul", "\"x\",3", "y", "") "]," OUT,
     PK_ERR_CHECK, "node 'fc': inputs[1] must be a string"},
    {"wrong arity", HDR X W "\"nodes\":[" NODE("matmul", "\"x\"", "y", "") "]," OUT,
     PK_ERR_CHECK, "node 'fc': op 'matmul' takes 2 inputs, not 1"},
    {"cycle (forward reference)",
     HDR X W "\"nodes\":[{\"name\":\"a\",\"op\":\"relu\",\"inputs\":[\"bo\"],\"output\":\"ao\"},"
             "{\"name\":\"b\",\"op\":\"relu\",\"inputs\":[\"ao\"],\"output\":\"bo\"}],"
             "\"output\":\"bo\"}",
     PK_ERR_CHECK, "node 'a': unknown input 'bo' (not an input, a param or an earlier node's"},
    {"duplicate node name",
     HDR X W "\"nodes\":[" NODE("relu", "\"x\"", "y", "") "," NODE("relu", "\"y\"", "z", "") "],"
             "\"output\":\"z\"}",
     PK_ERR_CHECK, "node 'fc': duplicate node name"},
    {"duplicate tensor name",
     HDR X "\"params\":[{\"name\":\"x\",\"shape\":[2,4],\"init\":[1,2,3,4,5,6,7,8]}]," FC OUT,
     PK_ERR_CHECK, "params[0]: duplicate tensor name 'x'"},
    {"output duplicates a tensor",
     HDR X W "\"nodes\":[" NODE("matmul", "\"x\",\"w\"", "w", "") "]," OUT, PK_ERR_CHECK,
     "node 'fc': output 'w': duplicate tensor name"},
    {"attr wrong type", HDR X W FCA("{\"trans_b\":1}") OUT, PK_ERR_CHECK,
     "node 'fc': attr 'trans_b' must be true or false"},
    {"attr of another op", HDR X W FCA("{\"trans_b\":true,\"stride\":2}") OUT, PK_ERR_CHECK,
     "node 'fc': attr 'stride' does not apply to op 'matmul'"},
    {"unknown attr", HDR X W FCA("{\"transpose\":true}") OUT, PK_ERR_CHECK,
     "node 'fc': unknown attr 'transpose'"},
    {"attrs not an object", HDR X W FCA("[]") OUT, PK_ERR_CHECK,
     "node 'fc': key 'attrs' must be an object"},
    {"shape mismatch (from the graph)", HDR X W FCA("{}") OUT, PK_ERR_CHECK,
     "bad.json: node 'fc': "},
    {"conv pad of 3", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",1,4,4]}]," W
     "\"nodes\":[" NODE("max_pool2d", "\"x\"", "y", ",\"attrs\":{\"kernel\":2,\"pad\":[1,1,1]}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'pad' must be an integer or an array of 2 or 4"},
    {"pool kernel 0", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",1,4,4]}]," W
     "\"nodes\":[" NODE("max_pool2d", "\"x\"", "y", ",\"attrs\":{\"kernel\":[2,0]}") "]," OUT,
     PK_ERR_CHECK, "node 'fc': attr 'kernel'[1] is 0, outside 1..2147483647"},
    {"reshape cannot infer", HDR X W
     "\"nodes\":[" NODE("reshape", "\"x\"", "y", ",\"attrs\":{\"shape\":[\"N\",3,-1]}") "]," OUT,
     PK_ERR_CHECK, "node 'fc': attr 'shape': cannot infer -1 for an input of shape (3, 4)"},
    {"missing initializer", HDR X "\"params\":[{\"name\":\"w\",\"shape\":[2,4]}]," FC OUT,
     PK_ERR_CHECK, "param 'w': missing initializer (no \"init\" and no weights_file)"},
    {"not in the weights file", HDR "\"weights_file\":\"pre.pkw\"," X
     "\"params\":[{\"name\":\"w\",\"shape\":[2,4]}]," FC OUT,
     PK_ERR_CHECK, "param 'w': missing initializer (no \"init\" and not in"},
    {"weights file shape", HDR "\"weights_file\":\"pre.pkw\"," X
     "\"params\":[{\"name\":\"fc1.weight\",\"shape\":[4,3]}]," FC OUT,
     PK_ERR_CHECK, "holds it as f32 (3, 4), the model says f32 (4, 3)"},
    {"weights file missing", HDR "\"weights_file\":\"nope.pkw\"," X
     "\"params\":[{\"name\":\"w\",\"shape\":[2,4]}]," FC OUT,
     PK_ERR_IO, "nope.pkw"},
    {"init length", HDR X "\"params\":[{\"name\":\"w\",\"shape\":[2,4],\"init\":[1,2,3,4,5,6,7]}],"
     FC OUT, PK_ERR_CHECK, "param 'w': init has 7 values, the shape needs 8"},
    {"init not a number",
     HDR X "\"params\":[{\"name\":\"w\",\"shape\":[2,4],\"init\":[1,2,3,\"4\",5,6,7,8]}]," FC OUT,
     PK_ERR_CHECK, "param 'w': init[3] is not a finite number"},
    {"init beyond f32",
     HDR X "\"params\":[{\"name\":\"w\",\"shape\":[2,4],\"init\":[1,2,3,1e39,5,6,7,8]}]," FC OUT,
     PK_ERR_CHECK, "init[3] = 1e+39 is outside the range of f32"},
    {"output given twice", GOOD ",\"output\":\"z\"}", PK_ERR_CHECK, "key 'output' appears twice"},
    {"output names no tensor", HDR X W FC "\"output\":\"z\"}", PK_ERR_CHECK,
     "output 'z' names no tensor"},
    {"output is an input", HDR X W FC "\"output\":\"x\"}", PK_ERR_CHECK,
     "output 'x' is not produced by a node"},
    {"no output", HDR X W FC "\"name\":\"m\"}", PK_ERR_CHECK, "missing key 'output'"},
    {"name with parenthesis",
     HDR X "\"params\":[{\"name\":\"grad(w)\",\"shape\":[2,4],\"init\":[1,2,3,4,5,6,7,8]}]," FC OUT,
     PK_ERR_CHECK, "params[0]: name 'grad(w)' has a parenthesis"},
    {"empty name", HDR "\"inputs\":[{\"name\":\"\",\"shape\":[\"N\",4]}]," W FC OUT,
     PK_ERR_CHECK, "inputs[0]: empty name"},
    {"control character in a name",
     HDR "\"inputs\":[{\"name\":\"x\\u0001\",\"shape\":[\"N\",4]}]," W FC OUT, PK_ERR_CHECK,
     "inputs[0]: name 'x\\x01' has a control character"},
    {"loss", GOOD TR("{\"loss\":\"hinge\"}"), PK_ERR_CHECK,
     "training: loss 'hinge' is not softmax_cross_entropy or mse"},
    {"classes", GOOD TR("{\"classes\":3}"), PK_ERR_CHECK,
     "training: classes is 3, the output 'y' has 2"},
    {"classes with mse", GOOD TR("{\"loss\":\"mse\",\"classes\":2}"), PK_ERR_CHECK,
     "training: key 'classes' applies to softmax_cross_entropy only"},
    {"unknown training key", GOOD TR("{\"epochs\":3}"), PK_ERR_CHECK,
     "training: unknown key 'epochs'"},
    {"optimizer kind", GOOD TR("{\"optimizer\":{\"kind\":\"rmsprop\"}}"), PK_ERR_CHECK,
     "training.optimizer: kind 'rmsprop' is not sgd, adam or adamw"},
    {"negative lr", GOOD TR("{\"optimizer\":{\"lr\":-1}}"), PK_ERR_CHECK,
     "training.optimizer: key 'lr' is -1, outside (0"},
    {"momentum 1", GOOD TR("{\"optimizer\":{\"momentum\":1}}"), PK_ERR_CHECK,
     "training.optimizer: key 'momentum' is 1, outside"},
    {"momentum with adam", GOOD TR("{\"optimizer\":{\"kind\":\"adam\",\"momentum\":0.9}}"),
     PK_ERR_CHECK, "training.optimizer: key 'momentum' applies to sgd only"},
    {"betas of one", GOOD TR("{\"optimizer\":{\"kind\":\"adam\",\"betas\":[0.9]}}"),
     PK_ERR_CHECK, "key 'betas' must be an array of 2 numbers"},
    {"betas with sgd", GOOD TR("{\"optimizer\":{\"betas\":[0.9,0.99]}}"), PK_ERR_CHECK,
     "key 'betas' applies to adam and adamw only"},
    {"unknown optimizer key", GOOD TR("{\"optimizer\":{\"nesterov\":true}}"), PK_ERR_CHECK,
     "training.optimizer: unknown key 'nesterov'"},
    {"clip_global without clip_norm", GOOD TR("{\"optimizer\":{\"clip_global\":true}}"),
     PK_ERR_CHECK, "clip_global needs clip_norm > 0"},
    {"step without step_size", GOOD TR("{\"lr_schedule\":{\"kind\":\"step\"}}"), PK_ERR_CHECK,
     "training.lr_schedule: missing key 'step_size'"},
    {"cosine of 0 steps", GOOD TR("{\"lr_schedule\":{\"kind\":\"cosine\",\"total_steps\":0}}"),
     PK_ERR_CHECK, "training.lr_schedule: key 'total_steps' is 0, outside 1.."},
    {"gamma with cosine",
     GOOD TR("{\"lr_schedule\":{\"kind\":\"cosine\",\"total_steps\":9,\"gamma\":0.5}}"),
     PK_ERR_CHECK, "key 'gamma' applies to kind 'step' only"},
    {"schedule kind", GOOD TR("{\"lr_schedule\":{\"kind\":\"linear\"}}"), PK_ERR_CHECK,
     "training.lr_schedule: kind 'linear' is not constant, step or cosine"},
    {"clip without max", HDR X W "\"nodes\":[" NODE("clip", "\"x\"", "y", ",\"attrs\":{\"min\":0}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': op 'clip' needs attr 'max'"},
    {"clip without attrs", HDR X W "\"nodes\":[" NODE("clip", "\"x\"", "y", "") "]," OUT,
     PK_ERR_CHECK, "node 'fc': op 'clip' needs attr 'min'"},
    {"clip min above max",
     HDR X W "\"nodes\":[" NODE("clip", "\"x\"", "y", ",\"attrs\":{\"min\":1,\"max\":-1}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': clip: clip range [1, -1] must be finite with min <= max"},
    {"clip max infinite",
     HDR X W "\"nodes\":[" NODE("clip", "\"x\"", "y", ",\"attrs\":{\"min\":1,\"max\":1e999}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'max' must be a finite number"},
    {"leaky_relu alpha 0",
     HDR X W "\"nodes\":[" NODE("leaky_relu", "\"x\"", "y", ",\"attrs\":{\"alpha\":0}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'alpha' must be a finite number > 0"},
    {"elu alpha a string",
     HDR X W "\"nodes\":[" NODE("elu", "\"x\"", "y", ",\"attrs\":{\"alpha\":\"1\"}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'alpha' must be a finite number > 0"},
    {"alpha on silu",
     HDR X W "\"nodes\":[" NODE("silu", "\"x\"", "y", ",\"attrs\":{\"alpha\":1}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'alpha' does not apply to op 'silu'"},
    /* graph I/O: version-2 keys in a version-1 file, and their own errors */
    {"v1 outputs", HDR X W "\"nodes\":[{\"name\":\"fc\",\"op\":\"relu\",\"inputs\":[\"x\"],"
     "\"outputs\":[\"y\"]}]," OUT, PK_ERR_CHECK,
     "node 'fc': key 'outputs' needs \"version\": 2 (this file says version 1)"},
    {"v1 input dtype", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",4],\"dtype\":\"i32\"}],"
     W FC OUT, PK_ERR_CHECK, "input 'x': key 'dtype' needs \"version\": 2"},
    {"v1 input batch", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[3,4],\"batch\":false}],"
     W FC OUT, PK_ERR_CHECK, "input 'x': key 'batch' needs \"version\": 2"},
    {"v2 output and outputs", HDR2 X W "\"nodes\":[{\"name\":\"fc\",\"op\":\"relu\",\"inputs\":"
     "[\"x\"],\"output\":\"y\",\"outputs\":[\"y\"]}]," OUT, PK_ERR_CHECK,
     "node 'fc': give 'output' or 'outputs', not both"},
    {"v2 outputs count", HDR2 X W "\"nodes\":[{\"name\":\"fc\",\"op\":\"softmax\",\"inputs\":"
     "[\"x\"],\"outputs\":[\"m\",\"y\"],\"attrs\":{\"axis\":1}}]," OUT, PK_ERR_CHECK,
     "node 'fc': 2 output names given, but softmax computes 3"},
    {"v2 outputs empty", HDR2 X W "\"nodes\":[{\"name\":\"fc\",\"op\":\"relu\",\"inputs\":"
     "[\"x\"],\"outputs\":[]}]," OUT, PK_ERR_CHECK, "key 'outputs' must be a non-empty array"},
    {"v2 outputs twice", HDR2 X W "\"nodes\":[{\"name\":\"fc\",\"op\":\"softmax\",\"inputs\":"
     "[\"x\"],\"outputs\":[\"m\",\"m\",\"y\"],\"attrs\":{\"axis\":1}}]," OUT, PK_ERR_CHECK,
     "outputs[1] 'm': named twice"},
    {"v2 outputs taken", HDR2 X W "\"nodes\":[{\"name\":\"fc\",\"op\":\"relu\",\"inputs\":"
     "[\"x\"],\"outputs\":[\"w\"]}]," OUT, PK_ERR_CHECK, "outputs[0] 'w': duplicate tensor name"},
    {"v2 input dtype", HDR2 "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",4],\"dtype\":\"u8\"}],"
     W FC OUT, PK_ERR_CHECK, "input 'x': dtype 'u8' is not f32, i32 or i64"},
    {"v2 float input dtype", HDR2 "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",4],\"dtype\":"
     "\"f64\"}]," W FC OUT, PK_ERR_CHECK, "dtype 'f64' differs from the model's f32"},
    {"v2 batchless string dim", HDR2 "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",4],"
     "\"batch\":false}]," W FC OUT, PK_ERR_CHECK, "input 'x': "},
    {"xent needs 2-D output",
     HDR X W "\"nodes\":[" NODE("sum", "\"x\"", "y", ",\"attrs\":{\"axes\":[1]}") "],"
     "\"output\":\"y\"" TR("{\"loss\":\"softmax_cross_entropy\"}"),
     PK_ERR_CHECK, "training: loss softmax_cross_entropy needs a (batch, classes) or (batch, "
     "tokens, classes) output"},
    /* attention, softmax family, pooling, activations */
    {"gelu approximate erf",
     HDR X W "\"nodes\":[" NODE("gelu", "\"x\"", "y", ",\"attrs\":{\"approximate\":\"erf\"}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'approximate' must be \"none\" or \"tanh\""},
    {"pow_scalar without exponent", HDR X W "\"nodes\":[" NODE("pow_scalar", "\"x\"", "y", "") "],"
     OUT, PK_ERR_CHECK, "node 'fc': op 'pow_scalar' needs attr 'exponent'"},
    {"adaptive pool output_size 0", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",1,4,4]}]," W
     "\"nodes\":[" NODE("adaptive_avg_pool2d", "\"x\"", "y", ",\"attrs\":{\"output_size\":[2,0]}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'output_size'[1] is 0, outside 1.."},
    {"sdpa scale 0", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",3,4]}]," W
     "\"nodes\":[" NODE("sdpa", "\"x\",\"x\",\"x\"", "y", ",\"attrs\":{\"scale\":0}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'scale' must be a finite number > 0"},
    {"sdpa causal not a bool", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",3,4]}]," W
     "\"nodes\":[" NODE("sdpa", "\"x\",\"x\",\"x\"", "y", ",\"attrs\":{\"causal\":1}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'causal' must be true or false"},
    {"sdpa without V", HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",3,4]}]," W
     "\"nodes\":[" NODE("sdpa", "\"x\",\"x\"", "y", "") "],"
     OUT, PK_ERR_CHECK, "node 'fc': "},
    /* shape and data movement */
    {"pads length",
     HDR X W "\"nodes\":[" NODE("pad", "\"x\"", "y", ",\"attrs\":{\"pads\":[1,1]}") "]," OUT,
     PK_ERR_CHECK, "node 'fc': attr 'pads' must be an array of 4 integers (before and after "
     "each of the input's 2 dims)"},
    {"pads negative",
     HDR X W "\"nodes\":[" NODE("pad", "\"x\"", "y", ",\"attrs\":{\"pads\":[0,0,-1,0]}") "],"
     OUT, PK_ERR_CHECK, "attr 'pads'[2]"},
    {"slice_step 0",
     HDR X W "\"nodes\":["
     NODE("slice", "\"x\"", "y", ",\"attrs\":{\"slice_len\":2,\"slice_step\":0}") "]," OUT,
     PK_ERR_CHECK, "attr 'slice_step'"},
    {"perm not an array",
     HDR X W "\"nodes\":[" NODE("transpose", "\"x\"", "y", ",\"attrs\":{\"perm\":1}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'perm' must be an array of 1..8 axes"},
    {"perm repeats",
     HDR X W "\"nodes\":[" NODE("transpose", "\"x\"", "y", ",\"attrs\":{\"perm\":[1,-1]}") "],"
     OUT, PK_ERR_CHECK, "transpose: perm lists axis 1 twice"},
    {"expand -1 beyond the input",
     HDR X W "\"nodes\":[" NODE("expand", "\"x\"", "y", ",\"attrs\":{\"shape\":[-1,\"N\",4]}") "],"
     OUT, PK_ERR_CHECK, "attr 'shape'[0] is -1 but no input dim lines up with it"},
    {"expand without shape", HDR X W "\"nodes\":[" NODE("expand", "\"x\"", "y", "") "]," OUT,
     PK_ERR_CHECK, "node 'fc': op 'expand' needs attr 'shape'"},
    {"concat of 9",
     HDR X W "\"nodes\":["
     NODE("concat", "\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"", "y", "") "]," OUT,
     PK_ERR_CHECK, "op 'concat' takes 1 to 8 inputs, not 9"},
    {"value on transpose",
     HDR X W "\"nodes\":[" NODE("transpose", "\"x\"", "y", ",\"attrs\":{\"value\":1}") "],"
     OUT, PK_ERR_CHECK, "attr 'value' does not apply to op 'transpose'"},
    {"where on a float mask",
     HDR X W "\"nodes\":[" NODE("where", "\"x\",\"x\",\"x\"", "y", "") "]," OUT, PK_ERR_CHECK,
     "where: input 0 has dtype f32 (must be i32 or i64: it holds integers)"},
    /* losses with integer labels and optimizer features */
    {"label_smoothing above 1",
     HDR X W FC "\"output\":\"y\"" TR("{\"label_smoothing\":1.5}"),
     PK_ERR_CHECK, "training: key 'label_smoothing' is 1.5, outside [0, 1]"},
    {"ignore_index on mse",
     HDR X W FC "\"output\":\"y\"" TR("{\"loss\":\"mse\",\"ignore_index\":-100}"),
     PK_ERR_CHECK, "training: key 'ignore_index' applies to softmax_cross_entropy only"},
    {"accum_steps 0",
     HDR X W FC "\"output\":\"y\"" TR("{\"optimizer\":{\"accum_steps\":0}}"),
     PK_ERR_CHECK, "training.optimizer: key 'accum_steps' is 0, outside 1..2147483647"},
    {"cosine total within warmup",
     HDR X W FC "\"output\":\"y\"" TR("{\"lr_schedule\":{\"kind\":\"cosine\",\"total_steps\":5,"
                            "\"warmup_steps\":5}}"),
     PK_ERR_CHECK, "training.lr_schedule: total_steps 5 must exceed warmup_steps 5"},
    /* indexing and dropout: the attrs; their integer inputs need integer graph inputs */
    {"dropout p a string",
     HDR X W "\"nodes\":[" NODE("dropout", "\"x\"", "y", ",\"attrs\":{\"p\":\"0.5\"}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'p' must be a finite number"},
    {"dropout names the step's seed", /* the graph supplies it */
     HDR X W "\"nodes\":[" NODE("dropout", "\"x\", \"x\"", "y", "") "]," OUT, PK_ERR_CHECK,
     "node 'fc': op 'dropout' takes 1 input, not 2"},
    {"p on relu",
     HDR X W "\"nodes\":[" NODE("relu", "\"x\"", "y", ",\"attrs\":{\"p\":0.5}") "],"
     OUT, PK_ERR_CHECK, "node 'fc': attr 'p' does not apply to op 'relu'"},
    {"gather of float indices",
     HDR X W "\"nodes\":[" NODE("gather", "\"x\", \"x\"", "y", ",\"attrs\":{\"axis\":1}") "],"
     OUT, PK_ERR_CHECK, "gather: input 1 has dtype"},
};

static void test_errors(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/bad.json", pk_test_tmpdir());
  /* The shared base text itself must load, or every case below proves nothing. */
  {
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g;
    pk_status s = pk_frontend_json(ctx, GOOD "}", strlen(GOOD "}"), path, 3, &g, NULL);
    CHECK(s == PK_OK, "base text: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
  }
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    const bad_case *c = &BAD[i];
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g = (pk_graph *)&g;
    pk_model_info info;
    pk_status s = pk_frontend_json(ctx, c->text, strlen(c->text), path, 3, &g, &info);
    const char *msg = pk_ctx_error(ctx);
    bool ok = s == c->want && strstr(msg, c->needle) && strstr(msg, path) && g == NULL;
    CHECK(ok, "%s: want %s '%s', got %s '%s'", c->label, pk_status_name(c->want), c->needle,
          pk_status_name(s), msg);
    printf("%s error: %s -> %s\n", ok ? "PASS" : "FAIL", c->label, msg);
    pk_ctx_free(ctx);
  }
  /* The activations' attrs reach pk_op_attrs (omitted alpha: zero, the op's default). */
  {
    static const char text[] =
        HDR X W "\"nodes\":[{\"name\":\"a\",\"op\":\"leaky_relu\",\"inputs\":[\"x\"],"
        "\"output\":\"ao\",\"attrs\":{\"alpha\":0.2}},"
        "{\"name\":\"b\",\"op\":\"elu\",\"inputs\":[\"ao\"],\"output\":\"bo\"},"
        "{\"name\":\"c\",\"op\":\"clip\",\"inputs\":[\"bo\"],\"output\":\"co\","
        "\"attrs\":{\"min\":-0.5,\"max\":6}},"
        "{\"name\":\"d\",\"op\":\"hardswish\",\"inputs\":[\"co\"],\"output\":\"y\"}],"
        OUT;
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g;
    pk_status s = pk_frontend_json(ctx, text, strlen(text), path, 3, &g, NULL);
    CHECK(s == PK_OK, "activations: %s", pk_ctx_error(ctx));
    if (s == PK_OK) {
      const pk_gnode *a = node(g, "a"), *b = node(g, "b"), *c = node(g, "c"), *d = node(g, "d");
      CHECK(a && a->op == PK_OP_LEAKY_RELU && a->prm.attrs.alpha == 0.2, "leaky_relu alpha");
      CHECK(b && b->op == PK_OP_ELU && b->prm.attrs.alpha == 0, "elu default alpha");
      CHECK(c && c->op == PK_OP_CLIP && c->prm.attrs.clip_min == -0.5 &&
                c->prm.attrs.clip_max == 6, "clip min/max");
      CHECK(d && d->op == PK_OP_HARDSWISH, "hardswish");
    }
    printf("%s activations: alpha, clip min/max\n", s == PK_OK ? "PASS" : "FAIL");
    pk_ctx_free(ctx);
  }
  /* Shape and data movement: the attrs reach pk_op_attrs; unsqueeze is a reshape, and
   * expand's -1 keeps the input's dim. */
  {
    static const char text[] =
        HDR X W "\"nodes\":[{\"name\":\"t\",\"op\":\"transpose\",\"inputs\":[\"x\"],"
        "\"output\":\"to\",\"attrs\":{\"perm\":[-1,0]}},"
        "{\"name\":\"c\",\"op\":\"concat\",\"inputs\":[\"x\",\"x\",\"x\"],\"output\":\"co\","
        "\"attrs\":{\"axis\":0}},"
        "{\"name\":\"s\",\"op\":\"slice\",\"inputs\":[\"co\"],\"output\":\"so\","
        "\"attrs\":{\"slice_start\":1,\"slice_len\":5,\"slice_step\":2}},"
        "{\"name\":\"p\",\"op\":\"pad\",\"inputs\":[\"x\"],\"output\":\"po\","
        "\"attrs\":{\"pads\":[0,1,2,0],\"value\":-1.5}},"
        "{\"name\":\"u\",\"op\":\"reshape\",\"inputs\":[\"x\"],\"output\":\"uo\","
        "\"attrs\":{\"shape\":[\"N\",1,4]}},"
        "{\"name\":\"e\",\"op\":\"expand\",\"inputs\":[\"uo\"],\"output\":\"y\","
        "\"attrs\":{\"shape\":[\"N\",2,-1]}}],"
        OUT;
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g;
    pk_status s = pk_frontend_json(ctx, text, strlen(text), path, 3, &g, NULL);
    CHECK(s == PK_OK, "shape ops: %s", pk_ctx_error(ctx));
    if (s == PK_OK) {
      const pk_gnode *t = node(g, "t"), *c = node(g, "c"), *sl = node(g, "s"), *p = node(g, "p");
      const pk_gnode *e = node(g, "e");
      const pk_gtensor *so = g->tensors[pk_graph_find(g, "so")];
      const pk_gtensor *po = g->tensors[pk_graph_find(g, "po")];
      const pk_gtensor *y = g->tensors[pk_graph_find(g, "y")];
      CHECK(t && t->op == PK_OP_TRANSPOSE && t->prm.attrs.nperm == 2 &&
                t->prm.attrs.perm[0] == -1 && t->prm.attrs.perm[1] == 0, "transpose perm");
      CHECK(c && c->op == PK_OP_CONCAT && c->ninputs == 3 && c->prm.ninputs == 3,
            "concat of 3 (variadic)");
      CHECK(sl && sl->prm.attrs.slice_step == 2 && so->shape[0] == 3 && so->shape[1] == 4,
            "slice step 2 of [1, 6) takes 3 rows");
      CHECK(p && p->prm.attrs.pads[1] == 1 && p->prm.attrs.pads[2] == 2 &&
                p->prm.attrs.value == -1.5 && po->shape[0] == 4 && po->shape[1] == 6,
            "pad pads and value");
      CHECK(e && e->prm.attrs.new_ndim == 3 && y->ndim == 3 && y->shape[0] == 3 &&
                y->shape[1] == 2 && y->shape[2] == 4, "expand [N, 2, -1] of (3, 1, 4)");
    }
    printf("%s shape ops: perm, variadic concat, slice_step, pads/value, unsqueeze, expand -1\n",
           s == PK_OK ? "PASS" : "FAIL");
    pk_ctx_free(ctx);
  }
  /* A batch the compiler cannot use; by file: extension and existence. */
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_status s = pk_frontend_json(ctx, GOOD "}", strlen(GOOD "}"), path, 0, &g, NULL);
  CHECK(s == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), "bad.json: batch 0 is outside 1.."),
        "batch 0: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  /* ".onnx" goes to the ONNX importer (test_onnx_import), which names the missing file */
  s = pk_frontend_load(ctx, "absent-model.onnx", 1, &g, NULL);
  CHECK(s == PK_ERR_IO && strstr(pk_ctx_error(ctx), "absent-model.onnx: No such file"),
        "onnx: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  s = pk_frontend_load(ctx, pk_test_path("absent.json"), 1, &g, NULL);
  CHECK(s == PK_ERR_IO && strstr(pk_ctx_error(ctx), "absent.json"), "absent: %s",
        pk_ctx_error(ctx));
  printf("%s error: batch 0, .onnx unsupported, absent file is an I/O error\n",
         s == PK_ERR_IO ? "PASS" : "FAIL");
  pk_ctx_free(ctx);
}

/* graph I/O: version 2 — several inputs (integer, batch-less) and a node naming every
 * output; a version-1 file still loads as before (every other test here). */
static void test_v2(void) {
  static const char text[] =
      HDR2 "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",4]},"
      "{\"name\":\"ids\",\"shape\":[\"N\",4],\"dtype\":\"i32\"},"
      "{\"name\":\"bias\",\"shape\":[4],\"batch\":false},"
      "{\"name\":\"x2\",\"shape\":[7,4],\"dtype\":\"f32\",\"batch\":true}],"
      "\"params\":[],\"nodes\":["
      "{\"name\":\"a\",\"op\":\"add\",\"inputs\":[\"x\",\"x2\"],\"outputs\":[\"s\"]},"
      "{\"name\":\"b\",\"op\":\"add\",\"inputs\":[\"s\",\"bias\"],\"output\":\"t\"},"
      "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"t\"],\"attrs\":{\"axis\":1},"
      "\"outputs\":[\"sm.max\",\"sm.sum\",\"p\"]},"
      "{\"name\":\"c\",\"op\":\"add\",\"inputs\":[\"p\",\"sm.max\"],\"output\":\"y\"}],"
      "\"output\":\"y\"}";
  char path[300];
  snprintf(path, sizeof path, "%s/v2.json", pk_test_tmpdir());
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_status s = pk_frontend_json(ctx, text, strlen(text), path, 3, &g, NULL);
  CHECK(s == PK_OK, "v2: %s", pk_ctx_error(ctx));
  if (s == PK_OK) {
    const pk_gtensor *x = tensor(g, "x"), *ids = tensor(g, "ids"), *b = tensor(g, "bias"),
                     *x2 = tensor(g, "x2"), *mx = tensor(g, "sm.max"), *sum = tensor(g, "sm.sum");
    CHECK(x && x->dtype == PKRT_DTYPE_F32 && !x->no_batch && x->shape[0] == 3, "x");
    CHECK(ids && ids->dtype == PKRT_DTYPE_I32 && ids->role == PK_ROLE_INPUT &&
              shape_is(ids, 2, (int64_t[]){3, 4}), "ids: i32 (3, 4)");
    CHECK(b && b->no_batch && shape_is(b, 1, (int64_t[]){4}), "bias: no batch dim, (4)");
    CHECK(x2 && !x2->no_batch && x2->shape[0] == 3, "x2: batch replaces 7");
    CHECK(mx && sum && mx->role == PK_ROLE_ACTIVATION && sum->role == PK_ROLE_ACTIVATION &&
              shape_is(mx, 2, (int64_t[]){3, 1}) && mx->producer == sum->producer &&
              mx->producer >= 0 && g->nodes[mx->producer]->outputs[2] == pk_graph_find(g, "p"),
          "softmax stages named in order, kept as activations");
    CHECK(g->output == pk_graph_find(g, "y"), "output y");
    const char *txt = pk_graph_print(ctx, g);
    CHECK(strstr(txt, "bias : input f32 (4,) no-batch") && strstr(txt, "ids : input i32 (3, 4)"),
          "dump: %s", txt);
  }
  printf("%s v2: integer and batch-less inputs, named outputs\n", s == PK_OK ? "PASS" : "FAIL");
  /* Training through a named stage is refused: the op's gradient takes dY of the result. */
  pk_graph *fwd;
  static const char stage_text[] =
      HDR2 X W "\"nodes\":[{\"name\":\"fc\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],"
      "\"output\":\"h\",\"attrs\":{\"trans_b\":true}},"
      "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"h\"],\"attrs\":{\"axis\":1},"
      "\"outputs\":[\"sm.max\",\"sm.sum\",\"p\"]},"
      "{\"name\":\"c\",\"op\":\"add\",\"inputs\":[\"p\",\"sm.max\"],\"output\":\"y\"}],"
      "\"output\":\"y\"}";
  s = pk_frontend_json(ctx, stage_text, strlen(stage_text), path, 3, &fwd, NULL);
  CHECK(s == PK_OK, "stage graph: %s", pk_ctx_error(ctx));
  if (s == PK_OK) {
    pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1};
    pk_graph *t;
    s = pk_train_build(fwd, &sp, &t);
    CHECK(s == PK_ERR_UNSUPPORTED &&
              strstr(pk_ctx_error(ctx), "'sm.max' (output 0 of node 'sm', before its result)"),
          "training through a stage: %s", pk_ctx_error(ctx));
  }
  /* A normalization's saved stages, named: its own gradient still reads them, so training
   * builds (the names only make them visible). */
  static const char ln_text[] =
      HDR2 X "\"params\":[{\"name\":\"g\",\"shape\":[4],\"init\":[1,1,1,1]},"
      "{\"name\":\"b\",\"shape\":[4],\"init\":[0,0,0,0]}],"
      "\"nodes\":[{\"name\":\"ln\",\"op\":\"layer_norm\",\"inputs\":[\"x\",\"g\",\"b\"],"
      "\"outputs\":[\"ln.mean\",\"ln.var\",\"ln.rstd\",\"y\"]}],\"output\":\"y\"}";
  pk_ctx_clear_error(ctx);
  s = pk_frontend_json(ctx, ln_text, strlen(ln_text), path, 3, &fwd, NULL);
  CHECK(s == PK_OK, "layer_norm outputs: %s", pk_ctx_error(ctx));
  if (s == PK_OK) {
    const pk_gtensor *rstd = tensor(fwd, "ln.rstd");
    CHECK(rstd && shape_is(rstd, 2, (int64_t[]){3, 1}) && rstd->role == PK_ROLE_ACTIVATION,
          "ln.rstd (3, 1)");
    pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1};
    pk_graph *t;
    s = pk_train_build(fwd, &sp, &t);
    CHECK(s == PK_OK, "training with named layer_norm stages: %s", pk_ctx_error(ctx));
  }
  pk_ctx_free(ctx);
}

/* attention, softmax family, pooling, activations: their attrs reach pk_op_attrs. */
static void test_attn_attrs(void) {
  static const char text[] =
      HDR "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",3,4]}]," W
      "\"nodes\":[{\"name\":\"a\",\"op\":\"gelu\",\"inputs\":[\"x\"],\"output\":\"ao\","
      "\"attrs\":{\"approximate\":\"tanh\"}},"
      "{\"name\":\"b\",\"op\":\"pow_scalar\",\"inputs\":[\"ao\"],\"output\":\"bo\","
      "\"attrs\":{\"exponent\":0.5}},"
      "{\"name\":\"c\",\"op\":\"sdpa\",\"inputs\":[\"bo\",\"x\",\"x\"],\"output\":\"co\","
      "\"attrs\":{\"causal\":true,\"scale\":0.25}},"
      "{\"name\":\"d\",\"op\":\"log_softmax\",\"inputs\":[\"co\"],\"output\":\"do\","
      "\"attrs\":{\"axis\":-1}},"
      "{\"name\":\"e\",\"op\":\"reshape\",\"inputs\":[\"do\"],\"output\":\"eo\","
      "\"attrs\":{\"shape\":[\"N\",1,3,4]}},"
      "{\"name\":\"f\",\"op\":\"adaptive_avg_pool2d\",\"inputs\":[\"eo\"],\"output\":\"y\","
      "\"attrs\":{\"output_size\":[2,3]}}],"
      OUT;
  char path[300];
  snprintf(path, sizeof path, "%s/attn.json", pk_test_tmpdir());
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_status s = pk_frontend_json(ctx, text, strlen(text), path, 3, &g, NULL);
  CHECK(s == PK_OK, "attention attrs: %s", pk_ctx_error(ctx));
  if (s == PK_OK) {
    const pk_gnode *a = node(g, "a"), *b = node(g, "b"), *c = node(g, "c"), *d = node(g, "d");
    const pk_gnode *f = node(g, "f");
    CHECK(a && a->prm.attrs.approximate == PK_GELU_TANH, "gelu approximate tanh");
    CHECK(b && b->op == PK_OP_POW_SCALAR && b->prm.attrs.exponent == 0.5, "pow_scalar exponent");
    CHECK(c && c->op == PK_OP_SDPA && c->prm.attrs.causal && c->prm.attrs.scale == 0.25,
          "sdpa causal, scale");
    CHECK(d && d->op == PK_OP_LOG_SOFTMAX && d->prm.attrs.axis == -1, "log_softmax axis");
    CHECK(f && f->op == PK_OP_ADAPTIVE_AVG_POOL2D && f->prm.attrs.output_size[0] == 2 &&
              f->prm.attrs.output_size[1] == 3 && shape_is(tensor(g, "y"), 4,
                                                           (int64_t[]){3, 1, 2, 3}),
          "adaptive_avg_pool2d output_size");
  }
  printf("%s attention attrs: approximate, exponent, causal, scale, axis, output_size\n",
         s == PK_OK ? "PASS" : "FAIL");
  pk_ctx_free(ctx);
}

/* ---- fuzz: mutated and truncated graph texts ---- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static size_t rndn(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* Mutations that reach past the JSON parser: swapped names, extreme numbers, dropped and
 * duplicated spans, as well as plain byte damage and truncation. */
static size_t mutate(char *buf, size_t len, size_t cap) {
  static const char *const numbers[] = {"0", "-1", "1e309", "-1e309", "2147483648",
                                        "2147483647", "9223372036854775807", "1e-400",
                                        "0.5", "-0", "3", "true", "null", "\"N\"", "[]", "{}"};
  static const char tokens[] = "{}[],:\"0123456789-.eEtruefalsn \\";
  switch (rndn(7)) {
  case 0: /* one byte */
    if (len) buf[rndn(len)] = rndn(4) ? tokens[rndn(sizeof tokens - 1)] : (char)rndn(256);
    break;
  case 1: { /* delete a span */
    if (!len) break;
    size_t at = rndn(len), n = 1 + rndn(24);
    if (at + n > len) n = len - at;
    memmove(buf + at, buf + at + n, len - at - n);
    len -= n;
    break;
  }
  case 2: { /* duplicate a span */
    if (!len) break;
    size_t from = rndn(len), n = 1 + rndn(40), at = rndn(len);
    if (from + n > len) n = len - from;
    if (len + n >= cap) break;
    char tmp[64];
    memcpy(tmp, buf + from, n);
    memmove(buf + at + n, buf + at, len - at);
    memcpy(buf + at, tmp, n);
    len += n;
    break;
  }
  case 3: /* truncate */
    len = rndn(len + 1);
    break;
  case 4: { /* replace a number with an extreme one */
    size_t at = rndn(len);
    while (at < len && !(buf[at] >= '0' && buf[at] <= '9')) at++;
    if (at >= len) break;
    size_t end = at;
    while (end < len && strchr("0123456789.eE+-", buf[end])) end++;
    const char *r = numbers[rndn(sizeof numbers / sizeof numbers[0])];
    size_t rn = strlen(r);
    if (len - (end - at) + rn >= cap) break;
    memmove(buf + at + rn, buf + end, len - end);
    memcpy(buf + at, r, rn);
    len = len - (end - at) + rn;
    break;
  }
  default: { /* copy one quoted string over another (names, ops, keys) */
    size_t q[64], nq = 0;
    for (size_t i = 0; i < len && nq < 64; i++)
      if (buf[i] == '"') q[nq++] = i;
    if (nq < 4) break;
    size_t a = rndn(nq / 2) * 2, b = rndn(nq / 2) * 2;
    if (a + 1 >= nq || b + 1 >= nq) break;
    size_t as = q[a] + 1, an = q[a + 1] - as, bs = q[b] + 1, bn = q[b + 1] - bs;
    char src[128];
    if (an >= sizeof src || len - bn + an >= cap) break;
    memcpy(src, buf + as, an);
    memmove(buf + bs + an, buf + bs + bn, len - bs - bn);
    memcpy(buf + bs, src, an);
    len = len - bn + an;
    break;
  }
  }
  return len;
}

static void test_fuzz(void) {
  size_t nbase[4];
  char *base[4];
  base[0] = read_text(PK_SOURCE_DIR "/tests/data/graphs/mlp_small.json", &nbase[0]);
  base[1] = read_text(pk_test_path("cnn_small.json"), &nbase[1]);
  base[2] = strdup(GOOD TR("{\"optimizer\":{\"kind\":\"adam\"}}"));
  nbase[2] = strlen(base[2]);
  /* graph I/O: version 2 (several inputs, integer and batch-less, named outputs) */
  base[3] = read_text(PK_SOURCE_DIR "/fuzz/corpus/graph/seed-v2-inputs-outputs.json", &nbase[3]);
  const char *files[4] = {"fuzz/mlp_small.json", pk_test_path("cnn_small.json"), "fuzz.json",
                          "fuzz_v2.json"};
  char *files_own[4];
  for (int b = 0; b < 4; b++) files_own[b] = strdup(files[b]);
  enum { ITERS = 6000 };
  size_t cap = 8192;
  char *buf = malloc(cap);
  int ok = 0, syntax = 0, check = 0, other = 0, bad = 0;
  for (int it = 0; it < ITERS; it++) {
    int b = (int)rndn(4);
    if (nbase[b] >= cap) continue;
    memcpy(buf, base[b], nbase[b]);
    size_t len = nbase[b];
    int nm = 1 + (int)rndn(4);
    for (int m = 0; m < nm; m++) len = mutate(buf, len, cap);
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g;
    pk_model_info info;
    int64_t batch = 1 + (int64_t)rndn(5);
    pk_status s = pk_frontend_json(ctx, buf, len, files_own[b], batch, &g, &info);
    const char *msg = pk_ctx_error(ctx);
    if (s == PK_OK) {
      ok++;
      if (!g || msg[0] || g->output < 0) bad++;
    } else {
      if (s == PK_ERR_SYNTAX) syntax++;
      else if (s == PK_ERR_CHECK) check++;
      else other++;
      /* Every failure names the file first. */
      if (g || !msg[0] || strncmp(msg, files_own[b], strlen(files_own[b])) != 0) {
        if (bad++ < 5) printf("FAIL fuzz %d: status %s message '%s'\n", it, pk_status_name(s), msg);
      }
    }
    pk_ctx_free(ctx);
  }
  CHECK(bad == 0, "fuzz: %d results without a proper message", bad);
  CHECK(ok > 0 && check > ITERS / 10 && syntax > ITERS / 10,
        "fuzz should reach all tiers: ok %d syntax %d check %d", ok, syntax, check);
  printf("%s fuzz: %d texts, %d loaded, %d syntax, %d check, %d other errors\n",
         bad == 0 ? "PASS" : "FAIL", ITERS, ok, syntax, check, other);
  free(buf);
  for (int b = 0; b < 4; b++) free(base[b]), free(files_own[b]);
}

/* ---- the digits demo's models (helper-written JSON + .pkw) and its sparse specs ---- */
static char *trainable_list(pk_ctx *ctx, const pk_graph *g) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->role != PK_ROLE_PARAM || !t->trainable) continue;
    pk_strbuf_printf(&b, "%s%s", b.len ? " " : "", t->name);
    if (t->ndim >= 2 && t->train_channels != t->shape[1])
      pk_strbuf_printf(&b, ":%lld", (long long)t->train_channels);
  }
  if (!b.len) pk_strbuf_append(&b, "");
  return pk_strbuf_finish(ctx, &b);
}

static void test_digits(void) {
  static const struct {
    const char *model, *head;
    const char *params; /* name:dims in file order */
    const char *spec[6][2];
  } M[] = {
      {"cnn", "fc.*",
       "conv1.weight:16,1,3,3 conv1.bias:16,1,1 conv2.weight:32,16,3,3 conv2.bias:32,1,1 "
       "conv3.weight:64,32,3,3 conv3.bias:64,1,1 fc.weight:10,64 fc.bias:10",
       {{"head", "fc.weight fc.bias"},
        {"bias_head", "conv1.bias conv2.bias conv3.bias fc.weight fc.bias"},
        {"last2", "conv3.weight conv3.bias fc.weight fc.bias"},
        {"partial25_bias_head", "conv1.bias conv2.bias conv3.weight:8 conv3.bias fc.weight fc.bias"},
        {"partial25_head_localbias", "conv3.weight:8 conv3.bias fc.weight fc.bias"},
        {"full", "conv1.weight conv1.bias conv2.weight conv2.bias conv3.weight conv3.bias "
                 "fc.weight fc.bias"}}},
      {"mlp", "fc3.*",
       "fc1.weight:128,64 fc1.bias:128 fc2.weight:64,128 fc2.bias:64 fc3.weight:10,64 fc3.bias:10",
       {{"head", "fc3.weight fc3.bias"},
        {"bias_head", "fc1.bias fc2.bias fc3.weight fc3.bias"},
        {"last2", "fc2.weight fc2.bias fc3.weight fc3.bias"},
        {"partial25_bias_head", "fc1.bias fc2.weight:32 fc2.bias fc3.weight fc3.bias"},
        {"partial25_head_localbias", "fc2.weight:32 fc2.bias fc3.weight fc3.bias"},
        {"full", "fc1.weight fc1.bias fc2.weight fc2.bias fc3.weight fc3.bias"}}},
  };
  for (int m = 0; m < 2; m++) {
    int before = failures;
    pk_ctx *ctx = pk_ctx_new();
    char path[512];
    snprintf(path, sizeof path, "%s/examples/digits/models/%s.json", PK_SOURCE_DIR, M[m].model);
    pk_graph *g;
    pk_model_info info;
    pk_status s = pk_frontend_load(ctx, path, 32, &g, &info);
    CHECK(s == PK_OK, "%s: %s", path, pk_ctx_error(ctx));
    if (s != PK_OK) {
      pk_ctx_free(ctx);
      continue;
    }
    pk_strbuf b;
    pk_strbuf_init(&b);
    for (int i = 0; i < g->ntensors; i++) {
      const pk_gtensor *t = g->tensors[i];
      if (t->role != PK_ROLE_PARAM) continue;
      pk_strbuf_printf(&b, "%s%s:", b.len ? " " : "", t->name);
      for (int d = 0; d < t->ndim; d++) pk_strbuf_printf(&b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
      CHECK(t->init != NULL, "%s: %s has initial values", M[m].model, t->name);
    }
    const char *got = pk_strbuf_finish(ctx, &b);
    CHECK(strcmp(got, M[m].params) == 0, "%s params: %s", M[m].model, got);
    CHECK(info.classes == 10 && info.has_training && info.train.optim == PK_OPTIM_SGD,
          "%s: 10 classes, sgd", M[m].model);
    /* Its own weights with the head kept: every param but the head is replaced, so the
     * apply must succeed and find the file's names. */
    snprintf(path, sizeof path, "%s/examples/digits/models/%s.pkw", PK_SOURCE_DIR, M[m].model);
    s = pk_weights_apply(ctx, g, path, M[m].head);
    CHECK(s == PK_OK, "%s: apply own weights keeping %s: %s", M[m].model, M[m].head,
          pk_ctx_error(ctx));
    for (int k = 0; k < 6; k++) {
      snprintf(path, sizeof path, "%s/examples/digits/specs/%s_%s.json", PK_SOURCE_DIR,
               M[m].model, M[m].spec[k][0]);
      char *text;
      size_t len;
      pk_sparse_spec *sp;
      pk_ctx_clear_error(ctx);
      s = pk_read_file(ctx, path, &text, &len);
      if (s == PK_OK) s = pk_sparse_parse(ctx, text, len, path, &sp);
      if (s == PK_OK) s = pk_sparse_apply(g, sp);
      CHECK(s == PK_OK, "%s: %s", path, pk_ctx_error(ctx));
      const char *tl = s == PK_OK ? trainable_list(ctx, g) : "";
      CHECK(s != PK_OK || strcmp(tl, M[m].spec[k][1]) == 0, "%s_%s trains '%s', want '%s'",
            M[m].model, M[m].spec[k][0], tl, M[m].spec[k][1]);
    }
    printf("%s digits %s: params and shapes, own .pkw, six sparse specs select as intended\n",
           failures == before ? "PASS" : "FAIL", M[m].model);
    pk_ctx_free(ctx);
  }
}

int main(void) {
  if (pk_test_tmpdir_make("pk_frontend_") != 0) {
    printf("FAIL mkdtemp\n");
    return 1;
  }
  write_cnn_files();
  test_mlp();
  test_cnn();
  test_weights();
  test_errors();
  test_v2();
  test_attn_attrs();
  test_digits();
  test_fuzz();
  pk_test_tmpdir_remove();
  printf("%s test_frontend (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
