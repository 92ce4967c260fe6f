/* fuzz_onnx.c — libFuzzer target for the ONNX importer (pk_frontend_onnx_mem: what `pock
 * compile model.onnx` runs on the file's bytes), then marking every param trainable on
 * what it accepted. From memory the importer refuses external data, so inputs cannot make
 * the target open files of the machine that fuzzes. Batch 2; one --input-shape binding
 * ("x" = (2, 3, 4, 4)) so the binding path runs too. */
#include <stdint.h>

#include "fuzz_check.h"
#include "pk_frontend.h"

#define WHAT "fuzz.onnx"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  pk_input_shape shape = {.name = "x", .ndim = 4, .shape = {2, 3, 4, 4}};
  pk_frontend_opts opts = {.batch = 2, .shapes = &shape, .nshapes = (size & 1) != 0};
  pk_status s = pk_frontend_onnx_mem(ctx, data, size, WHAT, &opts, &g, &info);
  if (s == PK_OK) s = pk_sparse_apply(g, NULL);
  fuzz_report(size, s == PK_OK, pk_ctx_error(ctx));
  if (s != PK_OK) fuzz_check_refusal((int)s, pk_ctx_error(ctx), WHAT);
  pk_ctx_free(ctx);
  return 0;
}
