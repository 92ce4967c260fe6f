/* nvrtc.c — CUDA C → PTX and cubin through NVRTC, opened with dlopen at run time so that
 * Pock never links CUDA: a host without the toolkit builds everything else. The handle
 * and the entry points live in one pk_nvrtc (no global state). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "pk_gpu.h"

typedef int nvrtc_result;  /* nvrtcResult: 0 is NVRTC_SUCCESS */
typedef void *nvrtc_program;

struct pk_nvrtc {
  pk_ctx *ctx;
  void *lib;
  const char *path;
  const char *version;
  nvrtc_result (*version_fn)(int *, int *);
  nvrtc_result (*create)(nvrtc_program *, const char *, const char *, int, const char *const *,
                         const char *const *);
  nvrtc_result (*compile)(nvrtc_program, int, const char *const *);
  nvrtc_result (*log_size)(nvrtc_program, size_t *);
  nvrtc_result (*log)(nvrtc_program, char *);
  nvrtc_result (*ptx_size)(nvrtc_program, size_t *);
  nvrtc_result (*ptx)(nvrtc_program, char *);
  nvrtc_result (*cubin_size)(nvrtc_program, size_t *);
  nvrtc_result (*cubin)(nvrtc_program, char *);
  nvrtc_result (*destroy)(nvrtc_program *);
  const char *(*error_string)(nvrtc_result);
};

/* $POCK_NVRTC first (a path, or a name the loader finds), then the loader path, then the
 * toolkit's usual places. */
static const char *const lib_names[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
    "/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib/libnvrtc.so",
    "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so",
    "/usr/local/cuda/targets/aarch64-linux/lib/libnvrtc.so",
};

static void *sym(pk_nvrtc *nv, const char *name, bool *ok) {
  void *p = dlsym(nv->lib, name);
  if (!p) *ok = false;
  return p;
}

pk_status pk_nvrtc_open(pk_ctx *ctx, pk_nvrtc **out) {
  pk_nvrtc *nv = pk_alloc(ctx, sizeof *nv);
  memset(nv, 0, sizeof *nv);
  nv->ctx = ctx;
  const char *env = getenv("POCK_NVRTC");
  if (env && *env) {
    nv->lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!nv->lib)
      return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "cannot load NVRTC from $POCK_NVRTC (%s): %s",
                         env, dlerror());
    nv->path = pk_strdup(ctx, env);
  }
  for (size_t i = 0; !nv->lib && i < sizeof lib_names / sizeof *lib_names; i++) {
    nv->lib = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL);
    if (nv->lib) nv->path = lib_names[i];
  }
  if (!nv->lib)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED,
                       "cannot load NVRTC (tried libnvrtc.so, .so.13, .so.12, .so.11.2 and "
                       "/usr/local/cuda/lib64): install the CUDA toolkit or set $POCK_NVRTC");
  bool ok = true;
  *(void **)&nv->version_fn = sym(nv, "nvrtcVersion", &ok);
  *(void **)&nv->create = sym(nv, "nvrtcCreateProgram", &ok);
  *(void **)&nv->compile = sym(nv, "nvrtcCompileProgram", &ok);
  *(void **)&nv->log_size = sym(nv, "nvrtcGetProgramLogSize", &ok);
  *(void **)&nv->log = sym(nv, "nvrtcGetProgramLog", &ok);
  *(void **)&nv->ptx_size = sym(nv, "nvrtcGetPTXSize", &ok);
  *(void **)&nv->ptx = sym(nv, "nvrtcGetPTX", &ok);
  *(void **)&nv->cubin_size = sym(nv, "nvrtcGetCUBINSize", &ok);
  *(void **)&nv->cubin = sym(nv, "nvrtcGetCUBIN", &ok);
  *(void **)&nv->destroy = sym(nv, "nvrtcDestroyProgram", &ok);
  *(void **)&nv->error_string = sym(nv, "nvrtcGetErrorString", &ok);
  int major = 0, minor = 0;
  if (!ok || nv->version_fn(&major, &minor) != 0) {
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED,
                       "%s lacks the NVRTC entry points Pock needs (CUDA 11.2 or newer)", nv->path);
  }
  nv->version = pk_sprintf(ctx, "NVRTC %d.%d", major, minor);
  *out = nv;
  return PK_OK;
}

const char *pk_nvrtc_version(const pk_nvrtc *nv) { return nv->version; }

/* The library stays mapped: unloading libnvrtc would unload the libstdc++ it brought in,
 * whose exception pool leak checkers then report, and a process that compiled once
 * (the tuner, the driver) compiles again; dlopen of a mapped library is only a count. */
void pk_nvrtc_close(pk_nvrtc *nv) {
  if (nv) nv->lib = NULL;
}

/* "sm_87" -> 87; 0 when malformed. */
static int arch_number(const char *arch) {
  if (!arch || strncmp(arch, "sm_", 3) != 0 || !arch[3]) return 0;
  int n = 0;
  for (const char *p = arch + 3; *p; p++) {
    if (*p < '0' || *p > '9' || n > 1000) return 0;
    n = n * 10 + (*p - '0');
  }
  return n;
}

/* The log's first lines: enough to name the error, short enough for a message. */
static const char *log_head(pk_ctx *ctx, const char *log) {
  size_t n = strlen(log);
  if (n <= 1500) return log;
  return pk_sprintf(ctx, "%.1500s ...", log);
}

static pk_status compile_once(pk_nvrtc *nv, const char *source, const char *arch_opt,
                              nvrtc_program *prog, const char **log) {
  pk_ctx *ctx = nv->ctx;
  nvrtc_result r = nv->create(prog, source, "pock_kernels.cu", 0, NULL, NULL);
  if (r != 0)
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "%s: cannot create a program: %s", nv->version,
                       nv->error_string(r));
  const char *opts[] = {arch_opt, "--std=c++11"};
  r = nv->compile(*prog, 2, opts);
  size_t n = 0;
  char *text = NULL;
  if (nv->log_size(*prog, &n) == 0 && n > 0) {
    text = pk_alloc(ctx, n + 1);
    if (nv->log(*prog, text) != 0) text[0] = '\0';
    text[n] = '\0';
  }
  *log = text ? text : "";
  if (r != 0) {
    pk_status s = pk_ctx_fail(ctx, PK_ERR_BUILD, "%s (%s) failed: %s\n%s", nv->version, arch_opt,
                              nv->error_string(r), log_head(ctx, *log));
    nv->destroy(prog);
    return s;
  }
  return PK_OK;
}

pk_status pk_nvrtc_compile(pk_nvrtc *nv, const char *source, const char *arch,
                           pk_nvrtc_image *out) {
  pk_ctx *ctx = nv->ctx;
  memset(out, 0, sizeof *out);
  int num = arch_number(arch);
  if (!num)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "GPU arch '%s' is not of the form sm_NN", arch ? arch : "");
  nvrtc_program prog;
  const char *log = "";
  /* one compilation for the real arch gives the cubin and the PTX it was made from, the
   * fallback a newer device's driver can still compile */
  pk_status s = compile_once(nv, source, pk_sprintf(ctx, "--gpu-architecture=sm_%d", num), &prog, &log);
  if (s != PK_OK) return s;
  size_t n = 0, m = 0;
  if (nv->cubin_size(prog, &n) != 0 || n == 0 || nv->ptx_size(prog, &m) != 0 || m <= 1) {
    nv->destroy(&prog);
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "%s gave no cubin or PTX for %s", nv->version, arch);
  }
  char *cubin = pk_alloc(ctx, n), *ptx = pk_alloc(ctx, m + 1);
  nv->cubin(prog, cubin);
  nv->ptx(prog, ptx);
  ptx[m] = '\0';
  nv->destroy(&prog);
  out->cubin = cubin;
  out->cubin_size = n;
  out->ptx = ptx;
  out->ptx_size = strlen(ptx);
  out->log = log;
  const char *v = strstr(ptx, "\n.version ");
  size_t vn = v ? strcspn(v + 10, " \r\n") : 0;
  out->ptx_isa = v && vn < 16 ? pk_sprintf(ctx, "%.*s", (int)vn, v + 10) : "";
  out->arch = pk_sprintf(ctx, "sm_%d", num);
  out->nvrtc_version = nv->version;
  return PK_OK;
}
