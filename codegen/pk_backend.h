/* pk_backend.h — one backend table per target kind (emit source, build, load, call or
 * launch, memory spaces), and the one emit-then-build sequence everything that builds a
 * kernel goes through: `pock te`, the tuner's measurer, the driver, the test glue.
 *
 * Usage:
 *   pk_target *t;   pk_target_parse(ctx, "c -march=haswell", NULL, &t);
 *   pk_backend *be; pk_backend_new(ctx, t, NULL, &be);      // default compiler, flags, limit
 *   pk_build_result r;
 *   pk_backend_build_funcs(be, funcs, n, &r);               // emit once, build (cached)
 *   pkrt_module *m; pk_backend_load(be, rt, &r, &m);        // the runtime's own loader
 *
 * Kernels added one by one (the driver checks each schedule as it picks it, and the same
 * text is what gets built):
 *   pk_cgen_unit *u; pk_backend_unit_new(be, &u);
 *   if (pk_cgen_unit_add(u, f, "matmul(fc1)") != PK_OK) ... try another schedule ...
 *   pk_backend_build(be, u, &r);
 *
 * With options.kernel_objects, a C unit of several kernels is built kernel by kernel: each
 * kernel alone into a cached object (pk_cc_build_object), then linked with the descriptor
 * table, so a kernel shared by another model, sparse scheme or optimizer is compiled once;
 * r.source is still the whole unit's text, for reading.
 *
 * The build has a time limit (options.build_timeout_s, PK_BUILD_TIMEOUT_S by default):
 * past it the compiler is killed and PK_ERR_BUILD names the kernel.
 * The runtime loads what a backend built with its own loader (pkrt_module_load_file or
 * _memory): the table's load and call entries are the runtime's, so the compiler times
 * kernels through the loader that ships. */
#ifndef PK_BACKEND_H
#define PK_BACKEND_H

#include "pk_codegen.h"

#define PK_BUILD_TIMEOUT_S 300.0 /* default build limit: a whole model's kernels at -O3 */
#define PK_BUILD_JOBS_MAX 64      /* compiler processes at once, at most */

typedef struct pk_backend_options {
  const char *cc;          /* C: compiler; NULL: the target's (its --cc, $CC, cc) */
  const char *flags;       /* C: NULL: PK_CC_DEFAULT_FLAGS with the target's CPU option */
  const char *cache_dir;   /* NULL: pk_cc_options' default */
  double build_timeout_s;  /* 0: PK_BUILD_TIMEOUT_S */
  bool kernel_objects;     /* C: build a unit of several kernels kernel by kernel into cached
                              objects (the driver: a model's kernels recur across models,
                              sparse schemes and optimizers); off, one source (tuning
                              candidates and tests, which seldom recur, build faster so) */
  int build_jobs;          /* kernel objects: compiler processes at once; 0: this machine's
                              processors (at most PK_BUILD_JOBS_MAX) */
} pk_backend_options;

/* What one build made. */
typedef struct pk_build_result {
  const char *source;    /* the emitted source (in the ctx) */
  const char *path;      /* the object in the cache; valid while the ctx lives */
  const char *hash;      /* its cache key: source, compiler, flags, codegen, target */
  bool cache_hit;
  bool timed_out;        /* failed: the build passed the time limit */
  double build_seconds;  /* 0 on a cache hit */
} pk_build_result;

typedef struct pk_backend pk_backend;

/* One row of the table. A kind whose entries are NULL is a slot for a later backend;
 * pk_backend_new refuses it with `missing`. The GPU rows emit and build (cubin + PTX
 * through NVRTC, OpenCL C source); loading and launching them is the GPU runtime's, and
 * pk_backend_load refuses them while those entries are NULL. */
typedef struct pk_backend_kind {
  pk_target_kind kind;
  const char *name;           /* "c", "cuda", "opencl" */
  const char *memory_spaces;  /* where buffers may live: "host"; GPU: "global shared local" */
  const char *missing;        /* why there is no backend yet, or NULL */
  pk_status (*emit_new)(pk_ctx *ctx, const pk_target *t, pk_cgen_unit **out);
  pk_status (*build)(pk_backend *be, const char *source, pk_cc_result *out);
  pkrt_status (*load)(pkrt_ctx *rt, const char *path, pkrt_module **out);
  int (*call)(pkrt_ctx *rt, const pkrt_kernel_desc *k, const pkrt_buffer *bufs,
              const int64_t *scalars, void *workspace);
} pk_backend_kind;

const pk_backend_kind *pk_backend_kind_of(pk_target_kind kind);

/* The backend for t (which must outlive it). PK_ERR_UNSUPPORTED for a kind that has no
 * backend yet; PK_ERR_BUILD when the compiler cannot run. */
pk_status pk_backend_new(pk_ctx *ctx, const pk_target *t, const pk_backend_options *opts,
                         pk_backend **out);
/* The backend of cc's target around a compiler the caller made (its flags, its limit);
 * results and messages go to cc's ctx. */
pk_status pk_backend_of_cc(pk_cc *cc, pk_backend **out);
const pk_target *pk_backend_target(const pk_backend *be);
const pk_backend_kind *pk_backend_table(const pk_backend *be);
pk_cc *pk_backend_cc(const pk_backend *be); /* C: the compiler driver (identity, flags); GPU: NULL */
double pk_backend_build_timeout(const pk_backend *be);

/* An empty source for this target (free it with pk_cgen_unit_free). */
pk_status pk_backend_unit_new(pk_backend *be, pk_cgen_unit **out);
/* Emits the unit's source and builds it (cached) within the time limit. */
pk_status pk_backend_build(pk_backend *be, pk_cgen_unit *u, pk_build_result *out);
/* Builds a source emitted earlier (the measurer's pre-made candidates). */
pk_status pk_backend_build_source(pk_backend *be, const char *source, pk_build_result *out);
/* funcs in one source, in order, built: the unit steps in one call. */
pk_status pk_backend_build_funcs(pk_backend *be, pk_lfunc *const *funcs, int n,
                                 pk_build_result *out);
/* Loads what was built through the runtime's loader; errors into the backend's ctx. */
pk_status pk_backend_load(pk_backend *be, pkrt_ctx *rt, const pk_build_result *built,
                          pkrt_module **out);
/* Calls (C) or launches (GPU) one kernel on buffers of the target's memory space; the
 * kernel's own status (PKRT_KERNEL_OK is 0). */
int pk_backend_call(const pk_backend *be, pkrt_ctx *rt, const pkrt_kernel_desc *k,
                    const pkrt_buffer *bufs, const int64_t *scalars, void *workspace);

#endif
