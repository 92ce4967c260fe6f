/* fuzz_artifact.c — libFuzzer target for the artifact loader: every check pkrt_model_open
 * makes before loading the kernel object (pkrt_artifact_check_memory), never the loading.
 *
 * An input is either a whole artifact (it starts with the magic) or a bare manifest (it
 * starts with '{'), which is wrapped in a container with a stub kernel object and a zero
 * weights section of the size the manifest asks for. Either way the section checksums are
 * recomputed after mutation: otherwise nearly every mutant dies at "checksum mismatch" and
 * the fuzzer never reaches the manifest, io, kernel and plan checks behind it.
 *
 * Invariants checked beyond "no crash, no sanitizer report": a refusal always carries a
 * message, the message names the input, and it holds no control characters. Code is never loaded: the fuzz link wraps
 * pkrt_module_load_memory and dlopen to trap (fuzz/CMakeLists.txt). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"

#define HDR 16
#define ENTRY 64
#define WHAT "fuzz.pock"
/* Larger weights sections only cost time: a manifest asking for more is wrapped with
 * this many bytes and is refused by the size check like any other mismatch. */
#define MAX_WEIGHTS (1u << 20)

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Rewrites the SHA-256 of every table entry whose payload lies inside the buffer. */
static void fix_checksums(unsigned char *b, size_t len) {
  if (len < HDR || memcmp(b, PKRT_ARTIFACT_MAGIC, 8) != 0) return;
  uint32_t n = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 |
               (uint32_t)b[15] << 24;
  if (n > PKRT_ARTIFACT_MAX_SECTIONS) n = PKRT_ARTIFACT_MAX_SECTIONS;
  for (uint32_t i = 0; i < n && HDR + ENTRY * (i + 1) <= len; i++) {
    unsigned char *e = b + HDR + ENTRY * i;
    uint64_t off = get_u64(e + 16), size = get_u64(e + 24);
    if (off <= len && size <= len - off) pkrt_sha256(b + off, size, e + 32);
  }
}

/* regions.params + regions.state of a manifest, when it says so; 0 otherwise. */
static size_t weights_bytes(const unsigned char *json, size_t len) {
  cJSON *root = cJSON_ParseWithLength((const char *)json, len);
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "regions");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "params");
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "state");
  double w = (cJSON_IsNumber(p) ? p->valuedouble : 0) + (cJSON_IsNumber(s) ? s->valuedouble : 0);
  cJSON_Delete(root);
  return w > 0 && w <= MAX_WEIGHTS ? (size_t)w : w > MAX_WEIGHTS ? MAX_WEIGHTS : 0;
}

/* A version-1 container around a manifest: manifest, 64 bytes of stub kernels, weights. */
static unsigned char *wrap(const unsigned char *json, size_t len, size_t *out_len) {
  size_t sizes[3] = {len, 64, weights_bytes(json, len)};
  const char *names[3] = {"manifest", "kernels", "weights"};
  size_t off[3], pos = HDR + 3 * ENTRY;
  for (int i = 0; i < 3; i++) {
    off[i] = (pos + 63) & ~(size_t)63;
    pos = off[i] + sizes[i];
  }
  unsigned char *b = calloc(1, pos);
  if (!b) return NULL;
  memcpy(b, PKRT_ARTIFACT_MAGIC, 8);
  b[8] = PKRT_ARTIFACT_VERSION;
  b[12] = 3;
  for (int i = 0; i < 3; i++) {
    unsigned char *e = b + HDR + ENTRY * i;
    memcpy(e, names[i], strlen(names[i]));
    put_u64(e + 16, off[i]);
    put_u64(e + 24, sizes[i]);
  }
  memcpy(b + off[0], json, len);
  memcpy(b + off[1], "\177ELF", 4);
  *out_len = pos;
  return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *buf;
  size_t len = size;
  if (size > 0 && data[0] == '{') {
    buf = wrap(data, size, &len);
  } else {
    buf = malloc(size ? size : 1);
    if (buf && size) memcpy(buf, data, size);
  }
  if (!buf) return 0;
  fix_checksums(buf, len);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  /* A fixed device, so results do not depend on the machine that fuzzes. */
  pkrt_check_options o = {.machine = "x86_64",
                          .cpuinfo = "processor\t: 0\nflags\t\t: fpu sse2 sse4_2 avx avx2 f16c fma\n"};
  pkrt_status st = pkrt_artifact_check_memory(rt, WHAT, buf, len, &o);
  /* FUZZ_VERBOSE=1 (replaying a corpus): how far each input got. */
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("FUZZ_VERBOSE") != NULL;
  if (verbose) fprintf(stderr, "%zu bytes: %s\n", size, st == PKRT_OK ? "accepted" : pkrt_ctx_error(rt));
  if (st != PKRT_OK) {
    const char *msg = pkrt_ctx_error(rt);
    /* Every refusal explains itself; messages about the container name the file. */
    if (!msg || !*msg) {
      fprintf(stderr, "refused (status %d) without a message\n", (int)st);
      __builtin_trap();
    }
    if (strncmp(msg, WHAT ": ", strlen(WHAT) + 2) != 0 && strncmp(msg, "manifest: ", 10) != 0 &&
        strncmp(msg, "target mismatch: ", 17) != 0) {
      fprintf(stderr, "message names neither the file nor the manifest: %s\n", msg);
      __builtin_trap();
    }
    /* Messages reach terminals: hostile bytes must not carry control characters there. */
    for (const char *c = msg; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f) {
        fprintf(stderr, "message has control character 0x%02x: %s\n", (unsigned char)*c, msg);
        __builtin_trap();
      }
  }
  pkrt_ctx_free(rt);
  free(buf);
  return 0;
}
