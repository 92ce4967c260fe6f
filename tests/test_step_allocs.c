/* test_step_allocs.c — the runtime allocates nothing per step: over training steps 2..N
 * of the digits CNN and MLP (one thread and a pool), evaluation and inference, no malloc-
 * family call and no mmap/mremap/munmap happens anywhere in the process. This program
 * defines those functions itself (forwarding to glibc's), so calls from libpockrt, libffi,
 * the thread pool and the kernel object loaded from memory all come through the counters
 * (tests/test_model_runtime.c's --wrap sees only libpockrt's own calls). Also: a whole
 * training run allocates the same whatever its number of epochs. glibc only; not built
 * under the sanitizers, which own malloc. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pk_driver.h"
#include "pkrt.h"
#include "pock/pockrt.h"

/* CHECK names the run (`what`) and jumps to its cleanup (`done:`). */
#define PK_TEST_CHECK_GOTO_DONE
#include "pk_test.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR"
#endif
#define DIGITS PK_SOURCE_DIR "/examples/digits"

/* ---------------------------------------------------------------- the counters */
static volatile int counting;
static long n_malloc, n_mmap;

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t a, size_t b);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t al, size_t n);
void __libc_free(void *p);

static inline void count(long *c) {
  if (counting) __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
}
void *malloc(size_t n) { count(&n_malloc); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(&n_malloc); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count(&n_malloc); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *aligned_alloc(size_t al, size_t n) { count(&n_malloc); return __libc_memalign(al, n); }
void *memalign(size_t al, size_t n) { count(&n_malloc); return __libc_memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n) {
  count(&n_malloc);
  if (al < sizeof(void *) || (al & (al - 1))) return EINVAL;
  void *p = __libc_memalign(al, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
/* Raw syscalls: glibc's own mmap is what these replace. */
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  count(&n_mmap);
  return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return mmap(addr, len, prot, flags, fd, off);
}
int munmap(void *addr, size_t len) {
  count(&n_mmap);
  return (int)syscall(SYS_munmap, addr, len);
}
void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  count(&n_mmap);
  return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, NULL);
}

/* ---------------------------------------------------------------- the test */
static int compile(const char *model, const char *out) {
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = model;
  o.batch = 32;
  o.out = out;
  FILE *log = fopen("/dev/null", "w");
  o.log = log;
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (s != PK_OK) printf("  compile %s: %s\n", model, pk_ctx_error(ctx));
  if (log) fclose(log);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : -1;
}

static void steps(const char *what, const char *art, int threads) {
  char err[512];
  pkrt_model *m = NULL;
  pkrt_open_options oo = {.nthreads = threads};
  CHECK(pkrt_model_open(art, &oo, &m, err, sizeof err) == 0, "open: %s", err);
  int64_t b = pkrt_model_batch(m), f = pkrt_model_features(m);
  float *x = pkrt_model_input(m, NULL);
  int32_t labels[64];
  for (int64_t i = 0; i < b * f; i++) x[i] = (float)((i * 7) % 17) / 16.0f;
  for (int64_t i = 0; i < b; i++) labels[i] = (int32_t)(i % 10);
  double l1, loss = NAN;
  CHECK(pkrt_model_set_labels(m, labels, b) == 0 && pkrt_model_train_step(m, &l1) == 0,
        "step 1: %s", pkrt_model_error(m));
  n_malloc = n_mmap = 0;
  counting = 1;
  int rc = 0;
  for (int s = 2; s <= 8 && rc == 0; s++) {
    x[s] += 0.01f; /* a new batch in place, as a caller would write it */
    rc = pkrt_model_set_labels(m, labels, s == 5 ? b - 3 : b);
    if (rc == 0) rc = pkrt_model_train_step(m, &loss);
  }
  if (rc == 0) rc = pkrt_model_eval_step(m, &loss);
  if (rc == 0) rc = pkrt_model_infer(m);
  counting = 0;
  CHECK(rc == 0, "a step failed: %s", pkrt_model_error(m));
  CHECK(isfinite(loss), "loss %g", loss);
  CHECK(n_malloc == 0 && n_mmap == 0,
        "steps 2..8, eval and infer made %ld malloc-family and %ld mmap-family calls", n_malloc,
        n_mmap);
  /* The counters work: saving weights allocates; a direct mmap is seen. */
  counting = 1;
  char w[512];
  snprintf(w, sizeof w, "%s/count.pkw", pk_test_tmpdir());
  pkrt_model_save_weights(m, w);
  void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  counting = 0;
  if (p != MAP_FAILED) munmap(p, 4096);
  CHECK(n_malloc > 0 && n_mmap > 0, "the counters saw nothing (%ld, %ld)", n_malloc, n_mmap);
  printf("PASS %s (steps 2..8 + eval + infer: 0 allocations, 0 mmaps)\n", what);
done:
  pkrt_model_close(m);
}

/* pkrt_train_run: 1 epoch and 3 epochs allocate the same, so no step allocates. */
static void loop(const char *what, const char *art) {
  char err[512];
  pkrt_model *m = NULL;
  pkrt_dataset *d = NULL;
  FILE *out = fopen("/dev/null", "w");
  long allocs[2], maps[2];
  CHECK(pkrt_model_open(art, NULL, &m, err, sizeof err) == 0, "open: %s", err);
  pkrt_data_options dopt = {.scale = 0.0625, .label_column = -1, .model = m};
  CHECK(pkrt_dataset_load(DIGITS "/target_val.csv", &dopt, &d, err, sizeof err) == 0, "data: %s",
        err);
  fprintf(out, "warm up stdio's buffer\n");
  for (int k = 0; k < 2; k++) {
    pkrt_train_options t = {.epochs = k ? 3 : 1, .seed = 1, .out = out, .progress = -1};
    pkrt_train_result r;
    n_malloc = n_mmap = 0;
    counting = 1;
    int rc = pkrt_train_run(m, d, &t, &r);
    counting = 0;
    CHECK(rc == 0, "train: %s", pkrt_model_error(m));
    allocs[k] = n_malloc;
    maps[k] = n_mmap;
  }
  CHECK(allocs[0] == allocs[1] && maps[0] == maps[1],
        "1 epoch: %ld allocations, %ld mmaps; 3 epochs: %ld, %ld", allocs[0], maps[0], allocs[1],
        maps[1]);
  printf("PASS %s (%ld allocations per run, whatever its length)\n", what, allocs[0]);
done:
  if (out) fclose(out);
  pkrt_dataset_free(d);
  pkrt_model_close(m);
}

int main(void) {
  if (pk_test_tmpdir_make("pk_allocs_") != 0) return 1;
  char cnn[512], mlp[512];
  snprintf(cnn, sizeof cnn, "%s/cnn.pock", pk_test_tmpdir());
  snprintf(mlp, sizeof mlp, "%s/mlp.pock", pk_test_tmpdir());
  if (compile(DIGITS "/models/cnn.json", cnn) || compile(DIGITS "/models/mlp.json", mlp)) {
    printf("FAIL setup: compile\n");
    return 1;
  }
  steps("cnn_1_thread", cnn, 1);
  steps("cnn_pool", cnn, 2);
  steps("mlp_1_thread", mlp, 1);
  loop("mlp_train_loop", mlp);
  pk_test_tmpdir_remove();
  return pk_test_summary("test_step_allocs");
}
