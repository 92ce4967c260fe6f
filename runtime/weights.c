/* weights.c — the .pkw weights file: named tensors (format in pkrt.h and
 * docs/graph-format.md). The reader trusts nothing: every length is checked against the
 * bytes that remain before it is used. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_file.h"

/* Tensor data is copied as raw bytes, so the host must share the file's byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libpockrt reads and writes little-endian files and needs a little-endian host"
#endif

#define PKW_MAGIC "PKW1"
#define PKW_MAX_RANK 8
#define PKW_MAX_FILE ((size_t)1 << 34) /* 16 GiB: far above any edge model */

typedef struct reader {
  const unsigned char *p, *end;
} reader;

static int rd(reader *r, void *dst, size_t n) {
  if ((size_t)(r->end - r->p) < n) return -1;
  memcpy(dst, r->p, n);
  r->p += n;
  return 0;
}

static int name_cmp(const void *a, const void *b) {
  const pkrt_wtensor *x = *(pkrt_wtensor *const *)a, *y = *(pkrt_wtensor *const *)b;
  return strcmp(x->name, y->name);
}

/* Duplicate names by sorting pointers: hostile files may hold many thousands of tiny
 * tensors, and a pairwise check would be quadratic. */
static const char *find_duplicate(pkrt_arena *a, pkrt_wtensor *t, int n) {
  if (n < 2) return NULL;
  pkrt_wtensor **s = pkrt_arena_alloc(a, (size_t)n * sizeof *s, 0);
  if (!s) return NULL;
  for (int i = 0; i < n; i++) s[i] = &t[i];
  qsort(s, (size_t)n, sizeof *s, name_cmp);
  for (int i = 1; i < n; i++)
    if (strcmp(s[i - 1]->name, s[i]->name) == 0) return s[i]->name;
  return NULL;
}

/* numel of a shape, or -1 when a dim is negative or the product exceeds limit. */
static int64_t numel_within(const int64_t *shape, int ndim, int64_t limit) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0) return -1;
    if (shape[d] == 0) n = 0;
  }
  if (n == 0) return 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] > limit / n) return -1;
    n *= shape[d];
  }
  /* A scalar (rank 0) is one element: the loop above never met the limit. */
  return n <= limit ? n : -1;
}

static pkrt_status parse_pkw(pkrt_ctx *rt, pkrt_arena *a, const char *what, const void *bytes,
                             size_t len, pkrt_wtensor **out, int *count) {
  if (!out || !count || !a)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_weights_parse: NULL argument");
  *out = NULL;
  *count = 0;
  if (!what) what = "<weights>";
  if (!bytes && len) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: no bytes", what);
  reader r = {bytes, (const unsigned char *)bytes + len};
  char magic[4];
  uint32_t n;
  if (rd(&r, magic, 4) != 0 || memcmp(magic, PKW_MAGIC, 4) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: not a weights file (magic is not \"PKW1\")",
                         what);
  if (rd(&r, &n, 4) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated (no tensor count)", what);
  /* Every tensor takes at least 5 bytes, which bounds the count before we allocate. */
  if (n > (size_t)(r.end - r.p) / 5 || n > INT32_MAX)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: truncated (tensor count %u does not fit in %zu bytes)", what, n,
                         len);
  pkrt_wtensor *t = pkrt_arena_alloc(a, (size_t)(n ? n : 1) * sizeof *t, 0);
  if (!t) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", what);
  for (uint32_t i = 0; i < n; i++) {
    uint16_t nlen;
    uint8_t dt, rank;
    if (rd(&r, &nlen, 2) != 0)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated in tensor %u's name length",
                           what, i);
    if (nlen == 0 || nlen > 255)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor %u has a name of %u bytes (1..255)",
                           what, i, nlen);
    char *name = pkrt_arena_alloc(a, (size_t)nlen + 1, 1);
    if (!name) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", what);
    if (rd(&r, name, nlen) != 0)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated in tensor %u's name", what, i);
    if (memchr(name, 0, nlen))
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor %u's name contains a NUL byte",
                           what, i);
    if (rd(&r, &dt, 1) != 0 || rd(&r, &rank, 1) != 0)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated in tensor '%s' header", what,
                           name);
    size_t esize = pkrt_dtype_size((pkrt_dtype)dt);
    if (esize == 0)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor '%s' has an unknown dtype %u", what,
                           name, dt);
    if (rank > PKW_MAX_RANK)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor '%s' has rank %u (at most %d)",
                           what, name, rank, PKW_MAX_RANK);
    pkrt_wtensor *w = &t[i];
    w->name = name;
    w->dtype = (pkrt_dtype)dt;
    w->ndim = rank;
    if (rd(&r, w->shape, (size_t)rank * 8) != 0)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated in tensor '%s' shape", what,
                           name);
    size_t left = (size_t)(r.end - r.p);
    int64_t numel = numel_within(w->shape, rank, (int64_t)(left / esize));
    if (numel < 0) {
      for (int d = 0; d < rank; d++)
        if (w->shape[d] < 0)
          return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor '%s' has a negative dim %lld",
                               what, name, (long long)w->shape[d]);
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                           "%s: truncated in tensor '%s' data (shape needs more than the %zu "
                           "bytes left)",
                           what, name, left);
    }
    size_t nbytes = (size_t)numel * esize;
    void *data = pkrt_arena_alloc(a, nbytes, 64);
    if (!data) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", what);
    if (nbytes) rd(&r, data, nbytes); /* fits: checked above */
    w->data = data;
  }
  if (r.p != r.end)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: %zu unexpected bytes after the last tensor",
                         what, (size_t)(r.end - r.p));
  const char *dup = find_duplicate(a, t, (int)n);
  if (dup) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: duplicate tensor name '%s'", what, dup);
  *out = t;
  *count = (int)n;
  return PKRT_OK;
}

pkrt_status pkrt_weights_parse(pkrt_ctx *rt, pkrt_arena *a, const char *what,
                               const void *bytes, size_t len, pkrt_wtensor **out, int *count) {
  pkrt_status st = parse_pkw(rt, a, what, bytes, len, out, count);
  if (st != PKRT_OK && rt) {
    /* Messages quote tensor names, which are the file's bytes, and end up on terminals:
     * no control characters (an escape sequence in a name must not reach one). */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pkrt_ctx_error(rt));
    for (char *c = msg; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    pkrt_ctx_fail(rt, st, "%s", msg);
  }
  return st;
}

pkrt_status pkrt_weights_read(pkrt_ctx *rt, pkrt_arena *a, const char *path,
                              pkrt_wtensor **out, int *count) {
  if (!out || !count || !a)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_weights_read: NULL argument");
  *out = NULL;
  *count = 0;
  void *bytes;
  size_t len;
  pkrt_status st = rt_file_read(rt, path, PKW_MAX_FILE, &bytes, &len);
  if (st != PKRT_OK) return st;
  st = pkrt_weights_parse(rt, a, path, bytes, len, out, count);
  free(bytes);
  return st;
}

static pkrt_status check_tensor(pkrt_ctx *rt, const char *path, const pkrt_wtensor *t, int i,
                                size_t *nbytes) {
  size_t nlen = t->name ? strlen(t->name) : 0;
  if (nlen == 0 || nlen > 255)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor %d needs a name of 1..255 bytes",
                         path, i);
  size_t esize = pkrt_dtype_size(t->dtype);
  if (esize == 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor '%s' has an invalid dtype %d", path,
                         t->name, (int)t->dtype);
  if (t->ndim < 0 || t->ndim > PKW_MAX_RANK)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor '%s' has rank %d (0..%d)", path,
                         t->name, t->ndim, PKW_MAX_RANK);
  int64_t numel = numel_within(t->shape, t->ndim, (int64_t)(PKW_MAX_FILE / esize));
  if (numel < 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor '%s' has a bad shape", path, t->name);
  if (numel > 0 && !t->data)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: tensor '%s' has no data", path, t->name);
  *nbytes = (size_t)numel * esize;
  return PKRT_OK;
}

pkrt_status pkrt_weights_write(pkrt_ctx *rt, const char *path, const pkrt_wtensor *t,
                               int count) {
  if (!path) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_weights_write: no path");
  if (count < 0 || (count > 0 && !t))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: bad tensor list (%d tensors)", path, count);
  size_t dummy;
  for (int i = 0; i < count; i++) {
    pkrt_status st = check_tensor(rt, path, &t[i], i, &dummy);
    if (st != PKRT_OK) return st;
  }
  /* Writers check uniqueness too: a file we write must be one we can read back. */
  pkrt_arena *tmp = pkrt_arena_new(0);
  if (!tmp) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", path);
  pkrt_wtensor *copy = pkrt_arena_alloc(tmp, (size_t)(count ? count : 1) * sizeof *copy, 0);
  const char *dup = NULL;
  if (copy) {
    if (count) memcpy(copy, t, (size_t)count * sizeof *copy);
    dup = find_duplicate(tmp, copy, count);
  }
  pkrt_status st = !copy ? pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", path)
                   : dup ? pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: duplicate tensor name '%s'",
                                         path, dup)
                         : PKRT_OK;
  pkrt_arena_free(tmp);
  if (st != PKRT_OK) return st;

  rt_wfile w;
  st = rt_wfile_open(rt, &w, path);
  if (st != PKRT_OK) return st;
  uint32_t n = (uint32_t)count;
  if ((st = rt_wfile_write(rt, &w, PKW_MAGIC, 4)) != PKRT_OK) return st;
  if ((st = rt_wfile_write(rt, &w, &n, 4)) != PKRT_OK) return st;
  for (int i = 0; i < count; i++) {
    size_t nbytes;
    check_tensor(rt, path, &t[i], i, &nbytes);
    uint16_t nlen = (uint16_t)strlen(t[i].name);
    uint8_t hdr[2] = {(uint8_t)t[i].dtype, (uint8_t)t[i].ndim};
    if ((st = rt_wfile_write(rt, &w, &nlen, 2)) != PKRT_OK ||
        (st = rt_wfile_write(rt, &w, t[i].name, nlen)) != PKRT_OK ||
        (st = rt_wfile_write(rt, &w, hdr, 2)) != PKRT_OK ||
        (st = rt_wfile_write(rt, &w, t[i].shape, (size_t)t[i].ndim * 8)) != PKRT_OK ||
        (st = rt_wfile_write(rt, &w, t[i].data, nbytes)) != PKRT_OK)
      return st;
  }
  return rt_wfile_commit(rt, &w);
}
