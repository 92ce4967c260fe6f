/* rt_file.h — libpockrt-private file helpers: reading a whole file with a size cap, and
 * atomic replacement (temp file in the same directory, fsync, rename). */
#ifndef RT_FILE_H
#define RT_FILE_H

#include <stddef.h>

#include "pkrt.h"

/* libpockrt-private functions stay out of the shared library's dynamic symbol table. */
#define RT_INTERNAL __attribute__((visibility("hidden")))

/* Reads path into a malloc'd buffer (*bytes, free() it; one extra NUL byte past *len so
 * text can be parsed in place). Files over max_bytes are refused: a hostile path such as
 * /dev/zero must not exhaust memory. */
RT_INTERNAL
pkrt_status rt_file_read(pkrt_ctx *rt, const char *path, size_t max_bytes, void **bytes,
                         size_t *len);

/* An atomic writer. Small writes are coalesced in buf. */
typedef struct rt_wfile {
  int fd;
  const char *path;
  char tmp[4096];
  size_t nbuf;
  unsigned char buf[8192];
} rt_wfile;
RT_INTERNAL pkrt_status rt_wfile_open(pkrt_ctx *rt, rt_wfile *w, const char *path);
RT_INTERNAL pkrt_status rt_wfile_write(pkrt_ctx *rt, rt_wfile *w, const void *data, size_t len);
/* fsync, close, rename over path; on failure the temp file is removed. */
RT_INTERNAL pkrt_status rt_wfile_commit(pkrt_ctx *rt, rt_wfile *w);
/* Closes and removes the temp file (after a failed write). */
RT_INTERNAL void rt_wfile_abort(rt_wfile *w);

#endif
