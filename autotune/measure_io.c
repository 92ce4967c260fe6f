/* measure_io.c — the measurer's process plumbing: whole reads and writes on pipes, waitpid,
 * closing inherited descriptors in a fresh child, and dying with the parent. Every call
 * here retries on EINTR, since a signal may arrive at any time in a long tuning run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure_impl.h"

int meas_read_full(int fd, void *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t r = read(fd, (char *)buf + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return got == 0 ? 0 : -1;
    got += (size_t)r;
  }
  return 1;
}

int meas_write_full(int fd, const void *buf, size_t len) {
  size_t put = 0;
  while (put < len) {
    ssize_t w = send(fd, (const char *)buf + put, len - put, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = write(fd, (const char *)buf + put, len - put);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    put += (size_t)w;
  }
  return 0;
}

int meas_wait(pid_t pid) {
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return status;
}

static bool kept(int fd, const int *keep, int nkeep) {
  if (fd <= STDERR_FILENO) return true;
  for (int i = 0; i < nkeep; i++)
    if (keep[i] == fd) return true;
  return false;
}

void meas_close_fds_except(const int *keep, int nkeep) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) {
    /* No /proc: the descriptors a process usually has are the low ones. */
    for (int fd = 3; fd < 1024; fd++)
      if (!kept(fd, keep, nkeep)) close(fd);
    return;
  }
  /* Collect first: closing while reading the directory would change what it lists. */
  int dir_fd = dirfd(d), nfds = 0, cap = 64;
  int *fds = malloc(sizeof(int) * (size_t)cap);
  for (struct dirent *e; fds && (e = readdir(d));) {
    char *end;
    long fd = strtol(e->d_name, &end, 10);
    if (*end || end == e->d_name || fd == dir_fd || kept((int)fd, keep, nkeep)) continue;
    if (nfds == cap) {
      int *grown = realloc(fds, sizeof(int) * (size_t)(cap *= 2));
      if (!grown) break;
      fds = grown;
    }
    fds[nfds++] = (int)fd;
  }
  closedir(d);
  for (int i = 0; i < nfds; i++) close(fds[i]);
  free(fds);
}

void meas_die_with_parent(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  /* The parent may have died before the request took effect. */
  if (getppid() != parent) _exit(127);
}

void meas_set_error(char *dst, const char *s) {
  if (!s) s = "";
  size_t n = strlen(s);
  if (n >= MEAS_ERROR_BYTES) n = MEAS_ERROR_BYTES - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

const char *meas_signal_name(int sig) {
  const char *abbrev = sigabbrev_np(sig);
  return abbrev ? abbrev : "unknown signal";
}
