/* measure_impl.h — the measurer's internals shared by its files: one candidate's job as it
 * goes through build and measurement, the worker's request/reply messages, and the
 * EINTR-safe process and pipe helpers. */
#ifndef PK_MEASURE_IMPL_H
#define PK_MEASURE_IMPL_H

#include <sys/types.h>

#include "pk_backend.h"
#include "pk_measurer.h"
#include "pk_search.h" /* pk_sgemm_shape: one matcher for the space and the measurer */

#define MEAS_ERROR_BYTES 1024 /* a reply's message; keeps a reply below PIPE_BUF (atomic) */

/* One candidate on its way through the measurer. */
typedef struct meas_job {
  /* what to build: a trace (NULL: the default schedule), or hand-written source */
  const char *trace;
  const char *source;
  /* an extern candidate instead: nothing to build */
  bool is_extern;
  const char *lib, *sym, *sig;
  pk_sgemm_shape sgemm;
  /* result of the build phase; a job that is not ready with status OK is still to build */
  bool ready;             /* built (or extern): to be measured */
  pk_meas_status status;  /* when not ready: why not */
  const char *error;
  const char *so_path;
  const char *check_mask; /* per tensor of the program: '1' = compare this output */
  bool cut;               /* cut off by the settings' deadline: not a result, not recorded */
  const pk_candidate *cand; /* the candidate (NULL: hand-written source), for test_timing */
} meas_job;

/* The remote measurer's reference (measure_remote.c): the worker's, computed here. */
typedef struct meas_remote_ref {
  pk_ctx *ctx; /* owns what follows; NULL: none */
  const char *te;
  uint64_t seed;
  pk_te_program *prog;
  pk_te_ref *ref;
  const char *error; /* why there is none (in the measurer's ctx) */
} meas_remote_ref;

struct pk_measurer {
  pk_ctx *ctx;            /* the caller's: measurement messages, failures */
  pk_ctx *own;            /* the compiler driver */
  pk_measure_settings settings;
  pk_cc *cc;
  pk_backend *backend;    /* the target's backend: every candidate is built through it */
  bool gpu;               /* a GPU target (cuda, opencl): measured by measure_gpu.c */
  int jobs;
  int pinned_cpu;         /* the CPU children pin to (-1: none) */
  const char *settings_json, *compiler, *flags; /* in ctx, for records */
  pid_t worker;           /* -1 once reaped */
  int link;               /* socket to the worker (requests out, replies in); -1 closed */
  bool broken;            /* the worker died: nothing more can be measured */
  meas_remote_ref rref;   /* settings.remote: the task's reference */
};

/* ---- the worker's protocol: a fixed head, then the strings it counts ---- */
/* KERNEL and SGEMM: one candidate, checked then timed. ROUNDS: up to PK_CONFIRM_MAX
 * candidates already checked, timed in interleaved rounds (pk_measure_rounds): str[1]
 * lists them one per line, "k\t<kernel object>" or "e\t<library>\t<symbol>" (the
 * signature in str[4]). */
/* GPU: one candidate of a GPU target, checked then timed with device events: str[1] is its
 * image (OpenCL C source, or the cubin with its .ptx beside it), str[2] its trace ("":
 * the default schedule), str[4] the API ("opencl", "cuda"). GPU_BLAS: a CUDA target's
 * cuBLAS candidate, checked then timed the same way: str[1] the library (sonames tried in
 * turn), str[2] the symbol, str[4] "cuda", the call in sgemm. */
enum { MEAS_REQ_KERNEL = 1, MEAS_REQ_SGEMM = 2, MEAS_REQ_ROUNDS = 3, MEAS_REQ_GPU = 4,
       MEAS_REQ_GPU_BLAS = 5 };

typedef struct meas_request {
  int32_t kind;
  int32_t pin;
  uint64_t seed;
  int64_t min_ns;
  double timeout_s;
  int32_t rounds;        /* ROUNDS: how many */
  pk_sgemm_shape sgemm;  /* SGEMM, GPU_BLAS (and ROUNDS' externs): the call */
  uint32_t len[5]; /* strings that follow, NUL included: te, so/lib, kernel/sym, mask, sig */
} meas_request;

typedef struct meas_reply {
  int32_t status;  /* pk_meas_status */
  pk_timing timing;
  double round_median_ns[PK_CONFIRM_MAX], round_min_ns[PK_CONFIRM_MAX]; /* ROUNDS: per
                      candidate, the median and the fastest of its rounds; 0: it failed */
  uint32_t grid[3], block[3]; /* GPU: the kernel's launch (0: none) */
  char error[MEAS_ERROR_BYTES];
} meas_reply;

/* ---- the deadline (settings.deadline_ns) ---- */
/* Nanoseconds left before the deadline (INT64_MAX: none; <= 0: passed). */
int64_t meas_time_left(const pk_measurer *m);
/* Marks a job cut off by the deadline. */
void meas_cut(pk_ctx *run, meas_job *job);

/* ---- build phase (measure_build.c) ---- */
/* Lowers, emits and compiles the ready-to-build jobs in child processes, up to m->jobs at
 * once; fills each job's ready/status/error/so_path/check_mask. Strings go in run. */
void meas_build_batch(pk_measurer *m, pk_ctx *run, const pk_te_program *prog, meas_job *jobs,
                      int n);

/* ---- worker (measure_worker.c) and its children (measure_child.c) ---- */
noreturn void meas_worker_main(int link);
/* Runs in the child: loads, checks and times; writes one meas_reply to result_fd; exits. */
noreturn void meas_child_main(pk_ctx *ctx, const pk_te_program *prog, const pk_te_ref *ref,
                              const meas_request *rq, char *const *str, int result_fd);

/* ---- GPU targets (measure_gpu.c) ---- */
/* Runs in the child, which opens device 0 itself (no CUDA context or OpenCL runtime ever
 * crosses a fork): replays the trace, loads the built image, checks the kernel against the
 * reference (pk_gpu_device_check_timed), times it with device events; one reply. A
 * GPU_BLAS request: cuBLAS checked and timed the same way (pk_gpu_cublas_check_timed). */
noreturn void meas_gpu_child_main(pk_ctx *ctx, const pk_te_program *prog, const pk_te_ref *ref,
                                  const meas_request *rq, char *const *str, int result_fd);
/* For records: what builds a GPU target's candidates ("NVRTC 12.4", "OpenCL C, built by
 * the device's driver"), in ctx. NVRTC missing is PK_ERR_UNSUPPORTED. */
pk_status meas_gpu_compiler(pk_ctx *ctx, const pk_target *t, const char **out);

/* ---- the remote half (measure_remote.c) ---- */
/* As the worker's request: sends the built job to settings.remote and fills r with the
 * device's verdict; false when the connection is over (the measurer breaks). The limit and
 * *by_budget are ask_worker's. */
bool meas_remote_ask(pk_measurer *m, pk_ctx *run, const char *te, const meas_job *job,
                     double limit_s, meas_reply *r, bool *by_budget);
void meas_remote_free(pk_measurer *m);

/* ---- extern kernels (measure_extern.c) ---- */
/* Calls cblas_sgemm (fn) with the shape's arguments on the task's buffers data[]. */
void meas_sgemm_call(const pkrt_extern *fn, const pk_sgemm_shape *shape, void *const *data);

/* ---- processes and pipes (measure_io.c) ---- */
/* Whole reads/writes, retried on EINTR and short counts. read: 1 done, 0 clean EOF before
 * any byte, -1 error or EOF midway. write: 0 done, -1 error (a socket whose peer is gone
 * is an error, never a SIGPIPE). */
int meas_read_full(int fd, void *buf, size_t len);
int meas_write_full(int fd, const void *buf, size_t len);
/* waitpid retried on EINTR; returns the wait status, or -1. */
int meas_wait(pid_t pid);
/* Closes every descriptor above 2 except those in keep (in a freshly forked child, so
 * pipes of other processes do not stay open through it). */
void meas_close_fds_except(const int *keep, int nkeep);
/* Asks for SIGKILL when the parent dies (it cannot leave a runaway behind); exits at once
 * if the parent is already gone. */
void meas_die_with_parent(pid_t parent);
/* Copies s (may be NULL) into a reply's message buffer, truncating. */
void meas_set_error(char *dst, const char *s);
const char *meas_signal_name(int sig);

#endif
