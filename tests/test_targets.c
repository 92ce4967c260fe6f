/* test_targets.c — targets as data: the grammar parses into descriptions (and refuses what
 * is not in it); 'c -march=x86-64', 'c -march=haswell' and 'c -march=skylake-avx512' give
 * 16-, 32- and 64-byte vectors on any x86-64 host, whatever it has; every sampled config of
 * the matmul and conv spaces lowers and emits at each width, and each width's code builds;
 * a cross compiler (clang for AArch64) describes NEON; the backend table refuses kinds
 * without a backend; a build past its time limit is an error naming the kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "pk_backend.h"
#include "pk_ops.h"
#include "pk_search.h"

static int failures;

static void check(bool ok, const char *name, const char *detail) {
  if (ok) {
    printf("PASS %s\n", name);
  } else {
    printf("FAIL %s: %s\n", name, detail ? detail : "");
    failures++;
  }
}

static void test_grammar(pk_ctx *ctx) {
  pk_target *t;
  check(pk_target_parse(ctx, "c", NULL, &t) == PK_OK && t->kind == PK_TARGET_C && t->native &&
            t->vector_bytes >= 16 && !strcmp(pk_target_cpu_option(ctx, t), "-march=native"),
        "native_c", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  check(pk_target_parse(ctx, "cuda -arch=sm_87", NULL, &t) == PK_OK && t->kind == PK_TARGET_CUDA &&
            !strcmp(t->arch, "sm_87"),
        "cuda_parses", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  pk_backend *be;
  check(pk_backend_new(ctx, t, NULL, &be) == PK_OK && pk_backend_cc(be) == NULL,
        "cuda_backend_emits_and_builds", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  check(pk_target_parse(ctx, "opencl", NULL, &t) == PK_OK && t->kind == PK_TARGET_OPENCL &&
            pk_backend_kind_of(PK_TARGET_OPENCL)->emit_new != NULL,
        "opencl_parses", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  const char *bad[] = {"c -O3", "cuda", "cuda -arch=sm_x", "opencl -x", "rust", "c -march=a -mcpu=b",
                       "c -march=", "c -march=a;b"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char name[64];
    snprintf(name, sizeof name, "refuses '%s'", bad[i]);
    check(pk_target_parse(ctx, bad[i], NULL, &t) == PK_ERR_USAGE && strstr(pk_ctx_error(ctx), bad[i]),
          name, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
  }
}

/* Every sampled config of the task's space lowers and emits at the target's width; the
 * preset and two samples go into *u (built by the caller). Returns the configs checked. */
static int sample_space(pk_ctx *ctx, const pk_target *t, pk_te_program *p, const char *what,
                        pk_cgen_unit *u) {
  pk_task task;
  pk_space *sp;
  if (pk_task_for_target(ctx, p, t, &task) != PK_OK || pk_space_new(ctx, &task, &sp) != PK_OK) {
    check(false, what, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return 0;
  }
  pk_cgen_c_options one = {.target = t};
  pk_rng rng;
  pk_rng_seed(&rng, 7);
  int n = 0, bad = 0;
  for (int tries = 0; tries < 400 && n < 40; tries++) {
    pk_config c;
    pk_candidate cand;
    if (tries == 0) {
      if (!pk_space_preset(sp, &c)) continue;
    } else {
      pk_space_sample(sp, &rng, &c);
    }
    if (pk_space_build(sp, &c, &cand) != PK_OK) { /* an illegal combination, not a config */
      pk_ctx_clear_error(ctx);
      continue;
    }
    pk_schedule *sched;
    pk_lfunc *f;
    char *src;
    const char *name = pk_sprintf(ctx, "k%d", pk_cgen_unit_count(u));
    pk_status s = pk_sched_from_json(ctx, p, cand.trace, &sched);
    if (s == PK_OK) s = pk_sched_lower(ctx, p, sched, name, &f);
    if (s == PK_OK) s = pk_cgen_c_opts(ctx, &f, 1, &one, &src);
    if (s != PK_OK) {
      printf("  %s: %s\n  trace %s\n", what, pk_ctx_error(ctx), cand.trace);
      pk_ctx_clear_error(ctx);
      bad++;
    } else if (n < 3 && pk_cgen_unit_add(u, f, what) != PK_OK) {
      printf("  %s: unit: %s\n", what, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      bad++;
    }
    n++;
  }
  char *detail = pk_sprintf(ctx, "%d of %d sampled configs do not lower or emit", bad, n);
  check(n >= 10 && bad == 0, pk_sprintf(ctx, "%s: %d configs lower at %d-byte vectors", what, n, t->vector_bytes),
        detail);
  pk_space_free(sp);
  return n;
}

static pk_te_program *op(pk_ctx *ctx, pk_op_kind kind, const pk_op_params *prm) {
  pk_te_program *p;
  PK_ASSERT(pk_op_build(ctx, kind, prm, &p) == PK_OK);
  return p;
}

static void test_widths(pk_ctx *ctx) {
  const struct {
    const char *target;
    int bytes;
    const char *feature; /* must be in the description */
  } widths[] = {{"c -march=x86-64", 16, "sse4_2"}, {"c -march=haswell", 32, "avx2"},
                {"c -march=skylake-avx512", 64, "avx512f"}};
  const pk_op_params mm = {2, {{2, {48, 40}, PKRT_DTYPE_F32}, {2, {40, 72}, PKRT_DTYPE_F32}}, {.groups = 0}};
  const pk_op_params conv = {2, {{4, {1, 8, 10, 12}, PKRT_DTYPE_F32}, {4, {8, 8, 3, 3}, PKRT_DTYPE_F32}},
                             {.pad = {1, 1, 1, 1}}};
  pk_te_program *pmm = op(ctx, PK_OP_MATMUL, &mm), *pconv = op(ctx, PK_OP_CONV2D, &conv);
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    pk_target *t;
    const char *w = widths[i].target;
    if (pk_target_parse(ctx, w, NULL, &t) != PK_OK) {
      check(false, w, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      continue;
    }
    bool x86_64_only = widths[i].bytes == 16; /* x86-64: SSE2 only, no sse4_2 */
    check(t->vector_bytes == widths[i].bytes && !t->native && !strcmp(t->arch, "x86_64") &&
              (x86_64_only ? !pk_target_has(t, "sse4_2") : pk_target_has(t, widths[i].feature)),
          pk_sprintf(ctx, "'%s' describes %d-byte vectors", w, widths[i].bytes), pk_target_describe(ctx, t));
    /* -O1: the point is that the width's code builds; -O3 only costs time here */
    pk_backend_options bo = {.flags = pk_sprintf(ctx, "-O1 %s -fPIC -fvisibility=hidden",
                                                 pk_target_cpu_option(ctx, t)),
                             .cache_dir = PK_TEST_CACHE_DIR "/targets"};
    pk_backend *be;
    pk_cgen_unit *u = NULL;
    pk_build_result r;
    pk_status s = pk_backend_new(ctx, t, &bo, &be);
    if (s == PK_OK) s = pk_backend_unit_new(be, &u);
    if (s != PK_OK) {
      check(false, pk_sprintf(ctx, "%s backend", w), pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      continue;
    }
    sample_space(ctx, t, pmm, pk_sprintf(ctx, "matmul 48x72x40 for '%s'", w), u);
    sample_space(ctx, t, pconv, pk_sprintf(ctx, "conv2d 3x3 for '%s'", w), u);
    s = pk_backend_build(be, u, &r);
    const char *head = pk_sprintf(ctx, "(C codegen v%d, %d-byte vectors)", PK_CGEN_C_VERSION, widths[i].bytes);
    const char *vec = pk_sprintf(ctx, "PK_VEC_TYPE(f32, float, %d)", widths[i].bytes / 4);
    const char *wider = pk_sprintf(ctx, "PK_VEC_TYPE(f32, float, %d)", widths[i].bytes / 2);
    check(s == PK_OK && strstr(r.source, head) && strstr(r.source, vec) && !strstr(r.source, wider),
          pk_sprintf(ctx, "'%s': %d kernels of %d-byte vector code build", w, pk_cgen_unit_count(u),
                     widths[i].bytes),
          s == PK_OK ? "the source's vectors are not the target's" : pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    pk_cgen_unit_free(u);
  }
}

/* A cross compiler describes its own machine: clang for AArch64 behind a one-line wrapper
 * (what `--cc aarch64-linux-gnu-gcc` would be) gives NEON's 16-byte vectors on this host,
 * whatever vectors this host has. Emitted only: linking needs the AArch64 sysroot. */
static void test_cross(pk_ctx *ctx) {
  char *out;
  char *probe[] = {(char *)"clang", (char *)"--version", NULL};
  if (pk_run_capture(ctx, probe, &out) != 0) {
    printf("SKIP cross: no clang\n");
    return;
  }
  const char *dir = PK_TEST_CACHE_DIR "/targets-cross";
  const char *cc = PK_TEST_CACHE_DIR "/targets-cross/aarch64-cc";
  char *mk[] = {(char *)"mkdir", (char *)"-p", (char *)dir, NULL};
  FILE *f = pk_run_capture(ctx, mk, &out) == 0 ? fopen(cc, "w") : NULL;
  if (!f) {
    check(false, "cross_wrapper", cc);
    return;
  }
  fputs("#!/bin/sh\nexec clang --target=aarch64-linux-gnu \"$@\"\n", f);
  fclose(f);
  char *ch[] = {(char *)"chmod", (char *)"+x", (char *)cc, NULL};
  pk_run_capture(ctx, ch, &out);
  pk_target *t;
  if (pk_target_parse(ctx, "c -mcpu=cortex-a76", cc, &t) != PK_OK) {
    check(false, "cross_aarch64_parses", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  check(!strcmp(t->arch, "aarch64") && !t->native && t->vector_bytes == 16 && t->vector_regs == 32 &&
            pk_target_has(t, "asimd") && pk_target_has(t, "asimddp") && !pk_target_has(t, "avx") &&
            !strcmp(pk_target_cpu_option(ctx, t), "-mcpu=cortex-a76") && t->l1d_bytes == 0,
        "cross_aarch64_description", pk_target_describe(ctx, t));
  pk_cgen_c_options co = {.target = t};
  pk_cgen_unit *u = NULL;
  const pk_op_params mm = {2, {{2, {48, 40}, PKRT_DTYPE_F32}, {2, {40, 72}, PKRT_DTYPE_F32}}, {.groups = 0}};
  PK_ASSERT(pk_cgen_unit_new(ctx, &co, &u) == PK_OK);
  sample_space(ctx, t, op(ctx, PK_OP_MATMUL, &mm), "matmul 48x72x40 for aarch64 cortex-a76", u);
  char *src;
  check(pk_cgen_unit_source(u, &src) == PK_OK && strstr(src, "16-byte vectors") &&
            strstr(src, "PK_VEC_TYPE(f32, float, 4)") && !strstr(src, "PK_VEC_TYPE(f32, float, 8)"),
        "cross_aarch64_emits_neon_width", pk_ctx_error(ctx));
  pk_cgen_unit_free(u);
}

/* A build past its limit is killed, and the error names the kernel with the most code. */
static void test_time_limit(pk_ctx *ctx) {
  pk_target *t;
  PK_ASSERT(pk_target_native(ctx, &t) == PK_OK);
  /* a fresh cache: nothing may be found there, the compiler has to run */
  const char *dir = pk_sprintf(ctx, PK_TEST_CACHE_DIR "/targets-limit-%lld", (long long)pkrt_now_ns());
  pk_backend_options bo = {.cache_dir = dir, .build_timeout_s = 0.01, .kernel_objects = true};
  pk_backend *be;
  pk_cgen_unit *u = NULL;
  PK_ASSERT(pk_backend_new(ctx, t, &bo, &be) == PK_OK && pk_backend_unit_new(be, &u) == PK_OK);
  const pk_op_params small = {2, {{2, {4, 4}, PKRT_DTYPE_F32}, {2, {4, 4}, PKRT_DTYPE_F32}}, {.groups = 0}};
  const pk_op_params big = {2, {{2, {64, 64}, PKRT_DTYPE_F32}, {2, {64, 64}, PKRT_DTYPE_F32}}, {.groups = 0}};
  pk_lfunc *f0, *f1;
  PK_ASSERT(pk_sched_lower(ctx, op(ctx, PK_OP_MATMUL, &small), NULL, "k0", &f0) == PK_OK);
  PK_ASSERT(pk_sched_lower(ctx, op(ctx, PK_OP_MATMUL, &big), NULL, "k1", &f1) == PK_OK);
  /* the larger source: an unrolled inner loop */
  pk_te_program *pbig = op(ctx, PK_OP_MATMUL, &big);
  pk_schedule *sc = pk_sched_new(ctx, pbig);
  if (pk_sched_unroll(sc, "t2", "i1", 0) == PK_OK) {
    pk_status s = pk_sched_lower(ctx, pbig, sc, "k1", &f1);
    PK_ASSERT(s == PK_OK);
  }
  pk_ctx_clear_error(ctx);
  /* kernels build one by one: the message names the one that passed the limit, the first */
  PK_ASSERT(pk_cgen_unit_add(u, f1, "matmul(big)") == PK_OK);
  PK_ASSERT(pk_cgen_unit_add(u, f0, "matmul(small)") == PK_OK);
  pk_build_result r;
  pk_status s = pk_backend_build(be, u, &r);
  check(s == PK_ERR_BUILD && r.timed_out && strstr(pk_ctx_error(ctx), "time limit") &&
            strstr(pk_ctx_error(ctx), "k1 matmul(big)"),
        "build_time_limit_names_the_kernel", s == PK_OK ? "built within 10 ms" : pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  pk_cgen_unit_free(u);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_grammar(ctx);
  struct utsname un;
  /* the -march names are x86's; elsewhere the compiler refuses them, as it should */
  if (uname(&un) == 0 && !strcmp(un.machine, "x86_64")) test_widths(ctx);
  else printf("SKIP widths: not an x86-64 host\n");
  test_cross(ctx);
  test_time_limit(ctx);
  pk_ctx_free(ctx);
  if (failures) printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
