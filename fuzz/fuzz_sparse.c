/* fuzz_sparse.c — libFuzzer target for the sparse-update spec reader (pk_sparse_parse),
 * then applying what it accepted (pk_sparse_apply: globs, biases, last layers, partial
 * channels) to a small fixed CNN, so names, counts and fractions meet real params. */
#include <stdint.h>

#include "fuzz_check.h"
#include "pk_frontend.h"

#define WHAT "fuzz-spec.json"

/* Conv, bias, pool, reshape and matmul: every kind of param a rule can select. %s is
 * where each param's "init" goes (zeros: values do not matter to the spec). */
static const char MODEL[] =
    "{\"format\": \"pock-graph\", \"version\": 1, \"dtype\": \"f32\","
    " \"inputs\": [{\"name\": \"x\", \"shape\": [\"N\", 4, 6, 6]}],"
    " \"params\": [{\"name\": \"conv.weight\", \"shape\": [2, 4, 3, 3], \"init\": [%s]},"
    "  {\"name\": \"conv.bias\", \"shape\": [2, 1, 1], \"init\": [%s]},"
    "  {\"name\": \"fc.weight\", \"shape\": [3, 18], \"init\": [%s]},"
    "  {\"name\": \"fc.bias\", \"shape\": [3], \"init\": [%s]}],"
    " \"nodes\": ["
    "  {\"name\": \"conv\", \"op\": \"conv2d\", \"inputs\": [\"x\", \"conv.weight\"],"
    "   \"output\": \"conv.conv\", \"attrs\": {\"stride\": 1, \"pad\": [1, 1]}},"
    "  {\"name\": \"conv.add\", \"op\": \"add\", \"inputs\": [\"conv.conv\", \"conv.bias\"],"
    "   \"output\": \"conv.out\"},"
    "  {\"name\": \"pool\", \"op\": \"max_pool2d\", \"inputs\": [\"conv.out\"],"
    "   \"output\": \"pool.out\", \"attrs\": {\"kernel\": 2, \"stride\": [2, 2]}},"
    "  {\"name\": \"flatten\", \"op\": \"reshape\", \"inputs\": [\"pool.out\"],"
    "   \"output\": \"flat\", \"attrs\": {\"shape\": [\"N\", -1]}},"
    "  {\"name\": \"fc\", \"op\": \"matmul\", \"inputs\": [\"flat\", \"fc.weight\"],"
    "   \"output\": \"fc.mm\", \"attrs\": {\"trans_b\": true}},"
    "  {\"name\": \"fc.add\", \"op\": \"add\", \"inputs\": [\"fc.mm\", \"fc.bias\"],"
    "   \"output\": \"fc.out\"}],"
    " \"output\": \"fc.out\"}";

/* "0, 0, ..., 0" (n zeros) in a static buffer per call site. */
static const char *zeros(char *buf, int n) {
  buf[0] = 0;
  for (int i = 0; i < n; i++) strcat(buf, i ? ", 0" : "0");
  return buf;
}

static const char *model_text(size_t *len) {
  static char text[4096];
  static size_t n;
  if (!n) {
    char a[256], b[16], c[256], d[16];
    n = (size_t)snprintf(text, sizeof text, MODEL, zeros(a, 72), zeros(b, 2), zeros(c, 54),
                         zeros(d, 3));
  }
  *len = n;
  return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  size_t mlen;
  const char *model = model_text(&mlen);
  if (pk_frontend_json(ctx, model, mlen, "model.json", 2, &g, NULL) != PK_OK) {
    fprintf(stderr, "the fixed model does not load: %s\n", pk_ctx_error(ctx));
    __builtin_trap();
  }
  pk_sparse_spec *sp;
  pk_status s = pk_sparse_parse(ctx, (const char *)data, size, WHAT, &sp);
  if (s == PK_OK) s = pk_sparse_apply(g, sp);
  fuzz_report(size, s == PK_OK, pk_ctx_error(ctx));
  if (s != PK_OK) fuzz_check_refusal((int)s, pk_ctx_error(ctx), WHAT);
  pk_ctx_free(ctx);
  return 0;
}
