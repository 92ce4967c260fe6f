/* test_gpu_presets.c — GPU schedule presets and config spaces: every operator's forward and
 * gradient kernel gets its class's GPU preset (a sum of products tiled over blocks and
 * threads with shared k-panels, anything else fused over threads), which lowers, passes
 * the GPU lowering check and emits in both dialects; each op class's GPU space has at
 * least 20 legal sampled configs (200 with POCK_TEST_SCALE=full) that do the same. */
#include <stdio.h>
#include <string.h>

#include "pk_test.h"
#include "gpu_test_cases.h"

/* Every kernel that emits, prepared, for one OpenCL source at the end. */
static pk_gpu_kernel all[4096];
static int nall;

static bool emits(pk_ctx *ctx, const pk_te_program *p, const pk_schedule *s, const char **why) {
  pk_lfunc *f;
  pk_gpu_kernel k;
  char *cu, *cl;
  bool ok = pk_sched_lower(ctx, p, s, pk_sprintf(ctx, "k%d", nall), &f) == PK_OK &&
            pk_gpu_prepare(ctx, f, &k) == PK_OK &&
            pk_cgen_gpu(ctx, PK_GPU_CUDA, &k, 1, &cu) == PK_OK &&
            pk_cgen_gpu(ctx, PK_GPU_OPENCL, &k, 1, &cl) == PK_OK;
  if (ok && nall < 4096) all[nall++] = k;
  *why = pk_strdup(ctx, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  return ok;
}

/* The OpenCL C of every kernel, checked by clang's OpenCL 1.2 front end where clang is
 * installed (no OpenCL runtime needed; PoCL builds with the same front end). */
static void opencl_syntax(pk_ctx *ctx) {
  char *src;
  char *argv[] = {"clang", "--version", NULL};
  char *out;
  if (pk_run_capture(ctx, argv, &out) != 0) {
    printf("SKIP opencl_syntax: no clang on PATH\n");
    return;
  }
  if (pk_test_tmpdir_make("pock_gpu_presets") != 0) {
    check(false, "opencl_syntax", "no temporary directory");
    return;
  }
  const char *path = pk_test_path("kernels.cl");
  if (pk_cgen_gpu(ctx, PK_GPU_OPENCL, all, nall, &src) != PK_OK ||
      pk_test_write_file(path, src, strlen(src)) != 0) {
    check(false, "opencl_syntax", "%s", pk_ctx_error(ctx));
    return;
  }
  char *cl[] = {"clang", "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header",
                "-fsyntax-only", "-Werror=implicit-function-declaration", (char *)path, NULL};
  int rc = pk_run_capture(ctx, cl, &out);
  check(rc == 0, "opencl_syntax", "clang: %.2000s", out);
  printf("     %d kernels' OpenCL C parsed by clang\n", nall);
  pk_test_tmpdir_remove();
}

/* A layer-sized matmul whose sides 16 x 4 does not divide: 16 x 16 threads of 4 x 4
 * outputs, and panels of the block's 64 rows and columns (not of the whole matrices). */
static void test_matmul_preset(pk_ctx *ctx, const pk_target *t) {
  const char *text = "A = placeholder((250, 100), f32)\nB = placeholder((100, 190), f32)\n"
                     "k = reduce_axis(100)\nC = compute((250, 190), (i, j) => sum(A[i, k] * B[k, j], k))\n";
  pk_te_program *p;
  pk_task task;
  pk_lfunc *f;
  pk_gpu_kernel k;
  pk_schedule *s = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "mm", &p) == PK_OK &&
      pk_task_for_target(ctx, p, t, &task) == PK_OK)
    s = pk_space_default_schedule(ctx, &task, NULL);
  CHECK(s && pk_sched_lower(ctx, p, s, "k0", &f) == PK_OK && pk_gpu_prepare(ctx, f, &k) == PK_OK,
        "preset: %s", pk_ctx_error(ctx));
  CHECK(k.desc.block[0] == 16 && k.desc.block[1] == 16 && k.desc.grid[0] == 3 &&
            k.desc.grid[1] == 4 && k.static_shared_bytes == (64 * 8 + 8 * 64) * 4,
        "block %ux%u grid %ux%u shared %lld", k.desc.block[0], k.desc.block[1], k.desc.grid[0],
        k.desc.grid[1], (long long)k.static_shared_bytes);
  PASS();
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_target *t;
  if (pk_target_parse(ctx, "cuda -arch=sm_87", NULL, &t) != PK_OK) {
    printf("FAIL target: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  test_matmul_preset(ctx, t);
  int n;
  gpu_case *cases = gpu_test_cases(ctx, t, &n);
  if (!cases) {
    printf("FAIL cases: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  int bound = 0, shared = 0;
  for (int i = 0; i < n; i++) {
    const char *why = cases[i].why;
    bool ok = cases[i].preset && emits(ctx, cases[i].prog, cases[i].preset, &why);
    check(ok, cases[i].label, "no GPU preset: %s", why ? why : "");
    if (!ok) continue;
    const char *trace = pk_sched_to_json(cases[i].preset);
    bool threads = strstr(trace, "threadIdx") != NULL, scatter = false;
    for (int j = 0; j < cases[i].prog->ntensors; j++) scatter |= cases[i].prog->tensors[j]->dom_ndim > 0;
    /* a scatter_add's schedule is fixed (serial, so repeated ids never race): one thread */
    if (!threads) printf("     %s runs on one thread (a scatter_add)\n", cases[i].label);
    bound += threads || scatter;
    shared += strstr(trace, "\"shared\"") != NULL;
  }
  printf("     %d kernels: %d presets bind threads (or scatter), %d stage shared panels\n", n, bound,
         shared);
  check(bound == n, "presets_bind_threads", "%d of %d", bound, n);
  check(shared > 0, "presets_stage_shared", "none");

  int per_class = gpu_test_per_class(), ns, counts[4];
  gpu_sample *samples = gpu_test_samples(ctx, cases, n, per_class, 18, &ns, counts);
  for (int c = 0; c < 4; c++)
    check(counts[c] >= per_class, pk_sprintf(ctx, "samples_%s", pk_task_class_name((pk_task_class)c)),
          "%d legal sampled configs, want %d", counts[c], per_class);
  for (int i = 0; i < ns; i++) {
    const char *why = NULL;
    check(emits(ctx, samples[i].c->prog, samples[i].sched, &why),
          pk_sprintf(ctx, "sample_%d_%s", i, samples[i].c->label), "%s %s", samples[i].knobs,
          why ? why : "");
  }
  opencl_syntax(ctx);
  pk_ctx_free(ctx);
  return pk_test_summary("gpu_presets");
}
