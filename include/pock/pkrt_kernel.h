/* pkrt_kernel.h — the one kernel ABI shared by generated kernels, the runtime loader and
 * the compiler. Generated C embeds this file verbatim, so it must stay self-contained C11.
 *
 * Usage (what a generated kernel object looks like):
 *
 *   static int k0(const pkrt_buffer *b, int32_t nb, const int64_t *s, int32_t ns,
 *                 void *workspace, pkrt_exec_ctx *ctx) { ... return PKRT_KERNEL_OK; }
 *   static const pkrt_kernel_desc kernels[] = {{"k0", k0, 3, 0, 0, "<canonical TE hash>"}};
 *   PKRT_EXPORT const pkrt_module_desc pkrt_module = {PKRT_ABI_VERSION, 1, kernels};
 *
 * The loader dlopens the object, finds `pkrt_module` (the only exported symbol) and checks
 * abi_version. Bump PKRT_ABI_VERSION whenever any struct below changes layout.
 */
#ifndef PKRT_KERNEL_H
#define PKRT_KERNEL_H

#include <stdint.h>

#define PKRT_ABI_VERSION 1u
#define PKRT_MODULE_SYMBOL "pkrt_module"
#define PKRT_EXPORT __attribute__((visibility("default")))

/* Element types. Values are stable: they are stored in artifacts and tuning records. */
typedef enum pkrt_dtype {
  PKRT_DTYPE_INVALID = 0,
  PKRT_DTYPE_F32 = 1,
  PKRT_DTYPE_F64 = 2,
  PKRT_DTYPE_I32 = 3,
  PKRT_DTYPE_I64 = 4,
  PKRT_DTYPE_F16 = 5,  /* storage only (reserved) */
  PKRT_DTYPE_BF16 = 6, /* storage only (reserved) */
  PKRT_DTYPE_BOOL = 7  /* value type of comparisons; never stored in a buffer */
} pkrt_dtype;

/* A strided view. Element (i0..in) lives at data[offset + sum(i_d * strides[d])], in
 * elements of `dtype`. Kernels are specialised for shapes and strides at compile time and
 * check them on entry, so a mismatch is an error code, never a wrong read. */
typedef struct pkrt_buffer {
  void *data;
  int64_t offset;
  const int64_t *shape;
  const int64_t *strides;
  int32_t ndim;
  int32_t dtype; /* a pkrt_dtype */
} pkrt_buffer;

/* The body of a parallel loop, outlined by codegen: runs iterations [begin, end). */
typedef int (*pkrt_parallel_body)(int64_t begin, int64_t end, void *closure);

/* What a kernel may ask of the runtime while it runs. Filled by the runtime; kernels
 * never allocate, never start threads and never touch globals. */
typedef struct pkrt_exec_ctx {
  /* Runs body over [0, n) split into chunks on the runtime's thread pool; returns the
   * first non-zero status a chunk returned. Always non-NULL (serial when no pool). */
  int (*parallel_for)(struct pkrt_exec_ctx *ctx, int64_t n, pkrt_parallel_body body,
                      void *closure);
  void *pool;   /* owned by the runtime */
  void *stream; /* CUDA stream for GPU kernels; NULL on the CPU */
} pkrt_exec_ctx;

/* Status a kernel returns. */
enum {
  PKRT_KERNEL_OK = 0,
  PKRT_KERNEL_BAD_ARGS = 1,   /* wrong buffer count, dtype, shape or strides */
  PKRT_KERNEL_FAILED = 2      /* a parallel chunk or extern call failed */
};

typedef int (*pkrt_kernel_fn)(const pkrt_buffer *bufs, int32_t nbufs,
                              const int64_t *scalars, int32_t nscalars,
                              void *workspace, pkrt_exec_ctx *ctx);

typedef struct pkrt_kernel_desc {
  const char *name;        /* identifier made by Pock, e.g. "k3" */
  pkrt_kernel_fn fn;
  int32_t nbufs;           /* inputs first, then outputs */
  int32_t nscalars;
  int64_t workspace_bytes; /* size the caller must provide, 64-byte aligned */
  const char *workload;    /* hex hash of the canonical TE text (for tuning records) */
} pkrt_kernel_desc;

typedef struct pkrt_module_desc {
  uint32_t abi_version;
  int32_t nkernels;
  const pkrt_kernel_desc *kernels;
} pkrt_module_desc;

#endif
