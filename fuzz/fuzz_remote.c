/* fuzz_remote.c — libFuzzer target for the request parser pock-rt-serve runs on the body of
 * every request whose signature verified (pkrt_remote_request_parse, runtime/remote_wire.c;
 * docs/remote-tuning.md): the input is the body. An accepted request's spans all lie inside
 * the body; a refusal names the request and holds no control character. Parsing never
 * loads code (no_load.c traps if it tries). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "pkrt_remote.h"

static int inside(const void *p, size_t n, const uint8_t *b, size_t len) {
  const uint8_t *q = p;
  return !p || (q >= b && n <= len && (size_t)(q - b) <= len - n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *body = aligned_alloc(8, (size + 8) / 8 * 8); /* the server's buffer is 8-aligned */
  if (!body) return 0;
  if (size) memcpy(body, data, size);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_remote_request rq;
  pkrt_status st = pkrt_remote_request_parse(rt, body, size, &rq);
  fuzz_report(size, st == PKRT_OK, pkrt_ctx_error(rt));
  if (st != PKRT_OK) {
    fuzz_check_refusal((int)st, pkrt_ctx_error(rt), "request");
  } else if (rq.op == PKRT_REMOTE_MEASURE) {
    if (!inside(rq.object, rq.object_len, body, size)) __builtin_trap();
    for (int i = 0; i < rq.ntensors; i++) {
      const pkrt_remote_tensor *t = &rq.tensors[i];
      size_t n = (size_t)t->numel;
      if (!inside(t->data, n * pkrt_dtype_size(t->dtype), body, size) ||
          !inside(t->ref, n * 8, body, size) || !inside(t->bound, n * 8, body, size) ||
          !inside(t->iref, n * 8, body, size))
        __builtin_trap();
    }
  }
  pkrt_ctx_free(rt);
  free(body);
  return 0;
}
