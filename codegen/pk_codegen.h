/* pk_codegen.h — code generation: loop IR → C source, the host-compiler driver with a
 * content-hash build cache, and the glue that builds TE programs into a loaded module and
 * checks a kernel against the reference interpreter.
 *
 * Usage:
 *   pk_cc *cc;  pk_cc_new(ctx, NULL, &cc);             // default compiler, flags, cache
 *   pk_lfunc *f; pk_sched_lower(ctx, prog, NULL, "k0", &f);
 *   char *src;  pk_cgen_c(ctx, &f, 1, &src);
 *   pk_cc_result r; pk_cc_build(cc, src, &r);           // r.so_path, r.cache_hit
 *   pkrt_module *m; pkrt_module_load_file(rt, r.so_path, &m);   // the runtime's loader
 *   pk_kernel_check_result res; pk_kernel_check(ctx, rt, prog, pkrt_module_find(m, "k0"), 1, &res);
 */
#ifndef PK_CODEGEN_H
#define PK_CODEGEN_H

#include "pk_loopir.h"
#include "pk_target.h"
#include "pk_verify.h"

#define PK_CGEN_C_VERSION 5 /* bump when emitted C changes for the same trace (IR or emitter) */

/* Several kernels in one source: compiling one file is much cheaper than many. Function
 * names must be Pock-made identifiers ([a-z_][a-z0-9_]*). */
pk_status pk_cgen_c(pk_ctx *ctx, pk_lfunc *const *funcs, int n, char **source);
/* Shared by the C and GPU emitters: the C operator of a binary op ("+", "<=", "&&"; NULL
 * where C has none), and the name part of the prelude's helper for it ("add", "mod",
 * "max"; NULL where there is none). */
const char *pk_cgen_c_operator(pk_eop op);
const char *pk_cgen_helper_name(pk_eop op);

/* ---- host compiler driver ---- */
typedef struct pk_cc_options {
  const char *cc;        /* compiler; NULL: the target's (its --cc, $CC, else "cc") */
  const char *flags;     /* space-separated; NULL: PK_CC_DEFAULT_FLAGS, its -march=native
                            replaced by the target's CPU option */
  const char *cache_dir; /* NULL: $POCK_CACHE_DIR, $XDG_CACHE_HOME/pock, ~/.cache/pock, /tmp */
} pk_cc_options;

/* -fno-tree-loop-if-convert: GCC 12.2 at -O3 -march=native miscompiles
 * `c[i] = a[i] > 0 ? b[i] : 0` in short inner loops (a 5 x 7 nest drops 8 of 35 elements;
 * reproduced in tests/test_cc_select.c). Pock's own vectorizer does not rely on it. */
#define PK_CC_DEFAULT_FLAGS "-O3 -march=native -fno-tree-loop-if-convert -fPIC -fvisibility=hidden"

/* The build cache's directory when none is given: $POCK_CACHE_DIR, $XDG_CACHE_HOME/pock/
 * kernels, ~/.cache/pock/kernels, /tmp/pock-kernels-UID; and mkdir -p of a cache path. */
const char *pk_cache_dir_default(pk_ctx *ctx);
pk_status pk_cache_dir_make(pk_ctx *ctx, const char *path);

typedef struct pk_cc pk_cc;
typedef struct pk_cc_result {
  const char *so_path;   /* in the cache; valid while the ctx lives */
  const char *hash;      /* hex SHA-256 of source + compiler identity + flags */
  bool cache_hit;
  bool timed_out;        /* the build passed the time limit and was killed */
  double build_seconds;  /* 0 on a cache hit */
} pk_cc_result;

/* Runs argv (argv[0] looked up on PATH) without a shell, stdin from /dev/null; returns its
 * exit status (128 + signal when killed; -1 when it could not start) and its stdout and
 * stderr together in *output (in ctx). Nothing in argv is interpreted by a shell. */
int pk_run_capture(pk_ctx *ctx, char *const *argv, char **output);
/* The same with a time limit (timeout_s > 0): past it the process and its group are
 * killed and PK_RUN_TIMED_OUT is returned. */
#define PK_RUN_TIMED_OUT (-2)
int pk_run_capture_timeout(pk_ctx *ctx, char *const *argv, double timeout_s, char **output);

/* Finds the compiler and records its version (first line of `cc --version`); it builds for
 * this machine ("c") with no time limit. */
pk_status pk_cc_new(pk_ctx *ctx, const pk_cc_options *opts, pk_cc **out);
/* The same for target t (NULL: "c" for opts->cc) with a limit on each build (timeout_s
 * > 0; past it the compiler is killed). The backend (pk_backend.h) makes its own. */
pk_status pk_cc_new_target(pk_ctx *ctx, const pk_cc_options *opts, const pk_target *t,
                           double timeout_s, pk_cc **out);
const char *pk_cc_version(const pk_cc *cc);
const char *pk_cc_flags(const pk_cc *cc);
const pk_target *pk_cc_target(const pk_cc *cc);
pk_ctx *pk_cc_ctx(const pk_cc *cc); /* where its results and messages go */
double pk_cc_timeout(const pk_cc *cc);
void pk_cc_set_timeout(pk_cc *cc, double timeout_s); /* <= 0: no limit */
/* Builds (or finds in the cache) a shared object from source; the cache key holds the
 * source, compiler identity, flags, codegen version and target description. PK_ERR_BUILD
 * carries the compiler's first error lines; past the time limit, PK_ERR_BUILD says so and
 * out->timed_out is set. Safe for concurrent builders: results appear atomically. */
pk_status pk_cc_build(pk_cc *cc, const char *source, pk_cc_result *out);
/* The same for an object file (`-c`; out->so_path is the .o): one kernel of an artifact
 * built alone, so that an unchanged kernel is never compiled again (pk_backend_build). */
pk_status pk_cc_build_object(pk_cc *cc, const char *source, pk_cc_result *out);
/* Whether pk_cc_build_object would find source's object in the cache (builds nothing). */
bool pk_cc_object_cached(pk_cc *cc, const char *source);
/* Links objects made by pk_cc_build_object and one more source into a shared object,
 * cached by that source and the objects' names (content hashes). */
pk_status pk_cc_link(pk_cc *cc, const char *source, const char *const *objects, int n,
                     pk_cc_result *out);

/* ---- programs to a loaded module (through the backend of cc's target, pk_backend.h) ----
 * Lowers each program with the default schedule as kernel "k<i>", emits one source, builds
 * and loads it through the runtime's loader. */
pk_status pk_build_programs(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *const *progs,
                            int n, pkrt_module **out);

/* Each program lowered with its schedule (scheds NULL, or an entry NULL: the default) as
 * kernel "k<i>", in one source, built and loaded. */
pk_status pk_build_scheduled(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *const *progs,
                             pk_schedule *const *scheds, int n, pkrt_module **out);

/* ---- checking a kernel against the interpreter ---- */
typedef struct pk_kernel_check_result {
  int noutputs;
  double worst_ratio;     /* max over outputs of |err| / bound (<= 1 passes) */
  double worst_err;
  const char *worst_tensor;
} pk_kernel_check_result;

/* Random inputs from each placeholder's domain (seeded), runs the kernel and the
 * interpreter, and compares every compute output. PK_ERR_MISMATCH names the element. */
pk_status pk_kernel_check(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                          const pkrt_kernel_desc *k, uint64_t seed, pk_kernel_check_result *res);

/* The same for a kernel lowered with sched (NULL: the default schedule): outputs that the
 * schedule inlined are not compared; the kernel gets its workspace (64-byte aligned). */
pk_status pk_kernel_check_scheduled(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                                    const pk_schedule *sched, const pkrt_kernel_desc *k,
                                    uint64_t seed, pk_kernel_check_result *res);

/* The same against a reference the caller made: ref's inputs filled and the interpreter
 * already run (pk_te_interp_run), so several kernels of one program share one (slow)
 * interpreter run. */
pk_status pk_kernel_check_ref(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                              const pk_schedule *sched, const pkrt_kernel_desc *k,
                              const pk_te_ref *ref, pk_kernel_check_result *res);

/* Host buffers for running a kernel on a program's tensors (dense, 64-byte aligned). */
typedef struct pk_host_buffers {
  int n;
  pkrt_buffer *bufs;
  void **data;
} pk_host_buffers;
pk_status pk_host_buffers_new(pk_ctx *ctx, const pk_te_program *prog, pk_host_buffers *out);
void pk_host_buffers_free(pk_host_buffers *hb);
/* Compares every materialized compute of prog in hb (a kernel's results; sched NULL: all
 * of them, else not the inlined ones) with the interpreter's ref, within the error bound;
 * counts them and keeps the worst in res. PK_ERR_MISMATCH names the tensor and element.
 * The one comparison of every checker: C kernels, GPU kernels on a device, the barrier
 * checker. */
pk_status pk_check_outputs(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                           const pk_te_ref *ref, const pk_host_buffers *hb,
                           pk_kernel_check_result *res);

/* ---- C emitter options ----
 * Vectorized loops are emitted as GCC vector-extension code in parts as wide as one
 * hardware vector: GCC splits wider vector types badly (through memory), so the width
 * must match what the source is compiled for. */
typedef struct pk_cgen_c_options {
  int vector_bytes; /* 16 (SSE, NEON), 32 (AVX2), 64 (AVX-512); 0: the target's */
  const pk_target *target; /* NULL: this machine ("c") */
} pk_cgen_c_options;

pk_status pk_cgen_c_opts(pk_ctx *ctx, pk_lfunc *const *funcs, int n,
                         const pk_cgen_c_options *opts, char **source);

/* A source assembled kernel by kernel: pk_cgen_c is new + add each + source. A kernel the
 * emitter refuses leaves the unit as it was (status and message in ctx), so a caller can
 * try another schedule and every kernel is emitted once. label (may be NULL) names the
 * kernel in messages, e.g. a build that passed its time limit. A GPU target's unit
 * (pk_cgen_unit_new_gpu, pk_gpu.h) takes the same calls and makes CUDA C or OpenCL C. */
typedef struct pk_cgen_unit pk_cgen_unit;
pk_status pk_cgen_unit_new(pk_ctx *ctx, const pk_cgen_c_options *opts, pk_cgen_unit **out);
pk_status pk_cgen_unit_add(pk_cgen_unit *u, const pk_lfunc *f, const char *label);
int pk_cgen_unit_count(const pk_cgen_unit *u);
/* The kernel that made the most C ("k3 conv2d_grad1(conv3)"), its bytes; NULL if none. */
const char *pk_cgen_unit_largest(const pk_cgen_unit *u, size_t *bytes);
const char *pk_cgen_unit_kernel_name(const pk_cgen_unit *u, int i); /* "k3 matmul(fc1)" */
pk_status pk_cgen_unit_source(pk_cgen_unit *u, char **source);
/* Kernel i as a source of its own, for builds that cache each kernel's object
 * (pk_backend_build): emitted alone under a fixed name, so the text depends on the kernel
 * only, never on its place in the unit; *symbol is the hidden, hash-named alias the table
 * refers to. pk_cgen_unit_table_source writes the descriptor table (the same as
 * pk_cgen_unit_source's) over such kernels: kernel i is symbols[i]. */
pk_status pk_cgen_unit_kernel_source(pk_cgen_unit *u, int i, char **source,
                                     const char **symbol);
pk_status pk_cgen_unit_table_source(pk_cgen_unit *u, const char *const *symbols,
                                    char **source);
void pk_cgen_unit_free(pk_cgen_unit *u); /* NULL is ok */

#endif
