/* test_checkpoint.c — training checkpoints: resuming (at an epoch boundary, mid-epoch, and
 * twice in a row, each time in a new process) gives the uninterrupted run's losses and
 * weights bit for bit; damaged, truncated, foreign and misused checkpoints are refused with
 * a clear error and change nothing; saves allocate nothing; and SIGKILL at random moments
 * while a child saves checkpoints in a loop always leaves a complete, loadable version.
 * Linked with -Wl,--wrap=malloc,... (tests/fleet.cmake) to count allocations. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pk_driver.h"
#include "pkrt.h"
#include "pock/pockrt.h"

#define PK_TEST_OWN_CHECK
#include "pk_test.h"

/* ---- allocation counter (the --wrap linker option routes libpockrt's calls here) ---- */
static volatile int counting;
static long nallocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n) {
  if (counting) __atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
  return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b) {
  if (counting) __atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
  return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n) {
  if (counting) __atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
  return __real_realloc(p, n);
}

/* CHECK here returns -1 from the int-returning test helpers. */
#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      printf("FAIL line %d: ", __LINE__);         \
      printf(__VA_ARGS__);                        \
      printf("\n");                               \
      failures++;                                 \
      return -1;                                  \
    }                                             \
  } while (0)

static const char *tpath(char *buf, const char *name) {
  snprintf(buf, 512, "%s/%s", pk_test_tmpdir(), name);
  return buf;
}

static int compile(const char *model, const char *optimizer, const char *out) {
  char path[512];
  snprintf(path, sizeof path, "%s/examples/digits/models/%s", PK_SOURCE_DIR, model);
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = path;
  o.batch = 32;
  o.optimizer = optimizer;
  o.out = out;
  FILE *log = fopen("/dev/null", "w");
  o.log = log;
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (s != PK_OK) printf("FAIL compile %s: %s\n", model, pk_ctx_error(ctx));
  if (log) fclose(log);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : -1;
}

static pkrt_model *open_threads(const char *art, int threads) {
  pkrt_model *m;
  char err[512];
  pkrt_open_options o = {.nthreads = threads};
  if (pkrt_model_open(art, &o, &m, err, sizeof err) != 0) {
    printf("FAIL open %s: %s\n", art, err);
    failures++;
    return NULL;
  }
  return m;
}
static pkrt_model *open_model(const char *art) { return open_threads(art, 1); }

static pkrt_dataset *load(pkrt_model *m, const char *file) {
  char path[512], err[512];
  snprintf(path, sizeof path, "%s/examples/digits/%s", PK_SOURCE_DIR, file);
  pkrt_data_options o = {.scale = 0.0625, .label_column = -1, .model = m};
  pkrt_dataset *d;
  if (pkrt_dataset_load(path, &o, &d, err, sizeof err) != 0) {
    printf("FAIL load %s: %s\n", file, err);
    failures++;
    return NULL;
  }
  return d;
}

static int read_file(const char *path, unsigned char **bytes, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *bytes = malloc((size_t)n + 1);
  *len = *bytes && fread(*bytes, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
  fclose(f);
  return *bytes && *len == (size_t)n ? 0 : -1;
}

static int same_file(const char *a, const char *b) {
  unsigned char *x = NULL, *y = NULL;
  size_t nx = 0, ny = 0;
  int same = read_file(a, &x, &nx) == 0 && read_file(b, &y, &ny) == 0 && nx == ny &&
             memcmp(x, y, nx) == 0;
  free(x);
  free(y);
  return same;
}

/* ---- one training run, possibly in a child process ---- */

typedef struct run_spec {
  const char *art;
  int epochs;
  int64_t max_steps, every;
  const char *checkpoint, *resume, *metrics, *save;
  int threads;     /* 0: 1 */
} run_spec;

static int train_run(const run_spec *s) {
  pkrt_model *m = open_threads(s->art, s->threads ? s->threads : 1);
  if (!m) return -1;
  pkrt_dataset *d = load(m, "target_val.csv"), *v = load(m, "target_test.csv");
  int rc = -1;
  if (d && v) {
    pkrt_train_options o = {.epochs = s->epochs, .seed = 7, .val = v, .quiet = 1,
                            .save_path = s->save, .metrics_path = s->metrics,
                            .checkpoint_path = s->checkpoint, .checkpoint_every = s->every,
                            .resume_path = s->resume, .max_steps = s->max_steps};
    pkrt_train_result r;
    rc = pkrt_train_run(m, d, &o, &r);
    if (rc != 0) printf("FAIL train %s: %s\n", s->art, pkrt_model_error(m));
  }
  pkrt_dataset_free(v);
  pkrt_dataset_free(d);
  pkrt_model_close(m);
  return rc;
}

/* A resumed run in a new process, as on a device after a reboot. */
static int train_in_child(const run_spec *s) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int rc = train_run(s);
    fflush(stdout);
    _exit(rc == 0 ? 0 : 1);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Per epoch: loss, acc, val_loss, val_acc as the JSONL log wrote them (%.17g: exact). */
typedef struct curve {
  int n;
  double v[16][4];
  int64_t steps[16];
} curve;

static int read_curve(const char *path, curve *c) {
  memset(c, 0, sizeof *c);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[1024];
  static const char *const keys[4] = {"\"loss\": ", "\"acc\": ", "\"val_loss\": ", "\"val_acc\": "};
  while (fgets(line, sizeof line, f)) {
    const char *e = strstr(line, "\"epoch\": ");
    int epoch = e ? atoi(e + 9) : 0;
    if (epoch < 1 || epoch > 16) continue;
    for (int k = 0; k < 4; k++) {
      const char *p = strstr(line, keys[k]);
      c->v[epoch - 1][k] = p ? strtod(p + strlen(keys[k]), NULL) : NAN;
    }
    const char *s = strstr(line, "\"steps\": ");
    c->steps[epoch - 1] = s ? atoll(s + 9) : -1;
    if (epoch > c->n) c->n = epoch;
  }
  fclose(f);
  return 0;
}

static int same_curve(const char *what, const curve *a, const curve *b) {
  CHECK(a->n == b->n, "%s: %d epochs logged, the straight run logged %d", what, b->n, a->n);
  for (int e = 0; e < a->n; e++) {
    CHECK(a->steps[e] == b->steps[e], "%s: epoch %d ends at step %lld, not %lld", what, e + 1,
          (long long)b->steps[e], (long long)a->steps[e]);
    for (int k = 0; k < 4; k++)
      CHECK(memcmp(&a->v[e][k], &b->v[e][k], sizeof(double)) == 0,
            "%s: epoch %d value %d is %.17g, the straight run's %.17g", what, e + 1, k,
            b->v[e][k], a->v[e][k]);
  }
  return 0;
}

/* Straight 4 epochs vs the same run stopped and resumed in new processes. */
static int test_resume(const char *name, const char *art) {
  char ma[512], wa[512], mb[512], wb[512], ck[512];
  tpath(ma, "a.jsonl"), tpath(wa, "a.pkw"), tpath(mb, "b.jsonl"), tpath(wb, "b.pkw");
  tpath(ck, "run.ckpt");
  run_spec straight = {.art = art, .epochs = 4, .metrics = ma, .save = wa};
  CHECK(train_run(&straight) == 0, "%s: straight run", name);
  curve ca, cb;
  CHECK(read_curve(ma, &ca) == 0 && ca.n == 4, "%s: straight run logged %d epochs", name, ca.n);
  /* Split points: an epoch boundary; mid-epoch with periodic checkpoints; two stops, the
   * middle part on 2 threads (parallel loops split outputs, so results cannot change). */
  static const int64_t splits[3][2] = {{0, 0}, {10, 0}, {5, 9}};
  static const char *const names[3] = {"epoch boundary", "mid-epoch", "two stops, 2 threads"};
  for (int t = 0; t < 3; t++) {
    unlink(ck);
    unlink(mb);
    unlink(wb);
    run_spec first = {.art = art, .epochs = t == 0 ? 2 : 4, .max_steps = splits[t][0],
                      .every = t == 1 ? 3 : 0, .checkpoint = ck, .metrics = mb};
    CHECK(train_run(&first) == 0, "%s %s: first part", name, names[t]);
    if (splits[t][1]) {
      run_spec mid = {.art = art, .epochs = 4, .max_steps = splits[t][1], .checkpoint = ck,
                      .resume = ck, .metrics = mb, .threads = 2};
      CHECK(train_in_child(&mid) == 0, "%s %s: middle part", name, names[t]);
    }
    run_spec rest = {.art = art, .epochs = 4, .every = t == 1 ? 3 : 0, .checkpoint = ck,
                     .resume = ck, .metrics = mb, .save = wb};
    CHECK(train_in_child(&rest) == 0, "%s %s: resumed part", name, names[t]);
    CHECK(read_curve(mb, &cb) == 0, "%s: no log", name);
    char what[128];
    snprintf(what, sizeof what, "%s %s", name, names[t]);
    if (same_curve(what, &ca, &cb) != 0) return -1;
    CHECK(same_file(wa, wb), "%s: final weights differ from the straight run's", what);
    printf("PASS %s: resumed run equals the straight one bit for bit (4 epochs)\n", what);
  }
  return 0;
}

/* ---- refusals ---- */

/* Loads path into m, which must fail with a message containing want, leaving m as it was. */
static int refused(pkrt_model *m, const char *path, const char *want, const char *what) {
  pkrt_tensor_info t;
  CHECK(pkrt_model_tensor(m, "fc1.weight", &t) == 0 || pkrt_model_tensor(m, "fc.weight", &t) == 0,
        "no fc1.weight or fc.weight");
  float before[64];
  memcpy(before, (float *)t.data + t.offset, sizeof before);
  int64_t steps = pkrt_model_steps(m);
  int rc = pkrt_model_load_checkpoint(m, path);
  const char *msg = pkrt_model_error(m);
  CHECK(rc != 0, "%s: a damaged checkpoint loaded", what);
  CHECK(strstr(msg, want) != NULL, "%s: error '%s' does not say '%s'", what, msg, want);
  CHECK(strstr(msg, path) != NULL, "%s: error '%s' does not name the file", what, msg);
  CHECK(pkrt_model_steps(m) == steps && memcmp(before, (float *)t.data + t.offset, sizeof before) == 0,
        "%s: a refused checkpoint changed the model", what);
  return 0;
}

static int train_steps(pkrt_model *m, const pkrt_dataset *d, int n, double *loss) {
  int64_t b = pkrt_model_batch(m);
  size_t row = (size_t)pkrt_dataset_features(d) * sizeof(float);
  for (int i = 0; i < n; i++) {
    memcpy(pkrt_model_input(m, NULL), (const char *)pkrt_dataset_x(d) + (size_t)(i % 4) * b * row,
           (size_t)b * row);
    if (pkrt_model_set_labels(m, pkrt_dataset_labels(d) + (i % 4) * b, b) != 0 ||
        pkrt_model_train_step(m, loss) != 0)
      return -1;
  }
  return 0;
}

static int test_model_checkpoint(const char *mlp, const char *cnn) {
  char ck[512], bad[512], w1[512], w2[512];
  tpath(ck, "model.ckpt"), tpath(bad, "bad.ckpt"), tpath(w1, "w1.pkw"), tpath(w2, "w2.pkw");
  pkrt_model *a = open_model(mlp), *b = open_model(mlp), *c = open_model(cnn);
  pkrt_dataset *d = a ? load(a, "target_val.csv") : NULL;
  int rc = -1;
  double la, lb;
  unsigned char *bytes = NULL;
  size_t len = 0;
  if (!a || !b || !c || !d) goto out;
  /* Round trip: the restored model continues exactly as the saved one. */
  if (train_steps(a, d, 5, &la) != 0 || pkrt_model_set_lr(a, 0.002) != 0) goto out;
  counting = 1;
  nallocs = 0;
  int sst = pkrt_model_save_checkpoint(a, ck);
  counting = 0;
  if (sst != 0) {
    printf("FAIL save: %s\n", pkrt_model_error(a));
    goto out;
  }
  if (nallocs != 0) {
    printf("FAIL save_checkpoint made %ld allocations (must be 0)\n", nallocs);
    goto out;
  }
  printf("PASS save_checkpoint allocates nothing\n");
  if (pkrt_model_load_checkpoint(b, ck) != 0) {
    printf("FAIL load: %s\n", pkrt_model_error(b));
    goto out;
  }
  if (pkrt_model_steps(b) != 5 || pkrt_model_lr(b) != 0.002) {
    printf("FAIL restored steps %lld lr %g (want 5, 0.002)\n", (long long)pkrt_model_steps(b),
           pkrt_model_lr(b));
    goto out;
  }
  if (train_steps(a, d, 3, &la) != 0 || train_steps(b, d, 3, &lb) != 0 ||
      memcmp(&la, &lb, sizeof la) != 0 || pkrt_model_save_weights(a, w1) != 0 ||
      pkrt_model_save_weights(b, w2) != 0 || !same_file(w1, w2)) {
    printf("FAIL the restored model trains differently (loss %.17g vs %.17g)\n", la, lb);
    goto out;
  }
  printf("PASS model checkpoint round trip: steps, lr, params and optimizer state restored\n");

  /* A checkpoint of another artifact, and a model-only one given to the training loop. */
  if (refused(c, ck, "belongs to another model", "other model") != 0) goto out;
  printf("PASS a checkpoint of another artifact is refused: %s\n", pkrt_model_error(c));
  pkrt_train_options o = {.epochs = 1, .quiet = 1, .resume_path = ck};
  if (pkrt_train_run(b, d, &o, NULL) == 0 ||
      !strstr(pkrt_model_error(b), "holds no training-loop position")) {
    printf("FAIL resume from a model-only checkpoint: '%s'\n", pkrt_model_error(b));
    goto out;
  }
  printf("PASS resume from a model-only checkpoint is refused\n");

  /* Damage: one flipped byte at many offsets, truncation at many lengths, bad magic and
   * version, a missing file. */
  if (read_file(ck, &bytes, &len) != 0) goto out;
  int flips = 0;
  for (size_t off = 0; off < len; off += off < 256 ? 1 : 997) {
    bytes[off] ^= 0x10;
    const char *want = off < 8 ? "bad magic" : off < 12 ? "version" : off < 16 ? "flags" : "";
    if (pk_test_write_file(bad, bytes, len) != 0 || refused(b, bad, want, "flipped byte") != 0) {
      printf("  (byte %zu of %zu)\n", off, len);
      goto out;
    }
    bytes[off] ^= 0x10;
    flips++;
  }
  bytes[len - 1] ^= 1;
  if (pk_test_write_file(bad, bytes, len) != 0 ||
      refused(b, bad, "checksum mismatch", "trailer") != 0)
    goto out;
  bytes[len - 1] ^= 1;
  printf("PASS %d single-byte flips (header, params, state, trailer) are refused\n", flips);
  int cuts = 0;
  for (size_t n = 0; n < len; n = n < 256 ? n + 1 : n + 1013) {
    const char *want = n == 0 ? "empty" : n < 8 ? "bad magic" : "truncated";
    if (pk_test_write_file(bad, bytes, n) != 0 || refused(b, bad, want, "truncated") != 0) {
      printf("  (%zu of %zu bytes)\n", n, len);
      goto out;
    }
    cuts++;
  }
  unsigned char *longer = malloc(len + 1);
  memcpy(longer, bytes, len);
  longer[len] = 0;
  int tail = pk_test_write_file(bad, longer, len + 1) == 0
                 ? refused(b, bad, "trailing", "trailing")
                 : -1;
  free(longer);
  if (tail != 0) goto out;
  printf("PASS %d truncations and a trailing byte are refused\n", cuts);
  tpath(bad, "missing.ckpt");
  if (refused(b, bad, "No such file", "missing file") != 0) goto out;
  printf("PASS a missing checkpoint is an error naming it\n");
  rc = 0;
out:
  if (rc != 0) failures++;
  free(bytes);
  pkrt_dataset_free(d);
  pkrt_model_close(c);
  pkrt_model_close(b);
  pkrt_model_close(a);
  return rc;
}

/* Resuming on other data is refused, naming both datasets. */
static int test_other_data(const char *art) {
  char ck[512];
  tpath(ck, "data.ckpt");
  run_spec s = {.art = art, .epochs = 1, .checkpoint = ck};
  CHECK(train_run(&s) == 0, "train for the data test");
  pkrt_model *m = open_model(art);
  CHECK(m, "open");
  pkrt_dataset *d = load(m, "target_train.csv");
  pkrt_train_options o = {.epochs = 2, .quiet = 1, .resume_path = ck};
  int rc = d ? pkrt_train_run(m, d, &o, NULL) : -1;
  int ok = rc != 0 && strstr(pkrt_model_error(m), "other training data") != NULL;
  if (!ok) printf("FAIL resume on other data: rc %d '%s'\n", rc, pkrt_model_error(m));
  else printf("PASS resume on other data is refused: %s\n", pkrt_model_error(m));
  pkrt_dataset_free(d);
  pkrt_model_close(m);
  if (!ok) failures++;
  return ok ? 0 : -1;
}

/* ---- kill -9 during saves ---- */

static int sha_of_file(const char *path, uint8_t out[PKRT_SHA256_BYTES]) {
  unsigned char *b;
  size_t n;
  if (read_file(path, &b, &n) != 0) return -1;
  pkrt_sha256(b, n, out);
  free(b);
  return 0;
}

/* The child: continue from the checkpoint on disk, then step and save forever. */
static void saver(const char *art, const char *ck, int ready_fd) {
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(art, NULL, &m, err, sizeof err) != 0) _exit(3);
  if (pkrt_model_load_checkpoint(m, ck) != 0) _exit(4);
  pkrt_dataset *d = load(m, "target_val.csv");
  if (!d) _exit(5);
  char c = 1;
  if (write(ready_fd, &c, 1) != 1) _exit(6);
  for (;;) {
    double l;
    if (train_steps(m, d, 1, &l) != 0 || pkrt_model_save_checkpoint(m, ck) != 0) _exit(7);
  }
}

static int count_temps(const char *dir, int remove) {
  DIR *dd = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (dd && (e = readdir(dd))) {
    if (!strstr(e->d_name, "kill.ckpt.tmp.")) continue;
    n++;
    if (remove) {
      char p[600];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  }
  if (dd) closedir(dd);
  return n;
}

static int test_kill(const char *art) {
  char ck[512], ref[512];
  tpath(ck, "kill.ckpt"), tpath(ref, "ref.ckpt");
  pkrt_model *r = open_model(art);
  CHECK(r, "open");
  pkrt_dataset *d = load(r, "target_val.csv");
  CHECK(d, "data");
  /* Version k of the file is what k steps give: the parent replays them for reference. */
  int nref = 0, cap = 0;
  uint8_t (*refs)[PKRT_SHA256_BYTES] = NULL;
  CHECK(pkrt_model_save_checkpoint(r, ck) == 0, "initial save");
  unsigned seed = (unsigned)time(NULL);
  printf("  kill test seed %u\n", seed);
  int rc = 0, kills = 0, mid_save = 0;
  int64_t last = 0;
  for (int k = 0; k < 40 && rc == 0; k++) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      saver(art, ck, fds[1]);
    }
    close(fds[1]);
    char c;
    int got = (int)read(fds[0], &c, 1);
    close(fds[0]);
    if (got == 1) usleep((useconds_t)(rand_r(&seed) % 25000));
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    if (got != 1) {
      printf("FAIL saver child did not start (status %d)\n", status);
      rc = -1;
      break;
    }
    kills++;
    mid_save += count_temps(pk_test_tmpdir(), 1) > 0;
    /* The file must load, and be exactly the version of its step count. */
    pkrt_model *m = open_model(art);
    if (!m || pkrt_model_load_checkpoint(m, ck) != 0) {
      printf("FAIL after kill %d the checkpoint does not load: %s\n", k,
             m ? pkrt_model_error(m) : "");
      pkrt_model_close(m);
      rc = -1;
      break;
    }
    int64_t steps = pkrt_model_steps(m);
    pkrt_model_close(m);
    while (nref <= steps) {
      if (nref == cap) {
        cap = cap ? 2 * cap : 256;
        refs = realloc(refs, (size_t)cap * sizeof *refs);
      }
      double l;
      if ((nref > 0 && train_steps(r, d, 1, &l) != 0) || pkrt_model_save_checkpoint(r, ref) != 0 ||
          sha_of_file(ref, refs[nref]) != 0) {
        printf("FAIL reference step %d\n", nref);
        rc = -1;
        break;
      }
      nref++;
    }
    uint8_t sum[PKRT_SHA256_BYTES];
    if (rc == 0 && (sha_of_file(ck, sum) != 0 || memcmp(sum, refs[steps], sizeof sum) != 0)) {
      printf("FAIL after kill %d the checkpoint (step %lld) is not that step's version\n", k,
             (long long)steps);
      rc = -1;
    }
    if (rc == 0 && steps < last) {
      printf("FAIL after kill %d the checkpoint went back from step %lld to %lld\n", k,
             (long long)last, (long long)steps);
      rc = -1;
    }
    last = steps;
  }
  free(refs);
  pkrt_dataset_free(d);
  pkrt_model_close(r);
  if (rc == 0)
    printf("PASS %d SIGKILLs during checkpoint saves (%d left a partial temp file, %lld steps "
           "in all): the file always loaded and was a complete version\n",
           kills, mid_save, (long long)last);
  else
    failures++;
  return rc;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (pk_test_tmpdir_make("pk_ckpt_") != 0) return 1;
  char mlp[512], cnn[512];
  tpath(mlp, "mlp_adam.pock"), tpath(cnn, "cnn_sgd.pock");
  if (compile("mlp.json", "adam", mlp) != 0 || compile("cnn.json", "sgd", cnn) != 0) return 1;
  test_resume("mlp adam", mlp);
  test_resume("cnn sgd+momentum", cnn);
  test_model_checkpoint(mlp, cnn);
  test_other_data(mlp);
  test_kill(mlp);
  pk_test_tmpdir_remove();
  printf("%s test_checkpoint (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
