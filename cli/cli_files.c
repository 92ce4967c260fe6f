/* cli_files.c — the file rules of libpockrt (runtime/rt_file.h) for the commands of `pock`
 * and `pock-rt`: checked outputs, atomic writes, and the check that standard output was
 * really written before a command reports success. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "rt_file.h"

void pkrt_cli_error(const char *prog, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: error: ", prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int pkrt_cli_check_output(const char *prog, const char *path, int flags,
                          const char *const *inputs, int ninputs) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pkrt_cli_error(prog, "out of memory"), 1;
  int rc = 0;
  if (rt_file_check_output(rt, path, flags, inputs, ninputs) != PKRT_OK) {
    pkrt_cli_error(prog, "%s", pkrt_ctx_error(rt));
    rc = 1;
  }
  pkrt_ctx_free(rt);
  return rc;
}

int pkrt_cli_write_file(const char *prog, const char *path, const void *data, size_t len,
                        const char *const *inputs, int ninputs) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pkrt_cli_error(prog, "out of memory"), 1;
  rt_wfile w;
  pkrt_status st = rt_file_check_output(rt, path, 0, inputs, ninputs);
  if (st == PKRT_OK) st = rt_wfile_open(rt, &w, path);
  if (st == PKRT_OK) st = rt_wfile_write(rt, &w, data, len);
  if (st == PKRT_OK) st = rt_wfile_commit(rt, &w);
  if (st != PKRT_OK) pkrt_cli_error(prog, "%s", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  return st == PKRT_OK ? 0 : 1;
}

int pkrt_cli_finish(const char *prog, int rc) {
  /* What a command printed may still sit in stdio's buffer: a full disk or a closed pipe
   * shows only when it is flushed, and a command that lost its output has not succeeded. */
  errno = 0;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    pkrt_cli_error(prog, "writing standard output: %s",
                   errno ? strerror(errno) : "write error");
    return rc ? rc : 1;
  }
  return rc;
}
