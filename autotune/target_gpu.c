/* target_gpu.c — the fingerprint fields of GPU targets (opencl, cuda -arch=sm_NN): the
 * device the measurer times on (device 0 of the target's API, what the worker opens), asked
 * in a child process, so that the tuner never holds a CUDA context or an OpenCL runtime's
 * threads while it forks builders and its measurement worker. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdnoreturn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pkrt.h"
#include "pock/pkrt_gpu.h"
#include "target_impl.h"

#define PROBE_TIMEOUT_MS 30000 /* a driver that takes longer to list its devices is broken */

/* What the probe child sends back: device 0 of the API, or why there is none. */
typedef struct gpu_probe {
  int32_t ndevices;   /* -1: the API could not be asked (error says why) */
  pkrt_gpu_info info; /* device 0 when ndevices > 0 */
  char error[512];
} gpu_probe;

static noreturn void probe_main(pkrt_gpu_api api, int fd) {
  gpu_probe p = {.ndevices = -1};
  pkrt_ctx *rt = pkrt_ctx_new(1);
  int n = 0;
  if (!rt) snprintf(p.error, sizeof p.error, "out of memory");
  else if (pkrt_gpu_list(rt, api, &p.info, 1, &n) != PKRT_OK)
    snprintf(p.error, sizeof p.error, "%s", pkrt_ctx_error(rt));
  else p.ndevices = n;
  ssize_t w = write(fd, &p, sizeof p); /* below a pipe's capacity: one write */
  _exit(w == (ssize_t)sizeof p ? 0 : 1);
}

/* Runs the probe; false with *why when it could not say anything. */
static bool probe(pk_ctx *ctx, pkrt_gpu_api api, gpu_probe *p, const char **why) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = pk_sprintf(ctx, "cannot make a pipe: %s", strerror(errno));
    return false;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    probe_main(api, fds[1]);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    *why = pk_sprintf(ctx, "cannot fork the device probe: %s", strerror(errno));
    return false;
  }
  size_t got = 0;
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  while (got < sizeof *p) {
    int pr = poll(&pfd, 1, PROBE_TIMEOUT_MS);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) break; /* the driver hangs: killed below */
    ssize_t r = read(fds[0], (char *)p + got, sizeof *p - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fds[0]);
  if (got < sizeof *p) kill(pid, SIGKILL);
  int wstatus;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {}
  if (got == sizeof *p) return true;
  *why = "the device probe died or hung (the GPU driver crashed or did not answer in 30 s)";
  return false;
}

pk_status pk_target_fp_gpu_fields(pk_ctx *ctx, const pk_target *t, cJSON *must, cJSON *info) {
  bool cuda = t->kind == PK_TARGET_CUDA;
  pkrt_gpu_api api = cuda ? PKRT_GPU_CUDA : PKRT_GPU_OPENCL;
  gpu_probe p;
  const char *why = NULL;
  if (!probe(ctx, api, &p, &why) || p.ndevices < 0 || p.ndevices == 0) {
    if (!why) why = p.ndevices == 0 ? pk_sprintf(ctx, "no %s device", cuda ? "CUDA" : "OpenCL")
                                    : pk_strdup(ctx, p.error);
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED,
                       "target '%s': GPU records are measured on, and belong to, one device, "
                       "and this machine has none: %s", t->text, why);
  }
  const pkrt_gpu_info *d = &p.info;
  cJSON_AddStringToObject(must, "api", cuda ? "cuda" : "opencl");
  if (cuda) {
    /* the cubin is built for the target's arch: timing it on another is not its timing */
    const char *sm = pk_sprintf(ctx, "sm_%d", d->sm);
    if (strcmp(sm, t->arch) != 0)
      return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED,
                         "target '%s': CUDA device 0 (%s) is %s, not %s; tune for the GPU that "
                         "is here ('cuda -arch=%s') or on the device itself", t->text, d->name,
                         sm, t->arch, sm);
    cJSON_AddStringToObject(must, "arch", t->arch);
    cJSON_AddStringToObject(must, "driver", d->driver);
  } else {
    cJSON_AddStringToObject(must, "device_version", d->version);
  }
  cJSON_AddStringToObject(info, "device", d->name);
  cJSON_AddStringToObject(info, "vendor", d->vendor);
  cJSON_AddStringToObject(info, "platform", d->platform);
  cJSON_AddStringToObject(info, "driver", d->driver);
  cJSON_AddNumberToObject(info, "compute_units", d->compute_units);
  if (d->clock_mhz > 0) cJSON_AddNumberToObject(info, "clock_mhz", d->clock_mhz);
  if (d->memory_clock_mhz > 0) cJSON_AddNumberToObject(info, "memory_clock_mhz", d->memory_clock_mhz);
  cJSON_AddNumberToObject(info, "memory_bytes", (double)d->memory_bytes);
  return PK_OK;
}
