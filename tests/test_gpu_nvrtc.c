/* test_gpu_nvrtc.c — NVRTC compiles what the GPU emitter makes: every operator's forward and
 * gradient kernel with its preset GPU schedule, the sampled configs of every op class (20
 * each, 200 with POCK_TEST_SCALE=full), and presets with the vectorizing knobs at 2 and 4
 * (whose text must read whole vectors, float4), to a cubin and PTX for sm_80, sm_87 and sm_90;
 * NVRTC's version is recorded and its log quoted when a compile fails. libnvrtc is opened
 * at run time: where it cannot be loaded the test is skipped (77), saying why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_test.h"
#include "gpu_test_cases.h"

/* Prepared kernels k0, k1, ... of the cases' presets (or the samples). */
static char *source_of(pk_ctx *ctx, pk_te_program *const *progs, pk_schedule *const *scheds, int n,
                       int *nkernels) {
  pk_gpu_kernel *k = pk_alloc(ctx, sizeof *k * (size_t)(n + 1));
  *nkernels = 0;
  for (int i = 0; i < n; i++) {
    pk_lfunc *f;
    if (pk_sched_lower(ctx, progs[i], scheds[i], pk_sprintf(ctx, "k%d", i), &f) != PK_OK ||
        pk_gpu_prepare(ctx, f, &k[*nkernels]) != PK_OK) {
      printf("FAIL kernel %d: %s\n", i, pk_ctx_error(ctx));
      failures++;
      pk_ctx_clear_error(ctx);
      continue;
    }
    ++*nkernels;
  }
  char *src = NULL;
  if (pk_cgen_gpu(ctx, PK_GPU_CUDA, k, *nkernels, &src) != PK_OK) {
    printf("FAIL emit: %s\n", pk_ctx_error(ctx));
    failures++;
  }
  return src;
}

static void compile_for(pk_ctx *ctx, pk_nvrtc *nv, const char *what, const char *src, int nkernels,
                        const char *arch) {
  pk_nvrtc_image img;
  const char *name = pk_sprintf(ctx, "%s_%s", what, arch);
  if (pk_nvrtc_compile(nv, src, arch, &img) != PK_OK) {
    check(false, name, "%s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  const char *last = pk_sprintf(ctx, ".entry k%d(", nkernels - 1);
  check(img.cubin_size > 4 && !memcmp(img.cubin, "\177ELF", 4) &&
            strstr(img.ptx, pk_sprintf(ctx, ".target %s", arch)) && strstr(img.ptx, ".entry k0(") &&
            strstr(img.ptx, last) && !strcmp(img.arch, arch) && img.nvrtc_version &&
            img.ptx_isa[0] >= '1' && img.ptx_isa[0] <= '9' && strchr(img.ptx_isa, '.'),
        name, "cubin %zu bytes, PTX %zu bytes", img.cubin_size, img.ptx_size);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_nvrtc *nv;
  if (pk_nvrtc_open(ctx, &nv) != PK_OK) {
    printf("SKIP: %s\n", pk_ctx_error(ctx));
    return 77;
  }
  check(!strncmp(pk_nvrtc_version(nv), "NVRTC ", 6), "version", "%s", pk_nvrtc_version(nv));
  printf("     %s\n", pk_nvrtc_version(nv));

  pk_nvrtc_image img;
  check(pk_nvrtc_compile(nv, "extern \"C\" __global__ void k0() { pock_undefined = 1; }", "sm_87",
                         &img) == PK_ERR_BUILD &&
            strstr(pk_ctx_error(ctx), "pock_undefined") && strstr(pk_ctx_error(ctx), "NVRTC"),
        "log_quoted", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  check(pk_nvrtc_compile(nv, "", "compute_87", &img) == PK_ERR_USAGE, "bad_arch", "%s",
        pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);

  pk_target *t;
  int n, ns, counts[4], nk_presets = 0, nk_samples = 0;
  gpu_case *cases = pk_target_parse(ctx, "cuda -arch=sm_87", NULL, &t) == PK_OK ? gpu_test_cases(ctx, t, &n) : NULL;
  if (!cases) {
    printf("FAIL cases: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  int per_class = gpu_test_per_class();
  gpu_sample *samples = gpu_test_samples(ctx, cases, n, per_class, 18, &ns, counts);
  pk_te_program **progs = pk_alloc(ctx, sizeof *progs * (size_t)(n + ns));
  pk_schedule **scheds = pk_alloc(ctx, sizeof *scheds * (size_t)(n + ns));
  for (int i = 0; i < n; i++) progs[i] = cases[i].prog, scheds[i] = cases[i].preset;
  for (int i = 0; i < ns; i++) progs[n + i] = samples[i].c->prog, scheds[n + i] = samples[i].sched;
  for (int c = 0; c < 4; c++)
    check(counts[c] >= per_class, pk_sprintf(ctx, "samples_%s", pk_task_class_name((pk_task_class)c)),
          "%d sampled configs", counts[c]);
  /* the vectorizing knobs at 2 and 4: each kernel's text has its vector accesses */
  int nvs, nk_vector = 0;
  gpu_sample *vs = gpu_test_vector_samples(ctx, cases, n, per_class / 10, &nvs);
  pk_te_program **vprogs = pk_alloc(ctx, sizeof *vprogs * (size_t)(nvs + 1));
  pk_schedule **vscheds = pk_alloc(ctx, sizeof *vscheds * (size_t)(nvs + 1));
  int vector_texts = 0;
  for (int i = 0; i < nvs; i++) {
    vprogs[i] = vs[i].c->prog, vscheds[i] = vs[i].sched;
    int nk;
    char *one = source_of(ctx, &vprogs[i], &vscheds[i], 1, &nk);
    bool vec = one && (strstr(one, "float4 *)") || strstr(one, "float2 *)"));
    vector_texts += vec;
    if (!vec) printf("     no vector access: %s %s\n", vs[i].c->label, vs[i].knobs);
  }
  check(nvs >= 12 && vector_texts == nvs, "vector_samples_read_vectors",
        "%d of %d kernels with float4/float2 accesses", vector_texts, nvs);
  char *vsrc = source_of(ctx, vprogs, vscheds, nvs, &nk_vector);
  char *presets = source_of(ctx, progs, scheds, n, &nk_presets);
  char *sampled = source_of(ctx, progs + n, scheds + n, ns, &nk_samples);
  printf("     %d preset kernels, %d sampled configs, %d vectorized presets\n", nk_presets,
         nk_samples, nk_vector);
  const char *archs[] = {"sm_80", "sm_87", "sm_90"};
  for (int a = 0; a < 3 && presets && sampled && vsrc; a++) {
    compile_for(ctx, nv, "presets", presets, nk_presets, archs[a]);
    compile_for(ctx, nv, "samples", sampled, nk_samples, archs[a]);
    compile_for(ctx, nv, "vector", vsrc, nk_vector, archs[a]);
  }
  pk_nvrtc_close(nv);

  /* where libnvrtc is not, the reason names it (what the skip above prints) */
  setenv("POCK_NVRTC", "/nonexistent/libnvrtc.so", 1);
  check(pk_nvrtc_open(ctx, &nv) == PK_ERR_UNSUPPORTED && strstr(pk_ctx_error(ctx), "/nonexistent"),
        "missing_library_named", "%s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
  return pk_test_summary("gpu_nvrtc");
}
