/* cc_build.c — drives the host C compiler: runs it without a shell (argv only, so nothing
 * in a flag or path is interpreted), caches shared objects by a content hash of source,
 * compiler identity and flags, and publishes results with an atomic rename. */
#define _GNU_SOURCE
#include "pk_codegen.h"

#include <errno.h>
#include <fcntl.h>
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
  int nflags;
  char *flagv[MAX_ARGS];
};

const char *pk_cc_version(const pk_cc *cc) { return cc->version; }
const char *pk_cc_flags(const pk_cc *cc) { return cc->flags; }

/* Runs argv, returns its exit status (or -1 if it could not start) and its combined
 * stdout+stderr in *output. */
int pk_run_capture(pk_ctx *ctx, char *const *argv, char **output) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  pk_strbuf out;
  pk_strbuf_init(&out);
  if (rc == 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) pk_strbuf_appendn(&out, buf, (size_t)n);
  }
  close(fds[0]);
  pk_strbuf_append(&out, "");
  *output = pk_strbuf_finish(ctx, &out);
  if (rc != 0) {
    *output = pk_sprintf(ctx, "%s", strerror(rc));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static pk_status make_dirs(pk_ctx *ctx, const char *path) {
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

static const char *default_cache_dir(pk_ctx *ctx) {
  const char *env = getenv("POCK_CACHE_DIR");
  if (env && *env) return pk_strdup(ctx, env);
  env = getenv("XDG_CACHE_HOME");
  if (env && *env) return pk_sprintf(ctx, "%s/pock/kernels", env);
  env = getenv("HOME");
  if (env && *env) return pk_sprintf(ctx, "%s/.cache/pock/kernels", env);
  return pk_sprintf(ctx, "/tmp/pock-kernels-%d", (int)getuid());
}

pk_status pk_cc_new(pk_ctx *ctx, const pk_cc_options *opts, pk_cc **out) {
  pk_cc *cc = pk_alloc(ctx, sizeof *cc);
  cc->ctx = ctx;
  const char *env_cc = getenv("CC");
  cc->cc = pk_strdup(ctx, opts && opts->cc ? opts->cc : env_cc && *env_cc ? env_cc : "cc");
  cc->flags = pk_strdup(ctx, opts && opts->flags ? opts->flags : PK_CC_DEFAULT_FLAGS);
  cc->cache_dir = opts && opts->cache_dir ? pk_strdup(ctx, opts->cache_dir) : default_cache_dir(ctx);

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
  pk_status s = make_dirs(ctx, cc->cache_dir);
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

pk_status pk_cc_build(pk_cc *cc, const char *source, pk_cc_result *out) {
  pk_ctx *ctx = cc->ctx;
  pk_strbuf key;
  pk_strbuf_init(&key);
  pk_strbuf_printf(&key, "%s\n--pock-cc--\n%s\n%s\n%s\nc-codegen-v%d\n", source, cc->cc,
                   cc->version, cc->flags, PK_CGEN_C_VERSION);
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(key.data, key.len, hex);
  pk_strbuf_free(&key);

  memset(out, 0, sizeof *out);
  out->hash = pk_strdup(ctx, hex);
  const char *so = pk_sprintf(ctx, "%s/%s.so", cc->cache_dir, hex);
  out->so_path = so;
  if (access(so, R_OK) == 0) {
    out->cache_hit = true;
    return PK_OK;
  }

  /* Unique temporaries: several builders (tuner workers, tests) may share one cache. */
  const char *tag = pk_sprintf(ctx, "%s/%s.%d.%lld", cc->cache_dir, hex, (int)getpid(),
                               (long long)pkrt_now_ns());
  const char *src = pk_sprintf(ctx, "%s.c", tag);
  const char *tmp_so = pk_sprintf(ctx, "%s.so.tmp", tag);
  pk_status s = write_file(ctx, src, source);
  if (s != PK_OK) return s;

  char *argv[MAX_ARGS];
  int argc = 0;
  argv[argc++] = (char *)cc->cc;
  for (int i = 0; i < cc->nflags; i++) argv[argc++] = cc->flagv[i];
  argv[argc++] = "-shared";
  argv[argc++] = "-o";
  argv[argc++] = (char *)tmp_so;
  argv[argc++] = (char *)src;
  argv[argc++] = "-lm";
  argv[argc] = NULL;

  int64_t t0 = pkrt_now_ns();
  char *log;
  int rc = pk_run_capture(ctx, argv, &log);
  out->build_seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  if (rc != 0) {
    unlink(tmp_so);
    /* Keep the failing source where the message points, under a name the next build of
     * the same source overwrites (no pile of temporaries in the cache). */
    const char *kept = pk_sprintf(ctx, "%s/%s.c", cc->cache_dir, hex);
    if (rename(src, kept) != 0) unlink(src), kept = "(source removed)";
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "the C compiler '%s' failed on %s (exit %d):\n%s",
                       cc->cc, kept, rc, log_head(ctx, log));
  }
  /* Keep the source and how it was built beside the object, for debugging and records. */
  const char *final_src = pk_sprintf(ctx, "%s/%s.c", cc->cache_dir, hex);
  if (rename(src, final_src) != 0) unlink(src);
  const char *meta = pk_sprintf(ctx, "%s.txt", tag);
  if (write_file(ctx, meta,
                 pk_sprintf(ctx, "compiler: %s\nversion: %s\nflags: %s -shared -lm\ncodegen: c v%d\n"
                            "build_seconds: %.3f\n", cc->cc, cc->version, cc->flags,
                            PK_CGEN_C_VERSION, out->build_seconds)) == PK_OK)
    rename(meta, pk_sprintf(ctx, "%s/%s.txt", cc->cache_dir, hex));
  else
    pk_ctx_clear_error(ctx); /* the record is a convenience; the build itself succeeded */
  if (rename(tmp_so, so) != 0) {
    unlink(tmp_so);
    return pk_ctx_fail(ctx, PK_ERR_IO, "cannot move %s into the cache: %s", so, strerror(errno));
  }
  return PK_OK;
}
