/* gpu_build.c — the build step of the GPU rows of the backend table: CUDA C through NVRTC
 * into a cubin for the target's arch plus PTX as the fallback, OpenCL C kept as source
 * (the image the OpenCL runtime builds), both in the build cache under the hash of the
 * source, the target, the codegen version and (CUDA) the NVRTC version. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pk_gpu.h"

/* Writes bytes to path through a temporary name and a rename, so a concurrent reader never
 * sees half a file. */
static pk_status write_atomic(pk_ctx *ctx, const char *path, const void *data, size_t n) {
  const char *tmp = pk_sprintf(ctx, "%s.tmp%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return pk_ctx_fail(ctx, PK_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
  bool ok = fwrite(data, 1, n, f) == n;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return pk_ctx_fail(ctx, PK_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  }
  return PK_OK;
}

pk_status pk_gpu_build_image(pk_ctx *ctx, const pk_target *t, const char *cache_dir,
                             const char *source, pk_cc_result *out) {
  memset(out, 0, sizeof *out);
  if (!cache_dir) cache_dir = pk_cache_dir_default(ctx);
  pk_status s = pk_cache_dir_make(ctx, cache_dir);
  if (s != PK_OK) return s;
  pk_nvrtc *nv = NULL;
  if (t->kind == PK_TARGET_CUDA && (s = pk_nvrtc_open(ctx, &nv)) != PK_OK) return s;
  const char *key = pk_sprintf(ctx, "%s\n%s\ngpu codegen v%d\n%s", source,
                               pk_target_describe(ctx, t), PK_CGEN_GPU_VERSION,
                               nv ? pk_nvrtc_version(nv) : "opencl source");
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(key, strlen(key), hex);
  out->hash = pk_strdup(ctx, hex);
  if (!nv) {
    out->so_path = pk_sprintf(ctx, "%s/%s.cl", cache_dir, hex);
    out->cache_hit = access(out->so_path, R_OK) == 0;
    return out->cache_hit ? PK_OK : write_atomic(ctx, out->so_path, source, strlen(source));
  }
  const char *cubin = pk_sprintf(ctx, "%s/%s.cubin", cache_dir, hex);
  const char *ptx = pk_sprintf(ctx, "%s/%s.ptx", cache_dir, hex);
  out->so_path = cubin;
  if (access(cubin, R_OK) == 0 && access(ptx, R_OK) == 0) {
    out->cache_hit = true;
    pk_nvrtc_close(nv);
    return PK_OK;
  }
  int64_t t0 = pkrt_now_ns();
  pk_nvrtc_image img;
  s = pk_nvrtc_compile(nv, source, t->arch, &img);
  if (s == PK_OK) s = write_atomic(ctx, ptx, img.ptx, img.ptx_size);
  if (s == PK_OK) s = write_atomic(ctx, cubin, img.cubin, img.cubin_size);
  const char *meta = s != PK_OK ? "" :
      pk_sprintf(ctx, "compiler: %s\narch: %s\nptx_isa: %s\ntarget: %s\nlog: %s\n", img.nvrtc_version,
                 img.arch, img.ptx_isa, pk_target_describe(ctx, t), img.log);
  if (s == PK_OK) /* what made the image, beside it */
    s = write_atomic(ctx, pk_sprintf(ctx, "%s/%s.txt", cache_dir, hex), meta, strlen(meta));
  out->build_seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  pk_nvrtc_close(nv);
  return s;
}
