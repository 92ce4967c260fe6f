/* pk_gpu.h — GPU code generation: loop IR with block/thread bindings → CUDA C or OpenCL C
 * from one emitter (the dialect differences are one table in emit_gpu.c), the lowering
 * check that gives a kernel its launch geometry or refuses what a GPU cannot run, NVRTC
 * (CUDA C → PTX and cubin, libnvrtc opened at run time), and the barrier checker: a loop-IR
 * executor that runs each block's threads in forward, reversed or random order between
 * barriers and compares the result with the reference interpreter.
 *
 * Usage:
 *   pk_lfunc *f; pk_sched_lower(ctx, prog, sched, "k0", &f);   // sched binds loops
 *   pk_gpu_kernel k;
 *   if (pk_gpu_prepare(ctx, f, &k) != PK_OK) ...     // PK_ERR_SCHEDULE: what the GPU cannot run
 *   k.desc.grid, k.desc.block;                        // the launch
 *   char *src; pk_cgen_gpu(ctx, PK_GPU_CUDA, &k, 1, &src);
 *   pk_nvrtc *nv; pk_nvrtc_open(ctx, &nv);            // PK_ERR_UNSUPPORTED: no libnvrtc
 *   pk_nvrtc_image img; pk_nvrtc_compile(nv, src, "sm_87", &img);   // img.ptx, img.cubin
 *   pk_gpu_exec_result r;
 *   pk_gpu_check(ctx, prog, sched, &k, PK_GPU_ORDER_RANDOM, seed, NULL, &r); // barrier checker
 *   pk_gpu_device_check(ctx, rt, gpu, prog, sched, &k, src, seed, &res);  // on a real device
 *
 * Semantics of GPU loop IR (what the emitter and the executor both implement): every
 * thread of every block runs the whole body; a loop bound to blockIdx/threadIdx d is
 * that index (`if (v < extent)` when the launch is wider); a barrier waits for every
 * thread of the block; SHARED buffers are one per block, LOCAL ones one per thread. */
#ifndef PK_GPU_H
#define PK_GPU_H

#include "pk_codegen.h"
#include "pk_measure.h"
#include "pk_schedule.h"
#include "pock/pkrt_gpu.h"

typedef enum pk_gpu_dialect { PK_GPU_CUDA, PK_GPU_OPENCL } pk_gpu_dialect;

/* pkrt_gpu_kernel_desc, the launch the runtime takes: pock/pkrt_gpu.h (included above) */

/* What a GPU may not exceed (the smallest of CUDA's limits and OpenCL's minimums that
 * matter here); presets and config spaces stay inside them. */
#define PK_GPU_MAX_THREADS 1024        /* threads per block */
#define PK_GPU_MAX_SHARED_BYTES 49152  /* static shared memory per block */

/* A lowered kernel made ready for a GPU: its body with the one-thread nests bound to
 * thread 0 of block 0 and barriers between the root nests, and its launch. */
typedef struct pk_gpu_kernel {
  const pk_lfunc *f;          /* the prepared function (a copy; the input is unchanged) */
  pkrt_gpu_kernel_desc desc;  /* grid, block, name, counts; shared_bytes 0 */
  int64_t static_shared_bytes;/* the SHARED buffers the kernel declares */
  bool uses_f64;              /* OpenCL: needs cl_khr_fp64 */
} pk_gpu_kernel;

/* The lowering check. PK_ERR_SCHEDULE names what a GPU cannot run: a CPU parallel loop, a
 * block loop inside a bound loop, a barrier some threads of a block would skip, a local
 * buffer that threads share, a workspace stage inside bound loops, blocks that would have
 * to wait for each other, too many threads or too much shared memory. A kernel with no
 * bound loops is fine: it runs on one thread. */
pk_status pk_gpu_prepare(pk_ctx *ctx, const pk_lfunc *f, pk_gpu_kernel *out);

/* n prepared kernels in one source of the dialect. */
pk_status pk_cgen_gpu(pk_ctx *ctx, pk_gpu_dialect d, const pk_gpu_kernel *kernels, int n,
                      char **source);

#define PK_CGEN_GPU_VERSION 2 /* bump when emitted GPU code changes for the same trace */

/* The backend table's unit for a GPU target: pk_cgen_unit_add prepares and emits each
 * kernel (a refused one leaves the unit as it was), pk_cgen_unit_source gives the whole
 * source, pk_cgen_unit_gpu_kernel each kernel's launch. */
pk_status pk_cgen_unit_new_gpu(pk_ctx *ctx, const pk_target *t, pk_cgen_unit **out);
const pk_gpu_kernel *pk_cgen_unit_gpu_kernel(const pk_cgen_unit *u, int i); /* NULL: C unit */

/* What pk_cgen_unit forwards to for a GPU target (emit_gpu.c). */
typedef struct pk_gpu_unit pk_gpu_unit;
pk_status pk_gpu_unit_new(pk_ctx *ctx, const pk_target *t, pk_gpu_unit **out);
pk_status pk_gpu_unit_add(pk_gpu_unit *u, const pk_lfunc *f, const char *label);
int pk_gpu_unit_count(const pk_gpu_unit *u);
const pk_gpu_kernel *pk_gpu_unit_kernel(const pk_gpu_unit *u, int i);
const char *pk_gpu_unit_kernel_name(const pk_gpu_unit *u, int i);
size_t pk_gpu_unit_bytes(const pk_gpu_unit *u, int i);
pk_status pk_gpu_unit_source(pk_gpu_unit *u, char **source);

/* ---- NVRTC (nvrtc.c): libnvrtc opened with dlopen, never linked ---- */
typedef struct pk_nvrtc pk_nvrtc;
/* Opens libnvrtc (the loader path, then /usr/local/cuda/lib64 and /usr/local/cuda/lib);
 * PK_ERR_UNSUPPORTED saying which names were tried when none loads. */
pk_status pk_nvrtc_open(pk_ctx *ctx, pk_nvrtc **out);
const char *pk_nvrtc_version(const pk_nvrtc *nv); /* "NVRTC 13.0" */
typedef struct pk_nvrtc_image {
  const char *arch;       /* "sm_87" */
  const char *ptx;        /* NUL-terminated */
  size_t ptx_size;
  const void *cubin;      /* for exactly arch */
  size_t cubin_size;
  const char *log;        /* NVRTC's log (may be empty) */
  const char *nvrtc_version;
  const char *ptx_isa;    /* the PTX's ".version" ("9.0"): a driver older than it cannot
                             compile the PTX, which the runtime says naming both */
} pk_nvrtc_image;
/* Compiles CUDA C for arch ("sm_NN") to PTX and cubin (in nv's ctx). PK_ERR_BUILD quotes
 * NVRTC's log; PK_ERR_USAGE for an arch NVRTC does not know. */
pk_status pk_nvrtc_compile(pk_nvrtc *nv, const char *source, const char *arch,
                           pk_nvrtc_image *out);
void pk_nvrtc_close(pk_nvrtc *nv); /* NULL is ok; the library stays mapped (nvrtc.c) */

/* The GPU rows' build (gpu_build.c): CUDA through NVRTC into <cache>/<hash>.cubin (for
 * t->arch) and <hash>.ptx, out->so_path the cubin; OpenCL the source as <hash>.cl. The hash
 * covers the source, the target, the GPU codegen version and the NVRTC version. cache_dir
 * NULL: pk_cache_dir_default. PK_ERR_UNSUPPORTED when NVRTC cannot be loaded. */
pk_status pk_gpu_build_image(pk_ctx *ctx, const pk_target *t, const char *cache_dir,
                             const char *source, pk_cc_result *out);

/* ---- the barrier checker (gpu_exec.c) ---- */
typedef enum pk_gpu_order {
  PK_GPU_ORDER_FORWARD,   /* threads 0, 1, ... between barriers (what PoCL does) */
  PK_GPU_ORDER_REVERSED,  /* last thread first */
  PK_GPU_ORDER_RANDOM     /* a fresh permutation (seeded) after every barrier */
} pk_gpu_order;

/* Runs the prepared kernel on the CPU, thread by thread between barriers in the given
 * order (blocks one after another, shared and workspace memory filled with NaN first), on
 * seeded random inputs, and compares every materialized output with the interpreter
 * (ref NULL: filled and run here). PK_ERR_MISMATCH names the element; PK_ERR_RUNTIME a
 * barrier reached by only some threads, or an index outside its buffer. */
typedef struct pk_gpu_exec_result {
  double worst_ratio;  /* max |err| / bound over the outputs (<= 1 passes) */
  int64_t barriers;    /* barrier phases run, over all blocks */
} pk_gpu_exec_result;
pk_status pk_gpu_check(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                       const pk_gpu_kernel *k, pk_gpu_order order, uint64_t seed,
                       const pk_te_ref *ref, pk_gpu_exec_result *res);

/* ---- checking on a real device (gpu_device_check.c): the GPU twin of pk_kernel_check ---- */
/* Loads n prepared kernels (distinct names) emitted as one source in the device's dialect
 * as one module on g: OpenCL builds the source, CUDA compiles it with NVRTC for the
 * device's sm_NN first. The descriptors are copied into ctx (the module keeps them).
 * Errors name the kernels ("k0 ... k63") and the device or arch: PK_ERR_RUNTIME with the
 * runtime's message (an OpenCL build log, a CUDA load error); an NVRTC failure keeps
 * pk_nvrtc_compile's status and log. Free with pkrt_gpu_module_free. */
pk_status pk_gpu_device_load(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_gpu_kernel *kernels,
                             int n, const char *source, pkrt_gpu_module **out);

/* Runs kernel k of the loaded module mod on g and compares every materialized output with
 * the interpreter within its error bound (pk_verify.h): one device arena with a view per
 * buffer (offsets on the device's base_align, at least 256 bytes) and one for the
 * workspace; inputs from ref (NULL: filled from seed and interpreted here), outputs and
 * workspace filled with NaN (all-ones bytes) first. PK_ERR_MISMATCH names the kernel, the
 * device, the tensor and the element; PK_ERR_RUNTIME a failed device call; PK_ERR_CHECK a
 * kernel that does not fit prog (buffer count) or takes scalars. */
pk_status pk_gpu_device_check_loaded(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, pkrt_gpu_module *mod,
                                     const pk_te_program *prog, const pk_schedule *sched,
                                     const pk_gpu_kernel *k, uint64_t seed, const pk_te_ref *ref,
                                     pk_kernel_check_result *res);

/* The measurer's: pk_gpu_device_check_loaded, then, when the kernel passed, launches it
 * again (the check's launch was the warm-up) each timed with device events (CUDA events /
 * OpenCL profiling), until they add up to min_ns and number at least 5: the median,
 * fastest and spread into *timing. timing NULL: the check only. */
pk_status pk_gpu_device_check_timed(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, pkrt_gpu_module *mod,
                                    const pk_te_program *prog, const pk_schedule *sched,
                                    const pk_gpu_kernel *k, uint64_t seed, const pk_te_ref *ref,
                                    int64_t min_ns, pk_kernel_check_result *res, pk_timing *timing);

/* Any operation on a program's tensors checked and timed the same way: a generated kernel
 * (pk_gpu_device_check_timed makes one of kernel k) or a library call such as cuBLAS's
 * sgemm (pk_gpu_cublas_check_timed, autotune/pk_search.h). call runs it once on the
 * tensors' views (views[i]: tensor i of prog) and its workspace (NULL when
 * workspace_bytes is 0), queued on g; elapsed_ms NULL: untimed, else timed with device
 * events and waited for. A failure is a pkrt_status with the runtime's message in rt. */
typedef struct pk_gpu_device_op {
  const char *label;       /* what messages call it: "GPU kernel k0", "cuBLAS sgemm 8x128x64" */
  int64_t workspace_bytes; /* a NaN-filled device workspace passed to call; 0: none */
  pkrt_status (*call)(void *arg, const pkrt_gpu_ptr *views, const pkrt_gpu_ptr *workspace,
                      double *elapsed_ms);
  void *arg;
} pk_gpu_device_op;
/* pk_gpu_device_check_timed for op: the arena, inputs, NaN-filled outputs, comparison
 * (outputs sched inlined skipped; sched NULL: all) and timing loop are the kernel's. */
pk_status pk_gpu_device_check_op(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_te_program *prog,
                                 const pk_schedule *sched, const pk_gpu_device_op *op,
                                 uint64_t seed, const pk_te_ref *ref, int64_t min_ns,
                                 pk_kernel_check_result *res, pk_timing *timing);

/* One kernel: load its source (pk_cgen_gpu of k alone), check it, free the module. */
pk_status pk_gpu_device_check(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_te_program *prog,
                              const pk_schedule *sched, const pk_gpu_kernel *k, const char *source,
                              uint64_t seed, pk_kernel_check_result *res);

#endif
