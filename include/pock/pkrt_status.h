/* pkrt_status.h — libpockrt's status codes: what every call of the public API (pockrt.h)
 * that returns int returns, shared with the runtime's internals (runtime/pkrt.h). */
#ifndef PKRT_STATUS_H
#define PKRT_STATUS_H

typedef enum pkrt_status {
  PKRT_OK = 0,
  PKRT_ERR_INPUT,   /* bad argument or malformed input */
  PKRT_ERR_IO,      /* file system */
  PKRT_ERR_NOMEM,
  PKRT_ERR_LOAD,    /* dlopen/dlsym, ABI version, missing symbol */
  PKRT_ERR_KERNEL,  /* a kernel returned non-zero */
  PKRT_ERR_EXTERN,  /* extern library, symbol or signature */
  PKRT_ERR_GPU      /* a GPU API call failed (pock/pkrt_gpu.h): the message names it */
} pkrt_status;

/* A code's short name: "ok", "input", "io", "nomem", "load", "kernel", "extern", "gpu",
 * or "unknown". The message of a failure is pkrt_model_error() (or the open call's err). */
const char *pkrt_status_name(pkrt_status s);

#endif
