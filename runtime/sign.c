/* sign.c — Ed25519 artifact signatures through libsodium (docs/signing.md): key files,
 * the 128-byte signature trailer after an artifact's last section, signing, and the trust
 * policy pkrt_model_open applies before anything in an artifact is parsed or loaded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sign_impl.h"

#define PUB_TAG "pock-ed25519-public"
#define SEC_TAG "pock-ed25519-secret"
#define SEED_BYTES 32
#define KEY_FILE_MAX 4096
/* Domain separation: a signature over an artifact can never be replayed as a signature
 * over anything else signed with the same key. */
static const char sig_domain[] = "pock artifact signature v1";

_Static_assert(PKRT_PUBLIC_KEY_BYTES == crypto_sign_PUBLICKEYBYTES, "Ed25519 public key");
_Static_assert(SEED_BYTES == crypto_sign_SEEDBYTES, "Ed25519 seed");
_Static_assert(RT_SIG_SIGNED_HEAD + crypto_sign_BYTES + 8 == RT_SIG_TRAILER_BYTES,
               "trailer: head, signature, 8 reserved bytes");
_Static_assert(sizeof RT_SIG_MAGIC == 8, "trailer magic is 8 bytes with its NUL");
_Static_assert(RT_SECRET_KEY_BYTES == crypto_sign_SECRETKEYBYTES, "Ed25519 secret key");

/* Trailer fields (offsets). */
enum { T_MAGIC = 0, T_VERSION = 8, T_ALG = 12, T_KEY_ID = 16, T_KEY = 24, T_SIG = 56,
       T_RESERVED = 120 };

static uint32_t get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* sodium_init is idempotent and thread-safe; -1 means no usable random source. */
static pkrt_status need_sodium(pkrt_ctx *rt) {
  if (sodium_init() < 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_LOAD, "libsodium failed to initialise");
  return PKRT_OK;
}

static void key_id_of(const uint8_t key[PKRT_PUBLIC_KEY_BYTES], uint8_t id[PKRT_KEY_ID_BYTES]) {
  uint8_t h[PKRT_SHA256_BYTES];
  pkrt_sha256(key, PKRT_PUBLIC_KEY_BYTES, h);
  memcpy(id, h, PKRT_KEY_ID_BYTES);
}

static void public_key_set(pkrt_public_key *out, const uint8_t key[PKRT_PUBLIC_KEY_BYTES]) {
  uint8_t id[PKRT_KEY_ID_BYTES];
  memcpy(out->key, key, PKRT_PUBLIC_KEY_BYTES);
  key_id_of(key, id);
  sodium_bin2hex(out->id, sizeof out->id, id, sizeof id);
}

/* The message an artifact's signature signs: the domain, the trailer's head (magic,
 * versions, key id, public key) and the SHA-256 of every byte before the trailer. */
enum { MSG_BYTES = sizeof sig_domain + RT_SIG_SIGNED_HEAD + PKRT_SHA256_BYTES };
static void signed_message(const unsigned char *bytes, size_t body_len,
                           const unsigned char *trailer, unsigned char msg[MSG_BYTES]) {
  memcpy(msg, sig_domain, sizeof sig_domain);
  memcpy(msg + sizeof sig_domain, trailer, RT_SIG_SIGNED_HEAD);
  pkrt_sha256(bytes, body_len, msg + sizeof sig_domain + RT_SIG_SIGNED_HEAD);
}

/* ---------------------------------------------------------------- the trailer */

pkrt_status rt_sig_trailer_check(pkrt_ctx *rt, const char *what, const unsigned char *bytes,
                                 size_t body_len, size_t len) {
  const unsigned char *t = bytes + body_len;
  size_t n = len - body_len;
  size_t m = n < 8 ? n : 8;
  /* Bytes that do not even start like a trailer get the container's own message. */
  if (memcmp(t, RT_SIG_MAGIC, m) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: %zu unexpected bytes after the last section",
                         what, n);
  if (n < RT_SIG_TRAILER_BYTES)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: truncated (signature trailer has %zu of its %d bytes)", what, n,
                         RT_SIG_TRAILER_BYTES);
  if (n > RT_SIG_TRAILER_BYTES)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: %zu unexpected bytes after the signature trailer", what,
                         n - RT_SIG_TRAILER_BYTES);
  uint32_t v = get_u32(t + T_VERSION), alg = get_u32(t + T_ALG);
  if (v != RT_SIG_VERSION)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: signature trailer version %u is not supported (this runtime "
                         "reads %u)", what, v, RT_SIG_VERSION);
  if (alg != RT_SIG_ALG_ED25519)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: signature algorithm %u is not supported (only 1, Ed25519)", what,
                         alg);
  uint8_t id[PKRT_KEY_ID_BYTES];
  key_id_of(t + T_KEY, id);
  if (memcmp(id, t + T_KEY_ID, sizeof id) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: signature trailer's key id does not match its public key", what);
  for (int i = T_RESERVED; i < RT_SIG_TRAILER_BYTES; i++)
    if (t[i])
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                           "%s: signature trailer's reserved bytes are not zero", what);
  return PKRT_OK;
}

static pkrt_status verify_with(pkrt_ctx *rt, const char *what, const unsigned char *bytes,
                               size_t body_len, const uint8_t key[PKRT_PUBLIC_KEY_BYTES]) {
  pkrt_status st = need_sodium(rt);
  if (st != PKRT_OK) return st;
  const unsigned char *t = bytes + body_len;
  unsigned char msg[MSG_BYTES];
  signed_message(bytes, body_len, t, msg);
  if (crypto_sign_verify_detached(t + T_SIG, msg, sizeof msg, key) != 0) {
    pkrt_public_key signer;
    public_key_set(&signer, t + T_KEY);
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: signature invalid (signed by key %s, but the file or the "
                         "signature changed since)", what, signer.id);
  }
  return PKRT_OK;
}

pkrt_status rt_sig_verify_embedded(pkrt_ctx *rt, const char *what, const unsigned char *bytes,
                                   size_t body_len) {
  return verify_with(rt, what, bytes, body_len, bytes + body_len + T_KEY);
}

int pkrt_artifact_signer(const pkrt_artifact *a, pkrt_public_key *out) {
  const unsigned char *bytes;
  size_t body_len;
  const unsigned char *t = a ? rt_artifact_signed_span(a, &bytes, &body_len) : NULL;
  if (!t) return 0;
  if (out) public_key_set(out, t + T_KEY);
  return 1;
}

/* ---------------------------------------------------------------- key files */

/* key-line := TAG blank+ base64 [blank+ comment] ; surrounded by optional whitespace.
 * Returns NULL on success, else what is wrong (never quoting the text: it may be secret). */
static const char *parse_key_line(const char *text, size_t len, const char *tag, uint8_t *out,
                                  size_t out_len) {
  const char *p = text, *end = text + len;
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  size_t tl = strlen(tag);
  if ((size_t)(end - p) < tl || memcmp(p, tag, tl) != 0) return "no key tag";
  p += tl;
  if (p == end || (*p != ' ' && *p != '\t')) return "no key tag";
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  const char *b64 = p;
  while (p < end && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
  size_t blen = (size_t)(p - b64), got = 0;
  const char *b64_end = NULL;
  if (blen == 0 || sodium_base642bin(out, out_len, b64, blen, NULL, &got, &b64_end,
                                     sodium_base64_VARIANT_ORIGINAL) != 0 ||
      b64_end != p || got != out_len)
    return "bad base64 key";
  while (p < end && *p != '\n') p++; /* the optional comment */
  for (; p < end; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') return "more than one line";
  return NULL;
}

static int starts_with_tag(const char *s, const char *tag) {
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
  return strncmp(s, tag, strlen(tag)) == 0;
}

/* Key text rather than a path: options and POCK_TRUSTED_KEY accept either. */
static int key_text(const char *s) {
  return starts_with_tag(s, PUB_TAG) || starts_with_tag(s, SEC_TAG);
}

/* Parses public-key text; `what` names its source in messages. */
static pkrt_status public_from_text(pkrt_ctx *rt, const char *what, const char *text,
                                    size_t len, pkrt_public_key *out) {
  uint8_t key[PKRT_PUBLIC_KEY_BYTES];
  if (starts_with_tag(text, SEC_TAG))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: is a secret key; a trusted key is the public one (NAME.pub)",
                         what);
  const char *why = parse_key_line(text, len, PUB_TAG, key, sizeof key);
  if (why)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: not a Pock public key (%s; want one line '" PUB_TAG
                         " <base64 of 32 bytes>')", what, why);
  public_key_set(out, key);
  return PKRT_OK;
}

pkrt_status pkrt_public_key_load(pkrt_ctx *rt, const char *path_or_text, pkrt_public_key *out) {
  if (!path_or_text || !*path_or_text || !out)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_public_key_load: no key given");
  if (key_text(path_or_text))
    return public_from_text(rt, "key text", path_or_text, strlen(path_or_text), out);
  void *text;
  size_t len;
  pkrt_status st = rt_file_read(rt, path_or_text, KEY_FILE_MAX, &text, &len);
  if (st != PKRT_OK) return st;
  st = public_from_text(rt, path_or_text, text, len, out);
  sodium_memzero(text, len); /* a secret key given by mistake must not linger */
  free(text);
  return st;
}

pkrt_status rt_secret_load(pkrt_ctx *rt, const char *path, uint8_t pk[PKRT_PUBLIC_KEY_BYTES],
                           uint8_t sk[RT_SECRET_KEY_BYTES]) {
  void *text;
  size_t len;
  pkrt_status st = rt_file_read(rt, path, KEY_FILE_MAX, &text, &len);
  if (st != PKRT_OK) return st;
  uint8_t seed[SEED_BYTES];
  const char *why = NULL;
  if (starts_with_tag(text, PUB_TAG))
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                       "%s: is a public key; signing needs the secret key (NAME.key)", path);
  else if ((why = parse_key_line(text, len, SEC_TAG, seed, sizeof seed)))
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                       "%s: not a Pock secret key (%s; want one line '" SEC_TAG
                       " <base64 of 32 bytes>')", path, why);
  else if (crypto_sign_seed_keypair(pk, sk, seed) != 0)
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: cannot derive a key pair", path);
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(text, len);
  free(text);
  return st;
}

static pkrt_status write_text_file(pkrt_ctx *rt, const char *path, const char *text) {
  rt_wfile w;
  pkrt_status st = rt_wfile_open(rt, &w, path);
  if (st == PKRT_OK) st = rt_wfile_write(rt, &w, text, strlen(text));
  if (st == PKRT_OK) st = rt_wfile_commit(rt, &w);
  return st;
}

/* The secret file is created 0600 with O_EXCL (never replacing a key) and written
 * directly: rt_wfile's temp file would be created with the umask's mode. */
static pkrt_status write_secret_file(pkrt_ctx *rt, const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: %s", path,
                         errno == EEXIST ? "exists; not replacing a key" : strerror(errno));
  size_t len = strlen(text), done = 0;
  int ok = fchmod(fd, 0600) == 0;
  while (ok && done < len) {
    ssize_t r = write(fd, text + done, len - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) ok = 0;
    else done += (size_t)r;
  }
  if (ok) ok = fsync(fd) == 0;
  int e = errno;
  if (close(fd) != 0 && ok) ok = 0, e = errno;
  if (ok) return PKRT_OK;
  unlink(path);
  return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: write: %s", path, strerror(e));
}

pkrt_status pkrt_key_generate(pkrt_ctx *rt, const char *name, pkrt_public_key *out) {
  if (!name || !*name)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "keygen: no key name (NAME.key, NAME.pub)");
  pkrt_status st = need_sodium(rt);
  if (st != PKRT_OK) return st;
  char kpath[4096], ppath[4096];
  if (snprintf(kpath, sizeof kpath, "%s.key", name) >= (int)sizeof kpath ||
      snprintf(ppath, sizeof ppath, "%s.pub", name) >= (int)sizeof ppath)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "keygen: key name too long");
  struct stat sb;
  if (lstat(ppath, &sb) == 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: exists; not replacing a key", ppath);
  uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_keypair(pk, sk);
  /* libsodium's secret key is seed || public key; the file keeps only the seed. */
  char b64[sodium_base64_ENCODED_LEN(SEED_BYTES, sodium_base64_VARIANT_ORIGINAL)];
  char line[sizeof SEC_TAG + sizeof b64 + 2];
  sodium_bin2base64(b64, sizeof b64, sk, SEED_BYTES, sodium_base64_VARIANT_ORIGINAL);
  snprintf(line, sizeof line, "%s %s\n", SEC_TAG, b64);
  st = write_secret_file(rt, kpath, line);
  sodium_memzero(sk, sizeof sk);
  sodium_memzero(b64, sizeof b64);
  sodium_memzero(line, sizeof line);
  if (st != PKRT_OK) return st;
  sodium_bin2base64(b64, sizeof b64, pk, sizeof pk, sodium_base64_VARIANT_ORIGINAL);
  snprintf(line, sizeof line, "%s %s\n", PUB_TAG, b64);
  st = write_text_file(rt, ppath, line);
  if (st != PKRT_OK) {
    unlink(kpath); /* half a key pair is no use and would block the next try */
    return st;
  }
  if (out) public_key_set(out, pk);
  return PKRT_OK;
}

/* ---------------------------------------------------------------- signing */

pkrt_status pkrt_artifact_sign(pkrt_ctx *rt, const char *path, const char *key_path,
                               const char *out_path, pkrt_public_key *signer) {
  if (!path || !*path || !key_path || !*key_path)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_artifact_sign: artifact and key required");
  if (!out_path || !*out_path) out_path = path;
  /* Signing in place is the documented use; writing over the secret key is never meant. */
  const char *const inputs[] = {key_path};
  pkrt_status st = rt_file_check_output(rt, out_path, 0, inputs, 1);
  if (st == PKRT_OK) st = need_sodium(rt);
  if (st != PKRT_OK) return st;
  uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  if ((st = rt_secret_load(rt, key_path, pk, sk)) != PKRT_OK) return st;
  /* Only a file that verifies gets signed: signing vouches for what is in it, and an
   * existing signature that no longer verifies means the file changed after signing. */
  pkrt_artifact *a;
  st = pkrt_artifact_read(rt, path, &a);
  if (st != PKRT_OK) {
    sodium_memzero(sk, sizeof sk);
    return st;
  }
  const unsigned char *bytes;
  size_t body_len;
  rt_artifact_signed_span(a, &bytes, &body_len);
  unsigned char t[RT_SIG_TRAILER_BYTES] = {0};
  memcpy(t + T_MAGIC, RT_SIG_MAGIC, 8);
  put_u32(t + T_VERSION, RT_SIG_VERSION);
  put_u32(t + T_ALG, RT_SIG_ALG_ED25519);
  key_id_of(pk, t + T_KEY_ID);
  memcpy(t + T_KEY, pk, sizeof pk);
  unsigned char msg[MSG_BYTES];
  signed_message(bytes, body_len, t, msg);
  crypto_sign_detached(t + T_SIG, NULL, msg, sizeof msg, sk);
  sodium_memzero(sk, sizeof sk);
  /* The sections keep their bytes and offsets: the new file is the old one up to its last
   * section, then the trailer (replacing any earlier one). */
  rt_wfile w;
  st = rt_wfile_open(rt, &w, out_path);
  if (st == PKRT_OK) st = rt_wfile_write(rt, &w, bytes, body_len);
  if (st == PKRT_OK) st = rt_wfile_write(rt, &w, t, sizeof t);
  if (st == PKRT_OK) st = rt_wfile_commit(rt, &w);
  pkrt_artifact_free(a);
  if (st == PKRT_OK && signer) public_key_set(signer, pk);
  return st;
}

/* ---------------------------------------------------------------- trust */

/* Loads one configured source; `label` says where it was configured, `sep` joins it to
 * a path in messages ("--trusted-key k.pub", "POCK_TRUSTED_KEY=k.pub"). */
static pkrt_status trust_from(pkrt_ctx *rt, const char *label, const char *sep,
                              const char *value, pkrt_trusted_key *out) {
  pkrt_status st;
  if (key_text(value)) {
    snprintf(out->source, sizeof out->source, "%s", label);
    st = public_from_text(rt, label, value, strlen(value), &out->key);
  } else {
    snprintf(out->source, sizeof out->source, "%s%s%s", label, sep, value);
    st = pkrt_public_key_load(rt, value, &out->key);
    if (st != PKRT_OK) {
      /* The file's own message, with where it was configured: a typo in a path must not
       * look like a problem with the artifact. */
      char msg[512];
      snprintf(msg, sizeof msg, "%s", pkrt_ctx_error(rt));
      return pkrt_ctx_fail(rt, st, "trusted key (%s): %s", label, msg);
    }
  }
  if (st == PKRT_OK) out->configured = 1;
  return st;
}

pkrt_status rt_trust_resolve(pkrt_ctx *rt, const char *option, const char *env,
                             const char *sys_path, pkrt_trusted_key *out) {
  memset(out, 0, sizeof *out);
  /* The option is named by its command-line spelling (pock-rt, pock verify): the
   * people who read these messages mostly set it there. */
  if (option && *option) return trust_from(rt, "--trusted-key", " ", option, out);
  if (env && *env) return trust_from(rt, PKRT_TRUSTED_KEY_ENV, "=", env, out);
  if (!sys_path || !*sys_path) return PKRT_OK;
  /* The system file is optional, but once it exists it must be good: failing open on an
   * unreadable or garbled key would silently turn checking off. "Exists" is lstat's answer:
   * a dangling link is a configuration that cannot be read, not an absent one. */
  struct stat sb;
  if (lstat(sys_path, &sb) != 0 && errno == ENOENT) return PKRT_OK;
  pkrt_status st = pkrt_public_key_load(rt, sys_path, &out->key);
  if (st != PKRT_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pkrt_ctx_error(rt));
    return pkrt_ctx_fail(rt, st, "trusted key (system file): %s", msg);
  }
  snprintf(out->source, sizeof out->source, "%s", sys_path);
  out->configured = 1;
  return PKRT_OK;
}

pkrt_status pkrt_trust_resolve(pkrt_ctx *rt, const char *option, pkrt_trusted_key *out) {
  if (!out) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_trust_resolve: out is NULL");
  return rt_trust_resolve(rt, option, getenv(PKRT_TRUSTED_KEY_ENV), PKRT_TRUSTED_KEY_FILE, out);
}

pkrt_status pkrt_trust_check(pkrt_ctx *rt, const char *what, const pkrt_artifact *a,
                             const pkrt_trusted_key *t) {
  if (!a) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_trust_check: no artifact");
  if (!what) what = "<artifact>";
  if (!t || !t->configured) return PKRT_OK;
  const unsigned char *bytes;
  size_t body_len;
  const unsigned char *tr = rt_artifact_signed_span(a, &bytes, &body_len);
  if (!tr)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: not signed; a trusted key is configured (%s, key %s)", what,
                         t->source, t->key.id);
  if (sodium_memcmp(tr + T_KEY, t->key.key, PKRT_PUBLIC_KEY_BYTES) != 0) {
    pkrt_public_key signer;
    public_key_set(&signer, tr + T_KEY);
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: signed by key %s, but the trusted key is %s (%s)", what,
                         signer.id, t->key.id, t->source);
  }
  /* The reader verified the signature under the key the trailer names; checking it again
   * under the trusted key itself keeps this function right on its own. */
  return verify_with(rt, what, bytes, body_len, t->key.key);
}
