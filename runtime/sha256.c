/* sha256.c — SHA-256 through libsodium: artifact checksums, and the workload keys of
 * tuning records (the hash of a TE's canonical text). */
#include <sodium.h>

#include "pkrt.h"

_Static_assert(PKRT_SHA256_BYTES == crypto_hash_sha256_BYTES, "SHA-256 digest size");

void pkrt_sha256(const void *data, size_t len, uint8_t out[PKRT_SHA256_BYTES]) {
  /* sodium_init is idempotent and thread-safe, so every call may make it and no flag of
   * our own is needed. SHA-256 is plain portable code in libsodium: it does not depend on
   * init succeeding (which only picks faster code for other primitives). */
  int init = sodium_init();
  (void)init;
  crypto_hash_sha256(out, data, (unsigned long long)len);
}

void pkrt_sha256_hex(const void *data, size_t len, char hex[2 * PKRT_SHA256_BYTES + 1]) {
  uint8_t digest[PKRT_SHA256_BYTES];
  pkrt_sha256(data, len, digest);
  sodium_bin2hex(hex, 2 * PKRT_SHA256_BYTES + 1, digest, sizeof digest);
}
