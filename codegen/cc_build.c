/* cc_build.c — drives the host or cross C compiler: runs it without a shell (argv only, so
 * nothing in a flag or path is interpreted) within a time limit, caches shared objects by
 * a content hash of source, compiler identity, flags and target description, and
 * publishes results with an atomic rename. */
#define _GNU_SOURCE
#include "pk_codegen.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_ARGS 64

struct pk_cc {
  pk_ctx *ctx;
  const char *cc;
  const char *version;
  const char *flags;
  const char *cache_dir;
  const pk_target *target;
  const char *target_key; /* pk_target_describe: part of every cache key */
  double timeout_s;
  int nflags;
  char *flagv[MAX_ARGS];
};

const char *pk_cc_version(const pk_cc *cc) { return cc->version; }
const char *pk_cc_flags(const pk_cc *cc) { return cc->flags; }
const pk_target *pk_cc_target(const pk_cc *cc) { return cc->target; }
pk_ctx *pk_cc_ctx(const pk_cc *cc) { return cc->ctx; }
double pk_cc_timeout(const pk_cc *cc) { return cc->timeout_s; }
void pk_cc_set_timeout(pk_cc *cc, double timeout_s) { cc->timeout_s = timeout_s > 0 ? timeout_s : 0; }

/* Reads fd to its end into out; with a deadline (> 0), stops there and returns false. */
static bool read_until(int fd, pk_strbuf *out, int64_t deadline) {
  char buf[4096];
  for (;;) {
    if (deadline > 0) {
      int64_t left_ms = (deadline - pkrt_now_ns()) / 1000000;
      if (left_ms <= 0) return false;
      struct pollfd p = {.fd = fd, .events = POLLIN};
      int r = poll(&p, 1, left_ms > 60000 ? 60000 : (int)left_ms + 1);
      if (r < 0 && errno != EINTR) return true;
      if (r <= 0) continue;
    }
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) pk_strbuf_appendn(out, buf, (size_t)n);
    else if (n == 0 || errno != EINTR) return true;
  }
}

int pk_run_capture(pk_ctx *ctx, char *const *argv, char **output) {
  return pk_run_capture_timeout(ctx, argv, 0, output);
}

/* Runs argv, returns its exit status (or -1 if it could not start) and its combined
 * stdout+stderr in *output. With a limit, the process leads its own group, so that
 * killing the group at the deadline ends the compiler's own children (cc1, as) too. */
int pk_run_capture_timeout(pk_ctx *ctx, char *const *argv, double timeout_s, char **output) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (timeout_s > 0) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid;
  int64_t deadline = timeout_s > 0 ? pkrt_now_ns() + (int64_t)(timeout_s * 1e9) : 0;
  int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  pk_strbuf out;
  pk_strbuf_init(&out);
  bool finished = rc != 0 || read_until(fds[0], &out, deadline);
  close(fds[0]);
  pk_strbuf_append(&out, "");
  *output = pk_strbuf_finish(ctx, &out);
  if (rc != 0) {
    *output = pk_sprintf(ctx, "%s", strerror(rc));
    return -1;
  }
  if (!finished) kill(-pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (!finished) return PK_RUN_TIMED_OUT;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

pk_status pk_cache_dir_make(pk_ctx *ctx, const char *path) {
  char *p = pk_strdup(ctx, path);
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
      return pk_ctx_fail(ctx, PK_ERR_IO, "cannot create cache directory %s: %s", p, strerror(errno));
    *s = '/';
  }
  if (mkdir(p, 0755) != 0 && errno != EEXIST)
    return pk_ctx_fail(ctx, PK_ERR_IO, "cannot create cache directory %s: %s", p, strerror(errno));
  return PK_OK;
}

const char *pk_cache_dir_default(pk_ctx *ctx) {
  const char *env = getenv("POCK_CACHE_DIR");
  if (env && *env) return pk_strdup(ctx, env);
  env = getenv("XDG_CACHE_HOME");
  if (env && *env) return pk_sprintf(ctx, "%s/pock/kernels", env);
  env = getenv("HOME");
  if (env && *env) return pk_sprintf(ctx, "%s/.cache/pock/kernels", env);
  return pk_sprintf(ctx, "/tmp/pock-kernels-%d", (int)getuid());
}

/* PK_CC_DEFAULT_FLAGS for the target: its CPU option where -march=native stands (for this
 * machine the string is unchanged, so records stay comparable with earlier builds). */
static const char *default_flags(pk_ctx *ctx, const pk_target *t) {
  const char *cpu = pk_target_cpu_option(ctx, t);
  const char *flags = PK_CC_DEFAULT_FLAGS, *at = strstr(flags, "-march=native");
  PK_ASSERT(at);
  const char *after = at + strlen("-march=native");
  if (!cpu) return pk_sprintf(ctx, "%.*s%s", (int)(at - flags), flags, after + (*after == ' '));
  return pk_sprintf(ctx, "%.*s%s%s", (int)(at - flags), flags, cpu, after);
}

pk_status pk_cc_new(pk_ctx *ctx, const pk_cc_options *opts, pk_cc **out) {
  return pk_cc_new_target(ctx, opts, NULL, 0, out);
}

pk_status pk_cc_new_target(pk_ctx *ctx, const pk_cc_options *opts, const pk_target *target,
                           double timeout_s, pk_cc **out) {
  pk_cc *cc = pk_alloc(ctx, sizeof *cc);
  memset(cc, 0, sizeof *cc);
  cc->ctx = ctx;
  if (target) {
    cc->target = target;
  } else {
    pk_target *native;
    pk_status s = pk_target_parse(ctx, "c", opts ? opts->cc : NULL, &native);
    if (s != PK_OK) return s;
    cc->target = native;
  }
  if (cc->target->kind != PK_TARGET_C)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "target '%s' is not built by a C compiler",
                       cc->target->text);
  cc->cc = pk_strdup(ctx, opts && opts->cc ? opts->cc : cc->target->cc);
  cc->flags = pk_strdup(ctx, opts && opts->flags ? opts->flags : default_flags(ctx, cc->target));
  cc->timeout_s = timeout_s > 0 ? timeout_s : 0;
  cc->target_key = pk_target_describe(ctx, cc->target);
  cc->cache_dir = opts && opts->cache_dir ? pk_strdup(ctx, opts->cache_dir) : pk_cache_dir_default(ctx);

  char *words = pk_strdup(ctx, cc->flags);
  for (char *save = NULL, *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
    if (cc->nflags >= MAX_ARGS - 8)
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "too many compiler flags (at most %d)", MAX_ARGS - 8);
    cc->flagv[cc->nflags++] = w;
  }

  char *argv[] = {(char *)cc->cc, "--version", NULL};
  char *output;
  int rc = pk_run_capture(ctx, argv, &output);
  if (rc != 0)
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "cannot run the C compiler '%s': %s", cc->cc,
                       rc < 0 ? output : "--version failed");
  output[strcspn(output, "\n")] = '\0';
  cc->version = output;
  pk_status s = pk_cache_dir_make(ctx, cc->cache_dir);
  if (s != PK_OK) return s;
  *out = cc;
  return PK_OK;
}

static pk_status write_file(pk_ctx *ctx, const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return pk_ctx_fail(ctx, PK_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  size_t n = strlen(text);
  bool ok = fwrite(text, 1, n, f) == n;
  ok = (fclose(f) == 0) && ok;
  return ok ? PK_OK : pk_ctx_fail(ctx, PK_ERR_IO, "cannot write %s: %s", path, strerror(errno));
}

/* The first lines of a compiler log: enough to see the error, short enough to read. */
static const char *log_head(pk_ctx *ctx, const char *log) {
  const char *p = log;
  for (int lines = 0; *p && lines < 12; p++)
    if (*p == '\n') lines++;
  return pk_strndup(ctx, log, (size_t)(p - log));
}

/* What one cached build makes: a shared object from one source, an object file (-c) from
 * one source, or a shared object linked from cached objects and one more source. */
typedef enum cc_kind { CC_SHARED, CC_OBJECT, CC_LINK } cc_kind;

/* The cache key of a build (hex SHA-256 into hex) and its cached file's path. */
static const char *cache_path(pk_cc *cc, cc_kind kind, const char *source,
                              const char *const *objs, int nobjs, char *hex) {
  pk_ctx *ctx = cc->ctx;
  pk_strbuf key;
  pk_strbuf_init(&key);
  pk_strbuf_printf(&key, "%s\n--pock-cc--\n%s\n%s\n%s\nc-codegen-v%d\n%s\n", source, cc->cc,
                   cc->version, cc->flags, PK_CGEN_C_VERSION, cc->target_key);
  if (kind == CC_OBJECT) pk_strbuf_append(&key, "--object--\n");
  for (int i = 0; i < nobjs; i++) /* objects are named by their own hash: content, not path */
    pk_strbuf_printf(&key, "--link-- %s\n", strrchr(objs[i], '/') ? strrchr(objs[i], '/') + 1
                                                                   : objs[i]);
  pkrt_sha256_hex(key.data, key.len, hex);
  pk_strbuf_free(&key);
  return pk_sprintf(ctx, "%s/%s%s", cc->cache_dir, hex, kind == CC_OBJECT ? ".o" : ".so");
}

bool pk_cc_object_cached(pk_cc *cc, const char *source) {
  char hex[2 * PKRT_SHA256_BYTES + 1];
  return access(cache_path(cc, CC_OBJECT, source, NULL, 0, hex), R_OK) == 0;
}

static pk_status cc_cached(pk_cc *cc, cc_kind kind, const char *source, const char *const *objs,
                           int nobjs, pk_cc_result *out) {
  pk_ctx *ctx = cc->ctx;
  char hex[2 * PKRT_SHA256_BYTES + 1];
  const char *so = cache_path(cc, kind, source, objs, nobjs, hex);
  const char *ext = kind == CC_OBJECT ? ".o" : ".so";
  memset(out, 0, sizeof *out);
  out->hash = pk_strdup(ctx, hex);
  out->so_path = so;
  if (access(so, R_OK) == 0) {
    out->cache_hit = true;
    return PK_OK;
  }

  /* Unique temporaries: several builders (tuner workers, tests) may share one cache. */
  const char *tag = pk_sprintf(ctx, "%s/%s.%d.%lld", cc->cache_dir, hex, (int)getpid(),
                               (long long)pkrt_now_ns());
  const char *src = pk_sprintf(ctx, "%s.c", tag);
  const char *tmp_so = pk_sprintf(ctx, "%s%s.tmp", tag, ext);
  pk_status s = write_file(ctx, src, source);
  if (s != PK_OK) return s;

  char **argv = pk_alloc(ctx, sizeof *argv * (size_t)(MAX_ARGS + nobjs));
  int argc = 0;
  argv[argc++] = (char *)cc->cc;
  for (int i = 0; i < cc->nflags; i++) argv[argc++] = cc->flagv[i];
  argv[argc++] = kind == CC_OBJECT ? "-c" : "-shared";
  argv[argc++] = "-o";
  argv[argc++] = (char *)tmp_so;
  argv[argc++] = (char *)src;
  for (int i = 0; i < nobjs; i++) argv[argc++] = (char *)objs[i];
  if (kind != CC_OBJECT) argv[argc++] = "-lm";
  argv[argc] = NULL;

  int64_t t0 = pkrt_now_ns();
  char *log;
  int rc = pk_run_capture_timeout(ctx, argv, cc->timeout_s, &log);
  out->build_seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  if (rc == PK_RUN_TIMED_OUT) {
    unlink(tmp_so);
    unlink(src);
    out->timed_out = true;
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "the C compiler '%s' passed the build time limit of %g s "
                       "and was killed", cc->cc, cc->timeout_s);
  }
  if (rc != 0) {
    unlink(tmp_so);
    /* Keep the failing source where the message points, under a name the next build of
     * the same source overwrites (no pile of temporaries in the cache). */
    const char *kept = pk_sprintf(ctx, "%s/%s.c", cc->cache_dir, hex);
    if (rename(src, kept) != 0) unlink(src), kept = "(source removed)";
    if (kind == CC_LINK)
      return pk_ctx_fail(ctx, PK_ERR_BUILD, "the C compiler '%s' failed to link %d kernel "
                         "objects with %s (exit %d):\n%s", cc->cc, nobjs, kept, rc,
                         log_head(ctx, log));
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "the C compiler '%s' failed on %s (exit %d):\n%s",
                       cc->cc, kept, rc, log_head(ctx, log));
  }
  /* Keep the source and how it was built beside the object, for debugging and records. */
  const char *final_src = pk_sprintf(ctx, "%s/%s.c", cc->cache_dir, hex);
  if (rename(src, final_src) != 0) unlink(src);
  const char *meta = pk_sprintf(ctx, "%s.txt", tag);
  if (write_file(ctx, meta,
                 pk_sprintf(ctx, "compiler: %s\nversion: %s\nflags: %s %s\ncodegen: c v%d\n"
                            "target: %s\nbuild_seconds: %.3f\n", cc->cc, cc->version, cc->flags,
                            kind == CC_OBJECT ? "-c" : "-shared -lm", PK_CGEN_C_VERSION,
                            cc->target_key, out->build_seconds)) == PK_OK)
    rename(meta, pk_sprintf(ctx, "%s/%s.txt", cc->cache_dir, hex));
  else
    pk_ctx_clear_error(ctx); /* the record is a convenience; the build itself succeeded */
  if (rename(tmp_so, so) != 0) {
    unlink(tmp_so);
    return pk_ctx_fail(ctx, PK_ERR_IO, "cannot move %s into the cache: %s", so, strerror(errno));
  }
  return PK_OK;
}

pk_status pk_cc_build(pk_cc *cc, const char *source, pk_cc_result *out) {
  return cc_cached(cc, CC_SHARED, source, NULL, 0, out);
}

pk_status pk_cc_build_object(pk_cc *cc, const char *source, pk_cc_result *out) {
  return cc_cached(cc, CC_OBJECT, source, NULL, 0, out);
}

pk_status pk_cc_link(pk_cc *cc, const char *source, const char *const *objects, int n,
                     pk_cc_result *out) {
  PK_ASSERT(n >= 0);
  return cc_cached(cc, CC_LINK, source, objects, n, out);
}
