/* target_impl.h — the fingerprint's internals shared by target.c (C targets, the common
 * part) and target_gpu.c (GPU targets). Internal to autotune/. */
#ifndef PK_TARGET_IMPL_H
#define PK_TARGET_IMPL_H

#include "json_canon.h"
#include "pk_autotune.h"

/* Adds a GPU target's must-match fields (the API; CUDA: the arch, which must be device 0's,
 * and the driver's CUDA version; OpenCL: the device version) and informative ones (name,
 * vendor, platform, driver, compute units, clocks, memory) of device 0 of its API, asked
 * in a child process. PK_ERR_UNSUPPORTED naming why when there is no such device. */
pk_status pk_target_fp_gpu_fields(pk_ctx *ctx, const pk_target *t, cJSON *must, cJSON *info);

#endif
