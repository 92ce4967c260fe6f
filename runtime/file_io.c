/* file_io.c — whole-file reads with a size cap and atomic file replacement, shared by
 * every reader and writer (rt_file.h) so each gets the same rules and messages. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_file.h"

pkrt_status rt_file_read(pkrt_ctx *rt, const char *path, size_t max_bytes, void **bytes,
                         size_t *len) {
  *bytes = NULL;
  *len = 0;
  int fd;
  struct stat st;
  pkrt_status s = rt_file_open_input(rt, path, &fd, &st);
  if (s != PKRT_OK) return s;
  if ((unsigned long long)st.st_size > max_bytes) {
    close(fd);
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: file too large (%lld bytes, limit %zu)",
                         path, (long long)st.st_size, max_bytes);
  }
  /* st_size is only a hint: /proc files report 0, and a file may change while read. */
  size_t cap = st.st_size > 0 ? (size_t)st.st_size : 4096;
  unsigned char *p = malloc(cap + 1);
  if (!p) {
    close(fd);
    return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap);
  }
  size_t n = 0;
  for (;;) {
    if (n == cap) {
      /* Probe for EOF before growing, so a file of exactly st_size bytes is not copied. */
      unsigned char probe;
      ssize_t r = read(fd, &probe, 1);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) break;
      if (r < 0) {
        int e = errno;
        free(p);
        close(fd);
        return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: read: %s", path, strerror(e));
      }
      if (cap >= max_bytes) {
        free(p);
        close(fd);
        return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: file too large (limit %zu bytes)", path,
                             max_bytes);
      }
      size_t ncap = cap > max_bytes / 2 ? max_bytes : cap * 2;
      unsigned char *q = realloc(p, ncap + 1);
      if (!q) {
        free(p);
        close(fd);
        return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", path);
      }
      p = q;
      cap = ncap;
      p[n++] = probe;
      continue;
    }
    ssize_t r = read(fd, p + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(p);
      close(fd);
      return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: read: %s", path, strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  p[n] = 0;
  *bytes = p;
  *len = n;
  return PKRT_OK;
}

pkrt_status rt_wfile_open(pkrt_ctx *rt, rt_wfile *w, const char *path) {
  w->fd = -1;
  w->nbuf = 0;
  w->path = path;
  pkrt_status s = rt_file_output_target(rt, path, w->final, sizeof w->final);
  if (s != PKRT_OK) return s;
  /* Our own O_EXCL loop rather than mkstemp: mkstemp makes 0600 files, and a weights file
   * or artifact should get the usual umask-derived permissions. */
  for (int i = 0; i < 100; i++) {
    if (snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld.%d", w->final, (long)getpid(), i) >=
        (int)sizeof w->tmp)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "output path too long: %s", path);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd >= 0) return PKRT_OK;
    if (errno != EEXIST) break;
  }
  return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: cannot create temporary file %s: %s", path,
                       w->tmp, strerror(errno));
}

static int write_all(int fd, const unsigned char *p, size_t len) {
  while (len > 0) {
    ssize_t r = write(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;
      return -1;
    }
    p += r;
    len -= (size_t)r;
  }
  return 0;
}

static pkrt_status flush_buf(pkrt_ctx *rt, rt_wfile *w) {
  if (w->nbuf && write_all(w->fd, w->buf, w->nbuf) != 0) {
    pkrt_status st = pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: write: %s", w->path, strerror(errno));
    rt_wfile_abort(w);
    return st;
  }
  w->nbuf = 0;
  return PKRT_OK;
}

pkrt_status rt_wfile_write(pkrt_ctx *rt, rt_wfile *w, const void *data, size_t len) {
  if (w->fd < 0) return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: write after failure", w->path);
  if (len <= sizeof w->buf - w->nbuf) {
    if (len) memcpy(w->buf + w->nbuf, data, len);
    w->nbuf += len;
    return PKRT_OK;
  }
  pkrt_status st = flush_buf(rt, w);
  if (st != PKRT_OK) return st;
  if (len <= sizeof w->buf) {
    memcpy(w->buf, data, len);
    w->nbuf = len;
    return PKRT_OK;
  }
  if (write_all(w->fd, data, len) != 0) {
    st = pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: write: %s", w->path, strerror(errno));
    rt_wfile_abort(w);
  }
  return st;
}

pkrt_status rt_wfile_commit(pkrt_ctx *rt, rt_wfile *w) {
  if (w->fd < 0) return pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: commit after failure", w->path);
  pkrt_status st = flush_buf(rt, w);
  if (st != PKRT_OK) return st;
  if (fsync(w->fd) != 0) {
    st = pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: fsync: %s", w->path, strerror(errno));
    rt_wfile_abort(w);
    return st;
  }
  if (close(w->fd) != 0) {
    w->fd = -1;
    st = pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: close: %s", w->path, strerror(errno));
    unlink(w->tmp);
    return st;
  }
  w->fd = -1;
  if (rename(w->tmp, w->final) != 0) {
    st = pkrt_ctx_fail(rt, PKRT_ERR_IO, "%s: rename from %s: %s", w->path, w->tmp,
                       strerror(errno));
    unlink(w->tmp);
    return st;
  }
  /* The rename is durable only once the directory is synced; failure here is not fatal
   * (some file systems refuse fsync on a directory). */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", w->final);
  int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    int r = fsync(dfd);
    (void)r;
    close(dfd);
  }
  return PKRT_OK;
}

void rt_wfile_abort(rt_wfile *w) {
  if (w->fd >= 0) {
    close(w->fd);
    unlink(w->tmp);
  }
  w->fd = -1;
}
