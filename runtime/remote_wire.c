/* remote_wire.c — remote tuning's framing (hello, request head, the signed prefix) and the
 * request parser the server runs on bytes from the network: every length, offset, shape
 * and number is checked before it is used, so any input is an error message, never a crash. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pkrt_remote.h"

static const char hello_magic[8] = {'P', 'O', 'C', 'K', 'R', 'P', 'C', '1'};
static const char head_magic[4] = {'P', 'K', 'R', 'Q'};
static const char prefix_domain[24] = "pock remote request v1";

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) {
  return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

void pkrt_remote_hello_encode(uint8_t out[PKRT_REMOTE_HELLO_BYTES], uint64_t cap,
                              const uint8_t nonce[PKRT_REMOTE_NONCE_BYTES]) {
  memcpy(out, hello_magic, 8);
  put_u32(out + 8, PKRT_REMOTE_VERSION);
  put_u32(out + 12, 0);
  put_u64(out + 16, cap);
  memcpy(out + 24, nonce, PKRT_REMOTE_NONCE_BYTES);
}

int pkrt_remote_hello_decode(const uint8_t in[PKRT_REMOTE_HELLO_BYTES], uint64_t *cap,
                             uint8_t nonce[PKRT_REMOTE_NONCE_BYTES]) {
  if (memcmp(in, hello_magic, 8) != 0 || get_u32(in + 8) != PKRT_REMOTE_VERSION) return -1;
  *cap = get_u64(in + 16);
  memcpy(nonce, in + 24, PKRT_REMOTE_NONCE_BYTES);
  return 0;
}

void pkrt_remote_head_encode(uint8_t out[PKRT_REMOTE_HEAD_BYTES], const pkrt_remote_head *h) {
  memcpy(out, head_magic, 4);
  put_u32(out + 4, PKRT_REMOTE_VERSION);
  put_u64(out + 8, h->seq);
  put_u64(out + 16, h->body_len);
  memcpy(out + 24, h->sig, PKRT_REMOTE_SIG_BYTES);
}

int pkrt_remote_head_decode(const uint8_t in[PKRT_REMOTE_HEAD_BYTES], pkrt_remote_head *h) {
  if (memcmp(in, head_magic, 4) != 0 || get_u32(in + 4) != PKRT_REMOTE_VERSION) return -1;
  h->seq = get_u64(in + 8);
  h->body_len = get_u64(in + 16);
  memcpy(h->sig, in + 24, PKRT_REMOTE_SIG_BYTES);
  return 0;
}

void pkrt_remote_signed_prefix(uint8_t out[PKRT_REMOTE_PREFIX_BYTES],
                               const uint8_t nonce[PKRT_REMOTE_NONCE_BYTES], uint64_t seq,
                               uint64_t body_len) {
  memcpy(out, prefix_domain, sizeof prefix_domain);
  memcpy(out + 24, nonce, PKRT_REMOTE_NONCE_BYTES);
  put_u64(out + 56, seq);
  put_u64(out + 64, body_len);
}

size_t pkrt_remote_payload_start(size_t json_len) { return (4 + json_len + 7) / 8 * 8; }

/* ---------------------------------------------------------------- the parser */

typedef struct parse_state {
  pkrt_ctx *rt;
  const uint8_t *payload;
  size_t payload_len;
} parse_state;

static const cJSON *field(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* A whole number in [lo, hi] (JSON numbers are doubles: 2^53 is exact). */
static int get_int(const cJSON *j, double lo, double hi, int64_t *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double v = j->valuedouble;
  if (!(v >= lo && v <= hi) || v != floor(v)) return 0;
  *out = (int64_t)v;
  return 1;
}

/* span := [offset, length] inside the payload, offset a multiple of 8, length == want
 * (want < 0: any length). */
static pkrt_status get_span(parse_state *ps, const cJSON *j, const char *what, int64_t want,
                            const void **ptr, size_t *len) {
  int64_t off, n;
  if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 2 ||
      !get_int(cJSON_GetArrayItem(j, 0), 0, 9e15, &off) ||
      !get_int(cJSON_GetArrayItem(j, 1), 0, 9e15, &n))
    return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: want [offset, length]", what);
  if (off % 8 || (uint64_t)off > ps->payload_len || (uint64_t)n > ps->payload_len - (uint64_t)off)
    return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT,
                         "request: %s: [%lld, %lld] is not an aligned span of the %zu-byte payload",
                         what, (long long)off, (long long)n, ps->payload_len);
  if (want >= 0 && n != want)
    return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: %lld bytes, the tensor needs %lld",
                         what, (long long)n, (long long)want);
  *ptr = ps->payload + off;
  *len = (size_t)n;
  return PKRT_OK;
}

/* tensor := {"dtype": D, "shape": [n...], ("data": span | "ref": span ["bound": span])?} */
static pkrt_status parse_tensor(parse_state *ps, const cJSON *j, int i, pkrt_remote_tensor *t) {
  char what[48];
  snprintf(what, sizeof what, "tensor %d", i);
  memset(t, 0, sizeof *t);
  const cJSON *dt = field(j, "dtype"), *shape = field(j, "shape");
  t->dtype = cJSON_IsString(dt) ? pkrt_dtype_from_name(dt->valuestring) : PKRT_DTYPE_INVALID;
  size_t esize = pkrt_dtype_size(t->dtype);
  if (!cJSON_IsObject(j) || esize == 0)
    return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: want an object with a dtype "
                         "(f32, f64, i32, i64, ...)", what);
  int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
  if (nd < 0 || nd > PKRT_REMOTE_MAX_DIMS)
    return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: want a shape of at most %d dims",
                         what, PKRT_REMOTE_MAX_DIMS);
  t->ndim = nd;
  t->numel = 1;
  for (int d = 0; d < nd; d++) {
    if (!get_int(cJSON_GetArrayItem(shape, d), 1, (double)PKRT_REMOTE_MAX_NUMEL, &t->shape[d]) ||
        (t->numel *= t->shape[d]) > PKRT_REMOTE_MAX_NUMEL)
      return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: dims must be >= 1 and the "
                           "tensor at most %lld elements", what, (long long)PKRT_REMOTE_MAX_NUMEL);
  }
  const cJSON *data = field(j, "data"), *ref = field(j, "ref"), *bound = field(j, "bound");
  const void *p;
  size_t n;
  pkrt_status st = PKRT_OK;
  int is_int = t->dtype == PKRT_DTYPE_I32 || t->dtype == PKRT_DTYPE_I64;
  int is_float = t->dtype == PKRT_DTYPE_F32 || t->dtype == PKRT_DTYPE_F64;
  if (data && (ref || bound))
    return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: an input (data) has no reference", what);
  if (data) {
    st = get_span(ps, data, what, t->numel * (int64_t)esize, &p, &n);
    t->data = p;
  } else if (ref) {
    if (!is_int && !is_float)
      return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: outputs of dtype %s are not "
                           "checked", what, pkrt_dtype_name(t->dtype));
    st = get_span(ps, ref, what, t->numel * 8, &p, &n);
    if (is_int) t->iref = p;
    else t->ref = p;
    if (st == PKRT_OK && is_float != (bound != NULL))
      return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: a float output's reference "
                           "needs a bound, an integer's is exact", what);
    if (st == PKRT_OK && bound) {
      st = get_span(ps, bound, what, t->numel * 8, &p, &n);
      t->bound = p;
    }
  } else if (bound) {
    return pkrt_ctx_fail(ps->rt, PKRT_ERR_INPUT, "request: %s: a bound without a reference", what);
  }
  return st;
}

static pkrt_status parse_measure(parse_state *ps, const cJSON *j, pkrt_remote_request *out) {
  pkrt_ctx *rt = ps->rt;
  const cJSON *kernel = field(j, "kernel"), *tensors = field(j, "tensors");
  const void *obj;
  pkrt_status st = get_span(ps, field(j, "object"), "object", -1, &obj, &out->object_len);
  if (st != PKRT_OK) return st;
  out->object = obj;
  if (!cJSON_IsString(kernel) || !kernel->valuestring[0] ||
      strlen(kernel->valuestring) >= sizeof out->kernel)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: kernel: want a name of 1..%zu bytes",
                         sizeof out->kernel - 1);
  strcpy(out->kernel, kernel->valuestring);
  int n = cJSON_IsArray(tensors) ? cJSON_GetArraySize(tensors) : -1;
  if (n < 1 || n > PKRT_REMOTE_MAX_TENSORS)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: tensors: want 1..%d tensors",
                         PKRT_REMOTE_MAX_TENSORS);
  out->ntensors = n;
  int checked = 0;
  for (int i = 0; i < n && st == PKRT_OK; i++) {
    st = parse_tensor(ps, cJSON_GetArrayItem(tensors, i), i, &out->tensors[i]);
    checked += out->tensors[i].ref || out->tensors[i].iref;
  }
  if (st != PKRT_OK) return st;
  if (!checked) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: no output has a reference");
  const cJSON *to = field(j, "timeout_s"), *pin = field(j, "pin");
  if (!get_int(field(j, "min_ns"), 0, 6e11, &out->min_ns))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: min_ns: want 0..6e11 (ns)");
  if (!cJSON_IsNumber(to) || !(to->valuedouble > 0 && to->valuedouble <= 3600))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: timeout_s: want a number in (0, 3600]");
  out->timeout_s = to->valuedouble;
  if (pin && !cJSON_IsBool(pin)) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: pin: want a boolean");
  out->pin = cJSON_IsTrue(pin);
  return PKRT_OK;
}

pkrt_status pkrt_remote_request_parse(pkrt_ctx *rt, const void *body, size_t len,
                                      pkrt_remote_request *out) {
  memset(out, 0, sizeof *out);
  const uint8_t *b = body;
  if (len < 4) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: %zu bytes, shorter than its head", len);
  size_t jlen = get_u32(b);
  if (jlen == 0 || jlen > len - 4)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: its JSON length %zu does not fit the "
                         "%zu-byte body", jlen, len);
  size_t start = pkrt_remote_payload_start(jlen);
  parse_state ps = {rt, b + (start < len ? start : len), start < len ? len - start : 0};
  cJSON *j = cJSON_ParseWithLength((const char *)b + 4, jlen);
  if (!cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: not a JSON object");
  }
  const cJSON *op = field(j, "op");
  pkrt_status st = PKRT_OK;
  if (cJSON_IsString(op) && !strcmp(op->valuestring, "info")) {
    out->op = PKRT_REMOTE_INFO;
  } else if (cJSON_IsString(op) && !strcmp(op->valuestring, "measure")) {
    out->op = PKRT_REMOTE_MEASURE;
    st = parse_measure(&ps, j, out);
  } else {
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "request: op: want \"info\" or \"measure\"");
  }
  cJSON_Delete(j);
  return st;
}
