/* test_rt_file.c — libpockrt's file rules (runtime/rt_file.h), which every reader and writer
 * of `pock` and `pock-rt` goes through: inputs are regular files, opened without blocking;
 * outputs replace regular files (through symlinks) and refuse devices, FIFOs, directories,
 * dangling links and the command's own inputs (issue 14, findings 2 and 4b). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "rt_file.h"
#include "pk_test.h"

static bool has(const pkrt_ctx *rt, const char *s) { return strstr(pkrt_ctx_error(rt), s) != NULL; }

static bool is_kind(const char *path, mode_t kind) {
  struct stat st;
  return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

/* Writes text to path through the atomic writer. */
static pkrt_status wfile(pkrt_ctx *rt, const char *path, const char *text) {
  rt_wfile w;
  pkrt_status st = rt_wfile_open(rt, &w, path);
  if (st == PKRT_OK) st = rt_wfile_write(rt, &w, text, strlen(text));
  if (st == PKRT_OK) st = rt_wfile_commit(rt, &w);
  return st;
}

static bool content_is(const char *path, const char *text) {
  size_t n;
  unsigned char *b = pk_test_read_file(path, &n);
  bool ok = b && n == strlen(text) && !memcmp(b, text, n);
  free(b);
  return ok;
}

/* Files in dir whose name contains ".tmp." (a temp file left behind). */
static int temps_in(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q '\\.tmp\\.'", dir);
  return system(cmd) == 0;
}

/* A FIFO with no writer, a directory and a device are refused before any read; the
 * message names the path. Were the open blocking, SIGALRM would end the test. */
static void test_inputs(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  const char *fifo = pk_test_path("in.fifo"), *dir = pk_test_path("in.dir");
  CHECK(mkfifo(fifo, 0600) == 0 && mkdir(dir, 0700) == 0, "setup");
  void *b;
  size_t n;
  alarm(20);
  CHECK(rt_file_read(rt, fifo, 1 << 20, &b, &n) == PKRT_ERR_IO && has(rt, fifo) &&
        has(rt, "FIFO"), "fifo: %s", pkrt_ctx_error(rt));
  int fd;
  struct stat st;
  CHECK(rt_file_open_input(rt, fifo, &fd, &st) != PKRT_OK && fd == -1, "fifo open");
  alarm(0);
  CHECK(rt_file_read(rt, dir, 1 << 20, &b, &n) == PKRT_ERR_IO && has(rt, "directory"),
        "directory: %s", pkrt_ctx_error(rt));
  CHECK(rt_file_read(rt, "/dev/null", 1 << 20, &b, &n) == PKRT_ERR_IO &&
        has(rt, "/dev/null") && has(rt, "character device"), "device: %s", pkrt_ctx_error(rt));
  CHECK(rt_file_read(rt, pk_test_path("none"), 1 << 20, &b, &n) == PKRT_ERR_IO &&
        has(rt, "No such file"), "missing: %s", pkrt_ctx_error(rt));
  /* A regular file reads, and the descriptor it came from blocks again. */
  CHECK(pk_test_write_file(pk_test_path("in.txt"), "abc", 3) == 0, "write");
  CHECK(rt_file_read(rt, pk_test_path("in.txt"), 3, &b, &n) == PKRT_OK && n == 3 &&
        !memcmp(b, "abc", 4), "regular");
  free(b);
  CHECK(rt_file_open_input(rt, pk_test_path("in.txt"), &fd, &st) == PKRT_OK &&
        !(fcntl(fd, F_GETFL) & O_NONBLOCK) && st.st_size == 3, "blocking again");
  close(fd);
  CHECK(rt_file_read(rt, pk_test_path("in.txt"), 2, &b, &n) == PKRT_ERR_INPUT &&
        has(rt, "too large"), "cap kept");
  pkrt_ctx_free(rt);
  PASS();
}

/* New paths and regular files are written; a symlink's final file is replaced in its own
 * directory and the link kept; nothing else is replaced, and a refusal writes nothing. */
static void test_outputs(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  CHECK(wfile(rt, pk_test_path("new.out"), "1") == PKRT_OK && content_is(pk_test_path("new.out"), "1"),
        "new: %s", pkrt_ctx_error(rt));
  CHECK(wfile(rt, pk_test_path("new.out"), "2") == PKRT_OK && content_is(pk_test_path("new.out"), "2"),
        "replace");
  /* link -> sub/target: the target gets the bytes, the link stays a link. */
  const char *sub = pk_test_path("sub"), *link = pk_test_path("link.out");
  CHECK(mkdir(sub, 0700) == 0 && pk_test_write_file(pk_test_path("sub/target"), "old", 3) == 0 &&
        symlink("sub/target", link) == 0, "setup");
  CHECK(wfile(rt, link, "new") == PKRT_OK, "through a link: %s", pkrt_ctx_error(rt));
  CHECK(is_kind(link, S_IFLNK) && content_is(pk_test_path("sub/target"), "new"),
        "the link was replaced instead of followed");
  CHECK(!temps_in(sub) && !temps_in(pk_test_tmpdir()), "a temp file was left");
  /* Refused: each stays what it was, and no temp file is left. */
  const char *fifo = pk_test_path("out.fifo"), *dir = pk_test_path("out.dir"),
             *dang = pk_test_path("dangling.out");
  CHECK(mkfifo(fifo, 0600) == 0 && mkdir(dir, 0700) == 0 &&
        symlink(pk_test_path("nowhere"), dang) == 0, "setup");
  CHECK(wfile(rt, fifo, "x") == PKRT_ERR_IO && has(rt, fifo) && has(rt, "FIFO") &&
        is_kind(fifo, S_IFIFO), "fifo: %s", pkrt_ctx_error(rt));
  CHECK(wfile(rt, dir, "x") == PKRT_ERR_IO && has(rt, "directory") && is_kind(dir, S_IFDIR),
        "directory: %s", pkrt_ctx_error(rt));
  CHECK(wfile(rt, dang, "x") == PKRT_ERR_IO && has(rt, "dangling") && is_kind(dang, S_IFLNK) &&
        access(pk_test_path("nowhere"), F_OK) != 0, "dangling: %s", pkrt_ctx_error(rt));
  /* A device: /dev/null is only checked (never written, even by a broken build); a node of
   * our own, where root may make one, is written to through the real writer. */
  CHECK(rt_file_check_output(rt, "/dev/null", 0, NULL, 0) == PKRT_ERR_IO &&
        has(rt, "character device"), "/dev/null: %s", pkrt_ctx_error(rt));
  const char *dev = pk_test_path("null.dev");
  if (mknod(dev, S_IFCHR | 0600, makedev(1, 3)) == 0) {
    CHECK(wfile(rt, dev, "x") == PKRT_ERR_IO && has(rt, "character device") &&
          is_kind(dev, S_IFCHR), "device: %s", pkrt_ctx_error(rt));
  } else {
    printf("note: mknod: %s; the device case used /dev/null's check only\n", strerror(errno));
  }
  CHECK(!temps_in(pk_test_tmpdir()), "a refused write left a temp file");
  pkrt_ctx_free(rt);
  PASS();
}

/* An output that is an input (by name, through a link or a hard link) is refused. */
static void test_same_file(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  const char *in = pk_test_path("model.json"), *hard = pk_test_path("hard.json"),
             *soft = pk_test_path("soft.json");
  CHECK(pk_test_write_file(in, "{}", 2) == 0 && link(in, hard) == 0 && symlink(in, soft) == 0,
        "setup");
  const char *inputs[] = {NULL, pk_test_path("absent.csv"), in};
  const char *outputs[] = {in, hard, soft};
  for (int i = 0; i < 3; i++)
    CHECK(rt_file_check_output(rt, outputs[i], 0, inputs, 3) == PKRT_ERR_INPUT &&
              has(rt, "same file as the input") && has(rt, in),
          "%s: %s", outputs[i], pkrt_ctx_error(rt));
  CHECK(content_is(in, "{}"), "input changed");
  /* Two outputs that do not exist yet, named differently but the same path. */
  char twice[600];
  snprintf(twice, sizeof twice, "%s/../%s/new.ckpt", pk_test_tmpdir(), strrchr(pk_test_tmpdir(), '/') + 1);
  const char *outs[] = {twice};
  CHECK(rt_file_check_output(rt, pk_test_path("new.ckpt"), 0, outs, 1) == PKRT_ERR_INPUT &&
        has(rt, "named twice"), "a new path twice: %s", pkrt_ctx_error(rt));
  CHECK(rt_file_check_output(rt, pk_test_path("other.pock"), 0, inputs, 3) == PKRT_OK &&
        rt_file_check_output(rt, in, 0, NULL, 0) == PKRT_OK, "distinct files pass");
  pkrt_ctx_free(rt);
  PASS();
}

/* A stream output may be a FIFO (with a reader) or a character device; a FIFO nobody reads
 * is refused at once, and a write error shows on flush. */
static void test_stream(void) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  const char *fifo = pk_test_path("metrics.fifo");
  CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
  FILE *f;
  alarm(20);
  CHECK(rt_file_open_stream(rt, fifo, false, NULL, 0, &f) == PKRT_ERR_IO && has(rt, "no reader"),
        "fifo without reader: %s", pkrt_ctx_error(rt));
  int rfd = open(fifo, O_RDONLY | O_NONBLOCK);
  CHECK(rfd >= 0 && rt_file_open_stream(rt, fifo, false, NULL, 0, &f) == PKRT_OK,
        "fifo with a reader: %s", pkrt_ctx_error(rt));
  alarm(0);
  fputs("{}\n", f);
  CHECK(fflush(f) == 0, "flush");
  char buf[8] = {0};
  CHECK(read(rfd, buf, sizeof buf) == 3 && !strcmp(buf, "{}\n"), "read back");
  fclose(f);
  close(rfd);
  CHECK(rt_file_open_stream(rt, "/dev/full", true, NULL, 0, &f) == PKRT_OK, "/dev/full");
  fputs("{}\n", f);
  CHECK(fflush(f) != 0 && errno == ENOSPC, "full disk not reported");
  fclose(f);
  const char *in = pk_test_path("data.csv"), *inputs[] = {in};
  CHECK(pk_test_write_file(in, "1,0\n", 4) == 0, "write");
  CHECK(rt_file_open_stream(rt, in, false, inputs, 1, &f) == PKRT_ERR_INPUT &&
        content_is(in, "1,0\n"), "an input as the stream: %s", pkrt_ctx_error(rt));
  CHECK(rt_file_open_stream(rt, pk_test_path("dir.x"), false, NULL, 0, &f) == PKRT_OK, "new");
  fclose(f);
  pkrt_ctx_free(rt);
  PASS();
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  if (pk_test_tmpdir_make("pock-test-rtfile-") != 0) return 1;
  test_inputs();
  test_outputs();
  test_same_file();
  test_stream();
  if (failures == 0) pk_test_tmpdir_remove();
  return pk_test_summary("test_rt_file");
}
