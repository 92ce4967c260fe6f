/* pkrt_gpu.h — libpockrt's GPU devices: the CUDA driver API and OpenCL, both loaded with
 * dlopen at first use (libpockrt has no DT_NEEDED on either), device memory, kernel
 * modules and launches described by pkrt_gpu_kernel_desc. Self-contained C11.
 *
 * Usage:
 *   pkrt_ctx *rt = pkrt_ctx_new(1);
 *   pkrt_gpu *g;
 *   if (pkrt_gpu_open(rt, PKRT_GPU_OPENCL, 0, &g) != PKRT_OK)
 *     fprintf(stderr, "%s\n", pkrt_ctx_error(rt));
 *   pkrt_gpu_mem *arena;                                  // one allocation per model
 *   pkrt_gpu_mem_new(g, bytes, &arena);
 *   pkrt_gpu_ptr x, y;                                    // buffers carved from it (at load)
 *   pkrt_gpu_mem_view(arena, 0, 4096, &x);
 *   pkrt_gpu_mem_view(arena, 4096, 4096, &y);
 *   pkrt_gpu_copy_to(arena, 0, host_x, 4096);
 *   static const pkrt_gpu_kernel_desc k[] = {{"k0", 2, 0, 0, {4, 1, 1}, {256, 1, 1}, 0, "…"}};
 *   pkrt_gpu_image img = {.source = opencl_c_text};       // CUDA: .cubin and/or .ptx
 *   pkrt_gpu_module *mod;
 *   pkrt_gpu_module_load(g, &img, k, 1, &mod);
 *   pkrt_gpu_ptr bufs[] = {x, y};
 *   pkrt_gpu_launch(mod, 0, bufs, 2, NULL, 0, NULL, NULL);  // asynchronous
 *   pkrt_gpu_sync(g);
 *   pkrt_gpu_copy_from(arena, 4096, host_y, 4096);
 *   pkrt_gpu_module_free(mod); pkrt_gpu_mem_free(arena); pkrt_gpu_close(g);
 *
 * Errors: every call returns a pkrt_status; the message in the context names the API call
 * and the error ("clBuildProgram: CL_BUILD_PROGRAM_FAILURE" and the build log,
 * "cuModuleLoadData: CUDA_ERROR_INVALID_IMAGE"), or the library that could not be loaded.
 * A device object and everything made from it are used by one thread at a time.
 *
 * Who uses it: the runtime's model executor and the compiler's measurer (with a pkrt_ctx
 * from runtime/pkrt.h, pkrt_ctx_new), and generated GPU code's descriptors
 * (pkrt_gpu_kernel_desc). Applications use the model API, pockrt.h, which runs GPU
 * artifacts on these devices (runtime/model_gpu.c).
 */
#ifndef PKRT_GPU_H
#define PKRT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "pock/pkrt_status.h"

typedef struct pkrt_ctx pkrt_ctx; /* runtime context: error message (runtime/pkrt.h) */

typedef enum pkrt_gpu_api {
  PKRT_GPU_CUDA = 1,   /* the CUDA driver API, libcuda.so.1 */
  PKRT_GPU_OPENCL = 2  /* OpenCL 1.2 or later through the ICD loader, libOpenCL.so.1 */
} pkrt_gpu_api;

/* One generated GPU kernel (docs/runtime.md, "GPU devices", states the parameter
 * contract): its parameters are nbufs device pointers (inputs, then outputs), nscalars
 * 64-bit integers, then a workspace pointer only when workspace_bytes > 0. */
typedef struct pkrt_gpu_kernel_desc {
  const char *name;        /* entry point made by Pock, e.g. "k3" */
  int32_t nbufs, nscalars;
  int64_t workspace_bytes; /* device workspace the launch must be given; 0: none */
  uint32_t grid[3], block[3]; /* blocks / work-groups; threads per block / local size */
  uint32_t shared_bytes;   /* dynamic shared memory (CUDA only); 0 normally */
  const char *workload;    /* hex hash of the canonical TE text */
} pkrt_gpu_kernel_desc;

/* What a device is, for listings and the GPU fingerprint. Strings are NUL-terminated and
 * cut to fit. */
typedef struct pkrt_gpu_info {
  pkrt_gpu_api api;
  int index;               /* what pkrt_gpu_open takes */
  char name[128];          /* "NVIDIA A100-SXM4-40GB", "Mali-G78" */
  char vendor[64];
  char platform[64];       /* OpenCL platform name; "CUDA" for CUDA */
  char version[64];        /* CUDA: "sm_87"; OpenCL: the device version, "OpenCL 3.0 …" */
  char driver[64];         /* CUDA: the driver's CUDA version, "12.4"; OpenCL: driver version */
  int sm;                  /* CUDA compute capability as 87; 0 for OpenCL */
  int driver_version;      /* CUDA: cuDriverGetVersion (12040); 0 for OpenCL */
  int compute_units;       /* multiprocessors / compute units */
  int clock_mhz;           /* core clock; 0 when the device does not say */
  int memory_clock_mhz;    /* CUDA: memory clock; 0 when unknown (OpenCL has no query) */
  int64_t memory_bytes;    /* global memory */
  int64_t max_block_threads; /* threads per block / work-group size limit */
  int64_t base_align;      /* OpenCL: byte alignment a view's offset needs; CUDA: 1 */
} pkrt_gpu_info;

/* The devices of one API, without creating contexts: up to cap into out (may be NULL with
 * cap 0), the count in *n. A missing library or driver is an error naming it
 * ("cannot load libcuda.so.1: ..."); an API with no device gives *n = 0 and PKRT_OK.
 * The CUDA driver's "no device" (CUDA_ERROR_NO_DEVICE) counts as no device. */
pkrt_status pkrt_gpu_list(pkrt_ctx *rt, pkrt_gpu_api api, pkrt_gpu_info *out, int cap, int *n);

/* ---- a device: context and queue (CUDA stream / OpenCL command queue with profiling) ---- */
typedef struct pkrt_gpu pkrt_gpu;
pkrt_status pkrt_gpu_open(pkrt_ctx *rt, pkrt_gpu_api api, int index, pkrt_gpu **out);
const pkrt_gpu_info *pkrt_gpu_describe(const pkrt_gpu *g);
/* Waits for everything queued on the device. */
pkrt_status pkrt_gpu_sync(pkrt_gpu *g);
void pkrt_gpu_close(pkrt_gpu *g); /* after its modules and memory are freed */
const char *pkrt_gpu_api_name(pkrt_gpu_api api); /* "cuda", "opencl", "unknown" */

/* ---- device memory: one allocation (a model's device arena) and views into it ---- */
typedef struct pkrt_gpu_mem pkrt_gpu_mem;
pkrt_status pkrt_gpu_mem_new(pkrt_gpu *g, size_t bytes, pkrt_gpu_mem **out);
void pkrt_gpu_mem_free(pkrt_gpu_mem *m);
size_t pkrt_gpu_mem_size(const pkrt_gpu_mem *m);
/* Blocking copies between host memory and [offset, offset + bytes) of m. */
pkrt_status pkrt_gpu_copy_to(pkrt_gpu_mem *m, size_t offset, const void *src, size_t bytes);
pkrt_status pkrt_gpu_copy_from(pkrt_gpu_mem *m, size_t offset, void *dst, size_t bytes);

/* A kernel argument: [offset, offset + bytes) of a device arena. Made once when a model
 * loads (OpenCL makes a sub-buffer, owned by the arena, whose offset must be a multiple of
 * pkrt_gpu_info.base_align); passing it to launches allocates nothing. */
typedef struct pkrt_gpu_ptr {
  pkrt_gpu_mem *mem;
  size_t offset, bytes;
  uint64_t addr;  /* CUDA: the device address */
  void *handle;   /* OpenCL: the cl_mem */
} pkrt_gpu_ptr;
pkrt_status pkrt_gpu_mem_view(pkrt_gpu_mem *m, size_t offset, size_t bytes, pkrt_gpu_ptr *out);

/* ---- modules: a compiled image and its kernels ---- */
typedef struct pkrt_gpu_image {
  /* CUDA: the cubin for this device's arch is tried first, then the PTX (NUL-terminated
   * text, JIT-compiled by the driver); a driver too old for the PTX's ISA version is
   * refused naming both versions. Either may be NULL, not both. */
  const void *cubin;
  size_t cubin_size;
  const char *ptx;
  /* OpenCL: the program's OpenCL C source (NUL-terminated) and clBuildProgram options
   * (NULL: none); a failed build's message carries the build log. */
  const char *source;
  const char *options;
  /* OpenCL: a program binary for exactly this device (pkrt_gpu_module_binary of an earlier
   * load; NULL: none), tried before the source: one the driver refuses, that does not
   * build or lacks a kernel is dropped and the source built instead, never an error. */
  const void *binary;
  size_t binary_size;
} pkrt_gpu_image;

typedef struct pkrt_gpu_module pkrt_gpu_module;
/* Loads the image and looks up every kernel of kernels[0..n) (the array must outlive the
 * module): a missing kernel, a parameter count that differs from the descriptor (OpenCL),
 * a block larger than the kernel may use, or a zero grid/block size is an error naming
 * the kernel. Everything a launch needs is sized here. */
pkrt_status pkrt_gpu_module_load(pkrt_gpu *g, const pkrt_gpu_image *img,
                                 const pkrt_gpu_kernel_desc *kernels, int n,
                                 pkrt_gpu_module **out);
/* Index of the kernel named name, or -1. */
int pkrt_gpu_module_find(const pkrt_gpu_module *m, const char *name);
void pkrt_gpu_module_free(pkrt_gpu_module *m);
/* 1 when the module was built from img.binary, 0 from the source (or a CUDA image). */
int pkrt_gpu_module_from_binary(const pkrt_gpu_module *m);
/* OpenCL: the built program's device binary (CL_PROGRAM_BINARIES) into *out (malloc'd, the
 * caller frees it) and *size. It serves only a device equal in all four of name, version,
 * driver and platform (pkrt_gpu_binary_fits). A CUDA module is refused (its image is the
 * cubin). */
pkrt_status pkrt_gpu_module_binary(const pkrt_gpu_module *m, void **out, size_t *size);

/* What an OpenCL program binary was built for (an artifact's gpu.binary): the
 * pkrt_gpu_info fields name, version, driver and platform of the device that built it. */
typedef struct pkrt_gpu_binary_for {
  const char *device, *version, *driver, *platform;
} pkrt_gpu_binary_for;
/* 1 when d is that device: all four strings equal (any NULL: 0). */
int pkrt_gpu_binary_fits(const pkrt_gpu_info *d, const pkrt_gpu_binary_for *b);

/* Queues kernel k with its buffers (views of memory of this device), scalars and, when the
 * descriptor has one, a workspace of at least workspace_bytes (NULL otherwise). Counts
 * that differ from the descriptor are refused before anything is queued. elapsed_ms NULL:
 * asynchronous; otherwise the launch is timed with device events (CUDA events / OpenCL
 * profiling), waited for, and its time stored there. Allocates nothing. */
pkrt_status pkrt_gpu_launch(pkrt_gpu_module *m, int k, const pkrt_gpu_ptr *bufs, int32_t nbufs,
                            const int64_t *scalars, int32_t nscalars,
                            const pkrt_gpu_ptr *workspace, double *elapsed_ms);

/* ---- cuBLAS: the extern kernel of CUDA artifacts (backend switching on the GPU) ----
 * A matmul-like task whose tuning found cuBLAS faster than generated code is one
 * cublasSgemm call. libcublas is loaded with dlopen when a model that calls it opens (no
 * DT_NEEDED); its handle is bound to the device's stream, so the call is queued in order
 * with the kernels, and is destroyed by pkrt_gpu_blas_close (before pkrt_gpu_close).
 * The GPU measurer times a cuBLAS candidate by calling pkrt_gpu_blas_sgemm with
 * elapsed_ms set, as it times a kernel with pkrt_gpu_launch.
 *
 *   pkrt_gpu_blas *b;
 *   if (pkrt_gpu_blas_open(g, NULL, &b) != PKRT_OK) ...  // "cannot load libcublas ..."
 *   pkrt_gpu_blas_sgemm(b, 0, 0, m, n, k, &A, k, &B, n, &C, n, NULL);  // C = A·B
 *   pkrt_gpu_blas_close(b);
 */
#define PKRT_CUBLAS_SGEMM_SYM "cublasSgemm_v2"
/* The extern's signature in a CUDA artifact's manifest: the C prototype of the call. */
#define PKRT_CUBLAS_SGEMM_SIGNATURE "i32(ptr,i32,i32,i32,i32,i32,ptr,ptr,i32,ptr,i32,ptr,ptr,i32)"
/* The sonames tried, newest first, when no library is named. */
#define PKRT_CUBLAS_LIBRARIES "libcublas.so.13 libcublas.so.12 libcublas.so.11 libcublas.so"
typedef struct pkrt_gpu_blas pkrt_gpu_blas;
/* g must be a CUDA device. library: sonames or paths separated by spaces, the first that
 * loads is used (a CUDA manifest's extern "library" is this list); NULL tries
 * PKRT_CUBLAS_LIBRARIES. A library that does not load or lacks an entry point is refused
 * naming it; cublasCreate's failure is named with its status. */
pkrt_status pkrt_gpu_blas_open(pkrt_gpu *g, const char *library, pkrt_gpu_blas **out);
/* C = op(A)·op(B), row-major f32 (m×n, k inner, leading dimensions in elements), on views
 * of g's memory; the views must hold the operands or the call is refused. Queued on g's
 * stream (asynchronous) unless elapsed_ms is given: then timed with device events and
 * waited for. Allocates nothing. */
pkrt_status pkrt_gpu_blas_sgemm(pkrt_gpu_blas *b, int trans_a, int trans_b, int32_t m,
                                int32_t n, int32_t k, const pkrt_gpu_ptr *a, int32_t lda,
                                const pkrt_gpu_ptr *bm, int32_t ldb, const pkrt_gpu_ptr *c,
                                int32_t ldc, double *elapsed_ms);
void pkrt_gpu_blas_close(pkrt_gpu_blas *b);

#endif
