/* artifact.c — the artifact container, version 1 (docs/artifact-format.md): writer and
 * verifying reader. Every byte of a file is checked before any section is used: header
 * and table by structure, payloads by SHA-256, padding must be zero, nothing trails but
 * a signature trailer, whose signature is verified (sign.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_file.h"
#include "sign_impl.h"

#define HDR_BYTES 16
#define ENTRY_BYTES 64
#define ALIGN 64
#define MAX_FILE ((size_t)1 << 34)

struct pkrt_artifact {
  unsigned char *bytes; /* the whole file */
  size_t len;
  size_t body_len;      /* bytes before the signature trailer; len when unsigned */
  int n;
  pkrt_section s[PKRT_ARTIFACT_MAX_SECTIONS];
  char names[PKRT_ARTIFACT_MAX_SECTIONS][PKRT_ARTIFACT_NAME_MAX + 1];
};

static const unsigned char magic[8] = PKRT_ARTIFACT_MAGIC;
_Static_assert(sizeof PKRT_ARTIFACT_MAGIC == 8, "magic is 8 bytes with its NUL");

static int name_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static int name_ok(const char *s, size_t n) {
  if (n == 0 || n > PKRT_ARTIFACT_NAME_MAX) return 0;
  for (size_t i = 0; i < n; i++)
    if (!name_char_ok(s[i])) return 0;
  return 1;
}

static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

pkrt_status pkrt_artifact_write(pkrt_ctx *rt, const char *path, const pkrt_section *sections,
                                int n) {
  if (!path || !*path) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "artifact: empty output path");
  if (n < 1 || n > PKRT_ARTIFACT_MAX_SECTIONS || !sections)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: %d sections (1..%d allowed)", path, n,
                         PKRT_ARTIFACT_MAX_SECTIONS);
  unsigned char head[HDR_BYTES + ENTRY_BYTES * PKRT_ARTIFACT_MAX_SECTIONS];
  memset(head, 0, sizeof head);
  memcpy(head, magic, 8);
  put_u32(head + 8, PKRT_ARTIFACT_VERSION);
  put_u32(head + 12, (uint32_t)n);
  uint64_t off = align_up(HDR_BYTES + (uint64_t)ENTRY_BYTES * n);
  for (int i = 0; i < n; i++) {
    const pkrt_section *s = &sections[i];
    size_t nl = s->name ? strlen(s->name) : 0;
    if (!name_ok(s->name, nl))
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                           "%s: section %d name '%s' must be 1..%d characters of [a-z0-9_.-]",
                           path, i, s->name ? s->name : "", PKRT_ARTIFACT_NAME_MAX);
    for (int j = 0; j < i; j++)
      if (strcmp(sections[j].name, s->name) == 0)
        return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: duplicate section '%s'", path, s->name);
    if (s->size && !s->data)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: section '%s' has no data", path, s->name);
    if (s->size > MAX_FILE)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: section '%s' is too large (%zu bytes)",
                           path, s->name, s->size);
    unsigned char *e = head + HDR_BYTES + ENTRY_BYTES * i;
    memcpy(e, s->name, nl);
    put_u64(e + 16, off);
    put_u64(e + 24, s->size);
    pkrt_sha256(s->size ? s->data : "", s->size, e + 32);
    off = align_up(off + s->size);
  }

  rt_wfile w;
  pkrt_status st = rt_wfile_open(rt, &w, path);
  if (st != PKRT_OK) return st;
  static const unsigned char zeros[ALIGN];
  size_t hlen = HDR_BYTES + (size_t)ENTRY_BYTES * n;
  uint64_t pos = hlen;
  if ((st = rt_wfile_write(rt, &w, head, hlen)) != PKRT_OK) return st;
  for (int i = 0; i < n; i++) {
    /* Pad to the next payload; the last payload is not padded, so the file ends exactly
     * where its last section does. */
    uint64_t pad = align_up(pos) - pos;
    if ((st = rt_wfile_write(rt, &w, zeros, pad)) != PKRT_OK) return st;
    if ((st = rt_wfile_write(rt, &w, sections[i].data, sections[i].size)) != PKRT_OK)
      return st;
    pos = align_up(pos) + sections[i].size;
  }
  return rt_wfile_commit(rt, &w);
}

typedef struct span {
  uint64_t off, size;
  int index;
} span;

static int span_cmp(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off ? 1 : x->index - y->index;
}

static int all_zero(const unsigned char *p, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* Takes ownership of bytes (malloc'd, len + 1 bytes). */
static pkrt_status verify(pkrt_ctx *rt, const char *what, unsigned char *bytes, size_t len,
                          pkrt_artifact **out) {
  pkrt_status st = PKRT_OK;
  pkrt_artifact *a = calloc(1, sizeof *a);
  if (!a) {
    free(bytes);
    return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", what);
  }
  a->bytes = bytes;
  a->len = len;
#define FAIL(...)                                          \
  do {                                                     \
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, __VA_ARGS__);   \
    goto fail;                                             \
  } while (0)
  if (len == 0) FAIL("%s: empty file (not a Pock artifact)", what);
  if (len < 8 || memcmp(bytes, magic, 8) != 0) {
    if (len < 8 && memcmp(bytes, magic, len) == 0) FAIL("%s: truncated (%zu bytes)", what, len);
    FAIL("%s: not a Pock artifact (bad magic)", what);
  }
  if (len < HDR_BYTES) FAIL("%s: truncated (%zu bytes, header needs %d)", what, len, HDR_BYTES);
  uint32_t version = get_u32(bytes + 8);
  if (version != PKRT_ARTIFACT_VERSION)
    FAIL("%s: format version %u is not supported (this runtime reads %u)", what, version,
         PKRT_ARTIFACT_VERSION);
  uint32_t n = get_u32(bytes + 12);
  if (n < 1 || n > PKRT_ARTIFACT_MAX_SECTIONS)
    FAIL("%s: section count %u out of range (1..%d)", what, n, PKRT_ARTIFACT_MAX_SECTIONS);
  uint64_t table_end = HDR_BYTES + (uint64_t)ENTRY_BYTES * n;
  if (len < table_end)
    FAIL("%s: truncated (%zu bytes, section table needs %llu)", what, len,
         (unsigned long long)table_end);
  span spans[PKRT_ARTIFACT_MAX_SECTIONS];
  a->n = (int)n;
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *e = bytes + HDR_BYTES + ENTRY_BYTES * i;
    const char *nm = (const char *)e;
    size_t nl = strnlen(nm, 16);
    if (nl == 16 || !all_zero(e + nl, 16 - nl) || !name_ok(nm, nl))
      FAIL("%s: section %u has a malformed name", what, i);
    memcpy(a->names[i], nm, nl);
    a->names[i][nl] = 0;
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(a->names[j], a->names[i]) == 0)
        FAIL("%s: duplicate section '%s'", what, a->names[i]);
    uint64_t off = get_u64(e + 16), size = get_u64(e + 24);
    if (off % ALIGN != 0)
      FAIL("%s: section '%s' offset %llu is not 64-byte aligned", what, a->names[i],
           (unsigned long long)off);
    if (off < table_end)
      FAIL("%s: section '%s' offset %llu overlaps the section table", what, a->names[i],
           (unsigned long long)off);
    if (off > len || size > len - off)
      FAIL("%s: truncated (section '%s' needs bytes %llu..%llu, file has %zu)", what,
           a->names[i], (unsigned long long)off, (unsigned long long)(off + size), len);
    spans[i] = (span){off, size, (int)i};
  }
  /* Sections in file order: no overlap, zero gaps, nothing after the last one. */
  qsort(spans, n, sizeof *spans, span_cmp);
  uint64_t pos = table_end;
  for (uint32_t k = 0; k < n; k++) {
    if (spans[k].off < pos)
      FAIL("%s: section '%s' overlaps section '%s'", what, a->names[spans[k].index],
           a->names[spans[k - 1].index]);
    if (!all_zero(bytes + pos, spans[k].off - pos))
      FAIL("%s: non-zero padding before section '%s'", what, a->names[spans[k].index]);
    pos = spans[k].off + spans[k].size;
  }
  /* The only bytes allowed after the last section: a signature trailer (sign.c). */
  if (pos != len && (st = rt_sig_trailer_check(rt, what, bytes, pos, len)) != PKRT_OK)
    goto fail;
  a->body_len = pos;
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *e = bytes + HDR_BYTES + ENTRY_BYTES * i;
    uint64_t off = get_u64(e + 16), size = get_u64(e + 24);
    uint8_t sum[PKRT_SHA256_BYTES];
    pkrt_sha256(bytes + off, size, sum);
    if (memcmp(sum, e + 32, PKRT_SHA256_BYTES) != 0)
      FAIL("%s: section '%s' checksum mismatch", what, a->names[i]);
    a->s[i] = (pkrt_section){a->names[i], bytes + off, size};
  }
  if (pos != len && (st = rt_sig_verify_embedded(rt, what, bytes, pos)) != PKRT_OK) goto fail;
#undef FAIL
  *out = a;
  return PKRT_OK;
fail:
  pkrt_artifact_free(a);
  return st;
}

pkrt_status pkrt_artifact_read(pkrt_ctx *rt, const char *path, pkrt_artifact **out) {
  if (!out) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_artifact_read: out is NULL");
  *out = NULL;
  void *bytes;
  size_t len;
  pkrt_status st = rt_file_read(rt, path, MAX_FILE, &bytes, &len);
  if (st != PKRT_OK) return st;
  return verify(rt, path, bytes, len, out);
}

pkrt_status pkrt_artifact_parse(pkrt_ctx *rt, const char *what, const void *bytes, size_t len,
                                pkrt_artifact **out) {
  if (!out) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_artifact_parse: out is NULL");
  *out = NULL;
  if (!what) what = "<artifact>";
  if (!bytes && len) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: no bytes", what);
  if (len > MAX_FILE) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: too large", what);
  unsigned char *copy = malloc(len + 1);
  if (!copy) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", what);
  if (len) memcpy(copy, bytes, len);
  copy[len] = 0;
  return verify(rt, what, copy, len, out);
}

const unsigned char *rt_artifact_signed_span(const pkrt_artifact *a,
                                             const unsigned char **bytes, size_t *body_len) {
  *bytes = a->bytes;
  *body_len = a->body_len;
  return a->body_len < a->len ? a->bytes + a->body_len : NULL;
}

int pkrt_artifact_count(const pkrt_artifact *a) { return a ? a->n : 0; }

const pkrt_section *pkrt_artifact_section(const pkrt_artifact *a, int i) {
  return a && i >= 0 && i < a->n ? &a->s[i] : NULL;
}

const pkrt_section *pkrt_artifact_find(const pkrt_artifact *a, const char *name) {
  if (!a || !name) return NULL;
  for (int i = 0; i < a->n; i++)
    if (strcmp(a->names[i], name) == 0) return &a->s[i];
  return NULL;
}

void pkrt_artifact_free(pkrt_artifact *a) {
  if (!a) return;
  free(a->bytes);
  free(a);
}
