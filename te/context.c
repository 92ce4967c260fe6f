/* context.c — the compilation context: one arena for every compiler object of a
 * compilation, the first failure's status and message, growable strings, checked int64. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"
#include "rt_file.h"

#define PK_CTX_MSG_BYTES 1024 /* long enough for any "file:line:col: ..." we produce */

struct pk_ctx {
  pkrt_arena *arena;
  pk_status status;            /* PK_OK until the first failure */
  char msg[PK_CTX_MSG_BYTES];  /* message of that failure; "" when none */
};

const char *pk_status_name(pk_status s) {
  switch (s) {
  case PK_OK: return "ok";
  case PK_ERR_SYNTAX: return "syntax";
  case PK_ERR_CHECK: return "check";
  case PK_ERR_SCHEDULE: return "schedule";
  case PK_ERR_UNSUPPORTED: return "unsupported";
  case PK_ERR_BUILD: return "build";
  case PK_ERR_RUNTIME: return "runtime";
  case PK_ERR_MISMATCH: return "mismatch";
  case PK_ERR_IO: return "io";
  case PK_ERR_NOMEM: return "nomem";
  case PK_ERR_USAGE: return "usage";
  }
  return "unknown"; /* a value cast from an integer */
}

noreturn void pk_assert_fail(const char *file, int line, const char *cond) {
  fprintf(stderr, "%s:%d: pock internal error: assertion '%s' failed\n", file, line, cond);
  fflush(stderr);
  abort();
}

noreturn void pk_out_of_memory(size_t bytes) {
  /* No allocation here: stderr is unbuffered and fprintf of a number needs no heap. */
  fprintf(stderr, "pock: out of memory (allocating %zu bytes)\n", bytes);
  exit(1);
}

void *pk_xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) pk_out_of_memory(bytes);
  return p;
}

void *pk_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) pk_out_of_memory(size && n > SIZE_MAX / size ? SIZE_MAX : n * size);
  return p;
}

void *pk_xrealloc(void *p, size_t bytes) {
  void *q = realloc(p, bytes ? bytes : 1);
  if (!q) pk_out_of_memory(bytes);
  return q;
}

pk_ctx *pk_ctx_new(void) {
  pk_ctx *ctx = pk_xcalloc(1, sizeof *ctx);
  ctx->arena = pkrt_arena_new(0);
  if (!ctx->arena) pk_out_of_memory(sizeof(pkrt_arena *));
  return ctx;
}

void pk_ctx_free(pk_ctx *ctx) {
  if (!ctx) return;
  pkrt_arena_free(ctx->arena);
  free(ctx);
}

pk_status pk_ctx_vfail(pk_ctx *ctx, pk_status s, const char *fmt, va_list ap) {
  /* The first failure is the cause; later ones are usually its consequences. */
  if (ctx->status == PK_OK && s != PK_OK) {
    ctx->status = s;
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
    if (ctx->msg[0] == '\0') snprintf(ctx->msg, sizeof ctx->msg, "%s error", pk_status_name(s));
  }
  return s;
}

pk_status pk_ctx_fail(pk_ctx *ctx, pk_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pk_ctx_vfail(ctx, s, fmt, ap);
  va_end(ap);
  return s;
}

const char *pk_ctx_error(const pk_ctx *ctx) { return ctx->msg; }
pk_status pk_ctx_status(const pk_ctx *ctx) { return ctx->status; }

void pk_ctx_clear_error(pk_ctx *ctx) {
  ctx->status = PK_OK;
  ctx->msg[0] = '\0';
}

/* ---- arena ---- */

void *pk_alloc(pk_ctx *ctx, size_t bytes) {
  void *p = pkrt_arena_alloc(ctx->arena, bytes, 0);
  if (!p) pk_out_of_memory(bytes);
  return p;
}

char *pk_strndup(pk_ctx *ctx, const char *s, size_t n) {
  char *p = pk_alloc(ctx, n + 1); /* zero-filled, so already terminated */
  if (n) memcpy(p, s, n);
  return p;
}

char *pk_strdup(pk_ctx *ctx, const char *s) { return s ? pk_strndup(ctx, s, strlen(s)) : NULL; }

char *pk_sprintf(pk_ctx *ctx, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  PK_ASSERT(n >= 0);
  char *p = pk_alloc(ctx, (size_t)n + 1);
  vsnprintf(p, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return p;
}

/* ---- growable strings ---- */

void pk_strbuf_init(pk_strbuf *b) { memset(b, 0, sizeof *b); }

void pk_strbuf_free(pk_strbuf *b) {
  free(b->data);
  pk_strbuf_init(b);
}

static void strbuf_reserve(pk_strbuf *b, size_t extra) {
  PK_ASSERT(extra < SIZE_MAX / 2 - b->len);
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  char *p = pk_xrealloc(b->data, cap);
  b->data = p;
  b->cap = cap;
}

void pk_strbuf_appendn(pk_strbuf *b, const char *s, size_t n) {
  strbuf_reserve(b, n);
  if (n) memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void pk_strbuf_append(pk_strbuf *b, const char *s) { pk_strbuf_appendn(b, s, strlen(s)); }

void pk_strbuf_printf(pk_strbuf *b, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  PK_ASSERT(n >= 0);
  strbuf_reserve(b, (size_t)n);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  b->len += (size_t)n;
}

char *pk_strbuf_finish(pk_ctx *ctx, pk_strbuf *b) {
  char *s = pk_strndup(ctx, b->data ? b->data : "", b->len);
  pk_strbuf_free(b);
  return s;
}

/* ---- checked int64 ---- */

int pk_i64_add(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out); }
int pk_i64_mul(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out); }

/* ---- files ---- */

pk_status pk_read_file(pk_ctx *ctx, const char *path, char **text, size_t *len) {
  /* libpockrt's reader, so the compiler's inputs follow the same rules (a FIFO or device
   * is refused, never waited on); the cap only bounds what a file may claim. */
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory reading '%s'", path);
  void *bytes;
  size_t n;
  pkrt_status st = rt_file_read(rt, path, PK_READ_FILE_MAX, &bytes, &n);
  if (st != PKRT_OK) {
    pk_status s = pk_ctx_fail(ctx, st == PKRT_ERR_NOMEM ? PK_ERR_NOMEM : PK_ERR_IO, "%s",
                              pkrt_ctx_error(rt));
    pkrt_ctx_free(rt);
    return s;
  }
  pkrt_ctx_free(rt);
  *text = pk_strndup(ctx, bytes, n);
  free(bytes);
  if (len) *len = n;
  return PK_OK;
}
