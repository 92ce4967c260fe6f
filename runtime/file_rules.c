/* file_rules.c — which paths Pock reads and writes (rt_file.h): inputs must be regular
 * files, opened without blocking; outputs must not be devices, FIFOs, directories, dangling
 * links or one of the command's own inputs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_file.h"

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

pkrt_status rt_file_open_input(pkrt_ctx *rt, const char *path, int *fd, struct stat *st) {
  *fd = -1;
  if (!path || !*path) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "empty file name");
  /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, forever. */
  int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f < 0) return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: %s", path, strerror(errno));
  if (fstat(f, st) != 0) {
    int e = errno;
    close(f);
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: %s", path, strerror(e));
  }
  if (!S_ISREG(st->st_mode)) {
    close(f);
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: is %s; expected a regular file", path,
                         kind_of(st->st_mode));
  }
  int fl = fcntl(f, F_GETFL);
  if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(f);
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: %s", path, strerror(e));
  }
  *fd = f;
  return PKRT_OK;
}

/* The file path names once links are followed, or why it may not be written. *exists is
 * false for a path that does not exist yet (and is not a link). */
static pkrt_status output_kind(pkrt_ctx *rt, const char *path, int flags, struct stat *st,
                               bool *exists) {
  *exists = false;
  if (!path || !*path) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "empty output file name");
  struct stat ls;
  if (lstat(path, &ls) != 0) {
    if (errno == ENOENT) return PKRT_OK;
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: %s", path, strerror(errno));
  }
  if (stat(path, st) != 0) {
    /* A link to nowhere: writing "through" it would create a file somewhere the user
     * may not expect, and renaming over it would lose the link. */
    if (S_ISLNK(ls.st_mode))
      return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: is a dangling symbolic link (%s); not writing "
                           "through it", path, strerror(errno));
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: %s", path, strerror(errno));
  }
  *exists = true;
  if (S_ISREG(st->st_mode)) return PKRT_OK;
  if ((flags & RT_OUT_STREAM) && (S_ISFIFO(st->st_mode) || S_ISCHR(st->st_mode)))
    return PKRT_OK;
  return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: is %s; an output must be a regular file or a new "
                       "path", path, kind_of(st->st_mode));
}

/* Whether two paths that do not exist yet would name one file: the same name in the same
 * directory (two outputs of one command, such as --save X --checkpoint X). */
static bool same_new_path(const char *a, const char *b) {
  const char *ba = strrchr(a, '/'), *bb = strrchr(b, '/');
  ba = ba ? ba + 1 : a;
  bb = bb ? bb + 1 : b;
  if (strcmp(ba, bb) != 0) return false;
  char da[PATH_MAX], db[PATH_MAX];
  snprintf(da, sizeof da, "%.*s", ba == a ? 1 : (int)(ba - a), ba == a ? "." : a);
  snprintf(db, sizeof db, "%.*s", bb == b ? 1 : (int)(bb - b), bb == b ? "." : b);
  struct stat sa, sb;
  return stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

pkrt_status rt_file_check_output(pkrt_ctx *rt, const char *path, int flags,
                                 const char *const *inputs, int ninputs) {
  struct stat st;
  bool exists;
  pkrt_status s = output_kind(rt, path, flags, &st, &exists);
  if (s != PKRT_OK) return s;
  for (int i = 0; i < ninputs && !exists; i++) {
    struct stat in;
    if (inputs[i] && *inputs[i] && lstat(inputs[i], &in) != 0 && same_new_path(path, inputs[i]))
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: is named twice (also as %s)", path,
                           inputs[i]);
  }
  for (int i = 0; i < ninputs && exists; i++) {
    struct stat in;
    if (!inputs[i] || stat(inputs[i], &in) != 0) continue;
    /* A character device such as /dev/stdout may stand for both ends; only files clash. */
    if (in.st_dev == st.st_dev && in.st_ino == st.st_ino && !S_ISCHR(st.st_mode) &&
        !S_ISFIFO(st.st_mode))
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: is the same file as the input %s; not "
                           "overwriting an input", path, inputs[i]);
  }
  return PKRT_OK;
}

pkrt_status rt_file_output_target(pkrt_ctx *rt, const char *path, char *final, size_t cap) {
  struct stat st, ls;
  bool exists;
  pkrt_status s = output_kind(rt, path, 0, &st, &exists);
  if (s != PKRT_OK) return s;
  if (exists && lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) {
    /* Replace the file the link leads to, beside itself, so the link keeps working. */
    char buf[PATH_MAX];
    if (!realpath(path, buf))
      return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: cannot resolve the link: %s", path,
                           strerror(errno));
    if (strlen(buf) >= cap) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "output path too long: %s", buf);
    memcpy(final, buf, strlen(buf) + 1);
    return PKRT_OK;
  }
  if (strlen(path) >= cap) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "output path too long: %s", path);
  memcpy(final, path, strlen(path) + 1);
  return PKRT_OK;
}

pkrt_status rt_file_open_stream(pkrt_ctx *rt, const char *path, bool append,
                                const char *const *inputs, int ninputs, FILE **out) {
  *out = NULL;
  pkrt_status s = rt_file_check_output(rt, path, RT_OUT_STREAM, inputs, ninputs);
  if (s != PKRT_OK) return s;
  /* O_NONBLOCK: a FIFO nobody reads fails with ENXIO instead of blocking the open. */
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : O_TRUNC),
                0666);
  if (fd < 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: cannot open for writing: %s", path,
                         errno == ENXIO ? "a FIFO with no reader" : strerror(errno));
  struct stat st;
  int fl = fcntl(fd, F_GETFL);
  if (fstat(fd, &st) != 0 || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
      !(*out = fdopen(fd, append ? "a" : "w"))) {
    int e = errno;
    close(fd);
    return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: cannot open for writing: %s", path, strerror(e));
  }
  return PKRT_OK;
}
