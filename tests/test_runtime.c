/* test_runtime.c — libpockrt: arenas, names, SHA-256, the thread pool, the kernel-object
 * loader (file and memfd) and extern calls. Prints PASS/FAIL/SKIP per test. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pkrt.h"

#if defined(__SANITIZE_ADDRESS__)
#define PK_TEST_ASAN 1
#include <sanitizer/asan_interface.h>
#else
#define PK_TEST_ASAN 0
#endif

#ifndef PK_FIXTURE_SO
#error "build with -DPK_FIXTURE_SO=\"path/to/kernel_fixture.so\""
#endif

static int failures;
static int test_failed; /* 1: the current test printed FAIL; -1: it printed SKIP */

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      printf("FAIL %s: ", test_name);                      \
      printf(__VA_ARGS__);                                 \
      printf(" (line %d)\n", __LINE__);                    \
      test_failed = 1;                                     \
      return;                                              \
    }                                                      \
  } while (0)

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

typedef void (*test_fn)(const char *test_name);

static void run(const char *name, test_fn fn) {
  test_failed = 0;
  fn(name);
  if (test_failed > 0) failures++;
  else if (test_failed == 0) printf("PASS %s\n", name);
}

/* ---------------------------------------------------------------- arena, names, hash */

static void test_arena(const char *test_name) {
  pkrt_arena *a = pkrt_arena_new(1024);
  CHECK(a, "pkrt_arena_new failed");
  for (int i = 0; i < 2000; i++) {
    size_t align = (size_t)1 << (i % 13); /* up to 4096, above max_align_t */
    size_t n = (size_t)(i * 37) % 700;
    unsigned char *p = pkrt_arena_alloc(a, n, i % 7 == 0 ? 0 : align);
    CHECK(p, "alloc %zu bytes align %zu returned NULL", n, align);
    size_t want = i % 7 == 0 ? 16 : align;
    CHECK(((uintptr_t)p & (want - 1)) == 0, "pointer %p not %zu-aligned", (void *)p, want);
    for (size_t j = 0; j < n; j++) CHECK(p[j] == 0, "byte %zu of alloc %d not zero", j, i);
    memset(p, 0xAB, n); /* dirty it, so a later overlapping alloc would show */
  }
  pkrt_arena_free(a);

  /* A big request gets its own block and leaves the current block in use. */
  a = pkrt_arena_new(4096);
  char *small1 = pkrt_arena_alloc(a, 100, 1);
  unsigned char *big = pkrt_arena_alloc(a, 1 << 20, 64);
  char *small2 = pkrt_arena_alloc(a, 100, 1);
  CHECK(small1 && big && small2, "allocs failed");
  CHECK(((uintptr_t)big & 63) == 0, "big block not 64-aligned");
  for (size_t j = 0; j < (1u << 20); j++) CHECK(big[j] == 0, "big block byte %zu not zero", j);
  /* (the sanitizer build leaves a redzone of up to 64 bytes after each allocation) */
  CHECK(small2 >= small1 + 100 && small2 <= small1 + 164,
        "small alloc after a big one did not reuse the block");
#if PK_TEST_ASAN
  /* Under ASan the bytes between arena allocations are poisoned: an overrun of one arena
   * object into the next is reported like a heap overrun. */
  CHECK(__asan_address_is_poisoned(small1 + 100), "no redzone after an arena allocation");
  CHECK(!__asan_address_is_poisoned(small1 + 99), "last byte of an allocation poisoned");
  CHECK(__asan_address_is_poisoned(big + (1 << 20)), "no redzone after a big allocation");
#endif
  CHECK(pkrt_arena_used(a) >= 200 + (1u << 20), "used %zu too small", pkrt_arena_used(a));
  big[(1 << 20) - 1] = 1; /* ASan catches a short block */

  char *s = pkrt_arena_strdup(a, "kernel");
  CHECK(s && strcmp(s, "kernel") == 0, "strdup");
  CHECK(pkrt_arena_alloc(a, 8, 3) == NULL, "non-power-of-two alignment accepted");
  CHECK(pkrt_arena_alloc(a, SIZE_MAX, 0) == NULL, "SIZE_MAX request did not fail");
  CHECK(pkrt_arena_alloc(a, SIZE_MAX - 8, 16) == NULL, "overflowing request did not fail");
  CHECK(pkrt_arena_alloc(a, 0, 0) != pkrt_arena_alloc(a, 0, 0), "empty allocs share a pointer");
  pkrt_arena_free(a);

  a = pkrt_arena_new(0); /* default block size */
  CHECK(pkrt_arena_used(a) == 0, "fresh arena not empty");
  for (int i = 0; i < 10000; i++) CHECK(pkrt_arena_alloc(a, 24, 8), "alloc %d", i);
  pkrt_arena_free(a);
  pkrt_arena_free(NULL);
}

static void test_names(const char *test_name) {
  CHECK(strcmp(pkrt_status_name(PKRT_OK), "ok") == 0, "ok");
  const pkrt_status all[] = {PKRT_OK,     PKRT_ERR_INPUT,  PKRT_ERR_IO,    PKRT_ERR_NOMEM,
                             PKRT_ERR_LOAD, PKRT_ERR_KERNEL, PKRT_ERR_EXTERN, PKRT_ERR_GPU};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    for (size_t j = 0; j < i; j++)
      CHECK(strcmp(pkrt_status_name(all[i]), pkrt_status_name(all[j])) != 0,
            "status %zu and %zu share a name", i, j);
  CHECK(strcmp(pkrt_status_name((pkrt_status)99), "unknown") == 0, "out-of-range status");

  const struct {
    const char *name;
    pkrt_dtype t;
    size_t size;
  } dt[] = {{"f32", PKRT_DTYPE_F32, 4}, {"f64", PKRT_DTYPE_F64, 8},   {"i32", PKRT_DTYPE_I32, 4},
            {"i64", PKRT_DTYPE_I64, 8}, {"f16", PKRT_DTYPE_F16, 2},   {"bf16", PKRT_DTYPE_BF16, 2},
            {"bool", PKRT_DTYPE_BOOL, 0}};
  for (size_t i = 0; i < sizeof dt / sizeof dt[0]; i++) {
    CHECK(pkrt_dtype_from_name(dt[i].name) == dt[i].t, "from_name(%s)", dt[i].name);
    CHECK(strcmp(pkrt_dtype_name(dt[i].t), dt[i].name) == 0, "name of %s", dt[i].name);
    CHECK(pkrt_dtype_size(dt[i].t) == dt[i].size, "size of %s", dt[i].name);
  }
  CHECK(pkrt_dtype_from_name("float") == PKRT_DTYPE_INVALID, "unknown name");
  CHECK(pkrt_dtype_from_name("invalid") == PKRT_DTYPE_INVALID, "\"invalid\"");
  CHECK(pkrt_dtype_from_name(NULL) == PKRT_DTYPE_INVALID, "NULL name");
  CHECK(strcmp(pkrt_dtype_name((pkrt_dtype)42), "invalid") == 0, "out-of-range dtype");
  CHECK(pkrt_dtype_size(PKRT_DTYPE_INVALID) == 0 && pkrt_dtype_size((pkrt_dtype)-1) == 0,
        "invalid size");
}

static void test_sha256(const char *test_name) {
  char hex[65];
  pkrt_sha256_hex("abc", 3, hex);
  CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
        "sha256(abc) = %s", hex);
  pkrt_sha256_hex("", 0, hex);
  CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
        "sha256('') = %s", hex);
  uint8_t d[PKRT_SHA256_BYTES];
  pkrt_sha256("abc", 3, d);
  CHECK(d[0] == 0xba && d[31] == 0xad, "binary digest");
}

static void test_ctx_error(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  CHECK(rt, "ctx_new");
  CHECK(strcmp(pkrt_ctx_error(rt), "") == 0, "fresh ctx has an error");
  CHECK(pkrt_ctx_fail(rt, PKRT_ERR_IO, "cannot read %s", "x.pock") == PKRT_ERR_IO, "status");
  CHECK(strcmp(pkrt_ctx_error(rt), "cannot read x.pock") == 0, "message");
  char longmsg[2000];
  memset(longmsg, 'x', sizeof longmsg - 1);
  longmsg[sizeof longmsg - 1] = 0;
  pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s", longmsg); /* truncated, not overflowed */
  CHECK(strlen(pkrt_ctx_error(rt)) > 100, "long message lost");
  CHECK(pkrt_ctx_fail(NULL, PKRT_ERR_NOMEM, "no ctx") == PKRT_ERR_NOMEM, "NULL ctx");
  int64_t t0 = pkrt_now_ns(), t1 = pkrt_now_ns();
  CHECK(t0 > 0 && t1 >= t0, "clock");
  pkrt_ctx_free(rt);
}

/* ---------------------------------------------------------------- thread pool */

static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The thread count once it reaches want, or after 1 s what it is then. A joined thread may
 * still be listed for a moment (under qemu-user its host thread outlives the join), so
 * counts are compared once settled. */
static int threads_settle(int want) {
  int n = count_threads();
  for (int i = 0; i < 200 && n != want; i++) {
    nanosleep(&(struct timespec){0, 5000000}, NULL);
    n = count_threads();
  }
  return n;
}

/* The count at rest: the same in two reads 20 ms apart (at most 1 s). */
static int threads_at_rest(void) {
  int n = count_threads();
  for (int i = 0; i < 50; i++) {
    nanosleep(&(struct timespec){0, 20000000}, NULL);
    int m = count_threads();
    if (m == n) break;
    n = m;
  }
  return n;
}

typedef struct {
  atomic_int *hits;
  int64_t n;
  int64_t fail_at; /* index whose chunk returns fail_code, or -1 */
  int fail_code;
  pthread_t caller;
  atomic_int off_caller; /* chunks run on a thread other than the caller */
  atomic_int bad_range;
} cover;

static int cover_body(int64_t begin, int64_t end, void *closure) {
  cover *c = closure;
  if (begin < 0 || end > c->n || begin >= end) atomic_fetch_add(&c->bad_range, 1);
  if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->off_caller, 1);
  int rc = 0;
  for (int64_t i = begin; i < end; i++) {
    atomic_fetch_add(&c->hits[i], 1);
    if (i == c->fail_at) rc = c->fail_code;
  }
  return rc;
}

static void test_pool_cover(const char *test_name) {
  /* Sanitizer runtimes start a helper thread at the first pthread_create: start one
   * before counting, so the counts below see only the pool's own threads. */
  pkrt_ctx_free(pkrt_ctx_new(2));
  const int threads[] = {1, 2, 4};
  const int64_t sizes[] = {0, 1, 7, 1000};
  for (int t = 0; t < 3; t++) {
    int before = threads_at_rest();
    pkrt_ctx *rt = pkrt_ctx_new(threads[t]);
    CHECK(rt, "ctx_new(%d)", threads[t]);
    CHECK(pkrt_ctx_threads(rt) == threads[t], "ctx_threads = %d, want %d",
          pkrt_ctx_threads(rt), threads[t]);
    if (before > 0)
      CHECK(threads_settle(before + threads[t] - 1) == before + threads[t] - 1,
            "%d threads started for nthreads=%d",
            count_threads() - before, threads[t]);
    pkrt_exec_ctx *x = pkrt_ctx_exec(rt);
    CHECK(x && x->parallel_for && x->stream == NULL, "exec ctx");
    CHECK((x->pool == NULL) == (threads[t] == 1), "exec ctx pool");
    for (int s = 0; s < 4; s++) {
      int64_t n = sizes[s];
      atomic_int hits[1000];
      for (int i = 0; i < 1000; i++) atomic_init(&hits[i], 0);
      cover c = {.hits = hits, .n = n, .fail_at = -1, .caller = pthread_self()};
      for (int rep = 0; rep < 3; rep++) {
        CHECK(x->parallel_for(x, n, cover_body, &c) == 0, "parallel_for(%lld) failed",
              (long long)n);
      }
      CHECK(atomic_load(&c.bad_range) == 0, "a chunk got an empty or out-of-range span");
      for (int64_t i = 0; i < n; i++)
        CHECK(atomic_load(&hits[i]) == 3, "threads=%d n=%lld: index %lld ran %d times in 3 calls",
              threads[t], (long long)n, (long long)i, atomic_load(&hits[i]));
      if (threads[t] == 1)
        CHECK(atomic_load(&c.off_caller) == 0, "nthreads=1 ran a chunk off the caller thread");
    }
    pkrt_ctx_free(rt);
    if (before > 0) CHECK(threads_settle(before) == before, "threads left after ctx_free");
  }
}

static void test_pool_error(const char *test_name) {
  for (int t = 1; t <= 4; t *= 2) {
    pkrt_ctx *rt = pkrt_ctx_new(t);
    pkrt_exec_ctx *x = pkrt_ctx_exec(rt);
    atomic_int hits[1000];
    for (int i = 0; i < 1000; i++) atomic_init(&hits[i], 0);
    cover c = {.hits = hits, .n = 1000, .fail_at = 613, .fail_code = 7, .caller = pthread_self()};
    int rc = x->parallel_for(x, 1000, cover_body, &c);
    CHECK(rc == 7, "threads=%d: status %d, want the failing chunk's 7", t, rc);
    c.fail_at = -1; /* the pool is usable after a failed job */
    CHECK(x->parallel_for(x, 1000, cover_body, &c) == 0, "threads=%d: after failure", t);
    pkrt_ctx_free(rt);
  }
}

/* Waits (bounded) until two threads are inside the body at once: the pool really runs
 * chunks in parallel rather than one after the other. */
typedef struct {
  atomic_int inside;
} meet;

static int meet_body(int64_t begin, int64_t end, void *closure) {
  meet *m = closure;
  (void)begin, (void)end;
  atomic_fetch_add(&m->inside, 1);
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 5000 && atomic_load(&m->inside) < 2; i++) nanosleep(&ms, NULL);
  return atomic_load(&m->inside) >= 2 ? 0 : 1;
}

static void test_pool_parallel(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(4);
  pkrt_exec_ctx *x = pkrt_ctx_exec(rt);
  meet m;
  atomic_init(&m.inside, 0);
  int rc = x->parallel_for(x, 4, meet_body, &m);
  pkrt_ctx_free(rt);
  CHECK(rc == 0, "no two chunks ran at the same time within 5 s");
}

typedef struct {
  pkrt_exec_ctx *x;
  atomic_int hits[64 * 8];
  atomic_int not_inline;
} nest;

typedef struct {
  nest *outer;
  int64_t row;
  pthread_t thread;
} nest_row;

static int nest_inner(int64_t begin, int64_t end, void *closure) {
  nest_row *r = closure;
  if (!pthread_equal(pthread_self(), r->thread)) atomic_fetch_add(&r->outer->not_inline, 1);
  for (int64_t j = begin; j < end; j++) atomic_fetch_add(&r->outer->hits[r->row * 8 + j], 1);
  return 0;
}

static int nest_outer(int64_t begin, int64_t end, void *closure) {
  nest *o = closure;
  for (int64_t i = begin; i < end; i++) {
    nest_row r = {o, i, pthread_self()};
    int rc = o->x->parallel_for(o->x, 8, nest_inner, &r);
    if (rc) return rc;
  }
  return 0;
}

static void test_pool_nested(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(4);
  nest *o = calloc(1, sizeof *o);
  o->x = pkrt_ctx_exec(rt);
  int rc = o->x->parallel_for(o->x, 64, nest_outer, o);
  int not_inline = atomic_load(&o->not_inline), bad = -1;
  for (int i = 0; i < 64 * 8; i++)
    if (atomic_load(&o->hits[i]) != 1) bad = i;
  free(o);
  pkrt_ctx_free(rt);
  CHECK(rc == 0, "nested parallel_for failed");
  CHECK(not_inline == 0, "%d nested chunks ran on another thread", not_inline);
  CHECK(bad < 0, "nested index %d not covered exactly once", bad);
}

/* Two threads share one context: one gets the pool, the other runs inline; both right. */
typedef struct {
  pkrt_exec_ctx *x;
  int rc;
  int bad;
} sharer;

static void *share_thread(void *arg) {
  sharer *s = arg;
  for (int rep = 0; rep < 200 && !s->rc && !s->bad; rep++) {
    atomic_int hits[257];
    for (int i = 0; i < 257; i++) atomic_init(&hits[i], 0);
    cover c = {.hits = hits, .n = 257, .fail_at = -1, .caller = pthread_self()};
    s->rc = s->x->parallel_for(s->x, 257, cover_body, &c);
    for (int i = 0; i < 257; i++)
      if (atomic_load(&hits[i]) != 1) s->bad = 1;
  }
  return NULL;
}

static void test_pool_shared(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(3);
  sharer s[2] = {{pkrt_ctx_exec(rt), 0, 0}, {pkrt_ctx_exec(rt), 0, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, share_thread, &s[i]);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  pkrt_ctx_free(rt);
  for (int i = 0; i < 2; i++) CHECK(!s[i].rc && !s[i].bad, "sharer %d: rc %d bad %d", i, s[i].rc, s[i].bad);
}

static void test_pool_cycles(const char *test_name) {
  int before = threads_at_rest();
  for (int i = 0; i < 300; i++) {
    pkrt_ctx *rt = pkrt_ctx_new(1 + i % 5);
    CHECK(rt, "ctx_new in cycle %d", i);
    if (i % 2) { /* half of them free a pool that never ran a job */
      atomic_int hits[16];
      for (int j = 0; j < 16; j++) atomic_init(&hits[j], 0);
      cover c = {.hits = hits, .n = 16, .fail_at = -1, .caller = pthread_self()};
      pkrt_exec_ctx *x = pkrt_ctx_exec(rt);
      CHECK(x->parallel_for(x, 16, cover_body, &c) == 0, "cycle %d", i);
    }
    pkrt_ctx_free(rt);
  }
  if (before > 0) CHECK(threads_settle(before) == before, "threads leaked: %d", count_threads() - before);
  pkrt_ctx_free(NULL);
}

/* ---------------------------------------------------------------- loader */

static void run_fixture(const char *test_name, const pkrt_module *m, pkrt_ctx *rt) {
  const pkrt_module_desc *d = pkrt_module_desc_of(m);
  CHECK(d && d->abi_version == PKRT_ABI_VERSION && d->nkernels == 2, "descriptor table");
  const pkrt_kernel_desc *add = pkrt_module_find(m, "add");
  const pkrt_kernel_desc *scale = pkrt_module_find(m, "scale_parallel");
  CHECK(add && scale, "kernels not found");
  CHECK(pkrt_module_find(m, "k0") == NULL && pkrt_module_find(m, NULL) == NULL, "find miss");
  CHECK(add->nbufs == 3 && scale->nbufs == 2 && scale->nscalars == 1, "kernel arity");

  /* C = A + B with A contiguous, B a transposed view at an offset, C at an offset. */
  float a[6] = {1, 2, 3, 4, 5, 6};
  float bstore[1 + 6] = {-1, 10, 40, 20, 50, 30, 60}; /* B^T rows (10,20,30),(40,50,60) */
  float cstore[2 + 6] = {0};
  int64_t shape[2] = {2, 3}, contig[2] = {3, 1}, trans[2] = {1, 2};
  pkrt_buffer bufs[3] = {{a, 0, shape, contig, 2, PKRT_DTYPE_F32},
                         {bstore, 1, shape, trans, 2, PKRT_DTYPE_F32},
                         {cstore, 2, shape, contig, 2, PKRT_DTYPE_F32}};
  int rc = add->fn(bufs, 3, NULL, 0, NULL, pkrt_ctx_exec(rt));
  CHECK(rc == PKRT_KERNEL_OK, "add returned %d", rc);
  const float want[6] = {11, 22, 33, 44, 55, 66};
  for (int i = 0; i < 6; i++) CHECK(cstore[2 + i] == want[i], "C[%d] = %g, want %g", i, cstore[2 + i], want[i]);
  CHECK(cstore[0] == 0 && cstore[1] == 0, "add wrote before the offset");

  int64_t other[2] = {3, 2};
  bufs[1].shape = other;
  CHECK(add->fn(bufs, 3, NULL, 0, NULL, pkrt_ctx_exec(rt)) == PKRT_KERNEL_BAD_ARGS, "shape mismatch");
  bufs[1].shape = shape;
  bufs[0].dtype = PKRT_DTYPE_F64;
  CHECK(add->fn(bufs, 3, NULL, 0, NULL, pkrt_ctx_exec(rt)) == PKRT_KERNEL_BAD_ARGS, "dtype mismatch");
  CHECK(add->fn(bufs, 2, NULL, 0, NULL, pkrt_ctx_exec(rt)) == PKRT_KERNEL_BAD_ARGS, "buffer count");

  enum { N = 1000 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i, y[i] = -1;
  int64_t n = N, one = 1, factor = 3;
  pkrt_buffer sb[2] = {{x, 0, &n, &one, 1, PKRT_DTYPE_F32}, {y, 0, &n, &one, 1, PKRT_DTYPE_F32}};
  rc = scale->fn(sb, 2, &factor, 1, NULL, pkrt_ctx_exec(rt));
  CHECK(rc == PKRT_KERNEL_OK, "scale_parallel returned %d", rc);
  for (int i = 0; i < N; i++) CHECK(y[i] == 3.0f * (float)i, "y[%d] = %g", i, y[i]);
}

static void test_load_file(const char *test_name) {
  for (int t = 1; t <= 4; t *= 4) {
    pkrt_ctx *rt = pkrt_ctx_new(t);
    pkrt_module *m = NULL;
    pkrt_status st = pkrt_module_load_file(rt, PK_FIXTURE_SO, &m);
    CHECK(st == PKRT_OK, "load %s: %s", PK_FIXTURE_SO, pkrt_ctx_error(rt));
    run_fixture(test_name, m, rt);
    pkrt_module_free(m);
    pkrt_ctx_free(rt);
    if (test_failed) return;
  }
}

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = n > 0 ? malloc((size_t)n) : NULL;
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return p;
}

/* Seals on the loader's memfd, found among our descriptors by its name; -1 if none. */
static int memfd_seals(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int seals = -1;
  for (struct dirent *e; (e = readdir(d));) {
    char link[300], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    if (contains(target, "memfd:pock-kernels")) seals = fcntl(atoi(e->d_name), F_GET_SEALS);
  }
  closedir(d);
  return seals;
}

static void test_load_memory(const char *test_name) {
  size_t len;
  unsigned char *bytes = read_file(PK_FIXTURE_SO, &len);
  CHECK(bytes, "cannot read %s", PK_FIXTURE_SO);
  pkrt_ctx *rt = pkrt_ctx_new(4);
  pkrt_module *m1 = NULL, *m2 = NULL;
  pkrt_status st = pkrt_module_load_memory(rt, bytes, len, &m1);
  /* Two live copies are two objects; a reload after free is a fresh object. */
  if (st == PKRT_OK) st = pkrt_module_load_memory(rt, bytes, len, &m2);
  free(bytes);
  if (st != PKRT_OK) {
    printf("FAIL %s: load_memory: %s\n", test_name, pkrt_ctx_error(rt));
    test_failed = 1;
    pkrt_module_free(m1);
    pkrt_ctx_free(rt);
    return;
  }
  int seals = memfd_seals();
  run_fixture(test_name, m1, rt);
  if (!test_failed) run_fixture(test_name, m2, rt);
  int distinct = pkrt_module_find(m1, "add") != pkrt_module_find(m2, "add");
  pkrt_module_free(m1);
  pkrt_module_free(m2);
  pkrt_ctx_free(rt);
  if (test_failed) return;
  CHECK(distinct, "second memory load returned the first module");
  const int want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
  CHECK(seals >= 0 && (seals & want) == want, "memfd seals %#x, want %#x", seals, want);
}

/* A kernel object cut short (finding 3 of the reliability issue: an artifact whose kernels
 * section is a valid ELF prefix, checksums recomputed, died with SIGBUS inside dlopen): every
 * prefix is refused with a message, none is mapped. */
static void test_load_truncated(const char *test_name) {
  size_t len;
  unsigned char *bytes = read_file(PK_FIXTURE_SO, &len);
  CHECK(bytes, "cannot read %s", PK_FIXTURE_SO);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  int refused = 0, tried = 0;
  for (int k = 1; k <= 33; k++) {
    size_t cut = k == 33 ? len - 1 : len * (size_t)k / 33;
    unsigned char *prefix = malloc(cut);
    memcpy(prefix, bytes, cut);
    pkrt_module *m = NULL;
    pkrt_status st = pkrt_module_load_memory(rt, prefix, cut, &m);
    free(prefix);
    tried++;
    if (st == PKRT_ERR_LOAD && m == NULL && contains(pkrt_ctx_error(rt), "memory")) refused++;
    else printf("  cut at %zu of %zu: status %d (%s)\n", cut, len, (int)st, pkrt_ctx_error(rt));
    pkrt_module_free(m);
  }
  free(bytes);
  pkrt_ctx_free(rt);
  CHECK(refused == tried, "%d of %d truncated objects refused", refused, tried);
}

/* A path to libm, found through the loader so the test does not hard-code a distro
 * layout. Copied out: dlclose may unload libm and free the link map's name. */
static const char *libm_path(char *buf, size_t size) {
  void *h = dlopen("libm.so.6", RTLD_NOW);
  struct link_map *lm = NULL;
  const char *path = NULL;
  if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0] == '/' &&
      (size_t)snprintf(buf, size, "%s", lm->l_name) < size)
    path = buf;
  if (h) dlclose(h);
  return path;
}

static void test_load_errors(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_module *m = (pkrt_module *)&m; /* must come back NULL */
  const char *missing = "/nonexistent/dir/kernels.so";
  CHECK(pkrt_module_load_file(rt, missing, &m) == PKRT_ERR_LOAD, "missing file");
  CHECK(m == NULL, "out not cleared on failure");
  CHECK(contains(pkrt_ctx_error(rt), missing), "message lacks the path: %s", pkrt_ctx_error(rt));
  CHECK(contains(pkrt_ctx_error(rt), "No such file"), "message lacks dlerror: %s", pkrt_ctx_error(rt));

  char garbage[] = "/tmp/pock-test-garbage-XXXXXX";
  int fd = mkstemp(garbage);
  CHECK(fd >= 0, "mkstemp");
  const char junk[] = "this is not an ELF object, just text in a file\n";
  int wrote = write(fd, junk, sizeof junk) == (ssize_t)sizeof junk;
  close(fd);
  pkrt_status st = pkrt_module_load_file(rt, garbage, &m);
  unlink(garbage);
  CHECK(wrote, "write garbage");
  CHECK(st == PKRT_ERR_LOAD, "garbage file loaded");
  CHECK(contains(pkrt_ctx_error(rt), garbage), "message lacks the path: %s", pkrt_ctx_error(rt));

  CHECK(pkrt_module_load_memory(rt, junk, sizeof junk, &m) == PKRT_ERR_LOAD, "garbage bytes");
  CHECK(contains(pkrt_ctx_error(rt), "memory"), "memory message: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_module_load_memory(rt, NULL, 0, &m) == PKRT_ERR_INPUT, "no bytes");
  CHECK(pkrt_module_load_file(rt, "", &m) == PKRT_ERR_INPUT, "empty path");
  CHECK(pkrt_module_load_file(rt, NULL, &m) == PKRT_ERR_INPUT, "NULL path");
  CHECK(pkrt_module_load_file(rt, PK_FIXTURE_SO, NULL) == PKRT_ERR_INPUT, "NULL out");
  /* A bare name is a file in the working directory, never a library-path search. */
  CHECK(pkrt_module_load_file(rt, "libm.so.6", &m) == PKRT_ERR_LOAD, "bare name searched");

  char libm_buf[4096];
  const char *libm = libm_path(libm_buf, sizeof libm_buf);
  CHECK(libm, "cannot find libm's path");
  CHECK(pkrt_module_load_file(rt, libm, &m) == PKRT_ERR_LOAD, "libm loaded as a kernel object");
  CHECK(contains(pkrt_ctx_error(rt), libm) && contains(pkrt_ctx_error(rt), PKRT_MODULE_SYMBOL),
        "message lacks path or symbol: %s", pkrt_ctx_error(rt));

#ifdef PK_FIXTURE_BAD_ABI_SO
  CHECK(pkrt_module_load_file(rt, PK_FIXTURE_BAD_ABI_SO, &m) == PKRT_ERR_LOAD, "bad ABI loaded");
  CHECK(contains(pkrt_ctx_error(rt), "ABI version"), "ABI message: %s", pkrt_ctx_error(rt));
#endif
  pkrt_module_free(NULL);
  pkrt_ctx_free(rt);
}

/* ---------------------------------------------------------------- extern calls */

static void test_extern_libm(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_extern *e = NULL;
  CHECK(pkrt_extern_open(rt, "libm.so.6", "cos", "f64(f64)", &e) == PKRT_OK, "cos: %s",
        pkrt_ctx_error(rt));
  CHECK(pkrt_extern_nargs(e) == 1, "nargs");
  double x = 0.5, r = 0;
  void *args[] = {&x};
  pkrt_extern_call(e, args, &r);
  pkrt_extern_free(e);
  CHECK(r == cos(0.5), "cos(0.5) = %.17g", r);

  /* Narrow results: libffi widens them, the caller's storage is only 4 bytes. */
  CHECK(pkrt_extern_open(rt, "libm.so.6", "cosf", " f32 ( f32 ) ", &e) == PKRT_OK, "cosf: %s",
        pkrt_ctx_error(rt));
  float xf = 0.25f, rf[2] = {0, 12345};
  void *argf[] = {&xf};
  pkrt_extern_call(e, argf, rf);
  pkrt_extern_free(e);
  CHECK(rf[0] == cosf(0.25f) && rf[1] == 12345, "cosf: %g, guard %g", rf[0], rf[1]);

  CHECK(pkrt_extern_open(rt, "libc.so.6", "abs", "i32(i32)", &e) == PKRT_OK, "abs: %s",
        pkrt_ctx_error(rt));
  int32_t xi = -42, ri[2] = {0, 777};
  void *argi[] = {&xi};
  pkrt_extern_call(e, argi, ri);
  pkrt_extern_free(e);
  CHECK(ri[0] == 42 && ri[1] == 777, "abs: %d, guard %d", ri[0], ri[1]);

  CHECK(pkrt_extern_open(rt, "libc.so.6", "strlen", "i64(ptr)", &e) == PKRT_OK, "strlen: %s",
        pkrt_ctx_error(rt));
  const char *str = "pock runtime";
  int64_t rl = 0;
  void *argp[] = {&str};
  pkrt_extern_call(e, argp, &rl);
  pkrt_extern_free(e);
  CHECK(rl == 12, "strlen = %lld", (long long)rl);

  CHECK(pkrt_extern_open(rt, "libc.so.6", "getpid", "i32()", &e) == PKRT_OK, "getpid: %s",
        pkrt_ctx_error(rt));
  int32_t pid = 0;
  pkrt_extern_call(e, NULL, &pid);
  CHECK(pkrt_extern_nargs(e) == 0, "nargs of ()");
  pkrt_extern_free(e);
  CHECK(pid == getpid(), "getpid");
  pkrt_ctx_free(rt);
}

static void test_extern_sgemm(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_extern *e = NULL;
  pkrt_status st = pkrt_extern_open(rt, "libopenblas.so.0", "cblas_sgemm",
                                    "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)",
                                    &e);
  if (st != PKRT_OK && contains(pkrt_ctx_error(rt), "cannot open")) {
    printf("SKIP %s: %s\n", test_name, pkrt_ctx_error(rt));
    pkrt_ctx_free(rt);
    test_failed = -1; /* neither PASS nor FAIL */
    return;
  }
  CHECK(st == PKRT_OK, "open: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_extern_nargs(e) == 14, "nargs %d", pkrt_extern_nargs(e));
  enum { M = 3, K = 4, N = 2 };
  float A[M * K], B[K * N], C[M * N], ref[M * N];
  for (int i = 0; i < M * K; i++) A[i] = (float)(i % 5) - 1.5f;
  for (int i = 0; i < K * N; i++) B[i] = (float)(i * 3 % 7) * 0.5f;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      float s = 0;
      for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
      ref[i * N + j] = s;
      C[i * N + j] = 99; /* beta = 0 must overwrite */
    }
  int32_t row_major = 101, no_trans = 111, m = M, n = N, k = K, lda = K, ldb = N, ldc = N;
  float alpha = 1, beta = 0;
  float *pa = A, *pb = B, *pc = C;
  void *args[] = {&row_major, &no_trans, &no_trans, &m, &n, &k, &alpha,
                  &pa, &lda, &pb, &ldb, &beta, &pc, &ldc};
  pkrt_extern_call(e, args, NULL);
  pkrt_extern_free(e);
  pkrt_ctx_free(rt);
  for (int i = 0; i < M * N; i++)
    CHECK(fabsf(C[i] - ref[i]) <= 1e-5f * (1 + fabsf(ref[i])), "C[%d] = %g, want %g", i, C[i], ref[i]);
}

static void test_extern_errors(const char *test_name) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_extern *e = (pkrt_extern *)&e;
  const struct {
    const char *sig, *says;
  } bad[] = {{"void(i33)", "'i33'"},         {"f32(", "type was expected"},
             {"", "type was expected"},      {"f64(f64", "missing ')'"},
             {"f64(void)", "void"},          {"f64(f64,)", "expected a type at ')'"},
             {"f64 f64", "expected '('"},    {"f64(f64) x", "after ')'"},
             {"float(f32)", "'float'"},      {"f64(f64;f64)", "','"},
             {"(f64)", "expected a type"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    pkrt_status st = pkrt_extern_open(rt, "libm.so.6", "cos", bad[i].sig, &e);
    CHECK(st == PKRT_ERR_EXTERN, "signature \"%s\" accepted", bad[i].sig);
    CHECK(e == NULL, "out not cleared");
    CHECK(contains(pkrt_ctx_error(rt), bad[i].says), "signature \"%s\": message \"%s\" lacks %s",
          bad[i].sig, pkrt_ctx_error(rt), bad[i].says);
  }
  char many[512] = "void(";
  for (int i = 0; i < 40; i++) strcat(many, i ? ",i32" : "i32");
  strcat(many, ")");
  CHECK(pkrt_extern_open(rt, "libm.so.6", "cos", many, &e) == PKRT_ERR_EXTERN, "40 args");

  CHECK(pkrt_extern_open(rt, "libm.so.6", "no_such_function", "f64(f64)", &e) == PKRT_ERR_EXTERN,
        "missing symbol");
  CHECK(contains(pkrt_ctx_error(rt), "no_such_function") && contains(pkrt_ctx_error(rt), "libm.so.6"),
        "message: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_extern_open(rt, "libnosuchlib.so.9", "f", "void()", &e) == PKRT_ERR_EXTERN,
        "missing library");
  CHECK(contains(pkrt_ctx_error(rt), "libnosuchlib.so.9"), "message: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_extern_open(rt, NULL, "cos", "f64(f64)", &e) == PKRT_ERR_INPUT, "NULL library");
  pkrt_extern_free(NULL);
  pkrt_ctx_free(rt);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  run("arena", test_arena);
  run("names", test_names);
  run("sha256", test_sha256);
  run("ctx_error", test_ctx_error);
  run("pool_cover", test_pool_cover);
  run("pool_error", test_pool_error);
  run("pool_parallel", test_pool_parallel);
  run("pool_nested", test_pool_nested);
  run("pool_shared", test_pool_shared);
  run("pool_cycles", test_pool_cycles);
  run("load_file", test_load_file);
  run("load_memory", test_load_memory);
  run("load_errors", test_load_errors);
  run("load_truncated", test_load_truncated);
  run("extern_libm", test_extern_libm);
  run("extern_sgemm", test_extern_sgemm);
  run("extern_errors", test_extern_errors);
  if (failures) printf("%d test(s) failed\n", failures);
  return failures ? 1 : 0;
}
