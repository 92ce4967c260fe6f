/* test_measurer.c — the tuner's measurer: good schedules measure OK with plausible timing;
 * illegal, uncompilable, crashing, hanging, wrong and failing kernels each get their own
 * status and the next good kernel still measures; OpenBLAS sgemm as an extern candidate;
 * the worker has one thread, and no process or descriptor is left behind; a deadline cuts a
 * batch off without results (a time budget that holds). PASS/FAIL/SKIP. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_measurer.h"

static int failures;

#define CHECK(cond, ...)              \
  do {                                \
    bool ok_ = (cond);                \
    printf(ok_ ? "PASS " : "FAIL ");  \
    printf(__VA_ARGS__);              \
    printf("\n");                     \
    if (!ok_) failures++;             \
  } while (0)

static const char *const MATMUL_TE =
    "A = placeholder((64, 64), f32)\n"
    "B = placeholder((64, 64), f32)\n"
    "k = reduce_axis(64)\n"
    "C = compute((64, 64), (i, j) => sum(A[i, k] * B[k, j], k))\n";

/* Register-tiled: cache_write into a local tile, vectorized, k unrolled by 4. */
static const char *const TILED_TRACE =
    "{\"version\":1,\"steps\":["
    "{\"step\":\"cache_write\",\"stage\":\"t2\",\"scope\":\"local\"},"
    "{\"step\":\"tile\",\"stage\":\"t2\",\"x\":\"i0\",\"y\":\"i1\",\"fx\":8,\"fy\":16},"
    "{\"step\":\"vectorize\",\"stage\":\"t2\",\"axis\":\"i1.i\"},"
    "{\"step\":\"compute_at\",\"stage\":\"t2.local\",\"target\":\"t2\",\"axis\":\"i1.o\"},"
    "{\"step\":\"split\",\"stage\":\"t2.local\",\"axis\":\"k0\",\"factor\":4},"
    "{\"step\":\"split\",\"stage\":\"t2.local\",\"axis\":\"i1\",\"factor\":16},"
    "{\"step\":\"reorder\",\"stage\":\"t2.local\",\"axes\":[\"k0.o\",\"k0.i\",\"i0\",\"i1.o\",\"i1.i\"]},"
    "{\"step\":\"unroll\",\"stage\":\"t2.local\",\"axis\":\"k0.i\",\"depth\":0},"
    "{\"step\":\"vectorize\",\"stage\":\"t2.local\",\"axis\":\"i1.i\"}]}";

/* Vectorizing a reduce axis is refused. */
static const char *const ILLEGAL_TRACE =
    "{\"version\":1,\"steps\":[{\"step\":\"vectorize\",\"stage\":\"t2\",\"axis\":\"k0\"}]}";

/* Hand-written kernel objects: the ABI header (as generated code embeds it), then "k0". */
static const char *const KERNEL_HEAD =
    "static int k0(const pkrt_buffer *b, int32_t nb, const int64_t *s, int32_t ns,\n"
    "              void *ws, pkrt_exec_ctx *ctx) {\n"
    "  const float *A = b[0].data, *B = b[1].data; float *C = b[2].data;\n";
static const char *const KERNEL_TAIL =
    "}\n"
    "static const pkrt_kernel_desc kernels[] = {{\"k0\", k0, 3, 0, 0, \"planted\"}};\n"
    "PKRT_EXPORT const pkrt_module_desc pkrt_module = {PKRT_ABI_VERSION, 1, kernels};\n";
static const char *const MATMUL_BODY =
    "  for (int i = 0; i < 64; i++)\n"
    "    for (int j = 0; j < 64; j++) {\n"
    "      float acc = 0;\n"
    "      for (int k = 0; k < 64; k++) acc += A[i * 64 + k] * B[k * 64 + j];\n"
    "      C[i * 64 + j] = acc;\n"
    "    }\n";

static char *planted(pk_ctx *ctx, const char *abi, const char *body) {
  return pk_sprintf(ctx, "%s\n%s%s%s", abi, KERNEL_HEAD, body, KERNEL_TAIL);
}

/* ---- process hygiene ---- */

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - (strcmp(path, "/proc/self/fd") == 0); /* the descriptor opendir holds */
}

static int thread_count(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  return count_dir(path);
}

/* Probes for a library in a child: loading OpenBLAS here would start its threads in this
 * process, which then forks builders. */
static bool library_present(const char *name) {
  pid_t pid = fork();
  if (pid == 0) _exit(dlopen(name, RTLD_NOW | RTLD_LOCAL) ? 0 : 1);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- checks ---- */

static void check_ok(const char *what, const pk_measurement *m) {
  CHECK(m->status == PK_MEAS_OK, "%s: status %s%s%s", what, pk_meas_status_name(m->status),
        m->error ? ": " : "", m->error ? m->error : "");
  if (m->status != PK_MEAS_OK) return;
  const pk_timing *t = &m->timing;
  CHECK(t->repeats >= 5 && t->min_ns > 0 && t->min_ns <= t->median_ns && t->stddev_ns >= 0,
        "%s: timing median %.0f ns, min %.0f ns, stddev %.0f ns over %d repeats", what,
        t->median_ns, t->min_ns, t->stddev_ns, t->repeats);
  CHECK(m->gflops > 0.01 && m->gflops < 10000, "%s: %.2f GFLOP/s is plausible", what, m->gflops);
}

static void check_status(const char *what, const pk_measurement *m, pk_meas_status want) {
  const char *error = m->error ? m->error : "(no message)";
  CHECK(m->status == want && m->error && *m->error, "%s: %s (want %s): %.*s", what,
        pk_meas_status_name(m->status), pk_meas_status_name(want),
        (int)strcspn(error, "\n"), error); /* a compiler's log: its first line */
}

typedef struct progress {
  int calls, last;
} progress;

static void on_measured(void *arg, int index, const pk_measurement *meas) {
  progress *p = arg;
  if (index == p->last + 1) p->last = index;
  p->calls++;
  (void)meas;
}

static void test_schedules(pk_measurer *m, const pk_task *task, const pk_measure_settings *set,
                           progress *prog) {
  pk_ctx *tmp = pk_ctx_new();
  pk_candidate cands[3] = {
      {.kind = PK_CAND_SCHEDULE, .trace = pk_sched_to_json(pk_sched_new(tmp, task->prog))},
      {.kind = PK_CAND_SCHEDULE, .trace = TILED_TRACE},
      {.kind = PK_CAND_SCHEDULE, .trace = ILLEGAL_TRACE}};
  pk_measurement out[3];
  *prog = (progress){0, -1};
  int64_t t0 = pkrt_now_ns();
  pk_status s = pk_measurer_run(m, task, cands, 3, out);
  int64_t elapsed = pkrt_now_ns() - t0;
  CHECK(s == PK_OK, "pk_measurer_run on schedules returns OK");
  /* Robust to a preempted sample, unlike median x repeats: the repeats themselves took time. */
  CHECK(elapsed >= 2 * set->min_ns, "two timings of >= %lld ns each took %lld ns",
        (long long)set->min_ns, (long long)elapsed);
  check_ok("default schedule", &out[0]);
  check_ok("tiled schedule", &out[1]);
  check_status("illegal trace", &out[2], PK_MEAS_ILLEGAL);
  CHECK(prog->calls == 3 && prog->last == 2, "on_measured called once per candidate, in order");
  if (out[0].status == PK_MEAS_OK && out[1].status == PK_MEAS_OK)
    printf("  default %.2f GFLOP/s, tiled %.2f GFLOP/s\n", out[0].gflops, out[1].gflops);
  pk_ctx_free(tmp);
}

static void test_planted(pk_measurer *m, pk_ctx *ctx, const pk_task *task,
                         const pk_measure_settings *set) {
  char *abi;
  size_t len;
  if (pk_read_file(ctx, PK_SOURCE_DIR "/include/pock/pkrt_kernel.h", &abi, &len) != PK_OK) {
    CHECK(false, "read the kernel ABI header: %s", pk_ctx_error(ctx));
    return;
  }
  const char *good = planted(ctx, abi, pk_sprintf(ctx, "%s  return 0;\n", MATMUL_BODY));
  const struct {
    const char *what, *source;
    pk_meas_status want;
  } bad[] = {
      {"segfaulting kernel", planted(ctx, abi, "  *(volatile int *)0 = 1;\n  return 0;\n"),
       PK_MEAS_CRASH},
      {"endless kernel", planted(ctx, abi, "  for (volatile int spin = 1; spin;) {}\n  return 0;\n"),
       PK_MEAS_TIMEOUT},
      {"wrong kernel", planted(ctx, abi, pk_sprintf(ctx, "%s  C[5] += 1.0f;\n  return 0;\n", MATMUL_BODY)),
       PK_MEAS_WRONG},
      {"kernel returning 2", planted(ctx, abi, "  return 2;\n"), PK_MEAS_RUNTIME_ERROR},
      {"source that does not compile", "this is not C;\n", PK_MEAS_COMPILE_ERROR},
  };
  enum { NBAD = sizeof bad / sizeof bad[0] };
  /* bad, good, bad, good, ...: each bad one must leave the next good one unharmed */
  const char *sources[2 * NBAD];
  for (int i = 0; i < NBAD; i++) {
    sources[2 * i] = bad[i].source;
    sources[2 * i + 1] = good;
  }
  pk_measurement out[2 * NBAD];
  int64_t t0 = pkrt_now_ns();
  pk_status s = pk_measurer_run_sources(m, task, sources, 2 * NBAD, out);
  double seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  CHECK(s == PK_OK, "pk_measurer_run_sources returns OK");
  for (int i = 0; i < NBAD; i++) {
    check_status(bad[i].what, &out[2 * i], bad[i].want);
    check_ok(pk_sprintf(ctx, "good kernel after the %s", bad[i].what), &out[2 * i + 1]);
  }
  CHECK(seconds < set->timeout_s + 30, "the endless kernel was stopped at the time limit "
        "(batch took %.1f s, limit %.0f s)", seconds, set->timeout_s);
}

/* A deadline (a run's time budget) stops a hanging candidate at the deadline rather than at
 * its own time limit, and what it cuts off is no result: no on_measured call, "not
 * measured" (the tuner records nothing). A second run past the deadline builds nothing. */
static void test_deadline(pk_ctx *ctx, const pk_task *task, const pk_measure_settings *base) {
  char *abi;
  size_t len;
  if (pk_read_file(ctx, PK_SOURCE_DIR "/include/pock/pkrt_kernel.h", &abi, &len) != PK_OK) {
    CHECK(false, "read the kernel ABI header: %s", pk_ctx_error(ctx));
    return;
  }
  const char *sources[2] = {
      planted(ctx, abi, "  for (volatile int spin = 1; spin;) {}\n  return 0;\n"),
      planted(ctx, abi, pk_sprintf(ctx, "%s  return 0;\n", MATMUL_BODY))};
  progress prog = {0, -1};
  pk_measure_settings set = *base;
  set.timeout_s = 20; /* the candidate's own limit: far beyond the deadline */
  set.on_measured_arg = &prog;
  set.deadline_ns = pkrt_now_ns() + 3000000000ll; /* builds are cached: they take < 1 s */
  pk_measurer *m;
  if (pk_measurer_new(ctx, &set, &m) != PK_OK) {
    CHECK(false, "pk_measurer_new with a deadline: %s", pk_ctx_error(ctx));
    return;
  }
  pk_measurement out[2];
  int64_t t0 = pkrt_now_ns();
  pk_status s = pk_measurer_run_sources(m, task, sources, 2, out);
  double seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  CHECK(s == PK_OK, "pk_measurer_run_sources with a deadline returns OK");
  CHECK(seconds < 10, "a hanging candidate is stopped at the deadline (%.1f s), not at its "
        "own limit (%g s)", seconds, set.timeout_s);
  for (int i = 0; i < 2; i++)
    CHECK(out[i].status == PK_MEAS_TIMEOUT && out[i].error && strstr(out[i].error, "not measured"),
          "candidate %d past the deadline: %s: %s", i, pk_meas_status_name(out[i].status),
          out[i].error ? out[i].error : "(no message)");
  CHECK(prog.calls == 0, "no on_measured call for what the deadline cut off (%d calls)", prog.calls);
  t0 = pkrt_now_ns();
  s = pk_measurer_run_sources(m, task, sources + 1, 1, out);
  seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  CHECK(s == PK_OK && out[0].status == PK_MEAS_TIMEOUT && prog.calls == 0 && seconds < 1,
        "past the deadline nothing is built or measured (%.2f s)", seconds);
  pk_measurer_free(m);
}

static void test_extern(pk_measurer *m, const pk_task *task) {
  if (!library_present("libopenblas.so.0")) {
    printf("SKIP extern cblas_sgemm: libopenblas.so.0 is not installed\n");
    return;
  }
  pk_candidate c[2] = {
      {.kind = PK_CAND_EXTERN, .extern_lib = "libopenblas.so.0", .extern_sym = "cblas_sgemm",
       .extern_sig = "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"},
      {.kind = PK_CAND_EXTERN, .extern_lib = "libopenblas.so.0", .extern_sym = "cblas_dgemm",
       .extern_sig = "void(i32,i32,i32,i32,i32,i32,f64,ptr,i32,ptr,i32,f64,ptr,i32)"}};
  pk_measurement out[2];
  CHECK(pk_measurer_run(m, task, c, 2, out) == PK_OK, "pk_measurer_run on externs returns OK");
  check_ok("extern cblas_sgemm", &out[0]);
  check_status("extern the measurer cannot call", &out[1], PK_MEAS_ILLEGAL);
  if (out[0].status == PK_MEAS_OK) printf("  openblas %.2f GFLOP/s\n", out[0].gflops);
}

static void test_records(pk_measurer *m) {
  pk_record r = {0};
  pk_measurer_fill_record(m, &r);
  CHECK(r.compiler && *r.compiler && r.flags && strstr(r.flags, "-O") &&
            r.codegen_version == PK_CGEN_C_VERSION,
        "record: compiler \"%s\", flags \"%s\", codegen v%d", r.compiler, r.flags, r.codegen_version);
  CHECK(r.measure_settings && strstr(r.measure_settings, "\"min_ns\":5000000") &&
            strstr(r.measure_settings, "\"timeout_s\":2"),
        "record: settings %s", r.measure_settings);
}

static void *wait_on_pipe(void *arg) {
  char c;
  while (read(*(int *)arg, &c, 1) < 0 && errno == EINTR) {}
  return NULL;
}

/* Last: it makes this process threaded. */
static void test_refuses_threaded_caller(pk_ctx *ctx, const pk_measure_settings *set) {
  int fds[2];
  pthread_t th;
  if (pipe(fds) != 0 || pthread_create(&th, NULL, wait_on_pipe, &fds[0]) != 0) {
    CHECK(false, "start a thread");
    return;
  }
  pk_measurer *m = NULL;
  pk_status s = pk_measurer_new(ctx, set, &m);
  CHECK(s == PK_ERR_USAGE && !m, "a process with threads is refused: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  close(fds[1]);
  pthread_join(th, NULL);
  close(fds[0]);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  int fds_before = count_dir("/proc/self/fd");
  pk_measure_settings set;
  pk_measure_settings_default(&set);
  set.min_ns = 5000000; /* 5 ms: enough for a 64^3 matmul, short for a test */
  set.timeout_s = 2;
#ifdef PK_TEST_CACHE_DIR
  if (!getenv("POCK_CACHE_DIR")) set.cc.cache_dir = PK_TEST_CACHE_DIR;
#endif
  progress prog = {0, -1};
  set.on_measured = on_measured;
  set.on_measured_arg = &prog;

  pk_measurer *m;
  if (pk_measurer_new(ctx, &set, &m) != PK_OK) {
    printf("FAIL pk_measurer_new: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  int worker = pk_measurer_worker_pid(m);
  CHECK(thread_count(worker) == 1, "the fresh worker has one thread");

  pk_te_program *p;
  pk_task task;
  if (pk_te_parse(ctx, MATMUL_TE, strlen(MATMUL_TE), "mm.te", &p) != PK_OK ||
      pk_task_from_program(ctx, p, "c", &task) != PK_OK) {
    printf("FAIL the matmul task: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  test_schedules(m, &task, &set, &prog);
  test_planted(m, ctx, &task, &set);
  test_extern(m, &task);
  test_records(m);
  CHECK(thread_count(worker) == 1, "the worker still has one thread after measuring");

  pk_measurer_free(m);
  test_deadline(ctx, &task, &set);
  int status;
  CHECK(waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD,
        "no child process (zombie or alive) remains after pk_measurer_free");
  CHECK(count_dir("/proc/self/fd") == fds_before, "no descriptor leaked (%d before, %d after)",
        fds_before, count_dir("/proc/self/fd"));
  test_refuses_threaded_caller(ctx, &set);
  pk_ctx_free(ctx);
  printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
