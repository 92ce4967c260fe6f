/* pk_ctx.h — the compilation context every compiler module works in: one arena for all
 * compiler objects of a compilation, and the status + message of the last failure.
 *
 * Usage:
 *   pk_ctx *ctx = pk_ctx_new();
 *   if (pk_te_parse(ctx, text, len, "f.te", &prog) != PK_OK)
 *     fprintf(stderr, "error: %s\n", pk_ctx_error(ctx));
 *   pk_ctx_free(ctx);                       // frees every node, string and program
 */
#ifndef PK_CTX_H
#define PK_CTX_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

#include "pkrt.h"

/* Compiler status codes. PK_ERR_SCHEDULE is the one recoverable tier: an illegal schedule
 * candidate the tuner counts and skips. The CLI maps PK_ERR_USAGE to exit 2, the rest to 1. */
typedef enum pk_status {
  PK_OK = 0,
  PK_ERR_SYNTAX,      /* text does not parse: message has file:line:col */
  PK_ERR_CHECK,       /* parses but is ill-formed: types, shapes, bounds, names */
  PK_ERR_SCHEDULE,    /* illegal schedule step */
  PK_ERR_UNSUPPORTED, /* valid, but this backend cannot do it (yet) */
  PK_ERR_BUILD,       /* host compiler / NVRTC failed */
  PK_ERR_RUNTIME,     /* loading or running a kernel failed */
  PK_ERR_MISMATCH,    /* a kernel's output differs from the reference */
  PK_ERR_IO,
  PK_ERR_NOMEM,
  PK_ERR_USAGE        /* bad command line */
} pk_status;

const char *pk_status_name(pk_status s);

typedef struct pk_ctx pk_ctx;
pk_ctx *pk_ctx_new(void);
void pk_ctx_free(pk_ctx *ctx);

/* Records a failure (first one wins until cleared) and returns s, so callers write
 *   return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s:%d:%d: unknown tensor '%s'", ...); */
pk_status pk_ctx_fail(pk_ctx *ctx, pk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
pk_status pk_ctx_vfail(pk_ctx *ctx, pk_status s, const char *fmt, va_list ap);
const char *pk_ctx_error(const pk_ctx *ctx); /* "" when no failure */
pk_status pk_ctx_status(const pk_ctx *ctx);
void pk_ctx_clear_error(pk_ctx *ctx);

/* Arena allocation tied to the context; zero-filled. These never return NULL: out of
 * memory ends the process through pk_out_of_memory. */
void *pk_alloc(pk_ctx *ctx, size_t bytes);
char *pk_strdup(pk_ctx *ctx, const char *s);
char *pk_strndup(pk_ctx *ctx, const char *s, size_t n);
char *pk_sprintf(pk_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Out of memory anywhere in the compiler: one message on stderr ("pock: out of memory
 * (N bytes)") and exit status 1. No NULL checks are threaded through allocations: every
 * compiler allocation goes through pk_alloc or the pk_x* wrappers, which end here. */
noreturn void pk_out_of_memory(size_t bytes);
void *pk_xmalloc(size_t bytes);
void *pk_xcalloc(size_t n, size_t size);
void *pk_xrealloc(void *p, size_t bytes);

/* Broken invariants only, never user input. */
noreturn void pk_assert_fail(const char *file, int line, const char *cond);
#define PK_ASSERT(c) ((c) ? (void)0 : pk_assert_fail(__FILE__, __LINE__, #c))

/* Growable string (malloc-backed, for building source text and messages). */
typedef struct pk_strbuf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len, cap;
} pk_strbuf;
void pk_strbuf_init(pk_strbuf *b);
void pk_strbuf_free(pk_strbuf *b);
void pk_strbuf_append(pk_strbuf *b, const char *s);
void pk_strbuf_appendn(pk_strbuf *b, const char *s, size_t n);
void pk_strbuf_printf(pk_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Moves the text into the context's arena and resets b. */
char *pk_strbuf_finish(pk_ctx *ctx, pk_strbuf *b);

/* Checked int64 arithmetic: return 0 and set *out, or return 1 on overflow. */
int pk_i64_add(int64_t a, int64_t b, int64_t *out);
int pk_i64_mul(int64_t a, int64_t b, int64_t *out);

/* Reads a whole file into the arena (NUL-terminated); PK_ERR_IO with a message on failure.
 * libpockrt's input rules apply (runtime/rt_file.h): only a regular file of at most
 * PK_READ_FILE_MAX bytes is read; a FIFO, device or directory is refused, never waited on. */
#define PK_READ_FILE_MAX ((size_t)1 << 32)
pk_status pk_read_file(pk_ctx *ctx, const char *path, char **text, size_t *len);

#endif
