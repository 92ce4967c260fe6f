/* pk_test.h — scaffolding shared by the C test programs in tests/: the failure counter,
 * CHECK/PASS and check() reporting, a scratch directory under /tmp with paths inside it,
 * reading and writing whole files, and the closing summary line. Header-only: each test is
 * its own executable, so the static state here is per test. Include it after the system
 * headers (and after `#define _GNU_SOURCE` where a test needs it).
 *
 * CHECK returns from a void test function on failure. Defined before including this:
 * PK_TEST_CHECK_GOTO_DONE makes CHECK name the run in `what` and jump to `done:` instead;
 * PK_TEST_OWN_CHECK leaves CHECK to the test (PK_TEST_FAIL prints the usual FAIL line). */
#ifndef PK_TEST_H
#define PK_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

/* Prints "FAIL <who>: <message> (line N)" and counts the failure. */
#define PK_TEST_FAIL(who, ...)          \
  do {                                  \
    printf("FAIL %s: ", (who));         \
    printf(__VA_ARGS__);                \
    printf(" (line %d)\n", __LINE__);   \
    failures++;                         \
  } while (0)

#if defined(PK_TEST_CHECK_GOTO_DONE)
/* In a run named by `const char *what`: on failure print, count and go to its `done:`. */
#define CHECK(cond, ...)                  \
  do {                                    \
    if (!(cond)) {                        \
      PK_TEST_FAIL(what, __VA_ARGS__);    \
      goto done;                          \
    }                                     \
  } while (0)
#elif !defined(PK_TEST_OWN_CHECK)
/* In a void test function: on failure print the FAIL line, count it and return. */
#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      PK_TEST_FAIL(__func__, __VA_ARGS__);    \
      return;                                 \
    }                                         \
  } while (0)
#endif
#define PASS() printf("PASS %s\n", __func__)

/* Prints "PASS name", or "FAIL name: <message>" and counts the failure. */
static inline void check(bool ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void check(bool ok, const char *name, const char *fmt, ...) {
  if (ok) {
    printf("PASS %s\n", name);
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL %s: ", name);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  failures++;
}

/* ---------------------------------------------------------------- scratch directory */
static char pk_test_dir_[256];

/* Makes /tmp/<prefix>XXXXXX; 0, or -1 after printing why. */
static inline int pk_test_tmpdir_make(const char *prefix) {
  snprintf(pk_test_dir_, sizeof pk_test_dir_, "/tmp/%sXXXXXX", prefix);
  if (!mkdtemp(pk_test_dir_)) {
    perror("mkdtemp");
    pk_test_dir_[0] = '\0';
    return -1;
  }
  return 0;
}

/* The scratch directory ("" before pk_test_tmpdir_make). */
static inline const char *pk_test_tmpdir(void) { return pk_test_dir_; }

/* "<dir>/<name>" in a ring of 64 buffers: enough for every path a test holds at once. */
static inline const char *pk_test_path(const char *name) {
  static char buf[64][512];
  static int k;
  k = (k + 1) % 64;
  snprintf(buf[k], sizeof buf[k], "%s/%s", pk_test_dir_, name);
  return buf[k];
}

/* rm -rf the scratch directory; a note (not a failure) if that fails. */
static inline void pk_test_tmpdir_remove(void) {
  if (!pk_test_dir_[0]) return;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", pk_test_dir_);
  if (system(cmd) != 0) printf("note: could not remove %s\n", pk_test_dir_);
}

/* The whole file in a malloc'd buffer with a '\0' after it, its size in *n; NULL (and
 * *n = 0) if it cannot be opened. */
static inline unsigned char *pk_test_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  *n = 0;
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len + 1);
  if (b) {
    *n = fread(b, 1, (size_t)len, f);
    b[*n] = 0;
  }
  fclose(f);
  return b;
}

/* Writes n bytes to path; 0, or -1 if it cannot be opened, written or closed. */
static inline int pk_test_write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* ---------------------------------------------------------------- summary */
/* Prints "<test_name>: N FAILED" or "<test_name>: all passed"; the exit code (0 or 1). */
static inline int pk_test_summary(const char *test_name) {
  if (failures) printf("%s: %d FAILED\n", test_name, failures);
  else printf("%s: all passed\n", test_name);
  return failures ? 1 : 0;
}

#endif
