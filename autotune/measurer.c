/* measurer.c — the measurer's life cycle: settings, the compiler driver, forking the
 * measurement worker before anything else can start a thread, stopping and reaping it, and
 * the getters that say, for records, how candidates were measured. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "measure_impl.h"
#include "pk_gpu.h"

void pk_measure_settings_default(pk_measure_settings *s) {
  *s = (pk_measure_settings){.min_ns = PK_MEASURE_MIN_NS, .timeout_s = 10,
                             .build_timeout_s = 120, .pin = true, .seed = 1};
}

static int usable_cpus(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0)
    return CPU_COUNT(&allowed);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* The CPU pk_measure_pin_thread will choose in the children (the last one this process
 * may use; they inherit its affinity), for the records' settings. */
static int pin_cpu(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  for (int c = CPU_SETSIZE - 1; c >= 0; c--)
    if (CPU_ISSET(c, &allowed)) return c;
  return -1;
}

static pk_status check_settings(pk_ctx *ctx, const pk_measure_settings *s) {
  if (s->min_ns < 0) return pk_ctx_fail(ctx, PK_ERR_USAGE, "measurer: min_ns must be >= 0");
  if (!(s->timeout_s > 0) || s->timeout_s > 1e6)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "measurer: the timeout must be > 0 s (got %g)", s->timeout_s);
  if (!(s->build_timeout_s > 0) || s->build_timeout_s > 1e6)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "measurer: the build timeout must be > 0 s (got %g)",
                       s->build_timeout_s);
  if (s->jobs < 0) return pk_ctx_fail(ctx, PK_ERR_USAGE, "measurer: jobs must be >= 0");
  return PK_OK;
}

/* Threads in this process (from /proc; 1 when it cannot tell). */
static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n > 0 ? n : 1;
}

static pk_status start_worker(pk_measurer *m) {
  /* A fork copies only the calling thread: a lock another thread held (malloc's, stdio's)
   * stays held in the copy forever, and the worker would hang on it some day. */
  int threads = thread_count();
  if (threads > 1)
    return pk_ctx_fail(m->ctx, PK_ERR_USAGE, "measurer: this process already runs %d threads; "
                       "create the measurer before starting any (it forks its worker)", threads);
  int sv[2];
  /* CLOEXEC: compilers spawned later must not hold the link open (the worker's EOF). */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return pk_ctx_fail(m->ctx, PK_ERR_IO, "measurer: cannot make a socket pair: %s", strerror(errno));
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    meas_close_fds_except(&sv[1], 1); /* the tuner's database, logs, ... are not the worker's */
    meas_die_with_parent(parent);
    meas_worker_main(sv[1]);
  }
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return pk_ctx_fail(m->ctx, PK_ERR_IO, "measurer: cannot fork the worker: %s", strerror(errno));
  }
  m->worker = pid;
  m->link = sv[0];
  return PK_OK;
}

pk_status pk_measurer_new(pk_ctx *ctx, const pk_measure_settings *settings, pk_measurer **out) {
  *out = NULL;
  pk_measure_settings defaults;
  pk_measure_settings_default(&defaults);
  if (!settings) settings = &defaults;
  pk_status s = check_settings(ctx, settings);
  if (s != PK_OK) return s;
  pk_measurer *m = calloc(1, sizeof *m);
  if (!m) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "measurer: out of memory");
  *m = (pk_measurer){.ctx = ctx, .own = pk_ctx_new(), .settings = *settings, .worker = -1, .link = -1};
  m->jobs = settings->jobs > 0 ? settings->jobs : usable_cpus();
  m->gpu = settings->target && settings->target->kind != PK_TARGET_C;
  m->pinned_cpu = settings->pin && !settings->remote && !m->gpu ? pin_cpu() : -1;
  /* a remote record says where it was measured (its CPU is the server's choice) */
  const char *remote = settings->remote
      ? pk_sprintf(ctx, ",\"remote\":\"%s\"", pk_remote_name(settings->remote)) : "";
  if (m->gpu) /* device 0 of the API, each launch timed by the device's events */
    m->settings_json = pk_sprintf(ctx,
        "{\"min_ns\":%lld,\"min_repeats\":5,\"warmup\":1,\"stat\":\"median\",\"timeout_s\":%g,"
        "\"timer\":\"device events\",\"device\":0,\"seed\":%llu}",
        (long long)settings->min_ns, settings->timeout_s, (unsigned long long)settings->seed);
  else
    m->settings_json = pk_sprintf(ctx,
        "{\"min_ns\":%lld,\"min_repeats\":5,\"warmup\":1,\"stat\":\"median\",\"timeout_s\":%g,"
        "\"pin\":%s,\"cpu\":%d,\"threads\":1,\"seed\":%llu%s}",
        (long long)settings->min_ns, settings->timeout_s, settings->pin ? "true" : "false",
        m->pinned_cpu, (unsigned long long)settings->seed, remote);
  /* Finding the compiler spawns `cc --version` and waits: no thread, so the order does not
   * matter for the worker; first, so a missing compiler leaves no process behind. */
  if (m->gpu && settings->remote) {
    s = pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "measurer: target '%s': remote tuning measures C "
                    "targets only; tune a GPU on the machine that has it", settings->target->text);
  } else if (m->gpu) { /* NVRTC or the OpenCL driver builds; the builders write the images */
    pk_backend_options bo = {.cache_dir = settings->cc.cache_dir,
                             .build_timeout_s = settings->build_timeout_s};
    s = pk_backend_new(m->own, settings->target, &bo, &m->backend);
    if (s == PK_OK) s = meas_gpu_compiler(m->own, settings->target, &m->compiler);
    if (s != PK_OK) s = pk_ctx_fail(ctx, s, "measurer: %s", pk_ctx_error(m->own));
    if (s == PK_OK) m->compiler = pk_strdup(ctx, m->compiler), m->flags = "";
  } else {
    s = pk_cc_new_target(m->own, &settings->cc, settings->target, settings->build_timeout_s, &m->cc);
    if (s == PK_OK) s = pk_backend_of_cc(m->cc, &m->backend);
    if (s != PK_OK) s = pk_ctx_fail(ctx, s, "%s", pk_ctx_error(m->own));
    if (s == PK_OK) { /* in ctx: records may outlive the measurer */
      m->compiler = pk_strdup(ctx, pk_cc_version(m->cc));
      m->flags = pk_strdup(ctx, pk_cc_flags(m->cc));
    }
  }
  if (s == PK_OK && !settings->remote) s = start_worker(m);
  if (s != PK_OK) {
    pk_measurer_free(m);
    return s;
  }
  *out = m;
  return PK_OK;
}

void pk_measurer_free(pk_measurer *m) {
  if (!m) return;
  /* EOF on its link is the worker's signal to finish the candidate at hand and exit. */
  if (m->link >= 0) close(m->link);
  if (m->worker > 0) meas_wait(m->worker);
  meas_remote_free(m);
  pk_ctx_free(m->own);
  free(m);
}

const char *pk_measurer_compiler(const pk_measurer *m) { return m->compiler; }
const char *pk_measurer_flags(const pk_measurer *m) { return m->flags; }
int pk_measurer_codegen_version(const pk_measurer *m) {
  return m->gpu ? PK_CGEN_GPU_VERSION : PK_CGEN_C_VERSION;
}
const char *pk_measurer_settings_json(const pk_measurer *m) { return m->settings_json; }
int pk_measurer_worker_pid(const pk_measurer *m) { return (int)m->worker; }

void pk_measurer_fill_record(const pk_measurer *m, pk_record *r) {
  r->compiler = pk_measurer_compiler(m);
  r->flags = pk_measurer_flags(m);
  r->codegen_version = pk_measurer_codegen_version(m);
  r->measure_settings = pk_measurer_settings_json(m);
  r->arch = m->gpu ? m->settings.target->arch : NULL;
  r->timing_method = m->gpu ? "device events" : NULL;
}
