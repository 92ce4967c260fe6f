/* onnx_file.c — a whole ONNX file in and out for the tools that work on the protobuf itself
 * (`pock inspect`, `pock export`): the ModelProto unpacked into the context's arena, and
 * packed back. The importer's own reading (IR version, opsets, values) is onnx_load.c. */
#include <string.h>

#include "onnx_impl.h"

/* protobuf-c allocates through these: the message lives in the arena like every compiler
 * object, so a caller may point its fields at arena data and never frees anything. */
static void *arena_alloc(void *data, size_t size) {
  return pk_alloc((pk_ctx *)data, size ? size : 1);
}
static void arena_free(void *data, void *p) {
  (void)data;
  (void)p;
}

pk_status pk_ox_model_read(pk_ctx *ctx, const char *path, Onnx__ModelProto **out) {
  *out = NULL;
  char *bytes;
  size_t len;
  pk_status s = pk_read_file(ctx, path, &bytes, &len);
  if (s != PK_OK) return s;
  /* The importer's unpack (its nesting-depth guard: protobuf-c recurses without a limit,
   * and its messages), into the arena, where the rewriting may point fields at arena data */
  pk_ox im = {.ctx = ctx, .file = path};
  ProtobufCAllocator al = {.alloc = arena_alloc, .free = arena_free, .allocator_data = ctx};
  Onnx__ModelProto *m;
  if ((s = pk_ox_unpack_model(&im, (const uint8_t *)bytes, len, &al, &m)) != PK_OK) return s;
  if (!m->graph) return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: not an ONNX model (no graph)", path);
  *out = m;
  return PK_OK;
}

pk_status pk_ox_model_pack(pk_ctx *ctx, const char *what, const Onnx__ModelProto *m,
                           void **bytes, size_t *len) {
  size_t n = onnx__model_proto__get_packed_size(m);
  /* protobuf's own limit: a message of 2 GiB or more cannot be read back */
  if (n >= ((size_t)1 << 31))
    return pk_ctx_fail(ctx, PK_ERR_CHECK,
                       "%s: the model would be %zu bytes; ONNX files hold at most 2 GiB "
                       "without external data", what, n);
  uint8_t *buf = pk_alloc(ctx, n ? n : 1);
  size_t w = onnx__model_proto__pack(m, buf);
  PK_ASSERT(w == n);
  *bytes = buf;
  *len = n;
  return PK_OK;
}
