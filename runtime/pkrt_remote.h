/* pkrt_remote.h — the wire format of remote tuning (docs/remote-tuning.md): a host's
 * `pock tune --remote` sends candidate kernels to `pock-rt-serve` on a device, which loads,
 * checks and times each one in a child process. Both sides use these encoders; the server
 * parses requests with pkrt_remote_request_parse, which takes any bytes (the fuzzed part).
 *
 * A connection:
 *   server -> host   hello (PKRT_REMOTE_HELLO_BYTES): magic, version, the request cap and
 *                    a fresh random nonce for this connection
 *   host -> server   request: head (PKRT_REMOTE_HEAD_BYTES: magic, seq, body length, an
 *                    Ed25519 signature over pkrt_remote_signed_prefix || body) then body
 *   server -> host   answer: "PKAN", u32 length, a JSON object
 *   ... one answer per request, seq 0, 1, 2, ...; a refused request ends the connection.
 * Body: u32 JSON length, the JSON request, zero padding to a multiple of 8, the payload;
 * the JSON names payload bytes as [offset, length] (offsets multiples of 8).
 * Integers are little-endian.
 *
 * Usage (the server):
 *   uint8_t hello[PKRT_REMOTE_HELLO_BYTES]; pkrt_remote_hello_encode(hello, cap, nonce);
 *   pkrt_remote_head head; pkrt_remote_head_decode(bytes, &head) ... head.body_len <= cap
 *   buf = prefix || body: pkrt_remote_signed_prefix(buf, nonce, seq, len); read body after it
 *   pkrt_signature_verify(&fleet_pub, buf, PKRT_REMOTE_PREFIX_BYTES + len, head.sig)
 *   pkrt_remote_request rq; pkrt_remote_request_parse(rt, buf + PREFIX, len, &rq)
 */
#ifndef PKRT_REMOTE_H
#define PKRT_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "pkrt.h"

#define PKRT_REMOTE_VERSION 1u
#define PKRT_REMOTE_NONCE_BYTES 32
#define PKRT_REMOTE_SIG_BYTES 64
#define PKRT_REMOTE_HELLO_BYTES 56   /* "POCKRPC1", u32 version, u32 0, u64 cap, nonce */
#define PKRT_REMOTE_HEAD_BYTES 88    /* "PKRQ", u32 version, u64 seq, u64 length, signature */
#define PKRT_REMOTE_PREFIX_BYTES 72  /* domain (24), nonce, u64 seq, u64 length */
#define PKRT_REMOTE_ANSWER_MAX 65536 /* an answer's JSON */
#define PKRT_REMOTE_MAX_TENSORS 64
#define PKRT_REMOTE_MAX_DIMS 8
#define PKRT_REMOTE_MAX_NUMEL ((int64_t)1 << 31) /* per tensor */
#define PKRT_REMOTE_DEFAULT_CAP ((uint64_t)256 << 20)

void pkrt_remote_hello_encode(uint8_t out[PKRT_REMOTE_HELLO_BYTES], uint64_t cap,
                              const uint8_t nonce[PKRT_REMOTE_NONCE_BYTES]);
/* 0 when the bytes are a hello of this version (cap and nonce filled), else -1. */
int pkrt_remote_hello_decode(const uint8_t in[PKRT_REMOTE_HELLO_BYTES], uint64_t *cap,
                             uint8_t nonce[PKRT_REMOTE_NONCE_BYTES]);

typedef struct pkrt_remote_head {
  uint64_t seq, body_len;
  uint8_t sig[PKRT_REMOTE_SIG_BYTES];
} pkrt_remote_head;
void pkrt_remote_head_encode(uint8_t out[PKRT_REMOTE_HEAD_BYTES], const pkrt_remote_head *h);
int pkrt_remote_head_decode(const uint8_t in[PKRT_REMOTE_HEAD_BYTES], pkrt_remote_head *h);

/* What a request's signature covers before its body: a domain string (so no other Pock
 * signature can pass for a request), the connection's nonce (a request recorded on one
 * connection is refused on another), the sequence number (a request replayed or reordered
 * on its own connection is refused) and the body's length. */
void pkrt_remote_signed_prefix(uint8_t out[PKRT_REMOTE_PREFIX_BYTES],
                               const uint8_t nonce[PKRT_REMOTE_NONCE_BYTES], uint64_t seq,
                               uint64_t body_len);

/* The JSON length field and padding: where a body's payload starts. */
size_t pkrt_remote_payload_start(size_t json_len);

typedef enum pkrt_remote_op { PKRT_REMOTE_INFO = 1, PKRT_REMOTE_MEASURE = 2 } pkrt_remote_op;

/* One tensor of a MEASURE, in the kernel's parameter order, dense row-major. Pointers are
 * into the body (8-byte aligned when the body is). */
typedef struct pkrt_remote_tensor {
  pkrt_dtype dtype;
  int32_t ndim;
  int64_t shape[PKRT_REMOTE_MAX_DIMS];
  int64_t numel;
  const void *data;     /* an input: numel elements of dtype; NULL for an output */
  const double *ref;    /* a checked float output: reference values, f64; NULL: not */
  const double *bound;  /* ... and the bound on |kernel - ref| of each element */
  const int64_t *iref;  /* a checked integer output: reference values (exact) */
} pkrt_remote_tensor;

typedef struct pkrt_remote_request {
  pkrt_remote_op op;
  /* MEASURE */
  const uint8_t *object; /* the kernel object (an ELF shared object) */
  size_t object_len;
  char kernel[64];       /* the kernel's name in it */
  int ntensors;
  pkrt_remote_tensor tensors[PKRT_REMOTE_MAX_TENSORS];
  int64_t min_ns;        /* timed repeats last at least this long (>= 5 calls) */
  double timeout_s;      /* load + check + timing, then the child is killed */
  int pin;               /* pin the measuring child to one CPU */
} pkrt_remote_request;

/* request := u32 json_len, JSON, padding, payload (docs/remote-tuning.md). Any bytes: a
 * malformed body is PKRT_ERR_INPUT with a message naming what is wrong. body must be
 * 8-byte aligned (the payload's arrays are read in place). */
pkrt_status pkrt_remote_request_parse(pkrt_ctx *rt, const void *body, size_t len,
                                      pkrt_remote_request *out);

/* ---- detached Ed25519 signatures with the key files of docs/signing.md ---- */
typedef struct pkrt_signer pkrt_signer;
/* Loads NAME.key (the secret key file pock keygen writes). */
pkrt_status pkrt_signer_load(pkrt_ctx *rt, const char *key_path, pkrt_signer **out);
const pkrt_public_key *pkrt_signer_public(const pkrt_signer *s);
void pkrt_signer_sign(const pkrt_signer *s, const void *msg, size_t len,
                      uint8_t sig[PKRT_REMOTE_SIG_BYTES]);
void pkrt_signer_free(pkrt_signer *s); /* wipes the key; NULL is ok */
/* 1 when sig is key's signature of msg, else 0. */
int pkrt_signature_verify(const pkrt_public_key *key, const void *msg, size_t len,
                          const uint8_t sig[PKRT_REMOTE_SIG_BYTES]);
/* n unpredictable bytes (libsodium's randombytes); -1 when libsodium cannot start. */
int pkrt_random_bytes(void *buf, size_t n);

#endif
