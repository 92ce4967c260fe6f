/* pkrt.h — libpockrt internals shared by the runtime and the compiler: status codes, the
 * runtime context (error message, thread pool, exec context), arenas, the kernel-object
 * loader, extern calls through libffi, SHA-256, weights files (.pkw) and the artifact
 * container. Nothing here needs a compiler. The model API is pock/pockrt.h.
 *
 * Usage:
 *   pkrt_ctx *rt = pkrt_ctx_new(1);                     // 1 thread: serial parallel_for
 *   pkrt_module *m;
 *   if (pkrt_module_load_file(rt, "k.so", &m) != PKRT_OK) fprintf(stderr, "%s\n", pkrt_ctx_error(rt));
 *   const pkrt_kernel_desc *k = pkrt_module_find(m, "k0");
 *   int rc = k->fn(bufs, 3, NULL, 0, workspace, pkrt_ctx_exec(rt));
 *   pkrt_module_free(m); pkrt_ctx_free(rt);
 */
#ifndef PKRT_H
#define PKRT_H

#include <stddef.h>
#include <stdint.h>

#include "pock/pkrt_kernel.h"
#include "pock/pkrt_status.h" /* pkrt_status, pkrt_status_name: public, for pockrt.h too */

/* ---- dtypes ---- */
const char *pkrt_dtype_name(pkrt_dtype t);          /* "f32", ...; "invalid" otherwise */
pkrt_dtype pkrt_dtype_from_name(const char *name);  /* PKRT_DTYPE_INVALID if unknown */
size_t pkrt_dtype_size(pkrt_dtype t);               /* bytes; 0 for BOOL/INVALID */

/* ---- arenas: bump allocation, freed all at once ---- */
typedef struct pkrt_arena pkrt_arena;
pkrt_arena *pkrt_arena_new(size_t block_bytes); /* 0 = default (64 KiB) */
void pkrt_arena_free(pkrt_arena *a);
/* 16-byte aligned (align 0), or the given power-of-two alignment; zero-filled; NULL on OOM. */
void *pkrt_arena_alloc(pkrt_arena *a, size_t bytes, size_t align);
char *pkrt_arena_strdup(pkrt_arena *a, const char *s);
size_t pkrt_arena_used(const pkrt_arena *a);

/* ---- runtime context: one per user of the runtime; owns the thread pool ---- */
typedef struct pkrt_ctx pkrt_ctx;
pkrt_ctx *pkrt_ctx_new(int nthreads); /* nthreads <= 1: no pool, parallel_for runs inline */
void pkrt_ctx_free(pkrt_ctx *rt);
const char *pkrt_ctx_error(const pkrt_ctx *rt); /* message of the last failure, "" if none */
pkrt_status pkrt_ctx_fail(pkrt_ctx *rt, pkrt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
pkrt_exec_ctx *pkrt_ctx_exec(pkrt_ctx *rt);  /* what kernels receive */
int pkrt_ctx_threads(const pkrt_ctx *rt);

/* ---- kernel objects ---- */
typedef struct pkrt_module pkrt_module;
pkrt_status pkrt_module_load_file(pkrt_ctx *rt, const char *path, pkrt_module **out);
/* Loads a kernel object from bytes in memory through a sealed memfd: the bytes that were
 * verified are the bytes that run, and no writable directory is needed. */
pkrt_status pkrt_module_load_memory(pkrt_ctx *rt, const void *bytes, size_t len,
                                    pkrt_module **out);
const pkrt_module_desc *pkrt_module_desc_of(const pkrt_module *m);
const pkrt_kernel_desc *pkrt_module_find(const pkrt_module *m, const char *name);
void pkrt_module_free(pkrt_module *m);

/* ---- extern functions called through libffi ----
 * Signature text: "RET(ARG,ARG,...)" with types void i32 i64 f32 f64 ptr, e.g. cblas_sgemm:
 *   "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"
 * The call interface is prepared once at open; calls pass pointers to each argument. */
typedef struct pkrt_extern pkrt_extern;
pkrt_status pkrt_extern_open(pkrt_ctx *rt, const char *library, const char *symbol,
                             const char *signature, pkrt_extern **out);
/* args[i] points at argument i (an int32_t, float, void*, ... as the signature says);
 * ret points at storage for the result or is NULL for void. */
void pkrt_extern_call(const pkrt_extern *e, void **args, void *ret);
int pkrt_extern_nargs(const pkrt_extern *e);
void pkrt_extern_free(pkrt_extern *e);
/* cblas_sgemm, the extern kernel tuning measures and an artifact may call (backend
 * switching): C = op(A) op(B), row-major, alpha 1, beta 0; op transposes when trans_*.
 * e must have been opened with PKRT_SGEMM_SIGNATURE. */
#define PKRT_SGEMM_SYM "cblas_sgemm"
#define PKRT_SGEMM_SIGNATURE "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"
void pkrt_extern_sgemm(const pkrt_extern *e, int trans_a, int trans_b, int32_t m, int32_t n,
                       int32_t k, const float *a, int32_t lda, const float *b, int32_t ldb,
                       float *c, int32_t ldc);

/* ---- hashing ---- */
#define PKRT_SHA256_BYTES 32
void pkrt_sha256(const void *data, size_t len, uint8_t out[PKRT_SHA256_BYTES]);
/* Lower-case hex of the SHA-256 of data; hex must hold 65 bytes. */
void pkrt_sha256_hex(const void *data, size_t len, char hex[2 * PKRT_SHA256_BYTES + 1]);

/* ---- weights files (.pkw): named tensors, docs/graph-format.md ----
 * Layout: magic "PKW1" | u32 count | per tensor: u16 name length, name bytes (no NUL),
 * u8 dtype (pkrt_dtype), u8 ndim, ndim x i64 shape, numel x dtype-size data; all
 * little-endian. Names are unique, 1..255 bytes. */
typedef struct pkrt_wtensor {
  const char *name;
  pkrt_dtype dtype;
  int ndim;
  int64_t shape[8];
  const void *data;  /* numel * dtype-size bytes */
} pkrt_wtensor;
/* Reads every tensor into arena a (the file is checked: truncation, bad dtype/rank,
 * sizes that overflow, duplicate names → PKRT_ERR_INPUT naming the file and tensor). */
pkrt_status pkrt_weights_read(pkrt_ctx *rt, pkrt_arena *a, const char *path,
                              pkrt_wtensor **out, int *count);
/* Writes atomically: a temp file in the same directory, fsync, rename. */
pkrt_status pkrt_weights_write(pkrt_ctx *rt, const char *path, const pkrt_wtensor *t, int count);

/* Parses .pkw bytes already in memory (what pkrt_weights_read does after reading the
 * file); `what` names the source in messages. Never trusts the bytes. */
pkrt_status pkrt_weights_parse(pkrt_ctx *rt, pkrt_arena *a, const char *what,
                               const void *bytes, size_t len, pkrt_wtensor **out, int *count);

/* ---- artifact container, version 1 (docs/artifact-format.md) ----
 * A fixed header, a table of named sections and their payloads, each payload 64-byte
 * aligned and covered by its SHA-256. `pock compile` writes the sections "manifest",
 * "kernels", "weights"; the reader checks structure and every checksum before anything
 * is used.
 *
 *   pkrt_section s[3] = {{"manifest", json, strlen(json)}, {"kernels", so, so_len},
 *                        {"weights", w, w_len}};
 *   if (pkrt_artifact_write(rt, "model.pock", s, 3) != PKRT_OK) ... pkrt_ctx_error(rt)
 *   pkrt_artifact *a;
 *   if (pkrt_artifact_read(rt, "model.pock", &a) == PKRT_OK) {
 *     const pkrt_section *m = pkrt_artifact_find(a, "manifest");   // NULL if absent
 *     ... pkrt_artifact_free(a);
 *   } */
#define PKRT_ARTIFACT_MAGIC "POCKART" /* 8 bytes with its NUL */
#define PKRT_ARTIFACT_VERSION 1u
#define PKRT_ARTIFACT_MAX_SECTIONS 16
#define PKRT_ARTIFACT_NAME_MAX 15     /* name bytes; the 16-byte field is NUL-padded */
typedef struct pkrt_section {
  const char *name; /* 1..15 bytes of [a-z0-9_.-] */
  const void *data; /* may be NULL when size is 0 */
  size_t size;
} pkrt_section;
/* Writes atomically (temp file in the same directory, fsync, rename); computes each
 * section's SHA-256. Names must be valid and distinct, 1..16 sections. */
pkrt_status pkrt_artifact_write(pkrt_ctx *rt, const char *path, const pkrt_section *sections,
                                int n);
typedef struct pkrt_artifact pkrt_artifact;
/* Reads the whole file into memory and verifies it: magic, version (only 1), section
 * table bounds, alignment and overlap, zero padding, no trailing bytes (but a signature
 * trailer, whose signature must verify under the key it names), every checksum.
 * Errors name the file and the section ("m.pock: section 'kernels' checksum mismatch"). */
pkrt_status pkrt_artifact_read(pkrt_ctx *rt, const char *path, pkrt_artifact **out);
/* The same on bytes in memory (copied); `what` names them in messages. */
pkrt_status pkrt_artifact_parse(pkrt_ctx *rt, const char *what, const void *bytes, size_t len,
                                pkrt_artifact **out);
int pkrt_artifact_count(const pkrt_artifact *a);
const pkrt_section *pkrt_artifact_section(const pkrt_artifact *a, int i); /* NULL if out of range */
const pkrt_section *pkrt_artifact_find(const pkrt_artifact *a, const char *name);
void pkrt_artifact_free(pkrt_artifact *a);

/* ---- signatures (docs/signing.md) ----
 * Ed25519 (libsodium). A signed artifact is an unsigned one followed by a 128-byte trailer
 * that signs every byte before it; the sections do not move. pkrt_artifact_read verifies a
 * signature against the key the trailer names (integrity); pkrt_trust_check decides
 * whether that key is the trusted one (authenticity). pkrt_model_open does both before
 * the manifest is parsed or the kernel object loaded.
 *
 *   pkrt_public_key pub;
 *   pkrt_key_generate(rt, "fleet", &pub);                // fleet.key (0600), fleet.pub
 *   pkrt_artifact_sign(rt, "m.pock", "fleet.key", NULL, &pub);  // in place, atomically
 *   pkrt_trusted_key tk;
 *   pkrt_trust_resolve(rt, NULL, &tk);  // POCK_TRUSTED_KEY, then /etc/pock/trusted.pub
 *   pkrt_artifact_read(rt, "m.pock", &a) ... pkrt_trust_check(rt, "m.pock", a, &tk) */
#define PKRT_PUBLIC_KEY_BYTES 32
#define PKRT_KEY_ID_BYTES 8
#define PKRT_TRUSTED_KEY_ENV "POCK_TRUSTED_KEY"
#define PKRT_TRUSTED_KEY_FILE "/etc/pock/trusted.pub"
typedef struct pkrt_public_key {
  uint8_t key[PKRT_PUBLIC_KEY_BYTES];
  char id[2 * PKRT_KEY_ID_BYTES + 1]; /* key id: hex of the first 8 bytes of SHA-256(key) */
} pkrt_public_key;
/* A public key given as its text ("pock-ed25519-public <base64>") or as the path of a
 * file holding that line (NAME.pub). */
pkrt_status pkrt_public_key_load(pkrt_ctx *rt, const char *path_or_text, pkrt_public_key *out);
/* Writes NAME.key (the secret seed; mode 0600, created exclusively) and NAME.pub; refuses
 * to replace either. out (may be NULL) gets the public key. */
pkrt_status pkrt_key_generate(pkrt_ctx *rt, const char *name, pkrt_public_key *out);
/* Verifies the artifact at path (an existing signature must verify), then writes it to
 * out_path (NULL: path; atomically) with a trailer signed by the secret key file key_path,
 * replacing any earlier signature. signer (may be NULL) gets the signing key. out_path
 * follows the output rules (docs/runtime.md, "Files"); naming the key file is refused. */
pkrt_status pkrt_artifact_sign(pkrt_ctx *rt, const char *path, const char *key_path,
                               const char *out_path, pkrt_public_key *signer);
/* 1 and *out (may be NULL) = the signer's key when the verified artifact is signed, else 0. */
int pkrt_artifact_signer(const pkrt_artifact *a, pkrt_public_key *out);
/* The trusted key, from the first source configured: `option` (key text or a path; NULL or
 * "" for none), the environment variable POCK_TRUSTED_KEY (the same), the file
 * /etc/pock/trusted.pub when it exists. A configured source that cannot be read or parsed
 * is an error, never "no key". */
typedef struct pkrt_trusted_key {
  int configured;          /* 0: no source configured; any artifact may load */
  pkrt_public_key key;
  char source[320];        /* where it came from, for messages: "POCK_TRUSTED_KEY=k.pub" */
} pkrt_trusted_key;
pkrt_status pkrt_trust_resolve(pkrt_ctx *rt, const char *option, pkrt_trusted_key *out);
/* With a configured key, refuses an unsigned artifact, one signed by another key (naming
 * both key ids) or one whose signature does not verify under the trusted key. */
pkrt_status pkrt_trust_check(pkrt_ctx *rt, const char *what, const pkrt_artifact *a,
                             const pkrt_trusted_key *t);

/* ---- checking an artifact without loading it ----
 * Every check pkrt_model_open makes before it loads the kernel object, on bytes in
 * memory: the container and its checksums, the manifest (tensors, io, kernels, optimizer,
 * plans; the weights section's size) and the target fingerprint. Nothing in the file is
 * loaded or run, so this is what the fuzz target (fuzz/) drives, and what a tool may call
 * on an untrusted file. The device the fingerprint is compared with can be described, so
 * tests and the fuzzer can play another device. */
typedef struct pkrt_check_options {
  int skip_fingerprint;  /* non-zero: do not compare the fingerprint */
  const char *machine;   /* the device's `uname -m`; NULL: this device's */
  const char *cpuinfo;   /* the device's /proc/cpuinfo text; NULL: this device's */
} pkrt_check_options;
pkrt_status pkrt_artifact_check_memory(pkrt_ctx *rt, const char *what, const void *bytes,
                                       size_t len, const pkrt_check_options *opts);

/* ---- CPU features ----
 * This device's AArch64 ISA features from the kernel's hardware capabilities, as a
 * /proc/cpuinfo "Features" line ("Features\t: fp asimd ...\n"), the text fingerprints are
 * compared with: AT_HWCAP/AT_HWCAP2 say what this process may run, under qemu-user too
 * (whose /proc/cpuinfo is the host's). pkrt_hwcap_this returns 0 on other architectures
 * (read /proc/cpuinfo there); pkrt_hwcap_features names given bits (tests describe devices
 * with it). Both return the line's length, 0 when cap is too small. */
#define PKRT_HWCAP_LINE_MAX 1024
size_t pkrt_hwcap_this(char *buf, size_t cap);
size_t pkrt_hwcap_features(unsigned long hwcap, unsigned long hwcap2, char *buf, size_t cap);

/* ---- time ---- */
int64_t pkrt_now_ns(void); /* CLOCK_MONOTONIC */

#endif
