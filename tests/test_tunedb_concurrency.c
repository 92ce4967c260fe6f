/* test_tunedb_concurrency.c — the tuning database across processes: two writers on one
 * new file lose nothing, and a writer killed with SIGKILL mid-run loses no record it had
 * committed (it reports each commit through a pipe right after COMMIT returns). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>

#include "tunedb_test_util.h"

enum { PER_WRITER = 300, KILL_AFTER = 150, KILL_LOOP_MAX = 100000 };

/* Record i of writer w: distinct ids across writers (the trial is in the trace). */
static pk_record writer_record(pk_ctx *ctx, int w, int64_t run, int i) {
  pk_task t = make_task(ctx, 1);
  pk_target_fp fp = make_fp(ctx, "c", "[]");
  pk_meas_status st = i % 7 == 3 ? PK_MEAS_CRASH : PK_MEAS_OK;
  return make_record(ctx, &t, &fp, run, (int64_t)w * KILL_LOOP_MAX + i, st, 1000 + i, PK_CAND_SCHEDULE, NULL);
}

/* What one tuner does: open (maybe creating the file), add its target and workload, start
 * a run, commit records one by one. After each commit it writes the count to report_fd
 * (if >= 0). Returns the process exit status. */
static int writer(const char *path, int w, int count, int report_fd) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  pk_task t = make_task(ctx, 1);
  pk_target_fp fp = make_fp(ctx, "c", "[]");
  int64_t run;
  pk_status s = pk_db_open(ctx, path, PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &fp);
  if (s == PK_OK) s = pk_db_workload_add(db, &t);
  if (s == PK_OK) s = pk_db_run_begin(db, "random", "{}", &run);
  for (int i = 0; s == PK_OK && i < count; i++) {
    pk_record r = writer_record(ctx, w, run, i);
    bool inserted;
    s = pk_db_record_commit(db, &r, &inserted);
    if (s == PK_OK && !inserted) s = pk_ctx_fail(ctx, PK_ERR_CHECK, "record %d was already there", i);
    int64_t done = i + 1;
    if (s == PK_OK && report_fd >= 0 && write(report_fd, &done, sizeof done) != sizeof done)
      s = pk_ctx_fail(ctx, PK_ERR_IO, "pipe: %s", strerror(errno));
  }
  if (s == PK_OK) s = pk_db_run_finish(db, run, PK_DB_RUN_FINISHED);
  if (s != PK_OK) fprintf(stderr, "writer %d: %s\n", w, pk_ctx_error(ctx));
  pk_db_close(db);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : 1;
}

static void test_two_writers(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  const char *path = db_path(ctx, dir, "two-writers.db"); /* not created yet: both race to */
  fflush(stdout);
  pid_t kids[2];
  for (int w = 0; w < 2; w++) {
    kids[w] = fork();
    if (kids[w] == 0) _exit(writer(path, w, PER_WRITER, -1));
    CHECK(kids[w] > 0, "fork: %s", strerror(errno));
  }
  for (int w = 0; w < 2; w++) {
    int status;
    CHECK(waitpid(kids[w], &status, 0) == kids[w], "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed (status %d)", w, status);
  }
  CHECK_OK(ctx, pk_db_open(ctx, path, PK_DB_OPEN_EXISTING, &db));
  int64_t n;
  CHECK_OK(ctx, pk_db_record_count(db, NULL, NULL, PK_DB_ANY_STATUS, &n));
  CHECK(n == 2 * PER_WRITER, "%lld records, expected %d", (long long)n, 2 * PER_WRITER);
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < PER_WRITER; i++) {
      pk_record r = writer_record(ctx, w, 0, i);
      bool has;
      CHECK_OK(ctx, pk_db_record_has(db, r.id, &has));
      CHECK(has, "writer %d record %d missing", w, i);
    }
  CHECK_OK(ctx, pk_db_check(db));
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

static void test_kill9(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  const char *path = db_path(ctx, dir, "killed.db");
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  fflush(stdout);
  pid_t kid = fork();
  CHECK(kid >= 0, "fork");
  if (kid == 0) {
    close(fds[0]);
    _exit(writer(path, 0, KILL_LOOP_MAX, fds[1]));
  }
  close(fds[1]);
  /* The last count read is the child's last finished COMMIT (or later, for counts still
   * in the pipe when it died: those commits had returned too). */
  int64_t committed = 0, v;
  while (committed < KILL_AFTER && read(fds[0], &v, sizeof v) == sizeof v) committed = v;
  kill(kid, SIGKILL);
  int status;
  waitpid(kid, &status, 0);
  while (read(fds[0], &v, sizeof v) == sizeof v) committed = v;
  close(fds[0]);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child was not killed (status %d)", status);
  CHECK(committed >= KILL_AFTER, "child reported only %lld commits", (long long)committed);

  CHECK_OK(ctx, pk_db_open(ctx, path, PK_DB_OPEN_EXISTING, &db));
  CHECK_OK(ctx, pk_db_check(db));
  for (int i = 0; i < committed; i++) {
    pk_record r = writer_record(ctx, 0, 0, i);
    bool has;
    CHECK_OK(ctx, pk_db_record_has(db, r.id, &has));
    CHECK(has, "committed record %d of %lld lost", i, (long long)committed);
  }
  int64_t n;
  CHECK_OK(ctx, pk_db_record_count(db, NULL, NULL, PK_DB_ANY_STATUS, &n));
  /* at most one commit can have finished after its count was written... never before */
  CHECK(n == committed || n == committed + 1, "%lld records for %lld reported", (long long)n,
        (long long)committed);
  printf("  (killed after %lld reported commits; %lld records on disk)\n", (long long)committed, (long long)n);
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

int main(void) {
  char *dir = scratch_dir();
  run_test("two_writers", test_two_writers, dir);
  run_test("kill9_keeps_committed", test_kill9, dir);
  remove_scratch(dir);
  printf("%s (%d failed)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
