/* pkrt.h — libpockrt internals shared by the runtime and the compiler: status codes, the
 * runtime context (error message, thread pool, exec context), arenas, the kernel-object
 * loader, extern calls through libffi, and SHA-256. Nothing here needs a compiler.
 *
 * Usage:
 *   pkrt_ctx *rt = pkrt_ctx_new(1);                     // 1 thread: serial parallel_for
 *   pkrt_module *m;
 *   if (pkrt_module_load_file(rt, "k.so", &m) != PKRT_OK) fprintf(stderr, "%s\n", pkrt_ctx_error(rt));
 *   const pkrt_kernel_desc *k = pkrt_module_find(m, "k0");
 *   int rc = k->fn(bufs, 3, NULL, 0, workspace, pkrt_ctx_exec(rt));
 *   pkrt_module_free(m); pkrt_ctx_free(rt);
 */
#ifndef PKRT_H
#define PKRT_H

#include <stddef.h>
#include <stdint.h>

#include "pock/pkrt_kernel.h"

typedef enum pkrt_status {
  PKRT_OK = 0,
  PKRT_ERR_INPUT,   /* bad argument or malformed input */
  PKRT_ERR_IO,      /* file system */
  PKRT_ERR_NOMEM,
  PKRT_ERR_LOAD,    /* dlopen/dlsym, ABI version, missing symbol */
  PKRT_ERR_KERNEL,  /* a kernel returned non-zero */
  PKRT_ERR_EXTERN   /* extern library, symbol or signature */
} pkrt_status;

const char *pkrt_status_name(pkrt_status s);

/* ---- dtypes ---- */
const char *pkrt_dtype_name(pkrt_dtype t);          /* "f32", ...; "invalid" otherwise */
pkrt_dtype pkrt_dtype_from_name(const char *name);  /* PKRT_DTYPE_INVALID if unknown */
size_t pkrt_dtype_size(pkrt_dtype t);               /* bytes; 0 for BOOL/INVALID */

/* ---- arenas: bump allocation, freed all at once ---- */
typedef struct pkrt_arena pkrt_arena;
pkrt_arena *pkrt_arena_new(size_t block_bytes); /* 0 = default (64 KiB) */
void pkrt_arena_free(pkrt_arena *a);
/* 16-byte aligned (align 0), or the given power-of-two alignment; zero-filled; NULL on OOM. */
void *pkrt_arena_alloc(pkrt_arena *a, size_t bytes, size_t align);
char *pkrt_arena_strdup(pkrt_arena *a, const char *s);
size_t pkrt_arena_used(const pkrt_arena *a);

/* ---- runtime context: one per user of the runtime; owns the thread pool ---- */
typedef struct pkrt_ctx pkrt_ctx;
pkrt_ctx *pkrt_ctx_new(int nthreads); /* nthreads <= 1: no pool, parallel_for runs inline */
void pkrt_ctx_free(pkrt_ctx *rt);
const char *pkrt_ctx_error(const pkrt_ctx *rt); /* message of the last failure, "" if none */
pkrt_status pkrt_ctx_fail(pkrt_ctx *rt, pkrt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
pkrt_exec_ctx *pkrt_ctx_exec(pkrt_ctx *rt);  /* what kernels receive */
int pkrt_ctx_threads(const pkrt_ctx *rt);

/* ---- kernel objects ---- */
typedef struct pkrt_module pkrt_module;
pkrt_status pkrt_module_load_file(pkrt_ctx *rt, const char *path, pkrt_module **out);
/* Loads a kernel object from bytes in memory through a sealed memfd: the bytes that were
 * verified are the bytes that run, and no writable directory is needed. */
pkrt_status pkrt_module_load_memory(pkrt_ctx *rt, const void *bytes, size_t len,
                                    pkrt_module **out);
const pkrt_module_desc *pkrt_module_desc_of(const pkrt_module *m);
const pkrt_kernel_desc *pkrt_module_find(const pkrt_module *m, const char *name);
void pkrt_module_free(pkrt_module *m);

/* ---- extern functions called through libffi ----
 * Signature text: "RET(ARG,ARG,...)" with types void i32 i64 f32 f64 ptr, e.g. cblas_sgemm:
 *   "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"
 * The call interface is prepared once at open; calls pass pointers to each argument. */
typedef struct pkrt_extern pkrt_extern;
pkrt_status pkrt_extern_open(pkrt_ctx *rt, const char *library, const char *symbol,
                             const char *signature, pkrt_extern **out);
/* args[i] points at argument i (an int32_t, float, void*, ... as the signature says);
 * ret points at storage for the result or is NULL for void. */
void pkrt_extern_call(const pkrt_extern *e, void **args, void *ret);
int pkrt_extern_nargs(const pkrt_extern *e);
void pkrt_extern_free(pkrt_extern *e);

/* ---- hashing ---- */
#define PKRT_SHA256_BYTES 32
void pkrt_sha256(const void *data, size_t len, uint8_t out[PKRT_SHA256_BYTES]);
/* Lower-case hex of the SHA-256 of data; hex must hold 65 bytes. */
void pkrt_sha256_hex(const void *data, size_t len, char hex[2 * PKRT_SHA256_BYTES + 1]);

/* ---- weights files (.pkw): named tensors, docs/graph-format.md ----
 * Layout: magic "PKW1" | u32 count | per tensor: u16 name length, name bytes (no NUL),
 * u8 dtype (pkrt_dtype), u8 ndim, ndim x i64 shape, numel x dtype-size data; all
 * little-endian. Names are unique, 1..255 bytes. */
typedef struct pkrt_wtensor {
  const char *name;
  pkrt_dtype dtype;
  int ndim;
  int64_t shape[8];
  const void *data;  /* numel * dtype-size bytes */
} pkrt_wtensor;
/* Reads every tensor into arena a (the file is checked: truncation, bad dtype/rank,
 * sizes that overflow, duplicate names → PKRT_ERR_INPUT naming the file and tensor). */
pkrt_status pkrt_weights_read(pkrt_ctx *rt, pkrt_arena *a, const char *path,
                              pkrt_wtensor **out, int *count);
/* Writes atomically: a temp file in the same directory, fsync, rename. */
pkrt_status pkrt_weights_write(pkrt_ctx *rt, const char *path, const pkrt_wtensor *t, int count);

/* ---- time ---- */
int64_t pkrt_now_ns(void); /* CLOCK_MONOTONIC */

#endif
