/* test_graph_models.h — the demo models (MLP 64-128-64-10 and the small CNN) built with the
 * graph API, plus check helpers shared by the test_graph* programs. */
#ifndef TEST_GRAPH_MODELS_H
#define TEST_GRAPH_MODELS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_graph.h"

static int tg_failures;

#define TG_CHECK(cond, ...)                                     \
  do {                                                          \
    if (cond) break;                                            \
    tg_failures++;                                              \
    printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
    printf(__VA_ARGS__);                                        \
    printf("\n");                                               \
  } while (0)

#define TG_OK(g, expr)                                                         \
  do {                                                                         \
    pk_status s_ = (expr);                                                     \
    if (s_ != PK_OK) {                                                         \
      printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, pk_ctx_error((g)));  \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

/* Linear = matmul(X, W (O, I), trans_b) + bias (O,). Returns the result tensor. */
static inline int tg_linear(pk_graph *g, const char *name, int x, int64_t in, int64_t out) {
  char b[128];
  snprintf(b, sizeof b, "%s.weight", name);
  int w = pk_graph_add_param(g, b, PKRT_DTYPE_F32, 2, (int64_t[]){out, in}, NULL);
  snprintf(b, sizeof b, "%s.bias", name);
  int bias = pk_graph_add_param(g, b, PKRT_DTYPE_F32, 1, (int64_t[]){out}, NULL);
  int mm, y;
  char on[128];
  snprintf(on, sizeof on, "%s.mm", name);
  if (pk_graph_add_op(g, name, PK_OP_MATMUL, &(pk_op_attrs){.trans_b = true}, 2,
                      (int[]){x, w}, on, &mm) != PK_OK)
    return -1;
  snprintf(b, sizeof b, "%s.add", name);
  snprintf(on, sizeof on, "%s.out", name);
  if (pk_graph_add_op(g, b, PK_OP_ADD, NULL, 2, (int[]){mm, bias}, on, &y) != PK_OK) return -1;
  return y;
}

static inline int tg_unary(pk_graph *g, const char *name, pk_op_kind op, const pk_op_attrs *a,
                           int x) {
  int y;
  if (pk_graph_add_op(g, name, op, a, 1, &x, name, &y) != PK_OK) return -1;
  return y;
}

/* MLP 64-128-64-10: fc1, relu, fc2, relu, fc3. 8 forward nodes, 3 layers. */
static inline pk_graph *tg_mlp(pk_ctx *ctx, int64_t n) {
  pk_graph *g = pk_graph_new(ctx, n);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 2, (int64_t[]){n, 64});
  int h = tg_linear(g, "fc1", x, 64, 128);
  h = tg_unary(g, "relu1", PK_OP_RELU, NULL, h);
  h = tg_linear(g, "fc2", h, 128, 64);
  h = tg_unary(g, "relu2", PK_OP_RELU, NULL, h);
  g->output = tg_linear(g, "fc3", h, 64, 10);
  return g;
}

static inline int tg_conv(pk_graph *g, const char *name, int x, int64_t cin, int64_t cout,
                          int64_t pad) {
  char b[128], on[128];
  snprintf(b, sizeof b, "%s.weight", name);
  int w = pk_graph_add_param(g, b, PKRT_DTYPE_F32, 4, (int64_t[]){cout, cin, 3, 3}, NULL);
  snprintf(b, sizeof b, "%s.bias", name);
  int bias = pk_graph_add_param(g, b, PKRT_DTYPE_F32, 3, (int64_t[]){cout, 1, 1}, NULL);
  int c, y;
  snprintf(on, sizeof on, "%s.conv", name);
  if (pk_graph_add_op(g, name, PK_OP_CONV2D, &(pk_op_attrs){.pad = {pad, pad, pad, pad}}, 2,
                      (int[]){x, w}, on, &c) != PK_OK)
    return -1;
  snprintf(b, sizeof b, "%s.add", name);
  snprintf(on, sizeof on, "%s.out", name);
  if (pk_graph_add_op(g, b, PK_OP_ADD, NULL, 2, (int[]){c, bias}, on, &y) != PK_OK) return -1;
  return y;
}

/* CNN with widths c1, c2, c3: conv1 1->c1 (8x8 -> 6x6), relu, conv2 c1->c2 (-> 4x4), relu,
 * max_pool2d 2 (-> 2x2), conv3 c2->c3 pad 1 (-> 2x2), relu, mean over (2, 3), fc c3->10. */
static inline pk_graph *tg_cnn_sized(pk_ctx *ctx, int64_t n, int64_t c1, int64_t c2,
                                     int64_t c3) {
  pk_graph *g = pk_graph_new(ctx, n);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 4, (int64_t[]){n, 1, 8, 8});
  int h = tg_conv(g, "conv1", x, 1, c1, 0);
  h = tg_unary(g, "relu1", PK_OP_RELU, NULL, h);
  h = tg_conv(g, "conv2", h, c1, c2, 0);
  h = tg_unary(g, "relu2", PK_OP_RELU, NULL, h);
  h = tg_unary(g, "pool", PK_OP_MAX_POOL2D,
               &(pk_op_attrs){.kernel = {2, 2}, .stride = {2, 2}}, h);
  h = tg_conv(g, "conv3", h, c2, c3, 1);
  h = tg_unary(g, "relu3", PK_OP_RELU, NULL, h);
  h = tg_unary(g, "gap", PK_OP_MEAN, &(pk_op_attrs){.naxes = 2, .axes = {2, 3}}, h);
  g->output = tg_linear(g, "fc", h, c3, 10);
  return g;
}

/* The demo CNN: widths 16, 32, 64. Forward nodes (13): conv1, conv1.add, relu1, conv2,
 * conv2.add, relu2, pool, conv3, conv3.add, relu3, gap, fc, fc.add. Layers (4): conv1,
 * conv2, conv3, fc. */
static inline pk_graph *tg_cnn(pk_ctx *ctx, int64_t n) { return tg_cnn_sized(ctx, n, 16, 32, 64); }

/* The demo's six sparse-update schemes for the CNN (docs/sparse-update.md). */
enum { TG_HEAD, TG_BIAS_HEAD, TG_LAST2, TG_PART_ALLBIAS, TG_PART_HEAD, TG_FULL, TG_NSCHEMES };
static const char *const tg_scheme_name[TG_NSCHEMES] = {
    "head", "biases+head", "last-2-layers", "conv3-25%+biases+head", "conv3-25%+head",
    "full"};
static const char *const tg_scheme_text[TG_NSCHEMES] = {
    "{\"version\": 1, \"train\": [{\"params\": \"fc.*\"}]}",
    "{\"version\": 1, \"train\": [{\"biases\": true}, {\"params\": \"fc.*\"}]}",
    "{\"version\": 1, \"train\": [{\"last_layers\": 2}]}",
    "{\"version\": 1, \"train\": [{\"params\": \"conv3.weight\", \"channels\": 0.25},"
    " {\"biases\": true}, {\"params\": \"fc.*\"}]}",
    "{\"version\": 1, \"train\": [{\"params\": \"conv3.weight\", \"channels\": 0.25},"
    " {\"params\": [\"conv3.bias\", \"fc.*\"]}]}",
    "{\"version\": 1, \"description\": \"full update\", \"train\": [{\"all\": true}]}",
};

static inline pk_status tg_apply_text(pk_graph *g, const char *text) {
  pk_sparse_spec *sp;
  pk_status s = pk_sparse_parse(g->ctx, text, strlen(text), "spec.json", &sp);
  return s != PK_OK ? s : pk_sparse_apply(g, sp);
}

static inline int tg_report(const char *name) {
  if (tg_failures) {
    printf("FAIL %s: %d check(s) failed\n", name, tg_failures);
    return 1;
  }
  printf("PASS %s\n", name);
  return 0;
}

/* graph I/O and transformer specs: a tiny transformer-like stack. x (n, T, D) → per block
 * PREFIX.<b>: tanh(batch_matmul(h, PREFIX.<b>.fc.weight (D, D), trans_b) + .fc.bias) →
 * mean over T → head (K, D) linear. Linear layers with a rank-3 input, named the way
 * PyTorch names nn.ModuleList children. */
static inline pk_graph *tg_blocks(pk_ctx *ctx, int64_t n, const char *prefix, int nblocks,
                                  int64_t T, int64_t D, int64_t K) {
  pk_graph *g = pk_graph_new(ctx, n);
  int h = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 3, (int64_t[]){n, T, D});
  char b[160], o[160];
  for (int i = 0; i < nblocks && h >= 0; i++) {
    snprintf(b, sizeof b, "%s.%d.fc.weight", prefix, i);
    int w = pk_graph_add_param(g, b, PKRT_DTYPE_F32, 2, (int64_t[]){D, D}, NULL);
    snprintf(b, sizeof b, "%s.%d.fc.bias", prefix, i);
    int bias = pk_graph_add_param(g, b, PKRT_DTYPE_F32, 1, (int64_t[]){D}, NULL);
    int mm, y;
    snprintf(b, sizeof b, "%s.%d.fc", prefix, i);
    snprintf(o, sizeof o, "%s.%d.fc.mm", prefix, i);
    if (pk_graph_add_op(g, b, PK_OP_BATCH_MATMUL, &(pk_op_attrs){.trans_b = true}, 2,
                        (int[]){h, w}, o, &mm) != PK_OK)
      return NULL;
    snprintf(b, sizeof b, "%s.%d.fc.add", prefix, i);
    snprintf(o, sizeof o, "%s.%d.fc.out", prefix, i);
    if (pk_graph_add_op(g, b, PK_OP_ADD, NULL, 2, (int[]){mm, bias}, o, &y) != PK_OK) return NULL;
    snprintf(b, sizeof b, "%s.%d.act", prefix, i);
    h = tg_unary(g, b, PK_OP_TANH, NULL, y);
  }
  int pooled = tg_unary(g, "pool", PK_OP_MEAN, &(pk_op_attrs){.naxes = 1, .axes = {1}}, h);
  g->output = pooled < 0 ? -1 : tg_linear(g, "head", pooled, D, K);
  return g->output >= 0 && pk_graph_validate(g) == PK_OK ? g : NULL;
}

#endif
