/* pk_measurer.h — the tuner's measurer: builds a batch of candidates on all cores, then
 * times each one, alone, in its own process, checked against the interpreter, with a time
 * limit, so a crash, hang or wrong result is a failed measurement, never the end of a run.
 *
 * Usage (what `pock tune` does; docs/measurer.md has the design):
 *   pk_measure_settings set; pk_measure_settings_default(&set);    // 50 ms, 10 s, pinned
 *   set.timeout_s = 5;
 *   pk_measurer *m;
 *   pk_measurer_new(ctx, &set, &m);    // FIRST: before any thread or database exists
 *   ...
 *   pk_measurement out[16];
 *   if (pk_measurer_run(m, &task, cands, 16, out) != PK_OK) ... // the measurer broke (rare)
 *   for (i...) record.meas = out[i]; pk_measurer_fill_record(m, &record); ... commit
 *   pk_measurer_free(m);               // stops the worker; no process is left behind
 *
 * Processes. pk_measurer_new forks the measurement worker at once: it must never have
 * threads, because forking a threaded process can hang the child (a lock held by another
 * thread stays held forever). The worker forks one child per candidate; the child loads the
 * kernel through the runtime's loader, runs it once on seeded random inputs, compares every
 * output with the interpreter (computed once per task in the worker), then times it pinned
 * to one CPU. Builds run in child processes of the caller, up to `jobs` at a time.
 *
 * GPU targets (settings.target opencl or 'cuda -arch=sm_NN'): the builders emit OpenCL C
 * or compile it with NVRTC into the build cache; the child opens device 0 of the API
 * itself (nothing of a driver crosses a fork), loads the image, checks the kernel against
 * the interpreter on the device (pk_gpu_device_check_timed) and times its launches with
 * device events. A CUDA target's cuBLAS candidate is measured the same way in such a
 * child: the task's inputs uploaded, cuBLAS called as artifacts call it, C compared with the
 * interpreter, the calls timed with device events (pk_gpu_cublas_check_timed, pk_search.h).
 * Statuses, limits and deadlines are the CPU path's; OpenCL targets refuse externs (there is
 * no library) and remote measurement is refused; confirmations re-time one candidate per
 * process.
 */
#ifndef PK_MEASURER_H
#define PK_MEASURER_H

#include <stdbool.h>
#include <stdint.h>

#include "pk_autotune.h"
#include "pk_remote.h"

typedef struct pk_measure_settings {
  int64_t min_ns;         /* timed repeats last at least this long (>= 5 calls after one
                             warm-up); default PK_MEASURE_MIN_NS (50 ms) */
  double timeout_s;       /* per candidate: load + check + timing, then SIGKILL; default 10 */
  double build_timeout_s; /* per candidate: lowering + compiling; default 120 */
  bool pin;               /* pin the measuring process to one CPU; default true */
  int jobs;               /* parallel builds; 0 (default): the CPUs this process may use */
  uint64_t seed;          /* random inputs; the reference is computed once per task + seed */
  pk_cc_options cc;       /* compiler, flags, kernel cache (NULL fields: the defaults) */
  const pk_target *target; /* what candidates are built for; NULL: this machine ("c") */
  /* Measure on a device's pock-rt-serve instead of here (docs/remote-tuning.md): no local
   * worker is forked; each built candidate is sent with the inputs, the reference outputs
   * (computed here) and their bounds. Extern candidates are refused (illegal): the device
   * may not have the library. The server gone is the worker gone. NULL: measure here. */
  pk_remote *remote;
  /* pkrt_now_ns() after which nothing more is built or measured (0: none): a time budget
   * that holds. A candidate the deadline cuts off (not started, its build killed, or its
   * measurement stopped at the deadline) gets PK_MEAS_TIMEOUT "not measured: ..." and no
   * on_measured call: it is not a result, and must not be recorded. */
  int64_t deadline_ns;
  /* Called after each candidate's result is final, in index order, while the batch goes
   * on: commit the record and print progress here. NULL: no call. */
  void (*on_measured)(void *arg, int index, const pk_measurement *meas);
  void *on_measured_arg;
  /* Tests only: replaces each timing as it comes back (median and min, in ns) — a
   * candidate's own measurement (confirming false) or its confirmation — so that what the
   * tuner makes of timings is tested without real ones. c is NULL for hand-written
   * sources. NULL: no hook. */
  void (*test_timing)(void *arg, const pk_candidate *c, bool confirming, double *median_ns,
                      double *min_ns);
  void *test_timing_arg;
} pk_measure_settings;

void pk_measure_settings_default(pk_measure_settings *s);

typedef struct pk_measurer pk_measurer;

/* Forks the worker and finds the compiler. settings NULL: the defaults. Strings in the
 * measurements (error messages) and the getters' strings live in ctx. */
pk_status pk_measurer_new(pk_ctx *ctx, const pk_measure_settings *settings, pk_measurer **out);

/* Builds all n candidates (in parallel), then measures each that built, one at a time.
 * out[i] is candidate i's result, whatever happened to it: a failed candidate is a result,
 * and the call still returns PK_OK. It fails only when the measurer itself does: the
 * task's canonical text does not parse, or the worker died (then the measurer is unusable,
 * and candidates not measured get PK_MEAS_RUNTIME_ERROR "not measured: ..." and no
 * on_measured call: do not record them). The message is in ctx. Past the settings'
 * deadline_ns, the rest of the batch is cut off the same way (and the call returns PK_OK). */
pk_status pk_measurer_run(pk_measurer *m, const pk_task *task, const pk_candidate *cands, int n,
                          pk_measurement *out);

/* Re-times n (<= PK_CONFIRM_MAX) candidates that measured OK before, in interleaved rounds
 * (pk_measure_rounds, the re-timer bench/ uses) in one fresh process, so passing load falls
 * on all of them alike: out[i].rounds is 0 where candidate i could not be re-timed (build
 * failed, run failed, the deadline cut it off). Fails only as pk_measurer_run does. */
#define PK_CONFIRM_MAX 8
pk_status pk_measurer_confirm(pk_measurer *m, const pk_task *task, const pk_candidate *cands,
                              int n, int rounds, pk_confirmation *out);

/* Test hook: measures hand-written kernel objects (C source, each exporting a kernel "k0"
 * that computes every output of the task) exactly as generated candidates are measured.
 * GPU targets: OpenCL C or CUDA C with a kernel "k0" taking the default schedule's launch
 * and buffers. */
pk_status pk_measurer_run_sources(pk_measurer *m, const pk_task *task,
                                  const char *const *c_sources, int n, pk_measurement *out);

/* Stops the worker (waiting at most one candidate's time limit) and reaps it. NULL is ok. */
void pk_measurer_free(pk_measurer *m);

/* ---- what a record needs to say how it was measured ---- */
const char *pk_measurer_compiler(const pk_measurer *m);  /* first line of `cc --version` */
const char *pk_measurer_flags(const pk_measurer *m);     /* the compiler flags */
int pk_measurer_codegen_version(const pk_measurer *m);   /* PK_CGEN_C_VERSION (GPU: _GPU_) */
/* Canonical JSON, e.g. {"min_ns":50000000,"min_repeats":5,"warmup":1,"stat":"median",
 * "timeout_s":10,"pin":true,"cpu":15,"threads":1,"seed":1} */
const char *pk_measurer_settings_json(const pk_measurer *m);
/* Fills r->compiler, flags, codegen_version and measure_settings from the above. */
void pk_measurer_fill_record(const pk_measurer *m, pk_record *r);

/* The worker's process id (tests check it has one thread and is gone after free). */
int pk_measurer_worker_pid(const pk_measurer *m);

#endif
