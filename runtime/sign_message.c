/* sign_message.c — detached Ed25519 signatures over arbitrary messages with the key files
 * of docs/signing.md (remote tuning signs each request with the fleet key), and random
 * bytes for the server's nonces. Separate from sign.c so pock-rt does not carry it. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt_remote.h"
#include "sign_impl.h"

_Static_assert(PKRT_REMOTE_SIG_BYTES == crypto_sign_BYTES, "Ed25519 signature");
_Static_assert(RT_SECRET_KEY_BYTES == crypto_sign_SECRETKEYBYTES, "Ed25519 secret key");

struct pkrt_signer {
  uint8_t sk[RT_SECRET_KEY_BYTES];
  pkrt_public_key pub;
};

pkrt_status pkrt_signer_load(pkrt_ctx *rt, const char *key_path, pkrt_signer **out) {
  *out = NULL;
  if (sodium_init() < 0) return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "libsodium failed to initialise");
  pkrt_signer *s = calloc(1, sizeof *s);
  if (!s) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "out of memory");
  uint8_t pk[PKRT_PUBLIC_KEY_BYTES];
  pkrt_status st = rt_secret_load(rt, key_path, pk, s->sk);
  if (st == PKRT_OK) {
    /* the same text form (and key id) the public key file has */
    char b64[sodium_base64_ENCODED_LEN(PKRT_PUBLIC_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    char line[sizeof b64 + 32] = "pock-ed25519-public ";
    sodium_bin2base64(b64, sizeof b64, pk, sizeof pk, sodium_base64_VARIANT_ORIGINAL);
    strncat(line, b64, sizeof line - strlen(line) - 1);
    st = pkrt_public_key_load(rt, line, &s->pub);
  }
  if (st != PKRT_OK) {
    pkrt_signer_free(s);
    return st;
  }
  *out = s;
  return PKRT_OK;
}

const pkrt_public_key *pkrt_signer_public(const pkrt_signer *s) { return &s->pub; }

void pkrt_signer_sign(const pkrt_signer *s, const void *msg, size_t len,
                      uint8_t sig[PKRT_REMOTE_SIG_BYTES]) {
  crypto_sign_detached(sig, NULL, msg, len, s->sk);
}

void pkrt_signer_free(pkrt_signer *s) {
  if (!s) return;
  sodium_memzero(s->sk, sizeof s->sk);
  free(s);
}

int pkrt_signature_verify(const pkrt_public_key *key, const void *msg, size_t len,
                          const uint8_t sig[PKRT_REMOTE_SIG_BYTES]) {
  if (sodium_init() < 0) return 0;
  return crypto_sign_verify_detached(sig, msg, len, key->key) == 0;
}

int pkrt_random_bytes(void *buf, size_t n) {
  if (sodium_init() < 0) return -1;
  randombytes_buf(buf, n);
  return 0;
}
