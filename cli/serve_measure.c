/* serve_measure.c — the device side of a remote measurement: INFO (this device's arch and
 * CPU features as the runtime reads them) and MEASURE, run in a child process that loads
 * the kernel object through the runtime's sealed-memfd loader, runs it on the host's
 * inputs, compares each checked output with the host's reference within its bound, and
 * times it; the parent kills it at the time limit, so a crash or hang is an answer. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdnoreturn.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_measure.h" /* the one timing loop (codegen/measure.c, runtime-only code) */
#include "pock_rt_serve.h"

char *serve_error_answer(const char *status, const char *message) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", status);
  cJSON_AddStringToObject(o, "error", message ? message : "");
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

/* ---------------------------------------------------------------- INFO */

/* The value after "key<blanks>:" on the first line that starts with key, or NULL. */
static char *cpuinfo_value(const char *text, const char *key) {
  size_t n = strlen(key);
  for (const char *line = text; line && *line;) {
    const char *nl = strchr(line, '\n'), *e = nl ? nl : line + strlen(line);
    if (strncmp(line, key, n) == 0) {
      const char *p = line + n;
      while (p < e && (*p == ' ' || *p == '\t')) p++;
      if (p < e && *p == ':') {
        for (p++; p < e && *p == ' '; p++) {}
        return strndup(p, (size_t)(e - p));
      }
    }
    line = nl ? nl + 1 : NULL;
  }
  return NULL;
}

static char *read_small_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap + 1);
  if (buf) n = fread(buf, 1, cap, f);
  fclose(f);
  if (buf) buf[n] = '\0';
  return buf;
}

char *serve_info_answer(void) {
  struct utsname u;
  if (uname(&u) != 0) return serve_error_answer("error", "uname failed");
  char *cpuinfo = read_small_file("/proc/cpuinfo");
  /* The features the runtime checks artifacts against (runtime/fingerprint.c): AArch64's
   * hwcaps (right under qemu-user too), else /proc/cpuinfo's flags. */
  char hw[PKRT_HWCAP_LINE_MAX];
  char *features = NULL;
  if (pkrt_hwcap_this(hw, sizeof hw) > 0) features = cpuinfo_value(hw, "Features");
  if (!features && cpuinfo) features = cpuinfo_value(cpuinfo, "flags");
  if (!features && cpuinfo) features = cpuinfo_value(cpuinfo, "Features");
  char *model = cpuinfo ? cpuinfo_value(cpuinfo, "model name") : NULL;
  if (!model && cpuinfo) {
    char *impl = cpuinfo_value(cpuinfo, "CPU implementer"), *part = cpuinfo_value(cpuinfo, "CPU part");
    if (impl && part && asprintf(&model, "implementer %s part %s", impl, part) < 0) model = NULL;
    free(impl);
    free(part);
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", "ok");
  cJSON_AddStringToObject(o, "arch", u.machine);
  cJSON_AddStringToObject(o, "features", features ? features : "");
  cJSON_AddStringToObject(o, "cpu", model ? model : "unknown");
  cJSON_AddNumberToObject(o, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
  cJSON_AddStringToObject(o, "kernel", u.release);
  cJSON_AddStringToObject(o, "pock_version", POCK_VERSION);
  /* qemu-user shows the host's /proc/cpuinfo: an x86 one on another arch (or an Arm one
   * on x86) means this server runs emulated, and its timings mean nothing */
  char *x86 = cpuinfo ? cpuinfo_value(cpuinfo, "vendor_id") : NULL;
  char *arm = cpuinfo ? cpuinfo_value(cpuinfo, "CPU implementer") : NULL;
  if ((x86 && strcmp(u.machine, "x86_64") != 0) || (arm && strcmp(u.machine, "aarch64") != 0))
    cJSON_AddTrueToObject(o, "emulated");
  free(x86);
  free(arm);
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  free(cpuinfo);
  free(features);
  free(model);
  return s;
}

/* ---------------------------------------------------------------- MEASURE, in the child */

typedef struct kernel_call {
  const pkrt_kernel_desc *k;
  pkrt_buffer *bufs;
  int n;
  void *workspace;
  pkrt_exec_ctx *exec;
} kernel_call;

static int call_kernel(void *arg) {
  const kernel_call *c = arg;
  return c->k->fn(c->bufs, c->n, NULL, 0, c->workspace, c->exec);
}

static noreturn void child_finish(int fd, char *answer) {
  size_t n = answer ? strlen(answer) : 0, put = 0;
  while (put < n) {
    ssize_t w = write(fd, answer + put, n - put);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(1);
    put += (size_t)w;
  }
  _exit(answer ? 0 : 1);
}

static noreturn void child_fail(int fd, const char *status, const char *msg) {
  child_finish(fd, serve_error_answer(status, msg));
}

static double element(const pkrt_remote_tensor *t, const void *data, int64_t i) {
  switch (t->dtype) {
  case PKRT_DTYPE_F32: return ((const float *)data)[i];
  case PKRT_DTYPE_F64: return ((const double *)data)[i];
  case PKRT_DTYPE_I32: return ((const int32_t *)data)[i];
  case PKRT_DTYPE_I64: return (double)((const int64_t *)data)[i];
  default: return NAN;
  }
}

/* Compares output t (kernel values at data) with its reference: NaN where the reference
 * is NaN, an infinite reference exactly, others within the element's bound; integers
 * exactly. Returns the elements outside; *max_err the largest |kernel - ref| (inf for a
 * NaN/inf mismatch), *first the first bad element. */
static int64_t compare(const pkrt_remote_tensor *t, const void *data, double *max_err,
                       int64_t *first) {
  int64_t bad = 0;
  for (int64_t i = 0; i < t->numel; i++) {
    double err;
    int ok;
    if (t->iref) {
      int64_t k = t->dtype == PKRT_DTYPE_I32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
      err = fabs((double)k - (double)t->iref[i]);
      ok = k == t->iref[i];
    } else {
      double k = element(t, data, i), r = t->ref[i];
      if (isnan(r)) ok = isnan(k), err = ok ? 0 : INFINITY;
      else if (isinf(r)) ok = k == r, err = ok ? 0 : INFINITY;
      else err = isnan(k) ? INFINITY : fabs(k - r), ok = err <= t->bound[i];
    }
    if (err > *max_err || isnan(err)) *max_err = err;
    if (!ok && bad++ == 0) *first = i;
  }
  return bad;
}

static char *mismatch_answer(const pkrt_remote_request *rq, int ti, const void *data,
                             int64_t first, int64_t bad, double max_err) {
  const pkrt_remote_tensor *t = &rq->tensors[ti];
  char msg[512];
  double r = t->iref ? (double)t->iref[first] : t->ref[first];
  snprintf(msg, sizeof msg, "tensor %d: element %lld: kernel %.9g, reference %.9g, bound %.3g "
           "(%lld of %lld elements differ)", ti, (long long)first, element(t, data, first), r,
           t->bound ? t->bound[first] : 0.0, (long long)bad, (long long)t->numel);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "status", "mismatch");
  if (isfinite(max_err)) cJSON_AddNumberToObject(o, "max_error", max_err);
  else cJSON_AddNullToObject(o, "max_error"); /* NaN or inf where a number was due */
  cJSON_AddStringToObject(o, "error", msg);
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return s;
}

static noreturn void measure_child(const pkrt_remote_request *rq, int fd, int fault) {
  /* the reply pipe alone: not the host's socket, not the listening one */
  if (fd != 3 && dup2(fd, 3) == 3) fd = 3;
  close_range((unsigned)fd + 1, ~0u, 0);
  if (fault == SERVE_FAULT_CRASH) raise(SIGSEGV);
  while (fault == SERVE_FAULT_HANG) pause();
  if (rq->pin) pk_measure_pin_thread();
  pkrt_ctx *rt = pkrt_ctx_new(1); /* no pool: parallel loops run inline, on one CPU */
  pkrt_module *mod;
  if (!rt) child_fail(fd, "error", "out of memory");
  if (pkrt_module_load_memory(rt, rq->object, rq->object_len, &mod) != PKRT_OK)
    child_fail(fd, "error", pkrt_ctx_error(rt));
  const pkrt_kernel_desc *k = pkrt_module_find(mod, rq->kernel);
  if (!k) child_fail(fd, "error", "the kernel object has no kernel of that name");
  if (k->workspace_bytes < 0 || k->workspace_bytes % 64)
    child_fail(fd, "error", "the kernel asks for a malformed workspace");
  void *ws = k->workspace_bytes ? aligned_alloc(64, (size_t)k->workspace_bytes) : NULL;
  if (k->workspace_bytes && !ws) child_fail(fd, "error", "out of memory for the workspace");
  if (ws) memset(ws, 0xff, (size_t)k->workspace_bytes); /* no reliance on zeros */
  pkrt_buffer bufs[PKRT_REMOTE_MAX_TENSORS];
  int64_t strides[PKRT_REMOTE_MAX_TENSORS][PKRT_REMOTE_MAX_DIMS];
  for (int i = 0; i < rq->ntensors; i++) {
    const pkrt_remote_tensor *t = &rq->tensors[i];
    size_t bytes = (size_t)t->numel * pkrt_dtype_size(t->dtype);
    void *d = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!d) child_fail(fd, "error", "out of memory for the task's buffers");
    /* inputs as sent; outputs NaN (all-ones bits): an element never written cannot pass */
    if (t->data) memcpy(d, t->data, bytes);
    else memset(d, 0xff, bytes);
    int64_t s = 1;
    for (int dd = t->ndim - 1; dd >= 0; dd--) strides[i][dd] = s, s *= t->shape[dd];
    bufs[i] = (pkrt_buffer){d, 0, t->shape, strides[i], t->ndim, (int32_t)t->dtype};
  }
  kernel_call kc = {k, bufs, rq->ntensors, ws, pkrt_ctx_exec(rt)};
  char msg[96];
  int rc = call_kernel(&kc);
  if (rc != 0) {
    snprintf(msg, sizeof msg, "the kernel returned status %d", rc);
    child_fail(fd, "error", msg);
  }
  double max_err = 0;
  int64_t first = -1, bad = 0;
  int bad_tensor = -1;
  for (int i = 0; i < rq->ntensors; i++) {
    const pkrt_remote_tensor *t = &rq->tensors[i];
    if (!t->ref && !t->iref) continue;
    int64_t f = -1, b = compare(t, bufs[i].data, &max_err, &f);
    if (b && bad_tensor < 0) bad_tensor = i, first = f;
    bad += b;
  }
  if (bad_tensor >= 0)
    child_finish(fd, mismatch_answer(rq, bad_tensor, bufs[bad_tensor].data, first, bad, max_err));
  pk_timing tm;
  rc = pk_measure(call_kernel, &kc, rq->min_ns, &tm);
  if (rc != 0) {
    snprintf(msg, sizeof msg, "the kernel returned status %d while being timed", rc);
    child_fail(fd, "error", msg);
  }
  char *answer;
  if (asprintf(&answer, "{\"status\":\"ok\",\"median_ns\":%.17g,\"min_ns\":%.17g,"
               "\"stddev_ns\":%.17g,\"repeats\":%d,\"max_error\":%.17g}", tm.median_ns,
               tm.min_ns, tm.stddev_ns, tm.repeats, max_err) < 0)
    answer = NULL;
  child_finish(fd, answer);
}

/* ---------------------------------------------------------------- MEASURE, the parent */

char *serve_measure_answer(const pkrt_remote_request *rq, int fault) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return serve_error_answer("error", "cannot make a pipe");
  pid_t parent = getpid();
  int64_t deadline = pkrt_now_ns() + (int64_t)(rq->timeout_s * 1e9);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* nothing outlives the connection that asked */
    if (getppid() != parent) _exit(127);
    measure_child(rq, fds[1], fault);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return serve_error_answer("error", "cannot fork a measuring process");
  }
  char *buf = malloc(PKRT_REMOTE_ANSWER_MAX + 1);
  size_t got = 0;
  bool timed_out = false;
  for (;;) {
    int64_t left_ms = (deadline - pkrt_now_ns()) / 1000000;
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    if (poll(&p, 1, left_ms > 60000 ? 60000 : (int)left_ms + 1) <= 0) continue;
    char sink[256];
    bool room = buf && got < PKRT_REMOTE_ANSWER_MAX;
    ssize_t n = read(fds[0], room ? buf + got : sink, room ? PKRT_REMOTE_ANSWER_MAX - got : sizeof sink);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; /* EOF: the child finished or died */
    if (room) got += (size_t)n;
  }
  if (timed_out) kill(pid, SIGKILL);
  close(fds[0]);
  int status = -1;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  char msg[160];
  if (timed_out) {
    snprintf(msg, sizeof msg, "ran past the time limit of %g s and was killed", rq->timeout_s);
    free(buf);
    return serve_error_answer("timeout", msg);
  }
  if (buf && got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    buf[got] = '\0';
    return buf;
  }
  free(buf);
  if (WIFSIGNALED(status)) {
    const char *name = sigabbrev_np(WTERMSIG(status));
    snprintf(msg, sizeof msg, "the measuring process died on SIG%s", name ? name : "?");
  } else {
    snprintf(msg, sizeof msg, "the measuring process exited (status %d) without a result",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return serve_error_answer("crashed", msg);
}
