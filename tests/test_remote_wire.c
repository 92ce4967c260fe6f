/* test_remote_wire.c — remote tuning's wire format (runtime/pkrt_remote.h): hello and
 * request heads round-trip and refuse other bytes; a request body parses into what was
 * sent; malformed bodies are errors naming the problem; a fuzz of the parser (mutated and
 * truncated valid bodies, random bytes) never crashes or reads outside the body (run under
 * the sanitizers with the label `sanitize`); signatures fail for another key, another
 * nonce (another connection) and another sequence number (a replay). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pkrt_remote.h"
#include "pk_test.h"

/* A body: u32 JSON length, JSON, padding, payload (copied to an 8-aligned heap block of
 * exactly len bytes, so a read past the end is the sanitizer's to see). */
static uint8_t *make_body(const char *json, const void *payload, size_t plen, size_t *len) {
  size_t jl = strlen(json), start = pkrt_remote_payload_start(jl);
  *len = start + plen;
  uint8_t *b = aligned_alloc(8, (*len + 7) / 8 * 8);
  memset(b, 0, start);
  for (int i = 0; i < 4; i++) b[i] = (uint8_t)(jl >> (8 * i));
  memcpy(b + 4, json, jl);
  if (plen) memcpy(b + start, payload, plen);
  return b;
}

/* A MEASURE of a 2x2 f32 add: payload = object (16 bytes), a (16), b (16), ref (32),
 * bound (32). */
static const char good_json[] =
    "{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":["
    "{\"dtype\":\"f32\",\"shape\":[2,2],\"data\":[16,16]},"
    "{\"dtype\":\"f32\",\"shape\":[2,2],\"data\":[32,16]},"
    "{\"dtype\":\"f32\",\"shape\":[2,2],\"ref\":[48,32],\"bound\":[80,32]}],"
    "\"min_ns\":1000000,\"timeout_s\":5,\"pin\":true}";
static uint8_t good_payload[112];

static void test_framing(void) {
  uint8_t nonce[PKRT_REMOTE_NONCE_BYTES], got_nonce[PKRT_REMOTE_NONCE_BYTES];
  for (int i = 0; i < PKRT_REMOTE_NONCE_BYTES; i++) nonce[i] = (uint8_t)(i * 7);
  uint8_t hello[PKRT_REMOTE_HELLO_BYTES];
  uint64_t cap = 0;
  pkrt_remote_hello_encode(hello, 12345, nonce);
  CHECK(pkrt_remote_hello_decode(hello, &cap, got_nonce) == 0 && cap == 12345 &&
        !memcmp(nonce, got_nonce, sizeof nonce), "hello round trip");
  hello[3] ^= 1;
  CHECK(pkrt_remote_hello_decode(hello, &cap, got_nonce) == -1, "a hello with a bad magic");
  pkrt_remote_head h = {.seq = 7, .body_len = 99}, g;
  memset(h.sig, 0xab, sizeof h.sig);
  uint8_t hb[PKRT_REMOTE_HEAD_BYTES];
  pkrt_remote_head_encode(hb, &h);
  CHECK(pkrt_remote_head_decode(hb, &g) == 0 && g.seq == 7 && g.body_len == 99 &&
        !memcmp(g.sig, h.sig, sizeof h.sig), "head round trip");
  hb[4] = 9; /* another version */
  CHECK(pkrt_remote_head_decode(hb, &g) == -1, "a head of another version");
  PASS();
}

static void test_parse_good(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  size_t len;
  uint8_t *b = make_body(good_json, good_payload, sizeof good_payload, &len);
  pkrt_remote_request rq;
  pkrt_status st = pkrt_remote_request_parse(rt, b, len, &rq);
  CHECK(st == PKRT_OK, "the good body: %s", pkrt_ctx_error(rt));
  CHECK(rq.op == PKRT_REMOTE_MEASURE && rq.object_len == 16 && !strcmp(rq.kernel, "k0") &&
        rq.ntensors == 3 && rq.min_ns == 1000000 && rq.timeout_s == 5 && rq.pin,
        "fields as sent");
  const pkrt_remote_tensor *t = rq.tensors;
  CHECK(t[0].data && !t[0].ref && t[2].ref && t[2].bound && !t[2].data && t[2].numel == 4 &&
        t[2].shape[1] == 2 && t[2].dtype == PKRT_DTYPE_F32, "tensors as sent");
  free(b);
  b = make_body("{\"op\":\"info\"}", NULL, 0, &len);
  CHECK(pkrt_remote_request_parse(rt, b, len, &rq) == PKRT_OK && rq.op == PKRT_REMOTE_INFO, "info");
  free(b);
  pkrt_ctx_free(rt);
  PASS();
}

/* Malformed bodies: each refused with a message naming the problem. */
static void test_parse_bad(void) {
  static const struct { const char *json, *want; } cases[] = {
      {"{\"op\":\"exec\"}", "op: want"},
      {"[1,2]", "not a JSON object"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,999],\"tensors\":[]}", "object: [0, 999]"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[4,8],\"tensors\":[]}", "aligned span"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[]}", "want 1..64 tensors"},
      {"{\"op\":\"measure\",\"kernel\":\"\",\"object\":[0,16],\"tensors\":[]}", "kernel: want a name"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[{\"dtype\":\"f32\","
       "\"shape\":[2,2],\"data\":[16,8]}]}", "8 bytes, the tensor needs 16"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[{\"dtype\":\"f32\","
       "\"shape\":[65536,65536]}]}", "at most"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[{\"dtype\":\"f32\","
       "\"shape\":[-2]}]}", "dims must be >= 1"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[{\"dtype\":\"f32\","
       "\"shape\":[2,2],\"ref\":[48,32]}]}", "needs a bound"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[{\"dtype\":\"f32\","
       "\"shape\":[2,2]}]}", "no output has a reference"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[{\"dtype\":\"f32\","
       "\"shape\":[2,2],\"ref\":[48,32],\"bound\":[80,32]}],\"min_ns\":1,\"timeout_s\":0}", "timeout_s"},
      {"{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,16],\"tensors\":[{\"dtype\":\"q7\","
       "\"shape\":[2]}]}", "dtype"},
  };
  pkrt_ctx *rt = pkrt_ctx_new(1);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t len;
    uint8_t *b = make_body(cases[i].json, good_payload, sizeof good_payload, &len);
    pkrt_remote_request rq;
    pkrt_status st = pkrt_remote_request_parse(rt, b, len, &rq);
    free(b);
    CHECK(st == PKRT_ERR_INPUT && strstr(pkrt_ctx_error(rt), cases[i].want),
          "case %zu: status %d, message '%s' (want '%s')", i, st, pkrt_ctx_error(rt), cases[i].want);
  }
  uint8_t three[3] = {1, 2, 3};
  pkrt_remote_request rq;
  CHECK(pkrt_remote_request_parse(rt, three, 3, &rq) == PKRT_ERR_INPUT, "3 bytes");
  uint8_t *b = aligned_alloc(8, 8);
  memcpy(b, "\xff\xff\xff\x7f{}{}", 8); /* a JSON length past the end */
  CHECK(pkrt_remote_request_parse(rt, b, 8, &rq) == PKRT_ERR_INPUT &&
        strstr(pkrt_ctx_error(rt), "does not fit"), "JSON length past the end");
  free(b);
  pkrt_ctx_free(rt);
  PASS();
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* Mutations of the good body (bytes flipped in the JSON and the length field, numbers
 * replaced, truncations) and random bodies: every one parses or is refused, no crash. */
static void test_fuzz(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  size_t glen;
  uint8_t *good = make_body(good_json, good_payload, sizeof good_payload, &glen);
  static const char tokens[] = "[]{},:\"0123456789-e.fnt";
  int ok = 0, refused = 0;
  for (int it = 0; it < 20000; it++) {
    size_t len = glen;
    uint8_t *b = aligned_alloc(8, (glen + 64 + 7) / 8 * 8);
    memcpy(b, good, glen);
    int nmut = 1 + (int)(next() % 4);
    for (int k = 0; k < nmut; k++) {
      size_t at = 4 + next() % (sizeof good_json - 1);
      switch (next() % 6) {
      case 0: b[at] = (uint8_t)next(); break;
      case 1: b[at] = (uint8_t)tokens[next() % (sizeof tokens - 1)]; break;
      case 2: b[next() % 4] = (uint8_t)next(); break; /* the JSON length */
      case 3: len = next() % (glen + 1); break;        /* truncated */
      case 4: {
        size_t n = 1 + next() % 8;
        memset(b + at, '9', at + n <= glen ? n : glen - at);
        break;
      }
      default: b[at] = (uint8_t)('0' + next() % 10); break;
      }
    }
    if (len > glen) len = glen;
    pkrt_remote_request rq;
    pkrt_status st = pkrt_remote_request_parse(rt, b, len, &rq);
    if (st == PKRT_OK) {
      ok++;
      /* what parsed is inside the body */
      for (int i = 0; i < rq.ntensors; i++) {
        const pkrt_remote_tensor *t = &rq.tensors[i];
        const uint8_t *p = t->data ? t->data : (const uint8_t *)t->ref;
        CHECK(!p || (p >= b && p + 8 <= b + len), "iteration %d: tensor %d outside the body", it, i);
      }
    } else {
      CHECK(st == PKRT_ERR_INPUT && pkrt_ctx_error(rt)[0], "iteration %d: status %d", it, st);
      refused++;
    }
    free(b);
  }
  for (int it = 0; it < 5000; it++) {
    size_t len = next() % 300;
    uint8_t *b = aligned_alloc(8, (len + 8) / 8 * 8);
    for (size_t i = 0; i < len; i++) b[i] = (uint8_t)next();
    if (len >= 4) b[0] = (uint8_t)(len - 4), b[1] = b[2] = b[3] = 0, b[4 % len] = '{';
    pkrt_remote_request rq;
    CHECK(pkrt_remote_request_parse(rt, b, len, &rq) == PKRT_ERR_INPUT, "random body %d parsed", it);
    free(b);
  }
  free(good);
  pkrt_ctx_free(rt);
  printf("  fuzz: %d mutated bodies parsed, %d refused, 5000 random bodies refused\n", ok, refused);
  CHECK(ok > 0 && refused > 0, "the fuzz reached both outcomes");
  PASS();
}

static void test_signatures(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  const char *a = pk_test_path("fleet"), *b = pk_test_path("other"), *akey = pk_test_path("fleet.key");
  pkrt_public_key apub, bpub;
  CHECK(pkrt_key_generate(rt, a, &apub) == PKRT_OK && pkrt_key_generate(rt, b, &bpub) == PKRT_OK,
        "keygen: %s", pkrt_ctx_error(rt));
  pkrt_signer *s;
  CHECK(pkrt_signer_load(rt, akey, &s) == PKRT_OK, "signer: %s", pkrt_ctx_error(rt));
  CHECK(!strcmp(pkrt_signer_public(s)->id, apub.id), "the signer's key id is the .pub's");
  uint8_t n1[PKRT_REMOTE_NONCE_BYTES], n2[PKRT_REMOTE_NONCE_BYTES];
  CHECK(pkrt_random_bytes(n1, sizeof n1) == 0 && pkrt_random_bytes(n2, sizeof n2) == 0 &&
        memcmp(n1, n2, sizeof n1), "two nonces differ");
  const char body[] = "{\"op\":\"info\"}";
  uint8_t msg[PKRT_REMOTE_PREFIX_BYTES + sizeof body], sig[PKRT_REMOTE_SIG_BYTES];
  pkrt_remote_signed_prefix(msg, n1, 3, sizeof body);
  memcpy(msg + PKRT_REMOTE_PREFIX_BYTES, body, sizeof body);
  pkrt_signer_sign(s, msg, sizeof msg, sig);
  CHECK(pkrt_signature_verify(&apub, msg, sizeof msg, sig), "verifies with the fleet key");
  CHECK(!pkrt_signature_verify(&bpub, msg, sizeof msg, sig), "another key refuses it");
  pkrt_remote_signed_prefix(msg, n1, 4, sizeof body); /* replayed as the next request */
  CHECK(!pkrt_signature_verify(&apub, msg, sizeof msg, sig), "another sequence number refuses it");
  pkrt_remote_signed_prefix(msg, n2, 3, sizeof body); /* replayed on another connection */
  CHECK(!pkrt_signature_verify(&apub, msg, sizeof msg, sig), "another nonce refuses it");
  const char *pubpath = pk_test_path("fleet.pub");
  pkrt_signer *bad;
  CHECK(pkrt_signer_load(rt, pubpath, &bad) != PKRT_OK && strstr(pkrt_ctx_error(rt), "is a public key"),
        "signing with the .pub is refused: %s", pkrt_ctx_error(rt));
  pkrt_signer_free(s);
  pkrt_ctx_free(rt);
  PASS();
}

int main(void) {
  for (size_t i = 0; i < sizeof good_payload; i++) good_payload[i] = (uint8_t)i;
  if (pk_test_tmpdir_make("pk_remote_wire_") != 0) return 1;
  test_framing();
  test_parse_good();
  test_parse_bad();
  test_fuzz();
  test_signatures();
  pk_test_tmpdir_remove();
  return pk_test_summary("test_remote_wire");
}
