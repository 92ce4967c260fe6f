/* onnx_load.c — an ONNX file → an unpacked ModelProto (protobuf-c, code generated from
 * proto/onnx.proto), with the checks protobuf-c leaves to us (nesting depth, IR version,
 * opset imports), and TensorProto data (raw, typed fields, external files) → host arrays. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx_impl.h"

/* Deepest message nesting accepted. ONNX models nest a few levels (model → graph → node →
 * attribute → tensor); subgraphs add a few more. protobuf-c unpacks recursively without a
 * limit, so a file of nested attributes could exhaust the stack: refused before unpacking. */
#define OX_MAX_DEPTH 24

/* Largest model file read (protobuf's own limit is 2 GiB; bigger models use external data). */
#define OX_MAX_FILE ((size_t)2 << 30)

static bool ox_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

/* Walks the wire format with the generated descriptors, descending only into fields the
 * schema says are messages; returns false when nesting passes OX_MAX_DEPTH. Malformed
 * bytes end the walk quietly: unpacking reports them. */
static bool ox_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                        int depth) {
  if (depth > OX_MAX_DEPTH) return false;
  const uint8_t *end = p + len;
  while (p < end) {
    uint64_t key, n;
    if (!ox_varint(&p, end, &key)) return true;
    switch (key & 7) {
    case 0:
      if (!ox_varint(&p, end, &n)) return true;
      break;
    case 1:
      if (end - p < 8) return true;
      p += 8;
      break;
    case 5:
      if (end - p < 4) return true;
      p += 4;
      break;
    case 2: {
      if (!ox_varint(&p, end, &n) || n > (uint64_t)(end - p)) return true;
      uint64_t num = key >> 3;
      const ProtobufCFieldDescriptor *fd =
          num <= UINT_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)num) : NULL;
      if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE &&
          !ox_depth_ok(fd->descriptor, p, (size_t)n, depth + 1))
        return false;
      p += n;
      break;
    }
    default:
      return true; /* groups (3, 4) are not in ONNX's schema; unpack refuses them */
    }
  }
  return true;
}

/* Reads and unpacks `path`. The caller frees with onnx__model_proto__free_unpacked. */
pk_status pk_ox_read_model(pk_ox *im, const char *path, Onnx__ModelProto **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return pk_ctx_fail(im->ctx, PK_ERR_IO, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(f);
    return pk_ctx_fail(im->ctx, PK_ERR_IO, "%s: not a regular file", path);
  }
  if ((uint64_t)st.st_size > OX_MAX_FILE) {
    fclose(f);
    return pk_ox_fail_at(im, NULL, "%lld bytes: larger than protobuf's 2 GiB (keep the weights "
                         "in external data files)", (long long)st.st_size);
  }
  size_t len = (size_t)st.st_size;
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) {
    fclose(f);
    return pk_ctx_fail(im->ctx, PK_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, len);
  }
  size_t got = fread(buf, 1, len, f);
  fclose(f);
  if (got != len) {
    free(buf);
    return pk_ctx_fail(im->ctx, PK_ERR_IO, "%s: short read", path);
  }
  pk_status s = pk_ox_unpack_model(im, buf, len, NULL, out);
  free(buf);
  return s;
}

pk_status pk_ox_unpack_model(pk_ox *im, const uint8_t *buf, size_t len,
                             ProtobufCAllocator *allocator, Onnx__ModelProto **out) {
  *out = NULL;
  if (len == 0) return pk_ox_fail_at(im, NULL, "the file is empty (not an ONNX model)");
  if (!ox_depth_ok(&onnx__model_proto__descriptor, buf, len, 0))
    return pk_ox_fail_at(im, NULL, "messages nest deeper than %d levels (not a model Pock "
                         "reads)", OX_MAX_DEPTH);
  Onnx__ModelProto *m = onnx__model_proto__unpack(allocator, len, buf);
  if (!m)
    return pk_ox_fail_at(im, NULL, "not a valid ONNX protobuf (ModelProto did not decode)");
  *out = m;
  return PK_OK;
}

/* IR version and the default domain's opset: what the converters are written for. */
pk_status pk_ox_check_model(pk_ox *im) {
  const Onnx__ModelProto *m = im->model;
  if (!m->has_ir_version)
    return pk_ox_fail_at(im, NULL, "no ir_version (not an ONNX model?)");
  /* IR 7 is the first with opset 13 (ONNX 1.8); 10 is ONNX 1.16's. */
  if (m->ir_version < 3 || m->ir_version > 10)
    return pk_ox_fail_at(im, NULL, "IR version %lld is not supported (Pock reads 3 to 10)",
                         (long long)m->ir_version);
  if (!m->graph) return pk_ox_fail_at(im, NULL, "the model has no graph");
  im->opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    const char *dom = o->domain ? o->domain : "";
    if ((dom[0] == 0 || strcmp(dom, "ai.onnx") == 0) && o->has_version) im->opset = o->version;
  }
  if (im->opset < 0)
    return pk_ox_fail_at(im, NULL, "no opset import for the default ONNX domain");
  if (im->opset < 13 || im->opset > 21)
    return pk_ox_fail_at(im, NULL, "opset %lld is not supported: Pock reads opsets 13 to 21 "
                         "(re-export with opset_version=13 or newer)", (long long)im->opset);
  return PK_OK;
}

/* ---- tensor data ---- */

/* Element size of a TensorProto data type as stored in raw_data; 0 when unsupported. */
static size_t ox_raw_size(int dt) {
  switch (dt) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
  case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 8;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return 2;
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
  default: return 0;
  }
}

static const char *ox_dt_name(int dt) {
  static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16",
                                      "int32", "int64", "string", "bool", "float16", "double",
                                      "uint32", "uint64", "complex64", "complex128",
                                      "bfloat16"};
  return dt >= 0 && dt < (int)(sizeof names / sizeof names[0]) ? names[dt] : "a float8/int4 type";
}

/* Element i of raw little-endian data of type dt, as int64 (integers) or double. */
static int64_t ox_raw_int(int dt, const uint8_t *p) {
  switch (dt) {
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: { int64_t v; memcpy(&v, p, 8); return v; }
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: { uint64_t v; memcpy(&v, p, 8); return (int64_t)v; }
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: { int32_t v; memcpy(&v, p, 4); return v; }
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: { int16_t v; memcpy(&v, p, 2); return v; }
  case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
  case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return (int8_t)p[0];
  case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return p[0] != 0;
  default: return p[0]; /* UINT8 */
  }
}

/* External data (data_location EXTERNAL): key "location" relative to the model's directory,
 * optional "offset" and "length". The resolved path must stay inside that directory. */
static pk_status ox_external(pk_ox *im, const char *where, const Onnx__TensorProto *t,
                             size_t want, uint8_t **out) {
  const char *loc = NULL;
  int64_t off = 0, length = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
    char *endp;
    if (strcmp(k, "location") == 0) {
      loc = v;
    } else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
      errno = 0;
      long long x = strtoll(v, &endp, 10);
      if (errno || endp == v || *endp || x < 0)
        return pk_ox_fail_at(im, where, "external data %s %s is not a byte count", k,
                             pk_ox_quote(im, v));
      if (k[0] == 'o') off = x;
      else length = x;
    }
  }
  if (!loc || !loc[0]) return pk_ox_fail_at(im, where, "external data without a location");
  if (!im->dir)
    return pk_ox_fail_at(im, where, "external data needs the model's file (read from memory)");
  if (loc[0] == '/' || strstr(loc, ".."))
    return pk_ox_fail_at(im, where, "external data location %s leaves the model's directory",
                         pk_ox_quote(im, loc));
  const char *path = im->dir[0] ? pk_sprintf(im->ctx, "%s/%s", im->dir, loc) : loc;
  /* A symbolic link inside the directory could still point out of it. */
  char *real = realpath(path, NULL), *realdir = realpath(im->dir[0] ? im->dir : ".", NULL);
  bool inside = real && realdir && strncmp(real, realdir, strlen(realdir)) == 0 &&
                real[strlen(realdir)] == '/';
  free(real);
  free(realdir);
  if (!inside)
    return pk_ox_fail_at(im, where, "external data file %s is missing or outside the model's "
                         "directory", pk_ox_quote(im, loc));
  if (length >= 0 && (uint64_t)length != want)
    return pk_ox_fail_at(im, where, "external data length %lld, the dims need %zu bytes",
                         (long long)length, want);
  FILE *f = fopen(path, "rb");
  if (!f) return pk_ctx_fail(im->ctx, PK_ERR_IO, "%s: %s: %s", im->file, path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size < (uint64_t)off + want) {
    fclose(f);
    return pk_ox_fail_at(im, where, "external data file %s holds fewer than %lld + %zu bytes",
                         pk_ox_quote(im, loc), (long long)off, want);
  }
  uint8_t *buf = pk_alloc(im->ctx, want ? want : 1);
  bool ok = fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(buf, 1, want, f) == want;
  fclose(f);
  if (!ok)
    return pk_ox_fail_at(im, where, "external data file %s holds fewer than %lld + %zu bytes",
                         pk_ox_quote(im, loc), (long long)off, want);
  *out = buf;
  return PK_OK;
}

pk_status pk_ox_tensor_data(pk_ox *im, const char *where, const Onnx__TensorProto *t,
                            pkrt_dtype *dtype, bool *is_bool, int *ndim, int64_t *shape,
                            const void **data) {
  int dt = t->has_data_type ? t->data_type : 0;
  if (t->n_dims > PK_TE_MAX_DIMS)
    return pk_ox_fail_at(im, where, "rank %zu is above Pock's %d", t->n_dims, PK_TE_MAX_DIMS);
  int64_t numel = 1;
  for (size_t d = 0; d < t->n_dims; d++) {
    if (t->dims[d] < 0 || t->dims[d] > PK_OP_MAX_EXTENT)
      return pk_ox_fail_at(im, where, "dim %zu is %lld", d, (long long)t->dims[d]);
    shape[d] = t->dims[d];
    numel *= t->dims[d];
    if (numel > ((int64_t)1 << 32))
      return pk_ox_fail_at(im, where, "more than 2^32 elements");
  }
  *ndim = (int)t->n_dims;
  size_t esz = ox_raw_size(dt);
  if (!esz)
    return pk_ox_fail_at(im, where, "element type %s is not supported (Pock reads float, double "
                         "and integer/bool tensors)", ox_dt_name(dt));
  *is_bool = dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
  *dtype = dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT    ? PKRT_DTYPE_F32
           : dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ? PKRT_DTYPE_F64
                                                         : PKRT_DTYPE_I64;
  size_t osz = pkrt_dtype_size(*dtype);
  uint8_t *outp = NULL; /* allocated once the data is known to hold numel elements */
  const uint8_t *raw = NULL;
  size_t rawlen = 0;
  bool external = t->has_data_location &&
                  t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (external) {
    uint8_t *ext = NULL;
    pk_status s = ox_external(im, where, t, (size_t)numel * esz, &ext);
    if (s != PK_OK) return s;
    raw = ext, rawlen = (size_t)numel * esz;
  } else if (t->has_raw_data) {
    raw = t->raw_data.data, rawlen = t->raw_data.len;
  }
  if (raw || (numel == 0 && !t->n_float_data && !t->n_double_data && !t->n_int32_data &&
              !t->n_int64_data && !t->n_uint64_data)) {
    if (rawlen != (size_t)numel * esz)
      return pk_ox_fail_at(im, where, "raw_data holds %zu bytes, %s %s needs %lld", rawlen,
                           ox_dt_name(dt), pk_ox_shape_str(im, *ndim, shape),
                           (long long)((size_t)numel * esz));
    outp = pk_alloc(im->ctx, (size_t)numel * osz + 1);
    for (int64_t i = 0; i < numel; i++) {
      const uint8_t *p = raw + (size_t)i * esz;
      if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) memcpy(outp + i * 4, p, 4);
      else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) memcpy(outp + i * 8, p, 8);
      else ((int64_t *)outp)[i] = ox_raw_int(dt, p);
    }
    *data = outp;
    return PK_OK;
  }
  /* The typed fields: float_data (float), double_data, int64_data, uint64_data, and
   * int32_data for every type of 32 bits or fewer. */
  size_t have;
  if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) have = t->n_float_data;
  else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) have = t->n_double_data;
  else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) have = t->n_int64_data;
  else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32)
    have = t->n_uint64_data;
  else have = t->n_int32_data;
  if (have != (size_t)numel)
    return pk_ox_fail_at(im, where, "holds %zu values, %s %s needs %lld", have, ox_dt_name(dt),
                         pk_ox_shape_str(im, *ndim, shape), (long long)numel);
  outp = pk_alloc(im->ctx, (size_t)numel * osz + 1);
  for (int64_t i = 0; i < numel; i++) {
    if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) ((float *)outp)[i] = t->float_data[i];
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) ((double *)outp)[i] = t->double_data[i];
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) ((int64_t *)outp)[i] = t->int64_data[i];
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32)
      ((int64_t *)outp)[i] = (int64_t)t->uint64_data[i];
    else if (dt == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) ((int64_t *)outp)[i] = t->int32_data[i] != 0;
    else ((int64_t *)outp)[i] = t->int32_data[i];
  }
  *data = outp;
  return PK_OK;
}

pk_status pk_onnx_read_tensor(pk_ctx *ctx, const char *path, pkrt_dtype *dtype, int *ndim,
                              int64_t *shape, const void **data) {
  char *text;
  size_t len;
  pk_status s = pk_read_file(ctx, path, &text, &len);
  if (s != PK_OK) return s;
  pk_ox im = {.ctx = ctx, .file = path, .dir = ""};
  const char *slash = strrchr(path, '/');
  if (slash) im.dir = slash == path ? "/" : pk_strndup(ctx, path, (size_t)(slash - path));
  if (!ox_depth_ok(&onnx__tensor_proto__descriptor, (const uint8_t *)text, len, 0))
    return pk_ox_fail_at(&im, NULL, "messages nest too deep");
  Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)text);
  if (!t) return pk_ox_fail_at(&im, NULL, "not a serialized ONNX TensorProto");
  bool is_bool;
  s = pk_ox_tensor_data(&im, NULL, t, dtype, &is_bool, ndim, shape, data);
  onnx__tensor_proto__free_unpacked(t, NULL);
  return s;
}
