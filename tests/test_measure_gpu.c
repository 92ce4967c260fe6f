/* test_measure_gpu.c — the measurer on a GPU target (issue 18), on OpenCL (PoCL's CPU
 * device in CI): generated and hand-written kernels are built, loaded and checked on the
 * device in the worker's children, a kernel that fails the check is PK_MEAS_WRONG and is
 * recorded so under the OpenCL fingerprint (api and device version must-match, the device
 * informative), OpenCL C that does not build and schedules a GPU cannot run get their own
 * statuses, externs are refused (OpenCL has no library to call), confirmations re-time;
 * the worker keeps one thread (no driver in it). No timing value is asserted. PASS/FAIL;
 * 77 without an OpenCL device. (CUDA's cuBLAS candidate: test_measure_cublas_mock.c.) */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_gpu.h"
#include "pk_measurer.h"
#include "pk_tunedb.h"
#include "pkrt.h"

static int failures;

#define CHECK(cond, ...)              \
  do {                                \
    bool ok_ = (cond);                \
    printf(ok_ ? "PASS " : "FAIL ");  \
    printf(__VA_ARGS__);              \
    printf("\n");                     \
    if (!ok_) failures++;             \
  } while (0)

static const char *const ADD_TE =
    "A = placeholder((256,), f32)\n"
    "B = placeholder((256,), f32)\n"
    "C = compute((256,), (i) => A[i] + B[i])\n";

/* The default schedule runs on one work-item: these take its launch (3 buffers). */
static const char *const GOOD_CL =
    "__kernel void k0(__global const float *A, __global const float *B, __global float *C) {\n"
    "  for (int i = 0; i < 256; i++) C[i] = A[i] + B[i];\n"
    "}\n";
static const char *const WRONG_CL = /* one element off: the check must see it */
    "__kernel void k0(__global const float *A, __global const float *B, __global float *C) {\n"
    "  for (int i = 0; i < 256; i++) C[i] = A[i] + B[i] + (i == 77 ? 1.0f : 0.0f);\n"
    "}\n";
static const char *const BROKEN_CL =
    "__kernel void k0(__global const float *A, __global const float *B, __global float *C) {\n"
    "  C[0] = undeclared_name;\n"
    "}\n";
/* A CPU parallel loop: the GPU lowering check refuses it. */
static const char *const PARALLEL_TRACE =
    "{\"version\":1,\"steps\":[{\"step\":\"parallel\",\"stage\":\"t2\",\"axis\":\"i0\"}]}";

static int thread_count(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static const char *first_line(pk_ctx *ctx, const char *s) {
  return s ? pk_strndup(ctx, s, strcspn(s, "\n")) : "(no message)";
}

static void check_status(pk_ctx *ctx, const char *what, const pk_measurement *m, pk_meas_status want) {
  CHECK(m->status == want, "%s: %s (want %s): %s", what, pk_meas_status_name(m->status),
        pk_meas_status_name(want), first_line(ctx, m->error));
  if (want == PK_MEAS_OK && m->status == PK_MEAS_OK)
    CHECK(m->timing.repeats >= 5, "%s: timed over %d launches (>= 5)", what, m->timing.repeats);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_target *t;
  pk_target_fp fp;
  if (pk_target_parse(ctx, "opencl", NULL, &t) != PK_OK) {
    printf("FAIL parsing the opencl target: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  /* the fingerprint probes device 0 in a child: none here is a skip, not a failure */
  if (pk_target_fp_of(ctx, t, &fp) != PK_OK) {
    printf("SKIP: no OpenCL device (%s; Debian: pocl-opencl-icd)\n", pk_ctx_error(ctx));
    return 77;
  }
  CHECK(strstr(fp.must_match, "\"api\":\"opencl\"") && strstr(fp.must_match, "\"device_version\":\"OpenCL"),
        "must-match: the API and the device version: %s", fp.must_match);
  CHECK(strstr(fp.informative, "\"device\":") && strstr(fp.informative, "\"driver\":") &&
            strstr(fp.informative, "\"compute_units\":"),
        "informative: the device, its driver, compute units: %s", fp.informative);

  pk_measure_settings set;
  pk_measure_settings_default(&set);
  set.min_ns = 1000000;
  set.timeout_s = 60; /* PoCL compiles each kernel with LLVM on a loaded machine */
  set.target = t;
#ifdef PK_TEST_CACHE_DIR
  if (!getenv("POCK_CACHE_DIR")) set.cc.cache_dir = PK_TEST_CACHE_DIR;
#endif
  pk_measurer *m;
  if (pk_measurer_new(ctx, &set, &m) != PK_OK) {
    printf("FAIL pk_measurer_new for opencl: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  CHECK(strstr(pk_measurer_settings_json(m), "\"timer\":\"device events\"") != NULL,
        "the records' settings say device events: %s", pk_measurer_settings_json(m));
  CHECK(pk_measurer_codegen_version(m) == PK_CGEN_GPU_VERSION, "records carry the GPU codegen version");

  pk_te_program *p;
  pk_task task;
  if (pk_te_parse(ctx, ADD_TE, strlen(ADD_TE), "add.te", &p) != PK_OK ||
      pk_task_for_target(ctx, p, t, &task) != PK_OK) {
    printf("FAIL the add task: %s\n", pk_ctx_error(ctx));
    return 1;
  }

  /* generated: the default schedule; a schedule the GPU cannot run; an extern */
  pk_candidate cands[3] = {
      {.kind = PK_CAND_SCHEDULE, .trace = pk_sched_to_json(pk_sched_new(ctx, p))},
      {.kind = PK_CAND_SCHEDULE, .trace = PARALLEL_TRACE},
      {.kind = PK_CAND_EXTERN, .extern_lib = "libopenblas.so.0", .extern_sym = "cblas_sgemm",
       .extern_sig = "v(iiiiiifpipifpi)"}};
  pk_measurement out[3];
  CHECK(pk_measurer_run(m, &task, cands, 3, out) == PK_OK, "pk_measurer_run returns OK");
  check_status(ctx, "default schedule on the device", &out[0], PK_MEAS_OK);
  check_status(ctx, "a CPU parallel loop", &out[1], PK_MEAS_ILLEGAL);
  check_status(ctx, "an extern on an OpenCL target", &out[2], PK_MEAS_ILLEGAL);

  /* hand-written OpenCL C: right, wrong by one element, not building */
  const char *sources[3] = {GOOD_CL, WRONG_CL, BROKEN_CL};
  pk_measurement hw[3];
  CHECK(pk_measurer_run_sources(m, &task, sources, 3, hw) == PK_OK, "pk_measurer_run_sources returns OK");
  check_status(ctx, "hand-written kernel", &hw[0], PK_MEAS_OK);
  check_status(ctx, "kernel one element off", &hw[1], PK_MEAS_WRONG);
  CHECK(hw[1].error && strstr(hw[1].error, "77"), "the mismatch names the element: %s",
        first_line(ctx, hw[1].error));
  check_status(ctx, "OpenCL C that does not build", &hw[2], PK_MEAS_COMPILE_ERROR);

  pk_confirmation conf[1];
  CHECK(pk_measurer_confirm(m, &task, cands, 1, 3, conf) == PK_OK && conf[0].rounds == 3,
        "the leader is re-timed in 3 rounds (got %d)", conf[0].rounds);
  CHECK(thread_count(pk_measurer_worker_pid(m)) == 1, "the worker still has one thread");

  /* the failed check, recorded as the tuner records it, under the OpenCL fingerprint */
  char path[] = "/tmp/pk_measure_gpu_XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  unlink(path);
  pk_tunedb *db = NULL;
  pk_record r = {.workload = task.workload, .target_key = fp.key, .meas = hw[1], .trial = 1,
                 .pock_version = "test", .host = "test"};
  r.cand = (pk_candidate){.kind = PK_CAND_SCHEDULE, .trace = cands[0].trace};
  char hash[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(r.cand.trace, strlen(r.cand.trace), hash);
  r.cand.trace_hash = hash;
  pk_measurer_fill_record(m, &r);
  pk_record_make_id(ctx, &r);
  bool inserted = false;
  int64_t nwrong = 0, nall = 0;
  pk_status s = pk_db_open(ctx, path, PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &fp);
  if (s == PK_OK) s = pk_db_workload_add(db, &task);
  if (s == PK_OK) s = pk_db_record_commit(db, &r, &inserted);
  if (s == PK_OK) s = pk_db_record_count(db, task.workload, fp.key, PK_MEAS_WRONG, &nwrong);
  if (s == PK_OK) s = pk_db_record_count(db, NULL, NULL, PK_DB_ANY_STATUS, &nall);
  CHECK(s == PK_OK && inserted && nwrong == 1 && nall == 1,
        "the wrong kernel is recorded as wrong under the OpenCL fingerprint (%lld of %lld): %s",
        (long long)nwrong, (long long)nall, s == PK_OK ? "" : pk_ctx_error(ctx));
  pk_record *back = NULL;
  int64_t nback = 0;
  if (s == PK_OK) s = pk_db_history(db, task.workload, fp.key, &back, &nback);
  CHECK(s == PK_OK && nback == 1 && back[0].meas.status == PK_MEAS_WRONG && back[0].arch &&
            !strcmp(back[0].arch, "opencl") && back[0].timing_method &&
            !strcmp(back[0].timing_method, "device events") && back[0].meas.launch &&
            !strcmp(back[0].meas.launch, "{\"block\":[1,1,1],\"grid\":[1,1,1]}"),
        "the GPU record reads back with its arch, timer and launch: %s, %s, %s",
        nback ? back[0].arch : "-", nback ? back[0].timing_method : "-",
        nback ? back[0].meas.launch : "-");
  if (db) pk_db_close(db);
  unlink(path);

  pk_measurer_free(m);
  pk_ctx_free(ctx);
  printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
