/* test_driver_strides.c — lowering with caller-given strides (pk_sched_lower_opts), which
 * the driver uses for a partial-channel weight's update kernel writing through a view of
 * the full weight: kernels built with strides read and write exactly the view's elements
 * (default and vectorized schedules, an offset into the buffer), leave every other element
 * alone, refuse dense buffers, and overlapping strides are refused at lowering. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"
#include "pk_schedule.h"

static int failures;

static void check(bool ok, const char *label, const char *why) {
  printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", label, ok ? "" : ": ", ok ? "" : why);
  failures += !ok;
}

/* Y = W - 0.5 * G over (4, 16); W and Y are views of (4, 40) buffers. */
static const char *program_text =
    "W = placeholder((4, 16), f32)\n"
    "G = placeholder((4, 16), f32)\n"
    "Y = compute((4, 16), (i, j) => W[i, j] - 0.5 * G[i, j])\n";

#define ROWS 4
#define COLS 16
#define FULL 40
#define W_OFF 3  /* elements */
#define Y_OFF 17

static void run_case(pk_ctx *ctx, pkrt_ctx *rt, pk_cc *cc, pk_te_program *prog, bool vectorize,
                     const char *label) {
  static const int64_t view_strides[2] = {FULL, 1};
  const int64_t *strides[3] = {view_strides, NULL, view_strides};
  pk_lower_options lo = {.nstrides = 3, .strides = strides};
  pk_schedule *s = NULL;
  if (vectorize) {
    s = pk_sched_new(ctx, prog);
    if (pk_sched_split(s, "t2", "i1", 8) != PK_OK || pk_sched_vectorize(s, "t2", "i1.i") != PK_OK) {
      check(false, label, pk_ctx_error(ctx));
      return;
    }
  }
  pk_lfunc *f;
  char *src;
  pk_cc_result r;
  pkrt_module *mod;
  if (pk_sched_lower_opts(ctx, prog, s, "k0", &lo, &f) != PK_OK || pk_cgen_c(ctx, &f, 1, &src) != PK_OK ||
      pk_cc_build(cc, src, &r) != PK_OK || pkrt_module_load_file(rt, r.so_path, &mod) != PKRT_OK) {
    check(false, label, pk_ctx_status(ctx) != PK_OK ? pk_ctx_error(ctx) : pkrt_ctx_error(rt));
    return;
  }
  const pkrt_kernel_desc *k = pkrt_module_find(mod, "k0");
  float wbuf[ROWS * FULL], g[ROWS * COLS], ybuf[ROWS * FULL];
  for (int i = 0; i < ROWS * FULL; i++) {
    wbuf[i] = (float)(i % 13) - 6.0f;
    ybuf[i] = 1000.0f + (float)i; /* sentinels: must survive outside the view */
  }
  for (int i = 0; i < ROWS * COLS; i++) g[i] = (float)(i % 7);
  static const int64_t shape[2] = {ROWS, COLS}, dense[2] = {COLS, 1};
  pkrt_buffer bufs[3] = {{wbuf, W_OFF, shape, view_strides, 2, PKRT_DTYPE_F32},
                         {g, 0, shape, dense, 2, PKRT_DTYPE_F32},
                         {ybuf, Y_OFF, shape, view_strides, 2, PKRT_DTYPE_F32}};
  int rc = k->fn(bufs, 3, NULL, 0, NULL, pkrt_ctx_exec(rt));
  bool ok = rc == PKRT_KERNEL_OK;
  bool *inside = calloc(ROWS * FULL, sizeof *inside);
  for (int i = 0; ok && i < ROWS; i++)
    for (int j = 0; j < COLS; j++) {
      int at = Y_OFF + i * FULL + j;
      inside[at] = true;
      float want = wbuf[W_OFF + i * FULL + j] - 0.5f * g[i * COLS + j];
      ok = ok && fabsf(ybuf[at] - want) <= 1e-6f * (1 + fabsf(want));
    }
  for (int i = 0; ok && i < ROWS * FULL; i++) ok = inside[i] || ybuf[i] == 1000.0f + (float)i;
  free(inside);
  check(ok, label, rc ? "kernel failed" : "wrong values or a write outside the view");

  /* The same kernel refuses dense buffers: strides are part of what it was built for. */
  pkrt_buffer dense_bufs[3] = {{g, 0, shape, dense, 2, PKRT_DTYPE_F32},
                               {g, 0, shape, dense, 2, PKRT_DTYPE_F32},
                               {ybuf, 0, shape, dense, 2, PKRT_DTYPE_F32}};
  check(k->fn(dense_bufs, 3, NULL, 0, NULL, pkrt_ctx_exec(rt)) == PKRT_KERNEL_BAD_ARGS,
        vectorize ? "strided_vector_refuses_dense" : "strided_refuses_dense", "accepted dense buffers");
  pkrt_module_free(mod);
}

static void bad_strides(pk_ctx *ctx, pk_te_program *prog) {
  static const int64_t overlap[2] = {8, 1}, zero[2] = {0, 1}, fine[2] = {1, 4};
  struct { const char *label; const int64_t *st; bool ok; } cases[] = {
      {"strides_overlap_refused", overlap, false},
      {"strides_zero_refused", zero, false},
      {"strides_column_major_ok", fine, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int64_t *strides[3] = {NULL, NULL, cases[i].st};
    pk_lower_options lo = {.nstrides = 3, .strides = strides};
    pk_lfunc *f;
    pk_status s = pk_sched_lower_opts(ctx, prog, NULL, "k0", &lo, &f);
    bool ok = cases[i].ok ? s == PK_OK : s == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), "t2");
    check(ok, cases[i].label, s == PK_OK ? "lowered" : pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
  }
  const int64_t *strides[2] = {NULL, NULL};
  pk_lower_options lo = {.nstrides = 2, .strides = strides};
  pk_lfunc *f;
  check(pk_sched_lower_opts(ctx, prog, NULL, "k0", &lo, &f) == PK_ERR_CHECK, "strides_count_checked",
        "a short strides array was accepted");
  pk_ctx_clear_error(ctx);
  /* NULL options are exactly pk_sched_lower. */
  pk_lfunc *a, *b;
  bool same = pk_sched_lower_opts(ctx, prog, NULL, "k0", NULL, &a) == PK_OK &&
              pk_sched_lower(ctx, prog, NULL, "k0", &b) == PK_OK &&
              !strcmp(pk_lfunc_print(ctx, a), pk_lfunc_print(ctx, b));
  check(same, "null_options_is_plain_lowering", "different loop IR");
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_te_program *prog;
  pk_cc *cc;
  if (pk_te_parse(ctx, program_text, strlen(program_text), "strided.te", &prog) != PK_OK ||
      pk_cc_new(ctx, NULL, &cc) != PK_OK) {
    printf("FAIL setup: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  run_case(ctx, rt, cc, prog, false, "strided_view_default");
  run_case(ctx, rt, cc, prog, true, "strided_view_vectorized");
  bad_strides(ctx, prog);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  printf("%s\n", failures ? "FAILED" : "OK");
  return failures != 0;
}
