/* fuzz_graph.c — libFuzzer target for the JSON graph reader (pk_frontend_json: the model
 * file `pock compile` reads), then marking every param trainable on what it accepted.
 * A weights_file is never read: the fuzz link wraps pkrt_weights_read to refuse (no_read.c),
 * so inputs cannot make the target open files of the machine that fuzzes. */
#include <stdint.h>

#include "fuzz_check.h"
#include "pk_frontend.h"

#define WHAT "fuzz.json"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  pk_status s = pk_frontend_json(ctx, (const char *)data, size, WHAT, 4, &g, &info);
  if (s == PK_OK) s = pk_sparse_apply(g, NULL);
  fuzz_report(size, s == PK_OK, pk_ctx_error(ctx));
  if (s != PK_OK) fuzz_check_refusal((int)s, pk_ctx_error(ctx), WHAT);
  pk_ctx_free(ctx);
  return 0;
}
