/* sign_impl.h — libpockrt-private half of artifact signing (sign.c): what the artifact
 * reader calls to check a signature trailer, and the trust resolver with its sources
 * passed in, so tests can exercise every source without touching /etc. */
#ifndef PKRT_SIGN_IMPL_H
#define PKRT_SIGN_IMPL_H

#include "pkrt.h"
#include "rt_file.h"

/* The trailer after an artifact's last section (docs/artifact-format.md, "Signature"). */
#define RT_SIG_MAGIC "POCKSIG"   /* 8 bytes with its NUL */
#define RT_SIG_TRAILER_BYTES 128
#define RT_SIG_VERSION 1u
#define RT_SIG_ALG_ED25519 1u
/* Bytes of the trailer the signature covers (everything before the signature itself). */
#define RT_SIG_SIGNED_HEAD 56

/* The bytes after the last section, body_len..len: a well-formed trailer, or the reader's
 * usual "unexpected bytes" / "truncated" errors. Structure only; no cryptography. */
RT_INTERNAL pkrt_status rt_sig_trailer_check(pkrt_ctx *rt, const char *what,
                                             const unsigned char *bytes, size_t body_len,
                                             size_t len);
/* Verifies the trailer at bytes + body_len against the public key it records (the
 * integrity check every reader makes; trust is pkrt_trust_check's job). */
RT_INTERNAL pkrt_status rt_sig_verify_embedded(pkrt_ctx *rt, const char *what,
                                               const unsigned char *bytes, size_t body_len);
/* artifact.c: the verified file's bytes and where its trailer starts; returns the
 * trailer, or NULL when the file is unsigned. */
RT_INTERNAL const unsigned char *rt_artifact_signed_span(const pkrt_artifact *a,
                                                         const unsigned char **bytes,
                                                         size_t *body_len);

/* pkrt_trust_resolve with its sources given: env is POCK_TRUSTED_KEY's value (NULL or ""
 * when unset), sys_path the system file (skipped when it does not exist). */
RT_INTERNAL pkrt_status rt_trust_resolve(pkrt_ctx *rt, const char *option, const char *env,
                                         const char *sys_path, pkrt_trusted_key *out);

/* Reads NAME.key (the secret seed, docs/signing.md) into an Ed25519 key pair (libsodium's
 * 64-byte secret key: seed || public key); sk must be wiped (sodium_memzero) by the caller. */
#define RT_SECRET_KEY_BYTES 64
RT_INTERNAL pkrt_status rt_secret_load(pkrt_ctx *rt, const char *path,
                                       uint8_t pk[PKRT_PUBLIC_KEY_BYTES],
                                       uint8_t sk[RT_SECRET_KEY_BYTES]);

#endif
