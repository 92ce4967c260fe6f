/* test_codegen_unit.c — the C backend's contracts: the build cache (hit on the same source,
 * miss on other flags), compiler failures as PK_ERR_BUILD with the compiler's message,
 * kernels refusing wrong buffers, views through offsets, GPU loop kinds refused clearly by
 * the C backend, and several kernels in one object. (Parallel, vectorized and unrolled loops
 * are tested in test_emit_c.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"

static int failures;
static void check(bool ok, const char *name, const char *why) {
  printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, ok ? "" : ": ", ok ? "" : why);
  failures += !ok;
}

static const char *scale_te =
    "A = placeholder((3, 5), f32)\n"
    "B = compute((3, 5), (i, j) => A[i, j] * 2.0 + 1.0)\n";

static const char *rowsum_te =
    "A = placeholder((4, 6), f64)\n"
    "k = reduce_axis(6)\n"
    "S = compute((4,), (i) => sum(A[i, k], k))\n";

static pk_te_program *parse(pk_ctx *ctx, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "unit.te", &p) != PK_OK)
    printf("FAIL parse: %s\n", pk_ctx_error(ctx)), exit(1);
  return p;
}

static void test_cache_and_flags(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, scale_te);
  pk_lfunc *f;
  char *src;
  pk_sched_lower(ctx, p, NULL, "k0", &f);
  pk_cgen_c(ctx, &f, 1, &src);
  pk_cc_options opts = {NULL, NULL, PK_TEST_CACHE_DIR "/unit"};
  pk_cc *cc;
  pk_cc_result r1, r2, r3;
  check(pk_cc_new(ctx, &opts, &cc) == PK_OK, "cc_new", pk_ctx_error(ctx));
  check(pk_cc_build(cc, src, &r1) == PK_OK, "build", pk_ctx_error(ctx));
  check(pk_cc_build(cc, src, &r2) == PK_OK && r2.cache_hit && !strcmp(r1.so_path, r2.so_path),
        "cache_hit_same_source", "second build of the same source missed the cache");
  pk_cc_options o2 = {NULL, "-O1 -fPIC -fvisibility=hidden", PK_TEST_CACHE_DIR "/unit"};
  pk_cc *cc2;
  pk_cc_new(ctx, &o2, &cc2);
  check(pk_cc_build(cc2, src, &r3) == PK_OK && strcmp(r3.hash, r1.hash) != 0,
        "cache_key_has_flags", "other flags gave the same cache entry");
  check(strlen(pk_cc_version(cc)) > 0, "compiler_version_recorded", "empty version");

  pk_status s = pk_cc_build(cc, "this is not C;", &r3);
  check(s == PK_ERR_BUILD && strstr(pk_ctx_error(ctx), "error"), "build_error_reported",
        pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  pk_cc_options bad = {"/nonexistent/cc", NULL, PK_TEST_CACHE_DIR "/unit"};
  pk_cc *cc3;
  check(pk_cc_new(ctx, &bad, &cc3) == PK_ERR_BUILD && strstr(pk_ctx_error(ctx), "/nonexistent/cc"),
        "missing_compiler_reported", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

static void test_kernel_contracts(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt) {
  pk_te_program *progs[2] = {parse(ctx, scale_te), parse(ctx, rowsum_te)};
  pkrt_module *m;
  check(pk_build_programs(ctx, cc, rt, progs, 2, &m) == PK_OK, "two_kernels_one_object",
        pk_ctx_error(ctx));
  const pkrt_module_desc *d = pkrt_module_desc_of(m);
  check(d->nkernels == 2 && strlen(d->kernels[0].workload) == 64, "descriptor_table",
        "expected 2 kernels with SHA-256 workload keys");
  const pkrt_kernel_desc *k0 = pkrt_module_find(m, "k0"), *k1 = pkrt_module_find(m, "k1");
  pk_kernel_check_result res;
  check(pk_kernel_check(ctx, rt, progs[0], k0, 5, &res) == PK_OK, "k0_equals_interpreter", pk_ctx_error(ctx));
  check(pk_kernel_check(ctx, rt, progs[1], k1, 5, &res) == PK_OK, "k1_equals_interpreter", pk_ctx_error(ctx));

  /* A view: A's rows sit inside a wider (3, 8) buffer at offset 2. */
  float wide[3 * 8 + 2], out[15];
  for (int i = 0; i < 26; i++) wide[i] = (float)i;
  int64_t shape[] = {3, 5}, strides_wide[] = {8, 1}, strides_dense[] = {5, 1};
  pkrt_buffer bufs[2] = {{wide, 2, shape, strides_wide, 2, PKRT_DTYPE_F32},
                         {out, 0, shape, strides_dense, 2, PKRT_DTYPE_F32}};
  int rc = k0->fn(bufs, 2, NULL, 0, NULL, pkrt_ctx_exec(rt));
  /* Kernels are specialised for dense strides: a strided view is refused, not misread. */
  check(rc == PKRT_KERNEL_BAD_ARGS, "strided_view_refused", "kernel accepted strides it was not built for");
  float dense[15 + 3];
  for (int i = 0; i < 18; i++) dense[i] = (float)i;
  bufs[0] = (pkrt_buffer){dense, 3, shape, strides_dense, 2, PKRT_DTYPE_F32};
  rc = k0->fn(bufs, 2, NULL, 0, NULL, pkrt_ctx_exec(rt));
  check(rc == 0 && out[0] == 7.0f && out[14] == 35.0f, "offset_view", "offset not applied");

  int64_t bad_shape[] = {3, 6};
  bufs[0].shape = bad_shape;
  check(k0->fn(bufs, 2, NULL, 0, NULL, pkrt_ctx_exec(rt)) == PKRT_KERNEL_BAD_ARGS, "shape_refused", "");
  bufs[0].shape = shape;
  bufs[0].dtype = PKRT_DTYPE_F64;
  check(k0->fn(bufs, 2, NULL, 0, NULL, pkrt_ctx_exec(rt)) == PKRT_KERNEL_BAD_ARGS, "dtype_refused", "");
  check(k0->fn(bufs, 1, NULL, 0, NULL, pkrt_ctx_exec(rt)) == PKRT_KERNEL_BAD_ARGS, "count_refused", "");
  pkrt_module_free(m);
}

static void test_unsupported_loops(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, scale_te);
  const pk_loop_kind kinds[] = {PK_LOOP_GPU_BLOCK_X, PK_LOOP_GPU_THREAD_Y, PK_LOOP_GPU_THREAD_X};
  for (int i = 0; i < 3; i++) {
    pk_lfunc *f;
    pk_sched_lower(ctx, p, NULL, "k0", &f);
    f->body->stmts[0]->loop = kinds[i]; /* the outer loop of the only compute */
    char *src;
    pk_status s = pk_cgen_c(ctx, &f, 1, &src);
    char name[64];
    snprintf(name, sizeof name, "c_backend_refuses_%s", pk_loop_kind_name(kinds[i]));
    check(s == PK_ERR_UNSUPPORTED && strstr(pk_ctx_error(ctx), "C backend"), name, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
  }
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_cc_options opts = {NULL, NULL, PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  test_cache_and_flags(ctx);
  test_kernel_contracts(ctx, cc, rt);
  test_unsupported_loops(ctx);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  printf("%s codegen_unit\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
