/* test_db_foreign.c — `pock db` leaves another application's SQLite file exactly as it
 * was (finding 6: stats switched it to WAL before refusing it). Each verb that opens a
 * database — stats, best, history, merge (as the database and as the other), import — runs
 * on foreign files made here with the sqlite3 C API; each must fail, and the file must stay
 * byte-identical, in its journal mode, with no -wal or -shm beside it.
 * Usage: test_db_foreign POCK SOURCE_DIR. Prints PASS/FAIL. */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
static char dir[] = "/tmp/pk_db_foreign.XXXXXX";

#define FAIL(...) (printf("FAIL " __VA_ARGS__), putchar('\n'), failures++)

static char *path_in(const char *name) {
  char *p;
  if (asprintf(&p, "%s/%s", dir, name) < 0) exit(1);
  return p;
}

static void sql(const char *file, const char *text) {
  sqlite3 *db;
  if (sqlite3_open(file, &db) != SQLITE_OK || sqlite3_exec(db, text, NULL, NULL, NULL) != SQLITE_OK) {
    printf("FAIL sqlite3 on %s: %s\n", file, sqlite3_errmsg(db));
    exit(1);
  }
  sqlite3_close(db);
}

static char *slurp(const char *file, long *len) {
  FILE *f = fopen(file, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)*len + 1);
  if (fread(b, 1, (size_t)*len, f) != (size_t)*len) *len = -1;
  fclose(f);
  return b;
}

/* The journal mode as the file stores it, read without changing anything: byte 18 of the
 * header is 2 in WAL mode, 1 in rollback (legacy) mode. */
static int header_mode(const char *file) {
  long n;
  char *b = slurp(file, &n);
  int mode = b && n > 18 ? b[18] : -1;
  free(b);
  return mode;
}

static int exists(const char *file) {
  struct stat sb;
  return stat(file, &sb) == 0;
}

/* Runs POCK with args, output to the scratch directory; returns the exit status. */
static int run(char *const argv[]) {
  fflush(stdout); /* or the child would print what is buffered again */
  pid_t pid = fork();
  if (pid == 0) {
    char *log = path_in("out.log");
    FILE *f = freopen(log, "a", stdout);
    if (!f || !freopen(log, "a", stderr)) _exit(127);
    execv(argv[0], argv);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Each command on file must fail and leave it as it was. */
static void check_untouched(const char *what, const char *file, char *const argv[]) {
  long n0, n1;
  char *before = slurp(file, &n0);
  int mode0 = header_mode(file);
  int rc = run(argv);
  char *after = slurp(file, &n1);
  char *wal = NULL, *shm = NULL;
  if (asprintf(&wal, "%s-wal", file) < 0 || asprintf(&shm, "%s-shm", file) < 0) exit(1);
  if (rc == 0) FAIL("%s: exit status 0 on a foreign file", what);
  if (!before || !after || n0 != n1 || memcmp(before, after, (size_t)n0) != 0)
    FAIL("%s: %s changed (%ld -> %ld bytes)", what, file, n0, n1);
  if (header_mode(file) != mode0)
    FAIL("%s: journal mode changed (%d -> %d)", what, mode0, header_mode(file));
  if (exists(wal) || exists(shm)) FAIL("%s: %s has a -wal or -shm file beside it now", what, file);
  if (rc != 0 && before && after && n0 == n1 && !memcmp(before, after, (size_t)n0))
    printf("PASS %s\n", what);
  free(before);
  free(after);
  free(wal);
  free(shm);
}

int main(int argc, char **argv) {
  if (argc != 3) return fprintf(stderr, "usage: test_db_foreign POCK SOURCE_DIR\n"), 2;
  if (!mkdtemp(dir)) return 1;
  char *pock = argv[1];
  char *te = NULL;
  if (asprintf(&te, "%s/examples/te/matmul_512.te", argv[2]) < 0) return 1;
  /* Another application's database (its own application_id and schema version), and one
   * with tables but no version at all. Both in rollback-journal mode, SQLite's default. */
  char *app = path_in("other-app.db"), *plain = path_in("plain.db");
  sql(app, "CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) "
           "VALUES ('keep me'); PRAGMA application_id = 1234; PRAGMA user_version = 3;");
  sql(plain, "CREATE TABLE records(id TEXT); INSERT INTO records VALUES ('not ours');");
  char *ours = path_in("ours.db"), *empty = path_in("empty.jsonl");
  FILE *f = fopen(empty, "w");
  if (f) fclose(f);
  char *mk[] = {pock, "db", "import", ours, empty, NULL};
  if (run(mk) != 0) FAIL("pock db import into a new database");

  const char *files[] = {app, plain};
  for (int i = 0; i < 2; i++) {
    char *file = (char *)files[i];
    char *stats[] = {pock, "db", "stats", file, NULL};
    char *best[] = {pock, "db", "best", file, "--te", te, NULL};
    char *history[] = {pock, "db", "history", file, "--te", te, NULL};
    char *merge_into[] = {pock, "db", "merge", file, ours, NULL};
    char *merge_from[] = {pock, "db", "merge", ours, file, NULL};
    char *import[] = {pock, "db", "import", file, empty, NULL};
    char *exp[] = {pock, "db", "export", file, NULL};
    const char *base = strrchr(file, '/') + 1;
    char label[128];
#define CHECK_VERB(v, args) \
  (snprintf(label, sizeof label, "%s %s", v, base), check_untouched(label, file, args))
    CHECK_VERB("stats", stats);
    CHECK_VERB("best", best);
    CHECK_VERB("history", history);
    CHECK_VERB("merge into", merge_into);
    CHECK_VERB("merge from", merge_from);
    CHECK_VERB("import", import);
    CHECK_VERB("export", exp);
  }
  if (!failures) {
    char *cmd;
    if (asprintf(&cmd, "rm -rf '%s'", dir) >= 0 && system(cmd) != 0) failures++;
  } else {
    printf("(logs in %s/out.log)\n", dir);
  }
  printf(failures ? "FAIL test_db_foreign (%d)\n" : "PASS test_db_foreign\n", failures);
  return failures != 0;
}
