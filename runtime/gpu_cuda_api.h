/* gpu_cuda_api.h — the few CUDA driver API types, constants and prototypes the runtime
 * calls, declared here so that building libpockrt needs no CUDA toolkit (the driver is
 * dlopened; gpu_cuda.c). Names carry a pk_ prefix so that a test can include cuda.h
 * beside this file and check every value and prototype against it (test_gpu_cuda.c). */
#ifndef PKRT_GPU_CUDA_API_H
#define PKRT_GPU_CUDA_API_H

#include <stddef.h>

typedef unsigned int pk_cu_result;   /* CUresult: GCC's type for a non-negative enum */
typedef unsigned int pk_cu_enum;     /* CUdevice_attribute, CUfunction_attribute, CUjit_option */
typedef int pk_cu_device;            /* CUdevice */
typedef unsigned long long pk_cu_deviceptr; /* CUdeviceptr on 64-bit hosts */
typedef struct CUctx_st *pk_cu_context;
typedef struct CUmod_st *pk_cu_module;
typedef struct CUfunc_st *pk_cu_function;
typedef struct CUstream_st *pk_cu_stream;
typedef struct CUevent_st *pk_cu_event;

enum {
  PK_CUDA_SUCCESS = 0,
  PK_CUDA_ERROR_NO_DEVICE = 100,
  PK_CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  PK_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  PK_CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,          /* kHz */
  PK_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  PK_CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,   /* kHz */
  PK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  PK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  PK_CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  PK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  PK_CU_JIT_ERROR_LOG_BUFFER = 5,
  PK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  PK_CU_STREAM_NON_BLOCKING = 1,
  PK_CU_EVENT_DEFAULT = 0
};

/* X(symbol, parameters): every driver entry point used, by the symbol dlsym finds (the
 * _v2 names are what cuda.h's macros select; each exists in every driver since CUDA 4). */
#define PK_CU_FUNCS(X)                                                                     \
  X(cuInit, (unsigned int flags))                                                          \
  X(cuDriverGetVersion, (int *version))                                                    \
  X(cuGetErrorName, (pk_cu_result error, const char **name))                               \
  X(cuDeviceGetCount, (int *count))                                                        \
  X(cuDeviceGet, (pk_cu_device * device, int ordinal))                                     \
  X(cuDeviceGetName, (char *name, int len, pk_cu_device device))                           \
  X(cuDeviceGetAttribute, (int *value, pk_cu_enum attrib, pk_cu_device device))           \
  X(cuDeviceTotalMem_v2, (size_t * bytes, pk_cu_device device))                            \
  X(cuDevicePrimaryCtxRetain, (pk_cu_context * ctx, pk_cu_device device))                  \
  X(cuDevicePrimaryCtxRelease_v2, (pk_cu_device device))                                   \
  X(cuCtxSetCurrent, (pk_cu_context ctx))                                                  \
  X(cuStreamCreate, (pk_cu_stream * stream, unsigned int flags))                           \
  X(cuStreamDestroy_v2, (pk_cu_stream stream))                                             \
  X(cuStreamSynchronize, (pk_cu_stream stream))                                            \
  X(cuEventCreate, (pk_cu_event * event, unsigned int flags))                              \
  X(cuEventDestroy_v2, (pk_cu_event event))                                                \
  X(cuEventRecord, (pk_cu_event event, pk_cu_stream stream))                               \
  X(cuEventSynchronize, (pk_cu_event event))                                               \
  X(cuEventElapsedTime, (float *ms, pk_cu_event start, pk_cu_event end))                   \
  X(cuMemAlloc_v2, (pk_cu_deviceptr * ptr, size_t bytes))                                  \
  X(cuMemFree_v2, (pk_cu_deviceptr ptr))                                                   \
  X(cuMemcpyHtoD_v2, (pk_cu_deviceptr dst, const void *src, size_t bytes))                 \
  X(cuMemcpyDtoH_v2, (void *dst, pk_cu_deviceptr src, size_t bytes))                       \
  X(cuModuleLoadDataEx, (pk_cu_module * module, const void *image, unsigned int noptions,  \
                         pk_cu_enum *options, void **values))                              \
  X(cuModuleUnload, (pk_cu_module module))                                                 \
  X(cuModuleGetFunction, (pk_cu_function * fn, pk_cu_module module, const char *name))     \
  X(cuFuncGetAttribute, (int *value, pk_cu_enum attrib, pk_cu_function fn))               \
  X(cuFuncSetAttribute, (pk_cu_function fn, pk_cu_enum attrib, int value))                 \
  X(cuLaunchKernel, (pk_cu_function fn, unsigned int gx, unsigned int gy, unsigned int gz, \
                     unsigned int bx, unsigned int by, unsigned int bz,                    \
                     unsigned int shared_bytes, pk_cu_stream stream, void **params,        \
                     void **extra))

#define PK_CU_FNTYPE(f, params) typedef pk_cu_result(*pk_##f##_fn) params;
PK_CU_FUNCS(PK_CU_FNTYPE)
#undef PK_CU_FNTYPE

#endif
