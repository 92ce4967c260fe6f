/* backend.c — the backend table (C; CUDA and OpenCL emit and build, their load and call
 * come with GPU artifacts) and the one emit-then-build sequence: a unit of kernels emitted
 * once, built within the time limit (a C unit's kernel objects by several compilers at
 * once), loaded through the runtime's loader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_backend.h"
#include "pk_gpu.h"

struct pk_backend {
  pk_ctx *ctx;
  const pk_target *target;
  const pk_backend_kind *kind;
  pk_cc *cc;           /* C only */
  const char *cache_dir; /* GPU: where images go (NULL: the default) */
  double timeout_s;    /* GPU: the build limit it was given */
  bool kernel_objects; /* pk_backend_options.kernel_objects */
  int build_jobs;      /* compiler processes at once for kernel objects (>= 1) */
};

static pk_status c_emit_new(pk_ctx *ctx, const pk_target *t, pk_cgen_unit **out) {
  pk_cgen_c_options o = {.target = t};
  return pk_cgen_unit_new(ctx, &o, out);
}

static int c_call(pkrt_ctx *rt, const pkrt_kernel_desc *k, const pkrt_buffer *bufs,
                  const int64_t *scalars, void *workspace) {
  return k->fn(bufs, k->nbufs, scalars, k->nscalars, workspace, pkrt_ctx_exec(rt));
}

static pk_status c_build(pk_backend *be, const char *source, pk_cc_result *out) {
  return pk_cc_build(be->cc, source, out);
}

static pk_status gpu_build(pk_backend *be, const char *source, pk_cc_result *out) {
  return pk_gpu_build_image(be->ctx, be->target, be->cache_dir, source, out);
}

static const pk_backend_kind kinds[] = {
    {PK_TARGET_C, "c", "host", NULL, c_emit_new, c_build, pkrt_module_load_file, c_call},
    {PK_TARGET_CUDA, "cuda", "global shared local", NULL, pk_cgen_unit_new_gpu, gpu_build, NULL,
     NULL},
    {PK_TARGET_OPENCL, "opencl", "global local private", NULL, pk_cgen_unit_new_gpu, gpu_build,
     NULL, NULL},
};

const pk_backend_kind *pk_backend_kind_of(pk_target_kind kind) {
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i].kind == kind) return &kinds[i];
  return NULL;
}

pk_status pk_backend_new(pk_ctx *ctx, const pk_target *t, const pk_backend_options *opts,
                         pk_backend **out) {
  const pk_backend_kind *k = pk_backend_kind_of(t->kind);
  PK_ASSERT(k);
  if (k->missing)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "target '%s': %s", t->text, k->missing);
  pk_backend *be = pk_alloc(ctx, sizeof *be);
  *be = (pk_backend){.ctx = ctx, .target = t, .kind = k,
                     .kernel_objects = opts && opts->kernel_objects,
                     .build_jobs = opts && opts->build_jobs > 0 ? opts->build_jobs : 0};
  if (!be->build_jobs) { /* this machine's processors, at most PK_BUILD_JOBS_MAX */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    be->build_jobs = cpus < 1 ? 1 : cpus > PK_BUILD_JOBS_MAX ? PK_BUILD_JOBS_MAX : (int)cpus;
  }
  double limit = opts && opts->build_timeout_s > 0 ? opts->build_timeout_s : PK_BUILD_TIMEOUT_S;
  be->timeout_s = limit;
  if (t->kind != PK_TARGET_C) { /* NVRTC runs in this process; OpenCL C is kept as source */
    be->cache_dir = opts && opts->cache_dir ? pk_strdup(ctx, opts->cache_dir) : NULL;
    *out = be;
    return PK_OK;
  }
  pk_cc_options co = {.cc = opts ? opts->cc : NULL, .flags = opts ? opts->flags : NULL,
                      .cache_dir = opts ? opts->cache_dir : NULL};
  pk_status s = pk_cc_new_target(ctx, &co, t, limit, &be->cc);
  if (s != PK_OK) return s;
  *out = be;
  return PK_OK;
}

/* For callers that made their own pk_cc (tests, `pock te --cc --cflags`, the measurer):
 * its target's backend around it, reporting where the compiler does. */
pk_status pk_backend_of_cc(pk_cc *cc, pk_backend **out) {
  pk_ctx *ctx = pk_cc_ctx(cc);
  const pk_target *t = pk_cc_target(cc);
  pk_backend *be = pk_alloc(ctx, sizeof *be);
  *be = (pk_backend){.ctx = ctx, .target = t, .kind = pk_backend_kind_of(t->kind), .cc = cc};
  *out = be;
  return PK_OK;
}

const pk_target *pk_backend_target(const pk_backend *be) { return be->target; }
const pk_backend_kind *pk_backend_table(const pk_backend *be) { return be->kind; }
pk_cc *pk_backend_cc(const pk_backend *be) { return be->cc; }
double pk_backend_build_timeout(const pk_backend *be) {
  return be->cc ? pk_cc_timeout(be->cc) : be->timeout_s;
}

pk_status pk_backend_unit_new(pk_backend *be, pk_cgen_unit **out) {
  return be->kind->emit_new(be->ctx, be->target, out);
}

static pk_status build_text(pk_backend *be, const char *source, pk_cgen_unit *u,
                            pk_build_result *out) {
  memset(out, 0, sizeof *out);
  out->source = source;
  pk_cc_result r;
  pk_status s = be->kind->build(be, source, &r);
  out->timed_out = s != PK_OK && r.timed_out;
  if (out->timed_out) {
    /* One source holds many kernels; the one with the most code is the likely culprit. */
    size_t bytes = 0;
    const char *big = u ? pk_cgen_unit_largest(u, &bytes) : NULL;
    const char *why = pk_strdup(be->ctx, pk_ctx_error(be->ctx));
    if (big) pk_ctx_clear_error(be->ctx); /* the first failure wins: restate it */
    if (big && pk_cgen_unit_count(u) == 1)
      return pk_ctx_fail(be->ctx, PK_ERR_BUILD, "building kernel %s (%zu bytes of C): %s", big,
                         bytes, why);
    if (big)
      return pk_ctx_fail(be->ctx, PK_ERR_BUILD,
                         "building %d kernels: %s; the largest is kernel %s (%zu bytes of C)",
                         pk_cgen_unit_count(u), why, big, bytes);
  }
  if (s != PK_OK) return s;
  out->path = r.so_path;
  out->hash = r.hash;
  out->cache_hit = r.cache_hit;
  out->build_seconds = r.build_seconds;
  return PK_OK;
}

/* Whether this process runs one thread: fork copies only the caller, so a lock another
 * thread held (malloc's) would stay taken in the child. */
static bool single_threaded(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[128];
  int threads = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Threads:", 8)) threads = atoi(line + 8);
  if (f) fclose(f);
  return threads == 1;
}

/* Warms the object cache with be->build_jobs compilers at once: forked children each build
 * every jobs-th kernel the cache lacks (cc_cached gives every builder its own temporaries
 * and moves objects in atomically, so concurrent builders are safe). The serial loop after
 * it finds them cached; a kernel a child could not build, it builds again and reports
 * itself. Returns how many were missing. */
static int prebuild_objects(pk_backend *be, pk_cgen_unit *u, int n) {
  int *miss = pk_alloc(be->ctx, sizeof(int) * (size_t)(n + 1)), nmiss = 0;
  for (int i = 0; i < n; i++) {
    char *src;
    const char *sym;
    if (pk_cgen_unit_kernel_source(u, i, &src, &sym) == PK_OK && !pk_cc_object_cached(be->cc, src))
      miss[nmiss++] = i;
  }
  pk_ctx_clear_error(be->ctx); /* a kernel without source is the serial loop's to report */
  int jobs = be->build_jobs < nmiss ? be->build_jobs : nmiss;
  if (jobs < 2 || !single_threaded()) return nmiss;
  fflush(NULL); /* nothing buffered is written twice */
  pid_t pids[PK_BUILD_JOBS_MAX];
  int started = 0;
  for (int j = 0; j < jobs; j++) {
    pid_t pid = fork();
    if (pid < 0) break; /* the serial loop builds what is left */
    if (pid == 0) {
      for (int k = j; k < nmiss; k += jobs) {
        char *src;
        const char *sym;
        pk_cc_result r;
        if (pk_cgen_unit_kernel_source(u, miss[k], &src, &sym) == PK_OK)
          pk_cc_build_object(be->cc, src, &r);
      }
      _exit(0);
    }
    pids[started++] = pid;
  }
  for (int j = 0; j < started; j++)
    while (waitpid(pids[j], NULL, 0) < 0 && errno == EINTR) {
    }
  return nmiss;
}

/* A C unit of several kernels: each kernel compiled alone into a cached object, then the
 * objects linked with the descriptor table. A kernel that did not change is never compiled
 * again — across sparse schemes, optimizers and models that share layers — at the price of
 * the compiler's start-up once per kernel on a cold cache. */
static pk_status build_c_kernels(pk_backend *be, pk_cgen_unit *u, pk_build_result *out) {
  pk_ctx *ctx = be->ctx;
  int n = pk_cgen_unit_count(u);
  const char **symbols = pk_alloc(ctx, sizeof *symbols * (size_t)n);
  const char **objects = pk_alloc(ctx, sizeof *objects * (size_t)n);
  int nobj = 0;
  bool all_hits = true;
  double seconds = 0;
  int64_t t0 = pkrt_now_ns();
  bool missing = prebuild_objects(be, u, n) > 0;
  double parallel_seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  for (int i = 0; i < n; i++) {
    char *src;
    pk_status s = pk_cgen_unit_kernel_source(u, i, &src, &symbols[i]);
    if (s != PK_OK) return s;
    bool seen = false; /* identical kernels: one object */
    for (int j = 0; j < i && !seen; j++) seen = strcmp(symbols[i], symbols[j]) == 0;
    if (seen) continue;
    pk_cc_result r;
    s = pk_cc_build_object(be->cc, src, &r);
    if (s != PK_OK) {
      out->timed_out = r.timed_out;
      const char *why = pk_strdup(ctx, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx); /* restated with the kernel it is about */
      return pk_ctx_fail(ctx, PK_ERR_BUILD, "building kernel %s (%d of %d): %s",
                         pk_cgen_unit_kernel_name(u, i), i + 1, n, why);
    }
    objects[nobj++] = r.so_path;
    all_hits = all_hits && r.cache_hit;
    seconds += r.build_seconds;
  }
  char *table;
  pk_status s = pk_cgen_unit_table_source(u, symbols, &table);
  pk_cc_result r;
  if (s == PK_OK) s = pk_cc_link(be->cc, table, objects, nobj, &r);
  if (s != PK_OK) return s;
  out->path = r.so_path;
  out->hash = r.hash;
  out->cache_hit = all_hits && !missing && r.cache_hit;
  out->build_seconds = parallel_seconds + seconds + r.build_seconds;
  return PK_OK;
}

pk_status pk_backend_build(pk_backend *be, pk_cgen_unit *u, pk_build_result *out) {
  char *source;
  pk_status s = pk_cgen_unit_source(u, &source);
  if (s != PK_OK) return s;
  if (!be->kernel_objects || be->kind->kind != PK_TARGET_C || pk_cgen_unit_count(u) < 2)
    return build_text(be, source, u, out);
  memset(out, 0, sizeof *out);
  out->source = source; /* what a reader inspects; built kernel by kernel */
  return build_c_kernels(be, u, out);
}

pk_status pk_backend_build_source(pk_backend *be, const char *source, pk_build_result *out) {
  return build_text(be, source, NULL, out);
}

pk_status pk_backend_build_funcs(pk_backend *be, pk_lfunc *const *funcs, int n,
                                 pk_build_result *out) {
  pk_cgen_unit *u = NULL;
  pk_status s = pk_backend_unit_new(be, &u);
  for (int i = 0; i < n && s == PK_OK; i++) s = pk_cgen_unit_add(u, funcs[i], NULL);
  if (s == PK_OK) s = pk_backend_build(be, u, out);
  pk_cgen_unit_free(u);
  return s;
}

pk_status pk_backend_load(pk_backend *be, pkrt_ctx *rt, const pk_build_result *built,
                          pkrt_module **out) {
  if (!be->kind->load)
    return pk_ctx_fail(be->ctx, PK_ERR_UNSUPPORTED, "target '%s': loading %s kernels is the GPU "
                       "runtime's, which this build lacks", be->target->text, be->kind->name);
  if (be->kind->load(rt, built->path, out) != PKRT_OK)
    return pk_ctx_fail(be->ctx, PK_ERR_RUNTIME, "%s", pkrt_ctx_error(rt));
  return PK_OK;
}

int pk_backend_call(const pk_backend *be, pkrt_ctx *rt, const pkrt_kernel_desc *k,
                    const pkrt_buffer *bufs, const int64_t *scalars, void *workspace) {
  if (!be->kind->call) return PKRT_KERNEL_BAD_ARGS; /* GPU: launched by the GPU runtime */
  return be->kind->call(rt, k, bufs, scalars, workspace);
}
