/* rt_file.h — libpockrt-private file helpers, the one place every reader and writer of Pock
 * (runtime and compiler) opens user-named files: the input and output rules, reading a
 * whole file with a size cap, and atomic replacement (temp file, fsync, rename). */
#ifndef RT_FILE_H
#define RT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include "pkrt.h"

/* libpockrt-private functions stay out of the shared library's dynamic symbol table. */
#define RT_INTERNAL __attribute__((visibility("hidden")))

/* ---- inputs ----
 * Opens path read-only. The open itself is non-blocking, so a FIFO with no writer cannot
 * hang it; then anything but a regular file (FIFO, device, directory, socket) is refused
 * with "PATH: is a FIFO; expected a regular file" before a byte is read. On success *fd is
 * a blocking descriptor (the caller closes it) and *st its fstat. */
RT_INTERNAL pkrt_status rt_file_open_input(pkrt_ctx *rt, const char *path, int *fd,
                                           struct stat *st);

/* Reads path (opened by rt_file_open_input) into a malloc'd buffer (*bytes, free() it; one
 * extra NUL byte past *len so text can be parsed in place). Files over max_bytes are
 * refused: a file must not exhaust memory before it is looked at. */
RT_INTERNAL
pkrt_status rt_file_read(pkrt_ctx *rt, const char *path, size_t max_bytes, void **bytes,
                         size_t *len);

/* ---- outputs ----
 * What an output path may be: absent (it is created), a regular file (replaced), or a
 * symbolic link whose final target is a regular file (that file is replaced, in its own
 * directory; the link stays). Refused, with a message naming the path: a dangling link, a
 * directory, a device, a FIFO, a socket. An output that is the same file (st_dev, st_ino,
 * links followed) as one of the command's inputs is refused too: writing it would destroy
 * what the command reads; so is a new path that one of `inputs` names too (two outputs of
 * one command). A command that documents an in-place update (`pock sign` without
 * -o, --resume C --checkpoint C) leaves that input out of `inputs`. */
enum {
  /* A stream (--metrics): a FIFO or character device is accepted too (a pipe,
   * /dev/stdout), and the file is written in place, never renamed over. */
  RT_OUT_STREAM = 1,
};

/* Checks path against the rules above; inputs[0..ninputs) are the command's input paths
 * (NULL entries skipped; inputs that do not exist cannot clash). Call it before the work
 * whose result is written, so a bad path is refused before hours of training. */
RT_INTERNAL pkrt_status rt_file_check_output(pkrt_ctx *rt, const char *path, int flags,
                                             const char *const *inputs, int ninputs);

/* Opens a stream output (RT_OUT_STREAM rules, inputs as above), truncated or appended
 * to. The open is non-blocking, so a FIFO nobody reads is refused instead of hanging.
 * Write errors are the caller's to check (fflush/ferror). */
RT_INTERNAL pkrt_status rt_file_open_stream(pkrt_ctx *rt, const char *path, bool append,
                                            const char *const *inputs, int ninputs,
                                            FILE **out);

/* The file an output path replaces (the rules above, no inputs): path itself, or its
 * symlink's final target, into final[cap]. */
RT_INTERNAL pkrt_status rt_file_output_target(pkrt_ctx *rt, const char *path, char *final,
                                              size_t cap);

/* An atomic writer. Small writes are coalesced in buf. open applies the output rules
 * (without inputs: check those first with rt_file_check_output). */
typedef struct rt_wfile {
  int fd;
  const char *path;         /* as given, for messages */
  char final[4096];         /* the file replaced: path, or its symlink's final target */
  char tmp[4096];
  size_t nbuf;
  unsigned char buf[8192];
} rt_wfile;
RT_INTERNAL pkrt_status rt_wfile_open(pkrt_ctx *rt, rt_wfile *w, const char *path);
RT_INTERNAL pkrt_status rt_wfile_write(pkrt_ctx *rt, rt_wfile *w, const void *data, size_t len);
/* fsync, close, rename over final, fsync its directory; on failure the temp file is
 * removed. */
RT_INTERNAL pkrt_status rt_wfile_commit(pkrt_ctx *rt, rt_wfile *w);
/* Closes and removes the temp file (after a failed write). */
RT_INTERNAL void rt_wfile_abort(rt_wfile *w);

#endif
